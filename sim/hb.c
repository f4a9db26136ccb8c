/* hb.c: the LRU hot buffer of one (request, selection group); see hb.h.
 *
 * Everything is index-based (uint32 nodes in growable arrays) so that a
 * buffer of a few thousand rows stays within a few tens of KB and the hot
 * loop touches little memory. The hash table is kept at most half full. */
#include "sim/hb.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

#define HB_NIL 0xFFFFFFFFu
#define HB_SELECTED 0xFFFFFFFEu

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) abort();
    return p;
}

static inline uint32_t hash_row(uint32_t row, uint32_t mask)
{
    return (uint32_t)(((uint64_t)row * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static void hash_alloc(hb *h, uint32_t slots)
{
    h->hkey = calloc(slots, sizeof *h->hkey);
    h->hval = malloc(slots * sizeof *h->hval);
    if (!h->hkey || !h->hval) abort();
    h->hmask = slots - 1;
}

void hb_init(hb *h, uint32_t budget)
{
    memset(h, 0, sizeof *h);
    h->budget = budget;
    h->head = h->tail = h->free_head = HB_NIL;
    hash_alloc(h, 64);
}

void hb_release(hb *h)
{
    free(h->row); free(h->prev); free(h->next);
    free(h->hkey); free(h->hval); free(h->scratch);
    memset(h, 0, sizeof *h);
}

void hb_clear(hb *h)
{
    memset(h->hkey, 0, (size_t)(h->hmask + 1) * sizeof *h->hkey);
    h->n_resident = h->n_sel = h->nrows_seen = 0;
    h->n_nodes = 0;
    h->head = h->tail = h->free_head = HB_NIL;
}

static uint32_t hash_find(const hb *h, uint32_t row)
{
    uint32_t key = row + 1, i = hash_row(row, h->hmask);
    for (;;) {
        uint32_t k = h->hkey[i];
        if (k == key) return h->hval[i];
        if (k == 0) return HB_NIL;
        i = (i + 1) & h->hmask;
    }
}

static void hash_put(hb *h, uint32_t row, uint32_t node)
{
    uint32_t i = hash_row(row, h->hmask);
    while (h->hkey[i]) i = (i + 1) & h->hmask;
    h->hkey[i] = row + 1;
    h->hval[i] = node;
}

/* Backward-shift deletion keeps probe sequences intact without tombstones. */
static void hash_del(hb *h, uint32_t row)
{
    uint32_t key = row + 1, i = hash_row(row, h->hmask);
    while (h->hkey[i] != key) {
        DH_BUG_ON(h->hkey[i] == 0);
        i = (i + 1) & h->hmask;
    }
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & h->hmask;
        if (!h->hkey[j]) break;
        uint32_t home = hash_row(h->hkey[j] - 1, h->hmask);
        /* Move j's entry into the hole at i unless its home lies cyclically in (i, j]. */
        int stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        h->hkey[i] = h->hkey[j];
        h->hval[i] = h->hval[j];
        i = j;
    }
    h->hkey[i] = 0;
}

static void hash_grow(hb *h)
{
    uint32_t *ok = h->hkey, *ov = h->hval, oslots = h->hmask + 1;
    hash_alloc(h, oslots * 2);
    for (uint32_t i = 0; i < oslots; i++)
        if (ok[i]) hash_put(h, ok[i] - 1, ov[i]);
    free(ok); free(ov);
}

static uint32_t node_new(hb *h, uint32_t row)
{
    uint32_t n;
    if (h->free_head != HB_NIL) {
        n = h->free_head;
        h->free_head = h->next[n];
    } else {
        if (h->n_nodes == h->cap_nodes) {
            h->cap_nodes = h->cap_nodes ? 2 * h->cap_nodes : 256;
            h->row = xrealloc(h->row, h->cap_nodes * sizeof *h->row);
            h->prev = xrealloc(h->prev, h->cap_nodes * sizeof *h->prev);
            h->next = xrealloc(h->next, h->cap_nodes * sizeof *h->next);
        }
        n = h->n_nodes++;
    }
    h->row[n] = row;
    if (2 * (uint64_t)(h->n_resident + 1) > h->hmask + 1) hash_grow(h);
    hash_put(h, row, n);
    h->n_resident++;
    return n;
}

static void node_free(hb *h, uint32_t n)
{
    hash_del(h, h->row[n]);
    h->next[n] = h->free_head;
    h->free_head = n;
    h->n_resident--;
}

static void list_append(hb *h, uint32_t n)
{
    h->prev[n] = h->tail;
    h->next[n] = HB_NIL;
    if (h->tail != HB_NIL) h->next[h->tail] = n; else h->head = n;
    h->tail = n;
}

static void list_unlink(hb *h, uint32_t n)
{
    uint32_t p = h->prev[n], x = h->next[n];
    if (p != HB_NIL) h->next[p] = x; else h->head = x;
    if (x != HB_NIL) h->prev[x] = p; else h->tail = p;
}

static uint32_t evict_down_to(hb *h, uint32_t target)
{
    uint32_t ev = 0;
    while (h->n_resident > target && h->head != HB_NIL) {
        uint32_t n = h->head;
        list_unlink(h, n);
        node_free(h, n);
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

int hb_resident(const hb *h, uint32_t row) { return hash_find(h, row) != HB_NIL; }

int hb_selected(const hb *h, uint32_t row)
{
    uint32_t n = hash_find(h, row);
    return n != HB_NIL && h->prev[n] == HB_SELECTED;
}

int hb_step(hb *h, const sel_delta *d, hb_result *res)
{
    memset(res, 0, sizeof *res);
    /* 1. Rows leaving the selection become the most recent unselected rows. */
    for (uint32_t i = 0; i < d->n_removed; i++) {
        uint32_t n = hash_find(h, d->removed[i]);
        if (n == HB_NIL || h->prev[n] != HB_SELECTED)
            return dh_err("selection at position %u removes row %u, which is not selected", d->pos, d->removed[i]);
        list_append(h, n);
        h->n_sel--;
    }
    /* 2. Rows produced on the GPU since the last position enter residency. */
    if (h->nrows_seen && d->nrows > h->nrows_seen) {
        for (uint32_t r = h->nrows_seen; r < d->nrows; r++) {
            if (hash_find(h, r) != HB_NIL)
                return dh_err("position %u: new row %u is already resident", d->pos, r);
            list_append(h, node_new(h, r));
            res->written++;
        }
    }
    if (d->nrows < h->nrows_seen)
        return dh_err("position %u: the context shrank from %u to %u rows", d->pos, h->nrows_seen, d->nrows);
    h->nrows_seen = d->nrows;
    /* 3. Hits leave the list; misses are collected for step 4. */
    if (d->n_added > h->cap_scratch) {
        h->cap_scratch = d->n_added;
        h->scratch = xrealloc(h->scratch, h->cap_scratch * sizeof *h->scratch);
    }
    uint32_t n_miss = 0;
    for (uint32_t i = 0; i < d->n_added; i++) {
        uint32_t row = d->added[i];
        if (row >= d->nrows)
            return dh_err("selection at position %u adds row %u beyond the context (%u rows)", d->pos, row, d->nrows);
        uint32_t n = hash_find(h, row);
        if (n == HB_NIL) { h->scratch[n_miss++] = row; continue; }
        if (h->prev[n] == HB_SELECTED)
            return dh_err("selection at position %u adds row %u, which is already selected", d->pos, row);
        list_unlink(h, n);
        h->prev[n] = HB_SELECTED;
        h->n_sel++;
        res->hits++;
    }
    /* 4. Make room (only unselected rows are candidates), then insert the misses. */
    uint32_t n_sel_after = h->n_sel + n_miss;
    if (n_sel_after > h->budget)
        return dh_err("position %u selects %u rows, more than the hot-buffer budget of %u", d->pos, n_sel_after, h->budget);
    if (h->n_resident + n_miss > h->budget)
        res->evicted = evict_down_to(h, h->budget - n_miss);
    for (uint32_t i = 0; i < n_miss; i++) {
        uint32_t n = node_new(h, h->scratch[i]);
        h->prev[n] = HB_SELECTED;
    }
    h->n_sel = n_sel_after;
    res->misses = n_miss;
    if (h->n_sel != d->n_sel)
        return dh_err("position %u: deltas give %u selected rows, the stream says %u", d->pos, h->n_sel, d->n_sel);
    return 0;
}
