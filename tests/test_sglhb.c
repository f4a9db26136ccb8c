/* test_sglhb.c: the SGLang hot buffer (sim/sglhb.c), both the kernel's scan
 * (SGLHB_IMPL_SCAN) and the O(changed) queue (SGLHB_IMPL_QUEUE), against a plain
 * re-implementation written from the description in sim/sglhb.h: the LRU as
 * an array of rows (least recent first, -1 for an empty slot), rebuilt at
 * every long position from three lists (untouched evictables, misses in top-k
 * order, hits in their old order). It runs on random walks (tests/test_sim_src.h)
 * and on generated streams, with both cold starts, both top-k orders, a
 * short start through the fast path, and IndexShare groups (one state per
 * group against one reference per layer). A planted fault in the reference
 * (hits re-sorted by row) proves the comparison can fail. Two hand-worked
 * examples pin the order and the newest row's slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "sim/sglhb.h"
#include "traces/gen.h"
#include "test_sim_src.h"

#define NONE (-1)

/* ---- the plain reference ---- */
typedef struct {
    uint32_t B;
    int staging;
    int started, ready;
    uint32_t first_nrows, nrows_seen;
    int64_t *lru;      /* [B] rows least recent first, NONE: empty slot */
    uint8_t *is_top;   /* [maxrows] selected at this position */
    uint8_t *is_hit;   /* [maxrows] found in a slot at this position */
} ref_hb;

typedef struct {
    uint32_t hits, misses, evicted, preloaded, backed_up, resident;
    int fast, newest_hit;
    uint32_t *miss_rows; /* [B] */
} ref_out;

static void ref_init(ref_hb *r, uint32_t B, int staging, uint32_t maxrows)
{
    memset(r, 0, sizeof *r);
    r->B = B;
    r->staging = staging;
    r->lru = malloc(B * sizeof *r->lru);
    r->is_top = calloc(maxrows, 1);
    r->is_hit = calloc(maxrows, 1);
}

static void ref_free(ref_hb *r) { free(r->lru); free(r->is_top); free(r->is_hit); }

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One position: the selection topk[0 .. n) in top-k order. fault: re-sort the
 * hits by row instead of keeping their old order. */
static void ref_step(ref_hb *r, uint32_t nrows, const uint32_t *topk, uint32_t n, int fault, ref_out *o)
{
    uint32_t *miss_rows = o->miss_rows;
    memset(o, 0, sizeof *o);
    o->miss_rows = miss_rows;
    if (!r->started) {
        r->started = 1;
        r->first_nrows = nrows;
        if (r->staging) o->backed_up = nrows;
        else if (nrows <= r->B) o->preloaded = nrows;
    } else {
        o->backed_up = nrows - r->nrows_seen;
    }
    r->nrows_seen = nrows;
    int64_t newest = (int64_t)nrows - 1;
    for (uint32_t j = 0; j < n; j++) r->is_top[topk[j]] = 1;
    o->newest_hit = r->is_top[newest];
    if (nrows <= r->B) {
        o->fast = 1;
        o->hits = n;
        o->resident = nrows;
        for (uint32_t j = 0; j < n; j++) r->is_top[topk[j]] = 0;
        return;
    }
    if (!r->ready) {
        r->ready = 1;
        int filled = r->staging || r->first_nrows <= r->B;
        for (uint32_t i = 0; i < r->B; i++) r->lru[i] = filled ? (int64_t)i : NONE;
    }
    int64_t *hits = malloc(r->B * sizeof *hits), *evict = malloc(r->B * sizeof *evict);
    uint32_t nh = 0, ne = 0, m = 0;
    for (uint32_t i = 0; i < r->B; i++) {
        int64_t x = r->lru[i];
        if (x != NONE && x != newest && r->is_top[x]) { hits[nh++] = x; r->is_hit[x] = 1; }
        else evict[ne++] = x;
    }
    for (uint32_t j = 0; j < n; j++)
        if ((int64_t)topk[j] != newest && !r->is_hit[topk[j]]) o->miss_rows[m++] = topk[j];
    for (uint32_t i = 0; i < m; i++) o->evicted += evict[i] != NONE;
    if (fault) qsort(hits, nh, sizeof *hits, cmp_i64);
    uint32_t w = 0;
    for (uint32_t i = m; i < ne; i++) r->lru[w++] = evict[i];
    for (uint32_t i = 0; i < m; i++) r->lru[w++] = o->miss_rows[i];
    for (uint32_t i = 0; i < nh; i++) r->lru[w++] = hits[i];
    assert_int_equal(w, r->B);
    o->misses = m;
    o->hits = nh + (uint32_t)o->newest_hit;
    o->resident = 1;
    for (uint32_t i = 0; i < r->B; i++) o->resident += r->lru[i] != NONE;
    for (uint32_t j = 0; j < n; j++) r->is_top[topk[j]] = 0;
    for (uint32_t i = 0; i < nh; i++) r->is_hit[hits[i]] = 0;
    free(hits);
    free(evict);
}

