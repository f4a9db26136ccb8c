/* cost.h: the cost model of one decode GPU, every formula the simulator charges and
 * bin/dhcal fits, each a named form with its parameters (a struct) and its inputs (the
 * arguments). Times in seconds, sizes in bytes, rates per second, unless a form says that it
 * is unit-free (the top-k's waves are also evaluated by the fit in microseconds).
 *
 * Which form a cost takes is decided once, by the profile loader (sim/hw.c: hw_load), from
 * the keys the profile gives: a datasheet profile is the roofline form of every kernel, a
 * calibrated one the fitted forms. The step scheduler (sim/step.c) only calls these.
 *
 *   roofline   launch_s + max(bytes / hbm_bw, flops / (peak x mma_efficiency x compute_sms / sms))
 *   attention  roofline, or fitted: launch_s + queries x query_s + max(bytes / bw, the
 *              roofline's tensor time); queries: the query tokens of the launch (requests x
 *              queries per request: a verification step's grow it), bytes the rows they read
 *   gemm       roofline, or fitted: fixed_s (the layer's fixed cost: its GEMM launches) +
 *              max(weight bytes / bw, the roofline's tensor time)
 *   tensor     the roofline's tensor time alone: flops / (peak x mma_efficiency x
 *              compute_sms / sms); bin/dhcal fits the attention and the GEMMs with it, at
 *              the roofline the profile will hold (analysis/fitcost.h)
 *   indexer    roofline, or fitted: max(key bytes / bw, multiply-adds / ops_s) + select_s +
 *              the top-k's waves
 *   topk       full waves of slots blocks and a last one of the rest; a wave of n blocks takes
 *              wave_s + k x k_s + (a^q + b^q)^(1/q), a = rows x row_s (a block's pass over its
 *              scores), b = n x rows / score_rate (the wave's scores through memory; 0 without
 *              a rate), q = steepness; slots 0: no waves
 *   a2a        per phase (dispatch, combine): latency + tokens x ranks x message bytes / bandwidth
 *   fetch      the zero-copy gather of missed rows from pinned host memory ([gather],
 *              sim/hw.h). Tables (a probe-measured profile such as the datasheet one): launch_s +
 *              rows x row_bytes / bw(row size, pages, SMs), bw capped at the link's h2d_bw.
 *              Fitted (the form bin/dhcal fits, analysis/fitcost.h, evaluated here for both):
 *              per row the slowest of the SMs' issue sm_row / sms, the issue path row_issue +
 *              row_bytes x row_issue_per_byte + density x rho^-density_pow (rho: rows per
 *              region entered) and the link row_bytes x link_per_byte; per launch t0 and the
 *              page term page x max(0, pages - page_reach) x max(0, 1 - walk_reach / pool)
 *   beside     the fetch's slowdown beside a saturated memory system, fitted:
 *              max / (1 + (rho / half)^steepness); 1 without the fit
 *   writeback  a layer's new rows written through to the host pool: bytes / d2h_bw (off the
 *              critical path, on the link's device-to-host side)
 *   collective a DP-attention gather or scatter among n ranks: latency + the bytes each rank
 *              receives, (n - 1) / n of the whole, at the bandwidth
 *   straggler  n ranks stepping in lockstep, each taking t (1 + cv Z) with Z standard normal
 *              and independent: the slowest takes t (1 + cv E[max of n Z])
 *   moe_tp     the routed experts tensor-parallel over moe_tp GPUs (SGLang without
 *              --moe-a2a-backend and without --ep-size: fused_moe over 1 / moe_tp of every
 *              expert's intermediate dimension): per GPU, the distinct experts the MoE group's
 *              tokens T route to, E (1 - (1 - k / E)^T) (k distinct of E, uniform, tokens
 *              independent), x expert bytes / moe_tp; no all-to-all, no straggler term; the
 *              collectives as all-reduces of the group's BF16 hidden states (T x hidden x 2 B):
 *              under DP attention one for a decode step (an all-gather and a reduce-scatter of
 *              the padded buffer, which a ring all-reduce is made of) and two for a prefill
 *              iteration (the gather as an all-reduce of a zero-padded buffer, then the MoE's
 *              own all-reduce); under TP attention one (the MoE's output); sim/step.c says
 *              where in SGLang each is. With a measured table ([instance] moe_tp_experts,
 *              sim/fmoe.h) a decode step charges the routed experts its time at the
 *              group's T tokens in place of their bytes at the GEMM rate
 *   interference  fetch: a compute task beside the fetch lengthens by fetch x the overlap;
 *              compute: the fetch work inside a compute task runs 1 + compute x its beside
 *              weight times slower (sim/res.h re-rates it)
 *
 * Every evaluation is O(1) but the tables' (linear in their points, at most COST_TABLE_MAX)
 * and the top-k's (two waves). Operations are written in one order on purpose: the
 * simulator's outputs are compared bit for bit with committed copies. */
