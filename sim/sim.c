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
#include "common/cfgkey.h"
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

/* ---- the schemas (docs/CONFIG.md is printed from them: bin/dhconfig schema) ---- */

static const cfg_key inst_keys[] = {
    CK_ROW("instance", "model", CK_STR, "", 0, 0, NULL, "The model file (models/NAME.ini).", 0),
    CK_ROW("instance", "hw", CK_STR, "", 0, 0, NULL, "The hardware profile (models/hw/NAME.ini).", 0),
    CK_ROW("instance", "a2a", CK_STR, "", 0, 0, "", "Measured expert-parallel all-to-all costs (models/hw/a2a.ini); empty: "
           "the assumed moe_comm_s, moe_comm_gbps.", 0),
    CK_ROW("instance", "gpus", CK_NUM, "", 1, 4096, NULL, "GPUs of the serving instance.", 0),
    CK_DYN_ROW("instance", "attention_dp", CK_NUM, "", 1, 4096, NULL, "1 .. gpus", "Attention data-parallel ranks "
               "(requests are spread over them).", 0),
    CK_DYN_ROW("instance", "moe_ep", CK_NUM, "", 1, 4096, NULL, "1 .. gpus", "Expert-parallel GPUs.", 0),
    CK_DYN_ROW("instance", "moe_tp", CK_NUM, "", 1, 4096, "1", "1, or gpus with moe_ep = 1 and attention_dp x "
               "attn_tp = gpus", "Tensor-parallel MoE: every routed expert split over this many GPUs (SGLang without "
               "--moe-a2a-backend and --ep-size: fused_moe on 1 / moe_tp of each expert's intermediate dimension), no "
               "all-to-all and no straggler term; its collectives all-reduces of the MoE group's hidden states (sim/cost.h "
               "moe_tp, sim/step.c).", 0),
    CK_DYN_ROW("instance", "moe_tp_allreduce", CK_STR, "", 0, 0, "required with moe_tp > 1; else absent", NULL,
               "Published all-reduce times by size for the TP MoE's collectives (models/hw/allreduce-NAME.ini, "
               "sim/tp.h).", 0),
    CK_DYN_ROW("instance", "moe_tp_allreduce_curve", CK_STR, "", 0, 0, "required with moe_tp_allreduce", NULL,
               "The table's [curve.NAME] the TP MoE's collectives run on (NCCL's for DP attention's all-gather and "
               "reduce-scatter, the custom all-reduce's under TP attention).", 0),
    CK_DYN_ROW("instance", "moe_tp_experts", CK_STR, "", 0, 0, "absent: the routed experts' weight bytes at the fitted "
               "GEMM rate", "only with moe_tp > 1", "Measured times of a TP MoE layer's routed experts on one GPU by "
               "tokens into the MoE (models/hw/fused-moe-NAME.ini, sim/fmoe.h), charged in place of their weight bytes "
               "at [hw] weight_bw in a decode step (prefill passes keep the GEMM form).", 0),
    CK_DYN_ROW("instance", "moe_tp_experts_curve", CK_STR, "", 0, 0, "required with moe_tp_experts", NULL,
               "The table's [curve.NAME] (the kernel path the deployment runs).", 0),
    CK_DYN_ROW("instance", "weights_per_gpu_bytes", CK_NUM, "bytes", 0, 1e15, "computed from the model (sim/memplan.h)",
               NULL, "Weights held by one GPU (at least its experts); given, it replaces the computed figure.", 0),
    CK_DYN_ROW("instance", "workspace_bytes", CK_NUM, "bytes", 0, 1e15, "one of workspace_bytes and mem_fraction_static",
               NULL, "Activations and workspace per GPU, the whole reservation outside the weights and KV.", 0),
    CK_DYN_ROW("instance", "mem_fraction_static", CK_NUM, "", 0.01, 1, "one of workspace_bytes and mem_fraction_static",
               NULL, "The framework's static share of HBM for weights and KV (SGLang --mem-fraction-static); with "
               "context_bytes, cuda_graph_bytes and comm_buffer_bytes (docs/MEMORY.md).", 0),
    CK_DYN_ROW("instance", "context_bytes", CK_NUM, "bytes", 0, 1e15, "required with mem_fraction_static", NULL,
               "Held before the model load (CUDA context, NCCL communicators, custom all-reduce buffers: HBM less "
               "SGLang's pre_model_load_memory); the static share is mem_fraction_static of the rest.", 0),
    CK_DYN_ROW("instance", "absorb_bytes_per_param", CK_NUM, "bytes", 0, 8, "0", NULL,
               "Bytes a parameter of the kinds' absorb_params is held in again (SGLang: 2, BF16 w_kc and w_vc beside "
               "the FP8 kv_b_proj; 0: not held).", 0),
    CK_DYN_ROW("instance", "cuda_graph_bytes", CK_NUM, "bytes", 0, 1e15, "required with mem_fraction_static", NULL,
               "CUDA-graph memory, outside the static share.", 0),
    CK_DYN_ROW("instance", "comm_buffer_bytes", CK_NUM, "bytes", 0, 1e15, "required with mem_fraction_static", NULL,
               "Communication buffers (DeepEP, NCCL), outside the static share.", 0),
    CK_STR_ROW("instance", "kv_dtype", "fp8", "fp8|bf16", "KV rows' type: each kind's row_bytes or its row_bytes_bf16.", 0),
    CK_DYN_ROW("instance", "dense_mlp_tp", CK_NUM, "", 1, 4096, "gpus", "1 .. gpus", "GPUs a dense layer's MLP is split "
               "over.", 0),
    CK_DYN_ROW("instance", "shared_expert_tp", CK_NUM, "", 1, 4096, "1", "1 .. gpus", "GPUs the shared expert is split "
               "over (1: whole on every GPU, DeepEP).", 0),
    CK_DYN_ROW("instance", "lm_head_tp", CK_NUM, "", 1, 4096, "gpus", "1 .. gpus", "GPUs the LM head is split over.", 0),
    CK_ROW("instance", "sampling_s", CK_NUM, "s", 0, 10, "0", "Sampling between steps (assumed, docs/MEMORY.md).", 0),
    CK_ROW("instance", "dp_gather_lat_s", CK_NUM, "s", 0, 10, "0", "Latency of data-parallel attention's gather and "
           "scatter around a TP-split layer (assumed).", 0),
    CK_ROW("instance", "dp_gather_gbps", CK_NUM, "GB/s", 0, 1e6, "0", "Bandwidth of that gather and scatter; 0: no "
           "bandwidth term (assumed).", 0),
    CK_ROW("instance", "straggler_cv", CK_NUM, "", 0, 10, "0", "Coefficient of variation of a rank's step time: the "
           "lockstep expert-parallel ranks wait for the slowest (assumed).", 0),
    CK_ROW("instance", "step_overhead_s", CK_NUM, "s", 0, 10, NULL, "Fixed host-side cost per decode step.", 0),
    CK_ROW("instance", "moe_comm_s", CK_NUM, "s", 0, 10, NULL, "Assumed all-to-all latency per MoE layer (dispatch + "
           "combine) when not measured.", 0),
    CK_ROW("instance", "moe_comm_gbps", CK_NUM, "GB/s", 0, 1e6, "0", "Assumed all-to-all bandwidth; 0: no bandwidth "
           "term.", 0),
    CK_ROW("instance", "attn_tp", CK_NUM, "GPUs", 1, 4096, "1", "Tensor-parallel attention ranks: heads split over them, "
           "the latent KV and the indexer replicated, one all-reduce per layer (sim/tp.h); attention_dp x attn_tp <= "
           "gpus.", 0),
    CK_ROW("instance", "prefill_attn_head_multiple", CK_NUM, "heads", 1, 4096, "1", "The prefill attention kernel's "
           "head granularity: a rank's heads (attention heads / attn_tp) padded up to a multiple of it, the padding's "
           "FLOPs charged (SGLang pads the queries with zero heads to a multiple of 64 on Hopper for FlashMLA's sparse "
           "prefill kernel, sim/prefill.h); 1: no padding.", 0),
    CK_DYN_ROW("instance", "attn_tp_allreduce", CK_STR, "", 0, 0, "with attn_tp > 1, this and attn_tp_allreduce_curve, "
               "or attn_tp_allreduce_us and attn_tp_allreduce_busbw_gbps", NULL, "Published all-reduce times by size "
               "(models/hw/allreduce-NAME.ini, sim/tp.h).", 0),
    CK_DYN_ROW("instance", "attn_tp_allreduce_curve", CK_STR, "", 0, 0, "required with attn_tp_allreduce", NULL,
               "The table's [curve.NAME] the instance runs (the framework's all-reduce).", 0),
    CK_DYN_ROW("instance", "attn_tp_allreduce_us", CK_NUM, "us", 0, 1e6, "with attn_tp > 1 and no attn_tp_allreduce, "
               "required; else absent", NULL, "The all-reduce's latency (NCCL form).", 0),
    CK_DYN_ROW("instance", "attn_tp_allreduce_busbw_gbps", CK_NUM, "GB/s", 1e-3, 1e6, "with attn_tp > 1 and no "
               "attn_tp_allreduce, required; else absent", NULL, "The all-reduce's bus bandwidth (nccl-tests busbw).", 0),
    CK_STR_ROW("prefill", "mode", "disaggregated", "disaggregated|chunked", "Prefill on other GPUs (the decode instance "
               "of a disaggregated deployment) or colocated, in chunks between decode steps (sim/prefill.h).", 0),
    CK_DYN_ROW("prefill", "chunk_tokens", CK_INT, "tokens", 1, 1 << 24, "required for chunked", NULL, "Prompt tokens "
               "per rank and iteration (SGLang's chunked_prefill_size / dp_size).", 0),
    CK_STR_ROW("prefill", "mixing", "alternate", "alternate|mixed", "SGLang's scheduler (pending prefill before the "
               "decode batch) or a mixed step (--enable-mixed-chunk, vLLM's token budget).", 0),
    CK_ROW("prefill", "max_running", CK_INT, "requests", 0, 1 << 24, "0", "Cap on the requests running on one GPU; 0: "
           "none.", 0),
    CK_STR_ROW("prefill", "dp_hold", "lockstep", "lockstep|disjoint", "How other data-parallel ranks' prefills hold "
               "this rank's decode steps: all at the same moments, or each own iteration followed by attention_dp - 1 "
               "held steps (the two bounds).", 0),
    CK_STR_ROW("instance", "admission", "reserve_full", "reserve_full|sglang", "How requests are admitted: each "
               "one's whole final length reserved at once, or SGLang's scheduler (new_token_ratio estimates, retraction "
               "on overflow, prefill before decode; sim/prefill.h, docs/SERVING.md; needs [prefill] mode = chunked).", 0),
    CK_DYN_ROW("instance", "init_new_token_ratio", CK_NUM, "", 0, 1, "0.7", "0 .. 1; admission = sglang only", "SGLANG_INIT_NEW_TOKEN_RATIO "
               "(python/sglang/srt/environ.py): the new_token_ratio a scheduler starts from and resets to when idle.", 0),
    CK_DYN_ROW("instance", "schedule_conservativeness", CK_NUM, "", 0, 100, "1", "0 .. 100; admission = sglang only", "--schedule-"
               "conservativeness (server_args.py): the initial ratio is min(init_new_token_ratio x this, 1).", 0),
    CK_DYN_ROW("instance", "min_new_token_ratio_factor", CK_NUM, "", 0, 1, "0.14", "0 .. 1; admission = sglang only",
               "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the ratio's floor as a share of its initial value.", 0),
    CK_DYN_ROW("instance", "new_token_ratio_decay_steps", CK_INT, "steps", 1, 1 << 30, "600", "1 .. 2^30; admission = sglang only",
               "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: decode steps from the initial ratio to its floor.", 0),
    CK_DYN_ROW("instance", "retract_decode_steps", CK_INT, "steps", 0, 1 << 24, "20", "0 .. 2^24; admission = sglang only",
               "SGLANG_RETRACT_DECODE_STEPS: after a retraction the ratio is (decoded + this x requests) / "
               "(max_new_tokens + 1).", 0),
    CK_DYN_ROW("instance", "clip_max_new_tokens_estimation", CK_INT, "tokens", 1, 1 << 30, "4096", "1 .. 2^30; admission = sglang only",
               "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: a request's remaining output as admission estimates it is "
               "clipped to this.", 0),
    CK_ROW("instance", "micro_batches", CK_INT, "", 1, 64, NULL, "Micro-batches a step's requests are split into "
           "(overlap of fetch and compute).", 0),
    CK_ROW("policy", "name", CK_STR, "", 0, 0, "hisparse", "The KV policy (sim/pol.h), with an optional +MODE for "
           "speculative decoding.", 0),
    CK_ROW("policy", "hisparse_budget_k", CK_NUM, "x k", 1, 1e6, "2", "HiSparse's hot buffer, in multiples of the "
           "group's k.", 0),
    CK_ROW("policy", "host_to_device_ratio", CK_NUM, "", 0, 1e4, "0", "HiSparse's host pool as a multiple of the device "
           "KV pool (SGLang's host_to_device_ratio); 0: unbounded.", 0),
    CK_ROW("policy", "adaptive_max_optional_k", CK_NUM, "x k", 0, 1e9, "0", "Adaptive's cap on optional rows per "
           "(request, group), in multiples of k; 0: no cap.", 0),
    CK_ROW("policy", "device_buffer_size", CK_INT, "rows", 1, 1 << 24, "4096", "The SGLang policies' hot buffer per "
           "(request, layer) in rows, SGLang's key and unit (SparseConfig's default); at least every group's k.", 0),
    CK_ROW("policy", "sglang_page_size", CK_INT, "rows", 1, 1 << 16, "64", "The KV pool's page: the padded buffer's "
           "extra page and the allocation's rounding (the page of SGLang's HiSparse tests; assumed).", 0),
    CK_STR_ROW("policy", "sglang_cold", "staging", "staging|direct", "How an SGLang hot buffer starts: the prefill's KV "
               "on the device (rows 0 .. B-1 filled) or written to host (empty slots; a short context preloaded).", 0),
    CK_STR_ROW("policy", "sglang_order", "hashed", "hashed|ascending", "The top-k order SGLang's kernel sees: a "
               "seeded pseudo-random order per position (the indexer's output is unsorted) or ascending rows.", 0),
    CK_ROW("policy", "sglang_high_watermark", CK_NUM, "", 0, 1, "0.85", "sglang-watermark: above this use of the "
           "device KV pool requests are admitted to the hot buffer (sgl-project/sglang#30266).", 0),
    CK_ROW("policy", "sglang_low_watermark", CK_NUM, "", 0, 1, "0.70", "sglang-watermark: below it admissions are "
           "resident again (sgl-project/sglang#30266).", 0),
    CK_ROW("trace", "preset", CK_STR, "", 0, 0, "", "A generator preset (traces/presets); one of preset and path.", 0),
    CK_ROW("trace", "path", CK_STR, "", 0, 0, "", "A recorded selection trace (HDF5); one of preset and path.", 0),
    CK_ROW("trace", "seed", CK_INT, "", 0, 9.223372036854774e18, "1", "Seed of every random stream of the run.", 0),
    CK_ROW("trace", "keyframe_interval", CK_INT, "steps", 1, 1 << 20, "64", "Positions between the generator's "
           "keyframes.", 0),
    CK_ROW("trace", "share", CK_BOOL, "", 0, 0, "true", "The generator's streams kept as records for the process's "
           "other runs of the workload (policies, a sweep's concurrencies; traces/gen.h); false: generated in place, "
           "the same selections with less memory and time for a run that is the only one.", 0),
};
const cfg_schema instance_schema = CFG_SCHEMA("models/instances/NAME.ini", "Instance",
    "A serving instance: its model, profile, parallelism, memory, policy and selections (sim/sim.h); its [workload] "
    "and [spec] sections follow. `--set SECTION.KEY=VALUE` overrides any key of the instance, model or profile.",
    inst_keys);

