/* sim.c: the configuration, the classification of a step and the run
 * loop; see sim.h. The loop is admission (admit.h), classification (here,
 * one function for plain and speculative steps), the step's timing (step.h)
 * and its record handed to the metrics (metrics.h); the policy is only ever
 * reached through its operations (pol.h).
 *
 * Cost per step: O(requests x groups) bookkeeping plus the policy's work,
 * which is O(rows that changed) per (request, group) (hotbuf.h), plus
 * O(layers x micro-batches) events for the timing (step.h). IndexShare layers
 * are never simulated apart: one stream per (request, group). */
#include "sim/sim.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/path.h"
#include "sim/admit.h"
#include "sim/evq.h"
#include "sim/mbatch.h"
#include "sim/metrics.h"
#include "sim/res.h"
#include "sim/step.h"
#include "traces/gen.h"
#include "traces/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- config */

static int section_in(cfg *c, const char *sec) { return c && cfg_has_section(c, sec); }

/* The expert-parallel all-to-all cost: a bin/dha2a measurement for moe_ep
 * GPUs from the instance's a2a file when it has one, else the instance's
 * assumed moe_comm_s (split evenly between dispatch and combine) and
 * moe_comm_gbps. Either way sc->a2a_source says which, for the report. */
/* Every section and key of an all-to-all file is checked, whatever GPU count a run asks for:
 * [a2a] routing and dedup; [gpus.N.dispatch] and [gpus.N.combine] with a status of measured
 * (latency and bandwidth required) or unmeasured; an unknown section or key is an error. */
static int a2a_check(cfg *a, const char *full)
{
    const char *s;
    if (cfg_get_string(a, "a2a", "routing", &s, "random") < 0 || cfg_get_string(a, "a2a", "dedup", &s, "rank") < 0)
        return -1;
    for (size_t i = 0; i < cfg_section_count(a); i++) {
        const char *sec = cfg_section_name(a, i);
        if (!strcmp(sec, "a2a")) continue;
        unsigned gpus;
        char phase[16], tail;
        if (sscanf(sec, "gpus.%u.%15[a-z]%c", &gpus, phase, &tail) != 2 || gpus < 1 ||
            (strcmp(phase, "dispatch") != 0 && strcmp(phase, "combine") != 0))
            return dh_err("%s: section [%s] is not [a2a] or [gpus.N.dispatch|combine]", full, sec);
        const char *status;
        if (cfg_get_string(a, sec, "status", &status, NULL) < 0) return -1;
        int measured = !strcmp(status, "measured");
        if (!measured && strcmp(status, "unmeasured") != 0)
            return dh_err("%s: [%s] status = '%s' (expected measured or unmeasured)", full, sec, status);
        double v;
        long n;
        if (measured && (cfg_get_double(a, sec, "latency_us", &v, CFG_REQUIRED, 0, 1e6) < 0 ||
                         cfg_get_double(a, sec, "bandwidth_gbps", &v, CFG_REQUIRED, 1e-3, 1e6) < 0))
            return -1;
        const double none = -1;
        const long zero = 0;
        if (cfg_get_int(a, sec, "fit_points", &n, &zero, 0, 1000000) < 0 ||
            cfg_get_double(a, sec, "fit_max_rel_residual", &v, &none, -1, 1e6) < 0 ||
            cfg_get_string(a, sec, "device", &s, "") < 0)
            return -1;
        static const char *const figure[2] = { "latency_us", "bandwidth_gbps" };
        for (int f = 0; f < 2 && !measured; f++)
            if (cfg_has(a, sec, figure[f]) && strcmp(cfg_str(a, sec, figure[f]), "unmeasured") != 0)
                return dh_err("%s: [%s] is unmeasured but gives %s = '%s'", full, sec, figure[f],
                              cfg_str(a, sec, figure[f]));
    }
    return cfg_check_unused(a);
}

/* The expert-parallel all-to-all of moe_ep GPUs: the file's measurement for that GPU count
 * when it has one; the instance's assumed values otherwise (a count the file marks
 * unmeasured, or one it does not list), and the run says which it used. */
