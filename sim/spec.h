/* spec.h: speculative decoding with a draft model (DFlash2, DSpark): draft
 * configs, acceptance sampling, DSpark's per-request verify-length choice and
 * the draft pass's cost and memory.
 *
 * Draft config (models/drafts/NAME.ini; every key required unless a default
 * is named; every number carries its source or "assumed" in a comment):
 *   [draft]   name               label
 *             kind               dflash2 | dspark
 *             target             the model name it drafts for (model.h [model] name)
 *             layers, hidden     draft transformer layers (stages) and width
 *             block              positions one parallel draft pass fills
 *             gamma              drafted tokens per step (<= block); verification
 *                                scores gamma + 1 queries (last accepted + drafts)
 *             window             draft KV window W in tokens (the ring's size)
 *             row_bytes          draft KV bytes per token, all draft layers
 *             weight_bytes       draft backbone weights (bytes, whole draft)
 *             weight_shards      GPUs the backbone weights are split across
 *             pass_bytes         HBM bytes one draft pass reads on one GPU
 *                                whatever the batch (weights share, LM head share)
 *             flops_per_token    FLOPs per block position outside attention
 *             attn_flops_per_row attention FLOPs per block position per ring row
 *             fp8                draft math in FP8 (else BF16)
 *   [accept.ctx_le_N]            acceptance table for context length <= N tokens
 *   [accept.ctx_any]             the table for every longer context (required)
 *             marginal           gamma values: a[i] = P(draft position i is accepted)
 *             reported_tau, reported_tau_positions   (optional) a published mean
 *                                accepted length with n positions; the loader
 *                                checks 1 + a[0] + ... + a[n-1] against it
 *   kind = mtp (the target's own multi-token-prediction layer, run as SGLang's EAGLE
 *   worker runs it; no block, gamma, window or attn_flops_per_row) takes instead:
 *             layers             MTP modules (GLM-5, DeepSeek-V3: 1); each draft step runs
 *                                them once
 *             layer_kind         the target kind ([kind.NAME] of the model) an MTP layer is
 *                                built like: its attention, indexer and MoE are charged with
 *                                the target's cost model (sim/step.h) at the draft's tokens
 *             num_steps          SGLang's speculative_num_steps: sequential draft forwards,
 *                                the drafts of the chain (gamma)
 *             topk               speculative_eagle_topk: branches per draft step (tokens per
 *                                request of a draft forward)
 *             num_draft_tokens   speculative_num_draft_tokens: tokens the target verifies per
 *                                request (topk 1: num_steps + 1, as SGLang requires)
 *             hidden, row_bytes (the MTP layers' KV per token, kept for the whole context),
 *             weight_bytes, weight_shards, pass_bytes (bytes one draft forward reads beside
 *             the layer: its projections of the embedding and hidden state, its LM-head share),
 *             flops_per_token (their FLOPs per drafted token), fp8
 *   [dspark]  (kind = dspark only)
 *             markov_rank        rank of the Markov bias (logits += U[prev] V)
 *             vocab              vocabulary size
 *             markov_value_bytes bytes per U/V value
 *             confidence_params  parameters of the confidence head
 *             confidence_concentration  kappa: per (request, step) spread of
 *                                the true conditional acceptance (Beta, see below)
 *             confidence_error   the head's prediction error, sd in logit space
 *
 * Acceptance table interpretation. DESIGN lists *marginal* per-position rates:
 * a[i] is the probability that draft position i (0-based) is accepted, which
 * under prefix acceptance means positions 0..i are all accepted, so
 * a[i] = P(accepted >= i + 1) and E[accepted | gamma] = a[0] + ... + a[gamma-1].
 * The conditional rate c[i] = a[i] / a[i-1] (P(i accepted | i-1 accepted)) must
 * lie in [0, 1]: the loader rejects a table that is outside [0, 1] or rises.
 * A step emits accepted + 1 tokens (the target's own token after the last
 * accepted draft); published "tau" counts that token too.
 *
 * Sampling uses ONE uniform u per (request, step): accepted = #{i < L : u < a[i]}.
 * Because a[] does not rise this is exact, and it couples verify lengths: for
 * the same u a longer L never accepts fewer tokens. The stream is keyed by
 * (seed, request) and positioned by the step (spec_stream), so results do not
 * depend on batch order, thread count or how many draws other requests made.
 *
 * DSpark confidence model (documented assumption; the DSpark paper, arXiv
 * 2607.05147, and deepseek-ai/DeepSpec describe a confidence head that predicts
 * per-position acceptance, no distributional model of its error). Per (request,
 * step) the request's true conditional rate at position i is drawn
 * c'[i] ~ Beta(kappa c[i], kappa (1 - c[i])) independently per position, so
 * E[c'[i]] = c[i] and, positions being independent, E[prod c'] = a[i]: the table
 * stays the population mean. The head predicts logit(c^[i]) = logit(c'[i]) +
 * error * z, z ~ N(0, 1); its marginal prediction is the running product. The
 * accepted count is sampled from the request's true marginals (c' products),
 * the verify length chosen from the predicted ones. Rates of exactly 0 or 1
 * stay exact (degenerate Beta, no head error).
 *
 * Verify-length rule (DSpark's batch scheduler, arXiv 2607.05147 /
 * deepseek-ai/DeepSpec): choose each request's verify length L_r in
 * [0, gamma] to maximise the batch's expected emitted tokens per second,
 *     sum_r (1 + sum_{i<L_r} p_r[i])  /  T(sum_r (L_r + 1)),
 * with T the step time as a function of the total verified query tokens.
 * Since each p_r is non-increasing, for a fixed total the best allocation takes
 * the largest p values across the batch (a prefix of each request's list), so
 * greedy marginal-gain allocation -- add the next most likely token anywhere in
 * the batch, evaluate T, keep the best total -- is exact. Cost: O(n gamma log(n
 * gamma)) plus n gamma + 1 calls of T. DFlash2 always verifies its full block.
 *
 * Use in a speculative decode step (per request r at committed position p;
 * sim/union.h has the verification side):
 *   1. spec_confidence(d, ctx, seed, r, p, &cf[r]) for every request; DSpark:
 *      spec_choose_verify(cf[*].predicted, ...) gives L[r], DFlash2 L[r] =
 *      gamma; both capped by the positions left in the request's output.
 *   2. a[r] = spec_accept(&cf[r], L[r], seed, r, p). Acceptance never depends
 *      on timing, so it is drawn before the step is timed (the write-through
 *      volume, a[r] + 1 rows, is then known). Positioning by p rather than by
 *      the global step gives a request the same draws under every policy.
 *   3. The draft pass, spec_draft_time(d, hw, sms, n, sum_r spec_ring_rows),
 *      runs on the compute server before the verification's layer graph.
 *   4. The request advances by a[r] + 1 tokens.
 * Memory: spec_weight_bytes_per_gpu once (MEM_WEIGHTS), spec_ring_bytes at the
 * request's final context per request (MEM_DRAFT). */