static const cfg_key a2a_keys[] = {
    CK_STR_ROW("a2a", "routing", "random", NULL, "How the measurement routed tokens to experts (bin/dha2a).", 0),
    CK_STR_ROW("a2a", "dedup", "rank", NULL, "How messages were counted (once per destination GPU).", 0),
    CK_STR_ROW("gpus.N.PHASE", "status", NULL, "measured|unmeasured", "Whether this GPU count and phase (dispatch, "
               "combine) was measured.", 0),
    CK_DYN_ROW("gpus.N.PHASE", "latency_us", CK_NUM, "us", 0, 1e6, "required when measured; else absent or unmeasured",
               NULL, "Fixed cost of the phase.", 0),
    CK_DYN_ROW("gpus.N.PHASE", "bandwidth_gbps", CK_NUM, "GB/s", 1e-3, 1e6, "required when measured; else absent or "
               "unmeasured", NULL, "Bytes per rank per second of the phase.", 0),
    CK_ROW("gpus.N.PHASE", "fit_points", CK_INT, "", 0, 1000000, "0", "Points of the least-squares fit.", 0),
    CK_ROW("gpus.N.PHASE", "fit_max_rel_residual", CK_NUM, "", -1, 1e6, "-1", "Largest relative residual of the fit.", 0),
    CK_ROW("gpus.N.PHASE", "device", CK_STR, "", 0, 0, "", "The GPU it was measured on.", 0),
};
const cfg_schema a2a_schema = CFG_SCHEMA("models/hw/a2a.ini", "All-to-all costs", "Expert-parallel all-to-all cost per "
    "GPU count and phase ([gpus.N.dispatch], [gpus.N.combine]; kernels/a2a/README.md).", a2a_keys);

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
    if (cfgk_string(a, &a2a_schema, "a2a", "routing", &s) < 0 || cfgk_string(a, &a2a_schema, "a2a", "dedup", &s) < 0)
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
        if (cfgk_string(a, &a2a_schema, sec, "status", &status) < 0) return -1;
        int measured = !strcmp(status, "measured");
        if (!measured && strcmp(status, "unmeasured") != 0)
            return dh_err("%s: [%s] status = '%s' (expected measured or unmeasured)", full, sec, status);
        double v;
        long n;
        if (measured && (cfgk_double_or(a, &a2a_schema, sec, "latency_us", &v, CFG_REQUIRED) < 0 ||
                         cfgk_double_or(a, &a2a_schema, sec, "bandwidth_gbps", &v, CFG_REQUIRED) < 0))
            return -1;
        if (cfgk_int(a, &a2a_schema, sec, "fit_points", &n) < 0 ||
            cfgk_double(a, &a2a_schema, sec, "fit_max_rel_residual", &v) < 0 ||
            cfgk_string(a, &a2a_schema, sec, "device", &s) < 0)
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

