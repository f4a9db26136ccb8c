/* fitcost.h: the simulator's cost-model forms and their fit to dhbench results.
 *
 * Each form is physics (a fixed cost plus work over a rate, with the
 * bottleneck that applies), not a curve chosen for its fit.  Times in us.
 *
 * fetch (miss fetch from pinned host memory, zero-copy gather):
 *   tau_row(s, sms) = max(sm_row_ns / sms,                  rows in flight limited by SMs
 *                         row_issue_ns + s / row_issue_gbps, per-row issue/latency path
 *                         s / link_gbps)                     PCIe link
 *   time = t0_us + rows * tau_row / 1000
 *        + page_ns[pattern] * max(0, pages - page_reach[pattern])
 *                           * max(0, 1 - walk_reach_bytes / pool_bytes) / 1000
 *   The last term is address translation: distinct host pages per launch beyond
 *   what the GPU's translation caches hold cost page_ns each, and only when the
 *   pool's page tables exceed what the page-walk caches cover (a 2 GB pool
 *   showed no penalty at any row count, 16 GB and larger did).  The saturation
 *   in SMs is BW = BWmax * min(1, sms / sms_sat) with sms_sat = sm_row_ns /
 *   max(other terms).  pages = expected distinct host pages one launch touches,
 *   fit_fetch_pages().  Lines with rows empty but gbps given ("asymptotic"
 *   lines from probes that did not record rows) fit tau_row alone.
 *   Density (when the base profile gives [gather] region_bytes): the issue path
 *   gains density_ns * rho^-density_pow, rho = rows per translation region
 *   entered (>= 1), fit_fetch_density(): rows that enter a new 2 MB region pay
 *   an upper-level walk, shared by the rows that follow in the same region
 *   (measured: 656 B rows, 8 SMs, launches back to back: ~16 ns/row at rho 9,
 *   ~14 at rho 100 and above; measurements/h200/fetch-calib-b2b20.csv). The
 *   exponent is empirical (walks of rows in flight overlap); the link path
 *   (large rows) hides it.
 * hbm (sparse attention, verification), the simulator's attention form (sim/cost.h):
 *   time = t0_us + batch*queries * query_us + max(bytes / (hbm_gbps * 1e3), tensor_us)
 *          + batch*union_rows * union_row_us
 *   tensor_us the roofline's tensor time of the line's flops (fit_opts.roof, every SM, FP8
 *   unless the dtype is bf16), known per line; the union-row term (a verification kernel that
 *   reads its queries' union once) is the fit's alone: a profile takes the attention section
 *   only without it. Terms whose input never varies are left out of the fit and written as 0.
 * indexer (a roofline): time = t0_us + max(bytes / (key_gbps * 1e3), macs / (rate_gmacs * 1e3)):
 *           the scoring reads each request's keys once (bytes, the line's bytes column) and
 *           multiplies them by every query (macs = flops / 2, the line's flops column, else
 *           batch*queries*ctx*heads*kdim); the longer of the two sets the time. Fitted
 *           three ways (memory term alone, compute term alone, both), the least residual
 *           kept, the simpler on a tie. When every point is in one regime, the other term
 *           is only bounded: written as the bound (`bound`: the slowest rate, or bandwidth,
 *           that keeps every point in the regime it is in). Lines without bytes: the
 *           compute term alone (t0_us, rate_gmacs).
 * gemm:     time = t0_us + max(bytes / (weight_gbps * 1e3), tensor_us), the simulator's GEMM
 *           form for one launch, one fit per dtype: decode GEMMs (a few to a hundred tokens)
 *           stream their weights, so the bytes set the time until the tensor work takes
 *           longer; the largest rate the run measured (ceiling_value of a "*gemm*" ceiling,
 *           TFLOP/s) is the roofline's efficiency (fit_mma_efficiency).
 * Both are fitted linearly for a given split of the lines into byte- and tensor-bound ones,
 *           the split repeated with the fitted rate until it holds (fit_lin).
 * topk:     one block per top-k (a request's, or a verified query's: batch * queries of
 *           them), sms blocks at once (dhbench records the device's resident blocks as the
 *           line's sms; every line of a fit must agree: the section's slots), so the launch
 *           runs full waves of sms blocks and a last one of the rest; each wave of n blocks
 *           takes wave_us + k * k_ns / 1000 + (a^q + b^q)^(1/q), a soft maximum of
 *             a = ctx * row_ns / 1000               a block's pass over its scores on one SM
 *             b = n * ctx / (score_gps * 1e3)       all n blocks' scores through the memory
 *           (q = steepness >= 1: 1 adds them, a large q is the plain roofline; the blocks of a
 *           wave near the knee slow each other before memory saturates), and time = t0_us +
 *           the waves' sum. Fitted as the indexer's roofline (each term alone, then both with
 *           q; the least residual, a term left out written as its bound). The range "batch"
 *           is the top-ks per launch. Measured on the H200 (version 5, 132 at once,
 *           suites/topk-scale.suite): a block's pass ~0.07 ns per score, a full wave at
 *           ~1,200 G scores/s, q ~1.6.
 * const:    time = t0_us (a cost measured at one working point); R^2 is not defined for it
 *           and not checked.
 * beside (not a kernel's form: the fetch's slowdown beside a saturated memory system,
 *           from fetch lines whose pattern ends "+beside_hbm", each against its partner
 *           without the suffix, same file and parameters; dhbench fetch beside=):
 *           slowdown = median_beside / median_alone - 1 against the partner's density rho
 *           (fit_fetch_density), fitted as
 *             slowdown = slowdown_max / (1 + (rho / density_half)^steepness)
 *           unweighted (the slowdown is ~0 where the link, not the walks, bounds the
 *           fetch). Measured on the H200: 0.5-0.9 at 1-10 rows per 2 MB region, ~0.3 at
 *           30, none from ~100. Beside lines never enter the fetch fit itself; a section
 *           "fetch_beside" when the selection holds any (needs region_bytes).
 *
 * Non-physical results are errors: a bandwidth or rate <= 0, a fixed or
 * per-item cost below zero by more than two standard errors (one inside the
 * noise is refitted at 0 and said so), R^2 below the caller's threshold. */
