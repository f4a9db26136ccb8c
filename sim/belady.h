/* belady.h: Belady's MIN replacement for one (request, selection group)
 * stream, the oracle policy's lower bound on misses at a fixed budget.
 *
 * With a fixed budget the miss sequence of a stream is a pure function of the
 * stream, so it is computed ahead of the timed simulation, one stream at a
 * time: read the stream's deltas (positions 0 .. npos-1), walk them backwards
 * to find every row's next use, then replay forwards evicting, whenever the
 * buffer is over budget, the unselected resident row whose next use is
 * furthest away (never used again = infinitely far; ties evict the larger row
 * index, as traces/stats.h does). The same rules as the LRU hot buffer
 * (hotbuf.h) apply otherwise: the selection is protected, rows new in the context
 * are written on the GPU and enter residency, position 0 starts empty.
 *
 * Cost: memory O(rows changed over the stream + context rows) for the one
 * stream being computed; time O(changes · log changes). */
#ifndef DH_BELADY_H
#define DH_BELADY_H

#include <stdint.h>

#include "traces/sel.h"

typedef struct {
    uint32_t npos;
    uint32_t *n_sel, *misses, *written, *evicted; /* [npos] */
    uint32_t *miss_regions;                       /* [npos] or NULL: not counted */
} belady_seq;

/* Scratch reused across streams (one per thread). */
typedef struct belady_work belady_work;
belady_work *belady_work_new(void);
void belady_work_free(belady_work *w);

/* Read up to npos positions of st (fewer if the stream ends) and fill *out
 * (arrays owned by out; free with belady_seq_release). 0 or -1 with dh_err(). */
int belady_run(belady_work *w, sel_stream *st, uint32_t npos, uint32_t budget, belady_seq *out);
void belady_seq_release(belady_seq *s);

#endif
