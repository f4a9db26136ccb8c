/* dhsweep: policy sweeps of the simulator, in-process on worker threads,
 * resumable, across MPI ranks or Slurm array tasks (sweep/swdef.h for the
 * sweep file, swrun.h for running, swtab.h for the table). Usage: dhsweep --help. */
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/version.h"
#include "sweep/swdef.h"
#include "sweep/swrun.h"
#include "sweep/swtab.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef DH_MPI
#include <mpi.h>
#endif

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: dhsweep run FILE [--workers N] [--shard I/N] [--no-reuse] [--quiet]\n"
        "         run every point of the sweep FILE (resumes where a killed run stopped), then merge\n"
        "         OUTPUT/results.csv and OUTPUT/results.h5; --shard runs the units u with u %% N == I\n"
        "         and does not merge; under mpirun the ranks share the points and rank 0 merges\n"
        "       dhsweep check FILE             check the sweep file and every point's configuration (and that\n"
        "                                      the output folder can be written: it is created)\n"
        "       dhsweep merge DIR              join the results in DIR (after shards) into the table\n"
        "       dhsweep slurm FILE [--tasks N] [--cpus C] [--time T] [--partition P] [-o SCRIPT]\n"
        "         write an sbatch script whose N array tasks each run one shard (default\n"
        "         OUTPUT/sweep.sbatch); submit it with sbatch, then dhsweep merge OUTPUT\n"
        "       dhsweep plot FILE|DIR --metric M --axis A [--where KEY=VALUE]... [-o PREFIX]\n"
        "         draw M against the axis A, one line per policy (and per value of the other axes),\n"
        "         with 95 %% intervals over seeds; PREFIX.png and PREFIX.pdf (gnuplot)\n"
        "       dhsweep --version\n"
        "  --workers N   threads (default: every core, divided among the MPI ranks of a host)\n"
        "  --no-reuse    run every (point, policy), even one whose results an equal one gives (a policy\n"
        "                that does not read a swept [policy] key, such as resident across the budgets)\n"
        "  --quiet       no progress bar and no summary\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_count(const char *s, long lo, long hi, long *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || *e || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* A sweep file or an output folder: the folder. */
static void output_of(const char *arg, char *dir, size_t cap)
{
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) { snprintf(dir, cap, "%s", arg); return; }
    swdef d;
    if (swdef_load(arg, &d) < 0) dh_die_last("dhsweep");
    snprintf(dir, cap, "%s", d.output);
    swdef_release(&d);
}

/* ---------------------------------------------------------------- MPI */

typedef struct { int rank, size; } ranks;

#ifdef DH_MPI
/* mpirun sets these; without them the tool runs alone, without MPI_Init. */
static int under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static int mpi_agree(int ok, void *arg)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}
#endif

static int cmd_run(int argc, char **argv, int check_only)
{
    int workers = 0, quiet = 0, no_reuse = 0;
    long shard_i = 0, shard_n = 1;
    static const struct option opts[] = {
        { "workers", required_argument, 0, 'w' }, { "shard", required_argument, 0, 's' },
        { "quiet", no_argument, 0, 'q' }, { "no-reuse", no_argument, 0, 'r' }, { 0, 0, 0, 0 },
    };
    int o;
    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'w': {
            long v;
            if (parse_count(optarg, 1, 1024, &v) < 0) dh_die("dhsweep", "--workers '%s': expected 1 to 1024", optarg);
            workers = (int)v;
            break;
        }
        case 's': {
            char *slash = strchr(optarg, '/');
            if (!slash) dh_die("dhsweep", "--shard '%s': expected I/N", optarg);
            *slash = 0;
            if (parse_count(slash + 1, 1, 1000000, &shard_n) < 0 || parse_count(optarg, 0, shard_n - 1, &shard_i) < 0)
                dh_die("dhsweep", "--shard '%s/%s': expected I/N with 0 <= I < N", optarg, slash + 1);
            break;
        }
        case 'q': quiet = 1; break;
        case 'r': no_reuse = 1; break;
        default: dh_die("dhsweep", "option '%s' needs a value or is unknown (see --help)", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) dh_die("dhsweep", "%s needs one sweep file (see --help)", check_only ? "check" : "run");
    const char *file = argv[optind];

    ranks rk = { 0, 1 };
    int local = 1;
#ifdef DH_MPI
    int mpi = under_mpirun() && !check_only;
    if (mpi) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rk.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &rk.size);
        const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        long v;
        if (ls && parse_count(ls, 1, 1 << 20, &v) == 0) local = (int)v;
    }
