/* sglhb.c: the SGLang hot buffer of one (request, selection group); see sglhb.h.
 *
 * The slots mirror the kernel's arrays: slot_row[] is device_buffer_tokens
 * (SGLHB_EMPTY for its -1), lru[] is lru_slots. Where the kernel finds a
 * slot's row in a shared-memory hash of the top-k, this file stamps the rows
 * of the current top-k in row_mark[] (one stamp per position, so nothing is
 * cleared between positions); row_slot[] answers the other direction (is a
 * selected row in a slot?). Both are exact replacements for the hash. */
#include "sim/sglhb.h"

#include "common/dh_err.h"
#include "common/mem.h"

#include <Random123/philox.h>
#include <stdlib.h>
#include <string.h>

int sglhb_init(sglhb *h, const sglhb_config *cfg)
{
    memset(h, 0, sizeof *h);
    if (cfg->device_buffer_size == 0) return dh_err("hot buffer: device_buffer_size must be at least 1");
    if (cfg->page_size == 0) return dh_err("hot buffer: page_size must be at least 1");
    h->cfg = *cfg;
    h->B = cfg->device_buffer_size;
    h->slot_row = dh_malloc((size_t)h->B * sizeof *h->slot_row);
    h->lru = dh_malloc((size_t)h->B * sizeof *h->lru);
    h->hit_slots = dh_malloc((size_t)h->B * sizeof *h->hit_slots);
    h->evict_slots = dh_malloc((size_t)h->B * sizeof *h->evict_slots);
    return 0;
}

void sglhb_release(sglhb *h)
{
    free(h->slot_row); free(h->lru); free(h->hit_slots); free(h->evict_slots);
    free(h->row_slot); free(h->row_mark);
    free(h->sel); free(h->sel_next); free(h->topk); free(h->keys); free(h->miss_rows);
    memset(h, 0, sizeof *h);
}

void sglhb_clear(sglhb *h)
{
    if (h->row_slot) memset(h->row_slot, 0, (size_t)h->cap_rows * sizeof *h->row_slot);
    if (h->row_mark) memset(h->row_mark, 0, (size_t)h->cap_rows * sizeof *h->row_mark);
    h->started = h->lru_ready = 0;
    h->first_nrows = h->nrows_seen = h->last_pos = 0;
    h->n_empty = 0;
    h->stamp = 0;
    h->n_sel = 0;
}

/* Make the per-row arrays cover rows [0, n). */
static void rows_reserve(sglhb *h, uint32_t n)
{
    if (n <= h->cap_rows) return;
    uint32_t cap = h->cap_rows ? h->cap_rows : 1024;
    while (cap < n) cap = cap > 0x7FFFFFFFu ? n : 2 * cap;
    h->row_slot = dh_reallocarray(h->row_slot, cap, sizeof *h->row_slot);
    h->row_mark = dh_reallocarray(h->row_mark, cap, sizeof *h->row_mark);
    memset(h->row_slot + h->cap_rows, 0, (size_t)(cap - h->cap_rows) * sizeof *h->row_slot);
    memset(h->row_mark + h->cap_rows, 0, (size_t)(cap - h->cap_rows) * sizeof *h->row_mark);
    h->cap_rows = cap;
}

static void sel_reserve(sglhb *h, uint32_t n)
{
    if (n <= h->cap_sel) return;
    uint32_t cap = h->cap_sel ? h->cap_sel : 256;
    while (cap < n) cap = cap > 0x7FFFFFFFu ? n : 2 * cap;
    h->sel = dh_reallocarray(h->sel, cap, sizeof *h->sel);
    h->sel_next = dh_reallocarray(h->sel_next, cap, sizeof *h->sel_next);
    h->topk = dh_reallocarray(h->topk, cap, sizeof *h->topk);
    h->keys = dh_reallocarray(h->keys, 2 * (size_t)cap, sizeof *h->keys);
    h->miss_rows = dh_reallocarray(h->miss_rows, cap, sizeof *h->miss_rows);
    h->cap_sel = cap;
}

/* Does the stream start (or did it start) with rows 0 .. B-1 in their slots?
 * A short first context always does: staging left the prefill KV there, the
 * direct path preloaded it, and the fast path wrote every later row to the
 * slot of its position. A long first context does only under staging. */
static int starts_filled(const sglhb *h)
{
    return h->cfg.cold == SGLHB_COLD_STAGING || (h->started && h->first_nrows <= h->B);
}

