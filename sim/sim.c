/* sim.c: configuration, admission, the step loop and the end-of-run
 * invariants; see sim.h.
 *
 * Cost per step: O(requests x groups) bookkeeping plus the policy's work,
 * which is O(rows that changed) per (request, group) (hotbuf.h), plus
 * O(layers x micro-batches) events for the timing (step.h). IndexShare layers
 * are never simulated apart: one stream per (request, group). */
#include "common/path.h"
#include "sim/sim.h"
#include "common/dh_err.h"
#include "sim/evq.h"
#include "sim/res.h"
#include "sim/step.h"
#include "traces/gen.h"
#include "traces/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- config */

static int section_in(cfg *c, const char *sec) { return c && cfg_has_section(c, sec); }

/* The expert-parallel all-to-all cost: a bin/dha2a measurement for moe_ep
 * GPUs from the instance's a2a file when it has one, else the instance's
 * assumed moe_comm_s (split evenly between dispatch and combine) and
 * moe_comm_gbps. Either way sc->a2a_source says which, for the report. */
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
    static const char *phase[2] = { "dispatch", "combine" };
    double lat[2], bw[2];
    int measured = 1, rc = 0;
    for (int p = 0; p < 2 && rc == 0; p++) {
        char sec[64];
        snprintf(sec, sizeof sec, "gpus.%.0f.%s", sc->moe_ep, phase[p]);
        const char *status = cfg_str(a, sec, "status");
        if (!status) { rc = dh_err("%s: no [%s] for moe_ep = %g GPUs", full, sec, sc->moe_ep); break; }
        if (strcmp(status, "measured") != 0) { measured = 0; continue; }
        if (cfg_get_double(a, sec, "latency_us", &lat[p], CFG_REQUIRED, 0, 1e6) < 0 ||
            cfg_get_double(a, sec, "bandwidth_gbps", &bw[p], CFG_REQUIRED, 1e-3, 1e6) < 0)
            rc = -1;
    }
    cfg_free(a);
    if (rc < 0 || !measured) return rc;
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
    sh->prompt_len = malloc(n * sizeof(uint32_t));
    sh->output_len = malloc(n * sizeof(uint32_t));
    if (!sh->prompt_len || !sh->output_len) abort();
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

/* ---------------------------------------------------------------- run state */

typedef struct {
    int state;                 /* 0 waiting, 1 active, 2 done */
    uint32_t pos;              /* decode positions done */
    double res_indexer, res_protected, res_optional; /* ledger reservations */
    double res_draft, res_staging;                   /* speculative: draft ring, staging */
    pol_stream *ps;            /* [groups] */
    union_ahead *ahead;       /* [groups] speculative: positions read beyond the committed one */
} req_state;

typedef struct {
    const sim_config *sc;
    pol_kind policy;
    sel_source *src;
    const trace_shape *sh;
    uint32_t G, M;
    mem_ledger hbm;
    req_state *req;
    uint32_t *active, n_active, next_req;
    uint32_t admitted, completed;
    uint32_t *budget;          /* [groups] fixed budget B (hisparse, oracle) */
    uint32_t optional_rows;    /* adaptive E */
    belady_work *bw;
    uint32_t step, steps;
    double *arrival;
    /* Speculative decoding (NULL when plain): per-step plan and the union. */
    uint32_t *adv;             /* [requests] positions a request advances this step */
    uint32_t *sp_req, *sp_pos, *sp_left, *sp_L, *sp_a; /* [requests] by active slot */
    uint64_t *sp_ctx;
    double *sp_urows, *sp_rowb; /* [groups] union rows this step; bytes per union row */
    union_set u;
} run;

/* Speculative totals over the measured steps. */
typedef struct {
    double req_steps, accepted, verified, union_rows, union_n, fetched, fetched_pq;
    double draft_s, step_s, overhead_s, staging_peak;
} spec_tally;

static double rows_for(const run *R, uint32_t g, uint64_t tokens)
{
    uint32_t c = R->sc->model.group[g].compress;
    return (double)((tokens + c - 1) / c);
}

/* Ledger reservations of request r when admitted: indexer keys for its final
 * length, and KV per the policy (resident: every row; others: the protected
 * k rows per group plus the fixed budget's remaining slots). */
