/* deploy.c: the validation table against published deployments; see deploy.h. */
#include "analysis/deploy.h"
#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/cores.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/path.h"
#include "sim/sim.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEP_MAX_SETS 64

/* ---- the schema (docs/CONFIG.md is printed from it: bin/dhconfig schema) ---- */

static const cfg_key dep_keys[] = {
    CK_ROW("point", "source", CK_STR, "", 0, 0, NULL, "Where the published figure is (a URL), non-empty.", 0),
    CK_ROW("point", "assumed", CK_STR, "", 0, 0, NULL, "What the simulator's setting assumes beyond the source.", 0),
    CK_ROW("point", "gap", CK_STR, "", 0, 0, NULL, "What of the deployment the simulator does not model.", 0),
    CK_ROW("published", "output_per_gpu", CK_NUM, "tokens/s", 1e-6, 1e9, "(none)", "Published output tokens/s per GPU "
           "(not with a sweep).", 0),
    CK_STR_ROW("published", "output_bound", "exact", "exact|lower", "Whether the published output is the figure or a lower "
               "bound of it.", 0),
    CK_ROW("published", "tpot_ms", CK_NUM, "ms", 1e-6, 1e9, "(none)", "Published time per output token.", 0),
    CK_STR_ROW("published", "tpot_stat", NULL, "p50|mean", "The statistic tpot_ms is (required with it).", 0),
    CK_ROW("published", "sweep_concurrency", CK_LIST, "requests", 1, 1e7, "(none)", "A published sweep: its "
           "concurrencies, increasing (at least 2).", 0),
    CK_ROW("published", "sweep_output_total", CK_LIST, "tokens/s", 1e-6, 1e12, "(none)", "The sweep's total output "
           "tokens/s at each concurrency.", 0),
    CK_ROW("published", "gpus", CK_NUM, "", 1, 1e6, "(none)", "GPUs the sweep's totals are over (required with a "
           "sweep).", 0),
    CK_ROW("sim", "instance", CK_STR, "", 0, 0, NULL, "The simulator's instance file.", 0),
    CK_ROW("sim", "policy", CK_STR, "", 0, 0, NULL, "The policy the deployment runs (dhsim --policy).", 0),
    CK_ROW("sim", "set", CK_STR, "", 0, 0, "", "dhsim --set overrides, space-separated.", 0),
    CK_ROW("sim", "admission", CK_STR, "", 0, 0, "", "The scheduler's admission the deployment ran: reserve_full or "
           "sglang ([instance] admission, docs/SERVING.md); empty: the instance's.", 0),
    CK_ROW("sim", "prompt_len", CK_INT, "tokens", 1, 1L << 23, NULL, "Prompt length.", 0),
    CK_ROW("sim", "output_len", CK_INT, "tokens", 1, 1L << 24, NULL, "Output length.", 0),
    CK_ROW("sim", "steps", CK_INT, "steps", 1, 1L << 20, NULL, "Decode steps simulated.", 0),
    CK_ROW("sim", "warmup_steps", CK_INT, "steps", 0, 1L << 20, "0", "Steps left out of the statistics (below steps).", 0),
    CK_ROW("sim", "concurrency", CK_NUM, "requests", 1, 1e7, "(none)", "Requests in flight (required without a sweep; "
           "a sweep runs its own).", 0),
};
const cfg_schema dep_schema = CFG_SCHEMA("analysis/deployments/NAME.ini", "Published deployment",
    "One published serving figure and the simulator's setting for it (analysis/deploy.h; bin/dhcal deployments).",
    dep_keys);

static int copy_str(cfg *c, const char *sec, const char *key, const char *def, char *out, size_t cap, int nonempty)
{
    const char *v;
    if (cfgk_string_or(c, &dep_schema, sec, key, &v, def) < 0) return -1;
    if (nonempty && !*v) return dh_err("%s: [%s] %s is empty", cfg_name(c), sec, key);
    if (strlen(v) >= cap) return dh_err("%s: [%s] %s is longer than %zu characters", cfg_name(c), sec, key, cap - 1);
    snprintf(out, cap, "%s", v);
    return 0;
}

static int get_u(cfg *c, const char *sec, const char *key, unsigned *out)
{
    long v;
    if (cfgk_int(c, &dep_schema, sec, key, &v) < 0) return -1;
    *out = (unsigned)v;
    return 0;
}

