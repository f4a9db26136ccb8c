/* calibrate.c: the fit, the refit and the whole calibration; see calibrate.h.
 * Cost: the fit is O(benchmark lines); the calibration is about a dozen
 * simulator runs of the fitted configurations, each O(steps x requests x layers). */
#include "analysis/calibrate.h"
#include "analysis/bcsv.h"
#include "analysis/rcfg.h"
#include "analysis/refit.h"
#include "analysis/rsim.h"
#include "analysis/valid.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cal_print_section(FILE *f, const fit_section *s)
{
    fprintf(f, "[%s] kernel %s version %s (%s; versions: %s)\n", s->section, s->kernel, s->version, s->selection, s->versions_seen);
    if (s->form == FIT_FORM_BESIDE)   /* slowdowns near 0: an absolute residual */
        fprintf(f, "  form %s: %zu points, rms %.3f (slowdown), R^2 %.5f\n", fit_form_name(s->form), s->res.npoints,
                s->res.rms_abs, s->res.r2);
    else
        fprintf(f, "  form %s: %zu points, rms %.2f %%, weighted R^2 %.5f%s\n", fit_form_name(s->form), s->res.npoints,
                100 * s->res.rms_rel, s->res.r2, s->skipped_unchecked ? " (unchecked lines left out)" : "");
    for (size_t i = 0; i < s->ncoef; i++) {
        const fit_coef *c = &s->coef[i];
        fprintf(f, "  %-28s %14.6g +- %-10.3g", c->key, c->value, c->se);
        if (c->fixed_zero) fprintf(f, "  (fit gave %.3g +- %.2g, below 0 inside the noise: held at 0)", c->fit_value, c->fit_se);
        if (c->undetermined) fprintf(f, "  (not determined by the data: left out)");
        if (c->bound) fprintf(f, "  (a lower bound: every point is limited by the other term)");
        fputc('\n', f);
    }
    for (size_t i = 0; i < s->nrange; i++)
        fprintf(f, "  range %-22s %14.6g .. %-14.6g\n", s->range[i].name, s->range[i].min, s->range[i].max);
    if (s->held_out)
        fprintf(f, "  held out: %zu lines, error median %.2f %% p95 %.2f %% max %.2f %%\n", s->held_out,
                100 * s->holdout_err.median, 100 * s->holdout_err.p95, 100 * s->holdout_err.max);
    fprintf(f, "  files: %s\n", s->files);
}

int cal_fit(const char *const *bench, size_t nbench, fit_opts *fo, prof_opts *po, const char *out, FILE *report,
            FILE *log)
{
    /* Pages and regions must be counted with the sizes the simulator uses. */
    if (po->base_path && prof_base_inputs(po->base_path, fo) < 0) return -1;
    fo->weight_dtype = po->weight_dtype;
    bcsv_table t;
    bcsv_init(&t);
    int rc = 0;
    for (size_t i = 0; i < nbench && rc == 0; i++) rc = bcsv_load(&t, bench[i]);
    fit_section *secs = NULL;
    size_t ns = 0;
    if (rc == 0) rc = fit_bench(&t, fo, &secs, &ns, log);
    if (rc == 0) {
        for (size_t i = 0; i < ns; i++) cal_print_section(report, &secs[i]);
        if (out) rc = prof_write(po, secs, ns, out, log);
    }
    free(secs);
    bcsv_release(&t);
    return rc;
}

int cal_refit_join(val_set *v, const char *replay, cal_join_fn add, void *ctx)
{
    val_init(v);
    if (val_load_replay(v, replay) < 0) return -1;
    for (size_t i = 0; i < v->n; i++) {
        const val_step *x = &v->s[i];
        if (x->heldout) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !v->s[j].heldout && !strcmp(v->s[j].config, x->config) && !strcmp(v->s[j].mode, x->mode);
        if (seen) continue;
        /* Copies: the join writes into v->s. */
        char config[64], mode[32];
        snprintf(config, sizeof config, "%s", x->config);
        snprintf(mode, sizeof mode, "%s", x->mode);
        if (add(v, config, mode, ctx) < 0) return -1;
    }
    return 0;
}

