/* sim.h: the discrete-event simulation of one decode GPU of a decode
 * instance, replaying attention selections against a residency policy.
 *
 * Configuration: an instance file (models/instances/NAME.ini) names the model
 * (models/NAME.ini, model.h) and the hardware profile (models/hw/NAME.ini, hw.h)
 * and holds these sections:
 *   [instance]  model, hw, gpus, attention_dp, moe_ep, micro_batches,
 *               moe_tp (optional, default 1: the routed experts tensor-parallel over
 *               moe_tp = gpus GPUs as SGLang runs them without --moe-a2a-backend and
 *               --ep-size, exclusive with moe_ep > 1; sim/cost.h moe_tp) with
 *               moe_tp_allreduce and moe_tp_allreduce_curve (the all-reduce table its
 *               collectives are costed with, sim/tp.h) and optionally moe_tp_experts and
 *               moe_tp_experts_curve (its routed experts' measured times, sim/fmoe.h),
 *               memory (memplan.h; docs/MEMORY.md): kv_dtype (fp8: the model's
 *               row_bytes; bf16: its row_bytes_bf16), dense_mlp_tp,
 *               shared_expert_tp, lm_head_tp, weights_per_gpu_bytes (optional:
 *               replaces the weights computed from the model), and either
 *               mem_fraction_static with context_bytes, cuda_graph_bytes and
 *               comm_buffer_bytes, or workspace_bytes;
 *               costs outside the layers (docs/MEMORY.md, "Costs"):
 *               step_overhead_s (the scheduler between steps), sampling_s,
 *               dp_gather_lat_s and dp_gather_gbps (DP attention's gather and
 *               scatter around tensor-parallel MLPs and the LM head),
 *               straggler_cv (lockstep expert-parallel ranks); moe_comm_s,
 *               moe_comm_gbps (optional: all-to-all bytes / bandwidth is added
 *               to moe_comm_s per MoE layer), a2a (optional: a bin/dha2a fit,
 *               models/hw/a2a.ini; its [gpus.<moe_ep>.dispatch|combine]
 *               latency and bandwidth replace moe_comm_s and moe_comm_gbps
 *               where status = measured),
 *               attn_tp (optional, default 1: attention TP ranks per data-parallel
 *               group, sim/tp.h; attention_dp x attn_tp <= gpus), and with
 *               attn_tp > 1 attn_tp_allreduce_us and attn_tp_allreduce_busbw_gbps
 *               (the all-reduce's latency and NCCL bus bandwidth)
 *   [workload]  see wl.h
 *   [policy]    name (resident|hisparse|adaptive|oracle, or a registered one, pol.h;
 *               default hisparse),
 *               hisparse_budget_k (B as a multiple of k, >= 1; oracle uses
 *               the same B), host_to_device_ratio (the host KV pool of a
 *               policy with a host tier, as a multiple of the device KV pool:
 *               SGLang HiSparse's; 0 = unbounded), adaptive_max_optional_k (cap on optional rows
 *               per (request, group) as a multiple of k; 0 = none);
 *               the SGLang policies' (pol_sglang.c): device_buffer_size
 *               (rows per (request, layer), >= every group's k; default 4096,
 *               SGLang's SparseConfig), sglang_page_size (default 64, the page
 *               of SGLang's HiSparse tests; assumed for the deployments),
 *               sglang_cold (staging|direct, default staging),
 *               sglang_order (hashed|ascending, default hashed: the indexer's
 *               top-k comes out unsorted),
 *               sglang_high_watermark / sglang_low_watermark (0.85 / 0.70,
 *               sgl-project/sglang#30266)
 *   [trace]     preset (generator preset name) or path (HDF5 trace file),
 *               seed, keyframe_interval
 *   [spec]      speculative decoding: mode, draft, shared_retrieval,
 *               draft_ring, staging_reuse, disable_batch_size, adaptive (specrun.h)
 *   [prefill]   mode (disaggregated | chunked), chunk_tokens, mixing, max_running
 *               (prefill.h); [instance] admission (reserve_full | sglang) and SGLang's
 *               scheduler constants (prefill.h, admit.h)
 * "--set section.key=value" overrides go to whichever file has the section
 * (model: [model], [kind.*]; hardware: [hw], [pcie], [gather], [host];
 * everything else: the instance file), and unknown keys are errors.
 *
 * The simulated GPU serves ceil(concurrency / attention_dp) requests (attention
 * is data-parallel; MoE is expert-parallel across all GPUs, so expert weights
 * read per layer depend on the instance's token count). One step: admit
 * requests that fit the HBM ledger, advance every request's streams by one
 * position under the policy (counts only change with the rows that change),
 * then time the step's layer graph (step.h). Invariants are checked at the end
 * of every run; a violation is an error. */
