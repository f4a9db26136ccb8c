/* test_stats_median.c: the intervals the validation table adds (common/stats.h), on
 * synthetic series whose answer is known.
 *   - the median's order-statistics interval (stats_median_ci): its ranks and coverage
 *     against a slow obvious reference (the binomial sum in integers, every rank tried);
 *     coverage of the known median over 2000 independent samples of n draws from an
 *     exponential (median ln 2), a lognormal and a Cauchy distribution (distribution-free:
 *     the same coverage for each), within four binomial standard deviations of the exact
 *     coverage the function states (at least 95 %); a planted fault, the interval narrowed
 *     halfway towards the sample median, fails the same check; n <= 5 gives no interval;
 *   - the trend-robust sum interval (stats_trend_sum_ci): a linear trend added to the noise
 *     leaves the half-width as it was (second differences cancel it exactly); coverage of the
 *     known expected sum of a series with a quadratic trend and AR(1) noise, within four
 *     binomial standard deviations of 95 %; a planted fault, the variance halved, fails. */
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

#define TRIALS 2000

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The reference: P(l <= B <= n - l) for B ~ Binomial(n, 1/2), in exact integer counts. */
static double ref_coverage(uint32_t n, uint32_t l)
{
    /* C(n, i) in long double: exact for n <= 60 (below 2^64). */
    long double c = 1, below = 0;
    for (uint32_t i = 0; i < l; i++) {
        below += c;
        c = c * (n - i) / (i + 1);
    }
    return (double)(1 - 2 * below / powl(2, n));
}

static void test_ranks_against_reference(void **st)
{
    (void)st;
    double x[64];
    for (int i = 0; i < 64; i++) x[i] = i;
    for (uint32_t n = 1; n <= 60; n++) {
        stats_oci o = stats_median_ci(x, n);
        uint32_t best = 0;
        for (uint32_t l = 1; 2 * l <= n; l++)
            if (ref_coverage(n, l) >= STATS_LEVEL) best = l;
        assert_int_equal(o.l, best);
        if (!best) {
            assert_true(n <= 5);
            assert_true(isnan(o.lo) && isnan(o.hi));
            continue;
        }
        assert_int_equal(o.u, n + 1 - best);
        assert_true(fabs(o.coverage - ref_coverage(n, best)) < 1e-9);
        assert_true(o.coverage >= STATS_LEVEL);
        assert_true(o.lo == x[best - 1] && o.hi == x[n - best]);
    }
}

enum { D_EXP, D_LOGNORMAL, D_CAUCHY };

static double draw(gsl_rng *r, int d)
{
    return d == D_EXP ? gsl_ran_exponential(r, 1.0) : d == D_LOGNORMAL ? gsl_ran_lognormal(r, 0.3, 1.2)
                                                                        : gsl_ran_cauchy(r, 2.0);
}

static double median_of(int d)
{
    return d == D_EXP ? log(2.0) : d == D_LOGNORMAL ? exp(0.3) : 0.0;
}

/* Coverage of the known median over TRIALS samples of n draws; shrink > 0 moves each end's
 * rank that fraction of the way to the middle (the planted fault). *stated: the coverage the
 * function gives for n. */
static double coverage(int d, uint32_t n, double shrink, unsigned long seed, double *stated)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    double *x = malloc(n * sizeof *x), m = median_of(d);
    int hit = 0;
    for (int k = 0; k < TRIALS; k++) {
        for (uint32_t i = 0; i < n; i++) x[i] = draw(r, d);
        qsort(x, n, sizeof *x, cmp);
        stats_oci o = stats_median_ci(x, n);
        assert_true(o.l > 0);
        *stated = o.coverage;
        double lo = o.lo, hi = o.hi;
        if (shrink > 0) {
            uint32_t mid = (n + 1) / 2, l = o.l + (uint32_t)(shrink * (mid - o.l)), u = n + 1 - l;
            lo = x[l - 1];
            hi = x[u - 1];
        }
        hit += lo <= m && m <= hi;
    }
    free(x);
    gsl_rng_free(r);
    return (double)hit / TRIALS;
}

