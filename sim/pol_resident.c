/* pol_resident.c: every row of every request on the GPU, no host tier.
 * Nothing is fetched or written through, so the streams are not even read:
 * a position selects min(k, rows) rows, all hits. The ledger holds every row
 * of the request's final context, which is what bounds its concurrency. */
#include "sim/pol.h"

static void reserve(const pol_env *e, uint32_t g, double rows, double *prot, double *opt)
{
    (void)opt;
    *prot += e->model->group[g].kv_bytes_per_row * rows;
}

/* No hot buffer: nothing to budget. */
static double budget(const pol_env *e, uint32_t g) { return 0; }

static int open_stream(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    return pol_stream_open(ps, POL_COUNT, a->src, a->sh, a->req, a->group, 0, 0, NULL, 0);
}

const pol_ops pol_resident_ops = {
    .name = "resident",
    .host_tier = 0,
    .knobs = "",
    .reserve = reserve,
    .budget = budget,
    .open = open_stream,
    .next = pol_stream_next,
    .close = pol_stream_close,
};