static int load_point(const char *path, const char *id, dep_point *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->id, sizeof p->id, "%s", id);
    snprintf(p->path, sizeof p->path, "%s", path);
    p->pub_output = p->pub_tpot_ms = NAN;
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    int rc = -1;
    const char *bound, *stat;
    if (!cfg_has_section(c, "point") || !cfg_has_section(c, "published") || !cfg_has_section(c, "sim")) {
        dh_err("%s: needs the sections [point], [published] and [sim]", path);
        goto out;
    }
    if (copy_str(c, "point", "source", CFG_REQUIRED, p->source, sizeof p->source, 1) < 0 ||
        copy_str(c, "point", "assumed", CFG_REQUIRED, p->assumed, sizeof p->assumed, 1) < 0 ||
        copy_str(c, "point", "gap", CFG_REQUIRED, p->gap, sizeof p->gap, 1) < 0)
        goto out;
    if (cfg_has(c, "published", "output_per_gpu") &&
        cfgk_double_or(c, &dep_schema, "published", "output_per_gpu", &p->pub_output, CFG_REQUIRED) < 0)
        goto out;
    if (cfgk_string(c, &dep_schema, "published", "output_bound", &bound) < 0) goto out;
    if (strcmp(bound, "exact") && strcmp(bound, "lower")) {
        dh_err("%s: [published] output_bound '%s' is not exact or lower", path, bound);
        goto out;
    }
    p->output_lower = !strcmp(bound, "lower");
    if (cfg_has(c, "published", "tpot_ms")) {
        if (cfgk_double_or(c, &dep_schema, "published", "tpot_ms", &p->pub_tpot_ms, CFG_REQUIRED) < 0 ||
            cfgk_string(c, &dep_schema, "published", "tpot_stat", &stat) < 0)
            goto out;
        if (strcmp(stat, "p50") && strcmp(stat, "mean")) {
            dh_err("%s: [published] tpot_stat '%s' is not p50 or mean", path, stat);
            goto out;
        }
        snprintf(p->tpot_stat, sizeof p->tpot_stat, "%s", stat);
    }
    if (cfg_has(c, "published", "sweep_concurrency")) {
        size_t n2;
        if (cfgk_doubles(c, &dep_schema, "published", "sweep_concurrency", p->sweep_c, DEP_MAX_SWEEP, &p->n_sweep) < 0 ||
            cfgk_doubles(c, &dep_schema, "published", "sweep_output_total", p->sweep_out, DEP_MAX_SWEEP, &n2) < 0 ||
            cfgk_double_or(c, &dep_schema, "published", "gpus", &p->gpus, CFG_REQUIRED) < 0)
            goto out;
        if (n2 != p->n_sweep || p->n_sweep < 2) {
            dh_err("%s: [published] sweep_concurrency and sweep_output_total need the same count, at least 2", path);
            goto out;
        }
        for (size_t i = 1; i < p->n_sweep; i++)
            if (p->sweep_c[i] <= p->sweep_c[i - 1]) {
                dh_err("%s: [published] sweep_concurrency must increase", path);
                goto out;
            }
    }
    if (isnan(p->pub_output) && isnan(p->pub_tpot_ms) && !p->n_sweep) {
        dh_err("%s: [published] holds no quantity (output_per_gpu, tpot_ms or a sweep)", path);
        goto out;
    }
    if (p->n_sweep && !isnan(p->pub_output)) {
        dh_err("%s: [published] a sweep's output per GPU is its highest concurrency's; give no output_per_gpu", path);
        goto out;
    }
    if (copy_str(c, "sim", "instance", CFG_REQUIRED, p->instance, sizeof p->instance, 1) < 0 ||
        copy_str(c, "sim", "policy", CFG_REQUIRED, p->policy, sizeof p->policy, 1) < 0 ||
        copy_str(c, "sim", "set", "", p->sets, sizeof p->sets, 0) < 0 ||
        copy_str(c, "sim", "admission", "", p->admission, sizeof p->admission, 0) < 0 ||
        get_u(c, "sim", "prompt_len", &p->prompt_len) < 0 ||
        get_u(c, "sim", "output_len", &p->output_len) < 0 ||
        get_u(c, "sim", "steps", &p->steps) < 0 ||
        get_u(c, "sim", "warmup_steps", &p->warmup_steps) < 0)
        goto out;
    if (p->warmup_steps >= p->steps) {
        dh_err("%s: [sim] warmup_steps %u leaves no measured step of %u", path, p->warmup_steps, p->steps);
        goto out;
    }
    if (p->n_sweep) {
        if (cfg_has(c, "sim", "concurrency")) {
            dh_err("%s: [sim] concurrency: a sweep runs the published concurrencies", path);
            goto out;
        }
    } else if (cfgk_double_or(c, &dep_schema, "sim", "concurrency", &p->concurrency, CFG_REQUIRED) < 0)
        goto out;
    rc = cfg_check_unused(c);
