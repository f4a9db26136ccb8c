/* hw.h: the hardware profile of one decode GPU and its host link
 * (models/hw/NAME.ini), read into the cost model's forms (sim/cost.h).
 *
 * Profile schema (every key required unless a default is given; units SI:
 * bytes, seconds, bytes/s, FLOP/s). A calibration tool may rewrite the file;
 * it must keep these keys, and every value carries its source in a comment.
 * The table in sim/hw.c (hw_schema, printed in docs/CONFIG.md) is the reference:
 * it marks each key datasheet or fitted, and hw_load reads every key through it.
 * A fitted key that replaces a datasheet rate in its kernel's cost (attn_bw ->
 * hbm_bw, ...) needs [fitted_at] RATE = the value it was fitted beside, equal to
 * the file's; [profile] base = FILE makes a scaled profile (docs/HARDWARE.md).
 *
 *   [hw]      name            label
 *             hbm_bytes       usable HBM capacity of one GPU
 *             hbm_bw          HBM bandwidth (datasheet): the roofline's, and the bound of the fitted byte rates
 *             sms             streaming multiprocessors
 *             fp8_flops       dense FP8 tensor rate
 *             bf16_flops      dense BF16 tensor rate
 *             mma_efficiency  achieved fraction of the tensor rates (0, 1]; default 1 (the bound)
 *             kernel_launch_s fixed cost of one kernel on the compute stream
 *             attn_bw, attn_launch_s, attn_query_s, weight_bw, layer_fixed_s, indexer_ops_s,
 *             select_s, indexer_bw, fetch_interference, compute_interference,
 *             topk_slots, topk_wave_s, topk_row_s, topk_k_s, topk_score_rate,
 *             topk_steepness                             optional (default 0 =
 *                        unused): costs fitted to the project's kernels; they choose the
 *                        fitted forms (hw_profile.cost below)
 *   [pcie]    h2d_bw, d2h_bw  pinned-memcpy bandwidth each way
 *             duplex_bw       both directions at once (sum)
 *   [gather]  (zero-copy fetch of missed rows straight from pinned host memory) in one of
 *             two forms (sim/cost.h), a profile gives the keys of one:
 *             tables (a probe-measured profile, such as the datasheet one):
 *             row_bytes       table x: row size of the gather
 *             row_bw          table y: bandwidth at that row size, small host footprint
 *             ref_row_bytes   the row size at which the page table below was measured
 *             pages           table x: distinct host pages one launch touches
 *             pages_bw        table y: bandwidth at ref_row_bytes for that many pages
 *             sms             table x: SMs given to the gather
 *             sms_factor      table y: bandwidth multiplier at that many SMs
 *             fitted (bin/dhcal writes them from its fetch fit, analysis/fitcost.h):
 *             sm_row_s        per row, the SMs' issue time x SMs (over fetch_sms)
 *             row_issue_s, row_issue_s_per_byte   per row, the issue path: a fixed
 *                             time and a time per byte of the row
 *             link_s_per_byte per row, the link's time per byte (at most duplex_bw)
 *             density_s, density_pow   optional (needs region_bytes): the issue path's
 *                             translation walks, density_s x rho^-density_pow, rho the
 *                             rows per region entered (a window's misses in address order)
 *             page_s, page_reach, walk_reach_bytes   optional: per launch page_s x
 *                             max(0, pages - page_reach) x max(0, 1 - walk_reach_bytes /
 *                             host pool) (0 walk reach: the pool does not enter)
 *             beside_max, beside_half, beside_steepness   optional (needs region_bytes):
 *                             how much longer a launch of rho rows per region takes while
 *                             the memory system is saturated beside it, beside_max / (1 +
 *                             (rho / beside_half)^beside_steepness) (0.5 = 1.5x; dhbench
 *                             fetch beside=hbm against beside=none), the weight of
 *                             compute_interference below
 *             both forms:
 *             fetch_sms       SMs the fetch kernel occupies (taken from compute)
 *             page_bytes      host page size
 *             launch_s        fixed cost of one gather launch (the fitted form's t0)
 *             region_bytes    optional: the span one upper-level translation entry
 *                             maps (2 MB: a 4 KB page of last-level page table)
 *   [host]    dram_bytes      pinned host memory available for the KV history
 *   [fit_range] (optional, written by bin/dhcal; analysis/README.md)
 *             <section>_<input> = min, max   the inputs a fitted cost form saw,
 *             e.g. fetch_row_bytes, fetch_sms, fetch_rows, fetch_pages,
 *             fetch_pool_bytes. Every entry must be two numbers, min <= max.
 *             The tables are held flat beyond their ends, so a run that asks
 *             for a cost outside these ranges extrapolates: the simulator
 *             records the first such use of each input (hw_range_note) and
 *             reports it once in the summary and the JSON.
 *
 * The tables' form: a launch of `rows` rows of `row_bytes` touching `pages` distinct pages
 * with `sms` SMs moves at
 *   bw = row_bw(row_bytes) / row_bw(ref_row_bytes) * pages_bw(pages) * sms_factor(sms),
 * capped at h2d_bw, and takes launch_s + rows * row_bytes / bw; tables are interpolated
 * linearly in log(x) and held flat beyond their ends. The fitted form (sim/cost.h) takes
 *   launch_s + rows * max(sm_row_s / sms, row_issue_s + row_bytes * row_issue_s_per_byte
 *                         + density_s * rho^-density_pow, row_bytes * link_s_per_byte)
 *   + page_s * max(0, pages - page_reach) * max(0, 1 - walk_reach_bytes / pool)
 * with rho = rows / regions (1 when the regions are not known: every row enters its own
 * region), exactly the form bin/dhcal fitted. So the fetch cost depends on row size, rows,
 * pages and density per launch and SMs, not on bytes alone (measurements: README,
 * pool_probe, measurements/h200/fetch-locality.csv). */
