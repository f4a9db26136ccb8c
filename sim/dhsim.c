/* dhsim: the trace-driven simulator of hierarchical sparse KV residency on a
 * decode GPU (sim/sim.h). Usage: dhsim --help. */
#include "common/dh_err.h"
#include "sim/out.h"
#include "sim/sim.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_INSTANCE "models/instances/glm53-h200x8.ini"
#define MAX_SETS 256

static void usage(FILE *f)
{
    fprintf(f,
        "usage: dhsim [options]\n"
        "  --config FILE        instance config (default " DEFAULT_INSTANCE ")\n"
        "  --policy LIST        resident, hisparse, adaptive, oracle (comma-separated; default: the config's)\n"
        "  --compare            all four policies side by side\n"
        "  --set SEC.KEY=VAL    override a config value (repeatable)\n"
        "  --steps N            decode steps (workload.steps)\n"
        "  --concurrency C      requests in flight on the instance (workload.concurrency)\n"
        "  --seed S             trace and workload seed (trace.seed)\n"
        "  --preset NAME        generator preset (trace.preset)\n"
        "  --trace FILE         HDF5 selection trace instead of the generator (trace.path)\n"
        "  --json FILE          the figures as JSON ('-' for stdout)\n"
        "  --wall               include wall-clock figures in the JSON (not deterministic)\n"
        "  --timeline PREFIX    per-step timelines: PREFIX.tsv and PREFIX.h5\n"
        "  --search-latency MS  largest concurrency whose per-token latency meets MS\n"
        "  --search-stat S      p50, p90 (default), p99 or mean for --search-latency\n"
        "  --threads N          policies simulated in parallel (default 2; results do not depend on it)\n"
        "  --quiet              no table\n");
}

typedef struct {
    const char *config;
    char *sets[MAX_SETS];
    int n_sets;
    pol_kind policies[POL_N];
    int n_pol;
    int threads;
} run_spec;

typedef struct {
    const run_spec *spec;
    sim_result *res;
    int *rc;
    char (*err)[512];
    int next, n;
    pthread_mutex_t mu;
} pool;

static int run_one(const run_spec *spec, pol_kind p, sim_result *res)
{
    sim_config sc;
    if (sim_config_load(spec->config, spec->sets, spec->n_sets, &sc) < 0) { sim_config_release(&sc); return -1; }
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) { sim_config_release(&sc); return -1; }
    int rc = sim_run(&sc, p, src, res);
    sel_source_free(src);
    sim_config_release(&sc);
    return rc;
}

static void *worker(void *arg)
{
    pool *pl = arg;
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        int i = pl->next++;
        pthread_mutex_unlock(&pl->mu);
        if (i >= pl->n) return NULL;
        pl->rc[i] = run_one(pl->spec, pl->spec->policies[i], &pl->res[i]);
        if (pl->rc[i] < 0) snprintf(pl->err[i], sizeof pl->err[i], "%s", dh_errmsg());
    }
}

/* Run every policy of spec; results in policy order whatever the thread count. */
static int run_all(const run_spec *spec, sim_result *res)
{
    pool pl;
    memset(&pl, 0, sizeof pl);
    pl.spec = spec;
    pl.res = res;
    pl.n = spec->n_pol;
    pl.rc = calloc(pl.n, sizeof *pl.rc);
    pl.err = calloc(pl.n, sizeof *pl.err);
    if (!pl.rc || !pl.err) abort();
    pthread_mutex_init(&pl.mu, NULL);
    int nt = spec->threads < pl.n ? spec->threads : pl.n;
    pthread_t th[POL_N];
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, worker, &pl) != 0) { nt = i; break; }
    if (nt == 0) worker(&pl);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&pl.mu);
    int rc = 0;
    for (int i = 0; i < pl.n; i++)
        if (pl.rc[i] < 0) { dh_err("%s", pl.err[i]); rc = -1; break; }
    free(pl.rc);
    free(pl.err);
    return rc;
}

static double stat_of(const sim_result *r, const char *s)
{
    if (!strcmp(s, "p50")) return r->tpot_p50;
    if (!strcmp(s, "p99")) return r->tpot_p99;
    if (!strcmp(s, "mean")) return r->tpot_mean;
    return r->tpot_p90;
}

