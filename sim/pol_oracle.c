/* pol_oracle.c: Belady's MIN at the hisparse budget B (belady.h), computed
 * ahead from the whole stream when it opens: the lower bound on misses of
 * any replacement at that budget. */
#include "sim/pol.h"

static int open_stream(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    return pol_stream_open(ps, POL_AHEAD_MIN, a->src, a->sh, a->req, a->group, e->budget[a->group], a->horizon,
                           a->bw, a->rows_per_region);
}

const pol_ops pol_oracle_ops = {
    .name = "oracle",
    .host_tier = 1,
    .knobs = "hisparse_budget_k host_to_device_ratio",
    .no_spec = "Belady over verification unions is not modelled",
    .reserve = pol_reserve_fixed,
    .budget = pol_budget_fixed,
    .open_parallel = 1,
    .open = open_stream,
    .next = pol_stream_next,
    .close = pol_stream_close,
};
