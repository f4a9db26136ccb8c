/* belady.c: MIN replacement over one stream; see belady.h.
 *
 * Stale heap entries: a row enters the unselected set with key = the
 * position of its next use. It leaves that set either by eviction (popped) or
 * by being selected again exactly at position key, after which its entry
 * stays in the heap; so at position t an entry with key <= t is stale and
 * is skipped when popped. No decrease-key is needed. */
#include "sim/belady.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

#define NEVER 0xFFFFFFFFu

typedef struct { uint32_t key, row; } bel_ent;

struct belady_work {
    /* The stream's deltas, concatenated. */
    uint32_t *add, *rem;           /* rows */
    uint64_t n_add, cap_add, n_rem, cap_rem;
    uint64_t *add_off, *rem_off;   /* [npos + 1] */
    uint32_t *nrows;               /* [npos] */
    uint32_t *rem_key;             /* next use of each removed row */
    uint32_t *wr_key;              /* next use of each written row, by position's new rows */
    uint64_t *wr_off;
    uint64_t n_wr, cap_wr, cap_pos;
    uint32_t *next_use;            /* [rows] during the backward pass */
    uint8_t *resident;             /* [rows] during the forward pass */
    uint64_t cap_rows;
    bel_ent *heap;
    uint64_t n_heap, cap_heap;
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) abort();
    return p;
}

#define GROW(arr, cap, need) do { if ((need) > (cap)) { (cap) = (need) > 2 * (cap) ? (need) : 2 * (cap); \
        (arr) = xrealloc((arr), (cap) * sizeof *(arr)); } } while (0)

belady_work *belady_work_new(void)
{
    belady_work *w = calloc(1, sizeof *w);
    if (!w) abort();
    return w;
}

void belady_work_free(belady_work *w)
{
    if (!w) return;
    free(w->add); free(w->rem); free(w->add_off); free(w->rem_off); free(w->nrows);
    free(w->rem_key); free(w->wr_key); free(w->wr_off); free(w->next_use); free(w->resident);
    free(w->heap);
    free(w);
}

void belady_seq_release(belady_seq *s)
{
    free(s->n_sel); free(s->misses); free(s->written); free(s->evicted);
    memset(s, 0, sizeof *s);
}

/* Max-heap on (key, row): the furthest next use, then the larger row, first. */
static inline int ent_above(bel_ent a, bel_ent b) { return a.key > b.key || (a.key == b.key && a.row > b.row); }

