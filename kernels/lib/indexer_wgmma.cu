/* indexer_wgmma.cu: the library's indexer scoring (kernels/dhk.h: dhk_indexer_launch), indexer
 * version 5 of kernels/versions/indexer.cu: the DSA indexer's key scoring on Hopper's warpgroup
 * matrix multiply with FP8 operands (wgmma e4m3 x e4m3 -> fp32), so this file is built for
 * sm_90a. CPU reference: kref_indexer_scores (kernels/kref.c); the check against it is
 * bin/dhbench's (kernels/versions/indexer.cu).
 *
 * score(q, t) = scale_t * sum_h w_{q,h} * relu(q_h . k_t) for each of a request's Q query tokens
 * (Q > 1: the gamma + 1 tokens a speculative step verifies), which share the request's keys.
 * On sm_90 the FP8 mma.sync of versions 2-4 is not a native instruction (the SASS unpacks
 * e4m3 to fp16 and runs HMMA, kernels/NOTES.md); wgmma reads e4m3 operands from shared memory
 * as they are.
 *
 * One block = one warpgroup (128 threads) per run of 64-token tiles of one request; several
 * blocks per SM. Each tile's 64 keys (128 B each, one 128-byte swizzle row) are copied by
 * cp.async into a ring of IX5_STAGES tiles in the wgmma layout, IX5_STAGES - 1 tiles in
 * flight while one is scored, with the tile's 64 scales (4-byte copies, so any context
 * length). Per tile: S = K Q^T (4 x wgmma m64nNk32, N = Q x H columns: A = the key tile,
 * M = 64 tokens; B = the request's N query-head rows, loaded once per block; both K-major),
 * then relu, the head weights and the sum over each query's H heads in registers: each thread
 * holds 2 tokens x N/4 columns of S, summed across the 4 threads of a quad by two shuffles.
 * The key bytes are read once per request whatever Q; the multiplies grow with Q.
 *
 * Accuracy: wgmma's FP8 products are exact, but its accumulation is narrower than fp32 (about
 * 14 bits are kept, DeepSeek-V3 technical report, section 3.3.2), so the scores match the
 * float64 reference less closely than versions 2-4 (which sum in fp32): the benchmark's
 * tolerance for this version is IX5_REL_TOL (kernels/bench.cuh). */
#include "kernels/dhk.h"
#include "kernels/lib/sync.cuh"
#include "kernels/lib/wgmma.cuh"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define IX5_TOK 64          /* tokens per tile: wgmma's M */
#define IX5_STAGES 4        /* tiles in a block's ring: three in flight while one is scored */
#define IX5_TILE_BYTES (IX5_TOK * 128)
#define IX5_MAX_TILES 64    /* tiles per block at most (the automatic choice) */

/* Shared memory: the ring's key tiles, then the N query-head rows (both 1024-byte aligned),
 * the ring's scales, the N head weights; + 1024 for rounding the base up. */
template <int N>
constexpr size_t ix5_smem_bytes() { return (size_t)IX5_STAGES * IX5_TILE_BYTES + N * 128 + IX5_STAGES * IX5_TOK * 4 + N * 4 + 1024; }

/* Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled tile of 128-byte rows. */
__device__ __forceinline__ uint32_t ix5_swz(int r, int c) { return (uint32_t)(r * 128 + (((c & 7) ^ (r & 7)) << 4)); }

/* d (+)= keys (64 x 32 B) . query-head rows (N x 32 B)^T; d = ... when scale_d is 0. */
template <int N> struct ix5_mma;
/* N columns: N / 2 accumulators per thread ("%0".."%N/2-1"), then the descriptors and scale_d. */
#define IX5_MMA(N, REGS, A, B, SD, ...)                                                              \
    template <> struct ix5_mma<N> {                                                                  \
        static __device__ __forceinline__ void run(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) \
        {                                                                                            \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                              \
                         "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" REGS "}, " A ", " B \
                         ", p, 1, 1;\n}\n"                                                            \
                         : __VA_ARGS__                                                               \
                         : "l"(da), "l"(db), "r"(scale_d));                                          \
        }                                                                                            \
    };
IX5_MMA(32, DH_WG_REGS16, "%16", "%17", "%18", DH_WG_F16(0))
IX5_MMA(64, DH_WG_REGS32, "%32", "%33", "%34", DH_WG_F16(0), DH_WG_F16(16))
IX5_MMA(128, DH_WG_REGS64, "%64", "%65", "%66", DH_WG_F64(0))
IX5_MMA(256, DH_WG_REGS128, "%128", "%129", "%130", DH_WG_F64(0), DH_WG_F64(64))

