/* pol.c: the policy registry, the policies' environment and the four ways
 * of following a stream; see pol.h. The policies themselves are in
 * pol_<name>.c. */
#include "sim/pol.h"
#include "common/cores.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the registry ------------------------------------------------------ */

/* The built-in policies in pol_kind order, then the registered ones. */
static const pol_ops *registry[POL_MAX] = { &pol_resident_ops, &pol_hisparse_ops, &pol_adaptive_ops, &pol_oracle_ops,
                                           &pol_sglang_hisparse_ops, &pol_sglang_dynamic_ops, &pol_sglang_watermark_ops };
static int n_registered = POL_N;

const pol_ops *pol_ops_of(pol_kind kind)
{
    return (int)kind >= 0 && (int)kind < n_registered ? registry[kind] : NULL;
}

const char *pol_name_of(pol_kind kind)
{
    const pol_ops *o = pol_ops_of(kind);
    return o ? o->name : "?";
}

int pol_parse(const char *name, pol_kind *out)
{
    /* The idealised LRU's name for what it is; "hisparse" stays its printed name. */
    if (!strcmp(name, "ideal-lru")) name = "hisparse";
    for (int i = 0; i < n_registered; i++)
        if (!strcmp(name, registry[i]->name)) { *out = (pol_kind)i; return 0; }
    return dh_err("unknown policy '%s' (expected resident, hisparse (ideal-lru), adaptive, oracle, sglang-hisparse, sglang-dynamic or sglang-watermark)", name);
}

int pol_reads_knob(pol_kind kind, const char *key)
{
    const pol_ops *o = pol_ops_of(kind);
    if (!o || !o->knobs) return 1;
    size_t n = strlen(key);
    for (const char *w = o->knobs; *w;) {
        size_t len = strcspn(w, " ");
        if (len == n && !strncmp(w, key, n)) return 1;
        w += len;
        w += strspn(w, " ");
    }
    return 0;
}

int pol_register(const pol_ops *ops, pol_kind *kind)
{
    for (int i = 0; i < n_registered; i++)
        if (!strcmp(ops->name, registry[i]->name)) return dh_err("policy '%s' is already registered", ops->name);
    if (n_registered == POL_MAX) return dh_err("policy '%s': the registry holds %d policies at most", ops->name, POL_MAX);
    if (!ops->reserve || !ops->budget || !ops->open || !ops->next || !ops->close || (ops->rebalance && !ops->optional_bytes))
        return dh_err("policy '%s': reserve, budget, open, next and close are required (optional_bytes with rebalance)", ops->name);
    registry[n_registered] = ops;
    *kind = (pol_kind)n_registered++;
    return 0;
}

/* ---- the environment --------------------------------------------------- */

void pol_env_init(pol_env *e, const model_cfg *m, double budget_k, double max_optional_k)
{
    memset(e, 0, sizeof *e);
    e->model = m;
    e->budget_k = budget_k;
    e->max_optional_k = max_optional_k;
    e->budget = dh_calloc(m->n_groups ? m->n_groups : 1, sizeof *e->budget);
    for (uint32_t g = 0; g < m->n_groups; g++) e->budget[g] = (uint32_t)ceil(budget_k * m->group[g].k);
}

void pol_env_release(pol_env *e)
{
    free(e->budget);
    memset(e, 0, sizeof *e);
}

void pol_reserve_fixed(const pol_env *e, uint32_t g, double rows, double *prot, double *opt)
{
    const model_group *mg = &e->model->group[g];
    *prot += mg->kv_bytes_per_row * mg->k;
    *opt += mg->kv_bytes_per_row * (double)(e->budget[g] - mg->k);
}

double pol_budget_fixed(const pol_env *e, uint32_t g) { return e->budget[g]; }

/* ---- streams ----------------------------------------------------------- */

