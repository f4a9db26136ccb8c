/* pol.h: residency policies, behind one table of operations, and the
 * streams they follow, one per (request, selection group).
 *
 * A policy (pol_ops) decides what a request reserves in the HBM ledger when
 * it is admitted, how many rows its hot buffers may hold, whether that budget
 * follows spare HBM, and how each of its streams is opened and stepped. The
 * run loop (sim.c), the admission (admit.c) and the classification only call
 * these operations and read the policy's properties; adding a policy is one
 * file (see pol_hisparse.c for the shortest) plus its line in pol.c's
 * registry, or pol_register() at run time.
 *
 * The built-in policies:
 *   resident  every row on GPU: all selected rows are hits, nothing is
 *             fetched or written through (there is no host tier); the
 *             stream is not even read, since n_sel = min(k, rows) is known.
 *   hisparse  an idealised LRU hot buffer with the fetch overlapped (alias
 *             ideal-lru): one fixed budget B per (request, layer) (hotbuf.h),
 *             the host holding every row, a produced row resident at once, and
 *             the fetch on its own path beside compute. The miss sequence is a
 *             pure function of the stream, so it is computed ahead for the
 *             request's horizon when the request is admitted (cache-hot).
 *   adaptive  the same LRU hot buffer, but its budget is k + E where E, the
 *             optional rows, is set every step from spare HBM (and cut first
 *             when a new request needs memory).
 *   oracle    Belady MIN at the hisparse budget (belady.h), computed ahead
 *             from the whole stream when the request is admitted.
 * All four apply the same rules (new rows produced on the GPU enter
 * residency; position 0 starts with nothing resident except under resident).
 * And SGLang's HiSparse as it ships (pol_sglang.c, sglhb.h), whose fetch runs
 * on the compute stream (pol_ops.fetch_main):
 *   sglang-hisparse   the static hot buffer: device_buffer_size rows per
 *             (request, layer) plus the newest row's slot, the kernel's order;
 *   sglang-dynamic    every request resident with a host backup until the pool
 *             runs short, then demoted to the hot buffer largest first;
 *   sglang-watermark  resident or hot buffer decided at admission by the pool's
 *             high and low watermarks (demotion as dynamic when still short).
 *
 * A stream is followed in one of four modes (pol_mode), whichever policy
 * opened it: counted only, LRU or MIN computed ahead, or a live LRU buffer
 * stepped one position at a time (which speculative verification and the GPU
 * replay need, as they look inside the buffer). */
#ifndef DH_POL_H
#define DH_POL_H

#include <stdint.h>

#include "sim/belady.h"
#include "sim/hotbuf.h"
#include "sim/sglhb.h"
#include "sim/model.h"
#include "traces/sel.h"

/* A policy's index in the registry. The built-in ones come first, in this
 * order; pol_register() hands out the indices after them. */
typedef enum {
    POL_RESIDENT = 0, POL_HISPARSE, POL_ADAPTIVE, POL_ORACLE,
    POL_SGLANG_HISPARSE, POL_SGLANG_DYNAMIC, POL_SGLANG_WATERMARK, POL_N
} pol_kind;
/* Most policies the registry holds (built-in and registered). */
#define POL_MAX 16

/* How a stream is followed. */
typedef enum {
    POL_COUNT = 0,   /* nothing is read: n_sel = min(k, rows), every row a hit */
    POL_AHEAD_LRU,   /* LRU misses at a fixed budget, computed for the horizon at open */
    POL_AHEAD_MIN,   /* Belady MIN at a fixed budget, computed for the horizon at open */
    POL_LIVE_LRU     /* a live LRU hot buffer (buf), stepped position by position */
} pol_mode;

typedef struct {
    uint32_t nrows;    /* context rows at this position */
    uint32_t n_sel;    /* selected rows */
    uint32_t hits, misses, written, evicted;
    uint32_t resident; /* rows resident after the position (0 for resident: all) */
    uint32_t miss_regions; /* distinct host regions of the misses; 0: not counted (oracle, or
                            * rows_per_region 0) */
} pol_out;