/* Q queries of H heads per request: N = Q x H columns. */
template <int H, int Q>
__global__ void __launch_bounds__(128) indexer_v5_kernel(const uint8_t *__restrict__ q, const float *__restrict__ w,
                                                       const uint8_t *__restrict__ keys, const float *__restrict__ scales,
                                                       int ctx, int tiles_per_block, float *__restrict__ scores)
{
    constexpr int N = H * Q;
    extern __shared__ uint8_t ix5_raw[];
    uint8_t *ring = (uint8_t *)(((uintptr_t)ix5_raw + 1023) & ~(uintptr_t)1023);
    uint8_t *qs = ring + IX5_STAGES * IX5_TILE_BYTES;
    float *ss = (float *)(qs + N * 128), *ws = ss + IX5_STAGES * IX5_TOK;
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(ring), qs_s = ring_s + IX5_STAGES * IX5_TILE_BYTES;
    const int b = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tile0 = blockIdx.x * tiles_per_block;
    const int ntiles = min(tiles_per_block, (ctx + IX5_TOK - 1) / IX5_TOK - tile0);
    const uint8_t *kb = keys + (size_t)b * ctx * 128;
    const float *sb = scales + (size_t)b * ctx;

    /* Tile t of this block into stage t % IX5_STAGES, rows past the context zero-filled (their
     * scores are computed and not written); a group is committed even past the last tile, so
     * the wait below counts uniformly. */
    auto issue = [&](int t) {
        if (t < ntiles) {
            const int t0 = (tile0 + t) * IX5_TOK, cnt = min(IX5_TOK, ctx - t0), s = t % IX5_STAGES;
            uint8_t *st = ring + s * IX5_TILE_BYTES;
#pragma unroll
            for (int i = tid; i < IX5_TOK * 8; i += 128) {
                const int r = i >> 3, c = i & 7;
                cp_async16_zfill(st + ix5_swz(r, c), kb + (size_t)(t0 + min(r, cnt - 1)) * 128 + c * 16, r < cnt ? 16 : 0);
            }
            if (tid < IX5_TOK) cp_async4_zfill(ss + s * IX5_TOK + tid, sb + t0 + min(tid, cnt - 1), tid < cnt ? 4 : 0);
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (int t = 0; t < IX5_STAGES - 1; t++) issue(t);

    /* The request's query-head rows (swizzled, as wgmma's B: row n = query n / H, head n % H)
     * and their weights. This thread's columns of S are 8 i + 2 (lane % 4) + {0, 1}. */
    const uint8_t *qb = q + (size_t)b * N * 128;
    for (int i = tid; i < N * 8; i += 128) *(uint4 *)(qs + ix5_swz(i >> 3, i & 7)) = *(const uint4 *)(qb + (size_t)i * 16);
    for (int i = tid; i < N; i += 128) ws[i] = w[(size_t)b * N + i];
    /* Up to 64 columns the thread's N / 4 weights stay in registers (an epilogue of shared-memory
     * loads cost 5-8 % at one query); beyond, the accumulators need the registers. */
    constexpr bool WREG = N <= 64;
    float wr[WREG ? N / 4 : 1];
    if constexpr (WREG) {
#pragma unroll
        for (int i = 0; i < N / 8; i++) {
            const float2 w2 = *(const float2 *)(w + (size_t)b * N + 8 * i + 2 * (lane & 3));
            wr[2 * i] = w2.x, wr[2 * i + 1] = w2.y;
        }
    }
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = 0.f;

    for (int t = 0; t < ntiles; t++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(IX5_STAGES - 2) : "memory");   /* tile t has landed */
        dh_fence_proxy_async();
        __syncthreads();   /* tile t (and the queries) visible to wgmma; tile t - 1's stage read by all */
        issue(t + IX5_STAGES - 1);   /* into tile t - 1's stage */
        const int s = t % IX5_STAGES;
        const uint32_t st = ring_s + s * IX5_TILE_BYTES;
#pragma unroll
        for (int i = 0; i < N / 2; i++) dh_fence_reg(d[i]);
        dh_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
            ix5_mma<N>::run(d, dh_wgmma_desc(st + ks * 32, 16, 1024), dh_wgmma_desc(qs_s + ks * 32, 16, 1024), ks > 0);
        dh_wgmma_commit();
        dh_wgmma_wait0();
#pragma unroll
        for (int i = 0; i < N / 2; i++) dh_fence_reg(d[i]);
        /* Rows (tokens) r0 = 16 warp + lane / 4 and r0 + 8 of the tile: d[4 i + e] is (r0,
         * column 8 i + 2 (lane % 4) + e), d[4 i + 2 + e] is (r0 + 8, same column). Per query
         * qq: its H / 8 column groups, then the quad's sum; sum[2 qq + half] ends in every
         * lane of the quad, and lane % 4 == v % 4 writes value v. */
        const int t0 = (tile0 + t) * IX5_TOK, cnt = min(IX5_TOK, ctx - t0);
        float s0[Q], s1[Q];
#pragma unroll
        for (int qq = 0; qq < Q; qq++) s0[qq] = s1[qq] = 0.f;
#pragma unroll
        for (int i = 0; i < N / 8; i++) {
            const int qq = i / (H / 8);
            const float2 w2 = WREG ? make_float2(wr[2 * i], wr[2 * i + 1]) : *(const float2 *)(ws + 8 * i + 2 * (lane & 3));
            s0[qq] += w2.x * fmaxf(d[4 * i], 0.f) + w2.y * fmaxf(d[4 * i + 1], 0.f);
            s1[qq] += w2.x * fmaxf(d[4 * i + 2], 0.f) + w2.y * fmaxf(d[4 * i + 3], 0.f);
        }
#pragma unroll
        for (int qq = 0; qq < Q; qq++) {
            s0[qq] += __shfl_xor_sync(0xffffffff, s0[qq], 1);
            s1[qq] += __shfl_xor_sync(0xffffffff, s1[qq], 1);
            s0[qq] += __shfl_xor_sync(0xffffffff, s0[qq], 2);
            s1[qq] += __shfl_xor_sync(0xffffffff, s1[qq], 2);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = 16 * warp + (lane >> 2) + 8 * half;
                if ((lane & 3) == (2 * qq + half) % 4 && r < cnt)
                    scores[((size_t)b * Q + qq) * ctx + t0 + r] = (half ? s1[qq] : s0[qq]) * ss[s * IX5_TOK + r];
            }
        }
    }
}