#endif
    if (workers == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        workers = (int)(cores > local ? cores / local : 1);
    }
    swdef d;
    if (swdef_load(file, &d) < 0) dh_die_last("dhsweep");
    /* The manifest lets merge and plot read the folder without the sweep file. */
    char **axes = dh_calloc(d.n_axes + 1, sizeof *axes);
    for (size_t i = 0; i < d.n_axes; i++) axes[i] = d.axes[i].key;
    if (rk.rank == 0 && swtab_write_manifest(d.output, d.digest, d.n_units, d.n_seeds, axes, d.n_axes) < 0)
        dh_die_last("dhsweep");
    free(axes);

    swrun_opts ro = { 0 };
    ro.workers = workers;
    ro.parts = (size_t)shard_n * (size_t)rk.size;
    ro.part = (size_t)shard_i * (size_t)rk.size + (size_t)rk.rank;
    ro.progress = !quiet && rk.rank == 0;
    ro.commit = dh_commit();
#ifdef DH_MPI
    if (mpi) ro.agree = mpi_agree;
#endif
    double t0 = now_s();
    swrun_stats st;
    ro.check_only = check_only;
    ro.no_reuse = no_reuse;
    int rc = swrun_run(&d, &ro, &st);
    if (rc < 0) {
#ifdef DH_MPI
        if (mpi) { fprintf(stderr, "dhsweep: %s\n", dh_errmsg()); MPI_Abort(MPI_COMM_WORLD, 1); }
#endif
        dh_die_last("dhsweep");
    }
    if (check_only) {
        printf("dhsweep: %s: %zu points x %zu seeds x %d policies = %zu runs, every configuration checked\n", file,
               d.n_points, d.n_seeds, d.n_pol, st.tasks);
        swdef_release(&d);
        return 0;
    }
    size_t failed = st.failed, ran = st.ran, skipped = st.skipped, units = st.units;
#ifdef DH_MPI
    if (mpi) {
        unsigned long long loc[4] = { failed, ran, skipped, units }, all[4];
        MPI_Allreduce(loc, all, 4, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        failed = all[0]; ran = all[1]; skipped = all[2]; units = all[3];
    }
#endif
    int merged = 0;
    swtab t;
    if (rk.rank == 0 && shard_n == 1) {
        if (swtab_merge(d.output, &t) < 0) {
#ifdef DH_MPI
            if (mpi) { fprintf(stderr, "dhsweep: %s\n", dh_errmsg()); MPI_Abort(MPI_COMM_WORLD, 1); }
#endif
            dh_die_last("dhsweep");
        }
        merged = 1;
    }
    if (rk.rank == 0 && !quiet) {
        printf("dhsweep: %zu points (%zu skipped, %zu run, %zu failed) in %.1f s on %d worker%s", units, skipped, ran, failed,
               now_s() - t0, workers, workers == 1 ? "" : "s");
        if (rk.size > 1) printf(" x %d ranks", rk.size);
        if (shard_n > 1) printf(", shard %ld/%ld", shard_i, shard_n);
        printf("\n");
        if (merged) printf("dhsweep: %zu rows: %s/results.csv, %s/results.h5\n", t.n_rows, d.output, d.output);
    }
    if (merged) swtab_release(&t);
#ifdef DH_MPI
    if (mpi) MPI_Finalize();
#endif
    if (failed && rk.rank == 0)
        fprintf(stderr, "dhsweep: %s: %zu of %zu points have a failing policy; the errors are in %s/%s\n", file, failed, units,
                d.output, merged ? "results.csv" : "points/");
    swdef_release(&d);
    return failed ? 1 : 0;
}

static int cmd_merge(int argc, char **argv)
{
    if (argc != 2) dh_die("dhsweep", "merge needs one output folder (see --help)");
    swtab t;
    if (swtab_merge(argv[1], &t) < 0) dh_die_last("dhsweep");
    size_t missing = t.units - t.units_found;
    printf("dhsweep: %zu of %zu points, %zu rows (%zu failed): %s/results.csv, %s/results.h5\n", t.units_found, t.units,
           t.n_rows, t.rows_failed, argv[1], argv[1]);
    swtab_release(&t);
    if (missing) { fprintf(stderr, "dhsweep: %s: %zu of %zu points have no results yet\n", argv[1], missing, t.units); return 1; }
    return t.rows_failed ? 1 : 0;
}

/* ---------------------------------------------------------------- slurm */

static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) { if (*s == '\'') fputs("'\\''", f); else fputc(*s, f); }
    fputc('\'', f);
}

