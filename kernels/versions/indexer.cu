/* indexer.cu: the DSA indexer: FP8 key scoring over the whole context, then top-k. CPU
 * references: kref_indexer_scores, kref_topk.
 *
 * score(t) = scale_t * sum_h w_h * relu(q_h . k_t), q and k e4m3 with 128 dims, 32 or 64 heads;
 * keys [ctx][128] and scales [ctx] per request (132 B per token).
 * Scoring versions:
 *   1  CUDA cores: one thread per token holds the 64 head sums in registers, the query in
 *      shared memory as fp32; heads x 128 fp32 FMAs per token after dequantisation.
 *   2  tensor cores: mma.sync m16n8k32 e4m3 x e4m3 -> fp32 (exact products, fp32 sums); the
 *      query fragments stay in registers for the block's whole run of tokens, relu and the
 *      head weights are applied to the accumulators and summed across lanes with shuffles.
 *   3  = 2 with the keys copied by cp.async into a ring of three tiles, two in flight while one
 *      is scored (version 2 loads a tile, waits, then scores it: memory and tensor cores take
 *      turns).
 *   4  = 3 with each tile's scales copied into the ring beside its keys (version 3 reads them
 *      from global memory at the tile's end, a dependent load per tile that Nsight Compute
 *      found behind a quarter of its stalls): 16-byte copies when every request's scales
 *      start 16-byte aligned (the context a multiple of 4), else one 4-byte copy per token.
 *   5  wgmma with FP8 operands (sm_90a; the library's, kernels/lib/indexer_wgmma.cu): one
 *      warpgroup per block, 64-token tiles in a four-stage cp.async ring, scales in the ring;
 *      also several query tokens per request (`queries`, a speculative step's gamma + 1),
 *      which share the keys' reads.
 * The benchmark runs the top-k (topk.cu, version `topk`, default 6) on the scores it made and
 * checks it against kref_topk. */
#include "kernels/bench.cuh"
#include "kernels/lib/block_scan.cuh"
#include "kernels/kref.h"
#include "kernels/lib/sync.cuh"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <thread>

#define IX_MAXH 64

/* ---- version 1 ---- */

template <int H>
__global__ void __launch_bounds__(256) indexer_v1_kernel(const uint8_t *__restrict__ q, const float *__restrict__ w,
                                                       const uint8_t *__restrict__ keys, const float *__restrict__ scales,
                                                       int ctx, float *__restrict__ scores)
{
    __shared__ float qs[H][IX_DIM];
    __shared__ float ws[H];
    const int b = blockIdx.y, t0 = blockIdx.x * 256, tid = threadIdx.x;
    const uint8_t *qb = q + (size_t)b * H * IX_DIM;
    for (int i = tid; i < H * IX_DIM; i += 256) {
        __half_raw hr = __nv_cvt_fp8_to_halfraw(qb[i], __NV_E4M3);
        qs[i / IX_DIM][i % IX_DIM] = __half2float(*(__half *)&hr);
    }
    if (tid < H) ws[tid] = w[(size_t)b * H + tid];
    __syncthreads();
    const int cnt = min(256, ctx - t0);
    if (tid >= cnt) return;
    /* Each thread reads its own 128-byte key, 16 bytes at a time; all bytes of every line are
     * used, so L1 absorbs the uncoalesced pattern. */
    const uint4 *kw = (const uint4 *)(keys + ((size_t)b * ctx + t0 + tid) * IX_DIM);
    float dot[H];
#pragma unroll
    for (int h = 0; h < H; h++) dot[h] = 0.f;
    uint4 kv;
    for (int d4 = 0; d4 < 32; d4++) {
        if (d4 % 4 == 0) kv = kw[d4 / 4];
        uint32_t word = d4 % 4 == 0 ? kv.x : d4 % 4 == 1 ? kv.y : d4 % 4 == 2 ? kv.z : kv.w;
        __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(word & 0xffff), __NV_E4M3);
        __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(word >> 16), __NV_E4M3);
        float2 a = __half22float2(*(__half2 *)&lo), c = __half22float2(*(__half2 *)&hi);
