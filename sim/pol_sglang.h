/* pol_sglang.h: the stream of one (request, group) under SGLang's HiSparse,
 * shared by the static policy (pol_sglang.c) and the dynamic ones
 * (pol_dynamic.c): either resident (every row on the device, a host backup
 * of each row that stops being the newest) or in hot-buffer mode (sglhb.h),
 * switching once from the first to the second (a demotion). */
#ifndef DH_POL_SGLANG_H
#define DH_POL_SGLANG_H

#include <stdint.h>

#include "sim/pol.h"
#include "sim/sglhb.h"

typedef struct {
    const trace_shape *sh;
    sglhb_config hcfg;
    sglhb h;
    int hot;                    /* 1: hot-buffer mode (h initialised, or its results computed ahead) */
    int ahead;                  /* 1: the results of positions [seq_base, seq_base + npos) are in seq,
                                 * h and the sel_stream are released */
    int demote;                 /* 1: switch to hot-buffer mode at the next position */
    uint32_t demoted_at;        /* the position of the switch (UINT32_MAX: never) */
    int started;
    uint32_t prev_nrows;        /* context rows at the last position */
    uint32_t *sel, *sel_next;   /* resident: the selection, ascending */
    uint32_t n_sel, cap_sel;
    uint32_t *scratch;          /* [cap_sel] scratch */
    double rows_per_region;
    uint32_t *reg_mark, cap_reg, reg_stamp; /* the misses' host regions (stamped per position) */
    /* Ahead: per-position results, positions [seq_base, seq_base + npos); computed as soon as
     * the buffer is fixed for good (the static policy's admission, a hot admission, a demotion:
     * never promoted back), while the stream's state is in cache. */
    uint32_t horizon;           /* positions the run can use (pol_open_args.horizon) */
    uint32_t seq_base, npos;
    pol_out *seq;
} sgl_stream;

/* How a stream starts: resident (stepped live), or in hot-buffer mode with its state indexed
 * by row, to be computed ahead alone and then released (sgl_stream_open_ahead). */
enum { SGL_OPEN_RESIDENT = 0, SGL_OPEN_HOT_AHEAD = 2 };
/* Open ps's private state for (a->req, a->group) as `how` says (SGL_OPEN_*),
 * and the sel_stream itself (ps->st). 0 or -1 with dh_err(). */
int sgl_stream_open(const pol_env *e, pol_stream *ps, const pol_open_args *a, int how);
/* sgl_stream_open in hot-buffer mode, the whole horizon computed at once (the buffer is
 * fixed from the start: the static policy, a hot admission). 0 or -1 with dh_err(). */
int sgl_stream_open_ahead(const pol_env *e, pol_stream *ps, const pol_open_args *a);
/* The next position: from the results computed ahead, else live (reads ps->st). */
int sgl_stream_step(pol_stream *ps, const trace_shape *sh, pol_out *o);
void sgl_stream_close(pol_stream *ps);
/* Device slots of the hot buffer of group g for a context of rows rows (sglhb_device_slots). */
double sgl_slots(const pol_env *e, uint32_t g, double rows);

#endif
