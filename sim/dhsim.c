/* dhsim: the trace-driven simulator of hierarchical sparse KV residency on a
 * decode GPU (sim/sim.h). Usage: dhsim --help. */
#include "common/cores.h"
#include "common/dh_err.h"
#include "common/h5attr.h"
#include "common/h5det.h"
#include "common/ofile.h"
#include "common/path.h"
#include "common/version.h"
#include "sim/out.h"
#include "sim/paper.h"
#include "sim/prov.h"
#include "sim/reqlat.h"
#include "sim/search.h"
#include "sim/sim.h"

#include <getopt.h>
#include <hdf5.h>
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
        "  --policy LIST        comma-separated columns: resident, hisparse (ideal-lru: an idealised LRU, the\n"
        "                       fetch overlapped), adaptive, oracle, sglang-hisparse, sglang-dynamic,\n"
        "                       sglang-watermark (SGLang's HiSparse as shipped, sim/pol.h); POLICY+MODE\n"
        "                       (e.g. adaptive+dflash2) runs it with speculative decoding; hisparse-spec is\n"
        "                       hisparse with speculation but no shared retrieval, draft ring or staging\n"
        "                       reuse (default: the config's policy)\n"
        "  --compare            every built-in policy plus adaptive with speculation (the config's [spec]\n"
        "                       mode, else dflash2 where the model has that draft, else dspark) and the paper's\n"
        "                       headline comparison\n"
        "  --spec MODE          none, dflash2, dspark or mtp (spec.mode; draft models/drafts/MODEL-MODE.ini)\n"
        "  --draft FILE         draft config (spec.draft)\n"
        "  --set SEC.KEY=VAL    override a config value (repeatable)\n"
        "  --steps N            decode steps (workload.steps)\n"
        "  --concurrency C      requests in flight on the instance (workload.concurrency)\n"
        "  --seed S             trace and workload seed (trace.seed)\n"
        "  --preset NAME        generator preset (trace.preset)\n"
        "  --trace FILE         HDF5 selection trace instead of the generator (trace.path)\n"
        "  --json FILE          the figures as JSON ('-' for stdout), each run with its inputs (its configuration\n"
        "                       after the overrides, the defaults it took, its digest) and the commit (docs/OUTPUTS.md)\n"
        "  --wall               include wall-clock figures in the JSON (not deterministic)\n"
        "  --timeline PREFIX    per-step timelines: PREFIX.tsv (long form: one header, a row per policy and step)\n"
        "                       and PREFIX.h5 (units and inputs as attributes; also the per-request records\n"
        "                       under /requests/POLICY/), and the per-request latency CDFs: PREFIX.latency.tsv\n"
        "  --search-latency MS  largest concurrency whose latency statistic meets MS in steady state (warm-up\n"
        "                       cut by MSER-5, finished requests replaced); says why it stopped (latency,\n"
        "                       memory, max) and the statistic one concurrency above (sim/search.h)\n"
        "  --latency-stat S     the statistic: [METRIC_]p50|p90|p99|mean, METRIC token (default: the\n"
        "                       per-token latency of a step, the table's TPOT rows), tpot, ttft, e2e or\n"
        "                       queue (per request, sim/reqlat.h); default p90 (token_p90)\n"
        "  --search-stat S      the same as --latency-stat\n"
        "  --search-max N       upper limit of the search, requests per GPU (default 65536)\n"
        "  --requests FILE      per-request latencies as CSV (arrival, admission, first token, finish,\n"
        "                       queue, TTFT, TPOT, end-to-end, colocated prefill: sim/reqlat.h)\n"
        "  --threads N          policies simulated in parallel (default 2; results do not depend on it)\n"
        "  --quiet              no table\n"
        "  --memory             print the memory plan per GPU (weights by part, framework, KV pool) and exit\n"
        "  --version            print the commit this build was made from and exit\n");
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
    /* Longest first, so that no long column starts last: the speculative ones (verification
     * through live buffers), adaptive (live buffers whose budget moves every step), SGLang's
     * hot buffer (its queue's sorts, and live while resident), then the rest (computed
     * ahead or counted). Results stay in column order. */
    int no = 0;
    for (int cls = 3; cls >= 0; cls--)
        for (int i = 0; i < pl.n; i++) {
            const column *c = &spec->cols[i];
            const int spec_col = c->n_sets > 0 && strncmp(c->sets[0], "spec.mode=none", 14) != 0;
            const int sgl = c->pol == POL_SGLANG_HISPARSE || c->pol == POL_SGLANG_DYNAMIC || c->pol == POL_SGLANG_WATERMARK;
            const int k = spec_col ? 3 : c->pol == POL_ADAPTIVE ? 2 : sgl ? 1 : 0;
            if (k == cls) pl.order[no++] = i;
        }
    pthread_mutex_init(&pl.mu, NULL);
    cores_run_pool(spec->threads, (size_t)pl.n, worker, &pl);
    pthread_mutex_destroy(&pl.mu);
    int rc = 0;
    for (int i = 0; i < pl.n; i++)
        if (pl.rc[i] < 0) { dh_err("%s", pl.err[i]); rc = -1; break; }
    free(pl.rc);
    free(pl.err);
    return rc;
}