int cal_refit(const char *replay, const char *key, const double at[2], const char *const where[2], const val_set *a,
              const val_set *b, const char *in, const char *out, FILE *report, char *value, size_t value_cap)
{
    char section[64], name[64];
    const char *dot = strchr(key, '.');
    if (!dot || dot == key || !dot[1] || (size_t)(dot - key) >= sizeof section || strlen(dot + 1) >= sizeof name)
        return dh_err("refit: --key '%s': expected SECTION.KEY", key);
    snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
    snprintf(name, sizeof name, "%s", dot + 1);
    refit_result r;
    if (refit_solve(a, at[0], b, at[1], &r) < 0) return -1;
    char latest[64];
    snprintf(value, value_cap, "%.*g", REFIT_DIGITS, r.value);
    snprintf(latest, sizeof latest, "%.*g", REFIT_DIGITS, at[1]);
    char held[256] = "";
    for (size_t i = 0; i < a->n; i++)
        if (a->s[i].heldout && !strstr(held, a->s[i].config) && strlen(held) + strlen(a->s[i].config) + 2 < sizeof held) {
            if (held[0]) strcat(held, " ");
            strcat(held, a->s[i].config);
        }
    int converged = !strcmp(value, latest);
    fprintf(report, "refit %s on %s: fitted configurations %s (%zu steps; held out, not used: %s)\n", key, replay,
            r.config_list, r.steps, held[0] ? held : "none");
    fprintf(report, "  from simulator runs at %g (%s) and %g (%s); d(step)/d(%s) %.6g us per unit\n", at[0], where[0], at[1],
            where[1], name, r.mean_slope);
    fprintf(report, "  %s = %s +- %.2g; rms %.2f %%, weighted R^2 %.4f; error median %.2f %% p95 %.2f %% max %.2f %%%s\n", name,
            value, r.se, 100 * r.rms_rel, r.r2, 100 * r.err.median, 100 * r.err.p95, 100 * r.err.max,
            converged ? "" : " (linearised: not yet run at this value)");
    fprintf(report, "value %s%s\n", value, converged ? " converged" : "");
    if (!out) return 0;
    if (!converged)
        return dh_err("refit: %s = %s is not the latest simulated value %s: run the simulator at %s and refit from it", key,
                      value, latest, value);
    cfg *c;
    double old;
    if (cfg_load(in, &c) < 0) return -1;
    if (cfg_get_double(c, section, name, &old, CFG_REQUIRED, -1e300, 1e300) < 0) { cfg_free(c); return -1; }
    cfg_free(c);
    char comment[2048];
    snprintf(comment, sizeof comment,
             "%s refitted on the GPU replay %s,\n"
             "fitted configurations only (%s; held out, not used: %s): %zu steps,\n"
             "relative least squares on whole step times; the kernel benchmarks gave %.6g (above).\n"
             "%s = %s +- %.2g; residual rms %.2f %%, weighted R^2 %.4f;\n"
             "error median %.2f %% p95 %.2f %% max %.2f %%; measured steps %.1f..%.1f us (mean %.1f, predicted %.1f).\n"
             "Range: the replay's configurations (bin/dhreplay, analysis/VALIDATION.md).",
             name, replay, r.config_list, held[0] ? held : "none", r.steps, old, name, value, r.se, 100 * r.rms_rel, r.r2,
             100 * r.err.median, 100 * r.err.p95, 100 * r.err.max, r.meas_min_us, r.meas_max_us, r.mean_meas_us, r.mean_pred_us);
    if (!(r.value >= 0)) return dh_err("refit: %s = %s is negative: non-physical", key, value);
    if (refit_write(in, out, section, name, value, comment) < 0) return -1;
    fprintf(report, "wrote %s\n", out);
    return 0;
}

/* ---- the calibration ---- */

/* The benchmark files, selections and held-out lines of step 1 (calibrate.h):
 *   attention v8, FP8 rows of 656 B, selected rows only ("hits"), timed 20 launches back to
 *     back (in a decode step it launches behind the layer's GEMMs, not on an idle GPU); the
 *     BF16 lines are held out (errors reported, not fitted);
 *   fetch v5 (zero-copy gather, the serving layout), 2-16 SMs, 584-1152 B rows, timed 20
 *     launches back to back (a step issues a group's layer fetches one after another on the
 *     fetch stream); 132 SMs held out; the density term (rows per 2 MB region) from its
 *     locality lines, the 25K-row windows held out (the same rows per window, four times as
 *     dense: a check that density is the input);
 *   the fetch beside a saturated memory system (fetch-beside-b2b20.csv: each "+beside_hbm"
 *     line against its partner timed alone, the beside form); those partners are held out of
 *     the fetch fit itself (a check on another machine instance's run);
 *   cuBLASLt GEMMs per dtype at the decode batch m = 16; m = 128 held out; FP8 is the
 *     deployment's dtype (weight_bw, layer_fixed_s, mma_efficiency), BF16 is reported;
 *   indexer v5 (scoring rate and the keys' rate: default-indexer.csv, 4-16 requests x
 *     25K-200K tokens, and indexer-scale.csv, 64-128 requests x 250K-500K, DeepSeek-V4.1-Flash's
 *     shape; timed isolated); top-k v6 over the scores per request, the top-ks per launch
 *     (waves of 132 blocks) and k (topk-scale-b2b20.csv), its lines on the indexer's own
 *     scores (indexer-topk6-b2b20.csv) held out.
 * layer_fixed_s starts as 8 GEMM launches per layer (q_a, q_b, kv_a, o_proj, shared expert x 2,
 * routed experts x 2 strided-batched, as bin/dhreplay runs them) x the GEMM's fixed cost. */
static const char *const cal_bench_files[] = {
    "attention-attention-b2b20.csv", "fetch-calib-b2b20.csv", "fetch-beside-b2b20.csv", "default-gemm.csv",
    "default-indexer.csv", "topk-scale-b2b20.csv", "indexer-topk6-b2b20.csv", "indexer-scale.csv",
};
/* The selections: cal_choose_versions (attention 8, fetch 5, the GEMMs, indexer 5, top-k 6 on
 * the H200; the versions the replay falls back to on other GPUs). */