/* Largest per-GPU concurrency whose TPOT statistic meets bound (bisection;
 * assumes latency does not fall as concurrency rises). */
static int search(run_spec *spec, pol_kind p, double bound_s, const char *stat, double dp, uint32_t *best, sim_result *best_res)
{
    run_spec one = *spec;
    one.n_pol = 1;
    one.policies[0] = p;
    one.threads = 1;
    char buf[64];
    one.sets[one.n_sets] = buf;
    one.n_sets++;
    uint32_t lo = 0, hi = 1;
    sim_result r;
    *best = 0;
    memset(best_res, 0, sizeof *best_res);
    for (;;) {
        snprintf(buf, sizeof buf, "workload.concurrency=%.0f", hi * dp);
        if (run_all(&one, &r) < 0) return -1;
        int ok = stat_of(&r, stat) <= bound_s;
        int saturated = r.mean_active < 0.98 * hi; /* admission stopped growing the batch */
        if (ok) { lo = hi; *best = hi; sim_result_release(best_res); *best_res = r; } else sim_result_release(&r);
        if (!ok || saturated || hi >= 65536) break;
        hi *= 2;
    }
    if (lo == hi) return 0;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        snprintf(buf, sizeof buf, "workload.concurrency=%.0f", mid * dp);
        if (run_all(&one, &r) < 0) return -1;
        if (stat_of(&r, stat) <= bound_s) { lo = mid; *best = mid; sim_result_release(best_res); *best_res = r; }
        else { hi = mid; sim_result_release(&r); }
    }
    return 0;
}

static void add_set(run_spec *s, const char *fmt, const char *val)
{
    if (s->n_sets >= MAX_SETS - 2) dh_die("dhsim", "too many --set options");
    size_t n = strlen(fmt) + strlen(val) + 1;
    char *a = malloc(n);
    if (!a) abort();
    snprintf(a, n, fmt, val);
    s->sets[s->n_sets++] = a;
}