static int cmd_slurm(int argc, char **argv)
{
    long tasks = 4, cpus = 1;
    const char *tlimit = NULL, *partition = NULL, *script = NULL;
    static const struct option opts[] = {
        { "tasks", required_argument, 0, 'n' }, { "cpus", required_argument, 0, 'c' },
        { "time", required_argument, 0, 't' }, { "partition", required_argument, 0, 'p' },
        { "output", required_argument, 0, 'o' }, { 0, 0, 0, 0 },
    };
    int o;
    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (o) {
        case 'n': if (parse_count(optarg, 1, 1000000, &tasks) < 0) dh_die("dhsweep", "--tasks '%s': expected a count >= 1", optarg); break;
        case 'c': if (parse_count(optarg, 1, 1024, &cpus) < 0) dh_die("dhsweep", "--cpus '%s': expected 1 to 1024", optarg); break;
        case 't': tlimit = optarg; break;
        case 'p': partition = optarg; break;
        case 'o': script = optarg; break;
        default: dh_die("dhsweep", "option '%s' needs a value or is unknown (see --help)", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) dh_die("dhsweep", "slurm needs one sweep file (see --help)");
    const char *file = argv[optind];
    swdef d;
    if (swdef_load(file, &d) < 0) dh_die_last("dhsweep");
    /* Every point's configuration is checked here, before anything is submitted. */
    swrun_stats st;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    swrun_opts chk = { .workers = cores > 0 ? (int)cores : 1, .parts = 1, .commit = dh_commit(), .check_only = 1 };
    if (swrun_run(&d, &chk, &st) < 0) dh_die_last("dhsweep");
    char **axes = dh_calloc(d.n_axes + 1, sizeof *axes);
    for (size_t i = 0; i < d.n_axes; i++) axes[i] = d.axes[i].key;
    if (swtab_write_manifest(d.output, d.digest, d.n_units, d.n_seeds, axes, d.n_axes) < 0) dh_die_last("dhsweep");
    free(axes);
    if ((size_t)tasks > d.n_units) tasks = (long)d.n_units;
    char self[PATH_MAX], cwd[PATH_MAX], absfile[PATH_MAX], logs[1200], path[1200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) dh_die("dhsweep", "unable to find this program's path: %s", strerror(errno));
    self[n] = 0;
    if (!getcwd(cwd, sizeof cwd)) dh_die("dhsweep", "unable to read the current directory: %s", strerror(errno));
    if (!realpath(file, absfile)) dh_die("dhsweep", "'%s': %s", file, strerror(errno));
    char absout[PATH_MAX];
    if (!realpath(d.output, absout)) dh_die("dhsweep", "'%s': %s", d.output, strerror(errno));
    snprintf(logs, sizeof logs, "%s/slurm", absout);
    if (mkdir(logs, 0777) < 0 && errno != EEXIST) dh_die("dhsweep", "unable to create '%s': %s", logs, strerror(errno));
    if (!script) { snprintf(path, sizeof path, "%s/sweep.sbatch", d.output); script = path; }
    FILE *f = fopen(script, "w");
    if (!f) dh_die("dhsweep", "unable to write '%s': %s", script, strerror(errno));
    fprintf(f, "#!/bin/sh\n");
    fprintf(f, "# Written by dhsweep slurm for the sweep %s (digest %s): %zu points in %ld array tasks,\n", file, d.digest, d.n_units, tasks);
    fprintf(f, "# task I running the units u with u %% %ld == I. After the array: dhsweep merge %s\n", tasks, d.output);
    fprintf(f, "#SBATCH --job-name=dhsweep-%.8s\n", d.digest);
    fprintf(f, "#SBATCH --array=0-%ld\n", tasks - 1);
    fprintf(f, "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%ld\n", cpus);
    fprintf(f, "#SBATCH --output=%s/%%A_%%a.out\n", logs);
    if (partition) fprintf(f, "#SBATCH --partition=%s\n", partition);
    if (tlimit) fprintf(f, "#SBATCH --time=%s\n", tlimit);
    fprintf(f, "set -e\ncd ");
    sh_quote(f, cwd);
    fprintf(f, "\n");
    const char *root = getenv("DHSPARSE_ROOT");
    if (root) { fprintf(f, "export DHSPARSE_ROOT="); sh_quote(f, root); fprintf(f, "\n"); }
    fprintf(f, "exec ");
    sh_quote(f, self);
    fprintf(f, " run ");
    sh_quote(f, absfile);
    fprintf(f, " --shard \"$SLURM_ARRAY_TASK_ID/%ld\" --workers \"${SLURM_CPUS_PER_TASK:-1}\" --quiet\n", tasks);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) dh_die("dhsweep", "write error on '%s'", script);
    chmod(script, 0755);
    printf("%s\n", script);
    swdef_release(&d);
    return 0;
}

