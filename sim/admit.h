/* admit.h: admission of requests against the HBM ledger, and the requests'
 * streams while they are active.
 *
 * A request is admitted when its reservations fit: indexer keys for its final
 * length, the rows its policy reserves (pol_ops.reserve), the window layers'
 * window, and under speculative decoding its draft KV and verification
 * staging (specrun_reservation; none without a host tier, where verification
 * reads in place). A policy whose budget follows spare HBM (pol_ops.rebalance)
 * gives its optional rows back first: they count as free. On admission every
 * (request, group) stream is opened through the policy; on completion they
 * are closed and the reservations released. Requests are admitted in index
 * order, up to the workload's target concurrency at the time, and under open
 * loop not before they arrive. The active list keeps admission order. */
#ifndef DH_ADMIT_H
#define DH_ADMIT_H

#include <stdint.h>

#include "sim/ledger.h"
#include "sim/pol.h"
#include "sim/sim.h"
#include "sim/union.h"

typedef struct {
    int state;                        /* 0 waiting, 1 active, 2 done */
    uint32_t pos;                     /* decode positions done */
    double reserved[MEM_N_CATEGORIES]; /* what admission charged, by category */
    double host;                      /* its full KV in the host pool (host_to_device_ratio) */
    pol_stream *ps;                   /* [groups] */
    union_ahead *ahead;               /* [groups] speculative with a host tier: positions read
                                       * beyond the committed one */
} admit_req;

typedef struct {
    const sim_config *sc;
    const pol_ops *pol;
    pol_env env;
    sel_source *src;
    const trace_shape *sh;
    uint32_t G;
    mem_ledger hbm;
    double host_used;                 /* bytes of the host KV pool held (memplan.h; a host
                                       * tier with host_to_device_ratio > 0 only) */
    admit_req *req;                   /* [requests] */
    uint32_t *active, n_active;       /* request indices, in admission order */
    uint32_t next_req;                /* the next request to admit */
    uint32_t admitted, completed;
    double *arrival;                  /* [requests] open loop: arrival times */
    belady_work *bw;
    pol_stream **active_ps;           /* [requests] scratch: the active requests' streams */
} admit_state;

/* Charge the weights (and the draft's) and the workspace. 0 or -1. */
int admit_init(admit_state *a, const sim_config *sc, const pol_ops *pol, sel_source *src);
void admit_release(admit_state *a);
/* Admit requests up to the target concurrency at time now; a request
 * admitted at step `step` of `steps` can use at most steps - step positions.
 * 0 or -1 (a refused ledger charge or a bad stream). */
int admit_fill(admit_state *a, double now, uint32_t step, uint32_t steps);
/* The bytes request r would reserve for its indexer keys and policy rows
 * (the figure an idle GPU's refusal quotes). */
double admit_need(const admit_state *a, uint32_t r);
/* The rebalancing policy's budgets from spare HBM before a step, and its
 * optional bytes charged as the buffers hold them after one; both nothing for
 * a fixed budget. */
int admit_rebalance(admit_state *a);
int admit_settle(admit_state *a);
/* Request r ends: streams closed, reservations released. */
int admit_finish(admit_state *a, uint32_t r);

#endif
