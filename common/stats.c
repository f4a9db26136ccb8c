/* stats.c: batch-means intervals and MSER-5; see stats.h. */
#include "common/stats.h"
#include "common/mem.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double stats_t975(uint32_t dof)
{
    return gsl_cdf_tdist_Pinv(0.5 + STATS_LEVEL / 2, (double)dof);
}

static double lag1_of(const double *v, uint32_t b, double m)
{
    double num = 0, den = 0;
    for (uint32_t i = 0; i < b; i++) den += (v[i] - m) * (v[i] - m);
    for (uint32_t i = 0; i + 1 < b; i++) num += (v[i] - m) * (v[i + 1] - m);
    return den > 0 ? num / den : 0;
}

stats_ci stats_ci_of(const double *v, uint32_t b)
{
    stats_ci c = { NAN, NAN, NAN };
    if (b == 0) return c;
    double m = 0;
    for (uint32_t i = 0; i < b; i++) m += v[i];
    m /= b;
    c.mean = m;
    if (b < 2) return c;
    double ss = 0;
    for (uint32_t i = 0; i < b; i++) ss += (v[i] - m) * (v[i] - m);
    c.half = stats_t975(b - 1) * sqrt(ss / (b - 1) / b);
    c.lag1 = lag1_of(v, b, m);
    return c;
}

/* The b batch values of num / den, batches of len steps from first. */
static void batch_values(const double *num, const double *den, uint32_t first, uint32_t b, uint32_t len, double *v)
{
    for (uint32_t j = 0; j < b; j++) {
        double sn = 0, sd = 0;
        for (uint32_t i = first + j * len; i < first + (j + 1) * len; i++) {
            sn += num[i];
            sd += den ? den[i] : 1;
        }
        v[j] = sd != 0 ? sn / sd : 0;
    }
}

stats_plan stats_plan_of(const double *num, const double *den, uint32_t n)
{
    stats_plan p = { 0, 0, 0, 0 };
    if (n < STATS_MIN_BATCHES) return p;
    uint32_t b = n >= STATS_BATCHES ? STATS_BATCHES : n;
    double v[STATS_BATCHES];
    for (;;) {
        p.b = b;
        p.len = n / b;
        p.first = n - b * p.len;
        batch_values(num, den, p.first, b, p.len, v);
        stats_ci c = stats_ci_of(v, b);
        p.lag1_ok = !(c.lag1 > 1.645 / sqrt((double)b));
        /* Merging pairs needs an even count and keeps at least the minimum. */
        if (p.lag1_ok || b % 2 || b / 2 < STATS_MIN_BATCHES) return p;
        b /= 2;
    }
}

stats_ci stats_ratio_ci(const stats_plan *p, const double *num, const double *den)
{
    if (p->b < STATS_MIN_BATCHES) return (stats_ci){ NAN, NAN, NAN };
    double v[STATS_BATCHES];
    batch_values(num, den, p->first, p->b, p->len, v);
    return stats_ci_of(v, p->b);
}

stats_cv stats_cv_of(const double *y, const double *x, uint32_t b, double mu_x)
{
    stats_cv r;
    r.raw = stats_ci_of(y, b);
    r.ci = r.raw;
    r.beta = 0;
    r.rho = NAN;
    if (b < 3) return r;
    double my = 0, mx = 0;
    for (uint32_t j = 0; j < b; j++) {
        my += y[j];
        mx += x[j];
    }
    my /= b;
    mx /= b;
    double sxy = 0, sxx = 0, syy = 0;
    for (uint32_t j = 0; j < b; j++) {
        sxy += (x[j] - mx) * (y[j] - my);
        sxx += (x[j] - mx) * (x[j] - mx);
        syy += (y[j] - my) * (y[j] - my);
    }
    if (!(sxx > 0)) return r;
    r.beta = sxy / sxx;
    r.rho = syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
    double s2 = (syy - r.beta * sxy) / (b - 2);
    if (s2 < 0) s2 = 0; /* rounding when y is an exact line in x */
    const double dx = mx - mu_x;
    r.ci.mean = my - r.beta * dx;
    r.ci.half = stats_t975(b - 2) * sqrt(s2 * (1.0 / b + dx * dx / sxx));
    /* The residuals' lag-1 autocorrelation, for the batch plan. */
    double *res = dh_calloc(b, sizeof *res);
    for (uint32_t j = 0; j < b; j++) res[j] = y[j] - my - r.beta * (x[j] - mx);
    r.ci.lag1 = lag1_of(res, b, 0);
    free(res);
    return r;
}

