/* dhk.h: the kernel library's launch API (kernels/lib/, built once as build/kernels/libdhk.a
 * and linked by bin/dhbench and bin/dhreplay).
 *
 * The library holds the kernels the GPU replay runs by default and the benchmarks' recorded
 * choice: the miss fetch (fetch version 5), the hot-buffer residency with the rows a decode step
 * writes (the replay's classification), the indexer's scoring (indexer version 5, wgmma), the
 * top-k (version 6), the sparse decode attention (versions 23, 28, 31 and 8, wgmma, with their split combine) and
 * the dense GEMMs (cuBLASLt plans). The numbered experimental versions of each kernel, their
 * CPU-checked benchmarks and their timing live in kernels/versions/; a version that is in the
 * library is reached there through this API, so both tools run the same instructions.
 *
 * Conventions: every function is dhk_*; a launch takes its stream last; a failed CUDA or
 * cuBLAS call (cudaCheck, cublasCheck) or a failed launch (CUDA_LAUNCH_CHECK, after every
 * launch) prints one line with file and line and exits, as a benchmark or the replay cannot
 * go on after one. Arguments that a launch cannot take (a shape that is not built) are the
 * caller's to check first: dhk_indexer_supports, dhk_residency_smem_bytes. */
#ifndef DHK_H
#define DHK_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/lib/attention.cuh"

/* ---- errors ---- */

#define cudaCheck(call) dhk_cuda_check((call), #call, __FILE__, __LINE__)
#define CUDA_LAUNCH_CHECK() dhk_cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
#define cublasCheck(call) dhk_cublas_check((call), #call, __FILE__, __LINE__)
/* Both print "PROGRAM: FILE:LINE: CALL: ERROR" and exit 1 when the status is not success. */
void dhk_cuda_check(cudaError_t err, const char *what, const char *file, int line);
void dhk_cublas_check(cublasStatus_t st, const char *what, const char *file, int line);

/* ---- architecture ----
 * The library's generic units are built for every architecture of the Makefile's CUDA_ARCHS
 * (dhk_built_archs: "80 86 89 90 100 120"), the wgmma units for sm_90a. dhk_code_arch is the
 * architecture the generic code that runs on the current GPU was compiled for (its
 * __CUDA_ARCH__ / 10: 80 for an A10 running sm_80 code, 90 on an H200), or -1 with *err set
 * when the binary holds no code for the GPU (cudaErrorNoKernelImageForDevice: rebuild with its
 * architecture in CUDA_ARCHS). kernels/karch.h decides from it which versions run. */
int dhk_code_arch(cudaError_t *err);
const char *dhk_built_archs(void);

/* ---- miss fetch (fetch version 5) ----
 * hot[slots[i] * hot_stride ..] = pool[rows[i] * pool_stride ..], row_bytes each, for i < n, on
 * sms SMs (one 512-thread block per SM): consecutive list entries on consecutive warps, 4 rows
 * in flight per warp. pool is a device pointer (a mapped pinned host pool, or device memory);
 * row_bytes, pool_stride and hot_stride must be multiples of 16 and row_bytes at most 1536. */
enum { DHK_FETCH_VERSION = 5 };
void dhk_fetch_launch(const uint8_t *pool, size_t pool_stride, const int64_t *rows, const int32_t *slots, int n,
                      int row_bytes, uint8_t *hot, size_t hot_stride, int sms, cudaStream_t stream);

/* ---- hot-buffer residency (the simulator's policy, sim/hotbuf.h, with the written rows) ----
 * One block per (request, group) pair p < pairs: the pair's B-slot LRU hot buffer (slot_row,
 * slot_last: stride slots per pair; row_slot: win rows per pair) classifies the pair's k
 * selected rows (sel, ascending), gives every miss a victim slot and takes in the wcnt[p] rows
 * written at this step from wfirst[p] (at most DHK_RES_WMAX). Outputs per pair: sel_slot (the
 * global slot p * stride + slot of every selected row), the misses (miss_rows, miss_slots,
 * ascending rows) and n_miss[p], -1 when the selection does not fit the budget. active (NULL:
 * every pair) skips the pairs with active[p] == 0. step must grow from one call to the next
 * for each pair (the LRU stamp). The policy is exactly kref_lru_key()'s order (kernels/kref.h);
 * dhreplay checks every pair's misses against the simulator's hot buffer at every step. */
enum { DHK_RES_THREADS = 1024, DHK_RES_WMAX = 64 };
/* Dynamic shared memory of one block for budgets up to B and k selected rows. */
size_t dhk_residency_smem_bytes(int B, int k);
/* Allows launches with up to smem bytes of dynamic shared memory; once, before the first. */
void dhk_residency_setup(size_t smem);
void dhk_residency_launch(int pairs, int B, int stride, int k, int win, int32_t step, const int32_t *active,
                          const int32_t *sel, const int32_t *wfirst, const int32_t *wcnt, int32_t *slot_row,
                          int32_t *slot_last, int32_t *row_slot, int32_t *sel_slot, int32_t *miss_rows,
                          int32_t *miss_slots, int32_t *n_miss, size_t smem, cudaStream_t stream);

