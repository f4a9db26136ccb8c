/* step.c: one decode step as an event-driven task graph; see step.h.
 *
 * Each micro-batch walks its layers in order; the only cross-layer shortcut is
 * IndexShare prefetch (a group's fetches are queued when its first layer's
 * indexer finishes). Per step there are O(layers x micro-batches) events, so
 * the engine's cost is independent of k and of the context length. */
#include "sim/step.h"
#include "common/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EV_IDX = 1, EV_FETCH, EV_COMP, EV_MAIN_FETCH };

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
static double fetch_cost_sms(const step_ctx *cx, const step_mb *m, uint32_t l, double *bytes, double *weight,
                             double sms, int slope);

/* slope: the other plausible extrapolation, for the report (step_stats.fetch_slope_delta): the
 * tables' end slopes carried on, or the fitted form's inputs held at their fitted ranges. */
static double fetch_cost(const step_ctx *cx, const step_mb *m, uint32_t l, double *bytes, double *weight, int slope)
{
    return fetch_cost_sms(cx, m, l, bytes, weight, cx->hw->fetch_sms, slope);
}

/* The same with sms SMs (fetch_main: one block per request). */
static double fetch_cost_sms(const step_ctx *cx, const step_mb *m, uint32_t l, double *bytes, double *weight,
                             double sms, int slope)
{
    const model_kind *k = &cx->model->layer[l];
    int32_t g = cx->model->layer_group[l];
    *bytes = 0;
    if (weight) *weight = 0;
    if (g < 0 || !k->kv_own || m->miss[g] <= 0) return 0;
    *bytes = m->miss[g] * k->row_bytes;
    double rows[2], pages[2], regions[2], t = 0, ts = 0;
    for (int i = 0, n = fetch_launches(m, g, rows, pages, regions); i < n; i++) {
        double d;
        if (!slope) d = cost_fetch_time(&cx->hw->cost.fetch, rows[i], k->row_bytes, pages[i], regions[i], sms, cx->pool_bytes);
        else if (cx->hw->cost.fetch.form != COST_FITTED)
            d = cost_fetch_time_slope(&cx->hw->cost.fetch, rows[i], k->row_bytes, pages[i], regions[i], sms, cx->pool_bytes);
        else {
            /* The fitted form with its inputs held at the fitted range's ends. */
            const hw_profile *hw = cx->hw;
            const double r = hw_fit_clamp(hw, HW_FIT_FETCH_ROWS, rows[i]);
            const double rho = regions[i] > 0 ? hw_fit_clamp(hw, HW_FIT_FETCH_DENSITY, rows[i] / regions[i]) : 1;
            d = rows[i] / r * cost_fetch_time(&hw->cost.fetch, r, hw_fit_clamp(hw, HW_FIT_FETCH_ROW_BYTES, k->row_bytes),
                                             hw_fit_clamp(hw, HW_FIT_FETCH_PAGES, pages[i]), r / rho,
                                             hw_fit_clamp(hw, HW_FIT_FETCH_SMS, sms),
                                             hw_fit_clamp(hw, HW_FIT_FETCH_POOL_BYTES, cx->pool_bytes));
        }
        t += d;
        if (weight) ts += d * cost_fetch_beside(&cx->hw->cost.fetch, rows[i], regions[i]);
    }
    if (weight && t > 0) *weight = ts / t;
    return t;
}

double step_fetch_s(const step_ctx *cx, const step_mb *m, uint32_t l, double *bytes)
{
    return fetch_cost(cx, m, l, bytes, NULL, 0);
}

