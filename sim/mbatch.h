/* mbatch.h: a set of micro-batch tallies (step_mb, step.h) with their
 * per-group arrays, allocated, cleared and released in one place for every
 * caller of step_run and step_estimate_s. */
#ifndef DH_MBATCH_H
#define DH_MBATCH_H

#include <stdint.h>

#include "sim/step.h"

typedef struct {
    step_mb *mb;       /* [n] */
    uint32_t n, G;
    double *store;     /* the arrays of every micro-batch, STEP_MB_ARRAYS x G each */
} mbatch;

void mbatch_init(mbatch *s, uint32_t n_mb, uint32_t n_groups);
/* Every sum back to zero (a new step). */
void mbatch_clear(mbatch *s);
void mbatch_release(mbatch *s);

#endif
