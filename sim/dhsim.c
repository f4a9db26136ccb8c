/* dhsim: the trace-driven simulator of hierarchical sparse KV residency on a
 * decode GPU (sim/sim.h). Usage: dhsim --help. */
#include "common/dh_err.h"
#include "common/ofile.h"
#include "common/path.h"
#include "sim/out.h"
#include "sim/sim.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_INSTANCE "models/instances/glm53-h200x8.ini"
#define MAX_SETS 256
#define MAX_COLS 16
#define PAPER_RESULTS "models/paper-results.ini"
#define HEADLINE_DOC "docs/HEADLINE.md"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: dhsim [options]\n"
        "  --config FILE        instance config (default " DEFAULT_INSTANCE ")\n"
        "  --policy LIST        comma-separated columns: resident, hisparse, adaptive, oracle; POLICY+MODE\n"
        "                       (e.g. adaptive+dflash2) runs it with speculative decoding; hisparse-spec is\n"
        "                       hisparse with speculation but no shared retrieval, draft ring or staging\n"
        "                       reuse (default: the config's policy)\n"
        "  --compare            the four policies plus adaptive with speculation (the config's [spec]\n"
        "                       mode, else dflash2 where the model has that draft, else dspark) and the paper's\n"
        "                       headline comparison\n"
        "  --spec MODE          none, dflash2 or dspark (spec.mode; draft models/drafts/MODEL-MODE.ini)\n"
        "  --draft FILE         draft config (spec.draft)\n"
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

/* One column of a report: a policy and the overrides that make its variant
 * (speculative mode, ablation switches). */
typedef struct {
    pol_kind pol;
    char label[32];
    char sets[4][64];
    int n_sets;
} column;

typedef struct {
    const char *config;
    char *sets[MAX_SETS];
    int n_sets;
    column cols[MAX_COLS];
    int n_pol;
    int threads;
} run_spec;

typedef struct {
    const run_spec *spec;
    sim_result *res;
    int *rc;
    char (*err)[512];
    int next, n;
    int order[MAX_COLS];   /* columns in the order they are started */
    pthread_mutex_t mu;
} pool;

static int run_one(const run_spec *spec, const column *col, sim_result *res)
{
    sim_config sc;
    char *sets[MAX_SETS + 4];
    int n = 0;
    for (int i = 0; i < spec->n_sets; i++) sets[n++] = spec->sets[i];
    for (int i = 0; i < col->n_sets; i++) sets[n++] = (char *)col->sets[i];
    if (sim_config_load(spec->config, sets, n, &sc) < 0) { sim_config_release(&sc); return -1; }
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) { sim_config_release(&sc); return -1; }
    int rc = sim_run(&sc, col->pol, src, res);
    if (rc == 0) {
        /* The column's name: its label, or the policy with its speculative mode. */
        if (col->label[0]) snprintf(res->policy, sizeof res->policy, "%s", col->label);
        else if (res->spec[0]) snprintf(res->policy, sizeof res->policy, "%s+%s", pol_name_of(col->pol), res->spec);
    }
    sel_source_free(src);
    sim_config_release(&sc);
    return rc;
}

static void *worker(void *arg)
{
    pool *pl = arg;
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        int j = pl->next++;
        pthread_mutex_unlock(&pl->mu);
        if (j >= pl->n) return NULL;
        int i = pl->order[j];
        pl->rc[i] = run_one(pl->spec, &pl->spec->cols[i], &pl->res[i]);
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
    /* Columns that replay streams in lockstep (adaptive, speculative) take
     * longest: start them first. Results stay in column order. */
    int no = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < pl.n; i++) {
            const column *c = &spec->cols[i];
            int slow = c->pol == POL_ADAPTIVE || (c->n_sets > 0 && strncmp(c->sets[0], "spec.mode=none", 14) != 0);
            if (slow == (pass == 0)) pl.order[no++] = i;
        }
    pthread_mutex_init(&pl.mu, NULL);
    int nt = spec->threads < pl.n ? spec->threads : pl.n;
    pthread_t th[MAX_COLS];
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
 * assumes latency does not fall as concurrency rises). A concurrency that
 * memory cannot admit does not meet any bound: its waiting requests never get
 * a token, so the search stops where admission stops growing the batch. */
