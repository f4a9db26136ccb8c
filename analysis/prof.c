/* prof.c: the hardware profile writer and checker; see prof.h.
 *
 * The rewrite works on the base profile's text, line by line, so that the
 * comments carrying each hand-entered number's source survive a refit.
 * Profiles are a few hundred lines: everything here is linear scans. */
#include "analysis/prof.h"
#include "common/cfg.h"
#include "common/ofile.h"
#include "common/dh_err.h"
#include "sim/hw.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One replacement: [section] key gets value, preceded by comment lines. */
typedef struct {
    const char *section, *key;
    char value[1024];
    char comment[4096];
    int done;
    int append; /* an optional key: added at the end of its section when the base lacks it */
} repl;

#define MAX_REPL 48

static int load_cfg_hw(const char *path, cfg **c, hw_profile *hw)
{
    if (cfg_load(path, c) < 0) return -1;
    if (hw_load(*c, hw) < 0) { cfg_free(*c); return dh_err_prefix("profile '%s': ", path); }
    return 0;
}

int prof_base_page_bytes(const char *base_path, double *page_bytes, double *region_bytes)
{
    cfg *c;
    hw_profile hw;
    if (load_cfg_hw(base_path, &c, &hw) < 0) return -1;
    *page_bytes = hw.page_bytes;
    *region_bytes = hw.region_bytes;
    cfg_free(c);
    return 0;
}

static const fit_coef *coef(const fit_section *s, const char *key)
{
    for (size_t i = 0; i < s->ncoef; i++)
        if (!strcmp(s->coef[i].key, key)) return &s->coef[i];
    return NULL;
}

static const fit_range *range_of(const fit_section *s, const char *name)
{
    for (size_t i = 0; i < s->nrange; i++)
        if (!strcmp(s->range[i].name, name)) return &s->range[i];
    return NULL;
}

/* The provenance comment shared by every key a section feeds. */
static void provenance(const fit_section *s, char *buf, size_t cap)
{
    size_t off = 0;
#define ADD(...) do { if (off < cap) off += (size_t)snprintf(buf + off, cap - off, __VA_ARGS__); } while (0)
    ADD("; dhcal: from %s: kernel %s version %s (%s; versions measured: %s)\n", s->files, s->kernel, s->version,
        s->selection, s->versions_seen);
    if (s->form == FIT_FORM_BESIDE)   /* slowdowns near 0: an absolute residual */
        ADD("; dhcal: %s form, %zu points, residual rms %.3g (slowdown), R^2 %.5f", fit_form_name(s->form), s->res.npoints,
            s->res.rms_abs, s->res.r2);
    else
        ADD("; dhcal: %s form, %zu points, residual rms %.2f %% (%.4g in the fit's units), weighted R^2 %.5f",
            fit_form_name(s->form), s->res.npoints, 100 * s->res.rms_rel, s->res.rms_abs, s->res.r2);
    if (s->skipped_unchecked) ADD(", %zu unchecked lines left out", s->skipped_unchecked);
    if (s->held_out)
        ADD(", %zu held out: error median %.2f %% p95 %.2f %% max %.2f %%", s->held_out, 100 * s->holdout_err.median,
            100 * s->holdout_err.p95, 100 * s->holdout_err.max);
    ADD("\n; dhcal: coefficients:");
    for (size_t i = 0; i < s->ncoef; i++) {
        const fit_coef *c = &s->coef[i];
        ADD("%s %s = %.5g +- %.2g", i ? "," : "", c->key, c->value, c->se);
        if (c->fixed_zero) ADD(" (fit gave %.3g +- %.2g, inside the noise: held at 0)", c->fit_value, c->fit_se);
        if (c->undetermined) ADD(" (not determined by the data: left out)");
        if (c->bound) ADD(" (a lower bound: every point is limited by the other term)");
    }
    ADD("\n; dhcal: fitted range:");
    for (size_t i = 0; i < s->nrange; i++)
        ADD("%s %s %.6g..%.6g", i ? "," : "", s->range[i].name, s->range[i].min, s->range[i].max);
    ADD("\n");
#undef ADD
}

static void list_append(char *buf, size_t cap, double v)
{
    size_t l = strlen(buf);
    snprintf(buf + l, cap - l, "%s%.5g", l ? ", " : "", v);
}

/* inih reads lines of at most 200 bytes, so long comment lines are wrapped at
 * a space, each piece again starting "; dhcal:". */
enum { WRAP = 150 };
static void write_wrapped(FILE *out, const char *text)
{
    while (*text) {
        size_t len = strcspn(text, "\n");
        const char *line = text;
        int first = 1;
        while (len > 0) {
            size_t take = len;
            if (len > WRAP) {
                take = WRAP;
                while (take > 40 && line[take] != ' ') take--;
            }
            if (!first) fputs("; dhcal:  ", out);
            fwrite(line, 1, take, out);
            fputc('\n', out);
            line += take;
            len -= take;
            while (len && *line == ' ') { line++; len--; }
            first = 0;
        }
        text = line + (*line == '\n');
    }
}

