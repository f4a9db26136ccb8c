/* rp_host.c: selections and the simulator's hot buffers for the GPU replay; see rp_host.h. */
#include "kernels/replay/rp_host.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/hotbuf.h"
#include "sim/model.h"
#include "sim/pol.h"
#include "sim/spec.h"
#include "sim/specrun.h"
#include "sim/union.h"
#include "traces/gen.h"

#include <stdlib.h>
#include <string.h>

struct rp_host {
    model_cfg model;
    int model_loaded;
    trace_shape shape;
    sel_source *src;
    uint32_t R, G, k, steps, step;
    sel_stream **st;   /* [G * R] */
    hotbuf *buf;           /* [G * R] */
    int32_t *cur;      /* [G * R * k] full selection of each pair */
    uint32_t *ncur;    /* [G * R] its size */
    int32_t *tmp;      /* merge scratch, k + added */
    uint32_t *nrows_prev; /* [R] */
    /* Speculative steps: the simulator's streams, lookahead and union, the draft. */
    spec_draft *draft;
    uint32_t gamma;
    uint64_t seed;
    pol_stream *ps;        /* [G * R] */
    union_ahead *ahead;   /* [G * R] */
    union_set u;
    int u_init;
    uint32_t *sel_scratch; /* k + added: one query's set while it is built */
};

/* The hot buffer of pair p in either mode. */
static const hotbuf *pair_hb(const rp_host *h, size_t p) { return h->draft ? &h->ps[p].buf : &h->buf[p]; }

int rp_host_open(const rp_host_cfg *c, rp_host **out)
{
    *out = NULL;
    rp_host *h = calloc(1, sizeof *h);
    if (!h) abort();
    cfg *mc = NULL;
    gen_params *gp = NULL;
    if (cfg_load(c->model_path, &mc) < 0) goto fail;
    if (model_load(mc, &h->model) < 0) goto fail;
    h->model_loaded = 1;
    if (cfg_check_unused(mc) < 0) goto fail;
    cfg_free(mc);
    mc = NULL;
    if (model_shape(&h->model, &h->shape) < 0) goto fail;
    h->R = c->n_requests;
    h->G = h->shape.n_groups;
    h->k = h->shape.group_k[0];
    for (uint32_t g = 0; g < h->G; g++)
        if (h->shape.group_k[g] != h->k || h->shape.group_compress[g] != 1) {
            dh_err("model '%s': the replay needs one k and no compression in every group (group %u: k %u, compress %u)",
                   c->model_path, g, h->shape.group_k[g], h->shape.group_compress[g]);
            goto fail;
        }
    for (uint32_t l = 0; l < h->model.n_layers; l++)
        if (h->model.layer_group[l] < 0 || h->model.layer[l].row_bytes != h->model.layer[0].row_bytes) {
            dh_err("model '%s': the replay needs every layer to select (no window layers) with one row size", c->model_path);
            goto fail;
        }
    if (c->budget_rows < h->k) {
        dh_err("hot-buffer budget %u rows is below k = %u", c->budget_rows, h->k);
        goto fail;
    }
    if (c->prompt_len < h->k) {
        dh_err("prompt of %u tokens is shorter than k = %u: the replay needs full selections", c->prompt_len, h->k);
        goto fail;
    }
    const uint32_t out_len = c->output_len ? c->output_len : c->steps;
    if (out_len < c->steps) {
        dh_err("output length %u is below the %u steps", out_len, c->steps);
        goto fail;
    }
    h->shape.n_requests = h->R;
    h->shape.prompt_len = malloc(h->R * sizeof(uint32_t));
    h->shape.output_len = malloc(h->R * sizeof(uint32_t));
    if (!h->shape.prompt_len || !h->shape.output_len) abort();
    for (uint32_t r = 0; r < h->R; r++) h->shape.prompt_len[r] = c->prompt_len, h->shape.output_len[r] = out_len;
    if (trace_shape_validate(&h->shape) < 0) goto fail;
    if (gen_params_load(c->preset, &gp) < 0) goto fail;
    if (gen_source_new(gp, &h->shape, c->seed, c->keyframe_interval, &h->src) < 0) goto fail;
    gen_params_free(gp);
    gp = NULL;
    h->steps = c->steps;
    size_t P = (size_t)h->G * h->R;
    h->cur = malloc(P * h->k * sizeof *h->cur);
    h->ncur = calloc(P, sizeof *h->ncur);
    h->tmp = malloc(2 * (size_t)h->k * sizeof *h->tmp + 16);
    h->nrows_prev = calloc(h->R, sizeof *h->nrows_prev);
    if (!h->cur || !h->ncur || !h->tmp || !h->nrows_prev) abort();
    if (c->draft_path) {
        /* As bin/dhsim opens a hisparse request under speculation (sim.c): a live hot-buffer
         * stream of the fixed budget, and a lookahead of gamma + 1 positions. */
        if (spec_draft_load(c->draft_path, &h->draft) < 0) goto fail;
        if (h->draft->kind != SPEC_DFLASH2) {
            dh_err("draft '%s': the replay verifies DFlash2 drafts (gamma per step), not %s", c->draft_path,
                   spec_kind_name(h->draft->kind));
            goto fail;
        }
        if (strcmp(h->draft->target, h->model.name)) {
            dh_err("draft '%s' targets model '%s', not '%s'", c->draft_path, h->draft->target, h->model.name);
            goto fail;
        }
        h->gamma = h->draft->gamma;
        h->seed = c->seed;
        h->ps = calloc(P, sizeof *h->ps);
        h->ahead = calloc(P, sizeof *h->ahead);
        h->sel_scratch = malloc(2 * (size_t)h->k * sizeof *h->sel_scratch + 16);
        if (!h->ps || !h->ahead || !h->sel_scratch) abort();
        union_init(&h->u);
        h->u_init = 1;
        for (uint32_t g = 0; g < h->G; g++)
            for (uint32_t r = 0; r < h->R; r++) {
                size_t p = (size_t)g * h->R + r;
                union_ahead_init(&h->ahead[p], h->gamma + 1);
                if (pol_stream_open(&h->ps[p], POL_LIVE_LRU, h->src, &h->shape, r, g, c->budget_rows, 0, NULL, 0) < 0)
                    goto fail;
            }
        *out = h;
        return 0;
    }
    /* Plain steps: a stream and the simulator's hot buffer per pair. */
    h->st = calloc(P, sizeof *h->st);
    h->buf = calloc(P, sizeof *h->buf);
    if (!h->st || !h->buf) abort();
    for (uint32_t g = 0; g < h->G; g++)
        for (uint32_t r = 0; r < h->R; r++) {
            size_t p = (size_t)g * h->R + r;
            hotbuf_init(&h->buf[p], c->budget_rows);
            if (sel_open(h->src, r, g, &h->st[p]) < 0) goto fail;
        }
    *out = h;
    return 0;
fail:
    if (mc) cfg_free(mc);
    if (gp) gen_params_free(gp);
    rp_host_close(h);
    return -1;
}