#ifndef DH_SPEC_H
#define DH_SPEC_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/rng.h"
#include "sim/hw.h"

#define SPEC_MAX_GAMMA 16
#define SPEC_MAX_BUCKETS 8

typedef enum { SPEC_DFLASH2 = 1, SPEC_DSPARK = 2, SPEC_MTP = 3 } spec_kind;

/* Purposes of the seeded streams of one (seed, request); see spec_stream. */
enum { SPEC_RNG_ACCEPT = 0x5A1, SPEC_RNG_CONF_TRUE = 0x5A2, SPEC_RNG_CONF_HEAD = 0x5A3 };

typedef struct {
    uint64_t ctx_max;                  /* applies to contexts <= ctx_max; UINT64_MAX for ctx_any */
    double marginal[SPEC_MAX_GAMMA];   /* a[i] = P(position i accepted) */
    double cond[SPEC_MAX_GAMMA];       /* c[i] = a[i] / a[i-1] (c[0] = a[0]; 0 after a zero) */
} spec_accept_table;

typedef struct {
    char name[64], target[64];
    spec_kind kind;
    uint32_t layers, block, gamma;
    double hidden;
    uint64_t window;
    double row_bytes, weight_bytes, weight_shards, pass_bytes;
    double flops_per_token, attn_flops_per_row;
    int fp8;
    uint32_t n_buckets;                /* sorted by ctx_max, the last is ctx_any */
    spec_accept_table bucket[SPEC_MAX_BUCKETS];
    /* MTP only: the target kind its layers copy, branches per step, verified tokens per
     * request (in block as well; gamma = num_steps). */
    char layer_kind[48];
    uint32_t topk, draft_tokens;
    /* DSpark only (zero for DFlash2). */
    double markov_rank, vocab, markov_value_bytes, confidence_params;
    double confidence_concentration, confidence_error;
} spec_draft;

/* Load a draft config. Every key is checked (range, type, unknown keys); the
 * message names the file, section and key. 0 or -1 with dh_err() set. */
