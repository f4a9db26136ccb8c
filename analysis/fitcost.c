/* fitcost.c: the cost-model forms and their fit to dhbench results; see fitcost.h.
 *
 * Flow of fit_bench(): group checked lines by kernel, take out the hold-out
 * lines, pick one version per kernel, fit the kernel's form (GEMMs once per
 * dtype), check that the result is physical, and record coefficients with
 * standard errors, fit statistics and the range of every input.  Work is
 * O(lines x versions) for the selection plus the fits, well under a second
 * for thousands of lines. */
#include "analysis/fitcost.h"
#include "sim/cost.h"
#include "sim/hw.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const form_names[] = {"fetch", "hbm", "indexer", "gemm", "const", "beside", "topk", "none"};

const char *fit_form_name(fit_form f) { return form_names[f]; }

int fit_form_parse(const char *name, fit_form *out)
{
    for (int f = 0; f <= FIT_FORM_NONE; f++)
        if (f != FIT_FORM_BESIDE && !strcmp(name, form_names[f])) { *out = (fit_form)f; return 0; }
    return dh_err("unknown model form '%s' (fetch, hbm, indexer, gemm, const, none)", name);
}

fit_form fit_form_for_kernel(const char *kernel)
{
    if (strstr(kernel, "fetch")) return FIT_FORM_FETCH;
    if (strstr(kernel, "indexer")) return FIT_FORM_INDEXER;
    if (strstr(kernel, "gemm")) return FIT_FORM_GEMM;
    if (strstr(kernel, "topk")) return FIT_FORM_TOPK;
    if (strstr(kernel, "attn") || strstr(kernel, "attention") || strstr(kernel, "verif"))
        return FIT_FORM_HBM;
    return FIT_FORM_NONE;
}

void fit_opts_default(fit_opts *o)
{
    memset(o, 0, sizeof *o);
    o->min_r2 = 0.9;
    o->page_bytes = 4096;   /* region_bytes stays 0: no density term unless the base profile sets it */
}

int fit_fetch_pages(const char *pattern, double rows, double row_bytes, double pool_bytes,
                    double ctx, double k, double page_bytes, double *pages)
{
    if (!pattern) pattern = "";
    /* Suffixes after '+' (page kind, host threads) do not change which rows are read. */
    size_t base = strcspn(pattern, "+");
    if (!strncmp(pattern, "uniform", 7) && (base == 7 || !strncmp(pattern, "uniform_sorted", base))) {
        double P = pool_bytes / page_bytes;
        if (!(P >= 1)) return dh_err("pattern '%s' needs pool_bytes of at least one page", pattern);
        /* Expected distinct pages after rows uniform draws over P pages. */
        *pages = P * -expm1(-rows / P);
        return 0;
    }
    if (!strncmp(pattern, "serving", 7)) {
        if (isnan(ctx) || isnan(k) || k <= 0 || ctx <= 0) { *pages = rows; return 0; }
        double Pw = ctx * row_bytes / page_bytes;
        *pages = rows / k * Pw * -expm1(-k / Pw);
        return 0;
    }
    return dh_err("fetch pattern '%s' unknown (uniform, uniform_sorted, serving, serving_sorted)", pattern);
}

int fit_fetch_density(const char *pattern, double rows, double row_bytes, double pool_bytes,
                      double ctx, double k, double region_bytes, double *rho)
{
    if (!pattern) return dh_err("a fetch line without a pattern has no density");
    size_t base = strcspn(pattern, "+");
    if (!(region_bytes > 0)) return dh_err("the fetch's density needs region_bytes > 0");
    if (base == 14 && !strncmp(pattern, "uniform_sorted", 14)) {
        double R = pool_bytes / region_bytes;
        if (!(R >= 1)) return dh_err("pattern '%s' needs pool_bytes of at least one region", pattern);
        *rho = rows / (R * -expm1(-rows / R));
        return 0;
    }
    if (base == 7 && !strncmp(pattern, "uniform", 7)) { *rho = 1; return 0; }
    if (!strncmp(pattern, "serving", 7)) {
        if (isnan(ctx) || isnan(k) || !(k > 0) || !(ctx >= k))
            return dh_err("pattern '%s' needs ctx (rows per window) >= k (rows drawn per window) > 0 for the fetch's "
                          "density (recorded by dhbench since the density term)", pattern);
        *rho = fit_window_density(k, ctx, row_bytes, region_bytes);
        return 0;
    }
    return dh_err("fetch pattern '%s' unknown (uniform, uniform_sorted, serving, serving_sorted)", pattern);
}

double fit_window_density(double m, double window_rows, double row_bytes, double region_bytes)
{
    return m / hw_window_bins(m, window_rows, row_bytes, region_bytes);
}

/* ---- hold-out specs ---------------------------------------------------- */

static int cond_match(const bcsv_row *r, const char *cond, int *match)
{
    const char *op = strpbrk(cond, "<>=");
    if (!op || op == cond) return dh_err("hold-out condition '%s': expected column=value, column<=value or column>=value", cond);
    size_t nl = (size_t)(op - cond);
    int kind = 0; /* 0 '=', 1 '<=', 2 '>=' */
    const char *val = op + 1;
    if (*op == '<' || *op == '>') {
        if (op[1] != '=') return dh_err("hold-out condition '%s': use <= or >=", cond);
        kind = *op == '<' ? 1 : 2;
        val = op + 2;
    }
    char name[64];
    if (nl >= sizeof name) return dh_err("hold-out condition '%s': column name too long", cond);
    memcpy(name, cond, nl);
    name[nl] = 0;
    for (int c = 0; c < BCSV_NSTR; c++)
        if (!strcmp(name, bcsv_str_name(c))) {
            if (kind) return dh_err("hold-out condition '%s': text column '%s' takes only '='", cond, name);
            *match = r->s[c] && !strcmp(r->s[c], val);
            return 0;
        }
    for (int c = 0; c < BCSV_NNUM; c++)
        if (!strcmp(name, bcsv_num_name(c))) {
            char *end;
            double x = strtod(val, &end);
            if (end == val || *end) return dh_err("hold-out condition '%s': '%s' is not a number", cond, val);
            double v = r->v[c];
            *match = !isnan(v) && (kind == 0 ? v == x : kind == 1 ? v <= x : v >= x);
            return 0;
        }
    return dh_err("hold-out condition '%s': unknown column '%s'", cond, name);
}

int fit_holdout_match(const bcsv_row *r, const char *spec, int *match)
{
    char buf[512];
    if (strlen(spec) >= sizeof buf) return dh_err("hold-out spec too long");
    strcpy(buf, spec);
    *match = 1;
    for (char *save, *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        int m = 0;
        if (cond_match(r, c, &m) < 0) return -1;
        if (!m) *match = 0;
    }
    return 0;
}

/* ---- version selection ---------------------------------------------------- */

/* The configuration a line measures: every input column, not the timings, with the given
 * pattern (config_key: the line's own). */
static void config_key_as(const bcsv_row *r, const char *pattern, char *buf, size_t cap)
{
    static const int inputs[] = {BCSV_ROW_BYTES, BCSV_ROWS, BCSV_SMS, BCSV_POOL_BYTES, BCSV_BATCH,
                                 BCSV_QUERIES, BCSV_K, BCSV_UNION_ROWS, BCSV_CTX, BCSV_HEADS,
                                 BCSV_M, BCSV_N, BCSV_KDIM};
    size_t off = (size_t)snprintf(buf, cap, "%s|%s", r->s[BCSV_DTYPE] ? r->s[BCSV_DTYPE] : "", pattern);
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0] && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "|%.17g", r->v[inputs[i]]);
}

static void config_key(const bcsv_row *r, char *buf, size_t cap)
{
    config_key_as(r, r->s[BCSV_PATTERN] ? r->s[BCSV_PATTERN] : "", buf, cap);
}

/* Lines are values of one kernel.  The line's comparable cost: median_us when
 * present, else the time per byte implied by gbps. */
static double line_cost(const bcsv_row *r)
{
    if (!isnan(r->v[BCSV_MEDIAN_US])) return r->v[BCSV_MEDIAN_US];
    if (!isnan(r->v[BCSV_GBPS]) && r->v[BCSV_GBPS] > 0) return 1.0 / r->v[BCSV_GBPS];
    return NAN;
}

static int str_in(char **list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], s)) return (int)i;
    return -1;
}

/* Choose the version: an override if given, the only one if one, else the one
 * with the smallest geometric mean cost over the configurations that every
 * version measured. */
static int choose_version(const bcsv_row **rows, size_t n, const char *kernel, const fit_opts *o,
                          char *chosen, size_t cap, char *seen, size_t seencap, char *why, size_t whycap)
{
    char *vers[32];
    size_t nv = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = rows[i]->s[BCSV_VERSION] ? rows[i]->s[BCSV_VERSION] : "";
        if (str_in(vers, nv, v) < 0) {
            if (nv == 32) return dh_err("kernel '%s': more than 32 versions", kernel);
            vers[nv++] = (char *)v;
        }
    }
    size_t off = 0;
    seen[0] = 0;
    for (size_t i = 0; i < nv && off < seencap; i++)
        off += (size_t)snprintf(seen + off, seencap - off, "%s%s", i ? " " : "", vers[i]);
    for (const char *const *ov = o->versions; ov && *ov; ov++) {
        const char *eq = strchr(*ov, '=');
        if (eq && (size_t)(eq - *ov) == strlen(kernel) && !strncmp(*ov, kernel, (size_t)(eq - *ov))) {
            if (str_in(vers, nv, eq + 1) < 0)
                return dh_err("--version %s: kernel '%s' has no version '%s' (has %s)", *ov, kernel, eq + 1, seen);
            snprintf(chosen, cap, "%s", eq + 1);
            snprintf(why, whycap, "chosen on the command line");
            return 0;
        }
    }
    if (nv == 1) {
        snprintf(chosen, cap, "%s", vers[0]);
        snprintf(why, whycap, "the only version measured");
        return 0;
    }
    /* Configurations measured by every version: O(n^2) string compares, fine
     * for the thousands of lines one kernel has. */
    char (*keys)[512] = malloc(n * sizeof *keys);
    int *vid = malloc(n * sizeof *vid);
    if (!keys || !vid) abort();
    for (size_t i = 0; i < n; i++) {
        config_key(rows[i], keys[i], sizeof keys[i]);
        vid[i] = str_in(vers, nv, rows[i]->s[BCSV_VERSION] ? rows[i]->s[BCSV_VERSION] : "");
    }
    double logsum[32] = {0};
    size_t shared = 0;
    for (size_t i = 0; i < n; i++) {
        if (vid[i] != 0) continue;
        double cost[32];
        int found = 0;
        for (size_t v = 0; v < nv; v++) cost[v] = NAN;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(keys[i], keys[j]) && isnan(cost[vid[j]])) { cost[vid[j]] = line_cost(rows[j]); found++; }
        int all = found == (int)nv;
        for (size_t v = 0; v < nv && all; v++) all = cost[v] > 0;
        if (!all) continue;
        shared++;
        for (size_t v = 0; v < nv; v++) logsum[v] += log(cost[v]);
    }
    free(keys);
    free(vid);
    if (!shared)
        return dh_err("kernel '%s': versions %s share no configuration; choose one with --version %s=VERSION", kernel, seen, kernel);
    size_t best = 0;
    for (size_t v = 1; v < nv; v++)
        if (logsum[v] < logsum[best]) best = v;
    snprintf(chosen, cap, "%s", vers[best]);
    snprintf(why, whycap, "fastest by geometric mean over %zu configurations all versions measured", shared);
    return 0;
}

