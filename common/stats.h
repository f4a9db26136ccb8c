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

/* MSER-5: the steps of x[0..n) to delete as warm-up (a multiple of 5; 0 when
 * n < 20). */
uint32_t stats_mser5(const double *x, uint32_t n);

#endif
