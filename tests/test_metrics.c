/* test_metrics.c: the run's metrics (sim/metrics.h) on hand-made step records.
 *   - the token-weighted latency quantile against a plain reference: every
 *     step expanded into one entry per token, sorted, and indexed at
 *     ceil(q x tokens) - 1; a planted fault (the unweighted quantile) differs;
 *   - tallies: warm-up steps count in the means over every step but not in the
 *     measured rates, percentiles or speculative figures;
 *   - "not computed" is explicit: the union rows without a host tier, the
 *     count of the retrieval mode not in use;
 *   - each invariant, broken on purpose, is reported and names itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "sim/metrics.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The reference: one entry per token, sorted. */
static double ref_quantile(const metrics_dur *d, uint32_t n, double q)
{
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += (size_t)d[i].tokens;
    double *e = malloc(total * sizeof *e);
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < (uint32_t)d[i].tokens; t++) e[k++] = d[i].s_per_token;
    qsort(e, total, sizeof *e, cmp_double);
    double want = ceil(q * (double)total);
    size_t at = want < 1 ? 0 : (size_t)want - 1;
    double v = e[at];
    free(e);
    return v;
}

static void test_quantile_matches_sorted_reference(void **state)
{
    (void)state;
    srand(7);
    const double qs[] = { 0, 0.01, 0.5, 0.9, 0.99, 1 };
    int differs = 0;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t n = 1 + (uint32_t)(rand() % 60);
        metrics_dur *d = calloc(n, sizeof *d);
        double total = 0;
        for (uint32_t i = 0; i < n; i++) {
            /* Few distinct latencies, so that ties occur; weights 1 to 20 tokens. */
            d[i].s_per_token = 1e-3 * (1 + rand() % 12);
            d[i].tokens = 1 + rand() % 20;
            total += d[i].tokens;
        }
        metrics_sort_durs(d, n);
        for (uint32_t i = 1; i < n; i++) assert_true(d[i - 1].s_per_token <= d[i].s_per_token);
        for (size_t j = 0; j < sizeof qs / sizeof qs[0]; j++) {
            double got = metrics_quantile(d, n, total, qs[j]), want = ref_quantile(d, n, qs[j]);
            if (got != want) fail_msg("trial %d, q %g: %g, reference %g", trial, qs[j], got, want);
            /* Planted fault: the quantile over steps, ignoring their tokens. */
            size_t at = (size_t)ceil(qs[j] * n);
            double unweighted = d[at ? at - 1 : 0].s_per_token;
            if (unweighted != want) differs = 1;
        }
        free(d);
    }
    assert_true(differs);
    assert_true(metrics_quantile(NULL, 0, 0, 0.5) == 0);
}

/* A minimal configuration for metrics_finish: names and the model's group k. */
static model_group group0 = { .k = 64 };
static void fake_config(sim_config *sc)
{
    memset(sc, 0, sizeof *sc);
    snprintf(sc->model.name, sizeof sc->model.name, "m");
    sc->model.n_groups = 1;
    sc->model.group = &group0;
    snprintf(sc->hw.name, sizeof sc->hw.name, "h");
    snprintf(sc->preset, sizeof sc->preset, "p");
    sc->attention_dp = 1;
    sc->wl.concurrency = 2;
}

typedef struct {
    sim_config sc;
    mem_ledger hbm;
    res_server gpu, h2d, d2h;
    step_stats st;
    metrics_end end;
} fixture;

static void fixture_init(fixture *f, const pol_ops *pol)
{
    memset(f, 0, sizeof *f);
    fake_config(&f->sc);
    ledger_init(&f->hbm, 100);
    res_init(&f->gpu, "gpu");
    res_init(&f->h2d, "h2d");
    res_init(&f->d2h, "d2h");
    f->end = (metrics_end){ .sc = &f->sc, .pol = pol, .hbm = &f->hbm, .gpu = &f->gpu, .h2d = &f->h2d, .d2h = &f->d2h,
                            .st = &f->st, .admitted = 2, .completed = 2, .requests = 3 };
}

/* Step i: 1 s long, 2 requests, 2 tokens, 10 rows selected of which i missed
 * (i x 100 bytes), 1 accepted draft of 3 verified under speculation. */
static void add_steps(metrics *mt, fixture *f, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        metrics_step s;
        memset(&s, 0, sizeof s);
        s.row.step = i;
        s.row.t_start = i;
        s.row.t_end = i + 1;
        s.row.active = 2;
        s.row.tokens = f->sc.spec.mode ? 4 : 2;
        s.row.selected = 10;
        s.row.missed = i;
        s.row.accepted = f->sc.spec.mode ? 2 : 0;
        s.row.verified = f->sc.spec.mode ? 6 : 0;
        s.row.union_rows = 2 * 80;
        s.row.fetched_rows = 2 * 8;
        s.row.fetched_pq = 2 * 12;
        s.budget_rows = 128;
        s.miss_bytes = 100.0 * i;
        f->h2d.bytes += 100.0 * i;
        metrics_add(mt, &s);
    }
    f->end.t = n;
}