static int stream_open(pol_stream *ps, pol_mode mode, sel_source *src, const trace_shape *sh,
                       uint32_t req, uint32_t group, uint32_t budget, uint32_t npos, belady_work *w,
                       double rows_per_region)
{
    ps->mode = mode;
    ps->req = req;
    ps->group = group;
    ps->k = sh->group_k[group];
    ps->compress = sh->group_compress[group];
    ps->prompt_len = sh->prompt_len[req];
    if (mode == POL_COUNT) return 0;
    if (sel_open(src, req, group, &ps->st) < 0)
        return dh_err_prefix("request %u, group %u: ", req, group);
    if (mode == POL_AHEAD_MIN) {
        int rc = belady_run(w, ps->st, npos, budget, &ps->seq);
        sel_close(ps->st);
        ps->st = NULL;
        if (rc < 0) return dh_err_prefix("request %u, group %u: ", req, group);
        return 0;
    }
    hotbuf_init(&ps->buf, budget);
    hotbuf_set_regions(&ps->buf, rows_per_region);
    if (mode == POL_AHEAD_LRU) {
        /* A fixed budget makes the miss sequence a pure function of the
         * stream: compute the whole horizon now, while this stream's state
         * is hot in cache, instead of one position per step across hundreds
         * of interleaved streams (several times faster). */
        belady_seq *q = &ps->seq;
        q->n_sel = dh_calloc((size_t)npos + 1, sizeof *q->n_sel);
        q->misses = dh_calloc((size_t)npos + 1, sizeof *q->misses);
        q->written = dh_calloc((size_t)npos + 1, sizeof *q->written);
        q->evicted = dh_calloc((size_t)npos + 1, sizeof *q->evicted);
        q->miss_regions = rows_per_region > 0 ? dh_calloc((size_t)npos + 1, sizeof *q->miss_regions) : NULL;
        for (uint32_t p = 0; p < npos; p++) {
            sel_delta d;
            int rc = sel_next(ps->st, &d);
            if (rc < 0) return dh_err_prefix("request %u, group %u: ", req, group);
            if (rc > 0) break;
            hotbuf_result r;
            if (d.pos != p) return dh_err("request %u, group %u: position %u arrives as %u", req, group, p, d.pos);
            if (hotbuf_step(&ps->buf, &d, &r) < 0) return dh_err_prefix("request %u, group %u: ", req, group);
            q->n_sel[p] = d.n_sel;
            q->misses[p] = r.misses;
            q->written[p] = r.written;
            q->evicted[p] = r.evicted;
            if (q->miss_regions) q->miss_regions[p] = r.miss_regions;
            q->npos = p + 1;
        }
        sel_close(ps->st);
        ps->st = NULL;
        hotbuf_release(&ps->buf);
    }
    return 0;
}

/* A stream that fails while it is opened (a corrupt trace found at admission) is closed here,
 * whatever it held by then, so no caller has to know how far the open got. */
int pol_stream_open(pol_stream *ps, pol_mode mode, sel_source *src, const trace_shape *sh,
                    uint32_t req, uint32_t group, uint32_t budget, uint32_t npos, belady_work *w,
                    double rows_per_region)
{
    memset(ps, 0, sizeof *ps);
    if (stream_open(ps, mode, src, sh, req, group, budget, npos, w, rows_per_region) == 0) return 0;
    pol_stream_close(ps);
    return -1;
}

/* Refill ps->ahead with up to POL_READ_AHEAD positions from pos on (fewer
 * at the end of the stream; none if it has ended). */
