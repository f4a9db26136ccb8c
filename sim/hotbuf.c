/* hotbuf.c: the LRU hot buffer of one (request, selection group); see hotbuf.h.
 *
 * row_state[row] holds HB_RES (resident), HB_SEL (selected) and the number
 * of the row's entries in the queue. The queue holds rows in the order they
 * left the selection (or were written). Entries of one row reach the head
 * oldest first, so when an entry is popped and the row has no other entry,
 * it is the row's newest: live iff the row is resident and unselected; any
 * other entry is stale (the row was selected again since). Counts stay below
 * HB_CNT_MAX because the queue is compacted (stale entries dropped) once it
 * is twice as long as the live entries, or when a count would overflow.
 * Every loop over a sorted delta or the queue prefetches the bytes a few rows
 * ahead: under the adaptive policy hundreds of buffers advance in lockstep
 * and their bytes are not in cache. */
#include "common/mem.h"
#include "sim/hotbuf.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

#define HB_CNT_SHIFT 2
#define HB_CNT_ONE (1u << HB_CNT_SHIFT)
#define HB_CNT_MAX 63u
#define HB_PREFETCH 32 /* rows ahead: enough to cover a DRAM access */

void hotbuf_init(hotbuf *h, uint32_t budget)
{
    memset(h, 0, sizeof *h);
    h->budget = budget;
}

void hotbuf_set_regions(hotbuf *h, double rows_per_region) { h->rows_per_region = rows_per_region > 0 ? rows_per_region : 0; }

void hotbuf_release(hotbuf *h)
{
    free(h->row_state); free(h->q); free(h->scratch);
    memset(h, 0, sizeof *h);
}

void hotbuf_clear(hotbuf *h)
{
    if (h->row_state) memset(h->row_state, 0, h->cap_rows);
    h->n_resident = h->n_sel = h->nrows_seen = 0;
    h->q_head = h->q_tail = 0;
}

/* Make row_state[] cover rows [0, n). */
static void rows_reserve(hotbuf *h, uint32_t n)
{
    if (n <= h->cap_rows) return;
    uint32_t cap = h->cap_rows ? h->cap_rows : 1024;
    while (cap < n) cap = cap > 0x7FFFFFFFu ? n : 2 * cap;
    h->row_state = dh_realloc(h->row_state, cap);
    memset(h->row_state + h->cap_rows, 0, cap - h->cap_rows);
    h->cap_rows = cap;
}

static inline uint32_t state_of(const hotbuf *h, uint32_t row) { return row < h->cap_rows ? h->row_state[row] : 0; }

/* Is the entry being popped for row the live one? Drops the entry's count. */
static inline int pop_entry(hotbuf *h, uint32_t row)
{
    uint8_t st = (uint8_t)(h->row_state[row] - HB_CNT_ONE);
    h->row_state[row] = st;
    return st == HB_RES; /* no newer entry, resident, unselected */
}

/* Keep only live entries. */
static void queue_compact(hotbuf *h)
{
    uint32_t n = 0;
    for (uint32_t i = h->q_head; i < h->q_tail; i++) {
        if (i + HB_PREFETCH < h->q_tail) __builtin_prefetch(&h->row_state[h->q[i + HB_PREFETCH]], 1);
        /* Live or stale is a coin toss for the branch predictor: no branch. */
        uint32_t row = h->q[i];
        h->q[n] = row;
        n += (uint32_t)pop_entry(h, row);
    }
    /* Counts are now 0 everywhere; the survivors have one entry each. */
    for (uint32_t i = 0; i < n; i++) h->row_state[h->q[i]] += HB_CNT_ONE;
    h->q_head = 0;
    h->q_tail = n;
}

/* Append row (unselected, resident) at the tail. */
static inline void queue_push(hotbuf *h, uint32_t row)
{
    if (__builtin_expect(h->q_tail == h->q_cap || (h->row_state[row] >> HB_CNT_SHIFT) == HB_CNT_MAX, 0)) {
        uint32_t live = h->n_resident - h->n_sel, len = h->q_tail - h->q_head;
        if (len > 2 * live + 1024 || (h->row_state[row] >> HB_CNT_SHIFT) == HB_CNT_MAX) {
            queue_compact(h);
        } else if (h->q_head >= h->q_cap / 2) {
            /* Drop the popped front. */
            if (len) memmove(h->q, h->q + h->q_head, (size_t)len * sizeof *h->q); /* q may be NULL when empty */
            h->q_head = 0;
            h->q_tail = len;
        }
        if (h->q_tail == h->q_cap) {
            h->q_cap = h->q_cap ? 2 * h->q_cap : 1024;
            h->q = dh_realloc(h->q, (size_t)h->q_cap * sizeof *h->q);
        }
    }
    h->row_state[row] += HB_CNT_ONE;
    h->q[h->q_tail++] = row;
}

