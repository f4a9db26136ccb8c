/* step.h: the timing of one decode step on one GPU, as a dependency graph of
 * layer tasks served by three resources (GPU compute, the fetch path
 * host-to-device, the write-through path device-to-host) and driven by the
 * event queue.
 *
 * The batch is split into micro-batches. For micro-batch m and layer l:
 *   IDX(m,l)   indexer over all keys of its requests (layers that select own);
 *              waits for COMP(m,l-1);
 *   FETCH(m,l) gather of the layer's missed rows from host memory; waits for
 *              the indexer of the layer's selection group (IndexShare: the
 *              group's selection is known once its first layer's indexer ran,
 *              so every layer of the group can be fetched from then on);
 *   COMP(m,l)  attention over the selected rows, projections and dense/MoE;
 *              waits for IDX(m,l), FETCH(m,l) and COMP(m,l-1);
 *   WRITE(m,l) write-through of the rows produced at layer l to host; after
 *              COMP(m,l), off the critical path.
 * IDX and COMP share the compute server, FETCH the fetch server, WRITE the
 * write-through server; each server is FIFO. With fetch_main (SGLang's
 * HiSparse) the fetch of a selecting layer is a task on the compute server
 * instead, queued when its indexer ends and before its COMP: SGLang's swap-in
 * runs on the main stream between the indexer and the attention, one block
 * per request (so min(requests, SMs) SMs in the fetch's SM table), not
 * overlapped with compute (no task when nothing misses: a batch of resident
 * requests runs SGLang's "resident" graph, without a swap-in); the layers sharing the selection replay the anchor's miss plan on the
 * fetch path (a side stream), overlapped as before. While one micro-batch computes
 * layer l, another's misses for layer l travel over PCIe. The step ends when
 * every micro-batch finished its last layer. Costs come from sim/cost.h only. */
#ifndef DH_STEP_H
#define DH_STEP_H

#include <stdint.h>

#include "sim/evq.h"
#include "sim/fmoe.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/res.h"
#include "sim/tp.h"

/* What one micro-batch brings to a step: sums over its requests, per group. */
typedef struct {
    double n_req;        /* requests */
    double tokens;       /* query tokens (requests x queries per request) */
    double *sel;         /* [groups] selected rows summed over queries (attention reads) */
    double *miss;        /* [groups] missed rows to fetch (per layer of the group) */
    double *pages;       /* [groups] distinct host pages the misses touch (per layer) */
    double *regions;     /* [groups] distinct [gather] region_bytes regions they touch, summed
                          * over the windows (0: no density term) */
    double *stage;       /* [groups] of miss, the rows a verification stages beside the hot
                          * buffer: a second fetch launch per layer, whose pages and regions are
                          * stage_pages and stage_regions (pages and regions then count the
                          * first launch's, the hot buffer's misses); NULL or 0: one launch */
    double *stage_pages, *stage_regions;
    double *idx_rows;    /* [groups] rows the indexer scores (summed over requests) */
    double *written;     /* [groups] rows written through (per kv-owning layer) */
    double window_rows;  /* rows read by each window layer (and by a layer's extra window) */
    double ctx_tokens;   /* context tokens summed over requests (a dense layer reads / compress) */
} step_mb;
/* The [groups] arrays of a step_mb (sel, miss, pages, idx_rows, written, regions, stage,
 * stage_pages, stage_regions): callers that carve them from one buffer take this many of G
 * doubles. */
#define STEP_MB_ARRAYS 9