static int search(run_spec *spec, const column *col, double bound_s, const char *stat, double dp, uint32_t *best, sim_result *best_res)
{
    run_spec one = *spec;
    one.n_pol = 1;
    one.cols[0] = *col;
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
        int saturated = r.mean_active < 0.98 * hi; /* admission stopped growing the batch */
        int ok = !saturated && stat_of(&r, stat) <= bound_s;
        if (ok) { lo = hi; *best = hi; sim_result_release(best_res); *best_res = r; } else sim_result_release(&r);
        if (!ok || hi >= 65536) break;
        hi *= 2;
    }
    if (lo == hi) return 0;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        snprintf(buf, sizeof buf, "workload.concurrency=%.0f", mid * dp);
        if (run_all(&one, &r) < 0) return -1;
        if (r.mean_active >= 0.98 * mid && stat_of(&r, stat) <= bound_s) { lo = mid; *best = mid; sim_result_release(best_res); *best_res = r; }
        else { hi = mid; sim_result_release(&r); }
    }
    return 0;
}

/* A column from a policy name (or hisparse-spec) and an optional mode. */
static int add_column(run_spec *s, const char *name, const char *mode)
{
    column *c = &s->cols[s->n_pol];
    memset(c, 0, sizeof *c);
    if (!strcmp(name, "hisparse-spec")) {
        /* HiSparse with speculation but without the mechanisms the paper adds. */
        c->pol = POL_HISPARSE;
        snprintf(c->label, sizeof c->label, "hisparse-spec");
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.shared_retrieval=false");
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.draft_ring=false");
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.staging_reuse=false");
    } else if (pol_parse(name, &c->pol) < 0) {
        return dh_err_prefix("--policy: ");
    }
    if (mode) {
        int m;
        if (specrun_parse_mode(mode, &m) < 0) return dh_err_prefix("--policy '%s+%s': ", name, mode);
        if (c->n_sets == 4) return dh_err("--policy '%s+%s': too many overrides", name, mode);
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=%s", mode);
    }
    s->n_pol++;
    return 0;
}

/* The ratio of two columns' tokens/s and its 95 % half-width, the two
 * intervals combined as if independent (first-order delta method). The
 * columns share the seed, so their errors are positively correlated and the
 * paired interval would be narrower: this one is conservative. */
static void headline_ratio(const sim_result *a, const sim_result *b, double *q, double *half)
{
    *q = b->tok_s_gpu > 0 ? a->tok_s_gpu / b->tok_s_gpu : 0;
    double ra = a->tok_s_gpu > 0 ? a->ci_tok_s.half / a->tok_s_gpu : 0, rb = b->tok_s_gpu > 0 ? b->ci_tok_s.half / b->tok_s_gpu : 0;
    *half = *q * sqrt(ra * ra + rb * rb);
}

/* The paper's headline: output tokens/s per decode GPU of HiSparse, Adaptive
 * and Adaptive + speculation, the ratios beside the paper's (PAPER_RESULTS). */
