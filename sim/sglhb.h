/* sglhb.h: the SGLang hot buffer -- the device buffer of one (request, selection
 * group) exactly as SGLang's HiSparse ships it (static mode), stepped by the
 * selection of each decode position.
 *
 * Source read: sgl-project/sglang at commit 010c0028f2e93000b5249dbbef967c22fc0a4cb8,
 *   python/sglang/jit_kernel/csrc/hisparse.cuh
 *       load_cache_to_device_buffer_kernel (the swap-in: fast path, hit scan,
 *       miss placement, LRU write-back, miss-plan recording) and
 *       copy_cache_planned_kernel (the IO-only replay for IndexShare layers);
 *   python/sglang/jit_kernel/hisparse.py
 *       _load_cache_to_device_buffer_mla (asserts hot_buffer_size >= num_top_k),
 *       copy_cache_planned_mla (num_blocks = 4);
 *   python/sglang/srt/managers/hisparse_coordinator.py, class HiSparseCoordinator:
 *       __init__ (padded_buffer_size, lru_slots = arange, the shared-index
 *       prefetch groups), admit_request_direct, _preload_to_device_buffer,
 *       admit_request_into_staging / collect_ready_reqs -> alloc_device_buffer,
 *       _grow_device_buffers (the newest token's slot), _eager_backup_previous_token,
 *       request_finished (lru_slots reset), _run_swap_in_kernel,
 *       _run_copy_only_kernel, swap_in_selected_pages.
 * Defaults: host_to_device_ratio 2 and swap_in_block_size 960 (HiSparseCoordinator.__init__
 * at that commit); top_k 2048 and device_buffer_size 4096 (SparseConfig in
 * python/sglang/srt/mem_cache/sparsity/core/sparse_coordinator.py, a version not
 * checked against that commit). The staging start's filled slots follow
 * admit_request_direct's docstring ("in the staging path this is correct
 * (prefill filled the buffer)"); the allocator's alloc_device_buffer was not read.
 *
 * Units. SGLang counts tokens of the (compressed) KV the indexer selects from
 * (the kernel is called with compressed_seq_lens); that is this project's row.
 * device_buffer_size is B rows; the kernel's seq_len is the stream's nrows, so
 * the newest row is nrows - 1: the trace's context is taken to include the row
 * the step's own token wrote (SGLang's seq_len - 1).
 *
 * State (per request and layer in SGLang; per selection group here, see
 * IndexShare below): padded_buffer_size = B + page_size device slots. Slots
 * 0 .. B-1 are the LRU slots, each holding one row or nothing (token -1);
 * lru_slots lists them least recent first. Slot B, the first slot of the
 * extra page, holds the newest row and is outside the LRU; the rest of that
 * page is unused by the static path.
 *
 * One position, in the kernel's terms:
 *   - Fast path: while nrows <= B, slot = row position, every selected row is
 *     on the device; no LRU work, no host loads. (Each new row is written to
 *     slot nrows - 1, _grow_device_buffers' reserved_positions clamp.)
 *   - Otherwise: the newest row, if selected, is a hit in slot B. The LRU
 *     slots are scanned least recent first; a slot whose row is selected is a
 *     hit, every other slot (empty ones included) is evictable. The m-th miss,
 *     counted in TOP-K OUTPUT ORDER, takes the m-th least recent evictable slot.
 *     The new order, least recent first: the evictable slots no miss took, in
 *     their old order; then the slots of this step's misses, in top-k order;
 *     then the hits in their old relative order (hits are not re-sorted).
 *   - The newest row is written into slot B each position and the previous
 *     newest is copied out to host (_eager_backup_previous_token). It never
 *     enters the LRU when produced, so its first later selection is a miss.
 * Cold start (the first position of the stream):
 *   - SGLHB_COLD_DIRECT (admit_request_direct: prefill wrote the KV to host):
 *     a long context (nrows > B) starts with every LRU slot empty, so the first
 *     step misses all selected rows but the newest; a short one (nrows <= B) is
 *     first preloaded whole from host (_preload_to_device_buffer): nrows rows
 *     fetched at admission, reported as `preloaded`.
 *   - SGLHB_COLD_STAGING (admit_request_into_staging, then alloc_device_buffer):
 *     the prefill KV is on the device and backed up whole to host; slots
 *     0 .. B-1 start holding rows 0 .. B-1 in LRU order 0 .. B-1.
 *   A stream that starts short reaches its first long position with rows
 *   0 .. B-1 in slots 0 .. B-1 in either mode (the fast path wrote them there).
 * IndexShare: the anchor layer runs the swap-in and records its miss plan
 * (host location -> device slot); each layer sharing its selection replays
 * the plan IO-only (copy_cache_planned) and reuses the anchor's slot table. So
 * every layer of a selection group has the same hits, misses and slots, and
 * this module keeps ONE state per (request, group) whose counts apply to each
 * layer of the group (the caller multiplies by the layers). At the commit read,
 * the anchor's swap-in runs on the main stream and the replays on a side
 * stream with 4 blocks (_prefetch_copy_blocks), overlapping the compute of
 * the layers in between; without shared-index layers every layer runs the
 * full kernel on the main stream, one block per request.
 *
 * The order of the top-k. The kernel consumes the indexer's top-k as it comes
 * out; traces store sorted sets (traces/sel.h) and do not record that order.
 * It decides only WHICH evictable slot each miss takes, hence the order of a
 * step's misses in the LRU and, through it, which of them is evicted first
 * once they leave the selection; hit and miss counts of the step itself do not
 * depend on it. sglhb_order chooses it explicitly:
 *   SGLHB_ORDER_ASCENDING  the trace's order (ascending row);
 *   SGLHB_ORDER_HASHED     a fresh pseudo-random permutation at every position,
 *                          from a counter-based key of (seed, request, group,
 *                          position, row) (sglhb_order_key): deterministic.
 * sglhb_step_topk takes the order explicitly (a recorded trace with the real
 * output order, or a test).
 *
 * Where this differs from today's idealised LRU (sim/hotbuf.h), each a cost a
 * user can switch on or off by comparing the two:
 *   1. The newest row: hotbuf writes a produced row into residency (its first
 *      selection is a hit); here it waits in slot B and is then only on the
 *      host, so a stream that keeps selecting its recent window misses about
 *      one row per position (the previous newest), a fetch at every step.
 *   2. Ties in recency: both evict the unselected row that left the selection
 *      earliest; rows leaving at the same position are ordered by ascending row
 *      in hotbuf, and here by their place in the tail: rows that entered it
 *      later are less recent (a position's misses, in top-k order, before its
 *      re-referenced hits), so the longest-selected rows are the most recent.
 *   3. The budget: B slots hold selected and unselected rows; the newest row is
 *      in slot B on top of them (hotbuf's budget counts every resident row).
 *   4. The start: hotbuf starts empty with nothing resident; here a short
 *      context needs no fetch at all (staging) or a preload of the whole context
 *      (direct), and a staging start begins with rows 0 .. B-1 resident.
 *   5. The fetch (for the step model, not this module): SGLang's swap-in runs on
 *      the main stream between the indexer and the attention (the attention
 *      backend calls swap_in_selected_pages on the indexer's top-k), one block
 *      of swap_in_block_size threads per request, not overlapped with compute;
 *      only IndexShare replays overlap (above). The policy using hotbuf
 *      overlaps every fetch.
 *   Not modelled: speculative (multi-position) steps; the commit read swaps in
 *   one position per call.
 * Where it is used: the policies sglang-hisparse (pol_sglang.c: this buffer from
 * position 0, computed ahead at admission), sglang-dynamic and sglang-watermark
 * (pol_dynamic.c: from a demotion or a hot admission on, live); their fetch is
 * placed on the compute stream by step.c (pol_ops.fetch_main). The GPU kernel of
 * the same rule is kernels/lib/residency.cu's dhk_sglang_residency_launch
 * (kernels/lib/sglang_rule.cuh, checked on the CPU by tests/test_sglang_rule.c).
 *
 * Cost. SGLHB_IMPL_SCAN does what the kernel does, O(B + k) per position (it
 * scans every slot), plus a radix sort of the selection for the hashed order
 * (sglhb_step); it is the reference. The simulator can do better and stay
 * exact: after a long position the LRU is [empty][unselected][selected], the
 * unselected rows ordered by the position at which they left the selection
 * and, within one, by their place in the tail, and the tail ordered by a key
 * fixed when a row enters it (entry position descending, then misses in top-k
 * order before re-referenced hits). So SGLHB_IMPL_QUEUE keeps the unselected
 * rows in a FIFO (like hotbuf's) and the tail as per-row keys, and touches only
 * the rows that join or leave the selection and the previous newest row:
 * O(changed rows) per position (radix sorts of the rows that move). tests/test_sglhb.c checks both against
 * the plain reference at every position (counts, miss plan, full LRU order).
 * Memory. The scan: 16 bytes per slot and 8 per context row (the kernel's
 * arrays indexed by row; it is the reference, used by tests). The queue: no
 * array over the context. Its per-row state lives in a map (sim/rowmap.h) of
 * the rows it holds or selects, at most B + the selection + the newest row,
 * 16 bytes per map slot at most 3/4 full (128 KiB for B = 4096, k = 512), plus
 * the FIFO's 16 bytes per entry (about 2B with its stale entries) and O(k)
 * scratch: a few hundred KiB per (request, group) whatever the context. With
 * dense_rows the same state is indexed by row (16 B per context row): for a
 * buffer computed alone and released (pol_sglang.c's static policy), where
 * the table is in cache and the map's probes would cost more time. Before
 * the map it kept 25 bytes per context row, in arrays doubled to a power of
 * two (3.1 MiB per stream at 125K rows: DeepSeek-V4.1-Flash's C4 groups at
 * 500K context, 10,752 streams at concurrency 512). */