static int a2a_resolve(sim_config *sc, const char *path)
{
    for (int p = 0; p < 2; p++) {
        sc->a2a_lat_s[p] = sc->moe_comm_s / 2;
        sc->a2a_gbps[p] = sc->moe_comm_gbps;
    }
    snprintf(sc->a2a_source, sizeof sc->a2a_source, "assumed ([instance] moe_comm_s, moe_comm_gbps)");
    if (!*path || sc->moe_ep <= 1) return 0;
    char full[512];
    if (dh_path_find(path, full, sizeof full) < 0) return -1;
    cfg *a;
    if (cfg_load(full, &a) < 0) return -1;
    if (a2a_check(a, full) < 0) { cfg_free(a); return -1; }
    static const char *phase[2] = { "dispatch", "combine" };
    double lat[2], bw[2];
    int measured = 1, listed = 1;
    for (int p = 0; p < 2; p++) {
        char sec[64];
        snprintf(sec, sizeof sec, "gpus.%.0f.%s", sc->moe_ep, phase[p]);
        const char *status = cfg_str(a, sec, "status");
        if (!status) { listed = 0; measured = 0; continue; }
        if (strcmp(status, "measured") != 0) { measured = 0; continue; }
        lat[p] = strtod(cfg_str(a, sec, "latency_us"), NULL);
        bw[p] = strtod(cfg_str(a, sec, "bandwidth_gbps"), NULL);
    }
    cfg_free(a);
    if (!measured) {
        if (!listed)
            snprintf(sc->a2a_source, sizeof sc->a2a_source,
                     "assumed ([instance] moe_comm_s, moe_comm_gbps; %s lists no %g GPUs)", path, sc->moe_ep);
        return 0;
    }
    for (int p = 0; p < 2; p++) {
        sc->a2a_lat_s[p] = lat[p] * 1e-6;
        sc->a2a_gbps[p] = bw[p];
    }
    snprintf(sc->a2a_source, sizeof sc->a2a_source, "measured (%s, %g GPUs)", path, sc->moe_ep);
    return 0;
}

