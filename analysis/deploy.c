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

/* One simulator run: point p at instance concurrency c. The point's own
 * overrides come after the workload's shape, so a file may still change any key. */
static int run_one(const dep_point *p, double c, sim_result *res, double *gpus)
{
    memset(res, 0, sizeof *res);
    char shape[8][64], own[sizeof p->sets];
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
        if (n >= DEP_MAX_SETS) return dh_err("%s: [sim] set: more than %d overrides", p->path, DEP_MAX_SETS - 8);
        sets[n++] = t;
    }
    pol_kind kind;
    if (pol_parse(p->policy, &kind) < 0) return dh_err_prefix("%s: [sim] policy: ", p->path);
    sim_config sc;
    if (sim_config_load(p->instance, sets, n, &sc) < 0) {
        sim_config_release(&sc);
        return dh_err_prefix("%s: ", p->path);
    }
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

/* One unit of work: run j of point i (j indexes the sweep; 0 without one). */
typedef struct {
    size_t point, run;
} dep_job;

typedef struct {
    const dep_set *s;
    dep_job *job;
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
        q->rc[i] = run_one(p, c, &q->res[i], &q->gpus[i]);
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

/* The published TPOT's statistic as bench_serving computes it (median_tpot_ms, mean_tpot_ms):
 * over requests, each its (e2e - TTFT) / (tokens - 1), here over the requests whose decoding
 * began in the measured steps and ended in the run; *n how many (0: none, the caller takes
 * the per-step figure). bench_serving's TTFT is the first streamed token, which SGLang samples
 * from the prefill's last forward: with colocated prefill that is the prefill's end, and the
 * TPOT spans the N - 1 decode iterations after it, with whatever ran between them (other
 * requests' prefills). The simulator emits all N tokens from decode steps after the prefill
 * (sim/reqlat.h), so the same spacing is (finish - prefill end) / N; under disaggregated
 * prefill (no prefill here) it is reqlat's TPOT. O(requests log requests). */
static double request_tpot(const sim_result *r, int mean, uint32_t *n)
{
    double *v = dh_calloc(r->n_req ? r->n_req : 1, sizeof *v);
    uint32_t k = 0;
    for (uint32_t i = 0; i < r->n_req; i++) {
        const reqlat_rec *x = &r->req[i];
        double t = reqlat_value(x, RL_TPOT);
        if (t >= 0 && x->prefill >= 0) t = (x->finish - x->prefill) / x->output;
        if (t >= 0 && x->first >= r->measured_from_s) v[k++] = t;
    }
    double out = -1;
    if (k) {
        qsort(v, k, sizeof *v, cmp_double);
        out = mean ? reqlat_mean(v, k) : reqlat_quantile(v, k, 0.5).v;
    }
    free(v);
    *n = k;
    return out;
}

int dep_simulate(const dep_set *s, int threads, dep_sim *out)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) n += s->p[i].n_sweep ? s->p[i].n_sweep : 1;
    dep_pool q = {.s = s, .n = n};
    q.job = dh_calloc(n, sizeof *q.job);
    q.res = dh_calloc(n, sizeof *q.res);
    q.gpus = dh_calloc(n, sizeof *q.gpus);
    q.rc = dh_calloc(n, sizeof *q.rc);
    q.err = dh_calloc(n, sizeof *q.err);
    for (size_t i = 0, k = 0; i < s->n; i++)
        for (size_t j = 0; j < (s->p[i].n_sweep ? s->p[i].n_sweep : 1); j++) q.job[k++] = (dep_job){i, j};
    pthread_mutex_init(&q.mu, NULL);
    cores_run_pool(threads < 1 ? 1 : threads > 16 ? 16 : threads, n, worker, &q);
    pthread_mutex_destroy(&q.mu);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (q.rc[i] < 0) rc = dh_err("%s", q.err[i]);
    /* Results in job order, so the figures do not depend on which thread ran what. */
    for (size_t k = 0; rc == 0 && k < n; k++) {
        const dep_point *p = &s->p[q.job[k].point];
        dep_sim *o = &out[q.job[k].point];
        const sim_result *r = &q.res[k];
        size_t j = q.job[k].run;
        if (j == 0) memset(o, 0, sizeof *o), o->sat_per_gpu = NAN;
        if (p->n_sweep) o->sweep_out[j] = r->tok_s_gpu * q.gpus[k];
        if (!p->n_sweep || j == p->n_sweep - 1) {
            o->output_per_gpu = r->tok_s_gpu;
            o->tpot_ms = 1e3 * request_tpot(r, !strcmp(p->tpot_stat, "mean"), &o->tpot_requests);
            if (o->tpot_requests == 0) o->tpot_ms = 1e3 * (!strcmp(p->tpot_stat, "mean") ? r->tpot_mean : r->tpot_p50);
            o->admitted_per_gpu = r->mean_active;
            o->retractions = r->has_retractions ? r->measured_retractions : NAN;
        }
        if (p->n_sweep && j == p->n_sweep - 1) o->sat_per_gpu = saturation(p->sweep_c, o->sweep_out, p->n_sweep, p->gpus);
    }
    for (size_t k = 0; k < n; k++)
        if (q.rc[k] == 0) sim_result_release(&q.res[k]);
    free(q.job);
    free(q.res);
    free(q.gpus);
    free(q.rc);
    free(q.err);
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

