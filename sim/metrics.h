/* metrics.h: what a run reports, from the record of each of its steps --
 * the timeline, the tallies (every step, and the measured steps after the
 * warm-up), the token-weighted latency quantiles, the end-of-run invariants
 * and the result (sim_result).
 *
 * Every tally is a plain running sum in step order, so a run's figures do not
 * depend on how the loop that feeds them is arranged. Cost: O(1) per step,
 * O(steps log steps) at the end for the quantiles. */
#ifndef DH_METRICS_H
#define DH_METRICS_H

#include <stdint.h>
#include <time.h>

#include "sim/ledger.h"
#include "sim/pol.h"
#include "sim/res.h"
#include "sim/sim.h"
#include "sim/step.h"

/* What one step brought, as the run loop records it. */
typedef struct {
    sim_tl_row row;          /* its timeline row */
    double budget_rows;      /* hot budget per (request, group), mean over the groups */
    double miss_bytes;       /* bytes of the rows it fetched */
    double overhead_s;       /* its fixed overhead (step_overhead_s) */
} metrics_step;

/* One measured step's per-token latency and the tokens that waited it. */
typedef struct {
    double s_per_token;
    double tokens;
} metrics_dur;

/* Speculative totals over the measured steps. */
typedef struct {
    double req_steps, accepted, verified, union_rows, union_n, fetched, fetched_pq;
    double draft_s, step_s, overhead_s;
} metrics_spec;

typedef struct {
    uint32_t warmup, n_groups;
    sim_tl_row *tl;          /* [cap] the timeline, handed to the result */
    uint32_t n_tl, cap;
    /* Every step. */
    double sel, miss, miss_bytes, active, optional, tokens, budget;
    double hbm[MEM_N_CATEGORIES];
    double staging_peak;
    /* Measured steps. */
    double m_tokens, m_time, m_sel, m_miss;
    metrics_dur *durs;       /* [cap] */
    uint32_t n_durs;
    metrics_spec spec;
    struct timespec wall0;
} metrics;

/* A run of at most max_steps steps, the first warmup of them not measured. */
void metrics_init(metrics *mt, uint32_t max_steps, uint32_t warmup, uint32_t n_groups);
void metrics_release(metrics *mt);
/* Add one step (its row's active, tokens, times and ledger must be set). */
void metrics_add(metrics *mt, const metrics_step *s);

/* The state the run ends in. */
typedef struct {
    const sim_config *sc;
    const pol_ops *pol;
    double t;                         /* the last step's end */
    const mem_ledger *hbm;
    const res_server *gpu, *h2d, *d2h;
    const step_stats *st;
    uint32_t admitted, completed, unfinished, requests;
    uint32_t budget_rows;             /* the fixed budget B of group 0 (0: none, or not fixed) */
} metrics_end;

/* Check the invariants and fill *res (taking the timeline). -1 with dh_err()
 * naming the broken invariant. */
int metrics_finish(metrics *mt, const metrics_end *e, sim_result *res);

/* Sort d[0..n) by latency (qsort; the order metrics_finish uses). */
void metrics_sort_durs(metrics_dur *d, uint32_t n);
/* The token-weighted q-quantile of sorted d (total: the tokens summed): the
 * latency of the step in which the q x total-th token was emitted, since every
 * token of a step waited the whole step. */
double metrics_quantile(const metrics_dur *d, uint32_t n, double total, double q);

#endif