/* ---- ranges and coefficients ---------------------------------------------- */

static void range_add(fit_section *s, const char *name, double v)
{
    if (isnan(v)) return;
    for (size_t i = 0; i < s->nrange; i++)
        if (!strcmp(s->range[i].name, name)) {
            if (v < s->range[i].min) s->range[i].min = v;
            if (v > s->range[i].max) s->range[i].max = v;
            return;
        }
    DH_BUG_ON(s->nrange == FIT_MAX_RANGE);
    s->range[s->nrange++] = (fit_range){name, v, v};
}

static void coef_add(fit_section *s, const char *key, double value, double se, int fixed_zero, double fit_value, double fit_se)
{
    DH_BUG_ON(s->ncoef == sizeof s->coef / sizeof s->coef[0]);
    fit_coef *c = &s->coef[s->ncoef++];
    snprintf(c->key, sizeof c->key, "%s", key);
    c->value = value;
    c->se = se;
    c->fixed_zero = fixed_zero;
    c->fit_value = fit_value;
    c->fit_se = fit_se;
}

/* ---- fetch form ------------------------------------------------------------- */

typedef struct {
    double rows, s, sms, pool, pages;
    double rho; /* rows per region entered (fit_fetch_density); NAN: no density term */
    int group;  /* pattern group, -1 when the line has no page term */
} fetch_pt;

typedef struct { const fetch_pt *pt; } fetch_model;

static const char *fetch_par_name(size_t j, char **groups)
{
    static const char *const names[] = {"t0_us", "sm_row_ns", "row_issue_ns", "row_issue_ns_per_byte",
                                        "link_ns_per_byte", "walk_reach_gb", "density_ns", "density_pow"};
    static char buf[80];
    if (j < FIT_FP_PAGE0) return names[j];
    snprintf(buf, sizeof buf, "%s_%s", (j - FIT_FP_PAGE0) % 2 ? "page_reach" : "page_ns", groups[(j - FIT_FP_PAGE0) / 2]);
    return buf;
}

/* The simulator's fetch form (sim/cost.h) with the fit's parameters, in ns and bytes. */
static cost_fetch_fit fetch_form(const double *p, int group)
{
    cost_fetch_fit f = {.t0 = p[FIT_FP_T0] * 1000.0, .sm_row = p[FIT_FP_SM], .row_issue = p[FIT_FP_ISSUE],
                        .row_issue_per_byte = p[FIT_FP_ISSUE_B], .link_per_byte = p[FIT_FP_LINK],
                        .density = p[FIT_FP_DENS], .density_pow = p[FIT_FP_DENS_POW], .walk_reach = p[FIT_FP_WALK] * 1e9};
    if (group >= 0) {
        f.page = p[FIT_FP_PAGE0 + 2 * (size_t)group];
        f.page_reach = p[FIT_FP_PAGE0 + 2 * (size_t)group + 1];
    }
    return f;
}

/* Per-row time in ns, the simulator's form evaluated, and its gradient. The max() of
 * bottlenecks is not smooth at the crossovers; the gradient is the active branch's, which
 * the trust-region solver handles since each point sits on one branch. */
static double fetch_eval_pt(const fetch_pt *x, const double *p, double *g)
{
    const cost_fetch_fit f = fetch_form(p, x->group);
    int br;
    double y = cost_fetch_fit_row(&f, x->s, x->sms, x->rho, &br);
    if (!isnan(x->rows)) y = cost_fetch_fit_launch(&f, x->rows, x->s, x->sms, x->rho, x->group >= 0 ? x->pages : NAN, x->pool) / x->rows;
    if (!g) return y;
    const double lr = isnan(x->rho) ? 0 : log(x->rho);
    const double D = isnan(x->rho) ? 0 : p[FIT_FP_DENS] * exp(-p[FIT_FP_DENS_POW] * lr);
    if (br == 0) g[FIT_FP_SM] = 1 / x->sms;
    else if (br == 1) {
        g[FIT_FP_ISSUE] = 1;
        g[FIT_FP_ISSUE_B] = x->s;
        if (!isnan(x->rho)) {
            g[FIT_FP_DENS] = exp(-p[FIT_FP_DENS_POW] * lr);
            g[FIT_FP_DENS_POW] = -D * lr;
        }
    } else g[FIT_FP_LINK] = x->s;
    if (!isnan(x->rows)) {
        g[FIT_FP_T0] = 1000.0 / x->rows;
        if (x->group >= 0) {
            size_t pn = FIT_FP_PAGE0 + 2 * (size_t)x->group, pr = pn + 1;
            double over = x->pages - p[pr], w = 1.0 - p[FIT_FP_WALK] * 1e9 / x->pool;
            if (over > 0 && w > 0) {
                g[pn] = over * w / x->rows;
                g[pr] = -p[pn] * w / x->rows;
                g[FIT_FP_WALK] = -p[pn] * over * 1e9 / x->pool / x->rows;
            }
        }
    }
    return y;
}

static double fetch_eval(const void *model, size_t i, const double *p, double *grad)
{
    const fetch_model *m = model;
    return fetch_eval_pt(&m->pt[i], p, grad);
}

double fit_fetch_time_us(const double *p, double rows, double row_bytes, double sms,
                         double pool_bytes, double pages, double rho, int pattern_group)
{
    fetch_pt x = {rows, row_bytes, sms, pool_bytes, pages, rho, pattern_group};
    return fetch_eval_pt(&x, p, NULL) * rows / 1000.0;
}

/* Measured per-row time in ns, the quantity the fetch fit works in. */
static int fetch_point(const bcsv_row *r, const fit_opts *o, char **groups, size_t *ngroups,
                       fetch_pt *pt, double *y, const char *file)
{
    pt->s = r->v[BCSV_ROW_BYTES];
    pt->sms = r->v[BCSV_SMS];
    pt->rows = r->v[BCSV_ROWS];
    pt->pool = r->v[BCSV_POOL_BYTES];
    pt->group = -1;
    pt->pages = NAN;
    pt->rho = NAN;
    if (!(pt->s > 0)) return dh_err("file '%s' line %ld: fetch line needs row_bytes > 0", file, r->line);
    if (!(pt->sms > 0)) return dh_err("file '%s' line %ld: fetch line needs sms > 0", file, r->line);
    if (!isnan(pt->rows) && !isnan(r->v[BCSV_MEDIAN_US])) {
        if (!(pt->rows > 0) || !(r->v[BCSV_MEDIAN_US] > 0))
            return dh_err("file '%s' line %ld: fetch line needs rows > 0 and median_us > 0", file, r->line);
        *y = r->v[BCSV_MEDIAN_US] * 1000.0 / pt->rows;
        if (!isnan(pt->pool)) {
            const char *pat = r->s[BCSV_PATTERN] ? r->s[BCSV_PATTERN] : "";
            if (fit_fetch_pages(pat, pt->rows, pt->s, pt->pool, r->v[BCSV_CTX], r->v[BCSV_K], o->page_bytes, &pt->pages) < 0)
                return dh_err_prefix("file '%s' line %ld: ", file, r->line);
            if (o->region_bytes > 0 &&
                fit_fetch_density(pat, pt->rows, pt->s, pt->pool, r->v[BCSV_CTX], r->v[BCSV_K], o->region_bytes, &pt->rho) < 0)
                return dh_err_prefix("file '%s' line %ld: ", file, r->line);
            int gi = str_in(groups, *ngroups, pat);
            if (gi < 0) {
                if (*ngroups == FIT_MAX_GROUPS)
                    return dh_err("file '%s' line %ld: more than %d fetch patterns", file, r->line, FIT_MAX_GROUPS);
                groups[*ngroups] = (char *)pat;
                gi = (int)(*ngroups)++;
            }
            pt->group = gi;
        }
        return 0;
    }
    /* An asymptotic line: the probe recorded bandwidth but not rows, so only
     * the per-row time is known. */
    pt->rows = NAN;
    if (!(r->v[BCSV_GBPS] > 0))
        return dh_err("file '%s' line %ld: fetch line has neither rows with median_us nor gbps", file, r->line);
    *y = pt->s / r->v[BCSV_GBPS];
    return 0;
}

/* Every fetch parameter is a cost or a capacity and must be >= 0. */
/* What the fetch lines' inputs span: which parameters the data determine. */
typedef struct {
    int any_time;
    size_t nrho;   /* distinct densities among the fitted lines */
    double sms_min, sms_max, pool_min, pool_max;
} fetch_span;

/* The fetch points of every line (fitted ones first), the fitted ones' weights, ranges and
 * span. */
static int fetch_points(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold, const bcsv_table *t,
                        const fit_opts *o, fit_section *s, char **groups, size_t *ng, fetch_pt *pt, double *y, double *w,
                        fetch_span *sp)
{
    *sp = (fetch_span){0, 0, INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (size_t i = 0; i < n + nhold; i++) {
        const bcsv_row *r = i < n ? rows[i] : hold[i - n];
        if (fetch_point(r, o, groups, ng, &pt[i], &y[i], t->files[r->file]) < 0) return -1;
        if (i >= n) continue;
        w[i] = 1.0 / (y[i] * y[i]);
        if (!isnan(pt[i].rows)) sp->any_time = 1;
        if (pt[i].sms < sp->sms_min) sp->sms_min = pt[i].sms;
        if (pt[i].sms > sp->sms_max) sp->sms_max = pt[i].sms;
        if (pt[i].group >= 0) {
            if (pt[i].pool < sp->pool_min) sp->pool_min = pt[i].pool;
            if (pt[i].pool > sp->pool_max) sp->pool_max = pt[i].pool;
        }
        range_add(s, "row_bytes", pt[i].s);
        range_add(s, "sms", pt[i].sms);
        range_add(s, "rows", pt[i].rows);
        if (pt[i].group >= 0) { range_add(s, "pool_bytes", pt[i].pool); range_add(s, "pages", pt[i].pages); }
        if (!isnan(pt[i].rho)) {
            range_add(s, "density", pt[i].rho);
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++) seen = pt[j].rho == pt[i].rho;
            sp->nrho += !seen;
        }
    }
    /* A hold-out line with a pattern the fit never saw cannot be predicted. */
    for (size_t i = n; i < n + nhold; i++)
        if (pt[i].group >= 0 && (size_t)pt[i].group >= *ng) return dh_err("internal pattern group");
    return 0;
}

/* One fit from start p0 (parameters in fx held): refit with any parameter that went below
 * zero within two standard errors held at 0; further below is a non-physical result. 1 with
 * the fit in r, fx, fitval, fitse; 0 with the reason in why. */
static int fetch_try(const fit_model *fm, const double *y, const double *w, size_t n, double *p0, int *fx, char **groups,
                     fit_result *r, double *fitval, double *fitse, char *why, size_t whycap)
{
    const size_t npar = fm->npar;
    for (int round = 0; round <= (int)npar; round++) {
        if (fit_nonlinear(fm, y, w, n, p0, fx, r) < 0) {
            snprintf(why, whycap, "%s", dh_errmsg());
            return 0;
        }
        int again = 0;
        for (size_t j = 0; j < npar; j++) {
            if (fx[j] || r->p[j] >= 0) continue;
            if (r->p[j] < -2 * r->se[j]) {
                snprintf(why, whycap, "fit is non-physical: parameter %s = %g (+- %g) is below zero beyond the noise",
                         fetch_par_name(j, groups), r->p[j], r->se[j]);
                return 0;
            }
            fitval[j] = r->p[j];
            fitse[j] = r->se[j];
            fx[j] = 1;
            again = 1;
        }
        if (!again) return 1;
        for (size_t k = 0; k < npar; k++) p0[k] = fx[k] && fitval[k] < 0 ? 0 : r->p[k];
    }
    return 1;
}

