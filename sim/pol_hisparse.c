/* pol_hisparse.c: an idealised LRU hot buffer with the fetch overlapped (the CLI
 * also takes the name ideal-lru; sglang-hisparse, pol_sglang.c, is HiSparse as SGLang
 * ships it): one fixed budget B = ceil(budget_k x k)
 * rows per (request, group), the host holding every row. The fixed budget
 * makes the miss sequence a pure function of the stream, so it is computed
 * for the request's horizon when the stream opens (pol.h); speculative
 * verification needs the live buffer instead, whose budget then never moves. */
#include "sim/pol.h"

static int open_stream(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    return pol_stream_open(ps, a->live ? POL_LIVE_LRU : POL_AHEAD_LRU, a->src, a->sh, a->req, a->group,
                           e->budget[a->group], a->horizon, a->bw, a->rows_per_region);
}

const pol_ops pol_hisparse_ops = {
    .name = "hisparse",
    .host_tier = 1,
    .knobs = "hisparse_budget_k host_to_device_ratio",
    .what = "an idealised LRU hot buffer (a produced row resident at once), the fetch overlapped with compute",
    .reserve = pol_reserve_fixed,
    .budget = pol_budget_fixed,
    .open_parallel = 1,
    .open = open_stream,
    .next = pol_stream_next,
    .close = pol_stream_close,
};
