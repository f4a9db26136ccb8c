/* dhcal.c: calibration and validation of the simulator against the kernels.
 *
 *   dhcal fit --bench DIR_OR_CSV... [-o PROFILE] [--base PROFILE] [--select SPEC]...
 *             [--holdout SPEC]... [--version KERNEL=VER]... [--form KERNEL=FORM]... [--min-r2 X]
 *             [--fetch-pattern P] [--weight-dtype D] [--layer-gemms N]
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
 *   dhcal validate --replay CSV [--sim FILE...] [--sim-timeline TSV:CONFIG:MODE]...
 *                  [--simulate PROFILE [--configs FILE] [--timelines DIR]] [--steps]
 *                  [--max-median F] [--max-p95 F] [--exact-misses]
 *       compare replay step times and miss counts with the simulator's; with
 *       --simulate, the simulator runs every configuration of the replay itself
 *       (kernels/replay/configs.ini), optionally writing DIR/CONFIG.tsv
 *   dhcal simulate --profile PROFILE --out DIR [--configs FILE] [--set SEC.KEY=VAL]... CONFIG...
 *       the simulator on replay configurations, one timeline DIR/CONFIG.tsv each
 *   dhcal calibrate [OUT.ini [BENCH_DIR [REPLAY.csv [BASE.ini]]]] [--configs FILE]
 *       the whole calibration (calibrate.h); defaults models/hw/h200.ini,
 *       measurements/h200, measurements/h200/replay-glm53-16x100k.csv,
 *       models/hw/h200-datasheet.ini; an OUT that is a directory (or ends in
 *       '/') names the profile after the GPU of BENCH_DIR's lines:
 *       OUT/measured-NAME.ini (e.g. measured-nvidia-a100-sxm4-80gb.ini),
 *       an error when the lines name more than one device
 *   dhcal deployments [DIR] [--csv FILE]
 *       the simulator against published deployments (deploy.h), one row per
 *       DIR/ *.ini (default analysis/deployments); missed targets are in the
 *       table, not in the exit status
 *
 * Exit status 0 on success, 1 on any error (one line "dhcal: ..."), 2 when
 * check-range finds a value outside or validate misses a stated target. */