/* Positions where sglhb and the reference disagree on anything: counts, the
 * miss plan, or the LRU order of the rows. */
static int differs(const sglhb *h, const sglhb_result *hr, const ref_hb *r, const ref_out *ro)
{
    if (hr->hits != ro->hits || hr->misses != ro->misses || hr->evicted != ro->evicted ||
        hr->preloaded != ro->preloaded || hr->fetched != ro->misses + ro->preloaded ||
        hr->backed_up != ro->backed_up || hr->resident != ro->resident || hr->fast != ro->fast ||
        hr->newest_hit != ro->newest_hit)
        return 1;
    for (uint32_t i = 0; i < hr->misses; i++) if (hr->miss_rows[i] != ro->miss_rows[i]) return 1;
    if (!r->ready) return 0;
    uint32_t *rows = malloc(h->B * sizeof *rows);
    int bad = 0;
    sglhb_lru_rows(h, rows);
    for (uint32_t i = 0; i < h->B; i++)
        if ((r->lru[i] == NONE ? SGLHB_EMPTY : (uint32_t)r->lru[i]) != rows[i]) { bad = 1; break; }
    free(rows);
    return bad;
}

/* ---- the top-k order the test derives itself from its own copy of the selection ---- */
static const sglhb_config *order_cfg; /* for the qsort comparator */
static uint32_t order_pos;

static int cmp_hashed(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint64_t kx = sglhb_order_key(order_cfg, order_pos, x), ky = sglhb_order_key(order_cfg, order_pos, y);
    if (kx != ky) return kx < ky ? -1 : 1;
    return (x > y) - (x < y);
}

/* Apply the delta to the flags and list the selection in the configured order. */
static uint32_t test_order(uint8_t *flags, const sel_delta *d, const sglhb_config *cfg, uint32_t *out)
{
    for (uint32_t i = 0; i < d->n_removed; i++) flags[d->removed[i]] = 0;
    for (uint32_t i = 0; i < d->n_added; i++) flags[d->added[i]] = 1;
    uint32_t n = 0;
    for (uint32_t x = 0; x < d->nrows; x++) if (flags[x]) out[n++] = x;
    if (cfg->order == SGLHB_ORDER_HASHED) {
        order_cfg = cfg;
        order_pos = d->pos;
        qsort(out, n, sizeof *out, cmp_hashed);
    }
    return n;
}

/* Drive sglhb (from deltas) and the reference (from the test's own order)
 * over every stream of src, group g; returns the positions that disagree. */
