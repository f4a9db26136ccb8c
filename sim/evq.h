/* evq.h: the simulator's event queue, a binary min-heap of timed events.
 *
 * Events are ordered by time; equal times are broken by a sequence number that
 * increases with every push, so two events at the same time leave in the order
 * they were scheduled and a run is deterministic whatever the heap's internal
 * layout (the libuv timer rule). Push and pop are O(log n); peek is O(1).
 *
 *   evq q; evq_init(&q);
 *   evq_push(&q, t, kind, a, b);
 *   evq_event e; while (evq_pop(&q, &e)) ... handle e ...
 *   evq_release(&q); */
#ifndef DH_EVQ_H
#define DH_EVQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double time;     /* simulated seconds */
    uint64_t seq;    /* push order: the tie-breaker */
    uint32_t kind;   /* what happens (the owner's enum) */
    uint32_t a, b;   /* the owner's arguments (e.g. micro-batch, layer) */
} evq_event;

typedef struct {
    evq_event *heap;
    size_t n, cap;
    uint64_t next_seq;
} evq;

void evq_init(evq *q);
void evq_release(evq *q);
/* Drop every event but keep the sequence counter running (ordering stays total). */
void evq_clear(evq *q);
void evq_push(evq *q, double time, uint32_t kind, uint32_t a, uint32_t b);
/* 1 with *e set to the earliest event (removed), 0 when empty. */
int evq_pop(evq *q, evq_event *e);
/* Slow the work behind every event of the given kind by factor over the window
 * [from, from + span]: an event at time t > from moves to
 * t + factor * min(t - from, span) (a resource whose work runs 1 + factor times
 * slower while something else runs beside it). O(n). */
void evq_stretch(evq *q, uint32_t kind, double from, double span, double factor);
/* The same with a weight per event (weight(ctx, a, b) >= 0; NULL: 1): the events of the kind
 * after from are taken in time order as one queue of work, each event's work the time since
 * the previous one (from, for the first); the part of it inside the window runs 1 + factor x
 * weight times slower, and every later event moves by what the earlier ones gained. With
 * equal weights w it is evq_stretch with factor x w. Returns how far the last event moved. */
double evq_stretch_weighted(evq *q, uint32_t kind, double from, double span, double factor,
                            double (*weight)(const void *ctx, uint32_t a, uint32_t b), const void *ctx);
/* The earliest event without removing it, or NULL. */
const evq_event *evq_peek(const evq *q);
static inline size_t evq_size(const evq *q) { return q->n; }
/* Strict order of two events: time, then sequence number. */
static inline int evq_before(const evq_event *x, const evq_event *y)
{
    return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

#endif