static void heap_push(belady_work *w, uint32_t key, uint32_t row)
{
    GROW(w->heap, w->cap_heap, w->n_heap + 1);
    bel_ent e = { key, row };
    uint64_t i = w->n_heap++;
    while (i > 0) {
        uint64_t p = (i - 1) / 2;
        if (!ent_above(e, w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = e;
}

static bel_ent heap_pop(belady_work *w)
{
    bel_ent top = w->heap[0], last = w->heap[--w->n_heap];
    uint64_t i = 0, n = w->n_heap;
    for (;;) {
        uint64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ent_above(w->heap[c + 1], w->heap[c])) c++;
        if (!ent_above(w->heap[c], last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

int belady_run(belady_work *w, sel_stream *st, uint32_t npos, uint32_t budget, belady_seq *out)
{
    memset(out, 0, sizeof *out);
    w->n_add = w->n_rem = 0;
    GROW(w->add_off, w->cap_pos, (uint64_t)npos + 1);
    w->rem_off = xrealloc(w->rem_off, w->cap_pos * sizeof *w->rem_off);
    w->nrows = xrealloc(w->nrows, w->cap_pos * sizeof *w->nrows);
    w->wr_off = xrealloc(w->wr_off, w->cap_pos * sizeof *w->wr_off);
    uint32_t *n_sel_pos = malloc(((size_t)npos + 1) * sizeof *n_sel_pos);
    if (!n_sel_pos) abort();
    /* Read the stream. */
    uint32_t t = 0;
    for (; t < npos; t++) {
        sel_delta d;
        int rc = sel_next(st, &d);
        if (rc < 0) { free(n_sel_pos); return -1; }
        if (rc > 0) break;
        w->add_off[t] = w->n_add;
        w->rem_off[t] = w->n_rem;
        GROW(w->add, w->cap_add, w->n_add + d.n_added);
        GROW(w->rem, w->cap_rem, w->n_rem + d.n_removed);
        memcpy(w->add + w->n_add, d.added, d.n_added * sizeof *d.added);
        memcpy(w->rem + w->n_rem, d.removed, d.n_removed * sizeof *d.removed);
        w->n_add += d.n_added;
        w->n_rem += d.n_removed;
        w->nrows[t] = d.nrows;
        n_sel_pos[t] = d.n_sel;
        if (t > 0 && d.nrows < w->nrows[t - 1])
            { free(n_sel_pos); return dh_err("position %u: the context shrank", d.pos); }
    }
    uint32_t n = t;
    w->add_off[n] = w->n_add;
    w->rem_off[n] = w->n_rem;
    uint64_t rows = n ? w->nrows[n - 1] : 0;
    GROW(w->next_use, w->cap_rows, rows);
    w->resident = xrealloc(w->resident, w->cap_rows);
    w->rem_key = xrealloc(w->rem_key, w->n_rem * sizeof *w->rem_key);
    /* Written rows: positions t >= 1 whose context grew. */
    w->n_wr = 0;
    for (uint32_t p = 0; p < n; p++) {
        w->wr_off[p] = w->n_wr;
        if (p > 0) w->n_wr += w->nrows[p] - w->nrows[p - 1];
    }
    w->wr_off[n] = w->n_wr;
    w->wr_key = xrealloc(w->wr_key, w->n_wr * sizeof *w->wr_key);
    /* Backward pass: next use of every removed and written row. */
    for (uint64_t r = 0; r < rows; r++) w->next_use[r] = NEVER;
    for (uint32_t p = n; p-- > 0;) {
        for (uint64_t i = w->add_off[p]; i < w->add_off[p + 1]; i++) {
            if (w->add[i] >= rows) { free(n_sel_pos); return dh_err("position %u adds row %u beyond the context", p, w->add[i]); }
            w->next_use[w->add[i]] = p;
        }
        for (uint64_t i = w->rem_off[p]; i < w->rem_off[p + 1]; i++) {
            if (w->rem[i] >= rows) { free(n_sel_pos); return dh_err("position %u removes row %u beyond the context", p, w->rem[i]); }
            w->rem_key[i] = w->next_use[w->rem[i]];
        }
        if (p > 0)
            for (uint32_t r = w->nrows[p - 1], j = 0; r < w->nrows[p]; r++, j++)
                w->wr_key[w->wr_off[p] + j] = w->next_use[r];
    }
    /* Forward pass. */
    out->npos = n;
    out->n_sel = n_sel_pos;
    out->misses = malloc(((size_t)n + 1) * sizeof *out->misses);
    out->written = malloc(((size_t)n + 1) * sizeof *out->written);
    out->evicted = malloc(((size_t)n + 1) * sizeof *out->evicted);
    if (!out->misses || !out->written || !out->evicted) abort();
    memset(w->resident, 0, rows);
    w->n_heap = 0;
    uint64_t n_res = 0, n_sel = 0;
    for (uint32_t p = 0; p < n; p++) {
        for (uint64_t i = w->rem_off[p]; i < w->rem_off[p + 1]; i++) {
            if (!w->resident[w->rem[i]]) { belady_seq_release(out); return dh_err("position %u removes row %u, which is not selected", p, w->rem[i]); }
            heap_push(w, w->rem_key[i], w->rem[i]);
            n_sel--;
        }
        uint32_t written = 0;
        if (p > 0)
            for (uint32_t r = w->nrows[p - 1], j = 0; r < w->nrows[p]; r++, j++) {
                w->resident[r] = 1;
                n_res++;
                heap_push(w, w->wr_key[w->wr_off[p] + j], r);
                written++;
            }
        uint32_t miss = 0;
        for (uint64_t i = w->add_off[p]; i < w->add_off[p + 1]; i++) {
            uint32_t r = w->add[i];
            if (!w->resident[r]) { w->resident[r] = 1; n_res++; miss++; }
            n_sel++;
        }
        if (n_sel > budget) { belady_seq_release(out); return dh_err("position %u selects %llu rows, more than the budget of %u", p, (unsigned long long)n_sel, budget); }
        if (n_sel != n_sel_pos[p]) { belady_seq_release(out); return dh_err("position %u: deltas give %llu selected rows, the stream says %u", p, (unsigned long long)n_sel, n_sel_pos[p]); }
        uint32_t ev = 0;
        while (n_res > budget) {
            DH_BUG_ON(w->n_heap == 0);
            bel_ent e = heap_pop(w);
            if (e.key != NEVER && e.key <= p) continue; /* re-selected since: stale */
            w->resident[e.row] = 0;
            n_res--;
            ev++;
        }
        out->misses[p] = miss;
        out->written[p] = written;
        out->evicted[p] = ev;
    }
    return 0;
}