#ifndef DH_HW_H
#define DH_HW_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "common/cfgkey.h"
#include "sim/cost.h"

#define HW_FIT_MAX 64

/* The fitted inputs the simulator checks against [fit_range]: the fetch's, the attention's
 * (bytes of the selected rows and queries per launch), the GEMMs' tokens (m, the weights'
 * fp8 fit), the indexer's context, requests and query tokens per request, and the top-k's
 * top-ks per launch, scores per request and k (with topk_slots only). */
enum { HW_FIT_FETCH_ROW_BYTES = 0, HW_FIT_FETCH_SMS, HW_FIT_FETCH_ROWS, HW_FIT_FETCH_PAGES,
       HW_FIT_FETCH_POOL_BYTES, HW_FIT_FETCH_DENSITY, HW_FIT_ATTN_BYTES, HW_FIT_ATTN_BATCH, HW_FIT_GEMM_M, HW_FIT_IDX_CTX,
       HW_FIT_IDX_BATCH, HW_FIT_IDX_QUERIES, HW_FIT_TOPK_BATCH, HW_FIT_TOPK_CTX, HW_FIT_TOPK_K,
       HW_FIT_MOE_TP_M, /* a TP MoE's tokens against its measured table's M (sim/fmoe.h), not [fit_range] */
       HW_FIT_N };
extern const char *const hw_fit_name[HW_FIT_N];

typedef struct {
    char name[64];
    char base[64];             /* a scaled profile: its base's name; "" otherwise */
    double hbm_bytes, sms;
    double h2d_bw, d2h_bw, duplex_bw;
    double fetch_sms, page_bytes;
    double region_bytes;       /* 0: not given (no density term) */
    double host_dram_bytes;
    /* Every cost, its form chosen by hw_load from the keys given (sim/cost.h):
     *   roof      [hw] hbm_bw, fp8_flops, bf16_flops, mma_efficiency, kernel_launch_s, sms;
     *   attn      fitted when attn_bw is given: attn_launch_s + query tokens x attn_query_s +
     *             bytes / attn_bw (the selected rows' bytes), or the tensor time if larger;
     *   gemm      fitted when weight_bw is given: layer_fixed_s (the layer's GEMM launches) +
     *             weight bytes / weight_bw, or the flops;
     *   indexer   fitted when indexer_ops_s is given: max(key bytes / indexer_bw, queries x
     *             rows x heads x dim / indexer_ops_s) + select_s (the fixed costs of the
     *             selecting layer: the indexer's launch and the top-k's) + the top-k's waves;
     *             indexer_bw not given = hbm_bw;
     *   topk      topk_slots, topk_wave_s, topk_row_s, topk_k_s, topk_score_rate,
     *             topk_steepness: one block per request and query token, topk_slots of them at
     *             once: full waves and a last one of the rest; a wave of n blocks takes
     *             topk_wave_s + k x topk_k_s + the soft maximum (a^q + b^q)^(1/q) of a block's
     *             pass, a = rows x topk_row_s, and the wave's scores through memory, b = n x
     *             rows / topk_score_rate (rows: the scores per request, its indexed context;
     *             k its group's, at most rows; q = topk_steepness >= 1; topk_score_rate 0: no
     *             memory term); topk_slots 0 (the default): no waves, the top-k is all in
     *             select_s, as measured at one working point;
     *   fetch     [gather]: the tables above, ref_row_bytes, launch_s and [pcie] h2d_bw, or
     *             the fitted form's keys;
     *   inter     fetch_interference: a compute task that the miss fetch runs beside
     *             lengthens by this x the overlap (the fetch's reads of host memory slow the
     *             kernels beside it; measured 0.3-0.5 on the H200 replay,
     *             analysis/VALIDATION.md); 0 = independent resources.
     *             compute_interference: the fetch work queued inside such a task lengthens by
     *             this x s x its time there, s = the fetch's beside_slowdown at its density
     *             ([gather]; 1 without the beside fit): the compute's memory traffic slows the
     *             zero-copy reads, sparse ones most (a saturated memory system: 1.5-1.9x at a
     *             few rows per 2 MB region, none at ~100; H200, suites/fetch-beside.suite), so
     *             with the beside fit this is the share of a saturated memory system that a step's
     *             compute amounts to; 0 = none.
     * bin/dhcal fit writes the fitted keys from the kernel benchmarks (analysis/README.md). */
    cost_model cost;
    /* Prefill GEMMs (sim/prefill.h), measured at prefill shapes ([hw] prefill_gemm_m,
     * prefill_gemm_flops, prefill_expert_flops; optional, n = 0 when absent): the FLOP rate of a
     * layer's projections and shared expert at M tokens, and of the routed experts' GEMMs at M
     * rows, interpolated in log(M) and held flat beyond the measured M. */
    cost_table prefill_gemm, prefill_expert;
    /* [hw] prefill_attn_flops: sparse attention's FLOP rate at prefill (a query block per
     * request, many queries per launch); 0 when absent: the decode attention form. */
    double prefill_attn_flops;
    /* [fitted_kernels]: the kernel versions bin/dhcal fitted the costs on (attention: attn_*;
     * fetch: [gather]; indexer: indexer_*; topk: select_s and topk_*), as the benchmark lines
     * and the replay recorded them; 0 where the profile gives none (a datasheet profile).
     * `dhcal validate` refuses a replay that ran another attention version. */
    long fitted_attention, fitted_fetch, fitted_indexer, fitted_topk;
    /* [fit_range]: every entry, and the index of each input the simulator
     * checks (-1 when the profile has no range for it). */
    size_t n_fit;
    struct { char key[64]; double lo, hi; } fit[HW_FIT_MAX];
    int fit_idx[HW_FIT_N];
} hw_profile;