static void reservations(const run *R, uint32_t r, double *idx, double *prot, double *opt)
{
    const model_cfg *m = &R->sc->model;
    uint64_t final_tokens = (uint64_t)R->sh->prompt_len[r] + R->sh->output_len[r];
    *idx = *prot = *opt = 0;
    for (uint32_t g = 0; g < R->G; g++) {
        double rows = rows_for(R, g, final_tokens);
        *idx += m->group[g].indexer_bytes_per_row * rows;
        if (R->policy == POL_RESIDENT) {
            *prot += m->group[g].kv_bytes_per_row * rows;
        } else {
            *prot += m->group[g].kv_bytes_per_row * m->group[g].k;
            if (R->policy != POL_ADAPTIVE)
                *opt += m->group[g].kv_bytes_per_row * (double)(R->budget[g] - m->group[g].k);
        }
    }
    /* Window layers keep their window resident under every policy. */
    *prot += m->window_bytes_per_token_row * m->max_window;
}

static double optional_bytes_now(const run *R)
{
    const model_cfg *m = &R->sc->model;
    double b = 0;
    for (uint32_t i = 0; i < R->n_active; i++) {
        req_state *q = &R->req[R->active[i]];
        for (uint32_t g = 0; g < R->G; g++) {
            uint32_t res = q->ps[g].buf.n_resident, k = m->group[g].k;
            if (res > k) b += (double)(res - k) * m->group[g].kv_bytes_per_row;
        }
    }
    return b;
}

/* Adaptive: spread the HBM that is not otherwise used evenly, in rows, over
 * every (request, group) of the active requests plus `extra` requests about
 * to be admitted needing `extra_bytes`; shrinking budgets evicts LRU-first. */
static int adaptive_rebalance(run *R, double extra_bytes, uint32_t extra_req)
{
    const model_cfg *m = &R->sc->model;
    double others = R->hbm.total - R->hbm.bytes[MEM_OPTIONAL];
    double avail = R->hbm.capacity - others - extra_bytes;
    double per_req = 0;
    for (uint32_t g = 0; g < R->G; g++) per_req += m->group[g].kv_bytes_per_row;
    double denom = per_req * (R->n_active + extra_req);
    double e = denom > 0 && avail > 0 ? floor(avail / denom) : 0;
    if (e > 4e9) e = 4e9;
    R->optional_rows = (uint32_t)e;
    for (uint32_t i = 0; i < R->n_active; i++) {
        req_state *q = &R->req[R->active[i]];
        for (uint32_t g = 0; g < R->G; g++) {
            double cap = R->sc->adaptive_max_optional_k > 0 ? floor(R->sc->adaptive_max_optional_k * m->group[g].k) : 4e9;
            double eg = e < cap ? e : cap;
            double b = m->group[g].k + eg;
            hotbuf_set_budget(&q->ps[g].buf, b > 4e9 ? 4000000000u : (uint32_t)b);
        }
    }
    return ledger_set(&R->hbm, MEM_OPTIONAL, optional_bytes_now(R));
}

static int try_admit(run *R, uint32_t r, int *admitted)
{
    double idx, prot, opt, drf, stg;
    reservations(R, r, &idx, &prot, &opt);
    specrun_reservation(&R->sc->spec, &R->sc->model, (uint64_t)R->sh->prompt_len[r] + R->sh->output_len[r], &drf, &stg);
    if (R->policy == POL_RESIDENT) stg = 0; /* every row is on the GPU: verification reads in place */
    double need = idx + prot + opt + drf + stg;
    double others = R->hbm.total - (R->policy == POL_ADAPTIVE ? R->hbm.bytes[MEM_OPTIONAL] : 0);
    *admitted = 0;
    if (others + need > R->hbm.capacity) return 0;
    if (R->policy == POL_ADAPTIVE && adaptive_rebalance(R, need, 1) < 0) return -1;
    req_state *q = &R->req[r];
    if (ledger_charge(&R->hbm, MEM_INDEXER, idx) < 0 || ledger_charge(&R->hbm, MEM_PROTECTED, prot) < 0 ||
        ledger_charge(&R->hbm, MEM_OPTIONAL, opt) < 0 || ledger_charge(&R->hbm, MEM_DRAFT, drf) < 0 ||
        ledger_charge(&R->hbm, MEM_STAGING, stg) < 0)
        return -1;
    q->res_draft = drf;
    q->res_staging = stg;
    q->res_indexer = idx;
    q->res_protected = prot;
    q->res_optional = opt;
    q->ps = calloc(R->G, sizeof *q->ps);
    if (!q->ps) abort();
    /* Hisparse and oracle compute ahead; under plain decoding a request
     * advances one position per step, so the run can use at most this many. */
    uint32_t horizon = R->sh->output_len[r];
    if (R->steps - R->step < horizon) horizon = R->steps - R->step;
    /* Speculative decoding replays each stream one position at a time through
     * a live hot buffer (specrun.h): hisparse opens the adaptive kind of
     * stream with its fixed budget, which is never rebalanced. */
    pol_kind open_kind = R->sc->spec.mode && R->policy == POL_HISPARSE ? POL_ADAPTIVE : R->policy;
    if (R->sc->spec.mode && R->policy != POL_RESIDENT) {
        q->ahead = calloc(R->G, sizeof *q->ahead);
        if (!q->ahead) abort();
        for (uint32_t g = 0; g < R->G; g++) union_ahead_init(&q->ahead[g], R->sc->spec.draft->gamma + 1);
    }
    for (uint32_t g = 0; g < R->G; g++) {
        uint32_t b = R->policy == POL_ADAPTIVE ? R->sc->model.group[g].k + R->optional_rows : R->budget[g];
        /* The misses' host regions: [gather] region_bytes over the group's row size. */
        const double rb = R->sc->model.layer[R->sc->model.group[g].first_layer].row_bytes;
        const double rpr = R->sc->hw.region_bytes > 0 && rb > 0 ? R->sc->hw.region_bytes / rb : 0;
        if (pol_stream_open(&q->ps[g], open_kind, R->src, R->sh, r, g, b, horizon, R->bw, rpr) < 0) {
            for (uint32_t j = 0; j < g; j++) pol_stream_close(&q->ps[j]);
            free(q->ps);
            q->ps = NULL;
            return -1;
        }
    }
    q->state = 1;
    q->pos = 0;
    R->active[R->n_active++] = r;
    R->admitted++;
    *admitted = 1;
    return 0;
}