#pragma unroll
        for (int h = 0; h < H; h++) {
            const float *qh = &qs[h][4 * d4];
            dot[h] = fmaf(qh[0], a.x, fmaf(qh[1], a.y, fmaf(qh[2], c.x, fmaf(qh[3], c.y, dot[h]))));
        }
    }
    float s = 0.f;
#pragma unroll
    for (int h = 0; h < H; h++) s += ws[h] * fmaxf(dot[h], 0.f);
    scores[(size_t)b * ctx + t0 + tid] = s * scales[(size_t)b * ctx + t0 + tid];
}

/* ---- version 2 ---- */

#define IX2_TOK 128      /* tokens per tile: 8 warps x 16 */
#define IX2_TILES 8      /* tiles per block, so the query fragments are loaded once per 1024 tokens */
#define IX2_KS 144       /* bytes per key row in shared memory: 16-byte aligned, conflict-free ldmatrix */

__device__ __forceinline__ void ldsm_x4_b(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"((uint32_t)__cvta_generic_to_shared(p)));
}

/* The request's queries into registers as mma fragments (through qsm, H rows of IX2_KS bytes)
 * and each lane's head weights (through ws). Shared by versions 2-4; ends after a barrier. */
template <int H>
__device__ __forceinline__ void ix2_query(const uint8_t *__restrict__ q, const float *__restrict__ w, int b, int tid,
                                          int lane, uint8_t *qsm, float *ws, uint32_t (&af)[H / 16][4][4],
                                          float (&wlo)[H / 16], float (&whi)[H / 16])
{
    constexpr int MT = H / 16;
    const uint8_t *qb = q + (size_t)b * H * IX_DIM;
    for (int i = tid; i < H * 8; i += 256)
        *(uint4 *)(qsm + (i / 8) * IX2_KS + (i % 8) * 16) = *(const uint4 *)(qb + (size_t)i * 16);
    if (tid < H) ws[tid] = w[(size_t)b * H + tid];
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
            ldsm_x4_b(af[mt][ks][0], af[mt][ks][1], af[mt][ks][2], af[mt][ks][3],
                      qsm + (mt * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * IX2_KS + ks * 32 + (lane / 16) * 16);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) wlo[mt] = ws[mt * 16 + lane / 4], whi[mt] = ws[mt * 16 + lane / 4 + 8];
}

/* One tile's scores: S = keys x queries on the tensor cores (warp w: tokens 16w .. 16w + 15 of
 * the tile in ksm, rows of IX2_KS bytes), relu, head weights, the sum over heads, the scale
 * (from global memory, or with SSM from the tile's copy in shared memory, ssm). Shared by
 * versions 2-4. */
template <int H, bool SSM = false>
__device__ __forceinline__ void ix2_tile(const uint8_t *ksm, const uint32_t (&af)[H / 16][4][4], const float (&wlo)[H / 16],
                                         const float (&whi)[H / 16], int lane, int warp, int b, int ctx, int t0,
                                         int cnt, const float *__restrict__ scales, float *__restrict__ scores,
                                         const float *ssm = nullptr)
{
    constexpr int MT = H / 16;
    float c[MT][2][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++) c[mt][nt][0] = c[mt][nt][1] = c[mt][nt][2] = c[mt][nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_b(b0, b1, b2, b3, ksm + (warp * 16 + (lane % 8) + (lane / 16) * 8) * IX2_KS + ks * 32 + ((lane / 8) % 2) * 16);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#if DH_HAS_FP8MMA
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[mt][0][0]), "+f"(c[mt][0][1]), "+f"(c[mt][0][2]), "+f"(c[mt][0][3])
                         : "r"(af[mt][ks][0]), "r"(af[mt][ks][1]), "r"(af[mt][ks][2]), "r"(af[mt][ks][3]), "r"(b0), "r"(b1));
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[mt][1][0]), "+f"(c[mt][1][1]), "+f"(c[mt][1][2]), "+f"(c[mt][1][3])
                         : "r"(af[mt][ks][0]), "r"(af[mt][ks][1]), "r"(af[mt][ks][2]), "r"(af[mt][ks][3]), "r"(b2), "r"(b3));
