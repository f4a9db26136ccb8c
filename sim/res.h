/* res.h: resources that serve work over simulated time.
 *
 * A resource (the GPU's compute, the fetch path host-to-device, the
 * write-through path device-to-host) is a non-preemptive FIFO server: work
 * submitted at time t with duration d starts at max(t, the end of the work
 * already queued) and occupies the server for d seconds. Separate resources
 * run concurrently, which is how fetch and compute overlap. Each resource
 * counts its busy time and bytes so that utilisation can be reported and the
 * invariant "no resource busy longer than the simulated time" checked.
 *
 * Contention: work submitted with res_submit_event is held in flight by the resource,
 * with its completion event in the queue and a weight (its sensitivity to what runs
 * beside it). When other work runs beside the resource for a window [from, from + span]
 * (a compute task beside the fetch path), res_slow re-rates the in-flight work: it runs
 * at rate 1 / (1 + factor x weight) inside the window, and every completion moves later
 * by the time the work before it lost, through the queue's reschedule. The in-flight
 * work after from is taken as one queue of work, each job's the time since the previous
 * job's end (from, for the first), a job's idle gap before it included, as the
 * calibrated model does (sim/cost.h: interference). The window is known whole when it is
 * queued (the compute server is FIFO too), so the rate drops at its start and returns at
 * its end in one call. */
#ifndef DH_RES_H
#define DH_RES_H

#include <stddef.h>
#include <stdint.h>

#include "sim/evq.h"

/* One job in flight: when it completes, its weight under contention, its completion event. */
typedef struct {
    double end, weight;
    evq_handle done;
} res_job;

typedef struct {
    const char *name;
    double free_at;   /* when the last queued work ends */
    double busy;      /* total seconds of service */
    double bytes;     /* bytes moved (transfer resources) */
    uint64_t jobs;
    res_job *flight;  /* [head, n_flight): the jobs of res_submit_event not yet completed, FIFO */
    size_t head, n_flight, cap_flight;
} res_server;

void res_init(res_server *r, const char *name);
/* Free the in-flight array (res_complete does so when the last job leaves). */
void res_release(res_server *r);
/* Queue work of duration d (>= 0) submitted at time t; returns its end time. */
double res_submit(res_server *r, double t, double d, double bytes);
/* The same, held in flight with weight (>= 0) and its completion pushed into q as event
 * (kind, a, b) at the end time, which is returned. O(log q). */
double res_submit_event(res_server *r, evq *q, double t, double d, double bytes, double weight, uint32_t kind,
                        uint32_t a, uint32_t b);
/* The completion event e of the oldest job in flight was popped: it leaves the resource
 * (completions leave in FIFO order). */
void res_complete(res_server *r, const evq_event *e);
/* Re-rate the in-flight work ending after from for a window of span seconds beside it at
 * factor (see above): each such job's end and completion event move; free_at and busy grow
 * by how far the last one moved, which is returned (0 for factor or span <= 0). O(jobs in
 * flight x log q). */
double res_slow(res_server *r, evq *q, double from, double span, double factor);
/* When work submitted at t would start. */
static inline double res_start_at(const res_server *r, double t) { return t > r->free_at ? t : r->free_at; }
/* Busy time must not exceed the span [0, now]: -1 with dh_err() otherwise. */
int res_check(const res_server *r, double now);

#endif
