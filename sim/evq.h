/* evq.h: the simulator's event queue, a binary min-heap of timed events.
 *
 * Events are ordered by time; equal times are broken by a sequence number that
 * increases with every push, so two events at the same time leave in the order
 * they were scheduled and a run is deterministic whatever the heap's internal
 * layout (the libuv timer rule). Push, pop, cancel and reschedule are O(log n);
 * peek is O(1).
 *
 * Every push returns a handle by which the event can be cancelled or moved to another
 * time while it is queued (a resource does so when its work is re-rated, sim/res.h). A
 * rescheduled event keeps its sequence number: among equal times it still leaves in the
 * order it was first pushed. A handle is valid until its event is popped or cancelled,
 * then it may be reused.
 *
 *   evq q; evq_init(&q);
 *   evq_handle h = evq_push(&q, t, kind, a, b);
 *   evq_reschedule(&q, h, t2);
 *   evq_event e; while (evq_pop(&q, &e)) ... handle e ...
 *   evq_release(&q); */
#ifndef DH_EVQ_H
#define DH_EVQ_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t evq_handle;

typedef struct {
    double time;      /* simulated seconds */
    uint64_t seq;     /* push order: the tie-breaker */
    uint32_t kind;    /* what happens (the owner's enum) */
    uint32_t a, b;    /* the owner's arguments (e.g. micro-batch, layer) */
    evq_handle handle;
} evq_event;

typedef struct {
    evq_event *heap;
    size_t n, cap;
    uint64_t next_seq;
    uint32_t *slot;      /* [cap] per handle: its event's heap index, or (free) the next free handle */
    uint32_t n_handles;  /* handles ever given out (slots in use or on the free list) */
    uint32_t free_handle;
} evq;

void evq_init(evq *q);
void evq_release(evq *q);
/* Drop every event but keep the sequence counter running (ordering stays total). */
void evq_clear(evq *q);
evq_handle evq_push(evq *q, double time, uint32_t kind, uint32_t a, uint32_t b);
/* 1 with *e set to the earliest event (removed), 0 when empty. */
int evq_pop(evq *q, evq_event *e);
/* Remove the queued event h. */
void evq_cancel(evq *q, evq_handle h);
/* Move the queued event h to time (its sequence number kept). */
void evq_reschedule(evq *q, evq_handle h, double time);
/* The earliest event without removing it, or NULL. */
const evq_event *evq_peek(const evq *q);
static inline size_t evq_size(const evq *q) { return q->n; }
/* Strict order of two events: time, then sequence number. */
static inline int evq_before(const evq_event *x, const evq_event *y)
{
    return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

#endif