static int compare_stream(sel_source *src, const trace_shape *sh, uint32_t req, uint32_t g, uint32_t B,
                          sglhb_cold cold, sglhb_order order, int fault, uint64_t *misses_out)
{
    uint32_t npos = sh->output_len[req];
    uint32_t maxrows = sel_rows_at(sh, req, g, npos - 1) + 1;
    sglhb_config cfg = { .device_buffer_size = B, .page_size = 64, .cold = cold, .order = order,
                         .order_seed = 42, .req = req, .group = g };
    sglhb h, q, qd; /* the kernel's scan and the O(changed) queue (row map, dense rows), against the reference */
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    sglhb_config qcfg = cfg;
    qcfg.impl = SGLHB_IMPL_QUEUE;
    assert_int_equal(sglhb_init(&q, &qcfg), 0);
    qcfg.dense_rows = 1;
    assert_int_equal(sglhb_init(&qd, &qcfg), 0);
    ref_hb r;
    ref_init(&r, B, cold == SGLHB_COLD_STAGING, maxrows);
    ref_out ro = { .miss_rows = malloc(B * sizeof(uint32_t)) };
    uint8_t *flags = calloc(maxrows, 1);
    uint32_t *topk = malloc(maxrows * sizeof *topk);
    sel_stream *st;
    assert_int_equal(sel_open(src, req, g, &st), 0);
    sel_delta d;
    int bad = 0;
    uint64_t misses = 0;
    while (sel_next(st, &d) == 0) {
        sglhb_result hr, qr, qdr;
        if (sglhb_step(&h, &d, &hr) < 0) fail_msg("%s", dh_errmsg());
        if (sglhb_step(&q, &d, &qr) < 0) fail_msg("%s", dh_errmsg());
        if (sglhb_step(&qd, &d, &qdr) < 0) fail_msg("%s", dh_errmsg());
        uint32_t n = test_order(flags, &d, &cfg, topk);
        ref_step(&r, d.nrows, topk, n, fault, &ro);
        int bh = differs(&h, &hr, &r, &ro), bq = differs(&q, &qr, &r, &ro), bd = differs(&qd, &qdr, &r, &ro);
        if (!fault && bh + bq + bd)
            fail_msg("position %u: %s differs from the reference", d.pos, bh ? "scan" : bq ? "queue" : "dense queue");
        bad += bh + bq + bd;
        misses += hr.misses;
    }
    if (misses_out) *misses_out = misses;
    sel_close(st);
    sglhb_release(&h);
    sglhb_release(&q);
    sglhb_release(&qd);
    ref_free(&r);
    free(ro.miss_rows);
    free(flags);
    free(topk);
    return bad;
}

static int compare_walk(uint64_t seed, uint32_t prompt, uint32_t B, sglhb_cold cold, sglhb_order order, int fault)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 48, prompt, 300), 0);
    sel_source *src = ts_source(&sh, 0.3, seed);
    assert_non_null(src);
    int bad = compare_stream(src, &sh, 0, 0, B, cold, order, fault, NULL);
    sel_source_free(src);
    trace_shape_release(&sh);
    return bad;
}

/* Random walks: a long start (prompt 400 > B) and a short one through the fast
 * path (prompt 60, B 96: long from position 37), both cold starts, both orders. */
static void test_matches_plain_reference_on_walks(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++)
        for (int cold = 0; cold < 2; cold++)
            for (int order = 0; order < 2; order++) {
                assert_int_equal(compare_walk(seed, 400, 96, cold, order, 0), 0);
                assert_int_equal(compare_walk(seed, 60, 96, cold, order, 0), 0);
                assert_int_equal(compare_walk(seed, 400, 48, cold, order, 0), 0); /* B = k */
            }
}

static void test_planted_fault_in_reference_is_caught(void **state)
{
    (void)state;
    assert_true(compare_walk(1, 400, 96, SGLHB_COLD_DIRECT, SGLHB_ORDER_HASHED, 1) > 0);
    assert_true(compare_walk(1, 400, 96, SGLHB_COLD_STAGING, SGLHB_ORDER_ASCENDING, 1) > 0);
}

/* The core driven with arbitrary top-k orders (a fresh shuffle each position),
 * context growth of 0 to 2 rows, and the newest rows selected often. */