/* The SGLang policies' [policy] keys (sim.h). device_buffer_size >= every group's top-k is
 * checked by the SGLang policies themselves (pol_sglang.c), so that a config no SGLang column
 * runs is not refused for it. */
static int sglang_config_load(cfg *c, const cfg_schema *I, pol_sglang_cfg *g)
{
    long dbs, page;
    int cold, order;
    memset(g, 0, sizeof *g);
    if (cfgk_int(c, I, "policy", "device_buffer_size", &dbs) < 0 || cfgk_int(c, I, "policy", "sglang_page_size", &page) < 0 ||
        cfgk_choice(c, I, "policy", "sglang_cold", &cold) < 0 || cfgk_choice(c, I, "policy", "sglang_order", &order) < 0 ||
        cfgk_double(c, I, "policy", "sglang_high_watermark", &g->high_watermark) < 0 ||
        cfgk_double(c, I, "policy", "sglang_low_watermark", &g->low_watermark) < 0)
        return -1;
    g->device_buffer_size = (uint32_t)dbs;
    g->page_size = (uint32_t)page;
    g->cold = cold == 0 ? SGLHB_COLD_STAGING : SGLHB_COLD_DIRECT;      /* the row's choices: staging|direct */
    g->order = order == 0 ? SGLHB_ORDER_HASHED : SGLHB_ORDER_ASCENDING; /* hashed|ascending */
    if (g->low_watermark > g->high_watermark)
        return dh_err("%s: [policy] sglang_low_watermark = %g is above sglang_high_watermark = %g", cfg_name(c),
                      g->low_watermark, g->high_watermark);
    return 0;
}

/* The instance's memory and the costs outside the layers (memplan.h,
 * docs/MEMORY.md): kv_dtype, the weights' parallelism, the framework's
 * reservation; weights computed from the model unless weights_per_gpu_bytes
 * is given. */
static int mem_load(cfg *c, sim_config *sc)
{
    memplan *mp = &sc->mem;
    const char *kvd;
    if (cfg_get_string(c, "instance", "kv_dtype", &kvd, "fp8") < 0) return -1;
    if (!strcmp(kvd, "bf16")) {
        if (model_use_bf16_rows(&sc->model, cfg_name(sc->model_cfgf)) < 0) return -1;
    } else if (strcmp(kvd, "fp8") != 0) {
        return dh_err("%s: [instance] kv_dtype = '%s' (expected fp8 or bf16)", cfg_name(c), kvd);
    }
    const double attn_tp = sc->gpus / sc->attention_dp;
    memplan_par p = { attn_tp, sc->gpus, 1, sc->gpus, sc->moe_ep, 0, sc->moe_tp };
    double zero = 0, one = 1;
    struct { const char *key; double *dst, lo, hi; const double *def; } d[] = {
        { "dense_mlp_tp", &p.dense_mlp_tp, 1, 4096, &sc->gpus },
        { "shared_expert_tp", &p.shared_expert_tp, 1, 4096, &one },
        { "lm_head_tp", &p.lm_head_tp, 1, 4096, &sc->gpus },
        { "sampling_s", &sc->sampling_s, 0, 10, &zero },
        { "dp_gather_lat_s", &sc->dp_gather_lat_s, 0, 10, &zero },
        { "dp_gather_gbps", &sc->dp_gather_gbps, 0, 1e6, &zero },
        { "straggler_cv", &sc->straggler_cv, 0, 10, &zero },
        { "absorb_bytes_per_param", &p.absorb_bytes_per_param, 0, 8, &zero },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfg_get_double(c, "instance", d[i].key, d[i].dst, d[i].def, d[i].lo, d[i].hi) < 0) return -1;
    if (p.dense_mlp_tp > sc->gpus || p.shared_expert_tp > sc->gpus || p.lm_head_tp > sc->gpus)
        return dh_err("%s: [instance] dense_mlp_tp, shared_expert_tp and lm_head_tp may not exceed gpus = %g", cfg_name(c), sc->gpus);
    mp->par = p;
    mp->computed = memplan_weights(&sc->model, &p, mp->part);
    mp->lm_head = mp->part[MP_LM_HEAD];
    /* A decode step reads the absorbed copies (w_kc, w_vc in the q and output bmm of
     * forward_absorb) in place of the checkpoint's kv_b_proj, which only the prefill's MHA
     * path reads (docs/MEMORY.md): the copies at absorb_bytes_per_param, not kv_b_proj at
     * quant_bytes_per_param. Without copies, kv_b_proj is read. */
    const double kv_b_proj = p.absorb_bytes_per_param > 0
        ? mp->part[MP_ATTN_ABSORB] * sc->model.quant_bytes_per_param / p.absorb_bytes_per_param : 0;
    mp->read_per_step = mp->computed - mp->part[MP_ROUTED_EXPERTS] - mp->part[MP_EMBED] - kv_b_proj;
    mp->weights_given = cfg_has(c, "instance", "weights_per_gpu_bytes");
    if (mp->weights_given) {
        if (cfg_get_double(c, "instance", "weights_per_gpu_bytes", &mp->weights, CFG_REQUIRED, 0, 1e15) < 0) return -1;
    } else if (mp->computed > 0) {
        mp->weights = mp->computed;
    } else {
        return dh_err("%s: [instance] weights_per_gpu_bytes is not given and model '%s' gives no weights to compute it from "
                      "(attn_params on every kind, quant_bytes_per_param; sim/model.h)", cfg_name(c), sc->model.name);
    }
    sc->weights_per_gpu = mp->weights;
    mp->capacity = sc->hw.hbm_bytes;
    const int frac = cfg_has(c, "instance", "mem_fraction_static"), ws = cfg_has(c, "instance", "workspace_bytes");
    if (frac == ws)
        return dh_err("%s: [instance] needs mem_fraction_static (with context_bytes, cuda_graph_bytes, comm_buffer_bytes) "
                      "or workspace_bytes, not %s", cfg_name(c), frac ? "both" : "neither");
    if (ws) {
        if (cfg_get_double(c, "instance", "workspace_bytes", &mp->workspace, CFG_REQUIRED, 0, 1e15) < 0) return -1;
    } else {
        struct { const char *key; double *dst, lo, hi; } f[] = {
            { "mem_fraction_static", &mp->mem_fraction_static, 0.01, 1 },
            { "context_bytes", &mp->context, 0, 1e15 },
            { "cuda_graph_bytes", &mp->cuda_graphs, 0, 1e15 },
            { "comm_buffer_bytes", &mp->comm_buffers, 0, 1e15 },
        };
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            if (cfg_get_double(c, "instance", f[i].key, f[i].dst, CFG_REQUIRED, f[i].lo, f[i].hi) < 0) return -1;
        if (mp->context >= mp->capacity)
            return dh_err("%s: [instance] context_bytes (%g) is not below the GPU's %g B", cfg_name(c), mp->context,
                          mp->capacity);
        /* SGLang: the pool is the free memory after the load less (1 - fraction) x the free
         * memory before it, HBM - context. */
        const double outside = (1 - mp->mem_fraction_static) * (mp->capacity - mp->context);
        mp->outside = outside;
        mp->activations = outside - mp->cuda_graphs - mp->comm_buffers;
        if (mp->activations < 0)
            return dh_err("%s: [instance] cuda_graph_bytes (%g) and comm_buffer_bytes (%g) exceed the %g B outside "
                          "mem_fraction_static = %g of the GPU's %g B less context_bytes", cfg_name(c), mp->cuda_graphs,
                          mp->comm_buffers, outside, mp->mem_fraction_static, mp->capacity);
        mp->workspace = mp->context + outside;
    }
    sc->workspace = mp->workspace;
    return 0;
}