#else
            DH_ARCH_TRAP();   /* versions 2-4 need FP8 mma.sync, sm_89 (kernels/karch.c) */
#endif
        }
    }
    /* relu, head weights, sum over the 16 heads of each fragment and then across lanes. */
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            s0 += wlo[mt] * fmaxf(c[mt][nt][0], 0.f) + whi[mt] * fmaxf(c[mt][nt][2], 0.f);
            s1 += wlo[mt] * fmaxf(c[mt][nt][1], 0.f) + whi[mt] * fmaxf(c[mt][nt][3], 0.f);
        }
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) {
            s0 += __shfl_xor_sync(0xffffffff, s0, o);
            s1 += __shfl_xor_sync(0xffffffff, s1, o);
        }
        int col = warp * 16 + nt * 8 + 2 * (lane % 4);
        if (lane < 4) {
            size_t g = (size_t)b * ctx + t0 + col;
            if (col < cnt) scores[g] = s0 * (SSM ? ssm[col] : scales[g]);
            if (col + 1 < cnt) scores[g + 1] = s1 * (SSM ? ssm[col + 1] : scales[g + 1]);
        }
    }
}

template <int H>
__global__ void __launch_bounds__(256) indexer_v2_kernel(const uint8_t *__restrict__ q, const float *__restrict__ w,
                                                       const uint8_t *__restrict__ keys, const float *__restrict__ scales,
                                                       int ctx, float *__restrict__ scores)
{
    constexpr int MT = H / 16;
    __shared__ __align__(16) uint8_t qsm[H * IX2_KS];
    __shared__ __align__(16) uint8_t ksm[IX2_TOK * IX2_KS];
    __shared__ float ws[H];
    const int b = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    uint32_t af[MT][4][4];
    float wlo[MT], whi[MT];
    ix2_query<H>(q, w, b, tid, lane, qsm, ws, af, wlo, whi);

    for (int tile = 0; tile < IX2_TILES; tile++) {
        const int t0 = (blockIdx.x * IX2_TILES + tile) * IX2_TOK;
        if (t0 >= ctx) break;
        const int cnt = min(IX2_TOK, ctx - t0);
        __syncthreads();
        const uint8_t *kb = keys + ((size_t)b * ctx + t0) * IX_DIM;
        for (int i = tid; i < IX2_TOK * 8; i += 256) {
            uint4 v = i / 8 < cnt ? *(const uint4 *)(kb + (size_t)i * 16) : make_uint4(0, 0, 0, 0);
            *(uint4 *)(ksm + (i / 8) * IX2_KS + (i % 8) * 16) = v;
        }
        __syncthreads();
        ix2_tile<H>(ksm, af, wlo, whi, lane, warp, b, ctx, t0, cnt, scales, scores);
    }
}

/* ---- version 3 ---- */

#define IX3_STAGES 3     /* tiles in the block's ring: two in flight while one is scored */

/* A ring stage: the tile's keys, and with SC (version 4) its 128 scales. */
template <bool SC>
__host__ __device__ constexpr size_t ix3_stage_bytes() { return (size_t)IX2_TOK * IX2_KS + (SC ? IX2_TOK * 4 : 0); }
template <int H, bool SC>
constexpr size_t ix3_smem_bytes() { return (size_t)H * IX2_KS + IX3_STAGES * ix3_stage_bytes<SC>(); }