/* Table x points: the distinct fitted values when few, else log-spaced over
 * the fitted range. */
static size_t table_points_n(double lo, double hi, const double *distinct, size_t nd, size_t n, double *x)
{
    if (nd && nd <= 12) { memcpy(x, distinct, nd * sizeof *x); return nd; }
    if (!(hi > lo)) { x[0] = lo; return 1; }
    for (size_t i = 0; i < n; i++) x[i] = exp(log(lo) + (log(hi) - log(lo)) * (double)i / (double)(n - 1));
    x[0] = lo;
    x[n - 1] = hi;
    return n;
}

static size_t table_points(double lo, double hi, const double *distinct, size_t nd, double *x)
{
    return table_points_n(lo, hi, distinct, nd, 10, x);
}

/* A fixed cost the data resolve (its value more than two standard errors
 * from 0) replaces the base's; one they do not resolve (launches far longer
 * than it, or a fit below 0 inside the noise) keeps the base's value, and the
 * comment says so instead of writing a fitted 0. */
static void fixed_cost(const fit_coef *t0, double base_s, const char *what, repl *l)
{
    if (!t0->fixed_zero && !t0->undetermined && t0->value > 2 * t0->se) {
        snprintf(l->value, sizeof l->value, "%.6g", t0->value * 1e-6);
        snprintf(l->comment, sizeof l->comment, "; dhcal: %s = t0_us of the %s fit above (%.4g +- %.2g us)\n", l->key, what, t0->value, t0->se);
        return;
    }
    snprintf(l->value, sizeof l->value, "%.6g", base_s);
    snprintf(l->comment, sizeof l->comment,
             "; dhcal: %s kept from the base profile (an assumption there): the %s fit does not resolve t0 (fit gave %.3g +- %.2g us)\n",
             l->key, what, t0->fixed_zero ? t0->fit_value : t0->value, t0->fixed_zero ? t0->fit_se : t0->se);
}

/* Integer-valued table points (pages) print without an exponent. */
static void list_append_int(char *buf, size_t cap, double v)
{
    size_t l = strlen(buf);
    snprintf(buf + l, cap - l, "%s%.0f", l ? ", " : "", v);
}

/* The fetch model with the fitted raw parameters (fit units: ns, bytes). */
static double tau_inf(const double *p, double s) /* ns per row, SMs saturated */
{
    double B = p[FIT_FP_ISSUE] + s * p[FIT_FP_ISSUE_B], C = s * p[FIT_FP_LINK];
    return B > C ? B : C;
}

