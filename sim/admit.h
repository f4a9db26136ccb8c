/* admit.h: admission of requests against the HBM ledger, and the requests'
 * streams while they are active.
 *
 * A request is admitted when its reservations fit: indexer keys for its final
 * length, the rows its policy reserves (pol_ops.reserve), the window layers'
 * window, and under speculative decoding its draft KV and verification
 * staging (specrun_reservation; none without a host tier, where verification
 * reads in place). A policy whose budget follows spare HBM (pol_ops.rebalance)
 * gives its optional rows back first: they count as free. On admission every
 * (request, group) stream is opened through the policy; on completion they
 * are closed and the reservations released. Requests are admitted in index
 * order, up to the workload's target concurrency at the time, and under open
 * loop not before they arrive. The active list keeps admission order.
 *
 * [instance] admission = sglang (prefill.h) replaces that rule by SGLang's scheduler, read
 * from its code (python/sglang/srt/managers/schedule_policy.py PrefillAdder.add_one_req,
 * add_chunked_req, budget_state; schedule_batch.py check_decode_mem, retract_decode,
 * release_req; scheduler.py get_new_batch_prefill, update_running_batch, the idle reset;
 * the constants in environ.py). Memory is the KV a request holds: its prompt's chunks as
 * they are prefilled, one token per decode step (every category of reservations() at the
 * tokens held: cost_at in admit.c), released when it finishes or is retracted. Each
 * scheduling round (admit_sgl_fill, run before every prefill iteration and decode step):
 *   - arrivals join a FIFO waiting queue (SGLang's default fcfs, no priorities);
 *   - a round's budget: rem_total = free - offset, where offset holds every decoding
 *     request's min(max_new - decoded, clip) x new_token_ratio tokens, the chunked
 *     request's next chunk (and, on its last chunk, its min(max_new, clip)), and each
 *     request admitted in the round: its prompt + min(max_new - decoded, clip) tokens in
 *     full (the ratio applies to running requests only), or on the chunk it is cut at, the
 *     chunk alone;
 *   - the queue's head is admitted while prompt + min(max_new - decoded, clip) < rem_total,
 *     the chunk's token budget is not spent (chunked prefill: chunk_tokens per round; the
 *     request cut by it is the next round's chunked request), and [prefill] max_running
 *     is not reached; a head that does not fit stops the round (no skipping) and marks the
 *     batch full: no later round admits until a request finishes or is retracted (SGLang's
 *     running_batch.batch_is_full, set on AddReqResult.NO_TOKEN and at the running cap in
 *     get_new_batch_prefill, which returns no batch while it is set and no chunked request
 *     is pending and breaks before the queue's head when one is; cleared by
 *     update_running_batch when the batch shrinks, and lost when a prefill batch replaces an
 *     empty running batch in get_next_batch_to_run). The chunked request's chunks go on.
 * Before each decode step (admit_sgl_decode): if every decoding request's next tokens (1,
 * or gamma + 1 under speculation) fit the free pool, new_token_ratio decays by (init -
 * min) / decay_steps to min = init x min_factor; else requests are retracted one at a
 * time, the fewest decoded tokens first and among equals the longest prompt (SGLang's
 * sort key (decoded, -prompt) descending, popped from the end; Python's stable sort keeps
 * admission order among full ties, so the latest admitted goes), until the rest fit (at
 * least one goes; the last one stays), and the ratio is set to
 * min(1, (decoded + retract_decode_steps x n) / (max_new summed + 1)) over the n left. A
 * retracted request frees its KV, keeps its output so far, goes to the back of the
 * waiting queue, and on re-admission prefills its prompt and that output again; its
 * policy streams are closed and reopened at its position. With no request running the
 * ratio returns to its initial value (SGLang's idle self-check). Not modelled: pages
 * (tokens are allocated one by one, SGLang rounds to page_size and charges a page per
 * request), rem_input_tokens (max_prefill_tokens, 16384 by default, above every chunk
 * here), prefix-cache hits (random prompts share none) and the retraction's CPU cost. */
#ifndef DH_ADMIT_H
#define DH_ADMIT_H

#include <stdint.h>

#include "sim/ledger.h"
#include "sim/pol.h"
#include "sim/sim.h"
#include "sim/union.h"

