/* dhcal.c: calibration and validation of the simulator against the kernels.
 *
 *   dhcal fit --bench DIR_OR_CSV... [-o PROFILE] [--base PROFILE] [--select SPEC]...
 *             [--holdout SPEC]... [--version KERNEL=VER]... [--form KERNEL=FORM]... [--min-r2 X]
 *             [--fetch-pattern P] [--pool-bytes B] [--weight-dtype D] [--layer-gemms N]
 *             [--command TEXT]
 *       fit the cost forms to dhbench CSVs, print the fit report, and write the
 *       fitted keys into PROFILE (the other keys come from --base, by default
 *       PROFILE itself)
 *   dhcal check-profile FILE        reject a missing or non-physical coefficient
 *   dhcal check-range FILE NAME=VALUE...   is each value inside [fit_range] NAME?
 *   dhcal import-probe FILE... -o CSV      probe text files to dhbench CSV
 *   dhcal refit --replay CSV --key SECTION.KEY --at VALUE DIR --at VALUE DIR [--profile IN -o OUT]
 *       refit one coefficient on the replay's fitted configurations from two
 *       simulator runs (DIR/CONFIG.tsv timelines) at two values of it (refit.h);
 *       prints the solution; with -o writes IN with it (only once converged)
 *   dhcal validate --replay CSV [--sim FILE...] [--sim-timeline TSV:CONFIG:MODE]... [--steps]
 *                  [--max-median F] [--max-p95 F] [--exact-misses]
 *       compare replay step times and miss counts with the simulator's
 *
 * Exit status 0 on success, 1 on any error (one line "dhcal: ..."), 2 when
 * check-range finds a value outside or validate misses a stated target. */
#include "analysis/bcsv.h"
#include "analysis/fitcost.h"
#include "analysis/probe.h"
#include "analysis/prof.h"
#include "analysis/refit.h"
#include "analysis/valid.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/ofile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    fputs("usage: dhcal fit --bench DIR_OR_CSV... [-o PROFILE] [--base PROFILE] [--select SPEC]...\n"
          "                 [--holdout SPEC]... [--version KERNEL=VER]... [--form KERNEL=FORM]... [--min-r2 X]\n"
          "                 [--fetch-pattern P] [--pool-bytes B] [--weight-dtype D] [--layer-gemms N]\n"
          "                 [--command TEXT]\n"
          "       dhcal check-profile FILE\n"
          "       dhcal check-range FILE NAME=VALUE...\n"
          "       dhcal import-probe FILE... -o CSV\n"
          "       dhcal refit --replay CSV --key SECTION.KEY --at VALUE DIR --at VALUE DIR [--profile IN -o OUT]\n"
          "       dhcal validate --replay CSV [--sim FILE...] [--sim-timeline TSV:CONFIG:MODE]... [--steps]\n"
          "                      [--max-median F] [--max-p95 F] [--exact-misses]\n",
          stderr);
    exit(1);
}

static double parse_num(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(x)) dh_die("dhcal", "%s: '%s' is not a number", opt, s);
    return x;
}

/* Collects repeated options into a NULL-terminated list. */
typedef struct { const char **v; size_t n; } strlist;
static void push(strlist *l, const char *s)
{
    l->v = realloc(l->v, (l->n + 2) * sizeof *l->v);
    if (!l->v) abort();
    l->v[l->n++] = s;
    l->v[l->n] = NULL;
}

static void print_section(const fit_section *s)
{
    printf("[%s] kernel %s version %s (%s; versions: %s)\n", s->section, s->kernel, s->version, s->selection, s->versions_seen);
    if (s->form == FIT_FORM_BESIDE)   /* slowdowns near 0: an absolute residual */
        printf("  form %s: %zu points, rms %.3f (slowdown), R^2 %.5f\n", fit_form_name(s->form), s->res.npoints,
               s->res.rms_abs, s->res.r2);
    else
        printf("  form %s: %zu points, rms %.2f %%, weighted R^2 %.5f%s\n", fit_form_name(s->form), s->res.npoints,
               100 * s->res.rms_rel, s->res.r2, s->skipped_unchecked ? " (unchecked lines left out)" : "");
    for (size_t i = 0; i < s->ncoef; i++) {
        const fit_coef *c = &s->coef[i];
        printf("  %-28s %14.6g +- %-10.3g", c->key, c->value, c->se);
        if (c->fixed_zero) printf("  (fit gave %.3g +- %.2g, below 0 inside the noise: held at 0)", c->fit_value, c->fit_se);
        if (c->undetermined) printf("  (not determined by the data: left out)");
        if (c->bound) printf("  (a lower bound: every point is limited by the other term)");
        putchar('\n');
    }
    for (size_t i = 0; i < s->nrange; i++)
        printf("  range %-22s %14.6g .. %-14.6g\n", s->range[i].name, s->range[i].min, s->range[i].max);
    if (s->held_out)
        printf("  held out: %zu lines, error median %.2f %% p95 %.2f %% max %.2f %%\n", s->held_out,
               100 * s->holdout_err.median, 100 * s->holdout_err.p95, 100 * s->holdout_err.max);
    printf("  files: %s\n", s->files);
}