static int fetch_repls(const fit_section *s, const prof_opts *o, const hw_profile *base, double pool_bytes,
                       const double *row_sizes, size_t nrow, const double *sms_vals, size_t nsms,
                       repl *r, size_t *nr)
{
    const double *p = s->res.p;
    const fit_range *rb = range_of(s, "row_bytes");
    if (!rb) return dh_err("fetch fit has no row_bytes range");
    double ref = base->cost.fetch.ref_row_bytes;
    if (ref < rb->min || ref > rb->max)
        return dh_err("[gather] ref_row_bytes = %g lies outside the fitted row sizes %g..%g", ref, rb->min, rb->max);
    char prov[2048];
    provenance(s, prov, sizeof prov);
    double x[32];
    size_t n;
    repl *a = &r[(*nr)++], *b = &r[(*nr)++];
    *a = (repl){.section = "gather", .key = "row_bytes"};
    *b = (repl){.section = "gather", .key = "row_bw"};
    n = table_points(rb->min, rb->max, row_sizes, nrow, x);
    for (size_t i = 0; i < n; i++) {
        list_append(a->value, sizeof a->value, x[i]);
        list_append(b->value, sizeof b->value, x[i] / tau_inf(p, x[i]) * 1e9);
    }
    snprintf(a->comment, sizeof a->comment, "%s; dhcal: row_bw = row_bytes / max(row_issue_ns + row_bytes * row_issue_ps_per_byte / 1000, row_bytes / link_gbps), SMs saturated, small host footprint\n", prov);

    repl *c = &r[(*nr)++], *d = &r[(*nr)++];
    *c = (repl){.section = "gather", .key = "sms"};
    *d = (repl){.section = "gather", .key = "sms_factor"};
    const fit_range *sr = range_of(s, "sms");
    n = table_points(sr->min, sr->max, sms_vals, nsms, x);
    for (size_t i = 0; i < n; i++) {
        double t = tau_inf(p, ref), tm = p[FIT_FP_SM] / x[i];
        list_append(c->value, sizeof c->value, x[i]);
        list_append(d->value, sizeof d->value, t / (tm > t ? tm : t));
    }
    snprintf(c->comment, sizeof c->comment, "; dhcal: sms_factor = tau(ref_row_bytes, saturated) / max(sm_row_ns / sms, tau); fetch kernel from the gather fit above\n");

    repl *e = &r[(*nr)++], *f = &r[(*nr)++];
    *e = (repl){.section = "gather", .key = "pages"};
    *f = (repl){.section = "gather", .key = "pages_bw"};
    int g = -1;
    for (size_t i = 0; i < s->ngroups; i++)
        if (!strcmp(s->groups[i], o->fetch_pattern)) g = (int)i;
    if (s->ngroups && g < 0) {
        char have[256] = "";
        for (size_t i = 0; i < s->ngroups; i++) { size_t l = strlen(have); snprintf(have + l, sizeof have - l, "%s%s", i ? ", " : "", s->groups[i]); }
        return dh_err("the fetch fit has no pattern '%s' for [gather] pages_bw (has %s; choose with --fetch-pattern)", o->fetch_pattern, have);
    }
    const fit_range *pr = range_of(s, "pages");
    if (g < 0 || !pr) {
        /* No pool measurements: one point, the small-footprint bandwidth. */
        list_append(e->value, sizeof e->value, 1);
        list_append(f->value, sizeof f->value, ref / tau_inf(p, ref) * 1e9);
        snprintf(e->comment, sizeof e->comment, "; dhcal: no host-pool measurements: pages_bw is the small-footprint bandwidth at every page count\n");
    } else {
        const fit_range *pool = range_of(s, "pool_bytes");
        if (pool && (pool_bytes < pool->min || pool_bytes > pool->max))
            fprintf(stderr, "dhcal: warning: pool of %.4g bytes for pages_bw lies outside the fitted pool sizes %.4g..%.4g\n",
                    pool_bytes, pool->min, pool->max);
        n = table_points(pr->min, pr->max, NULL, 0, x);
        double page_ns = p[FIT_FP_PAGE0 + 2 * g], reach = p[FIT_FP_PAGE0 + 1 + 2 * g], walk = 1.0 - p[FIT_FP_WALK] * 1e9 / pool_bytes;
        if (walk < 0) walk = 0;
        for (size_t i = 0; i < n; i++) {
            double over = x[i] - reach, t = tau_inf(p, ref) + (over > 0 ? page_ns * over * walk / x[i] : 0);
            list_append_int(e->value, sizeof e->value, round(x[i]));
            list_append(f->value, sizeof f->value, ref / t * 1e9);
        }
        snprintf(e->comment, sizeof e->comment,
                 "; dhcal: pages_bw = ref_row_bytes / (tau + page_ns_%s * max(0, pages - page_reach_%s) * max(0, 1 - walk_reach_gb / pool) / pages), one row per page, pool %.4g bytes\n",
                 o->fetch_pattern, o->fetch_pattern, pool_bytes);
    }
    const fit_coef *dn = coef(s, "density_ns"), *dp = coef(s, "density_pow");
    const fit_range *dr = range_of(s, "density");
    if (dn && dp && dr) {
        /* The issue path with its walks, against the density; row_bw and pages_bw above leave
         * the walks out (tau: no walk), and the simulator takes the slower path (sim/hw.h). */
        repl *dx = &r[(*nr)++], *dy = &r[(*nr)++];
        *dx = (repl){.section = "gather", .key = "density", .append = 1};
        *dy = (repl){.section = "gather", .key = "issue_row_s", .append = 1};
        /* A power law is convex in log(x): 14 points (what fits a profile line) keep the
         * simulator's linear interpolation within ~1 % of it over three decades. */
        n = table_points_n(dr->min, dr->max, NULL, 0, 14, x);
        double issue = p[FIT_FP_ISSUE] + ref * p[FIT_FP_ISSUE_B];
        for (size_t i = 0; i < n; i++) {
            list_append(dx->value, sizeof dx->value, x[i]);
            list_append(dy->value, sizeof dy->value, (issue + dn->value * pow(x[i], -dp->value)) * 1e-9);
        }
        snprintf(dx->comment, sizeof dx->comment,
                 "; dhcal: issue_row_s = row_issue_ns + ref_row_bytes * row_issue_ps_per_byte / 1000 + density_ns * "
                 "density^-density_pow of the gather fit above: the per-row time of the issue path with its "
                 "translation walks; density = rows per [gather] region_bytes region entered (a window's misses "
                 "read in address order)\n");
    }
    repl *l = &r[(*nr)++];
    *l = (repl){.section = "gather", .key = "launch_s"};
    fixed_cost(coef(s, "t0_us"), base->cost.fetch.launch_s, "gather", l);
    return 0;
}

