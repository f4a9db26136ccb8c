/* admit.c: admission against the HBM ledger; see admit.h.
 *
 * Cost: O(groups) per admission and completion plus the policy's open (which
 * for a fixed budget computes the request's whole horizon); O(active x
 * groups) per rebalance. */
#include "sim/admit.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <math.h>
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
    a->rows_per_region = dh_calloc(a->G ? a->G : 1, sizeof *a->rows_per_region);
    for (uint32_t g = 0; g < a->G; g++) {
        /* The misses' host regions: [gather] region_bytes over the group's row size. */
        const double rb = sc->model.layer[sc->model.group[g].first_layer].row_bytes;
        a->rows_per_region[g] = sc->hw.region_bytes > 0 && rb > 0 ? sc->hw.region_bytes / rb : 0;
    }
    if (sc->wl.mode == WL_OPEN) wl_arrivals(&sc->wl, sc->seed, sc->attention_dp, n, a->arrival);
    if (sc->admission.mode == ADMIT_SGLANG) {
        const admission_cfg *ac = &sc->admission;
        if (pol->rebalance)
            return dh_err("admission = sglang with policy %s, whose budget follows spare HBM, is not modelled", pol->name);
        if (sc->spec.mode && pol->host_tier)
            return dh_err("admission = sglang with speculative decoding over a host tier (policy %s) is not modelled",
                          pol->name);
        a->sgl = 1;
        a->queue = dh_calloc(n ? n : 1, sizeof *a->queue);
        a->just = dh_calloc(n ? n : 1, sizeof *a->just);
        a->order = dh_calloc(n ? n : 1, sizeof *a->order);
        /* scheduler.py (NewTokenRatioTracker.from_server_args): init = min(init x
         * conservativeness, 1), min = min(init x factor, 1), decay = (init - min) / steps. */
        a->ntr_init = fmin(ac->init_new_token_ratio * ac->schedule_conservativeness, 1.0);
        a->ntr_min = fmin(a->ntr_init * ac->min_new_token_ratio_factor, 1.0);
        a->ntr_decay = (a->ntr_init - a->ntr_min) / ac->new_token_ratio_decay_steps;
        a->ntr = a->ntr_init;
    }
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
    free(a->queue);
    free(a->just);
    free(a->order);
    belady_work_free(a->bw);
    free(a->rows_per_region);
    pol_env_release(&a->env);
    memset(a, 0, sizeof *a);
}

/* What request r reserves at a length of final_tokens tokens, by category (indexer,
 * protected, optional, draft, staging; the others 0). */
