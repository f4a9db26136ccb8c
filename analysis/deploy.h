/* deploy.h: the validation table against published deployments.
 *
 * A folder (analysis/deployments/ by default) holds one INI file per published
 * data point. Each file says what was published and where, which simulator
 * configuration stands for it, and what was guessed:
 *   [point]      source   the exact source (URL, or repository path at a commit,
 *                         or issue number); required and non-empty
 *                assumed  what the simulator configuration guesses, in short
 *                         (the why in the comments above it)
 *                gap      the modelling gap responsible when a target is missed
 * The published setting and the reasons go in comments: inih reads lines of
 * at most 200 characters, so prose is wrapped there, as in every config here.
 *   [published]  output_per_gpu   output tokens/s per GPU (optional)
 *                output_bound     exact (default) or lower: the source only says
 *                                 "more than" this value
 *                tpot_ms, tpot_stat  time per output token and which statistic
 *                                 the source gives (p50 or mean; optional)
 *                sweep_concurrency, sweep_output_total
 *                                 a concurrency sweep: instance concurrencies and
 *                                 the instance's output tokens/s at each (optional)
 *                gpus             GPUs of the published instance (with a sweep)
 *   [sim]        instance, policy, concurrency (not with a sweep), prompt_len,
 *                output_len, steps, warmup_steps (optional), admission (optional:
 *                reserve_full or sglang, the instance's [instance] admission), set
 *                (optional: space-separated SECTION.KEY=VALUE overrides, as dhsim --set)
 * Unknown keys are errors, as everywhere in the project.
 *
 * Quantities compared: output tokens/s per GPU (at the point's concurrency, or
 * at a sweep's highest one), TPOT in the published statistic (bench_serving's: over
 * requests, each request's (e2e - TTFT) / (tokens - 1), of the requests whose decoding
 * began in the measured steps and ended in the run; the per-step figure, marked, when none
 * did), and for a sweep
 * the saturation concurrency in requests per GPU: the smallest concurrency of
 * the sweep whose output reaches DEP_PLATEAU_SHARE of the sweep's largest,
 * applied alike to the published and the simulated series. Targets: output and
 * TPOT within DEP_TARGET_RATIO, saturation within DEP_TARGET_SAT requests per
 * GPU. A missed target is reported in the table with the point's gap, not as an
 * error. One simulator run costs what sim_run costs; a sweep is one run per
 * concurrency. */
#ifndef DH_DEPLOY_H
#define DH_DEPLOY_H

#include "common/cfgkey.h"

#include <stddef.h>
#include <stdio.h>

/* The folder read when none is given (found by dh_path_find). */
#define DEP_DEFAULT_DIR "analysis/deployments"
/* The targets (issue 17 item 7): +/-15 % on output and TPOT, one request
 * per GPU on the saturation concurrency. */
#define DEP_TARGET_RATIO 0.15
#define DEP_TARGET_SAT 1.0
/* A sweep has saturated once its output is within 5 % of the sweep's largest:
 * the published series' scatter on its plateau is under 3 % (sgl-project/sglang#30985:
 * 431.55 to 442.72 tokens/s over c32..c256), so 5 % separates a plateau from a rise. */
#define DEP_PLATEAU_SHARE 0.95
#define DEP_MAX_SWEEP 32

typedef struct {
    char id[96];                 /* the file name without .ini */
    char path[600];
    char source[512], assumed[512], gap[512];
    double pub_output;           /* NAN: not published */
    int output_lower;            /* 1: the source gives a lower bound */
    double pub_tpot_ms;          /* NAN: not published */
    char tpot_stat[8];           /* "p50" or "mean" */
    size_t n_sweep;
    double sweep_c[DEP_MAX_SWEEP], sweep_out[DEP_MAX_SWEEP];
    double gpus;
    char instance[512], policy[32], sets[2048];
    char admission[16];          /* [sim] admission: "" (the instance's), reserve_full, sglang */
    double concurrency;
    unsigned prompt_len, output_len, steps, warmup_steps;
} dep_point;

