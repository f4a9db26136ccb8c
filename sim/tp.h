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
 * The all-reduce's cost is NCCL's convention (NVIDIA/nccl-tests doc/PERFORMANCE.md): for n
 * ranks, bus bandwidth = algorithm bandwidth x 2 (n - 1) / n, algorithm bandwidth = bytes /
 * time; so time = latency + bytes x 2 (n - 1) / n / busbw. Latency and busbw are instance
 * keys (sim/sim.h) with their sources there. */
#ifndef DH_TP_H
#define DH_TP_H

typedef struct {
    double ranks;        /* attention TP ranks (1: no TP) */
    double lat_s;        /* all-reduce latency, seconds */
    double busbw_gbps;   /* all-reduce bus bandwidth, GB/s (NCCL's busbw) */
} tp_cfg;

/* Seconds for one all-reduce of bytes over c->ranks GPUs; 0 with one rank. */
double tp_allreduce_s(const tp_cfg *c, double bytes);

#endif
