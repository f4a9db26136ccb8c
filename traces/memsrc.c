/* memsrc.c: selections held in memory, delivered as deltas; see memsrc.h. */
#include "common/mem.h"
#include "traces/memsrc.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t n;
    uint32_t *rows;
} memsrc_sel;

typedef struct {
    memsrc_sel **streams; /* [n_requests * n_groups][output_len[r]] */
} memsrc;

typedef struct {
    sel_stream_head head;
    const memsrc_sel *sels;
    uint32_t n_pos, pos, keyframe_interval;
    const trace_shape *shape;
    uint32_t req, group;
    uint32_t *added, *removed;
    size_t cap;
} memsrc_stream;

static int memsrc_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out)
{
    const trace_shape *sh = &src->meta.shape;
    if (req >= sh->n_requests || group >= sh->n_groups)
        return dh_err("memory source: no stream for request %u, group %u", req, group);
    memsrc *m = src->impl;
    memsrc_stream *s = dh_calloc(1, sizeof *s);
    s->head.ops = src->ops;
    s->sels = m->streams[(size_t)req * sh->n_groups + group];
    s->n_pos = sh->output_len[req];
    s->keyframe_interval = src->meta.keyframe_interval;
    s->shape = sh;
    s->req = req;
    s->group = group;
    *out = (sel_stream *)s;
    return 0;
}

static int memsrc_next(sel_stream *st, sel_delta *d)
{
    memsrc_stream *s = (memsrc_stream *)st;
    if (s->pos >= s->n_pos) return 1;
    static const memsrc_sel empty = { 0, NULL };
    const memsrc_sel *cur = &s->sels[s->pos];
    const memsrc_sel *prev = s->pos ? &s->sels[s->pos - 1] : &empty;
    size_t need = (size_t)cur->n + prev->n;
    if (need > s->cap) {
        free(s->added);
        free(s->removed);
        s->cap = need;
        s->added = dh_calloc(need, sizeof *s->added);
        s->removed = dh_calloc(need, sizeof *s->removed);
    }
    /* A merge of two sorted lists: O(k) per position, which is fine for the
     * small hand-built workloads this source exists for. */
    uint32_t i = 0, j = 0, na = 0, nr = 0;
    while (i < cur->n || j < prev->n) {
        if (j == prev->n || (i < cur->n && cur->rows[i] < prev->rows[j])) s->added[na++] = cur->rows[i++];
        else if (i == cur->n || prev->rows[j] < cur->rows[i]) s->removed[nr++] = prev->rows[j++];
        else { i++; j++; }
    }
    memset(d, 0, sizeof *d);
    d->pos = s->pos;
    d->nrows = sel_rows_at(s->shape, s->req, s->group, s->pos);
    d->n_sel = cur->n;
    d->keyframe = s->pos % s->keyframe_interval == 0;
    d->n_added = na;
    d->n_removed = nr;
    d->added = s->added;
    d->removed = s->removed;
    d->full = d->keyframe ? (cur->rows ? cur->rows : s->added) : NULL;
    s->pos++;
    return 0;
}

static void memsrc_close(sel_stream *st)
{
    memsrc_stream *s = (memsrc_stream *)st;
    if (!s) return;
    free(s->added);
    free(s->removed);
    free(s);
}

static void memsrc_free(sel_source *src)
{
    memsrc *m = src->impl;
    const trace_shape *sh = &src->meta.shape;
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) {
            memsrc_sel *sels = m->streams[(size_t)r * sh->n_groups + g];
            for (uint32_t p = 0; p < sh->output_len[r]; p++) free(sels[p].rows);
            free(sels);
        }
    free(m->streams);
    free(m);
    trace_meta_release(&src->meta);
    free(src);
}

static const sel_source_ops memsrc_ops = { memsrc_open, memsrc_next, memsrc_close, memsrc_free };

int memsrc_new(const trace_shape *sh, uint32_t keyframe_interval, uint64_t seed, sel_source **out)
{
    if (trace_shape_validate(sh) < 0) return -1;
    if (keyframe_interval == 0) return dh_err("memory source: keyframe interval must be at least 1");
    sel_source *src = dh_calloc(1, sizeof *src);
    memsrc *m = dh_calloc(1, sizeof *m);
    src->ops = &memsrc_ops;
    src->impl = m;
    src->meta.format_version = TRACE_FORMAT_VERSION;
    trace_shape_copy(&src->meta.shape, sh);
    src->meta.keyframe_interval = keyframe_interval;
    src->meta.seed = seed;
    strcpy(src->meta.generator, "memsrc");
    m->streams = dh_calloc((size_t)sh->n_requests * sh->n_groups, sizeof *m->streams);
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++)
            m->streams[(size_t)r * sh->n_groups + g] = dh_calloc(sh->output_len[r], sizeof(memsrc_sel));
    *out = src;
    return 0;
}

void memsrc_put(sel_source *src, uint32_t req, uint32_t group, uint32_t pos, const uint32_t *rows, uint32_t n)
{
    const trace_shape *sh = &src->meta.shape;
    DH_BUG_ON(src->ops != &memsrc_ops);
    DH_BUG_ON(req >= sh->n_requests || group >= sh->n_groups || pos >= sh->output_len[req]);
    memsrc_sel *sel = &((memsrc *)src->impl)->streams[(size_t)req * sh->n_groups + group][pos];
    free(sel->rows);
    sel->rows = dh_calloc(n, sizeof *sel->rows);
    if (n) memcpy(sel->rows, rows, (size_t)n * sizeof *rows);
    sel->n = n;
}