int spec_draft_load(const char *path, spec_draft **out);
/* The same from an already loaded config (consumes and checks every key). */
int spec_draft_from_cfg(cfg *c, spec_draft **out);
void spec_draft_free(spec_draft *d);
const char *spec_kind_name(spec_kind k);

/* The acceptance table for a context of ctx_len tokens. */
const spec_accept_table *spec_table(const spec_draft *d, uint64_t ctx_len);
/* E[accepted drafts] when gamma positions are verified: a[0] + ... + a[gamma-1]. */
double spec_expected_accepted(const spec_accept_table *t, uint32_t gamma);
/* Var[accepted] for gamma positions: sum (2i + 1) a[i] - E^2. */
double spec_variance_accepted(const spec_accept_table *t, uint32_t gamma);

/* The stream of (seed, request) for purpose, positioned at step. */
void spec_stream(rng_stream *r, uint64_t seed, uint32_t request, uint32_t step, uint32_t purpose);
/* Accepted drafts 0..gamma from marginal rates a[0..gamma) (non-increasing),
 * one uniform draw. */
uint32_t spec_sample_marginal(const double *marginal, uint32_t gamma, rng_stream *r);
/* Accepted drafts 0..gamma from the draft's table for ctx_len. */
uint32_t spec_sample_accepted(const spec_draft *d, uint64_t ctx_len, uint32_t gamma, rng_stream *r);

/* One request's acceptance this step: its true marginals (what is sampled) and
 * the confidence head's predicted marginals (what DSpark schedules on). For
 * DFlash2 both equal the table. Deterministic in (seed, request, step). */
typedef struct {
    uint32_t gamma;
    double marginal[SPEC_MAX_GAMMA];
    double predicted[SPEC_MAX_GAMMA];
} spec_conf;
void spec_confidence(const spec_draft *d, uint64_t ctx_len, uint64_t seed, uint32_t request,
                     uint32_t step, spec_conf *out);
/* Accepted drafts for one request this step given its verify length L <= gamma:
 * min(sampled, L) with the (seed, request, step) acceptance stream. */
uint32_t spec_accept(const spec_conf *cf, uint32_t verify_len, uint64_t seed, uint32_t request, uint32_t step);
/* E[spec_accept(cf, verify_len, ...)] = marginal[0] + ... + marginal[verify_len - 1]: the
 * acceptance stream is independent of cf and of the choice of verify_len (other purposes,
 * or none), so this is exact given the plan; the control variate of the intervals
 * (common/stats.h) subtracts it from the draws. */
double spec_accept_expected(const spec_conf *cf, uint32_t verify_len);

/* Step time (seconds) as a function of the batch's total verified query tokens. */
typedef double (*spec_time_fn)(double verified_tokens, void *user);
/* DSpark's rule: verify_len[r] in [0, gamma] for each of n requests, from
 * predicted[r*stride + i] (non-increasing in i). Returns the objective
 * (expected emitted tokens per second). The all-zero choice is the baseline;
 * ties keep the smaller total. */
double spec_choose_verify(const double *predicted, uint32_t n, uint32_t gamma, uint32_t stride,
                          spec_time_fn step_time, void *user, uint32_t *verify_len);
/* The objective of a given choice (for reports and tests). */
double spec_verify_objective(const double *predicted, uint32_t n, uint32_t stride,
                             const uint32_t *verify_len, spec_time_fn step_time, void *user);

/* Draft weights on one GPU (backbone share + Markov bias + confidence head). */
double spec_weight_bytes_per_gpu(const spec_draft *d);
/* Draft KV rows held for a request at context ctx: min(W, ctx) with the ring,
 * ctx without it (the ablation); bytes = rows x row_bytes. */
double spec_ring_rows(const spec_draft *d, uint64_t ctx, int ring_on);
double spec_ring_bytes(const spec_draft *d, uint64_t ctx, int ring_on);

/* One draft pass over n_req requests whose rings hold ring_rows rows in total
 * (the pass reads the rings, never the target KV): bytes read and FLOPs. */
typedef struct { double bytes, flops; } spec_cost;
void spec_draft_cost(const spec_draft *d, double n_req, double ring_rows, spec_cost *c);
/* Its time on one GPU: one kernel per draft layer (plus one for DSpark's bias
 * and head), each a roofline of its share of bytes and FLOPs (cost_roofline_time). */
double spec_draft_time(const spec_draft *d, const hw_profile *hw, double compute_sms, double n_req,
                       double ring_rows);

/* Every key of a draft file (docs/CONFIG.md). */
extern const cfg_schema draft_schema;

#endif