/* The LRU slots at the first long position: lru_slots = arange(B) (__init__,
 * request_finished), device_buffer_tokens = arange(B) or all -1. */
static void lru_init(sglhb *h)
{
    int filled = starts_filled(h);
    if (filled) rows_reserve(h, h->B);
    for (uint32_t s = 0; s < h->B; s++) {
        h->lru[s] = s;
        h->slot_row[s] = filled ? s : SGLHB_EMPTY;
        if (filled) h->row_slot[s] = s + 1;
    }
    h->n_empty = filled ? 0 : h->B;
    h->lru_ready = 1;
}

void sglhb_lru_rows(const sglhb *h, uint32_t *out)
{
    if (h->lru_ready) {
        for (uint32_t i = 0; i < h->B; i++) out[i] = h->slot_row[h->lru[i]];
        return;
    }
    int filled = starts_filled(h);
    for (uint32_t i = 0; i < h->B; i++) out[i] = filled ? i : SGLHB_EMPTY;
}

uint64_t sglhb_order_key(const sglhb_config *cfg, uint32_t pos, uint32_t row)
{
    /* One Philox block per (position, row) under the key (seed, request,
     * group): any row's key is computed alone, so the order of a set does
     * not depend on how the set was built. */
    philox4x32_key_t key = { { (uint32_t)cfg->order_seed ^ (cfg->group * 0x9E3779B9u),
                               (uint32_t)(cfg->order_seed >> 32) ^ (cfg->req * 0x85EBCA6Bu) } };
    philox4x32_ctr_t ctr = { { row, pos, cfg->req, cfg->group ^ 0x5347u } };
    philox4x32_ctr_t out = philox4x32(ctr, key);
    return ((uint64_t)out.v[0] << 32) | out.v[1];
}

int sglhb_step_topk(sglhb *h, uint32_t pos, uint32_t nrows, const uint32_t *topk, uint32_t n,
                    sglhb_result *res)
{
    memset(res, 0, sizeof *res);
    if (h->started && nrows < h->nrows_seen)
        return dh_err("position %u: the context shrank from %u to %u rows", pos, h->nrows_seen, nrows);
    if (n > h->B)
        return dh_err("position %u selects %u rows, more than device_buffer_size %u (SGLang requires "
                      "device_buffer_size >= top-k)", pos, n, h->B);
    if (n > nrows) return dh_err("position %u selects %u rows of a context of %u", pos, n, nrows);
    rows_reserve(h, nrows);
    sel_reserve(h, n);
    /* Stamp this position's top-k (the kernel's hash insert); a repeated or
     * out-of-context row is an input error. */
    if (++h->stamp == 0) { /* wrapped: old stamps could collide */
        memset(h->row_mark, 0, (size_t)h->cap_rows * sizeof *h->row_mark);
        h->stamp = 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t row = topk[i];
        if (row >= nrows) return dh_err("position %u selects row %u beyond the context (%u rows)", pos, row, nrows);
        if (h->row_mark[row] == h->stamp) return dh_err("position %u selects row %u twice", pos, row);
        h->row_mark[row] = h->stamp;
    }
    /* Host traffic of the newest row and of the admission. */
    if (!h->started) {
        h->started = 1;
        h->first_nrows = nrows;
        if (h->cfg.cold == SGLHB_COLD_STAGING) res->backed_up = nrows;        /* the staging DMA */
        else if (nrows <= h->B) res->preloaded = nrows;                      /* _preload_to_device_buffer */
    } else {
        res->backed_up = nrows - h->nrows_seen; /* the rows that stopped being the newest */
    }
    h->nrows_seen = nrows;
    h->last_pos = pos;
    uint32_t newest = nrows - 1;
    res->newest_hit = nrows > 0 && h->row_mark[newest] == h->stamp;
    res->miss_rows = h->miss_rows;

    if (nrows <= h->B) {
        /* Fast path: slot = row position, everything is on the device. */
        res->fast = 1;
        res->hits = n;
        res->resident = nrows;
        res->fetched = res->preloaded;
        return 0;
    }
    if (!h->lru_ready) lru_init(h);

    /* Scan the slots least recent first: a slot whose row is selected (and
     * is not the newest row, which the kernel binds to slot B and leaves out
     * of the hash) is a hit, every other slot is evictable. Cost O(B), as in
     * the kernel. */
    uint32_t n_hit = 0, n_evict = 0;
    for (uint32_t i = 0; i < h->B; i++) {
        uint32_t s = h->lru[i], row = h->slot_row[s];
        int hit = row != SGLHB_EMPTY && row != newest && h->row_mark[row] == h->stamp;
        if (hit) h->hit_slots[n_hit++] = s;
        else h->evict_slots[n_evict++] = s;
    }
    /* Misses in top-k order; the m-th takes the m-th least recent evictable
     * slot. A selected row is in a slot iff it was a hit above. */
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t row = topk[i];
        if (row == newest || h->row_slot[row]) continue;
        DH_BUG_ON(m >= n_evict); /* n <= B: the evictable slots always suffice */
        uint32_t s = h->evict_slots[m];
        uint32_t old = h->slot_row[s];
        if (old == SGLHB_EMPTY) h->n_empty--;
        else { h->row_slot[old] = 0; res->evicted++; }
        h->slot_row[s] = row;
        h->row_slot[row] = s + 1;
        h->miss_rows[m++] = row;
    }
    /* The new order (the kernel's write-back): untouched evictable slots in
     * their old order, then the misses' slots in top-k order (which is the
     * order of evict_slots[0 .. m)), then the hits in their old order. */
    uint32_t o = 0;
    for (uint32_t i = m; i < n_evict; i++) h->lru[o++] = h->evict_slots[i];
    for (uint32_t i = 0; i < m; i++) h->lru[o++] = h->evict_slots[i];
    for (uint32_t i = 0; i < n_hit; i++) h->lru[o++] = h->hit_slots[i];
    DH_BUG_ON(o != h->B);
    res->misses = m;
    res->hits = n_hit + res->newest_hit;
    res->fetched = m + res->preloaded;
    res->resident = h->B - h->n_empty + 1;
    return 0;
}

