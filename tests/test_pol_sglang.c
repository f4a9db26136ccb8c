/* test_pol_sglang.c: the SGLang policies (sim/pol_sglang.c, sim/pol_dynamic.c)
 * through their pol_ops, against plain re-implementations written from the
 * descriptions in those files and in sim/sglhb.h, and the compute-stream
 * fetch (sim/step.c, fetch_main) against a plain list schedule.
 *
 * The reference of a (request, group) stream is an array of LRU rows (least
 * recent first, -1 for an empty slot) rebuilt at every long position from
 * three lists (untouched evictable slots, misses in top-k order, hits in their
 * old order), with the fast path, the two cold starts and the newest row's
 * slot; resident positions are all hits. The dynamic reference keeps the
 * requests' sizes itself and demotes by a linear search for the largest
 * resident request that holds more than its buffer (ties: admitted first); the
 * watermark reference applies the high/low hysteresis at each admission. Every
 * output of every position (selected, hits, fetched, written, evicted,
 * resident, host regions) and every demotion position must agree. A planted
 * fault (demoting the smallest first) shows the comparison can fail. The demotion counter
 * that make run prints equals the reference's number of demoted requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/evq.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/pol.h"
#include "sim/pol_sglang.h"
#include "sim/res.h"
#include "sim/step.h"
#include "traces/gen.h"

#define NONE (-1)
#define NREQ 6
#define NG 2
#define K 256
#define BUF 600
#define PAGE 64
#define RPR 100.0 /* rows per host region */

/* ---- the plain hot buffer ---- */
typedef struct {
    uint32_t B;
    int staging, started, ready;
    uint32_t first_nrows;
    int64_t *lru; /* [B] */
} ref_hb;

typedef struct { uint32_t n_sel, hits, fetched, written, evicted, resident, regions; } ref_out;

static void ref_hb_init(ref_hb *r, uint32_t B, int staging)
{
    memset(r, 0, sizeof *r);
    r->B = B;
    r->staging = staging;
    r->lru = malloc(B * sizeof *r->lru);
}

static int in_list(const uint32_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) if ((int64_t)v[i] == x) return 1;
    return 0;
}

static int in_list64(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) if (v[i] == x) return 1;
    return 0;
}

/* Distinct regions of the rows (floor(row / RPR)), by a plain search. */
static uint32_t regions_of(const int64_t *rows, uint32_t n)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
        int seen = 0;
        for (uint32_t j = 0; j < i; j++) seen |= floor(rows[j] / RPR) == floor(rows[i] / RPR);
        c += !seen;
    }
    return c;
}

/* One position of the plain hot buffer: the selection topk[0 .. n) in top-k order. */
static void ref_hb_step(ref_hb *r, uint32_t nrows, const uint32_t *topk, uint32_t n, ref_out *o)
{
    uint32_t preloaded = 0;
    if (!r->started) {
        r->started = 1;
        r->first_nrows = nrows;
        if (!r->staging && nrows <= r->B) preloaded = nrows;
    }
    int64_t newest = (int64_t)nrows - 1;
    if (nrows <= r->B) { /* fast path */
        o->hits = n;
        o->fetched = preloaded;
        o->evicted = 0;
        o->resident = nrows;
        o->regions = preloaded ? (uint32_t)floor((preloaded - 1) / RPR) + 1 : 0;
        return;
    }
    if (!r->ready) {
        r->ready = 1;
        int filled = r->staging || r->first_nrows <= r->B;
        for (uint32_t i = 0; i < r->B; i++) r->lru[i] = filled ? (int64_t)i : NONE;
    }
    int64_t *hits = malloc(r->B * sizeof *hits), *ev = malloc(r->B * sizeof *ev), *miss = malloc((n + 1) * sizeof *miss);
    uint32_t nh = 0, ne = 0, m = 0;
    for (uint32_t i = 0; i < r->B; i++) {
        int64_t x = r->lru[i];
        if (x != NONE && x != newest && in_list(topk, n, x)) hits[nh++] = x;
        else ev[ne++] = x;
    }
    for (uint32_t j = 0; j < n; j++)
        if ((int64_t)topk[j] != newest && !in_list64(hits, nh, topk[j])) miss[m++] = topk[j];
    o->evicted = 0;
    for (uint32_t i = 0; i < m; i++) o->evicted += ev[i] != NONE;
    uint32_t w = 0;
    for (uint32_t i = m; i < ne; i++) r->lru[w++] = ev[i];
    for (uint32_t i = 0; i < m; i++) r->lru[w++] = miss[i];
    for (uint32_t i = 0; i < nh; i++) r->lru[w++] = hits[i];
    assert_int_equal(w, r->B);
    o->hits = nh + (uint32_t)in_list(topk, n, newest);
    o->fetched = m;
    o->resident = 1;
    for (uint32_t i = 0; i < r->B; i++) o->resident += r->lru[i] != NONE;
    o->regions = regions_of(miss, m);
    free(hits);
    free(ev);
    free(miss);
}