#ifndef DH_SGLHB_H
#define DH_SGLHB_H

#include <stdint.h>

#include "sim/rowmap.h"
#include "traces/sel.h"

typedef enum {
    SGLHB_COLD_DIRECT = 0, /* prefill's KV on host: long contexts start with empty slots */
    SGLHB_COLD_STAGING     /* prefill's KV on device: slots 0 .. B-1 hold rows 0 .. B-1 */
} sglhb_cold;

typedef enum {
    SGLHB_ORDER_ASCENDING = 0, /* top-k order = ascending row (the trace's order) */
    SGLHB_ORDER_HASHED         /* a deterministic pseudo-random order per position */
} sglhb_order;

typedef enum {
    SGLHB_IMPL_SCAN = 0, /* the kernel's algorithm: every slot scanned, O(B + k) per position */
    SGLHB_IMPL_QUEUE     /* the same result from the delta, O(changed rows · log) per position */
} sglhb_impl;

typedef struct {
    uint32_t device_buffer_size; /* B: LRU slots, rows (SGLang's name and unit) */
    uint32_t page_size;          /* the extra page of padded_buffer_size (slot B used) */
    sglhb_cold cold;
    sglhb_order order;
    uint64_t order_seed;         /* SGLHB_ORDER_HASHED: with req and group, keys the order */
    uint32_t req, group;
    sglhb_impl impl;             /* SGLHB_IMPL_QUEUE: sglhb_step only */
    int dense_rows;              /* SGLHB_IMPL_QUEUE: 1 keeps the per-row state indexed by row
                                  * (16 B per context row, faster in cache): for a buffer
                                  * computed alone and released (sim/rowmap.h's dense layout) */
} sglhb_config;

