/* specrun.h: speculative decoding inside the simulator's step loop -- the
 * instance's [spec] section, the per-step plan (acceptance, verify lengths,
 * the draft pass) and the verification of one request over the target's
 * hot buffers. The models themselves are in spec.h (drafts, acceptance,
 * DSpark's rule) and union.h (the union, retrieval, staging, lookahead).
 *
 * [spec] keys of the instance file (all optional):
 *   mode              none | dflash2 | dspark (default: the draft's kind when
 *                     `draft` is given, else none)
 *   draft             draft config (models/drafts/NAME.ini); default
 *                     models/drafts/<model name>-<mode>.ini. Its kind must
 *                     equal mode and its target the model's name.
 *   shared_retrieval  true: the union of the gamma+1 selections is fetched
 *                     once; false: every query fetches its own misses
 *   draft_ring        true: the draft KV is a ring of W rows; false: as long
 *                     as the context (the ledger and the draft pass read it all)
 *   staging_reuse     true: one layer group's union rows are staged at a time;
 *                     false: every group keeps its own staging
 *   disable_batch_size  vLLM V0's speculative_disable_by_batch_size: no drafts in a
 *                     step whose batch holds more requests than this (0, the
 *                     default: off). vLLM V1 accepts the key and ignores it
 *                     (vllm-project/vllm#25112).
 *   adaptive          SGLang's --speculative-adaptive (python/sglang/srt/speculative/
 *                     adaptive_spec_params.py): a file (models/spec/sglang-adaptive.ini)
 *                     of batch-size slots, each with its candidate step counts; a
 *                     step's batch size picks the largest slot not above it
 *                     (adaptive_step_router.py, without CUDA-graph padding); the
 *                     slot's steps follow an EMA of its accepted drafts (the code's
 *                     AdaptiveStepSlot: warmup, update interval, hysteresis); steps
 *                     0 is plain decoding. Candidates above the draft's gamma are
 *                     taken as gamma (its acceptance table ends there). SGLang
 *                     allows it for topk 1 only, and so does this (default: off).
 * (the three switches default to true). "HiSparse with speculation, without
 * those mechanisms" is policy hisparse with all three false (dhsim's
 * hisparse-spec).
 *
 * One speculative step at committed position p of request r:
 *   1. spec_confidence keyed by (seed, r, p), so every policy sees the same
 *      draws; verify length L = gamma (DFlash2) or DSpark's rule over the
 *      batch with step_estimate_s as the time model; L is capped by the
 *      positions left in the request; a = spec_accept(L).
 *   2. Per selection group: the base position p is applied to the hot buffer
 *      as in plain decoding (its misses are M_0); positions p+1..p+L come from
 *      the lookahead queue and are folded into the union; the rows fetched are
 *      the union's misses (shared) or the per-query sum; attention reads the
 *      sum of the queries' selections; the staging holds the union.
 *   3. Commit: positions p+1..p+a are applied to the hot buffer (their misses
 *      were fetched into staging by the verification: no PCIe charge) and
 *      popped; the rows written through are those of the a+1 committed
 *      positions; rejected positions stay queued as the next step's input.
 * The hot buffer therefore sees every position once and in order, as in
 * plain decoding. Cost per (request, group) and step: O(rows changed over the
 * L+1 positions) hash operations; never O(k) or O(context). */
#ifndef DH_SPECRUN_H
#define DH_SPECRUN_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/cfgkey.h"
#include "sim/model.h"
#include "sim/pol.h"
#include "sim/spec.h"
#include "sim/step.h"
#include "sim/union.h"

#define SPECRUN_MAX_SLOTS 16

/* SGLang's adaptive steps: the configuration and, per slot, its state. */
typedef struct {
    uint32_t n_slots;                       /* 0: off */
    uint32_t bs[SPECRUN_MAX_SLOTS];         /* the slots' batch sizes, ascending */
    uint32_t n_cand[SPECRUN_MAX_SLOTS];
    uint32_t cand[SPECRUN_MAX_SLOTS][SPEC_MAX_GAMMA + 1]; /* candidate steps, ascending, unique */
    double up[SPECRUN_MAX_SLOTS], down[SPECRUN_MAX_SLOTS]; /* hysteresis */
    double ema_alpha;
    uint32_t update_interval, warmup_batches;
} specrun_adaptive;

typedef struct {
    uint32_t current[SPECRUN_MAX_SLOTS];
    double ema[SPECRUN_MAX_SLOTS];
    uint64_t batches[SPECRUN_MAX_SLOTS];
    uint32_t verifications;      /* verification batches planned so far: the index of
                                  * [spec] accept = batch's draw */
} specrun_adapt_state;

typedef struct {
    int mode;                    /* 0 none, SPEC_DFLASH2, SPEC_DSPARK, SPEC_MTP */
    char draft_path[512];
    spec_draft *draft;           /* NULL when mode is none */
    int shared_retrieval, draft_ring, staging_reuse;
    /* [spec] accept = batch: one acceptance draw per verification, every request of the batch
     * accepting the same number of drafts (at most its own verify length), as SGLang's pinned
     * acceptance does (SGLANG_SIMULATE_ACC_LEN: eagle_utils.py
     * _generate_simulated_accept_index samples one value, num_samples = 1 or size (1,), and
     * fills accept_length with it for the whole batch); request (default): one draw per
     * request and position, as acceptance of real drafts is. */
    int accept_per_batch;
    int32_t mtp_layer;           /* MTP: a target layer of the draft's layer_kind */
    uint32_t disable_batch_size; /* 0: off */
    specrun_adaptive adaptive;   /* n_slots 0: off */
} specrun_cfg;