int main(int argc, char **argv)
{
    run_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = DEFAULT_INSTANCE;
    spec.threads = 2;
    const char *json = NULL, *timeline = NULL, *policy_list = NULL, *search_stat = "p90";
    int compare = 0, quiet = 0, wall = 0;
    double search_ms = 0;
    enum { O_SET = 256, O_STEPS, O_CONC, O_SEED, O_PRESET, O_TRACE, O_JSON, O_WALL, O_TL, O_SEARCH, O_STAT, O_THREADS, O_QUIET };
    static const struct option opts[] = {
        { "config", required_argument, 0, 'c' }, { "policy", required_argument, 0, 'p' },
        { "compare", no_argument, 0, 'C' }, { "set", required_argument, 0, O_SET },
        { "steps", required_argument, 0, O_STEPS }, { "concurrency", required_argument, 0, O_CONC },
        { "seed", required_argument, 0, O_SEED }, { "preset", required_argument, 0, O_PRESET },
        { "trace", required_argument, 0, O_TRACE }, { "json", required_argument, 0, O_JSON },
        { "wall", no_argument, 0, O_WALL }, { "timeline", required_argument, 0, O_TL },
        { "search-latency", required_argument, 0, O_SEARCH }, { "search-stat", required_argument, 0, O_STAT },
        { "threads", required_argument, 0, O_THREADS }, { "quiet", no_argument, 0, O_QUIET },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'c': spec.config = optarg; break;
        case 'p': policy_list = optarg; break;
        case 'C': compare = 1; break;
        case O_SET: add_set(&spec, "%s", optarg); break;
        case O_STEPS: add_set(&spec, "workload.steps=%s", optarg); break;
        case O_CONC: add_set(&spec, "workload.concurrency=%s", optarg); break;
        case O_SEED: add_set(&spec, "trace.seed=%s", optarg); break;
        case O_PRESET: add_set(&spec, "trace.preset=%s", optarg); add_set(&spec, "trace.path=%s", ""); break;
        case O_TRACE: add_set(&spec, "trace.path=%s", optarg); add_set(&spec, "trace.preset=%s", ""); break;
        case O_JSON: json = optarg; break;
        case O_WALL: wall = 1; break;
        case O_TL: timeline = optarg; break;
        case O_SEARCH:
            search_ms = strtod(optarg, &end);
            if (end == optarg || *end || !(search_ms > 0)) dh_die("dhsim", "--search-latency '%s': expected a positive number of milliseconds", optarg);
            break;
        case O_STAT:
            search_stat = optarg;
            if (strcmp(optarg, "p50") && strcmp(optarg, "p90") && strcmp(optarg, "p99") && strcmp(optarg, "mean"))
                dh_die("dhsim", "--search-stat '%s': expected p50, p90, p99 or mean", optarg);
            break;
        case O_THREADS: {
            long t = strtol(optarg, &end, 10);
            if (end == optarg || *end || t < 1 || t > 64) dh_die("dhsim", "--threads '%s': expected 1 to 64", optarg);
            spec.threads = (int)t;
            break;
        }
        case O_QUIET: quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default:
            if (optopt) dh_die("dhsim", "option '%s' needs a value or is unknown (see --help)", argv[optind - 1]);
            dh_die("dhsim", "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) dh_die("dhsim", "unexpected argument '%s' (see --help)", argv[optind]);
    if (compare && policy_list) dh_die("dhsim", "--compare and --policy exclude each other");
    if (compare) {
        for (int i = 0; i < POL_N; i++) spec.policies[i] = (pol_kind)i;
        spec.n_pol = POL_N;
    } else if (policy_list) {
        char *l = strdup(policy_list), *save, *tok;
        for (tok = strtok_r(l, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (spec.n_pol == POL_N) dh_die("dhsim", "--policy: at most %d policies", POL_N);
            if (pol_parse(tok, &spec.policies[spec.n_pol++]) < 0) dh_die_last("dhsim");
        }
        free(l);
    }
    /* Validate the configuration once before any run (and take the config's policy). */
    sim_config sc;
    if (sim_config_load(spec.config, spec.sets, spec.n_sets, &sc) < 0) dh_die_last("dhsim");
    if (spec.n_pol == 0) { spec.policies[0] = sc.policy; spec.n_pol = 1; }
    double dp = sc.attention_dp;
    sim_config_release(&sc);

    sim_result res[POL_N];
    memset(res, 0, sizeof res);
    if (search_ms > 0) {
        printf("largest concurrency with TPOT %s <= %g ms\n", search_stat, search_ms);
        printf("%-10s %12s %12s %16s %12s\n", "policy", "concurrency", "per GPU", "tokens/s/GPU", "TPOT (ms)");
        for (int i = 0; i < spec.n_pol; i++) {
            uint32_t best;
            if (search(&spec, spec.policies[i], search_ms / 1e3, search_stat, dp, &best, &res[i]) < 0) dh_die_last("dhsim");
            if (best == 0) snprintf(res[i].policy, sizeof res[i].policy, "%s", pol_name[spec.policies[i]]);
            printf("%-10s %12.0f %12u %16.1f %12.2f\n", pol_name[spec.policies[i]], best * dp, best, res[i].tok_s_gpu,
                   stat_of(&res[i], search_stat) * 1e3);
        }
    } else {
        if (run_all(&spec, res) < 0) dh_die_last("dhsim");
        if (!quiet && out_table(stdout, res, spec.n_pol) < 0) dh_die_last("dhsim");
    }
    if (json) {
        FILE *f = strcmp(json, "-") ? fopen(json, "w") : stdout;
        if (!f) dh_die("dhsim", "unable to write '%s'", json);
        if (out_json(f, res, spec.n_pol, wall) < 0) dh_die_last("dhsim");
        if (f != stdout && fclose(f) != 0) dh_die("dhsim", "write error on '%s'", json);
    }
    if (timeline) {
        char path[1024];
        snprintf(path, sizeof path, "%s.tsv", timeline);
        if (out_tsv(path, res, spec.n_pol) < 0) dh_die_last("dhsim");
        snprintf(path, sizeof path, "%s.h5", timeline);
        if (out_h5(path, res, spec.n_pol) < 0) dh_die_last("dhsim");
    }
    for (int i = 0; i < spec.n_pol; i++) sim_result_release(&res[i]);
    for (int i = 0; i < spec.n_sets; i++) free(spec.sets[i]);
    return 0;
}