/* Optional keys of section sec that the base lacks go after its last key. */
static void append_missing(FILE *out, repl *r, size_t nr, const char *sec)
{
    for (size_t i = 0; i < nr; i++)
        if (r[i].append && !r[i].done && !strcmp(r[i].section, sec)) {
            write_wrapped(out, r[i].comment);
            fprintf(out, "%s = %s\n", r[i].key, r[i].value);
            r[i].done = 1;
        }
}

/* The rewrite. */
static int is_key_line(const char *line, char *key, size_t cap)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == ';' || *p == '#' || *p == '[') return 0;
    const char *eq = strchr(p, '=');
    if (!eq) return 0;
    const char *e = eq;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t')) e--;
    size_t l = (size_t)(e - p);
    if (l >= cap) return 0;
    memcpy(key, p, l);
    key[l] = 0;
    return 1;
}

static int section_line(const char *line, char *sec, size_t cap)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p != '[') return 0;
    const char *e = strchr(p, ']');
    if (!e || (size_t)(e - p - 1) >= cap) return 0;
    memcpy(sec, p + 1, (size_t)(e - p - 1));
    sec[e - p - 1] = 0;
    return 1;
}

/* [fitted_at]: the datasheet rates that the profile's fitted keys replace (sim/hw.h:
 * hw_fitted_rate), each as the base gives it; those the base's own [fitted_at] names (its
 * measured [gather] tables) too. The simulator rejects a profile whose rate differs. */
static int write_fitted_at(FILE *out, const char *base_path, const repl *r, size_t nr)
{
    cfg *bc;
    if (cfg_load(base_path, &bc) < 0) return -1;
    static const char *const rates[][2] = { { "hw", "hbm_bw" }, { "hw", "fp8_flops" }, { "hw", "kernel_launch_s" },
                                            { "hw", "sms" }, { "pcie", "h2d_bw" } };
    fprintf(out, "\n[fitted_at]\n");
    write_wrapped(out, "; dhcal: the datasheet rates that the fitted keys replace in their kernels' costs, at the values they were "
                       "fitted beside; a profile whose [hw] or [pcie] value differs is an error (another GPU: a scaled "
                       "profile, docs/HARDWARE.md)\n");
    for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++) {
        int need = cfg_has(bc, "fitted_at", rates[k][1]);
        for (size_t i = 0; i < nr && !need; i++) {
            const char *rs, *rk;
            need = hw_fitted_rate(r[i].section, r[i].key, &rs, &rk) && !strcmp(rk, rates[k][1]) && strtod(r[i].value, NULL) > 0;
        }
        if (need) fprintf(out, "%s = %s\n", rates[k][1], cfg_str(bc, rates[k][0], rates[k][1]));
    }
    cfg_free(bc);
    return 0;
}

