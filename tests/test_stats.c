/* test_stats.c: the trace statistics (traces/stats.c) against slow, obvious
 * references on small hand-built traces (traces/memsrc.c).
 *
 * - LRU at every budget (Mattson's stack algorithm over leave events) against
 *   a plain set-and-list LRU that re-sorts the whole buffer at every
 *   position; the curve read at multiples of k/64 equals the per-budget counts.
 * - FIFO and random against plain list implementations of the same
 *   definitions (random: the victim is the j-th evictable row in row order,
 *   j drawn from the same Philox stream).
 * - Belady against an O(n^2) next-use implementation, and both against an
 *   exhaustive search over every eviction choice on tiny traces (the minimum
 *   number of misses), which shows MIN is optimal under this cache model.
 * - Step overlap, cross-group overlap, the union of q consecutive selections
 *   and the reuse-distance histogram against direct set computations.
 * - A long high-churn stream forces the compaction of the FIFO insertion
 *   numbers (they reach 8B + 64) and spreads the LRU stack's leave events
 *   over many blocks, checked against the same references.
 * - A planted fault (an LRU reference that is off by one row of budget) is
 *   caught by the same comparison, so the differential check can fail.
 * - A wide trace (a 40K-row context, rows selected in runs and scattered)
 *   checks every policy where the small traces cannot reach: evictable rows
 *   spread over several 16K-row parts of the random policy's counting tree
 *   and dense words, long LRU stacks over many event blocks, and the two
 *   budgets that need no simulation (every position selects exactly B rows;
 *   B above every row ever selected). A random reference that takes the
 *   next row instead of the drawn one is caught there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "common/rng.h"
#include "traces/memsrc.h"
#include "traces/stats.h"

#include "test_rand.h" /* rnd(), cmp_u32(): test content independent of the code under test */

/* A small trace: sets[g][t] holds the selection of group g at position t
 * (request 0 only), sorted, k rows each (fewer while nrows < k). */
#define MAXT 80
#define MAXK 16
typedef struct {
    uint32_t k, prompt, positions, groups;
    uint32_t n[4][MAXT];
    uint32_t rows[4][MAXT][MAXK];
} tiny;

/* Selections that keep each row with probability keep_pct and draw the rest
 * from a skewed pool (recently dropped rows come back often), so every
 * policy has work to do. */
static void tiny_make(tiny *T, uint32_t k, uint32_t prompt, uint32_t positions, uint32_t groups, uint32_t keep_pct)
{
    memset(T, 0, sizeof *T);
    T->k = k; T->prompt = prompt; T->positions = positions; T->groups = groups;
    for (uint32_t g = 0; g < groups; g++) {
        for (uint32_t t = 0; t < positions; t++) {
            uint32_t nrows = prompt + t, want = k < nrows ? k : nrows, n = 0;
            uint32_t *cur = T->rows[g][t];
            if (t > 0)
                for (uint32_t i = 0; i < T->n[g][t - 1]; i++)
                    if (rnd(100) < keep_pct) cur[n++] = T->rows[g][t - 1][i];
            while (n < want) {
                uint32_t x = rnd(4) ? rnd(nrows < 3 * k ? nrows : 3 * k) : rnd(nrows);
                int dup = 0;
                for (uint32_t i = 0; i < n; i++) dup |= cur[i] == x;
                if (!dup) cur[n++] = x;
            }
            qsort(cur, n, sizeof *cur, cmp_u32);
            T->n[g][t] = n;
        }
    }
}

static sel_source *tiny_source(const tiny *T)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "tiny", 1, T->groups, 1, T->k, T->prompt, T->positions), 0);
    sel_source *src;
    assert_int_equal(memsrc_new(&sh, 5, 1, &src), 0);
    for (uint32_t g = 0; g < T->groups; g++)
        for (uint32_t t = 0; t < T->positions; t++) memsrc_put(src, 0, g, t, T->rows[g][t], T->n[g][t]);
    trace_shape_release(&sh);
    return src;
}

static int in_set(const uint32_t *a, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++) if (a[i] == x) return 1;
    return 0;
}

/* ---- plain references: a resident list, scanned in full at every step. */

enum { REF_LRU, REF_FIFO, REF_RANDOM, REF_BELADY };

/* Next position > t at which row x is selected in group g (UINT32_MAX: never). */
static uint32_t next_use(const tiny *T, uint32_t g, uint32_t t, uint32_t x)
{
    for (uint32_t u = t + 1; u < T->positions; u++)
        if (in_set(T->rows[g][u], T->n[g][u], x)) return u;
    return UINT32_MAX;
}