/* A live stream reads its stream a few positions ahead of the simulation: the
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
    pol_mode mode;
    uint32_t req, group, k, compress;
    uint32_t prompt_len;
    uint32_t pos;             /* next position */
    sel_stream *st;           /* live */
    pol_ahead ahead;          /* live: positions read ahead */
    hotbuf buf;               /* live (ahead LRU only while computing ahead) */
    belady_seq seq;           /* ahead: per-position results */
    void *priv;               /* a policy's own state (pol_sglang.c), freed by its close */
} pol_stream;

/* Open the stream of (req, group) in the given mode. The ahead modes compute
 * npos positions at once (MIN with scratch w). budget is in rows;
 * rows_per_region > 0 counts the misses' host regions (hotbuf_set_regions;
 * not for MIN). */
int pol_stream_open(pol_stream *ps, pol_mode mode, sel_source *src, const trace_shape *sh,
                    uint32_t req, uint32_t group, uint32_t budget, uint32_t npos, belady_work *w,
                    double rows_per_region);
/* The next position. -1 with dh_err() (the message names request and group). */
int pol_stream_next(pol_stream *ps, const trace_shape *sh, pol_out *out);
void pol_stream_close(pol_stream *ps);

/* ---- policies ---------------------------------------------------------- */

/* The [policy] settings of the SGLang policies (sim.h lists the keys and
 * their sources). */
typedef struct {
    uint32_t device_buffer_size;  /* LRU slots per (request, layer), rows (SGLang's name and unit) */
    uint32_t page_size;           /* the KV pool's page (the padded buffer's extra page) */
    int cold;                     /* sglhb_cold: how a request's buffer starts */
    int order;                    /* sglhb_order: the top-k order the kernel sees */
    double high_watermark, low_watermark; /* sglang-watermark: of the device KV pool */
    double pool_bytes;            /* the device KV pool: HBM less weights and workspace (admit.c) */
    uint64_t order_seed;          /* SGLHB_ORDER_HASHED: the run's seed (admit.c) */
} pol_sglang_cfg;

/* What a policy sees of the run: the model, the [policy] settings, the fixed
 * budget they imply and, for a policy whose budget follows spare HBM, the
 * optional rows it last chose. */
typedef struct {
    const model_cfg *model;
    double budget_k;            /* [policy] hisparse_budget_k */
    double max_optional_k;      /* [policy] adaptive_max_optional_k (0: no cap) */
    uint32_t *budget;           /* [groups] the fixed budget B = ceil(budget_k x k) */
    uint32_t optional_rows;     /* E, set by rebalance (0 for a fixed budget) */
    pol_sglang_cfg sgl;         /* the SGLang policies' settings */
    /* The SGLang dynamic policies' state: the spare bytes of the last rebalance
     * (at an admission: with the new request charged), whether admission is in
     * hot-buffer mode (watermark), and the demotions so far. */
    double sgl_used;            /* device KV pool bytes in use, residents' rows included */
    int sgl_admit_hot;
    uint32_t sgl_demotions;
} pol_env;

/* How one stream is to be opened (pol_ops.open). */
typedef struct {
    sel_source *src;
    const trace_shape *sh;
    uint32_t req, group;
    uint32_t horizon;           /* positions the run can still use of it */
    belady_work *bw;            /* scratch for MIN */
    double rows_per_region;     /* > 0: count the misses' host regions */
    int live;                   /* 1: a live buffer is needed (speculative verification) */
} pol_open_args;