out:
    cfg_free(c);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int dep_load_dir(const char *dir, dep_set *s)
{
    memset(s, 0, sizeof *s);
    char root[512];
    if (dh_path_find(dir ? dir : DEP_DEFAULT_DIR, root, sizeof root) < 0) return -1;
    DIR *d = opendir(root);
    if (!d) return dh_err("cannot open directory '%s': %s", root, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l <= 4 || strcmp(e->d_name + l - 4, ".ini") || e->d_name[0] == '.') continue;
        names = dh_reallocarray(names, n + 1, sizeof *names);
        names[n] = dh_malloc(l + 1);
        memcpy(names[n++], e->d_name, l + 1);
    }
    closedir(d);
    int rc = 0;
    if (!n) rc = dh_err("directory '%s' holds no .ini file", root);
    if (n) qsort(names, n, sizeof *names, by_name);
    s->p = dh_calloc(n ? n : 1, sizeof *s->p);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[600], id[96];
        size_t l = strlen(names[i]) - 4;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", root, names[i]) >= sizeof path || l >= sizeof id) {
            rc = dh_err("path '%s/%s' is too long", root, names[i]);
            break;
        }
        memcpy(id, names[i], l);
        id[l] = 0;
        rc = load_point(path, id, &s->p[i]);
        if (rc == 0) s->n++;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) dep_release(s);
    return rc;
}

void dep_release(dep_set *s)
{
    free(s->p);
    s->p = NULL;
    s->n = 0;
}

/* Which inputs of a run are random (DEP_RAND_*): the selections when the policy reads them
 * from the generator (resident serving reads none; a trace file is fixed), the acceptance
 * when a draft's table holds a probability strictly between 0 and 1 (DSpark's confidence
 * head is always drawn), the lengths when a range is open. */
static unsigned random_inputs(const sim_config *sc, pol_kind kind)
{
    unsigned f = 0;
    if (kind != POL_RESIDENT && !*sc->trace_path) f |= DEP_RAND_SEL;
    if (sc->spec.mode && sc->spec.draft) {
        const spec_draft *d = sc->spec.draft;
        if (d->kind == SPEC_DSPARK) f |= DEP_RAND_ACC;
        for (uint32_t b = 0; b < d->n_buckets; b++)
            for (uint32_t i = 0; i < SPEC_MAX_GAMMA; i++)
                if (d->bucket[b].marginal[i] > 0 && d->bucket[b].marginal[i] < 1) f |= DEP_RAND_ACC;
    }
    if (sc->wl.prompt_len_max > sc->wl.prompt_len || sc->wl.output_len_max > sc->wl.output_len) f |= DEP_RAND_LEN;
    return f;
}

/* The configuration of point p at instance concurrency c; seed > 0 replaces the run's
 * [trace] seed (after the point's own overrides). 0, or -1 with dh_err() naming the file. */
static int load_sc(const dep_point *p, double c, uint64_t seed, sim_config *sc)
{
    char shape[9][64], own[sizeof p->sets];
    char *sets[DEP_MAX_SETS];
    int n = 0;
    snprintf(shape[0], sizeof shape[0], "workload.mode=closed");
    snprintf(shape[1], sizeof shape[1], "workload.concurrency=%.17g", c);
    snprintf(shape[2], sizeof shape[2], "workload.prompt_len=%u", p->prompt_len);
    snprintf(shape[3], sizeof shape[3], "workload.output_len=%u", p->output_len);
    /* Fixed lengths, as the benchmarks ran them (--random-range-ratio 1.0 or a fixed
     * output length): the instance's own range would otherwise stay in force. */
    snprintf(shape[4], sizeof shape[4], "workload.output_len_max=%u", p->output_len);
    snprintf(shape[5], sizeof shape[5], "workload.steps=%u", p->steps);
    snprintf(shape[6], sizeof shape[6], "workload.warmup_steps=%u", p->warmup_steps);
    for (int i = 0; i < 7; i++) sets[n++] = shape[i];
    if (*p->admission) {
        snprintf(shape[7], sizeof shape[7], "instance.admission=%s", p->admission);
        sets[n++] = shape[7];
    }
    snprintf(own, sizeof own, "%s", p->sets);
    for (char *save, *t = strtok_r(own, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (n >= DEP_MAX_SETS - 1) return dh_err("%s: [sim] set: more than %d overrides", p->path, DEP_MAX_SETS - 9);
        sets[n++] = t;
    }
    if (seed) {
        snprintf(shape[8], sizeof shape[8], "trace.seed=%llu", (unsigned long long)seed);
        sets[n++] = shape[8];
    }
    if (sim_config_load(p->instance, sets, n, sc) < 0) {
        sim_config_release(sc);
        return dh_err_prefix("%s: ", p->path);
    }
    return 0;
}

/* One simulator run: point p at instance concurrency c (seed as load_sc). The point's own
 * overrides come after the workload's shape, so a file may still change any key. */
static int run_one(const dep_point *p, double c, uint64_t seed, sim_result *res, double *gpus)
{
    memset(res, 0, sizeof *res);
    pol_kind kind;
    if (pol_parse(p->policy, &kind) < 0) return dh_err_prefix("%s: [sim] policy: ", p->path);
    sim_config sc;
    if (load_sc(p, c, seed, &sc) < 0) return -1;
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) {
        sim_config_release(&sc);
        return dh_err_prefix("%s: ", p->path);
    }
    int rc = sim_run(&sc, kind, src, res);
    if (rc < 0) dh_err_prefix("%s: ", p->path);
    /* The simulated GPU stands for each of the instance's GPUs: the instance's
     * output is the per-GPU figure times the GPUs. */
    *gpus = sc.gpus;
    sel_source_free(src);
    sim_config_release(&sc);
    return rc;
}