static void test_matches_plain_reference_on_shuffled_topk(void **state)
{
    (void)state;
    const uint32_t B = 40, k = 24, npos = 400;
    for (int cold = 0; cold < 2; cold++)
        for (uint32_t start = 10; start <= 70; start += 60) {
            rng_stream rs;
            rng_init(&rs, 7 + start, cold, 0, 3);
            uint32_t maxrows = start + 2 * npos + 1;
            sglhb_config cfg = { .device_buffer_size = B, .page_size = 1, .cold = cold };
            sglhb h;
            assert_int_equal(sglhb_init(&h, &cfg), 0);
            ref_hb r;
            ref_init(&r, B, cold == SGLHB_COLD_STAGING, maxrows);
            ref_out ro = { .miss_rows = malloc(B * sizeof(uint32_t)) };
            uint8_t *in = calloc(maxrows, 1);
            uint32_t topk[24], nrows = start;
            int bad = 0;
            for (uint32_t pos = 0; pos < npos; pos++) {
                if (pos) nrows += rng_below(&rs, 3);
                uint32_t want = nrows < k ? nrows : k, n = 0;
                /* The newest rows first (a recent window), then anywhere. */
                for (uint32_t w = 0; w < 3 && w < nrows && n < want; w++)
                    if (rng_uniform(&rs) < 0.7) { in[nrows - 1 - w] = 1; topk[n++] = nrows - 1 - w; }
                while (n < want) {
                    uint32_t x = rng_uniform(&rs) < 0.6 ? rng_below(&rs, nrows < 60 ? nrows : 60) : rng_below(&rs, nrows);
                    if (in[x]) continue;
                    in[x] = 1;
                    topk[n++] = x;
                }
                for (uint32_t i = n; i > 1; i--) { /* Fisher-Yates */
                    uint32_t j = rng_below(&rs, i), t = topk[i - 1];
                    topk[i - 1] = topk[j];
                    topk[j] = t;
                }
                sglhb_result hr;
                if (sglhb_step_topk(&h, pos, nrows, topk, n, &hr) < 0) fail_msg("%s", dh_errmsg());
                ref_step(&r, nrows, topk, n, 0, &ro);
                bad += differs(&h, &hr, &r, &ro);
                for (uint32_t i = 0; i < n; i++) in[topk[i]] = 0;
            }
            assert_int_equal(bad, 0);
            sglhb_release(&h);
            ref_free(&r);
            free(ro.miss_rows);
            free(in);
        }
}

/* ---- generated streams ---- */
static sel_source *gen_shape(trace_shape *sh, uint32_t n_layers, uint32_t group_every, uint32_t prompt, uint32_t npos)
{
    gen_params *p;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(trace_shape_uniform(sh, "t", 1, n_layers, group_every, 256, prompt, npos), 0);
    sel_source *src;
    if (gen_source_new(p, sh, 5, 32, &src) < 0) fail_msg("%s", dh_errmsg());
    gen_params_free(p);
    return src;
}

/* The generator's streams (a recent window, sinks, re-references): a long
 * start at two budgets and a short start crossing B, both modes and orders. */
static void test_matches_plain_reference_on_generated(void **state)
{
    (void)state;
    trace_shape sh;
    sel_source *src = gen_shape(&sh, 1, 1, 6000, 200);
    for (int cold = 0; cold < 2; cold++)
        for (int order = 0; order < 2; order++) {
            uint64_t m600, m300;
            assert_int_equal(compare_stream(src, &sh, 0, 0, 600, cold, order, 0, &m600), 0);
            assert_int_equal(compare_stream(src, &sh, 0, 0, 300, cold, order, 0, &m300), 0);
            assert_true(m600 > 0 && m300 >= m600);
        }
    sel_source_free(src);
    trace_shape_release(&sh);
    src = gen_shape(&sh, 1, 1, 400, 400); /* long from position 201 at B = 600 */
    for (int cold = 0; cold < 2; cold++)
        assert_int_equal(compare_stream(src, &sh, 0, 0, 600, cold, SGLHB_ORDER_HASHED, 0, NULL), 0);
    sel_source_free(src);
    trace_shape_release(&sh);
}

/* IndexShare: one sglhb per selection group against one plain reference per
 * layer, each fed its group's selection (the anchor's miss plan replayed on
 * the layers sharing it): every layer agrees with its group's state, so the
 * model's misses are the group's times its layers. */
