/* fit.c: GSL least squares and fit statistics; see fit.h.
 *
 * Sizes are small (tens to thousands of points, at most FIT_MAX_PAR
 * parameters): the linear fit is an SVD, O(n p^2); the nonlinear fit runs at
 * most a few hundred trust-region iterations of the same cost. */
#include "analysis/fit.h"
#include "common/dh_err.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GSL's default handler aborts; library code reports errors instead. */
static void gsl_quiet(void)
{
    static int done;
    if (!done) { gsl_set_error_handler_off(); done = 1; }
}

void fit_stats(const double *pred, const double *y, const double *w, size_t n, fit_result *out)
{
    double sw = 0, swy = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        sw += wi;
        swy += wi * y[i];
    }
    double ybar = sw > 0 ? swy / sw : 0, ssr = 0, sst = 0, rel = 0, abs2 = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0, r = pred[i] - y[i];
        ssr += wi * r * r;
        sst += wi * (y[i] - ybar) * (y[i] - ybar);
        rel += (r / y[i]) * (r / y[i]);
        abs2 += r * r;
    }
    out->npoints = n;
    out->chisq = ssr;
    out->r2 = sst > 0 ? 1.0 - ssr / sst : NAN;
    out->rms_rel = n ? sqrt(rel / (double)n) : NAN;
    out->rms_abs = n ? sqrt(abs2 / (double)n) : NAN;
}

