/* stats.h: confidence intervals for figures measured on a simulated series --
 * non-overlapping batch means, and the MSER-5 check of the warm-up.
 *
 * The steps of a run are autocorrelated (a hot buffer fills, a request's
 * context grows), so the spread of single steps understates the uncertainty
 * of their mean. Batch means (Law, "Simulation Modeling and Analysis", 5th
 * ed., section 9.5.3; Schmeiser, Oper. Res. 30(3), 1982) cut the n measured
 * steps into b equal batches, take each batch's figure, and treat those b
 * values as nearly independent: the 95 % interval is
 *     mean(batch) +/- t(0.975, b - 1) x sd(batch) / sqrt(b),
 * Student's quantile from GSL (gsl_cdf_tdist_Pinv). The plan: b = 30 batches
 * (Schmeiser: 10 to 30); when the lag-1 autocorrelation of the batch values
 * is significant at 5 % (one-sided, r1 > 1.645 / sqrt(b), its sd being about
 * 1 / sqrt(b) when they are independent), pairs of batches merge (b = 15,
 * batches twice as long) and the test repeats; if it still fails, the
 * interval is reported with lag1_ok = 0 (it may be too narrow). The first
 * n mod b steps of the measured range are left out of the batches (not of
 * the point estimate). A figure that is a ratio of sums (tokens / seconds)
 * takes, per batch, the batch's ratio of sums.
 *
 * MSER-5 (White, Cobb and Spratt, WSC 2000; Hoad, Robinson and Davies, JORS
 * 61, 2010) picks the warm-up to delete: on the series averaged in groups of
 * five, the truncation d (in the first half) minimising the standard error
 * of the remaining mean, sum_{i>=d} (x_i - mean_d)^2 / (n - d)^2. The runs
 * report it beside their configured warm-up.
 *
 * A control variate (Lavenberg and Welch, Mgmt. Sci. 27(3), 1981; Law,
 * "Simulation Modeling and Analysis", 5th ed., section 11.4) narrows the
 * interval of a figure whose noise follows a quantity of exactly known mean.
 * A speculative run's tokens/s moves with the drafts accepted, and every
 * acceptance is drawn from a table whose expectation the plan knows: the
 * per-step control x_i = accepted_i - E[accepted_i | the plan] has mean 0.
 * With y_j the b batch values of the figure and x_j those of the control
 * (each batch's mean per step), the least-squares slope
 *     beta = S_xy / S_xx    (S_xy = sum (x_j - xbar)(y_j - ybar), ...)
 * gives the controlled estimate  y_cv = ybar - beta (xbar - mu_x)  and, from
 * the regression's residual variance s^2 = (S_yy - beta S_xy) / (b - 2),
 *     half = t(0.975, b - 2) x sqrt(s^2 (1 / b + (xbar - mu_x)^2 / S_xx)),
 * exact when the batch values are jointly normal (Lavenberg and Welch,
 * section 3). The batches merge by pairs while the residuals' lag-1
 * autocorrelation is significant (the same test as above: the acceptance
 * noise the control removes is nearly independent from step to step, what
 * is left follows the requests' contexts and may not be). The control must
 * be zero-mean for every step given the past: a wrong mu_x biases y_cv by
 * beta times the error (tests/test_ci.c plants one).
 *
 * Cost: O(n) per interval; MSER O(n) with running sums. */
#ifndef DH_STATS_H
#define DH_STATS_H

#include <stdint.h>

#define STATS_LEVEL 0.95
#define STATS_BATCHES 30
#define STATS_MIN_BATCHES 10

/* An interval: mean +/- half (half is NAN when it cannot be computed:
 * fewer than STATS_MIN_BATCHES batches of at least one step). */
typedef struct {
    double mean;   /* mean of the batch values */
    double half;   /* half-width at STATS_LEVEL */
    double lag1;   /* lag-1 autocorrelation of the batch values */
} stats_ci;

/* The batches of n measured steps: b batches of len steps each, starting at
 * offset first (n mod b steps left out at the start); b = 0 when n is too
 * short. */
typedef struct {
    uint32_t first, b, len;
    int lag1_ok;   /* the lag-1 test passed at the final batch count */
} stats_plan;

/* The plan for n steps, decided on the series num[i] / den[i] (den NULL: 1):
 * STATS_BATCHES batches, merged by pairs while the lag-1 autocorrelation is
 * significant and at least STATS_MIN_BATCHES would remain. */
stats_plan stats_plan_of(const double *num, const double *den, uint32_t n);

/* The interval of the ratio of sums num / den (den NULL: the plain mean of
 * num) by the batches of plan. */
stats_ci stats_ratio_ci(const stats_plan *p, const double *num, const double *den);

/* The interval from b independent values (the t-interval; b >= 2). */
stats_ci stats_ci_of(const double *v, uint32_t b);

/* Student's t quantile for a two-sided interval at STATS_LEVEL with dof
 * degrees of freedom. */
