/* pol_sglang.c: SGLang's HiSparse hot buffer in static mode, as it ships
 * (sim/sglhb.h has the source read and every rule), as a policy: each
 * (request, group) has device_buffer_size LRU slots plus the newest row's
 * slot, the short-sequence fast path, the configured cold start and top-k
 * order; the anchor layer's fetch runs on the compute stream between the
 * indexer and the attention (fetch_main), and the layers sharing its
 * selection replay its miss plan (one state per group, so their misses are
 * the anchor's). The budget is device_buffer_size, SGLang's key and unit
 * (rows), not a multiple of k.
 *
 * The fixed buffer makes the stream's results a pure function of it, so they
 * are computed for the request's horizon when it is admitted, as the
 * idealised LRU's are (pol.h); the dynamic policies (pol_dynamic.c) step the
 * same stream live while it is resident and compute the rest of its horizon
 * ahead at the moment it enters hot-buffer mode (a hot admission or a
 * demotion: it never returns). Cost: sglhb's queue, O(changed rows) per
 * position, plus a sort of the misses for their host regions. Memory: a
 * stream computed ahead keeps its buffer's state indexed by row (dense_rows)
 * only while it is computed, one stream at a time; the results are one
 * pol_out per position. */
#include "sim/pol_sglang.h"

#include "common/dh_err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

double sgl_slots(const pol_env *e, uint32_t g, double rows)
{
    (void)g;
    sglhb_config c = { .device_buffer_size = e->sgl.device_buffer_size, .page_size = e->sgl.page_size };
    return (double)sglhb_device_slots(&c, rows > 4e9 ? 4000000000u : (uint32_t)rows);
}

static void sel_reserve(sgl_stream *s, uint32_t n)
{
    if (n <= s->cap_sel) return;
    uint32_t cap = s->cap_sel ? s->cap_sel : 256;
    while (cap < n) cap *= 2;
    s->sel = dh_reallocarray(s->sel, cap, sizeof *s->sel);
    s->sel_next = dh_reallocarray(s->sel_next, cap, sizeof *s->sel_next);
    s->scratch = dh_reallocarray(s->scratch, cap, sizeof *s->scratch);
    s->cap_sel = cap;
}

/* The resident selection after delta d: a merge of the sorted selection with
 * the sorted removed and added rows, O(k), checked against the delta. */
static int sel_apply(sgl_stream *s, const sel_delta *d)
{
    sel_reserve(s, s->n_sel + d->n_added + 1);
    uint32_t i = 0, r = 0, a = 0, o = 0;
    while (i < s->n_sel) {
        uint32_t x = s->sel[i++];
        if (r < d->n_removed && d->removed[r] == x) { r++; continue; }
        while (a < d->n_added && d->added[a] < x) s->sel_next[o++] = d->added[a++];
        s->sel_next[o++] = x;
    }
    while (a < d->n_added) s->sel_next[o++] = d->added[a++];
    if (r != d->n_removed || o != d->n_sel)
        return dh_err("position %u: the delta does not apply to the selection (%u rows, the stream says %u)", d->pos, o,
                      d->n_sel);
    uint32_t *t = s->sel; s->sel = s->sel_next; s->sel_next = t;
    s->n_sel = o;
    return 0;
}

/* Distinct host regions of the misses (in top-k order) and of a preload of
 * rows [0, preloaded); 0 when regions are not counted. A region is counted
 * when first stamped this position: O(misses). */
static uint32_t miss_regions(sgl_stream *s, const uint32_t *rows, uint32_t n, uint32_t preloaded, uint32_t nrows)
{
    if (s->rows_per_region <= 0) return 0;
    uint32_t n_reg = (uint32_t)((double)nrows / s->rows_per_region) + 1;
    if (n_reg > s->cap_reg) {
        s->reg_mark = dh_reallocarray(s->reg_mark, n_reg, sizeof *s->reg_mark);
        memset(s->reg_mark + s->cap_reg, 0, (size_t)(n_reg - s->cap_reg) * sizeof *s->reg_mark);
        s->cap_reg = n_reg;
    }
    if (++s->reg_stamp == 0) {
        memset(s->reg_mark, 0, (size_t)s->cap_reg * sizeof *s->reg_mark);
        s->reg_stamp = 1;
    }
    uint32_t regions = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t reg = (uint32_t)((double)rows[i] / s->rows_per_region);
        regions += s->reg_mark[reg] != s->reg_stamp;
        s->reg_mark[reg] = s->reg_stamp;
    }
    if (preloaded) regions += (uint32_t)((double)(preloaded - 1) / s->rows_per_region) + 1;
    return regions;
}

