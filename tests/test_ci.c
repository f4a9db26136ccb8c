/* test_ci.c: the batch-means confidence interval (common/stats.h) on
 * synthetic series whose mean is known.
 *   - coverage: AR(1) series x_t = mu + phi (x_{t-1} - mu) + e_t (Gaussian
 *     e, the stationary start), many independent replications; the 95 %
 *     interval must contain mu in 95 % of them, within four binomial
 *     standard deviations (the count is a binomial draw; 4 sd keeps a
 *     correct estimator from failing by chance while a 10 % shortfall
 *     fails). Moderate and strong correlation, and a ratio of sums (tokens
 *     over seconds) whose true ratio is known;
 *   - a planted fault: the naive interval that treats every step as
 *     independent (batches of one step) covers far less than 95 % on the
 *     strongly correlated series, so the coverage check can fail;
 *   - the batch plan: independent values keep 30 batches; a series whose
 *     batch means stay correlated merges to 15 and says the lag-1 test failed;
 *   - Student's quantile against the printed table (Student 1908 / Fisher
 *     and Yates: t(0.975, 29) = 2.045, t(0.975, 14) = 2.145);
 *   - MSER-5: an exponential transient of known decay is cut near where it
 *     falls below the noise; a stationary series loses little;
 *   - the control variate (stats_cv_ratio_ci): a synthetic speculative run
 *     whose accepted drafts are drawn from acceptance tables (one uniform per
 *     request and step, as sim/spec.h samples them; the table switching with
 *     a slow context-like process) and whose step time drifts with that
 *     process: the controlled interval around the ratio of sums covers the
 *     known limit E[tokens] / E[seconds] in 95 % of replications, is much
 *     narrower than the plain one, and a planted fault (the expectation
 *     summed over one position too few) makes it miss; a control unrelated
 *     to the figure keeps the coverage;
 *   - the other extrapolation the reports compare (sim/cost.h,
 *     cost_table_eval_slope): inside a table it is the table; beyond it, the
 *     end segment's line in log x, written out here from the two end points;
 *     floored at a tenth of the end value; a planted flat end differs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>

#include "common/stats.h"
#include "sim/cost.h"

/* One stationary AR(1) path of n values with mean mu and innovation sd 1. */
static void ar1(gsl_rng *r, double mu, double phi, uint32_t n, double *x)
{
    double y = gsl_ran_gaussian(r, 1.0 / sqrt(1 - phi * phi));
    for (uint32_t i = 0; i < n; i++) {
        x[i] = mu + y;
        y = phi * y + gsl_ran_gaussian(r, 1.0);
    }
}

/* Fraction of reps intervals (the batch plan's, or naive ones) covering mu. */
static double coverage(double phi, uint32_t n, int reps, int naive, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    double *x = malloc(n * sizeof *x), mu = 5;
    int hit = 0;
    for (int k = 0; k < reps; k++) {
        ar1(r, mu, phi, n, x);
        stats_ci c;
        if (naive) c = stats_ci_of(x, n);
        else {
            stats_plan p = stats_plan_of(x, NULL, n);
            c = stats_ratio_ci(&p, x, NULL);
        }
        assert_false(isnan(c.half));
        hit += fabs(c.mean - mu) <= c.half;
    }
    free(x);
    gsl_rng_free(r);
    return (double)hit / reps;
}

static void check_near_95(double cov, int reps)
{
    double sd = sqrt(STATS_LEVEL * (1 - STATS_LEVEL) / reps);
    print_message("coverage %.4f (95 %% +/- %.4f)\n", cov, 4 * sd);
    assert_true(fabs(cov - STATS_LEVEL) <= 4 * sd);
}

static void test_coverage_ar1_moderate(void **st)
{
    (void)st;
    check_near_95(coverage(0.5, 3000, 2000, 0, 1), 2000);
}

static void test_coverage_ar1_strong(void **st)
{
    (void)st;
    check_near_95(coverage(0.9, 6000, 2000, 0, 2), 2000);
}

/* Tokens per step ~ 16 x (3.6 + AR(1) noise), seconds per step ~ 0.06 +
 * noise correlated with the tokens: the ratio of sums has the known limit
 * E[tokens] / E[seconds]. */
static void test_coverage_ratio(void **st)
{
    (void)st;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 3);
    uint32_t n = 2000;
    int reps = 2000, hit = 0;
    double *a = malloc(n * sizeof *a), *tok = malloc(n * sizeof *tok), *sec = malloc(n * sizeof *sec);
    double et = 16 * 3.6, es = 0.06, truth = et / es;
    for (int k = 0; k < reps; k++) {
        ar1(r, 0, 0.6, n, a);
        for (uint32_t i = 0; i < n; i++) {
            tok[i] = et + 8 * a[i];
            sec[i] = es + 0.002 * a[i] + gsl_ran_gaussian(r, 0.002);
        }
        stats_plan p = stats_plan_of(tok, sec, n);
        stats_ci c = stats_ratio_ci(&p, tok, sec);
        /* The interval is around the batch values' mean; the truth is the ratio of expectations. */
        hit += fabs(c.mean - truth) <= c.half;
    }
    free(a);
    free(tok);
    free(sec);
    gsl_rng_free(r);
    check_near_95((double)hit / reps, reps);
}