template <int H, bool SC>
__global__ void __launch_bounds__(256) indexer_v3_kernel(const uint8_t *__restrict__ q, const float *__restrict__ w,
                                                       const uint8_t *__restrict__ keys, const float *__restrict__ scales,
                                                       int ctx, float *__restrict__ scores)
{
    constexpr int MT = H / 16;
    extern __shared__ __align__(16) uint8_t ix3_smem[];
    uint8_t *qsm = ix3_smem, *ring = ix3_smem + H * IX2_KS;
    __shared__ float ws[H];
    const int b = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tile0 = blockIdx.x * IX2_TILES;
    const int ntiles = min(IX2_TILES, (ctx - tile0 * IX2_TOK + IX2_TOK - 1) / IX2_TOK);
    const uint8_t *kb = keys + (size_t)b * ctx * IX_DIM;
    /* SC: the scales travel with the keys, 16 bytes at a time when each request's scales start
     * 16-byte aligned, else 4. */
    const bool sc16 = (ctx & 3) == 0;
    const float *sb = scales + (size_t)b * ctx;
    /* Tile t of this block into stage t % IX3_STAGES (rows past the context zero-filled); a
     * group is committed even past the last tile, so the wait below counts uniformly. */
    auto issue = [&](int t) {
        if (t < ntiles) {
            const int t0 = (tile0 + t) * IX2_TOK, cnt = min(IX2_TOK, ctx - t0);
            uint8_t *st = ring + (t % IX3_STAGES) * ix3_stage_bytes<SC>();
            for (int i = tid; i < IX2_TOK * 8; i += 256) {
                const int row = i / 8, c = i % 8;
                cp_async16_zfill(st + row * IX2_KS + c * 16, kb + (size_t)(t0 + min(row, cnt - 1)) * IX_DIM + c * 16,
                                 row < cnt ? 16 : 0);
            }
            if (SC && sc16 && tid < IX2_TOK / 4) {
                const int n = min(4, max(0, cnt - 4 * tid));
                cp_async16_zfill(st + IX2_TOK * IX2_KS + tid * 16, sb + t0 + (n ? 4 * tid : 0), 4 * n);
            } else if (SC && !sc16 && tid < IX2_TOK) {
                cp_async4_zfill(st + IX2_TOK * IX2_KS + tid * 4, sb + t0 + min(tid, cnt - 1), tid < cnt ? 4 : 0);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    issue(0);
    issue(1);
    uint32_t af[MT][4][4];
    float wlo[MT], whi[MT];
    ix2_query<H>(q, w, b, tid, lane, qsm, ws, af, wlo, whi);

    for (int t = 0; t < ntiles; t++) {
        asm volatile("cp.async.wait_group 1;" ::: "memory");   /* tile t has landed (t + 1 may not) */
        __syncthreads();   /* every thread's copies of tile t seen; tile t - 1's stage read by all */
        issue(t + 2);      /* into tile t - 1's stage */
        const int t0 = (tile0 + t) * IX2_TOK;
        const uint8_t *st = ring + (t % IX3_STAGES) * ix3_stage_bytes<SC>();
        if (SC)
            ix2_tile<H, true>(st, af, wlo, whi, lane, warp, b, ctx, t0, min(IX2_TOK, ctx - t0), scales, scores,
                              (const float *)(st + IX2_TOK * IX2_KS));
        else
            ix2_tile<H>(st, af, wlo, whi, lane, warp, b, ctx, t0, min(IX2_TOK, ctx - t0), scales, scores);
    }
}

/* Scores of batch requests x ctx tokens with indexer version 1-IX_MAX_VERSION. Version 5 only:
 * queries query tokens per request (q, w and scores request-major, then query), tiles =
 * 64-token tiles per block (0 = automatic). */
void indexer_launch(int version, int heads, const uint8_t *q, const float *w, const uint8_t *keys, const float *scales,
                    int batch, int ctx, float *scores, cudaStream_t st, int tiles, int queries)
{
    if (version == 5) {
        dhk_indexer_launch(heads, queries, q, w, keys, scales, batch, ctx, scores, tiles, st);
        return;
    }
    if (queries > 1) {
        /* Versions 1-4 score one query per request: several (a speculative step's, on a GPU
         * without version 5) are one launch per (request, query), each over its request's keys. */
        for (int b = 0; b < batch; b++)
            for (int qq = 0; qq < queries; qq++) {
                const size_t row = (size_t)b * queries + qq;
                indexer_launch(version, heads, q + row * heads * IX_DIM, w + row * heads, keys + (size_t)b * ctx * IX_DIM,
                               scales + (size_t)b * ctx, 1, ctx, scores + row * ctx, st, tiles, 1);
            }
        return;
    }
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(indexer_v3_kernel<32, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)ix3_smem_bytes<32, false>()));
        cudaCheck(cudaFuncSetAttribute(indexer_v3_kernel<64, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)ix3_smem_bytes<64, false>()));
        cudaCheck(cudaFuncSetAttribute(indexer_v3_kernel<32, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)ix3_smem_bytes<32, true>()));
        cudaCheck(cudaFuncSetAttribute(indexer_v3_kernel<64, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)ix3_smem_bytes<64, true>()));
        attr_done = true;
    }
    if (version == 1) {
        dim3 g((ctx + 255) / 256, batch);
        if (heads == 64) indexer_v1_kernel<64><<<g, 256, 0, st>>>(q, w, keys, scales, ctx, scores);
        else indexer_v1_kernel<32><<<g, 256, 0, st>>>(q, w, keys, scales, ctx, scores);
    } else {
        dim3 g((ctx + IX2_TOK * IX2_TILES - 1) / (IX2_TOK * IX2_TILES), batch);
        if (version == 2) {
            if (heads == 64) indexer_v2_kernel<64><<<g, 256, 0, st>>>(q, w, keys, scales, ctx, scores);
            else indexer_v2_kernel<32><<<g, 256, 0, st>>>(q, w, keys, scales, ctx, scores);
        } else if (version == 3) {
            if (heads == 64) indexer_v3_kernel<64, false><<<g, 256, ix3_smem_bytes<64, false>(), st>>>(q, w, keys, scales, ctx, scores);
            else indexer_v3_kernel<32, false><<<g, 256, ix3_smem_bytes<32, false>(), st>>>(q, w, keys, scales, ctx, scores);
        } else {
            if (heads == 64) indexer_v3_kernel<64, true><<<g, 256, ix3_smem_bytes<64, true>(), st>>>(q, w, keys, scales, ctx, scores);
            else indexer_v3_kernel<32, true><<<g, 256, ix3_smem_bytes<32, true>(), st>>>(q, w, keys, scales, ctx, scores);
        }
    }
    CUDA_LAUNCH_CHECK();
}