/* Misses over positions >= 1 of group g at budget B. `fault` shrinks the
 * LRU buffer by one row (the planted bug). */
static uint64_t ref_sim(const tiny *T, uint32_t g, uint32_t B, int policy, int fault)
{
    uint32_t res[256], key[256], n = 0, clock = 0;
    uint64_t miss = 0;
    rng_stream rng;
    rng_init(&rng, 1, 0, g, 3);
    for (uint32_t t = 0; t < T->positions; t++) {
        const uint32_t *S = T->rows[g][t];
        uint32_t ns = T->n[g][t];
        for (uint32_t i = 0; i < ns; i++) {
            uint32_t x = S[i], j;
            for (j = 0; j < n && res[j] != x; j++) {}
            if (j < n) continue;
            if (t > 0) miss++;
            uint32_t limit = B - (fault && policy == REF_LRU ? 1 : 0);
            if (n == limit) {
                /* Victim among resident rows not selected now. */
                int best = -1;
                if (policy == REF_RANDOM) {
                    uint32_t cand[256], nc = 0;
                    for (uint32_t q = 0; q < n; q++) if (!in_set(S, ns, res[q])) cand[nc++] = res[q];
                    qsort(cand, nc, sizeof *cand, cmp_u32);
                    uint32_t v = cand[rng_below(&rng, nc)];
                    for (uint32_t q = 0; q < n; q++) if (res[q] == v) best = (int)q;
                } else {
                    for (uint32_t q = 0; q < n; q++) {
                        if (in_set(S, ns, res[q])) continue;
                        if (best < 0) { best = (int)q; continue; }
                        uint32_t a = res[q], b = res[best];
                        if (policy == REF_LRU) {
                            if (key[q] < key[best] || (key[q] == key[best] && a < b)) best = (int)q;
                        } else if (policy == REF_FIFO) {
                            if (key[q] < key[best]) best = (int)q;
                        } else {
                            uint32_t na = next_use(T, g, t, a), nb = next_use(T, g, t, b);
                            if (na > nb || (na == nb && a > b)) best = (int)q;
                        }
                    }
                }
                assert_true(best >= 0);
                res[best] = res[n - 1];
                key[best] = key[n - 1];
                n--;
            }
            res[n] = x;
            key[n] = policy == REF_FIFO ? clock++ : t;
            n++;
        }
        if (policy == REF_LRU)
            for (uint32_t q = 0; q < n; q++) if (in_set(S, ns, res[q])) key[q] = t;
    }
    return miss;
}

/* Exhaustive minimum of misses over every eviction choice (tiny traces). */
static uint64_t brute_min(const tiny *T, uint32_t g, uint32_t t, uint32_t i, uint32_t *res, uint32_t n, uint32_t B)
{
    if (t == T->positions) return 0;
    if (i == T->n[g][t]) return brute_min(T, g, t + 1, 0, res, n, B);
    const uint32_t *S = T->rows[g][t];
    uint32_t x = S[i];
    if (in_set(res, n, x)) return brute_min(T, g, t, i + 1, res, n, B);
    uint64_t cost = t > 0, best = UINT64_MAX;
    if (n < B) {
        res[n] = x;
        best = brute_min(T, g, t, i + 1, res, n + 1, B);
    } else {
        for (uint32_t q = 0; q < n; q++) {
            if (in_set(S, T->n[g][t], res[q])) continue;
            uint32_t saved = res[q];
            res[q] = x;
            uint64_t c = brute_min(T, g, t, i + 1, res, n, B);
            if (c < best) best = c;
            res[q] = saved;
        }
    }
    return best + cost;
}

static stats_report *run_stats(sel_source *src, uint32_t k, uint32_t lo, uint32_t hi)
{
    stats_options o;
    stats_options_init(&o);
    o.n_budgets = 0;
    for (uint32_t B = lo; B <= hi && o.n_budgets < STATS_MAX_BUDGETS; B++) {
        o.budgets[o.n_budgets].rows = B;
        o.budgets[o.n_budgets].k_mult = 0;
        o.n_budgets++;
    }
    stats_report *r;
    if (stats_run(src, &o, &r) < 0) fail_msg("stats_run: %s", dh_errmsg());
    (void)k;
    return r;
}