void rp_host_close(rp_host *h)
{
    if (!h) return;
    size_t P = (size_t)h->G * h->R;
    if (h->st)
        for (size_t p = 0; p < P; p++) sel_close(h->st[p]);
    if (h->buf)
        for (size_t p = 0; p < P; p++) hotbuf_release(&h->buf[p]);
    if (h->ps)
        for (size_t p = 0; p < P; p++) pol_stream_close(&h->ps[p]);
    if (h->ahead)
        for (size_t p = 0; p < P; p++)
            if (h->ahead[p].q) union_ahead_release(&h->ahead[p]);
    if (h->u_init) union_release(&h->u);
    spec_draft_free(h->draft);
    free(h->ps); free(h->ahead); free(h->sel_scratch);
    sel_source_free(h->src);
    if (h->shape.layer_group) trace_shape_release(&h->shape);
    if (h->model_loaded) model_release(&h->model);
    free(h->st); free(h->buf); free(h->cur); free(h->ncur); free(h->tmp); free(h->nrows_prev);
    free(h);
}

uint32_t rp_host_layers(const rp_host *h) { return h->model.n_layers; }
uint32_t rp_host_groups(const rp_host *h) { return h->G; }
uint32_t rp_host_k(const rp_host *h) { return h->k; }
int32_t rp_host_layer_group(const rp_host *h, uint32_t l) { return h->model.layer_group[l]; }
int rp_host_layer_selects(const rp_host *h, uint32_t l) { return h->model.layer[l].select == MODEL_SELECT_OWN; }
int rp_host_layer_moe(const rp_host *h, uint32_t l) { return h->model.layer[l].moe; }
double rp_host_row_bytes(const rp_host *h) { return h->model.layer[0].row_bytes; }
double rp_host_indexer_heads(const rp_host *h) { return h->model.layer[0].indexer_heads; }
double rp_host_expert_bytes(const rp_host *h) { return h->model.expert_bytes; }
double rp_host_experts(const rp_host *h) { return h->model.experts; }
double rp_host_experts_per_token(const rp_host *h) { return h->model.experts_per_token; }
uint32_t rp_host_moe_layers(const rp_host *h) { return h->model.moe_layers; }

