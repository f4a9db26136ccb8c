/* step.c: one decode step as an event-driven task graph; see step.h.
 *
 * Each micro-batch walks its layers in order; the only cross-layer shortcut is
 * IndexShare prefetch (a group's fetches are queued when its first layer's
 * indexer finishes). Per step there are O(layers x micro-batches) events, so
 * the engine's cost is independent of k and of the context length. */
#include "sim/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EV_IDX = 1, EV_FETCH, EV_COMP };

double step_indexer_s(const step_ctx *cx, const step_mb *m, uint32_t l)
{
    const model_kind *k = &cx->model->layer[l];
    int32_t g = cx->model->layer_group[l];
    if (k->select != MODEL_SELECT_OWN || m->n_req <= 0) return 0;
    double rows = m->idx_rows[g];
    double bytes = rows * k->indexer_key_bytes;
    /* Keys are read once per request and shared by its query tokens; FLOPs
     * scale with the queries (the micro-batch's mean per request). The top-k runs one
     * block per request and query token, each over a request's scores (its indexed rows)
     * selecting the group's k. */
    double queries = m->tokens / m->n_req;
    double flops = 2.0 * queries * rows * k->indexer_heads * k->indexer_dim;
    return cost_indexer_time(&cx->hw->cost, bytes, flops, m->tokens, m->idx_rows[g] / m->n_req, cx->model->group[g].k,
                             cx->compute_sms);
}

/* Group g's fetch launches per layer (the misses, and a verification's staged rows when it has
 * any; a launch without rows is left out): rows, pages and regions of each; returns how many. */
static int fetch_launches(const step_mb *m, int32_t g, double rows[2], double pages[2], double regions[2])
{
    const double st = m->stage && m->stage[g] > 0 ? m->stage[g] : 0;
    int n = 0;
    if (m->miss[g] - st > 0) {
        rows[n] = m->miss[g] - st;
        pages[n] = m->pages[g];
        regions[n++] = m->regions ? m->regions[g] : 0;
    }
    if (st > 0) {
        rows[n] = st;
        pages[n] = m->stage_pages[g];
        regions[n++] = m->stage_regions[g];
    }
    return n;
}

/* step_fetch_s, and in *weight (when not NULL) the fetch's weight under compute_interference:
 * its launches' beside_slowdown at their densities, weighted by their times (hw.h). */
static double fetch_cost(const step_ctx *cx, const step_mb *m, uint32_t l, double *bytes, double *weight)
{
    const model_kind *k = &cx->model->layer[l];
    int32_t g = cx->model->layer_group[l];
    *bytes = 0;
    if (weight) *weight = 0;
    if (g < 0 || !k->kv_own || m->miss[g] <= 0) return 0;
    *bytes = m->miss[g] * k->row_bytes;
    double rows[2], pages[2], regions[2], t = 0, ts = 0;
    for (int i = 0, n = fetch_launches(m, g, rows, pages, regions); i < n; i++) {
        const double d = cost_fetch_time(&cx->hw->cost.fetch, rows[i], k->row_bytes, pages[i], regions[i], cx->hw->fetch_sms);
        t += d;
        if (weight) ts += d * cost_fetch_beside(&cx->hw->cost.fetch, rows[i], regions[i]);
    }
    if (weight && t > 0) *weight = ts / t;
    return t;
}

double step_fetch_s(const step_ctx *cx, const step_mb *m, uint32_t l, double *bytes)
{
    return fetch_cost(cx, m, l, bytes, NULL);
}

double step_compute_s(const step_ctx *cx, const step_mb *m, uint32_t l)
{
    const model_cfg *md = cx->model;
    const model_kind *k = &md->layer[l];
    int32_t g = md->layer_group[l];
    if (m->n_req <= 0) return 0;
    double rows = g < 0 ? m->window_rows : m->sel[g];
    double attn_bytes = rows * k->row_bytes;
    double attn_flops = 2.0 * k->attn_heads * rows * (k->attn_qk_dim + k->attn_v_dim);
    double t = cost_attention_time(&cx->hw->cost, attn_bytes, attn_flops, k->attn_fp8, cx->compute_sms);
    /* Projections and MLP: every layer reads its dense weights; an MoE layer also
     * reads each local expert that at least one token of the whole instance routes
     * to: 1 - (1 - e/E)^T of them for T tokens across the data-parallel ranks. */
    double w_bytes = cx->dense_bytes_per_layer;
    if (k->moe && md->experts > 0) {
        double global_tokens = m->tokens * cx->attention_dp;
        double local = md->experts / cx->moe_ep;
        double touched = local * -expm1(global_tokens * log1p(-md->experts_per_token / md->experts));
        w_bytes += touched * md->expert_bytes;
    }
    double flops = 2.0 * md->active_params / md->n_layers * m->tokens;
    t += cost_gemm_time(&cx->hw->cost, w_bytes, flops, cx->compute_sms);
    if (k->moe) {
        /* Expert-parallel dispatch and combine, one message per token and destination GPU. */
        const double msg[2] = { md->moe_dispatch_bytes, md->moe_combine_bytes };
        t = cost_a2a_add(t, cx->a2a_lat_s, cx->a2a_gbps, cx->a2a_ranks_per_token, m->tokens, msg);
    }
    return t;
}