/* [instance] attn_tp (default 1) and, with more than one rank, its all-reduce's cost: a
 * table of published times (attn_tp_allreduce and its curve) or a latency and a bus bandwidth
 * (attn_tp_allreduce_us, attn_tp_allreduce_busbw_gbps), one pair and not both; the numbers live
 * in the table or the instance file with their sources. */
static int tp_config_load(cfg *c, sim_config *sc)
{
    const double one = 1;
    if (cfg_get_double(c, "instance", "attn_tp", &sc->tp.ranks, &one, 1, 4096) < 0) return -1;
    if (cfg_get_double(c, "instance", "prefill_attn_head_multiple", &sc->tp.prefill_head_multiple, &one, 1, 4096) < 0)
        return -1;
    if (sc->tp.prefill_head_multiple != floor(sc->tp.prefill_head_multiple))
        return dh_err("%s: [instance] prefill_attn_head_multiple = %g is not a whole number of heads", cfg_name(c),
                      sc->tp.prefill_head_multiple);
    if (sc->tp.ranks != floor(sc->tp.ranks))
        return dh_err("%s: [instance] attn_tp = %g is not a whole number of GPUs", cfg_name(c), sc->tp.ranks);
    if (sc->attention_dp * sc->tp.ranks > sc->gpus)
        return dh_err("%s: [instance] attention_dp x attn_tp = %g x %g exceeds gpus = %g", cfg_name(c),
                      sc->attention_dp, sc->tp.ranks, sc->gpus);
    static const char *const only_tp[4] = { "attn_tp_allreduce", "attn_tp_allreduce_curve", "attn_tp_allreduce_us",
                                            "attn_tp_allreduce_busbw_gbps" };
    if (sc->tp.ranks <= 1) {
        for (int i = 0; i < 4; i++)
            if (cfg_has(c, "instance", only_tp[i]))
                return dh_err("%s: [instance] %s is given but attn_tp = 1 (no all-reduce to cost)", cfg_name(c),
                              only_tp[i]);
        return 0;
    }
    const int table = cfg_has(c, "instance", only_tp[0]) || cfg_has(c, "instance", only_tp[1]);
    const int nccl = cfg_has(c, "instance", only_tp[2]) || cfg_has(c, "instance", only_tp[3]);
    if (table && nccl)
        return dh_err("%s: [instance] attn_tp_allreduce(_curve) and attn_tp_allreduce_us / _busbw_gbps are both given "
                      "(one all-reduce cost: the table or the NCCL form)", cfg_name(c));
    if (table) {
        const char *path, *curve;
        if (cfg_get_string(c, "instance", only_tp[0], &path, CFG_REQUIRED) < 0 ||
            cfg_get_string(c, "instance", only_tp[1], &curve, CFG_REQUIRED) < 0)
            return -1;
        return tp_table_load(path, curve, &sc->tp) < 0 ? dh_err_prefix("%s: [instance] attn_tp_allreduce: ", cfg_name(c))
                                                       : 0;
    }
    if (!nccl)
        return dh_err("%s: [instance] attn_tp = %g needs its all-reduce's cost: attn_tp_allreduce (a table, "
                      "models/hw/allreduce-NAME.ini) with attn_tp_allreduce_curve, or attn_tp_allreduce_us with "
                      "attn_tp_allreduce_busbw_gbps", cfg_name(c), sc->tp.ranks);
    double us;
    if (cfg_get_double(c, "instance", "attn_tp_allreduce_us", &us, CFG_REQUIRED, 0, 1e6) < 0 ||
        cfg_get_double(c, "instance", "attn_tp_allreduce_busbw_gbps", &sc->tp.busbw_gbps, CFG_REQUIRED, 1e-3, 1e6) < 0)
        return -1;
    sc->tp.lat_s = us * 1e-6;
    return 0;
}

/* The experts' weights per GPU are 1 / this of them: expert-parallel over moe_ep or
 * tensor-parallel over moe_tp (one of the two is 1). */
static double moe_split(const sim_config *sc) { return sc->moe_tp > 1 ? sc->moe_tp : sc->moe_ep; }

/* [instance] moe_tp (default 1), read before the memory plan splits the experts by it. */
static int moe_tp_read(cfg *c, sim_config *sc)
{
    /* Read only where given, so that a run's recorded inputs list no default for it (an
     * expert-parallel run's outputs are the same bytes as before the key existed). */
    sc->moe_tp = 1;
    if (cfg_has(c, "instance", "moe_tp") && cfg_get_double(c, "instance", "moe_tp", &sc->moe_tp, CFG_REQUIRED, 1, 4096) < 0)
        return -1;
    if (sc->moe_tp != floor(sc->moe_tp))
        return dh_err("%s: [instance] moe_tp = %g is not a whole number of GPUs", cfg_name(c), sc->moe_tp);
    return 0;
}

/* [instance] moe_tp_experts and moe_tp_experts_curve (moe_tp > 1; both or neither): the routed
 * experts' measured times, the table's shape checked against the model (fmoe.h). The routed
 * FLOPs then leave the GEMM form's tensor time (step.c), which needs the layer's average
 * FLOPs per token to hold them. */
static int moe_tp_experts_load(cfg *c, sim_config *sc)
{
    const int has = cfg_has(c, "instance", "moe_tp_experts"), has_curve = cfg_has(c, "instance", "moe_tp_experts_curve");
    if (!has && !has_curve) return 0;
    if (!has || !has_curve)
        return dh_err("%s: [instance] %s is given without %s", cfg_name(c),
                      has ? "moe_tp_experts" : "moe_tp_experts_curve", has ? "moe_tp_experts_curve" : "moe_tp_experts");
    const char *path, *curve;
    if (cfg_get_string(c, "instance", "moe_tp_experts", &path, CFG_REQUIRED) < 0 ||
        cfg_get_string(c, "instance", "moe_tp_experts_curve", &curve, CFG_REQUIRED) < 0)
        return -1;
    const model_cfg *m = &sc->model;
    const fmoe_shape want = { sc->moe_tp, m->experts, m->experts_per_token, m->hidden, m->expert_bytes };
    if (fmoe_load(path, curve, &want, &sc->moe_fm) < 0)
        return dh_err_prefix("%s: [instance] moe_tp_experts: ", cfg_name(c));
    if (!(m->active_params / m->n_layers > m->experts_per_token * m->expert_bytes))
        return dh_err("%s: [instance] moe_tp_experts: the model's active_params / layers = %g is not above its routed "
                      "experts' %g parameters a token (experts_per_token x expert_bytes)", cfg_name(c),
                      m->active_params / m->n_layers, m->experts_per_token * m->expert_bytes);
    return 0;
}