/* ---------------------------------------------------------------- plot */

static int spawn_wait(char *const args[])
{
    pid_t pid;
    int rc = posix_spawnp(&pid, args[0], NULL, NULL, args, environ);
    if (rc != 0) return dh_err("unable to run %s: %s", args[0], strerror(rc));
    int status;
    if (waitpid(pid, &status, 0) < 0) return dh_err("waiting for %s: %s", args[0], strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return dh_err("%s failed (status %d)", args[0], status);
    return 0;
}

typedef struct { double x, y, e; int has_e; } plot_pt;
typedef struct { char *label; plot_pt *p; size_t n; } plot_series;

static int by_x(const void *a, const void *b)
{
    double x = ((const plot_pt *)a)->x, y = ((const plot_pt *)b)->x;
    return x < y ? -1 : x > y;
}

static void gp_quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) { if (*s == '"' || *s == '\\') fputc('\\', f); if (*s == '_') fputs("\\\\", f); fputc(*s, f); }
    fputc('"', f);
}

static int cmd_plot(int argc, char **argv)
{
    const char *metric = NULL, *axis = NULL, *prefix = NULL;
    char *where[32];
    int n_where = 0;
    static const struct option opts[] = {
        { "metric", required_argument, 0, 'm' }, { "axis", required_argument, 0, 'a' },
        { "where", required_argument, 0, 'w' }, { "output", required_argument, 0, 'o' }, { 0, 0, 0, 0 },
    };
    int o;
    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (o) {
        case 'm': metric = optarg; break;
        case 'a': axis = optarg; break;
        case 'w':
            if (n_where == 32) dh_die("dhsweep", "at most 32 --where");
            if (!strchr(optarg, '=')) dh_die("dhsweep", "--where '%s': expected KEY=VALUE", optarg);
            where[n_where++] = optarg;
            break;
        case 'o': prefix = optarg; break;
        default: dh_die("dhsweep", "option '%s' needs a value or is unknown (see --help)", argv[optind - 1]);
        }
    }
    if (optind != argc - 1 || !metric || !axis) dh_die("dhsweep", "plot needs FILE|DIR, --metric and --axis (see --help)");
    char dir[1024];
    output_of(argv[optind], dir, sizeof dir);
    swtab t;
    if (swtab_load(dir, &t) < 0) dh_die_last("dhsweep");
    char name[300];
    snprintf(name, sizeof name, "%s_mean", metric);
    const swtab_col *cy = swtab_col_find(&t, name), *ce = NULL;
    if (cy) { snprintf(name, sizeof name, "%s_ci95", metric); ce = swtab_col_find(&t, name); }
    else cy = swtab_col_find(&t, metric);
    const swtab_col *cx = swtab_col_find(&t, axis), *cpol = swtab_col_find(&t, "policy"), *cst = swtab_col_find(&t, "status");
    if (!cy || !cy->numeric) dh_die("dhsweep", "%s: no numeric metric '%s' in the results", dir, metric);
    if (!cx || !cx->numeric) dh_die("dhsweep", "%s: no numeric column '%s' for the axis", dir, axis);
    const swtab_col *cw[32];
    for (int i = 0; i < n_where; i++) {
        char k[256];
        snprintf(k, sizeof k, "%.*s", (int)(strchr(where[i], '=') - where[i]), where[i]);
        cw[i] = swtab_col_find(&t, k);
        if (!cw[i]) dh_die("dhsweep", "%s: --where '%s': no column '%s'", dir, where[i], k);
    }
    plot_series *ser = NULL;
    size_t ns = 0;
    for (size_t r = 0; r < t.n_rows; r++) {
        if (!cst->cells[r] || strcmp(cst->cells[r], "ok") || !cy->cells[r] || !cx->cells[r]) continue;
        int keep = 1;
        for (int i = 0; i < n_where && keep; i++)
            keep = cw[i]->cells[r] && !strcmp(cw[i]->cells[r], strchr(where[i], '=') + 1);
        if (!keep) continue;
        /* One point per (point, policy): the seeds' rows share the mean. */
        char label[512];
        int l = snprintf(label, sizeof label, "%s", cpol->cells[r]);
        for (size_t a = 0; a < t.n_axes; a++) {
            if (!strcmp(t.axes[a], axis)) continue;
            const swtab_col *ca = swtab_col_find(&t, t.axes[a]);
            int fixed = 0;
            for (int i = 0; i < n_where; i++) fixed |= ca == cw[i];
            if (ca && !fixed && l < (int)sizeof label) l += snprintf(label + l, sizeof label - l, " %s=%s", t.axes[a], ca->cells[r] ? ca->cells[r] : "");
        }
        size_t s;
        for (s = 0; s < ns; s++) if (!strcmp(ser[s].label, label)) break;
        if (s == ns) { ser = dh_reallocarray(ser, ns + 1, sizeof *ser); ser[ns++] = (plot_series){ strdup(label), NULL, 0 }; }
        double x = strtod(cx->cells[r], NULL);
        int dup = 0;
        for (size_t i = 0; i < ser[s].n; i++) dup |= ser[s].p[i].x == x;
        if (dup) continue;
        ser[s].p = dh_reallocarray(ser[s].p, ser[s].n + 1, sizeof *ser[s].p);
        plot_pt *p = &ser[s].p[ser[s].n++];
        p->x = x;
        p->y = strtod(cy->cells[r], NULL);
        p->has_e = ce && ce->cells[r];
        p->e = p->has_e ? strtod(ce->cells[r], NULL) : 0;
    }
    if (ns == 0) dh_die("dhsweep", "%s: no successful rows to plot", dir);
    char pre[1200], dat[1300], gp[1300];
    if (prefix) snprintf(pre, sizeof pre, "%s", prefix);
    else snprintf(pre, sizeof pre, "%s/plot-%s-vs-%s", dir, metric, axis);
    snprintf(dat, sizeof dat, "%s.dat", pre);
    snprintf(gp, sizeof gp, "%s.gp", pre);
    FILE *f = fopen(dat, "w");
    if (!f) dh_die("dhsweep", "unable to write '%s': %s", dat, strerror(errno));
    int any_e = 0;
    for (size_t s = 0; s < ns; s++) {
        qsort(ser[s].p, ser[s].n, sizeof *ser[s].p, by_x);
        fprintf(f, "# %s\n", ser[s].label);
        for (size_t i = 0; i < ser[s].n; i++) {
            fprintf(f, "%.12g\t%.12g\t%.12g\n", ser[s].p[i].x, ser[s].p[i].y, ser[s].p[i].e);
            any_e |= ser[s].p[i].has_e;
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f) != 0) dh_die("dhsweep", "write error on '%s'", dat);
    f = fopen(gp, "w");
    if (!f) dh_die("dhsweep", "unable to write '%s': %s", gp, strerror(errno));
    fprintf(f, "# %s against %s by policy, from %s (dhsweep plot)\n", metric, axis, dir);
    for (int pass = 0; pass < 2; pass++) {
        fprintf(f, pass == 0 ? "set terminal pngcairo size 900,560 font \",11\"\n" : "set terminal pdfcairo size 6in,3.7in font \",9\"\n");
        fprintf(f, "set output \"%s.%s\"\n", pre, pass == 0 ? "png" : "pdf");
        if (pass == 0) {
            fprintf(f, "set xlabel ");
            gp_quote(f, axis);
            fprintf(f, "\nset ylabel ");
            gp_quote(f, metric);
            fprintf(f, "\nset grid\nset key outside right top\n");
        }
        fprintf(f, "plot ");
        for (size_t s = 0; s < ns; s++) {
            fprintf(f, "%s\"%s\" index %zu using 1:2%s with %s title ", s ? ", \\\n     " : "", dat, s, any_e ? ":3" : "",
                    any_e ? "yerrorlines" : "linespoints");
            gp_quote(f, ser[s].label);
        }
        fprintf(f, "\n");
    }
    if (fclose(f) != 0) dh_die("dhsweep", "write error on '%s'", gp);
    char *args[] = { "gnuplot", gp, NULL };
    if (spawn_wait(args) < 0) dh_die_last("dhsweep");
    printf("%s.png\n%s.pdf\n", pre, pre);
    for (size_t s = 0; s < ns; s++) { free(ser[s].label); free(ser[s].p); }
    free(ser);
    swtab_release(&t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) {
#ifdef DH_MPI
        printf("dhsweep %s (mpi: yes)\n", dh_commit());
#else
        printf("dhsweep %s (mpi: no)\n", dh_commit());
#endif
        return 0;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1, 0);
    if (!strcmp(cmd, "check")) return cmd_run(argc - 1, argv + 1, 1);
    if (!strcmp(cmd, "merge")) return cmd_merge(argc - 1, argv + 1);
    if (!strcmp(cmd, "slurm")) return cmd_slurm(argc - 1, argv + 1);
    if (!strcmp(cmd, "plot")) return cmd_plot(argc - 1, argv + 1);
    dh_die("dhsweep", "unknown command '%s' (run, check, merge, slurm, plot; see --help)", cmd);
}