/* Within four binomial sd of the stated coverage, and not below the level by more. */
static int coverage_ok(double cov, double stated)
{
    double sd = sqrt(stated * (1 - stated) / TRIALS);
    print_message("coverage %.4f (stated %.4f +/- %.4f)\n", cov, stated, 4 * sd);
    return fabs(cov - stated) <= 4 * sd && cov >= STATS_LEVEL - 4 * sd;
}

static void test_median_coverage(void **st)
{
    (void)st;
    const uint32_t ns[] = { 8, 25, 101, 400 };
    unsigned long seed = 11;
    for (int d = D_EXP; d <= D_CAUCHY; d++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            double stated;
            double cov = coverage(d, ns[i], 0, seed++, &stated);
            assert_true(coverage_ok(cov, stated));
        }
}

static void test_median_planted_narrow(void **st)
{
    (void)st;
    const uint32_t ns[] = { 25, 101, 400 };
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        double stated;
        double cov = coverage(D_EXP, ns[i], 0.5, 100 + i, &stated);
        assert_false(coverage_ok(cov, stated));
    }
}

/* One stationary AR(1) path of n values, mean 0, innovation sd s. */
static void ar1(gsl_rng *r, double phi, double s, uint32_t n, double *x)
{
    double y = gsl_ran_gaussian(r, s / sqrt(1 - phi * phi));
    for (uint32_t i = 0; i < n; i++) {
        x[i] = y;
        y = phi * y + gsl_ran_gaussian(r, s);
    }
}

static void test_trend_cancels_linear(void **st)
{
    (void)st;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 5);
    const uint32_t n = 3007; /* n mod 30 steps left out of the batches */
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    ar1(r, 0.3, 1.0, n, a);
    for (uint32_t i = 0; i < n; i++) b[i] = a[i] + 40 - 0.02 * i;
    stats_ci ca = stats_trend_sum_ci(a, n), cb = stats_trend_sum_ci(b, n);
    assert_true(fabs(ca.half - cb.half) <= 1e-6 * ca.half);
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) sum += b[i];
    assert_true(fabs(cb.mean - sum) <= 1e-9 * fabs(sum));
    assert_true(isnan(stats_trend_sum_ci(a, 29).half));
    assert_int_equal(stats_trend_dof(30), 14);
    free(a);
    free(b);
    gsl_rng_free(r);
}

/* Coverage of the known expected sum of trend + AR(1) noise; scale multiplies the
 * half-width (the planted fault). */
static double trend_coverage(double scale, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    const uint32_t n = 3000;
    double *x = malloc(n * sizeof *x), truth = 0;
    for (uint32_t i = 0; i < n; i++) {
        double t = (double)i / n;
        truth += 0.05 + 0.01 * t + 0.02 * t * t;
    }
    int hit = 0;
    for (int k = 0; k < TRIALS; k++) {
        ar1(r, 0.5, 0.002, n, x);
        for (uint32_t i = 0; i < n; i++) {
            double t = (double)i / n;
            x[i] += 0.05 + 0.01 * t + 0.02 * t * t;
        }
        stats_ci c = stats_trend_sum_ci(x, n);
        hit += fabs(c.mean - truth) <= scale * c.half;
    }
    free(x);
    gsl_rng_free(r);
    return (double)hit / TRIALS;
}

static void test_trend_coverage(void **st)
{
    (void)st;
    assert_true(coverage_ok(trend_coverage(1, 21), STATS_LEVEL));
    assert_false(coverage_ok(trend_coverage(sqrt(0.5), 22), STATS_LEVEL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_against_reference), cmocka_unit_test(test_median_coverage),
        cmocka_unit_test(test_median_planted_narrow),   cmocka_unit_test(test_trend_cancels_linear),
        cmocka_unit_test(test_trend_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
