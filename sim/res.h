/* res.h: resources that serve work over simulated time.
 *
 * A resource (the GPU's compute, the fetch path host-to-device, the
 * write-through path device-to-host) is a non-preemptive FIFO server: work
 * submitted at time t with duration d starts at max(t, the end of the work
 * already queued) and occupies the server for d seconds. Separate resources
 * run concurrently, which is how fetch and compute overlap. Each resource
 * counts its busy time and bytes so that utilisation can be reported and the
 * invariant "no resource busy longer than the simulated time" checked. */
#ifndef DH_RES_H
#define DH_RES_H

#include <stdint.h>

typedef struct {
    const char *name;
    double free_at;   /* when the last queued work ends */
    double busy;      /* total seconds of service */
    double bytes;     /* bytes moved (transfer resources) */
    uint64_t jobs;
} res_server;

void res_init(res_server *r, const char *name);
/* Queue work of duration d (>= 0) submitted at time t; returns its end time. */
double res_submit(res_server *r, double t, double d, double bytes);
/* Busy time must not exceed the span [0, now]: -1 with dh_err() otherwise. */
int res_check(const res_server *r, double now);

#endif