/* The fetch fit's coefficients, in the units of the report. */
static void fetch_coefs(fit_section *s, const fit_result *best, const int *best_fixed, const double *best_fitval,
                        const double *best_fitse, char **groups, size_t ng, int dens)
{
    const double *p = best->p, *se = best->se;
#define ZERO(j) (best_fixed[j] && best_fitval[j] < 0)
    coef_add(s, "t0_us", p[FIT_FP_T0], se[FIT_FP_T0], ZERO(FIT_FP_T0), best_fitval[FIT_FP_T0], best_fitse[FIT_FP_T0]);
    coef_add(s, "sm_row_ns", p[FIT_FP_SM], se[FIT_FP_SM], ZERO(FIT_FP_SM), best_fitval[FIT_FP_SM], best_fitse[FIT_FP_SM]);
    coef_add(s, "row_issue_ns", p[FIT_FP_ISSUE], se[FIT_FP_ISSUE], ZERO(FIT_FP_ISSUE), best_fitval[FIT_FP_ISSUE], best_fitse[FIT_FP_ISSUE]);
    coef_add(s, "row_issue_ps_per_byte", p[FIT_FP_ISSUE_B] * 1e3, se[FIT_FP_ISSUE_B] * 1e3, ZERO(FIT_FP_ISSUE_B), best_fitval[FIT_FP_ISSUE_B] * 1e3, best_fitse[FIT_FP_ISSUE_B] * 1e3);
    coef_add(s, "link_gbps", 1.0 / p[FIT_FP_LINK], se[FIT_FP_LINK] / (p[FIT_FP_LINK] * p[FIT_FP_LINK]), 0, 0, 0);
    s->ngroups = ng;
    for (size_t g = 0; g < ng; g++) snprintf(s->groups[g], sizeof s->groups[g], "%s", groups[g]);
    if (ng) coef_add(s, "walk_reach_gb", p[FIT_FP_WALK], se[FIT_FP_WALK], ZERO(FIT_FP_WALK), best_fitval[FIT_FP_WALK], best_fitse[FIT_FP_WALK]);
    if (dens)
        for (int j = FIT_FP_DENS; j <= FIT_FP_DENS_POW; j++)
            coef_add(s, fetch_par_name((size_t)j, groups), p[j], se[j], ZERO(j), best_fitval[j], best_fitse[j]);
    for (size_t g = 0; g < ng; g++) {
        char key[64];
        snprintf(key, sizeof key, "page_ns_%s", groups[g]);
        coef_add(s, key, p[FIT_FP_PAGE0 + 2 * g], se[FIT_FP_PAGE0 + 2 * g], ZERO(FIT_FP_PAGE0 + 2 * g), best_fitval[FIT_FP_PAGE0 + 2 * g], best_fitse[FIT_FP_PAGE0 + 2 * g]);
        snprintf(key, sizeof key, "page_reach_%s", groups[g]);
        coef_add(s, key, p[FIT_FP_PAGE0 + 2 * g + 1], se[FIT_FP_PAGE0 + 2 * g + 1], ZERO(FIT_FP_PAGE0 + 2 * g + 1), best_fitval[FIT_FP_PAGE0 + 2 * g + 1], best_fitse[FIT_FP_PAGE0 + 2 * g + 1]);
    }
#undef ZERO
}

static int fit_fetch(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold,
                     const bcsv_table *t, const fit_opts *o, fit_section *s)
{
    fetch_pt *pt = dh_malloc((n + nhold + 1) * sizeof *pt);
    double *y = dh_malloc((n + nhold + 1) * sizeof *y), *w = dh_malloc((n + 1) * sizeof *w);
    char *groups[FIT_MAX_GROUPS];
    size_t ng = 0;
    fetch_span sp;
    int rc = fetch_points(rows, n, hold, nhold, t, o, s, groups, &ng, pt, y, w, &sp);
    if (rc) goto out;
    size_t npar = FIT_FP_PAGE0 + 2 * ng;
    int fixed[FIT_MAX_PAR] = {0};
    double p0[FIT_MAX_PAR] = {0};
    /* Inputs that never vary leave their parameter undetermined: fix it at a
     * neutral value and say so in the profile rather than report noise. */
    if (!sp.any_time) fixed[FIT_FP_T0] = 1;
    if (sp.sms_min == sp.sms_max) fixed[FIT_FP_SM] = 1;
    if (!(sp.pool_min < sp.pool_max)) fixed[FIT_FP_WALK] = 1;
    /* The density curve's two parameters need at least three densities. */
    int dens = sp.nrho >= 3;
    if (!dens) fixed[FIT_FP_DENS] = fixed[FIT_FP_DENS_POW] = 1;

    fetch_model m = {pt};
    fit_model fm = {npar, fetch_eval, &m};
    fit_result best;
    int have = 0, best_fixed[FIT_MAX_PAR];
    double best_fitval[FIT_MAX_PAR] = {0}, best_fitse[FIT_MAX_PAR] = {0};
    char last_err[256] = "";
    /* The max() of bottlenecks has several basins; start from a few page
     * reaches and keep the lowest chi^2.  Start values are orders of
     * magnitude only (a PCIe Gen5 link, tens of ns per row). */
    static const double reach0[] = {1e3, 1e4, 3e4, 1e5};
    for (size_t a = 0; a < sizeof reach0 / sizeof reach0[0]; a++) {
        if (!ng && a) break;
        p0[FIT_FP_T0] = fixed[FIT_FP_T0] ? 0 : 5;
        p0[FIT_FP_SM] = fixed[FIT_FP_SM] ? 0 : 50;
        p0[FIT_FP_ISSUE] = 10;
        p0[FIT_FP_ISSUE_B] = 0.005;
        p0[FIT_FP_LINK] = 1.0 / 50;
        p0[FIT_FP_WALK] = fixed[FIT_FP_WALK] ? 0 : (isfinite(sp.pool_min) ? sp.pool_min / 2e9 : 0);
        /* No density term: D = 0 (density_ns 0); else a walk of tens of ns, shared by the
         * region's rows. */
        p0[FIT_FP_DENS] = dens ? 20 : 0;
        p0[FIT_FP_DENS_POW] = dens ? 1 : 0;
        for (size_t g = 0; g < ng; g++) { p0[FIT_FP_PAGE0 + 2 * g] = 10; p0[FIT_FP_PAGE0 + 2 * g + 1] = reach0[a]; }
        int fx[FIT_MAX_PAR];
        double fitval[FIT_MAX_PAR] = {0}, fitse[FIT_MAX_PAR] = {0};
        memcpy(fx, fixed, sizeof fx);
        fit_result r;
        if (fetch_try(&fm, y, w, n, p0, fx, groups, &r, fitval, fitse, last_err, sizeof last_err) &&
            (!have || r.chisq < best.chisq)) {
            best = r;
            have = 1;
            memcpy(best_fixed, fx, sizeof best_fixed);
            memcpy(best_fitval, fitval, sizeof best_fitval);
            memcpy(best_fitse, fitse, sizeof best_fitse);
        }
    }
    if (!have) {
        rc = dh_err("kernel '%s' version '%s': fetch %s", s->kernel, s->version, last_err);
        goto out;
    }
    s->res = best;
    if (!(best.p[FIT_FP_LINK] > 0)) {
        rc = dh_err("kernel '%s' version '%s': fetch fit is non-physical: link bandwidth %g GB/s", s->kernel, s->version,
                    best.p[FIT_FP_LINK] ? 1.0 / best.p[FIT_FP_LINK] : INFINITY);
        goto out;
    }
    fetch_coefs(s, &best, best_fixed, best_fitval, best_fitse, groups, ng, dens);
    if (nhold) {
        double *pred = dh_malloc(nhold * sizeof *pred);
        for (size_t i = 0; i < nhold; i++) pred[i] = fetch_eval_pt(&pt[n + i], best.p, NULL);
        fit_error_distribution(pred, y + n, nhold, &s->holdout_err);
        free(pred);
    }
out:
    free(pt);
    free(y);
    free(w);
    return rc;
}

/* ---- linear forms, and the roofline forms of the attention and the GEMMs ------ */

#define LIN_MAX 4
#define LIN_ROUNDS 8   /* regime assignments tried before a fit that keeps changing them fails */

typedef struct {
    const char *key;          /* profile key */
    int rate;                 /* written as 1 / coefficient * scale (a bandwidth or rate) */
    double scale;
} lin_term;

/* Design row of a line for a linear form; returns the number of terms. For the hbm and gemm
 * forms term 1 is the bytes' time, to which the roofline's tensor time is the alternative. */
static size_t lin_design(fit_form f, const bcsv_row *r, double *x, lin_term *terms)
{
    double batch = isnan(r->v[BCSV_BATCH]) ? 1 : r->v[BCSV_BATCH];
    double q = isnan(r->v[BCSV_QUERIES]) ? 1 : r->v[BCSV_QUERIES];
    x[0] = 1;
    terms[0] = (lin_term){"t0_us", 0, 1};
    switch (f) {
    case FIT_FORM_HBM:
        x[1] = r->v[BCSV_BYTES];
        terms[1] = (lin_term){"hbm_gbps", 1, 1e-3};
        x[2] = batch * q;
        terms[2] = (lin_term){"query_us", 0, 1};
        x[3] = isnan(r->v[BCSV_UNION_ROWS]) ? 0 : batch * r->v[BCSV_UNION_ROWS];
        terms[3] = (lin_term){"union_row_us", 0, 1};
        return 4;
    case FIT_FORM_INDEXER:
        /* Multiply-adds of the scoring: half the flops dhbench counted, or
         * the product of the shape when the line has no flops. */
        x[1] = !isnan(r->v[BCSV_FLOPS]) ? r->v[BCSV_FLOPS] / 2
                                        : batch * q * r->v[BCSV_CTX] * r->v[BCSV_HEADS] * r->v[BCSV_KDIM];
        terms[1] = (lin_term){"rate_gmacs", 1, 1e-3};
        return 2;
    case FIT_FORM_GEMM:
        x[1] = r->v[BCSV_BYTES];
        terms[1] = (lin_term){"weight_gbps", 1, 1e-3};
        return 2;
    case FIT_FORM_CONST:
        return 1;
    default:
        DH_BUG_ON(1);
    }
    return 0;
}

/* Whether the line's tensor work is FP8 (the attention's rows, a GEMM's dtype): anything but
 * a "bf16" dtype. */
static int line_fp8(const bcsv_row *r) { return !(r->s[BCSV_DTYPE] && !strcmp(r->s[BCSV_DTYPE], "bf16")); }

/* The roofline a section's tensor term is evaluated at: the section's own, or without one a
 * roofline of infinite tensor rate (no tensor term). */
static cost_roofline section_roof(const fit_section *s)
{
    if (s->roof.sms > 0) return s->roof;
    return (cost_roofline){0, INFINITY, INFINITY, INFINITY, 1, 1};
}

/* The line's tensor time in us at the section's roofline on the whole GPU (a benchmark has
 * every SM), as the simulator evaluates it (cost_tensor_time); 0 for the forms without one
 * and for lines without flops. */
static double lin_tensor_us(const fit_section *s, const bcsv_row *r)
{
    if ((s->form != FIT_FORM_HBM && s->form != FIT_FORM_GEMM) || isnan(r->v[BCSV_FLOPS])) return 0;
    const cost_roofline roof = section_roof(s);
    return cost_tensor_time(&roof, r->v[BCSV_FLOPS], line_fp8(r), roof.sms) * 1e6;
}

