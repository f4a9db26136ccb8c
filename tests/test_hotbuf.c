/* test_hotbuf.c: the hot buffer (sim/hotbuf.c) against a plain set-and-list LRU
 * that touches every selected row at every position; a planted fault in the
 * reference proves the comparison can fail. Then properties on generated
 * traces: LRU inclusion (misses never rise with the budget), Belady MIN never
 * above LRU, and a budget covering the whole context misses each row at most
 * once (no misses after the first touch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "sim/belady.h"
#include "sim/hotbuf.h"
#include "traces/gen.h"
#include "test_sim_src.h"

/* ---- the plain reference: an array in recency order (oldest first) ---- */
typedef struct {
    uint32_t *list, n;   /* resident rows, least recent first */
    uint8_t *sel;        /* current selection */
    uint32_t budget, nrows_seen;
} ref_lru;

static void ref_touch(ref_lru *r, uint32_t row, uint32_t *miss)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (r->list[i] == row) {
            memmove(r->list + i, r->list + i + 1, (r->n - i - 1) * sizeof *r->list);
            r->list[r->n - 1] = row;
            return;
        }
    r->list[r->n++] = row;
    if (miss) (*miss)++;
}

static uint32_t ref_evict(ref_lru *r)
{
    uint32_t ev = 0;
    for (uint32_t i = 0; r->n > r->budget && i < r->n;) {
        if (r->sel[r->list[i]]) { i++; continue; }
        memmove(r->list + i, r->list + i + 1, (r->n - i - 1) * sizeof *r->list);
        r->n--;
        ev++;
    }
    return ev;
}

/* One position: apply the delta to the selection set, write new rows, touch
 * every selected row (ascending, or descending as a planted fault), evict. */
static void ref_step(ref_lru *r, const sel_delta *d, uint32_t maxrows, int fault, uint32_t *miss, uint32_t *ev)
{
    for (uint32_t i = 0; i < d->n_removed; i++) r->sel[d->removed[i]] = 0;
    for (uint32_t i = 0; i < d->n_added; i++) r->sel[d->added[i]] = 1;
    if (r->nrows_seen)
        for (uint32_t x = r->nrows_seen; x < d->nrows; x++) ref_touch(r, x, NULL);
    r->nrows_seen = d->nrows;
    *miss = 0;
    if (!fault) {
        for (uint32_t x = 0; x < maxrows; x++) if (r->sel[x]) ref_touch(r, x, miss);
    } else {
        for (uint32_t x = maxrows; x-- > 0;) if (r->sel[x]) ref_touch(r, x, miss);
    }
    *ev = ref_evict(r);
}

/* Drive hotbuf and the reference over a random walk; budget changes at random
 * positions. Returns the number of positions where they disagree. */
static int compare_with_reference(uint64_t seed, int fault)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 48, 400, 300), 0);
    sel_source *src = ts_source(&sh, 0.3, seed);
    assert_non_null(src);
    uint32_t maxrows = sel_rows_at(&sh, 0, 0, 299) + 1;
    ref_lru r = { malloc(maxrows * sizeof(uint32_t)), 0, calloc(maxrows, 1), 96, 0 };
    hotbuf h;
    hotbuf_init(&h, 96);
    sel_stream *st;
    assert_int_equal(sel_open(src, 0, 0, &st), 0);
    rng_stream rs;
    rng_init(&rs, seed, 9, 9, 9);
    sel_delta d;
    int bad = 0;
    while (sel_next(st, &d) == 0) {
        if (rng_uniform(&rs) < 0.05) {
            uint32_t b = 48 + rng_below(&rs, 120);
            hotbuf_set_budget(&h, b);
            r.budget = b;
            ref_evict(&r);
        }
        hotbuf_result hr;
        assert_int_equal(hotbuf_step(&h, &d, &hr), 0);
        uint32_t miss, ev;
        ref_step(&r, &d, maxrows, fault, &miss, &ev);
        if (hr.misses != miss || h.n_resident != r.n) bad++;
        for (uint32_t i = 0; i < r.n; i++) if (!hotbuf_resident(&h, r.list[i])) { bad++; break; }
    }
    sel_close(st);
    hotbuf_release(&h);
    sel_source_free(src);
    trace_shape_release(&sh);
    free(r.list);
    free(r.sel);
    return bad;
}

