/* memsrc.h: a sel_source (sel.h) built from selections held in memory.
 *
 * Tests of anything that consumes selections (the trace writer, the
 * simulator's policies, the statistics) need a source whose content they
 * spell out by hand. A memsrc is given the full selection of every
 * (request, group, position) and delivers what every source delivers: the
 * true deltas between consecutive positions (sorted added and removed rows),
 * with the full set on keyframes (position 0 and every keyframe_interval
 * positions).
 *
 *   sel_source *src;
 *   memsrc_new(&shape, 4, 7, &src);                 // keyframe interval 4, seed 7
 *   memsrc_put(src, r, g, pos, rows, n);            // for every position of every stream
 *   ... sel_open(src, r, g, &st) ... sel_source_free(src);
 *
 * memsrc does not validate what it is given (a test may plant a fault, such as
 * a selection of the wrong size, to show that a consumer rejects it); given
 * unsorted rows its deltas are meaningless but memory-safe. A position never
 * put has an empty selection. Cost: memory holds every full selection, so it
 * is for small hand-built workloads only; a delta costs O(k) to compute. */
#ifndef DH_MEMSRC_H
#define DH_MEMSRC_H

#include "traces/sel.h"

/* A source of shape sh (copied) with every selection empty. 0 or -1. */
int memsrc_new(const trace_shape *sh, uint32_t keyframe_interval, uint64_t seed, sel_source **out);
/* Set the full selection of (req, group) at pos to rows[0..n) (copied). */
void memsrc_put(sel_source *src, uint32_t req, uint32_t group, uint32_t pos, const uint32_t *rows, uint32_t n);

#endif