static int read_ahead(pol_stream *ps, const trace_shape *sh, uint32_t pos)
{
    pol_ahead *a = &ps->ahead;
    uint32_t left = sh->output_len[ps->req] > pos ? sh->output_len[ps->req] - pos : 0;
    uint32_t want = left < POL_READ_AHEAD ? left : POL_READ_AHEAD;
    size_t used = 0, off[2 * POL_READ_AHEAD];
    a->n = a->next = 0;
    if (want == 0) want = 1; /* let the stream say whether it has ended */
    for (uint32_t i = 0; i < want; i++) {
        sel_delta d;
        int rc = sel_next(ps->st, &d);
        if (rc < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
        if (rc > 0) break;
        size_t need = used + d.n_added + d.n_removed;
        if (need > a->cap) {
            a->cap = need > 2 * a->cap ? need : 2 * a->cap;
            a->rows = dh_reallocarray(a->rows, a->cap, sizeof *a->rows);
        }
        memcpy(a->rows + used, d.added, d.n_added * sizeof *d.added);
        off[2 * i] = used;
        used += d.n_added;
        memcpy(a->rows + used, d.removed, d.n_removed * sizeof *d.removed);
        off[2 * i + 1] = used;
        used += d.n_removed;
        d.full = NULL;
        a->d[a->n++] = d;
    }
    /* The buffer may have moved while it grew: point into it only now. */
    for (uint32_t i = 0; i < a->n; i++) {
        a->d[i].added = a->rows + off[2 * i];
        a->d[i].removed = a->rows + off[2 * i + 1];
    }
    return 0;
}

int pol_stream_next(pol_stream *ps, const trace_shape *sh, pol_out *o)
{
    memset(o, 0, sizeof *o);
    uint32_t pos = ps->pos++;
    o->nrows = sel_rows_at(sh, ps->req, ps->group, pos);
    switch (ps->mode) {
    case POL_COUNT:
        o->n_sel = o->nrows < ps->k ? o->nrows : ps->k;
        o->hits = o->n_sel;
        return 0;
    case POL_AHEAD_MIN:
    case POL_AHEAD_LRU:
        if (pos >= ps->seq.npos)
            return dh_err("request %u, group %u: the stream ends at position %u", ps->req, ps->group, ps->seq.npos);
        o->n_sel = ps->seq.n_sel[pos];
        o->misses = ps->seq.misses[pos];
        o->written = ps->seq.written[pos];
        o->evicted = ps->seq.evicted[pos];
        o->miss_regions = ps->seq.miss_regions ? ps->seq.miss_regions[pos] : 0;
        o->hits = o->n_sel - o->misses;
        return 0;
    case POL_LIVE_LRU:
    default: {
        pol_ahead *a = &ps->ahead;
        if (a->next == a->n && read_ahead(ps, sh, pos) < 0) return -1;
        if (a->next == a->n) return dh_err("request %u, group %u: the stream ends at position %u", ps->req, ps->group, pos);
        sel_delta d = a->d[a->next++];
        if (d.pos != pos || d.nrows != o->nrows)
            return dh_err("request %u, group %u: position %u has %u rows, the shape implies position %u with %u rows",
                          ps->req, ps->group, d.pos, d.nrows, pos, o->nrows);
        hotbuf_result r;
        if (hotbuf_step(&ps->buf, &d, &r) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
        o->n_sel = d.n_sel;
        o->hits = d.n_sel - r.misses; /* rows that stayed selected are hits too */
        o->misses = r.misses;
        o->written = r.written;
        o->evicted = r.evicted;
        o->miss_regions = r.miss_regions;
        o->resident = ps->buf.n_resident;
        return 0;
    }
    }
}

void pol_stream_close(pol_stream *ps)
{
    if (ps->st) sel_close(ps->st);
    free(ps->ahead.rows);
    if (ps->mode == POL_LIVE_LRU || ps->mode == POL_AHEAD_LRU) hotbuf_release(&ps->buf); /* safe when already released */
    belady_seq_release(&ps->seq);
    memset(ps, 0, sizeof *ps);
}

/* ---- opening a request's streams ---------------------------------------- */

typedef struct {
    const pol_ops *pol;
    const pol_env *e;
    pol_stream *ps;
    uint32_t G;
    const pol_open_args *base;
    const double *rows_per_region;
    uint32_t next;            /* the next group to open (atomic) */
    int *opened;              /* [G] 1: ps[g] is open */
    pthread_mutex_t mu;       /* guards failed and err */
    uint32_t failed;          /* the lowest group that failed (G: none) */
    char err[1024];           /* its message */
} open_job;

/* Open groups taken in turn until none is left; a group above one that failed is not opened
 * (its error would not be reported). */
static void open_some(open_job *j, belady_work *bw)
{
    for (;;) {
        const uint32_t g = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (g >= j->G || g > __atomic_load_n(&j->failed, __ATOMIC_RELAXED)) return;
        pol_open_args oa = *j->base;
        oa.group = g;
        oa.rows_per_region = j->rows_per_region[g];
        oa.bw = bw;
        if (j->pol->open(j->e, &j->ps[g], &oa) == 0) {
            j->opened[g] = 1;
            continue;
        }
        pthread_mutex_lock(&j->mu);
        if (g < j->failed) {
            snprintf(j->err, sizeof j->err, "%s", dh_errmsg());
            __atomic_store_n(&j->failed, g, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&j->mu);
    }
}

static void *open_worker(void *arg)
{
    open_job *j = arg;
    belady_work *bw = belady_work_new();
    open_some(j, bw);
    belady_work_free(bw);
    return NULL;
}

int pol_open_groups(const pol_ops *pol, const pol_env *e, pol_stream *ps, uint32_t G, const pol_open_args *base,
                    const double *rows_per_region)
{
    enum { MAX_HELPERS = 15 };
    const int extra = pol->open_parallel && G > 1 ? cores_borrow(G - 1 < MAX_HELPERS ? (int)G - 1 : MAX_HELPERS) : 0;
    open_job j = {.pol = pol, .e = e, .ps = ps, .G = G, .base = base, .rows_per_region = rows_per_region, .failed = G};
    j.opened = dh_calloc(G ? G : 1, sizeof *j.opened);
    pthread_mutex_init(&j.mu, NULL);
    pthread_t th[MAX_HELPERS];
    int started = 0;
    for (int i = 0; i < extra; i++)
        if (pthread_create(&th[started], NULL, open_worker, &j) == 0) started++;
    cores_give_back(extra - started);
    open_some(&j, base->bw); /* the caller's thread, with the run's MIN scratch */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    cores_give_back(started);
    pthread_mutex_destroy(&j.mu);
    const int failed = j.failed < G;
    if (failed) {
        for (uint32_t g = 0; g < G; g++)
            if (j.opened[g]) pol->close(&ps[g]);
        dh_err("%s", j.err);
    }
    free(j.opened);
    return failed ? -1 : 0;
}