/* ---- the plain stream: selection flags, resident or hot ---- */
typedef struct {
    sel_stream *st;
    uint8_t *flag;      /* [maxrows] selected */
    uint32_t prev_nrows;
    int started, hot, demoted;
    uint32_t demoted_at;
    ref_hb hb;
    sglhb_config cfg;   /* for the order keys */
} ref_stream;

static const sglhb_config *key_cfg;
static uint32_t key_pos;
static int cmp_key(const void *a, const void *b)
{
    uint64_t x = sglhb_order_key(key_cfg, key_pos, *(const uint32_t *)a), y = sglhb_order_key(key_cfg, key_pos, *(const uint32_t *)b);
    return (x > y) - (x < y);
}

/* Position pos: demote first when asked (a staging-filled buffer stepped with the whole selection). */
static void ref_stream_step(ref_stream *s, uint32_t pos, int demote_now, ref_out *o)
{
    sel_delta d;
    assert_int_equal(sel_next(s->st, &d), 0);
    assert_int_equal(d.pos, pos);
    for (uint32_t i = 0; i < d.n_removed; i++) s->flag[d.removed[i]] = 0;
    for (uint32_t i = 0; i < d.n_added; i++) s->flag[d.added[i]] = 1;
    uint32_t *topk = malloc((d.n_sel + 1) * sizeof *topk), n = 0;
    for (uint32_t x = 0; x < d.nrows; x++) if (s->flag[x]) topk[n++] = x;
    assert_int_equal(n, d.n_sel);
    if (s->cfg.order == SGLHB_ORDER_HASHED) {
        key_cfg = &s->cfg;
        key_pos = pos;
        qsort(topk, n, sizeof *topk, cmp_key);
    }
    memset(o, 0, sizeof *o);
    if (demote_now && !s->hot) {
        ref_hb_init(&s->hb, BUF, 1);
        s->hot = 1;
        s->demoted = 1;
        s->demoted_at = pos;
    }
    o->n_sel = n;
    if (s->hot) {
        ref_hb_step(&s->hb, d.nrows, topk, n, o);
    } else {
        o->hits = n;
        o->resident = d.nrows;
    }
    o->written = s->started ? d.nrows - s->prev_nrows : 0;
    s->started = 1;
    s->prev_nrows = d.nrows;
    free(topk);
}

/* ---- fixtures ---- */
typedef struct {
    trace_shape sh;
    sel_source *src;
    model_cfg m;
    model_group grp[NG];
} world;

static void world_init(world *w, uint32_t prompt, uint32_t npos)
{
    memset(w, 0, sizeof *w);
    gen_params *p;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(trace_shape_uniform(&w->sh, "t", NREQ, NG, 1, K, prompt, npos), 0);
    if (gen_source_new(p, &w->sh, 11, 32, &w->src) < 0) fail_msg("%s", dh_errmsg());
    gen_params_free(p);
    w->m.n_groups = NG;
    w->m.group = w->grp;
    for (uint32_t g = 0; g < NG; g++)
        w->grp[g] = (model_group){ .first_layer = g, .n_layers = 1, .k = K, .compress = 1, .kv_bytes_per_row = 1000.0 * (g + 1) };
}

static void world_release(world *w)
{
    sel_source_free(w->src);
    trace_shape_release(&w->sh);
}

