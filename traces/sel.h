/* sel.h: the stream of attention selections -- the one interface between
 * producers of selections (the synthetic generator, gen.h; the HDF5 trace
 * reader, trace.h) and their consumers (the simulator, dhtrace stats, the GPU
 * replay).
 *
 * Vocabulary (docs/DESIGN.md section 2). A trace describes n_requests requests of
 * one model. The model's n_layers layers fall into n_groups *selection groups*:
 * layers of one group share one top-k selection (GLM-5.x IndexShare: one
 * indexer per 4 layers). Group g selects group_k[g] rows per query token; its
 * rows are KV entries of group_compress[g] tokens each (1 = one row per token,
 * as in MLA/DSA; DeepSeek-V4 compressed layers have more).
 *
 * For request r and group g there is one *stream*: the selection at each
 * decode position pos = 0 .. output_len[r]-1. At position pos the context
 * holds ctx = prompt_len[r] + pos tokens, i.e. nrows = ceil(ctx / compress)
 * rows, indices 0 .. nrows-1, and the selection has min(k, nrows) distinct
 * rows. Consecutive selections overlap heavily, so a stream is delivered as
 * deltas: rows added and rows removed against the previous position (at
 * pos 0, added is the whole selection). Every keyframe_interval positions
 * (and at pos 0) the delta is a *keyframe* and also carries the full set.
 *
 * Consumers do work proportional to the rows that change, never to k: rows
 * that persist need no attention from a residency policy (docs/DESIGN.md section 4).
 *
 * Determinism: a stream's content depends only on (source, r, g); streams may
 * be opened and read in any order and on any thread. */
#ifndef DH_SEL_H
#define DH_SEL_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_FORMAT_VERSION 1

/* The shape of a workload: enough to generate or to size a simulation. */
typedef struct {
    char model[64];
    uint32_t n_requests;
    uint32_t n_layers, n_groups;
    uint32_t *layer_group;    /* [n_layers]: the selection group each layer uses */
    uint32_t *group_k;        /* [n_groups]: rows selected per query token */
    uint32_t *group_compress; /* [n_groups]: tokens per row (1 = none) */
    uint32_t *prompt_len;     /* [n_requests] tokens before the first decode position */
    uint32_t *output_len;     /* [n_requests] decode positions in the stream */
} trace_shape;

/* Everything a trace file's attributes hold. */
typedef struct {
    uint32_t format_version;
    trace_shape shape;
    uint32_t keyframe_interval; /* positions between keyframes (>= 1) */
    uint64_t seed;
    char generator[64];         /* e.g. "dhgen" or "recorded" */
    char preset[64];            /* preset name ("" if none) */
    char *generator_params;     /* the full preset as INI text (owned; may be NULL) */
} trace_meta;

/* One position of one stream. Arrays are owned by the stream and stay valid
 * until the next sel_next() or sel_close() on it. All index arrays are sorted
 * ascending and hold distinct values. */
typedef struct {
    uint32_t pos;        /* decode position */
    uint32_t nrows;      /* rows in the context at this position */
    uint32_t n_sel;      /* size of the selection after this delta */
    int keyframe;        /* 1: full[] holds the whole selection */
    uint32_t n_added, n_removed;
    const uint32_t *added, *removed;
    const uint32_t *full; /* NULL unless keyframe */
} sel_delta;

typedef struct sel_source sel_source;
typedef struct sel_stream sel_stream;

/* Producers fill one of these; consumers use the functions below. */
typedef struct {
    int (*open)(sel_source *src, uint32_t req, uint32_t group, sel_stream **out);
    int (*next)(sel_stream *s, sel_delta *d);
    void (*close)(sel_stream *s);
    void (*free)(sel_source *src);
} sel_source_ops;

struct sel_source {
    const sel_source_ops *ops;
    trace_meta meta;
    void *impl;
};

static inline const trace_meta *sel_meta(const sel_source *s) { return &s->meta; }
/* Open the stream of (req, group). 0 or -1 with dh_err() set. */
static inline int sel_open(sel_source *s, uint32_t req, uint32_t group, sel_stream **out)
{
    return s->ops->open(s, req, group, out);
}
/* Next position: 0 with *d filled, 1 at the end of the stream, -1 on error
 * (a corrupt or inconsistent trace: the message names the dataset and position). */
static inline int sel_next(sel_stream *st, sel_delta *d);
static inline void sel_close(sel_stream *st);
static inline void sel_source_free(sel_source *s) { if (s) s->ops->free(s); }

/* Every stream starts with a pointer to its source's ops so the inline
 * dispatchers above can reach them. */
typedef struct { const sel_source_ops *ops; } sel_stream_head;
static inline int sel_next(sel_stream *st, sel_delta *d) { return ((sel_stream_head *)st)->ops->next(st, d); }
static inline void sel_close(sel_stream *st) { if (st) ((sel_stream_head *)st)->ops->close(st); }

/* Helpers shared by producers and consumers (sel.c). */
uint32_t sel_rows_at(const trace_shape *sh, uint32_t req, uint32_t group, uint32_t pos);
int trace_shape_copy(trace_shape *dst, const trace_shape *src);
void trace_shape_release(trace_shape *sh);
void trace_meta_release(trace_meta *m);
/* Checks internal consistency (group indices in range, k >= 1, ...). */
int trace_shape_validate(const trace_shape *sh);
/* A uniform shape: every request with the same prompt and output length,
 * layers grouped in runs of group_every (IndexShare), one k. */
int trace_shape_uniform(trace_shape *sh, const char *model, uint32_t n_requests, uint32_t n_layers,
                        uint32_t group_every, uint32_t k, uint32_t prompt_len, uint32_t output_len);

#endif