static int print_headline(FILE *f, const sim_result *r, int n)
{
    const sim_result *hs = NULL, *ad = NULL, *sp = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(r[i].policy, "hisparse")) hs = &r[i];
        else if (!strcmp(r[i].policy, "adaptive")) ad = &r[i];
        else if (!strcmp(r[i].policy, "adaptive+dflash2")) sp = &r[i];
    }
    /* The paper's headline is about DFlash2; other modes get the table only. */
    if (!hs || !ad || !sp) return 0;
    char path[4096];
    if (dh_path_find(PAPER_RESULTS, path, sizeof path) < 0) return -1;
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    double tok, vs_hs, vs_ad;
    const char *what;
    int rc = -1;
    if (cfg_get_string(c, "headline", "setting", &what, CFG_REQUIRED) < 0 ||
        cfg_get_double(c, "headline", "adaptive_dflash2_tok_s_per_gpu", &tok, CFG_REQUIRED, 0, 1e9) < 0 ||
        cfg_get_double(c, "headline", "ratio_vs_hisparse", &vs_hs, CFG_REQUIRED, 0, 1e3) < 0 ||
        cfg_get_double(c, "headline", "ratio_vs_adaptive_plain", &vs_ad, CFG_REQUIRED, 0, 1e3) < 0 ||
        cfg_check_unused_section(c, "headline") < 0)
        goto done;
    fprintf(f, "\nheadline (paper: %s; %s)\n", what, path);
    fprintf(f, "  this run: %s, concurrency %g (%u per GPU), %s\n", sp->model, sp->concurrency, sp->per_gpu, sp->source);
    fprintf(f, "  %-34s %20s %10s\n", "output tokens/s per decode GPU", "simulated (95 % CI)", "paper");
    const sim_result *rows[3] = { hs, ad, sp };
    for (int i = 0; i < 3; i++) {
        char b[64];
        snprintf(b, sizeof b, "%.1f \xc2\xb1%.1f", rows[i]->tok_s_gpu, rows[i]->ci_tok_s.half);
        if (i < 2) fprintf(f, "  %-34s %20s %10s\n", rows[i]->policy, b, "");
        else fprintf(f, "  %-34s %20s %10.0f\n", rows[i]->policy, b, tok);
    }
    double q[2], qh[2], paper[2] = { vs_hs, vs_ad };
    const char *qname[2] = { "ratio vs hisparse", "ratio vs adaptive (plain)" };
    for (int i = 0; i < 2; i++) {
        headline_ratio(sp, rows[i], &q[i], &qh[i]);
        char b[64];
        snprintf(b, sizeof b, "%.2fx \xc2\xb1%.2f", q[i], qh[i]);
        fprintf(f, "  %-34s %20s %9.2fx\n", qname[i], b, paper[i]);
    }
    /* One line on what the comparison says, and where the reasons are written. */
    double lo = sp->tok_s_gpu - sp->ci_tok_s.half, hi = sp->tok_s_gpu + sp->ci_tok_s.half;
    fprintf(f, "  agreement: the simulated %.0f tokens/s is %.0f %% %s the paper's %.0f, which lies %s its 95 %% interval;\n"
               "  the paper's ratios %.2fx and %.2fx are %s; why they differ: %s\n",
            sp->tok_s_gpu, 100 * fabs(sp->tok_s_gpu / tok - 1), sp->tok_s_gpu >= tok ? "above" : "below", tok,
            tok < lo || tok > hi ? "outside" : "inside", vs_hs, vs_ad,
            vs_hs < q[0] - qh[0] && vs_ad < q[1] - qh[1] ? "below the simulated ones (a larger speculative gain here)"
            : vs_hs > q[0] + qh[0] && vs_ad > q[1] + qh[1] ? "above the simulated ones" : "not both outside the simulated intervals",
            HEADLINE_DOC);
    rc = ferror(f) ? dh_err("write error on the report") : 0;
