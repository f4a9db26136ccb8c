/* pol_adaptive.c: the LRU hot buffer with a budget of k + E rows per
 * (request, group), where E, the optional rows, spreads the HBM nothing else
 * uses evenly over the active requests (and those about to be admitted), at
 * most max_optional_k x k. The ledger reserves only the protected k rows at
 * admission; the optional ones are charged as the buffers actually hold them,
 * and admission may take them back (shrinking a budget evicts LRU-first). */
#include "sim/pol.h"

#include <math.h>

static void reserve(const pol_env *e, uint32_t g, double rows, double *prot, double *opt)
{
    (void)opt;
    *prot += e->model->group[g].kv_bytes_per_row * e->model->group[g].k;
}

/* The cap on optional rows of group g (4e9: none). */
static double cap_of(const pol_env *e, uint32_t g)
{
    return e->max_optional_k > 0 ? floor(e->max_optional_k * e->model->group[g].k) : 4e9;
}

static double budget(const pol_env *e, uint32_t g)
{
    double cap = cap_of(e, g);
    double opt = e->optional_rows < cap ? e->optional_rows : cap;
    return e->model->group[g].k + opt;
}

static int rebalance(pol_env *e, double spare_bytes, uint32_t n_req, pol_stream *const *ps, uint32_t n)
{
    const model_cfg *m = e->model;
    double per_req = 0;
    for (uint32_t g = 0; g < m->n_groups; g++) per_req += m->group[g].kv_bytes_per_row;
    double denom = per_req * n_req;
    double opt = denom > 0 && spare_bytes > 0 ? floor(spare_bytes / denom) : 0;
    if (opt > 4e9) opt = 4e9;
    e->optional_rows = (uint32_t)opt;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t g = 0; g < m->n_groups; g++) {
            double cap = cap_of(e, g);
            double b = m->group[g].k + (opt < cap ? opt : cap);
            hotbuf_set_budget(&ps[i][g].buf, b > 4e9 ? 4000000000u : (uint32_t)b);
        }
    return 0;
}

static double optional_bytes(const pol_env *e, pol_stream *const *ps, uint32_t n)
{
    const model_cfg *m = e->model;
    double b = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t g = 0; g < m->n_groups; g++) {
            uint32_t res = ps[i][g].buf.n_resident, k = m->group[g].k;
            if (res > k) b += (double)(res - k) * m->group[g].kv_bytes_per_row;
        }
    return b;
}

/* The stream opens at k + E, uncapped: rebalance, which runs before every
 * step, sets the capped budget before its first position. */
static int open_stream(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    return pol_stream_open(ps, POL_LIVE_LRU, a->src, a->sh, a->req, a->group,
                           e->model->group[a->group].k + e->optional_rows, a->horizon, a->bw, a->rows_per_region);
}

const pol_ops pol_adaptive_ops = {
    .name = "adaptive",
    .host_tier = 1,
    .knobs = "adaptive_max_optional_k host_to_device_ratio",
    .reserve = reserve,
    .budget = budget,
    .rebalance = rebalance,
    .optional_bytes = optional_bytes,
    .open = open_stream,
    .next = pol_stream_next,
    .close = pol_stream_close,
};