static void test_tallies_and_warmup(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f, &pol_hisparse_ops);
    metrics mt;
    metrics_init(&mt, 10, 4, 1);
    add_steps(&mt, &f, 10);
    sim_result r;
    memset(&r, 0, sizeof r);
    if (metrics_finish(&mt, &f.end, &r) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(r.steps, 10);
    assert_int_equal(r.measured_steps, 6);
    assert_true(r.tokens == 20 && r.measured_tokens == 12 && r.measured_time == 6);
    assert_true(r.tok_s_gpu == 2);
    /* Steps 4..9 miss 4+5+...+9 = 39 of 60 selected. */
    assert_true(r.missed_rows == 39 && r.selected_rows == 60);
    assert_true(fabs(r.fetch_fraction - 39.0 / 60) < 1e-15);
    /* Every step: 1 s over 1 token per request. */
    assert_true(r.tpot_p50 == 1 && r.tpot_p99 == 1 && r.tpot_mean == 1);
    assert_true(r.mean_active == 2 && r.mean_budget_rows == 128);
    assert_int_equal(r.never_admitted, 1);
    assert_string_equal(r.policy, "hisparse");
    assert_true(r.spec[0] == 0);
    assert_int_equal(r.n_tl, 10);
    assert_true(r.tl[9].missed == 9);
    free(r.tl);
    metrics_release(&mt);
}

static void test_not_computed_is_explicit(void **state)
{
    (void)state;
    spec_draft d;
    memset(&d, 0, sizeof d);
    for (int shared = 0; shared <= 1; shared++)
        for (int tier = 0; tier <= 1; tier++) {
            fixture f;
            fixture_init(&f, tier ? &pol_adaptive_ops : &pol_resident_ops);
            f.sc.spec.mode = SPEC_DFLASH2;
            f.sc.spec.draft = &d;
            f.sc.spec.shared_retrieval = shared;
            metrics mt;
            metrics_init(&mt, 4, 0, 1);
            add_steps(&mt, &f, tier ? 4 : 1);
            if (!tier) f.h2d.bytes = 0;
            sim_result r;
            memset(&r, 0, sizeof r);
            if (metrics_finish(&mt, &f.end, &r) < 0) fail_msg("%s", dh_errmsg());
            assert_string_equal(r.spec, "dflash2");
            /* 2 accepted and 6 verified over 2 requests a step. */
            assert_true(r.mean_accepted == 1 && r.mean_verify_len == 3 && r.tokens_per_step == 2);
            assert_int_equal(r.union_rows.known, tier);
            if (tier) assert_true(r.union_rows.value == 80 && r.union_rows_k.value == 80.0 / 64);
            assert_int_equal(r.fetched_shared_rows.known, shared);
            assert_int_equal(r.fetched_per_query_rows.known, !shared);
            assert_true(sim_opt_or(r.fetched_shared_rows, -1) == (shared ? 8 : -1));
            assert_true(sim_opt_or(r.fetched_per_query_rows, -1) == (shared ? -1 : 12));
            free(r.tl);
            metrics_release(&mt);
        }
}

/* Break one invariant of an otherwise sound run; the message must name it. */
static void expect_broken(int which, const char *needle)
{
    fixture f;
    fixture_init(&f, which == 4 ? &pol_resident_ops : &pol_hisparse_ops);
    metrics mt;
    metrics_init(&mt, 4, 0, 1);
    add_steps(&mt, &f, 4);
    switch (which) {
    case 0: f.hbm.peak_total = 101; break;        /* above capacity */
    case 1: f.h2d.bytes += 1; break;              /* fetched bytes != missed rows x row bytes */
    case 2: f.gpu.busy = 5; break;                /* busy longer than the run */
    case 3: f.end.completed = 1; break;           /* a request lost */
    case 4: f.h2d.bytes = 600; break;             /* no host tier, yet rows missed */
    }
    sim_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(metrics_finish(&mt, &f.end, &r), -1);
    if (!strstr(dh_errmsg(), needle)) fail_msg("invariant %d: '%s', expected '%s'", which, dh_errmsg(), needle);
    assert_null(r.tl);
    metrics_release(&mt);
}

static void test_invariants_fail_when_broken(void **state)
{
    (void)state;
    /* The sound run passes. */
    fixture f;
    fixture_init(&f, &pol_hisparse_ops);
    metrics mt;
    metrics_init(&mt, 4, 0, 1);
    add_steps(&mt, &f, 4);
    sim_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(metrics_finish(&mt, &f.end, &r), 0);
    free(r.tl);
    metrics_release(&mt);
    expect_broken(0, "HBM peak");
    expect_broken(1, "bytes fetched");
    expect_broken(2, "gpu");
    expect_broken(3, "2 requests admitted, 1 completed");
    expect_broken(4, "resident fetched 6 rows");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_matches_sorted_reference),
        cmocka_unit_test(test_tallies_and_warmup),
        cmocka_unit_test(test_not_computed_is_explicit),
        cmocka_unit_test(test_invariants_fail_when_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