int fit_linear(const double *X, const double *y, const double *w, size_t n, size_t npar,
               fit_result *out)
{
    gsl_quiet();
    memset(out, 0, sizeof *out);
    if (npar == 0 || npar > FIT_MAX_PAR) return dh_err("linear fit: %zu parameters", npar);
    if (n < npar) return dh_err("linear fit: %zu points for %zu parameters", n, npar);
    gsl_matrix *Xm = gsl_matrix_alloc(n, npar), *cov = gsl_matrix_alloc(npar, npar);
    gsl_vector *yv = gsl_vector_alloc(n), *wv = gsl_vector_alloc(n), *c = gsl_vector_alloc(npar);
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(n, npar);
    int rc = 0;
    if (!Xm || !cov || !yv || !wv || !c || !ws) { rc = dh_err("linear fit: out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < npar; j++) gsl_matrix_set(Xm, i, j, X[i * npar + j]);
        gsl_vector_set(yv, i, y[i]);
        gsl_vector_set(wv, i, w ? w[i] : 1.0);
    }
    double chisq;
    size_t rank;
    /* Truncated SVD reports the numerical rank, so a design whose columns are
     * not independent (every point at one row size, say) is named instead of
     * producing arbitrary coefficients. */
    int g = gsl_multifit_wlinear_tsvd(Xm, wv, yv, 1e-12, c, cov, &chisq, &rank, ws);
    if (g) { rc = dh_err("linear fit: gsl: %s", gsl_strerror(g)); goto done; }
    if (rank < npar) {
        rc = dh_err("linear fit: the data determine only %zu of %zu parameters (vary the inputs)", rank, npar);
        goto done;
    }
    out->npar = npar;
    double scale = n > npar ? chisq / (double)(n - npar) : NAN;
    for (size_t j = 0; j < npar; j++) {
        out->p[j] = gsl_vector_get(c, j);
        out->se[j] = sqrt(gsl_matrix_get(cov, j, j) * scale);
    }
    double *pred = malloc(n * sizeof *pred);
    if (!pred) abort();
    for (size_t i = 0; i < n; i++) {
        pred[i] = 0;
        for (size_t j = 0; j < npar; j++) pred[i] += X[i * npar + j] * out->p[j];
    }
    fit_stats(pred, y, w, n, out);
    free(pred);
done:
    gsl_matrix_free(Xm);
    gsl_matrix_free(cov);
    gsl_vector_free(yv);
    gsl_vector_free(wv);
    gsl_vector_free(c);
    if (ws) gsl_multifit_linear_free(ws);
    return rc;
}

/* The nonlinear solver sees only the free parameters; this maps them back. */
typedef struct {
    const fit_model *m;
    const double *y;
    size_t n, nfree;
    size_t free_idx[FIT_MAX_PAR];
    double full[FIT_MAX_PAR];
} nl_ctx;

static void nl_expand(nl_ctx *c, const gsl_vector *x)
{
    for (size_t j = 0; j < c->nfree; j++) c->full[c->free_idx[j]] = gsl_vector_get(x, j);
}

static int nl_f(const gsl_vector *x, void *data, gsl_vector *f)
{
    nl_ctx *c = data;
    nl_expand(c, x);
    for (size_t i = 0; i < c->n; i++) {
        double v = c->m->eval(c->m->model, i, c->full, NULL);
        if (!isfinite(v)) return GSL_EDOM;
        gsl_vector_set(f, i, v - c->y[i]);
    }
    return GSL_SUCCESS;
}

static int nl_df(const gsl_vector *x, void *data, gsl_matrix *J)
{
    nl_ctx *c = data;
    double grad[FIT_MAX_PAR];
    nl_expand(c, x);
    for (size_t i = 0; i < c->n; i++) {
        memset(grad, 0, sizeof grad);
        c->m->eval(c->m->model, i, c->full, grad);
        for (size_t j = 0; j < c->nfree; j++) gsl_matrix_set(J, i, j, grad[c->free_idx[j]]);
    }
    return GSL_SUCCESS;
}

int fit_nonlinear(const fit_model *m, const double *y, const double *w, size_t n,
                  const double *p0, const int *fixed, fit_result *out)
{
    gsl_quiet();
    memset(out, 0, sizeof *out);
    if (m->npar == 0 || m->npar > FIT_MAX_PAR) return dh_err("nonlinear fit: %zu parameters", m->npar);
    nl_ctx c = {.m = m, .y = y, .n = n};
    for (size_t j = 0; j < m->npar; j++) {
        c.full[j] = p0[j];
        if (!fixed || !fixed[j]) c.free_idx[c.nfree++] = j;
    }
    if (c.nfree == 0) return dh_err("nonlinear fit: every parameter is fixed");
    if (n < c.nfree) return dh_err("nonlinear fit: %zu points for %zu free parameters", n, c.nfree);

    gsl_multifit_nlinear_fdf fdf = {.f = nl_f, .df = nl_df, .n = n, .p = c.nfree, .params = &c};
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    /* Parameters span many decades (seconds per byte next to microseconds), so
     * the solver scales each direction by its Jacobian column (More scaling). */
    par.scale = gsl_multifit_nlinear_scale_more;
    gsl_multifit_nlinear_workspace *ws = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, n, c.nfree);
    gsl_vector *x0 = gsl_vector_alloc(c.nfree), *wv = gsl_vector_alloc(n);
    gsl_matrix *cov = gsl_matrix_alloc(c.nfree, c.nfree);
    int rc = 0;
    if (!ws || !x0 || !wv || !cov) { rc = dh_err("nonlinear fit: out of memory"); goto done; }
    for (size_t j = 0; j < c.nfree; j++) gsl_vector_set(x0, j, p0[c.free_idx[j]]);
    for (size_t i = 0; i < n; i++) gsl_vector_set(wv, i, w ? w[i] : 1.0);
    int g = gsl_multifit_nlinear_winit(x0, wv, &fdf, ws);
    if (g) { rc = dh_err("nonlinear fit: gsl: %s (at the start values)", gsl_strerror(g)); goto done; }
    int info;
    g = gsl_multifit_nlinear_driver(500, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, ws);
    /* GSL_EMAXITER with a finite cost still leaves a usable optimum in most
     * cases, but a profile must not rest on an unconverged fit. */
    if (g) { rc = dh_err("nonlinear fit: gsl: %s after %zu iterations", gsl_strerror(g), gsl_multifit_nlinear_niter(ws)); goto done; }
    gsl_vector *xs = gsl_multifit_nlinear_position(ws);
    nl_expand(&c, xs);
    g = gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(ws), 1e-12, cov);
    if (g) { rc = dh_err("nonlinear fit: covariance: gsl: %s", gsl_strerror(g)); goto done; }
    out->npar = m->npar;
    out->iterations = (int)gsl_multifit_nlinear_niter(ws);
    double *pred = malloc(n * sizeof *pred);
    if (!pred) abort();
    for (size_t i = 0; i < n; i++) pred[i] = m->eval(m->model, i, c.full, NULL);
    fit_stats(pred, y, w, n, out);
    free(pred);
    double scale = n > c.nfree ? out->chisq / (double)(n - c.nfree) : NAN;
    for (size_t j = 0; j < m->npar; j++) { out->p[j] = c.full[j]; out->se[j] = 0; }
    for (size_t j = 0; j < c.nfree; j++)
        out->se[c.free_idx[j]] = sqrt(gsl_matrix_get(cov, j, j) * scale);
done:
    if (ws) gsl_multifit_nlinear_free(ws);
    gsl_vector_free(x0);
    gsl_vector_free(wv);
    gsl_matrix_free(cov);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fit_percentile(double *v, size_t n, double q)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    size_t rank = (size_t)ceil(q / 100.0 * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

double fit_median(double *v, size_t n)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void fit_error_distribution(const double *pred, const double *meas, size_t n, fit_errdist *out)
{
    double *e = malloc((n ? n : 1) * sizeof *e);
    if (!e) abort();
    out->n = n;
    out->max = n ? 0 : NAN;
    for (size_t i = 0; i < n; i++) {
        e[i] = fabs(pred[i] - meas[i]) / meas[i];
        if (e[i] > out->max) out->max = e[i];
    }
    out->median = fit_median(e, n);
    out->p95 = fit_percentile(e, n, 95);
    free(e);
}