/* The search's runs: one column at a per-GPU concurrency, on one thread. */
typedef struct {
    run_spec one;
    char conc[64];
    double dp;
    const char *name;
    search_stat stat;
} search_ctx;

static int search_run_at(void *ctx, uint32_t per_gpu, sim_result *res)
{
    search_ctx *x = ctx;
    snprintf(x->conc, sizeof x->conc, "workload.concurrency=%.0f", per_gpu * x->dp);
    return run_all(&x->one, res);
}

static void ms_or_dash(char *b, size_t cap, double v) { if (v >= 0) snprintf(b, cap, "%.2f", v * 1e3); else snprintf(b, cap, "-"); }

static void ci_text(char *b, size_t cap, const search_eval *e)
{
    if (e->lo >= 0) snprintf(b, cap, "[%.2f,%.2f]", e->lo * 1e3, e->hi * 1e3);
    else snprintf(b, cap, "-");
}

/* One line per run on stderr: a search takes minutes. */
static void search_progress(void *ctx, const search_eval *e)
{
    search_ctx *x = ctx;
    char nm[32], v[32], ci[64];
    ms_or_dash(v, sizeof v, e->value);
    ci_text(ci, sizeof ci, e);
    fprintf(stderr, "search: %s per GPU %u (concurrency %.0f): %s %s ms %s over %u measured steps (warm-up %u): %s",
            x->name, e->per_gpu, e->per_gpu * x->dp, search_stat_name(x->stat, nm, sizeof nm), v, ci, e->measured,
            e->warmup, e->ok ? "meets" : e->memory_short ? "memory-bound" : "exceeds");
    if (e->memory_short) fprintf(stderr, " (%u of %u measured steps below %u requests)", e->short_steps, e->measured, e->per_gpu);
    fprintf(stderr, "\n");
}

/* The largest per-GPU concurrency of column col meeting bound_s (search.h);
 * one table row on stdout, the answer's result in *res. */
static int search_column(const run_spec *spec, const column *col, const search_cfg *base, double dp, sim_result *res,
                         uint32_t *min_steps)
{
    search_ctx x;
    memset(&x, 0, sizeof x);
    x.one = *spec;
    x.one.n_pol = 1;
    x.one.cols[0] = *col;
    x.one.threads = 1;
    x.one.sets[x.one.n_sets++] = x.conc;
    x.dp = dp;
    /* The column's name as run_one gives it: its label, or the policy with its mode. */
    char name[64];
    snprintf(name, sizeof name, "%s", col->label[0] ? col->label : pol_name_of(col->pol));
    for (int i = 0; i < col->n_sets && !col->label[0]; i++)
        if (!strncmp(col->sets[i], "spec.mode=", 10) && strcmp(col->sets[i] + 10, "none") != 0)
            snprintf(name, sizeof name, "%s+%s", pol_name_of(col->pol), col->sets[i] + 10);
    x.name = name;
    x.stat = base->stat;
    search_cfg cfg = *base;
    cfg.run = search_run_at;
    cfg.progress = search_progress;
    cfg.ctx = &x;
    search_out o;
    if (search_run(&cfg, &o) < 0) return -1;
    *res = o.res;
    memset(&o.res, 0, sizeof o.res);
    if (o.best == 0) snprintf(res->policy, sizeof res->policy, "%s", x.name);
    char v[32], ci[64], cv[32];
    ms_or_dash(v, sizeof v, o.best ? o.at.value : -1);
    ci_text(ci, sizeof ci, &o.at);
    if (!o.best) snprintf(ci, sizeof ci, "-");
    if (o.stop == SEARCH_STOP_MAX) snprintf(cv, sizeof cv, "-");
    else if (o.above.memory_short) snprintf(cv, sizeof cv, "memory");
    else ms_or_dash(cv, sizeof cv, o.above.value);
    char cg[16];
    if (o.stop == SEARCH_STOP_MAX) snprintf(cg, sizeof cg, "-");
    else snprintf(cg, sizeof cg, "%u", o.best + 1);
    printf("%-18s %11.0f %7u %12.1f %9s %17s %8s %7s %9s %7u %8u %4u\n", res->policy, o.best * dp, o.best, res->tok_s_gpu, v,
           ci, search_stop_name[o.stop], cg, cv, o.best ? o.at.warmup : 0, o.best ? o.at.measured : 0, o.runs);
    if (o.noisy)
        printf("note: %s: the bound lies inside the statistic's 95%% CI at per GPU %u or %u: another run length or seed "
               "may move the answer by one\n", res->policy, o.best, o.best + 1);
    if (2 * o.max_warmup > *min_steps) *min_steps = 2 * o.max_warmup;
    sim_result_release(&o.res_above);
    return 0;
}

/* Per-request latencies under the table: for each column, the requests that
 * arrived after the warm-up, their TTFT, TPOT and end-to-end quantiles with
 * 95% CIs (sim/reqlat.h says what each includes). */