static void test_group_state_matches_every_layer(void **state)
{
    (void)state;
    trace_shape sh;
    const uint32_t L = 4, B = 400;
    sel_source *src = gen_shape(&sh, L, 2, 3000, 120);
    assert_int_equal(sh.n_groups, 2);
    uint32_t maxrows = sel_rows_at(&sh, 0, 0, 119) + 1;
    uint64_t group_total = 0, layer_total = 0;
    for (uint32_t g = 0; g < sh.n_groups; g++) {
        sglhb_config cfg = { .device_buffer_size = B, .page_size = 64, .cold = SGLHB_COLD_DIRECT,
                             .order = SGLHB_ORDER_HASHED, .order_seed = 9, .req = 0, .group = g };
        sglhb h;
        assert_int_equal(sglhb_init(&h, &cfg), 0);
        ref_hb r[4];
        ref_out ro[4];
        uint32_t layers = 0;
        for (uint32_t l = 0; l < L; l++) {
            ref_init(&r[l], B, 0, maxrows);
            ro[l].miss_rows = malloc(B * sizeof(uint32_t));
        }
        for (uint32_t l = 0; l < L; l++) layers += sh.layer_group[l] == g;
        assert_int_equal(layers, 2);
        uint8_t *flags = calloc(maxrows, 1);
        uint32_t *topk = malloc(maxrows * sizeof *topk);
        sel_stream *st;
        assert_int_equal(sel_open(src, 0, g, &st), 0);
        sel_delta d;
        while (sel_next(st, &d) == 0) {
            sglhb_result hr;
            if (sglhb_step(&h, &d, &hr) < 0) fail_msg("%s", dh_errmsg());
            group_total += (uint64_t)hr.misses * layers;
            uint32_t n = test_order(flags, &d, &cfg, topk);
            for (uint32_t l = 0; l < L; l++) {
                if (sh.layer_group[l] != g) continue;
                ref_step(&r[l], d.nrows, topk, n, 0, &ro[l]);
                assert_int_equal(differs(&h, &hr, &r[l], &ro[l]), 0);
                layer_total += ro[l].misses;
            }
        }
        sel_close(st);
        sglhb_release(&h);
        for (uint32_t l = 0; l < L; l++) { ref_free(&r[l]); free(ro[l].miss_rows); }
        free(flags);
        free(topk);
    }
    assert_true(group_total > 0);
    assert_int_equal(group_total, layer_total);
    sel_source_free(src);
    trace_shape_release(&sh);
}

/* ---- hand-worked examples ---- */

static void expect_lru(const sglhb *h, const int64_t *want)
{
    uint32_t rows[8];
    sglhb_lru_rows(h, rows);
    for (uint32_t i = 0; i < h->B; i++) {
        uint32_t w = want[i] == NONE ? SGLHB_EMPTY : (uint32_t)want[i];
        if (rows[i] != w) fail_msg("LRU slot %u (least recent first) holds %d, expected %d", i, (int)rows[i], (int)want[i]);
    }
}

