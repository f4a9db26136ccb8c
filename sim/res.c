/* res.c: FIFO servers over simulated time; see res.h. O(1) per job, and for work held in
 * flight O(log q) per completion event and O(jobs in flight) per re-rating: a step keeps
 * a few fetches per micro-batch in flight. */
#include "sim/res.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

void res_init(res_server *r, const char *name)
{
    memset(r, 0, sizeof *r);
    r->name = name;
}

void res_release(res_server *r)
{
    free(r->flight);
    r->flight = NULL;
    r->head = r->n_flight = r->cap_flight = 0;
}

double res_submit(res_server *r, double t, double d, double bytes)
{
    DH_BUG_ON(!(d >= 0));
    double start = t > r->free_at ? t : r->free_at;
    r->free_at = start + d;
    r->busy += d;
    r->bytes += bytes;
    r->jobs++;
    return r->free_at;
}

double res_submit_event(res_server *r, evq *q, double t, double d, double bytes, double weight, uint32_t kind,
                        uint32_t a, uint32_t b)
{
    const double end = res_submit(r, t, d, bytes);
    if (r->n_flight == r->cap_flight) {
        /* Completed jobs before head are dropped first; the array grows only when at least
         * half of it is in flight. */
        if (r->head > 0 && r->head >= r->n_flight / 2) {
            memmove(r->flight, r->flight + r->head, (r->n_flight - r->head) * sizeof *r->flight);
            r->n_flight -= r->head;
            r->head = 0;
        } else {
            r->cap_flight = r->cap_flight ? 2 * r->cap_flight : 16;
            r->flight = dh_reallocarray(r->flight, r->cap_flight, sizeof *r->flight);
        }
    }
    r->flight[r->n_flight++] = (res_job){ end, weight, evq_push(q, end, kind, a, b) };
    return end;
}

void res_complete(res_server *r, const evq_event *e)
{
    DH_BUG_ON(r->head >= r->n_flight || r->flight[r->head].done != e->handle);
    /* The last job out frees the array: a step's fetches all complete within it, so no
     * resource keeps memory between steps (and none needs a release). */
    if (++r->head == r->n_flight) res_release(r);
}

double res_slow(res_server *r, evq *q, double from, double span, double factor)
{
    if (!(factor > 0) || !(span > 0)) return 0;
    /* Job i's end moves by factor x sum_j<=i w_j (c_j - c_j-1), c_j = min(end_j - from, span)
     * (c_0 = 0), summed by parts as w_i c_i + sum_j<i (w_j - w_j+1) c_j: with equal weights
     * the second sum is exactly 0, so the move is factor x w x min(end - from, span) to the
     * last bit. */
    double shift = 0, parts = 0, w_prev = 0, c_prev = 0;
    int moved = 0;
    for (size_t i = r->head; i < r->n_flight; i++) {
        res_job *j = &r->flight[i];
        if (!(j->end > from)) continue;
        const double t = j->end, w = j->weight;
        const double c = t - from < span ? t - from : span;
        if (moved) parts += (w_prev - w) * c_prev;
        shift = factor * (w * c + parts);
        j->end = t + shift;
        evq_reschedule(q, j->done, j->end);
        w_prev = w;
        c_prev = c;
        moved = 1;
    }
    if (!moved) return 0;
    r->free_at += shift;
    r->busy += shift;
    return shift;
}

int res_check(const res_server *r, double now)
{
    /* A relative slack absorbs floating-point summation order only. */
    if (r->busy > now * (1 + 1e-9) + 1e-12)
        return dh_err("invariant: resource '%s' busy %.9g s in %.9g s of simulated time", r->name, r->busy, now);
    return 0;
}