size_t indexer_smem_need(int version, int heads, int queries)
{
    if (version == 3) return heads == 64 ? ix3_smem_bytes<64, false>() : ix3_smem_bytes<32, false>();
    if (version == 4) return heads == 64 ? ix3_smem_bytes<64, true>() : ix3_smem_bytes<32, true>();
    return 0;   /* versions 1-2: static shared memory; 5: sm_90a only, where it fits */
}

int bench_indexer_check(const bench_params &p)
{
    const long long batch = p.num("batch", 16), ctx = p.num("ctx", 100000), heads = p.num("heads", 64),
                    k = p.num("k", 2048), version = p.num("version", 2), tk_version = p.num("topk", 6),
                    tiles = p.num("tiles", 0), queries = p.num("queries", 1);
    if (version < 1 || version > IX_MAX_VERSION) {
        fprintf(stderr, "dhbench: indexer: version %lld is not 1 to %d\n", version, IX_MAX_VERSION);
        return -1;
    }
    if (tiles < 0 || tiles > 65536 || (tiles > 0 && version != 5)) {
        fprintf(stderr, "dhbench: indexer: tiles=%lld: 64-token tiles per block, 0 (automatic) to 65536, version 5 only\n",
                tiles);
        return -1;
    }
    if (tk_version < 1 || tk_version > TK_MAX_VERSION) {
        fprintf(stderr, "dhbench: indexer: topk version %lld is not 1 to %d\n", tk_version, TK_MAX_VERSION);
        return -1;
    }
    if (heads != 32 && heads != 64) {
        fprintf(stderr, "dhbench: indexer: heads %lld is not 32 or 64\n", heads);
        return -1;
    }
    if (queries < 1 || queries > 8 || (version == 5 && !dhk_indexer_supports((int)heads, (int)queries))) {
        fprintf(stderr, "dhbench: indexer: queries=%lld heads=%lld version=%lld: need 1 to 8 queries; version 5 "
                "needs heads x queries <= 256, queries 1, 2, 4 or 8 (versions 1-4 run one launch per query)\n", queries, heads, version);
        return -1;
    }
    if (batch < 1 || batch * queries > 65535 || ctx < 1 || ctx > (1 << 24) || k < 1 || k > ctx) {
        fprintf(stderr, "dhbench: indexer: batch=%lld ctx=%lld k=%lld: need 1 <= batch <= 65535, 1 <= k <= ctx <= 2^24\n",
                batch, ctx, k);
        return -1;
    }
    return 0;
}

