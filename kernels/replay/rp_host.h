/* rp_host.h: the host side of the GPU replay (bin/dhreplay): the selections of a
 * generated trace and the simulator's own hot buffer (sim/hb.h) per (request,
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
/* The simulator's hot buffer of pair p = group * n_requests + request: is row resident, and
 * how many rows are. */
int rp_host_resident(const rp_host *h, uint32_t pair, uint32_t row);
uint32_t rp_host_n_resident(const rp_host *h, uint32_t pair);

#ifdef __cplusplus
}
#endif
#endif