double fit_line_time_us(const fit_section *s, const bcsv_row *r)
{
    double x[LIN_MAX];
    lin_term terms[LIN_MAX];
    const size_t nt = lin_design(s->form, r, x, terms);
    double c[LIN_MAX] = {0};
    for (size_t j = 0; j < nt; j++) {
        const fit_coef *fc = &s->coef[j];
        c[j] = terms[j].rate ? terms[j].scale / fc->value : fc->value;
    }
    const double flops = isnan(r->v[BCSV_FLOPS]) ? 0 : r->v[BCSV_FLOPS];
    const cost_roofline roof = section_roof(s);
    if (s->form == FIT_FORM_HBM) {
        /* The simulator's attention (sim/cost.c) with the fit's coefficients; the union-row
         * term (a verification kernel reading its queries' union once) is the fit's alone. */
        const cost_model cm = {.roof = roof, .attn = {COST_FITTED, c[0] * 1e-6, 1e6 / c[1], c[2] * 1e-6}};
        return cost_attention_time(&cm, x[1], flops, x[2], line_fp8(r), roof.sms) * 1e6 + c[3] * x[3];
    }
    if (s->form == FIT_FORM_GEMM) {
        /* The simulator's GEMM form for one launch: its fixed cost is the fit's t0. */
        const cost_model cm = {.roof = roof, .gemm = {COST_FITTED, c[0] * 1e-6, 1e6 / c[1]}};
        return cost_gemm_time(&cm, x[1], flops, line_fp8(r), roof.sms) * 1e6;
    }
    double t = 0;
    for (size_t j = 0; j < nt; j++) t += x[j] * c[j];
    return t;
}

/* The design and times of every line (fitted ones first, then the held-out ones), and each
 * fitted line's weight and inputs into the section's ranges. */
static int lin_points(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold, const bcsv_table *t,
                      fit_section *s, double *X, double *y, double *w, lin_term *terms, size_t *nt)
{
    for (size_t i = 0; i < n + nhold; i++) {
        const bcsv_row *r = i < n ? rows[i] : hold[i - n];
        *nt = lin_design(s->form, r, X + i * LIN_MAX, terms);
        y[i] = r->v[BCSV_MEDIAN_US];
        for (size_t j = 0; j < *nt; j++)
            if (!isfinite(X[i * LIN_MAX + j]) || X[i * LIN_MAX + j] < 0)
                return dh_err("file '%s' line %ld: %s line lacks an input of term '%s'", t->files[r->file], r->line,
                              fit_form_name(s->form), terms[j].key);
        if (!(y[i] > 0)) return dh_err("file '%s' line %ld: median_us must be > 0", t->files[r->file], r->line);
        if (i >= n) continue;
        w[i] = 1.0 / (y[i] * y[i]);
        switch (s->form) {
        case FIT_FORM_HBM:
            range_add(s, "bytes", r->v[BCSV_BYTES]); range_add(s, "batch", r->v[BCSV_BATCH]);
            range_add(s, "queries", r->v[BCSV_QUERIES]); range_add(s, "union_rows", r->v[BCSV_UNION_ROWS]);
            range_add(s, "k", r->v[BCSV_K]);
            break;
        case FIT_FORM_INDEXER:
            range_add(s, "ctx", r->v[BCSV_CTX]); range_add(s, "heads", r->v[BCSV_HEADS]);
            range_add(s, "kdim", r->v[BCSV_KDIM]); range_add(s, "batch", r->v[BCSV_BATCH]);
            break;
        case FIT_FORM_CONST:
            range_add(s, "batch", r->v[BCSV_BATCH]); range_add(s, "ctx", r->v[BCSV_CTX]); range_add(s, "k", r->v[BCSV_K]);
            break;
        default:
            range_add(s, "bytes", r->v[BCSV_BYTES]); range_add(s, "flops", r->v[BCSV_FLOPS]); range_add(s, "m", r->v[BCSV_M]);
            range_add(s, "n", r->v[BCSV_N]); range_add(s, "kdim", r->v[BCSV_KDIM]);
        }
    }
    return 0;
}

/* One linear solve of the fitted lines' design X against y: terms whose input never varies
 * are left out, a per-item term the bytes make collinear too, a fixed or per-item cost below
 * 0 inside the noise is held at 0 and the fit repeated. The result in full / fse (0 for a
 * term left out), the flags per term. */
typedef struct {
    fit_result r;
    double full[LIN_MAX], fse[LIN_MAX], fitval[LIN_MAX], fitse[LIN_MAX];
    int zeroed[LIN_MAX], undetermined[LIN_MAX];
} lin_fit;

static int lin_solve(const double *X, const double *y, const double *w, size_t n, size_t nt, const lin_term *terms,
                     const fit_section *s, double *Xa, lin_fit *lf)
{
    memset(lf, 0, sizeof *lf);
    int active[LIN_MAX];
    for (size_t j = 0; j < nt; j++) {
        active[j] = 1;
        if (j == 0) continue;
        int varies = 0;
        for (size_t i = 1; i < n; i++) if (X[i * LIN_MAX + j] != X[j]) varies = 1;
        if (!varies && !terms[j].rate) { active[j] = 0; lf->undetermined[j] = 1; }
    }
    for (;;) {
        size_t na = 0, map[LIN_MAX];
        for (size_t j = 0; j < nt; j++) if (active[j]) map[na++] = j;
        for (size_t i = 0; i < n; i++)
            for (size_t a = 0; a < na; a++) Xa[i * na + a] = X[i * LIN_MAX + map[a]];
        fit_result r;
        if (fit_linear(Xa, y, w, n, na, &r) < 0) {
            /* A per-item term proportional to the bytes (union rows when the
             * bytes are the union's rows) cannot be told apart from the
             * bandwidth: leave the last such term out and say so. */
            size_t drop = 0;
            for (size_t a = na; a-- > 1;)
                if (!terms[map[a]].rate) { drop = map[a]; break; }
            if (!drop || !strstr(dh_errmsg(), "determine only"))
                return dh_err_prefix("kernel '%s' version '%s': %s fit: ", s->kernel, s->version, fit_form_name(s->form));
            active[drop] = 0;
            lf->undetermined[drop] = 1;
            continue;
        }
        int again = 0;
        for (size_t a = 0; a < na; a++) {
            const lin_term *tm = &terms[map[a]];
            if (tm->rate && !(r.p[a] > 0))
                return dh_err("kernel '%s' version '%s': %s fit is non-physical: %s = %g", s->kernel, s->version,
                              fit_form_name(s->form), tm->key, r.p[a] ? tm->scale / r.p[a] : INFINITY);
            if (!tm->rate && r.p[a] < 0) {
                if (r.p[a] < -2 * r.se[a])
                    return dh_err("kernel '%s' version '%s': %s fit is non-physical: %s = %g (+- %g) is below zero beyond "
                                  "the noise", s->kernel, s->version, fit_form_name(s->form), tm->key, r.p[a], r.se[a]);
                active[map[a]] = 0; lf->zeroed[map[a]] = 1; lf->fitval[map[a]] = r.p[a]; lf->fitse[map[a]] = r.se[a];
                again = 1;
            }
        }
        if (again) continue;
        for (size_t a = 0; a < na; a++) { lf->full[map[a]] = r.p[a]; lf->fse[map[a]] = r.se[a]; }
        lf->r = r;
        return 0;
    }
}

/* The hbm and gemm forms are the simulator's: t0 (+ per-item terms) + max(bytes / rate, the
 * roofline's tensor time tf), tf known per line. For a given assignment of the lines to the
 * two regimes that is linear: a tensor-bound line's bytes column is 0 and its time less tf.
 * Starting from every line bound by its bytes, the fit is repeated with the regimes its rate
 * gives until they no longer change (lines far from the knee: once; a fit that keeps changing
 * them after LIN_ROUNDS fails). With no roofline (or no flops) every tf is 0: the plain linear
 * fit. O(rounds x lines x terms^2). */
static int fit_lin(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold,
                   const bcsv_table *t, const fit_opts *o, fit_section *s)
{
    (void)o;
    lin_term terms[LIN_MAX];
    size_t nt = 0;
    double *X = dh_malloc((n + nhold + 1) * LIN_MAX * sizeof *X), *y = dh_malloc((n + nhold + 1) * sizeof *y);
    double *w = dh_malloc((n + 1) * sizeof *w), *Xa = dh_malloc((n + 1) * LIN_MAX * sizeof *Xa);
    double *Xr = dh_malloc((n + 1) * LIN_MAX * sizeof *Xr), *yr = dh_malloc((n + 1) * sizeof *yr);
    double *tf = dh_malloc((n + 1) * sizeof *tf);
    int *tensor = dh_calloc(n + 1, sizeof *tensor);
    lin_fit lf;
    int rc = lin_points(rows, n, hold, nhold, t, s, X, y, w, terms, &nt);
    size_t tensor_bound = 0;
    for (size_t i = 0; i < n && rc == 0; i++) tf[i] = lin_tensor_us(s, rows[i]);
    for (int round = 0; rc == 0; round++) {
        for (size_t i = 0; i < n; i++) {
            memcpy(Xr + i * LIN_MAX, X + i * LIN_MAX, LIN_MAX * sizeof *Xr);
            yr[i] = y[i];
            if (tensor[i]) { Xr[i * LIN_MAX + 1] = 0; yr[i] -= tf[i]; }
        }
        if ((rc = lin_solve(Xr, yr, w, n, nt, terms, s, Xa, &lf)) < 0) break;
        if (nt < 2 || !terms[1].rate || (s->form != FIT_FORM_HBM && s->form != FIT_FORM_GEMM)) break;
        int changed = 0;
        tensor_bound = 0;
        for (size_t i = 0; i < n; i++) {
            const int tb = tf[i] > X[i * LIN_MAX + 1] * lf.full[1];
            changed |= tb != tensor[i];
            tensor[i] = tb;
            tensor_bound += tb;
        }
        if (!changed) break;
        if (round + 1 == LIN_ROUNDS)
            rc = dh_err("kernel '%s' version '%s': %s fit: the lines bound by the tensor rate keep changing after %d fits",
                        s->kernel, s->version, fit_form_name(s->form), LIN_ROUNDS);
    }
    if (rc == 0) {
        s->res = lf.r;
        for (size_t j = 0; j < nt; j++) {
            if (terms[j].rate)
                coef_add(s, terms[j].key, terms[j].scale / lf.full[j], terms[j].scale * lf.fse[j] / (lf.full[j] * lf.full[j]),
                         0, 0, 0);
            else {
                coef_add(s, terms[j].key, lf.full[j], lf.fse[j], lf.zeroed[j], lf.fitval[j], lf.fitse[j]);
                s->coef[s->ncoef - 1].undetermined = lf.undetermined[j];
            }
        }
        s->tensor_bound = tensor_bound;
        double *pred = dh_malloc((n + nhold + 1) * sizeof *pred);
        for (size_t i = 0; i < n + nhold; i++) pred[i] = fit_line_time_us(s, i < n ? rows[i] : hold[i - n]);
        /* With lines bound by the tensor rate the statistics are those of the whole form on
         * the measured times (the solve saw them less tf). */
        if (tensor_bound) {
            const size_t npar = s->res.npar;
            fit_stats(pred, y, w, n, &s->res);
            s->res.npar = npar;
        }
        if (nhold) fit_error_distribution(pred + n, y + n, nhold, &s->holdout_err);
        free(pred);
    }
    free(X);
    free(y);
    free(w);
    free(Xa);
    free(Xr);
    free(yr);
    free(tf);
    free(tensor);
    return rc;
}

