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
    if (cfg->impl == SGLHB_IMPL_SCAN) {
        /* The queue keeps no slot table: it needs only which rows are in
         * slots and their order, which its map and FIFO hold. */
        h->slot_row = dh_malloc((size_t)h->B * sizeof *h->slot_row);
        h->lru = dh_malloc((size_t)h->B * sizeof *h->lru);
        h->hit_slots = dh_malloc((size_t)h->B * sizeof *h->hit_slots);
        h->evict_slots = dh_malloc((size_t)h->B * sizeof *h->evict_slots);
    }
    if (cfg->dense_rows) rowmap_init_dense(&h->rows);
    else rowmap_init(&h->rows);
    h->next_seq = 1;
    return 0;
}

void sglhb_release(sglhb *h)
{
    free(h->slot_row); free(h->lru); free(h->hit_slots); free(h->evict_slots);
    free(h->row_slot); free(h->row_mark);
    free(h->sel); free(h->sel_next); free(h->topk); free(h->keys); free(h->miss_rows);
    rowmap_release(&h->rows); free(h->q);
    free(h->cand); free(h->gone); free(h->departed); free(h->keys2); free(h->sort_k); free(h->sort_v);
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
    rowmap_clear(&h->rows);
    h->q_head = h->q_tail = h->n_queued = 0;
    h->next_seq = 1;
    h->long_steps = 0;
}

/* Make the per-row arrays of the scan cover rows [0, n): the reference keeps
 * the kernel's direct indexing (O(context rows) of memory); the queue keeps a
 * map instead (queue_step). */
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
    if (h->cfg.impl == SGLHB_IMPL_SCAN) {
        h->sel = dh_reallocarray(h->sel, cap, sizeof *h->sel);
        h->sel_next = dh_reallocarray(h->sel_next, cap, sizeof *h->sel_next);
        h->topk = dh_reallocarray(h->topk, cap, sizeof *h->topk);
    }
    h->keys = dh_reallocarray(h->keys, cap, sizeof *h->keys);
    h->sort_k = dh_reallocarray(h->sort_k, cap, sizeof *h->sort_k);
    h->sort_v = dh_reallocarray(h->sort_v, cap, sizeof *h->sort_v);
    h->miss_rows = dh_reallocarray(h->miss_rows, cap, sizeof *h->miss_rows);
    if (h->cfg.impl == SGLHB_IMPL_QUEUE) {
        h->cand = dh_reallocarray(h->cand, cap, sizeof *h->cand);
        h->gone = dh_reallocarray(h->gone, cap, sizeof *h->gone);
        h->departed = dh_reallocarray(h->departed, cap, sizeof *h->departed);
        h->keys2 = dh_reallocarray(h->keys2, cap, sizeof *h->keys2);
    }
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

static void queue_lru_rows(const sglhb *h, uint32_t *out);

void sglhb_lru_rows(const sglhb *h, uint32_t *out)
{
    if (h->lru_ready && h->cfg.impl == SGLHB_IMPL_QUEUE) {
        queue_lru_rows(h, out);
        return;
    }
    if (h->lru_ready) {
        for (uint32_t i = 0; i < h->B; i++) out[i] = h->slot_row[h->lru[i]];
        return;
    }
    int filled = starts_filled(h);
    for (uint32_t i = 0; i < h->B; i++) out[i] = filled ? i : SGLHB_EMPTY;
}

uint64_t sglhb_device_slots(const sglhb_config *cfg, uint32_t nrows)
{
    uint64_t B = cfg->device_buffer_size, page = cfg->page_size;
    uint64_t slots = (nrows + page - 1) / page * page;
    if (slots >= B) return B + page;
    return slots;
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
    return ((uint64_t)out.v[0] << 32) | row; /* distinct keys: ties by row, by construction */
}