static void env_of(pol_env *e, const world *w, int cold, int order)
{
    pol_env_init(e, &w->m, 2, 0);
    e->sgl = (pol_sglang_cfg){ .device_buffer_size = BUF, .page_size = PAGE, .cold = cold, .order = order,
                               .high_watermark = 0.85, .low_watermark = 0.70, .order_seed = 99 };
}

static void expect_same(const pol_out *o, const ref_out *r, uint32_t req, uint32_t g, uint32_t pos)
{
    if (o->n_sel != r->n_sel || o->hits != r->hits || o->misses != r->fetched || o->written != r->written ||
        o->evicted != r->evicted || o->resident != r->resident || o->miss_regions != r->regions)
        fail_msg("request %u, group %u, position %u: policy sel %u hits %u fetched %u written %u evicted %u resident %u "
                 "regions %u; reference %u %u %u %u %u %u %u", req, g, pos, o->n_sel, o->hits, o->misses, o->written,
                 o->evicted, o->resident, o->miss_regions, r->n_sel, r->hits, r->fetched, r->written, r->evicted,
                 r->resident, r->regions);
}

static void ref_open(ref_stream *s, world *w, uint32_t req, uint32_t g, const pol_env *e, int hot)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(sel_open(w->src, req, g, &s->st), 0);
    s->flag = calloc(sel_rows_at(&w->sh, req, g, w->sh.output_len[req]) + 2, 1);
    s->cfg = (sglhb_config){ .device_buffer_size = BUF, .page_size = PAGE, .order = e->sgl.order,
                             .order_seed = e->sgl.order_seed, .req = req, .group = g };
    s->demoted_at = UINT32_MAX;
    if (hot) {
        ref_hb_init(&s->hb, BUF, e->sgl.cold == SGLHB_COLD_STAGING);
        s->hot = 1;
    }
}

static void ref_close(ref_stream *s)
{
    sel_close(s->st);
    free(s->flag);
    if (s->hot) free(s->hb.lru);
}

/* ---- sglang-hisparse ---- */

/* Every request and group, computed ahead at open, against the plain buffer from position 0. */
static void static_case(uint32_t prompt, int cold, int order)
{
    world w;
    world_init(&w, prompt, 150);
    pol_env e;
    env_of(&e, &w, cold, order);
    const pol_ops *ops = pol_ops_of(POL_SGLANG_HISPARSE);
    assert_non_null(ops);
    assert_true(ops->fetch_main && ops->host_tier && ops->no_spec);
    uint64_t fetched = 0;
    for (uint32_t r = 0; r < NREQ; r++)
        for (uint32_t g = 0; g < NG; g++) {
            pol_stream ps;
            pol_open_args a = { .src = w.src, .sh = &w.sh, .req = r, .group = g, .horizon = 150, .rows_per_region = RPR };
            if (ops->open(&e, &ps, &a) < 0) fail_msg("%s", dh_errmsg());
            ref_stream rs;
            ref_open(&rs, &w, r, g, &e, 1);
            for (uint32_t p = 0; p < 150; p++) {
                pol_out o;
                ref_out ro;
                assert_int_equal(ops->next(&ps, &w.sh, &o), 0);
                ref_stream_step(&rs, p, 0, &ro);
                expect_same(&o, &ro, r, g, p);
                fetched += o.misses;
            }
            pol_out o;
            assert_int_equal(ops->next(&ps, &w.sh, &o), -1); /* past the horizon: an error, not garbage */
            ops->close(&ps);
            ref_close(&rs);
        }
    assert_true(fetched > 0);
    pol_env_release(&e);
    world_release(&w);
}

static void test_static_matches_plain_reference(void **state)
{
    (void)state;
    for (int cold = 0; cold < 2; cold++)
        for (int order = 0; order < 2; order++) {
            static_case(3000, cold, order); /* long from the start */
            static_case(500, cold, order);  /* short, crossing B = 600 at position 100 */
        }
}

/* The ledger holds SGLang's allocation for the final context: _device_buffer_alloc_size =
 * min(page-rounded length, B), the padded B + page once it reaches B. */