int sim_config_load(const char *instance_path, char *const *sets, int n_sets, sim_config *sc)
{
    memset(sc, 0, sizeof *sc);
    if (dh_path_find(instance_path, sc->inst_path, sizeof sc->inst_path) < 0) return -1;
    if (cfg_load(sc->inst_path, &sc->inst) < 0) return -1;
    cfg *c = sc->inst;
    /* Instance-file overrides first: they may change which model or hw file is used. */
    for (int i = 0; i < n_sets; i++) {
        const char *dot = strchr(sets[i], '.'), *eq = strchr(sets[i], '=');
        if (!dot || !eq || dot > eq) return dh_err("--set '%s': expected section.key=value", sets[i]);
        if (!strncmp(sets[i], "instance.", 9) && cfg_set_arg(c, sets[i]) < 0) return -1;
    }
    const char *mpath, *hpath;
    char buf[512];
    if (cfg_get_string(c, "instance", "model", &mpath, CFG_REQUIRED) < 0) return -1;
    if (cfg_get_string(c, "instance", "hw", &hpath, CFG_REQUIRED) < 0) return -1;
    if (dh_path_find(mpath, buf, sizeof buf) < 0) return -1;
    if (cfg_load(buf, &sc->model_cfgf) < 0) return -1;
    if (dh_path_find(hpath, buf, sizeof buf) < 0) return -1;
    if (cfg_load(buf, &sc->hw_cfgf) < 0) return -1;
    for (int i = 0; i < n_sets; i++) {
        if (!strncmp(sets[i], "instance.", 9)) continue;
        char sec[128];
        const char *dot = strchr(sets[i], '.');
        size_t n = (size_t)(dot - sets[i]);
        if (n >= sizeof sec) return dh_err("--set '%s': section name too long", sets[i]);
        memcpy(sec, sets[i], n);
        sec[n] = 0;
        cfg *dst = section_in(sc->model_cfgf, sec) ? sc->model_cfgf : section_in(sc->hw_cfgf, sec) ? sc->hw_cfgf : c;
        if (cfg_set_arg(dst, sets[i]) < 0) return -1;
    }
    if (model_load(sc->model_cfgf, &sc->model) < 0) return -1;
    if (cfg_check_unused(sc->model_cfgf) < 0) return -1;
    if (hw_load(sc->hw_cfgf, &sc->hw) < 0) return -1;
    if (cfg_check_unused(sc->hw_cfgf) < 0) return -1;
    if (wl_load(c, &sc->wl) < 0) return -1;
    struct { const char *key; double *dst, lo, hi; } d[] = {
        { "gpus", &sc->gpus, 1, 4096 },
        { "attention_dp", &sc->attention_dp, 1, 4096 },
        { "moe_ep", &sc->moe_ep, 1, 4096 },
        { "weights_per_gpu_bytes", &sc->weights_per_gpu, 0, 1e15 },
        { "workspace_bytes", &sc->workspace, 0, 1e15 },
        { "step_overhead_s", &sc->step_overhead_s, 0, 10 },
        { "moe_comm_s", &sc->moe_comm_s, 0, 10 },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfg_get_double(c, "instance", d[i].key, d[i].dst, CFG_REQUIRED, d[i].lo, d[i].hi) < 0) return -1;
    double no_bw = 0;
    if (cfg_get_double(c, "instance", "moe_comm_gbps", &sc->moe_comm_gbps, &no_bw, 0, 1e6) < 0) return -1;
    const char *a2a_path;
    if (cfg_get_string(c, "instance", "a2a", &a2a_path, "") < 0) return -1;
    if (a2a_resolve(sc, a2a_path) < 0) return -1;
    if (sc->attention_dp > sc->gpus || sc->moe_ep > sc->gpus)
        return dh_err("%s: [instance] attention_dp and moe_ep may not exceed gpus = %g", cfg_name(c), sc->gpus);
    long mb;
    if (cfg_get_int(c, "instance", "micro_batches", &mb, CFG_REQUIRED, 1, 64) < 0) return -1;
    sc->micro_batches = (uint32_t)mb;
    const char *pname;
    if (cfg_get_string(c, "policy", "name", &pname, "hisparse") < 0) return -1;
    if (pol_parse(pname, &sc->policy) < 0) return dh_err_prefix("%s: [policy] name: ", cfg_name(c));
    double two = 2, zero = 0;
    if (cfg_get_double(c, "policy", "hisparse_budget_k", &sc->hisparse_budget_k, &two, 1, 1e6) < 0) return -1;
    if (cfg_get_double(c, "policy", "adaptive_max_optional_k", &sc->adaptive_max_optional_k, &zero, 0, 1e9) < 0) return -1;
    const char *preset, *path;
    if (cfg_get_string(c, "trace", "preset", &preset, "") < 0) return -1;
    if (cfg_get_string(c, "trace", "path", &path, "") < 0) return -1;
    if (!*preset && !*path) return dh_err("%s: [trace] needs a preset or a path", cfg_name(c));
    if (*preset && *path) return dh_err("%s: [trace] has both a preset and a path; give one", cfg_name(c));
    snprintf(sc->preset, sizeof sc->preset, "%s", preset);
    snprintf(sc->trace_path, sizeof sc->trace_path, "%s", path);
    long seed, kf, one = 1, k64 = 64;
    if (cfg_get_int(c, "trace", "seed", &seed, &one, 0, 0x7FFFFFFFFFFFFFFFL) < 0) return -1;
    sc->seed = (uint64_t)seed;
    if (cfg_get_int(c, "trace", "keyframe_interval", &kf, &k64, 1, 1 << 20) < 0) return -1;
    sc->keyframe_interval = (uint32_t)kf;
    if (specrun_config_load(c, &sc->model, &sc->spec) < 0) return -1;
    if (cfg_check_unused(c) < 0) return -1;
    double expert_w = sc->model.moe_layers * (sc->model.experts / sc->moe_ep) * sc->model.expert_bytes;
    if (expert_w > sc->weights_per_gpu)
        return dh_err("%s: weights_per_gpu_bytes = %g is below the expert weights alone (%g = %u MoE layers x %g experts x %g B)",
                      cfg_name(c), sc->weights_per_gpu, expert_w, sc->model.moe_layers, sc->model.experts / sc->moe_ep, sc->model.expert_bytes);
    if (sc->weights_per_gpu + sc->workspace > sc->hw.hbm_bytes)
        return dh_err("%s: weights (%g B) and workspace (%g B) exceed the GPU's HBM (%g B)", cfg_name(c),
                      sc->weights_per_gpu, sc->workspace, sc->hw.hbm_bytes);
    return 0;
}

void sim_config_release(sim_config *sc)
{
    cfg_free(sc->inst);
    cfg_free(sc->model_cfgf);
    cfg_free(sc->hw_cfgf);
    model_release(&sc->model);
    specrun_config_release(&sc->spec);
    memset(sc, 0, sizeof *sc);
}

