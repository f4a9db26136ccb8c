/* prefill.h: colocated prefill with chunked prefill on the decode GPU.
 *
 * By default the simulated GPU belongs to a disaggregated decode instance: a request's prompt
 * KV arrives from a prefill instance and decoding starts at admission. With [prefill] mode =
 * chunked the GPU also runs the prompts, in chunks, as SGLang's scheduler does
 * (python/sglang/srt/managers/scheduler.py, get_next_batch_to_run; server_args.py:
 * chunked_prefill_size, divided by dp_size under DP attention, max_running_requests) and
 * vLLM's (vllm/v1/core/sched/scheduler.py: a token budget of max_num_batched_tokens, decodes
 * first, the rest to prefill chunks):
 *
 *   [prefill] keys (instance file):
 *     mode          disaggregated (default) | chunked
 *     chunk_tokens  prompt tokens per prefill iteration on this GPU (SGLang's per-rank
 *                   chunked_prefill_size; vLLM's token budget); required with chunked
 *     mixing        alternate (SGLang's default: an iteration with prefill work runs the
 *                   prefill batch alone, decoding waits until no prompt is pending) |
 *                   mixed (SGLang --enable-mixed-chunk, vLLM: one batch of every decode
 *                   token and a chunk of chunk_tokens minus them); default alternate
 *     max_running   the most requests admitted at once on this GPU (SGLang
 *                   max_running_requests / dp_size); 0: the workload's concurrency only
 *     dp_hold       lockstep (default) | disjoint: how the other data-parallel ranks'
 *                   prefill iterations fall against this rank's (below)
 *
 *   A prefill iteration packs the admitted requests' pending prompt tokens in admission order
 *   up to chunk_tokens (the last one may be cut: the chunked request). Its cost (prefill_iter_s)
 *   is the decode cost model's at prefill shapes, layer by layer, serial:
 *     - attention: each query token at position p attends min(k, p / compress + 1) rows
 *       (window layers min(window, p + 1)), the rows' bytes read per query (no reuse across
 *       queries assumed), FLOPs 2 x heads x rows x (qk + v) -- the absorbed decode shape,
 *       assumed for prefill too -- with heads a rank's (attention heads / attn_tp) padded up
 *       to [instance] prefill_attn_head_multiple (prefill_rank_heads: SGLang's DSA backend on
 *       Hopper with BF16 KV rows prefills with FlashMLA's sparse kernel, which takes heads in
 *       multiples of 64, and pads the queries with zero heads, nsa_backend.py
 *       _forward_flashmla_sparse; its decode runs FA3, which does not: server_args.py, the NSA
 *       backends' Hopper defaults for bfloat16); prefill_attention_s (the prefill kernel's
 *       rate when the profile gives one, else the decode attention's form, cost_attention_time);
 *     - the indexer (selecting layers): every query scores every earlier key: multiply-adds
 *       heads x dim x sum_p (p / compress + 1), the keys read once per iteration; a roofline
 *       (the fitted indexer form is a decode kernel's);
 *     - the GEMMs: cost_gemm_time at M = the iteration's tokens: the fitted form is evaluated
 *       far outside its fitted M (the run reports it under [fit_range], gemm_fp8_m): its
 *       tensor term is the roofline's, so large chunks are compute-bound at mma_efficiency;
 *       dhbench has not measured these shapes (a profile without the prefill table); with
 *       it ([hw] prefill_gemm_m, prefill_gemm_flops, prefill_expert_flops: measured at
 *       M = 1024-16384 on the H200 by kernels/suites/gemm-prefill.suite) prefill_gemm_s;
 *     - MoE: experts touched by the chunk's tokens (and the other ranks' decode tokens), the
 *       all-to-all of the chunk's tokens; TP attention's all-reduce as in decode (tp.h).
 *   Under a policy with a host tier the prompt's KV rows (every kv-owning layer) are written
 *   to the host pool (HiSparse's direct-to-host path) through the write-through path (the
 *   d2h server), beside the decode steps' write-through; PCIe is full duplex, so they do not
 *   slow the misses' fetches host-to-device. Without a host tier they stay on the GPU.
 *
 *   With data-parallel attention every rank runs its own scheduler (its own queue, pool and
 *   new_token_ratio; the DP controller dispatches requests round robin, data_parallel_controller.py,
 *   --load-balance-method auto = round_robin without PD disaggregation, sgl-project/sglang#16110),
 *   and every forward pass is synchronised over the ranks: prepare_mlp_sync_batch
 *   (scheduler_dp_attn_mixin.py prepare_mlp_sync_batch_raw) all-gathers each rank's token count,
 *   a rank with nothing to run joins with an idle batch, and the MoE all-to-all holds every rank
 *   to the slowest; can_cuda_graph is the minimum over the ranks, so while one rank extends the
 *   others' decode runs without CUDA graphs. Nothing lines the ranks' prefills up by default
 *   (the PrefillDelayer, prefill_delayer.py, which holds a rank's prefill until every rank has
 *   one, is off unless enabled). The simulated GPU stands for every rank, and where the others'
 *   prefill iterations fall is the key:
 *     lockstep  the ranks, alike, prefill at the same moments (the same requests at the same
 *               time, as a closed loop's identical requests keep them): each iteration's experts
 *               take every rank's chunk (step_ctx.prefill_ranks = attention_dp), and the holds
 *               are this rank's own iterations;
 *     disjoint  the other ranks' iterations fall at other times (ranks whose waves drifted
 *               apart): each iteration is one rank's chunk beside the others' decode batches
 *               (prefill_ranks 1: the experts take that chunk's share and the decode tokens;
 *               this rank's decoding batch stands for each other rank's), and each of this
 *               rank's iterations is followed by attention_dp - 1 decode steps held to at least
 *               its length (the other ranks' iterations of the same size).
 *   The truth lies between; both are bounds. The eager decode of a held step is not charged
 *   (the prefilling rank's longer layers set the pass).
 * A request's prefill ends when its last chunk's iteration ends: admit_req.prefill_done_t
 * (admit.h), the hook for per-request time to first token. */