done:
    cfg_free(c);
    return rc;
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
    enum { O_SET = 256, O_STEPS, O_CONC, O_SEED, O_PRESET, O_TRACE, O_JSON, O_WALL, O_TL, O_SEARCH, O_STAT, O_THREADS, O_QUIET,
           O_SPEC, O_DRAFT };
    static const struct option opts[] = {
        { "config", required_argument, 0, 'c' }, { "policy", required_argument, 0, 'p' },
        { "compare", no_argument, 0, 'C' }, { "set", required_argument, 0, O_SET },
        { "steps", required_argument, 0, O_STEPS }, { "concurrency", required_argument, 0, O_CONC },
        { "seed", required_argument, 0, O_SEED }, { "preset", required_argument, 0, O_PRESET },
        { "trace", required_argument, 0, O_TRACE }, { "json", required_argument, 0, O_JSON },
        { "wall", no_argument, 0, O_WALL }, { "timeline", required_argument, 0, O_TL },
        { "search-latency", required_argument, 0, O_SEARCH }, { "search-stat", required_argument, 0, O_STAT },
        { "threads", required_argument, 0, O_THREADS }, { "quiet", no_argument, 0, O_QUIET },
        { "spec", required_argument, 0, O_SPEC }, { "draft", required_argument, 0, O_DRAFT },
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
            /* A bound is a TPOT target: above 1e6 ms (1000 s a token) it is no
             * target at all, and inf would make every concurrency meet it. */
            if (end == optarg || *end || !(search_ms > 0) || !(search_ms <= 1e6))
                dh_die("dhsim", "--search-latency '%s': expected milliseconds in (0, 1e6]", optarg);
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
        case O_SPEC: {
            int mode;
            if (specrun_parse_mode(optarg, &mode) < 0) dh_die("dhsim", "--spec '%s': expected none, dflash2 or dspark", optarg);
            add_set(&spec, "spec.mode=%s", optarg);
            break;
        }
        case O_DRAFT: add_set(&spec, "spec.draft=%s", optarg); break;
        case 'h': usage(stdout); return 0;
        default:
            if (optopt) dh_die("dhsim", "option '%s' needs a value or is unknown (see --help)", argv[optind - 1]);
            dh_die("dhsim", "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) dh_die("dhsim", "unexpected argument '%s' (see --help)", argv[optind]);
    if (compare && policy_list) dh_die("dhsim", "--compare and --policy exclude each other");
    /* Outputs are checked before the run, which can take minutes. */
    if (json && strcmp(json, "-") && ofile_check(json) < 0) dh_die_last("dhsim");
    if (timeline) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s.tsv", timeline) >= (int)sizeof p) dh_die("dhsim", "--timeline: path is too long");
        if (ofile_check(p) < 0) dh_die_last("dhsim");
    }
    /* Validate the configuration once before any run (and take the config's policy and mode). */
    sim_config sc;
    if (sim_config_load(spec.config, spec.sets, spec.n_sets, &sc) < 0) dh_die_last("dhsim");
    double dp = sc.attention_dp;
    const char *cfg_mode = sc.spec.mode ? spec_kind_name((spec_kind)sc.spec.mode) : NULL;
    char spec_mode[16];
    snprintf(spec_mode, sizeof spec_mode, "%s", cfg_mode ? cfg_mode : "dflash2");
    if (!cfg_mode) {
        /* No configured mode: DFlash2 where the model has a DFlash2 draft, else DSpark. */
        char p1[600], p2[4096];
        snprintf(p1, sizeof p1, "models/drafts/%s-dflash2.ini", sc.model.name);
        if (dh_path_find(p1, p2, sizeof p2) < 0) dh_die_last("dhsim");
        if (access(p2, R_OK) != 0) snprintf(spec_mode, sizeof spec_mode, "dspark");
    }
    int headline = 0;
    if (compare) {
        for (int i = 0; i < POL_N; i++) {
            column *c = &spec.cols[spec.n_pol++];
            c->pol = (pol_kind)i;
            snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=none");
        }
        if (add_column(&spec, "adaptive", spec_mode) < 0) dh_die_last("dhsim");
        headline = 1;
    } else if (policy_list) {
        char *l = strdup(policy_list), *save, *tok;
        for (tok = strtok_r(l, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (spec.n_pol == MAX_COLS) dh_die("dhsim", "--policy: at most %d columns", MAX_COLS);
            char *plus = strchr(tok, '+');
            if (plus) *plus++ = 0;
            if (add_column(&spec, tok, plus ? plus : NULL) < 0) dh_die_last("dhsim");
            if (!strcmp(tok, "hisparse-spec") && !cfg_mode && !plus) {
                /* Speculation needs a draft: the default mode's when none is configured. */
                column *c = &spec.cols[spec.n_pol - 1];
                if (c->n_sets == 4) dh_die("dhsim", "--policy '%s': too many overrides", tok);
                snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=%s", spec_mode);
            }
        }
        free(l);
    }
    if (spec.n_pol == 0) { spec.cols[0].pol = sc.policy; spec.n_pol = 1; }
    /* Every column's configuration is checked before anything runs. */
    for (int i = 0; i < spec.n_pol; i++) {
        sim_config c2;
        char *sets[MAX_SETS + 4];
        int n = 0;
        for (int j = 0; j < spec.n_sets; j++) sets[n++] = spec.sets[j];
        for (int j = 0; j < spec.cols[i].n_sets; j++) sets[n++] = spec.cols[i].sets[j];
        if (sim_config_load(spec.config, sets, n, &c2) < 0) dh_die_last("dhsim");
        if (c2.spec.mode && pol_ops_of(spec.cols[i].pol)->no_spec)
            dh_die("dhsim", "policy %s does not run with speculative decoding (use --spec none or another policy)",
                   pol_name_of(spec.cols[i].pol));
        if (compare && c2.spec.mode) {
            /* The speculative column is measured over as many output tokens as
             * a plain column that admits every request: it stops once its
             * measured steps emitted (steps - warmup) x requests per GPU tokens
             * (steps stays the cap). Its warm-up is the plain one over
             * E[tokens per step] (the table's expectation at the prompt length
             * and the full gamma), about as many tokens. Cutting the steps
             * instead (steps / E) measured a shorter run whose cold start
             * weighed more, and fewer tokens when acceptance fell short of E. */
            const spec_draft *d = c2.spec.draft;
            double e = 1 + spec_expected_accepted(spec_table(d, c2.wl.prompt_len), d->gamma);
            column *c = &spec.cols[i];
            if (c->n_sets + 2 > 4) dh_die("dhsim", "internal: too many overrides for column %d", i);
            snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "workload.measure_tokens=%.0f",
                     (double)(c2.wl.steps - c2.wl.warmup_steps) * sim_per_gpu(&c2, c2.wl.concurrency));
            snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "workload.warmup_steps=%.0f", ceil(c2.wl.warmup_steps / e));
        }
        sim_config_release(&c2);
    }
    sim_config_release(&sc);

    sim_result res[MAX_COLS];
    memset(res, 0, sizeof res);
    if (search_ms > 0) {
        printf("largest concurrency with TPOT %s <= %g ms\n", search_stat, search_ms);
        printf("%-10s %12s %12s %16s %12s\n", "policy", "concurrency", "per GPU", "tokens/s/GPU", "TPOT (ms)");
        for (int i = 0; i < spec.n_pol; i++) {
            uint32_t best;
            if (search(&spec, &spec.cols[i], search_ms / 1e3, search_stat, dp, &best, &res[i]) < 0) dh_die_last("dhsim");
            const char *name = spec.cols[i].label[0] ? spec.cols[i].label : pol_name_of(spec.cols[i].pol);
            if (best == 0) snprintf(res[i].policy, sizeof res[i].policy, "%s", name);
            printf("%-10s %12.0f %12u %16.1f %12.2f\n", res[i].policy, best * dp, best, res[i].tok_s_gpu,
                   stat_of(&res[i], search_stat) * 1e3);
        }
    } else {
        if (run_all(&spec, res) < 0) dh_die_last("dhsim");
        if (!quiet && out_table(stdout, res, spec.n_pol) < 0) dh_die_last("dhsim");
        if (!quiet && headline && print_headline(stdout, res, spec.n_pol) < 0) dh_die_last("dhsim");
    }
    /* Every output goes to a temporary name first; all are renamed into place
     * only when all are complete (common/ofile.h). */
    ofile js = { 0 };
    char *tl_tmp[2] = { NULL, NULL }, tl_path[2][4096];
    int orc = 0;
    if (json && !strcmp(json, "-")) orc = out_json(stdout, res, spec.n_pol, wall);
    else if (json) {
        orc = ofile_open(&js, json);
        if (orc == 0 && out_json(js.f, res, spec.n_pol, wall) < 0) orc = dh_err("write error on '%s'", json);
    }
    if (orc == 0 && timeline) {
        snprintf(tl_path[0], sizeof tl_path[0], "%s.tsv", timeline);
        snprintf(tl_path[1], sizeof tl_path[1], "%s.h5", timeline);
        orc = ofile_begin(tl_path[0], &tl_tmp[0]) < 0 || ofile_begin(tl_path[1], &tl_tmp[1]) < 0 ||
                      out_tsv(tl_tmp[0], res, spec.n_pol) < 0 || out_h5(tl_tmp[1], res, spec.n_pol) < 0
                  ? -1 : 0;
    }
    if (orc == 0 && js.f) orc = ofile_close(&js);
    for (int i = 0; i < 2 && orc == 0 && tl_tmp[i]; i++) {
        orc = ofile_commit(tl_tmp[i], tl_path[i]);
        tl_tmp[i] = NULL;
    }
    if (orc < 0) {
        ofile_discard(&js);
        for (int i = 0; i < 2; i++) ofile_abort(tl_tmp[i]);
        dh_die_last("dhsim");
    }
    for (int i = 0; i < spec.n_pol; i++) sim_result_release(&res[i]);
    for (int i = 0; i < spec.n_sets; i++) free(spec.sets[i]);
    return 0;
}