/* ---- indexer: a roofline ----------------------------------------------------- */

enum { IX_T0, IX_BYTE, IX_MAC, IX_NPAR };   /* t0 (us), us per key byte, us per multiply-add */

typedef struct { const double *bytes, *macs; } ix_model;

/* The value is the simulator's scoring form (sim/cost.c: cost_scoring_time) in microseconds,
 * its per-unit times as rates (a term held at 0 is a rate of infinity: no time); the
 * gradient is the active term's. */
double fit_indexer_time_us(const double *p, double bytes, double macs, double *g)
{
    if (g) {
        const double tb = bytes * p[IX_BYTE], tc = macs * p[IX_MAC];
        g[IX_T0] = 1;
        g[IX_BYTE] = tb >= tc ? bytes : 0;
        g[IX_MAC] = tb >= tc ? 0 : macs;
    }
    return p[IX_T0] + cost_scoring_time(bytes, 1 / p[IX_BYTE], macs, 1 / p[IX_MAC]);
}

static double ix_eval(const void *model, size_t i, const double *p, double *grad)
{
    const ix_model *m = model;
    return fit_indexer_time_us(p, m->bytes[i], m->macs[i], grad);
}

/* One candidate of a roofline fit (the indexer's, the top-k's), npar parameters: the rate
 * terms in `rates` that are not in `terms` (bits by parameter index) are held at 0 and those
 * in `hold` at their start value p0; a free rate term must come out > 0 and a free parameter
 * in `min_one` at least 1; a fixed cost (`costs`) below zero beyond two standard errors fails
 * the candidate, inside the noise it is held at 0 (its fit value kept) and the fit repeated. */
typedef struct {
    fit_result r;
    unsigned terms;
    int zero[FIT_MAX_PAR];
    double fit_value[FIT_MAX_PAR], fit_se[FIT_MAX_PAR];
} nl_cand;

static int nl_try(const fit_model *m, const double *y, const double *w, size_t n, const double *p0, unsigned rates,
                  unsigned terms, unsigned hold, unsigned costs, unsigned min_one, const char *const *name, nl_cand *c,
                  char *why, size_t whycap)
{
    const size_t np = m->npar;
    double p[FIT_MAX_PAR];
    int fixed[FIT_MAX_PAR] = {0};
    memcpy(p, p0, np * sizeof *p);
    memset(c, 0, sizeof *c);
    c->terms = terms;
    for (size_t j = 0; j < np; j++) {
        if ((rates >> j & 1) && !(terms >> j & 1)) fixed[j] = 1, p[j] = 0;
        if (hold >> j & 1) fixed[j] = 1;
    }
    for (size_t round = 0; round <= np; round++) {
        if (fit_nonlinear(m, y, w, n, p, fixed, &c->r) < 0) { snprintf(why, whycap, "%s", dh_errmsg()); return -1; }
        for (size_t j = 0; j < np; j++) {
            if (fixed[j]) continue;
            if ((rates >> j & 1) && !(c->r.p[j] > 0)) { snprintf(why, whycap, "a rate term came out <= 0"); return -1; }
            if ((min_one >> j & 1) && !(c->r.p[j] >= 1)) {
                snprintf(why, whycap, "%s %g below 1", name[j], c->r.p[j]);
                return -1;
            }
        }
        int again = 0;
        for (size_t j = 0; j < np; j++) {
            if (fixed[j] || !(costs >> j & 1) || c->r.p[j] >= 0) continue;
            if (c->r.p[j] < -2 * c->r.se[j]) {
                snprintf(why, whycap, "%s = %g (+- %g) is below zero beyond the noise", name[j], c->r.p[j], c->r.se[j]);
                return -1;
            }
            c->zero[j] = 1;
            c->fit_value[j] = c->r.p[j];
            c->fit_se[j] = c->r.se[j];
            fixed[j] = 1;
            again = 1;
        }
        if (!again) return 0;
        memcpy(p, c->r.p, np * sizeof *p);
        for (size_t j = 0; j < np; j++)
            if (c->zero[j]) p[j] = 0;
    }
    return 0;
}

/* The indexer's candidates: the roofline terms not in `terms` (bits IX_BYTE, IX_MAC) left out. */
static int ix_try(const fit_model *m, const double *y, const double *w, size_t n, unsigned terms, const double *p0,
                  nl_cand *c, char *why, size_t whycap)
{
    static const char *const name[IX_NPAR] = {"t0_us", "key time", "multiply-add time"};
    return nl_try(m, y, w, n, p0, 1u << IX_BYTE | 1u << IX_MAC, terms, 0, 1u << IX_T0, 0, name, c, why, whycap);
}

/* The indexer lines' key bytes, multiply-adds and times (fitted lines first), the fitted
 * ones' weights and ranges. */
static int indexer_points(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold, const bcsv_table *t,
                          fit_section *s, double *bytes, double *macs, double *y, double *w)
{
    for (size_t i = 0; i < n + nhold; i++) {
        const bcsv_row *r = i < n ? rows[i] : hold[i - n];
        const double batch = isnan(r->v[BCSV_BATCH]) ? 1 : r->v[BCSV_BATCH], q = isnan(r->v[BCSV_QUERIES]) ? 1 : r->v[BCSV_QUERIES];
        bytes[i] = r->v[BCSV_BYTES];
        macs[i] = !isnan(r->v[BCSV_FLOPS]) ? r->v[BCSV_FLOPS] / 2 : batch * q * r->v[BCSV_CTX] * r->v[BCSV_HEADS] * r->v[BCSV_KDIM];
        y[i] = r->v[BCSV_MEDIAN_US];
        if (!(bytes[i] > 0) || !(macs[i] > 0) || !isfinite(macs[i]))
            return dh_err("file '%s' line %ld: indexer line lacks its bytes or its multiply-adds (flops, or ctx, heads and kdim)",
                          t->files[r->file], r->line);
        if (!(y[i] > 0)) return dh_err("file '%s' line %ld: median_us must be > 0", t->files[r->file], r->line);
        if (i >= n) continue;
        w[i] = 1.0 / (y[i] * y[i]);
        range_add(s, "ctx", r->v[BCSV_CTX]); range_add(s, "heads", r->v[BCSV_HEADS]); range_add(s, "batch", batch);
        range_add(s, "queries", q); range_add(s, "bytes", bytes[i]); range_add(s, "macs", macs[i]);
    }
    return 0;
}

enum { IX_MEMB = 1 << IX_BYTE, IX_COMPB = 1 << IX_MAC };

/* The candidates (the memory term alone, the compute term alone, both from three starts; a
 * both-term fit whose points all sit in one regime is not a candidate) and the one of least
 * residual in *best: a two-term fit must beat the single terms outright (ties go to the
 * simpler model, which comes first). */
static int indexer_best(const fit_model *fm, const double *bytes, const double *macs, const double *y, const double *w,
                        size_t n, const fit_section *s, nl_cand *cand, nl_cand **best)
{
    /* Start values: a fixed cost under the fastest line, each term alone through the points. */
    double ymin = y[0], per_byte = INFINITY, per_mac = INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (y[i] < ymin) ymin = y[i];
        if (y[i] / bytes[i] < per_byte) per_byte = y[i] / bytes[i];
        if (y[i] / macs[i] < per_mac) per_mac = y[i] / macs[i];
    }
    size_t nc = 0;
    char why[256] = "no candidate converged";
    double p0[IX_NPAR] = {0.5 * ymin, 0.5 * per_byte, 0.5 * per_mac};
    int have_mem = ix_try(fm, y, w, n, IX_MEMB, p0, &cand[nc], why, sizeof why) == 0;
    if (have_mem) nc++;
    int have_comp = ix_try(fm, y, w, n, IX_COMPB, p0, &cand[nc], why, sizeof why) == 0;
    if (have_comp) nc++;
    if (have_mem && have_comp) {
        /* Both terms, from the single-term fits: each point starts in whichever regime its
         * single-term fits put it, and twice from each side's slower rate. */
        const fit_result *rm = &cand[0].r, *rcp = &cand[1].r;
        const double starts[3][2] = {{1, 1}, {1, 0.5}, {0.5, 1}};
        for (int k = 0; k < 3; k++) {
            double pb[IX_NPAR] = {fmin(rm->p[IX_T0], rcp->p[IX_T0]), starts[k][0] * rm->p[IX_BYTE], starts[k][1] * rcp->p[IX_MAC]};
            if (pb[IX_T0] < 0) pb[IX_T0] = 0;
            nl_cand c;
            if (ix_try(fm, y, w, n, IX_MEMB | IX_COMPB, pb, &c, why, sizeof why) < 0) continue;
            /* Every point in one regime: the same model as that term alone. */
            size_t nmem = 0;
            for (size_t i = 0; i < n; i++) nmem += bytes[i] * c.r.p[IX_BYTE] >= macs[i] * c.r.p[IX_MAC];
            if (nmem == 0 || nmem == n) continue;
            cand[nc++] = c;
        }
    }
    *best = NULL;
    for (size_t k = 0; k < nc; k++)
        if (!*best || cand[k].r.chisq < (*best)->r.chisq * (1 - 1e-9)) *best = &cand[k];
    if (!*best) return dh_err("kernel '%s' version '%s': indexer fit failed: %s", s->kernel, s->version, why);
    return 0;
}

static int fit_indexer(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold, const bcsv_table *t,
                       const fit_opts *o, fit_section *s)
{
    /* Lines without their bytes give the compute term alone (the linear form). */
    for (size_t i = 0; i < n + nhold; i++)
        if (isnan((i < n ? rows[i] : hold[i - n])->v[BCSV_BYTES])) return fit_lin(rows, n, hold, nhold, t, o, s);
    double *bytes = dh_malloc((n + nhold + 1) * sizeof *bytes), *macs = dh_malloc((n + nhold + 1) * sizeof *macs);
    double *y = dh_malloc((n + nhold + 1) * sizeof *y), *w = dh_malloc((n + 1) * sizeof *w);
    int rc = indexer_points(rows, n, hold, nhold, t, s, bytes, macs, y, w);
    ix_model im = {bytes, macs};
    fit_model fm = {IX_NPAR, ix_eval, &im};
    nl_cand cand[5], *best = NULL;
    if (rc == 0) rc = indexer_best(&fm, bytes, macs, y, w, n, s, cand, &best);
    if (rc) goto out;
    s->res = best->r;
    s->res.npar = (size_t)(!best->zero[IX_T0] + !!(best->terms & IX_MEMB) + !!(best->terms & IX_COMPB));   /* the free ones */
    const double *p = best->r.p, *se = best->r.se;
    coef_add(s, "t0_us", p[IX_T0], se[IX_T0], best->zero[IX_T0], best->fit_value[IX_T0], best->fit_se[IX_T0]);
    /* A term the chosen fit leaves out is bounded by the points: the slowest rate at which
     * every point would still be limited by the other term. */
    double bpb = p[IX_BYTE], bpm = p[IX_MAC];
    if (!(best->terms & IX_MEMB)) {
        bpb = INFINITY;
        for (size_t i = 0; i < n; i++) bpb = fmin(bpb, macs[i] * p[IX_MAC] / bytes[i]);
    }
    if (!(best->terms & IX_COMPB)) {
        bpm = INFINITY;
        for (size_t i = 0; i < n; i++) bpm = fmin(bpm, bytes[i] * p[IX_BYTE] / macs[i]);
    }
    coef_add(s, "key_gbps", 1e-3 / bpb, best->terms & IX_MEMB ? 1e-3 * se[IX_BYTE] / (bpb * bpb) : 0, 0, 0, 0);
    s->coef[s->ncoef - 1].bound = !(best->terms & IX_MEMB);
    coef_add(s, "rate_gmacs", 1e-3 / bpm, best->terms & IX_COMPB ? 1e-3 * se[IX_MAC] / (bpm * bpm) : 0, 0, 0, 0);
    s->coef[s->ncoef - 1].bound = !(best->terms & IX_COMPB);
    if (nhold) {
        /* Held-out lines are predicted as the profile will: a bounded term at its bound. */
        const double pe[IX_NPAR] = {p[IX_T0], bpb, bpm};
        double *pred = dh_malloc(nhold * sizeof *pred);
        for (size_t i = 0; i < nhold; i++) pred[i] = fit_indexer_time_us(pe, bytes[n + i], macs[n + i], NULL);
        fit_error_distribution(pred, y + n, nhold, &s->holdout_err);
        free(pred);
    }
out:
    free(bytes);
    free(macs);
    free(y);
    free(w);
    return rc;
}