static void step_expect(sglhb *h, uint32_t pos, uint32_t nrows, const uint32_t *topk, uint32_t n, uint32_t hits,
                        uint32_t misses, uint32_t evicted, uint32_t backed_up, const int64_t *lru)
{
    sglhb_result r;
    if (sglhb_step_topk(h, pos, nrows, topk, n, &r) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(r.hits, hits);
    assert_int_equal(r.misses, misses);
    assert_int_equal(r.evicted, evicted);
    assert_int_equal(r.backed_up, backed_up);
    assert_int_equal(r.fast, 0);
    expect_lru(h, lru);
}

/* B = 4, direct start of a long context. E = empty slot; slots are named s0..s3
 * and the LRU is listed least recent first.
 *  pos 0, nrows 6 (newest 5), top-k [3 1 5]. LRU [s0 s1 s2 s3] all empty, all
 *    evictable; 5 is the newest: a hit in slot B. Misses 3 -> s0, 1 -> s1.
 *    New: untouched [s2 s3], misses [s0 s1], hits [] = rows [E E 3 1].
 *  pos 1, nrows 7 (newest 6; 5 is now on host only), top-k [5 1 6]. Scan
 *    s2 E, s3 E, s0 3: evictable; s1 1: hit. Miss 5 (the previous newest) ->
 *    s2. New: [s3 s0] [s2] [s1] = rows [E 3 5 1]; hits 2 (1 and the newest).
 *  pos 2, nrows 8 (newest 7), top-k [0 2 4]: every slot evictable, in order
 *    s3 E, s0 3, s2 5, s1 1. Misses 0 -> s3 (empty), 2 -> s0 (evicts 3), 4 ->
 *    s2 (evicts 5). New: [s1] [s3 s0 s2] [] = rows [1 0 2 4]; evicted 2.
 *  pos 3, nrows 8 (no new row), top-k [4 1 0]: hits s1 1, s3 0, s2 4 in their
 *    old order; s0 2 evictable; no miss. New: [s0] [] [s1 s3 s2] = rows
 *    [2 1 0 4]: the hits keep their old order 1, 0, 4, not the top-k order and
 *    not sorted (sorting them would give [2 0 1 4]).
 *  pos 4, nrows 9 (newest 8), top-k [7 3]: 7 was the newest at pos 2-3 and never
 *    entered an LRU slot. Every slot evictable: s0 2, s1 1, s3 0, s2 4. Misses
 *    7 -> s0 (evicts 2), 3 -> s1 (evicts 1). New: [s3 s2] [s0 s1] [] = rows
 *    [0 4 7 3]; with the top-k order [3 7] it would be [0 4 3 7]. */
static void test_hand_worked_direct(void **state)
{
    (void)state;
    sglhb_config cfg = { .device_buffer_size = 4, .page_size = 1, .cold = SGLHB_COLD_DIRECT };
    sglhb h;
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    step_expect(&h, 0, 6, (uint32_t[]){ 3, 1, 5 }, 3, 1, 2, 0, 0, (int64_t[]){ NONE, NONE, 3, 1 });
    step_expect(&h, 1, 7, (uint32_t[]){ 5, 1, 6 }, 3, 2, 1, 0, 1, (int64_t[]){ NONE, 3, 5, 1 });
    step_expect(&h, 2, 8, (uint32_t[]){ 0, 2, 4 }, 3, 0, 3, 2, 1, (int64_t[]){ 1, 0, 2, 4 });
    step_expect(&h, 3, 8, (uint32_t[]){ 4, 1, 0 }, 3, 3, 0, 0, 0, (int64_t[]){ 2, 1, 0, 4 });
    sglhb_result r;
    assert_int_equal(sglhb_step_topk(&h, 4, 9, (uint32_t[]){ 7, 3 }, 2, &r), 0);
    assert_int_equal(r.misses, 2);
    assert_int_equal(r.miss_rows[0], 7);
    assert_int_equal(r.miss_rows[1], 3);
    assert_int_equal(r.resident, 5); /* four slots and slot B */
    expect_lru(&h, (int64_t[]){ 0, 4, 7, 3 });
    sglhb_release(&h);
}

/* B = 4, staging start of a short context, through the fast path.
 *  pos 0, nrows 3: fast (3 <= 4), both selected rows hits, the prefill's 3 rows
 *    backed up to host.
 *  pos 1, nrows 4: fast.
 *  pos 2, nrows 5 (newest 4): the first long position; slots s0..s3 hold rows
 *    0..3 in LRU order. Top-k [4 1 3]: hits s1 1, s3 3; evictable s0 0, s2 2;
 *    no miss. New: [s0 s2] [] [s1 s3] = rows [0 2 1 3].
 *  pos 3, nrows 6 (newest 5), top-k [4 5 0]: 4 left slot B for the host, a miss.
 *    Scan s0 0 hit; s2 2, s1 1, s3 3 evictable. Miss 4 -> s2 (evicts 2). New:
 *    [s1 s3] [s2] [s0] = rows [1 3 4 0]. */
static void test_hand_worked_staging_fast_path(void **state)
{
    (void)state;
    sglhb_config cfg = { .device_buffer_size = 4, .page_size = 64, .cold = SGLHB_COLD_STAGING };
    sglhb h;
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    sglhb_result r;
    assert_int_equal(sglhb_step_topk(&h, 0, 3, (uint32_t[]){ 2, 0 }, 2, &r), 0);
    assert_int_equal(r.fast, 1);
    assert_int_equal(r.hits, 2);
    assert_int_equal(r.misses + r.fetched + r.preloaded, 0);
    assert_int_equal(r.backed_up, 3);
    assert_int_equal(r.newest_hit, 1);
    assert_int_equal(sglhb_step_topk(&h, 1, 4, (uint32_t[]){ 1, 0, 3 }, 3, &r), 0);
    assert_int_equal(r.fast, 1);
    assert_int_equal(r.hits, 3);
    assert_int_equal(r.backed_up, 1);
    step_expect(&h, 2, 5, (uint32_t[]){ 4, 1, 3 }, 3, 3, 0, 0, 1, (int64_t[]){ 0, 2, 1, 3 });
    step_expect(&h, 3, 6, (uint32_t[]){ 4, 5, 0 }, 3, 2, 1, 1, 1, (int64_t[]){ 1, 3, 4, 0 });
    sglhb_release(&h);

    /* The direct start of a short context preloads it whole. */
    cfg.cold = SGLHB_COLD_DIRECT;
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    assert_int_equal(sglhb_step_topk(&h, 0, 3, (uint32_t[]){ 2, 0 }, 2, &r), 0);
    assert_int_equal(r.fast, 1);
    assert_int_equal(r.preloaded, 3);
    assert_int_equal(r.fetched, 3);
    assert_int_equal(r.misses, 0);
    assert_int_equal(r.backed_up, 0);
    sglhb_release(&h);
}

/* The newest row is a hit in slot B and, one position later, a miss: a stream
 * that always selects its two newest rows misses exactly one row per position. */
static void test_newest_row_is_missed_once_later(void **state)
{
    (void)state;
    sglhb_config cfg = { .device_buffer_size = 8, .page_size = 64, .cold = SGLHB_COLD_STAGING };
    sglhb h;
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    for (uint32_t pos = 0; pos < 50; pos++) {
        uint32_t nrows = 20 + pos, topk[3] = { 0, nrows - 2, nrows - 1 };
        sglhb_result r;
        assert_int_equal(sglhb_step_topk(&h, pos, nrows, topk, 3, &r), 0);
        assert_int_equal(r.newest_hit, 1);
        assert_int_equal(r.misses, 1); /* row nrows - 2: at pos 0 a long start's, later the previous newest */
        assert_int_equal(r.miss_rows[0], nrows - 2);
        assert_int_equal(r.hits, 2);
    }
    sglhb_release(&h);
}

/* A cleared buffer (a new request in the same slot: request_finished) behaves
 * as a fresh one, under both implementations. */
static void test_clear_restarts(void **state)
{
    (void)state;
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 48, 60, 200), 0);
    sel_source *src = ts_source(&sh, 0.3, 11);
    for (int impl = 0; impl < 2; impl++) {
        sglhb_config cfg = { .device_buffer_size = 64, .page_size = 16, .cold = SGLHB_COLD_DIRECT,
                             .order = SGLHB_ORDER_HASHED, .impl = impl };
        sglhb h, fresh;
        assert_int_equal(sglhb_init(&h, &cfg), 0);
        uint64_t first = 0, again = 0;
        for (int run = 0; run < 2; run++) {
            if (run) { sglhb_clear(&h); assert_int_equal(sglhb_init(&fresh, &cfg), 0); }
            sel_stream *st;
            assert_int_equal(sel_open(src, 0, 0, &st), 0);
            sel_delta d;
            uint32_t a[64], b[64];
            while (sel_next(st, &d) == 0) {
                sglhb_result r, rf;
                if (sglhb_step(&h, &d, &r) < 0) fail_msg("%s", dh_errmsg());
                if (!run) { first += r.misses + r.preloaded; continue; }
                if (sglhb_step(&fresh, &d, &rf) < 0) fail_msg("%s", dh_errmsg());
                again += r.misses + r.preloaded;
                assert_int_equal(r.misses, rf.misses);
                sglhb_lru_rows(&h, a);
                sglhb_lru_rows(&fresh, b);
                assert_memory_equal(a, b, sizeof a);
            }
            sel_close(st);
        }
        assert_true(first > 0);
        assert_int_equal(first, again);
        sglhb_release(&h);
        sglhb_release(&fresh);
    }
    sel_source_free(src);
    trace_shape_release(&sh);
}