double stats_t975(uint32_t dof);

/* A control-variate interval (see above): the controlled estimate in ci.mean,
 * its half-width with b - 2 degrees of freedom, the residuals' lag-1
 * autocorrelation in ci.lag1. beta: the fitted slope; rho: the correlation
 * of y and x over the batches; raw: the plain batch-means interval of y. */
typedef struct {
    stats_ci ci, raw;
    double beta, rho;
} stats_cv;

/* From b batch values y[j] and control values x[j] of known mean mu_x. With
 * b < 3, or S_xx = 0 (a constant control carries nothing), ci is the plain
 * interval and beta 0. */
stats_cv stats_cv_of(const double *y, const double *x, uint32_t b, double mu_x);

/* The controlled interval of the ratio of sums num / den (den NULL: the mean
 * of num) with the per-step control ctl of known per-step mean mu_x, over n
 * steps; the batch plan (written to *p) starts at STATS_BATCHES and merges by
 * pairs while the residuals' lag-1 autocorrelation is significant. The point
 * is the batched steps' ratio of sums less beta (their mean control - mu_x):
 * the mean of the batch ratios would carry a bias of order 1 / (batch length)
 * that the narrowed interval no longer hides. */
stats_cv stats_cv_ratio_ci(const double *num, const double *den, const double *ctl, double mu_x, uint32_t n,
                           stats_plan *p);
/* The same on a given plan (another figure of the same run, on its batches). */
stats_cv stats_cv_ratio_on(const stats_plan *p, const double *num, const double *den, const double *ctl, double mu_x);

/* MSER-5: the steps of x[0..n) to delete as warm-up (a multiple of 5; 0 when
 * n < 20). */
uint32_t stats_mser5(const double *x, uint32_t n);

/* A median's distribution-free interval from order statistics (Conover, "Practical
 * Nonparametric Statistics", 3rd ed., section 3.2; David and Nagaraja, "Order Statistics",
 * 3rd ed., section 7.1). For n independent draws of a continuous distribution with median m,
 * the count B of draws below m is Binomial(n, 1/2) whatever the distribution, so the ranks
 * l and u = n + 1 - l (1-based, of the sorted sample) bound m with probability
 *     P(x_(l) <= m <= x_(u)) = P(l <= B <= n - l) = 1 - 2 P(B <= l - 1),
 * exactly. l is the largest rank whose coverage is still at least STATS_LEVEL (gsl_cdf_binomial_P),
 * so the interval is the shortest symmetric-rank one that keeps the level; its coverage,
 * above the level by the binomial's discreteness, is returned. With n <= 5 even the extremes
 * cover less than 95 % (1 - 2^(1-n)): lo, hi NAN and l = 0. O(n) cdf evaluations at most.
 * (The reports' reqlat_quantile keeps its normal approximation of these ranks.) */
typedef struct {
    double lo, hi;      /* x_(l), x_(u); NAN when no rank reaches the level */
    uint32_t l, u;      /* the ranks, 1-based; 0 when none */
    double coverage;    /* the exact coverage for continuous draws */
} stats_oci;
stats_oci stats_median_ci(const double *sorted, uint32_t n);

/* The interval of the sum of a series z[0..n) whose steps are independent noise (or noise
 * correlated over much less than a batch) around a smooth deterministic trend, as one wave of
 * requests has: the batch sums Z_j (STATS_BATCHES batches, the first n mod b steps left out
 * of the batches, not of the sum) are not identically distributed, so their spread about
 * their mean measures the trend, not the noise; the second differences
 * D_j = Z_{j-1} - 2 Z_j + Z_{j+1} (j = 1 .. b - 2) cancel a linear trend exactly and a smooth
 * one nearly, and for independent Z_j of variance s^2 have E D_j^2 = 6 s^2 (Tintner, "The
 * Variate Difference Method", 1940; the first-difference form is von Neumann's mean square
 * successive difference, Ann. Math. Stat. 12(2), 1941). So
 *     s2 = sum D_j^2 / (6 (b - 2)),   Var(sum z) = s2 x n / len,
 * and the half-width is t(0.975, nu) sqrt(s2 n / len) with nu = floor(36 (b - 2) / 70): the
 * D_j overlap (corr(D_j, D_j+1) = -2/3, corr(D_j, D_j+2) = 1/6), so for Gaussian Z_j
 * Var(s2) = 140 (b - 2) s^4 / (36 (b - 2))^2 = 2 s^4 / nu (Satterthwaite's degrees of freedom;
 * 14 for 30 batches). mean: the sum of all n; lag1: NAN (the test of stats_plan_of does not
 * apply to differences). half NAN when n < STATS_BATCHES. O(n). */
stats_ci stats_trend_sum_ci(const double *z, uint32_t n);
/* The degrees of freedom stats_trend_sum_ci uses with b batches. */
uint32_t stats_trend_dof(uint32_t b);

#endif
