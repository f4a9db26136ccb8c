/* refit.h: refit of one hardware-profile coefficient on the GPU replay's
 * fitted configurations (`dhcal refit`).
 *
 * Some costs are invisible to isolated kernel benchmarks (back-to-back GEMM
 * launches in a step overlap their fixed costs, which a benchmark timing one
 * launch cannot show).  Such a coefficient c is refitted on whole decode
 * steps: the simulator is run on the replay's configurations at two values
 * c_a and c_b, and each step's predicted time is taken as linear in c between
 * them, p_s(c) = p_s(c_a) + (c - c_a) * slope_s.  The weighted least-squares
 * solution of sum_s ((p_s(c) - m_s) / m_s)^2 over the steps of the FITTED
 * configurations (heldout = 0) is
 *     c* = c_a + sum w slope (m - p_a) / sum w slope^2,   w = 1 / m^2,
 * with standard error sqrt(chi^2 / (n - 1) / sum w slope^2).  Held-out
 * configurations never enter.  The simulator's step time is piecewise linear
 * in c (a layer waiting for its fetch hides part of a longer compute), so the
 * caller iterates: run at c*, refit from the two latest values, until c*
 * printed at REFIT_DIGITS significant digits equals the latest value; only a
 * converged solution is written into a profile, so the statistics recorded
 * are the simulator's own predictions at the written value. */
#ifndef DH_REFIT_H
#define DH_REFIT_H

#include "analysis/valid.h"

#include <stdio.h>

/* Significant digits of a refitted value (its printed form is the fixed point
 * the iteration converges to). */
#define REFIT_DIGITS 4

typedef struct {
    double value, se;            /* c* and its standard error */
    size_t steps, configs;       /* fitted steps and configurations used */
    char config_list[256];       /* their names, space-separated */
    double rms_rel, r2;          /* at c* (weighted R^2 as fit.h defines it) */
    fit_errdist err;             /* |p(c*) - m| / m over the fitted steps */
    double meas_min_us, meas_max_us, mean_meas_us, mean_pred_us;
    double mean_slope;           /* mean d(step time) / dc, us per unit of c */
} refit_result;

/* a and b: the replay joined with the simulator's predictions at c = va and
 * c = vb (va != vb); every step of a fitted configuration must have a
 * prediction in both.  0 or -1 with dh_err(). */
int refit_solve(const val_set *a, double va, const val_set *b, double vb, refit_result *out);

/* Write profile in_path to out_path with [section] key = value (the key must
 * exist), preceded by "; dhcal: refit:" comment lines from comment (one per
 * line; previous such lines above the key are dropped, so a refit of a
 * refitted profile does not accumulate them).  Written to a temporary file,
 * checked with the simulator's loader, then renamed into place. */
int refit_write(const char *in_path, const char *out_path, const char *section, const char *key,
                const char *value, const char *comment);

#endif
