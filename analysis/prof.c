/* prof.c: the hardware profile writer and checker; see prof.h.
 *
 * The rewrite works on the base profile's text, line by line, so that the
 * comments carrying each hand-entered number's source survive a refit.
 * Profiles are a few hundred lines: everything here is linear scans. */
#include "analysis/prof.h"
#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/ofile.h"
#include "common/dh_err.h"
#include "sim/hw.h"

#include <errno.h>
#include <stdarg.h>
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
    int drop;   /* a key of another form: removed from the base with its comments */
} repl;

#define MAX_REPL 64

static int load_cfg_hw(const char *path, cfg **c, hw_profile *hw)
{
    if (cfg_load(path, c) < 0) return -1;
    if (hw_load(*c, hw) < 0) { cfg_free(*c); return dh_err_prefix("profile '%s': ", path); }
    return 0;
}

int prof_base_inputs(const char *base_path, fit_opts *fo)
{
    cfg *c;
    hw_profile hw;
    if (load_cfg_hw(base_path, &c, &hw) < 0) return -1;
    fo->page_bytes = hw.page_bytes;
    fo->region_bytes = hw.region_bytes;
    fo->roof = hw.cost.roof;
    cfg_free(c);
    return 0;
}

static const fit_coef *coef(const fit_section *s, const char *key)
{
    for (size_t i = 0; i < s->ncoef; i++)
        if (!strcmp(s->coef[i].key, key)) return &s->coef[i];
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

/* One fitted [gather] key: value and comment. */
static repl *gather_key(repl *r, size_t *nr, const char *key, double value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static repl *gather_key(repl *r, size_t *nr, const char *key, double value, const char *fmt, ...)
{
    repl *x = &r[(*nr)++];
    *x = (repl){.section = "gather", .key = key, .append = 1};
    snprintf(x->value, sizeof x->value, "%.6g", value);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->comment, sizeof x->comment, fmt, ap);
    va_end(ap);
    return x;
}

/* The fetch fit's parameters as the fitted form's keys (sim/hw.h), in seconds and bytes:
 * the simulator evaluates the same form (sim/cost.c: cost_fetch_fit_launch) that the fit
 * did. The tables' keys of the base are dropped. */
static int fetch_repls(const fit_section *s, const prof_opts *o, const hw_profile *base, repl *r, size_t *nr)
{
    const double *p = s->res.p;
    static const char *const table_keys[] = {"row_bytes", "row_bw", "ref_row_bytes", "pages", "pages_bw", "sms",
                                             "sms_factor"};
    for (size_t i = 0; i < sizeof table_keys / sizeof table_keys[0]; i++)
        r[(*nr)++] = (repl){.section = "gather", .key = table_keys[i], .drop = 1};
    char prov[2048];
    provenance(s, prov, sizeof prov);
    const fit_coef *issue_b = coef(s, "row_issue_ps_per_byte"), *link = coef(s, "link_gbps");
    gather_key(r, nr, "sm_row_s", p[FIT_FP_SM] * 1e-9,
               "%s; dhcal: the fitted fetch form (sim/hw.h), each key a coefficient of the gather fit above in seconds "
               "and bytes: sm_row_s = sm_row_ns\n", prov);
    gather_key(r, nr, "row_issue_s", p[FIT_FP_ISSUE] * 1e-9, "; dhcal: row_issue_s = row_issue_ns\n");
    gather_key(r, nr, "row_issue_s_per_byte", p[FIT_FP_ISSUE_B] * 1e-9,
               "; dhcal: row_issue_s_per_byte = row_issue_ps_per_byte (%.5g +- %.2g) / 1000\n", issue_b->value,
               issue_b->se);
    gather_key(r, nr, "link_s_per_byte", p[FIT_FP_LINK] * 1e-9, "; dhcal: link_s_per_byte = 1 / link_gbps (%.5g +- %.2g GB/s)\n",
               link->value, link->se);
    const fit_coef *dn = coef(s, "density_ns"), *dp = coef(s, "density_pow");
    if (dn && dp) {
        gather_key(r, nr, "density_s", p[FIT_FP_DENS] * 1e-9,
                   "; dhcal: density_s = density_ns: the issue path's translation walks, density_s x rho^-density_pow, rho the rows "
                   "per [gather] region_bytes region entered (a window's misses read in address order)\n");
        gather_key(r, nr, "density_pow", p[FIT_FP_DENS_POW], "; dhcal: density_pow = density_pow\n");
    }
    int g = -1;
    for (size_t i = 0; i < s->ngroups; i++)
        if (!strcmp(s->groups[i], o->fetch_pattern)) g = (int)i;
    if (s->ngroups && g < 0) {
        char have[256] = "";
        for (size_t i = 0; i < s->ngroups; i++) { size_t l = strlen(have); snprintf(have + l, sizeof have - l, "%s%s", i ? ", " : "", s->groups[i]); }
        return dh_err("the fetch fit has no pattern '%s' for the [gather] page term (has %s; choose with --fetch-pattern)", o->fetch_pattern, have);
    }
    if (g >= 0) {
        gather_key(r, nr, "page_s", p[FIT_FP_PAGE0 + 2 * g] * 1e-9,
                   "; dhcal: page_s = page_ns_%s, page_reach = page_reach_%s, walk_reach_bytes = walk_reach_gb x 1e9: per launch "
                   "page_s x max(0, pages - page_reach) x max(0, 1 - walk_reach_bytes / pool), the pattern of --fetch-pattern\n",
                   o->fetch_pattern, o->fetch_pattern);
        gather_key(r, nr, "page_reach", p[FIT_FP_PAGE0 + 1 + 2 * g], "%s", "");
        gather_key(r, nr, "walk_reach_bytes", p[FIT_FP_WALK] * 1e9, "%s", "");
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

/* The fitted sections the profile takes, one per kernel form, and the text of [fit_range]. */
typedef struct {
    const fit_section *fetch, *attn, *gemm, *indexer, *topk, *beside;
    char ranges[4096], unused[2048];
} prof_sections;

static void classify(const prof_opts *o, const fit_section *secs, size_t nsec, prof_sections *ps)
{
    memset(ps, 0, sizeof *ps);
    for (size_t i = 0; i < nsec; i++) {
        const fit_section *s = &secs[i];
        for (size_t j = 0; j < s->nrange; j++) {
            size_t l = strlen(ps->ranges);
            snprintf(ps->ranges + l, sizeof ps->ranges - l, "%s_%s = %.10g, %.10g\n", s->section, s->range[j].name,
                     s->range[j].min, s->range[j].max);
        }
        size_t l = strlen(ps->unused);
        if (s->form == FIT_FORM_FETCH && (!ps->fetch || !strcmp(s->section, "fetch"))) ps->fetch = s;
        else if (s->form == FIT_FORM_HBM && (!ps->attn || strstr(s->section, "att"))) ps->attn = s;
        else if (s->form == FIT_FORM_GEMM && !strcmp(s->dtype, o->weight_dtype)) ps->gemm = s;
        else if (s->form == FIT_FORM_GEMM)
            snprintf(ps->unused + l, sizeof ps->unused - l, " %s (not the weights' dtype %s)", s->section, o->weight_dtype);
        else if (s->form == FIT_FORM_INDEXER) ps->indexer = s;
        else if ((s->form == FIT_FORM_TOPK || s->form == FIT_FORM_CONST) && strstr(s->kernel, "topk")) ps->topk = s;
        else if (s->form == FIT_FORM_BESIDE) ps->beside = s;
        else snprintf(ps->unused + l, sizeof ps->unused - l, " %s", s->section);
    }
}

/* [fitted_kernels]: the version of each kernel whose fit the profile takes (sim/hw.h), as its
 * benchmark lines record it; one whose version is not a whole number is left out. */
static void write_fitted_kernels(FILE *out, const prof_sections *ps)
{
    const struct { const char *key; const fit_section *s; } k[] = {
        {"attention", ps->attn}, {"fetch", ps->fetch}, {"indexer", ps->indexer}, {"topk", ps->topk},
    };
    int head = 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (!k[i].s) continue;
        char *e;
        const long v = strtol(k[i].s->version, &e, 10);
        if (e == k[i].s->version || *e || v < 1 || v > 1000) continue;
        if (!head++) {
            fprintf(out, "\n[fitted_kernels]\n");
            write_wrapped(out, "; dhcal: the kernel versions the fitted keys describe (their benchmark lines' version; the "
                               "attention's is the replay's): dhcal validate refuses a replay that ran another attention version\n");
        }
        fprintf(out, "%s = %ld\n", k[i].key, v);
    }
}

/* The profile is named after its file, so a calibrated copy says which it is. */
static void name_repl(const char *out_path, repl *r, size_t *nr)
{
    const char *bn = strrchr(out_path, '/');
    bn = bn ? bn + 1 : out_path;
    size_t len = strcspn(bn, ".");
    repl *a = &r[(*nr)++];
    *a = (repl){.section = "hw", .key = "name"};
    snprintf(a->value, sizeof a->value, "%.*s", (int)(len < 60 ? len : 60), bn);
    snprintf(a->comment, sizeof a->comment, "; dhcal: name = the profile's file name\n");
}

/* The fetch's slowdown beside a saturated memory system, against density (sim/hw.h: the
 * weight of compute_interference). */
static void beside_repls(const fit_section *beside, repl *r, size_t *nr)
{
    char prov[2048];
    provenance(beside, prov, sizeof prov);
    const double *bp = beside->res.p;
    gather_key(r, nr, "beside_max", bp[0],
               "%s; dhcal: beside_max = slowdown_max, beside_half = density_half, beside_steepness = steepness of the beside "
               "fit above: a fetch launch of rho rows per region takes beside_max / (1 + (rho / beside_half)^beside_steepness) "
               "longer beside a kernel that saturates the memory system (dhbench fetch beside=hbm against beside=none)\n", prov);
    gather_key(r, nr, "beside_half", exp(bp[1]), "%s", "");
    gather_key(r, nr, "beside_steepness", bp[2], "%s", "");
}

/* Sparse attention, the simulator's form (sim/cost.h: cost_attention_time) with the fit's
 * coefficients: its fixed cost per launch and per query token, the selected rows' bytes at
 * the kernel's rate; hbm_bw stays the copy rate of the base. */
static int attn_repls(const fit_section *attn, const hw_profile *base, repl *r, size_t *nr)
{
    const fit_coef *un = coef(attn, "union_row_us"), *q = coef(attn, "query_us");
    if (un && !un->undetermined && !un->fixed_zero && un->value != 0)
        return dh_err("kernel '%s': the %s fit has a per-union-row term (%.3g us), which the simulator's attention form does "
                      "not have (it reads each query's rows): fit the attention on lines without union rows", attn->kernel,
                      attn->section, un->value);
    char prov[2048];
    provenance(attn, prov, sizeof prov);
    repl *a = &r[(*nr)++], *b = &r[(*nr)++], *c = &r[(*nr)++];
    *a = (repl){.section = "hw", .key = "attn_bw", .append = 1};
    *b = (repl){.section = "hw", .key = "attn_launch_s", .append = 1};
    *c = (repl){.section = "hw", .key = "attn_query_s", .append = 1};
    snprintf(a->value, sizeof a->value, "%.6g", coef(attn, "hbm_gbps")->value * 1e9);
    snprintf(a->comment, sizeof a->comment, "%s; dhcal: attn_bw = hbm_gbps (selected rows' bytes the kernel reads per second), "
             "the form's byte rate beside the roofline's tensor time (%zu of the fitted lines bound by it)\n", prov,
             attn->tensor_bound);
    fixed_cost(coef(attn, "t0_us"), base->cost.attn.launch_s, attn->section, b);
    snprintf(c->value, sizeof c->value, "%.6g", q->value * 1e-6);
    if (q->fixed_zero)
        snprintf(c->comment, sizeof c->comment, "; dhcal: attn_query_s = query_us of the %s fit above: 0, the fit's %.3g +- %.2g us "
                 "per query token being below 0 inside the noise\n", attn->section, q->fit_value, q->fit_se);
    else
        snprintf(c->comment, sizeof c->comment, "; dhcal: attn_query_s = query_us of the %s fit above (%.4g +- %.2g us per query "
                 "token)%s\n", attn->section, q->value, q->se, q->undetermined ? ": not determined by the lines, 0" : "");
    return 0;
}

/* Projections and experts: launches x the GEMM's fixed cost, plus the weights at the decode
 * GEMMs' streaming rate, and the roofline's efficiency from the rate the run measured. */
static int gemm_repls(const fit_section *gemm, const prof_opts *o, const hw_profile *base, repl *r, size_t *nr)
{
    if (isnan(o->layer_gemms) || !(o->layer_gemms >= 1))
        return dh_err("the %s fit sets [hw] layer_fixed_s = launches x t0: give the GEMM launches per layer (--layer-gemms N)",
                      gemm->section);
    const fit_coef *t0 = coef(gemm, "t0_us");
    if (!(t0->value > 0) || t0->fixed_zero)
        return dh_err("kernel '%s' %s: the fixed cost per GEMM is not resolved (t0 %.3g +- %.2g us): layer_fixed_s needs it",
                      gemm->kernel, gemm->dtype, t0->value, t0->se);
    char prov[2048];
    provenance(gemm, prov, sizeof prov);
    repl *a = &r[(*nr)++], *b = &r[(*nr)++];
    *a = (repl){.section = "hw", .key = "weight_bw", .append = 1};
    *b = (repl){.section = "hw", .key = "layer_fixed_s", .append = 1};
    snprintf(a->value, sizeof a->value, "%.6g", coef(gemm, "weight_gbps")->value * 1e9);
    snprintf(a->comment, sizeof a->comment, "%s; dhcal: weight_bw = weight_gbps (weight bytes per second of decode GEMMs, dtype "
             "%s), the form's byte rate beside the roofline's tensor time (%zu of the fitted lines bound by it)\n", prov,
             gemm->dtype, gemm->tensor_bound);
    snprintf(b->value, sizeof b->value, "%.6g", o->layer_gemms * t0->value * 1e-6);
    snprintf(b->comment, sizeof b->comment, "; dhcal: layer_fixed_s = %g GEMM launches per layer x t0_us %.4g us of the %s fit above\n",
             o->layer_gemms, t0->value, gemm->section);
    if (isnan(gemm->ceiling)) return 0;
    double peak = !strcmp(gemm->dtype, "fp8") ? base->cost.roof.fp8_flops : !strcmp(gemm->dtype, "bf16") ? base->cost.roof.bf16_flops : NAN;
    if (isnan(peak)) return dh_err("GEMM dtype '%s' has no peak rate in [hw] (fp8_flops, bf16_flops)", gemm->dtype);
    double eff = gemm->ceiling * 1e12 / peak;
    if (!(eff > 0 && eff <= 1))
        return dh_err("kernel '%s' %s: measured %.4g TFLOP/s (%s) is %.3g of the [hw] peak %.4g: non-physical (check the peak)",
                      gemm->kernel, gemm->dtype, gemm->ceiling, gemm->ceiling_name, eff, peak / 1e12);
    repl *c = &r[(*nr)++];
    *c = (repl){.section = "hw", .key = "mma_efficiency", .append = 1};
    /* As the fit's tensor term took it (fit_mma_efficiency: the same 4 decimals). */
    snprintf(c->value, sizeof c->value, "%.4f", eff);
    snprintf(c->comment, sizeof c->comment, "; dhcal: mma_efficiency = %.4g TFLOP/s measured by the same run (%s, %s) / the [hw] %s peak %.4g TFLOP/s\n",
             gemm->ceiling, gemm->ceiling_name, gemm->files, gemm->dtype, peak / 1e12);
    return 0;
}

/* The top-k's waves (cost_topk_time, sim/cost.h). A per-score term the points only bound
 * (every point in the other regime) is written 0, so that the simulator's soft maximum is the
 * other term alone, as fitted. */
static int topk_repls(const fit_section *topk, repl *r, size_t *nr)
{
    if (!(topk->slots >= 1)) return dh_err("kernel '%s': the topk fit has no blocks-at-once count (the lines' sms)", topk->kernel);
    static const struct { const char *coef, *key; double scale; } w[] = {
        {"wave_us", "topk_wave_s", 1e-6}, {"row_ns", "topk_row_s", 1e-9}, {"k_ns", "topk_k_s", 1e-9},
        {"score_gps", "topk_score_rate", 1e9}, {"steepness", "topk_steepness", 1}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        const fit_coef *fc = coef(topk, w[i].coef);
        repl *x = &r[(*nr)++];
        *x = (repl){.section = "hw", .key = w[i].key, .append = 1};
        snprintf(x->value, sizeof x->value, "%.6g", fc->bound ? 0 : fc->value * w[i].scale);
        snprintf(x->comment, sizeof x->comment, "; dhcal: %s = %s of the %s fit above (%.5g +- %.2g)%s\n", w[i].key, w[i].coef,
                 topk->section, fc->value, fc->se,
                 fc->bound          ? "; every fitted point is limited by the other term, which only bounds this one: 0, the term left out"
                 : fc->undetermined ? "; not determined by the points (one term alone)"
                                    : "");
    }
    repl *x = &r[(*nr)++];
    *x = (repl){.section = "hw", .key = "topk_slots", .append = 1};
    snprintf(x->value, sizeof x->value, "%.6g", topk->slots);
    snprintf(x->comment, sizeof x->comment, "; dhcal: topk_slots = the top-k blocks that ran at once in the %s lines (their sms: SMs x resident blocks per SM)\n",
             topk->section);
    return 0;
}

/* The selecting layer: scoring at the indexer's rate, then one fixed cost for the indexer's
 * launch and the top-k (step.c), then the top-k's waves. */
static int select_repls(const fit_section *indexer, const fit_section *topk, repl *r, size_t *nr)
{
    if (!indexer || !topk)
        return dh_err("[hw] indexer_ops_s and select_s need both an indexer fit and a top-k ('topk') fit; the results have only the %s",
                      indexer ? "indexer" : "top-k");
    char prov[2048], prov2[2048];
    provenance(indexer, prov, sizeof prov);
    provenance(topk, prov2, sizeof prov2);
    const fit_coef *it0 = coef(indexer, "t0_us"), *kt0 = coef(topk, "t0_us"), *rate = coef(indexer, "rate_gmacs");
    const fit_coef *kbw = coef(indexer, "key_gbps");
    repl *a = &r[(*nr)++], *b = &r[(*nr)++];
    *a = (repl){.section = "hw", .key = "indexer_ops_s", .append = 1};
    *b = (repl){.section = "hw", .key = "select_s", .append = 1};
    snprintf(a->value, sizeof a->value, "%.6g", rate->value * 1e9);
    snprintf(a->comment, sizeof a->comment, "%s; dhcal: indexer_ops_s = rate_gmacs (multiply-adds of the scoring per second)%s%s\n", prov,
             rate->bound ? "; every fitted point is limited by the keys' bytes, so this is the slowest rate that keeps them so" : "",
             indexer->res.npoints <= indexer->res.npar ? "; as many points as coefficients: exact, no residual or standard errors" : "");
    if (kbw && !kbw->bound) {
        /* The keys' bytes at the kernel's own rate (without it step.c uses hbm_bw). */
        repl *c = &r[(*nr)++];
        *c = (repl){.section = "hw", .key = "indexer_bw", .append = 1};
        snprintf(c->value, sizeof c->value, "%.6g", kbw->value * 1e9);
        snprintf(c->comment, sizeof c->comment, "; dhcal: indexer_bw = key_gbps of the %s fit above (the keys' bytes the scoring reads per second)\n",
                 indexer->section);
    }
    snprintf(b->value, sizeof b->value, "%.6g", (it0->value + kt0->value) * 1e-6);
    snprintf(b->comment, sizeof b->comment, "%s; dhcal: select_s = t0_us of the indexer (%.4g us) + the top-k (%.5g +- %.2g us)%s\n", prov2,
             it0->value, kt0->value, kt0->se,
             topk->form == FIT_FORM_TOPK ? ", the launch's fixed part; its waves are topk_*" : "");
    return topk->form == FIT_FORM_TOPK ? topk_repls(topk, r, nr) : 0;
}

/* The [hw] keys of o->carry_path, each as a replacement (appended where the base lacks it),
 * its comment naming the file whose comments give the key's source. */
static int carry_repls(const prof_opts *o, repl *r, size_t *nr)
{
    if (!o->carry_path) return 0;
    /* Every key must be a profile key and its value what the profile's schema takes there,
     * checked here so that the error names this file (the written profile would only name
     * its temporary file). */
    cfg *cc;
    if (cfg_load(o->carry_path, &cc) < 0) return -1;
    FILE *f = fopen(o->carry_path, "r");
    if (!f) {
        cfg_free(cc);
        return dh_err("'%s': cannot open: %s", o->carry_path, strerror(errno));
    }
    static char keys[MAX_REPL][128];
    char *line = NULL, sec[128] = "", key[128];
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        char next[128];
        if (section_line(line, next, sizeof next)) { snprintf(sec, sizeof sec, "%s", next); continue; }
        if (!is_key_line(line, key, sizeof key)) continue;
        if (strcmp(sec, "hw") != 0) { rc = dh_err("'%s': [%s] %s: only [hw] keys are carried", o->carry_path, sec, key); break; }
        if (*nr >= MAX_REPL) { rc = dh_err("'%s': too many keys", o->carry_path); break; }
        const cfg_key *sk = cfgk_find(&hw_schema, "hw", key);
        if (!sk) { rc = dh_err("'%s': [hw] %s is not a key of the profile schema (docs/CONFIG.md)", o->carry_path, key); break; }
        double vals[64];
        size_t nv;
        const char *str;
        if ((sk->type == CK_LIST && cfgk_doubles(cc, &hw_schema, "hw", key, vals, 64, &nv) < 0) ||
            (sk->type == CK_NUM && cfgk_double(cc, &hw_schema, "hw", key, vals) < 0) ||
            (sk->type == CK_STR && cfgk_string(cc, &hw_schema, "hw", key, &str) < 0)) { rc = -1; break; }
        const char *v = strchr(line, '=') + 1;
        v += strspn(v, " \t");
        size_t n = strcspn(v, ";#\r\n");
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
        if (!n || n >= sizeof r->value) { rc = dh_err("'%s': [hw] %s: no value or too long", o->carry_path, key); break; }
        snprintf(keys[*nr], sizeof keys[*nr], "%s", key);
        repl *l = &r[(*nr)++];
        *l = (repl){.section = "hw", .key = keys[*nr - 1], .append = 1};
        memcpy(l->value, v, n);
        l->value[n] = 0;
        snprintf(l->comment, sizeof l->comment, "; dhcal: %s from %s (not fitted here; its source is given there)\n", key, o->carry_path);
    }
    free(line);
    fclose(f);
    cfg_free(cc);
    return rc;
}

/* Every replacement the fitted sections make. */
static int all_repls(const prof_opts *o, const prof_sections *ps, const hw_profile *base, const char *out_path, repl *r,
                     size_t *nr)
{
    name_repl(out_path, r, nr);
    if (ps->fetch && fetch_repls(ps->fetch, o, base, r, nr) < 0) return -1;
    if (ps->beside) beside_repls(ps->beside, r, nr);
    if (ps->attn && attn_repls(ps->attn, base, r, nr) < 0) return -1;
    if (ps->gemm && gemm_repls(ps->gemm, o, base, r, nr) < 0) return -1;
    if ((ps->indexer || ps->topk) && select_repls(ps->indexer, ps->topk, r, nr) < 0) return -1;
    if (carry_repls(o, r, nr) < 0) return -1;
    DH_BUG_ON(*nr > MAX_REPL);
    return 0;
}

/* The base's text to out, each replaced key with its new comment and value, every optional
 * key the base lacks at the end of its section; [fit_range], [fitted_at] and [fitted_kernels]
 * are left out (the caller writes them afresh). */
static void rewrite_base(FILE *in, FILE *out, repl *r, size_t nr)
{
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
            in_range = !strcmp(sec, "fit_range") || !strcmp(sec, "fitted_at") || !strcmp(sec, "fitted_kernels");
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
        if (hit && hit->drop) {
            hit->done = 1;
            continue;
        }
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
}

int prof_write(const prof_opts *o, const fit_section *secs, size_t nsec, const char *out_path, FILE *log)
{
    cfg *bc;
    hw_profile base;
    if (load_cfg_hw(o->base_path, &bc, &base) < 0) return -1;
    cfg_free(bc);
    prof_sections ps;
    classify(o, secs, nsec, &ps);
    repl r[MAX_REPL];
    size_t nr = 0;
    if (all_repls(o, &ps, &base, out_path, r, &nr) < 0) return -1;
    if (ps.unused[0] && log) fprintf(log, "dhcal: fitted but not used by the simulator's profile schema:%s (coefficients in the fit report)\n", ps.unused);
    if (nr <= 1) return dh_err("no fitted section maps to a profile key");

    FILE *in, *out;
    char *tmp;
    if (prof_out_open(o->base_path, out_path, &in, &out, &tmp) < 0) return -1;
    char head[2300];
    snprintf(head, sizeof head, "; dhcal: keys with \"; dhcal:\" comments were fitted by: %s\n", o->command ? o->command : "dhcal fit");
    write_wrapped(out, head);
    rewrite_base(in, out, r, nr);
    fclose(in);
    int rc = 0;
    for (size_t i = 0; i < nr && rc == 0; i++)
        if (!r[i].done && !r[i].drop) rc = dh_err("profile '%s': base lacks [%s] %s", o->base_path, r[i].section, r[i].key);
    if (rc == 0) rc = write_fitted_at(out, o->base_path, r, nr);
    if (rc == 0) write_fitted_kernels(out, &ps);
    fprintf(out, "\n[fit_range]\n");
    write_wrapped(out, "; dhcal: the inputs each fitted section saw, \"<section>_<input> = min, max\"; a point outside is extrapolated and must be reported\n");
    fputs(ps.ranges, out);
    return prof_out_finish(out, tmp, out_path, rc, "fitted profile fails its check: ");
}

int prof_out_open(const char *in_path, const char *out_path, FILE **in, FILE **out, char **tmp)
{
    *in = fopen(in_path, "r");
    if (!*in) return dh_err("profile '%s': cannot open: %s", in_path, strerror(errno));
    if (ofile_begin(out_path, tmp) < 0) { fclose(*in); return -1; }
    *out = fopen(*tmp, "w");
    if (!*out) {
        int e = errno;
        fclose(*in);
        ofile_abort(*tmp);
        return dh_err("profile '%s': cannot create its temporary file: %s", out_path, strerror(e));
    }
    return 0;
}

int prof_out_finish(FILE *out, char *tmp, const char *out_path, int rc, const char *what)
{
    if (fclose(out) != 0 && rc == 0) rc = dh_err("profile '%s': write error", out_path);
    if (rc == 0 && prof_check(tmp) < 0) rc = dh_err_prefix("%s", what);
    if (rc == 0) return ofile_commit(tmp, out_path);
    ofile_abort(tmp);
    return rc;
}

int prof_fitted_attention(const char *path, long *version)
{
    cfg *c;
    hw_profile hw;
    if (load_cfg_hw(path, &c, &hw) < 0) return -1;
    *version = hw.fitted_attention;
    cfg_free(c);
    return 0;
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
    if (rc == 0 && hw.cost.fetch.form != COST_FITTED && (hw.cost.fetch.ref_row_bytes < hw.cost.fetch.row.x[0] || hw.cost.fetch.ref_row_bytes > hw.cost.fetch.row.x[hw.cost.fetch.row.n - 1]))
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