/* [instance] moe_tp above 1, its collectives' all-reduce table: exclusive
 * with moe_ep > 1, a whole number, the whole instance (SGLang's MoE TP group is its TP group,
 * tp_size / ep_size), with attention_dp x attn_tp = gpus (so that the gathered batch's FLOPs
 * per GPU are the layer's per-token FLOPs over this GPU's tokens, step.c). */
static int moe_tp_config_load(cfg *c, sim_config *sc)
{
    static const char *const only[4] = { "moe_tp_allreduce", "moe_tp_allreduce_curve", "moe_tp_experts",
                                         "moe_tp_experts_curve" };
    if (sc->moe_tp <= 1) {
        for (int i = 0; i < 4; i++)
            if (cfg_has(c, "instance", only[i]))
                return dh_err("%s: [instance] %s is given but moe_tp = 1 (no TP MoE to cost)", cfg_name(c), only[i]);
        return 0;
    }
    if (sc->moe_ep > 1)
        return dh_err("%s: [instance] moe_tp = %g and moe_ep = %g: the routed experts are tensor-parallel or "
                      "expert-parallel, not both (set moe_ep = 1)", cfg_name(c), sc->moe_tp, sc->moe_ep);
    if (sc->moe_tp != sc->gpus)
        return dh_err("%s: [instance] moe_tp = %g is not gpus = %g (SGLang's MoE TP group is the whole TP group)",
                      cfg_name(c), sc->moe_tp, sc->gpus);
    if (sc->attention_dp * sc->tp.ranks != sc->gpus)
        return dh_err("%s: [instance] moe_tp = %g needs attention_dp x attn_tp = gpus (%g x %g here)", cfg_name(c),
                      sc->moe_tp, sc->attention_dp, sc->tp.ranks);
    const char *path, *curve;
    if (cfg_get_string(c, "instance", only[0], &path, CFG_REQUIRED) < 0 ||
        cfg_get_string(c, "instance", only[1], &curve, CFG_REQUIRED) < 0)
        return -1;
    sc->moe_ar.ranks = sc->moe_tp;
    if (tp_table_load(path, curve, &sc->moe_ar) < 0)
        return dh_err_prefix("%s: [instance] moe_tp_allreduce: ", cfg_name(c));
    return moe_tp_experts_load(c, sc);
}

int sim_config_load(const char *instance_path, char *const *sets, int n_sets, sim_config *sc)
{
    memset(sc, 0, sizeof *sc);
    const cfg_schema *I = &instance_schema;
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
    if (cfgk_string(c, I, "instance", "model", &mpath) < 0) return -1;
    if (cfgk_string(c, I, "instance", "hw", &hpath) < 0) return -1;
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
    struct { const char *key; double *dst; } d[] = {
        { "gpus", &sc->gpus },
        { "attention_dp", &sc->attention_dp },
        { "moe_ep", &sc->moe_ep },
        { "step_overhead_s", &sc->step_overhead_s },
        { "moe_comm_s", &sc->moe_comm_s },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfgk_double_or(c, I, "instance", d[i].key, d[i].dst, CFG_REQUIRED) < 0) return -1;
    if (moe_tp_read(c, sc) < 0) return -1;
    if (mem_load(c, sc) < 0) return -1;
    if (cfgk_double(c, I, "instance", "moe_comm_gbps", &sc->moe_comm_gbps) < 0) return -1;
    const char *a2a_path;
    if (cfgk_string(c, I, "instance", "a2a", &a2a_path) < 0) return -1;
    if (a2a_resolve(sc, a2a_path) < 0) return -1;
    if (sc->attention_dp > sc->gpus || sc->moe_ep > sc->gpus)
        return dh_err("%s: [instance] attention_dp and moe_ep may not exceed gpus = %g", cfg_name(c), sc->gpus);
    if (tp_config_load(c, sc) < 0) return -1;
    if (moe_tp_config_load(c, sc) < 0) return -1;
    long mb;
    if (cfgk_int(c, I, "instance", "micro_batches", &mb) < 0) return -1;
    sc->micro_batches = (uint32_t)mb;
    const char *pname;
    if (cfgk_string(c, I, "policy", "name", &pname) < 0) return -1;
    if (pol_parse(pname, &sc->policy) < 0) return dh_err_prefix("%s: [policy] name: ", cfg_name(c));
    if (cfgk_double(c, I, "policy", "hisparse_budget_k", &sc->hisparse_budget_k) < 0) return -1;
    if (cfgk_double(c, I, "policy", "host_to_device_ratio", &sc->mem.host_to_device_ratio) < 0) return -1;
    if (cfgk_double(c, I, "policy", "adaptive_max_optional_k", &sc->adaptive_max_optional_k) < 0) return -1;
    if (sglang_config_load(c, I, &sc->sgl) < 0) return -1;
    const char *preset, *path;
    if (cfgk_string(c, I, "trace", "preset", &preset) < 0) return -1;
    if (cfgk_string(c, I, "trace", "path", &path) < 0) return -1;
    if (!*preset && !*path) return dh_err("%s: [trace] needs a preset or a path", cfg_name(c));
    if (*preset && *path) return dh_err("%s: [trace] has both a preset and a path; give one", cfg_name(c));
    snprintf(sc->preset, sizeof sc->preset, "%s", preset);
    snprintf(sc->trace_path, sizeof sc->trace_path, "%s", path);
    long seed, kf;
    if (cfgk_int(c, I, "trace", "seed", &seed) < 0) return -1;
    sc->seed = (uint64_t)seed;
    if (cfgk_int(c, I, "trace", "keyframe_interval", &kf) < 0) return -1;
    sc->keyframe_interval = (uint32_t)kf;
    /* Read only where given, so that a run's recorded inputs list no default for it: the
     * key changes how long a run takes, never what it gives. */
    sc->share_streams = 1;
    if (cfg_has(c, "trace", "share") && cfgk_bool(c, I, "trace", "share", &sc->share_streams) < 0) return -1;
    if (specrun_config_load(c, &sc->model, &sc->spec) < 0) return -1;
    if (prefill_config_load(c, &sc->prefill) < 0) return -1;
    if (admission_config_load(c, &sc->prefill, &sc->admission) < 0) return -1;
    if (cfg_check_unused(c) < 0) return -1;
    const double split = moe_split(sc);
    double expert_w = sc->model.moe_layers * (sc->model.experts / split) * sc->model.expert_bytes;
    if (expert_w > sc->weights_per_gpu)
        return dh_err("%s: weights_per_gpu_bytes = %g is below the expert weights alone (%g = %u MoE layers x %g experts x %g B)",
                      cfg_name(c), sc->weights_per_gpu, expert_w, sc->model.moe_layers, sc->model.experts / split,
                      sc->model.expert_bytes);
    if (sc->weights_per_gpu + sc->workspace > sc->hw.hbm_bytes)
        return dh_err("%s: weights (%g B) and the framework's reservation (%g B) exceed the GPU's HBM (%g B)", cfg_name(c),
                      sc->weights_per_gpu, sc->workspace, sc->hw.hbm_bytes);
    sc->mem.kv_pool = sc->hw.hbm_bytes - sc->weights_per_gpu - sc->workspace;
    sc->mem.host_pool = sc->mem.host_to_device_ratio * sc->mem.kv_pool;
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
    /* A speculative step commits up to gamma + 1 positions of a request: the
     * trace holds enough requests to replace every finished one all run long. */
    wl_cfg w = sc->wl;
    if (sc->spec.mode) {
        double s = (double)w.steps * (sc->spec.draft->gamma + 1);
        w.steps = s > 4e9 ? 4000000000u : (uint32_t)s;
    }
    uint32_t n = wl_requests_needed(&w, conc, sc->attention_dp);
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
    /* Runs of one workload (one per policy) generate each stream once; a run that is the only
     * reader of its streams ([trace] share = false) skips the records (their encoding, decoding
     * and memory: a sixth of such a run's time). */
    int rc = sc->share_streams ? gen_source_new_shared(p, &sh, sc->seed, sc->keyframe_interval, out)
                               : gen_source_new(p, &sh, sc->seed, sc->keyframe_interval, out);
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
    specrun_adapt_state adapt; /* SGLang's adaptive steps, when [spec] adaptive is set */
    /* Colocated prefill (prefill.h): the requests still prefilling, set aside while a decode
     * step runs; this step's mixed chunk (compute seconds, spans' requests); the decode
     * steps the other data-parallel ranks' prefill iterations hold, and for how long. */
    uint32_t *pf, n_pf;
    prefill_span *spans;
    uint32_t *span_req, n_spans;
    double mixed_s, mixed_written;
    double hold_n, hold_s;
    reqlat rl;                /* per-request events (reqlat.h) */
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
    /* Weights every layer reads whatever the routing: the plan's non-expert weights less
     * the embedding table (of which a step reads its tokens' rows) and the LM head (read
     * once a step, step.c); from weights_per_gpu_bytes less the experts when it is given. */
    if (sc->mem.weights_given || sc->mem.computed <= 0)
        cx->dense_bytes_per_layer =
            (sc->weights_per_gpu - m->moe_layers * (m->experts / moe_split(sc)) * m->expert_bytes) / m->n_layers;
    else
        cx->dense_bytes_per_layer = (sc->mem.read_per_step - sc->mem.lm_head) / m->n_layers;
    cx->lm_head_bytes = sc->mem.weights_given ? 0 : sc->mem.lm_head;
    cx->lm_head_tp = sc->mem.par.lm_head_tp;
    cx->dense_mlp_tp = sc->mem.par.dense_mlp_tp;
    cx->straggler_factor = cost_straggler_factor(sc->straggler_cv, sc->moe_ep);
    cx->sampling_s = sc->sampling_s;
    cx->dp_gather_lat_s = sc->dp_gather_lat_s;
    cx->dp_gather_gbps = sc->dp_gather_gbps;
    cx->straggler_cv = sc->straggler_cv;
    for (int p = 0; p < 2; p++) {
        cx->a2a_lat_s[p] = sc->a2a_lat_s[p];
        cx->a2a_gbps[p] = sc->a2a_gbps[p];
    }
    cx->a2a_ranks_per_token = cost_a2a_ranks(m->experts, m->experts_per_token, sc->moe_ep);
    /* The fetch kernel holds its SMs whenever a host tier exists. SGLang's swap-in
     * (fetch_main) runs between compute kernels on the main stream and holds none
     * of them during compute, unless layers share a selection: their replays run
     * on a side stream beside compute. */
    int side = 0;
    for (uint32_t l = 0; l < m->n_layers; l++)
        side |= m->layer_group[l] >= 0 && m->layer[l].select != MODEL_SELECT_OWN && m->layer[l].kv_own;
    cx->compute_sms = pol->host_tier && (!pol->fetch_main || side) ? sc->hw.sms - sc->hw.fetch_sms : sc->hw.sms;
    cx->fetch_main = pol->fetch_main;
    cx->queries = 1;
    cx->tp = sc->tp;
    cx->moe_tp = sc->moe_tp;
    cx->moe_ar = sc->moe_ar;
    cx->moe_fm = sc->moe_fm;
    /* Colocated prefill's ranks sharing an iteration's experts (prefill.h dp_hold). */
    cx->prefill_ranks = sc->prefill.dp_disjoint ? 1 : sc->attention_dp;
}