/* Uses outside the fitted ranges seen during one run: the first value of each
 * input and how many evaluations fell outside. */
typedef struct {
    uint32_t n;
    struct { char key[64]; double first, lo, hi; double count; double vmin, vmax; /* values seen outside */ } e[HW_FIT_N];
    double evals[HW_FIT_N];  /* every checked evaluation of each input, inside or outside */
} hw_range_log;

/* Record value of checked input which (HW_FIT_*) if the profile has a fitted
 * range for it and value lies outside. O(1). */
void hw_range_note(const hw_profile *hw, hw_range_log *log, int which, double value);
/* The same against a range given here (a measured table's, not the profile's), logged under
 * hw_fit_name[which]. O(1). */
void hw_range_note_span(hw_range_log *log, int which, double lo, double hi, double value);
/* value held inside the profile's fitted range of input which (HW_FIT_*): the range's
 * nearer end outside it, value itself inside or when the profile has no range. */
double hw_fit_clamp(const hw_profile *hw, int which, double value);
/* Evaluations of the input named key (inside its range or not), 0 when unknown. */
double hw_range_evals(const hw_range_log *log, const char *key);
/* Merge b into a (first values of a win). */
void hw_range_merge(hw_range_log *a, const hw_range_log *b);

/* Every key of a hardware profile: its section, unit, range, default, meaning and class
 * (datasheet or fitted); hw_load reads through it and docs/CONFIG.md is printed from it. */
extern const cfg_schema hw_schema;

/* Does the fitted key [sec] key replace a datasheet rate in its kernel's cost? 1 with the
 * rate's section and key (e.g. "hw", "hbm_bw" for attn_bw), 0 if not. */
int hw_fitted_rate(const char *sec, const char *key, const char **rate_sec, const char **rate);

/* Read the profile from c (every key must be known) and choose the form of each cost from
 * the keys given (hw_profile.cost). 0 or -1 with dh_err(). */
int hw_load(cfg *c, hw_profile *hw);

/* Expected distinct bins of bin_bytes touched by m rows drawn uniformly from a
 * window of window_rows rows of row_bytes each (balls in bins: the window spans
 * B = ceil(window bytes / bin_bytes) >= 1 bins, B (1 - (1 - 1/B)^m) of them
 * touched; 0 when m <= 0). */
double hw_window_bins(double m, double window_rows, double row_bytes, double bin_bytes);
/* Expected distinct pages touched by m rows drawn uniformly from a window of
 * window_rows rows of row_bytes each (balls in bins). */
double hw_window_pages(const hw_profile *hw, double m, double window_rows, double row_bytes);
/* The same for the profile's regions (at least one; 0 when m <= 0 or the
 * profile has no region_bytes). */
double hw_window_regions(const hw_profile *hw, double m, double window_rows, double row_bytes);

#endif