static void test_hb_matches_plain_lru(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) assert_int_equal(compare_with_reference(seed, 0), 0);
}

static void test_planted_fault_in_reference_is_caught(void **state)
{
    (void)state;
    assert_true(compare_with_reference(1, 1) > 0);
}

static void test_hb_rejects_inconsistent_delta(void **state)
{
    (void)state;
    hotbuf h;
    hotbuf_init(&h, 8);
    uint32_t rows[3] = { 1, 2, 3 }, bad[1] = { 7 };
    sel_delta d = { .pos = 0, .nrows = 10, .n_sel = 3, .n_added = 3, .added = rows };
    hotbuf_result r;
    assert_int_equal(hotbuf_step(&h, &d, &r), 0);
    assert_int_equal(r.misses, 3);
    sel_delta e = { .pos = 1, .nrows = 10, .n_sel = 2, .n_removed = 1, .removed = bad };
    assert_int_equal(hotbuf_step(&h, &e, &r), -1);
    assert_non_null(strstr(dh_errmsg(), "not selected"));
    hotbuf_release(&h);
}

/* ---- properties on generated traces ---- */

static sel_source *gen_small(trace_shape *sh, uint32_t npos)
{
    gen_params *p;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(trace_shape_uniform(sh, "t", 2, 2, 1, 256, 6000, npos), 0);
    sel_source *src;
    if (gen_source_new(p, sh, 5, 32, &src) < 0) fail_msg("%s", dh_errmsg());
    gen_params_free(p);
    return src;
}