uint32_t sim_per_gpu(const sim_config *sc, double c)
{
    if (c <= 0) return 0;
    return (uint32_t)ceil(c / sc->attention_dp - 1e-9);
}

int sim_shape(const sim_config *sc, trace_shape *sh)
{
    if (model_shape(&sc->model, sh) < 0) return -1;
    uint32_t conc = sim_per_gpu(sc, sc->wl.concurrency);
    uint32_t n = wl_requests_needed(&sc->wl, conc, sc->attention_dp);
    sh->n_requests = n;
    sh->prompt_len = dh_calloc(n, sizeof *sh->prompt_len);
    sh->output_len = dh_calloc(n, sizeof *sh->output_len);
    wl_lengths(&sc->wl, sc->seed, n, sh->prompt_len, sh->output_len);
    return trace_shape_validate(sh);
}

int sim_open_source(const sim_config *sc, sel_source **out)
{
    if (*sc->trace_path) {
        char path[512];
        if (dh_path_find(sc->trace_path, path, sizeof path) < 0) return -1;
        if (trace_open(path, out) < 0) return -1;
        char what[600];
        snprintf(what, sizeof what, "trace '%s'", path);
        if (model_check_shape(&sc->model, &sel_meta(*out)->shape, what) < 0) {
            sel_source_free(*out);
            *out = NULL;
            return -1;
        }
        return 0;
    }
    gen_params *p;
    if (gen_params_load(sc->preset, &p) < 0) return -1;
    trace_shape sh;
    if (sim_shape(sc, &sh) < 0) { gen_params_free(p); return -1; }
    /* Runs of one workload (one per policy) generate each stream once. */
    int rc = gen_source_new_shared(p, &sh, sc->seed, sc->keyframe_interval, out);
    trace_shape_release(&sh);
    gen_params_free(p);
    return rc;
}

/* ---------------------------------------------------------------- the run */

typedef struct {
    const sim_config *sc;
    const pol_ops *pol;
    admit_state adm;          /* the ledger, the requests and their streams */
    uint32_t M;               /* micro-batches */
    mbatch mb;                /* this step's micro-batch tallies */
    step_ctx cx;
    res_server gpu, h2d, d2h; /* the servers the layer graph runs on */
    evq q;
    step_stats st;
    /* Speculative decoding (unused when plain): the plan, the union, the
     * union rows of this step and the bytes of a union row, per group. */
    specrun_slot *slot;       /* [requests] by active index; NULL: plain decoding */
    union_set u;
    double *urows, *rowb;     /* [groups] */
} run;

/* What one (request, group) brought to a step, plain or speculative. */
typedef struct {
    uint32_t nrows;           /* context rows at the base position */
    double sel;               /* selected rows summed over the step's queries */
    double fetched;           /* rows fetched */
    double base;              /* of them, those into the hot buffer; the rest go to the staging
                               * area, a launch of their own */
    uint32_t regions;         /* the base misses' host regions as counted (0: drawn) */
    uint32_t written;         /* rows written through */
    uint32_t union_rows;      /* speculative: |S_0 u ... u S_L| */
    double fetched_pq;        /* speculative, per-query retrieval: the per-query count */
} group_out;

/* The step's layer graph over the whole run: costs, SMs and the all-to-all. */
static void step_setup(step_ctx *cx, const sim_config *sc, const pol_ops *pol)
{
    const model_cfg *m = &sc->model;
    memset(cx, 0, sizeof *cx);
    cx->model = m;
    cx->hw = &sc->hw;
    cx->attention_dp = sc->attention_dp;
    cx->moe_ep = sc->moe_ep;
    cx->dense_bytes_per_layer = (sc->weights_per_gpu - m->moe_layers * (m->experts / sc->moe_ep) * m->expert_bytes) / m->n_layers;
    for (int p = 0; p < 2; p++) {
        cx->a2a_lat_s[p] = sc->a2a_lat_s[p];
        cx->a2a_gbps[p] = sc->a2a_gbps[p];
    }
    cx->a2a_ranks_per_token = cost_a2a_ranks(m->experts, m->experts_per_token, sc->moe_ep);
    /* The fetch kernel holds its SMs whenever a host tier exists. */
    cx->compute_sms = pol->host_tier ? sc->hw.sms - sc->hw.fetch_sms : sc->hw.sms;
    cx->queries = 1;
}