/* The queue's memory is per slot, not per context row: the same walk over a
 * context of 2,000 rows and of 4,000,000 rows (a fifth of its fresh rows drawn
 * from anywhere in the context) leaves the row map within the smallest table
 * that holds B + 2k + 1 rows at three quarters (the resident rows, this
 * position's added rows and the selection before the misses evict), and both
 * give the scan's results. */
static void test_queue_memory_is_per_slot(void **state)
{
    (void)state;
    const uint32_t B = 96, k = 48;
    uint32_t want = 64;
    while ((uint64_t)(B + 2 * k + 1) * 4 > (uint64_t)want * 3) want *= 2;
    for (int big = 0; big < 2; big++) {
        trace_shape sh;
        assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, k, big ? 4000000 : 2000, 200), 0);
        sel_source *src = ts_source(&sh, 0.3, 7);
        assert_non_null(src);
        sglhb_config cfg = { .device_buffer_size = B, .page_size = 16, .cold = SGLHB_COLD_STAGING,
                             .order = SGLHB_ORDER_HASHED, .impl = SGLHB_IMPL_QUEUE };
        sglhb q;
        assert_int_equal(sglhb_init(&q, &cfg), 0);
        sel_stream *st;
        assert_int_equal(sel_open(src, 0, 0, &st), 0);
        sel_delta d;
        uint64_t misses = 0;
        uint32_t max_cap = 0;
        while (sel_next(st, &d) == 0) {
            sglhb_result r;
            if (sglhb_step(&q, &d, &r) < 0) fail_msg("%s", dh_errmsg());
            misses += r.misses;
            if (q.rows.cap > max_cap) max_cap = q.rows.cap;
            assert_true(q.rows.count <= B + 2 * k + 1);
        }
        assert_true(misses > 0);
        assert_true(max_cap <= want);
        assert_null(q.row_slot); /* no array over the context */
        assert_null(q.slot_row);
        sel_close(st);
        sglhb_release(&q);
        /* The same stream through the scan and the plain reference. */
        assert_int_equal(compare_stream(src, &sh, 0, 0, B, SGLHB_COLD_STAGING, SGLHB_ORDER_HASHED, 0, NULL), 0);
        sel_source_free(src);
        trace_shape_release(&sh);
    }
}

