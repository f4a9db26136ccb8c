/* fit.h: weighted least squares through GSL, with the statistics a hardware
 * profile records for each fitted coefficient.
 *
 * Two engines:
 *   fit_linear()    y = X p, weighted, by gsl_multifit_wlinear (gsl_multifit_linear
 *                   when no weights are given): exact, no start values.
 *   fit_nonlinear() y = f(x; p) for model forms that are not linear in their
 *                   parameters (a max() of bottlenecks, a saturation), by GSL's
 *                   trust-region Levenberg-Marquardt (gsl_multifit_nlinear) from
 *                   given start values; the Jacobian is the caller's.
 * Timings carry relative noise (a few per cent whatever their size), so the
 * callers weight each point by 1/y^2: the fit then minimises relative errors and
 * a 10 us kernel counts as much as a 10 ms one.
 *
 * Statistics (fit_result):
 *   r2        weighted coefficient of determination 1 - sum w r^2 / sum w (y - ybar_w)^2,
 *             in the same weighting as the fit (with w = 1/y^2 it is relative);
 *   rms_rel   root mean square of (pred - meas) / meas over the points;
 *   rms_abs   root mean square of pred - meas, in the units of y;
 *   se[i]     standard error of p[i] from the covariance scaled by the residual
 *             variance (chi^2 / (n - p)); NAN when n <= p.
 * All functions return 0, or -1 with dh_err() set (singular system, GSL error). */
#ifndef DH_FIT_H
#define DH_FIT_H

#include <stddef.h>

#define FIT_MAX_PAR 24

typedef struct {
    size_t npar, npoints;
    double p[FIT_MAX_PAR], se[FIT_MAX_PAR];
    double r2, rms_rel, rms_abs, chisq;
    int iterations; /* nonlinear only */
} fit_result;

/* X is n x npar, row-major.  w may be NULL (unit weights). */
int fit_linear(const double *X, const double *y, const double *w, size_t n, size_t npar,
               fit_result *out);

/* A nonlinear model: f(x_i; p) and its gradient d f / d p_j for point i.  x is an
 * opaque pointer to the caller's per-point inputs. */
typedef struct {
    size_t npar;
    double (*eval)(const void *model, size_t i, const double *p, double *grad /* may be NULL */);
    const void *model;
} fit_model;

/* p0 are the start values; fixed[j] != 0 keeps p[j] at p0[j] (its se is 0).
 * fixed may be NULL. */
int fit_nonlinear(const fit_model *m, const double *y, const double *w, size_t n,
                  const double *p0, const int *fixed, fit_result *out);

/* Fill r2 / rms_rel / rms_abs for given predictions (shared by both engines
 * and by hold-out reporting). */
void fit_stats(const double *pred, const double *y, const double *w, size_t n, fit_result *out);

/* Relative errors |pred - meas| / meas: median, nearest-rank p95 and max. */
typedef struct { size_t n; double median, p95, max; } fit_errdist;
void fit_error_distribution(const double *pred, const double *meas, size_t n, fit_errdist *out);
/* Nearest-rank percentile of v[0..n) (v is sorted in place): the value at rank
 * ceil(q/100 * n); median is the mean of the two middle values for even n. */
double fit_percentile(double *v, size_t n, double q);
double fit_median(double *v, size_t n);

#endif