typedef struct {
    const model_cfg *model;
    const hw_profile *hw;
    double attention_dp, moe_ep;
    double dense_bytes_per_layer;  /* weights every layer reads whatever the routing */
    double a2a_lat_s[2], a2a_gbps[2]; /* expert-parallel all-to-all per phase
                                       * (0 dispatch, 1 combine): latency, GB/s */
    double a2a_ranks_per_token;       /* GPUs one token is sent to (cost_a2a_ranks()) */
    double compute_sms;            /* SMs left to compute (fetch kernels take the rest) */
    double queries;                /* unused: the indexer takes each micro-batch's mean
                                    * query tokens per request, tokens / n_req (1 plain,
                                    * the mean verify length + 1 speculative) */
    double pre_s;                  /* compute work queued before the layer graph (the
                                    * draft pass of speculative decoding; 0 plain) */
    double pool_bytes;             /* host KV history the fetches gather from (the fitted
                                    * fetch's walk term and the [fit_range] check of
                                    * fetch_pool_bytes; 0: neither needs it) */
    /* Costs outside the replay's layers (docs/MEMORY.md, "Costs"), charged on the last
     * layer (LM head, its gathers, sampling), on the dense layers' tensor-parallel MLP
     * (gather and scatter) and on every MoE layer (the straggler factor). */
    double lm_head_bytes, lm_head_tp;  /* LM head per GPU (0: not charged) and its TP */
    double dense_mlp_tp;               /* a dense layer's MLP TP (1: replicated, no gather) */
    double sampling_s;
    double dp_gather_lat_s, dp_gather_gbps;
    double straggler_cv, straggler_factor; /* the factor: cost_straggler_factor(cv, moe_ep) */
    tp_cfg tp;                     /* tensor-parallel attention (sim/tp.h); ranks 0 or 1:
                                    * none, and every cost is the data-parallel one */
    double moe_tp;                 /* routed experts tensor-parallel over this many GPUs (cost.h
                                    * moe_tp; 0 or 1: expert-parallel over moe_ep, the all-to-all) */
    tp_cfg moe_ar;                 /* the all-reduce a TP MoE layer's collectives are costed with */
    fmoe_curve moe_fm;             /* a TP MoE's routed experts by measured time (fmoe.h); n_points
                                    * 0: their weight bytes at the fitted GEMM rate */
    int fetch_main;                /* 1: a selecting layer's fetch on the compute server (above) */
    double prefill_ranks;          /* data-parallel ranks whose prefill chunks share one
                                    * prefill iteration's experts: attention_dp when the ranks
                                    * prefill in lockstep, 1 when each prefills alone beside the
                                    * others' decode batches (prefill.h dp_hold); 0: attention_dp */
} step_ctx;

typedef struct {
    double compute_busy, fetch_busy, write_busy;
    double fetch_bytes, write_bytes;
    uint64_t events;
    double pre_busy;               /* seconds of pre_s work (draft passes) */
    hw_range_log ranges;           /* cost inputs outside the profile's [fit_range] (hw.h) */
    double fetch_slope_delta;      /* what fetch_busy would gain (or lose) had every fetch table
                                    * been extrapolated by its end slope instead of held at its end
                                    * (a report's measure of what the extrapolation moves;
                                    * cost_table_eval_slope) */
} step_stats;

/* Run one step starting at t0 over micro-batches mb[0..n_mb). Returns the
 * step's end time; adds to *st. Work is O(layers x micro-batches) events. */
double step_run(const step_ctx *cx, const step_mb *mb, uint32_t n_mb, double t0,
                res_server *gpu, res_server *h2d, res_server *d2h, evq *q, step_stats *st);

/* A cheap estimate of one step's time (seconds) for a batch shaped like m:
 * the serial sum of every layer's indexer and compute, plus cx->pre_s; fetch
 * is assumed hidden. O(layers), no events: DSpark's verify-length rule calls
 * it once per candidate total. */
/* Rows layer kind k of group g (-1: none) attends to in micro-batch m. */
double step_attn_rows(const model_kind *k, int32_t g, const step_mb *m);
/* The step's work after its last layer: the LM head with its gathers, sampling. */
double step_tail_s(const step_ctx *cx, const step_mb *m);
double step_estimate_s(const step_ctx *cx, const step_mb *m);

/* Per-task costs, exposed for tests and for reports. */
double step_indexer_s(const step_ctx *cx, const step_mb *m, uint32_t layer);
double step_fetch_s(const step_ctx *cx, const step_mb *m, uint32_t layer, double *bytes);
double step_compute_s(const step_ctx *cx, const step_mb *m, uint32_t layer);

#endif