static void test_policies_vs_reference(void **state)
{
    (void)state;
    for (int trial = 0; trial < 12; trial++) {
        tiny T;
        uint32_t k = 4 + (uint32_t)trial % 5;
        tiny_make(&T, k, k / 2 + 1 + (uint32_t)trial % 3, 40 + (uint32_t)trial, 2, 40 + 5 * (uint32_t)trial);
        sel_source *src = tiny_source(&T);
        stats_report *r = run_stats(src, k, k, k + 12);
        for (uint32_t g = 0; g < 2; g++)
            for (uint32_t b = 0; b < r->opt.n_budgets; b++) {
                uint32_t B = r->opt.budgets[b].rows;
                assert_int_equal(r->group[g].miss[STATS_LRU][b], ref_sim(&T, g, B, REF_LRU, 0));
                assert_int_equal(r->group[g].miss[STATS_FIFO][b], ref_sim(&T, g, B, REF_FIFO, 0));
                assert_int_equal(r->group[g].miss[STATS_RANDOM][b], ref_sim(&T, g, B, REF_RANDOM, 0));
                assert_int_equal(r->group[g].miss[STATS_BELADY][b], ref_sim(&T, g, B, REF_BELADY, 0));
            }
        /* The Mattson curve at multiples of k/64 that are whole rows equals the
         * per-budget LRU counts summed over groups. */
        for (uint32_t b = 0; b < r->opt.n_budgets; b++) {
            uint32_t B = r->opt.budgets[b].rows;
            if ((uint64_t)B * STATS_MRC_RES % k) continue;
            double curve = stats_lru_curve(r, (double)B / k);
            assert_true(fabs(curve - stats_miss_rate(r, STATS_LRU, b, -1)) < 1e-12);
        }
        stats_report_free(r);
        sel_source_free(src);
    }
}

/* A long, high-churn stream: more FIFO insertions than its numbers hold
 * (8B + 64), so their compaction runs, and leave events over many blocks of
 * the LRU stack. */
static void test_long_stream_compaction(void **state)
{
    (void)state;
    tiny T;
    uint32_t k = 16;
    tiny_make(&T, k, 20, MAXT, 1, 10);
    sel_source *src = tiny_source(&T);
    stats_report *r = run_stats(src, k, k, k + 12);
    assert_true(r->total.added > 2 * (20 + MAXT) + 64);
    for (uint32_t b = 0; b < r->opt.n_budgets; b++) {
        uint32_t B = r->opt.budgets[b].rows;
        assert_int_equal(r->group[0].miss[STATS_LRU][b], ref_sim(&T, 0, B, REF_LRU, 0));
        assert_int_equal(r->group[0].miss[STATS_FIFO][b], ref_sim(&T, 0, B, REF_FIFO, 0));
        assert_true(r->group[0].miss[STATS_FIFO][b] > 8 * B + 64); /* FIFO renumbered at least once */
    }
    stats_report_free(r);
    sel_source_free(src);
}

static void test_belady_is_optimal(void **state)
{
    (void)state;
    for (int trial = 0; trial < 20; trial++) {
        tiny T;
        uint32_t k = 2 + (uint32_t)trial % 2;
        tiny_make(&T, k, 4 + (uint32_t)trial % 3, 9, 1, 50);
        sel_source *src = tiny_source(&T);
        stats_report *r = run_stats(src, k, k, k + 2);
        for (uint32_t b = 0; b < r->opt.n_budgets; b++) {
            uint32_t B = r->opt.budgets[b].rows, res[16];
            uint64_t opt = brute_min(&T, 0, 0, 0, res, 0, B);
            assert_int_equal(r->group[0].miss[STATS_BELADY][b], opt);
            /* and no other policy beats it */
            assert_true(r->group[0].miss[STATS_LRU][b] >= opt);
            assert_true(r->group[0].miss[STATS_FIFO][b] >= opt);
            assert_true(r->group[0].miss[STATS_RANDOM][b] >= opt);
        }
        stats_report_free(r);
        sel_source_free(src);
    }
}