/* cur[0..*ncur) <- (cur \ removed) u added, all ascending (t: scratch of k + added). */
static int apply_to(uint32_t k, int32_t *cur, uint32_t *ncur, int32_t *t, const sel_delta *d)
{
    uint32_t n = *ncur, i = 0, a = 0, rm = 0, o = 0;
    while (i < n || a < d->n_added) {
        int take_cur = a >= d->n_added || (i < n && (uint32_t)cur[i] < d->added[a]);
        if (take_cur) {
            if (rm < d->n_removed && d->removed[rm] == (uint32_t)cur[i]) { rm++; i++; continue; }
            t[o++] = cur[i++];
        } else {
            t[o++] = (int32_t)d->added[a++];
        }
        if (o > k) return dh_err("position %u: the selection grows beyond k = %u", d->pos, k);
    }
    if (rm != d->n_removed || o != d->n_sel)
        return dh_err("position %u: delta does not apply (%u of %u removed rows found, %u rows, stream says %u)",
                      d->pos, rm, d->n_removed, o, d->n_sel);
    memcpy(cur, t, o * sizeof *t);
    *ncur = o;
    return 0;
}

/* cur <- (cur \ removed) u added, all ascending. */
static int apply_delta(rp_host *h, size_t p, const sel_delta *d)
{
    int32_t *cur = h->cur + p * h->k;
    if (d->keyframe) {
        if (d->n_sel > h->k) return dh_err("selection of %u rows exceeds k = %u", d->n_sel, h->k);
        for (uint32_t j = 0; j < d->n_sel; j++) cur[j] = (int32_t)d->full[j];
        h->ncur[p] = d->n_sel;
        return 0;
    }
    return apply_to(h->k, cur, &h->ncur[p], h->tmp, d);
}

int rp_host_step(rp_host *h, int32_t *sel, int32_t *wfirst, int32_t *wcnt, uint32_t *miss, uint32_t *nrows)
{
    if (h->draft) return dh_err("rp_host_step: the replay was opened for speculative steps");
    if (h->step >= h->steps) return 1;
    for (uint32_t g = 0; g < h->G; g++)
        for (uint32_t r = 0; r < h->R; r++) {
            size_t p = (size_t)g * h->R + r;
            sel_delta d;
            int rc = sel_next(h->st[p], &d);
            if (rc < 0) return -1;
            if (rc > 0) return dh_err("stream (request %u, group %u) ended at step %u of %u", r, g, h->step, h->steps);
            if (d.pos != h->step) return dh_err("stream (request %u, group %u) is at position %u, step %u", r, g, d.pos, h->step);
            if (d.n_sel != h->k) return dh_err("request %u group %u position %u selects %u rows, not k = %u", r, g, d.pos, d.n_sel, h->k);
            if (apply_delta(h, p, &d) < 0) return dh_err_prefix("request %u group %u: ", r, g);
            memcpy(sel + p * h->k, h->cur + p * h->k, h->k * sizeof *sel);
            uint32_t before = h->buf[p].nrows_seen;
            hotbuf_result res;
            if (hotbuf_step(&h->buf[p], &d, &res) < 0) return dh_err_prefix("request %u group %u: ", r, g);
            miss[p] = res.misses;
            wfirst[p] = (int32_t)before;
            wcnt[p] = (int32_t)res.written;
            if (res.written && before + res.written != d.nrows)
                return dh_err("request %u group %u position %u: written rows do not end at the context", r, g, d.pos);
            nrows[r] = d.nrows;
        }
    h->step++;
    return 0;
}

int rp_host_resident(const rp_host *h, uint32_t pair, uint32_t row) { return hotbuf_resident(pair_hb(h, pair), row); }
uint32_t rp_host_n_resident(const rp_host *h, uint32_t pair) { return pair_hb(h, pair)->n_resident; }

uint32_t rp_host_gamma(const rp_host *h) { return h->gamma; }

/* ---- speculative steps -------------------------------------------------- */

/* What the observers of one pair's verification write (specrun_hooks). */
typedef struct {
    rp_host *h;
    rp_spec_out *o;
    size_t p;
    int32_t *q_prev;   /* the previous query's set while the queries are built */
} spec_obs;