/* The planted fault: one step per batch ignores the autocorrelation. */
static void test_naive_interval_undercovers(void **st)
{
    (void)st;
    double cov = coverage(0.9, 6000, 500, 1, 4);
    print_message("naive coverage %.4f\n", cov);
    assert_true(cov < 0.80);
}

static void test_plan(void **st)
{
    (void)st;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 5);
    uint32_t n = 3000;
    double *x = malloc(n * sizeof *x);
    /* Independent values: the lag-1 test passes in about 95 % of paths. */
    int kept = 0;
    for (int k = 0; k < 200; k++) {
        ar1(r, 0, 0, n, x);
        stats_plan p = stats_plan_of(x, NULL, n);
        assert_int_equal(p.b * p.len + p.first, n);
        kept += p.b == STATS_BATCHES && p.lag1_ok;
    }
    assert_true(kept >= 170);
    /* phi = 0.999: correlation far longer than a batch, merged and flagged. */
    int flagged = 0;
    for (int k = 0; k < 50; k++) {
        ar1(r, 0, 0.999, n, x);
        stats_plan p = stats_plan_of(x, NULL, n);
        flagged += p.b == STATS_BATCHES / 2 && !p.lag1_ok;
    }
    assert_true(flagged >= 40);
    /* Too short: no interval. */
    stats_plan p = stats_plan_of(x, NULL, STATS_MIN_BATCHES - 1);
    assert_int_equal(p.b, 0);
    assert_true(isnan(stats_ratio_ci(&p, x, NULL).half));
    free(x);
    gsl_rng_free(r);
}

static void test_t_table(void **st)
{
    (void)st;
    assert_true(fabs(stats_t975(29) - 2.045) < 1e-3);
    assert_true(fabs(stats_t975(14) - 2.145) < 1e-3);
}

static void test_mser5(void **st)
{
    (void)st;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 6);
    uint32_t n = 2000;
    double *x = malloc(n * sizeof *x);
    /* 20 exp(-t / 50) falls below a tenth of the noise sd near t = 50 ln 200 = 265. */
    for (uint32_t i = 0; i < n; i++) x[i] = 20 * exp(-(double)i / 50) + gsl_ran_gaussian(r, 1.0);
    uint32_t d = stats_mser5(x, n);
    print_message("MSER-5 truncation %u\n", d);
    assert_true(d >= 100 && d <= 500);
    assert_int_equal(d % 5, 0);
    for (uint32_t i = 0; i < n; i++) x[i] = gsl_ran_gaussian(r, 1.0);
    assert_true(stats_mser5(x, n) < 200);
    assert_int_equal(stats_mser5(x, 19), 0);
    free(x);
    gsl_rng_free(r);
}

/* The control-variate process: 16 requests verify 7 drafts each per step.
 * A slower AR(1) state z (phi 0.5: its batch means of 13 steps nearly
 * independent, what batch means need and what the lag-1 test checks)
 * picks the acceptance table (short context while z < 0) and stretches the
 * step time by 1 % per unit of z; each accepted draft adds
 * 0.4 ms (its commit). Per step: tokens = 16 + accepted, and the control is
 * accepted minus its expectation under the step's table (mu = 0); `fault`
 * sums that expectation over 6 positions instead of 7. */
#define CV_REQ 16
#define CV_GAMMA 7
static const double cv_table[2][CV_GAMMA] = {
    { 0.7335, 0.5683, 0.4404, 0.3435, 0.2743, 0.2287, 0.1966 }, /* models/drafts/glm53-dflash2.ini, ctx_any */
    { 0.80, 0.64, 0.51, 0.41, 0.33, 0.26, 0.21 },               /* a made-up shorter-context table */
};

static double cv_expected(int t, int positions)
{
    double e = 0;
    for (int i = 0; i < positions; i++) e += cv_table[t][i];
    return e;
}

/* One run of n steps; the truth (the ratio of expectations) is returned. */
static double cv_run(gsl_rng *r, uint32_t n, int fault, double *tok, double *sec, double *ctl)
{
    const double phi = 0.5, dt0 = 0.060, per_acc = 0.0004;
    double z = gsl_ran_gaussian(r, 1.0 / sqrt(1 - phi * phi));
    for (uint32_t i = 0; i < n; i++) {
        int t = z < 0;
        double acc = 0;
        for (int q = 0; q < CV_REQ; q++) {
            double u = gsl_rng_uniform(r);
            for (int k = 0; k < CV_GAMMA && u < cv_table[t][k]; k++) acc += 1;
        }
        tok[i] = CV_REQ + acc;
        sec[i] = dt0 * (1 + 0.01 * z) + per_acc * acc;
        ctl[i] = acc - CV_REQ * cv_expected(t, fault ? CV_GAMMA - 1 : CV_GAMMA);
        z = phi * z + gsl_ran_gaussian(r, 1.0);
    }
    /* z is symmetric: each table half the time, and E[z] = 0. */
    double ea = CV_REQ * (cv_expected(0, CV_GAMMA) + cv_expected(1, CV_GAMMA)) / 2;
    return (CV_REQ + ea) / (dt0 + per_acc * ea);
}