/* Read [spec] from the instance config (every key checked). 0 or -1. */
int specrun_config_load(cfg *inst, const model_cfg *m, specrun_cfg *s);
void specrun_config_release(specrun_cfg *s);
/* Parse a mode name: none, dflash2, dspark or mtp. */
int specrun_parse_mode(const char *name, int *mode);

/* Ledger bytes of one request under speculation (0 without): its draft KV
 * (W rows with the ring, its final context without) and its worst-case
 * verification staging ((gamma+1) k union rows of the largest group with
 * reuse, of every group without). */
void specrun_reservation(const specrun_cfg *s, const model_cfg *m, uint64_t final_ctx, double *draft,
                         double *staging);

/* One request of a speculative step's plan. */
typedef struct {
    uint32_t req, pos;           /* the request and its committed position */
    uint64_t ctx;                /* its context at that position */
    uint32_t left;               /* positions after it in its stream (output_len - pos - 1) */
    uint32_t L, a;               /* the plan: drafts verified, drafts accepted */
    double expected;             /* E[a] given the plan (spec_accept_expected): the control variate's mean */
    uint32_t queries;            /* query tokens the target scores for it: L + 1, or MTP's
                                  * num_draft_tokens when a tree (topk > 1) is verified */
} specrun_slot;

/* The adaptive state at the start of a run (every slot at its initial steps). */
void specrun_adapt_init(const specrun_cfg *s, specrun_adapt_state *st);
/* The steps the adaptive rule gives a batch of n requests now. */
uint32_t specrun_adapt_steps(const specrun_cfg *s, const specrun_adapt_state *st, uint32_t n);
/* Feed one verification's accepted drafts (per request) to the slot of batch size n. */
void specrun_adapt_update(const specrun_cfg *s, specrun_adapt_state *st, uint32_t n, const uint32_t *accepted);
/* MTP: seconds of `steps` draft forwards over n requests (the layers at the target's costs,
 * the extra bytes and FLOPs as a roofline). */
double specrun_mtp_draft_s(const specrun_cfg *s, const step_ctx *cx, uint32_t n, const specrun_slot *sl,
                           uint32_t steps);

/* The per-step plan of n requests: fills every slot's L and a and returns the
 * draft pass's seconds (in cx->pre_s as well). cx must be set up for the
 * batch except pre_s. DSpark's choice uses step_estimate_s on one
 * micro-batch holding the whole batch (fetch assumed hidden). The load rules
 * (disable_batch_size, adaptive with its state ad, which may be NULL when
 * adaptive is off) may set every L to 0 and skip the draft pass. */
double specrun_plan(const specrun_cfg *s, step_ctx *cx, double step_overhead_s, uint64_t seed, uint32_t n,
                    specrun_slot *sl, specrun_adapt_state *ad);

/* What one (request, group) verification brought. */
typedef struct {
    uint32_t nrows;              /* context rows at the base position */
    double sel_sum;              /* selected rows summed over the L+1 queries */
    uint32_t union_rows;         /* |S_0 u ... u S_L| (0 under resident: not read) */
    uint64_t fetched;            /* rows fetched (shared or per query, as configured) */
    uint32_t base_misses;        /* of them, the base position's misses (into the hot buffer); the
                                  * rest go to the staging area, a launch of their own */
    uint64_t fetched_per_query;  /* per-query count when kept (shared retrieval off), else 0 */
    uint32_t written;            /* rows new in the context over the a+1 committed positions */
    uint32_t staged_misses;      /* misses of committed drafts served from staging */
} specrun_out;

/* Observers of one verification, for a caller that must repeat it row by row
 * (the GPU replay, kernels/replay/rp_host.h); any may be NULL. base: the base
 * position applied to the hot buffer (its missed rows are the buffer's scratch
 * list until the next step); query: draft t = 1..L as a delta against query
 * t - 1; unioned: the union complete, the hot buffer as the fetch sees it;
 * commit: accepted draft t = 1..a applied to the hot buffer. A non-zero return
 * stops the verification (-1, with the observer's dh_err()). */
typedef struct {
    void *user;
    int (*base)(void *user, const sel_delta *d, const hotbuf_result *r, const hotbuf *h);
    int (*query)(void *user, uint32_t t, const sel_delta *d);
    int (*unioned)(void *user, const union_set *u, const hotbuf *h);
    int (*commit)(void *user, uint32_t t, const sel_delta *d, const hotbuf_result *r, const hotbuf *h);
} specrun_hooks;

/* Verify and commit one (request, group) stream: base position ps->pos, L
 * drafts, a accepted. ps must be a live hot-buffer stream (pol_stream opened
 * in mode POL_LIVE_LRU: st and buf), or POL_COUNT (no stream is read).
 * ahead holds the positions read beyond the base. Advances ps->pos by a+1.
 * hk (may be NULL) observes the steps of a hot-buffer stream. -1 with dh_err()
 * naming request and group on a bad stream. */
int specrun_verify(pol_stream *ps, const trace_shape *sh, union_ahead *ahead, union_set *u, uint32_t L,
                   uint32_t a, int shared, const specrun_hooks *hk, specrun_out *o);

/* The [spec] keys (docs/CONFIG.md). */
extern const cfg_schema specrun_schema;
extern const cfg_schema adaptive_schema;

#endif