int prof_write(const prof_opts *o, const fit_section *secs, size_t nsec, const char *out_path, FILE *log)
{
    cfg *bc;
    hw_profile base;
    if (load_cfg_hw(o->base_path, &bc, &base) < 0) return -1;
    cfg_free(bc);
    double pool_bytes = isnan(o->pool_bytes) ? base.host_dram_bytes : o->pool_bytes;

    repl r[MAX_REPL];
    size_t nr = 0;
    int rc = 0;
    const fit_section *fetch = NULL, *attn = NULL, *gemm = NULL, *indexer = NULL, *topk = NULL, *beside = NULL;
    char ranges[4096] = "", unused[2048] = "";
    for (size_t i = 0; i < nsec; i++) {
        const fit_section *s = &secs[i];
        for (size_t j = 0; j < s->nrange; j++) {
            size_t l = strlen(ranges);
            snprintf(ranges + l, sizeof ranges - l, "%s_%s = %.10g, %.10g\n", s->section, s->range[j].name, s->range[j].min, s->range[j].max);
        }
        size_t l = strlen(unused);
        if (s->form == FIT_FORM_FETCH && (!fetch || !strcmp(s->section, "fetch"))) fetch = s;
        else if (s->form == FIT_FORM_HBM && (!attn || strstr(s->section, "att"))) attn = s;
        else if (s->form == FIT_FORM_GEMM && !strcmp(s->dtype, o->weight_dtype)) gemm = s;
        else if (s->form == FIT_FORM_GEMM) snprintf(unused + l, sizeof unused - l, " %s (not the weights' dtype %s)", s->section, o->weight_dtype);
        else if (s->form == FIT_FORM_INDEXER) indexer = s;
        else if ((s->form == FIT_FORM_TOPK || s->form == FIT_FORM_CONST) && strstr(s->kernel, "topk")) topk = s;
        else if (s->form == FIT_FORM_BESIDE) beside = s;
        else snprintf(unused + l, sizeof unused - l, " %s", s->section);
    }
    /* The profile is named after its file, so a calibrated copy says which it is. */
    {
        const char *bn = strrchr(out_path, '/');
        bn = bn ? bn + 1 : out_path;
        size_t len = strcspn(bn, ".");
        repl *a = &r[nr++];
        *a = (repl){.section = "hw", .key = "name"};
        snprintf(a->value, sizeof a->value, "%.*s", (int)(len < 60 ? len : 60), bn);
        snprintf(a->comment, sizeof a->comment, "; dhcal: name = the profile's file name\n");
    }
    if (fetch) {
        double rows_d[32], sms_d[32];
        size_t nrow = 0, nsms = 0;
        /* Distinct fitted row sizes and SM counts are not kept per point in
         * fit_section; the table uses its range ends and log spacing when
         * they are many, else these. */
        const fit_range *rb = range_of(fetch, "row_bytes"), *sr = range_of(fetch, "sms");
        static const double common_rows[] = {128, 256, 512, 584, 656, 768, 1024, 1152, 2048, 4096, 8192, 16384};
        static const double common_sms[] = {1, 2, 4, 8, 16, 32, 64, 66, 128, 132};
        for (size_t i = 0; i < sizeof common_rows / sizeof *common_rows; i++)
            if (common_rows[i] >= rb->min && common_rows[i] <= rb->max) rows_d[nrow++] = common_rows[i];
        if (!nrow || rows_d[0] != rb->min) { memmove(rows_d + 1, rows_d, nrow * sizeof *rows_d); rows_d[0] = rb->min; nrow++; }
        if (rows_d[nrow - 1] != rb->max) rows_d[nrow++] = rb->max;
        for (size_t i = 0; i < sizeof common_sms / sizeof *common_sms; i++)
            if (common_sms[i] >= sr->min && common_sms[i] <= sr->max) sms_d[nsms++] = common_sms[i];
        if (!nsms || sms_d[0] != sr->min) { memmove(sms_d + 1, sms_d, nsms * sizeof *sms_d); sms_d[0] = sr->min; nsms++; }
        if (sms_d[nsms - 1] != sr->max) sms_d[nsms++] = sr->max;
        if ((rc = fetch_repls(fetch, o, &base, pool_bytes, rows_d, nrow, sms_d, nsms, r, &nr)) < 0) return -1;
    }
    if (beside) {
        /* The fetch's slowdown beside a saturated memory system, against density (sim/hw.h:
         * the weight of compute_interference). */
        const fit_range *dr = range_of(beside, "density");
        char prov[2048];
        provenance(beside, prov, sizeof prov);
        repl *dx = &r[nr++], *dy = &r[nr++];
        *dx = (repl){.section = "gather", .key = "beside_density", .append = 1};
        *dy = (repl){.section = "gather", .key = "beside_slowdown", .append = 1};
        double x[32];
        size_t n = table_points_n(dr->min, dr->max, NULL, 0, 14, x);
        for (size_t i = 0; i < n; i++) {
            list_append(dx->value, sizeof dx->value, x[i]);
            list_append(dy->value, sizeof dy->value, fit_beside_eval(beside->res.p, x[i], NULL));
        }
        snprintf(dx->comment, sizeof dx->comment,
                 "%s; dhcal: beside_slowdown = slowdown_max / (1 + (density / density_half)^steepness): how much longer "
                 "a fetch launch of that density takes beside a kernel that saturates the memory system (dhbench fetch "
                 "beside=hbm against beside=none)\n", prov);
    }
    if (attn) {
        /* Sparse attention: its own fixed cost and the selected rows' bytes at
         * the kernel's rate (step.c); hbm_bw stays the copy rate of the base. */
        char prov[2048];
        provenance(attn, prov, sizeof prov);
        repl *a = &r[nr++], *b = &r[nr++];
        *a = (repl){.section = "hw", .key = "attn_bw", .append = 1};
        *b = (repl){.section = "hw", .key = "attn_launch_s", .append = 1};
        snprintf(a->value, sizeof a->value, "%.6g", coef(attn, "hbm_gbps")->value * 1e9);
        snprintf(a->comment, sizeof a->comment, "%s; dhcal: attn_bw = hbm_gbps (selected rows' bytes the kernel reads per second); per-query and per-union-row terms are not in the simulator's form\n", prov);
        fixed_cost(coef(attn, "t0_us"), base.cost.attn.launch_s, attn->section, b);
    }
    if (gemm) {
        /* Projections and experts: launches x the GEMM's fixed cost, plus the
         * weights at the decode GEMMs' streaming rate. */
        if (isnan(o->layer_gemms) || !(o->layer_gemms >= 1))
            return dh_err("the %s fit sets [hw] layer_fixed_s = launches x t0: give the GEMM launches per layer (--layer-gemms N)", gemm->section);
        const fit_coef *t0 = coef(gemm, "t0_us");
        if (!(t0->value > 0) || t0->fixed_zero)
            return dh_err("kernel '%s' %s: the fixed cost per GEMM is not resolved (t0 %.3g +- %.2g us): layer_fixed_s needs it", gemm->kernel, gemm->dtype, t0->value, t0->se);
        char prov[2048];
        provenance(gemm, prov, sizeof prov);
        repl *a = &r[nr++], *b = &r[nr++];
        *a = (repl){.section = "hw", .key = "weight_bw", .append = 1};
        *b = (repl){.section = "hw", .key = "layer_fixed_s", .append = 1};
        snprintf(a->value, sizeof a->value, "%.6g", coef(gemm, "weight_gbps")->value * 1e9);
        snprintf(a->comment, sizeof a->comment, "%s; dhcal: weight_bw = weight_gbps (weight bytes per second of decode GEMMs, dtype %s)\n", prov, gemm->dtype);
        snprintf(b->value, sizeof b->value, "%.6g", o->layer_gemms * t0->value * 1e-6);
        snprintf(b->comment, sizeof b->comment, "; dhcal: layer_fixed_s = %g GEMM launches per layer x t0_us %.4g us of the %s fit above\n",
                 o->layer_gemms, t0->value, gemm->section);
        if (!isnan(gemm->ceiling)) {
            double peak = !strcmp(gemm->dtype, "fp8") ? base.cost.roof.fp8_flops : !strcmp(gemm->dtype, "bf16") ? base.cost.roof.bf16_flops : NAN;
            if (isnan(peak)) return dh_err("GEMM dtype '%s' has no peak rate in [hw] (fp8_flops, bf16_flops)", gemm->dtype);
            double eff = gemm->ceiling * 1e12 / peak;
            if (!(eff > 0 && eff <= 1))
                return dh_err("kernel '%s' %s: measured %.4g TFLOP/s (%s) is %.3g of the [hw] peak %.4g: non-physical (check the peak)",
                              gemm->kernel, gemm->dtype, gemm->ceiling, gemm->ceiling_name, eff, peak / 1e12);
            repl *c = &r[nr++];
            *c = (repl){.section = "hw", .key = "mma_efficiency", .append = 1};
            snprintf(c->value, sizeof c->value, "%.4f", eff);
            snprintf(c->comment, sizeof c->comment, "; dhcal: mma_efficiency = %.4g TFLOP/s measured by the same run (%s, %s) / the [hw] %s peak %.4g TFLOP/s\n",
                     gemm->ceiling, gemm->ceiling_name, gemm->files, gemm->dtype, peak / 1e12);
        }
    }
    if (indexer || topk) {
        /* The selecting layer: scoring at the indexer's rate, then one fixed
         * cost for the indexer's launch and the top-k (step.c). */
        if (!indexer || !topk)
            return dh_err("[hw] indexer_ops_s and select_s need both an indexer fit and a top-k ('topk') fit; the results have only the %s",
                          indexer ? "indexer" : "top-k");
        char prov[2048], prov2[2048];
        provenance(indexer, prov, sizeof prov);
        provenance(topk, prov2, sizeof prov2);
        const fit_coef *it0 = coef(indexer, "t0_us"), *kt0 = coef(topk, "t0_us"), *rate = coef(indexer, "rate_gmacs");
        const fit_coef *kbw = coef(indexer, "key_gbps");
        repl *a = &r[nr++], *b = &r[nr++];
        *a = (repl){.section = "hw", .key = "indexer_ops_s", .append = 1};
        *b = (repl){.section = "hw", .key = "select_s", .append = 1};
        snprintf(a->value, sizeof a->value, "%.6g", rate->value * 1e9);
        snprintf(a->comment, sizeof a->comment, "%s; dhcal: indexer_ops_s = rate_gmacs (multiply-adds of the scoring per second)%s%s\n", prov,
                 rate->bound ? "; every fitted point is limited by the keys' bytes, so this is the slowest rate that keeps them so" : "",
                 indexer->res.npoints <= indexer->res.npar ? "; as many points as coefficients: exact, no residual or standard errors" : "");
        if (kbw && !kbw->bound) {
            /* The keys' bytes at the kernel's own rate (without it step.c uses hbm_bw). */
            repl *c = &r[nr++];
            *c = (repl){.section = "hw", .key = "indexer_bw", .append = 1};
            snprintf(c->value, sizeof c->value, "%.6g", kbw->value * 1e9);
            snprintf(c->comment, sizeof c->comment, "; dhcal: indexer_bw = key_gbps of the %s fit above (the keys' bytes the scoring reads per second)\n",
                     indexer->section);
        }
        snprintf(b->value, sizeof b->value, "%.6g", (it0->value + kt0->value) * 1e-6);
        snprintf(b->comment, sizeof b->comment, "%s; dhcal: select_s = t0_us of the indexer (%.4g us) + the top-k (%.5g +- %.2g us)%s\n", prov2,
                 it0->value, kt0->value, kt0->se,
                 topk->form == FIT_FORM_TOPK ? ", the launch's fixed part; its waves are topk_*" : "");
        if (topk->form == FIT_FORM_TOPK) {
            /* The top-k's waves (cost_topk_time, sim/cost.h). A per-score term the points only
             * bound (every point in the other regime) is written 0, so that the simulator's
             * soft maximum is the other term alone, as fitted. */
            if (!(topk->slots >= 1))
                return dh_err("kernel '%s': the topk fit has no blocks-at-once count (the lines' sms)", topk->kernel);
            static const struct { const char *coef, *key; double scale; } w[] = {
                {"wave_us", "topk_wave_s", 1e-6}, {"row_ns", "topk_row_s", 1e-9}, {"k_ns", "topk_k_s", 1e-9},
                {"score_gps", "topk_score_rate", 1e9}, {"steepness", "topk_steepness", 1}};
            for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
                const fit_coef *fc = coef(topk, w[i].coef);
                repl *x = &r[nr++];
                *x = (repl){.section = "hw", .key = w[i].key, .append = 1};
                snprintf(x->value, sizeof x->value, "%.6g", fc->bound ? 0 : fc->value * w[i].scale);
                snprintf(x->comment, sizeof x->comment, "; dhcal: %s = %s of the %s fit above (%.5g +- %.2g)%s\n", w[i].key, w[i].coef,
                         topk->section, fc->value, fc->se,
                         fc->bound          ? "; every fitted point is limited by the other term, which only bounds this one: 0, the term left out"
                         : fc->undetermined ? "; not determined by the points (one term alone)"
                                            : "");
            }
            repl *x = &r[nr++];
            *x = (repl){.section = "hw", .key = "topk_slots", .append = 1};
            snprintf(x->value, sizeof x->value, "%.6g", topk->slots);
            snprintf(x->comment, sizeof x->comment, "; dhcal: topk_slots = the top-k blocks that ran at once in the %s lines (their sms: SMs x resident blocks per SM)\n",
                     topk->section);
        }
    }
    if (unused[0] && log) fprintf(log, "dhcal: fitted but not used by the simulator's profile schema:%s (coefficients in the fit report)\n", unused);
    if (nr <= 1) return dh_err("no fitted section maps to a profile key");

    /* Rewrite the base text. */
    FILE *in = fopen(o->base_path, "r");
    if (!in) return dh_err("profile '%s': cannot open: %s", o->base_path, strerror(errno));
    /* A registered temporary name (common/ofile.h): a signal or an error removes it. */
    char *tmp;
    if (ofile_begin(out_path, &tmp) < 0) { fclose(in); return -1; }
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        int e = errno;
        ofile_abort(tmp);
        return dh_err("profile '%s': cannot create its temporary file: %s", out_path, strerror(e));
    }
    {
        char head[2300];
        snprintf(head, sizeof head, "; dhcal: keys with \"; dhcal:\" comments were fitted by: %s\n", o->command ? o->command : "dhcal fit");
        write_wrapped(out, head);
    }
    char *line = NULL, sec[128] = "", key[128];
    size_t cap = 0;
    int in_range = 0;
    /* Comment lines directly above a key describe its old value: they are
     * held back and dropped when the key is replaced, written otherwise. */
    char *pending = NULL;
    size_t pending_len = 0;
    FILE *pend = open_memstream(&pending, &pending_len);
    int blanks = 0;
    if (!pend) abort();
    while (getline(&line, &cap, in) > 0) {
        if (!strncmp(line, "; dhcal:", 8)) continue;
        char next[128];
        if (section_line(line, next, sizeof next)) {
            append_missing(out, r, nr, sec);
            snprintf(sec, sizeof sec, "%s", next);
            /* Both are written afresh at the end. */
            in_range = !strcmp(sec, "fit_range") || !strcmp(sec, "fitted_at");
            if (in_range) { blanks = 0; continue; }
        }
        if (in_range) continue;
        const char *p = line + strspn(line, " \t");
        if (*p == ';' || *p == '#') { fputs(line, pend); continue; }
        /* Blank lines wait until something follows them, so the blank line
         * before [fit_range] is written once however often the file is refit. */
        if (*p == '\n' || *p == '\r' || !*p) { fflush(pend); if (pending_len) fputs(line, pend); else blanks++; continue; }
        for (; blanks; blanks--) fputc('\n', out);
        fflush(pend);
        repl *hit = NULL;
        if (is_key_line(line, key, sizeof key))
            for (size_t i = 0; i < nr; i++)
                if (!strcmp(r[i].section, sec) && !strcmp(r[i].key, key)) hit = &r[i];
        if (!hit) fwrite(pending, 1, pending_len, out);
        rewind(pend);
        fflush(pend);
        pending_len = 0;
        if (hit) {
            write_wrapped(out, hit->comment);
            fprintf(out, "%s = %s\n", key, hit->value);
            hit->done = 1;
            continue;
        }
        fputs(line, out);
    }
    if (!in_range) append_missing(out, r, nr, sec);
    fflush(pend);
    fwrite(pending, 1, pending_len, out);
    fclose(pend);
    free(pending);
    free(line);
    fclose(in);
    for (size_t i = 0; i < nr && rc == 0; i++)
        if (!r[i].done) rc = dh_err("profile '%s': base lacks [%s] %s", o->base_path, r[i].section, r[i].key);
    if (rc == 0) rc = write_fitted_at(out, o->base_path, r, nr);
    fprintf(out, "\n[fit_range]\n");
    write_wrapped(out, "; dhcal: the inputs each fitted section saw, \"<section>_<input> = min, max\"; a point outside is extrapolated and must be reported\n");
    fputs(ranges, out);
    if (fclose(out) != 0 && rc == 0) rc = dh_err("profile '%s': write error", tmp);
    if (rc == 0 && prof_check(tmp) < 0) rc = dh_err_prefix("fitted profile fails its check: ");
    if (rc == 0) return ofile_commit(tmp, out_path);
    ofile_abort(tmp);
    return rc;
}