/* ---- SGLang's hot buffer (sim/sglhb.h; the steps of kernels/lib/sglang_rule.cuh) ----
 * One block per pair p < pairs: the pair's B LRU slots (lru, slot_row: B per pair; row_slot,
 * row_mark: win rows per pair, started with sglr_pair_init) take the n_sel[p] selected rows of
 * topk (k per pair, in the indexer's output order) at a context of nrows[p] rows: the fast path
 * while nrows <= B, else the kernel's hit scan, miss placement and LRU write-back. Outputs per
 * pair: sel_slot (B for the newest row), the misses in top-k order (miss_rows, miss_slots),
 * n_miss and n_evicted. stamp must change from one call to the next. */
size_t dhk_sglang_residency_smem_bytes(int B);
void dhk_sglang_residency_setup(size_t smem);
void dhk_sglang_residency_launch(int pairs, int B, int k, int win, uint32_t stamp, const int32_t *topk,
                                 const int32_t *n_sel, const int32_t *nrows, int32_t *lru, int32_t *slot_row,
                                 int32_t *row_slot, uint32_t *row_mark, int32_t *sel_slot, int32_t *miss_rows,
                                 int32_t *miss_slots, int32_t *n_miss, int32_t *n_evicted, size_t smem,
                                 cudaStream_t stream);

/* ---- indexer scoring (indexer version 5, sm_90a) ----
 * score(q, t) = scales[t] * sum_h w[q][h] * relu(q_h . k_t) for batch requests x ctx keys of
 * DHK_IX_DIM FP8 bytes, heads x DHK_IX_DIM FP8 query bytes per query token, queries tokens per
 * request (q, w and scores request-major, then query). tiles = 64-token tiles per block, 0 =
 * chosen so that the launch fills whole waves. Built for dhk_indexer_supports(heads, queries). */
enum { DHK_IX_VERSION = 5, DHK_IX_DIM = 128 };
int dhk_indexer_supports(int heads, int queries);
void dhk_indexer_launch(int heads, int queries, const uint8_t *q, const float *w, const uint8_t *keys,
                        const float *scales, int batch, int ctx, float *scores, int tiles, cudaStream_t stream);

/* ---- top-k (top-k version 6) ----
 * For each of batch requests of ctx finite scores, the ascending row indices of its k largest
 * (ties to the lower row), 1 <= k <= ctx; one block per request. */
enum { DHK_TOPK_VERSION = 6 };
void dhk_topk_launch(const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t stream);

/* ---- sparse decode attention (attention versions 38, 39, 28 and 8, sm_90a, and their split combine) ----
 * attn_args (kernels/lib/attention.cuh) says where the rows and queries are; a.splits <= 0
 * chooses the splits so that one wave fills sms SMs. Split partials go to the scratch, sized
 * by dhk_attn_scratch_alloc for the most query heads of any launch. */
enum { DHK_ATTN_VERSION = 39 };   /* on hot rows (38: FP8 rows at 128 heads, with a host pool too; 28: BF16 rows at two splits); 8 where a.host gives a host pool */
struct dhk_attn_scratch {
    float *part_o = nullptr, *part_lse = nullptr;
    size_t cap_o = 0, cap_lse = 0;
    unsigned *merge_cnt = nullptr;   /* attention version 9: two counts per (query, 64 heads), zeroed once */
};
void dhk_attn_scratch_alloc(dhk_attn_scratch &sc, size_t max_q_heads);
void dhk_attn_scratch_free(dhk_attn_scratch &sc);
void dhk_attention_launch(attn_args a, dhk_attn_scratch &sc, float *out, int sms, cudaStream_t stream);
/* Version 8's merge of nq x heads fp16 split partials (part_o) by their log-sum-exp (part_lse)
 * into out; dhk_attention_launch runs it, attention version 10 shares it. */
void dhk_attention_combine(const void *part_o, const float *part_lse, int nq, int splits, int heads, float *out,
                           cudaStream_t stream);

/* ---- dense GEMMs (cuBLASLt) ----
 * Y[m][n] = X[m][kdim] . W[n][kdim]^T, weights row-major (cuBLASLt's "TN" layout), BF16 or FP8
 * e4m3 operands, fp32 accumulation, bf16 output; cuBLASLt's first heuristic algorithm. */
struct dhk_gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    void *ws;
    size_t ws_bytes;
};
/* 0, or -1 when cuBLASLt has no algorithm for the shape. */
int dhk_gemm_make(dhk_gemm &g, bool fp8, int m, int n, int kdim, void *ws, size_t ws_bytes);
void dhk_gemm_release(dhk_gemm &g);
/* On the legacy stream, as every caller times it. */
void dhk_gemm_run(dhk_gemm &g, const void *w, const void *x, void *y);

#endif