static int print_reqlat(FILE *f, const sim_result *r, int n)
{
    int colocated = 0;
    for (int i = 0; i < n; i++)
        for (uint32_t q = 0; q < r[i].n_req && !colocated; q++) colocated = r[i].req[q].prefill >= 0;
    fprintf(f, "\nper-request latency (ms) of the requests that arrived after the warm-up and got that far (N of arrived;\n"
               "%s; TPOT = (e2e - TTFT) / (tokens - 1)):\n"
               "p50, p90, p99 [95%% CI]\n",
            colocated ? "TTFT = admission wait + colocated prefill + first decode step"
                      : "TTFT = admission wait + first decode step, prefill not modelled");
    static const int show[3] = { RL_TTFT, RL_TPOT, RL_E2E };
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 3; j++) {
            double *v;
            uint32_t k = reqlat_samples(r[i].req, r[i].n_req, show[j], r[i].measured_from_s, &v), arrived = 0;
            for (uint32_t q = 0; q < r[i].n_req; q++) arrived += r[i].req[q].arrival >= r[i].measured_from_s;
            /* Requests still waiting (TTFT) or decoding (TPOT, e2e) at the end have no value yet: the
             * quantiles over the others understate the latency when many are missing. */
            fprintf(f, "  %-18s %-5s %5u of %5u", r[i].policy, reqlat_metric_name[show[j]], k, arrived);
            static const double qs[3] = { 0.5, 0.9, 0.99 };
            for (int q = 0; q < 3 && k; q++) {
                reqlat_q o = reqlat_quantile(v, k, qs[q]);
                fprintf(f, "  %9.2f", o.v * 1e3);
                if (o.lo >= 0) fprintf(f, " [%.2f, %.2f]", o.lo * 1e3, o.hi * 1e3);
                else fprintf(f, " [-]");
            }
            if (!k) fprintf(f, "  (no sample in the run)");
            fprintf(f, "\n");
            free(v);
        }
    return ferror(f) ? dh_err("write error on the report") : 0;
}

/* The per-request records beside the timeline in its HDF5 file (written by
 * out_h5 to tmp): /requests/<policy>/<column>, one value per arrived request,
 * NaN where a figure is not defined (sim/reqlat.h), and the measured flag. */