static void test_overlap_union_reuse(void **state)
{
    (void)state;
    tiny T;
    uint32_t k = 12;
    tiny_make(&T, k, 30, 60, 2, 70);
    sel_source *src = tiny_source(&T);
    stats_report *r = run_stats(src, k, k, k);
    /* Step overlap and cross-group overlap by direct intersection. */
    double ov[2] = {0}, cross = 0;
    uint64_t reuse[STATS_REUSE_BUCKETS] = {0};
    for (uint32_t g = 0; g < 2; g++)
        for (uint32_t t = 1; t < T.positions; t++) {
            uint32_t inter = 0;
            for (uint32_t i = 0; i < T.n[g][t]; i++) inter += in_set(T.rows[g][t - 1], T.n[g][t - 1], T.rows[g][t][i]);
            ov[g] += (double)inter / k;
        }
    for (uint32_t t = 0; t < T.positions; t++) {
        uint32_t inter = 0;
        for (uint32_t i = 0; i < T.n[1][t]; i++) inter += in_set(T.rows[0][t], T.n[0][t], T.rows[1][t][i]);
        cross += (double)inter / k;
    }
    for (uint32_t g = 0; g < 2; g++)
        assert_true(fabs(stats_step_overlap(r, (int)g) - ov[g] / (T.positions - 1)) < 1e-9);
    assert_true(fabs(stats_cross_overlap(r, 1) - cross / T.positions) < 1e-9);
    /* Reuse distances: for a row entering at t, positions since it last left. */
    for (uint32_t g = 0; g < 2; g++)
        for (uint32_t t = 1; t < T.positions; t++)
            for (uint32_t i = 0; i < T.n[g][t]; i++) {
                uint32_t x = T.rows[g][t][i];
                if (in_set(T.rows[g][t - 1], T.n[g][t - 1], x)) continue;
                int u = (int)t - 1;
                while (u >= 0 && !in_set(T.rows[g][u], T.n[g][u], x)) u--;
                if (u < 0) continue; /* first time */
                uint32_t d = t - (uint32_t)(u + 1);
                reuse[31 - __builtin_clz(d)]++;
            }
    for (int b = 0; b < STATS_REUSE_BUCKETS; b++) assert_int_equal(r->reuse_hist[b], reuse[b]);
    /* Union of q consecutive selections. */
    for (uint32_t q = 1; q <= STATS_MAX_Q; q++) {
        double sum = 0;
        uint64_t cnt = 0;
        for (uint32_t g = 0; g < 2; g++)
            for (uint32_t t = q - 1; t < T.positions; t++) {
                uint32_t uni[MAXK * STATS_MAX_Q], nu = 0;
                for (uint32_t s = t + 1 - q; s <= t; s++)
                    for (uint32_t i = 0; i < T.n[g][s]; i++)
                        if (!in_set(uni, nu, T.rows[g][s][i])) uni[nu++] = T.rows[g][s][i];
                sum += (double)nu / k;
                cnt++;
            }
        assert_true(fabs(stats_union(r, q) - sum / cnt) < 1e-9);
    }
    stats_report_free(r);
    sel_source_free(src);
}


/* ---- a wide trace: long context, runs and scattered rows. */

#define WT 120
#define WK 40
typedef struct {
    uint32_t prompt, positions;
    uint32_t n[WT];
    uint32_t rows[WT][WK];
} wide;

static void wide_make(wide *W, uint32_t prompt)
{
    memset(W, 0, sizeof *W);
    W->prompt = prompt;
    W->positions = WT;
    uint32_t dropped[4 * WK], nd = 0;
    for (uint32_t t = 0; t < WT; t++) {
        uint32_t nrows = prompt + t, *cur = W->rows[t], n = 0;
        if (t > 0)
            for (uint32_t i = 0; i < WK; i++) {
                uint32_t x = W->rows[t - 1][i];
                if (rnd(100) < 70) cur[n++] = x;
                else if (nd < 4 * WK) dropped[nd++] = x;
            }
        while (n < WK) {
            uint32_t kind = rnd(10), x;
            if (kind < 3 && nd) { /* a recently dropped row comes back */
                uint32_t j = rnd(nd);
                x = dropped[j];
                dropped[j] = dropped[--nd];
            } else if (kind < 7) { /* a run of neighbours */
                uint32_t at = rnd(nrows - 16), len = 2 + rnd(10);
                for (uint32_t j = 0; j < len && n < WK; j++) {
                    int dup = 0;
                    for (uint32_t q = 0; q < n; q++) dup |= cur[q] == at + j;
                    if (!dup) cur[n++] = at + j;
                }
                continue;
            } else {
                x = rnd(nrows);
            }
            int dup = 0;
            for (uint32_t q = 0; q < n; q++) dup |= cur[q] == x;
            if (!dup) cur[n++] = x;
        }
        qsort(cur, n, sizeof *cur, cmp_u32);
        W->n[t] = n;
    }
}