typedef struct {
    uint32_t hits;       /* selected rows on the device: LRU hits, the newest row, all on the fast path */
    uint32_t misses;     /* selected rows copied from host into an LRU slot */
    uint32_t evicted;    /* misses whose slot held a row (not an empty slot) */
    uint32_t preloaded;  /* rows loaded at admission (direct start of a short context) */
    uint32_t fetched;    /* rows copied host -> device: misses + preloaded */
    uint32_t backed_up;  /* rows copied device -> host: the previous newest row(s); the
                          * whole context at a staging start */
    uint32_t resident;   /* rows with a device copy after the position, slot B included */
    uint8_t fast;        /* 1: the short-sequence fast path applied */
    uint8_t newest_hit;  /* 1: the newest row was selected (a hit in slot B) */
    const uint32_t *miss_rows; /* [misses] the miss plan's rows in top-k order (valid until the next step) */
} sglhb_result;

typedef struct {
    sglhb_config cfg;
    uint32_t B;
    int started, lru_ready;   /* first position seen; LRU slots initialised */
    uint32_t first_nrows;     /* context rows at the first position */
    uint32_t nrows_seen;      /* context rows at the last position */
    uint32_t last_pos;
    uint32_t n_empty;         /* LRU slots holding no row */
    /* SGLHB_IMPL_SCAN only (the kernel's arrays; the per-row ones span the context): */
    uint32_t *slot_row;       /* [B] the row in each slot, or SGLHB_EMPTY */
    uint32_t *lru;            /* [B] slots, least recent first */
    uint32_t *hit_slots, *evict_slots; /* [B] scratch of one position */
    uint32_t *row_slot;       /* [cap_rows] slot + 1 of a row, 0: not in an LRU slot */
    uint32_t *row_mark;       /* [cap_rows] stamp of the position that selects the row */
    uint32_t cap_rows, stamp;
    uint32_t *sel, *sel_next; /* the current selection, ascending (sglhb_step) */
    uint32_t *topk;           /* [cap_sel] the selection in top-k order (sglhb_step) */
    /* Both: */
    uint32_t n_sel, cap_sel;
    uint64_t *keys, *keys2;   /* [cap_sel] sort keys (keys2: queue only) */
    uint64_t *sort_k;         /* [cap_sel] scratch of sort_by_key */
    uint32_t *sort_v;
    uint32_t *miss_rows;      /* [cap_sel] */
    /* SGLHB_IMPL_QUEUE (see sglhb.c): the rows the buffer holds or selects,
     * each with a state byte and either the sequence number of its live queue
     * entry (resident, unselected) or its key in the tail (resident,
     * selected), in a map sized by those rows, not by the context. */
    rowmap rows;
    struct sglhb_qent { uint64_t seq; uint32_t row; } *q;
    uint32_t q_head, q_tail, q_cap, n_queued;
    uint64_t next_seq;
    uint32_t long_steps;      /* long positions so far: the tail keys' epoch */
    uint32_t *cand, *departed, *gone; /* [cap_sel] scratch (map slots; gone: rows) */
} sglhb;