typedef struct {
    dep_point *p;
    size_t n;
} dep_set;

/* How a point's intervals are computed (dep_sim.ci), decided from its random inputs:
 *   DEP_CI_DET    no random input (a policy that reads no selection, as resident serving,
 *                 fixed lengths, no draft or one whose every acceptance has probability 0 or
 *                 1): the figures are exact for the configuration, printed without +/-;
 *   DEP_CI_SEEDS  random acceptance (or lengths) only: DEP_REPS independent replications over
 *                 [trace] seed (the file's seed, then seed + 1, ...), the point the mean over
 *                 them and the interval Student's over the DEP_REPS values (the measured steps
 *                 are whole waves of requests, not stationary within one, so the run's own
 *                 batch means do not apply; a replication of the cells with random acceptance
 *                 costs well under a second);
 *   DEP_CI_TREND  random selections (a policy that reads them from the generator): one run,
 *                 as each costs what the whole table costs otherwise (the HiSparse point, 9 x 78
 *                 streams for 8192 steps, 80 s); output's interval by batch means with the wave's
 *                 trend removed by second differences (stats_trend_sum_ci) on the linearised
 *                 ratio, z_i = tokens_i - R seconds_i over the measured steps, less the steps in
 *                 which a prefill ended (their time is the prefill's, computed from the lengths).
 * TPOT's interval, under DEP_CI_SEEDS: with one request in flight per scheduler the requests
 * are independent and alike (each alone, with its own draws), so the pooled requests of all
 * replications give the median's order-statistics interval (stats_median_ci; half-width the
 * larger side) or the mean's t-interval over requests; with more, the requests of a run share
 * their steps (and, with a batch-wide acceptance, their draws), so the interval is Student's over
 * the replications' statistics. Under DEP_CI_TREND a wave's requests share every step: no
 * interval (NAN). */
enum { DEP_CI_DET = 0, DEP_CI_SEEDS, DEP_CI_TREND };
#define DEP_REPS 30
/* dep_sim.random: which inputs are random */
enum { DEP_RAND_SEL = 1, DEP_RAND_ACC = 2, DEP_RAND_LEN = 4 };

typedef struct {
    int ci;                          /* DEP_CI_* */
    unsigned random;                 /* DEP_RAND_* bits */
    uint32_t runs;                   /* runs per concurrency: DEP_REPS under DEP_CI_SEEDS, else 1 */
    double output_half, tpot_half;   /* 95 % half-widths of output_per_gpu and tpot_ms: 0 under
                                      * DEP_CI_DET, NAN where none can be computed */
    double output_per_gpu, tpot_ms;  /* at the point's (or the sweep's top) concurrency; TPOT per
                                      * request as bench_serving has it (tpot_requests of them),
                                      * or per step when no request decoded within the
                                      * measured steps (tpot_requests 0) */
    uint32_t tpot_requests;          /* summed over the runs */
    double admitted_per_gpu;         /* mean requests running on the simulated GPU there */
    double retractions;              /* requests retracted in the measured steps (NAN: reserve_full) */
    double sat_per_gpu;              /* NAN without a sweep */
    double sweep_out[DEP_MAX_SWEEP]; /* the simulated instance's output tokens/s */
} dep_sim;

/* Every DIR/ *.ini in name order (NULL: DEP_DEFAULT_DIR). 0, or -1 with dh_err()
 * naming the file and the problem. */
int dep_load_dir(const char *dir, dep_set *s);
void dep_release(dep_set *s);
/* Simulate every point on up to `threads` threads (results do not depend on it);
 * out[i] for s->p[i]. 0, or -1 with dh_err() naming the point. */
int dep_simulate(const dep_set *s, int threads, dep_sim *out);
/* The side-by-side table to f; the same rows as CSV to csv when not NULL. */
int dep_report(const dep_set *s, const dep_sim *r, FILE *f, FILE *csv);

/* Every key of a published-deployment file (docs/CONFIG.md). */
extern const cfg_schema dep_schema;

#endif