static int cmp_key_row(const void *a, const void *b)
{
    /* Pairs (key, row) as two uint64_t; see order_hashed. */
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Put sel[0 .. n) in hashed top-k order into topk[]. O(n log n). */
static void order_hashed(sglhb *h, uint32_t pos, uint32_t n)
{
    uint64_t *pairs = h->keys; /* room for cap_sel pairs */
    for (uint32_t i = 0; i < n; i++) {
        pairs[2 * i] = sglhb_order_key(&h->cfg, pos, h->sel[i]);
        pairs[2 * i + 1] = h->sel[i];
    }
    qsort(pairs, n, 2 * sizeof *pairs, cmp_key_row);
    for (uint32_t i = 0; i < n; i++) h->topk[i] = (uint32_t)pairs[2 * i + 1];
}

int sglhb_step(sglhb *h, const sel_delta *d, sglhb_result *res)
{
    /* The selection after the delta: a merge of the sorted selection, the
     * sorted removed rows and the sorted added rows, O(k), checking that the
     * delta agrees with the selection. */
    uint32_t n_old = h->started ? h->n_sel : 0;
    sel_reserve(h, n_old + d->n_added);
    uint32_t i = 0, r = 0, a = 0, o = 0;
    while (i < n_old) {
        uint32_t x = h->sel[i];
        if (r < d->n_removed && d->removed[r] < x)
            return dh_err("selection at position %u removes row %u, which is not selected", d->pos, d->removed[r]);
        if (r < d->n_removed && d->removed[r] == x) { r++; i++; continue; }
        while (a < d->n_added && d->added[a] < x) h->sel_next[o++] = d->added[a++];
        if (a < d->n_added && d->added[a] == x)
            return dh_err("selection at position %u adds row %u, which is already selected", d->pos, x);
        h->sel_next[o++] = x;
        i++;
    }
    if (r < d->n_removed)
        return dh_err("selection at position %u removes row %u, which is not selected", d->pos, d->removed[r]);
    while (a < d->n_added) h->sel_next[o++] = d->added[a++];
    if (o != d->n_sel)
        return dh_err("position %u: deltas give %u selected rows, the stream says %u", d->pos, o, d->n_sel);
    uint32_t *t = h->sel; h->sel = h->sel_next; h->sel_next = t;
    h->n_sel = o;
    if (h->cfg.order == SGLHB_ORDER_HASHED) order_hashed(h, d->pos, o);
    else memcpy(h->topk, h->sel, (size_t)o * sizeof *h->topk);
    return sglhb_step_topk(h, d->pos, d->nrows, h->topk, o, res);
}