/* Sort key[0 .. n) ascending, carrying val[] along (stable): an LSD radix
 * sort over the bytes in which the keys differ (tail keys share their epoch's
 * high bytes, sequences their high bytes), insertion sort for short runs.
 * O(n · bytes that vary); tk, tv: scratch of n. libc's qsort, with its
 * indirect comparisons, cost more than the rest of a position. */
static void sort_by_key(uint64_t *key, uint32_t *val, uint32_t n, uint64_t *tk, uint32_t *tv)
{
    if (n < 48) {
        for (uint32_t i = 1; i < n; i++) {
            uint64_t k = key[i];
            uint32_t v = val[i], j = i;
            for (; j > 0 && key[j - 1] > k; j--) { key[j] = key[j - 1]; val[j] = val[j - 1]; }
            key[j] = k;
            val[j] = v;
        }
        return;
    }
    uint64_t all_or = 0, all_and = ~0ull;
    uint32_t low_descents = 0;
    for (uint32_t i = 0; i < n; i++) {
        all_or |= key[i];
        all_and &= key[i];
        low_descents += i && (uint32_t)key[i] < (uint32_t)key[i - 1];
    }
    uint64_t varies = all_or ^ all_and;
    /* Keys whose low 32 bits already ascend (the hashed top-k order's keys, hash above row,
     * of rows taken in ascending order): a stable sort by the high half alone leaves equal
     * high halves in that order, which is the whole keys' order. */
    if (!low_descents) varies &= ~0xFFFFFFFFull;
    uint64_t *k0 = key, *k1 = tk;
    uint32_t *v0 = val, *v1 = tv;
    for (int shift = 0; shift < 64; shift += 8) {
        if (!((varies >> shift) & 0xFF)) continue;
        uint32_t count[257] = { 0 };
        for (uint32_t i = 0; i < n; i++) count[((k0[i] >> shift) & 0xFF) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (uint32_t i = 0; i < n; i++) {
            uint32_t at = count[(k0[i] >> shift) & 0xFF]++;
            k1[at] = k0[i];
            v1[at] = v0[i];
        }
        uint64_t *tkp = k0; k0 = k1; k1 = tkp;
        uint32_t *tvp = v0; v0 = v1; v1 = tvp;
    }
    if (k0 != key) {
        memcpy(key, k0, (size_t)n * sizeof *key);
        memcpy(val, v0, (size_t)n * sizeof *val);
    }
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
    if (h->cfg.impl != SGLHB_IMPL_SCAN)
        return dh_err("position %u: the queue hot buffer is stepped from deltas (sglhb_step)", pos);
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

/* Put sel[0 .. n) in hashed top-k order into topk[]. O(n · key bytes). */
static void order_hashed(sglhb *h, uint32_t pos, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        h->keys[i] = sglhb_order_key(&h->cfg, pos, h->sel[i]);
        h->topk[i] = h->sel[i];
    }
    sort_by_key(h->keys, h->topk, n, h->sort_k, h->sort_v);
}

static int queue_step(sglhb *h, const sel_delta *d, sglhb_result *res);

int sglhb_step(sglhb *h, const sel_delta *d, sglhb_result *res)
{
    if (h->cfg.impl == SGLHB_IMPL_QUEUE) return queue_step(h, d, res);
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
    else if (o) memcpy(h->topk, h->sel, (size_t)o * sizeof *h->topk);
    return sglhb_step_topk(h, d->pos, d->nrows, h->topk, o, res);
}

/* ---- SGLHB_IMPL_QUEUE: the same hot buffer in O(changed rows) ----
 *
 * Why it is exact. After a long position the LRU is, least recent first,
 * [empty slots][unselected rows][selected rows] (the tail): every selected row
 * but the newest is a hit or has just been loaded, and the write-back puts
 * hits and misses behind every evictable slot. Empty slots stay in front (they
 * are evictable and only leave by being taken). So the kernel's update reads:
 *   tail' = misses (top-k order) ++ re-referenced rows (hits from the
 *           unselected part, in its order) ++ the old tail's rows still
 *           selected (in the old tail's order);
 *   unselected' = unselected minus re-referenced minus the first
 *           (misses - empties used) rows, ++ the rows that left the tail (in
 *           the old tail's order).
 * The tail is therefore ordered by a key fixed when a row enters it: the
 * position's epoch, DEcreasing with time (newer entrants come first), then its
 * rank (misses before re-referenced rows). The unselected part is a FIFO. Only
 * rows that join or leave the selection (and the previous newest row, which
 * leaves slot B for the host) change place.
 *
 * The FIFO holds (sequence, row) entries; an entry is live iff its row is
 * resident and unselected and the row's live sequence is the entry's (a row
 * re-referenced and later unselected again has a newer entry). Stale entries
 * are dropped when they reach the head, or by compaction once they outnumber
 * the live ones.
 *
 * Per row: the state byte and one 64-bit value, in a map (sim/rowmap.h) that
 * holds exactly the rows that are resident or selected -- at most
 * device_buffer_size + top-k + the newest row -- so the memory is per slot,
 * not per context row (a context of 125K rows in each of thousands of
 * streams made per-row arrays the simulator's largest cost). The value is
 * the live sequence while the row is resident and unselected (in the FIFO)
 * and the tail key while it is resident and selected (in the tail); a row is
 * never in both, and a row between the two (it left the tail this position
 * and is not queued yet) holds 0, which no entry has (sequences start at 1).
 * A row that is neither resident nor selected leaves the map. */
#define Q_RES 1u /* in an LRU slot */
#define Q_SEL 2u /* selected */
/* Rows looked up ahead of use in the loops over a position's rows (each
 * lookup is a likely cache miss: thousands of streams' maps are stepped in
 * turn); 8 keeps several misses in flight without evicting what is in use. */
#define Q_PREFETCH 8u

static inline uint8_t row_state(const sglhb *h, uint32_t row)
{
    const rowmap_ent *e = rowmap_find(&h->rows, row);
    return e ? e->state : 0;
}

static inline int queue_entry_live(const sglhb *h, const struct sglhb_qent *q)
{
    const rowmap_ent *e = rowmap_find(&h->rows, q->row);
    return e && (e->state & (Q_RES | Q_SEL)) == Q_RES && e->val == q->seq;
}

/* Drop stale entries; keeps the live ones in order. O(queue length). */
static void queue_compact(sglhb *h)
{
    uint32_t n = 0;
    for (uint32_t i = h->q_head; i < h->q_tail; i++)
        if (queue_entry_live(h, &h->q[i])) h->q[n++] = h->q[i];
    h->q_head = 0;
    h->q_tail = n;
}

/* Queue row e (resident, unselected) as the most recent unselected row. */
static void queue_push(sglhb *h, rowmap_ent *e)
{
    uint32_t row = e->row;
    e->val = h->next_seq; /* before compaction, which reads the map (it does not move it) */
    if (h->q_tail == h->q_cap) {
        uint32_t len = h->q_tail - h->q_head;
        if (len > 2 * h->n_queued + 1024) queue_compact(h);
        else if (h->q_head >= h->q_cap / 2) {
            if (len) memmove(h->q, h->q + h->q_head, (size_t)len * sizeof *h->q); /* q may be NULL */
            h->q_head = 0;
            h->q_tail = len;
        }
        if (h->q_tail == h->q_cap) {
            h->q_cap = h->q_cap ? 2 * h->q_cap : 1024;
            h->q = dh_reallocarray(h->q, h->q_cap, sizeof *h->q);
        }
    }
    h->q[h->q_tail].seq = h->next_seq++;
    h->q[h->q_tail++].row = row;
    h->n_queued++;
}

/* The least recent unselected row (the FIFO's first live entry), removed
 * from the FIFO; its map entry is returned. */
static rowmap_ent *queue_pop(sglhb *h)
{
    while (h->q_head < h->q_tail) {
        if (h->q_head + Q_PREFETCH < h->q_tail) rowmap_prefetch(&h->rows, h->q[h->q_head + Q_PREFETCH].row);
        const struct sglhb_qent *q = &h->q[h->q_head++];
        rowmap_ent *e = rowmap_find(&h->rows, q->row);
        if (e && (e->state & (Q_RES | Q_SEL)) == Q_RES && e->val == q->seq) {
            h->n_queued--;
            return e;
        }
    }
    DH_BUG_ON(1); /* the caller counted enough unselected rows */
    return NULL;
}

static int cmp_tkey(const void *a, const void *b, void *ctx);

static void queue_lru_rows(const sglhb *h, uint32_t *out)
{
    /* For tests: O(slots · log), not for the simulation's hot loop. The tail
     * is every resident selected row of the map, by tail key. */
    uint32_t o = 0;
    for (uint32_t i = 0; i < h->n_empty; i++) out[o++] = SGLHB_EMPTY;
    for (uint32_t i = h->q_head; i < h->q_tail; i++)
        if (queue_entry_live(h, &h->q[i])) out[o++] = h->q[i].row;
    uint32_t t0 = o;
    for (uint32_t i = 0; i < h->rows.cap; i++) {
        const rowmap_ent *e = &h->rows.ent[i];
        if (e->row != ROWMAP_NONE && (e->state & (Q_RES | Q_SEL)) == (Q_RES | Q_SEL)) {
            DH_BUG_ON(o >= h->B);
            out[o++] = e->row;
        }
    }
    qsort_r(out + t0, o - t0, sizeof *out, cmp_tkey, (void *)h);
    DH_BUG_ON(o != h->B);
}

static int cmp_tkey(const void *a, const void *b, void *ctx)
{
    const sglhb *h = ctx;
    uint64_t x = rowmap_find(&h->rows, *(const uint32_t *)a)->val;
    uint64_t y = rowmap_find(&h->rows, *(const uint32_t *)b)->val;
    return (x > y) - (x < y);
}

/* Sort the misses (their map slots, slots[0 .. m)) into top-k order. The
 * keys are distinct, so the order does not depend on the slots' order. */
static void queue_order_misses(sglhb *h, uint32_t pos, uint32_t *slots, uint32_t m)
{
    int hashed = h->cfg.order == SGLHB_ORDER_HASHED;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t row = h->rows.ent[slots[i]].row;
        h->keys[i] = hashed ? sglhb_order_key(&h->cfg, pos, row) : row;
    }
    sort_by_key(h->keys, slots, m, h->sort_k, h->sort_v);
}

