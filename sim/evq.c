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

static int by_time_seq(const void *pa, const void *pb)
{
    const evq_event *a = *(const evq_event *const *)pa, *b = *(const evq_event *const *)pb;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

double evq_stretch_weighted(evq *q, uint32_t kind, double from, double span, double factor,
                            double (*weight)(const void *ctx, uint32_t a, uint32_t b), const void *ctx)
{
    if (!(factor > 0) || !(span > 0)) return 0;
    evq_event **ev = malloc((q->n ? q->n : 1) * sizeof *ev);
    if (!ev) abort();
    size_t n = 0;
    for (size_t i = 0; i < q->n; i++)
        if (q->heap[i].kind == kind && q->heap[i].time > from) ev[n++] = &q->heap[i];
    qsort(ev, n, sizeof *ev, by_time_seq);
    /* Event i's shift is factor x sum_j<=i w_j (c_j - c_j-1), c_j = min(t_j - from, span) (c_0
     * = 0), summed by parts as w_i c_i + sum_j<i (w_j - w_j+1) c_j: with equal weights the
     * second sum is exactly 0, so evq_stretch's result is t + factor x w x min(t - from, span)
     * to the last bit. */
    double shift = 0, parts = 0, w_prev = 0, c_prev = 0;
    for (size_t i = 0; i < n; i++) {
        const double t = ev[i]->time, w = weight ? weight(ctx, ev[i]->a, ev[i]->b) : 1;
        const double c = t - from < span ? t - from : span;
        if (i) parts += (w_prev - w) * c_prev;
        shift = factor * (w * c + parts);
        ev[i]->time = t + shift;
        w_prev = w;
        c_prev = c;
    }
    free(ev);
    /* Floyd's heap construction: O(n); the (time, seq) order makes the pops deterministic
     * whatever layout results. */
    for (size_t i = q->n / 2; i-- > 0;) sift_down(q, i, q->heap[i]);
    return n ? shift : 0;
}

void evq_stretch(evq *q, uint32_t kind, double from, double span, double factor)
{
    evq_stretch_weighted(q, kind, from, span, factor, NULL, NULL);
}