static int wide_has(const wide *W, uint32_t t, uint32_t x)
{
    return bsearch(&x, W->rows[t], W->n[t], sizeof x, cmp_u32) != NULL;
}

/* The plain references of ref_sim for the wide trace: a resident list
 * scanned in full, next uses by scanning forward. fault_random takes the
 * evictable row after the drawn one. */
static uint64_t wide_ref(const wide *W, uint32_t B, int policy, int fault_random)
{
    uint32_t cap = B < 8192 ? B : 8192, *res = calloc(cap + 1, 4), *key = calloc(cap + 1, 4), *cand = calloc(cap + 1, 4);
    uint32_t n = 0, clock = 0;
    uint64_t miss = 0;
    rng_stream rng;
    rng_init(&rng, 1, 0, 0, 3);
    for (uint32_t t = 0; t < W->positions; t++) {
        for (uint32_t i = 0; i < W->n[t]; i++) {
            uint32_t x = W->rows[t][i], j;
            for (j = 0; j < n && res[j] != x; j++) {}
            if (j < n) continue;
            if (t > 0) miss++;
            if (n == B) {
                int best = -1;
                if (policy == REF_RANDOM) {
                    uint32_t nc = 0;
                    for (uint32_t q = 0; q < n; q++) if (!wide_has(W, t, res[q])) cand[nc++] = res[q];
                    qsort(cand, nc, sizeof *cand, cmp_u32);
                    uint32_t pick = rng_below(&rng, nc);
                    if (fault_random) pick = (pick + 1) % nc;
                    for (uint32_t q = 0; q < n; q++) if (res[q] == cand[pick]) best = (int)q;
                } else {
                    for (uint32_t q = 0; q < n; q++) {
                        if (wide_has(W, t, res[q])) continue;
                        if (best < 0) { best = (int)q; continue; }
                        uint32_t a = res[q], b = res[best];
                        if (policy == REF_LRU) {
                            if (key[q] < key[best] || (key[q] == key[best] && a < b)) best = (int)q;
                        } else if (policy == REF_FIFO) {
                            if (key[q] < key[best]) best = (int)q;
                        } else {
                            uint32_t na = UINT32_MAX, nb = UINT32_MAX;
                            for (uint32_t u = t + 1; u < W->positions && na == UINT32_MAX; u++) if (wide_has(W, u, a)) na = u;
                            for (uint32_t u = t + 1; u < W->positions && nb == UINT32_MAX; u++) if (wide_has(W, u, b)) nb = u;
                            if (na > nb || (na == nb && a > b)) best = (int)q;
                        }
                    }
                }
                assert_true(best >= 0);
                res[best] = res[n - 1];
                key[best] = key[n - 1];
                n--;
            }
            assert_true(n < cap);
            res[n] = x;
            key[n] = policy == REF_FIFO ? clock++ : t;
            n++;
        }
        if (policy == REF_LRU)
            for (uint32_t q = 0; q < n; q++) if (wide_has(W, t, res[q])) key[q] = t;
    }
    free(res);
    free(key);
    free(cand);
    return miss;
}

static void test_wide_trace(void **state)
{
    (void)state;
    static wide W;
    wide_make(&W, 40000);
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "wide", 1, 1, 1, WK, W.prompt, W.positions), 0);
    sel_source *src;
    assert_int_equal(memsrc_new(&sh, 16, 1, &src), 0);
    for (uint32_t t = 0; t < W.positions; t++) memsrc_put(src, 0, 0, t, W.rows[t], W.n[t]);
    trace_shape_release(&sh);
    stats_options o;
    stats_options_init(&o);
    /* k (every position selects exactly k rows, so no simulation runs),
     * budgets just above k and far above it, and one above every row the
     * trace selects (nothing is ever evicted, no simulation either). */
    assert_int_equal(stats_parse_budgets(&o, "1k,41,47,1.5k,2k,3k,6k,5000"), 0);
    stats_report *r;
    if (stats_run(src, &o, &r) < 0) fail_msg("stats_run: %s", dh_errmsg());
    int random_fault_seen = 0;
    for (uint32_t b = 0; b < o.n_budgets; b++) {
        uint32_t B = o.budgets[b].k_mult > 0 ? (uint32_t)ceil(o.budgets[b].k_mult * WK - 1e-9) : o.budgets[b].rows;
        assert_int_equal(r->group[0].miss[STATS_LRU][b], wide_ref(&W, B, REF_LRU, 0));
        assert_int_equal(r->group[0].miss[STATS_FIFO][b], wide_ref(&W, B, REF_FIFO, 0));
        uint64_t rnd_ref = wide_ref(&W, B, REF_RANDOM, 0);
        assert_int_equal(r->group[0].miss[STATS_RANDOM][b], rnd_ref);
        assert_int_equal(r->group[0].miss[STATS_BELADY][b], wide_ref(&W, B, REF_BELADY, 0));
        random_fault_seen |= wide_ref(&W, B, REF_RANDOM, 1) != rnd_ref;
    }
    /* The last budget exceeds every row selected, the first is exactly k. */
    assert_int_equal(r->group[0].miss[STATS_FIFO][o.n_budgets - 1], r->total.cold);
    assert_int_equal(r->group[0].miss[STATS_FIFO][0], r->total.added);
    assert_true(r->total.cold + WK < 5000);
    assert_true(random_fault_seen);
    stats_report_free(r);
    sel_source_free(src);
}