static int cmd_fit(int argc, char **argv)
{
    strlist bench = {0}, hold = {0}, vers = {0}, forms = {0}, sel = {0};
    const char *out = NULL, *base = NULL;
    fit_opts fo;
    fit_opts_default(&fo);
    prof_opts po = {.fetch_pattern = "serving", .pool_bytes = NAN, .weight_dtype = "fp8", .layer_gemms = NAN};
    const char *command = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--bench") && more) { while (i + 1 < argc && argv[i + 1][0] != '-') push(&bench, argv[++i]); }
        else if (!strcmp(a, "-o") && more) out = argv[++i];
        else if (!strcmp(a, "--base") && more) base = argv[++i];
        else if (!strcmp(a, "--holdout") && more) push(&hold, argv[++i]);
        else if (!strcmp(a, "--select") && more) push(&sel, argv[++i]);
        else if (!strcmp(a, "--weight-dtype") && more) po.weight_dtype = argv[++i];
        else if (!strcmp(a, "--layer-gemms") && more) po.layer_gemms = parse_num(a, argv[++i]);
        else if (!strcmp(a, "--command") && more) command = argv[++i];
        else if (!strcmp(a, "--version") && more) push(&vers, argv[++i]);
        else if (!strcmp(a, "--form") && more) push(&forms, argv[++i]);
        else if (!strcmp(a, "--min-r2") && more) fo.min_r2 = parse_num(a, argv[++i]);
        else if (!strcmp(a, "--fetch-pattern") && more) po.fetch_pattern = argv[++i];
        else if (!strcmp(a, "--pool-bytes") && more) po.pool_bytes = parse_num(a, argv[++i]);
        else dh_die("dhcal", "fit: unknown or incomplete option '%s'", a);
    }
    if (!bench.n) dh_die("dhcal", "fit: --bench needs at least one directory or CSV file");
    if (out && !base) base = access(out, R_OK) == 0 ? out : NULL;
    if (out && !base) dh_die("dhcal", "fit: '%s' does not exist; give --base PROFILE for the keys the fit does not set", out);
    /* Pages and regions must be counted with the sizes the simulator uses. */
    if (base && prof_base_page_bytes(base, &fo.page_bytes, &fo.region_bytes) < 0) dh_die_last("dhcal");
    fo.holdout = hold.v;
    fo.versions = vers.v;
    fo.forms = forms.v;
    fo.select = sel.v;

    bcsv_table t;
    bcsv_init(&t);
    for (size_t i = 0; i < bench.n; i++)
        if (bcsv_load(&t, bench.v[i]) < 0) dh_die_last("dhcal");
    fit_section *secs;
    size_t ns;
    if (fit_bench(&t, &fo, &secs, &ns, stderr) < 0) dh_die_last("dhcal");
    for (size_t i = 0; i < ns; i++) print_section(&secs[i]);
    if (out) {
        /* The command as given, so the profile says how to redo it. */
        char cmd[4096] = "dhcal";
        for (int i = 0; i < argc && !command; i++) {
            size_t l = strlen(cmd);
            snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
        }
        if (command) snprintf(cmd, sizeof cmd, "%s", command);
        po.base_path = base;
        po.command = cmd;
        if (prof_write(&po, secs, ns, out, stderr) < 0) dh_die_last("dhcal");
        printf("wrote %s\n", out);
    }
    free(secs);
    bcsv_release(&t);
    free(bench.v); free(hold.v); free(vers.v); free(forms.v); free(sel.v);
    return 0;
}

static int cmd_check_profile(int argc, char **argv)
{
    if (argc != 2) usage();
    if (prof_check(argv[1]) < 0) dh_die_last("dhcal");
    printf("%s: ok\n", argv[1]);
    return 0;
}

static int cmd_check_range(int argc, char **argv)
{
    if (argc < 3) usage();
    int outside = 0;
    for (int i = 2; i < argc; i++) {
        char name[128];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof name) dh_die("dhcal", "check-range: expected NAME=VALUE, got '%s'", argv[i]);
        memcpy(name, argv[i], (size_t)(eq - argv[i]));
        name[eq - argv[i]] = 0;
        double v = parse_num(name, eq + 1), lo, hi;
        int in;
        if (prof_check_range(argv[1], name, v, &in, &lo, &hi) < 0) dh_die_last("dhcal");
        printf("%s = %.6g %s [%.6g, %.6g]\n", name, v, in ? "inside" : "OUTSIDE the fitted range", lo, hi);
        outside |= !in;
    }
    return outside ? 2 : 0;
}