static int obs_base(void *user, const sel_delta *d, const hotbuf_result *r, const hotbuf *b)
{
    spec_obs *s = user;
    rp_host *h = s->h;
    const uint32_t Q = h->gamma + 1;
    if (d->n_sel != h->k) return dh_err("position %u selects %u rows, not k = %u", d->pos, d->n_sel, h->k);
    if (apply_to(h->k, h->cur + s->p * h->k, &h->ncur[s->p], h->tmp, d) < 0) return -1;
    memcpy(s->o->sel + s->p * Q * h->k, h->cur + s->p * h->k, h->k * sizeof(int32_t));
    s->o->wfirst[s->p] = (int32_t)(b->nrows_seen - r->written);
    s->o->wcnt[s->p] = (int32_t)r->written;
    s->o->miss[s->p] = r->misses;
    return 0;
}

static int obs_query(void *user, uint32_t t, const sel_delta *d)
{
    spec_obs *s = user;
    rp_host *h = s->h;
    const uint32_t Q = h->gamma + 1;
    if (d->n_sel != h->k) return dh_err("position %u selects %u rows, not k = %u", d->pos, d->n_sel, h->k);
    int32_t *cur = s->o->sel + (s->p * Q + t) * h->k;
    uint32_t n = h->k;
    memcpy(cur, s->o->sel + (s->p * Q + t - 1) * h->k, h->k * sizeof *cur);
    return apply_to(h->k, cur, &n, (int32_t *)h->sel_scratch, d);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int obs_unioned(void *user, const union_set *u, const hotbuf *b)
{
    spec_obs *s = user;
    rp_host *h = s->h;
    uint32_t nx, n = 0;
    const uint32_t *x = union_extra(u, &nx);
    int32_t *xr = s->o->xr + s->p * (size_t)h->gamma * h->k;
    for (uint32_t i = 0; i < nx; i++)
        if (!hotbuf_resident(b, x[i])) {
            if (n == h->gamma * h->k) return dh_err("more than gamma x k = %u union rows to stage", h->gamma * h->k);
            xr[n++] = (int32_t)x[i];
        }
    qsort(xr, n, sizeof *xr, cmp_i32);
    s->o->n_xr[s->p] = n;
    return 0;
}

static int obs_commit(void *user, uint32_t t, const sel_delta *d, const hotbuf_result *r, const hotbuf *b)
{
    spec_obs *s = user;
    rp_host *h = s->h;
    const size_t i = s->p * h->gamma + t - 1;
    (void)d;
    s->o->cw_first[i] = (int32_t)(b->nrows_seen - r->written);
    s->o->cw_cnt[i] = (int32_t)r->written;
    s->o->c_miss[i] = r->misses;
    return 0;
}

int rp_host_spec_step(rp_host *h, rp_spec_out *o)
{
    if (!h->draft) return dh_err("rp_host_spec_step: the replay was opened for plain steps");
    if (h->step >= h->steps) return 1;
    const uint32_t Q = h->gamma + 1;
    for (uint32_t r = 0; r < h->R; r++) {
        /* The simulator's plan for DFlash2 (specrun_plan): L = gamma, capped by the positions left. */
        const uint32_t pos = h->ps[r].pos, left = h->shape.output_len[r] - pos - 1;
        if (left < h->gamma)
            return dh_err("request %u at position %u has %u positions left, fewer than gamma = %u (raise the output length)",
                          r, pos, left, h->gamma);
        spec_conf cf;
        const uint64_t ctx = (uint64_t)h->shape.prompt_len[r] + pos;
        spec_confidence(h->draft, ctx, h->seed, r, pos, &cf);
        o->acc[r] = spec_accept(&cf, h->gamma, h->seed, r, pos);
        o->pos[r] = pos;
    }
    for (uint32_t g = 0; g < h->G; g++)
        for (uint32_t r = 0; r < h->R; r++) {
            const size_t p = (size_t)g * h->R + r;
            spec_obs ob = {h, o, p, NULL};
            specrun_hooks hk = {&ob, obs_base, obs_query, obs_unioned, obs_commit};
            specrun_out so;
            if (specrun_verify(&h->ps[p], &h->shape, &h->ahead[p], &h->u, h->gamma, o->acc[r], 1, &hk, &so) < 0)
                return dh_err_prefix("step %u: ", h->step);
            if (so.fetched != (uint64_t)o->miss[p] + o->n_xr[p])
                return dh_err("step %u request %u group %u: %llu rows fetched, the observers saw %u + %u", h->step, r, g,
                              (unsigned long long)so.fetched, o->miss[p], o->n_xr[p]);
            /* The committed position's selection is the next base's reference. */
            memcpy(h->cur + p * h->k, o->sel + (p * Q + o->acc[r]) * h->k, h->k * sizeof(int32_t));
            o->nrows[r] = so.nrows;
        }
    h->step++;
    return 0;
}