static int finish_request(run *R, uint32_t r)
{
    req_state *q = &R->req[r];
    for (uint32_t g = 0; g < R->G; g++) pol_stream_close(&q->ps[g]);
    free(q->ps);
    q->ps = NULL;
    if (q->ahead) {
        for (uint32_t g = 0; g < R->G; g++) union_ahead_release(&q->ahead[g]);
        free(q->ahead);
        q->ahead = NULL;
    }
    q->state = 2;
    R->completed++;
    if (ledger_charge(&R->hbm, MEM_INDEXER, -q->res_indexer) < 0 || ledger_charge(&R->hbm, MEM_PROTECTED, -q->res_protected) < 0 ||
        ledger_charge(&R->hbm, MEM_OPTIONAL, -q->res_optional) < 0 || ledger_charge(&R->hbm, MEM_DRAFT, -q->res_draft) < 0 ||
        ledger_charge(&R->hbm, MEM_STAGING, -q->res_staging) < 0)
        return -1;
    return 0;
}

static int admit(run *R, double now)
{
    const wl_cfg *w = &R->sc->wl;
    uint32_t target = sim_per_gpu(R->sc, wl_target(w, now));
    while (R->n_active < target && R->next_req < R->sh->n_requests) {
        if (w->mode == WL_OPEN && R->arrival[R->next_req] > now) break;
        int ok;
        if (try_admit(R, R->next_req, &ok) < 0) return -1;
        if (!ok) break;
        R->next_req++;
    }
    return 0;
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

/* One speculative step's plan and classification (specrun.h): acceptance and
 * verify lengths, then every (request, group) verified and committed; the
 * micro-batches get the queries, selections, fetched union rows and written
 * rows. Returns the tokens the step emits. */
static int spec_classify(run *R, step_ctx *cx, step_mb *mb, double *step_sel, double *step_miss,
                         double *miss_bytes, sim_tl_row *row, double *tokens)
{
    const sim_config *sc = R->sc;
    const specrun_cfg *sp = &sc->spec;
    const model_cfg *m = &sc->model;
    const trace_shape *sh = R->sh;
    uint32_t n = R->n_active;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = R->active[i];
        R->sp_req[i] = r;
        R->sp_pos[i] = R->req[r].pos;
        R->sp_ctx[i] = (uint64_t)sh->prompt_len[r] + R->req[r].pos;
        R->sp_left[i] = sh->output_len[r] - R->req[r].pos - 1;
    }
    row->draft_s = specrun_plan(sp, cx, sc->step_overhead_s, sc->seed, n, R->sp_req, R->sp_pos, R->sp_ctx,
                                R->sp_left, R->sp_L, R->sp_a);
    for (uint32_t g = 0; g < R->G; g++) R->sp_urows[g] = 0;
    *tokens = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = R->active[i];
        req_state *qs = &R->req[r];
        step_mb *b = &mb[i % R->M];
        uint32_t L = R->sp_L[i], a = R->sp_a[i];
        b->n_req += 1;
        b->tokens += L + 1.0;
        uint64_t ctx = R->sp_ctx[i];
        b->window_rows += ctx < m->max_window ? (double)ctx : m->max_window;
        for (uint32_t g = 0; g < R->G; g++) {
            specrun_out o;
            if (specrun_verify(&qs->ps[g], sh, qs->ahead ? &qs->ahead[g] : NULL, &R->u, L, a, sp->shared_retrieval, NULL, &o) < 0)
                return -1;
            const model_group *mg = &m->group[g];
            b->sel[g] += o.sel_sum;
            b->miss[g] += (double)o.fetched;
            b->idx_rows[g] += o.nrows;
            b->written[g] += R->policy == POL_RESIDENT ? 0 : o.written;
            /* Two launches per layer: the base position's misses into the hot buffer, the
             * other union rows into the staging area. */
            const double base = o.base_misses < o.fetched ? (double)o.base_misses : (double)o.fetched;
            b->stage[g] += (double)o.fetched - base;
            add_miss_extent(&sc->hw, m, g, b->pages, b->regions, base, 0, o.nrows);
            add_miss_extent(&sc->hw, m, g, b->stage_pages, b->stage_regions, (double)o.fetched - base, 0, o.nrows);
            *step_sel += o.sel_sum * mg->n_layers;
            *step_miss += (double)o.fetched * mg->n_layers;
            *miss_bytes += (double)o.fetched * mg->kv_bytes_per_row;
            R->sp_urows[g] += o.union_rows;
            row->union_rows += o.union_rows;
            row->fetched_pq += (double)o.fetched_per_query;
            row->fetched_rows += (double)o.fetched;
        }
        row->accepted += a;
        row->verified += L;
        R->adv[r] = a + 1;
        *tokens += a + 1.0;
    }
    row->staging_bytes = R->policy == POL_RESIDENT ? 0 :
        union_staging_bytes(R->sp_urows, R->sp_rowb, R->G, sp->staging_reuse);
    return 0;
}