static int cmd_import_probe(int argc, char **argv)
{
    const char *out = NULL;
    strlist in = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') dh_die("dhcal", "import-probe: unknown option '%s'", argv[i]);
        else push(&in, argv[i]);
    }
    if (!out || !in.n) usage();
    /* Written under a temporary name, renamed when complete (common/ofile.h). */
    ofile of;
    if (ofile_check(out) < 0 || ofile_open(&of, out) < 0) dh_die_last("dhcal");
    FILE *f = of.f;
    fprintf(f, "# converted by: dhcal import-probe");
    for (size_t i = 0; i < in.n; i++) fprintf(f, " %s", in.v[i]);
    fprintf(f, " -o %s\n%s\n", out, bcsv_header());
    for (size_t i = 0; i < in.n; i++)
        if (probe_convert(in.v[i], f) < 0) { ofile_discard(&of); dh_die_last("dhcal"); }
    if (ofile_close(&of) < 0) dh_die_last("dhcal");
    /* Read it back: the converter's lines must pass the same reader as dhbench's. */
    bcsv_table t;
    bcsv_init(&t);
    if (bcsv_load(&t, out) < 0) dh_die_last("dhcal");
    printf("wrote %s: %zu lines\n", out, t.n);
    bcsv_release(&t);
    free(in.v);
    return 0;
}

static int cmd_validate(int argc, char **argv)
{
    const char *replay = NULL;
    strlist sims = {0}, timelines = {0};
    int steps = 0, exact = 0;
    double max_med = NAN, max_p95 = NAN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--replay") && more) replay = argv[++i];
        else if (!strcmp(a, "--sim") && more) { while (i + 1 < argc && argv[i + 1][0] != '-') push(&sims, argv[++i]); }
        else if (!strcmp(a, "--sim-timeline") && more) push(&timelines, argv[++i]);
        else if (!strcmp(a, "--steps")) steps = 1;
        else if (!strcmp(a, "--exact-misses")) exact = 1;
        else if (!strcmp(a, "--max-median") && more) max_med = parse_num(a, argv[++i]);
        else if (!strcmp(a, "--max-p95") && more) max_p95 = parse_num(a, argv[++i]);
        else dh_die("dhcal", "validate: unknown or incomplete option '%s'", a);
    }
    if (!replay || (!sims.n && !timelines.n)) usage();
    val_set v;
    val_init(&v);
    if (val_load_replay(&v, replay) < 0) dh_die_last("dhcal");
    for (size_t i = 0; i < sims.n; i++)
        if (val_add_predictions(&v, sims.v[i]) < 0) dh_die_last("dhcal");
    for (size_t i = 0; i < timelines.n; i++) {
        /* FILE:CONFIG:MODE, split at the last two colons. */
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", timelines.v[i]);
        char *m = strrchr(buf, ':');
        if (!m) dh_die("dhcal", "--sim-timeline '%s': expected FILE:CONFIG:MODE", timelines.v[i]);
        *m++ = 0;
        char *cf = strrchr(buf, ':');
        if (!cf) dh_die("dhcal", "--sim-timeline '%s': expected FILE:CONFIG:MODE", timelines.v[i]);
        *cf++ = 0;
        if (val_add_dhsim_timeline(&v, buf, cf, m) < 0) dh_die_last("dhcal");
    }
    if (val_check_complete(&v) < 0) dh_die_last("dhcal");
    val_report(&v, steps, stdout);
    /* Targets apply to held-out configurations (or to all when none is held out). */
    val_summary s;
    val_summarize(&v, 1, NULL, NULL, NULL, &s);
    if (!s.steps) val_summarize(&v, -1, NULL, NULL, NULL, &s);
    int fail = 0;
    if (!isnan(max_med) && s.err.median > max_med) { printf("target missed: median error %.2f %% > %.2f %%\n", 100 * s.err.median, 100 * max_med); fail = 1; }
    if (!isnan(max_p95) && s.err.p95 > max_p95) { printf("target missed: p95 error %.2f %% > %.2f %%\n", 100 * s.err.p95, 100 * max_p95); fail = 1; }
    val_summary all;
    val_summarize(&v, -1, NULL, NULL, NULL, &all);
    if (exact && all.miss_mismatch_steps) { printf("target missed: miss counts differ on %zu steps\n", all.miss_mismatch_steps); fail = 1; }
    val_release(&v);
    free(sims.v);
    free(timelines.v);
    return fail ? 2 : 0;
}

/* The replay joined with one simulator run: DIR/CONFIG.tsv for each fitted
 * configuration (held-out ones are not needed and not read). */