int sim_step_ctx(const sim_config *sc, pol_kind policy, step_ctx *cx)
{
    const pol_ops *pol = pol_ops_of(policy);
    if (!pol) return dh_err("no policy of index %d is registered", (int)policy);
    step_setup(cx, sc, pol);
    return 0;
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
    if (sc->prefill.mode == PREFILL_CHUNKED) {
        uint32_t n = R->adm.sh->n_requests ? R->adm.sh->n_requests : 1;
        R->pf = dh_calloc(n, sizeof *R->pf);
        R->spans = dh_calloc(n, sizeof *R->spans);
        R->span_req = dh_calloc(n, sizeof *R->span_req);
    }
    reqlat_init(&R->rl, R->adm.sh->n_requests, R->adm.sh->prompt_len, R->adm.sh->output_len,
                sc->wl.mode == WL_OPEN ? R->adm.arrival : NULL);
    if (sc->spec.mode) {
        R->slot = dh_calloc(R->adm.sh->n_requests, sizeof *R->slot);
        R->urows = dh_calloc(G, sizeof *R->urows);
        R->rowb = dh_calloc(G, sizeof *R->rowb);
        for (uint32_t g = 0; g < G; g++) R->rowb[g] = sc->model.group[g].kv_bytes_per_row;
        union_init(&R->u);
        specrun_adapt_init(&sc->spec, &R->adapt);
    }
    return 0;
}

static void run_release(run *R)
{
    admit_release(&R->adm);
    reqlat_release(&R->rl);
    mbatch_release(&R->mb);
    evq_release(&R->q);
    if (R->slot) union_release(&R->u);
    free(R->slot);
    free(R->urows);
    free(R->rowb);
    free(R->pf);
    free(R->spans);
    free(R->span_req);
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
    row->draft_s = specrun_plan(&R->sc->spec, &R->cx, R->sc->step_overhead_s, R->sc->seed, a->n_active, R->slot,
                                &R->adapt);
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
        b->tokens += R->slot ? (double)R->slot[i].queries : 1.0;
        uint64_t ctx = (uint64_t)a->sh->prompt_len[r] + a->req[r].pos;
        b->window_rows += ctx < m->max_window ? (double)ctx : m->max_window;
        b->ctx_tokens += (double)ctx;
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
        if (R->slot) row->expected_accepted += R->slot[i].expected;
        tokens += acc + 1.0;
    }
    row->tokens = tokens;
    if (R->slot && R->pol->host_tier)
        row->staging_bytes = union_staging_bytes(R->urows, R->rowb, a->G, R->sc->spec.staging_reuse);
    return 0;
}

/* The host history the gathers read from: the fitted fetch's walk term and the profile's
 * [fit_range] check of fetch_pool_bytes (0: neither needs it). */
static double pool_bytes(const run *R)
{
    const model_cfg *m = &R->sc->model;
    const admit_state *a = &R->adm;
    if (!R->pol->host_tier || (R->sc->hw.fit_idx[HW_FIT_FETCH_POOL_BYTES] < 0 && !(R->sc->hw.cost.fetch.fit.walk_reach > 0)))
        return R->cx.pool_bytes;
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
static int advance(run *R, double t_end)
{
    admit_state *a = &R->adm;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < a->n_active; i++) {
        uint32_t r = a->active[i];
        const uint32_t committed = R->slot ? R->slot[i].a + 1 : 1;
        a->req[r].pos += committed;
        reqlat_tokens(&R->rl, r, t_end, a->req[r].pos >= a->sh->output_len[r]);
        if (a->req[r].pos >= a->sh->output_len[r]) {
            if (admit_finish(a, r) < 0) return -1;
        } else {
            /* admission = sglang: the step's tokens' KV (admit_sgl_decode made room). */
            if (a->sgl && admit_grow(a, r, committed) < 0) return -1;
            a->active[kept++] = r;
        }
    }
    a->n_active = kept;
    return 0;
}

/* Admission at time t, with the requests' arrivals before it and their
 * admissions after it recorded (reqlat.h). */