/* ---- top-k: waves of blocks, each a roofline ---------------------------------- */

/* t0 (us), per wave (us), us per score of one block (its SM's pass), us per selected row,
 * us per score of a whole wave (the scores of all its blocks through the memory system), the
 * steepness q of the soft maximum of the last two. */
enum { TK_T0, TK_WAVE, TK_ROW, TK_K, TK_SCORE, TK_Q, TK_NPAR };

typedef struct { const double *topks, *ctx, *k; double slots; } tk_model;

/* (a^q + b^q)^(1/q) for a, b >= 0 and q >= 1, with its derivatives by a, b and q. */
static double soft_max(double a, double b, double q, double *da, double *db, double *dq)
{
    if (a <= 0 || b <= 0) {
        *da = a >= b; *db = a < b; *dq = 0;
        return a > b ? a : b;
    }
    const double big = a > b ? a : b, ra = a / big, rb = b / big;   /* scaled: no overflow */
    const double sa = pow(ra, q), sb = pow(rb, q), sum = sa + sb, m = big * pow(sum, 1 / q);
    *da = pow(a / m, q - 1);
    *db = pow(b / m, q - 1);
    *dq = m * ((sa * log(ra) + sb * log(rb)) / (q * sum) - log(sum) / (q * q));
    return m;
}

double fit_topk_time_us(const double *p, double topks, double ctx, double k, double slots, double *g)
{
    /* The value is the simulator's form itself (sim/cost.c), in microseconds, with the
     * per-score time of the memory term as its rate; the gradient is this fit's own, checked
     * against that form on a grid (tests/test_cost.c). */
    const cost_topk form = {slots, p[TK_WAVE], p[TK_ROW], p[TK_K], p[TK_SCORE] != 0 ? 1 / p[TK_SCORE] : 0, p[TK_Q]};
    const double t = cost_topk_time(&form, p[TK_T0], topks, ctx, k);
    if (!g) return t;
    const double full = floor(topks / slots + 1e-9), rem = topks - full * slots;
    double nw = 0, grow = 0, gscore = 0, gq = 0;
    for (int j = 0; j < 2; j++) {
        const double waves = j ? (rem > 1e-9) : full, n = j ? rem : slots;
        if (waves == 0) continue;
        double da, db, dq;
        soft_max(ctx * p[TK_ROW], n * ctx * p[TK_SCORE], p[TK_Q], &da, &db, &dq);
        nw += waves;
        grow += waves * da * ctx;
        gscore += waves * db * n * ctx;
        gq += waves * dq;
    }
    g[TK_T0] = 1;
    g[TK_WAVE] = nw;
    g[TK_ROW] = grow;
    g[TK_K] = nw * (k < ctx ? k : ctx);   /* the form selects at most ctx */
    g[TK_SCORE] = gscore;
    g[TK_Q] = gq;
    return t;
}

static double tk_eval(const void *model, size_t i, const double *p, double *grad)
{
    const tk_model *m = model;
    return fit_topk_time_us(p, m->topks[i], m->ctx[i], m->k[i], m->slots, grad);
}

/* The top-k's candidates: the roofline terms not in `terms` (bits TK_ROW, TK_SCORE) left out;
 * with one term the soft maximum is that term whatever q, so q is held at 1. The fixed costs
 * (t0, per wave, per selected row) may not go below zero beyond the noise. */
static int tk_try(const fit_model *m, const double *y, const double *w, size_t n, unsigned terms, const double *p0,
                  nl_cand *c, char *why, size_t whycap)
{
    static const char *const name[TK_NPAR] = {"t0_us", "wave_us", "row_ns", "k_ns", "score", "steepness"};
    const unsigned rates = 1u << TK_ROW | 1u << TK_SCORE, both = (terms & rates) == rates;
    double p[TK_NPAR];
    memcpy(p, p0, sizeof p);
    if (!both) p[TK_Q] = 1;
    return nl_try(m, y, w, n, p, rates, terms, both ? 0 : 1u << TK_Q, 1u << TK_T0 | 1u << TK_WAVE | 1u << TK_K,
                  both ? 1u << TK_Q : 0, name, c, why, whycap);
}

/* The top-k lines' top-ks per launch, scores per request, k and times (fitted lines first),
 * the fitted ones' weights and ranges, and the blocks at once (every line's sms, one value). */
static int topk_points(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold, const bcsv_table *t,
                       fit_section *s, double *topks, double *ctx, double *k, double *y, double *w)
{
    for (size_t i = 0; i < n + nhold; i++) {
        const bcsv_row *r = i < n ? rows[i] : hold[i - n];
        const double batch = isnan(r->v[BCSV_BATCH]) ? 1 : r->v[BCSV_BATCH], q = isnan(r->v[BCSV_QUERIES]) ? 1 : r->v[BCSV_QUERIES];
        topks[i] = batch * q;
        ctx[i] = r->v[BCSV_CTX];
        k[i] = r->v[BCSV_K];
        y[i] = r->v[BCSV_MEDIAN_US];
        if (!(r->v[BCSV_SMS] >= 1) || !(ctx[i] > 0) || !(k[i] > 0))
            return dh_err("file '%s' line %ld: topk line lacks ctx, k or sms (the blocks that run at once, recorded by dhbench "
                          "since the topk form)", t->files[r->file], r->line);
        if (i == 0) s->slots = r->v[BCSV_SMS];
        else if (r->v[BCSV_SMS] != s->slots)
            return dh_err("file '%s' line %ld: topk line ran %g blocks at once (sms), another line %g: one device and version per fit",
                          t->files[r->file], r->line, r->v[BCSV_SMS], s->slots);
        if (!(y[i] > 0)) return dh_err("file '%s' line %ld: median_us must be > 0", t->files[r->file], r->line);
        if (i >= n) continue;
        w[i] = 1.0 / (y[i] * y[i]);
        /* batch: the top-ks of a launch (requests x queries). */
        range_add(s, "batch", topks[i]); range_add(s, "ctx", ctx[i]); range_add(s, "k", k[i]);
    }
    return 0;
}

enum { TK_ROWB = 1 << TK_ROW, TK_SCOREB = 1 << TK_SCORE };

/* The candidates (each roofline term alone, then both from four starts; a both-term fit whose
 * points all sit in one regime is not a candidate) and the one of least chi^2 in *best. */
static int topk_best(const fit_model *fm, const tk_model *tm, const double *y, const double *w, size_t n, fit_section *s,
                     nl_cand *cand, nl_cand **best)
{
    /* Start values: a fixed cost under the fastest line, the per-score times through the
     * slowest points per score of a block and of a wave. */
    double ymin = y[0], per_row = INFINITY, per_score = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const double waves = ceil(tm->topks[i] / s->slots - 1e-9), full = fmin(tm->topks[i], s->slots);
        if (y[i] < ymin) ymin = y[i];
        per_row = fmin(per_row, y[i] / (waves * tm->ctx[i]));
        per_score = fmin(per_score, y[i] / (waves * full * tm->ctx[i]));
    }
    size_t nc = 0;
    char why[256] = "no candidate converged";
    const double p0[TK_NPAR] = {0.3 * ymin, 0.3 * ymin, 0.5 * per_row, 0, 0.5 * per_score, 1};
    const int have_row = tk_try(fm, y, w, n, TK_ROWB, p0, &cand[nc], why, sizeof why) == 0;
    if (have_row) nc++;
    const int have_score = tk_try(fm, y, w, n, TK_SCOREB, p0, &cand[nc], why, sizeof why) == 0;
    if (have_score) nc++;
    /* Both terms, from the single-term fits that converged (as the indexer's roofline), or
     * for a term whose fit alone failed (a fixed cost below zero, say) from the guess. */
    const double *pr = have_row ? cand[0].r.p : p0, *ps = have_score ? cand[have_row].r.p : p0;
    const double starts[4][3] = {{1, 1, 1.5}, {1, 0.5, 2}, {0.5, 1, 2}, {0.7, 0.7, 3}};
    for (int j = 0; j < 4; j++) {
        double pb[TK_NPAR] = {fmax(0, fmin(pr[TK_T0], ps[TK_T0])), fmax(0, fmin(pr[TK_WAVE], ps[TK_WAVE])),
                              starts[j][0] * pr[TK_ROW], fmax(0, fmax(pr[TK_K], ps[TK_K])), starts[j][1] * ps[TK_SCORE],
                              starts[j][2]};
        nl_cand c;
        if (tk_try(fm, y, w, n, TK_ROWB | TK_SCOREB, pb, &c, why, sizeof why) < 0) continue;
        size_t nrow = 0;   /* points whose every wave is bound by the block's pass */
        for (size_t i = 0; i < n; i++)
            nrow += tm->ctx[i] * c.r.p[TK_ROW] >= fmin(tm->topks[i], s->slots) * tm->ctx[i] * c.r.p[TK_SCORE];
        if (nrow == 0 || nrow == n) continue;
        cand[nc++] = c;
    }
    *best = NULL;
    for (size_t j = 0; j < nc; j++)
        if (!*best || cand[j].r.chisq < (*best)->r.chisq * (1 - 1e-9)) *best = &cand[j];
    if (!*best) return dh_err("kernel '%s' version '%s': topk fit failed: %s", s->kernel, s->version, why);
    return 0;
}

/* The chosen candidate's coefficients; a term it leaves out is bounded by the points: the
 * slowest per-score time at which every wave would still be bound by the other term. Its
 * per-score times in *prow, *pscore. */