#include "analysis/bcsv.h"
#include "analysis/calibrate.h"
#include "analysis/deploy.h"
#include "analysis/fitcost.h"
#include "analysis/probe.h"
#include "analysis/prof.h"
#include "analysis/rcfg.h"
#include "analysis/refit.h"
#include "analysis/rsim.h"
#include "analysis/valid.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/ofile.h"
#include "kernels/karch.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(void)
{
    fputs("usage: dhcal fit --bench DIR_OR_CSV... [-o PROFILE] [--base PROFILE] [--select SPEC]...\n"
          "                 [--holdout SPEC]... [--version KERNEL=VER]... [--form KERNEL=FORM]... [--min-r2 X]\n"
          "                 [--fetch-pattern P] [--weight-dtype D] [--layer-gemms N]\n"
          "                 [--command TEXT]\n"
          "       dhcal check-profile FILE\n"
          "       dhcal check-range FILE NAME=VALUE...\n"
          "       dhcal import-probe FILE... -o CSV\n"
          "       dhcal refit --replay CSV --key SECTION.KEY --at VALUE DIR --at VALUE DIR [--profile IN -o OUT]\n"
          "       dhcal validate --replay CSV [--sim FILE...] [--sim-timeline TSV:CONFIG:MODE]...\n"
          "                      [--simulate PROFILE [--configs FILE] [--timelines DIR]] [--steps]\n"
          "                      [--max-median F] [--max-p95 F] [--exact-misses]\n"
          "       dhcal simulate --profile PROFILE --out DIR [--configs FILE] [--set SEC.KEY=VAL]... CONFIG...\n"
          "       dhcal calibrate [OUT.ini|DIR/ [BENCH_DIR [REPLAY.csv [BASE.ini]]]] [--configs FILE]\n"
          "       dhcal deployments [DIR] [--csv FILE]\n",
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

static int cmd_fit(int argc, char **argv)
{
    strlist bench = {0}, hold = {0}, vers = {0}, forms = {0}, sel = {0};
    const char *out = NULL, *base = NULL;
    fit_opts fo;
    fit_opts_default(&fo);
    prof_opts po = {.fetch_pattern = "serving", .weight_dtype = "fp8", .layer_gemms = NAN};
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
        else dh_die("dhcal", "fit: unknown or incomplete option '%s'", a);
    }
    if (!bench.n) dh_die("dhcal", "fit: --bench needs at least one directory or CSV file");
    if (out && !base) base = access(out, R_OK) == 0 ? out : NULL;
    if (out && !base) dh_die("dhcal", "fit: '%s' does not exist; give --base PROFILE for the keys the fit does not set", out);
    fo.holdout = hold.v;
    fo.versions = vers.v;
    fo.forms = forms.v;
    fo.select = sel.v;

    /* The command as given, so the profile says how to redo it. */
    char cmd[4096] = "dhcal";
    for (int i = 0; i < argc && !command; i++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
    }
    if (command) snprintf(cmd, sizeof cmd, "%s", command);
    po.base_path = base;
    po.command = cmd;
    if (cal_fit(bench.v, bench.n, &fo, &po, out, stdout, stderr) < 0) dh_die_last("dhcal");
    if (out) printf("wrote %s\n", out);
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

/* Simulator runs per hardware thread the tools use by default (results do not depend on it). */
#define DHCAL_THREADS 2

/* Every configuration of the replay in v simulated with profile and joined, each with the
 * mode of its first line in the replay file; timelines written to tl_dir when given. */
static void simulate_replay(val_set *v, const char *profile, const char *configs, const char *tl_dir)
{
    rcfg_set rs;
    if (rcfg_load(configs, &rs) < 0) dh_die_last("dhcal");
    val_config *vc;
    size_t n;
    if (val_configs(v, &vc, &n) < 0) dh_die_last("dhcal");
    const rcfg_config **c = calloc(n ? n : 1, sizeof *c);
    sim_result *res = calloc(n ? n : 1, sizeof *res);
    if (!c || !res) abort();
    for (size_t i = 0; i < n; i++)
        if (!(c[i] = rcfg_find(&rs, vc[i].config))) dh_die_last("dhcal");
    if (rsim_run_many(&rs, c, n, profile, NULL, 0, DHCAL_THREADS, res) < 0) dh_die_last("dhcal");
    for (size_t i = 0; i < n; i++) {
        if (tl_dir && rsim_write_timeline(tl_dir, c[i]->id, &res[i]) < 0) dh_die_last("dhcal");
        if (val_add_sim_result(v, &res[i], vc[i].config, vc[i].mode) < 0) dh_die_last("dhcal");
        sim_result_release(&res[i]);
    }
    free(res);
    free(c);
    free(vc);
    rcfg_release(&rs);
}

static int cmd_simulate(int argc, char **argv)
{
    const char *profile = NULL, *out = NULL, *configs = NULL;
    strlist ids = {0}, sets = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--profile") && more) profile = argv[++i];
        else if (!strcmp(a, "--out") && more) out = argv[++i];
        else if (!strcmp(a, "--configs") && more) configs = argv[++i];
        else if (!strcmp(a, "--set") && more) push(&sets, argv[++i]);
        else if (!strcmp(a, "--")) continue;   /* simrun.sh's separator before the overrides */
        else if (a[0] == '-') dh_die("dhcal", "simulate: unknown or incomplete option '%s'", a);
        else push(&ids, a);
    }
    if (!profile || !out || !ids.n) usage();
    rcfg_set rs;
    if (rcfg_load(configs, &rs) < 0) dh_die_last("dhcal");
    const rcfg_config **c = calloc(ids.n, sizeof *c);
    sim_result *res = calloc(ids.n, sizeof *res);
    if (!c || !res) abort();
    for (size_t i = 0; i < ids.n; i++)
        if (!(c[i] = rcfg_find(&rs, ids.v[i]))) dh_die_last("dhcal");
    if (rsim_run_many(&rs, c, ids.n, profile, (char *const *)sets.v, (int)sets.n, DHCAL_THREADS, res) < 0) dh_die_last("dhcal");
    for (size_t i = 0; i < ids.n; i++) {
        if (rsim_write_timeline(out, c[i]->id, &res[i]) < 0) dh_die_last("dhcal");
        sim_result_release(&res[i]);
    }
    free(res);
    free(c);
    rcfg_release(&rs);
    free(ids.v);
    free(sets.v);
    return 0;
}

/* DIR/measured-<slug of the device>.ini, the one device of bench's lines, into out[cap]: 0, or
 * -1 with dh_err(). */
static int device_profile_path(const char *dir, const char *bench, char *out, size_t cap)
{
    bcsv_table t;
    bcsv_init(&t);
    if (bcsv_load(&t, bench) < 0) return -1;
    const char *dev = NULL;
    int rc = 0;
    for (size_t i = 0; i < t.n && rc == 0; i++) {
        const char *d = t.rows[i].s[BCSV_DEVICE];
        if (!d || !d[0]) continue;
        if (!dev) dev = d;
        else if (strcmp(dev, d))
            rc = dh_err("calibrate: '%s' holds lines of two devices ('%s', '%s'): give the profile's file name", bench, dev, d);
    }
    if (rc == 0 && !dev) rc = dh_err("calibrate: '%s' has no line naming its device", bench);
    if (rc == 0) {
        char slug[128];
        karch_slug(dev, slug, sizeof slug);
        const size_t l = strlen(dir);
        if (!slug[0]) rc = dh_err("calibrate: device '%s' gives no file name", dev);
        else if ((size_t)snprintf(out, cap, "%s%smeasured-%s.ini", dir, l && dir[l - 1] == '/' ? "" : "/", slug) >= cap)
            rc = dh_err("calibrate: profile path too long");
    }
    bcsv_release(&t);
    return rc;
}

static int cmd_calibrate(int argc, char **argv)
{
    const char *pos[4] = {"models/hw/h200.ini", "measurements/h200", "measurements/h200/replay-glm53-16x100k.csv",
                          "models/hw/h200-datasheet.ini"};
    cal_opts o = {.threads = DHCAL_THREADS};
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--configs") && i + 1 < argc) o.configs_path = argv[++i];
        else if (argv[i][0] == '-' || np == 4) dh_die("dhcal", "calibrate: unknown or extra argument '%s'", argv[i]);
        else pos[np++] = argv[i];
    }
    o.out_path = pos[0];
    o.bench_dir = pos[1];
    static char named[4096];
    struct stat st;
    const size_t ol = strlen(pos[0]);
    if ((ol && pos[0][ol - 1] == '/') || (stat(pos[0], &st) == 0 && S_ISDIR(st.st_mode))) {
        if (device_profile_path(pos[0], pos[1], named, sizeof named) < 0) dh_die_last("dhcal");
        o.out_path = named;
        fprintf(stderr, "dhcal: calibrate: the profile is %s\n", named);
    }
    o.replay_path = pos[2];
    o.base_path = pos[3];
    if (cal_calibrate(&o, stdout, stderr) < 0) dh_die_last("dhcal");
    return 0;
}