/* How point p's intervals are computed (deploy.h): its random inputs at its (or its sweep's
 * top) concurrency, and the seed its replications count from. 0 or -1. */
static int classify(const dep_point *p, int *ci, unsigned *random, uint64_t *seed0)
{
    pol_kind kind;
    if (pol_parse(p->policy, &kind) < 0) return dh_err_prefix("%s: [sim] policy: ", p->path);
    sim_config sc;
    if (load_sc(p, p->n_sweep ? p->sweep_c[p->n_sweep - 1] : p->concurrency, 0, &sc) < 0) return -1;
    *random = random_inputs(&sc, kind);
    *seed0 = sc.seed;
    sim_config_release(&sc);
    *ci = !*random ? DEP_CI_DET : (*random & DEP_RAND_SEL) ? DEP_CI_TREND : DEP_CI_SEEDS;
    return 0;
}

/* One unit of work: run j of point i (j indexes the sweep; 0 without one), replication
 * rep (0: the file's own seed). */
typedef struct {
    size_t point, run, rep;
} dep_job;

typedef struct {
    const dep_set *s;
    dep_job *job;
    const uint64_t *seed0;
    size_t n, next;
    sim_result *res;
    double *gpus;
    int *rc;
    char (*err)[512];
    pthread_mutex_t mu;
} dep_pool;

static void *worker(void *arg)
{
    dep_pool *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        size_t i = q->next++;
        pthread_mutex_unlock(&q->mu);
        if (i >= q->n) return NULL;
        const dep_point *p = &q->s->p[q->job[i].point];
        double c = p->n_sweep ? p->sweep_c[q->job[i].run] : p->concurrency;
        const dep_job *jb = &q->job[i];
        q->rc[i] = run_one(p, c, jb->rep ? q->seed0[jb->point] + jb->rep : 0, &q->res[i], &q->gpus[i]);
        if (q->rc[i] < 0) snprintf(q->err[i], sizeof q->err[i], "%s", dh_errmsg());
    }
}

/* The saturation concurrency of series out[0..n-1] at concurrencies c[], in
 * requests per GPU: the first that reaches DEP_PLATEAU_SHARE of the largest.
 * O(n). */
static double saturation(const double *c, const double *out, size_t n, double gpus)
{
    double top = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i] > top) top = out[i];
    for (size_t i = 0; i < n; i++)
        if (out[i] >= DEP_PLATEAU_SHARE * top) return c[i] / gpus;
    return c[n - 1] / gpus;
}

/* The requests' TPOTs that the published statistic is over, as bench_serving computes it
 * (median_tpot_ms, mean_tpot_ms): each request's (e2e - TTFT) / (tokens - 1), here of the
 * requests whose decoding began in the measured steps and ended in the run, sorted into *out
 * (malloc'd); the count (0: none, the caller takes the per-step figure). bench_serving's TTFT is the first streamed token, which SGLang samples
 * from the prefill's last forward: with colocated prefill that is the prefill's end, and the
 * TPOT spans the N - 1 decode iterations after it, with whatever ran between them (other
 * requests' prefills). The simulator emits all N tokens from decode steps after the prefill
 * (sim/reqlat.h), so the same spacing is (finish - prefill end) / N; under disaggregated
 * prefill (no prefill here) it is reqlat's TPOT. O(requests log requests). */
static uint32_t request_tpots(const sim_result *r, double **out)
{
    double *v = dh_calloc(r->n_req ? r->n_req : 1, sizeof *v);
    uint32_t k = 0;
    for (uint32_t i = 0; i < r->n_req; i++) {
        const reqlat_rec *x = &r->req[i];
        double t = reqlat_value(x, RL_TPOT);
        if (t >= 0 && x->prefill >= 0) t = (x->finish - x->prefill) / x->output;
        if (t >= 0 && x->first >= r->measured_from_s) v[k++] = t;
    }
    qsort(v, k, sizeof *v, cmp_double);
    *out = v;
    return k;
}

/* The statistic of sorted v[0..k): the mean, or the median as reqlat_quantile has it. */
static double tpot_stat(const double *v, uint32_t k, int mean)
{
    return !k ? -1 : mean ? reqlat_mean(v, k) : reqlat_quantile(v, k, 0.5).v;
}

/* A run's TPOT in seconds as above; *n the requests it is over (0: none, the per-step
 * figure instead). */