/* Evict least recent unselected rows until at most target are resident. */
static uint32_t evict_down_to(hotbuf *h, uint32_t target)
{
    uint32_t ev = 0;
    while (h->n_resident > target && h->q_head < h->q_tail) {
        uint32_t i = h->q_head++;
        if (i + HB_PREFETCH < h->q_tail) __builtin_prefetch(&h->row_state[h->q[i + HB_PREFETCH]], 1);
        /* Live (no newer entry, resident, unselected) or stale (selected
         * again since): unpredictable, so no branch. */
        uint32_t row = h->q[i];
        uint8_t st = (uint8_t)(h->row_state[row] - HB_CNT_ONE);
        uint32_t live = st == HB_RES;
        h->row_state[row] = live ? 0 : st;
        h->n_resident -= live;
        ev += live;
    }
    return ev;
}

uint32_t hotbuf_set_budget(hotbuf *h, uint32_t budget)
{
    DH_BUG_ON(budget < h->n_sel);
    h->budget = budget;
    return evict_down_to(h, budget);
}

int hotbuf_step(hotbuf *h, const sel_delta *d, hotbuf_result *res)
{
    memset(res, 0, sizeof *res);
    if (d->nrows < h->nrows_seen)
        return dh_err("position %u: the context shrank from %u to %u rows", d->pos, h->nrows_seen, d->nrows);
    rows_reserve(h, d->nrows);
    /* 1. Rows leaving the selection become the most recent unselected rows. */
    for (uint32_t i = 0; i < d->n_removed; i++) {
        uint32_t row = d->removed[i];
        if (i + HB_PREFETCH < d->n_removed && d->removed[i + HB_PREFETCH] < h->cap_rows)
            __builtin_prefetch(&h->row_state[d->removed[i + HB_PREFETCH]], 1);
        if (!(state_of(h, row) & HB_SEL))
            return dh_err("selection at position %u removes row %u, which is not selected", d->pos, row);
        h->row_state[row] &= (uint8_t)~HB_SEL;
        h->n_sel--;
        queue_push(h, row);
    }
    /* 2. Rows produced on the GPU since the last position enter residency. */
    if (h->nrows_seen && d->nrows > h->nrows_seen) {
        for (uint32_t r = h->nrows_seen; r < d->nrows; r++) {
            if (h->row_state[r] & HB_RES)
                return dh_err("position %u: new row %u is already resident", d->pos, r);
            h->row_state[r] |= HB_RES;
            h->n_resident++;
            queue_push(h, r);
            res->written++;
        }
    }
    h->nrows_seen = d->nrows;
    /* 3. Hits leave the queue (their entries go stale); misses are collected for step 4. */
    if (d->n_added > h->cap_scratch) {
        h->cap_scratch = d->n_added;
        h->scratch = dh_realloc(h->scratch, h->cap_scratch * sizeof *h->scratch);
    }
    uint32_t n_miss = 0, hits = 0;
    for (uint32_t i = 0; i < d->n_added; i++) {
        uint32_t row = d->added[i];
        if (row >= d->nrows)
            return dh_err("selection at position %u adds row %u beyond the context (%u rows)", d->pos, row, d->nrows);
        if (i + HB_PREFETCH < d->n_added && d->added[i + HB_PREFETCH] < h->cap_rows)
            __builtin_prefetch(&h->row_state[d->added[i + HB_PREFETCH]], 1);
        uint32_t st = h->row_state[row];
        if (__builtin_expect(st & HB_SEL, 0))
            return dh_err("selection at position %u adds row %u, which is already selected", d->pos, row);
        /* Hit or miss is a coin toss for the branch predictor: no branch. */
        uint32_t hit = st & HB_RES;
        h->scratch[n_miss] = row;
        n_miss += hit ^ 1;
        h->row_state[row] = (uint8_t)(st | (hit << 1));
        hits += hit;
    }
    h->n_sel += hits;
    res->hits = hits;
    /* 4. Make room (only unselected rows are candidates), then insert the misses. */
    uint32_t n_sel_after = h->n_sel + n_miss;
    if (n_sel_after > h->budget)
        return dh_err("position %u selects %u rows, more than the hot-buffer budget of %u", d->pos, n_sel_after, h->budget);
    if (h->n_resident + n_miss > h->budget)
        res->evicted = evict_down_to(h, h->budget - n_miss);
    for (uint32_t i = 0; i < n_miss; i++) h->row_state[h->scratch[i]] |= HB_RES | HB_SEL;
    h->n_resident += n_miss;
    h->n_sel = n_sel_after;
    res->misses = n_miss;
    res->miss_regions = 0;
    if (h->rows_per_region > 0) {
        /* The misses are ascending: a region is entered once, where the index changes. */
        uint64_t last = UINT64_MAX;
        for (uint32_t i = 0; i < n_miss; i++) {
            uint64_t reg = (uint64_t)((double)h->scratch[i] / h->rows_per_region);
            res->miss_regions += reg != last;
            last = reg;
        }
    }
    if (h->n_sel != d->n_sel)
        return dh_err("position %u: deltas give %u selected rows, the stream says %u", d->pos, h->n_sel, d->n_sel);
    return 0;
}
