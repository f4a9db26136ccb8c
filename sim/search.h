/* search.h: the largest concurrency that meets a latency bound in steady state.
 *
 * A run at per-GPU concurrency c is judged on its steady state only:
 *   - the warm-up (hot buffers filling from cold, every request starting at
 *     once) is cut by MSER-5 (White, "An effective truncation heuristic for
 *     bias reduction in simulation output", Simulation 69(6), 1997): the
 *     per-token latency of each step, in batch means of 5 steps, is truncated
 *     where the standard error of the remaining mean is smallest, and never
 *     before the configured warm-up. A truncation point in the second half of
 *     the run means the run is too short to hold a steady state: an error
 *     asking for more steps, never a silent answer;
 *   - the run must hold c requests on the GPU at every measured step: the
 *     trace carries enough requests to replace every finished one (sim.c),
 *     so a measured step with fewer than c is memory refusing admission, and
 *     c is then memory-bound whatever its latency (its waiting requests get
 *     no token). Running out of requests instead is an error;
 *   - the statistic (search_stat) over the measured steps or the requests
 *     that arrived in them must be <= the bound.
 * The search doubles c from 1 until a run fails, then narrows the bracket
 * (interpolating the statistic, bisecting where that is slow), so the answer
 * c* was met and c* + 1 was run and failed: that run is the check, and its
 * failure says why the search stopped (latency bound, memory) or the upper
 * limit stopped it. It assumes that failing is monotone in c (more requests
 * never lower the latency or the memory they need); tests/test_search.c
 * checks the answer against a scan of every concurrency.
 *
 * The statistic carries a 95% confidence interval (order statistics); when
 * the bound lies inside the interval at c* or c* + 1 the answer is reported
 * as within noise: another run length or seed may move it by one. */
#ifndef DH_SEARCH_H
#define DH_SEARCH_H

#include <stdint.h>

#include "sim/sim.h"

/* A latency statistic: which latency and which summary of it. */
enum { SEARCH_TOKEN = RL_N };  /* the metric beside RL_TTFT .. RL_QUEUE: the per-token latency of a
                                * step, token-weighted (sim_result's tpot_*) */
typedef struct {
    int metric;                /* RL_TTFT, RL_TPOT, RL_E2E, RL_QUEUE or SEARCH_TOKEN */
    double q;                  /* quantile in (0, 1), or 0: the mean */
} search_stat;

/* Parse "p50|p90|p99|mean" (the token metric) or "METRIC_p50|p90|p99|mean"
 * with METRIC token, tpot, ttft, e2e or queue. 0 or -1 with dh_err(). */
int search_stat_parse(const char *s, search_stat *st);
/* "token_p90", "e2e_mean", ... into buf. */
const char *search_stat_name(search_stat st, char *buf, int cap);

typedef enum { SEARCH_STOP_LATENCY = 0, SEARCH_STOP_MEMORY, SEARCH_STOP_MAX } search_stop;
extern const char *const search_stop_name[3]; /* "latency", "memory", "max" */

/* One run judged. */
typedef struct {
    uint32_t per_gpu;
    uint32_t warmup;           /* steps cut (MSER-5, at least the configured warm-up) */
    uint32_t measured;         /* steps after it */
    uint32_t short_steps;      /* measured steps with fewer than per_gpu requests running */
    double value, lo, hi;      /* the statistic (s) and its 95% CI (-1: unknown) */
    uint32_t n;                /* samples under it: steps (token) or requests */
    int memory_short, ok;
} search_eval;

/* Run the simulation at per-GPU concurrency c into *res; 0 or -1. */
typedef int (*search_run_fn)(void *ctx, uint32_t per_gpu, sim_result *res);
/* Called after every run (progress). */
typedef void (*search_progress_fn)(void *ctx, const search_eval *e);

typedef struct {
    double bound_s;
    search_stat stat;
    uint32_t config_warmup;    /* the configured warm-up steps: the least cut */
    uint32_t max_per_gpu;      /* the upper limit of the search */
    search_run_fn run;
    search_progress_fn progress; /* may be NULL */
    void *ctx;
} search_cfg;

typedef struct {
    uint32_t best;             /* the answer, per GPU (0: not even one request) */
    search_stop stop;
    int noisy;                 /* the bound lies inside the CI at best or best + 1 */
    search_eval at, above;     /* at best (if best > 0) and the check at best + 1 */
    sim_result res, res_above;
    uint32_t runs;
    uint32_t max_warmup;       /* the longest warm-up cut over every run of the search */
} search_out;

/* Judge one run at per-GPU concurrency c (exposed for tests). 0, or -1 with
 * dh_err(): too short a run for a steady state, the trace running out of
 * requests, no sample for the statistic. */
int search_judge(const search_cfg *cfg, uint32_t c, const sim_result *r, search_eval *e);
/* MSER-5 truncation of series x[0..n): the steps to cut, or -1 when the
 * minimum falls in the second half (no steady state in n steps). */
int64_t search_mser5(const double *x, uint32_t n);
int search_run(const search_cfg *cfg, search_out *out);
void search_out_release(search_out *o);

#endif