static double run_tpot(const sim_result *r, int mean, uint32_t *n)
{
    double *v;
    *n = request_tpots(r, &v);
    double t = *n ? tpot_stat(v, *n, mean) : mean ? r->tpot_mean : r->tpot_p50;
    free(v);
    return t;
}

/* DEP_CI_TREND's output half-width for run r (deploy.h): the ratio R = tokens / seconds of
 * the measured steps, linearised as z_i = tokens_i - R seconds_i, whose sum's interval
 * (stats_trend_sum_ci) over R's tokens is R's relative half-width (R - R0 ~ sum z / seconds,
 * and R0 seconds = tokens). The steps in which a prefill ended are left out of z: their time
 * is the prefill's iterations, a function of the lengths alone (sim/prefill.h), and the
 * decode step in them the wave's cold first one. NAN when too few steps. O(steps + requests
 * log requests). */
static double trend_half(const sim_result *r)
{
    if (!(r->measured_tokens > 0) || !(r->measured_time > 0)) return NAN;
    const double R = r->measured_tokens / r->measured_time;
    double *ends = dh_calloc(r->n_req ? r->n_req : 1, sizeof *ends);
    uint32_t ne = 0;
    for (uint32_t i = 0; i < r->n_req; i++)
        if (r->req[i].prefill >= 0) ends[ne++] = r->req[i].prefill;
    qsort(ends, ne, sizeof *ends, cmp_double);
    double *z = dh_calloc(r->n_tl ? r->n_tl : 1, sizeof *z);
    uint32_t n = 0, e = 0;
    for (uint32_t j = 0; j < r->n_tl; j++) {
        const sim_tl_row *t = &r->tl[j];
        int prefill = 0;
        /* Rows are contiguous in time: the ends up to this row's end fall in it (or before). */
        while (e < ne && ends[e] <= t->t_end) {
            prefill |= ends[e] > t->t_start || j == 0;
            e++;
        }
        if (t->step < r->warmup_steps || prefill) continue;
        z[n++] = t->tokens - R * (t->t_end - t->t_start);
    }
    stats_ci c = stats_trend_sum_ci(z, n);
    free(z);
    free(ends);
    return r->tok_s_gpu * c.half / r->measured_tokens;
}

