/* pol.h: residency policies over one (request, selection group) stream.
 *
 *   resident  every row on GPU: all selected rows are hits, nothing is
 *             fetched or written through (there is no host tier); the
 *             stream is not even read, since n_sel = min(k, rows) is known.
 *   hisparse  LRU hot buffer with one fixed budget B per (request, layer)
 *             (hotbuf.h); the host holds every row. The miss sequence is a pure
 *             function of the stream, so it is computed ahead for the
 *             request's horizon when the request is admitted (cache-hot).
 *   adaptive  the same LRU hot buffer, but its budget is k + E where E, the
 *             optional rows, is set every step by the simulator from spare
 *             HBM (and cut first when a new request needs memory).
 *   oracle    Belady MIN at the hisparse budget (belady.h), computed ahead
 *             from the whole stream when the request is admitted.
 * All four apply the same rules (new rows produced on the GPU enter
 * residency; position 0 starts with nothing resident except under resident). */
#ifndef DH_POL_H
#define DH_POL_H

#include <stdint.h>

#include "sim/belady.h"
#include "sim/hotbuf.h"
#include "traces/sel.h"

typedef enum { POL_RESIDENT = 0, POL_HISPARSE, POL_ADAPTIVE, POL_ORACLE, POL_N } pol_kind;

extern const char *const pol_name[POL_N];
/* Parse a policy name; -1 with dh_err() if unknown. */
int pol_parse(const char *name, pol_kind *out);

typedef struct {
    uint32_t nrows;    /* context rows at this position */
    uint32_t n_sel;    /* selected rows */
    uint32_t hits, misses, written, evicted;
    uint32_t resident; /* rows resident after the position (0 for resident: all) */
    uint32_t miss_regions; /* distinct host regions of the misses; 0: not counted (oracle, or
                            * rows_per_region 0) */
} pol_out;

/* Adaptive reads its stream a few positions ahead of the simulation: the
 * selections do not depend on the policy, and generating several positions
 * of one stream in a row keeps the generator's state in cache, where one
 * position per stream per step across hundreds of streams does not. */
#define POL_READ_AHEAD 8

typedef struct {
    uint32_t n, next;                 /* positions held, next to hand out */
    sel_delta d[POL_READ_AHEAD];      /* added/removed point into rows; full is NULL */
    uint32_t *rows;
    size_t cap;
} pol_ahead;

typedef struct {
    pol_kind kind;
    uint32_t req, group, k, compress;
    uint32_t prompt_len;
    uint32_t pos;             /* next position */
    sel_stream *st;           /* adaptive */
    pol_ahead ahead;          /* adaptive: positions read ahead */
    hotbuf buf;                   /* adaptive (hisparse only while computing ahead) */
    belady_seq seq;           /* hisparse, oracle: per-position results */
} pol_stream;

/* Open the stream of (req, group). For hisparse and oracle, npos positions
 * are computed at once (oracle with scratch w). budget is in rows;
 * rows_per_region > 0 counts the misses' host regions (hotbuf_set_regions; not for the oracle). */
int pol_stream_open(pol_stream *ps, pol_kind kind, sel_source *src, const trace_shape *sh,
                    uint32_t req, uint32_t group, uint32_t budget, uint32_t npos, belady_work *w,
                    double rows_per_region);
/* The next position. -1 with dh_err() (the message names request and group). */
int pol_stream_next(pol_stream *ps, const trace_shape *sh, pol_out *out);
void pol_stream_close(pol_stream *ps);

#endif