int bench_indexer(bench_env *env, const bench_params &p)
{
    if (bench_indexer_check(p)) return -1;
    const int batch = (int)p.num("batch", 16);
    const int ctx = (int)p.num("ctx", 100000);
    const int heads = (int)p.num("heads", 64);
    const int k = (int)p.num("k", 2048);
    const int version = (int)p.num("version", 2);
    const int tk_version = (int)p.num("topk", 6);
    const int tiles = (int)p.num("tiles", 0);
    const int nq = (int)p.num("queries", 1);   /* query tokens per request */
    bench_rng rng(0x1de7 ^ (uint64_t)heads << 4 ^ (uint64_t)ctx << 12);
    /* Random e4m3 codes with exponents 3..10 (no NaN), positive scales, positive weights. */
    auto code = [&]() {
        uint64_t x = rng.next();
        return (uint8_t)((x & 0x80) | ((3 + (x >> 8) % 8) << 3) | ((x >> 16) & 7));
    };
    size_t nkeys = (size_t)batch * ctx;
    const size_t nrows = (size_t)batch * nq;   /* score rows: (request, query) */
    std::vector<uint8_t> keys_h(nkeys * IX_DIM), q_h(nrows * heads * IX_DIM);
    std::vector<float> scales_h(nkeys), w_h(nrows * heads);
    {
        int nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
        std::vector<std::thread> th;
        for (int t = 0; t < nt; t++)
            th.emplace_back([&, t]() {
                for (size_t i = (size_t)t; i < nkeys; i += (size_t)nt) {
                    bench_rng r2(i * 0x9E3779B97F4A7C15ull + 17);
                    for (int d = 0; d < IX_DIM; d++) {
                        uint64_t x = r2.next();
                        keys_h[i * IX_DIM + d] = (uint8_t)((x & 0x80) | ((3 + (x >> 8) % 8) << 3) | ((x >> 16) & 7));
                    }
                    scales_h[i] = (float)(0.5 + r2.uniform());
                }
            });
        for (auto &t : th) t.join();
    }
    for (auto &c : q_h) c = code();
    for (auto &x : w_h) x = (float)(0.01 + 0.02 * rng.uniform());
    uint8_t *keys_d, *q_d;
    float *scales_d, *w_d, *scores_d;
    int32_t *top_d;
    cudaCheck(cudaMalloc(&keys_d, keys_h.size()));
    cudaCheck(cudaMalloc(&q_d, q_h.size()));
    cudaCheck(cudaMalloc(&scales_d, nkeys * 4));
    cudaCheck(cudaMalloc(&w_d, w_h.size() * 4));
    cudaCheck(cudaMalloc(&scores_d, nrows * ctx * 4));
    cudaCheck(cudaMalloc(&top_d, nrows * k * 4));
    cudaCheck(cudaMemcpy(keys_d, keys_h.data(), keys_h.size(), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(q_d, q_h.data(), q_h.size(), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(scales_d, scales_h.data(), nkeys * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(w_d, w_h.data(), w_h.size() * 4, cudaMemcpyHostToDevice));

    auto run_score = [&](int) { indexer_launch(version, heads, q_d, w_d, keys_d, scales_d, batch, ctx, scores_d, 0, tiles, nq); };
    auto run_topk = [&](int) {
        topk_launch(tk_version, scores_d, (int)nrows, ctx, k, top_d, 0);
    };
    cudaCheck(cudaMemset(scores_d, 0xff, nrows * ctx * 4));
    cudaCheck(cudaMemset(top_d, 0xff, nrows * k * 4));
    run_score(0);
    run_topk(0);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> sc_h(nrows * ctx);
    std::vector<int32_t> top_h(nrows * k), ref_top(k);
    cudaCheck(cudaMemcpy(sc_h.data(), scores_d, nrows * ctx * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(top_h.data(), top_d, top_h.size() * 4, cudaMemcpyDeviceToHost));
    /* Scores: every one finite; every query of two requests against the float64-summed
     * reference. */
    int ok = 1;
    for (float v : sc_h) if (!std::isfinite(v)) { ok = 0; break; }
    std::vector<size_t> rows;   /* (request, query) rows */
    for (int qq = 0; qq < nq; qq++) {
        rows.push_back((size_t)qq);
        if (batch > 1) rows.push_back((size_t)(batch - 1) * nq + qq);
    }
    std::vector<double> err(rows.size());
    std::vector<std::thread> th;
    for (size_t i = 0; i < rows.size(); i++)
        th.emplace_back([&, i]() {
            const size_t row = rows[i], b = row / nq;
            std::vector<float> ref((size_t)ctx);
            kref_indexer_scores(&q_h[row * heads * IX_DIM], &w_h[row * heads], heads, &keys_h[b * ctx * IX_DIM],
                                &scales_h[b * ctx], ctx, ref.data());
            err[i] = rel_l2(&sc_h[row * ctx], ref.data(), (size_t)ctx);
        });
    for (auto &t : th) t.join();
    double worst = 0;
    for (double e : err) worst = std::max(worst, e);
    /* Versions 1-4 sum in fp32; version 5's wgmma accumulates FP8 products in ~14 bits
     * (indexer_wgmma.cu), hence its wider tolerance. */
    const double tol = version == 5 ? IX5_REL_TOL : 1e-4;
    if (version == 5) fprintf(stderr, "dhbench: indexer v5: score error %.3g against float64 (tolerance %.1g)\n", worst, tol);
    if (!(worst < tol)) { fprintf(stderr, "dhbench: indexer v%d: score error %.3g (tolerance %.1g)\n", version, worst, tol); ok = 0; }
    /* Top-k: every (request, query) row, against the reference applied to the GPU's own scores. */
    for (size_t row = 0; row < nrows && ok; row++) {
        kref_topk(&sc_h[row * ctx], ctx, k, ref_top.data());
        if (memcmp(ref_top.data(), &top_h[row * k], 4 * (size_t)k)) {
            fprintf(stderr, "dhbench: topk v%d: request %zu query %zu differs from the reference\n", tk_version,
                    row / nq, row % nq);
            ok = 0;
        }
    }
    for (int v = 0; v < 2; v++) {
        bench_record r;
        r.kernel = v == 0 ? "indexer" : "topk";
        r.version = std::to_string(v == 0 ? version : tk_version);
        r.dtype = v == 0 ? "fp8" : "fp32";
        if (v == 1) r.pattern = "indexer";   /* top-k of the indexer's own scores */
        r.batch = batch; r.queries = nq; r.ctx = ctx; r.k = k; r.heads = v == 0 ? heads : -1;
        if (v == 1) r.sms = topk_concurrent_blocks(tk_version, env->prop);
        /* The keys are read once per request whatever the queries; top-k: the scores read once. */
        r.bytes = v == 0 ? (double)nkeys * (IX_DIM + 4) : (double)nrows * ctx * 4;
        r.flops = v == 0 ? (double)nkeys * nq * heads * IX_DIM * 2 : -1;
        r.ceiling_name = "hbm_d2d";
        r.ceiling_value = env->hbm_gbps;
        r.checked = ok;
        if (ok) {
            bench_timing t = bench_time(env, v == 0 ? std::function<void(int)>(run_score) : std::function<void(int)>(run_topk));
            bench_take(r, t);
        }
        bench_emit(env, r);
    }
    cudaCheck(cudaFree(keys_d)); cudaCheck(cudaFree(q_d)); cudaCheck(cudaFree(scales_d));
    cudaCheck(cudaFree(w_d)); cudaCheck(cudaFree(scores_d)); cudaCheck(cudaFree(top_d));
    return ok ? 0 : -1;
}
