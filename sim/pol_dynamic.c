/* pol_dynamic.c: SGLang's dynamic HiSparse residency (sgl-project/sglang
 * #23935, #30266; python/sglang/srt/managers/hisparse_dynamic.py,
 * HiSparseDynamicMixin), as two policies over the stream of pol_sglang.h.
 *
 * sglang-dynamic. Every request starts resident: all its rows on the device,
 * each row that stops being the newest backed up to host
 * (_dynamic_backup_previous_token), nothing fetched. Its device footprint
 * beyond the hot buffer it would have in swap mode (kv_allocated_len less
 * _device_buffer_alloc_size(kv_allocated_len): reclaimable_resident_tokens)
 * is the ledger's optional category, held while HBM allows. When the pool
 * runs short -- before a step, for the rows the step adds, or at an
 * admission, for the new request's reservation --
 * demote_until_hisparse_available() demotes resident requests that hold more
 * than their buffer, LARGEST kv_allocated_len FIRST (a stable sort: ties in
 * admission order), and stops as soon as the need fits. A demoted request
 * keeps the hot buffer (alloc_device_buffer) and is stepped by the SGLang hot
 * buffer from that position on; it is never promoted back (none in the file
 * read). The reservation at admission is the hot buffer's (its padded buffer
 * at the final length), so a request is admitted when it fits in swap mode.
 *
 * sglang-watermark. The residency of a request is decided when it is
 * admitted, from the device KV pool's use with the request counted resident:
 * above the high watermark it is admitted to the hot buffer (the staging
 * path), and admissions stay in hot-buffer mode until the use falls below the
 * low watermark (a hysteresis: the high/low pair of #30266, 0.85 / 0.70 by
 * default; the exact rule of that PR was not read, this is the usual reading
 * of a watermark pair). Resident requests that outgrow the pool are demoted as
 * under sglang-dynamic, which the watermarks make rare.
 *
 * Units: SGLang counts tokens; a request is demoted whole (every group), and
 * the pool is compared in bytes (the groups' rows differ in size). The
 * assumed part: what a demoted request's buffer holds at the switch (SGLang's
 * alloc_device_buffer was not read): the staging layout, rows 0 .. B-1 in
 * slots 0 .. B-1, so its first swap step misses the rest of its selection.
 *
 * Cost: O(active x groups) per rebalance, plus a sort of the candidates when
 * a demotion is needed; a resident stream is stepped live, and the rest of its
 * horizon is computed at once when it enters hot-buffer mode (pol_sglang.c). */
#include "sim/pol_sglang.h"

#include "common/mem.h"

#include <stdlib.h>

/* Rows of (req, group) at position pos (the last position when past the end). */
static double rows_at(const pol_stream *ps, uint32_t pos)
{
    const sgl_stream *s = ps->priv;
    uint32_t n = s->sh->output_len[ps->req];
    return sel_rows_at(s->sh, ps->req, ps->group, pos < n ? pos : n - 1);
}

/* The bytes request req (its groups' streams) holds beyond its hot buffer while resident, at
 * its next position (next) or at the last one stepped; 0 once demoted or about to be. */
static double extra_bytes(const pol_env *e, const pol_stream *req, int next)
{
    const model_cfg *m = e->model;
    double b = 0;
    for (uint32_t g = 0; g < m->n_groups; g++) {
        const pol_stream *ps = &req[g];
        const sgl_stream *s = ps->priv;
        if (s->hot || s->demote) return 0;
        uint32_t pos = next ? ps->pos : (ps->pos ? ps->pos - 1 : 0);
        double rows = rows_at(ps, pos), slots = sgl_slots(e, g, rows);
        if (rows > slots) b += (rows - slots) * m->group[g].kv_bytes_per_row;
    }
    return b;
}

static void reserve(const pol_env *e, uint32_t g, double rows, double *prot, double *opt)
{
    (void)opt;
    *prot += e->model->group[g].kv_bytes_per_row * sgl_slots(e, g, rows);
}

static double budget(const pol_env *e, uint32_t g)
{
    (void)g;
    return e->sgl.device_buffer_size;
}

typedef struct {
    double tokens;   /* kv_allocated_len */
    double bytes;    /* reclaimable */
    uint32_t i;      /* active index */
} candidate;

static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->tokens != y->tokens) return x->tokens < y->tokens ? 1 : -1; /* largest first */
    return (x->i > y->i) - (x->i < y->i);                              /* then admission order */
}