int sgl_stream_open(const pol_env *e, pol_stream *ps, const pol_open_args *a, int how)
{
    memset(ps, 0, sizeof *ps);
    ps->mode = POL_LIVE_LRU; /* read live; the buffer is the policy's (priv) */
    ps->req = a->req;
    ps->group = a->group;
    ps->k = a->sh->group_k[a->group];
    ps->compress = a->sh->group_compress[a->group];
    ps->prompt_len = a->sh->prompt_len[a->req];
    if (ps->k > e->sgl.device_buffer_size)
        return dh_err("[policy] device_buffer_size = %u is below group %u's top-k %u (SGLang requires "
                      "device_buffer_size >= top-k)", e->sgl.device_buffer_size, a->group, ps->k);
    sgl_stream *s = dh_calloc(1, sizeof *s);
    ps->priv = s;
    s->sh = a->sh;
    s->rows_per_region = a->rows_per_region;
    s->demoted_at = UINT32_MAX;
    s->horizon = a->horizon;
    s->hcfg = (sglhb_config){ .device_buffer_size = e->sgl.device_buffer_size, .page_size = e->sgl.page_size,
                              .cold = (sglhb_cold)e->sgl.cold, .order = (sglhb_order)e->sgl.order,
                              .order_seed = e->sgl.order_seed, .req = a->req, .group = a->group,
                              .impl = SGLHB_IMPL_QUEUE, .dense_rows = how == SGL_OPEN_HOT_AHEAD };
    if (how != SGL_OPEN_RESIDENT) {
        if (sglhb_init(&s->h, &s->hcfg) < 0) goto fail;
        s->hot = 1;
    }
    if (sel_open(a->src, a->req, a->group, &ps->st) < 0) goto fail;
    return 0;
fail:
    sgl_stream_close(ps); /* nothing of a failed open stays behind (admit.c closes only the opened ones) */
    return dh_err_prefix("request %u, group %u: ", a->req, a->group);
}

/* One hot-buffer position from delta d (at a demotion: the whole selection
 * as added rows, the buffer starting as alloc_device_buffer leaves it). */
static int hot_step(sgl_stream *s, const sel_delta *d, pol_out *o, int first_after_demotion)
{
    sglhb_result r;
    if (sglhb_step(&s->h, d, &r) < 0) return -1;
    o->n_sel = d->n_sel;
    o->hits = r.hits;
    o->misses = r.fetched;  /* the rows copied host -> device: misses and a direct start's preload */
    o->evicted = r.evicted;
    /* Only the row that stops being the newest is copied out: the prompt's
     * host copy (a staging start's DMA, a demoted request's host_backed_len)
     * is made before decoding, as every policy here takes the host to hold
     * the prompt already. */
    (void)first_after_demotion;
    o->written = s->started ? d->nrows - s->prev_nrows : 0;
    o->resident = r.resident;
    o->miss_regions = miss_regions(s, r.miss_rows, r.misses, r.preloaded, d->nrows);
    return 0;
}

static int compute_ahead(pol_stream *ps, const trace_shape *sh);