static int cmd_validate(int argc, char **argv)
{
    const char *replay = NULL, *profile = NULL, *configs = NULL, *tl_dir = NULL;
    strlist sims = {0}, timelines = {0};
    int steps = 0, exact = 0;
    double max_med = NAN, max_p95 = NAN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--replay") && more) replay = argv[++i];
        else if (!strcmp(a, "--sim") && more) { while (i + 1 < argc && argv[i + 1][0] != '-') push(&sims, argv[++i]); }
        else if (!strcmp(a, "--sim-timeline") && more) push(&timelines, argv[++i]);
        else if (!strcmp(a, "--simulate") && more) profile = argv[++i];
        else if (!strcmp(a, "--configs") && more) configs = argv[++i];
        else if (!strcmp(a, "--timelines") && more) tl_dir = argv[++i];
        else if (!strcmp(a, "--steps")) steps = 1;
        else if (!strcmp(a, "--exact-misses")) exact = 1;
        else if (!strcmp(a, "--max-median") && more) max_med = parse_num(a, argv[++i]);
        else if (!strcmp(a, "--max-p95") && more) max_p95 = parse_num(a, argv[++i]);
        else dh_die("dhcal", "validate: unknown or incomplete option '%s'", a);
    }
    if (!replay || (!sims.n && !timelines.n && !profile)) usage();
    if ((configs || tl_dir) && !profile) dh_die("dhcal", "validate: --configs and --timelines go with --simulate PROFILE");
    val_set v;
    val_init(&v);
    if (val_load_replay(&v, replay) < 0) dh_die_last("dhcal");
    if (profile) {
        /* The profile describes the kernels it was fitted on: a replay of another attention
         * version measures other steps than the ones it predicts. */
        long fitted;
        int ran;
        if (prof_fitted_attention(profile, &fitted) < 0 || val_replay_attention(replay, "validate", &ran) < 0)
            dh_die_last("dhcal");
        if (fitted && ran && fitted != ran)
            dh_die("dhcal", "validate: %s: attention version %d, where the profile %s was fitted on version %ld ([fitted_kernels] "
                   "attention): replay with --attention-version %ld, or calibrate a profile on this replay", replay, ran, profile,
                   fitted, fitted);
        simulate_replay(&v, profile, configs, tl_dir);
    }
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