static const char *const cal_holdout[] = {
    "kernel=attention,dtype=bf16", "kernel=fetch,sms>=66", "kernel=fetch,ctx<=25000", "kernel=topk,pattern=indexer",
    "kernel=fetch,suite=fetch-beside-b2b20", "kernel=gemm,m>=128", NULL,
};
#define CAL_NBENCH (sizeof cal_bench_files / sizeof cal_bench_files[0])
#define CAL_LAYER_GEMMS 8
/* The replay's diagnostics (kernels/replay/README.md), in BENCH_DIR. */
#define CAL_BESIDE "replay-glm53-16x100k-fetch-beside.csv"
#define CAL_FONLY "replay-glm53-16x100k-fetch-only.csv"
#define CAL_BUSY "replay-glm53-16x100k-fetch-busy.csv"
/* Steps whose means enter the interference (the first ones fill the hot buffers). */
#define CAL_FIRST_STEP 4
#define CAL_LAST_STEP 11
/* Secant steps and refit runs before the calibration gives up. */
#define CAL_MAX_ITER 8

/* A value as the shell version held it after printing it with fmt ("%.4g" ...). */
static double through_text(const char *fmt, double x)
{
    char b[64];
    snprintf(b, sizeof b, fmt, x);
    return strtod(b, NULL);
}

/* One simulator run of every fitted configuration at (compute_interference,
 * layer_fixed_s); fetch_interference is fixed once computed. */
typedef struct {
    double beta, layer;
    sim_result *res;
} cal_run;

typedef struct {
    const cal_opts *o;
    rcfg_set rs;
    const rcfg_config **fitted;   /* the replay's fitted configurations, in its order */
    const char **fitted_ids;
    size_t nf;
    char stage1[1200], dir[600];  /* the fitted profile before the interference and the refit */
    char alpha[32];               /* fetch_interference as written */
    int replay_attn;              /* the attention version the replay records (0: none) */
    double fmeas;                 /* measured fetch ms per step, summed over the fitted configurations */
    cal_run *runs;
    size_t nruns;
} cal_state;

static const sim_result *cal_runs_at(cal_state *st, const char *beta, const char *layer)
{
    double b = strtod(beta, NULL), l = strtod(layer, NULL);
    for (size_t i = 0; i < st->nruns; i++)
        if (st->runs[i].beta == b && st->runs[i].layer == l) return st->runs[i].res;
    char s0[96], s1[96], s2[96];
    snprintf(s0, sizeof s0, "hw.fetch_interference=%s", st->alpha);
    snprintf(s1, sizeof s1, "hw.compute_interference=%s", beta);
    snprintf(s2, sizeof s2, "hw.layer_fixed_s=%s", layer);
    char *sets[3] = {s0, s1, s2};
    sim_result *res = dh_calloc(st->nf, sizeof *res);
    if (rsim_run_many(&st->rs, st->fitted, st->nf, st->stage1, sets, 3, st->o->threads, res) < 0) {
        free(res);
        return NULL;
    }
    st->runs = dh_reallocarray(st->runs, st->nruns + 1, sizeof *st->runs);
    st->runs[st->nruns++] = (cal_run){b, l, res};
    return res;
}

/* The simulator's fetch time per step (ms, steps 4-11) at compute_interference beta and
 * layer_fixed_s layer, summed over the fitted configurations: per configuration the mean of
 * pcie_h2d_util x the step as its timeline prints them. */
static int cal_sim_fetch(cal_state *st, const char *beta, const char *layer, double *out)
{
    const sim_result *res = cal_runs_at(st, beta, layer);
    if (!res) return -1;
    double total = 0;
    for (size_t c = 0; c < st->nf; c++) {
        double s = 0;
        long n = 0;
        for (uint32_t i = 0; i < res[c].n_tl; i++) {
            const sim_tl_row *t = &res[c].tl[i];
            if (t->step < CAL_FIRST_STEP || t->step > CAL_LAST_STEP) continue;
            double dt = t->t_end - t->t_start;
            double util = val_timeline_value(dt > 0 ? t->fetch_busy / dt : 0);
            s += util * (val_timeline_value(t->t_end) - val_timeline_value(t->t_start));
            n++;
        }
        if (!n) return dh_err("calibrate: the simulator run of '%s' has no steps %d-%d", st->fitted_ids[c], CAL_FIRST_STEP,
                              CAL_LAST_STEP);
        total += through_text("%.9g", s / (double)n * 1e3);
    }
    *out = through_text("%.9g", total);
    return 0;
}

/* compute_interference at layer_fixed_s layer: the secant from 0 and 1 until the value
 * repeats at 4 significant digits. */
