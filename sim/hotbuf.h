/* hotbuf.h: the hot buffer -- which rows of one (request, selection group) have a
 * GPU copy -- under LRU replacement with a budget of B rows.
 *
 * Layers that share one selection (IndexShare) and run under the same policy
 * and budget evolve identically, so the simulator keeps ONE hot buffer per
 * (request, selection group) and multiplies its row counts and bytes by the
 * number of layers in the group. Each layer still has its own rows on the GPU
 * and on the host; only the bookkeeping is shared.
 *
 * State: the selected rows S (protected: never evicted) and the resident but
 * unselected rows in recency order (evicted oldest first). The order is that
 * in which rows left S; rows leaving at the same position come in ascending
 * row order. One byte per context row says whether the row is resident,
 * whether it is selected, and how many entries it has in a FIFO queue of the
 * unselected residents. A hit does not take its row out of the queue: the
 * entry goes stale and is skipped when it reaches the head (a row's newest
 * entry is the live one, so an entry is live iff it is its row's last and
 * the row is still unselected and resident); the queue is compacted once
 * stale entries outnumber live ones. So every change touches one byte of a
 * flat array (prefetched from the sorted delta) and the queue's ends, instead
 * of chasing hash slots and list links, and hundreds of buffers stepped in
 * lockstep stay small enough for the last-level cache.
 *
 * One position (hotbuf_step) is applied from the stream's delta, in this order:
 *   1. removed rows leave S and go to the list tail (ascending);
 *   2. rows new in the context since the last position are WRITTEN: a decode
 *      step produces the newest token's KV on the GPU, so it enters residency
 *      at the list tail without a fetch, and is written through to the host
 *      (the caller charges the write-through). Rows present at position 0 (the
 *      prompt, which arrives from prefill into host memory) are not resident;
 *   3. added rows that are resident are hits: unlinked from the list into S;
 *   4. the other added rows are misses: fetched, inserted into S; if the
 *      buffer is then over budget, rows are evicted from the list head.
 * This is exactly LRU that, at every position, touches the new rows and then
 * every selected row in ascending order and evicts the least recent
 * unselected rows down to B (tests/test_hotbuf.c checks it against that plain
 * formulation). Cost: O(changed rows) amortised per position, never O(k);
 * memory: 1 byte per context row plus the queue (4 bytes per entry, at most
 * about twice the unselected resident rows). */
#ifndef DH_HOTBUF_H
#define DH_HOTBUF_H

#include <stdint.h>

#include "traces/sel.h"

typedef struct {
    uint32_t hits, misses;  /* added rows found resident / fetched */
    uint32_t miss_regions;  /* distinct regions the misses fall in (hotbuf_set_regions; else 0) */
    uint32_t evicted;       /* rows dropped (clean copies: free) */
    uint32_t written;       /* new rows produced on the GPU this position */
} hotbuf_result;

typedef struct {
    uint32_t budget;       /* most rows resident (S included) */
    uint32_t n_resident, n_sel;
    uint32_t nrows_seen;   /* context rows at the last position (0 before the first) */
    /* Per row: HB_RES | HB_SEL | entries in the queue << HB_CNT_SHIFT. */
    uint8_t *row_state;
    uint32_t cap_rows;
    /* The queue: entries [q_head, q_tail) of q. */
    uint32_t *q;
    uint32_t q_head, q_tail, q_cap;
    uint32_t *scratch;     /* misses of the current position (ascending) */
    uint32_t cap_scratch;
    double rows_per_region; /* > 0: count the misses' regions of this many rows (hotbuf_set_regions) */
} hotbuf;

void hotbuf_init(hotbuf *h, uint32_t budget);
/* Count, with every step's misses, the distinct regions of rows_per_region consecutive rows
 * (the host pool's 2 MB translation regions: region_bytes / row_bytes rows, a window taken to
 * start on a region boundary) they fall in: hotbuf_result.miss_regions. 0 turns it off. */
void hotbuf_set_regions(hotbuf *h, double rows_per_region);
void hotbuf_release(hotbuf *h);
/* Forget every row (a new request in the same slot); keeps the memory. */
void hotbuf_clear(hotbuf *h);
/* Apply one position. -1 with dh_err() if the delta contradicts the state
 * (removing an unselected row, adding a selected one) or the selection
 * outgrows the budget. */
int hotbuf_step(hotbuf *h, const sel_delta *d, hotbuf_result *res);
/* Change the budget; shrinking evicts least-recent unselected rows at once.
 * Returns the rows evicted. The budget may not drop below the selection. */
uint32_t hotbuf_set_budget(hotbuf *h, uint32_t budget);
/* Row states (row_state[]): resident, selected, entries in the queue above. */
#define HB_RES 1u
#define HB_SEL 2u
static inline int hotbuf_resident(const hotbuf *h, uint32_t row) { return row < h->cap_rows && (h->row_state[row] & HB_RES); }
static inline int hotbuf_selected(const hotbuf *h, uint32_t row) { return row < h->cap_rows && (h->row_state[row] & HB_SEL); }
static inline uint32_t hotbuf_unselected(const hotbuf *h) { return h->n_resident - h->n_sel; }

#endif