static int run_init(run *R, const sim_config *sc, const pol_ops *pol, sel_source *src)
{
    memset(R, 0, sizeof *R);
    R->sc = sc;
    R->pol = pol;
    R->M = sc->micro_batches;
    uint32_t G = sc->model.n_groups;
    mbatch_init(&R->mb, R->M, G);
    step_setup(&R->cx, sc, pol);
    res_init(&R->gpu, "gpu compute");
    res_init(&R->h2d, "fetch path (h2d)");
    res_init(&R->d2h, "write-through (d2h)");
    evq_init(&R->q);
    if (admit_init(&R->adm, sc, pol, src) < 0) return -1;
    if (sc->spec.mode) {
        R->slot = dh_calloc(R->adm.sh->n_requests, sizeof *R->slot);
        R->urows = dh_calloc(G, sizeof *R->urows);
        R->rowb = dh_calloc(G, sizeof *R->rowb);
        for (uint32_t g = 0; g < G; g++) R->rowb[g] = sc->model.group[g].kv_bytes_per_row;
        union_init(&R->u);
    }
    return 0;
}

static void run_release(run *R)
{
    admit_release(&R->adm);
    mbatch_release(&R->mb);
    evq_release(&R->q);
    if (R->slot) union_release(&R->u);
    free(R->slot);
    free(R->urows);
    free(R->rowb);
}

/* The host pages and 2 MB regions that misses missed rows of group g touch in a window of
 * nrows rows, added to pages[g] and regions_out[g]: regions as counted from the rows
 * themselves, or (regions 0) as a uniform draw inside the window. */
static void add_miss_extent(const hw_profile *hw, const model_cfg *m, uint32_t g, double *pages, double *regions_out,
                            double misses, uint32_t regions, double nrows)
{
    if (misses <= 0) return;
    const double rb = m->layer[m->group[g].first_layer].row_bytes;
    pages[g] += hw_window_pages(hw, misses, nrows, rb);
    regions_out[g] += regions ? regions : hw_window_regions(hw, misses, nrows, rb);
}

/* Group g of active request r at this step: its next position under the
 * policy (plain), or the verification of L drafts of which a are accepted
 * (speculative, specrun.h). */
static int step_group(run *R, uint32_t r, uint32_t g, uint32_t L, uint32_t a, group_out *o)
{
    admit_req *q = &R->adm.req[r];
    memset(o, 0, sizeof *o);
    if (!R->slot) {
        pol_out po;
        if (R->pol->next(&q->ps[g], R->adm.sh, &po) < 0) return -1;
        o->nrows = po.nrows;
        o->sel = po.n_sel;
        o->fetched = o->base = po.misses;
        o->regions = po.miss_regions;
        o->written = po.written;
        return 0;
    }
    specrun_out so;
    if (specrun_verify(&q->ps[g], R->adm.sh, q->ahead ? &q->ahead[g] : NULL, &R->u, L, a,
                       R->sc->spec.shared_retrieval, NULL, &so) < 0)
        return -1;
    o->nrows = so.nrows;
    o->sel = so.sel_sum;
    o->fetched = (double)so.fetched;
    o->base = so.base_misses < so.fetched ? (double)so.base_misses : (double)so.fetched;
    o->written = so.written;
    o->union_rows = so.union_rows;
    o->fetched_pq = (double)so.fetched_per_query;
    return 0;
}

/* The speculative plan of the active requests (slot i for active i). */
static void spec_plan(run *R, sim_tl_row *row)
{
    const admit_state *a = &R->adm;
    for (uint32_t i = 0; i < a->n_active; i++) {
        uint32_t r = a->active[i], pos = a->req[r].pos;
        R->slot[i] = (specrun_slot){ .req = r, .pos = pos, .ctx = (uint64_t)a->sh->prompt_len[r] + pos,
                                     .left = a->sh->output_len[r] - pos - 1 };
    }
    row->draft_s = specrun_plan(&R->sc->spec, &R->cx, R->sc->step_overhead_s, R->sc->seed, a->n_active, R->slot);
}

/* Classify the step, plain or speculative: every active request's groups
 * advanced under the policy, their counts added to the micro-batches (request
 * i goes to micro-batch i mod M) and to the step's record. */