double step_estimate_s(const step_ctx *cx, const step_mb *m)
{
    double t = cx->pre_s;
    for (uint32_t l = 0; l < cx->model->n_layers; l++) t += step_indexer_s(cx, m, l) + step_compute_s(cx, m, l);
    return t;
}

typedef struct {
    uint32_t layer;        /* the layer being worked on */
    int idx_done, comp_running;
    uint8_t *fetch_done;   /* [layers] */
    double *fetch_w;       /* [layers] each queued fetch's weight under compute_interference */
    int done;
} mb_state;

/* The weight of a queued fetch (micro-batch a, layer b), set when it was queued; ctx is the
 * micro-batches' states. */
static double fetch_weight(const void *ctx, uint32_t a, uint32_t b) { return ((const mb_state *)ctx)[a].fetch_w[b]; }

/* A compute task of d seconds of micro-batch mi (s = its state in the step's array) submitted at now, run beside the
 * fetch queue (h2d) where they overlap (hw.h): the task lengthens by hw.fetch_interference x
 * the time the fetch queue stays busy into it, and the queued fetch work inside the task's
 * span by hw.compute_interference x each fetch's beside_slowdown x its own time there (the
 * fetch events move later, evq_stretch_weighted). Returns the task's length. */
static double beside_fetch(const step_ctx *cx, const mb_state *s, uint32_t mi, const res_server *gpu, res_server *h2d,
                           evq *q, step_stats *st, double now, double d)
{
    if (!h2d) return d;
    double start = gpu->free_at > now ? gpu->free_at : now, overlap = h2d->free_at - start;
    if (overlap <= 0) return d;
    d = cost_compute_beside(&cx->hw->cost.inter, d, overlap);
    double beta = cx->hw->cost.inter.compute;
    if (beta > 0) {
        double push = evq_stretch_weighted(q, EV_FETCH, start, d, beta, fetch_weight, s - mi);
        h2d->free_at += push;
        h2d->busy += push;
        st->fetch_busy += push;
    }
    return d;
}

/* The inputs of layer l's fitted compute costs, against the fitted ranges: the attention's
 * selected-row bytes and queries, the GEMMs' tokens. */
static void note_compute_inputs(const step_ctx *cx, const step_mb *m, uint32_t l, step_stats *st)
{
    const model_kind *k = &cx->model->layer[l];
    int32_t g = cx->model->layer_group[l];
    hw_range_note(cx->hw, &st->ranges, HW_FIT_ATTN_BYTES, (g < 0 ? m->window_rows : m->sel[g]) * k->row_bytes);
    hw_range_note(cx->hw, &st->ranges, HW_FIT_ATTN_BATCH, m->tokens);
    hw_range_note(cx->hw, &st->ranges, HW_FIT_GEMM_M, m->tokens);
}

static void try_compute(const step_ctx *cx, const step_mb *m, mb_state *s, uint32_t mi, double now,
                        res_server *gpu, res_server *h2d, evq *q, step_stats *st)
{
    uint32_t l = s->layer;
    if (s->comp_running || !s->idx_done || !s->fetch_done[l]) return;
    note_compute_inputs(cx, m, l, st);
    double d = beside_fetch(cx, s, mi, gpu, h2d, q, st, now, step_compute_s(cx, m, l));
    double end = res_submit(gpu, now, d, 0);
    st->compute_busy += d;
    s->comp_running = 1;
    evq_push(q, end, EV_COMP, mi, l);
}

static void submit_group_fetches(const step_ctx *cx, const step_mb *m, mb_state *s, uint32_t mi,
                                 uint32_t l, double now, res_server *h2d, evq *q, step_stats *st)
{
    const model_cfg *md = cx->model;
    int32_t g = md->layer_group[l];
    for (uint32_t j = l; j < md->n_layers; j++) {
        if (md->layer_group[j] != g) continue;
        if (j > l && md->layer[j].select == MODEL_SELECT_OWN) break;
        double bytes, d = fetch_cost(cx, m, j, &bytes, &s->fetch_w[j]);
        if (d <= 0) { s->fetch_done[j] = 1; continue; }
        /* The inputs of the gather's cost tables, against the fitted ranges. */
        hw_range_note(cx->hw, &st->ranges, HW_FIT_FETCH_ROW_BYTES, md->layer[j].row_bytes);
        double rows[2], pages[2], regions[2];
        for (int i = 0, n = fetch_launches(m, g, rows, pages, regions); i < n; i++) {
            hw_range_note(cx->hw, &st->ranges, HW_FIT_FETCH_ROWS, rows[i]);
            hw_range_note(cx->hw, &st->ranges, HW_FIT_FETCH_PAGES, pages[i]);
            if (cx->hw->cost.fetch.density.n && regions[i] > 0)
                hw_range_note(cx->hw, &st->ranges, HW_FIT_FETCH_DENSITY, rows[i] / regions[i]);
        }
        hw_range_note(cx->hw, &st->ranges, HW_FIT_FETCH_SMS, cx->hw->fetch_sms);
        if (cx->pool_bytes > 0) hw_range_note(cx->hw, &st->ranges, HW_FIT_FETCH_POOL_BYTES, cx->pool_bytes);
        double end = res_submit(h2d, now, d, bytes);
        st->fetch_busy += d;
        st->fetch_bytes += bytes;
        evq_push(q, end, EV_FETCH, mi, j);
    }
}