#define SGLHB_EMPTY UINT32_MAX

/* 0, or -1 with dh_err() if device_buffer_size or page_size is 0. */
int sglhb_init(sglhb *h, const sglhb_config *cfg);
void sglhb_release(sglhb *h);
/* Forget the request (SGLang's request_finished resets lru_slots); keeps the memory. */
void sglhb_clear(sglhb *h);
/* One position from the selection in top-k output order (SGLHB_IMPL_SCAN only) (topk[0 .. n), distinct
 * rows < nrows). -1 with dh_err() if the rows repeat or leave the context, the
 * context shrinks, or n > B (SGLang asserts hot_buffer_size >= num_top_k). */
int sglhb_step_topk(sglhb *h, uint32_t pos, uint32_t nrows, const uint32_t *topk, uint32_t n,
                    sglhb_result *res);
/* One position from a stream's delta (like hotbuf_step): the selection is kept
 * from the deltas and put in the configured order. -1 with dh_err() if the
 * delta contradicts the selection. */
int sglhb_step(sglhb *h, const sel_delta *d, sglhb_result *res);
/* The order key of row at pos under SGLHB_ORDER_HASHED: the top-k order is
 * ascending key. The key is a 32-bit counter-based hash above the row, so
 * keys are distinct and equal hashes fall back to ascending row. */
uint64_t sglhb_order_key(const sglhb_config *cfg, uint32_t pos, uint32_t row);
/* Device slots allocated per layer for a context of nrows rows, as the
 * generic (MLA) path allocates them (alloc_device_buffer, _grow_device_buffers):
 * page-aligned growth while short, capped at B, and B + page_size (the padded
 * buffer) from the moment it reaches B. The DeepSeek-V4 path allocates
 * B + page_size at admission. For the HBM ledger. */
uint64_t sglhb_device_slots(const sglhb_config *cfg, uint32_t nrows);
/* The rows of the LRU slots, least recent first (SGLHB_EMPTY for an empty
 * slot), into out[0 .. B). Before the first long position: rows 0 .. B-1 (what
 * the slots will hold) or, for a direct long start, empty. For tests. */
void sglhb_lru_rows(const sglhb *h, uint32_t *out);

#endif