static void refit_join(val_set *v, const char *replay, const char *dir)
{
    val_init(v);
    if (val_load_replay(v, replay) < 0) dh_die_last("dhcal");
    for (size_t i = 0; i < v->n; i++) {
        const val_step *x = &v->s[i];
        if (x->heldout) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !v->s[j].heldout && !strcmp(v->s[j].config, x->config) && !strcmp(v->s[j].mode, x->mode);
        if (seen) continue;
        char path[1024], config[64], mode[32];
        snprintf(path, sizeof path, "%s/%s.tsv", dir, x->config);
        snprintf(config, sizeof config, "%s", x->config);
        snprintf(mode, sizeof mode, "%s", x->mode);
        if (val_add_dhsim_timeline(v, path, config, mode) < 0) dh_die_last("dhcal");
    }
}

static int cmd_refit(int argc, char **argv)
{
    const char *replay = NULL, *key = NULL, *in = NULL, *out = NULL, *dir[2] = {0};
    double at[2] = {NAN, NAN};
    int nat = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--replay") && i + 1 < argc) replay = argv[++i];
        else if (!strcmp(a, "--key") && i + 1 < argc) key = argv[++i];
        else if (!strcmp(a, "--profile") && i + 1 < argc) in = argv[++i];
        else if (!strcmp(a, "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(a, "--at") && i + 2 < argc) {
            if (nat == 2) dh_die("dhcal", "refit: give --at VALUE DIR exactly twice");
            at[nat] = parse_num(a, argv[++i]);
            dir[nat++] = argv[++i];
        } else dh_die("dhcal", "refit: unknown or incomplete option '%s'", a);
    }
    if (!replay || !key || nat != 2 || (!in) != (!out)) usage();
    char section[64], name[64];
    const char *dot = strchr(key, '.');
    if (!dot || dot == key || !dot[1] || (size_t)(dot - key) >= sizeof section || strlen(dot + 1) >= sizeof name)
        dh_die("dhcal", "refit: --key '%s': expected SECTION.KEY", key);
    snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
    snprintf(name, sizeof name, "%s", dot + 1);
    val_set a, b;
    refit_join(&a, replay, dir[0]);
    refit_join(&b, replay, dir[1]);
    refit_result r;
    if (refit_solve(&a, at[0], &b, at[1], &r) < 0) dh_die_last("dhcal");
    char value[64], latest[64];
    snprintf(value, sizeof value, "%.*g", REFIT_DIGITS, r.value);
    snprintf(latest, sizeof latest, "%.*g", REFIT_DIGITS, at[1]);
    char held[256] = "";
    for (size_t i = 0; i < a.n; i++)
        if (a.s[i].heldout && !strstr(held, a.s[i].config) && strlen(held) + strlen(a.s[i].config) + 2 < sizeof held) {
            if (held[0]) strcat(held, " ");
            strcat(held, a.s[i].config);
        }
    int converged = !strcmp(value, latest);
    printf("refit %s on %s: fitted configurations %s (%zu steps; held out, not used: %s)\n", key, replay, r.config_list,
           r.steps, held[0] ? held : "none");
    printf("  from simulator runs at %g (%s) and %g (%s); d(step)/d(%s) %.6g us per unit\n", at[0], dir[0], at[1], dir[1], name,
           r.mean_slope);
    printf("  %s = %s +- %.2g; rms %.2f %%, weighted R^2 %.4f; error median %.2f %% p95 %.2f %% max %.2f %%%s\n", name, value,
           r.se, 100 * r.rms_rel, r.r2, 100 * r.err.median, 100 * r.err.p95, 100 * r.err.max,
           converged ? "" : " (linearised: not yet run at this value)");
    printf("value %s%s\n", value, converged ? " converged" : "");
    if (out) {
        if (!converged)
            dh_die("dhcal", "refit: %s = %s is not the latest simulated value %s: run the simulator at %s and refit from it", key, value, latest, value);
        cfg *c;
        double old;
        if (cfg_load(in, &c) < 0) dh_die_last("dhcal");
        if (cfg_get_double(c, section, name, &old, CFG_REQUIRED, -1e300, 1e300) < 0) dh_die_last("dhcal");
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
        if (!(r.value >= 0)) dh_die("dhcal", "refit: %s = %s is negative: non-physical", key, value);
        if (refit_write(in, out, section, name, value, comment) < 0) dh_die_last("dhcal");
        printf("wrote %s\n", out);
    }
    val_release(&a);
    val_release(&b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    const char *cmd = argv[1];
    if (!strcmp(cmd, "fit")) return cmd_fit(argc - 1, argv + 1);
    if (!strcmp(cmd, "check-profile")) return cmd_check_profile(argc - 1, argv + 1);
    if (!strcmp(cmd, "check-range")) return cmd_check_range(argc - 1, argv + 1);
    if (!strcmp(cmd, "import-probe")) return cmd_import_probe(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate")) return cmd_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "refit")) return cmd_refit(argc - 1, argv + 1);
    usage();
}