static void test_reserve_is_sglang_alloc_size(void **state)
{
    (void)state;
    world w;
    world_init(&w, 1000, 10);
    pol_env e;
    env_of(&e, &w, SGLHB_COLD_STAGING, SGLHB_ORDER_ASCENDING);
    const pol_ops *ops[3] = { pol_ops_of(POL_SGLANG_HISPARSE), pol_ops_of(POL_SGLANG_DYNAMIC), pol_ops_of(POL_SGLANG_WATERMARK) };
    const double lens[] = { 1, 63, 64, 65, 500, 599, 600, 601, 5000 };
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++)
            for (uint32_t g = 0; g < NG; g++) {
                double alloc = ceil(lens[j] / PAGE) * PAGE;
                if (alloc > BUF) alloc = BUF;
                if (alloc == BUF) alloc = BUF + PAGE;
                double prot = 0, opt = 0;
                ops[i]->reserve(&e, g, lens[j], &prot, &opt);
                assert_true(fabs(prot + opt - alloc * w.grp[g].kv_bytes_per_row) < 1e-6);
                assert_true(ops[i]->budget(&e, g) == BUF);
            }
    pol_env_release(&e);
    world_release(&w);
}

/* ---- sglang-dynamic and sglang-watermark ---- */

/* The plain demotion rule over the active references: resident requests' bytes beyond
 * their buffer at the next position, demoted largest (prompt + position) first until they fit
 * in spare (fault: smallest first). Returns the bytes still held. */
typedef struct { ref_stream s[NG]; uint32_t req, pos; int active; } ref_req;

static double alloc_rows(double rows)
{
    double a = ceil(rows / PAGE) * PAGE;
    if (a > BUF) a = BUF;
    return a == BUF ? BUF + PAGE : a;
}

static double ref_extra(const world *w, const ref_req *q, uint32_t pos)
{
    if (q->s[0].hot) return 0;
    double b = 0;
    for (uint32_t g = 0; g < NG; g++) {
        double rows = sel_rows_at(&w->sh, q->req, g, pos);
        if (rows > alloc_rows(rows)) b += (rows - alloc_rows(rows)) * w->grp[g].kv_bytes_per_row;
    }
    return b;
}

static double ref_demote(const world *w, ref_req *q, uint32_t n, double spare, int fault, int *demote_flags)
{
    double held = 0;
    for (uint32_t i = 0; i < n; i++) held += demote_flags[i] ? 0 : ref_extra(w, &q[i], q[i].pos);
    while (held > spare) {
        int best = -1;
        for (uint32_t i = 0; i < n; i++) {
            if (demote_flags[i] || ref_extra(w, &q[i], q[i].pos) <= 0) continue;
            double tok = w->sh.prompt_len[q[i].req] + q[i].pos;
            double bt = best < 0 ? 0 : w->sh.prompt_len[q[best].req] + q[best].pos;
            if (best < 0 || (fault ? tok < bt : tok > bt)) best = (int)i;
        }
        if (best < 0) break;
        held -= ref_extra(w, &q[best], q[best].pos);
        demote_flags[best] = 1;
    }
    return held;
}

/* A run of both: a request admitted every 4 steps, the spare bytes shrinking every
 * step; returns the positions that disagree in demotions (the outputs must agree
 * exactly unless fault). */