static void topk_coefs(fit_section *s, const nl_cand *best, const tk_model *tm, size_t n, double *prow, double *pscore)
{
    s->res = best->r;
    size_t free_par = 0;
    for (int j = 0; j < TK_NPAR; j++)
        free_par += !best->zero[j] && (j == TK_ROW ? !!(best->terms & TK_ROWB) : j == TK_SCORE ? !!(best->terms & TK_SCOREB) : 1);
    s->res.npar = free_par;
    const double *p = best->r.p, *se = best->r.se;
    coef_add(s, "t0_us", p[TK_T0], se[TK_T0], best->zero[TK_T0], best->fit_value[TK_T0], best->fit_se[TK_T0]);
    coef_add(s, "wave_us", p[TK_WAVE], se[TK_WAVE], best->zero[TK_WAVE], best->fit_value[TK_WAVE], best->fit_se[TK_WAVE]);
    *prow = p[TK_ROW];
    *pscore = p[TK_SCORE];
    if (!(best->terms & TK_ROWB)) {
        *prow = INFINITY;
        for (size_t i = 0; i < n; i++) {
            const double rem = tm->topks[i] - floor(tm->topks[i] / s->slots + 1e-9) * s->slots;
            *prow = fmin(*prow, (rem > 1e-9 ? rem : fmin(tm->topks[i], s->slots)) * *pscore);
        }
    }
    if (!(best->terms & TK_SCOREB)) {
        *pscore = INFINITY;
        for (size_t i = 0; i < n; i++) *pscore = fmin(*pscore, *prow / fmin(tm->topks[i], s->slots));
    }
    coef_add(s, "row_ns", *prow * 1e3, best->terms & TK_ROWB ? se[TK_ROW] * 1e3 : 0, 0, 0, 0);
    s->coef[s->ncoef - 1].bound = !(best->terms & TK_ROWB);
    coef_add(s, "k_ns", p[TK_K] * 1e3, se[TK_K] * 1e3, best->zero[TK_K], best->fit_value[TK_K] * 1e3, best->fit_se[TK_K] * 1e3);
    coef_add(s, "score_gps", 1e-3 / *pscore, best->terms & TK_SCOREB ? 1e-3 * se[TK_SCORE] / (*pscore * *pscore) : 0, 0, 0, 0);
    s->coef[s->ncoef - 1].bound = !(best->terms & TK_SCOREB);
    /* With one term the steepness is not determined: 1 (a plain maximum). */
    coef_add(s, "steepness", p[TK_Q], se[TK_Q], 0, 0, 0);
    s->coef[s->ncoef - 1].undetermined = best->terms != (TK_ROWB | TK_SCOREB);
}

static int fit_topk(const bcsv_row **rows, size_t n, const bcsv_row **hold, size_t nhold, const bcsv_table *t,
                    const fit_opts *o, fit_section *s)
{
    (void)o;
    double *topks = dh_malloc((n + nhold + 1) * sizeof *topks), *ctx = dh_malloc((n + nhold + 1) * sizeof *ctx);
    double *k = dh_malloc((n + nhold + 1) * sizeof *k), *y = dh_malloc((n + nhold + 1) * sizeof *y);
    double *w = dh_malloc((n + 1) * sizeof *w);
    int rc = topk_points(rows, n, hold, nhold, t, s, topks, ctx, k, y, w);
    tk_model tm = {topks, ctx, k, s->slots};
    fit_model fm = {TK_NPAR, tk_eval, &tm};
    nl_cand cand[7], *best = NULL;
    if (rc == 0) rc = topk_best(&fm, &tm, y, w, n, s, cand, &best);
    if (rc == 0) {
        double prow, pscore;
        topk_coefs(s, best, &tm, n, &prow, &pscore);
        if (nhold) {
            /* As the profile will: a term the fit left out is absent (prof.c writes it 0). */
            const double *p = best->r.p;
            const double pe[TK_NPAR] = {p[TK_T0], p[TK_WAVE], best->terms & TK_ROWB ? prow : 0, p[TK_K],
                                        best->terms & TK_SCOREB ? pscore : 0, p[TK_Q]};
            double *pred = dh_malloc(nhold * sizeof *pred);
            for (size_t i = 0; i < nhold; i++) pred[i] = fit_topk_time_us(pe, topks[n + i], ctx[n + i], k[n + i], s->slots, NULL);
            fit_error_distribution(pred, y + n, nhold, &s->holdout_err);
            free(pred);
        }
    }
    free(topks);
    free(ctx);
    free(k);
    free(y);
    free(w);
    return rc;
}

/* ---- driver ------------------------------------------------------------------ */

static int form_of(const char *kernel, const fit_opts *o, fit_form *f)
{
    *f = fit_form_for_kernel(kernel);
    for (const char *const *ov = o->forms; ov && *ov; ov++) {
        const char *eq = strchr(*ov, '=');
        if (!eq) return dh_err("--form '%s': expected KERNEL=FORM", *ov);
        if ((size_t)(eq - *ov) == strlen(kernel) && !strncmp(*ov, kernel, strlen(kernel)))
            return fit_form_parse(eq + 1, f);
    }
    return 0;
}

static void add_file(fit_section *s, const char *file)
{
    if (strstr(s->files, file)) return;
    size_t l = strlen(s->files);
    snprintf(s->files + l, sizeof s->files - l, "%s%s", l ? " " : "", file);
}

/* Whether a line is used at all: every line without --select, else the lines
 * matching one of its specs. */
static int selected(const bcsv_row *r, const fit_opts *o, int *use)
{
    *use = !o->select || !*o->select;
    for (const char *const *ss = o->select; ss && *ss && !*use; ss++)
        if (fit_holdout_match(r, *ss, use) < 0) return dh_err_prefix("--select '%s': ", *ss);
    return 0;
}

/* What a line is to the fit of one kernel. */
enum { ROLE_NONE, ROLE_UNCHECKED, ROLE_FIT, ROLE_HELD_OUT };
static int line_role(const bcsv_row *r, const fit_opts *o, const char *kernel, int *role)
{
    int use, h = 0;
    *role = ROLE_NONE;
    if (strcmp(r->s[BCSV_KERNEL], kernel)) return 0;
    /* A line timed beside a background kernel belongs to the beside fit, not the kernel's. */
    if (r->s[BCSV_PATTERN] && strstr(r->s[BCSV_PATTERN], "+beside_")) return 0;
    if (selected(r, o, &use) < 0) return -1;
    if (!use) return 0;
    if (!bcsv_row_checked(r)) { *role = ROLE_UNCHECKED; return 0; }
    for (const char *const *hs = o->holdout; hs && *hs && !h; hs++)
        if (fit_holdout_match(r, *hs, &h) < 0) return -1;
    *role = h ? ROLE_HELD_OUT : ROLE_FIT;
    return 0;
}

/* ---- the fetch beside a saturated memory system --------------------------------- */

double fit_beside_eval(const double *p, double rho, double *grad)
{
    /* The simulator's form (sim/cost.h); p[1] is log(half). */
    const cost_beside b = {p[0], exp(p[1]), p[2]};
    if (grad) {
        const double u = log(rho) - p[1], z = exp(p[2] * u), d = 1 + z;
        grad[0] = 1 / d;
        grad[1] = p[0] * z * p[2] / (d * d);
        grad[2] = -p[0] * z * u / (d * d);
    }
    return cost_beside_slowdown(&b, rho);
}

static double beside_eval(const void *model, size_t i, const double *p, double *grad)
{
    return fit_beside_eval(p, ((const double *)model)[i], grad);
}

static int same_str(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* The "+beside_hbm" lines among the selected, checked fetch lines, each against its partner
 * (fitcost.h); *s is filled as section "fetch_beside". *found = 0 when there is no such line. */
/* Line r's partner timed alone: every input the same, the pattern base without the suffix
 * (config_key), in the same file; NULL if none. */
static const bcsv_row *beside_partner(const bcsv_table *t, const bcsv_row *r, const char *base)
{
    char want[512], key[512];
    config_key_as(r, base, want, sizeof want);
    for (size_t j = 0; j < t->n; j++) {
        const bcsv_row *c = &t->rows[j];
        if (c->file != r->file || !bcsv_row_checked(c) || !same_str(c->s[BCSV_KERNEL], r->s[BCSV_KERNEL]) ||
            !same_str(c->s[BCSV_VERSION], r->s[BCSV_VERSION]) || !same_str(c->s[BCSV_TIMING], r->s[BCSV_TIMING]))
            continue;
        config_key(c, key, sizeof key);
        if (!strcmp(key, want)) return c;
    }
    return NULL;
}

/* The beside form fitted to the n pairs' slowdowns y at densities rho. */
static int beside_fit(fit_section *s, const double *rho, const double *y, size_t n)
{
    if (n < 4) return dh_err("the fetch beside the memory system: %zu pairs; the form has 3 parameters (give 4 or more)", n);
    double ymax = 0, lmin = INFINITY, lmax = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (y[i] > ymax) ymax = y[i];
        if (log(rho[i]) < lmin) lmin = log(rho[i]);
        if (log(rho[i]) > lmax) lmax = log(rho[i]);
        range_add(s, "density", rho[i]);
    }
    const fit_model m = {3, beside_eval, rho};
    const double p0[3] = {ymax > 0 ? ymax : 0.1, 0.5 * (lmin + lmax), 2};
    int rc = fit_nonlinear(&m, y, NULL, n, p0, NULL, &s->res);
    if (rc) return rc;
    const double *p = s->res.p, *se = s->res.se;
    if (!(p[0] >= 0) || !(p[2] > 0))
        rc = dh_err("the fetch beside the memory system: the fit gave slowdown_max %.3g, steepness %.3g (need >= 0 and > 0)",
                    p[0], p[2]);
    coef_add(s, "slowdown_max", p[0], se[0], 0, 0, 0);
    coef_add(s, "density_half", exp(p[1]), exp(p[1]) * se[1], 0, 0, 0);
    coef_add(s, "steepness", p[2], se[2], 0, 0, 0);
    return rc;
}

static int fit_fetch_beside(const bcsv_table *t, const fit_opts *o, fit_section *s, int *found, FILE *msg)
{
    static const char suffix[] = "+beside_hbm";
    *found = 0;
    size_t n = 0, other = 0;
    double *rho = dh_malloc((t->n + 1) * sizeof *rho), *y = dh_malloc((t->n + 1) * sizeof *y);
    int rc = 0;
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < t->n && rc == 0; i++) {
        const bcsv_row *r = &t->rows[i];
        const char *pat = r->s[BCSV_PATTERN] ? r->s[BCSV_PATTERN] : "";
        const char *at = strstr(pat, "+beside_");
        int use;
        if (!at || strcmp(r->s[BCSV_KERNEL], "fetch")) continue;
        if ((rc = selected(r, o, &use)) < 0) break;
        if (!use || !bcsv_row_checked(r)) continue;
        if (strcmp(at, suffix)) { other++; continue; }   /* beside=alu and the like: reported */
        const size_t base_len = (size_t)(at - pat);
        char base[64];
        snprintf(base, sizeof base, "%.*s", (int)base_len, pat);
        const bcsv_row *a = beside_partner(t, r, base);
        if (!a) {
            rc = dh_err("%s line %ld: a fetch line beside the memory system (%s) without its partner timed alone "
                        "(pattern '%.*s', the same parameters, in the same file)",
                        t->files[r->file], r->line, pat, (int)base_len, pat);
            break;
        }
        if (!(o->region_bytes > 0)) {
            rc = dh_err("%s line %ld: the fetch beside the memory system is fitted against density: the base profile "
                        "needs [gather] region_bytes", t->files[r->file], r->line);
            break;
        }
        if ((rc = fit_fetch_density(base, a->v[BCSV_ROWS], a->v[BCSV_ROW_BYTES], a->v[BCSV_POOL_BYTES], a->v[BCSV_CTX],
                                    a->v[BCSV_K], o->region_bytes, &rho[n])) < 0) {
            rc = dh_err_prefix("%s line %ld: ", t->files[a->file], a->line);
            break;
        }
        if (!(a->v[BCSV_MEDIAN_US] > 0) || !(r->v[BCSV_MEDIAN_US] > 0)) {
            rc = dh_err("%s line %ld: median_us must be > 0 for the beside fit", t->files[r->file], r->line);
            break;
        }
        y[n++] = r->v[BCSV_MEDIAN_US] / a->v[BCSV_MEDIAN_US] - 1;
        add_file(s, t->files[r->file]);
        snprintf(s->version, sizeof s->version, "%s", r->s[BCSV_VERSION] ? r->s[BCSV_VERSION] : "");
    }
    if (rc == 0 && n) {
        *found = 1;
        s->form = FIT_FORM_BESIDE;
        snprintf(s->section, sizeof s->section, "fetch_beside");
        snprintf(s->kernel, sizeof s->kernel, "fetch");
        snprintf(s->versions_seen, sizeof s->versions_seen, "%s", s->version);
        snprintf(s->selection, sizeof s->selection, "each '%s' line against its partner timed alone", suffix);
        rc = beside_fit(s, rho, y, n);
    }
    if (rc == 0 && other && msg)
        fprintf(msg, "dhcal: %zu fetch lines beside other work than the memory system (beside=alu, ...) are not fitted\n", other);
    free(rho);
    free(y);
    return rc;
}