#ifndef DH_SIM_H
#define DH_SIM_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/stats.h"
#include "sim/ledger.h"
#include "sim/fmoe.h"
#include "sim/hw.h"
#include "sim/memplan.h"
#include "sim/model.h"
#include "sim/pol.h"
#include "sim/prefill.h"
#include "sim/reqlat.h"
#include "sim/specrun.h"
#include "sim/tp.h"
#include "sim/wl.h"
#include "traces/sel.h"

typedef struct {
    cfg *inst, *model_cfgf, *hw_cfgf;
    char inst_path[512];
    model_cfg model;
    hw_profile hw;
    wl_cfg wl;
    double gpus, attention_dp, moe_ep;
    double moe_tp;                     /* [instance] moe_tp: routed experts tensor-parallel (1: none) */
    tp_cfg moe_ar;                     /* its collectives' all-reduce (ranks moe_tp) */
    fmoe_curve moe_fm;                 /* [instance] moe_tp_experts: its routed experts' measured
                                        * times (n_points 0: at the fitted GEMM rate) */
    double weights_per_gpu, workspace, step_overhead_s, moe_comm_s;
    memplan mem;                       /* the memory plan: weights by part, the framework's share */
    double sampling_s;                 /* sampling per step */
    double dp_gather_lat_s, dp_gather_gbps; /* DP attention's gather / scatter */
    double straggler_cv;               /* per-rank time variation of a lockstep MoE layer */
    double moe_comm_gbps; /* all-to-all bandwidth per GPU (0: latency only) */
    /* The all-to-all cost in use, per phase (0 dispatch, 1 combine): from the
     * instance's a2a file where it holds a measurement for moe_ep GPUs, else
     * from moe_comm_s (split evenly) and moe_comm_gbps. */
    double a2a_lat_s[2], a2a_gbps[2];
    char a2a_source[192];
    uint32_t micro_batches;
    tp_cfg tp;                         /* [instance] attn_tp and its all-reduce (ranks 1: none) */
    pol_kind policy;
    double hisparse_budget_k, adaptive_max_optional_k;
    pol_sglang_cfg sgl;                /* [policy] the SGLang policies' keys */
    char preset[256], trace_path[512];
    uint64_t seed;
    uint32_t keyframe_interval;
    int share_streams;                 /* [trace] share: the generator's records kept for other runs */
    specrun_cfg spec;                  /* [spec]: mode 0 = plain decoding */
    prefill_cfg prefill;               /* [prefill]: disaggregated (default) or chunked */
    admission_cfg admission;           /* [instance] admission: reserve_full (default) or sglang */
} sim_config;

/* Load an instance file with its model and hardware files (paths in the
 * instance file are relative to the current directory, else to
 * $DHSPARSE_ROOT), apply overrides, and reject unknown keys. */
int sim_config_load(const char *instance_path, char *const *sets, int n_sets, sim_config *sc);
void sim_config_release(sim_config *sc);
/* Requests on the simulated GPU at instance concurrency c. */
uint32_t sim_per_gpu(const sim_config *sc, double c);
/* The trace shape of this workload: model groups, requests and lengths. */
int sim_shape(const sim_config *sc, trace_shape *sh);
/* The selection source: the trace file if [trace] path is set (checked
 * against the model), else the generator preset with the workload's shape. */
int sim_open_source(const sim_config *sc, sel_source **out);

typedef struct {
    uint32_t step;
    double t_start, t_end;
    uint32_t active, tokens, admitted;
    double selected, missed, fetch_bytes, write_bytes, fetch_busy;
    double optional_rows;              /* adaptive: optional rows per (request, group) this step */
    double accepted, verified;         /* speculative: drafts accepted / verified, summed over requests */
    double expected_accepted;          /* speculative: E[accepted] given the plan, summed (specrun_slot) */
    double demotions_total;            /* pol_ops.demotes: requests demoted so far, the run's count */
    double union_rows;                 /* speculative: union rows summed over (request, group) */
    double fetched_rows;               /* speculative: rows fetched summed over (request, group) */
    double fetched_pq;                 /* speculative, shared retrieval off: per-query fetch count */
    double draft_s, staging_bytes;     /* speculative: draft pass seconds; union rows staged (bytes) */
    double hbm[MEM_N_CATEGORIES];
} sim_tl_row;

/* A figure that some configurations do not compute: union rows under a
 * policy without a host tier (it reads no union), the shared or the
 * per-query fetch count under the other retrieval mode. */
typedef struct {
    double value;
    int known;
} sim_opt;
static inline sim_opt sim_opt_of(double v) { return (sim_opt){ v, 1 }; }
/* Its value, or `missing` when not computed (the reports print -1 or "-"). */
static inline double sim_opt_or(sim_opt o, double missing) { return o.known ? o.value : missing; }