static int dynamic_case(pol_kind kind, int order, int fault, uint32_t *n_demoted)
{
    enum { STEPS = 60 };
    world w;
    world_init(&w, 2000, STEPS + 1);
    pol_env e;
    env_of(&e, &w, SGLHB_COLD_STAGING, order);
    e.sgl.pool_bytes = 9e6;
    const pol_ops *ops = pol_ops_of(kind);
    int watermark = kind == POL_SGLANG_WATERMARK;
    pol_stream *ps[NREQ];
    ref_req rq[NREQ];
    uint32_t n = 0, mismatches = 0;
    int ref_hot_mode = 0;
    *n_demoted = 0;
    for (uint32_t t = 0; t < STEPS; t++) {
        double spare = 7e6 - t * 2e4;
        if (t % 4 == 0 && n < NREQ) {
            /* Admission: the policy's rebalance with one request more, then its open. */
            int fl[NREQ] = { 0 };
            double held = ref_demote(&w, rq, n, spare, fault, fl);
            for (uint32_t i = 0; i < n; i++)
                if (fl[i]) for (uint32_t g = 0; g < NG; g++) rq[i].s[g].hot = 0, rq[i].s[g].demoted = 2; /* demote at next step */
            assert_int_equal(ops->rebalance(&e, spare, n + 1, ps, n), 0);
            int hot = 0;
            if (watermark) {
                double extra = 0;
                for (uint32_t g = 0; g < NG; g++) {
                    double rows = sel_rows_at(&w.sh, n, g, 0);
                    if (rows > alloc_rows(rows)) extra += (rows - alloc_rows(rows)) * w.grp[g].kv_bytes_per_row;
                }
                double use = (e.sgl.pool_bytes - spare + held + extra) / e.sgl.pool_bytes;
                if (ref_hot_mode && use < 0.70) ref_hot_mode = 0;
                else if (!ref_hot_mode && use > 0.85) ref_hot_mode = 1;
                hot = ref_hot_mode;
            }
            ps[n] = calloc(NG, sizeof *ps[n]);
            rq[n].req = n;
            rq[n].pos = 0;
            pol_sglang_cfg keep = e.sgl;
            e.sgl.cold = SGLHB_COLD_STAGING;
            for (uint32_t g = 0; g < NG; g++) {
                pol_open_args a = { .src = w.src, .sh = &w.sh, .req = n, .group = g, .horizon = STEPS, .rows_per_region = RPR };
                if (ops->open(&e, &ps[n][g], &a) < 0) fail_msg("%s", dh_errmsg());
                ref_open(&rq[n].s[g], &w, n, g, &e, hot);
            }
            e.sgl = keep;
            n++;
        }
        /* The step: rebalance, then every stream one position. */
        int fl[NREQ] = { 0 };
        for (uint32_t i = 0; i < n; i++) fl[i] = rq[i].s[0].demoted == 2;
        ref_demote(&w, rq, n, spare, fault, fl);
        assert_int_equal(ops->rebalance(&e, spare, n, ps, n), 0);
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t g = 0; g < NG; g++) {
                pol_out o;
                ref_out ro;
                assert_int_equal(ops->next(&ps[i][g], &w.sh, &o), 0);
                ref_stream_step(&rq[i].s[g], rq[i].pos, fl[i], &ro);
                const sgl_stream *s = ps[i][g].priv;
                if (s->demoted_at != rq[i].s[g].demoted_at) mismatches++;
                else if (!fault) expect_same(&o, &ro, i, g, rq[i].pos);
            }
            rq[i].pos++;
        }
        /* The ledger's optional bytes are what the residents hold beyond their buffers. */
        double held = 0;
        for (uint32_t i = 0; i < n; i++) held += ref_extra(&w, &rq[i], rq[i].pos - 1);
        if (!fault) {
            assert_true(fabs(ops->optional_bytes(&e, ps, n) - held) < 1e-6);
            assert_true(held <= spare + 1e-6);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        *n_demoted += rq[i].s[0].demoted_at != UINT32_MAX;
        for (uint32_t g = 0; g < NG; g++) {
            ops->close(&ps[i][g]);
            ref_close(&rq[i].s[g]);
        }
        free(ps[i]);
    }
    /* The counter make run reports (pol_env.sgl_demotions) is the reference's demoted requests. */
    assert_true(ops->demotes);
    if (!fault) assert_int_equal(e.sgl_demotions, *n_demoted);
    pol_env_release(&e);
    world_release(&w);
    return (int)mismatches;
}

static void test_dynamic_matches_plain_reference(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        uint32_t d;
        assert_int_equal(dynamic_case(POL_SGLANG_DYNAMIC, order, 0, &d), 0);
        assert_true(d >= 2 && d < NREQ); /* some demoted, not all: the order matters */
    }
}

static void test_watermark_matches_plain_reference(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        uint32_t d;
        assert_int_equal(dynamic_case(POL_SGLANG_WATERMARK, order, 0, &d), 0);
    }
}

static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    uint32_t d;
    assert_true(dynamic_case(POL_SGLANG_DYNAMIC, SGLHB_ORDER_ASCENDING, 1, &d) > 0);
}

/* ---- the fetch on the compute stream ---- */

