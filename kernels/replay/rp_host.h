/* rp_host.h: the host side of the GPU replay (bin/dhreplay): the selections of a
 * generated trace and the simulator's own hot buffer (sim/hotbuf.h) per (request,
 * selection group), advanced one decode position at a time.
 *
 * The replay's GPU residency kernel must classify exactly as the simulator does;
 * this module runs the simulator's hot buffer on the same deltas so that every
 * step's GPU miss counts are compared with it pair by pair (the replay stops at
 * the first difference). It also hands the GPU the full selection of every
 * (request, group) -- the trace's selection stands in for the GPU indexer's
 * top-k, whose output on random keys carries no information -- and the rows
 * the step writes (the new tokens' KV).
 *
 * Shape: the model file's layer -> group map (sim/model.h), n_requests requests
 * of prompt_len tokens and `steps` decode positions each, the generator preset
 * and seed -- the shape bin/dhsim builds for a closed batch with
 * workload.requests = n_requests and a fixed output length. Cost per step:
 * O(changed rows) in the hot buffers plus O(k) per pair to keep the full sets. */
#ifndef RP_HOST_H
#define RP_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rp_host rp_host;

typedef struct {
    const char *model_path;   /* models/NAME.ini */
    const char *preset;       /* generator preset name or path */
    uint64_t seed;
    uint32_t keyframe_interval;
    uint32_t n_requests, prompt_len, steps;
    uint32_t budget_rows;     /* hot-buffer budget B per (request, group) */
    const char *draft_path;   /* speculative: verification steps with this DFlash2 draft
                                 (models/drafts/NAME.ini); NULL: plain decode steps */
    uint32_t output_len;      /* speculative: positions of each request's stream (the
                                 simulator's workload.output_len); plain: 0 (= steps) */
} rp_host_cfg;

/* 0, or -1 with dh_err() set (bad model file, unknown preset, B < k). */
int rp_host_open(const rp_host_cfg *c, rp_host **out);
void rp_host_close(rp_host *h);

uint32_t rp_host_layers(const rp_host *h);
uint32_t rp_host_groups(const rp_host *h);
uint32_t rp_host_k(const rp_host *h);         /* k of every group (the replay needs one k) */
int32_t rp_host_layer_group(const rp_host *h, uint32_t layer);
int rp_host_layer_selects(const rp_host *h, uint32_t layer); /* 1: runs the group's indexer */
int rp_host_layer_moe(const rp_host *h, uint32_t layer);
double rp_host_row_bytes(const rp_host *h);   /* one KV row (all layers alike) */
double rp_host_indexer_heads(const rp_host *h);
double rp_host_expert_bytes(const rp_host *h);
double rp_host_experts(const rp_host *h);
double rp_host_experts_per_token(const rp_host *h);
uint32_t rp_host_moe_layers(const rp_host *h);

/* Advance every (request, group) by one position (step = position, all
 * requests aligned). Writes, with p = group * n_requests + request:
 *   sel[p * k + j]  the full selection, ascending (min(k, nrows) rows; the
 *                   replay requires nrows >= k so that it is exactly k)
 *   wfirst[p], wcnt[p]  rows written at this position (new context rows)
 *   miss[p]         the simulator's misses for this pair (one layer)
 *   nrows[request]  context rows at this position.
 * 0, 1 after the last step, or -1 with dh_err(). */
int rp_host_step(rp_host *h, int32_t *sel, int32_t *wfirst, int32_t *wcnt, uint32_t *miss, uint32_t *nrows);
/* Speculative steps (a draft given): the simulator's verification (sim/specrun.h, every
 * request verifies gamma drafts, Q = gamma + 1 queries) repeated through its own hot buffers,
 * union and acceptance, observed row by row. Per pair p = group * n_requests + request:
 *   sel[(p * Q + t) * k + j]  query t's full selection, ascending (t = 0: the base position)
 *   wfirst[p], wcnt[p]        rows written at the base position
 *   miss[p]                   the base position's misses (fetched into the hot buffer)
 *   xr[p * xr_cap + j], n_xr[p]  the union's rows outside the base selection and not resident
 *                             after it (ascending; fetched into staging); xr_cap = gamma * k
 *   cw_first, cw_cnt, c_miss [p * gamma + t - 1]  accepted draft t = 1..acc[request]: rows it
 *                             writes and its misses (served from staging), as its hot-buffer step
 * and per request: acc[r] accepted drafts, nrows[r] context rows at the base position, pos[r]
 * the base position. The rows fetched are miss[p] + n_xr[p] (the simulator's shared retrieval).
 * 0, 1 after the last step, or -1 with dh_err() (also when a request's positions left would
 * cap its verification: give output_len >= steps x Q + 1). */
typedef struct {
    int32_t *sel, *wfirst, *wcnt;
    uint32_t *miss;
    int32_t *xr;
    uint32_t *n_xr;
    int32_t *cw_first, *cw_cnt;
    uint32_t *c_miss;
    uint32_t *acc, *nrows, *pos;
} rp_spec_out;
uint32_t rp_host_gamma(const rp_host *h);   /* 0 for plain steps */
int rp_host_spec_step(rp_host *h, rp_spec_out *o);

/* The simulator's hot buffer of pair p = group * n_requests + request: is row resident, and
 * how many rows are. */
int rp_host_resident(const rp_host *h, uint32_t pair, uint32_t row);
uint32_t rp_host_n_resident(const rp_host *h, uint32_t pair);

#ifdef __cplusplus
}
#endif
#endif
