/* admit.c: admission against the HBM ledger; see admit.h.
 *
 * Cost: O(groups) per admission and completion plus the policy's open (which
 * for a fixed budget computes the request's whole horizon); O(active x
 * groups) per rebalance. */
#include "sim/admit.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

int admit_init(admit_state *a, const sim_config *sc, const pol_ops *pol, sel_source *src)
{
    memset(a, 0, sizeof *a);
    a->sc = sc;
    a->pol = pol;
    a->src = src;
    a->sh = &sel_meta(src)->shape;
    a->G = sc->model.n_groups;
    uint32_t n = a->sh->n_requests;
    pol_env_init(&a->env, &sc->model, sc->hisparse_budget_k, sc->adaptive_max_optional_k);
    ledger_init(&a->hbm, sc->hw.hbm_bytes);
    a->env.sgl = sc->sgl;
    a->env.sgl.pool_bytes = sc->mem.kv_pool;
    a->env.sgl.order_seed = sc->seed;
    a->req = dh_calloc(n, sizeof *a->req);
    a->active = dh_calloc(n, sizeof *a->active);
    a->arrival = dh_calloc(n, sizeof *a->arrival);
    a->active_ps = dh_calloc(n, sizeof *a->active_ps);
    a->bw = belady_work_new();
    if (sc->wl.mode == WL_OPEN) wl_arrivals(&sc->wl, sc->seed, sc->attention_dp, n, a->arrival);
    if (ledger_charge(&a->hbm, MEM_WEIGHTS, sc->weights_per_gpu) < 0 || ledger_charge(&a->hbm, MEM_WORKSPACE, sc->workspace) < 0)
        return -1;
    /* The draft's weights live on every GPU that drafts (its shard). */
    if (sc->spec.mode && ledger_charge(&a->hbm, MEM_WEIGHTS, spec_weight_bytes_per_gpu(sc->spec.draft)) < 0)
        return dh_err_prefix("draft '%s' weights: ", sc->spec.draft->name);
    return 0;
}

static void close_streams(admit_state *a, admit_req *q)
{
    if (q->ps) {
        for (uint32_t g = 0; g < a->G; g++) a->pol->close(&q->ps[g]);
        free(q->ps);
        q->ps = NULL;
    }
    if (q->ahead) {
        for (uint32_t g = 0; g < a->G; g++) union_ahead_release(&q->ahead[g]);
        free(q->ahead);
        q->ahead = NULL;
    }
}

void admit_release(admit_state *a)
{
    if (a->req)
        for (uint32_t i = 0; i < a->sh->n_requests; i++) close_streams(a, &a->req[i]);
    free(a->req);
    free(a->active);
    free(a->arrival);
    free(a->active_ps);
    belady_work_free(a->bw);
    pol_env_release(&a->env);
    memset(a, 0, sizeof *a);
}

/* The reservations of request r by category (indexer, protected, optional,
 * draft, staging; the others 0). */
static void reservations(const admit_state *a, uint32_t r, double res[MEM_N_CATEGORIES])
{
    const model_cfg *m = &a->sc->model;
    uint64_t final_tokens = (uint64_t)a->sh->prompt_len[r] + a->sh->output_len[r];
    double idx = 0, prot = 0, opt = 0;
    for (uint32_t g = 0; g < a->G; g++) {
        uint32_t c = m->group[g].compress;
        double rows = (double)((final_tokens + c - 1) / c);
        idx += m->group[g].indexer_bytes_per_row * rows;
        a->pol->reserve(&a->env, g, rows, &prot, &opt);
    }
    /* Window layers keep their window resident under every policy, dense layers
     * every (compressed) row. */
    prot += m->window_bytes_per_token_row * m->max_window;
    if (m->dense_layers)
        for (uint32_t l = 0; l < m->n_layers; l++) {
            const model_kind *k = &m->layer[l];
            if (k->select == MODEL_SELECT_DENSE && k->kv_own)
                prot += k->row_bytes * (double)((final_tokens + k->compress - 1) / k->compress);
        }
    memset(res, 0, MEM_N_CATEGORIES * sizeof *res);
    res[MEM_INDEXER] = idx;
    res[MEM_PROTECTED] = prot;
    res[MEM_OPTIONAL] = opt;
    specrun_reservation(&a->sc->spec, m, final_tokens, &res[MEM_DRAFT], &res[MEM_STAGING]);
    if (!a->pol->host_tier) res[MEM_STAGING] = 0; /* every row is on the GPU: verification reads in place */
}

double admit_need(const admit_state *a, uint32_t r)
{
    double res[MEM_N_CATEGORIES];
    reservations(a, r, res);
    return res[MEM_INDEXER] + res[MEM_PROTECTED] + res[MEM_OPTIONAL];
}

/* The active requests' streams, for the policy's rebalance. */
static pol_stream *const *active_streams(admit_state *a)
{
    for (uint32_t i = 0; i < a->n_active; i++) a->active_ps[i] = a->req[a->active[i]].ps;
    return a->active_ps;
}

/* Share the HBM not otherwise used (less extra_bytes about to be charged)
 * over the active requests and extra_req more; the optional category then
 * follows the buffers. */