/* spare_bytes is what the resident requests' extra rows may take at the next
 * position; demote largest first until they fit. */
static int rebalance(pol_env *e, double spare_bytes, uint32_t n_req, pol_stream *const *ps, uint32_t n)
{
    double held = 0;
    uint32_t n_cand = 0;
    candidate *c = NULL;
    for (uint32_t i = 0; i < n; i++) held += extra_bytes(e, ps[i], 1);
    if (held > spare_bytes) {
        c = dh_calloc(n ? n : 1, sizeof *c);
        for (uint32_t i = 0; i < n; i++) {
            double b = extra_bytes(e, ps[i], 1);
            if (b <= 0) continue;
            const sgl_stream *s = ps[i][0].priv;
            c[n_cand++] = (candidate){ (double)s->sh->prompt_len[ps[i][0].req] + ps[i][0].pos, b, i };
        }
        qsort(c, n_cand, sizeof *c, cmp_candidate);
        for (uint32_t j = 0; j < n_cand && held > spare_bytes; j++) {
            for (uint32_t g = 0; g < e->model->n_groups; g++) ((sgl_stream *)ps[c[j].i][g].priv)->demote = 1;
            held -= c[j].bytes;
            e->sgl_demotions++;
        }
        free(c);
    }
    /* At an admission (n_req > n): the pool's use before the new request,
     * residents' rows included, for the watermark rule at its open. */
    if (n_req > n) e->sgl_used = e->sgl.pool_bytes - spare_bytes + (held > 0 ? held : 0);
    return 0;
}

static double optional_bytes(const pol_env *e, pol_stream *const *ps, uint32_t n)
{
    double b = 0;
    for (uint32_t i = 0; i < n; i++) b += extra_bytes(e, ps[i], 0);
    return b;
}

static int open_dynamic(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    return sgl_stream_open(e, ps, a, SGL_OPEN_RESIDENT);
}

/* The watermark rule, once per request (at its group 0; the others follow). */
static int open_watermark(const pol_env *e_const, pol_stream *ps, const pol_open_args *a)
{
    pol_env *e = (pol_env *)e_const; /* the admission mode is the policy's state */
    if (a->group == 0) {
        const model_cfg *m = e->model;
        double extra = 0;
        for (uint32_t g = 0; g < m->n_groups; g++) {
            double rows = sel_rows_at(a->sh, a->req, g, 0), slots = sgl_slots(e, g, rows);
            if (rows > slots) extra += (rows - slots) * m->group[g].kv_bytes_per_row;
        }
        double use = e->sgl.pool_bytes > 0 ? (e->sgl_used + extra) / e->sgl.pool_bytes : 1;
        if (e->sgl_admit_hot && use < e->sgl.low_watermark) e->sgl_admit_hot = 0;
        else if (!e->sgl_admit_hot && use > e->sgl.high_watermark) e->sgl_admit_hot = 1;
    }
    pol_sglang_cfg keep = e->sgl;
    e->sgl.cold = SGLHB_COLD_STAGING; /* admitted to the hot buffer through the staging path */
    int rc = e->sgl_admit_hot ? sgl_stream_open_ahead(e, ps, a) : sgl_stream_open(e, ps, a, SGL_OPEN_RESIDENT);
    e->sgl = keep;
    return rc;
}

static const char no_spec[] =
    "SGLang's swap-in takes one position per call at the commit read; its multi-step kernel (sgl-project/sglang#32162) is not modelled";

const pol_ops pol_sglang_dynamic_ops = {
    .name = "sglang-dynamic",
    .host_tier = 1,
    .demotes = 1,
    .fetch_main = 1,
    .what = "SGLang's dynamic residency: resident with a host backup, demoted to the hot buffer largest first when short",
    .no_spec = no_spec,
    .reserve = reserve,
    .budget = budget,
    .rebalance = rebalance,
    .optional_bytes = optional_bytes,
    .open = open_dynamic,
    .next = sgl_stream_step,
    .close = sgl_stream_close,
};

const pol_ops pol_sglang_watermark_ops = {
    .name = "sglang-watermark",
    .host_tier = 1,
    .demotes = 1,
    .fetch_main = 1,
    .what = "SGLang's residency decided at admission by the pool's high/low watermarks, demotion when still short",
    .no_spec = no_spec,
    .reserve = reserve,
    .budget = budget,
    .rebalance = rebalance,
    .optional_bytes = optional_bytes,
    .open = open_watermark,
    .next = sgl_stream_step,
    .close = sgl_stream_close,
};
