/* wl.h: the workload of one decode GPU: how many requests, their lengths,
 * when they arrive and how many may run at once.
 *
 * [workload] keys (concurrency and rates are for the whole instance; the
 * simulator's GPU sees 1/attention_dp of them):
 *   mode            closed | open | step
 *   concurrency     closed: requests in flight; open: the most in flight
 *   prompt_len      tokens of context at the first decode position
 *   prompt_len_max  > prompt_len: uniform in [prompt_len, prompt_len_max] (default: fixed)
 *   output_len, output_len_max   likewise for decode tokens
 *   steps           decode steps to simulate (the run may end earlier when
 *                   every request finished)
 *   max_time_s      stop after this much simulated time (0: no limit)
 *   requests        requests in the trace for this GPU (0: enough for `steps`)
 *   warmup_steps    steps excluded from the reported rates and percentiles
 *   warmup_fraction the same as a share of steps, used where warmup_steps is
 *                   not given (floor(fraction x steps); default 0, at most 0.9)
 *   measure_tokens  stop once the measured steps emitted this many tokens
 *                   (0: no limit; steps stays the cap). dhsim --compare sets
 *                   it so that a speculative column is measured over as many
 *                   output tokens as the plain ones
 *   arrival         poisson | gamma (open loop)
 *   rate            arrivals per second on the instance (open loop)
 *   gamma_cv        coefficient of variation of gamma inter-arrival times
 *   step_times      step mode: times (s) at which the concurrency changes
 *   step_concurrency step mode: the concurrency from each of those times
 * Lengths and arrivals come from counter-based streams keyed by the seed and
 * the request index, so they do not depend on the policy or on timing. */
#ifndef DH_WL_H
#define DH_WL_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/cfgkey.h"

enum { WL_CLOSED = 0, WL_OPEN, WL_STEP };
#define WL_MAX_STEPS 64

typedef struct {
    int mode;
    double concurrency;            /* instance-wide */
    uint32_t prompt_len, prompt_len_max, output_len, output_len_max;
    uint32_t steps, requests, warmup_steps;
    double max_time_s;
    double measure_tokens;         /* 0: none */
    int gamma;                     /* open loop: 1 gamma, 0 poisson */
    double rate, gamma_cv;
    uint32_t n_load;
    double load_time[WL_MAX_STEPS], load_conc[WL_MAX_STEPS];
} wl_cfg;

int wl_load(cfg *c, wl_cfg *w);
/* Requests the trace must hold for one GPU with per-GPU concurrency conc. */
uint32_t wl_requests_needed(const wl_cfg *w, uint32_t conc_per_gpu, double gpus);
/* Per-request lengths, drawn from (seed, request). */
void wl_lengths(const wl_cfg *w, uint64_t seed, uint32_t n, uint32_t *prompt, uint32_t *output);
/* Arrival times for one GPU (open loop; instance rate / gpus). */
void wl_arrivals(const wl_cfg *w, uint64_t seed, double gpus, uint32_t n, double *t);
/* Target concurrency for the instance at time t (closed: constant). */
double wl_target(const wl_cfg *w, double t);
/* Step mode: the first load change after time t, or -1 when none is left. */
double wl_next_change(const wl_cfg *w, double t);

/* The [workload] keys (docs/CONFIG.md). */
extern const cfg_schema wl_schema;

#endif