static void cost_at(const admit_state *a, uint32_t r, uint64_t final_tokens, double res[MEM_N_CATEGORIES])
{
    (void)r;
    const model_cfg *m = &a->sc->model;
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

/* The reservations of request r: its whole final length. */
static void reservations(const admit_state *a, uint32_t r, double res[MEM_N_CATEGORIES])
{
    cost_at(a, r, (uint64_t)a->sh->prompt_len[r] + a->sh->output_len[r], res);
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

/* Open request r's streams (one per group) for at most horizon positions. 0 or -1. */
static int open_streams(admit_state *a, uint32_t r, uint32_t horizon)
{
    const sim_config *sc = a->sc;
    admit_req *q = &a->req[r];
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
    int rc = pol_open_groups(a->pol, &a->env, q->ps, a->G, &oa, a->rows_per_region);
    if (rc < 0) {
        free(q->ps);
        q->ps = NULL;
    }
    return rc;
}

/* What request r holds in the host pool once admitted: under a host tier with a host pool,
 * its whole final KV (the pool SGLang HiSparse sizes at host_to_device_ratio x the device
 * KV pool); 0 otherwise. */
static double host_bytes(const admit_state *a, uint32_t r)
{
    const sim_config *sc = a->sc;
    if (!a->pol->host_tier || sc->mem.host_pool <= 0) return 0;
    const uint64_t final_tokens = (uint64_t)a->sh->prompt_len[r] + a->sh->output_len[r];
    double host = 0;
    for (uint32_t g = 0; g < a->G; g++) {
        const uint32_t c = sc->model.group[g].compress;
        host += sc->model.group[g].kv_bytes_per_row * (double)((final_tokens + c - 1) / c);
    }
    return host;
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
    const double host = host_bytes(a, r);
    if (host > 0 && a->host_used + host > sc->mem.host_pool) return 0;
    if (a->pol->rebalance && rebalance(a, need, 1) < 0) return -1;
    admit_req *q = &a->req[r];
    for (int c = MEM_INDEXER; c < MEM_N_CATEGORIES; c++)
        if (ledger_charge(&a->hbm, c, res[c]) < 0) return -1;
    memcpy(q->reserved, res, sizeof res);
    q->host = host;
    a->host_used += host;
    if (open_streams(a, r, horizon) < 0) return -1;
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
    a->full = 0; /* the running batch shrank (update_running_batch) */
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
        q->prefill_len = a->sh->prompt_len[a->next_req];
        q->prefill_left = pf->mode == PREFILL_CHUNKED ? a->sh->prompt_len[a->next_req] : 0;
        q->prefill_done_t = pf->mode == PREFILL_CHUNKED ? -1 : now;
        a->next_req++;
    }
    return 0;
}

/* ---------------------------------------------------------------- admission = sglang */

/* The bytes of every category at a length of tokens. */
static double cost_total(const admit_state *a, uint32_t r, uint64_t tokens)
{
    double res[MEM_N_CATEGORIES], t = 0;
    cost_at(a, r, tokens, res);
    for (int c = 0; c < MEM_N_CATEGORIES; c++) t += res[c];
    return t;
}

static double held_total(const admit_req *q)
{
    double t = 0;
    for (int c = 0; c < MEM_N_CATEGORIES; c++) t += q->reserved[c];
    return t;
}

/* The bytes request r's KV grows by when it holds `more` tokens beyond those it holds
 * (an estimate may be fractional: whole tokens, rounded up). */
static double growth(const admit_state *a, uint32_t r, double more)
{
    const admit_req *q = &a->req[r];
    if (more <= 0) return 0;
    return cost_total(a, r, (uint64_t)q->held + (uint64_t)ceil(more)) - held_total(q);
}

int admit_grow(admit_state *a, uint32_t r, uint32_t tokens)
{
    admit_req *q = &a->req[r];
    double res[MEM_N_CATEGORIES];
    cost_at(a, r, (uint64_t)q->held + tokens, res);
    for (int c = MEM_INDEXER; c < MEM_N_CATEGORIES; c++)
        if (ledger_charge(&a->hbm, c, res[c] - q->reserved[c]) < 0)
            return dh_err_prefix("request %u holding %u tokens, %u more: ", r, q->held, tokens);
    memcpy(q->reserved, res, sizeof res);
    q->held += tokens;
    return 0;
}

static uint32_t min_u32(uint32_t x, uint32_t y) { return x < y ? x : y; }

int admit_sgl_fill(admit_state *a, double now, uint32_t step, uint32_t steps, uint32_t chunk_budget)
{
    const sim_config *sc = a->sc;
    const wl_cfg *w = &sc->wl;
    const uint32_t n = a->sh->n_requests, clip = sc->admission.clip_max_new_tokens;
    a->n_just = 0;
    /* Arrivals: closed loop and load steps while fewer than the target are in the system
     * (running or waiting; reqlat_arrive's rule), open loop by their drawn times. */
    const uint32_t target = sim_per_gpu(sc, wl_target(w, now));
    while (a->next_req < n) {
        if (w->mode == WL_OPEN ? a->arrival[a->next_req] > now : a->next_req - a->completed >= target) break;
        a->queue[(a->q_head + a->q_len++) % n] = a->next_req++;
    }
    /* The round's offset (PrefillAdder.__init__, add_chunked_req): the running requests'
     * estimated output, the chunked request's next chunk and, on its last, its output.
     * O(active) cost_at evaluations, each O(groups). */
    double offset = 0;
    uint32_t budget = chunk_budget;
    for (uint32_t i = 0; i < a->n_active; i++) {
        const uint32_t r = a->active[i];
        const admit_req *q = &a->req[r];
        if (!q->prefill_left) {
            offset += growth(a, r, min_u32(a->sh->output_len[r] - q->pos, clip) * a->ntr);
        } else {
            const uint32_t c = min_u32(q->prefill_left, budget);
            budget -= c;
            offset += growth(a, r, (double)c + (c == q->prefill_left ? min_u32(a->sh->output_len[r], clip) : 0));
        }
    }
    const double free_bytes = ledger_free(&a->hbm);
    const uint32_t cap = sc->prefill.max_running;
    /* add_one_req from the queue's head, in its order: the running cap, the memory check
     * (NO_TOKEN, evaluated even when the chunked request spent the round's chunk), then the
     * chunk (OTHER when none is left); budget_state after each admission (NO_TOKEN first).
     * NO_TOKEN and the cap mark the batch full, which stops later rounds too (admit.h).
     * O(admitted) cost_at. */
    while (!a->full && a->q_len > 0) {
        if (cap && a->n_active >= cap) {
            a->full = 1;
            break;
        }
        const uint32_t r = a->queue[a->q_head];
        admit_req *q = &a->req[r];
        const uint32_t extend = a->sh->prompt_len[r] + q->pos;
        const uint32_t max_new = min_u32(a->sh->output_len[r] - q->pos, clip);
        const double total = cost_total(a, r, (uint64_t)extend + max_new);
        if (total >= free_bytes - offset) { /* NO_TOKEN */
            a->full = 1;
            break;
        }
        if (budget == 0) break; /* OTHER: no chunk left to cut */
        const double host = host_bytes(a, r);
        if (host > 0 && a->host_used + host > sc->mem.host_pool) break;
        /* Its streams at its position: opened for the positions the run can still use,
         * then stepped past the ones it decoded before a retraction. */
        if (open_streams(a, r, q->pos + (steps - step)) < 0) return -1;
        for (uint32_t g = 0; g < a->G; g++)
            for (uint32_t p = 0; p < q->pos; p++) {
                pol_out po;
                if (a->pol->next(&q->ps[g], a->sh, &po) < 0) return -1;
            }
        a->q_head = (a->q_head + 1) % n;
        a->q_len--;
        q->host = host;
        a->host_used += host;
        q->state = 1;
        if (!q->retracted) {
            a->admitted++;
            q->admit_t = now;
        }
        q->prefill_len = q->prefill_left = extend;
        q->prefill_done_t = -1;
        a->active[a->n_active++] = r;
        a->just[a->n_just++] = r;
        /* Charged in full when its whole prompt runs in this round, else its chunk only. */
        const uint32_t c = min_u32(extend, budget);
        offset += c == extend ? total : cost_total(a, r, c);
        budget -= c;
        if (free_bytes - offset <= 0) { /* budget_state: NO_TOKEN */
            a->full = 1;
            break;
        }
        if (budget == 0) break; /* budget_state: OTHER */
    }
    return 0;
}

/* Request r leaves the running batch (release_req): its KV freed, its streams closed, its
 * output so far kept; it waits at the back of the queue. */
static int retract(admit_state *a, uint32_t r)
{
    admit_req *q = &a->req[r];
    close_streams(a, q);
    for (int c = MEM_INDEXER; c < MEM_N_CATEGORIES; c++)
        if (ledger_charge(&a->hbm, c, -q->reserved[c]) < 0) return -1;
    memset(q->reserved, 0, sizeof q->reserved);
    a->host_used -= q->host;
    q->host = 0;
    q->held = 0;
    q->state = 0;
    q->prefill_left = 0;
    q->retracted++;
    a->retractions++;
    a->full = 0;
    const uint32_t n = a->sh->n_requests;
    a->queue[(a->q_head + a->q_len++) % n] = r;
    return 0;
}

/* SGLang's retraction order, as a sort: (decoded, -prompt) descending, ties in admission
 * order (Python's sort is stable under reverse); the victims are taken from the end. */
static int retract_cmp(const void *x, const void *y)
{
    const admit_victim *p = x, *q = y;
    if (p->pos != q->pos) return p->pos > q->pos ? -1 : 1;
    if (p->prompt != q->prompt) return p->prompt < q->prompt ? -1 : 1;
    return p->rank < q->rank ? -1 : 1;
}

int admit_sgl_decode(admit_state *a, uint32_t per_req, uint32_t *retracted)
{
    double need = 0;
    for (uint32_t i = 0; i < a->n_active; i++) need += growth(a, a->active[i], per_req);
    if (need <= ledger_free(&a->hbm)) {
        a->ntr = fmax(a->ntr - a->ntr_decay, a->ntr_min);
        return 0;
    }
    /* O(active log active) for the order; each retraction O(groups). The rank of a request
     * in the batch: its index in the active list (admission order). */
    for (uint32_t i = 0; i < a->n_active; i++) {
        const uint32_t r = a->active[i];
        a->order[i] = (admit_victim){ .pos = a->req[r].pos, .prompt = a->sh->prompt_len[r], .rank = i, .req = r };
    }
    qsort(a->order, a->n_active, sizeof *a->order, retract_cmp);
    uint32_t left = a->n_active;
    while (need > ledger_free(&a->hbm) && left > 1) {
        const uint32_t r = a->order[--left].req;
        need -= growth(a, r, per_req);
        if (retract(a, r) < 0) return -1;
        (*retracted)++;
    }
    if (need > ledger_free(&a->hbm))
        return dh_err("admission = sglang: request %u cannot decode alone: its next %u tokens need %.0f B, %.0f B "
                      "are free", a->order[0].req, per_req, need, ledger_free(&a->hbm));
    uint32_t kept = 0;
    double decoded = 0, max_new = 0;
    for (uint32_t i = 0; i < a->n_active; i++) {
        const uint32_t r = a->active[i];
        if (a->req[r].state != 1) continue;
        a->active[kept++] = r;
        decoded += a->req[r].pos;
        max_new += a->sh->output_len[r];
    }
    a->n_active = kept;
    /* estimate_new_token_ratio_after_retract over the requests left. */
    const double est = (decoded + (double)a->sc->admission.retract_decode_steps * kept) / (max_new + 1);
    a->ntr = est < 1 ? est : 1;
    return 0;
}

void admit_sgl_idle(admit_state *a) { a->ntr = a->ntr_init; }