static int admit_at(run *R, double t, uint32_t step)
{
    admit_state *a = &R->adm;
    reqlat_arrive(&R->rl, t, sim_per_gpu(R->sc, wl_target(&R->sc->wl, t)), a->completed);
    uint32_t r0 = a->next_req;
    if (admit_fill(a, t, step, R->sc->wl.steps) < 0) return -1;
    for (uint32_t r = r0; r < a->next_req; r++) reqlat_admit(&R->rl, r, t);
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
    if (admit_at(R, *t, step) < 0) return -1;
    if (a->n_active > 0) return 1;
    if (a->next_req >= a->sh->n_requests) return 0;
    if (w->mode == WL_OPEN) {
        if (a->arrival[a->next_req] > *t) *t = a->arrival[a->next_req];
        if (admit_at(R, *t, step) < 0) return -1;
    } else if (w->mode == WL_STEP) {
        /* Concurrency is zero until the next load change. */
        double nt = wl_next_change(w, *t);
        if (nt < 0) return 0;
        *t = nt;
        return 2;
    } else {
        return 0;
    }
    if (a->n_active == 0) {
        if (admit_need(a, a->next_req) <= ledger_free(&a->hbm) && R->sc->mem.host_pool > 0)
            return dh_err("%s: request %u cannot be admitted on an idle GPU: its KV does not fit the host pool of "
                          "%.3g GB ([policy] host_to_device_ratio = %g x the %.3g GB device KV pool)", R->pol->name,
                          a->next_req, R->sc->mem.host_pool / 1e9, R->sc->mem.host_to_device_ratio, R->sc->mem.kv_pool / 1e9);
        return dh_err("%s: request %u cannot be admitted on an idle GPU: it needs %.3g GB, %.3g GB are free",
                      R->pol->name, a->next_req, admit_need(a, a->next_req) / 1e9, ledger_free(&a->hbm) / 1e9);
    }
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
    /* A mixed prefill chunk (prefill.h) runs in the step's batch: its compute is queued
     * before the layer graph like a draft pass, its prompt KV goes to the host pool. */
    const double pre0 = R->cx.pre_s;
    if (R->mixed_s > 0) {
        R->cx.pre_s += R->mixed_s;
        if (R->mixed_written > 0) {
            res_submit(&R->d2h, t, R->mixed_written / sc->hw.d2h_bw, R->mixed_written);
            st->write_busy += R->mixed_written / sc->hw.d2h_bw;
            st->write_bytes += R->mixed_written;
        }
    }
    double t_end = step_run(&R->cx, R->mb.mb, R->M, t + sc->step_overhead_s, &R->gpu, &R->h2d, &R->d2h, &R->q, st);
    R->cx.pre_s = pre0;
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
    row->demotions_total = a->env.sgl_demotions;
    memcpy(row->hbm, a->hbm.bytes, sizeof row->hbm);
    rec->overhead_s = sc->step_overhead_s;
    return 0;
}

/* ---------------------------------------------------------------- colocated prefill */

/* Pack the admitted requests' pending prompt tokens, in admission order, into at most budget
 * tokens (the last request may be cut: SGLang's chunked request): R->spans. Returns tokens. */
static double pack_prefill(run *R, double budget)
{
    const admit_state *a = &R->adm;
    double tokens = 0;
    R->n_spans = 0;
    for (uint32_t i = 0; i < a->n_active && tokens < budget; i++) {
        const uint32_t r = a->active[i];
        const admit_req *q = &a->req[r];
        if (!q->prefill_left) continue;
        double take = q->prefill_left < budget - tokens ? q->prefill_left : budget - tokens;
        R->spans[R->n_spans] = (prefill_span){ .start = (double)(q->prefill_len - q->prefill_left), .tokens = take };
        R->span_req[R->n_spans++] = r;
        tokens += take;
    }
    return tokens;
}

/* The packed spans are done at time t_done: their requests' pending tokens fall, a request
 * whose prompt is complete records its prefill end. */
static int commit_prefill(run *R, double t_done)
{
    /* admission = sglang: the requests whose prefill this iteration completes join the running
     * batch; into an empty one they become it, a new batch whose batch_is_full is clear
     * (scheduler.py get_next_batch_to_run: running_batch = last_batch), into a non-empty one
     * they merge and the flag stays (admit.h). */
    int was_empty = 1, joined = 0;
    for (uint32_t i = 0; i < R->adm.n_active && was_empty; i++) was_empty = R->adm.req[R->adm.active[i]].prefill_left > 0;
    for (uint32_t i = 0; i < R->n_spans; i++) {
        admit_req *q = &R->adm.req[R->span_req[i]];
        q->prefill_left -= (uint32_t)R->spans[i].tokens;
        /* admission = sglang: the chunk's KV is allocated as it runs. */
        if (R->adm.sgl && admit_grow(&R->adm, R->span_req[i], (uint32_t)R->spans[i].tokens) < 0) return -1;
        if (!q->prefill_left) {
            joined = 1;
            q->prefill_done_t = t_done;
            /* A retracted request's second prefill is not its time to first token's. */
            if (R->rl.r[R->span_req[i]].prefill < 0) reqlat_prefill(&R->rl, R->span_req[i], t_done);
        }
    }
    R->n_spans = 0;
    if (was_empty && joined) R->adm.full = 0;
    return 0;
}

/* The pending prompt tokens of the admitted requests (0: nothing to prefill). */
static double prefill_pending(const run *R)
{
    const admit_state *a = &R->adm;
    double n = 0;
    for (uint32_t i = 0; i < a->n_active; i++) n += a->req[a->active[i]].prefill_left;
    return n;
}

/* One prefill iteration alone from time t over the packed spans: compute on the GPU, the
 * prompt KV to the host pool; with data-parallel attention the other ranks' iterations of
 * the same size hold this rank's next decode steps. Returns its end (-1: the pool could not
 * hold the chunk, admission = sglang). */
static double prefill_alone(run *R, double t)
{
    const sim_config *sc = R->sc;
    prefill_parts P;
    /* Under dp_hold = disjoint the other ranks decode beside this rank's chunk, each a batch
     * like this rank's decoding one (their tokens go through the same experts); under
     * lockstep they prefill chunks like it (prefill_ranks). */
    double others = 0;
    if (sc->attention_dp > 1 && sc->prefill.dp_disjoint) {
        const admit_state *a = &R->adm;
        for (uint32_t i = 0; i < a->n_active; i++) others += !a->req[a->active[i]].prefill_left;
        others *= sc->attention_dp - 1;
    }
    const double d = prefill_iter_s(&R->cx, R->spans, R->n_spans, others, &P, &R->st.ranges);
    const double end = res_submit(&R->gpu, t, d, 0);
    R->st.compute_busy += d;
    /* Without a host tier the prompt's KV stays on the GPU. */
    if (P.written > 0 && R->pol->host_tier) {
        res_submit(&R->d2h, t, P.written / sc->hw.d2h_bw, P.written);
        R->st.write_busy += P.written / sc->hw.d2h_bw;
        R->st.write_bytes += P.written;
    }
    if (sc->attention_dp > 1 && sc->prefill.dp_disjoint) {
        R->hold_s = (R->hold_s * R->hold_n + d * (sc->attention_dp - 1)) / (R->hold_n + sc->attention_dp - 1);
        R->hold_n += sc->attention_dp - 1;
    }
    if (commit_prefill(R, end) < 0) return -1;
    return end;
}

/* Before a decode step at *t: SGLang's alternate rule runs every pending prompt's iterations
 * first; the mixed rule packs this step's chunk (chunk_tokens less the decode tokens) for
 * run_step to charge. Then the requests still prefilling are set aside (R->pf) so that the
 * step sees the decoding ones only; returns how many decode. */
static uint32_t prefill_before_step(run *R, double *t)
{
    const prefill_cfg *pc = &R->sc->prefill;
    admit_state *a = &R->adm;
    R->mixed_s = R->mixed_written = 0;
    if (pc->mixing == PREFILL_ALTERNATE) {
        /* Each iteration is O(layers x spans); the queue empties in prompt / chunk of them. */
        while (prefill_pending(R) > 0) {
            pack_prefill(R, pc->chunk_tokens);
            if ((*t = prefill_alone(R, *t)) < 0) return UINT32_MAX;
        }
    } else {
        uint32_t decoding = 0;
        for (uint32_t i = 0; i < a->n_active; i++) decoding += !a->req[a->active[i]].prefill_left;
        if (decoding == 0) {
            /* Nothing decodes yet: the chunk runs alone. */
            if (prefill_pending(R) > 0) {
                pack_prefill(R, pc->chunk_tokens);
                if ((*t = prefill_alone(R, *t)) < 0) return UINT32_MAX;
            }
        } else if (pc->chunk_tokens > decoding && pack_prefill(R, pc->chunk_tokens - decoding) > 0) {
            prefill_parts P;
            R->mixed_s = prefill_iter_s(&R->cx, R->spans, R->n_spans, decoding * R->sc->attention_dp, &P, &R->st.ranges);
            R->mixed_written = R->pol->host_tier ? P.written : 0;
        }
    }
    uint32_t kept = 0;
    R->n_pf = 0;
    for (uint32_t i = 0; i < a->n_active; i++) {
        const uint32_t r = a->active[i];
        if (a->req[r].prefill_left) R->pf[R->n_pf++] = r;
        else a->active[kept++] = r;
    }
    a->n_active = kept;
    return kept;
}