typedef struct {
    double coverage, half_ratio;   /* share covering the truth; mean controlled / plain half-width */
} cv_score;

static cv_score cv_coverage(uint32_t n, int reps, int fault, int unrelated, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    double *tok = malloc(n * sizeof *tok), *sec = malloc(n * sizeof *sec), *ctl = malloc(n * sizeof *ctl);
    int hit = 0;
    double ratio = 0;
    for (int k = 0; k < reps; k++) {
        double truth = cv_run(r, n, fault, tok, sec, ctl);
        /* An unrelated control: standard normal noise, mean 0. */
        if (unrelated)
            for (uint32_t i = 0; i < n; i++) ctl[i] = gsl_ran_gaussian(r, 1.0);
        stats_plan p;
        stats_cv c = stats_cv_ratio_ci(tok, sec, ctl, 0, n, &p);
        assert_false(isnan(c.ci.half));
        assert_int_equal(p.b * p.len + p.first, n);
        hit += fabs(c.ci.mean - truth) <= c.ci.half;
        ratio += c.ci.half / c.raw.half / reps;
    }
    free(tok);
    free(sec);
    free(ctl);
    gsl_rng_free(r);
    return (cv_score){ (double)hit / reps, ratio };
}

static void test_cv_coverage(void **st)
{
    (void)st;
    /* 400 steps: the length of make run's speculative column. */
    cv_score s = cv_coverage(400, 2000, 0, 0, 7);
    print_message("control variate: half-width %.3f of the plain one\n", s.half_ratio);
    check_near_95(s.coverage, 2000);
    assert_true(s.half_ratio < 0.5);
    /* A control unrelated to the figure costs a degree of freedom, not coverage. */
    cv_score u = cv_coverage(400, 1000, 0, 1, 8);
    check_near_95(u.coverage, 1000);
}

/* The planted fault: a wrong expectation biases the estimate by beta times the error. */
static void test_cv_wrong_expectation(void **st)
{
    (void)st;
    cv_score s = cv_coverage(400, 500, 1, 0, 9);
    print_message("control variate, wrong expectation: coverage %.4f\n", s.coverage);
    assert_true(s.coverage < 0.5);
}

/* Exact algebra: y an exact line in x gives the line's value at mu and no width. */
static void test_cv_exact_line(void **st)
{
    (void)st;
    double y[STATS_BATCHES], x[STATS_BATCHES];
    for (int j = 0; j < STATS_BATCHES; j++) {
        x[j] = (j * 7919 % 31) / 31.0 - 0.5;
        y[j] = 900 + 40 * x[j];
    }
    stats_cv c = stats_cv_of(y, x, STATS_BATCHES, 0.25);
    assert_true(fabs(c.beta - 40) < 1e-9);
    assert_true(fabs(c.ci.mean - (900 + 40 * 0.25)) < 1e-9);
    assert_true(c.ci.half < 1e-6);
    /* A constant control carries nothing: the plain interval. */
    for (int j = 0; j < STATS_BATCHES; j++) x[j] = 1;
    c = stats_cv_of(y, x, STATS_BATCHES, 1);
    assert_true(c.ci.mean == c.raw.mean && c.ci.half == c.raw.half);
}

static void test_table_slope(void **st)
{
    (void)st;
    cost_table t = { 3, { 10, 100, 1000 }, { 5, 7, 4 } };
    for (double x = 10; x <= 1000; x *= 1.7) assert_true(cost_table_eval_slope(&t, x) == cost_table_eval(&t, x));
    /* Below: the line through (log 10, 5) and (log 100, 7); above: through (log 100, 7), (log 1000, 4). */
    double lo = 5 + (log(2) - log(10)) / (log(100) - log(10)) * (7 - 5);
    double hi = 7 + (log(3000) - log(100)) / (log(1000) - log(100)) * (4 - 7);
    assert_true(fabs(cost_table_eval_slope(&t, 2) - lo) < 1e-12);
    assert_true(fabs(cost_table_eval_slope(&t, 3000) - hi) < 1e-12);
    assert_true(cost_table_eval(&t, 3000) == 4);          /* the held end value differs */
    assert_true(cost_table_eval_slope(&t, 1e9) == 0.4);   /* floored at a tenth of the end */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coverage_ar1_moderate), cmocka_unit_test(test_coverage_ar1_strong),
        cmocka_unit_test(test_coverage_ratio),        cmocka_unit_test(test_naive_interval_undercovers),
        cmocka_unit_test(test_plan),                  cmocka_unit_test(test_t_table),
        cmocka_unit_test(test_mser5),                 cmocka_unit_test(test_table_slope),
        cmocka_unit_test(test_cv_coverage),           cmocka_unit_test(test_cv_wrong_expectation),
        cmocka_unit_test(test_cv_exact_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