/* The planted fault: an LRU reference one row short of its budget disagrees
 * with the stack algorithm on these traces, so the comparison above would
 * catch such a bug on either side. */
static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    tiny T;
    uint32_t k = 6;
    tiny_make(&T, k, 8, 60, 1, 60);
    sel_source *src = tiny_source(&T);
    stats_report *r = run_stats(src, k, k + 1, k + 8);
    int differs = 0;
    for (uint32_t b = 0; b < r->opt.n_budgets; b++) {
        uint32_t B = r->opt.budgets[b].rows;
        assert_int_equal(r->group[0].miss[STATS_LRU][b], ref_sim(&T, 0, B, REF_LRU, 0));
        differs |= r->group[0].miss[STATS_LRU][b] != ref_sim(&T, 0, B, REF_LRU, 1);
    }
    assert_true(differs);
    stats_report_free(r);
    sel_source_free(src);
}

static void test_bad_options(void **state)
{
    (void)state;
    stats_options o;
    stats_options_init(&o);
    assert_int_equal(stats_parse_budgets(&o, "1k,2.5k,8192"), 0);
    assert_int_equal(o.n_budgets, 3);
    assert_true(o.budgets[1].k_mult == 2.5 && o.budgets[2].rows == 8192);
    assert_int_equal(stats_parse_budgets(&o, "0.5k"), -1);
    assert_non_null(strstr(dh_errmsg(), "below k"));
    assert_int_equal(stats_parse_budgets(&o, "2k;4k"), -1);
    assert_int_equal(stats_parse_budgets(&o, ""), -1);
    /* A budget in rows below some group's k is refused, naming the group. */
    tiny T;
    tiny_make(&T, 8, 10, 10, 1, 50);
    sel_source *src = tiny_source(&T);
    stats_options_init(&o);
    assert_int_equal(stats_parse_budgets(&o, "4"), 0);
    stats_report *r;
    assert_int_equal(stats_run(src, &o, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "group 0"));
    sel_source_free(src);
}

/* Output: the three printers run and state sampling when it is used. */
static void test_output_states_sampling(void **state)
{
    (void)state;
    tiny T;
    tiny_make(&T, 8, 10, 30, 3, 60);
    sel_source *src = tiny_source(&T);
    stats_options o;
    stats_options_init(&o);
    o.group_step = 2;
    o.max_positions = 20;
    stats_report *r;
    assert_int_equal(stats_run(src, &o, &r), 0);
    assert_true(r->sampled);
    assert_int_equal(r->groups_used, 2);
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(stats_print_table(f, r), 0);
    assert_int_equal(stats_print_json(f, r), 0);
    assert_int_equal(stats_print_tsv(f, r), 0);
    fclose(f);
    assert_non_null(strstr(buf, "sampled: requests 1 of 1"));
    assert_non_null(strstr(buf, "\"sampled\": true"));
    assert_non_null(strstr(buf, "# sampled:"));
    assert_non_null(strstr(buf, "# lru_curve"));
    free(buf);
    assert_int_equal(r->total.positions, 2 * 19);
    stats_report_free(r);
    sel_source_free(src);
}

int main(void)
{
    rnd_state = 0x9E3779B97F4A7C15ull;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policies_vs_reference),
        cmocka_unit_test(test_long_stream_compaction),
        cmocka_unit_test(test_belady_is_optimal),
        cmocka_unit_test(test_overlap_union_reuse),
        cmocka_unit_test(test_planted_fault_is_caught),
        cmocka_unit_test(test_wide_trace),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_output_states_sampling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