/* Rows that left the selection without being resident leave the map at the
 * end of the position (a removal may move entries, and the position holds
 * slots until then), unless the position selected them again. */
static void queue_drop_gone(sglhb *h, uint32_t n_gone)
{
    for (uint32_t i = 0; i < n_gone; i++) {
        rowmap_ent *e = rowmap_find(&h->rows, h->gone[i]);
        if (e && !e->state) rowmap_remove_ent(&h->rows, e);
    }
}

static int queue_step(sglhb *h, const sel_delta *d, sglhb_result *res)
{
    memset(res, 0, sizeof *res);
    uint32_t pos = d->pos, nrows = d->nrows;
    if (h->started && nrows < h->nrows_seen)
        return dh_err("position %u: the context shrank from %u to %u rows", pos, h->nrows_seen, nrows);
    if (d->n_sel > h->B)
        return dh_err("position %u selects %u rows, more than device_buffer_size %u (SGLang requires "
                      "device_buffer_size >= top-k)", pos, d->n_sel, h->B);
    uint32_t need = d->n_added + 1 > d->n_removed ? d->n_added + 1 : d->n_removed;
    if (!h->lru_ready && d->n_sel > need) need = d->n_sel;
    sel_reserve(h, need);
    uint32_t prev_nrows = h->nrows_seen;
    int was_started = h->started;
    /* The map holds the resident rows (at most B) and the selected ones; the
     * added rows (and, at the first long position, rows 0 .. B-1) join
     * before anything leaves, so room for all of them is made now: no insert
     * below rehashes the table, and as nothing is removed before the
     * evictions (step 6), the map slots taken in steps 1-5 stay valid. */
    rowmap_reserve(&h->rows, h->rows.count + d->n_added + (h->lru_ready || nrows <= h->B ? 0 : h->B));
    rowmap_cover(&h->rows, nrows); /* the dense layout: slots = rows, grown before any slot is taken */
    rowmap *map = &h->rows;

    /* 1. The selection. Rows leaving it from the tail are collected (their
     *    slots, with their tail keys) to join the FIFO in tail order; a
     *    removed row that is not resident leaves the map at the end. The
     *    added rows' slots are the candidates of step 4. */
    uint32_t n_dep = 0, n_gone = 0;
    for (uint32_t i = 0; i < d->n_removed; i++) {
        if (i + Q_PREFETCH < d->n_removed) rowmap_prefetch(map, d->removed[i + Q_PREFETCH]);
        uint32_t row = d->removed[i];
        rowmap_ent *e = row == ROWMAP_NONE ? NULL : rowmap_find(map, row);
        if (!e || !(e->state & Q_SEL))
            return dh_err("selection at position %u removes row %u, which is not selected", pos, row);
        e->state &= (uint8_t)~Q_SEL;
        if (e->state & Q_RES) {
            h->keys[n_dep] = e->val;
            e->val = 0;
            h->departed[n_dep++] = (uint32_t)(e - map->ent);
        } else {
            h->gone[n_gone++] = row;
        }
    }
    for (uint32_t i = 0; i < d->n_added; i++) {
        if (i + Q_PREFETCH < d->n_added) rowmap_prefetch(map, d->added[i + Q_PREFETCH]);
        uint32_t row = d->added[i];
        if (row >= nrows)
            return dh_err("selection at position %u adds row %u beyond the context (%u rows)", pos, row, nrows);
        rowmap_ent *e = rowmap_insert(map, row, NULL);
        if (e->state & Q_SEL)
            return dh_err("selection at position %u adds row %u, which is already selected", pos, row);
        e->state |= Q_SEL;
        h->cand[i] = (uint32_t)(e - map->ent);
    }
    h->n_sel = (h->started ? h->n_sel : 0) + d->n_added - d->n_removed;
    if (h->n_sel != d->n_sel)
        return dh_err("position %u: deltas give %u selected rows, the stream says %u", pos, h->n_sel, d->n_sel);

    /* 2. Host traffic, as in sglhb_step_topk. */
    if (!was_started) {
        h->started = 1;
        h->first_nrows = nrows;
        if (h->cfg.cold == SGLHB_COLD_STAGING) res->backed_up = nrows;
        else if (nrows <= h->B) res->preloaded = nrows;
    } else {
        res->backed_up = nrows - prev_nrows;
    }
    h->nrows_seen = nrows;
    h->last_pos = pos;
    uint32_t newest = nrows - 1;
    res->newest_hit = nrows > 0 && (row_state(h, newest) & Q_SEL);
    res->miss_rows = h->miss_rows;
    if (nrows <= h->B) {
        res->fast = 1;
        res->hits = d->n_sel;
        res->resident = nrows;
        res->fetched = res->preloaded;
        queue_drop_gone(h, n_gone);
        return 0;
    }

    /* 3. The rows whose place may change (their slots): at the first long
     *    position every selected row (rows 0 .. B-1 enter the FIFO first, in
     *    slot order); later the added rows and the previous newest row, if
     *    still selected (it left slot B for the host). */
    uint32_t n_cand = 0;
    if (!h->lru_ready) {
        /* Every selected row is a candidate; their order does not matter
         * (misses and re-referenced rows are sorted by distinct keys below).
         * A stream that starts long selects only added rows, whose slots step
         * 1 took; one that started short is scanned, O(table) once. */
        if (!was_started) {
            n_cand = d->n_added;
        } else {
            for (uint32_t i = 0; i < map->cap; i++) {
                const rowmap_ent *e = &map->ent[i];
                if (e->row != ROWMAP_NONE && (e->state & Q_SEL)) h->cand[n_cand++] = i;
            }
        }
        int filled = starts_filled(h);
        if (filled)
            for (uint32_t r = 0; r < h->B; r++) {
                rowmap_ent *e = rowmap_insert(map, r, NULL);
                e->state |= Q_RES;
                queue_push(h, e);
            }
        h->n_empty = filled ? 0 : h->B;
        h->lru_ready = 1;
        n_dep = 0; /* nothing was in a tail */
    } else {
        /* Rows leaving the tail, in tail order, become the most recent unselected rows. */
        sort_by_key(h->keys, h->departed, n_dep, h->sort_k, h->sort_v);
        for (uint32_t i = 0; i < n_dep; i++) queue_push(h, &map->ent[h->departed[i]]);
        n_cand = d->n_added;
        uint32_t p = prev_nrows - 1;
        const rowmap_ent *pe = nrows > prev_nrows ? rowmap_find(map, p) : NULL;
        if (pe && (pe->state & (Q_SEL | Q_RES)) == Q_SEL) {
            /* Unless the delta added it (then it is a candidate already). */
            int added = 0;
            for (uint32_t lo = 0, hi = d->n_added; lo < hi;) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (d->added[mid] == p) { added = 1; break; }
                if (d->added[mid] < p) lo = mid + 1; else hi = mid;
            }
            if (!added) h->cand[n_cand++] = (uint32_t)(pe - map->ent);
        }
    }
    /* 4. Candidates: the newest row stays in slot B; a resident one is a
     *    re-referenced hit (it leaves the FIFO: its entry goes stale); any
     *    other is a miss. miss_rows holds the misses' slots until step 5. */
    uint32_t m = 0, n_ahit = 0;
    for (uint32_t i = 0; i < n_cand; i++) {
        rowmap_ent *e = &map->ent[h->cand[i]];
        if (e->row == newest) continue;
        if (e->state & Q_RES) {
            h->keys2[n_ahit] = e->val; /* its live sequence */
            h->departed[n_ahit++] = h->cand[i]; /* the departed rows are queued: room for these */
            e->val = 0;
            h->n_queued--;
        } else {
            h->miss_rows[m++] = h->cand[i];
        }
    }
    queue_order_misses(h, pos, h->miss_rows, m);
    sort_by_key(h->keys2, h->departed, n_ahit, h->sort_k, h->sort_v);
    /* 5. Tail keys: this position's entrants go before every older tail row.
     *    The misses become resident now, before the evictions: as selected
     *    rows they are not in the FIFO either way, and their slots are
     *    still valid. */
    uint64_t epoch = (uint64_t)(UINT32_MAX - ++h->long_steps) << 32;
    for (uint32_t i = 0; i < m; i++) {
        rowmap_ent *e = &map->ent[h->miss_rows[i]];
        e->state |= Q_RES;
        e->val = epoch | i;
        h->miss_rows[i] = e->row;
    }
    for (uint32_t j = 0; j < n_ahit; j++) map->ent[h->departed[j]].val = epoch | (m + j);
    /* 6. The misses take the empty slots, then the least recent unselected
     *    rows, which leave the map (neither resident nor selected now). */
    uint32_t from_empty = m < h->n_empty ? m : h->n_empty;
    h->n_empty -= from_empty;
    DH_BUG_ON(m - from_empty > h->n_queued);
    for (uint32_t i = from_empty; i < m; i++) rowmap_remove_ent(map, queue_pop(h));
    res->evicted = m - from_empty;
    queue_drop_gone(h, n_gone);
    res->misses = m;
    res->hits = d->n_sel - m;
    res->fetched = m + res->preloaded;
    res->resident = h->B - h->n_empty + 1;
    return 0;
}
