/* evq.c: binary min-heap keyed by (time, seq); see evq.h.
 *
 * The heap lives in one growable array (children of i at 2i+1, 2i+2). The
 * simulator keeps at most a few events per micro-batch and resource in flight,
 * so the heap stays small and cache-resident; the cost per event is
 * O(log n) comparisons, plus one store per level into the handle table (slot), which
 * is what makes cancel and reschedule O(log n) instead of a scan. */
#include "sim/evq.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

#define NO_HANDLE UINT32_MAX

void evq_init(evq *q)
{
    memset(q, 0, sizeof *q);
    q->free_handle = NO_HANDLE;
}

void evq_release(evq *q)
{
    free(q->heap);
    free(q->slot);
    memset(q, 0, sizeof *q);
    q->free_handle = NO_HANDLE;
}

void evq_clear(evq *q)
{
    q->n = 0;
    q->n_handles = 0;
    q->free_handle = NO_HANDLE;
}

/* Put e at heap index i and record where its handle now points. */
static inline void place(evq *q, size_t i, evq_event e)
{
    q->heap[i] = e;
    q->slot[e.handle] = (uint32_t)i;
}

/* Place e at slot i of a heap whose part above i is ordered: move later parents down. */
static void sift_up(evq *q, size_t i, evq_event e)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!evq_before(&e, &q->heap[p])) break;
        place(q, i, q->heap[p]);
        i = p;
    }
    place(q, i, e);
}

/* Place e at slot i of a heap whose subtrees below i are heaps: move earlier children up. */
static void sift_down(evq *q, size_t i, evq_event e)
{
    size_t n = q->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && evq_before(&q->heap[c + 1], &q->heap[c])) c++;
        if (!evq_before(&q->heap[c], &e)) break;
        place(q, i, q->heap[c]);
        i = c;
    }
    place(q, i, e);
}

static void free_handle(evq *q, evq_handle h)
{
    q->slot[h] = q->free_handle;
    q->free_handle = h;
}

evq_handle evq_push(evq *q, double time, uint32_t kind, uint32_t a, uint32_t b)
{
    if (q->n == q->cap) {
        DH_BUG_ON(q->cap >= NO_HANDLE / 2);
        q->cap = q->cap ? 2 * q->cap : 64;
        q->heap = dh_reallocarray(q->heap, q->cap, sizeof *q->heap);
        q->slot = dh_reallocarray(q->slot, q->cap, sizeof *q->slot);
    }
    /* Live handles never outnumber the events, so a new one fits in cap. */
    evq_handle h;
    if (q->free_handle != NO_HANDLE) {
        h = q->free_handle;
        q->free_handle = q->slot[h];
    } else {
        h = q->n_handles++;
    }
    evq_event e = { time, q->next_seq++, kind, a, b, h };
    sift_up(q, q->n++, e);
    return h;
}

const evq_event *evq_peek(const evq *q) { return q->n ? &q->heap[0] : NULL; }

/* Take the event at heap index i out: the former last element fills the hole. */
static void remove_at(evq *q, size_t i)
{
    free_handle(q, q->heap[i].handle);
    evq_event last = q->heap[--q->n];
    if (i == q->n) return;
    if (i > 0 && evq_before(&last, &q->heap[(i - 1) / 2])) sift_up(q, i, last);
    else sift_down(q, i, last);
}

int evq_pop(evq *q, evq_event *out)
{
    if (!q->n) return 0;
    *out = q->heap[0];
    remove_at(q, 0);
    return 1;
}

/* The heap index of queued event h (a stale handle is a bug of the caller). */
static size_t index_of(const evq *q, evq_handle h)
{
    DH_BUG_ON(h >= q->n_handles);
    size_t i = q->slot[h];
    DH_BUG_ON(i >= q->n || q->heap[i].handle != h);
    return i;
}

void evq_cancel(evq *q, evq_handle h) { remove_at(q, index_of(q, h)); }

void evq_reschedule(evq *q, evq_handle h, double time)
{
    size_t i = index_of(q, h);
    evq_event e = q->heap[i];
    e.time = time;
    if (i > 0 && evq_before(&e, &q->heap[(i - 1) / 2])) sift_up(q, i, e);
    else sift_down(q, i, e);
}