/* The slots allocated per layer: page-aligned growth while short, then the padded buffer. */
static void test_device_slots(void **state)
{
    (void)state;
    sglhb_config cfg = { .device_buffer_size = 4096, .page_size = 64 };
    assert_int_equal(sglhb_device_slots(&cfg, 1), 64);
    assert_int_equal(sglhb_device_slots(&cfg, 65), 128);
    assert_int_equal(sglhb_device_slots(&cfg, 4032), 4032);
    assert_int_equal(sglhb_device_slots(&cfg, 4033), 4096 + 64);
    assert_int_equal(sglhb_device_slots(&cfg, 100000), 4096 + 64);
    cfg.device_buffer_size = 100; /* not a page multiple: capped, then padded */
    assert_int_equal(sglhb_device_slots(&cfg, 90), 100 + 64);
}

static void test_rejects_bad_input(void **state)
{
    (void)state;
    sglhb_config cfg = { .device_buffer_size = 2, .page_size = 1 };
    sglhb h;
    sglhb_result r;
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    assert_int_equal(sglhb_step_topk(&h, 0, 10, (uint32_t[]){ 1, 2, 3 }, 3, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "device_buffer_size"));
    assert_int_equal(sglhb_step_topk(&h, 0, 10, (uint32_t[]){ 4, 4 }, 2, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "twice"));
    assert_int_equal(sglhb_step_topk(&h, 0, 10, (uint32_t[]){ 4, 10 }, 2, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "beyond the context"));
    sglhb_release(&h);
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    uint32_t rows[1] = { 1 }, bad[1] = { 7 };
    sel_delta d = { .pos = 0, .nrows = 10, .n_sel = 1, .n_added = 1, .added = rows };
    assert_int_equal(sglhb_step(&h, &d, &r), 0);
    sel_delta e = { .pos = 1, .nrows = 11, .n_sel = 0, .n_removed = 1, .removed = bad };
    assert_int_equal(sglhb_step(&h, &e, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "not selected"));
    sglhb_release(&h);
    cfg.impl = SGLHB_IMPL_QUEUE; /* the queue is stepped from deltas only */
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    assert_int_equal(sglhb_step_topk(&h, 0, 10, (uint32_t[]){ 1 }, 1, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "deltas"));
    sglhb_release(&h);
    cfg.device_buffer_size = 0;
    assert_int_equal(sglhb_init(&h, &cfg), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked_direct),
        cmocka_unit_test(test_hand_worked_staging_fast_path),
        cmocka_unit_test(test_newest_row_is_missed_once_later),
        cmocka_unit_test(test_matches_plain_reference_on_walks),
        cmocka_unit_test(test_planted_fault_in_reference_is_caught),
        cmocka_unit_test(test_matches_plain_reference_on_shuffled_topk),
        cmocka_unit_test(test_matches_plain_reference_on_generated),
        cmocka_unit_test(test_group_state_matches_every_layer),
        cmocka_unit_test(test_clear_restarts),
        cmocka_unit_test(test_queue_memory_is_per_slot),
        cmocka_unit_test(test_device_slots),
        cmocka_unit_test(test_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
