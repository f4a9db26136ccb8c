/* reqlat.h: per-request latencies, as serving benchmarks report them.
 *
 * The run loop records four events per request (sim.c calls the hooks):
 *   arrival   closed loop and load steps: a client submits its next request
 *             as soon as one of its in-flight requests finishes, so requests
 *             arrive (in index order) whenever fewer than the target are in
 *             the system (arrived, not finished); open loop: the drawn
 *             arrival time (wl.h);
 *   admit     the ledger admitted it (admit.h) at the start of a step;
 *   prefill   colocated prefill ([prefill] mode = chunked, prefill.h): the end of the
 *             iteration that ran its prompt's last chunk (admit_req.prefill_done_t);
 *             not modelled (-1) when the prefill runs on a disaggregated prefill instance;
 *   first     the end of its first decode step (its first output tokens);
 *   finish    the end of the step that emitted its last output token.
 * From them, per request (seconds; Vidur's request metrics and SGLang's
 * bench_serving definitions):
 *   queue = admit - arrival                      (Vidur: scheduling delay)
 *   ttft  = first - arrival                      (time to first token)
 *   e2e   = finish - arrival                     (end-to-end latency)
 *   tpot  = (e2e - ttft) / (output tokens - 1)   (bench_serving's TPOT; a
 *                                                 one-token request has none)
 *   prefill = prefill - admit                    (time from admission to the prompt's
 *                                                 last chunk: its own chunks and the
 *                                                 other prompts' iterations between them)
 * What TTFT includes depends on where the prefill runs:
 *   - colocated, chunked (prefill.h): the admission wait, every prefill iteration until the
 *     prompt's last chunk has run (its own chunks and the others' that the scheduler put
 *     first, and under the alternate rule the decode steps between them), then the first
 *     decode step: TTFT = prefill done + the first decode step. The simulator emits every
 *     output token from a decode step; SGLang, vLLM and Vidur sample the first token from
 *     the prefill's last forward, so their TTFT is the prefill's end (the CSV's
 *     prefill_done_s - arrival_s), one decode step earlier than this one;
 *   - disaggregated (the default): the simulated GPU decodes a prefill/decode disaggregated
 *     instance, so a request arrives with its prompt's KV already in host memory; TTFT here
 *     is the admission wait plus the first decode step on this GPU. The prefill instance's
 *     compute and the KV transfer from it are not modelled and not included (they add the
 *     same time to TTFT and e2e under every policy); the CSV's prefill columns are empty.
 *
 * Quantiles: the q-quantile of n samples is the ceil(q n)-th smallest; its
 * 95% confidence interval is the distribution-free one from order statistics
 * (ranks n q -/+ 1.96 sqrt(n q (1 - q)), the normal approximation of the
 * binomial; unknown when a rank falls outside the sample). It treats the
 * requests as independent draws, which requests sharing steps are not quite;
 * read it as a lower bound on the uncertainty. */
#ifndef DH_REQLAT_H
#define DH_REQLAT_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    uint32_t prompt, output;            /* tokens */
    double arrival, admit, first, finish; /* seconds; -1: not reached in the run */
    double prefill;                     /* colocated prefill's end; -1: not modelled or not reached */
} reqlat_rec;

typedef struct {
    reqlat_rec *r;                      /* [n] by request index */
    uint32_t n, n_arrived;              /* requests arrive in index order */
    const double *open_arrival;         /* open loop: [n] arrival times; NULL otherwise */
} reqlat;

enum { RL_TTFT = 0, RL_TPOT, RL_E2E, RL_QUEUE, RL_N };
extern const char *const reqlat_metric_name[RL_N]; /* "ttft", "tpot", "e2e", "queue" */

void reqlat_init(reqlat *l, uint32_t n, const uint32_t *prompt, const uint32_t *output, const double *open_arrival);
void reqlat_release(reqlat *l);
/* Arrivals up to time t: closed and step loops, until target requests are in
 * the system (completed: requests finished so far); open loop, those whose
 * drawn time is <= t. Call before each admission. */
void reqlat_arrive(reqlat *l, double t, uint32_t target, uint32_t completed);
void reqlat_admit(reqlat *l, uint32_t r, double t);
/* Request r's prompt finished prefilling (colocated) in an iteration ending at t. */
void reqlat_prefill(reqlat *l, uint32_t r, double t);
/* Request r emitted tokens in a step ending at t; done: its last ones. */
void reqlat_tokens(reqlat *l, uint32_t r, double t, int done);

/* Metric m of one request, or -1 where it is not defined (not reached in the
 * run; TPOT of a one-token request). */
double reqlat_value(const reqlat_rec *x, int m);
/* The defined values of metric m over the requests that arrived at or after
 * t_from, sorted ascending (malloc'd into *out, NULL when none); the count. */
uint32_t reqlat_samples(const reqlat_rec *r, uint32_t n, int m, double t_from, double **out);

typedef struct {
    double v, lo, hi;                   /* lo, hi: 95% CI, -1 when unknown; v -1 when n = 0 */
    uint32_t n;
} reqlat_q;
/* The q-quantile of sorted x[0..n) and its CI (see the top of this file). */
reqlat_q reqlat_quantile(const double *x, uint32_t n, double q);
/* Mean of x[0..n) (-1 when n = 0). */
double reqlat_mean(const double *x, uint32_t n);

/* The time from admission to the end of the prefill (colocated), or -1 where it is not
 * modelled or not reached. */
double reqlat_prefill_s(const reqlat_rec *x);

/* Write the requests that arrived as CSV rows (with a header when header is
 * set) labelled with policy; t_from marks the measured ones; prefill_done_s and prefill_s
 * are empty where prefill is not modelled. 0 or -1. */
int reqlat_csv(FILE *f, const char *policy, const reqlat_rec *r, uint32_t n, double t_from, int header);
/* Empirical CDFs as TSV rows (policy, metric, n, q, value_s at q = 0.01 ..
 * 0.99 and 0.999), one header when header is set; metric "prefill" (reqlat_prefill_s) too
 * when any request has a colocated prefill. 0 or -1. */
int reqlat_cdf_tsv(FILE *f, const char *policy, const reqlat_rec *r, uint32_t n, double t_from, int header);

#endif