static int rebalance(admit_state *a, double extra_bytes, uint32_t extra_req)
{
    double others = a->hbm.total - a->hbm.bytes[MEM_OPTIONAL];
    double spare = a->hbm.capacity - others - extra_bytes;
    pol_stream *const *ps = active_streams(a);
    if (a->pol->rebalance(&a->env, spare, a->n_active + extra_req, ps, a->n_active) < 0) return -1;
    return ledger_set(&a->hbm, MEM_OPTIONAL, a->pol->optional_bytes(&a->env, ps, a->n_active));
}

int admit_rebalance(admit_state *a) { return a->pol->rebalance ? rebalance(a, 0, 0) : 0; }

int admit_settle(admit_state *a)
{
    if (!a->pol->rebalance) return 0;
    return ledger_set(&a->hbm, MEM_OPTIONAL, a->pol->optional_bytes(&a->env, active_streams(a), a->n_active));
}

static int try_admit(admit_state *a, uint32_t r, uint32_t horizon, int *admitted)
{
    const sim_config *sc = a->sc;
    double res[MEM_N_CATEGORIES];
    reservations(a, r, res);
    double need = res[MEM_INDEXER] + res[MEM_PROTECTED] + res[MEM_OPTIONAL] + res[MEM_DRAFT] + res[MEM_STAGING];
    /* Optional rows of a rebalancing policy are spare HBM lent out: they count as free. */
    double others = a->hbm.total - (a->pol->rebalance ? a->hbm.bytes[MEM_OPTIONAL] : 0);
    *admitted = 0;
    if (others + need > a->hbm.capacity) return 0;
    /* A host tier holds every admitted request's whole KV in the host pool, which
     * SGLang HiSparse sizes at host_to_device_ratio x the device KV pool. */
    double host = 0;
    if (a->pol->host_tier && sc->mem.host_pool > 0) {
        const model_cfg *m = &sc->model;
        uint64_t final_tokens = (uint64_t)a->sh->prompt_len[r] + a->sh->output_len[r];
        for (uint32_t g = 0; g < a->G; g++) {
            uint32_t c = m->group[g].compress;
            host += m->group[g].kv_bytes_per_row * (double)((final_tokens + c - 1) / c);
        }
        if (a->host_used + host > sc->mem.host_pool) return 0;
    }
    if (a->pol->rebalance && rebalance(a, need, 1) < 0) return -1;
    admit_req *q = &a->req[r];
    for (int c = MEM_INDEXER; c < MEM_N_CATEGORIES; c++)
        if (ledger_charge(&a->hbm, c, res[c]) < 0) return -1;
    memcpy(q->reserved, res, sizeof res);
    q->host = host;
    a->host_used += host;
    q->ps = dh_calloc(a->G, sizeof *q->ps);
    if (sc->spec.mode && a->pol->host_tier) {
        q->ahead = dh_calloc(a->G, sizeof *q->ahead);
        for (uint32_t g = 0; g < a->G; g++) union_ahead_init(&q->ahead[g], sc->spec.draft->gamma + 1);
    }
    /* Under plain decoding a request advances one position per step, so the
     * run can use at most this many. Speculative decoding replays each stream
     * one position at a time through a live hot buffer (specrun.h). */
    if (a->sh->output_len[r] < horizon) horizon = a->sh->output_len[r];
    pol_open_args oa = { .src = a->src, .sh = a->sh, .req = r, .horizon = horizon, .bw = a->bw, .live = sc->spec.mode != 0 };
    for (uint32_t g = 0; g < a->G; g++) {
        /* The misses' host regions: [gather] region_bytes over the group's row size. */
        const double rb = sc->model.layer[sc->model.group[g].first_layer].row_bytes;
        oa.group = g;
        oa.rows_per_region = sc->hw.region_bytes > 0 && rb > 0 ? sc->hw.region_bytes / rb : 0;
        if (a->pol->open(&a->env, &q->ps[g], &oa) < 0) {
            for (uint32_t j = 0; j < g; j++) a->pol->close(&q->ps[j]);
            free(q->ps);
            q->ps = NULL;
            return -1;
        }
    }
    q->state = 1;
    q->pos = 0;
    a->active[a->n_active++] = r;
    a->admitted++;
    *admitted = 1;
    return 0;
}

int admit_finish(admit_state *a, uint32_t r)
{
    admit_req *q = &a->req[r];
    close_streams(a, q);
    q->state = 2;
    a->completed++;
    a->host_used -= q->host;
    q->host = 0;
    for (int c = MEM_INDEXER; c < MEM_N_CATEGORIES; c++)
        if (ledger_charge(&a->hbm, c, -q->reserved[c]) < 0) return -1;
    return 0;
}

int admit_fill(admit_state *a, double now, uint32_t step, uint32_t steps)
{
    const wl_cfg *w = &a->sc->wl;
    uint32_t target = sim_per_gpu(a->sc, wl_target(w, now));
    const prefill_cfg *pf = &a->sc->prefill;
    if (pf->max_running && target > pf->max_running) target = pf->max_running;
    while (a->n_active < target && a->next_req < a->sh->n_requests) {
        if (w->mode == WL_OPEN && a->arrival[a->next_req] > now) break;
        int ok;
        if (try_admit(a, a->next_req, steps - step, &ok) < 0) return -1;
        if (!ok) break;
        admit_req *q = &a->req[a->next_req];
        q->admit_t = now;
        q->prefill_left = pf->mode == PREFILL_CHUNKED ? a->sh->prompt_len[a->next_req] : 0;
        q->prefill_done_t = pf->mode == PREFILL_CHUNKED ? -1 : now;
        a->next_req++;
    }
    return 0;
}