static int classify(run *R, metrics_step *rec)
{
    const model_cfg *m = &R->sc->model;
    const admit_state *a = &R->adm;
    sim_tl_row *row = &rec->row;
    mbatch_clear(&R->mb);
    if (R->slot) {
        spec_plan(R, row);
        for (uint32_t g = 0; g < a->G; g++) R->urows[g] = 0;
    }
    double tokens = 0;
    for (uint32_t i = 0; i < a->n_active; i++) {
        uint32_t r = a->active[i];
        uint32_t L = R->slot ? R->slot[i].L : 0, acc = R->slot ? R->slot[i].a : 0;
        step_mb *b = &R->mb.mb[i % R->M];
        b->n_req += 1;
        b->tokens += L + 1.0;
        uint64_t ctx = (uint64_t)a->sh->prompt_len[r] + a->req[r].pos;
        b->window_rows += ctx < m->max_window ? (double)ctx : m->max_window;
        for (uint32_t g = 0; g < a->G; g++) {
            group_out o;
            if (step_group(R, r, g, L, acc, &o) < 0) return -1;
            const model_group *mg = &m->group[g];
            b->sel[g] += o.sel;
            b->miss[g] += o.fetched;
            b->idx_rows[g] += o.nrows;
            b->written[g] += o.written;
            b->stage[g] += o.fetched - o.base;
            add_miss_extent(&R->sc->hw, m, g, b->pages, b->regions, o.base, o.regions, o.nrows);
            add_miss_extent(&R->sc->hw, m, g, b->stage_pages, b->stage_regions, o.fetched - o.base, 0, o.nrows);
            row->selected += o.sel * mg->n_layers;
            row->missed += o.fetched * mg->n_layers;
            rec->miss_bytes += o.fetched * mg->kv_bytes_per_row;
            if (R->slot) {
                R->urows[g] += o.union_rows;
                row->union_rows += o.union_rows;
                row->fetched_pq += o.fetched_pq;
                row->fetched_rows += o.fetched;
            }
        }
        row->accepted += acc;
        row->verified += L;
        tokens += acc + 1.0;
    }
    row->tokens = tokens;
    if (R->slot && R->pol->host_tier)
        row->staging_bytes = union_staging_bytes(R->urows, R->rowb, a->G, R->sc->spec.staging_reuse);
    return 0;
}

/* The host history the gathers read from, for the profile's [fit_range]
 * check of fetch_pool_bytes (0: not checked). */
static double pool_bytes(const run *R)
{
    const model_cfg *m = &R->sc->model;
    const admit_state *a = &R->adm;
    if (!R->pol->host_tier || R->sc->hw.fit_idx[HW_FIT_FETCH_POOL_BYTES] < 0) return R->cx.pool_bytes;
    double pool = 0;
    for (uint32_t i = 0; i < a->n_active; i++) {
        uint64_t ctx = (uint64_t)a->sh->prompt_len[a->active[i]] + a->req[a->active[i]].pos;
        for (uint32_t g = 0; g < a->G; g++) {
            uint32_t c = m->group[g].compress;
            pool += (double)((ctx + c - 1) / c) * m->group[g].kv_bytes_per_row;
        }
    }
    return pool;
}

/* Every active request advances by the positions it committed (one, or the
 * accepted drafts + 1); finished ones leave, the others keep their order. */
static int advance(run *R)
{
    admit_state *a = &R->adm;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < a->n_active; i++) {
        uint32_t r = a->active[i];
        a->req[r].pos += R->slot ? R->slot[i].a + 1 : 1;
        if (a->req[r].pos >= a->sh->output_len[r]) {
            if (admit_finish(a, r) < 0) return -1;
        } else {
            a->active[kept++] = r;
        }
    }
    a->n_active = kept;
    return 0;
}

/* Admit at time *t; on an idle GPU wait for what can change that (the next
 * arrival, open loop; the next load change, step mode). 1: a step can run;
 * 0: the run is over; 2: nothing runs until *t (moved on); -1: an error,
 * among them a request that does not fit on an idle GPU. */
static int fill(run *R, double *t, uint32_t step)
{
    const wl_cfg *w = &R->sc->wl;
    admit_state *a = &R->adm;
    if (admit_fill(a, *t, step, w->steps) < 0) return -1;
    if (a->n_active > 0) return 1;
    if (a->next_req >= a->sh->n_requests) return 0;
    if (w->mode == WL_OPEN) {
        if (a->arrival[a->next_req] > *t) *t = a->arrival[a->next_req];
        if (admit_fill(a, *t, step, w->steps) < 0) return -1;
    } else if (w->mode == WL_STEP) {
        /* Concurrency is zero until the next load change. */
        double nt = wl_next_change(w, *t);
        if (nt < 0) return 0;
        *t = nt;
        return 2;
    } else {
        return 0;
    }
    if (a->n_active == 0)
        return dh_err("%s: request %u cannot be admitted on an idle GPU: it needs %.3g GB, %.3g GB are free",
                      R->pol->name, a->next_req, admit_need(a, a->next_req) / 1e9, ledger_free(&a->hbm) / 1e9);
    return 1;
}