/* The requests set aside rejoin the active list (after the decoding ones). */
static void prefill_after_step(run *R)
{
    admit_state *a = &R->adm;
    for (uint32_t i = 0; i < R->n_pf; i++) a->active[a->n_active++] = R->pf[i];
    R->n_pf = 0;
}

/* ---------------------------------------------------------------- admission = sglang */

/* Retracted requests waiting to be admitted again: admitted once, not finished. */
static uint32_t sgl_retracted_waiting(const admit_state *a)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->q_len; i++) n += a->req[a->queue[(a->q_head + i) % a->sh->n_requests]].retracted > 0;
    return n;
}

/* One scheduling round at time t (admit_sgl_fill) with its arrivals and first admissions
 * recorded. 0 or -1. */
static int sgl_round(run *R, double t, uint32_t step)
{
    admit_state *a = &R->adm;
    reqlat_arrive(&R->rl, t, sim_per_gpu(R->sc, wl_target(&R->sc->wl, t)), a->completed);
    if (admit_sgl_fill(a, t, step, R->sc->wl.steps, R->sc->prefill.chunk_tokens) < 0) return -1;
    for (uint32_t i = 0; i < a->n_just; i++)
        if (R->rl.r[a->just[i]].admit < 0) reqlat_admit(&R->rl, a->just[i], t);
    return 0;
}

/* SGLang's event loop (scheduler.py event_loop_normal, get_next_batch_to_run) over the
 * run's steps: each iteration runs a prefill batch when a round forms one (a pending chunk,
 * or requests the round admits), else the decode batch, after update_running_batch's memory
 * check (retraction, or the ratio's decay). The prefill iterations before a decode step
 * count in its time, as in the default loop; an idle GPU resets the ratio. Cost per decode
 * step: the default loop's plus O(active) cost_at evaluations per round. *tp: the run's
 * end; *retr_warm: the retractions before the first measured step. 0 or -1. */
static int sgl_loop(run *R, metrics *mt, double *tp, double *retr_warm)
{
    const sim_config *sc = R->sc;
    const wl_cfg *w = &sc->wl;
    admit_state *a = &R->adm;
    double t = *tp;
    const uint32_t per_req = sc->spec.mode ? sc->spec.draft->gamma + 1 : 1;
    for (uint32_t step = 0; step < w->steps;) {
        if (w->max_time_s > 0 && t >= w->max_time_s) break;
        if (w->measure_tokens > 0 && mt->m_tokens >= w->measure_tokens) break;
        if (step == w->warmup_steps) *retr_warm = a->retractions;
        const double t0 = t;
        /* Prefill batches first, while a round forms one: O(layers x spans) each. */
        for (;;) {
            if (sgl_round(R, t, step) < 0) return -1;
            if (prefill_pending(R) == 0) break;
            pack_prefill(R, sc->prefill.chunk_tokens);
            if ((t = prefill_alone(R, t)) < 0) return -1;
        }
        if (a->n_active == 0) {
            admit_sgl_idle(a);
            if (a->q_len > 0) {
                const uint32_t r = a->queue[a->q_head];
                return dh_err("%s: request %u cannot be admitted on an idle GPU (admission = sglang): its prompt and "
                              "output need %.3g GB, %.3g GB are free", R->pol->name, r, admit_need(a, r) / 1e9,
                              ledger_free(&a->hbm) / 1e9);
            }
            if (a->next_req >= a->sh->n_requests) break;
            if (w->mode == WL_OPEN) {
                if (a->arrival[a->next_req] > t) t = a->arrival[a->next_req];
                continue;
            }
            if (w->mode == WL_STEP) {
                const double nt = wl_next_change(w, t);
                if (nt < 0) break;
                t = nt;
                continue;
            }
            break;
        }
        uint32_t retracted = 0;
        if (admit_sgl_decode(a, per_req, &retracted) < 0) return -1;
        metrics_step rec;
        if (run_step(R, step, t, &rec) < 0) return -1;
        rec.row.t_start = t0;
        if (R->hold_n > 0) {
            if (rec.row.t_end - t < R->hold_s) rec.row.t_end = t + R->hold_s;
            R->hold_n -= 1;
        }
        metrics_add(mt, &rec);
        t = rec.row.t_end;
        if (advance(R, t) < 0) return -1;
        step++;
    }
    *tp = t;
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
    double t = 0, retr_warm = 0;
    if (R.adm.sgl && sgl_loop(&R, &mt, &t, &retr_warm) < 0) goto out;
    for (uint32_t step = 0; step < sc->wl.steps && !R.adm.sgl;) {
        if (sc->wl.max_time_s > 0 && t >= sc->wl.max_time_s) break;
        if (sc->wl.measure_tokens > 0 && mt.m_tokens >= sc->wl.measure_tokens) break;
        int go = fill(&R, &t, step);
        if (go < 0) goto out;
        if (go == 0) break;
        if (go == 2) continue; /* idle until t: the same step again */
        metrics_step rec;
        if (sc->prefill.mode == PREFILL_CHUNKED) {
            /* The prefill iterations before the step count in its time: decoding waited. */
            const double t0 = t;
            const uint32_t decoding = prefill_before_step(&R, &t);
            if (decoding == UINT32_MAX) goto out;
            if (decoding == 0) {
                prefill_after_step(&R);
                continue;
            }
            if (run_step(&R, step, t, &rec) < 0) goto out;
            if (R.mixed_s > 0 && commit_prefill(&R, rec.row.t_end) < 0) goto out;
            rec.row.t_start = t0;
            if (R.hold_n > 0) {
                /* Another rank's prefill iteration holds this step to its length. */
                if (rec.row.t_end - t < R.hold_s) rec.row.t_end = t + R.hold_s;
                R.hold_n -= 1;
            }
        } else if (run_step(&R, step, t, &rec) < 0) {
            goto out;
        }
        metrics_add(&mt, &rec);
        t = rec.row.t_end;
        if (advance(&R, t) < 0) goto out;
        if (sc->prefill.mode == PREFILL_CHUNKED) prefill_after_step(&R);
        step++;
    }
    const admit_state *a = &R.adm;
    metrics_end end = { .sc = sc, .pol = pol, .t = t, .hbm = &a->hbm, .gpu = &R.gpu, .h2d = &R.h2d, .d2h = &R.d2h,
                        .st = &R.st, .admitted = a->admitted, .completed = a->completed,
                        .unfinished = a->n_active + sgl_retracted_waiting(a),
                        .requests = a->sh->n_requests,
                        .budget_rows = pol->rebalance ? 0 : (uint32_t)pol->budget(&a->env, 0) };
    rc = metrics_finish(&mt, &end, res);
    if (rc == 0) {
        res->req = R.rl.r;
        res->n_req = R.rl.n;
        R.rl.r = NULL;
        res->measured_from_s = sc->wl.warmup_steps < res->n_tl ? res->tl[sc->wl.warmup_steps].t_start : res->sim_time;
        if (a->sgl) {
            res->has_retractions = 1;
            res->retractions = a->retractions;
            res->measured_retractions = sc->wl.warmup_steps < res->n_tl ? a->retractions - retr_warm : 0;
        }
    }
out:
    run_release(&R);
    metrics_release(&mt);
    return rc;
}

void sim_result_release(sim_result *r)
{
    free(r->tl);
    free(r->req);
    memset(r, 0, sizeof *r);
}