#ifndef DH_FITCOST_H
#define DH_FITCOST_H

#include "analysis/bcsv.h"
#include "analysis/fit.h"
#include "sim/cost.h"

#include <stdio.h>

typedef enum { FIT_FORM_FETCH, FIT_FORM_HBM, FIT_FORM_INDEXER, FIT_FORM_GEMM, FIT_FORM_CONST, FIT_FORM_BESIDE,
               FIT_FORM_TOPK, FIT_FORM_NONE } fit_form;

const char *fit_form_name(fit_form f);
int fit_form_parse(const char *name, fit_form *out);
/* The default form for a dhbench kernel name (FIT_FORM_NONE: not modelled). */
fit_form fit_form_for_kernel(const char *kernel);

/* Expected distinct host pages (page_bytes each) one fetch launch touches.
 * pattern "uniform" or "uniform_sorted" (dhbench's names; a "+thp" or other
 *   suffix is ignored): rows uniform over the pool, P (1 - e^{-rows/P}) with
 *   P = pool_bytes / page_bytes;
 * pattern "serving*": the pool is cut into (request, layer) windows of ctx rows,
 *   k of them drawn per window: (rows / k) Pw (1 - e^{-k/Pw}), Pw = ctx*row_bytes/page_bytes;
 *   without ctx and k, every row on its own page (rows): a window of 100K rows
 *   of 656 B spans 16K pages, so its 291 missed rows touch 288 of them.
 * Returns -1 with dh_err() for an unknown pattern. */
int fit_fetch_pages(const char *pattern, double rows, double row_bytes, double pool_bytes,
                    double ctx, double k, double page_bytes, double *pages);

/* Rows per translation region entered by one fetch launch (the density term
 * of the fetch form), with regions of region_bytes (2 MB: what one 4 KB page
 * of last-level page table maps):
 * pattern "uniform": 1 (rows in random order: every row enters a region);
 * "uniform_sorted": rows / R (1 - e^{-rows/R}), R = pool_bytes / region_bytes;
 * "serving*": fit_window_density(k, ctx, ...): every window's rows are read in
 *   address order, so a window's k rows enter each region they touch once.
 *   Needs ctx and k (dhbench records them for serving lines).
 * Returns -1 with dh_err() for an unknown pattern or missing ctx / k. */
int fit_fetch_density(const char *pattern, double rows, double row_bytes, double pool_bytes,
                      double ctx, double k, double region_bytes, double *rho);
/* m rows drawn from a window of window_rows rows of row_bytes each, read in
 * address order: m / (expected distinct regions), hw_window_bins(), as the
 * simulator counts them. */
double fit_window_density(double m, double window_rows, double row_bytes, double region_bytes);

/* The fetch form's parameters, in fit order; then (page_ns, page_reach) per pattern. */
enum { FIT_FP_T0, FIT_FP_SM, FIT_FP_ISSUE, FIT_FP_ISSUE_B, FIT_FP_LINK, FIT_FP_WALK, FIT_FP_DENS,
       FIT_FP_DENS_POW, FIT_FP_PAGE0 };

#define FIT_MAX_GROUPS 8
#define FIT_MAX_RANGE 8

/* One input's fitted range. */
typedef struct { const char *name; double min, max; } fit_range;

/* One fitted coefficient as it goes into the profile. */
typedef struct {
    char key[48];
    double value, se;
    int fixed_zero;   /* refitted at 0 because the fit put it below 0 within noise */
    double fit_value, fit_se; /* the value and standard error before that refit */
    int undetermined; /* the data do not determine it (input constant or collinear): written as 0 */
    int bound;        /* a rate the data only bound from below (every point limited by another term) */
} fit_coef;

