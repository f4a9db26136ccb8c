/* test_belady.c: the oracle's MIN replacement (sim/belady.c) against a
 * plain implementation that, whenever the buffer is over budget, scans every
 * unselected resident row for the one whose next selection lies furthest
 * ahead (never = infinitely far; the larger row on a tie), on random walks
 * and generated streams at several budgets; a planted fault (evicting the
 * nearest next use instead) must be caught. */
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
#include "traces/gen.h"
#include "test_sim_src.h"

/* A stream recorded whole. */
typedef struct {
    uint32_t npos, maxrows;
    uint32_t *nrows, *na, *nr;
    uint32_t **add, **rem;
} rec;

static void record(sel_source *src, uint32_t r, uint32_t g, rec *out)
{
    const trace_shape *sh = &sel_meta(src)->shape;
    uint32_t npos = sh->output_len[r];
    memset(out, 0, sizeof *out);
    out->nrows = calloc(npos, 4); out->na = calloc(npos, 4); out->nr = calloc(npos, 4);
    out->add = calloc(npos, sizeof *out->add); out->rem = calloc(npos, sizeof *out->rem);
    sel_stream *st;
    assert_int_equal(sel_open(src, r, g, &st), 0);
    sel_delta d;
    while (sel_next(st, &d) == 0) {
        uint32_t p = out->npos++;
        out->nrows[p] = d.nrows;
        out->na[p] = d.n_added;
        out->nr[p] = d.n_removed;
        out->add[p] = malloc((d.n_added + 1) * 4);
        out->rem[p] = malloc((d.n_removed + 1) * 4);
        memcpy(out->add[p], d.added, d.n_added * 4);
        memcpy(out->rem[p], d.removed, d.n_removed * 4);
        out->maxrows = d.nrows;
    }
    sel_close(st);
}

static void rec_free(rec *x)
{
    for (uint32_t p = 0; p < x->npos; p++) { free(x->add[p]); free(x->rem[p]); }
    free(x->nrows); free(x->na); free(x->nr); free(x->add); free(x->rem);
}

/* Next position after p at which row is selected again, or UINT32_MAX. */
static uint32_t next_use(const rec *x, uint32_t row, uint32_t p)
{
    for (uint32_t q = p + 1; q < x->npos; q++)
        for (uint32_t i = 0; i < x->na[q]; i++)
            if (x->add[q][i] == row) return q;
    return UINT32_MAX;
}

/* The plain MIN over the recording x of src's stream (0, 0); returns the
 * positions where it disagrees with belady_run on that stream. */
static int compare(sel_source *src, const rec *x, uint32_t budget, int fault)
{
    uint8_t *res = calloc(x->maxrows, 1), *sel = calloc(x->maxrows, 1);
    uint32_t n_res = 0;
    belady_work *w = belady_work_new();
    sel_stream *st;
    assert_int_equal(sel_open(src, 0, 0, &st), 0);
    belady_seq s;
    assert_int_equal(belady_run(w, st, x->npos, budget, &s), 0);
    sel_close(st);
    assert_int_equal(s.npos, x->npos);
    int bad = 0;
    for (uint32_t p = 0; p < x->npos; p++) {
        for (uint32_t i = 0; i < x->nr[p]; i++) sel[x->rem[p][i]] = 0;
        uint32_t written = 0, miss = 0, ev = 0;
        if (p > 0)
            for (uint32_t r = x->nrows[p - 1]; r < x->nrows[p]; r++) { res[r] = 1; n_res++; written++; }
        for (uint32_t i = 0; i < x->na[p]; i++) {
            uint32_t r = x->add[p][i];
            if (!res[r]) { res[r] = 1; n_res++; miss++; }
            sel[r] = 1;
        }
        while (n_res > budget) {
            uint32_t best = UINT32_MAX, best_key = 0;
            for (uint32_t r = 0; r < x->nrows[p]; r++) {
                if (!res[r] || sel[r]) continue;
                uint32_t k = next_use(x, r, p);
                if (fault) k = UINT32_MAX - k; /* planted: the nearest next use goes first */
                if (best == UINT32_MAX || k > best_key || (k == best_key && r > best)) { best = r; best_key = k; }
            }
            assert_true(best != UINT32_MAX);
            res[best] = 0;
            n_res--;
            ev++;
        }
        if (s.misses[p] != miss || s.evicted[p] != ev || s.written[p] != written) bad++;
    }
    belady_seq_release(&s);
    belady_work_free(w);
    free(res);
    free(sel);
    return bad;
}

static void test_min_matches_plain_scan(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        trace_shape sh;
        assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 40, 300, 160), 0);
        sel_source *src = ts_source(&sh, 0.3, seed);
        assert_non_null(src);
        rec x;
        record(src, 0, 0, &x);
        const uint32_t budgets[] = { 40, 52, 80, 140 };
        for (size_t b = 0; b < 4; b++) assert_int_equal(compare(src, &x, budgets[b], 0), 0);
        rec_free(&x);
        sel_source_free(src);
        trace_shape_release(&sh);
    }
    /* A generated stream (runs, re-references, a growing context). */
    gen_params *p;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 96, 900, 120), 0);
    sel_source *src;
    assert_int_equal(gen_source_new(p, &sh, 3, 16, &src), 0);
    rec x;
    record(src, 0, 0, &x);
    assert_int_equal(compare(src, &x, 96, 0), 0);
    assert_int_equal(compare(src, &x, 192, 0), 0);
    rec_free(&x);
    sel_source_free(src);
    trace_shape_release(&sh);
    gen_params_free(p);
}

static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 40, 300, 160), 0);
    sel_source *src = ts_source(&sh, 0.3, 1);
    rec x;
    record(src, 0, 0, &x);
    assert_true(compare(src, &x, 52, 1) > 0);
    rec_free(&x);
    sel_source_free(src);
    trace_shape_release(&sh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_min_matches_plain_scan),
        cmocka_unit_test(test_planted_fault_is_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