double fit_mma_efficiency(double ceiling_tflops, double peak_flops)
{
    char b[32];
    snprintf(b, sizeof b, "%.4f", ceiling_tflops * 1e12 / peak_flops);
    return strtod(b, NULL);
}

/* The roofline of the sections after the GEMMs: the base's, at the efficiency of the weights'
 * dtype's GEMM section when it measured a rate (else the base's efficiency, which the profile
 * then keeps). */
static void roof_from_gemms(const fit_opts *o, const fit_section *secs, size_t ns, cost_roofline *roof)
{
    const char *dtype = o->weight_dtype ? o->weight_dtype : "fp8";
    for (size_t i = 0; i < ns; i++)
        if (secs[i].form == FIT_FORM_GEMM && !strcmp(secs[i].dtype, dtype) && !isnan(secs[i].ceiling) && roof->sms > 0)
            roof->mma_efficiency = secs[i].roof.mma_efficiency;
}

/* The sections back in the order of their kernels in the table (the GEMMs were fitted
 * first), a kernel's dtypes in their order: a stable insertion sort, a few sections. */
static void sections_in_kernel_order(fit_section *secs, size_t *kidx, size_t ns)
{
    for (size_t i = 1; i < ns; i++)
        for (size_t j = i; j > 0 && kidx[j - 1] > kidx[j]; j--) {
            fit_section t = secs[j];
            secs[j] = secs[j - 1];
            secs[j - 1] = t;
            size_t x = kidx[j];
            kidx[j] = kidx[j - 1];
            kidx[j - 1] = x;
        }
}

/* The kernel's checked lines outside the hold-out into rows (*n), and how many were left out
 * unchecked. */
static int kernel_lines(const bcsv_table *t, const fit_opts *o, const char *kernel, const bcsv_row **rows, size_t *n,
                        size_t *unchecked)
{
    *n = 0;
    if (unchecked) *unchecked = 0;
    for (size_t i = 0; i < t->n; i++) {
        int role;
        if (line_role(&t->rows[i], o, kernel, &role) < 0) return -1;
        if (role == ROLE_UNCHECKED && unchecked) (*unchecked)++;
        if (role == ROLE_FIT) rows[(*n)++] = &t->rows[i];
    }
    return 0;
}

static int same_version_dtype(const bcsv_row *r, fit_form form, const char *version, const char *dtype)
{
    if (strcmp(r->s[BCSV_VERSION] ? r->s[BCSV_VERSION] : "", version)) return 0;
    return form != FIT_FORM_GEMM || !strcmp(r->s[BCSV_DTYPE] ? r->s[BCSV_DTYPE] : "", dtype);
}

/* One section, s->form, s->kernel, s->version and s->dtype set: its lines of that version
 * (and dtype) out of rows[0..n) (compacted in place), the GEMM ceiling they measured, the
 * held-out lines of the same, then the form's fit at roof and the R^2 check. */
static int fit_section_lines(const bcsv_table *t, const fit_opts *o, const bcsv_row **rows, size_t n,
                             const bcsv_row **hold, const cost_roofline *roof, fit_section *s)
{
    const fit_form form = s->form;
    size_t m = 0, nh = 0;
    for (size_t i = 0; i < n; i++) {
        const bcsv_row *r = rows[i];
        if (!same_version_dtype(r, form, s->version, s->dtype)) continue;
        add_file(s, t->files[r->file]);
        /* The largest GEMM rate the run measured (dhbench's ceiling). */
        const char *cn = r->s[BCSV_CEILING_NAME];
        if (form == FIT_FORM_GEMM && cn && strstr(cn, "gemm") && !isnan(r->v[BCSV_CEILING_VALUE]) &&
            !(r->v[BCSV_CEILING_VALUE] <= s->ceiling)) {
            s->ceiling = r->v[BCSV_CEILING_VALUE];
            snprintf(s->ceiling_name, sizeof s->ceiling_name, "%s", cn);
        }
        rows[m++] = r; /* compact in place: rows[m] <= rows[i] */
    }
    for (size_t i = 0; i < t->n; i++) {
        const bcsv_row *r = &t->rows[i];
        int role;
        if (line_role(r, o, s->kernel, &role) < 0) return -1;
        if (role == ROLE_HELD_OUT && same_version_dtype(r, form, s->version, s->dtype)) hold[nh++] = r;
    }
    s->held_out = nh;
    s->roof = *roof;
    if (form == FIT_FORM_GEMM && roof->sms > 0 && !isnan(s->ceiling))
        s->roof.mma_efficiency = fit_mma_efficiency(s->ceiling, strcmp(s->dtype, "bf16") ? roof->fp8_flops : roof->bf16_flops);
    int rc = form == FIT_FORM_FETCH     ? fit_fetch(rows, m, hold, nh, t, o, s)
             : form == FIT_FORM_INDEXER ? fit_indexer(rows, m, hold, nh, t, o, s)
             : form == FIT_FORM_TOPK    ? fit_topk(rows, m, hold, nh, t, o, s)
                                        : fit_lin(rows, m, hold, nh, t, o, s);
    if (rc == 0 && form != FIT_FORM_CONST && !(s->res.r2 >= o->min_r2))
        rc = dh_err("kernel '%s' version '%s': %s fit R^2 %.4f is below the threshold %.4f (relative rms %.1f %%)",
                    s->kernel, s->version, s->section, s->res.r2, o->min_r2, 100 * s->res.rms_rel);
    return rc;
}

/* Every section of one kernel (GEMMs one per dtype, the rest one) appended at secs[*ns]. */
static int fit_kernel(const bcsv_table *t, const fit_opts *o, const char *kernel, fit_form form, const cost_roofline *roof,
                      const bcsv_row **rows, const bcsv_row **hold, fit_section *secs, size_t *ns)
{
    size_t n, unchecked;
    if (kernel_lines(t, o, kernel, rows, &n, &unchecked) < 0) return -1;
    if (n == 0) return dh_err("kernel '%s': no checked line outside the hold-out", kernel);
    char version[64], seen[256], why[160];
    if (choose_version(rows, n, kernel, o, version, sizeof version, seen, sizeof seen, why, sizeof why) < 0) return -1;
    /* Groups: GEMMs per dtype, everything else one group. */
    char *dtypes[FIT_MAX_GROUPS];
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        const char *d = form == FIT_FORM_GEMM && rows[i]->s[BCSV_DTYPE] ? rows[i]->s[BCSV_DTYPE] : "";
        if (str_in(dtypes, nd, d) < 0) {
            if (nd == FIT_MAX_GROUPS) return dh_err("kernel '%s': more than %d dtypes", kernel, FIT_MAX_GROUPS);
            dtypes[nd++] = (char *)d;
        }
    }
    for (size_t d = 0; d < nd; d++) {
        /* Each dtype group compacts rows: it needs the kernel's full line list again. */
        if (d > 0 && kernel_lines(t, o, kernel, rows, &n, NULL) < 0) return -1;
        fit_section *s = &secs[(*ns)++];
        memset(s, 0, sizeof *s);
        s->form = form;
        snprintf(s->kernel, sizeof s->kernel, "%s", kernel);
        snprintf(s->version, sizeof s->version, "%s", version);
        snprintf(s->versions_seen, sizeof s->versions_seen, "%s", seen);
        snprintf(s->selection, sizeof s->selection, "%s", why);
        if (form == FIT_FORM_GEMM) snprintf(s->section, sizeof s->section, "%s_%s", kernel, dtypes[d]);
        else snprintf(s->section, sizeof s->section, "%s", kernel);
        s->skipped_unchecked = unchecked;
        s->ceiling = NAN;
        if (form == FIT_FORM_GEMM) snprintf(s->dtype, sizeof s->dtype, "%s", dtypes[d]);
        if (fit_section_lines(t, o, rows, n, hold, roof, s) < 0) return -1;
    }
    return 0;
}

/* The kernels of the selected lines, in the order of their first line. */
static int bench_kernels(const bcsv_table *t, const fit_opts *o, char **kernels, size_t *nk, FILE *log)
{
    size_t unselected = 0;
    *nk = 0;
    for (size_t i = 0; i < t->n; i++) {
        int use;
        if (selected(&t->rows[i], o, &use) < 0) return -1;
        if (!use) { unselected++; continue; }
        if (str_in(kernels, *nk, t->rows[i].s[BCSV_KERNEL]) < 0) {
            if (*nk == 64) return dh_err("more than 64 kernels in the results");
            kernels[(*nk)++] = t->rows[i].s[BCSV_KERNEL];
        }
    }
    if (unselected && log) fprintf(log, "dhcal: %zu lines match no --select and are not used\n", unselected);
    return 0;
}

int fit_bench(const bcsv_table *t, const fit_opts *o, fit_section **out, size_t *nout, FILE *log)
{
    *out = NULL;
    *nout = 0;
    char *kernels[64];
    size_t nk;
    if (bench_kernels(t, o, kernels, &nk, log) < 0) return -1;
    const bcsv_row **rows = dh_malloc((t->n + 1) * sizeof *rows), **hold = dh_malloc((t->n + 1) * sizeof *hold);
    fit_section *secs = dh_calloc(nk * FIT_MAX_GROUPS + 2, sizeof *secs);   /* + fetch_beside */
    size_t *kidx = dh_calloc(nk * FIT_MAX_GROUPS + 2, sizeof *kidx);       /* each section's kernel */
    size_t ns = 0;
    int rc = 0;
    /* The GEMMs first: the weights' dtype's measured rate is the efficiency of every other
     * section's tensor term (the profile's one mma_efficiency). */
    cost_roofline roof = o->roof;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (pass == 1) roof_from_gemms(o, secs, ns, &roof);
        for (size_t k = 0; k < nk && rc == 0; k++) {
            fit_form form;
            if ((rc = form_of(kernels[k], o, &form)) < 0) break;
            if ((form == FIT_FORM_GEMM) != (pass == 0)) continue;
            if (form == FIT_FORM_NONE) {
                if (log) fprintf(log, "dhcal: kernel '%s' has no cost-model form; not fitted (use --form %s=FORM)\n", kernels[k], kernels[k]);
                continue;
            }
            const size_t first = ns;
            rc = fit_kernel(t, o, kernels[k], form, &roof, rows, hold, secs, &ns);
            for (size_t i = first; i < ns; i++) kidx[i] = k;
        }
    }
    if (rc == 0) sections_in_kernel_order(secs, kidx, ns);
    if (rc == 0) {
        int found = 0;
        if ((rc = fit_fetch_beside(t, o, &secs[ns], &found, log)) == 0 && found) ns++;
    }
    free(kidx);
    free(rows);
    free(hold);
    if (rc) { free(secs); return -1; }
    if (ns == 0) { free(secs); return dh_err("no kernel with a cost-model form in the results"); }
    *out = secs;
    *nout = ns;
    return 0;
}