/* 64-token tiles per block: the given count, or (0) the fewest that fit the launch in whole
 * waves of resident blocks, so no wave runs a few blocks alone. */
static int ix5_tiles(int tiles, int batch, int ctx, int resident)
{
    if (tiles > 0) return tiles;
    const long long per_req = (ctx + IX5_TOK - 1) / IX5_TOK, total = per_req * batch;
    const long long waves = (total + (long long)resident * IX5_MAX_TILES - 1) / ((long long)resident * IX5_MAX_TILES);
    long long blocks_per_req = (long long)resident * waves / batch;
    if (blocks_per_req < 1) blocks_per_req = 1;
    long long tpb = (per_req + blocks_per_req - 1) / blocks_per_req;
    return (int)(tpb < 1 ? 1 : tpb);
}

template <int H, int Q>
static void ix5_launch(const uint8_t *q, const float *w, const uint8_t *keys, const float *scales, int batch, int ctx,
                       float *scores, int tiles, cudaStream_t st)
{
    constexpr size_t smem = ix5_smem_bytes<H * Q>();
    static int resident = 0;
    if (!resident) {
        cudaCheck(cudaFuncSetAttribute(indexer_v5_kernel<H, Q>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int dev, sms, per_sm;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, indexer_v5_kernel<H, Q>, 128, smem));
        resident = sms * (per_sm > 0 ? per_sm : 1);
    }
    const int tpb = ix5_tiles(tiles, batch, ctx, resident);
    dim3 g((unsigned)(((ctx + IX5_TOK - 1) / IX5_TOK + tpb - 1) / tpb), (unsigned)batch);
    indexer_v5_kernel<H, Q><<<g, 128, smem, st>>>(q, w, keys, scales, ctx, tpb, scores);
}

int dhk_indexer_supports(int heads, int queries)
{
    return (heads == 32 && (queries == 1 || queries == 2 || queries == 4 || queries == 8)) ||
           (heads == 64 && (queries == 1 || queries == 2 || queries == 4));
}

void dhk_indexer_launch(int heads, int queries, const uint8_t *q, const float *w, const uint8_t *keys, const float *scales,
                       int batch, int ctx, float *scores, int tiles, cudaStream_t st)
{
    switch (heads * 16 + queries) {
    case 32 * 16 + 1: ix5_launch<32, 1>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    case 32 * 16 + 2: ix5_launch<32, 2>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    case 32 * 16 + 4: ix5_launch<32, 4>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    case 32 * 16 + 8: ix5_launch<32, 8>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    case 64 * 16 + 1: ix5_launch<64, 1>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    case 64 * 16 + 2: ix5_launch<64, 2>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    case 64 * 16 + 4: ix5_launch<64, 4>(q, w, keys, scales, batch, ctx, scores, tiles, st); break;
    default:
        fprintf(stderr, "dhk_indexer_launch: %d heads x %d queries is not built\n", heads, queries);
        exit(1);
    }
    CUDA_LAUNCH_CHECK();
}