/* One step from time t, once its requests are admitted: budgets, the
 * classification, the layer graph, and the record of it all in *rec (the
 * step's end in rec->row.t_end). 0 or -1. */
static int run_step(run *R, uint32_t step, double t, metrics_step *rec)
{
    const sim_config *sc = R->sc;
    admit_state *a = &R->adm;
    memset(rec, 0, sizeof *rec);
    if (admit_rebalance(a) < 0 || classify(R, rec) < 0) return -1;
    for (uint32_t g = 0; g < a->G; g++) rec->budget_rows += R->pol->budget(&a->env, g);
    rec->budget_rows /= a->G;
    if (admit_settle(a) < 0) return -1;
    R->cx.pool_bytes = pool_bytes(R);
    step_stats *st = &R->st;
    double fb0 = st->fetch_bytes, wb0 = st->write_bytes, fbusy0 = st->fetch_busy;
    double t_end = step_run(&R->cx, R->mb.mb, R->M, t + sc->step_overhead_s, &R->gpu, &R->h2d, &R->d2h, &R->q, st);
    sim_tl_row *row = &rec->row;
    row->step = step;
    row->t_start = t;
    row->t_end = t_end;
    row->active = a->n_active;
    row->admitted = a->admitted;
    row->fetch_bytes = st->fetch_bytes - fb0;
    row->write_bytes = st->write_bytes - wb0;
    row->fetch_busy = st->fetch_busy - fbusy0;
    row->optional_rows = a->env.optional_rows;
    memcpy(row->hbm, a->hbm.bytes, sizeof row->hbm);
    rec->overhead_s = sc->step_overhead_s;
    return 0;
}

int sim_run(const sim_config *sc, pol_kind policy, sel_source *src, sim_result *res)
{
    memset(res, 0, sizeof *res);
    const pol_ops *pol = pol_ops_of(policy);
    if (!pol) return dh_err("no policy of index %d is registered", (int)policy);
    if (model_check_shape(&sc->model, &sel_meta(src)->shape, "the selection source") < 0) return -1;
    if (sc->spec.mode && pol->no_spec)
        return dh_err("policy %s does not run with speculative decoding (%s); use [spec] mode = none", pol->name, pol->no_spec);
    metrics mt;
    metrics_init(&mt, sc->wl.steps, sc->wl.warmup_steps, sc->model.n_groups);
    run R;
    int rc = -1;
    if (run_init(&R, sc, pol, src) < 0) goto out;
    double t = 0;
    for (uint32_t step = 0; step < sc->wl.steps;) {
        if (sc->wl.max_time_s > 0 && t >= sc->wl.max_time_s) break;
        if (sc->wl.measure_tokens > 0 && mt.m_tokens >= sc->wl.measure_tokens) break;
        int go = fill(&R, &t, step);
        if (go < 0) goto out;
        if (go == 0) break;
        if (go == 2) continue; /* idle until t: the same step again */
        metrics_step rec;
        if (run_step(&R, step, t, &rec) < 0) goto out;
        metrics_add(&mt, &rec);
        t = rec.row.t_end;
        if (advance(&R) < 0) goto out;
        step++;
    }
    const admit_state *a = &R.adm;
    metrics_end end = { .sc = sc, .pol = pol, .t = t, .hbm = &a->hbm, .gpu = &R.gpu, .h2d = &R.h2d, .d2h = &R.d2h,
                        .st = &R.st, .admitted = a->admitted, .completed = a->completed, .unfinished = a->n_active,
                        .requests = a->sh->n_requests,
                        .budget_rows = pol->rebalance ? 0 : (uint32_t)pol->budget(&a->env, 0) };
    rc = metrics_finish(&mt, &end, res);
out:
    run_release(&R);
    metrics_release(&mt);
    return rc;
}

void sim_result_release(sim_result *r)
{
    free(r->tl);
    memset(r, 0, sizeof *r);
}
