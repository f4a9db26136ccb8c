/* hb.c: the LRU hot buffer of one (request, selection group); see hb.h.
 *
 * where[row] is HB_OUT (not resident), HB_SEL (selected, so resident), or
 * HB_QBASE + a for an unselected resident row whose queue entry has absolute
 * index a. The queue holds rows in the order they left the selection (or were
 * written); an entry a is live iff where[q[a]] == HB_QBASE + a, so a hit only
 * rewrites its row's word and the dead entry is skipped at the head. Absolute
 * indices restart from 0 at each compaction, which also runs before they could
 * wrap. Every loop over a sorted delta prefetches the words a few rows ahead:
 * under the adaptive policy hundreds of buffers advance in lockstep and their
 * words are not in cache. */
#include "sim/hb.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

#define HB_OUT 0u
#define HB_SEL 1u
#define HB_QBASE 2u
#define HB_PREFETCH 32 /* rows ahead: enough to cover a DRAM access */
#define HB_INDEX_LIMIT 0xF0000000u /* compact before absolute indices come near wrapping */

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) abort();
    return p;
}

void hb_init(hb *h, uint32_t budget)
{
    memset(h, 0, sizeof *h);
    h->budget = budget;
}

void hb_release(hb *h)
{
    free(h->where); free(h->q); free(h->scratch);
    memset(h, 0, sizeof *h);
}

void hb_clear(hb *h)
{
    if (h->where) memset(h->where, 0, (size_t)h->cap_rows * sizeof *h->where);
    h->n_resident = h->n_sel = h->nrows_seen = 0;
    h->q_base = h->q_head = h->q_tail = 0;
}

/* Make where[] cover rows [0, n). */
static void rows_reserve(hb *h, uint32_t n)
{
    if (n <= h->cap_rows) return;
    uint32_t cap = h->cap_rows ? h->cap_rows : 1024;
    while (cap < n) cap = cap > 0x7FFFFFFFu ? n : 2 * cap;
    h->where = xrealloc(h->where, (size_t)cap * sizeof *h->where);
    memset(h->where + h->cap_rows, 0, (size_t)(cap - h->cap_rows) * sizeof *h->where);
    h->cap_rows = cap;
}

static inline uint32_t where_of(const hb *h, uint32_t row) { return row < h->cap_rows ? h->where[row] : HB_OUT; }

/* Keep only live entries, renumbered from 0. */
static void queue_compact(hb *h)
{
    uint32_t n = 0;
    for (uint32_t a = h->q_head; a < h->q_tail; a++) {
        if (a + HB_PREFETCH < h->q_tail) __builtin_prefetch(&h->where[h->q[a + HB_PREFETCH - h->q_base]], 1);
        uint32_t row = h->q[a - h->q_base];
        if (h->where[row] == HB_QBASE + a) {
            h->q[n] = row;
            h->where[row] = HB_QBASE + n;
            n++;
        }
    }
    h->q_base = h->q_head = 0;
    h->q_tail = n;
}

/* Append row (unselected, resident) at the tail. */
static inline void queue_push(hb *h, uint32_t row)
{
    if (__builtin_expect(h->q_tail - h->q_base == h->q_cap, 0)) {
        uint32_t live = h->n_resident - h->n_sel, len = h->q_tail - h->q_head;
        if (len > 2 * live + 1024 || h->q_tail >= HB_INDEX_LIMIT) {
            queue_compact(h);
        } else if (h->q_head - h->q_base >= h->q_cap / 2) {
            /* Drop the popped front. */
            memmove(h->q, h->q + (h->q_head - h->q_base), (size_t)len * sizeof *h->q);
            h->q_base = h->q_head;
        }
        if (h->q_tail - h->q_base == h->q_cap) {
            h->q_cap = h->q_cap ? 2 * h->q_cap : 1024;
            h->q = xrealloc(h->q, (size_t)h->q_cap * sizeof *h->q);
        }
    }
    h->where[row] = HB_QBASE + h->q_tail;
    h->q[h->q_tail - h->q_base] = row;
    h->q_tail++;
}