static int cal_solve_beta(cal_state *st, const char *layer, char *beta, size_t cap)
{
    char u0[32] = "0", u1[32] = "1", u2[32];
    double f0, f1;
    if (cal_sim_fetch(st, u0, layer, &f0) < 0 || cal_sim_fetch(st, u1, layer, &f1) < 0) return -1;
    for (int j = 1;; j++) {
        if (j > CAL_MAX_ITER) return dh_err("calibrate: compute_interference did not converge in %d steps", CAL_MAX_ITER);
        if (f1 == f0) return dh_err("calibrate: the simulator's fetch does not change with compute_interference");
        double a = strtod(u0, NULL), b = strtod(u1, NULL);
        double x = b - (f1 - st->fmeas) * (b - a) / (f1 - f0);
        if (x < 0) x = 0;
        snprintf(u2, sizeof u2, "%.4g", x);
        if (!strcmp(u2, u1)) break;
        memcpy(u0, u1, sizeof u0);
        f0 = f1;
        memcpy(u1, u2, sizeof u1);
        if (cal_sim_fetch(st, u1, layer, &f1) < 0) return -1;
    }
    snprintf(beta, cap, "%s", u1);
    return 0;
}

/* One run of the fitted configurations joined with the replay (cal_join_fn). */
typedef struct {
    const cal_state *st;
    const sim_result *res;
} cal_join_ctx;

static int cal_join_run(val_set *v, const char *config, const char *mode, void *ctx)
{
    const cal_join_ctx *j = ctx;
    for (size_t k = 0; k < j->st->nf; k++)
        if (!strcmp(j->st->fitted_ids[k], config)) return val_add_sim_result(v, &j->res[k], config, mode);
    return dh_err("refit: no simulator run of fitted configuration '%s'", config);
}

/* The refit of layer_fixed_s from the runs at (beta, a) and (beta, b): the solution as
 * printed; with out, the profile written from in. */
static int cal_refit_at(cal_state *st, const char *beta, const char *a, const char *b, const char *in, const char *out,
                        FILE *report, char *value, size_t cap)
{
    const sim_result *ra = cal_runs_at(st, beta, a), *rb = cal_runs_at(st, beta, b);
    if (!ra || !rb) return -1;
    val_set va, vb;
    cal_join_ctx ja = {st, ra}, jb = {st, rb};
    val_init(&vb);
    int rc = cal_refit_join(&va, st->o->replay_path, cal_join_run, &ja);
    if (rc == 0) rc = cal_refit_join(&vb, st->o->replay_path, cal_join_run, &jb);
    const double at[2] = {strtod(a, NULL), strtod(b, NULL)};
    const char *where[2] = {"in-process", "in-process"};
    char *text = NULL;
    size_t len = 0;
    FILE *sink = open_memstream(&text, &len);
    if (!sink) abort();
    /* Only the last refit's report is the calibration's; the iterations' are not kept. */
    if (rc == 0) rc = cal_refit(st->o->replay_path, "hw.layer_fixed_s", at, where, &va, &vb, in, out, out ? report : sink,
                                value, cap);
    fclose(sink);
    free(text);
    val_release(&va);
    val_release(&vb);
    return rc;
}

/* layer_fixed_s from start: runs at start and start / 2, the least-squares solution, a run at
 * it, until the solution repeats at 4 significant digits; a and b get the last two values. */
static int cal_refit_layer(cal_state *st, const char *beta, const char *start, char *a, char *b, size_t cap)
{
    snprintf(a, cap, "%s", start);
    snprintf(b, cap, "%.4g", strtod(start, NULL) / 2);
    for (int i = 1;; i++) {
        if (i > CAL_MAX_ITER) return dh_err("calibrate: the refit of layer_fixed_s did not converge in %d runs", CAL_MAX_ITER);
        char x[32];
        if (cal_refit_at(st, beta, a, b, NULL, NULL, NULL, x, sizeof x) < 0) return -1;
        if (!strcmp(x, b)) return 0;
        snprintf(a, cap, "%s", b);
        snprintf(b, cap, "%s", x);
    }
}

/* Per-configuration sums of one CSV's measured_us over steps 4-11 of the fitted
 * configurations, for the lines of one mode. */
typedef struct {
    char id[64];
    double sum[3], n[3];
} cal_acc;

typedef struct {
    cal_acc *a;
    size_t n;
} cal_accs;

static cal_acc *cal_acc_of(cal_accs *t, const char *id)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->a[i].id, id)) return &t->a[i];
    t->a = dh_reallocarray(t->a, t->n + 1, sizeof *t->a);
    cal_acc *x = &t->a[t->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s", id);
    return x;
}

static int cal_acc_cmp(const void *x, const void *y) { return strcmp(((const cal_acc *)x)->id, ((const cal_acc *)y)->id); }

/* Add the lines of CSV path with mode modes[j] into slot j, j < nmodes. */
static int cal_scan(cal_state *st, const char *path, const char *const *modes, int nmodes, const int *slots, cal_accs *t)
{
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("calibrate: %s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\r\n")] = 0;
        char *cell[16];
        int n = 0;
        for (char *p = line; n < 16;) {
            cell[n++] = p;
            char *e = strchr(p, ',');
            if (!e) break;
            *e = 0;
            p = e + 1;
        }
        if (n < 5 || !strcmp(cell[0], "config_id")) continue;
        double step = strtod(cell[3], NULL);
        if (step < CAL_FIRST_STEP || step > CAL_LAST_STEP) continue;
        size_t k = 0;
        while (k < st->nf && strcmp(st->fitted_ids[k], cell[0])) k++;
        if (k == st->nf) continue;
        for (int j = 0; j < nmodes; j++)
            if (!strcmp(cell[2], modes[j])) {
                cal_acc *x = cal_acc_of(t, cell[0]);
                x->sum[slots[j]] += strtod(cell[4], NULL);
                x->n[slots[j]]++;
            }
    }
    free(line);
    fclose(f);
    /* Per-configuration figures in the order of their names. */
    qsort(t->a, t->n, sizeof *t->a, cal_acc_cmp);
    return 0;
}