#ifndef DH_PREFILL_H
#define DH_PREFILL_H

#include <stdint.h>

#include "common/cfg.h"
#include "sim/step.h"

enum { PREFILL_DISAGG = 0, PREFILL_CHUNKED };
enum { PREFILL_ALTERNATE = 0, PREFILL_MIXED };

typedef struct {
    int mode;                 /* PREFILL_DISAGG: none on this GPU */
    uint32_t chunk_tokens;
    int mixing;               /* PREFILL_ALTERNATE or PREFILL_MIXED */
    uint32_t max_running;     /* 0: no cap */
    int dp_disjoint;          /* dp_hold = disjoint */
} prefill_cfg;

/* Read [prefill] (every key checked). 0 or -1 with dh_err() naming the file and key. */
int prefill_config_load(cfg *c, prefill_cfg *p);

/* How requests are admitted against the KV pool ([instance] admission; admit.h applies it):
 *   reserve_full (default)  a request is admitted when its whole final length (prompt +
 *                           output) fits the ledger, reserved at once; it never has to leave.
 *   sglang                  SGLang's scheduler as it ships (python/sglang/srt/managers/
 *                           schedule_policy.py PrefillAdder, schedule_batch.py retract_decode,
 *                           scheduler.py update_running_batch): admission on an estimate of
 *                           the running requests' future tokens scaled by new_token_ratio,
 *                           which decays every decode step; retraction when a decode step
 *                           would not fit (admit.h has the rules).
 * The constants are SGLang's environment variables and server argument (environ.py,
 * server_args.py; their values in docs/SERVING.md and the instance files). */
enum { ADMIT_RESERVE_FULL = 0, ADMIT_SGLANG };

typedef struct {
    int mode;                          /* ADMIT_RESERVE_FULL or ADMIT_SGLANG */
    double init_new_token_ratio;       /* SGLANG_INIT_NEW_TOKEN_RATIO */
    double schedule_conservativeness;  /* --schedule-conservativeness */
    double min_new_token_ratio_factor; /* SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR */
    uint32_t new_token_ratio_decay_steps; /* SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS */
    uint32_t retract_decode_steps;     /* SGLANG_RETRACT_DECODE_STEPS */
    uint32_t clip_max_new_tokens;      /* SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION */
} admission_cfg;

/* Read [instance] admission and, with sglang, its constants (defaults: SGLang's); a constant
 * given under reserve_full is an error. 0 or -1 with dh_err() naming the file and key. */
int admission_config_load(cfg *c, const prefill_cfg *pf, admission_cfg *a);

/* One request's part of an iteration: tokens of its prompt from position start. */
typedef struct {
    double start, tokens;
} prefill_span;

/* What an iteration costs, by part (seconds, bytes): the sum of the layers' parts is the
 * compute, written the bytes for the host pool. */
typedef struct {
    double attention, indexer, gemm, comm;  /* summed over layers */
    double compute;                         /* attention + indexer + gemm + comm, per layer in order */
    double written;                         /* prompt KV bytes to host */
    double tokens;
} prefill_parts;

/* One layer's attention in a prefill iteration: its queries' rows (bytes) and FLOPs. With the
 * profile's [hw] prefill_attn_flops (a prefill kernel's published rate): the FLOPs at that
 * rate, the rows' bytes at hbm_bw as the floor (each query reads its rows once, no reuse
 * across queries credited), plus the attention's launch; without it cost_attention_time (the
 * decode kernel's fitted form, whose byte rate is a decode gather's). O(1). */
double prefill_attention_s(const step_ctx *cx, double bytes, double flops, double queries, int fp8);

/* The heads one rank's prefill attention computes for a layer of `heads` attention heads:
 * heads / attn_tp, padded up to [instance] prefill_attn_head_multiple (above). O(1). */
double prefill_rank_heads(const step_ctx *cx, double heads);

/* One layer's GEMMs in a prefill iteration of `tokens` tokens on this GPU (flops: the layer's
 * GEMM FLOPs, weight_bytes the weights it reads; moe: a layer with routed experts). With the
 * profile's measured prefill table ([hw] prefill_gemm_m, hw.h): the projections' FLOPs at
 * the rate measured at M = tokens, the routed experts' at M = the rows the GPU's experts take,
 * the weights' streaming time as the floor; without it cost_gemm_time. O(table). */
double prefill_gemm_s(const step_ctx *cx, int moe, double weight_bytes, double flops, double tokens,
                      double decode_tokens_dp);

/* The compute seconds of one prefill iteration over n spans on this GPU, with
 * decode_tokens_dp decode tokens on the whole instance routed beside it (experts touched);
 * parts (may be NULL) receives its breakdown. hw ranges are noted in *ranges when given.
 * O(layers x n). */
double prefill_iter_s(const step_ctx *cx, const prefill_span *sp, uint32_t n, double decode_tokens_dp,
                      prefill_parts *parts, hw_range_log *ranges);

#endif