static uint64_t lru_misses(sel_source *src, uint32_t r, uint32_t g, uint32_t budget)
{
    sel_stream *st;
    assert_int_equal(sel_open(src, r, g, &st), 0);
    hotbuf h;
    hotbuf_init(&h, budget);
    sel_delta d;
    uint64_t m = 0;
    while (sel_next(st, &d) == 0) {
        hotbuf_result hr;
        assert_int_equal(hotbuf_step(&h, &d, &hr), 0);
        m += hr.misses;
    }
    hotbuf_release(&h);
    sel_close(st);
    return m;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The misses' regions (hotbuf_set_regions) against the obvious count: before each step, the added
 * rows neither resident nor new are the misses; their region indices, sorted and made unique. Fractional
 * rows per region (656-byte rows in 2 MB) and a region smaller than the gaps between rows. */
static void test_miss_regions_match_naive(void **state)
{
    (void)state;
    trace_shape sh;
    sel_source *src = gen_small(&sh, 300);
    static const double rprs[] = {3196.878, 97.5, 1.0};
    for (size_t v = 0; v < sizeof rprs / sizeof rprs[0]; v++) {
        sel_stream *st;
        assert_int_equal(sel_open(src, 0, 0, &st), 0);
        hotbuf h;
        hotbuf_init(&h, 600);
        hotbuf_set_regions(&h, rprs[v]);
        sel_delta d;
        uint64_t *reg = NULL;
        size_t cap = 0, total = 0;
        while (sel_next(st, &d) == 0) {
            if (d.n_added > cap) { cap = d.n_added; reg = realloc(reg, cap * sizeof *reg); assert_non_null(reg); }
            size_t n = 0;
            /* Rows produced since the last position are written, resident before the check. */
            for (uint32_t i = 0; i < d.n_added; i++)
                if (!hotbuf_resident(&h, d.added[i]) && !(h.nrows_seen && d.added[i] >= h.nrows_seen))
                    reg[n++] = (uint64_t)((double)d.added[i] / rprs[v]);
            qsort(reg, n, sizeof *reg, cmp_u64);
            size_t distinct = 0;
            for (size_t i = 0; i < n; i++) distinct += i == 0 || reg[i] != reg[i - 1];
            hotbuf_result hr;
            assert_int_equal(hotbuf_step(&h, &d, &hr), 0);
            assert_int_equal(hr.misses, n);
            assert_int_equal(hr.miss_regions, distinct);
            total += distinct;
        }
        assert_true(total > 0);
        free(reg);
        hotbuf_release(&h);
        sel_close(st);
    }
    sel_source_free(src);
    trace_shape_release(&sh); /* the shape was leaked here (LeakSanitizer) */
}

static uint64_t min_misses(sel_source *src, uint32_t r, uint32_t g, uint32_t budget, uint32_t npos)
{
    sel_stream *st;
    assert_int_equal(sel_open(src, r, g, &st), 0);
    belady_work *w = belady_work_new();
    belady_seq s;
    assert_int_equal(belady_run(w, st, npos, budget, &s), 0);
    uint64_t m = 0;
    for (uint32_t p = 0; p < s.npos; p++) m += s.misses[p];
    belady_seq_release(&s);
    belady_work_free(w);
    sel_close(st);
    return m;
}

static void test_lru_inclusion_and_min_below_lru(void **state)
{
    (void)state;
    trace_shape sh;
    uint32_t npos = 300;
    sel_source *src = gen_small(&sh, npos);
    const uint32_t budgets[] = { 256, 320, 384, 512, 768, 1024 };
    for (uint32_t r = 0; r < sh.n_requests; r++)
        for (uint32_t g = 0; g < sh.n_groups; g++) {
            uint64_t prev = UINT64_MAX;
            for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
                uint64_t lru = lru_misses(src, r, g, budgets[b]);
                uint64_t opt = min_misses(src, r, g, budgets[b], npos);
                assert_true(lru <= prev);   /* inclusion: a larger LRU buffer holds a superset */
                assert_true(opt <= lru);    /* MIN is a lower bound for any policy at this budget */
                prev = lru;
            }
        }
    sel_source_free(src);
    trace_shape_release(&sh);
}

static void test_budget_covering_context_misses_once(void **state)
{
    (void)state;
    trace_shape sh;
    sel_source *src = gen_small(&sh, 200);
    uint32_t maxrows = sel_rows_at(&sh, 0, 0, 199) + 1;
    uint8_t *seen = calloc(maxrows, 1);
    sel_stream *st;
    assert_int_equal(sel_open(src, 0, 0, &st), 0);
    hotbuf h;
    hotbuf_init(&h, maxrows);
    sel_delta d;
    uint32_t last_rows = 0;
    uint64_t total = 0;
    while (sel_next(st, &d) == 0) {
        /* Rows produced on the GPU count as touched. */
        if (d.pos > 0) for (uint32_t x = last_rows; x < d.nrows; x++) seen[x] = 1;
        last_rows = d.nrows;
        uint32_t expect = 0;
        for (uint32_t i = 0; i < d.n_added; i++) if (!seen[d.added[i]]) { expect++; seen[d.added[i]] = 1; }
        hotbuf_result hr;
        assert_int_equal(hotbuf_step(&h, &d, &hr), 0);
        assert_int_equal(hr.misses, expect);
        assert_int_equal(hr.evicted, 0);
        total += hr.misses;
    }
    assert_true(total > 0);
    hotbuf_release(&h);
    sel_close(st);
    free(seen);
    sel_source_free(src);
    trace_shape_release(&sh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hb_matches_plain_lru),
        cmocka_unit_test(test_planted_fault_in_reference_is_caught),
        cmocka_unit_test(test_hb_rejects_inconsistent_delta),
        cmocka_unit_test(test_lru_inclusion_and_min_below_lru),
        cmocka_unit_test(test_budget_covering_context_misses_once),
        cmocka_unit_test(test_miss_regions_match_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