int dep_simulate(const dep_set *s, int threads, dep_sim *out)
{
    int *ci = dh_calloc(s->n ? s->n : 1, sizeof *ci);
    unsigned *rnd = dh_calloc(s->n ? s->n : 1, sizeof *rnd);
    uint64_t *seed0 = dh_calloc(s->n ? s->n : 1, sizeof *seed0);
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (classify(&s->p[i], &ci[i], &rnd[i], &seed0[i]) < 0) {
            free(ci), free(rnd), free(seed0);
            return -1;
        }
        n += (s->p[i].n_sweep ? s->p[i].n_sweep : 1) * (ci[i] == DEP_CI_SEEDS ? DEP_REPS : 1);
    }
    dep_pool q = {.s = s, .n = n, .seed0 = seed0};
    q.job = dh_calloc(n, sizeof *q.job);
    q.res = dh_calloc(n, sizeof *q.res);
    q.gpus = dh_calloc(n, sizeof *q.gpus);
    q.rc = dh_calloc(n, sizeof *q.rc);
    q.err = dh_calloc(n, sizeof *q.err);
    /* Jobs by point, then concurrency, then replication. */
    for (size_t i = 0, k = 0; i < s->n; i++)
        for (size_t j = 0; j < (s->p[i].n_sweep ? s->p[i].n_sweep : 1); j++)
            for (size_t r = 0; r < (ci[i] == DEP_CI_SEEDS ? DEP_REPS : 1); r++) q.job[k++] = (dep_job){i, j, r};
    pthread_mutex_init(&q.mu, NULL);
    cores_run_pool(threads < 1 ? 1 : threads > 16 ? 16 : threads, n, worker, &q);
    pthread_mutex_destroy(&q.mu);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (q.rc[i] < 0) rc = dh_err("%s", q.err[i]);
    /* Results in job order, so the figures do not depend on which thread ran what. */
    for (size_t k = 0; rc == 0 && k < n;) {
        const size_t pi = q.job[k].point, j = q.job[k].run;
        const dep_point *p = &s->p[pi];
        dep_sim *o = &out[pi];
        const uint32_t R = ci[pi] == DEP_CI_SEEDS ? DEP_REPS : 1;
        const sim_result *r = &q.res[k];   /* the runs of this concurrency: r[0 .. R) */
        const int mean = !strcmp(p->tpot_stat, "mean");
        if (j == 0) {
            memset(o, 0, sizeof *o);
            o->sat_per_gpu = NAN;
            o->ci = ci[pi];
            o->random = rnd[pi];
            o->runs = R;
        }
        double tok[DEP_REPS];
        for (uint32_t m = 0; m < R; m++) tok[m] = r[m].tok_s_gpu;
        stats_ci co = stats_ci_of(tok, R);
        if (p->n_sweep) o->sweep_out[j] = co.mean * q.gpus[k];
        if (!p->n_sweep || j == p->n_sweep - 1) {
            o->output_per_gpu = co.mean;
            o->output_half = ci[pi] == DEP_CI_DET ? 0 : ci[pi] == DEP_CI_SEEDS ? co.half : trend_half(r);
            double tp[DEP_REPS], adm = 0, retr = 0;
            int none = 0;
            o->tpot_requests = 0;
            for (uint32_t m = 0; m < R; m++) {
                uint32_t nr;
                tp[m] = 1e3 * run_tpot(&r[m], mean, &nr);
                o->tpot_requests += nr;
                none |= nr == 0;
                adm += r[m].mean_active / R;
                retr += r[m].measured_retractions / R;
            }
            stats_ci ct = stats_ci_of(tp, R);
            o->tpot_ms = ct.mean;
            o->tpot_half = ci[pi] == DEP_CI_DET ? 0 : ci[pi] == DEP_CI_SEEDS ? ct.half : NAN;
            if (ci[pi] == DEP_CI_SEEDS && r[0].per_gpu == 1) {
                /* One request at a time: the requests of every replication are independent
                 * and alike, pooled (deploy.h). */
                size_t cap = 1;
                for (uint32_t m = 0; m < R; m++) cap += r[m].n_req;
                double *v = dh_calloc(cap, sizeof *v);
                uint32_t nv = 0;
                for (uint32_t m = 0; m < R; m++) {
                    double *w;
                    uint32_t nw = request_tpots(&r[m], &w);
                    memcpy(v + nv, w, nw * sizeof *w);
                    nv += nw;
                    free(w);
                }
                if (!none) {
                    qsort(v, nv, sizeof *v, cmp_double);
                    o->tpot_ms = 1e3 * tpot_stat(v, nv, mean);
                    if (mean) o->tpot_half = 1e3 * stats_ci_of(v, nv).half;
                    else {
                        stats_oci m = stats_median_ci(v, nv);
                        o->tpot_half = 1e3 * fmax(o->tpot_ms / 1e3 - m.lo, m.hi - o->tpot_ms / 1e3);
                    }
                }
                free(v);
            }
            if (none) o->tpot_requests = 0; /* a run had none: marked as per step */
            o->admitted_per_gpu = adm;
            o->retractions = r[0].has_retractions ? retr : NAN;
        }
        if (p->n_sweep && j == p->n_sweep - 1) o->sat_per_gpu = saturation(p->sweep_c, o->sweep_out, p->n_sweep, p->gpus);
        k += R;
    }
    for (size_t k = 0; k < n; k++)
        if (q.rc[k] == 0) sim_result_release(&q.res[k]);
    free(q.job);
    free(q.res);
    free(q.gpus);
    free(q.rc);
    free(q.err);
    free(ci);
    free(rnd);
    free(seed0);
    return rc;
}

/* Published output per GPU: the file's, or a sweep's highest concurrency's. */
static double pub_output(const dep_point *p)
{
    return p->n_sweep ? p->sweep_out[p->n_sweep - 1] / p->gpus : p->pub_output;
}

static double pub_saturation(const dep_point *p)
{
    return p->n_sweep ? saturation(p->sweep_c, p->sweep_out, p->n_sweep, p->gpus) : NAN;
}

/* Is a ratio sim / published within target? A lower bound is met by anything
 * above (1 - target) of it. */
static int ratio_met(double ratio, int lower)
{
    return lower ? ratio >= 1 - DEP_TARGET_RATIO : fabs(ratio - 1) <= DEP_TARGET_RATIO;
}

/* A number for the CSV, empty where not published or not simulated. */
static void csv_num(FILE *f, double x)
{
    if (!isnan(x)) fprintf(f, "%.6g", x);
    fputc(',', f);
}

/* A CSV field in double quotes, inner quotes doubled (RFC 4180). */
static void csv_field(FILE *f, const char *t)
{
    fputc('"', f);
    for (; *t; t++) {
        if (*t == '"') fputc('"', f);
        fputc(*t, f);
    }
    fputc('"', f);
}

static void cell(char *out, size_t cap, const char *fmt, double x)
{
    if (isnan(x)) snprintf(out, cap, "-");
    else snprintf(out, cap, fmt, x);
}

/* A simulated figure with its interval, as sim/out.c prints them: "value +/-half" at dec
 * decimals; the value alone where it is exact (half 0: no random input) or no interval could be
 * computed (NAN); suffix after it (a ratio's "x", "?"). */