#ifndef DH_COST_H
#define DH_COST_H

#include <stddef.h>

#define COST_TABLE_MAX 32

/* The form a kernel's cost takes: the datasheet roofline or the one fitted to the project's
 * kernels. */
typedef enum { COST_ROOFLINE = 0, COST_FITTED } cost_form;

/* A table interpolated linearly in log(x), held flat beyond its ends. */
typedef struct {
    size_t n;
    double x[COST_TABLE_MAX], y[COST_TABLE_MAX];
} cost_table;

typedef struct {
    double launch_s, hbm_bw, fp8_flops, bf16_flops, mma_efficiency, sms;
} cost_roofline;

/* The attention's fitted form: launch_s a launch, query_s a query token (0: none), bw the
 * selected rows' bytes. */
typedef struct { cost_form form; double launch_s, bw, query_s; } cost_attention;
typedef struct { cost_form form; double fixed_s, bw; } cost_gemm;
typedef struct { cost_form form; double bw, ops_s, select_s; } cost_indexer;

/* The top-k's waves; unit-free (the simulator holds seconds, the fit microseconds). */
typedef struct { double slots, wave_s, row_s, k_s, score_rate, steepness; } cost_topk;

/* The fetch's fitted form; times unit-free (the simulator holds seconds, the fit ns), sizes
 * in bytes. density 0: no density term; page 0: no page term; walk_reach 0: the page term
 * does not depend on the pool. */
typedef struct {
    double t0, sm_row, row_issue, row_issue_per_byte, link_per_byte, density, density_pow;
    double page, page_reach, walk_reach;
} cost_fetch_fit;

/* The fetch beside a saturated memory system: max 0 is no slowdown. */
typedef struct { double max, half, steepness; } cost_beside;

typedef struct {
    cost_form form;       /* COST_FITTED: fit; COST_ROOFLINE: the tables (a probe-measured profile) */
    cost_fetch_fit fit;   /* seconds; fit.t0 is launch_s */
    cost_beside beside;
    cost_table row;       /* tables: row size -> bandwidth at a small host footprint */
    cost_table pages;     /* tables: distinct pages -> bandwidth at ref_row_bytes */
    cost_table sms;       /* tables: SMs -> bandwidth multiplier */
    double ref_row_bytes, launch_s, h2d_bw;
} cost_fetch;

typedef struct { double fetch, compute; } cost_interference;

/* Every cost of one GPU, as the profile loader chose its forms. */
typedef struct {
    cost_roofline roof;
    cost_attention attn;
    cost_gemm gemm;
    cost_indexer indexer;
    cost_topk topk;
    cost_fetch fetch;
    cost_interference inter;
} cost_model;

double cost_table_eval(const cost_table *t, double x);
/* The same with the end segments' lines carried on beyond the table (floored
 * at a tenth of the end value): the other plausible extrapolation, which the
 * reports compare with the held end value. */
double cost_table_eval_slope(const cost_table *t, double x);

/* A kernel reading bytes and doing flops at the FP8 or BF16 rate, the compute rate scaled
 * by the SMs left to compute. */
double cost_roofline_time(const cost_roofline *r, double bytes, double flops, int fp8, double compute_sms);
/* The tensor term of cost_roofline_time alone (its launch and bytes left out). */
double cost_tensor_time(const cost_roofline *r, double flops, int fp8, double compute_sms);
/* Sparse attention of queries query tokens over the selected rows' bytes (summed over the
 * queries) and flops. */
double cost_attention_time(const cost_model *c, double bytes, double flops, double queries, int fp8,
                           double compute_sms);
/* A layer's projections and experts (or one GEMM launch, fixed_s its t0): their weight bytes
 * and flops at the FP8 or BF16 rate. */
double cost_gemm_time(const cost_model *c, double weight_bytes, double flops, int fp8, double compute_sms);
/* The top-k's waves for topks top-ks (may be a mean) of rows scores each selecting k (at
 * most rows), added to t0 (the fit's fixed cost; 0 for the simulator's waves alone). */
double cost_topk_time(const cost_topk *p, double t0, double topks, double rows, double k);
/* The indexer's scoring, a roofline: its keys' bytes at bw, its multiply-adds at ops_s. */
double cost_scoring_time(double bytes, double bw, double macs, double ops_s);
/* The selecting layer's indexer over key bytes and flops (2 per multiply-add), with its
 * top-k of topks top-ks of rows scores selecting k (fitted form only). */
double cost_indexer_time(const cost_model *c, double bytes, double flops, double topks, double rows, double k,
                         double compute_sms);