int prof_check(const char *path)
{
    cfg *c;
    hw_profile hw;
    if (load_cfg_hw(path, &c, &hw) < 0) return -1;
    int rc = 0;
    /* hw_load range-checks each value; these are the relations between them
     * that make a profile physical. */
    for (size_t i = 0; i < hw.cost.fetch.sms.n && rc == 0; i++)
        if (hw.cost.fetch.sms.y[i] > 1.0 + 1e-9)
            rc = dh_err("profile '%s': [gather] sms_factor %g at %g SMs is above 1 (a multiplier of the saturated bandwidth)", path, hw.cost.fetch.sms.y[i], hw.cost.fetch.sms.x[i]);
    for (size_t i = 0; i < hw.cost.fetch.row.n && rc == 0; i++)
        if (hw.cost.fetch.row.y[i] > hw.duplex_bw)
            rc = dh_err("profile '%s': [gather] row_bw %g at %g bytes exceeds the link's duplex_bw %g", path, hw.cost.fetch.row.y[i], hw.cost.fetch.row.x[i], hw.duplex_bw);
    if (rc == 0 && (hw.cost.fetch.ref_row_bytes < hw.cost.fetch.row.x[0] || hw.cost.fetch.ref_row_bytes > hw.cost.fetch.row.x[hw.cost.fetch.row.n - 1]))
        rc = dh_err("profile '%s': [gather] ref_row_bytes %g outside the row_bytes table", path, hw.cost.fetch.ref_row_bytes);
    if (rc == 0) {
        /* Every [fit_range] entry must be "min, max" with min <= max.  cfg
         * has no per-section key listing, so the keys come from its text form. */
        char *text = cfg_to_string(c);
        char *p = text ? strstr(text, "[fit_range]") : NULL;
        if (p) {
            p = strchr(p, '\n');
            while (p && *++p && *p != '[' && rc == 0) {
                char name[128];
                char *nl = strchr(p, '\n');
                if (nl) *nl = 0;
                if (is_key_line(p, name, sizeof name)) {
                    double v[2];
                    size_t n;
                    if (cfg_get_doubles(c, "fit_range", name, v, 2, &n, -1e300, 1e300) < 0) rc = -1;
                    else if (n != 2 || v[0] > v[1])
                        rc = dh_err("profile '%s': [fit_range] %s must be \"min, max\" with min <= max", path, name);
                }
                p = nl;
            }
        }
        free(text);
    }
    if (rc == 0 && cfg_check_unused(c) < 0) rc = dh_err_prefix("profile '%s': ", path);
    cfg_free(c);
    return rc;
}

int prof_check_range(const char *path, const char *name, double value, int *inside, double *min, double *max)
{
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    double v[2];
    size_t n;
    int rc = 0;
    if (!cfg_has(c, "fit_range", name)) rc = dh_err("profile '%s': no [fit_range] %s", path, name);
    else if (cfg_get_doubles(c, "fit_range", name, v, 2, &n, -1e300, 1e300) < 0) rc = -1;
    else if (n != 2) rc = dh_err("profile '%s': [fit_range] %s must be \"min, max\"", path, name);
    else { *min = v[0]; *max = v[1]; *inside = value >= v[0] && value <= v[1]; }
    cfg_free(c);
    return rc;
}