typedef struct {
    const char *name;
    /* 1: rows live on the host and misses are fetched (the fetch kernel holds
     * its SMs, rows are written through, verification stages its union);
     * 0: every row is on the GPU. */
    int host_tier;
    /* 1: the fetch of a selecting layer runs on the compute stream between
     * its indexer and its attention, one block per request, not overlapped
     * (SGLang's swap-in); the layers sharing its selection replay the miss
     * plan on the fetch path (step.h). 0: every fetch on the fetch path. */
    int fetch_main;
    /* What the policy is, in a line (for --help and the docs). */
    const char *what;
    /* Why the policy does not run with speculative decoding (NULL: it does). */
    const char *no_spec;
    /* The [policy] keys its results depend on, space-separated ("" for none);
     * it never reads the others, so a sweep reuses one run of it across
     * their values (sweep/swrun.c; tests/test_knobs.c checks every
     * claim). NULL: it may read any of them. */
    const char *knobs;
    /* 1: the policy demotes resident requests to the hot buffer (pol_env.sgl_demotions counts them). */
    int demotes;
    /* 1: open() of different streams may run at the same time on other threads (it reads the
     * env only, and uses pol_open_args.bw as its own thread's scratch), so an admission opens
     * a request's groups on the threads idle at that moment (common/cores.h). */
    int open_parallel;
    /* Ledger bytes of group g of a request whose final context has rows rows:
     * added to the protected and optional categories. */
    void (*reserve)(const pol_env *e, uint32_t g, double rows, double *prot, double *opt);
    /* The hot budget in rows of one (request, group g) now; 0 without a hot buffer. */
    double (*budget)(const pol_env *e, uint32_t g);
    /* A budget that follows spare HBM (NULL: fixed): share spare_bytes over
     * n_req requests (the n active ones, whose streams are ps[0..n), and
     * those about to be admitted), setting every active buffer's budget. */
    int (*rebalance)(pol_env *e, double spare_bytes, uint32_t n_req, pol_stream *const *ps, uint32_t n);
    /* With rebalance: the bytes the active buffers hold beyond the protected k rows. */
    double (*optional_bytes)(const pol_env *e, pol_stream *const *ps, uint32_t n);
    int (*open)(const pol_env *e, pol_stream *ps, const pol_open_args *a);
    int (*next)(pol_stream *ps, const trace_shape *sh, pol_out *o);
    void (*close)(pol_stream *ps);
} pol_ops;

/* Open one request's streams ps[0 .. G), group g with base's arguments, group = g and
 * rows_per_region[g]. A policy with open_parallel opens them on the threads idle at this
 * moment as well (common/cores.h; each with its own MIN scratch), the results the same as
 * one thread's. 0, or -1 with dh_err() of the lowest group that failed, nothing left open. */
int pol_open_groups(const pol_ops *pol, const pol_env *e, pol_stream *ps, uint32_t G, const pol_open_args *base,
                    const double *rows_per_region);

/* The registered policy of that index, or NULL. */
const pol_ops *pol_ops_of(pol_kind kind);
/* Its name ("?" for an index with no policy). */
const char *pol_name_of(pol_kind kind);
/* Parse a policy name (or an alias: ideal-lru for hisparse); -1 with dh_err() if unknown. */
int pol_parse(const char *name, pol_kind *out);
/* 1 unless kind's pol_ops.knobs leaves out the [policy] key key (then its
 * results do not depend on it). */
int pol_reads_knob(pol_kind kind, const char *key);
/* Add a policy (before any run: the registry is not locked); *kind is its
 * index. -1 with dh_err() when the name is taken or the registry is full. */
int pol_register(const pol_ops *ops, pol_kind *kind);

/* pol_env over model with the given [policy] settings (B computed per group). */
void pol_env_init(pol_env *e, const model_cfg *m, double budget_k, double max_optional_k);
void pol_env_release(pol_env *e);

/* Shared pieces the built-in policies are made of. */
/* Reserve k protected rows and the fixed budget's B - k further slots. */
void pol_reserve_fixed(const pol_env *e, uint32_t g, double rows, double *prot, double *opt);
double pol_budget_fixed(const pol_env *e, uint32_t g);

extern const pol_ops pol_resident_ops, pol_hisparse_ops, pol_adaptive_ops, pol_oracle_ops;
extern const pol_ops pol_sglang_hisparse_ops, pol_sglang_dynamic_ops, pol_sglang_watermark_ops;

#endif