/* Expected distinct GPUs among a token's top-k experts when experts are spread evenly over
 * ep GPUs and the k are a uniform draw without replacement: ep x (1 - prod_{i<k} (E - E/ep -
 * i) / (E - i)). Messages are sent once per (token, destination GPU), as bin/dha2a's default
 * (DeepEP's normal-mode dispatch) counts them, the GPU's own share included. */
double cost_a2a_ranks(double experts, double topk, double ep);
/* A gather (or scatter) of total_bytes over n ranks: lat_s + total_bytes (n - 1) / n at gbps
 * GB/s (0 bandwidth: the latency alone); 0 for one rank. */
double cost_collective_time(double lat_s, double gbps, double total_bytes, double n);
/* The moe_tp form (above). Expected distinct experts among experts when tokens tokens each
 * route to topk distinct experts, uniformly and independently: experts x (1 - (1 - topk /
 * experts)^tokens), exact for that routing (a token misses a given expert with probability
 * 1 - topk / experts); 0 without tokens. */
double cost_moe_experts_touched(double experts, double topk, double tokens);
/* The routed experts' weight bytes one GPU reads for tokens tokens of the MoE group: the
 * touched experts x expert_bytes / moe_tp. */
double cost_moe_tp_weight_bytes(double experts, double topk, double tokens, double expert_bytes, double moe_tp);
/* The GEMM form's fixed cost of a layer that share of it stands for: share x [hw] layer_fixed_s in
 * the fitted form; 0 in the roofline form (its one launch_s is the layer's). The moe_tp form
 * takes it out of a MoE layer whose routed experts come from a measured table (sim/fmoe.h). */
double cost_gemm_fixed_share_s(const cost_model *c, double share);
/* All-reduces of the group's hidden states a TP MoE layer costs: under DP attention
 * (attention_dp > 1) 2 for a prefill (extend) pass and 1 for a decode step; under TP attention
 * 1. */
double cost_moe_tp_allreduces(double attention_dp, int extend);

/* E[max of n independent standard normals] (Simpson's rule on a fine grid; 0 for n <= 1). */
double cost_normal_max(double n);
/* The straggler factor of n lockstep ranks whose times vary by cv: 1 + cv cost_normal_max(n). */
double cost_straggler_factor(double cv, double n);
/* t plus the expert-parallel dispatch and combine of tokens tokens: per phase p a latency
 * lat_s[p] and tokens x ranks x msg_bytes[p] at gbps[p] GB/s (0: no bandwidth term). The
 * terms are added to t one by one, in the order the simulator always added them. */
double cost_a2a_add(double t, const double lat_s[2], const double gbps[2], double ranks, double tokens,
                    const double msg_bytes[2]);
/* Bandwidth of one gather launch of rows of row_bytes touching pages pages with sms SMs
 * (bytes/s; the tables' form). */
double cost_gather_bw(const cost_fetch *f, double row_bytes, double pages, double sms);
/* The fitted form per row, without t0 and the page term: rho NAN leaves the density term
 * out; *branch (when not NULL) gets the bottleneck that set it (0 SMs, 1 issue, 2 link). */
double cost_fetch_fit_row(const cost_fetch_fit *p, double row_bytes, double sms, double rho, int *branch);
/* The fitted form for one launch of rows rows: rows x the per row time + t0 + the page term
 * (pages NAN: none) over a host pool of pool bytes. */
double cost_fetch_fit_launch(const cost_fetch_fit *p, double rows, double row_bytes, double sms, double rho,
                             double pages, double pool);
/* Seconds for one gather launch of rows rows touching pages pages and regions regions
 * (0 rows: 0 s; regions <= 0: one per row) with sms SMs, from a host pool of pool bytes. */
double cost_fetch_time(const cost_fetch *f, double rows, double row_bytes, double pages, double regions, double sms,
                       double pool);
/* cost_fetch_time with every table extrapolated by cost_table_eval_slope (the tables' form;
 * the fitted form extrapolates by its formula, and its callers compare it with its inputs
 * held at the fitted range's ends instead, hw_fit_clamp). */
double cost_fetch_time_slope(const cost_fetch *f, double rows, double row_bytes, double pages, double regions,
                             double sms, double pool);
/* The beside form at rho rows per region. */
double cost_beside_slowdown(const cost_beside *b, double rho);
/* The weight of compute interference for a fetch launch of rows over regions (rows per
 * region, 1 when the regions are not known): the beside slowdown there, 1 without the fit. */
double cost_fetch_beside(const cost_fetch *f, double rows, double regions);
/* Seconds to write bytes of new rows through to the host at d2h_bw. */
double cost_writeback_time(double bytes, double d2h_bw);
/* A compute task of d seconds that the fetch keeps busy for overlap seconds of it (> 0):
 * its length beside the fetch. */
double cost_compute_beside(const cost_interference *i, double d, double overlap);

#endif