double step_compute_s(const step_ctx *cx, const step_mb *m, uint32_t l)
{
    const model_cfg *md = cx->model;
    const model_kind *k = &md->layer[l];
    int32_t g = md->layer_group[l];
    if (m->n_req <= 0) return 0;
    double rows = step_attn_rows(k, g, m);
    double attn_bytes = rows * k->row_bytes;
    double attn_flops = 2.0 * k->attn_heads * rows * (k->attn_qk_dim + k->attn_v_dim);
    /* Tensor-parallel attention (tp.h): the heads and the projections' FLOPs split over the
     * ranks, the latent rows (shared by every head) read whole by each. */
    const int tp = cx->tp.ranks > 1;
    if (tp) attn_flops /= cx->tp.ranks;
    double t = cost_attention_time(&cx->hw->cost, attn_bytes, attn_flops, m->tokens, k->attn_fp8, cx->compute_sms);
    /* Projections and MLP: every layer reads its dense weights; an MoE layer also
     * reads each local expert that at least one token of the whole instance routes
     * to: 1 - (1 - e/E)^T of them for T tokens across the data-parallel ranks. */
    double w_bytes = cx->dense_bytes_per_layer;
    const int moe_tp = cx->moe_tp > 1;
    if (k->moe && md->experts > 0 && moe_tp) {
        /* Tensor-parallel MoE (cost.h moe_tp): every GPU runs the group's tokens (under DP
         * attention the batch gathered from every rank) through 1 / moe_tp of each expert they
         * route to. FLOPs: the layer's per-token FLOPs over this GPU's tokens, as below, which
         * is the gathered batch's routed FLOPs / moe_tp since attention_dp x attn_tp = moe_tp
         * (sim.c checks it). */
        if (cx->moe_fm.n_points == 0)
            w_bytes += cost_moe_tp_weight_bytes(md->experts, md->experts_per_token, m->tokens * cx->attention_dp,
                                                md->expert_bytes, cx->moe_tp);
    } else if (k->moe && md->experts > 0) {
        double global_tokens = m->tokens * cx->attention_dp;
        double local = md->experts / cx->moe_ep;
        double touched = local * -expm1(global_tokens * log1p(-md->experts_per_token / md->experts));
        w_bytes += touched * md->expert_bytes;
    }
    double flops = 2.0 * md->active_params / md->n_layers * m->tokens;
    const int fm = k->moe && md->experts > 0 && moe_tp && cx->moe_fm.n_points > 0;
    if (fm) {
        /* The routed experts from the measured table (fmoe.h) at the MoE's tokens on this GPU,
         * the gathered batch: their FLOPs leave the GEMM form, which keeps the dense weights
         * and the shared expert (their parameters a token: experts_per_token x expert_bytes,
         * one byte an FP8 parameter; sim.c checks the layer's average holds them). */
        flops = 2.0 * (md->active_params / md->n_layers - md->experts_per_token * md->expert_bytes) * m->tokens;
    }
    if (tp) flops /= cx->tp.ranks;
    t += cost_gemm_time(&cx->hw->cost, w_bytes, flops, 1, cx->compute_sms);
    if (fm) {
        /* the table holds the routed experts' own launches: their share of the fixed cost out */
        t -= cost_gemm_fixed_share_s(&cx->hw->cost, cx->moe_fm.fixed_share);
        t += fmoe_time_s(&cx->moe_fm, m->tokens * cx->attention_dp);
    }
    /* The row-parallel output projection's all-reduce of the group's BF16 hidden states. */
    if (tp) t += tp_allreduce_s(&cx->tp, m->tokens * md->hidden * 2.0);
    if (k->moe && moe_tp) {
        /* SGLang's TP MoE (sgl-project/sglang at 00161092 and 0090b34c; the deployments ran
         * v0.5.12.post1, whose files were not re-read): GLM-5 is GlmMoeDsaForCausalLM, a
         * DeepseekV2ForCausalLM (python/sglang/srt/models/glm4_moe.py), whose decoder layer's
         * LayerCommunicator has allow_reduce_scatter=True. With no a2a backend the sparse
         * layer's MLP mode is FULL (layers/communicator.py sparse_mlp_scatter_mode). Under DP
         * attention prepare_mlp gathers
         * the ranks' tokens (dp_gather_partial, layers/dp_attention.py _dp_gather): a decode
         * step pads to the longest rank (DpPaddingMode.get_dp_padding_mode: MAX_LEN when
         * 2 x sum >= max x ranks, and MAX_LEN in CUDA graphs), an all_gather_into_tensor over
         * the TP group; DeepseekV2MoE.forward_normal computes the shared expert (TP-split
         * without DeepEP) and the routed experts on the gathered batch and skips its
         * tensor_model_parallel_all_reduce (use_reduce_scatter: should_use_reduce_scatter is
         * true under MAX_LEN), and postprocess_layer's dp_reduce_scatter_tensor sums and
         * scatters in one reduce_scatter_tensor (tp_size = attn_dp_size). Under TP attention
         * the tokens are already whole on every rank and the MoE's output is all-reduced.
         * Both through NCCL and the custom all-reduce of the TP group: the instance names the
         * curve (moe_tp_allreduce_curve). */
        const double bytes = m->tokens * cx->attention_dp * md->hidden * 2.0;
        t += cost_moe_tp_allreduces(cx->attention_dp, 0) * tp_allreduce_s(&cx->moe_ar, bytes);
    } else if (k->moe) {
        /* Expert-parallel dispatch and combine, one message per token and destination GPU.
         * Under TP attention each rank dispatches its 1/tp share of the group's tokens (SGLang
         * scatters them over the attention TP ranks before a DeepEP MoE). */
        const double msg[2] = { md->moe_dispatch_bytes, md->moe_combine_bytes };
        t = cost_a2a_add(t, cx->a2a_lat_s, cx->a2a_gbps, cx->a2a_ranks_per_token,
                         tp ? m->tokens / cx->tp.ranks : m->tokens, msg);
        /* Every rank waits for the slowest at the dispatch and the combine. */
        if (cx->straggler_factor > 1) t *= cx->straggler_factor;
    } else if (k->mlp_params > 0 && cx->dense_mlp_tp > 1) {
        /* DP attention around a tensor-parallel MLP: the MLP group's hidden states gathered
         * before it and scattered after (BF16, hidden x 2 bytes a token). */
        double b = m->tokens * cx->dense_mlp_tp * md->hidden * 2;
        t += 2 * cost_collective_time(cx->dp_gather_lat_s, cx->dp_gather_gbps, b, cx->dense_mlp_tp);
    }
    if (l + 1 == md->n_layers) t += step_tail_s(cx, m);
    return t;
}