static void start_layer(const step_ctx *cx, const step_mb *m, mb_state *s, uint32_t mi, double now,
                        res_server *gpu, res_server *h2d, evq *q, step_stats *st)
{
    const model_cfg *md = cx->model;
    uint32_t l = s->layer;
    s->comp_running = 0;
    if (md->layer_group[l] < 0) {            /* window layer: nothing to select or fetch */
        s->fetch_done[l] = 1;
        s->idx_done = 1;
    } else if (md->layer[l].select == MODEL_SELECT_OWN) {
        s->idx_done = 0;
        const int32_t g = md->layer_group[l];
        hw_range_note(cx->hw, &st->ranges, HW_FIT_IDX_CTX, m->idx_rows[g] / m->n_req);
        hw_range_note(cx->hw, &st->ranges, HW_FIT_IDX_BATCH, m->n_req);
        hw_range_note(cx->hw, &st->ranges, HW_FIT_IDX_QUERIES, m->tokens / m->n_req);
        if (cx->hw->cost.topk.slots > 0) {
            const double rows = m->idx_rows[g] / m->n_req, k = md->group[g].k;
            hw_range_note(cx->hw, &st->ranges, HW_FIT_TOPK_BATCH, m->tokens);
            hw_range_note(cx->hw, &st->ranges, HW_FIT_TOPK_CTX, rows);
            hw_range_note(cx->hw, &st->ranges, HW_FIT_TOPK_K, k < rows ? k : rows);
        }
        double d = beside_fetch(cx, s, mi, gpu, h2d, q, st, now, step_indexer_s(cx, m, l));
        double end = res_submit(gpu, now, d, 0);
        st->compute_busy += d;
        evq_push(q, end, EV_IDX, mi, l);
        return;
    } else {
        s->idx_done = 1;
    }
    try_compute(cx, m, s, mi, now, gpu, h2d, q, st);
}

double step_run(const step_ctx *cx, const step_mb *mb, uint32_t n_mb, double t0,
                res_server *gpu, res_server *h2d, res_server *d2h, evq *q, step_stats *st)
{
    const model_cfg *md = cx->model;
    mb_state *s = calloc(n_mb, sizeof *s);
    uint8_t *flags = calloc((size_t)n_mb * md->n_layers, 1);
    double *weights = calloc((size_t)n_mb * md->n_layers, sizeof *weights);
    if (!s || !flags || !weights) abort();
    uint32_t running = 0;
    for (uint32_t i = 0; i < n_mb; i++) {
        s[i].fetch_done = flags + (size_t)i * md->n_layers;
        s[i].fetch_w = weights + (size_t)i * md->n_layers;
        if (mb[i].n_req <= 0) { s[i].done = 1; continue; }
        running++;
    }
    double end = t0;
    if (cx->pre_s > 0 && running) {
        /* The draft pass runs on the compute server before the verification's
         * layers; FIFO service makes every layer task wait for it. */
        res_submit(gpu, t0, cx->pre_s, 0);
        st->compute_busy += cx->pre_s;
        st->pre_busy += cx->pre_s;
    }
    for (uint32_t i = 0; i < n_mb; i++)
        if (!s[i].done) start_layer(cx, &mb[i], &s[i], i, t0, gpu, h2d, q, st);
    evq_event e;
    while (running && evq_pop(q, &e)) {
        st->events++;
        mb_state *ms = &s[e.a];
        const step_mb *m = &mb[e.a];
        switch (e.kind) {
        case EV_IDX:
            ms->idx_done = 1;
            submit_group_fetches(cx, m, ms, e.a, e.b, e.time, h2d, q, st);
            try_compute(cx, m, ms, e.a, e.time, gpu, h2d, q, st);
            break;
        case EV_FETCH:
            ms->fetch_done[e.b] = 1;
            if (ms->layer == e.b) try_compute(cx, m, ms, e.a, e.time, gpu, h2d, q, st);
            break;
        case EV_COMP: {
            int32_t g = md->layer_group[e.b];
            const model_kind *k = &md->layer[e.b];
            if (g >= 0 && k->kv_own && m->written[g] > 0) {
                /* Write-through of the new rows: off the critical path. */
                double bytes = m->written[g] * k->row_bytes;
                double d = bytes / cx->hw->d2h_bw;
                res_submit(d2h, e.time, d, bytes);
                st->write_busy += d;
                st->write_bytes += bytes;
            }
            if (e.b + 1 < md->n_layers) {
                ms->layer = e.b + 1;
                start_layer(cx, m, ms, e.a, e.time, gpu, h2d, q, st);
            } else {
                ms->done = 1;
                running--;
                if (e.time > end) end = e.time;
            }
            break;
        }
        }
    }
    free(flags);
    free(weights);
    free(s);
    return end;
}