/* A fitted configuration's simulator run from its timeline file, DIR/CONFIG.tsv (cal_join_fn). */
static int join_timeline(val_set *v, const char *config, const char *mode, void *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.tsv", (const char *)dir, config);
    return val_add_dhsim_timeline(v, path, config, mode);
}

/* The replay joined with one simulator run: DIR/CONFIG.tsv for each fitted
 * configuration (held-out ones are not needed and not read). */
static void refit_join(val_set *v, const char *replay, const char *dir)
{
    if (cal_refit_join(v, replay, join_timeline, (void *)dir) < 0) dh_die_last("dhcal");
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
    val_set a, b;
    refit_join(&a, replay, dir[0]);
    refit_join(&b, replay, dir[1]);
    char value[64];
    if (cal_refit(replay, key, at, dir, &a, &b, in, out, stdout, value, sizeof value) < 0) dh_die_last("dhcal");
    val_release(&a);
    val_release(&b);
    return 0;
}

static int cmd_deployments(int argc, char **argv)
{
    const char *dir = NULL, *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (argv[i][0] == '-' || dir) dh_die("dhcal", "deployments: unknown or extra argument '%s'", argv[i]);
        else dir = argv[i];
    }
    dep_set s;
    if (dep_load_dir(dir, &s) < 0) dh_die_last("dhcal");
    dep_sim *r = calloc(s.n, sizeof *r);
    if (!r) abort();
    if (dep_simulate(&s, DHCAL_THREADS, r) < 0) dh_die_last("dhcal");
    FILE *csv = NULL;
    if (csv_path && !(csv = fopen(csv_path, "w"))) dh_die("dhcal", "cannot create '%s': %s", csv_path, strerror(errno));
    if (dep_report(&s, r, stdout, csv) < 0) dh_die_last("dhcal");
    if (csv && fclose(csv) != 0) dh_die("dhcal", "cannot write '%s'", csv_path);
    free(r);
    dep_release(&s);
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
    if (!strcmp(cmd, "simulate")) return cmd_simulate(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate")) return cmd_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "deployments")) return cmd_deployments(argc - 1, argv + 1);
    usage();
}