static int requests_h5(const char *tmp, const sim_result *r, int n)
{
    hid_t gcpl = h5_untimed(H5P_GROUP_CREATE), dcpl = h5_untimed(H5P_DATASET_CREATE);
    hid_t file = gcpl < 0 || dcpl < 0 ? -1 : H5Fopen(tmp, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t top = file < 0 ? -1 : H5Gcreate2(file, "requests", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    int rc = top < 0 ? dh_err("'%s': unable to create group /requests", tmp) : 0;
    static const char *const col[] = { "request", "prompt_tokens", "output_tokens", "measured", "arrival_s", "admit_s",
                                       "first_token_s", "finish_s", "queue_s", "ttft_s", "tpot_s", "e2e_s",
                                       "prefill_done_s", "prefill_s" };
    enum { NC = sizeof col / sizeof col[0] };
    static const char *const unit[NC] = { "", "tokens", "tokens", "", "s", "s", "s", "s", "s", "s", "s/token", "s",
                                          "s", "s" };
    static const char *const doc[NC] = {
        "request index in the workload", "prompt length", "output length",
        "1: arrived after the warm-up (in the measured latencies), 0: before", "simulated arrival time",
        "admission time (NaN: never admitted)", "time of the first output token (NaN: none yet)",
        "time of the last output token (NaN: unfinished)", "admission wait",
        "time to first token (colocated prefill: the prompt's last chunk, then the first decode step; disaggregated: prefill not modelled)",
        "time per output token after the first", "end-to-end latency",
        "end of the prompt's last prefill chunk (NaN: disaggregated, or not yet)",
        "admission to the prompt's last prefill chunk (NaN: disaggregated, or not yet)",
    };
    for (int i = 0; rc == 0 && i < n; i++) {
        hid_t g = H5Gcreate2(top, r[i].policy, H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (g < 0) { rc = dh_err("'%s': unable to create group /requests/%s", tmp, r[i].policy); break; }
        uint32_t k = 0;
        for (uint32_t j = 0; j < r[i].n_req; j++) k += r[i].req[j].arrival >= 0;
        double *v = malloc((k ? k : 1) * sizeof *v);
        if (!v) abort();
        for (int c = 0; rc == 0 && c < NC; c++) {
            uint32_t m = 0;
            for (uint32_t j = 0; j < r[i].n_req; j++) {
                const reqlat_rec *x = &r[i].req[j];
                if (x->arrival < 0) continue;
                double t[NC] = { j, x->prompt, x->output, x->arrival >= r[i].measured_from_s, x->arrival, x->admit, x->first,
                                 x->finish, reqlat_value(x, RL_QUEUE), reqlat_value(x, RL_TTFT), reqlat_value(x, RL_TPOT),
                                 reqlat_value(x, RL_E2E), x->prefill, reqlat_prefill_s(x) };
                v[m++] = c >= 4 && t[c] < 0 ? NAN : t[c];
            }
            hsize_t dims[1] = { k };
            hid_t sp = H5Screate_simple(1, dims, NULL);
            hid_t ds = sp < 0 ? -1 : H5Dcreate2(g, col[c], H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            herr_t w = ds < 0 ? -1 : (k ? H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) : 0);
            if (w >= 0 && (h5_attr_str(ds, "unit", unit[c]) < 0 || h5_attr_str(ds, "description", doc[c]) < 0)) w = -1;
            if (ds >= 0) H5Dclose(ds);
            if (sp >= 0) H5Sclose(sp);
            if (w < 0) rc = dh_err("'%s': unable to write dataset /requests/%s/%s", tmp, r[i].policy, col[c]);
        }
        free(v);
        if (H5Gclose(g) < 0 && rc == 0) rc = dh_err("'%s': HDF5 close failed", tmp);
    }
    if (top >= 0 && H5Gclose(top) < 0 && rc == 0) rc = dh_err("'%s': HDF5 close failed", tmp);
    if (file >= 0 && H5Fclose(file) < 0 && rc == 0) rc = dh_err("'%s': HDF5 close failed", tmp);
    if (file < 0 && rc == 0) rc = dh_err("unable to open HDF5 file '%s'", tmp);
    if (gcpl >= 0) H5Pclose(gcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
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
    const sim_result *hs = NULL, *ad = NULL, *sp = NULL, *dy = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(r[i].policy, "sglang-dynamic")) dy = &r[i];
        else if (!strcmp(r[i].policy, "hisparse")) hs = &r[i];
        else if (!strcmp(r[i].policy, "adaptive")) ad = &r[i];
        else if (!strcmp(r[i].policy, "adaptive+dflash2")) sp = &r[i];
    }
    /* The paper's headline is about DFlash2; other modes get the table only. */
    if (!hs || !ad || !sp) return 0;
    char path[4096];
    if (dh_path_find(PAPER_RESULTS, path, sizeof path) < 0) return -1;
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    int rc = -1;
    paper_headline ph;
    if (paper_load(c, &ph) < 0) goto done;
    const double tok = ph.tok_s_per_gpu, vs_hs = ph.ratio_vs_hisparse, vs_ad = ph.ratio_vs_adaptive_plain;
    const char *what = ph.setting;
    fprintf(f, "\nheadline (paper: %s; %s)\n", what, path);
    fprintf(f, "  this run: %s, concurrency %g (%u per GPU), %s\n", sp->model, sp->concurrency, sp->per_gpu, sp->source);
    fprintf(f, "  %-34s %20s %10s\n", "output tokens/s per decode GPU", "simulated (95 % CI)", "paper");
    const sim_result *rows[4] = { hs, ad, dy, sp };
    for (int i = 0; i < 4; i++) {
        if (!rows[i]) continue;
        char b[64];
        snprintf(b, sizeof b, "%.1f \xc2\xb1%.1f", rows[i]->tok_s_gpu, rows[i]->ci_tok_s.half);
        const char *label = rows[i] == dy ? "sglang-dynamic (as shipped)" : rows[i]->policy;
        if (i < 3) fprintf(f, "  %-34s %20s %10s\n", label, b, "");
        else fprintf(f, "  %-34s %20s %10.0f\n", label, b, tok);
    }
    double q[2], qh[2], paper[2] = { vs_hs, vs_ad };
    const char *qname[2] = { "ratio vs hisparse", "ratio vs adaptive (plain)" };
    for (int i = 0; i < 2; i++) {
        headline_ratio(sp, rows[i], &q[i], &qh[i]);
        char b[64];
        snprintf(b, sizeof b, "%.2fx \xc2\xb1%.2f", q[i], qh[i]);
        fprintf(f, "  %-34s %20s %9.2fx\n", qname[i], b, paper[i]);
    }
    if (dy && dy->tok_s_gpu > 0) {
        /* The shipped baseline: the speculative column and plain Adaptive against it. */
        const sim_result *num[2] = { sp, ad };
        const char *dname[2] = { "ratio vs sglang-dynamic", "adaptive (plain) vs sglang-dynamic" };
        for (int i = 0; i < 2; i++) {
            double r, rh;
            headline_ratio(num[i], dy, &r, &rh);
            char b[64];
            snprintf(b, sizeof b, "%.2fx \xc2\xb1%.2f", r, rh);
            fprintf(f, "  %-34s %20s %10s\n", dname[i], b, "-");
        }
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

/* What the reports record they were made from (sim/out.h): each column's
 * configuration as it ran (the command line's overrides, then the column's
 * own) and the command line's alone. They are loaded again here as run_one
 * loaded them, which takes milliseconds beside a run. */
typedef struct {
    sim_config sc[MAX_COLS + 1]; /* the columns', then the command line's */
    int n_sc;
    char pol_set[MAX_COLS][64];  /* policy.name=POLICY: the policy the column ran */
    char *col_sets[MAX_COLS][5];
    out_run_inputs run[MAX_COLS];
    out_inputs in;
} run_inputs;

/* A column's configuration names the policy it ran ([policy] name, which --policy
 * overrides without a config key), so that the recorded files run it again. */
static int load_run_inputs(const run_spec *spec, const column *col, const char *label, sim_config *sc, out_run_inputs *ri,
                           char **col_sets, char *pol_set)
{
    char *sets[MAX_SETS + 5];
    int n = 0, nc = 0;
    for (int i = 0; i < spec->n_sets; i++) sets[n++] = spec->sets[i];
    if (col) {
        snprintf(pol_set, 64, "policy.name=%s", pol_name_of(col->pol));
        sets[n++] = col_sets[nc++] = pol_set;
        for (int i = 0; i < col->n_sets; i++) sets[n++] = col_sets[nc++] = (char *)col->sets[i];
    }
    if (sim_config_load(spec->config, sets, n, sc) < 0) return -1;
    memset(ri, 0, sizeof *ri);
    prov_files(sc, ri->files);
    prov_digest(sc, NULL, 0, label, ri->digest);
    ri->sets = col_sets;
    ri->n_sets = nc;
    ri->seed = sc->seed;
    ri->steps = sc->wl.steps;
    return 0;
}

static void inputs_free(run_inputs *x)
{
    if (!x) return;
    for (int i = 0; i < x->n_sc; i++) sim_config_release(&x->sc[i]);
    free(x);
}

static run_inputs *inputs_load(const run_spec *spec, const sim_result *res, const out_opt *opts, int n_opts)
{
    run_inputs *x = calloc(1, sizeof *x);
    if (!x) abort();
    for (int i = 0; i < spec->n_pol; i++) {
        if (load_run_inputs(spec, &spec->cols[i], res[i].policy, &x->sc[x->n_sc++], &x->run[i], x->col_sets[i], x->pol_set[i]) < 0) {
            inputs_free(x);
            return NULL;
        }
    }
    /* The command line's configuration: its digest's label is its [policy] name. */
    sim_config *b = &x->sc[x->n_sc++];
    if (load_run_inputs(spec, NULL, "", b, &x->in.base, NULL, NULL) < 0) {
        inputs_free(x);
        return NULL;
    }
    prov_digest(b, NULL, 0, pol_name_of(b->policy), x->in.base.digest);
    x->in.tool = "dhsim";
    x->in.commit = dh_commit();
    x->in.config = spec->config;
    x->in.sets = spec->sets;
    x->in.n_sets = spec->n_sets;
    x->in.opts = opts;
    x->in.n_opts = n_opts;
    x->in.run = x->run;
    return x;
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

/* What the command line asks for beyond the run specification: the outputs and
 * the search. */
typedef struct {
    const char *json, *timeline, *policy_list, *requests;
    search_stat sstat;
    long search_max;
    int compare, quiet, wall, memory;
    double search_ms;
} cli_opts;

/* Parses the command line into spec and cli; returns 1 after --help or
 * --version (the caller exits 0), else 0. Bad options die with one line. */
static int parse_args(int argc, char **argv, run_spec *spec, cli_opts *cli)
{
    enum { O_SET = 256, O_STEPS, O_CONC, O_SEED, O_PRESET, O_TRACE, O_JSON, O_WALL, O_TL, O_SEARCH, O_STAT, O_THREADS, O_QUIET, O_MEMORY,
           O_SPEC, O_DRAFT, O_LSTAT, O_SMAX, O_REQ, O_VERSION };
    static const struct option opts[] = {
        { "config", required_argument, 0, 'c' }, { "policy", required_argument, 0, 'p' },
        { "compare", no_argument, 0, 'C' }, { "set", required_argument, 0, O_SET },
        { "steps", required_argument, 0, O_STEPS }, { "concurrency", required_argument, 0, O_CONC },
        { "seed", required_argument, 0, O_SEED }, { "preset", required_argument, 0, O_PRESET },
        { "trace", required_argument, 0, O_TRACE }, { "json", required_argument, 0, O_JSON },
        { "wall", no_argument, 0, O_WALL }, { "timeline", required_argument, 0, O_TL },
        { "search-latency", required_argument, 0, O_SEARCH }, { "search-stat", required_argument, 0, O_STAT },
        { "threads", required_argument, 0, O_THREADS }, { "quiet", no_argument, 0, O_QUIET },
        { "memory", no_argument, 0, O_MEMORY },
        { "spec", required_argument, 0, O_SPEC }, { "draft", required_argument, 0, O_DRAFT },
        { "latency-stat", required_argument, 0, O_LSTAT }, { "search-max", required_argument, 0, O_SMAX },
        { "requests", required_argument, 0, O_REQ }, { "version", no_argument, 0, O_VERSION },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'c': spec->config = optarg; break;
        case 'p': cli->policy_list = optarg; break;
        case 'C': cli->compare = 1; break;
        case O_SET: add_set(spec, "%s", optarg); break;
        case O_STEPS: add_set(spec, "workload.steps=%s", optarg); break;
        case O_CONC: add_set(spec, "workload.concurrency=%s", optarg); break;
        case O_SEED: add_set(spec, "trace.seed=%s", optarg); break;
        case O_PRESET: add_set(spec, "trace.preset=%s", optarg); add_set(spec, "trace.path=%s", ""); break;
        case O_TRACE: add_set(spec, "trace.path=%s", optarg); add_set(spec, "trace.preset=%s", ""); break;
        case O_JSON: cli->json = optarg; break;
        case O_WALL: cli->wall = 1; break;
        case O_TL: cli->timeline = optarg; break;
        case O_SEARCH:
            cli->search_ms = strtod(optarg, &end);
            /* A bound is a TPOT target: above 1e6 ms (1000 s a token) it is no
             * target at all, and inf would make every concurrency meet it. */
            if (end == optarg || *end || !(cli->search_ms > 0) || !(cli->search_ms <= 1e6))
                dh_die("dhsim", "--search-latency '%s': expected milliseconds in (0, 1e6]", optarg);
            break;
        case O_STAT:
        case O_LSTAT:
            if (search_stat_parse(optarg, &cli->sstat) < 0) dh_die_last("dhsim");
            break;
        case O_SMAX:
            cli->search_max = strtol(optarg, &end, 10);
            if (end == optarg || *end || cli->search_max < 1 || cli->search_max > 65536)
                dh_die("dhsim", "--search-max '%s': expected 1 to 65536 requests per GPU", optarg);
            break;
        case O_REQ: cli->requests = optarg; break;
        case O_THREADS: {
            long t = strtol(optarg, &end, 10);
            if (end == optarg || *end || t < 1 || t > 64) dh_die("dhsim", "--threads '%s': expected 1 to 64", optarg);
            spec->threads = (int)t;
            break;
        }
        case O_QUIET: cli->quiet = 1; break;
        case O_MEMORY: cli->memory = 1; break;
        case O_SPEC: {
            int mode;
            if (specrun_parse_mode(optarg, &mode) < 0) dh_die("dhsim", "--spec '%s': expected none, dflash2 or dspark", optarg);
            add_set(spec, "spec.mode=%s", optarg);
            break;
        }
        case O_DRAFT: add_set(spec, "spec.draft=%s", optarg); break;
        case 'h': usage(stdout); return 1;
        case O_VERSION: printf("dhsim %s\n", dh_commit()); return 1;
        default:
            if (optopt) dh_die("dhsim", "option '%s' needs a value or is unknown (see --help)", argv[optind - 1]);
            dh_die("dhsim", "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) dh_die("dhsim", "unexpected argument '%s' (see --help)", argv[optind]);
    if (cli->compare && cli->policy_list) dh_die("dhsim", "--compare and --policy exclude each other");
    return 0;
}

/* Outputs are checked before the run, which can take minutes. */
static void check_outputs(const cli_opts *cli)
{
    if (cli->json && strcmp(cli->json, "-") && ofile_check(cli->json) < 0) dh_die_last("dhsim");
    if (cli->requests && ofile_check(cli->requests) < 0) dh_die_last("dhsim");
    if (cli->timeline) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s.tsv", cli->timeline) >= (int)sizeof p) dh_die("dhsim", "--timeline: path is too long");
        if (ofile_check(p) < 0) dh_die_last("dhsim");
    }
}

/* The speculative mode of --compare's speculative column and of hisparse-spec:
 * the config's, else DFlash2 where the model has a DFlash2 draft, else DSpark.
 * Sets *configured when the config names one. */
static void default_spec_mode(const sim_config *sc, char *spec_mode, size_t cap, int *configured)
{
    const char *cfg_mode = sc->spec.mode ? spec_kind_name((spec_kind)sc->spec.mode) : NULL;
    *configured = cfg_mode != NULL;
    snprintf(spec_mode, cap, "%s", cfg_mode ? cfg_mode : "dflash2");
    if (!cfg_mode) {
        char p1[600], p2[4096];
        snprintf(p1, sizeof p1, "models/drafts/%s-dflash2.ini", sc->model.name);
        if (dh_path_find(p1, p2, sizeof p2) < 0) dh_die_last("dhsim");
        if (access(p2, R_OK) != 0) snprintf(spec_mode, cap, "dspark");
    }
}

/* The report's columns: --compare's (every policy plus adaptive with
 * speculation), --policy's list, else the config's policy. Returns whether the
 * paper's headline comparison is printed. */
static int build_columns(run_spec *spec, const cli_opts *cli, const sim_config *sc, const char *spec_mode, int cfg_mode)
{
    int headline = 0;
    if (cli->compare) {
        for (int i = 0; i < POL_N; i++) {
            column *c = &spec->cols[spec->n_pol++];
            c->pol = (pol_kind)i;
            snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=none");
        }
        if (add_column(spec, "adaptive", spec_mode) < 0) dh_die_last("dhsim");
        headline = 1;
    } else if (cli->policy_list) {
        char *l = strdup(cli->policy_list), *save, *tok;
        for (tok = strtok_r(l, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (spec->n_pol == MAX_COLS) dh_die("dhsim", "--policy: at most %d columns", MAX_COLS);
            char *plus = strchr(tok, '+');
            if (plus) *plus++ = 0;
            if (add_column(spec, tok, plus ? plus : NULL) < 0) dh_die_last("dhsim");
            if (!strcmp(tok, "hisparse-spec") && !cfg_mode && !plus) {
                /* Speculation needs a draft: the default mode's when none is configured. */
                column *c = &spec->cols[spec->n_pol - 1];
                if (c->n_sets == 4) dh_die("dhsim", "--policy '%s': too many overrides", tok);
                snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=%s", spec_mode);
            }
        }
        free(l);
    }
    if (spec->n_pol == 0) { spec->cols[0].pol = sc->policy; spec->n_pol = 1; }
    return headline;
}

/* Every column's configuration is checked before anything runs; under
 * --compare the speculative column gets its token-matched length. */
static void check_columns(run_spec *spec, int compare)
{
    for (int i = 0; i < spec->n_pol; i++) {
        sim_config c2;
        char *sets[MAX_SETS + 4];
        int n = 0;
        for (int j = 0; j < spec->n_sets; j++) sets[n++] = spec->sets[j];
        for (int j = 0; j < spec->cols[i].n_sets; j++) sets[n++] = spec->cols[i].sets[j];
        if (sim_config_load(spec->config, sets, n, &c2) < 0) dh_die_last("dhsim");
        if (c2.spec.mode && pol_ops_of(spec->cols[i].pol)->no_spec)
            dh_die("dhsim", "policy %s does not run with speculative decoding (use --spec none or another policy)",
                   pol_name_of(spec->cols[i].pol));
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
            column *c = &spec->cols[i];
            if (c->n_sets + 2 > 4) dh_die("dhsim", "internal: too many overrides for column %d", i);
            snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "workload.measure_tokens=%.0f",
                     (double)(c2.wl.steps - c2.wl.warmup_steps) * sim_per_gpu(&c2, c2.wl.concurrency));
            snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "workload.warmup_steps=%.0f", ceil(c2.wl.warmup_steps / e));
        }
        sim_config_release(&c2);
    }
}

/* --search-latency: one search per column, a table row each. */
static void run_searches(const run_spec *spec, const cli_opts *cli, double dp, uint32_t sc_warmup, uint32_t sc_steps,
                         sim_result *res)
{
    char nm[32];
    search_cfg scfg = { .bound_s = cli->search_ms / 1e3, .stat = cli->sstat, .config_warmup = sc_warmup,
                        .max_per_gpu = (uint32_t)cli->search_max };
    printf("largest concurrency with %s <= %g ms in steady state (warm-up cut by MSER-5", search_stat_name(cli->sstat, nm, sizeof nm),
           cli->search_ms);
    if (sc_warmup) printf(", at least the configured %u steps", sc_warmup);
    printf("; finished requests replaced)\n");
    printf("%-18s %11s %7s %12s %9s %17s %8s %7s %9s %7s %8s %4s\n", "policy", "concurrency", "per_GPU", "tok/s/GPU",
           "stat_ms", "95%_CI_ms", "stop", "check", "check_ms", "warm-up", "measured", "runs");
    uint32_t min_steps = 0;
    for (int i = 0; i < spec->n_pol; i++)
        if (search_column(spec, &spec->cols[i], &scfg, dp, &res[i], &min_steps) < 0) dh_die_last("dhsim");
    printf("stop: why per GPU check = answer + 1 failed (latency: over the bound; memory: admission could not hold "
           "it); max: --search-max reached\n");
    printf("run length: %u steps; these searches need at least %u (twice the longest warm-up cut of their runs, "
           "and 20; a shorter run is an error, not an answer)\n", sc_steps, min_steps < 20 ? 20 : min_steps);
}

/* The inputs the JSON and the HDF5 timeline record: the options that change a
 * figure and are no config key (the thread count and the output paths do not).
 * stat_name holds --latency-stat's text while rec is used; returns the count. */
static int record_opts(const cli_opts *cli, out_opt rec[6], char *stat_name, size_t cap)
{
    int n = 0;
    rec[n++] = (out_opt){ "--policy", OUT_OPT_STR, cli->policy_list ? cli->policy_list : "", 0 };
    rec[n++] = (out_opt){ "--compare", OUT_OPT_BOOL, NULL, cli->compare };
    rec[n++] = (out_opt){ "--wall", OUT_OPT_BOOL, NULL, cli->wall };
    if (cli->search_ms > 0) {
        rec[n++] = (out_opt){ "--search-latency", OUT_OPT_NUM, NULL, cli->search_ms };
        rec[n++] = (out_opt){ "--latency-stat", OUT_OPT_STR, search_stat_name(cli->sstat, stat_name, cap), 0 };
        rec[n++] = (out_opt){ "--search-max", OUT_OPT_NUM, NULL, (double)cli->search_max };
    }
    return n;
}

/* The files: JSON, timeline (TSV, HDF5 with the per-request records and the
 * recorded inputs, latency CDFs) and the per-request CSV. Every output goes to
 * a temporary name first; all are renamed into place only when all are
 * complete (common/ofile.h), else all are discarded and the tool dies. */
static void write_outputs(const run_spec *spec, const cli_opts *cli, const sim_result *res)
{
    const char *json = cli->json, *timeline = cli->timeline, *requests = cli->requests;
    int n_pol = spec->n_pol;
    ofile js = { 0 }, rq = { 0 }, cdf = { 0 };
    char *tl_tmp[2] = { NULL, NULL }, tl_path[3][4096];
    int orc = 0;
    char stat_name[32];
    out_opt rec_opts[6];
    int n_opts = record_opts(cli, rec_opts, stat_name, sizeof stat_name);
    run_inputs *ins = NULL;
    if (json || timeline) {
        ins = inputs_load(spec, res, rec_opts, n_opts);
        if (!ins) dh_die_last("dhsim");
    }
    const out_inputs *in = ins ? &ins->in : NULL;
    if (json && !strcmp(json, "-")) orc = out_json_inputs(stdout, res, n_pol, cli->wall, in);
    else if (json) {
        orc = ofile_open(&js, json);
        if (orc == 0 && out_json_inputs(js.f, res, n_pol, cli->wall, in) < 0) orc = dh_err("write error on '%s'", json);
    }
    if (orc == 0 && timeline) {
        snprintf(tl_path[0], sizeof tl_path[0], "%s.tsv", timeline);
        snprintf(tl_path[1], sizeof tl_path[1], "%s.h5", timeline);
        orc = ofile_begin(tl_path[0], &tl_tmp[0]) < 0 || ofile_begin(tl_path[1], &tl_tmp[1]) < 0 ||
                      out_tsv(tl_tmp[0], res, n_pol) < 0 || out_h5_inputs(tl_tmp[1], res, n_pol, in) < 0 ||
                      requests_h5(tl_tmp[1], res, n_pol) < 0
                  ? -1 : 0;
    }
    for (int i = 0; orc == 0 && requests && i < n_pol; i++) {
        if (i == 0) orc = ofile_open(&rq, requests);
        if (orc == 0 && reqlat_csv(rq.f, res[i].policy, res[i].req, res[i].n_req, res[i].measured_from_s, i == 0) < 0)
            orc = dh_err("write error on '%s'", requests);
    }
    for (int i = 0; orc == 0 && timeline && i < n_pol; i++) {
        /* The per-request latency CDFs beside the per-step timeline. */
        if (i == 0) {
            snprintf(tl_path[2], sizeof tl_path[2], "%s.latency.tsv", timeline);
            orc = ofile_open(&cdf, tl_path[2]);
        }
        if (orc == 0 && reqlat_cdf_tsv(cdf.f, res[i].policy, res[i].req, res[i].n_req, res[i].measured_from_s, i == 0) < 0)
            orc = dh_err("write error on '%s'", tl_path[2]);
    }
    if (orc == 0 && js.f) orc = ofile_close(&js);
    if (orc == 0 && rq.f) orc = ofile_close(&rq);
    if (orc == 0 && cdf.f) orc = ofile_close(&cdf);
    for (int i = 0; i < 2 && orc == 0 && tl_tmp[i]; i++) {
        orc = ofile_commit(tl_tmp[i], tl_path[i]);
        tl_tmp[i] = NULL;
    }
    if (orc < 0) {
        ofile_discard(&js);
        ofile_discard(&rq);
        ofile_discard(&cdf);
        for (int i = 0; i < 2; i++) ofile_abort(tl_tmp[i]);
        dh_die_last("dhsim");
    }
    inputs_free(ins);
}

int main(int argc, char **argv)
{
    run_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.config = DEFAULT_INSTANCE;
    spec.threads = 2;
    cli_opts cli = { .sstat = { SEARCH_TOKEN, 0.90 }, .search_max = 65536 };
    if (parse_args(argc, argv, &spec, &cli)) return 0;
    check_outputs(&cli);
    /* Validate the configuration once before any run (and take the config's policy and mode). */
    sim_config sc;
    if (sim_config_load(spec.config, spec.sets, spec.n_sets, &sc) < 0) dh_die_last("dhsim");
    if (cli.memory) {
        memplan_print(&sc.mem, sc.model.name, sc.inst_path, stdout);
        sim_config_release(&sc);
        return 0;
    }
    double dp = sc.attention_dp;
    uint32_t sc_warmup = sc.wl.warmup_steps, sc_steps = sc.wl.steps;
    /* The search holds a concurrency: a closed loop. Open-loop arrivals or
     * load steps would run below the target for want of requests, which the
     * search would read as memory. */
    if (cli.search_ms > 0 && sc.wl.mode != WL_CLOSED)
        dh_die("dhsim", "--search-latency needs workload.mode = closed (it searches the concurrency a closed loop holds)");
    char spec_mode[16];
    int cfg_mode;
    default_spec_mode(&sc, spec_mode, sizeof spec_mode, &cfg_mode);
    int headline = build_columns(&spec, &cli, &sc, spec_mode, cfg_mode);
    check_columns(&spec, cli.compare);
    sim_config_release(&sc);

    sim_result res[MAX_COLS];
    memset(res, 0, sizeof res);
    if (cli.search_ms > 0) run_searches(&spec, &cli, dp, sc_warmup, sc_steps, res);
    else {
        if (run_all(&spec, res) < 0) dh_die_last("dhsim");
        if (!cli.quiet && out_table(stdout, res, spec.n_pol) < 0) dh_die_last("dhsim");
        if (!cli.quiet && headline && print_headline(stdout, res, spec.n_pol) < 0) dh_die_last("dhsim");
        if (!cli.quiet && print_reqlat(stdout, res, spec.n_pol) < 0) dh_die_last("dhsim");
    }
    write_outputs(&spec, &cli, res);
    for (int i = 0; i < spec.n_pol; i++) sim_result_release(&res[i]);
    for (int i = 0; i < spec.n_sets; i++) free(spec.sets[i]);
    return 0;
}
