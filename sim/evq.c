/* evq.c: binary min-heap keyed by (time, seq); see evq.h.
 *
 * The heap lives in one growable array (children of i at 2i+1, 2i+2). The
 * simulator keeps at most a few events per micro-batch and resource in flight,
 * so the heap stays small and cache-resident; the cost per event is
 * O(log n) comparisons. */
#include "sim/evq.h"

#include <stdlib.h>
#include <string.h>

void evq_init(evq *q) { memset(q, 0, sizeof *q); }

void evq_release(evq *q)
{
    free(q->heap);
    memset(q, 0, sizeof *q);
}

void evq_clear(evq *q) { q->n = 0; }

void evq_push(evq *q, double time, uint32_t kind, uint32_t a, uint32_t b)
{
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->heap = realloc(q->heap, q->cap * sizeof *q->heap);
        if (!q->heap) abort();
    }
    evq_event e = { time, q->next_seq++, kind, a, b };
    size_t i = q->n++;
    /* Sift up: move parents that come after e down one level. */
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!evq_before(&e, &q->heap[p])) break;
        q->heap[i] = q->heap[p];
        i = p;
    }
    q->heap[i] = e;
}

const evq_event *evq_peek(const evq *q) { return q->n ? &q->heap[0] : NULL; }

/* Place e at slot i of a heap whose subtrees below i are heaps: move earlier children up. */
static void sift_down(evq *q, size_t i, evq_event e)
{
    size_t n = q->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && evq_before(&q->heap[c + 1], &q->heap[c])) c++;
        if (!evq_before(&q->heap[c], &e)) break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    q->heap[i] = e;
}

int evq_pop(evq *q, evq_event *out)
{
    if (!q->n) return 0;
    *out = q->heap[0];
    evq_event last = q->heap[--q->n];
    /* Sift down the former last element from the root. */
    if (q->n) sift_down(q, 0, last);
    return 1;
}

void evq_stretch(evq *q, uint32_t kind, double from, double span, double factor)
{
    if (!(factor > 0) || !(span > 0)) return;
    for (size_t i = 0; i < q->n; i++) {
        evq_event *e = &q->heap[i];
        if (e->kind != kind || !(e->time > from)) continue;
        double in = e->time - from;
        e->time += factor * (in < span ? in : span);
    }
    /* Floyd's heap construction: O(n); the (time, seq) order makes the pops deterministic
     * whatever layout results. */
    for (size_t i = q->n / 2; i-- > 0;) sift_down(q, i, q->heap[i]);
}