/* Insert the interference keys into [hw], before the section that follows it. */
static int cal_splice(const char *path, const char *const *lines, size_t nlines)
{
    FILE *in = fopen(path, "r");
    if (!in) return dh_err("calibrate: '%s': cannot open: %s", path, strerror(errno));
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.splice", path);
    FILE *out = fopen(tmp, "w");
    if (!out) { fclose(in); return dh_err("calibrate: '%s': cannot create: %s", tmp, strerror(errno)); }
    char *line = NULL;
    size_t cap = 0;
    int hw = 0, done = 0;
    while (getline(&line, &cap, in) > 0) {
        if (line[0] == '[' && hw && !done) {
            for (size_t i = 0; i < nlines; i++) fprintf(out, "%s\n", lines[i]);
            done = 1;
        }
        if (!strncmp(line, "[hw]", 4)) hw = 1;
        fputs(line, out);
    }
    free(line);
    fclose(in);
    if (fclose(out) != 0) { unlink(tmp); return dh_err("calibrate: '%s': write error", tmp); }
    if (rename(tmp, path) < 0) { unlink(tmp); return dh_err("calibrate: '%s': cannot rename: %s", tmp, strerror(errno)); }
    return 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The text after "KEY = " on the profile's first line that starts so, or -1. */
static int cal_profile_line(const char *path, const char *prefix, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("calibrate: '%s': cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t lcap = 0;
    int rc = -1;
    while (rc < 0 && getline(&line, &lcap, f) > 0)
        if (!strncmp(line, prefix, strlen(prefix))) {
            line[strcspn(line, "\n")] = 0;
            snprintf(out, cap, "%s", line + strlen(prefix));
            rc = 0;
        }
    free(line);
    fclose(f);
    return rc;
}

/* The steps with and without the fetch (their difference is fetch_interference) and the fetch
 * kernels' time in the steps (compute_interference) must come from the attention version of the
 * replay the refit reads: the difference of two versions' steps is not the fetch's. A file that
 * records no version is taken as the replay's (files from before the header named it). */
static int cal_same_attention(const char *replay, int want, const char *const *diag, int ndiag)
{
    for (int i = 0; i < ndiag && want; i++) {
        int v;
        if (val_replay_attention(diag[i], "calibrate", &v) < 0) return -1;
        if (v && v != want)
            return dh_err("calibrate: %s: attention version %d, where the replay %s ran version %d (measure both with one "
                          "version: kernels/calib-bench.sh)", diag[i], v, replay, want);
    }
    return 0;
}

/* The versions the fit selects: the first of each kernel's candidates (the replay's default,
 * then its fallbacks on GPUs that cannot run it: kernels/karch.h) that has lines in the
 * benchmark files, so that a GPU without wgmma fits the versions its replay runs; the H200's
 * files hold the defaults. The attention's is the version the replay records (replay_attn > 0),
 * whatever the candidates say: the profile then describes the kernel the refit's steps ran; the
 * benchmark files without a line of it are an error. FP8 GEMMs likewise give way to BF16 where
 * none were measured. The choices other than the defaults are noted on log. */
typedef struct {
    char sel[3][96];
    const char *select[6];
    const char *weight_dtype;
} cal_versions;

static int cal_has(const bcsv_table *t, const char *kernel, const char *version, const char *dtype, const char *timing)
{
    for (size_t i = 0; i < t->n; i++) {
        const bcsv_row *r = &t->rows[i];
        if (strcmp(r->s[BCSV_KERNEL], kernel) || (version && (!r->s[BCSV_VERSION] || strcmp(r->s[BCSV_VERSION], version))))
            continue;
        if (dtype && (!r->s[BCSV_DTYPE] || strcmp(r->s[BCSV_DTYPE], dtype))) continue;
        if (timing && strcmp(r->s[BCSV_TIMING], timing)) continue;
        return 1;
    }
    return 0;
}

static int cal_choose_versions(const char *const *bench, size_t n, int replay_attn, const char *replay, cal_versions *cv,
                               FILE *log)
{
    static const struct { const char *kernel, *fmt, *timing; int cand[6]; } ks[3] = {
        {"attention", "kernel=attention,version=%d,pattern=hits,timing=b2b20", "b2b20", {8, 5, 4, 3, 2, 1}},
        {"indexer", "kernel=indexer,version=%d,timing=isolated", "isolated", {5, 4, 1, 0, 0, 0}},
        {"topk", "kernel=topk,version=%d,timing=b2b20", "b2b20", {6, 5, 4, 3, 2, 1}},
    };
    bcsv_table t;
    bcsv_init(&t);
    for (size_t i = 0; i < n; i++)
        if (access(bench[i], R_OK) == 0) (void)bcsv_load(&t, bench[i]);   /* a bad file: cal_fit reports it */
    for (int k = 0; k < 3; k++) {
        int v = ks[k].cand[0];
        if (k == 0 && replay_attn > 0) {
            char vs[16];
            snprintf(vs, sizeof vs, "%d", replay_attn);
            if (!cal_has(&t, "attention", vs, NULL, ks[0].timing)) {
                bcsv_release(&t);
                return dh_err("calibrate: %s: no attention line of version %d (timing %s), the version the replay %s ran",
                              bench[0], replay_attn, ks[0].timing, replay);
            }
            if (replay_attn != ks[0].cand[0])
                fprintf(log, "dhcal: calibrate: attention version %d, the replay's\n", replay_attn);
            snprintf(cv->sel[0], sizeof cv->sel[0], ks[0].fmt, replay_attn);
            continue;
        }
        for (int c = 0; c < 6 && ks[k].cand[c]; c++) {
            char vs[16];
            snprintf(vs, sizeof vs, "%d", ks[k].cand[c]);
            if (cal_has(&t, ks[k].kernel, vs, NULL, ks[k].timing)) { v = ks[k].cand[c]; break; }
        }
        if (v != ks[k].cand[0])
            fprintf(log, "dhcal: calibrate: %s version %d (the benchmarks have no line of version %d, the replay's on Hopper)\n",
                    ks[k].kernel, v, ks[k].cand[0]);
        snprintf(cv->sel[k], sizeof cv->sel[k], ks[k].fmt, v);
    }
    cv->weight_dtype = "fp8";
    if (!cal_has(&t, "gemm", NULL, "fp8", NULL) && cal_has(&t, "gemm", NULL, "bf16", NULL)) {
        cv->weight_dtype = "bf16";
        fprintf(log, "dhcal: calibrate: BF16 GEMMs (the benchmarks have no FP8 GEMM line)\n");
    }
    const char *sel[6] = {cv->sel[0], "kernel=fetch,version=5,timing=b2b20", "kernel=gemm", cv->sel[1], cv->sel[2], NULL};
    memcpy(cv->select, sel, sizeof sel);
    bcsv_release(&t);
    return 0;
}

/* 1. The fit, into a profile named after the output (dhcal fit names a profile after its
 * file) in a temporary directory. */
static int cal_stage_fit(cal_state *st, FILE *report, FILE *log)
{
    const cal_opts *o = st->o;
    const char *tmpdir = getenv("TMPDIR");
    snprintf(st->dir, sizeof st->dir, "%s/dhcal-calibrate.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(st->dir)) { st->dir[0] = 0; return dh_err("calibrate: cannot create a temporary directory: %s", strerror(errno)); }
    snprintf(st->stage1, sizeof st->stage1, "%s/%s", st->dir, base_name(o->out_path));
    char files[CAL_NBENCH][700];
    const char *bench[CAL_NBENCH];
    for (size_t i = 0; i < CAL_NBENCH; i++) {
        snprintf(files[i], sizeof files[i], "%s/%s", o->bench_dir, cal_bench_files[i]);
        bench[i] = files[i];
    }
    /* The profile's header records how to redo it, under the name the calibration had. */
    const char *b = o->bench_dir;
    char command[4096];
    snprintf(command, sizeof command,
             "sh analysis/calibrate.sh (bin/dhcal fit on %s/attention-attention-b2b20.csv, %s/fetch-calib-b2b20.csv, "
             "%s/fetch-beside-b2b20.csv, %s/default-{gemm,indexer}.csv, %s/topk-scale-b2b20.csv, %s/indexer-topk6-b2b20.csv "
             "and %s/indexer-scale.csv, then bin/dhcal refit of layer_fixed_s on %s)",
             b, b, b, b, b, b, b, o->replay_path);
    fit_opts fo;
    fit_opts_default(&fo);
    cal_versions cv;
    if (cal_choose_versions(bench, CAL_NBENCH, st->replay_attn, o->replay_path, &cv, log) < 0) return -1;
    fo.select = cv.select;
    fo.holdout = cal_holdout;
    prof_opts po = {.base_path = o->base_path, .fetch_pattern = "serving", .command = command,
                    .weight_dtype = cv.weight_dtype, .layer_gemms = CAL_LAYER_GEMMS};
    /* Rates measured or published apart from these benchmarks (the prefill GEMM table, the
     * prefill attention's rate), in BENCH_DIR/prefill.ini with their sources, go into the
     * profile as they are. */
    char carry[700];
    snprintf(carry, sizeof carry, "%s/prefill.ini", o->bench_dir);
    if (access(carry, R_OK) == 0) po.carry_path = carry;
    char *notes = NULL, *fit_text = NULL;
    size_t notes_len = 0, fit_len = 0;
    FILE *nf = open_memstream(&notes, &notes_len), *fr = open_memstream(&fit_text, &fit_len);
    if (!nf || !fr) abort();
    int rc = cal_fit(bench, CAL_NBENCH, &fo, &po, st->stage1, fr, nf);
    fclose(nf);
    fclose(fr);
    /* The fit's notes, less those the calibration expects: lines outside its selection and
     * the pool outside the fitted pool sizes, coefficients the profile has no key for. On an
     * error every note is shown. */
    for (char *p = notes; p && *p;) {
        size_t l = strcspn(p, "\n");
        int expected = 0;
        if (!strncmp(p, "dhcal: ", 7)) {
            const char *q = p + 7 + strspn(p + 7, "0123456789");
            expected = !strncmp(q, " lines match no --select", 24) || !strncmp(p + 7, "warning: pool", 13) ||
                       !strncmp(p + 7, "fitted but not used", 19);
        }
        if (!expected || rc < 0) fprintf(log, "%.*s\n", (int)l, p);
        p += l + (p[l] == '\n');
    }
    if (fit_text) fputs(fit_text, report);
    free(notes);
    free(fit_text);
    return rc;
}

/* The replay's fitted configurations (heldout = 0), as its file orders them; each must be
 * defined in the configurations file. */
static int cal_stage_fitted(cal_state *st)
{
    val_set v;
    val_init(&v);
    val_config *vc = NULL;
    size_t nvc = 0;
    int rc = val_load_replay(&v, st->o->replay_path);
    if (rc == 0) rc = val_configs(&v, &vc, &nvc);
    val_release(&v);
    if (rc < 0) return -1;
    st->fitted = dh_calloc(nvc ? nvc : 1, sizeof *st->fitted);
    st->fitted_ids = dh_calloc(nvc ? nvc : 1, sizeof *st->fitted_ids);
    for (size_t i = 0; i < nvc && rc == 0; i++) {
        if (vc[i].heldout) continue;
        const rcfg_config *c = rcfg_find(&st->rs, vc[i].config);
        if (!c) rc = -1;
        else { st->fitted[st->nf] = c; st->fitted_ids[st->nf++] = c->id; }
    }
    free(vc);
    if (rc == 0 && !st->nf) rc = dh_err("calibrate: %s has no fitted configuration (heldout = 0)", st->o->replay_path);
    return rc;
}

/* 2. fetch_interference (st->alpha) from the diagnostics: per fitted configuration (its step -
 * the step without the fetch) / the fetch alone, steps 4-11, then the mean; per lists them. */
static int cal_stage_alpha(cal_state *st, const char *beside, const char *fonly, char *per, size_t cap)
{
    cal_accs t = {0};
    static const char *const m_full[] = {"plain"}, *const m_nof[] = {"plain-skip-fetch"}, *const m_fo[] = {"plain-fetch-only"};
    static const int s0[] = {0}, s1[] = {1}, s2[] = {2};
    if (cal_scan(st, st->o->replay_path, m_full, 1, s0, &t) < 0 || cal_scan(st, beside, m_nof, 1, s1, &t) < 0 ||
        cal_scan(st, fonly, m_fo, 1, s2, &t) < 0) { free(t.a); return -1; }
    double sum = 0;
    int n = 0;
    per[0] = 0;
    for (size_t i = 0; i < t.n; i++) {
        const cal_acc *x = &t.a[i];
        if (!x->n[0] || !x->n[1] || !x->n[2]) continue;
        double a = (x->sum[0] / x->n[0] - x->sum[1] / x->n[1]) / (x->sum[2] / x->n[2]);
        sum += a;
        n++;
        size_t l = strlen(per);
        snprintf(per + l, cap - l, "%s%s %.3g", per[0] ? ", " : "", x->id, a);
    }
    free(t.a);
    if (!n) return dh_err("calibrate: no fitted configuration in both %s and %s", beside, fonly);
    snprintf(st->alpha, sizeof st->alpha, "%.4g", sum / n);
    return 0;
}

/* The measured fetch kernels' time per step (ms, steps 4-11), each fitted configuration's
 * mean, summed (fmeas, as written, and st->fmeas); and per configuration the ratio to the
 * fetch alone (cper, reported). */
static int cal_stage_measured(cal_state *st, const char *busy, char *fmeas, size_t fcap, char *cper, size_t cap)
{
    cal_accs t = {0};
    static const char *const modes[] = {"plain-fetch-busy", "plain-fetch-only-fetch-busy"};
    static const int slots[] = {0, 1};
    if (cal_scan(st, busy, modes, 2, slots, &t) < 0) { free(t.a); return -1; }
    double sum = 0;
    int n = 0;
    cper[0] = 0;
    for (size_t i = 0; i < t.n; i++) {
        const cal_acc *x = &t.a[i];
        if (!x->n[0] || !x->n[1]) continue;
        sum += x->sum[0] / x->n[0] / 1000;
        n++;
        size_t l = strlen(cper);
        snprintf(cper + l, cap - l, "%s%s %.3g", cper[0] ? ", " : "", x->id, (x->sum[0] / x->n[0]) / (x->sum[1] / x->n[1]));
    }
    free(t.a);
    if (!n) return dh_err("calibrate: no fitted configuration in %s", busy);
    snprintf(fmeas, fcap, "%.6g", sum);
    st->fmeas = strtod(fmeas, NULL);
    return 0;
}

static int cal_steps(cal_state *st, FILE *report, FILE *log)
{
    char beside[700], fonly[700], busy[700];
    snprintf(beside, sizeof beside, "%s/%s", st->o->bench_dir, CAL_BESIDE);
    snprintf(fonly, sizeof fonly, "%s/%s", st->o->bench_dir, CAL_FONLY);
    snprintf(busy, sizeof busy, "%s/%s", st->o->bench_dir, CAL_BUSY);
    const char *diag[3] = {beside, fonly, busy};
    for (int i = 0; i < 3; i++)
        if (access(diag[i], R_OK) != 0)
            return dh_err("calibrate: %s: cannot read the replay diagnostic (kernels/replay/README.md)", diag[i]);
    /* The fetch alone (fonly, and the block appended to busy) runs no attention. */
    const char *with_attn[2] = {beside, busy};
    if (val_replay_attention(st->o->replay_path, "calibrate", &st->replay_attn) < 0 ||
        cal_same_attention(st->o->replay_path, st->replay_attn, with_attn, 2) < 0)
        return -1;
    if (cal_stage_fit(st, report, log) < 0 || cal_stage_fitted(st) < 0) return -1;
    char per[1024], cper[1024], fmeas[32], unused[64];
    if (cal_stage_alpha(st, beside, fonly, per, sizeof per) < 0 ||
        cal_stage_measured(st, busy, fmeas, sizeof fmeas, cper, sizeof cper) < 0)
        return -1;
    if (cal_profile_line(st->stage1, "beside_max", unused, sizeof unused) < 0)
        return dh_err("calibrate: the fit wrote no [gather] beside_max (fetch-beside-b2b20.csv)");

    /* 3-4. compute_interference, the refit of layer_fixed_s, both again. */
    char l0[64], beta1[32], beta[32], a[32], b[32], a2[32], b2[32];
    if (cal_profile_line(st->stage1, "layer_fixed_s = ", l0, sizeof l0) < 0)
        return dh_err("calibrate: the fit wrote no [hw] layer_fixed_s");
    if (cal_solve_beta(st, l0, beta1, sizeof beta1) < 0 || cal_refit_layer(st, beta1, l0, a, b, sizeof a) < 0 ||
        cal_solve_beta(st, b, beta, sizeof beta) < 0 || cal_refit_layer(st, beta, b, a2, b2, sizeof a2) < 0)
        return -1;

    /* 5. The keys with their provenance, then the refit written into the output. */
    char l[6][1400];
    snprintf(l[0], sizeof l[0], "; dhcal:  alone, steps 4-11 (%s; the replay, %s, %s)", per, base_name(beside), base_name(fonly));
    snprintf(l[1], sizeof l[1], "fetch_interference = %s", st->alpha);
    snprintf(l[2], sizeof l[2],
             "; dhcal:  time measured in their steps, %s ms per step summed over them (steps 4-11; dhreplay --fetch-times, %s;",
             fmeas, base_name(busy));
    snprintf(l[3], sizeof l[3], "; dhcal:  in the step / alone: %s); with the [gather] beside fit the share of a saturated memory system",
             cper);
    snprintf(l[4], sizeof l[4], "; dhcal:  that a step's compute amounts to (%s before the refit of layer_fixed_s)", beta1);
    snprintf(l[5], sizeof l[5], "compute_interference = %s", beta);
    const char *lines[] = {
        "; dhcal: fetch_interference = mean over the fitted configurations of (step - step without the fetch) / the fetch",
        l[0], l[1],
        "; dhcal: compute_interference = the value at which the simulator gives the fitted configurations the fetch kernels",
        l[2], l[3], l[4], l[5],
    };
    if (cal_splice(st->stage1, lines, sizeof lines / sizeof lines[0]) < 0) return -1;
    fprintf(report, "fetch_interference %s (%s)\n", st->alpha, per);
    fprintf(report, "compute_interference %s (%s before the refit of layer_fixed_s; measured fetch %s ms per step; in the step / alone: %s)\n",
            beta, beta1, fmeas, cper);
    char value[32];
    return cal_refit_at(st, beta, a2, b2, st->stage1, st->o->out_path, report, value, sizeof value);
}

int cal_calibrate(const cal_opts *o, FILE *report, FILE *log)
{
    cal_state st;
    memset(&st, 0, sizeof st);
    st.o = o;
    if (rcfg_load(o->configs_path, &st.rs) < 0) return -1;
    char *text = NULL;
    size_t len = 0;
    FILE *buf = open_memstream(&text, &len);
    if (!buf) abort();
    int rc = cal_steps(&st, buf, log);
    fclose(buf);
    if (rc == 0) fputs(text, report);
    free(text);
    if (st.stage1[0]) unlink(st.stage1);
    if (st.dir[0]) rmdir(st.dir);
    for (size_t i = 0; i < st.nruns; i++) {
        for (size_t c = 0; c < st.nf; c++) sim_result_release(&st.runs[i].res[c]);
        free(st.runs[i].res);
    }
    free(st.runs);
    free(st.fitted);
    free(st.fitted_ids);
    rcfg_release(&st.rs);
    return rc;
}