stats_cv stats_cv_ratio_on(const stats_plan *p, const double *num, const double *den, const double *ctl, double mu_x)
{
    stats_cv r;
    memset(&r, 0, sizeof r);
    r.ci = r.raw = (stats_ci){ NAN, NAN, NAN };
    r.rho = NAN;
    if (p->b < STATS_MIN_BATCHES) return r;
    double y[STATS_BATCHES], x[STATS_BATCHES];
    batch_values(num, den, p->first, p->b, p->len, y);
    batch_values(ctl, NULL, p->first, p->b, p->len, x);
    r = stats_cv_of(y, x, p->b, mu_x);
    /* The point: the ratio of sums over the batched steps, adjusted by the fitted slope.
     * The mean of the batch ratios carries the ratio's bias of order 1 / len (Jensen: a
     * step's tokens and seconds move together), which the control's narrow interval
     * would expose; the ratio of sums carries it at order 1 / n. */
    if (!isnan(r.ci.half) && r.beta != 0) {
        const uint32_t n = p->first + p->b * p->len;
        double sn = 0, sd = 0, sx = 0;
        for (uint32_t i = p->first; i < n; i++) {
            sn += num[i];
            sd += den ? den[i] : 1;
            sx += ctl[i];
        }
        if (sd != 0) r.ci.mean = sn / sd - r.beta * (sx / (n - p->first) - mu_x);
    }
    return r;
}

stats_cv stats_cv_ratio_ci(const double *num, const double *den, const double *ctl, double mu_x, uint32_t n,
                           stats_plan *p)
{
    *p = (stats_plan){ 0, 0, 0, 0 };
    if (n < STATS_MIN_BATCHES) return stats_cv_ratio_on(p, num, den, ctl, mu_x);
    uint32_t b = n >= STATS_BATCHES ? STATS_BATCHES : n;
    /* Each candidate plan is O(n); at most log2(30 / 10) + 1 = 2 of them. */
    for (;;) {
        p->b = b;
        p->len = n / b;
        p->first = n - b * p->len;
        stats_cv r = stats_cv_ratio_on(p, num, den, ctl, mu_x);
        p->lag1_ok = !(r.ci.lag1 > 1.645 / sqrt((double)b));
        if (p->lag1_ok || b % 2 || b / 2 < STATS_MIN_BATCHES) return r;
        b /= 2;
    }
}

uint32_t stats_mser5(const double *x, uint32_t n)
{
    uint32_t nb = n / 5;
    if (n < 20) return 0;
    double *y = dh_calloc(nb, sizeof *y);
    for (uint32_t j = 0; j < nb; j++) {
        for (uint32_t i = 0; i < 5; i++) y[j] += x[5 * j + i];
        y[j] /= 5;
    }
    /* Suffix sums give each truncation's mean and sum of squares in O(1). */
    double s = 0, s2 = 0, best = INFINITY;
    uint32_t best_d = 0;
    double *suf = dh_calloc(nb + 1, sizeof *suf), *suf2 = dh_calloc(nb + 1, sizeof *suf2);
    for (uint32_t j = nb; j-- > 0;) {
        s += y[j];
        s2 += y[j] * y[j];
        suf[j] = s;
        suf2[j] = s2;
    }
    for (uint32_t d = 0; d <= nb / 2; d++) {
        double m = nb - d, mean = suf[d] / m;
        double ss = suf2[d] - m * mean * mean;
        if (ss < 0) ss = 0;
        double e = ss / (m * m);
        if (e < best) { best = e; best_d = d; }
    }
    free(y);
    free(suf);
    free(suf2);
    return 5 * best_d;
}

stats_oci stats_median_ci(const double *sorted, uint32_t n)
{
    stats_oci o = { NAN, NAN, 0, 0, NAN };
    /* The coverage of ranks [l, n + 1 - l] falls as l grows: take l while it keeps the level. */
    for (uint32_t l = 1; 2 * l <= n; l++) {
        double cov = 1 - 2 * gsl_cdf_binomial_P(l - 1, 0.5, n);
        if (cov < STATS_LEVEL) break;
        o.l = l;
        o.coverage = cov;
    }
    if (o.l) {
        o.u = n + 1 - o.l;
        o.lo = sorted[o.l - 1];
        o.hi = sorted[o.u - 1];
    }
    return o;
}

uint32_t stats_trend_dof(uint32_t b)
{
    return b > 2 ? (uint32_t)(36.0 * (b - 2) / 70) : 0;
}

stats_ci stats_trend_sum_ci(const double *z, uint32_t n)
{
    stats_ci c = { 0, NAN, NAN };
    for (uint32_t i = 0; i < n; i++) c.mean += z[i];
    const uint32_t b = STATS_BATCHES;
    if (n < b) return c;
    const uint32_t len = n / b, first = n - b * len;
    double Z[STATS_BATCHES];
    for (uint32_t j = 0; j < b; j++) {
        Z[j] = 0;
        for (uint32_t i = first + j * len; i < first + (j + 1) * len; i++) Z[j] += z[i];
    }
    double ss = 0;
    for (uint32_t j = 1; j + 1 < b; j++) {
        const double d = Z[j - 1] - 2 * Z[j] + Z[j + 1];
        ss += d * d;
    }
    const double s2 = ss / (6.0 * (b - 2));
    c.half = stats_t975(stats_trend_dof(b)) * sqrt(s2 * n / len);
    return c;
}