/* With fetch_main, one micro-batch and no interference, the step is a plain list
 * schedule: per layer, its indexer, then (a selecting layer) its swap-in with one block per
 * request (none when nothing misses), then its attention after the replays of the
 * layers sharing the selection, which run FIFO on the fetch path from the indexer's end. */
static void test_fetch_on_compute_stream(void **state)
{
    (void)state;
    cfg *mc, *hc;
    model_cfg m;
    hw_profile hw;
    if (cfg_load("models/glm53.ini", &mc) < 0 || model_load(mc, &m) < 0 || cfg_load("models/hw/h200.ini", &hc) < 0 ||
        hw_load(hc, &hw) < 0)
        fail_msg("%s", dh_errmsg());
    cfg_free(mc);
    cfg_free(hc);
    hw.cost.inter.fetch = hw.cost.inter.compute = 0;
    const double n_req = 16;
    for (int with_miss = 0; with_miss < 2; with_miss++) {
        enum { G = 64 };
        double sel[G], miss[G], pages[G], idx[G], wr[G];
        for (uint32_t g = 0; g < m.n_groups; g++) {
            sel[g] = n_req * 2048;
            miss[g] = with_miss ? 300 * (g % 3 + 1) : 0;
            pages[g] = miss[g];
            idx[g] = n_req * 100000;
            wr[g] = n_req;
        }
        step_mb mb = { .n_req = n_req, .tokens = n_req, .sel = sel, .miss = miss, .pages = pages, .idx_rows = idx, .written = wr };
        step_ctx cx = { .model = &m, .hw = &hw, .attention_dp = 8, .moe_ep = 8, .compute_sms = hw.sms,
                        .dense_bytes_per_layer = 188e6, .fetch_main = 1 };
        res_server srv[3];
        for (int i = 0; i < 3; i++) res_init(&srv[i], "s");
        evq q;
        evq_init(&q);
        step_stats st = { 0 };
        double end = step_run(&cx, &mb, 1, 0, &srv[0], &srv[1], &srv[2], &q, &st);
        evq_release(&q);
        const double h2d_bytes = srv[1].bytes;
        for (int i = 0; i < 3; i++) res_release(&srv[i]);
        /* The plain schedule. */
        double t = 0, h2d = 0, *ready = calloc(m.n_layers, sizeof *ready);
        for (uint32_t l = 0; l < m.n_layers; l++) {
            int32_t g = m.layer_group[l];
            if (g >= 0 && m.layer[l].select == MODEL_SELECT_OWN) {
                t += step_indexer_s(&cx, &mb, l);
                double f = miss[g] > 0 ? cost_fetch_time(&hw.cost.fetch, miss[g], m.layer[l].row_bytes, pages[g], 0, n_req, cx.pool_bytes) : 0;
                double idx_end = t;
                t += f;
                ready[l] = t;
                for (uint32_t j = l + 1; j < m.n_layers && m.layer_group[j] == g && m.layer[j].select != MODEL_SELECT_OWN; j++) {
                    if (miss[g] <= 0) { ready[j] = 0; continue; }
                    double s = idx_end > h2d ? idx_end : h2d;
                    h2d = s + cost_fetch_time(&hw.cost.fetch, miss[g], m.layer[j].row_bytes, pages[g], 0, hw.fetch_sms, cx.pool_bytes);
                    ready[j] = h2d;
                }
            }
            if (g >= 0 && ready[l] > t) t = ready[l];
            t += step_compute_s(&cx, &mb, l);
        }
        free(ready);
        if (fabs(end - t) > 1e-12 * t) fail_msg("fetch_main step ends at %.12g s, the plain schedule at %.12g s", end, t);
        /* The swap-in ran on the compute server: the compute's busy time holds it. */
        assert_true(st.compute_busy >= end * (1 - 1e-12));
        if (with_miss) assert_true(st.fetch_bytes > 0 && h2d_bytes == st.fetch_bytes);
    }
    model_release(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_matches_plain_reference),
        cmocka_unit_test(test_reserve_is_sglang_alloc_size),
        cmocka_unit_test(test_dynamic_matches_plain_reference),
        cmocka_unit_test(test_watermark_matches_plain_reference),
        cmocka_unit_test(test_planted_fault_is_caught),
        cmocka_unit_test(test_fetch_on_compute_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