/* Evict least recent unselected rows until at most target are resident. */
static uint32_t evict_down_to(hb *h, uint32_t target)
{
    uint32_t ev = 0;
    while (h->n_resident > target && h->q_head < h->q_tail) {
        uint32_t a = h->q_head++;
        if (a + HB_PREFETCH < h->q_tail) __builtin_prefetch(&h->where[h->q[a + HB_PREFETCH - h->q_base]], 1);
        uint32_t row = h->q[a - h->q_base];
        if (h->where[row] != HB_QBASE + a) continue; /* dead: re-selected since */
        h->where[row] = HB_OUT;
        h->n_resident--;
        ev++;
    }
    return ev;
}

uint32_t hb_set_budget(hb *h, uint32_t budget)
{
    DH_BUG_ON(budget < h->n_sel);
    h->budget = budget;
    return evict_down_to(h, budget);
}

int hb_resident(const hb *h, uint32_t row) { return where_of(h, row) != HB_OUT; }

int hb_selected(const hb *h, uint32_t row) { return where_of(h, row) == HB_SEL; }

int hb_step(hb *h, const sel_delta *d, hb_result *res)
{
    memset(res, 0, sizeof *res);
    if (d->nrows < h->nrows_seen)
        return dh_err("position %u: the context shrank from %u to %u rows", d->pos, h->nrows_seen, d->nrows);
    rows_reserve(h, d->nrows);
    /* 1. Rows leaving the selection become the most recent unselected rows. */
    for (uint32_t i = 0; i < d->n_removed; i++) {
        uint32_t row = d->removed[i];
        if (i + HB_PREFETCH < d->n_removed && d->removed[i + HB_PREFETCH] < h->cap_rows)
            __builtin_prefetch(&h->where[d->removed[i + HB_PREFETCH]], 1);
        if (where_of(h, row) != HB_SEL)
            return dh_err("selection at position %u removes row %u, which is not selected", d->pos, row);
        h->n_sel--;
        queue_push(h, row);
    }
    /* 2. Rows produced on the GPU since the last position enter residency. */
    if (h->nrows_seen && d->nrows > h->nrows_seen) {
        for (uint32_t r = h->nrows_seen; r < d->nrows; r++) {
            if (h->where[r] != HB_OUT)
                return dh_err("position %u: new row %u is already resident", d->pos, r);
            h->n_resident++;
            queue_push(h, r);
            res->written++;
        }
    }
    h->nrows_seen = d->nrows;
    /* 3. Hits leave the queue (their entries die); misses are collected for step 4. */
    if (d->n_added > h->cap_scratch) {
        h->cap_scratch = d->n_added;
        h->scratch = xrealloc(h->scratch, h->cap_scratch * sizeof *h->scratch);
    }
    uint32_t n_miss = 0;
    for (uint32_t i = 0; i < d->n_added; i++) {
        uint32_t row = d->added[i];
        if (row >= d->nrows)
            return dh_err("selection at position %u adds row %u beyond the context (%u rows)", d->pos, row, d->nrows);
        if (i + HB_PREFETCH < d->n_added && d->added[i + HB_PREFETCH] < h->cap_rows)
            __builtin_prefetch(&h->where[d->added[i + HB_PREFETCH]], 1);
        uint32_t w = h->where[row];
        if (w == HB_OUT) { h->scratch[n_miss++] = row; continue; }
        if (w == HB_SEL)
            return dh_err("selection at position %u adds row %u, which is already selected", d->pos, row);
        h->where[row] = HB_SEL;
        h->n_sel++;
        res->hits++;
    }
    /* 4. Make room (only unselected rows are candidates), then insert the misses. */
    uint32_t n_sel_after = h->n_sel + n_miss;
    if (n_sel_after > h->budget)
        return dh_err("position %u selects %u rows, more than the hot-buffer budget of %u", d->pos, n_sel_after, h->budget);
    if (h->n_resident + n_miss > h->budget)
        res->evicted = evict_down_to(h, h->budget - n_miss);
    for (uint32_t i = 0; i < n_miss; i++) h->where[h->scratch[i]] = HB_SEL;
    h->n_resident += n_miss;
    h->n_sel = n_sel_after;
    res->misses = n_miss;
    if (h->n_sel != d->n_sel)
        return dh_err("position %u: deltas give %u selected rows, the stream says %u", d->pos, h->n_sel, d->n_sel);
    return 0;
}