int dep_report(const dep_set *s, const dep_sim *r, FILE *f, FILE *csv)
{
    fprintf(f, "%-34s | %27s | %27s | %22s | %4s %5s | %s\n", "", "output tokens/s per GPU", "TPOT (ms)",
            "saturation (req/GPU)", "sim", "sim", "");
    fprintf(f, "%-34s | %8s %9s %8s | %8s %9s %8s | %6s %6s %8s | %4s %5s | %s\n", "point", "sim", "published", "ratio",
            "sim", "published", "ratio", "sim", "pub", "diff", "run", "retr", "gap");
    if (csv)
        fprintf(csv, "point,policy,sim_output_per_gpu,pub_output_per_gpu,output_bound,output_ratio,sim_tpot_ms,"
                     "pub_tpot_ms,tpot_stat,tpot_ratio,sim_saturation_per_gpu,pub_saturation_per_gpu,saturation_diff,"
                     "sim_admitted_per_gpu,targets,gap,source,sim_tpot_requests,sim_retractions\n");
    size_t met_all = 0;
    for (size_t i = 0; i < s->n; i++) {
        const dep_point *p = &s->p[i];
        const dep_sim *o = &r[i];
        double po = pub_output(p), ro = o->output_per_gpu / po;
        double pt = p->pub_tpot_ms, rt = isnan(pt) ? NAN : o->tpot_ms / pt;
        double ps = pub_saturation(p), ds = isnan(ps) ? NAN : o->sat_per_gpu - ps;
        double so = isnan(po) ? NAN : o->output_per_gpu, st = isnan(pt) ? NAN : o->tpot_ms;
        int met = (isnan(ro) || ratio_met(ro, p->output_lower)) && (isnan(rt) || ratio_met(rt, 0)) &&
                  (isnan(ds) || fabs(ds) <= DEP_TARGET_SAT);
        met_all += met;
        char c[10][32];
        cell(c[0], 32, "%.1f", so);
        cell(c[1], 32, p->output_lower ? ">%.1f" : "%.1f", po);
        cell(c[2], 32, "%.2fx", ro);
        cell(c[3], 32, o->tpot_requests || isnan(st) ? "%.2f" : "%.2f*", st);
        char fmt[16];
        snprintf(fmt, sizeof fmt, "%%.2f %s", p->tpot_stat);
        cell(c[4], 32, fmt, pt);
        cell(c[5], 32, "%.2fx", rt);
        cell(c[6], 32, "%.1f", o->sat_per_gpu);
        cell(c[7], 32, "%.1f", ps);
        cell(c[8], 32, "%+.1f", ds);
        cell(c[9], 32, "%.0f", o->retractions);
        fprintf(f, "%-34s | %8s %9s %8s | %8s %9s %8s | %6s %6s %8s | %4.1f %5s | %s\n", p->id, c[0], c[1], c[2], c[3],
                c[4], c[5], c[6], c[7], c[8], o->admitted_per_gpu, c[9], met ? "within targets" : p->gap);
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
            fputc('\n', csv);
        }
    }
    fprintf(f, "\n%zu of %zu points within targets (output and TPOT within +/-%.0f %%, saturation within %.0f request "
               "per GPU); sim = simulated, pub = published;\n"
               "sim run = requests running on the simulated GPU (mean), at the point's or the sweep's top concurrency;\n"
               "sim retr = requests retracted in the measured steps (admission = sglang; - where reserve_full admits);\n"
               "sim TPOT: over requests, as bench_serving (each (e2e - TTFT) / (tokens - 1), the first token at the\n"
               "prefill's end), of the requests that decoded within the measured steps; * marks a point where none\n"
               "did (TPOT per step instead).\n",
            met_all, s->n, 100 * DEP_TARGET_RATIO, DEP_TARGET_SAT);
    if (ferror(f) || (csv && ferror(csv))) return dh_err("cannot write the table");
    return 0;
}
