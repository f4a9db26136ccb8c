/* tp.h: tensor-parallel attention, the attention of one layer split over attn_tp GPUs.
 *
 * The model (SGLang's DeepSeek/GLM-5 MLA path with --tp N and no --enable-dp-attention, or
 * --dp D with attention TP N / D):
 *   - the attention heads are split over the ranks: each rank does 1/tp of the attention's
 *     FLOPs and of the projections' GEMM FLOPs;
 *   - the latent KV is replicated: MLA's compressed row (kv_lora + RoPE) is shared by every
 *     head, so each rank holds and reads the whole selected rows of every request of its
 *     group, and holds the whole context in its ledger and its host pool;
 *   - the DSA indexer is replicated: its projections are ReplicatedLinear in SGLang
 *     (python/sglang/srt/layers/attention/nsa/nsa_indexer.py: wq_b, wk, weights_proj), so
 *     every rank scores every key;
 *   - the attention's output projection is row-parallel: one all-reduce per layer of the
 *     group's tokens x hidden BF16 values.
 * A rank therefore sees the requests of its group: the instance's concurrency over
 * attention_dp groups, with attention_dp x attn_tp <= gpus.
 *
 * The all-reduce's cost has two forms. A table (tp_table_load): published times of one
 * all-reduce of N bytes over the group's GPUs at a list of sizes, piecewise-linear between
 * them, the first point's time below the first size, and above the last size the last point's
 * time plus the extra bytes at the bus bandwidth of large messages (models/hw/allreduce-NAME.ini
 * holds the points with their source). Or NCCL's convention (NVIDIA/nccl-tests
 * doc/PERFORMANCE.md) with a fixed latency: for n ranks, bus bandwidth = algorithm bandwidth x
 * 2 (n - 1) / n, algorithm bandwidth = bytes / time; so time = latency + bytes x 2 (n - 1) / n /
 * busbw. Latency and busbw, or the table and its curve, are instance keys (sim/sim.c). */
#ifndef DH_TP_H
#define DH_TP_H

#include "common/cfgkey.h"

#define TP_MAX_POINTS 64 /* sizes in one all-reduce curve */

typedef struct {
    double ranks;        /* attention TP ranks (1: no TP) */
    double prefill_head_multiple; /* [instance] prefill_attn_head_multiple: a rank's heads padded up to
                                   * a multiple of it in prefill attention (1: none; sim/prefill.h) */
    double lat_s;        /* all-reduce latency, seconds (the NCCL form; unused with a table) */
    double busbw_gbps;   /* all-reduce bus bandwidth, GB/s (NCCL's busbw); with a table, beyond its last size */
    int n_points;        /* 0: the NCCL form; else the table below */
    double pt_bytes[TP_MAX_POINTS]; /* message sizes, ascending */
    double pt_s[TP_MAX_POINTS];     /* one all-reduce's time at each size, seconds */
} tp_cfg;

/* Seconds for one all-reduce of bytes over c->ranks GPUs; 0 with one rank. */
double tp_allreduce_s(const tp_cfg *c, double bytes);

/* The all-reduce file's schema (models/hw/allreduce-NAME.ini; docs/CONFIG.md). */
extern const cfg_schema allreduce_schema;

/* Load curve `curve` of the all-reduce table at path (found as dh_path_find does) into c's
 * points and its busbw; the file's [allreduce] ranks must equal c->ranks. Every section and key
 * of the file is checked whichever curve is asked for. 0, or -1 with one dh_err() line naming
 * the file. */
int tp_table_load(const char *path, const char *curve, tp_cfg *c);

#endif