double step_attn_rows(const model_kind *k, int32_t g, const step_mb *m)
{
    if (k->select == MODEL_SELECT_DENSE) return m->ctx_tokens / k->compress + (k->window ? m->window_rows : 0);
    if (g < 0) return m->window_rows;
    return m->sel[g] + (k->window ? m->window_rows : 0);
}

double step_tail_s(const step_ctx *cx, const step_mb *m)
{
    const model_cfg *md = cx->model;
    double t = cx->sampling_s;
    if (cx->lm_head_bytes > 0 && m->tokens > 0) {
        /* The vocabulary-parallel LM head: the group's hidden states gathered, this GPU's
         * shard of the vocabulary over all of them, the logits gathered back (BF16). */
        double tp = cx->lm_head_tp, tok = m->tokens * tp;
        double flops = 2.0 * tok * md->hidden * (md->lm_head_params / md->hidden) / tp;
        t += cost_gemm_time(&cx->hw->cost, cx->lm_head_bytes, flops, 1, cx->compute_sms);
        t += cost_collective_time(cx->dp_gather_lat_s, cx->dp_gather_gbps, tok * md->hidden * 2, tp);
        t += cost_collective_time(cx->dp_gather_lat_s, cx->dp_gather_gbps, tok * (md->lm_head_params / md->hidden) * 2, tp);
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
    int done;
} mb_state;

/* One step in progress: what its task handlers share. */
typedef struct {
    const step_ctx *cx;
    const step_mb *mb;     /* [n_mb] */
    mb_state *s;           /* [n_mb] */
    res_server *gpu, *h2d, *d2h;
    evq *q;
    step_stats *st;
} step_state;

/* A compute task of d seconds submitted at now, run beside the fetch path where they overlap
 * (sim/cost.h: interference): the task lengthens by the fetch's interference over the time
 * the fetch path stays busy into it, and the fetch path re-rates its work in flight inside
 * the task's span (res_slow). Returns the task's length. */
static double beside_fetch(step_state *r, double now, double d)
{
    if (!r->h2d) return d;
    const cost_interference *in = &r->cx->hw->cost.inter;
    double start = res_start_at(r->gpu, now), overlap = r->h2d->free_at - start;
    if (overlap <= 0) return d;
    d = cost_compute_beside(in, d, overlap);
    if (in->compute > 0) r->st->fetch_busy += res_slow(r->h2d, r->q, start, d, in->compute);
    return d;
}

/* The inputs of layer l's fitted compute costs, against the fitted ranges: the attention's
 * selected-row bytes and queries, the GEMMs' tokens. */
static void note_compute_inputs(const step_ctx *cx, const step_mb *m, uint32_t l, step_stats *st)
{
    const model_kind *k = &cx->model->layer[l];
    int32_t g = cx->model->layer_group[l];
    hw_range_note(cx->hw, &st->ranges, HW_FIT_ATTN_BYTES, step_attn_rows(k, g, m) * k->row_bytes);
    hw_range_note(cx->hw, &st->ranges, HW_FIT_ATTN_BATCH, m->tokens);
    hw_range_note(cx->hw, &st->ranges, HW_FIT_GEMM_M, m->tokens);
    /* A TP MoE's routed experts: the gathered tokens against the measured table's M (fmoe.h
     * extends its end segments' lines beyond them). */
    const fmoe_curve *fm = &cx->moe_fm;
    if (k->moe && cx->model->experts > 0 && cx->moe_tp > 1 && fm->n_points > 0)
        hw_range_note_span(&st->ranges, HW_FIT_MOE_TP_M, fm->m[0], fm->m[fm->n_points - 1],
                           m->tokens * cx->attention_dp);
}

/* The inputs of micro-batch m's fetch of layer j (group g) against the fitted ranges. */
static void note_fetch_inputs(const step_ctx *cx, const step_mb *m, uint32_t j, int32_t g, step_stats *st)
{
    const hw_profile *hw = cx->hw;
    hw_range_note(hw, &st->ranges, HW_FIT_FETCH_ROW_BYTES, cx->model->layer[j].row_bytes);
    double rows[2], pages[2], regions[2];
    for (int i = 0, n = fetch_launches(m, g, rows, pages, regions); i < n; i++) {
        hw_range_note(hw, &st->ranges, HW_FIT_FETCH_ROWS, rows[i]);
        hw_range_note(hw, &st->ranges, HW_FIT_FETCH_PAGES, pages[i]);
        if (hw->cost.fetch.form == COST_FITTED && hw->cost.fetch.fit.density > 0 && regions[i] > 0)
            hw_range_note(hw, &st->ranges, HW_FIT_FETCH_DENSITY, rows[i] / regions[i]);
    }
    hw_range_note(hw, &st->ranges, HW_FIT_FETCH_SMS, hw->fetch_sms);
    if (cx->pool_bytes > 0) hw_range_note(hw, &st->ranges, HW_FIT_FETCH_POOL_BYTES, cx->pool_bytes);
}

/* The inputs of micro-batch m's indexer and top-k of group g against the fitted ranges. */
static void note_indexer_inputs(const step_ctx *cx, const step_mb *m, int32_t g, step_stats *st)
{
    hw_range_note(cx->hw, &st->ranges, HW_FIT_IDX_CTX, m->idx_rows[g] / m->n_req);
    hw_range_note(cx->hw, &st->ranges, HW_FIT_IDX_BATCH, m->n_req);
    hw_range_note(cx->hw, &st->ranges, HW_FIT_IDX_QUERIES, m->tokens / m->n_req);
    if (cx->hw->cost.topk.slots > 0) {
        const double rows = m->idx_rows[g] / m->n_req, k = cx->model->group[g].k;
        hw_range_note(cx->hw, &st->ranges, HW_FIT_TOPK_BATCH, m->tokens);
        hw_range_note(cx->hw, &st->ranges, HW_FIT_TOPK_CTX, rows);
        hw_range_note(cx->hw, &st->ranges, HW_FIT_TOPK_K, k < rows ? k : rows);
    }
}

/* A task of d seconds of micro-batch mi on the compute server, beside the fetch path, its
 * completion the event (kind, mi, l). */
static void submit_compute(step_state *r, uint32_t mi, uint32_t l, double now, double d, uint32_t kind)
{
    d = beside_fetch(r, now, d);
    double end = res_submit(r->gpu, now, d, 0);
    r->st->compute_busy += d;
    evq_push(r->q, end, kind, mi, l);
}

static void try_compute(step_state *r, uint32_t mi, double now)
{
    mb_state *s = &r->s[mi];
    uint32_t l = s->layer;
    if (s->comp_running || !s->idx_done || !s->fetch_done[l]) return;
    note_compute_inputs(r->cx, &r->mb[mi], l, r->st);
    submit_compute(r, mi, l, now, step_compute_s(r->cx, &r->mb[mi], l), EV_COMP);
    s->comp_running = 1;
}

/* IndexShare: once the group's selection is known (its first layer's indexer ran), every
 * layer of the group is fetched, each on the fetch path with its beside weight. */
static void submit_group_fetches(step_state *r, uint32_t mi, uint32_t l, double now)
{
    const step_ctx *cx = r->cx;
    const model_cfg *md = cx->model;
    const step_mb *m = &r->mb[mi];
    int32_t g = md->layer_group[l];
    for (uint32_t j = cx->fetch_main ? l + 1 : l; j < md->n_layers; j++) {
        if (md->layer_group[j] != g) continue;
        if (j > l && md->layer[j].select == MODEL_SELECT_OWN) break;
        double bytes, weight, d = fetch_cost(cx, m, j, &bytes, &weight, 0);
        if (d <= 0) { r->s[mi].fetch_done[j] = 1; continue; }
        note_fetch_inputs(cx, m, j, g, r->st);
        double b2;
        r->st->fetch_slope_delta += fetch_cost(cx, m, j, &b2, NULL, 1) - d;
        res_submit_event(r->h2d, r->q, now, d, bytes, weight, EV_FETCH, mi, j);
        r->st->fetch_busy += d;
        r->st->fetch_bytes += bytes;
    }
}

/* fetch_main: the selecting layer l's swap-in on the compute server, after its indexer and
 * before its attention (FIFO), one block per request. */
static void submit_main_fetch(step_state *r, uint32_t mi, uint32_t l, double now)
{
    const step_ctx *cx = r->cx;
    const step_mb *m = &r->mb[mi];
    const model_kind *k = &cx->model->layer[l];
    if (!k->kv_own || cx->model->layer_group[l] < 0) { r->s[mi].fetch_done[l] = 1; return; }
    double sms = m->n_req < cx->hw->sms ? m->n_req : cx->hw->sms, bytes;
    double d = fetch_cost_sms(cx, m, l, &bytes, NULL, sms, 0);
    /* Nothing missed: no swap-in task (a batch of resident requests runs SGLang's "resident"
     * graph, which has none; a hot buffer that hits every row is taken to cost nothing too). */
    if (d <= 0) { r->s[mi].fetch_done[l] = 1; return; }
    note_fetch_inputs(cx, m, l, cx->model->layer_group[l], r->st);
    double end = res_submit(r->gpu, now, d, 0);
    /* The rows still cross the host link: its byte count holds every fetched byte, whichever
     * stream issued the copy (its busy time only the fetch path's own work). */
    if (r->h2d) r->h2d->bytes += bytes;
    r->st->compute_busy += d;
    r->st->fetch_busy += d;
    r->st->fetch_bytes += bytes;
    evq_push(r->q, end, EV_MAIN_FETCH, mi, l);
}

static void start_layer(step_state *r, uint32_t mi, double now)
{
    const model_cfg *md = r->cx->model;
    mb_state *s = &r->s[mi];
    uint32_t l = s->layer;
    s->comp_running = 0;
    s->idx_done = 1;
    if (md->layer_group[l] < 0) {            /* window layer: nothing to select or fetch */
        s->fetch_done[l] = 1;
    } else if (md->layer[l].select == MODEL_SELECT_OWN) {
        s->idx_done = 0;
        note_indexer_inputs(r->cx, &r->mb[mi], md->layer_group[l], r->st);
        submit_compute(r, mi, l, now, step_indexer_s(r->cx, &r->mb[mi], l), EV_IDX);
        return;
    }
    try_compute(r, mi, now);
}

/* A layer's compute finished: its write-through (off the critical path), then the next
 * layer; returns 1 when it was the micro-batch's last. */
static int finish_layer(step_state *r, uint32_t mi, uint32_t l, double now)
{
    const model_cfg *md = r->cx->model;
    const step_mb *m = &r->mb[mi];
    int32_t g = md->layer_group[l];
    const model_kind *k = &md->layer[l];
    if (g >= 0 && k->kv_own && m->written[g] > 0) {
        double bytes = m->written[g] * k->row_bytes;
        double d = cost_writeback_time(bytes, r->cx->hw->d2h_bw);
        res_submit(r->d2h, now, d, bytes);
        r->st->write_busy += d;
        r->st->write_bytes += bytes;
    }
    if (l + 1 >= md->n_layers) return 1;
    r->s[mi].layer = l + 1;
    start_layer(r, mi, now);
    return 0;
}

double step_run(const step_ctx *cx, const step_mb *mb, uint32_t n_mb, double t0,
                res_server *gpu, res_server *h2d, res_server *d2h, evq *q, step_stats *st)
{
    const model_cfg *md = cx->model;
    mb_state *s = dh_calloc(n_mb, sizeof *s);
    uint8_t *flags = dh_calloc((size_t)n_mb * md->n_layers, 1);
    step_state r = { cx, mb, s, gpu, h2d, d2h, q, st };
    uint32_t running = 0;
    for (uint32_t i = 0; i < n_mb; i++) {
        s[i].fetch_done = flags + (size_t)i * md->n_layers;
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
        if (!s[i].done) start_layer(&r, i, t0);
    /* Each event is one task's end: O(layers x micro-batches) of them per step. */
    evq_event e;
    while (running && evq_pop(q, &e)) {
        st->events++;
        mb_state *ms = &s[e.a];
        switch (e.kind) {
        case EV_IDX:
            ms->idx_done = 1;
            if (cx->fetch_main) submit_main_fetch(&r, e.a, e.b, e.time);
            submit_group_fetches(&r, e.a, e.b, e.time);
            try_compute(&r, e.a, e.time);
            break;
        case EV_MAIN_FETCH:
            ms->fetch_done[e.b] = 1;
            if (ms->layer == e.b) try_compute(&r, e.a, e.time);
            break;
        case EV_FETCH:
            res_complete(h2d, &e);
            ms->fetch_done[e.b] = 1;
            if (ms->layer == e.b) try_compute(&r, e.a, e.time);
            break;
        case EV_COMP:
            if (finish_layer(&r, e.a, e.b, e.time)) {
                ms->done = 1;
                running--;
                if (e.time > end) end = e.time;
            }
            break;
        }
    }
    free(flags);
    free(s);
    return end;
}