typedef struct {
    char policy[32], model[64], hw[64], source[256];
    char a2a[192];                     /* where the all-to-all cost came from */
    double concurrency;                /* instance-wide, as configured */
    uint32_t per_gpu;                  /* requests per GPU targeted */
    uint32_t steps, measured_steps;
    double sim_time, measured_time;
    double tokens, measured_tokens;
    double tok_s_gpu;                  /* output tokens/s per decode GPU (measured steps; a TP
                                        * group's tokens over its attn_tp GPUs) */
    double tpot_p50, tpot_p90, tpot_p99, tpot_mean; /* seconds per output token: a step's time over
                                                     * the tokens each request emitted in it (1 plain,
                                                     * accepted + 1 on average speculative), weighted by tokens */
    double selected_rows, missed_rows, fetch_fraction;
    double fetch_bytes, write_bytes, h2d_util, d2h_util, compute_util, h2d_gbps;
    double hbm_capacity, hbm_peak_total, hbm_peak[MEM_N_CATEGORIES], hbm_mean[MEM_N_CATEGORIES];
    double mean_active;
    uint32_t admitted, completed, unfinished, never_admitted;
    uint32_t budget_rows;              /* hisparse/oracle B of group 0 */
    double mean_optional_rows;
    double mean_budget_rows;           /* hot budget per (request, group): B, or k + optional (adaptive) */
    /* Speculative decoding (spec[0] == 0: plain). */
    char spec[16];
    int shared_retrieval, draft_ring, staging_reuse;
    double mean_accepted;              /* accepted drafts per (request, step) */
    double tokens_per_step;            /* emitted tokens per (request, step): accepted + 1 */
    double mean_verify_len;            /* drafts verified per (request, step) (DSpark chooses) */
    sim_opt union_rows, union_rows_k;  /* union rows per (request, group, step), and / k (not
                                        * computed without a host tier: not read) */
    sim_opt fetched_shared_rows;       /* rows fetched per (request, group, step), shared retrieval */
    sim_opt fetched_per_query_rows;    /* the same if every query fetched its own (per-query
                                        * retrieval only) */
    double draft_share, verify_share;  /* of the measured step time */
    double staging_used_peak;          /* bytes of union rows staged at once, largest step */
    hw_range_log ranges;               /* cost tables used outside the profile's [fit_range] */
    double fetch_busy_s;               /* fetch seconds charged, whole run */
    double fetch_slope_delta_s;        /* their change had the fetch tables been extrapolated by
                                        * their end slopes instead of held at their ends */
    /* Uncertainty: 95 % intervals by batch means over the measured steps
     * (common/stats.h), one batch plan per run, decided on tokens/s. */
    stats_plan batches;
    uint32_t warmup_steps;             /* steps before the measured ones (configured) */
    uint32_t mser_warmup;              /* MSER-5's warm-up on the per-step tokens/s series */
    double warmup_tok_s;               /* output tokens/s over the warm-up steps (0: none) */
    double fetched_rows_per_token;     /* rows fetched (every layer) per output token, measured steps */
    double fetched_bytes_per_token;    /* bytes fetched host to device per output token, measured steps */
    stats_ci ci_tok_s, ci_tpot_mean, ci_tpot_p50, ci_tpot_p90, ci_tpot_p99, ci_fetch_fraction;
    stats_ci ci_rows_per_token, ci_bytes_per_token, ci_tokens_per_step;
    /* Speculative: tokens/s with the accepted drafts as a control variate (common/stats.h);
     * when used (cv_used), tok_s_gpu and ci_tok_s are the controlled ones, tok_s_plain the
     * measured ratio and cv.raw its plain interval. */
    int cv_used;
    stats_cv cv;
    double tok_s_plain;
    /* pol_ops.demotes: requests demoted, whole run and measured steps, and per 1000
     * measured steps with its interval (batch means of the per-step count). */
    int has_demotions;
    double demotions, measured_demotions, demotions_per_1k;
    stats_ci ci_demotions_per_1k;
    double wall_s, rows_per_wall_s;    /* wall clock: not deterministic, reported apart */
    sim_tl_row *tl;
    uint32_t n_tl;
    reqlat_rec *req;                   /* [n_req] per-request events (reqlat.h), by request index */
    uint32_t n_req;
    double measured_from_s;            /* the first measured step's start (after the warm-up) */
    /* [instance] admission = sglang: requests retracted (admit.h), whole run and measured
     * steps; has_retractions 0 under reserve_full, where none can be. */
    int has_retractions;
    double retractions, measured_retractions;
} sim_result;

/* Simulate policy over src (whose shape fixes requests and lengths). 0 or -1
 * with dh_err() set (bad trace, an impossible workload, a broken invariant). */
int sim_run(const sim_config *sc, pol_kind policy, sel_source *src, sim_result *res);
void sim_result_release(sim_result *r);
/* The layer-graph context a run of policy on sc starts from (costs, SMs, the all-to-all,
 * TP): what prefill_iter_s and the step model are evaluated with. 0 or -1 with dh_err(). */
int sim_step_ctx(const sim_config *sc, pol_kind policy, step_ctx *cx);

/* The keys of an instance ([instance], [policy], [trace]; [workload] and [spec] are wl_schema's
 * and specrun_schema's) and of an all-to-all file (docs/CONFIG.md). */
extern const cfg_schema instance_schema, a2a_schema;

#endif