static int cmp_dur(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Token-weighted quantile of step durations (every token of a step waited the whole step). */
static double quantile(const double *pairs, uint32_t n, double total, double q)
{
    double want = q * total, acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += pairs[2 * i + 1];
        if (acc >= want) return pairs[2 * i];
    }
    return n ? pairs[2 * (n - 1)] : 0;
}

int sim_run(const sim_config *sc, pol_kind policy, sel_source *src, sim_result *res)
{
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    memset(res, 0, sizeof *res);
    const model_cfg *m = &sc->model;
    const trace_shape *sh = &sel_meta(src)->shape;
    if (model_check_shape(m, sh, "the selection source") < 0) return -1;
    const specrun_cfg *sp = &sc->spec;
    if (sp->mode && policy == POL_ORACLE)
        return dh_err("policy oracle does not run with speculative decoding (Belady over verification unions is not modelled); use [spec] mode = none");
    run R;
    memset(&R, 0, sizeof R);
    R.sc = sc;
    R.policy = policy;
    R.src = src;
    R.sh = sh;
    R.G = m->n_groups;
    R.M = sc->micro_batches;
    R.steps = sc->wl.steps;
    ledger_init(&R.hbm, sc->hw.hbm_bytes);
    int rc = -1;
    R.req = calloc(sh->n_requests, sizeof *R.req);
    R.active = calloc(sh->n_requests, sizeof *R.active);
    R.budget = calloc(R.G, sizeof *R.budget);
    R.arrival = calloc(sh->n_requests, sizeof *R.arrival);
    R.bw = belady_work_new();
    res->tl = calloc(R.steps, sizeof *res->tl);
    step_mb *mb = calloc(R.M, sizeof *mb);
    double *mbuf = calloc((size_t)R.M * R.G * STEP_MB_ARRAYS, sizeof *mbuf);
    double *durs = calloc(2 * (size_t)R.steps, sizeof *durs);
    if (!R.req || !R.active || !R.budget || !R.arrival || !res->tl || !mb || !mbuf || !durs) abort();
    for (uint32_t i = 0; i < R.M; i++) {
        double *b = mbuf + (size_t)i * R.G * STEP_MB_ARRAYS;
        mb[i].sel = b; mb[i].miss = b + R.G; mb[i].pages = b + 2 * R.G;
        mb[i].idx_rows = b + 3 * R.G; mb[i].written = b + 4 * R.G; mb[i].regions = b + 5 * R.G;
        mb[i].stage = b + 6 * R.G; mb[i].stage_pages = b + 7 * R.G; mb[i].stage_regions = b + 8 * R.G;
    }
    for (uint32_t g = 0; g < R.G; g++) {
        double b = ceil(sc->hisparse_budget_k * m->group[g].k);
        R.budget[g] = (uint32_t)b;
    }
    if (sc->wl.mode == WL_OPEN) wl_arrivals(&sc->wl, sc->seed, sc->attention_dp, sh->n_requests, R.arrival);
    if (ledger_charge(&R.hbm, MEM_WEIGHTS, sc->weights_per_gpu) < 0 || ledger_charge(&R.hbm, MEM_WORKSPACE, sc->workspace) < 0)
        goto out;
    if (sp->mode) {
        size_t n = sh->n_requests ? sh->n_requests : 1;
        R.adv = calloc(n, sizeof *R.adv);
        R.sp_req = calloc(5 * n, sizeof *R.sp_req);
        R.sp_ctx = calloc(n, sizeof *R.sp_ctx);
        R.sp_urows = calloc(2 * (size_t)R.G, sizeof *R.sp_urows);
        if (!R.adv || !R.sp_req || !R.sp_ctx || !R.sp_urows) abort();
        R.sp_pos = R.sp_req + n; R.sp_left = R.sp_req + 2 * n; R.sp_L = R.sp_req + 3 * n; R.sp_a = R.sp_req + 4 * n;
        R.sp_rowb = R.sp_urows + R.G;
        for (uint32_t g = 0; g < R.G; g++) R.sp_rowb[g] = m->group[g].kv_bytes_per_row;
        union_init(&R.u);
        /* The draft's weights live on every GPU that drafts (its shard). */
        if (ledger_charge(&R.hbm, MEM_WEIGHTS, spec_weight_bytes_per_gpu(sp->draft)) < 0)
            { dh_err_prefix("draft '%s' weights: ", sp->draft->name); goto out; }
    }
    spec_tally spt;
    memset(&spt, 0, sizeof spt);
    double budget_sum = 0;

    step_ctx cx;
    memset(&cx, 0, sizeof cx);
    cx.model = m;
    cx.hw = &sc->hw;
    cx.attention_dp = sc->attention_dp;
    cx.moe_ep = sc->moe_ep;
    cx.dense_bytes_per_layer = (sc->weights_per_gpu - m->moe_layers * (m->experts / sc->moe_ep) * m->expert_bytes) / m->n_layers;
    for (int p = 0; p < 2; p++) {
        cx.a2a_lat_s[p] = sc->a2a_lat_s[p];
        cx.a2a_gbps[p] = sc->a2a_gbps[p];
    }
    cx.a2a_ranks_per_token = cost_a2a_ranks(m->experts, m->experts_per_token, sc->moe_ep);
    /* The fetch kernel holds its SMs whenever a host tier exists. */
    cx.compute_sms = policy == POL_RESIDENT ? sc->hw.sms : sc->hw.sms - sc->hw.fetch_sms;
    cx.queries = 1;
    res_server gpu, h2d, d2h;
    res_init(&gpu, "gpu compute");
    res_init(&h2d, "fetch path (h2d)");
    res_init(&d2h, "write-through (d2h)");
    evq q;
    evq_init(&q);
    step_stats st;
    memset(&st, 0, sizeof st);

    double t = 0, sel_total = 0, miss_total = 0, miss_bytes = 0, active_sum = 0, opt_sum = 0;
    double hbm_sum[MEM_N_CATEGORIES] = { 0 };
    double m_tokens = 0, m_time = 0, m_sel = 0, m_miss = 0;
    uint32_t n_durs = 0;
    for (R.step = 0; R.step < R.steps; R.step++) {
        if (sc->wl.max_time_s > 0 && t >= sc->wl.max_time_s) break;
        if (admit(&R, t) < 0) goto out_q;
        if (R.n_active == 0) {
            if (sc->wl.mode == WL_OPEN && R.next_req < sh->n_requests) {
                t = R.arrival[R.next_req] > t ? R.arrival[R.next_req] : t;
                if (admit(&R, t) < 0) goto out_q;
            } else if (sc->wl.mode == WL_STEP && R.next_req < sh->n_requests) {
                /* Concurrency is zero until the next load change. */
                double nt = -1;
                for (uint32_t i = 0; i < sc->wl.n_load; i++)
                    if (sc->wl.load_time[i] > t) { nt = sc->wl.load_time[i]; break; }
                if (nt < 0) break;
                t = nt;
                R.step--;
                continue;
            } else {
                break;
            }
            if (R.n_active == 0) {
                uint32_t r = R.next_req;
                double idx, prot, opt;
                reservations(&R, r, &idx, &prot, &opt);
                dh_err("%s: request %u cannot be admitted on an idle GPU: it needs %.3g GB, %.3g GB are free",
                       pol_name[policy], r, (idx + prot + opt) / 1e9, ledger_free(&R.hbm) / 1e9);
                goto out_q;
            }
        }
        if (policy == POL_ADAPTIVE && adaptive_rebalance(&R, 0, 0) < 0) goto out_q;
        /* Classify every (request, group) position. */
        memset(mbuf, 0, (size_t)R.M * R.G * STEP_MB_ARRAYS * sizeof *mbuf);
        for (uint32_t i = 0; i < R.M; i++) { mb[i].n_req = mb[i].tokens = mb[i].window_rows = 0; }
        double step_sel = 0, step_miss = 0, step_tokens = R.n_active;
        sim_tl_row *row = &res->tl[res->n_tl];
        memset(row, 0, sizeof *row);
        if (sp->mode) {
            if (spec_classify(&R, &cx, mb, &step_sel, &step_miss, &miss_bytes, row, &step_tokens) < 0) goto out_q;
        } else {
            for (uint32_t i = 0; i < R.n_active; i++) {
                uint32_t r = R.active[i];
                req_state *qs = &R.req[r];
                step_mb *b = &mb[i % R.M];
                b->n_req += 1;
                b->tokens += cx.queries;
                uint64_t ctx = (uint64_t)sh->prompt_len[r] + qs->pos;
                b->window_rows += ctx < m->max_window ? (double)ctx : m->max_window;
                for (uint32_t g = 0; g < R.G; g++) {
                    pol_out o;
                    if (pol_stream_next(&qs->ps[g], sh, &o) < 0) goto out_q;
                    const model_group *mg = &m->group[g];
                    b->sel[g] += o.n_sel;
                    b->miss[g] += o.misses;
                    b->idx_rows[g] += o.nrows;
                    b->written[g] += policy == POL_RESIDENT ? 0 : o.written;
                    add_miss_extent(&sc->hw, m, g, b->pages, b->regions, o.misses, o.miss_regions, o.nrows);
                    step_sel += (double)o.n_sel * mg->n_layers;
                    step_miss += (double)o.misses * mg->n_layers;
                    miss_bytes += (double)o.misses * mg->kv_bytes_per_row;
                }
            }
        }
        {
            /* The hot budget per (request, group) this step. */
            double bsum = 0;
            for (uint32_t g = 0; g < R.G; g++) {
                double cap = sc->adaptive_max_optional_k > 0 ? floor(sc->adaptive_max_optional_k * m->group[g].k) : 4e9;
                double e = R.optional_rows < cap ? R.optional_rows : cap;
                bsum += policy == POL_ADAPTIVE ? m->group[g].k + e : policy == POL_RESIDENT ? 0 : R.budget[g];
            }
            budget_sum += bsum / R.G;
        }
        if (policy == POL_ADAPTIVE && ledger_set(&R.hbm, MEM_OPTIONAL, optional_bytes_now(&R)) < 0) goto out_q;
        double fb0 = st.fetch_bytes, wb0 = st.write_bytes, fbusy0 = st.fetch_busy;
        if (policy != POL_RESIDENT && sc->hw.fit_idx[HW_FIT_FETCH_POOL_BYTES] >= 0) {
            /* The host history the gathers read from, for the [fit_range] check. */
            double pool = 0;
            for (uint32_t i = 0; i < R.n_active; i++) {
                uint64_t ctx = (uint64_t)sh->prompt_len[R.active[i]] + R.req[R.active[i]].pos;
                for (uint32_t g = 0; g < R.G; g++) pool += rows_for(&R, g, ctx) * m->group[g].kv_bytes_per_row;
            }
            cx.pool_bytes = pool;
        }
        double t0 = t + sc->step_overhead_s;
        double t_end = step_run(&cx, mb, R.M, t0, &gpu, &h2d, &d2h, &q, &st);
        res->n_tl++;
        row->step = R.step;
        row->t_start = t;
        row->t_end = t_end;
        row->active = R.n_active;
        row->tokens = step_tokens;
        row->admitted = R.admitted;
        row->selected = step_sel;
        row->missed = step_miss;
        row->fetch_bytes = st.fetch_bytes - fb0;
        row->write_bytes = st.write_bytes - wb0;
        row->fetch_busy = st.fetch_busy - fbusy0;
        row->optional_rows = policy == POL_ADAPTIVE ? R.optional_rows : 0;
        for (int c = 0; c < MEM_N_CATEGORIES; c++) { row->hbm[c] = R.hbm.bytes[c]; hbm_sum[c] += R.hbm.bytes[c]; }
        sel_total += step_sel;
        miss_total += step_miss;
        active_sum += R.n_active;
        opt_sum += row->optional_rows;
        res->tokens += step_tokens;
        if (R.step >= sc->wl.warmup_steps) {
            m_tokens += step_tokens;
            m_time += t_end - t;
            m_sel += step_sel;
            m_miss += step_miss;
            /* Per-token latency: the step over the tokens each request emitted in it
             * (one in plain decoding; accepted + 1 on average when speculative). */
            durs[2 * n_durs] = (t_end - t) * R.n_active / step_tokens;
            durs[2 * n_durs + 1] = step_tokens;
            n_durs++;
            if (sp->mode) {
                spt.req_steps += R.n_active;
                spt.accepted += row->accepted;
                spt.verified += row->verified;
                spt.union_rows += row->union_rows;
                spt.union_n += (double)R.n_active * R.G;
                spt.fetched += row->fetched_rows;
                spt.fetched_pq += row->fetched_pq;
                spt.draft_s += row->draft_s;
                spt.step_s += t_end - t;
                spt.overhead_s += sc->step_overhead_s;
            }
        }
        if (row->staging_bytes > spt.staging_peak) spt.staging_peak = row->staging_bytes;
        t = t_end;
        /* Advance; finished requests leave (order of the others is kept). */
        uint32_t kept = 0;
        for (uint32_t i = 0; i < R.n_active; i++) {
            uint32_t r = R.active[i];
            R.req[r].pos += R.adv ? R.adv[r] : 1;
            if (R.req[r].pos >= sh->output_len[r]) {
                if (finish_request(&R, r) < 0) goto out_q;
            } else {
                R.active[kept++] = r;
            }
        }
        R.n_active = kept;
    }
    /* The run ends when the last write-through has landed. */
    double t_final = t;
    if (d2h.free_at > t_final) t_final = d2h.free_at;
    if (h2d.free_at > t_final) t_final = h2d.free_at;
    if (gpu.free_at > t_final) t_final = gpu.free_at;

    /* Invariants. */
    if (R.hbm.peak_total > R.hbm.capacity) { dh_err("invariant: HBM peak %.0f B above capacity %.0f B", R.hbm.peak_total, R.hbm.capacity); goto out_q; }
    if (fabs(h2d.bytes - miss_bytes) > 1e-9 * (miss_bytes + 1)) {
        dh_err("invariant: %.0f bytes fetched but missed rows x row bytes = %.0f", h2d.bytes, miss_bytes);
        goto out_q;
    }
    if (res_check(&gpu, t_final) < 0 || res_check(&h2d, t_final) < 0 || res_check(&d2h, t_final) < 0) goto out_q;
    uint32_t unfinished = R.n_active;
    if (R.admitted != R.completed + unfinished) {
        dh_err("invariant: %u requests admitted, %u completed, %u unfinished", R.admitted, R.completed, unfinished);
        goto out_q;
    }
    if (policy == POL_RESIDENT && miss_total != 0) { dh_err("invariant: resident fetched %.0f rows", miss_total); goto out_q; }

    snprintf(res->policy, sizeof res->policy, "%s", pol_name[policy]);
    snprintf(res->model, sizeof res->model, "%s", m->name);
    snprintf(res->hw, sizeof res->hw, "%s", sc->hw.name);
    snprintf(res->source, sizeof res->source, "%s", *sc->trace_path ? sc->trace_path : sc->preset);
    snprintf(res->a2a, sizeof res->a2a, "%s", sc->a2a_source);
    res->concurrency = sc->wl.concurrency;
    res->per_gpu = sim_per_gpu(sc, sc->wl.concurrency);
    res->steps = res->n_tl;
    res->measured_steps = n_durs;
    res->sim_time = t_final;
    res->measured_time = m_time;
    res->measured_tokens = m_tokens;
    res->tok_s_gpu = m_time > 0 ? m_tokens / m_time : 0;
    qsort(durs, n_durs, 2 * sizeof *durs, cmp_dur);
    res->tpot_p50 = quantile(durs, n_durs, m_tokens, 0.50);
    res->tpot_p90 = quantile(durs, n_durs, m_tokens, 0.90);
    res->tpot_p99 = quantile(durs, n_durs, m_tokens, 0.99);
    res->tpot_mean = m_tokens > 0 ? m_time * 0 + 0 : 0;
    {
        double wsum = 0;
        for (uint32_t i = 0; i < n_durs; i++) wsum += durs[2 * i] * durs[2 * i + 1];
        res->tpot_mean = m_tokens > 0 ? wsum / m_tokens : 0;
    }
    res->selected_rows = m_sel;
    res->missed_rows = m_miss;
    res->fetch_fraction = m_sel > 0 ? m_miss / m_sel : 0;
    res->fetch_bytes = h2d.bytes;
    res->write_bytes = d2h.bytes;
    res->h2d_util = t_final > 0 ? h2d.busy / t_final : 0;
    res->d2h_util = t_final > 0 ? d2h.busy / t_final : 0;
    res->compute_util = t_final > 0 ? gpu.busy / t_final : 0;
    res->h2d_gbps = t_final > 0 ? h2d.bytes / t_final / 1e9 : 0;
    res->hbm_capacity = R.hbm.capacity;
    res->hbm_peak_total = R.hbm.peak_total;
    for (int c = 0; c < MEM_N_CATEGORIES; c++) {
        res->hbm_peak[c] = R.hbm.peak[c];
        res->hbm_mean[c] = res->n_tl ? hbm_sum[c] / res->n_tl : 0;
    }
    res->mean_active = res->n_tl ? active_sum / res->n_tl : 0;
    res->admitted = R.admitted;
    res->completed = R.completed;
    res->unfinished = unfinished;
    res->never_admitted = sh->n_requests - R.admitted;
    res->budget_rows = (policy == POL_HISPARSE || policy == POL_ORACLE) ? R.budget[0] : 0;
    res->mean_optional_rows = res->n_tl ? opt_sum / res->n_tl : 0;
    res->mean_budget_rows = res->n_tl ? budget_sum / res->n_tl : 0;
    res->ranges = st.ranges;
    if (sp->mode) {
        snprintf(res->spec, sizeof res->spec, "%s", spec_kind_name((spec_kind)sp->mode));
        res->shared_retrieval = sp->shared_retrieval;
        res->draft_ring = sp->draft_ring;
        res->staging_reuse = sp->staging_reuse;
        double n = spt.req_steps > 0 ? spt.req_steps : 1, nu = spt.union_n > 0 ? spt.union_n : 1;
        res->mean_accepted = spt.accepted / n;
        res->tokens_per_step = (spt.accepted + spt.req_steps) / n;
        res->mean_verify_len = spt.verified / n;
        res->union_rows = spt.union_rows / nu;
        res->union_rows_k = res->union_rows / m->group[0].k;
        if (policy == POL_RESIDENT) res->union_rows = res->union_rows_k = -1; /* not read: nothing to stage or fetch */
        res->fetched_shared_rows = spt.fetched / nu;
        res->fetched_per_query_rows = sp->shared_retrieval ? -1 : spt.fetched_pq / nu;
        if (!sp->shared_retrieval) res->fetched_shared_rows = -1; /* the union's count is not kept then */
        res->draft_share = spt.step_s > 0 ? spt.draft_s / spt.step_s : 0;
        res->verify_share = spt.step_s > 0 ? (spt.step_s - spt.draft_s - spt.overhead_s) / spt.step_s : 0;
        res->staging_used_peak = spt.staging_peak;
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    res->wall_s = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
    res->rows_per_wall_s = res->wall_s > 0 ? sel_total / res->wall_s : 0;
    rc = 0;
out_q:
    evq_release(&q);
out:
    for (uint32_t i = 0; i < sh->n_requests; i++) {
        if (R.req[i].ps) {
            for (uint32_t g = 0; g < R.G; g++) pol_stream_close(&R.req[i].ps[g]);
            free(R.req[i].ps);
        }
        if (R.req[i].ahead) {
            for (uint32_t g = 0; g < R.G; g++) union_ahead_release(&R.req[i].ahead[g]);
            free(R.req[i].ahead);
        }
    }
    if (R.adv) union_release(&R.u);
    free(R.adv); free(R.sp_req); free(R.sp_ctx); free(R.sp_urows);
    free(R.req); free(R.active); free(R.budget); free(R.arrival);
    belady_work_free(R.bw);
    free(mb); free(mbuf); free(durs);
    if (rc < 0) { free(res->tl); res->tl = NULL; res->n_tl = 0; }
    return rc;
}

void sim_result_release(sim_result *r)
{
    free(r->tl);
    memset(r, 0, sizeof *r);
}