typedef struct {
    char section[48];     /* profile section: fetch, attention, verify, indexer, gemm_bf16, ... */
    fit_form form;
    char kernel[64], version[64], versions_seen[256], selection[160];
    char files[512];      /* the CSV files the points came from */
    fit_result res;
    fit_coef coef[FIT_MAX_PAR + 4];
    size_t ncoef;
    fit_range range[FIT_MAX_RANGE];
    size_t nrange;
    size_t skipped_unchecked, held_out;
    char groups[FIT_MAX_GROUPS][48]; /* fetch: the pattern of each (page_ns, page_reach) pair */
    size_t ngroups;
    fit_errdist holdout_err;  /* relative errors on the held-out lines (n = 0: none) */
    char dtype[16];           /* gemm: the dtype of the section's lines */
    double ceiling;           /* gemm: largest "*gemm*" ceiling_value of its lines (TFLOP/s), NAN if none */
    char ceiling_name[48];
    double slots;             /* topk: the blocks that ran at once (the lines' sms) */
    cost_roofline roof;       /* hbm, gemm: the roofline of the tensor term (sms 0: none) */
    size_t tensor_bound;      /* hbm, gemm: fitted lines the tensor term bounds */
} fit_section;

/* Options for fit_bench(). */
typedef struct {
    double min_r2;                   /* reject a fit below this weighted R^2 */
    double page_bytes;               /* host page size for fit_fetch_pages() */
    double region_bytes;             /* translation region for fit_fetch_density(); 0: no density term */
    const char *const *holdout;      /* NULL-terminated specs "col=v,col<=v,..." */
    const char *const *versions;     /* NULL-terminated "kernel=version" overrides */
    const char *const *forms;        /* NULL-terminated "kernel=form" overrides */
    const char *const *select;       /* NULL-terminated specs (hold-out syntax): when given, only
                                      * lines matching one of them are used at all */
    cost_roofline roof;              /* the base profile's roofline, the tensor term of the hbm and
                                      * gemm forms (sms 0: no tensor term); its mma_efficiency is
                                      * replaced by the measured GEMM ceiling's (fit_mma_efficiency):
                                      * a GEMM section's own, for the others weight_dtype's */
    const char *weight_dtype;        /* the GEMM dtype whose ceiling is the profile's mma_efficiency
                                      * (NULL: fp8) */
} fit_opts;

void fit_opts_default(fit_opts *o);

/* The beside form at rho for p = {slowdown_max, ln density_half, steepness}; grad (may be
 * NULL) gets d/dp. */
double fit_beside_eval(const double *p, double rho, double *grad);

/* The profile's mma_efficiency for a measured GEMM rate of ceiling_tflops against the peak
 * (FLOP/s): their ratio as the profile writes it (4 decimals), so that the fit's tensor term is
 * the simulator's. */
double fit_mma_efficiency(double ceiling_tflops, double peak_flops);

/* A fitted line's time in us by the section's form (hbm, gemm, indexer's linear fallback,
 * const): for hbm and gemm the simulator's own cost_attention_time / cost_gemm_time (sim/cost.h)
 * at the section's coefficients and roofline, on every SM (the hbm form's union-row term, which
 * the simulator does not have, added). */
double fit_line_time_us(const fit_section *s, const bcsv_row *r);

/* Fit every modelled kernel of the table.  Writes a line per kernel that has
 * no model form to log (never silently dropped).  *out is malloc'd. */
int fit_bench(const bcsv_table *t, const fit_opts *o, fit_section **out, size_t *nout, FILE *log);

/* Whether a row matches one hold-out spec ("col=v,col<=v,col>=v"; all must hold). */
int fit_holdout_match(const bcsv_row *r, const char *spec, int *match);

/* The indexer form for p = {t0_us, us per key byte, us per multiply-add}: t0_us + the
 * simulator's cost_scoring_time (sim/cost.h) in microseconds, the per-unit times as rates;
 * g (may be NULL) gets d/dp (checked against that form in tests/test_cost.c). */
double fit_indexer_time_us(const double *p, double bytes, double macs, double *g);

/* The topk form for p = {t0_us, wave_us, us per score of a block, us per selected row, us per
 * score of a wave, steepness}: t0_us + the simulator's cost_topk_time (sim/cost.h) in
 * microseconds, the wave's per-score time as its rate; g (may be NULL) gets d/dp (checked
 * against that form in tests/test_cost.c). */
double fit_topk_time_us(const double *p, double topks, double ctx, double k, double slots, double *g);

/* Evaluate the fetch form for given coefficients (used by tests and by the
 * range checker's report).  p follows the parameter order of fit_bench's
 * fetch section: t0_us, sm_row_ns, row_issue_ns, row_issue_ns_per_byte,
 * link_ns_per_byte, walk_reach_gb, then (page_ns, page_reach) per pattern. */
double fit_fetch_time_us(const double *p, double rows, double row_bytes, double sms,
                         double pool_bytes, double pages, double rho, int pattern_group);

#endif