typedef struct {
    int state;                        /* 0 waiting, 1 active, 2 done */
    uint32_t pos;                     /* decode positions done */
    double reserved[MEM_N_CATEGORIES]; /* what admission charged, by category */
    double host;                      /* its full KV in the host pool (host_to_device_ratio) */
    pol_stream *ps;                   /* [groups] */
    union_ahead *ahead;               /* [groups] speculative with a host tier: positions read
                                       * beyond the committed one */
    /* Prefill (sim/prefill.h): when the request was admitted, the prompt tokens this GPU has
     * yet to prefill (0 under disaggregated prefill: decoding starts at admission), and when
     * its prefill ended (the admission time when disaggregated; -1 until it ends) -- the
     * hook for per-request time to first token. */
    double admit_t, prefill_done_t;
    uint32_t prefill_left;
    /* The prompt tokens of its prefill: the prompt, or under admission = sglang after a
     * retraction the prompt and the output so far. */
    uint32_t prefill_len;
    /* admission = sglang: tokens whose KV it holds (reserved[] is what they cost), and how
     * often it was retracted. */
    uint32_t held, retracted;
} admit_req;

/* A decoding request as the retraction orders it (admit.c). */
typedef struct {
    uint32_t pos, prompt, rank, req;
} admit_victim;

typedef struct {
    const sim_config *sc;
    const pol_ops *pol;
    pol_env env;
    sel_source *src;
    const trace_shape *sh;
    uint32_t G;
    mem_ledger hbm;
    double host_used;                 /* bytes of the host KV pool held (memplan.h; a host
                                       * tier with host_to_device_ratio > 0 only) */
    admit_req *req;                   /* [requests] */
    uint32_t *active, n_active;       /* request indices, in admission order */
    uint32_t next_req;                /* the next request to admit */
    uint32_t admitted, completed;
    double *arrival;                  /* [requests] open loop: arrival times */
    belady_work *bw;
    double *rows_per_region;          /* [G] rows per host region of each group's misses (0: not counted) */
    pol_stream **active_ps;           /* [requests] scratch: the active requests' streams */
    /* admission = sglang (above): the waiting queue (a ring of the request indices that
     * arrived and are not running, retracted ones included), the requests admitted by the
     * last round, the ratio and its constants, and the retractions so far. */
    int sgl;
    uint32_t *queue, q_head, q_len;
    uint32_t *just, n_just;
    double ntr, ntr_init, ntr_min, ntr_decay;
    uint32_t retractions;
    /* SGLang's running_batch.batch_is_full: set when a round's head did not fit (NO_TOKEN) or
     * the running cap was reached; while set no round admits, until a request finishes or is
     * retracted (the running batch shrinks) or a prefill completes into an empty running
     * batch (which it replaces, sim.c commit_prefill). */
    int full;
    admit_victim *order;              /* [requests] scratch: the retraction order */
} admit_state;

/* Charge the weights (and the draft's) and the workspace. 0 or -1. */
int admit_init(admit_state *a, const sim_config *sc, const pol_ops *pol, sel_source *src);
void admit_release(admit_state *a);
/* Admit requests up to the target concurrency at time now (and [prefill] max_running); a request
 * admitted at step `step` of `steps` can use at most steps - step positions.
 * 0 or -1 (a refused ledger charge or a bad stream). */
int admit_fill(admit_state *a, double now, uint32_t step, uint32_t steps);
/* The bytes request r would reserve for its indexer keys and policy rows
 * (the figure an idle GPU's refusal quotes). */
double admit_need(const admit_state *a, uint32_t r);
/* The rebalancing policy's budgets from spare HBM before a step, and its
 * optional bytes charged as the buffers hold them after one; both nothing for
 * a fixed budget. */
int admit_rebalance(admit_state *a);
int admit_settle(admit_state *a);
/* Request r ends: streams closed, reservations released. */
int admit_finish(admit_state *a, uint32_t r);

/* admission = sglang. One scheduling round at time now (step of steps, as admit_fill):
 * arrivals join the queue, then requests are admitted from its head under the round's
 * budget, with chunk_budget prompt tokens for this round's prefill (0: none to spend; the
 * request with pending chunks takes them first). Admitted requests are a->just[0 ..
 * n_just) and join the active list with their prompt (and output so far) to prefill.
 * 0 or -1. */
int admit_sgl_fill(admit_state *a, double now, uint32_t step, uint32_t steps, uint32_t chunk_budget);
/* Request r's KV grows by tokens (a prefill chunk, a decode step's committed tokens):
 * the ledger charged the difference. 0 or -1 (the pool cannot hold it). */
int admit_grow(admit_state *a, uint32_t r, uint32_t tokens);
/* Before a decode step of the active requests (all decoding), each to add per_req tokens:
 * the ratio decays if they fit, else requests are retracted (their count added to
 * *retracted) and the ratio re-estimated. 0 or -1 (a lone request that does not fit). */
int admit_sgl_decode(admit_state *a, uint32_t per_req, uint32_t *retracted);
/* SGLang's idle self-check: the ratio back to its initial value. */
void admit_sgl_idle(admit_state *a);

#endif