/* One position read from the stream (ps->st). */
static int live_step(pol_stream *ps, const trace_shape *sh, pol_out *o)
{
    sgl_stream *s = ps->priv;
    memset(o, 0, sizeof *o);
    uint32_t pos = ps->pos++;
    o->nrows = sel_rows_at(sh, ps->req, ps->group, pos);
    sel_delta d;
    int rc = sel_next(ps->st, &d);
    if (rc < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
    if (rc > 0) return dh_err("request %u, group %u: the stream ends at position %u", ps->req, ps->group, pos);
    if (d.pos != pos || d.nrows != o->nrows)
        return dh_err("request %u, group %u: position %u has %u rows, the shape implies position %u with %u rows",
                      ps->req, ps->group, d.pos, d.nrows, pos, o->nrows);
    if (s->hot) {
        if (hot_step(s, &d, o, 0) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
    } else {
        if (sel_apply(s, &d) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
        if (s->demote) {
            /* The demotion: a fresh buffer (alloc_device_buffer) stepped with
             * the whole selection, as at a staging start. */
            s->hcfg.cold = SGLHB_COLD_STAGING; /* the device KV is there: assumed to keep rows 0 .. B-1 */
            s->hcfg.dense_rows = 1;            /* the rest is computed ahead now (compute_ahead) */
            if (sglhb_init(&s->h, &s->hcfg) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
            s->hot = 1;
            s->demote = 0;
            s->demoted_at = pos;
            sel_delta full = d;
            full.n_added = s->n_sel;
            full.added = s->sel;
            full.n_removed = 0;
            full.removed = NULL;
            full.keyframe = 0;
            full.full = NULL;
            if (hot_step(s, &full, o, 1) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
        } else {
            /* Resident: every selected row is on the device; the row that
             * stops being the newest is backed up to host
             * (_dynamic_backup_previous_token). */
            o->n_sel = d.n_sel;
            o->hits = d.n_sel;
            o->written = s->started ? d.nrows - s->prev_nrows : 0;
            o->resident = d.nrows;
        }
    }
    s->started = 1;
    s->prev_nrows = d.nrows;
    return 0;
}

/* Positions [ps->pos, horizon) of a stream in hot-buffer mode, computed now: its buffer is
 * fixed from here on (never promoted back), so they are a pure function of the stream, and
 * one stream's state in cache steps several times faster than hundreds of streams stepped
 * in turn. Then the buffer and the sel_stream are released and sgl_stream_step hands the
 * results out. 0 or -1 with dh_err(). */
static int compute_ahead(pol_stream *ps, const trace_shape *sh)
{
    sgl_stream *s = ps->priv;
    const uint32_t from = ps->pos, to = s->horizon > from ? s->horizon : from;
    s->seq_base = from;
    s->npos = 0;
    free(s->seq);
    s->seq = dh_calloc((size_t)(to - from) + 1, sizeof *s->seq);
    for (uint32_t p = from; p < to; p++) {
        if (live_step(ps, sh, &s->seq[p - from]) < 0) return -1;
        s->npos++;
    }
    sel_close(ps->st);
    ps->st = NULL;
    sglhb_release(&s->h);
    s->ahead = 1;
    ps->pos = from;
    return 0;
}

int sgl_stream_step(pol_stream *ps, const trace_shape *sh, pol_out *o)
{
    sgl_stream *s = ps->priv;
    if (s->ahead) {
        uint32_t pos = ps->pos++;
        if (pos - s->seq_base >= s->npos)
            return dh_err("request %u, group %u: the stream ends at position %u", ps->req, ps->group,
                          s->seq_base + s->npos);
        *o = s->seq[pos - s->seq_base];
        return 0;
    }
    const int was_hot = s->hot;
    if (live_step(ps, sh, o) < 0) return -1;
    /* A demotion at this position: the rest of the horizon at once. */
    if (!was_hot && s->hot && compute_ahead(ps, sh) < 0) return -1;
    return 0;
}

void sgl_stream_close(pol_stream *ps)
{
    sgl_stream *s = ps->priv;
    if (s) {
        if (s->hot && !s->ahead) sglhb_release(&s->h);
        free(s->sel);
        free(s->sel_next);
        free(s->scratch);
        free(s->reg_mark);
        free(s->seq);
        free(s);
    }
    ps->priv = NULL;
    pol_stream_close(ps); /* the sel_stream; mode LIVE_LRU's hotbuf was never initialised (zeroed) */
}

/* ---- the static policy ---- */

/* The ledger: the padded buffer SGLang allocates for the final context
 * (page-aligned growth while short, B + page from B on), k of it protected. */
static void reserve(const pol_env *e, uint32_t g, double rows, double *prot, double *opt)
{
    const model_group *mg = &e->model->group[g];
    double slots = sgl_slots(e, g, rows), p = slots < mg->k ? slots : mg->k;
    *prot += mg->kv_bytes_per_row * p;
    *opt += mg->kv_bytes_per_row * (slots - p);
}

static double budget(const pol_env *e, uint32_t g)
{
    (void)g;
    return e->sgl.device_buffer_size;
}

int sgl_stream_open_ahead(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    if (sgl_stream_open(e, ps, a, SGL_OPEN_HOT_AHEAD) < 0) return -1;
    if (compute_ahead(ps, a->sh) < 0) { /* its message names the request and group */
        sgl_stream_close(ps);
        return -1;
    }
    return 0;
}

/* The whole horizon at open, while the stream is hot in cache. */
static int open_static(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    return sgl_stream_open_ahead(e, ps, a);
}

static const char no_spec[] =
    "SGLang's swap-in takes one position per call at the commit read; its multi-step kernel (sgl-project/sglang#32162) is not modelled";

const pol_ops pol_sglang_hisparse_ops = {
    .name = "sglang-hisparse",
    .host_tier = 1,
    .fetch_main = 1,
    .what = "SGLang's HiSparse hot buffer as shipped (static mode), the fetch on the compute stream",
    .no_spec = no_spec,
    .reserve = reserve,
    .budget = budget,
    .open_parallel = 1,
    .open = open_static,
    .next = sgl_stream_step,
    .close = sgl_stream_close,
};