static void cell_ci(char *out, size_t cap, double v, double half, int dec, const char *suffix)
{
    if (isnan(v)) snprintf(out, cap, "-");
    else if (isnan(half) || half == 0) snprintf(out, cap, "%.*f%s", dec, v, suffix);
    else snprintf(out, cap, "%.*f%s \xc2\xb1%.*f", dec, v, suffix, dec, half);
}

/* t right-aligned in w columns (the +/- sign is two bytes, one column). */
static const char *rpad(char *out, size_t cap, const char *t, int w)
{
    int cols = 0;
    for (const char *q = t; *q; q++) cols += ((unsigned char)*q & 0xC0) != 0x80;
    snprintf(out, cap, "%*s%s", cols < w ? w - cols : 0, "", t);
    return out;
}

/* Would the target's verdict on ratio differ somewhere inside [ratio - half, ratio + half]?
 * The interval meets both the targets' band and its outside. */
static int verdict_flips(double ratio, double half, int lower)
{
    if (isnan(ratio) || isnan(half) || half == 0) return 0;
    const double lo = ratio - half, hi = ratio + half, a = 1 - DEP_TARGET_RATIO, b = 1 + DEP_TARGET_RATIO;
    int meets_band = lower ? hi >= a : hi >= a && lo <= b;
    int meets_out = lower ? lo < a : lo < a || hi > b;
    return meets_band && meets_out;
}

/* The random inputs and the interval's method, as the table's column shows them. */
static void method_cell(char *out, size_t cap, const dep_sim *o)
{
    if (o->ci == DEP_CI_DET) {
        snprintf(out, cap, "none: exact");
        return;
    }
    char r[32] = "";
    if (o->random & DEP_RAND_SEL) strcat(r, "select.");
    if (o->random & DEP_RAND_ACC) strcat(r, *r ? "+acc." : "accept.");
    if (o->random & DEP_RAND_LEN) strcat(r, *r ? "+len." : "lengths");
    if (o->ci == DEP_CI_SEEDS) snprintf(out, cap, "%s: %u seeds", r, o->runs);
    else snprintf(out, cap, "%s: in-run", r);
}

static const char *method_name(int ci)
{
    return ci == DEP_CI_DET ? "deterministic" : ci == DEP_CI_SEEDS ? "replications" : "trend_batch_means";
}

int dep_report(const dep_set *s, const dep_sim *r, FILE *f, FILE *csv)
{
    fprintf(f, "%-34s | %35s | %35s | %22s | %4s %5s | %-18s | %s\n", "", "output tokens/s per GPU", "TPOT (ms)",
            "saturation (req/GPU)", "sim", "sim", "random input:", "");
    fprintf(f, "%-34s | %12s %9s %12s | %12s %9s %12s | %6s %6s %8s | %4s %5s | %-18s | %s\n", "point", "sim", "published",
            "ratio", "sim", "published", "ratio", "sim", "pub", "diff", "run", "retr", "interval", "gap");
    if (csv)
        fprintf(csv, "point,policy,sim_output_per_gpu,pub_output_per_gpu,output_bound,output_ratio,sim_tpot_ms,"
                     "pub_tpot_ms,tpot_stat,tpot_ratio,sim_saturation_per_gpu,pub_saturation_per_gpu,saturation_diff,"
                     "sim_admitted_per_gpu,targets,gap,source,sim_tpot_requests,sim_retractions,"
                     "sim_output_ci95_half,output_ratio_ci95_half,sim_tpot_ci95_half,tpot_ratio_ci95_half,"
                     "ci_method,random_inputs,sim_runs,verdict_flips\n");
    size_t met_all = 0;
    for (size_t i = 0; i < s->n; i++) {
        const dep_point *p = &s->p[i];
        const dep_sim *o = &r[i];
        double po = pub_output(p), ro = o->output_per_gpu / po;
        double pt = p->pub_tpot_ms, rt = isnan(pt) ? NAN : o->tpot_ms / pt;
        double ps = pub_saturation(p), ds = isnan(ps) ? NAN : o->sat_per_gpu - ps;
        double so = isnan(po) ? NAN : o->output_per_gpu, st = isnan(pt) ? NAN : o->tpot_ms;
        /* The published figures carry no stated uncertainty: the ratio's interval is the
         * simulated one over the published figure. */
        double ho = isnan(po) ? NAN : o->output_half, hro = ho / po;
        double ht = isnan(pt) ? NAN : o->tpot_half, hrt = ht / pt;
        int fo = verdict_flips(ro, hro, p->output_lower), ft = verdict_flips(rt, hrt, 0);
        int met = (isnan(ro) || ratio_met(ro, p->output_lower)) && (isnan(rt) || ratio_met(rt, 0)) &&
                  (isnan(ds) || fabs(ds) <= DEP_TARGET_SAT);
        met_all += met;
        char c[11][48];
        cell_ci(c[0], 48, so, ho, 1, "");
        cell(c[1], 48, p->output_lower ? ">%.1f" : "%.1f", po);
        cell_ci(c[2], 48, ro, hro, 2, fo ? "x?" : "x");
        cell_ci(c[3], 48, st, ht, 2, o->tpot_requests || isnan(st) ? "" : "*");
        char fmt[16];
        snprintf(fmt, sizeof fmt, "%%.2f %s", p->tpot_stat);
        cell(c[4], 48, fmt, pt);
        cell_ci(c[5], 48, rt, hrt, 2, ft ? "x?" : "x");
        cell(c[6], 48, "%.1f", o->sat_per_gpu);
        cell(c[7], 48, "%.1f", ps);
        cell(c[8], 48, "%+.1f", ds);
        cell(c[9], 48, "%.0f", o->retractions);
        method_cell(c[10], 48, o);
        char a[4][64];
        fprintf(f, "%-34s | %s %9s %s | %s %9s %s | %6s %6s %8s | %4.1f %5s | %-18s | %s\n", p->id,
                rpad(a[0], 64, c[0], 12), c[1], rpad(a[1], 64, c[2], 12), rpad(a[2], 64, c[3], 12), c[4],
                rpad(a[3], 64, c[5], 12), c[6], c[7], c[8], o->admitted_per_gpu, c[9], c[10], met ? "within targets" : p->gap);
        if (csv) {
            fprintf(csv, "%s,%s,", p->id, p->policy);
            csv_num(csv, so);
            csv_num(csv, po);
            fprintf(csv, "%s,", p->output_lower ? "lower" : "exact");
            csv_num(csv, ro);
            csv_num(csv, st);
            csv_num(csv, pt);
            fprintf(csv, "%s,", p->tpot_stat);
            csv_num(csv, rt);
            csv_num(csv, o->sat_per_gpu);
            csv_num(csv, ps);
            csv_num(csv, ds);
            csv_num(csv, o->admitted_per_gpu);
            fprintf(csv, "%s,", met ? "met" : "missed");
            csv_field(csv, met ? "" : p->gap);
            fputc(',', csv);
            csv_field(csv, p->source);
            fprintf(csv, ",%u,", o->tpot_requests);
            csv_num(csv, o->retractions);
            csv_num(csv, ho);
            csv_num(csv, hro);
            csv_num(csv, ht);
            csv_num(csv, hrt);
            fprintf(csv, "%s,", method_name(o->ci));
            char rin[48] = "";
            if (!o->random) strcat(rin, "none");
            if (o->random & DEP_RAND_SEL) strcat(rin, "selections");
            if (o->random & DEP_RAND_ACC) strcat(rin, *rin ? " acceptance" : "acceptance");
            if (o->random & DEP_RAND_LEN) strcat(rin, *rin ? " lengths" : "lengths");
            fprintf(csv, "%s,%u,%s%s%s\n", rin, o->runs, fo ? "output" : "", fo && ft ? " " : "", ft ? "tpot" : "");
        }
    }
    fprintf(f, "\n%zu of %zu points within targets (output and TPOT within +/-%.0f %%, saturation within %.0f request "
               "per GPU); sim = simulated, pub = published;\n"
               "sim run = requests running on the simulated GPU (mean), at the point's or the sweep's top concurrency;\n"
               "sim retr = requests retracted in the measured steps (admission = sglang; - where reserve_full admits);\n"
               "sim TPOT: over requests, as bench_serving (each (e2e - TTFT) / (tokens - 1), the first token at the\n"
               "prefill's end), of the requests that decoded within the measured steps; * marks a point where none\n"
               "did (TPOT per step instead).\n"
               "\xc2\xb1: 95 %% confidence half-width of the simulated figure (\xc2\xb1" "0.0: below the last decimal shown);\n"
               "a ratio's is it over the published figure (the sources state no uncertainty); ? after a ratio: the\n"
               "target's verdict, taken on the point estimate, differs somewhere inside the ratio's interval.\n"
               "The interval follows the point's random inputs (analysis/deploy.h):\n"
               "  none: exact       no random input (resident serving reads no selection, fixed lengths, no draft or\n"
               "                    acceptance of probability 1): the figures are exact for the configuration;\n"
               "  accept.: N seeds  the acceptance draws: N runs over [trace] seed, the figure their mean, Student's t\n"
               "                    over them; TPOT with one request in flight a scheduler, the pooled requests' median\n"
               "                    with its order-statistics (binomial) interval, half-width its larger side; else t\n"
               "                    over the runs' medians;\n"
               "  select.: in-run   the selection streams, one run (the table's costliest): batch means over the\n"
               "                    wave's steps, its trend removed by second differences (%u d.o.f.); no TPOT interval.\n",
            met_all, s->n, 100 * DEP_TARGET_RATIO, DEP_TARGET_SAT, stats_trend_dof(STATS_BATCHES));
    if (ferror(f) || (csv && ferror(csv))) return dh_err("cannot write the table");
    return 0;
}
