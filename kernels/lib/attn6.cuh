/* attn6.cuh: the kernel of versions 6-10 of the sparse decode attention
 * (kernels/versions/attention.cu), on Hopper's asynchronous warpgroup matrix multiply (wgmma),
 * so every file that instantiates it is built for sm_90a: kernels/lib/attention_wgmma.cu (version
 * 8, the library's) and kernels/versions/attention_wgmma.cu (6, 7, 9, 10 and the diagnostic
 * variants of 8 and 10). A template in a header so that both instantiate the same device code.
 *
 * One block of three warpgroups per (query, split of the k rows, 64 heads), one block per SM:
 *   warpgroup 2, the producer, gathers the tile's 64 selected rows (row ids loaded a tile
 *     ahead) into a two-stage ring of 16-bit key tiles in the wgmma shared-memory layout
 *     (128-byte swizzle, 9 column blocks of 64 x 128 B): FP8 rows through registers (16-byte
 *     loads of the next tile issued before waiting for a free stage, e4m3 -> fp16 times the
 *     group scale, RoPE bf16 -> fp16), BF16 rows by cp.async straight into the stage. A full
 *     mbarrier per stage tells the consumers a tile has landed, an empty one tells the
 *     producer both consumers are done with it.
 *   warpgroups 0 and 1, the consumers, each hold half of the 64 x 512 fp32 output (value dims
 *     [256 w, 256 w + 256)) in registers. Per tile, warpgroup w computes S = Q K^T for the
 *     tile's rows [32 w, 32 w + 32) (36 wgmma m64n32k16, Q and K from shared memory), the two
 *     exchange their row maxima (512 B of shared memory, a named barrier), run the online
 *     softmax in registers, write P (64 x 64, 16-bit) in the same swizzled layout, and after a
 *     second named barrier compute O_w += P V_w (4 wgmma m64n256k16, V the same key tile read
 *     N-major, so no transposed copy exists).
 * FP8 rows use fp16 operands (e4m3 converts exactly to fp16; queries converted once), BF16
 * rows bf16 operands. Shared memory: Q 72 KB + 2 key stages of 72 KB + P 8 KB = 225 KB.
 * Split partials are fp16 with a log-sum-exp per head (attn4_combine_kernel merges them);
 * with one split the block writes the final output.
 * Version 7 is version 6 with each tile's softmax overlapped with the next tile's S multiplies
 * (a6_consumer). Version 8 is version 6 with the per-block fixed cost cut (STAGED): the producer
 * starts on the first tile while the consumers alone load Q, the output leaves through shared
 * memory in whole rows (a6_store_out), and attn8_combine_kernel keeps 8 splits' loads in
 * flight per thread. Version 9 is version 8 with the splits merged inside the kernel (a6_merge,
 * a cooperative launch), so no combine kernel runs. Version 10 is version 8 with a producer that
 * keeps the next tile's loads in flight (a6_producer_pipe). Diagnostic variants of versions 8
 * and 10 leave a side out to time the other alone (outputs wrong by design, never checked): the
 * producer alone (consumers hand each stage back unread) and the consumers alone (the producer
 * hands over stages without filling them). FP8 operands for FP8 rows: versions 11-13,
 * kernels/lib/attn11.cuh. */
#ifndef KERNELS_ATTN6_CUH
#define KERNELS_ATTN6_CUH

#include "kernels/lib/attention.cuh"
#include "kernels/dhk.h"
#include "kernels/kref.h"
#include "kernels/lib/sync.cuh"
#include "kernels/lib/wgmma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

#define A6_N ATTN6_TILE_ROWS         /* rows per tile */
#define A6_THREADS 384               /* consumers: warpgroups 0, 1; producer: warpgroup 2 */
#define A6_TILE_BYTES (64 * 576 * 2) /* one 64 x 576 16-bit tile: Q, or one key stage */
#define A6_BLOCK_BYTES (64 * 128)    /* one 64-column block of a tile: 64 rows x 128 B */
#define A6_P_OFF (3 * A6_TILE_BYTES)
#define A6_RED_OFF (A6_P_OFF + 64 * 64 * 2)
#define A6_BAR_OFF (A6_RED_OFF + 4 * 64 * 4)
#define A6_SMEM_BYTES (A6_BAR_OFF + 64 + 1024) /* + 1024: the base is rounded up to 1024 B */
/* setmaxnreg counts (multiples of 8) adding up to the 3 x 168 registers the block holds at
 * launch: 120 + 2 x 192 for version 6; 104 + 2 x 200 for version 7, whose consumers also hold
 * the next tile's scores (at 192 ptxas spilled 38 B per FP8 consumer thread, at 200 8 B; the
 * FP8 producer spills below 104). */
#define A6_PRODUCER_REGS(ov) ((ov) ? 104 : 120)
#define A6_CONSUMER_REGS(ov) ((ov) ? 200 : 192)
#define A6_LOG2E 1.4426950408889634f

/* What each kernel variant V does: the versions 6-10, and the diagnostic variants of versions
 * 8 and 10 (V = 10 x version + A6_DIAG_*: 81, 82, 101, 102) that run one side alone. */
template <int V> struct a6_variant {
    static constexpr int version = V > 80 ? V / 10 : V;
    static constexpr bool overlap = version == 7;   /* next tile's S before this tile's softmax */
    static constexpr bool staged = version >= 8;    /* Q beside the producer, output via shared memory */
    static constexpr bool merge = version == 9;     /* splits merged in the kernel (cooperative) */
    static constexpr bool pipe = version == 10;     /* producer with the next tile's loads in flight */
    static constexpr int diag = V > 80 ? V % 10 : 0;
    static constexpr bool hint = version == 15;     /* version 8 with the row loads prefetching 256 B into L2 */
};

/* A 16-byte load of a selected row's bytes; HINT: read-only, not kept in L1, with the L2
 * fetching the 256-byte span around it at the first touch (ld.global.nc.L1::no_allocate.L2::256B,
 * FlashMLA's sparse decode loads: its rows are read in 16-64 byte pieces by several
 * instructions, so the row's later pieces find their sectors in L2). */
template <bool HINT>
__device__ __forceinline__ uint4 a6_ld_row16(const uint8_t *p)
{
    if (!HINT) return *(const uint4 *)p;
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

/* Byte offset of 16-byte chunk c (columns 8c .. 8c+7) of row r in a 64-row tile: column block
 * c / 8 at 8 KB each, rows of 128 B, chunk position XOR-ed with r % 8 (the 128-byte swizzle,
 * whose pattern repeats every 1024 B: every tile starts on a 1024-byte boundary). */
__host__ __device__ __forceinline__ uint32_t a6_swz(int r, int c)
{
    return (uint32_t)((c >> 3) * A6_BLOCK_BYTES + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

__device__ __forceinline__ void a6_consumer_bar() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

__device__ __forceinline__ void a6_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void a6_cp_async16_l2(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

/* The wgmma instructions (accumulators fp32): S += Q K^T for 32 rows (m64n32k16, both operands
 * K-major), and O += P V for 256 value dims (m64n256k16, V N-major); the accumulator lists
 * are wgmma.cuh's. */
/* One S and one O instruction per operand type T ("f16" or "bf16"). */
#define A6_MMA_PAIR(name, T)                                                                          \
    __device__ __forceinline__ void a6_mma_s_##name(float (&d)[16], uint64_t da, uint64_t db, int scale_d) \
    {                                                                                                 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                     \
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32." T "." T " {" DH_WG_REGS16 "}, %16, %17, p, 1, 1, 0, 0;\n}\n" \
                     : DH_WG_F16(0)                                                                      \
                     : "l"(da), "l"(db), "r"(scale_d));                                              \
    }                                                                                                 \
    __device__ __forceinline__ void a6_mma_o_##name(float (&d)[128], uint64_t da, uint64_t db)       \
    {                                                                                                 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                       \
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32." T "." T " {" DH_WG_REGS128 "}, %128, %129, p, 1, 1, 0, 1;\n}\n" \
                     : DH_WG_F64(0), DH_WG_F64(64)                                                          \
                     : "l"(da), "l"(db));                                                            \
    }
A6_MMA_PAIR(f16, "f16")
A6_MMA_PAIR(bf16, "bf16")

template <int FMT> struct a6_ops;
template <> struct a6_ops<KREF_ROW_FP8> {
    typedef __half T;
    static __device__ __forceinline__ void mma_s(float (&d)[16], uint64_t a, uint64_t b, int sd) { a6_mma_s_f16(d, a, b, sd); }
    static __device__ __forceinline__ void mma_o(float (&d)[128], uint64_t a, uint64_t b) { a6_mma_o_f16(d, a, b); }
    static __device__ __forceinline__ uint32_t pack(float x, float y)
    {
        __half2 h = __floats2half2_rn(x, y);
        return *(uint32_t *)&h;
    }
};
template <> struct a6_ops<KREF_ROW_BF16> {
    typedef __nv_bfloat16 T;
    static __device__ __forceinline__ void mma_s(float (&d)[16], uint64_t a, uint64_t b, int sd) { a6_mma_s_bf16(d, a, b, sd); }
    static __device__ __forceinline__ void mma_o(float (&d)[128], uint64_t a, uint64_t b) { a6_mma_o_bf16(d, a, b); }
    static __device__ __forceinline__ uint32_t pack(float x, float y)
    {
        __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
        return *(uint32_t *)&h;
    }
};

/* e4m3 codes 16 o .. 16 o + 15 of a row (one 16-byte chunk) times the group scale g, as fp16,
 * into chunks 2 o and 2 o + 1 of row j of a stage. */
__device__ __forceinline__ void a6_dequant_chunk(uint8_t *stage, int j, int o, uint4 v, float g)
{
    uint4 w[2];
    dh_fp8x16_to_f16(v, __float2half2_rn(g), w);
    *(uint4 *)(stage + a6_swz(j, 2 * o)) = w[0];
    *(uint4 *)(stage + a6_swz(j, 2 * o + 1)) = w[1];
}

/* Row j of a BF16 tile by cp.async into the stage at sst: this thread's 36 chunks (hf, hf + 2,
 * ..) in the swizzled layout; not valid: zeros (a zero-byte copy from the valid address any). */
template <bool HINT = false>
__device__ __forceinline__ void a6_cp_async_row(uint32_t sst, int j, int hf, bool valid, const uint8_t *src,
                                                const void *any)
{
#pragma unroll 4
    for (int i = 0; i < 36; i++) {
        const int c = hf + 2 * i;
        if (HINT) a6_cp_async16_l2(sst + a6_swz(j, c), valid ? (const void *)(src + c * 16) : any, valid ? 16 : 0);
        else a6_cp_async16(sst + a6_swz(j, c), valid ? (const void *)(src + c * 16) : any, valid ? 16 : 0);
    }
}

/* The diagnostic producer (A6_DIAG_CONSUMERS): each stage handed over as it is, unfilled. */
__device__ __forceinline__ void a6_producer_unfilled(uint32_t bar_full, int ntiles)
{
    const uint32_t bar_empty = bar_full + 16;
    for (int t = 0; t < ntiles; t++) {
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * (t & 1), ((t >> 1) - 1) & 1);
        dh_mbar_arrive(bar_full + 8 * (t & 1));
    }
}

/* The producer warpgroup: for every tile, wait for its stage to be free, fill it, arrive on
 * its full barrier. Thread p owns row p / 2 of each tile and every second 16-byte chunk of
 * it (p % 2 + 2 i), so the two threads of a row read adjacent chunks (one 32-byte sector). */
template <int FMT, int V>
__device__ __forceinline__ void a6_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                            int re, int ntiles)
{
    const int j = p >> 1, hf = p & 1;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    long long next_id = j < min(A6_N, re - rb) ? attn4_row_id(a, q, rb + j) : 0;
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, base = rb + t * A6_N, cnt = min(A6_N, re - base);
        const long long id = next_id;
        if (t + 1 < ntiles && j < min(A6_N, re - base - A6_N)) next_id = attn4_row_id(a, q, base + A6_N + j);
        const bool valid = j < cnt;
        const uint8_t *src = valid ? attn4_row_ptr(a, id) : nullptr;
        uint8_t *stage = sm + A6_TILE_BYTES * (1 + s);
        if (FMT == KREF_ROW_FP8) {
            /* The row's bytes first (in flight while the stage may still be in use). */
            uint4 lat[16], rope[4];
            float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
            if (valid) {
                constexpr bool H = a6_variant<V>::hint;
#pragma unroll
                for (int i = 0; i < 16; i++) lat[i] = a6_ld_row16<H>(src + (hf + 2 * i) * 16);
#pragma unroll
                for (int i = 0; i < 4; i++) rope[i] = a6_ld_row16<H>(src + KREF_LATENT + 16 + (hf + 2 * i) * 16);
                const uint4 s4 = a6_ld_row16<H>(src + KREF_LATENT);
                sc = make_float4(__uint_as_float(s4.x), __uint_as_float(s4.y), __uint_as_float(s4.z), __uint_as_float(s4.w));
            } else {
#pragma unroll
                for (int i = 0; i < 16; i++) lat[i] = make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int i = 0; i < 4; i++) rope[i] = make_uint4(0, 0, 0, 0);
            }
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const int o = hf + 2 * i;   /* latent codes 16 o .. 16 o + 15: chunks 2 o, 2 o + 1 */
                const float g = (o >> 3) == 0 ? sc.x : (o >> 3) == 1 ? sc.y : (o >> 3) == 2 ? sc.z : sc.w;
                const __half2 g2 = __float2half2_rn(g);
                const __nv_fp8x2_storage_t *p2 = (const __nv_fp8x2_storage_t *)&lat[i];
                uint4 w[2];
                __half2 *h2 = (__half2 *)w;
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(p2[e], __NV_E4M3);
                    h2[e] = __hmul2(*(__half2 *)&hr, g2);
                }
                *(uint4 *)(stage + a6_swz(j, 2 * o)) = w[0];
                *(uint4 *)(stage + a6_swz(j, 2 * o + 1)) = w[1];
            }
#pragma unroll
            for (int i = 0; i < 4; i++) *(uint4 *)(stage + a6_swz(j, 64 + hf + 2 * i)) = dh_bf16x8_to_f16(rope[i]);
        } else {
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
            const uint32_t sst = sbase + A6_TILE_BYTES * (1 + s);
            a6_cp_async_row<a6_variant<V>::hint>(sst, j, hf, valid, src, a.q);
            asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
        }
        /* Make this thread's writes visible to the tensor cores' (async proxy) reads, then
         * count it in the stage's full barrier (its release orders the writes before). */
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

/* Version 10's producer: the next tile's loads travel while this one is converted and while
 * the producer waits for a free stage (version 6's producer has one tile's loads in flight and
 * converts only after they land: a diagnostic run of version 8's producer alone took 2.8 us per
 * tile). Row ids are loaded two tiles ahead. BF16 rows: cp.async, and the stage's full barrier
 * is told by the copies' own completion (cp.async.mbarrier.arrive.noinc: one arrival per
 * thread once its copies land), so the producer goes on to the next stage at once; the
 * consumers fence the async proxy after their wait. FP8 rows: a thread's share of its row in
 * two halves, A (latent chunks hf, hf + 2, .. hf + 14 and the scales) and B (the other 8 latent
 * chunks and RoPE): the next tile's A is loaded as soon as this tile's A is converted, its B as
 * soon as this B is, in the same registers. */
template <int FMT, int V>
__device__ __forceinline__ void a6_producer_pipe(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                                 int re, int ntiles)
{
    const int j = p >> 1, hf = p & 1;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    /* This thread's row of tile t exists (the split's last tile may be short). */
    auto has_row = [&](int t) { return t < ntiles && rb + t * A6_N + j < re; };
    long long id_cur = has_row(0) ? attn4_row_id(a, q, rb + j) : 0;
    long long id_next = has_row(1) ? attn4_row_id(a, q, rb + A6_N + j) : 0;
    if (FMT == KREF_ROW_BF16) {
        for (int t = 0; t < ntiles; t++) {
            const int s = t & 1;
            const bool valid = has_row(t);
            const uint8_t *src = valid ? attn4_row_ptr(a, id_cur) : nullptr;
            id_cur = id_next;
            id_next = has_row(t + 2) ? attn4_row_id(a, q, rb + (t + 2) * A6_N + j) : 0;
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
            const uint32_t sst = sbase + A6_TILE_BYTES * (1 + s);
            a6_cp_async_row(sst, j, hf, valid, src, a.q);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar_full + 8 * s) : "memory");
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
        return;
    }
    /* FP8: half A = lat[0..7] + the scales, half B = lat[8..15] + RoPE. */
    uint4 lat[16], rope[4];
    float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
    const uint8_t *src = has_row(0) ? attn4_row_ptr(a, id_cur) : nullptr;
    auto load_a = [&](const uint8_t *r) {
#pragma unroll
        for (int i = 0; i < 8; i++) lat[i] = r ? *(const uint4 *)(r + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
        sc = r ? *(const float4 *)(r + KREF_LATENT) : make_float4(0.f, 0.f, 0.f, 0.f);
    };
    auto load_b = [&](const uint8_t *r) {
#pragma unroll
        for (int i = 8; i < 16; i++) lat[i] = r ? *(const uint4 *)(r + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < 4; i++) rope[i] = r ? *(const uint4 *)(r + KREF_LATENT + 16 + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
    };
    if (ntiles > 0) {
        load_a(src);
        load_b(src);
    }
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1;
        uint8_t *stage = sm + A6_TILE_BYTES * (1 + s);
        const uint8_t *nsrc = has_row(t + 1) ? attn4_row_ptr(a, id_next) : nullptr;
        id_next = has_row(t + 2) ? attn4_row_id(a, q, rb + (t + 2) * A6_N + j) : 0;
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        const float gz = sc.z, gw = sc.w;   /* half B's scales, before half A is reloaded */
#pragma unroll
        for (int i = 0; i < 8; i++) a6_dequant_chunk(stage, j, hf + 2 * i, lat[i], (hf + 2 * i) < 8 ? sc.x : sc.y);
        if (t + 1 < ntiles) load_a(nsrc);
#pragma unroll
        for (int i = 8; i < 16; i++) a6_dequant_chunk(stage, j, hf + 2 * i, lat[i], (hf + 2 * i) < 24 ? gz : gw);
#pragma unroll
        for (int i = 0; i < 4; i++) *(uint4 *)(stage + a6_swz(j, 64 + hf + 2 * i)) = dh_bf16x8_to_f16(rope[i]);
        if (t + 1 < ntiles) load_b(nsrc);
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

template <int FMT, int V>
__device__ __forceinline__ void a6_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                            int wg, int tid, int q, int split, int hb, int rb, int re, int ntiles);

/* The block's 64 queries into the swizzled Q tile (fp16 for FP8 rows; RB: their RoPE part, columns
 * 512-575, left BF16, version 39) by NT threads, all loads in flight before the first store. */
template <int FMT, int NT, bool RB = false>
__device__ __forceinline__ void a6_load_q(const attn_args &a, uint8_t *sm, int tid, int q, int hb)
{
    const __nv_bfloat16 *qg = a.q + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_QK_DIM;
    constexpr int QI = 64 * 72 / NT;   /* chunks of 16 B per thread: 12 (384 threads), 18 (256) */
    static_assert(QI * NT == 64 * 72, "the Q tile's chunks must divide among the threads");
    uint4 qv[QI];
#pragma unroll
    for (int i = 0; i < QI; i++) {
        const int c = tid + i * NT;
        qv[i] = __ldg((const uint4 *)(qg + (size_t)(c / 72) * KREF_QK_DIM + (c % 72) * 8));
    }
#pragma unroll
    for (int i = 0; i < QI; i++) {
        const int c = tid + i * NT;
        *(uint4 *)(sm + a6_swz(c / 72, c % 72)) = FMT == KREF_ROW_FP8 && !(RB && c % 72 >= 64) ? dh_bf16x8_to_f16(qv[i]) : qv[i];
    }
}

/* STAGED (version 8): the producer starts on the first tile's rows at once while the consumers
 * alone load Q, and the output leaves through shared memory in whole rows (a6_store_out). */
template <int FMT, int V>
__global__ void __launch_bounds__(A6_THREADS, 1) attn6_kernel(const attn_args a, float *__restrict__ out)
{
    constexpr bool OVERLAP = a6_variant<V>::overlap, STAGED = a6_variant<V>::staged;
    extern __shared__ __align__(1024) uint8_t a6_smem_raw[];
    /* Every tile on a 1024-byte boundary (the swizzle pattern's period). */
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a6_smem_raw);
    uint8_t *sm = a6_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;

    const int tid = threadIdx.x, wg = tid >> 7;
    const int split = blockIdx.x, q = blockIdx.y, hb = blockIdx.z;
    const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
    const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;

    if (tid == 0) {
        dh_mbar_init(bar_full, 128);
        dh_mbar_init(bar_full + 8, 128);
        dh_mbar_init(bar_empty, 256);
        dh_mbar_init(bar_empty + 8, 256);
    }
    if (!STAGED) a6_load_q<FMT, A6_THREADS>(a, sm, tid, q, hb);   /* all threads, before anything else */
    dh_fence_proxy_async();
    __syncthreads();

    /* Registers: 168 per thread at launch (384 threads); the producer gives some back so that
     * the consumers can hold their 128 output accumulators, S and the softmax state. */
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A6_PRODUCER_REGS(OVERLAP)));
        if (a6_variant<V>::diag == A6_DIAG_CONSUMERS) a6_producer_unfilled(sbase + A6_BAR_OFF, ntiles);
        else if (a6_variant<V>::pipe) a6_producer_pipe<FMT, V>(a, sm, sbase, tid - 256, q, rb, re, ntiles);
        else a6_producer<FMT, V>(a, sm, sbase, tid - 256, q, rb, re, ntiles);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A6_CONSUMER_REGS(OVERLAP)));
        if (STAGED) {
            a6_load_q<FMT, 256>(a, sm, tid, q, hb);
            dh_fence_proxy_async();
            a6_consumer_bar();
        }
        a6_consumer<FMT, V>(a, out, sm, sbase, wg, tid, q, split, hb, rb, re, ntiles);
    }
}

/* S = Q K^T over the 576 key dims for this warpgroup's 32 rows of the tile in stage:
 * 9 column blocks x 4 steps of 16 (32 B each); issued and committed, not waited for. */
template <int FMT>
__device__ __forceinline__ void a6_issue_s(float (&sc)[16], uint32_t sQ, uint32_t stage, int w)
{
#pragma unroll
    for (int i = 0; i < 16; i++) sc[i] = 0.f;
#pragma unroll
    for (int i = 0; i < 16; i++) dh_fence_reg(sc[i]);
    dh_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 36; ks++) {
        const uint32_t off = (ks >> 2) * A6_BLOCK_BYTES + (ks & 3) * 32;
        a6_ops<FMT>::mma_s(sc, dh_wgmma_desc(sQ + off, 16, 1024), dh_wgmma_desc(stage + off + w * 32 * 128, 16, 1024), ks > 0);
    }
    dh_wgmma_commit();
}

/* O_w += P V_w: 4 steps of 16 rows; V_w = column blocks 4 w .. 4 w + 3 of the stage.
 * Issued and committed, not waited for. */
template <int FMT>
__device__ __forceinline__ void a6_issue_pv(float (&o)[128], uint32_t sP, uint32_t stage, int w)
{
#pragma unroll
    for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
    dh_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        a6_ops<FMT>::mma_o(o, dh_wgmma_desc(sP + kk * 32, 16, 1024), dh_wgmma_desc(stage + 4 * w * A6_BLOCK_BYTES + kk * 2048, A6_BLOCK_BYTES, 1024));
    dh_wgmma_commit();
}

/* The online softmax of one tile's scores (log2 domain; columns past cnt masked): the row
 * maxima exchanged with the other warpgroup, P written to shared memory, the running maxima,
 * sums and output rescaled. Ends with the consumers' barrier after P is visible to wgmma. */
template <int FMT, int POFF = A6_P_OFF>
__device__ __forceinline__ void a6_softmax(float (&sc)[16], float (&o)[128], uint8_t *sm, float *red, int w, int qd,
                                           int r0, int r1, int cnt, float sscale, float &m0, float &m1, float &l0,
                                           float &l1)
{
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < 4; jj++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int col = 32 * w + 8 * jj + 2 * qd + e;
            const float v0 = col < cnt ? sc[4 * jj + e] * sscale : -INFINITY;
            const float v1 = col < cnt ? sc[4 * jj + 2 + e] * sscale : -INFINITY;
            sc[4 * jj + e] = v0;
            sc[4 * jj + 2 + e] = v1;
            mx0 = fmaxf(mx0, v0);
            mx1 = fmaxf(mx1, v1);
        }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 2));
    if (qd == 0) red[w * 64 + r0] = mx0, red[w * 64 + r1] = mx1;
    a6_consumer_bar();
    mx0 = fmaxf(mx0, red[(w ^ 1) * 64 + r0]);
    mx1 = fmaxf(mx1, red[(w ^ 1) * 64 + r1]);
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float al0 = mn0 == -INFINITY ? 1.f : exp2f(m0 - mn0), al1 = mn1 == -INFINITY ? 1.f : exp2f(m1 - mn1);
    m0 = mn0;
    m1 = mn1;
    float ps0 = 0.f, ps1 = 0.f;
#pragma unroll
    for (int jj = 0; jj < 4; jj++) {
        const float p00 = mn0 == -INFINITY ? 0.f : exp2f(sc[4 * jj] - mn0);
        const float p01 = mn0 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 1] - mn0);
        const float p10 = mn1 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 2] - mn1);
        const float p11 = mn1 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 3] - mn1);
        ps0 += p00 + p01;
        ps1 += p10 + p11;
        /* P[r][col]: K-major 64 x 64 tile, chunk (32 w + 8 jj) / 8 = 4 w + jj. */
        const int ch = 4 * w + jj;
        *(uint32_t *)(sm + POFF + r0 * 128 + ((ch ^ (r0 & 7)) << 4) + qd * 4) = a6_ops<FMT>::pack(p00, p01);
        *(uint32_t *)(sm + POFF + r1 * 128 + ((ch ^ (r1 & 7)) << 4) + qd * 4) = a6_ops<FMT>::pack(p10, p11);
    }
    l0 = l0 * al0 + ps0;   /* this thread's columns only; summed over the quad and the two warpgroups at the end */
    l1 = l1 * al1 + ps1;
#pragma unroll
    for (int jj = 0; jj < 32; jj++) o[4 * jj] *= al0, o[4 * jj + 1] *= al0, o[4 * jj + 2] *= al1, o[4 * jj + 3] *= al1;
    dh_fence_proxy_async();
    a6_consumer_bar();
}

/* Version 8's epilogue: the block's 64 x 512 output (fp32 final rows, or fp16 partials), scaled
 * by 1 / row sum, written to the key stages (free once both warpgroups have waited for their
 * last P V) with rows padded by 32 B (fp32) or 16 B (fp16), so a warp's 8 rows x 4 threads
 * fall in distinct banks; then copied out in whole 16-byte chunks, consecutive threads on
 * consecutive chunks of the block's 64 contiguous output rows. Version 6 stores each
 * thread's 2-element pieces straight to global memory: 8 rows x 16-32 B per warp instruction,
 * 8K sector writes per block, which an ncu profile put at about a third of a one-tile
 * block's time. */
template <typename OT>
__device__ __forceinline__ void a6_store_out(const float (&o)[128], float i0, float i1, uint8_t *sm, int w, int tid,
                                             int r0, int r1, int qd, OT *__restrict__ dst)
{
    constexpr int ROW = KREF_V_DIM * (int)sizeof(OT), PITCH = ROW + (sizeof(OT) == 4 ? 32 : 16);
    static_assert(64 * PITCH <= 2 * A6_TILE_BYTES, "the staged output must fit in the two key stages");
    uint8_t *st = sm + A6_TILE_BYTES;
#pragma unroll
    for (int jj = 0; jj < 32; jj++) {
        const int d = 256 * w + 8 * jj + 2 * qd;
        if (sizeof(OT) == 4) {
            *(float2 *)(st + r0 * PITCH + d * 4) = make_float2(o[4 * jj] * i0, o[4 * jj + 1] * i0);
            *(float2 *)(st + r1 * PITCH + d * 4) = make_float2(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
        } else {
            *(__half2 *)(st + r0 * PITCH + d * 2) = __floats2half2_rn(o[4 * jj] * i0, o[4 * jj + 1] * i0);
            *(__half2 *)(st + r1 * PITCH + d * 2) = __floats2half2_rn(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
        }
    }
    a6_consumer_bar();
    constexpr int CH = ROW / 16;   /* 16-byte chunks per row */
    uint8_t *g = (uint8_t *)dst;
#pragma unroll 8
    for (int c = tid; c < 64 * CH; c += 256)
        *(uint4 *)(g + (size_t)c * 16) = *(const uint4 *)(st + (c / CH) * PITCH + (c % CH) * 16);
}

/* The consumers' (256 threads') partials and log-sum-exps published, then the wait until every
 * split of (query q, heads 64 hb ..) has published its own (the counts in a.merge_cnt, kept by
 * thread waiter and set back to zero by the last block to leave the wait); versions 9 (thread 0)
 * and 43 (thread 128: warpgroup 0's instance, WAITER false, has no atomics, which spill there). */
template <bool WAITER = true>
__device__ __forceinline__ void a6_merge_wait(const attn_args &a, int tid, int q, int hb, int waiter = 0)
{
    __threadfence();
    a6_consumer_bar();
    if (WAITER && tid == waiter) {
        unsigned *cnt = a.merge_cnt + 2 * ((size_t)q * (a.heads / 64) + hb);
        atomicAdd(cnt, 1u);
        unsigned seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(cnt) : "memory");
        } while (seen < (unsigned)a.splits);
        if (atomicAdd(cnt + 1, 1u) == (unsigned)a.splits - 1) {
            atomicExch(cnt, 0u);
            atomicExch(cnt + 1, 0u);
        }
    }
    a6_consumer_bar();
}

/* Version 9: the splits of (query q, heads 64 hb ..) merged inside the kernel. The launch is
 * cooperative, so every block of the grid is resident and a block may wait for the others of
 * its query: each block publishes its partials (a fence by every writer, then one arrival) and
 * waits until all splits have arrived; the last block to leave the wait sets both counts back
 * to zero for the next launch (every block has then stopped reading them; a launch that is
 * aborted midway leaves them set, and two launches may not share them at once). Then each block
 * merges its 1/splits share of the 64 x 512 outputs: the splits' log-sum-exps of the 64 heads
 * are read once into shared memory (the free key stages) and turned into weights there, and
 * each thread reads 8 outputs' partials of 4 splits at a time (32 loads in flight), from L2. */
__device__ __forceinline__ void a6_merge(const attn_args &a, float *__restrict__ out, uint8_t *sm, int tid, int q,
                                         int split, int hb)
{
    a6_merge_wait(a, tid, q, hb);
    const int S = a.splits;                 /* <= 64 (attn4_launch) */
    const size_t row0 = (size_t)q * S * a.heads + (size_t)hb * 64;   /* split 0, head 0 of this block */
    float *wt = (float *)(sm + A6_TILE_BYTES), *inv = wt + 64 * 64;  /* [S][64] weights, [64] 1 / their sums */
    for (int e = tid; e < S * 64; e += 256) wt[e] = __ldcg(a.part_lse + row0 + (size_t)(e >> 6) * a.heads + (e & 63));
    a6_consumer_bar();
    if (tid < 64) {
        float mx = -INFINITY, den = 0.f;
        for (int t = 0; t < S; t++) mx = fmaxf(mx, wt[t * 64 + tid]);
        for (int t = 0; t < S; t++) {
            const float l = wt[t * 64 + tid], w = mx == -INFINITY || l == -INFINITY ? 0.f : exp2f(l - mx);
            wt[t * 64 + tid] = w;
            den += w;
        }
        inv[tid] = den > 0 ? 1.f / den : 0.f;
    }
    a6_consumer_bar();
    constexpr int J = 8, CH = KREF_V_DIM / 4;   /* outputs per thread at a time; float4 pieces per row */
    const int lo = 64 * CH * split / S, hi = 64 * CH * (split + 1) / S;
    const __half *part = (const __half *)a.part_o;
    for (int i0 = lo + tid; i0 < hi; i0 += J * 256) {
        float4 acc[J];
#pragma unroll
        for (int j = 0; j < J; j++) acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
        for (int t = 0; t < S; t++) {
#pragma unroll
            for (int j = 0; j < J; j++) {
                const int i = min(i0 + j * 256, hi - 1), r = i / CH, c = i % CH;
                const uint2 v = __ldcg((const uint2 *)(part + (row0 + (size_t)t * a.heads + r) * KREF_V_DIM + c * 4));
                const float w = wt[t * 64 + r];
                const __half2 *h2 = (const __half2 *)&v;
                const float2 f0 = __half22float2(h2[0]), f1 = __half22float2(h2[1]);
                acc[j].x += w * f0.x, acc[j].y += w * f0.y, acc[j].z += w * f1.x, acc[j].w += w * f1.y;
            }
        }
#pragma unroll
        for (int j = 0; j < J; j++) {
            const int i = i0 + j * 256;
            if (i < hi) {
                const int r = i / CH, c = i % CH;
                const float s_ = inv[r];
                *(float4 *)(out + ((size_t)q * a.heads + (size_t)hb * 64 + r) * KREF_V_DIM + c * 4) =
                    make_float4(acc[j].x * s_, acc[j].y * s_, acc[j].z * s_, acc[j].w * s_);
            }
        }
    }
}

/* The consumers' tile loop. Version 6: per tile, S, wait, softmax, P V, wait: the tensor cores
 * idle during the softmax and the barriers. Version 7 (OVERLAP): the next tile's S is issued
 * before this tile's softmax, so the multiplies run during it (FlashAttention-3's
 * intra-warpgroup pipelining), and one wait covers that S and this tile's P V; 16 more
 * registers hold the next tile's scores. */
template <int FMT, int V>
__device__ __forceinline__ void a6_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                            int wg, int tid, int q, int split, int hb, int rb, int re, int ntiles)
{
    constexpr bool OVERLAP = a6_variant<V>::overlap, STAGED = a6_variant<V>::staged, MERGE = a6_variant<V>::merge;
    constexpr int DIAG = a6_variant<V>::diag;
    const uint32_t sQ = sbase, sK = sbase + A6_TILE_BYTES, sP = sbase + A6_P_OFF;
    float *red = (float *)(sm + A6_RED_OFF);   /* [2][64] tile row maxima, [2][64] row sums */
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    /* Consumers. Thread rows r0 = 16 (warp % 4) + lane / 4 and r1 = r0 + 8 of the 64 heads;
     * S columns 8 jj + 2 (lane % 4) (+1) of this warpgroup's 32 rows; O dims 256 w + 8 jj + 2 (lane % 4). */
    const int w = wg, lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const float sscale = a.sm_scale * A6_LOG2E;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

    float sc[16];
    if (OVERLAP && ntiles > 0) {
        dh_mbar_wait(bar_full, 0);
        a6_issue_s<FMT>(sc, sQ, sK, w);
        dh_wgmma_wait0();
#pragma unroll
        for (int i = 0; i < 16; i++) dh_fence_reg(sc[i]);
    }
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, cnt = min(A6_N, re - (rb + t * A6_N));
        const uint32_t stage = sK + A6_TILE_BYTES * s;
        if (DIAG == A6_DIAG_PRODUCER) {   /* take the tile and hand the stage back at once */
            dh_mbar_wait(bar_full + 8 * s, (t >> 1) & 1);
        } else if (OVERLAP) {
            float sn[16];
            if (t + 1 < ntiles) {
                dh_mbar_wait(bar_full + 8 * (s ^ 1), ((t + 1) >> 1) & 1);
                a6_issue_s<FMT>(sn, sQ, sK + A6_TILE_BYTES * (s ^ 1), w);
            }
            a6_softmax<FMT>(sc, o, sm, red, w, qd, r0, r1, cnt, sscale, m0, m1, l0, l1);
            a6_issue_pv<FMT>(o, sP, stage, w);
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
            if (t + 1 < ntiles) {
#pragma unroll
                for (int i = 0; i < 16; i++) dh_fence_reg(sn[i]), sc[i] = sn[i];
            }
        } else {
            dh_mbar_wait(bar_full + 8 * s, (t >> 1) & 1);
            if (a6_variant<V>::pipe) dh_fence_proxy_async();   /* the stage may have been filled by cp.async */
            a6_issue_s<FMT>(sc, sQ, stage, w);
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 16; i++) dh_fence_reg(sc[i]);
            a6_softmax<FMT>(sc, o, sm, red, w, qd, r0, r1, cnt, sscale, m0, m1, l0, l1);
            a6_issue_pv<FMT>(o, sP, stage, w);
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
        }
        dh_mbar_arrive(bar_empty + 8 * s);
    }

    /* Row sums: the quad, then the two warpgroups (same running maximum, so the sums add). */
    l0 += __shfl_xor_sync(0xffffffff, l0, 1);
    l0 += __shfl_xor_sync(0xffffffff, l0, 2);
    l1 += __shfl_xor_sync(0xffffffff, l1, 1);
    l1 += __shfl_xor_sync(0xffffffff, l1, 2);
    float *lsum = red + 128;
    if (qd == 0) lsum[w * 64 + r0] = l0, lsum[w * 64 + r1] = l1;
    a6_consumer_bar();
    const float L0 = l0 + lsum[(w ^ 1) * 64 + r0], L1 = l1 + lsum[(w ^ 1) * 64 + r1];
    const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
    const size_t ob = ((size_t)q * a.splits + split) * a.heads + (size_t)hb * 64;
    __half *part = (__half *)a.part_o;
    if (STAGED) {
        if (a.splits == 1) a6_store_out<float>(o, i0, i1, sm, w, tid, r0, r1, qd, out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM);
        else a6_store_out<__half>(o, i0, i1, sm, w, tid, r0, r1, qd, part + ob * KREF_V_DIM);
    } else {
#pragma unroll
    for (int jj = 0; jj < 32; jj++) {
        const int d = 256 * w + 8 * jj + 2 * qd;
        if (a.splits == 1) {
            const size_t h0 = (size_t)q * a.heads + (size_t)hb * 64;
            *(float2 *)(out + (h0 + r0) * KREF_V_DIM + d) = make_float2(o[4 * jj] * i0, o[4 * jj + 1] * i0);
            *(float2 *)(out + (h0 + r1) * KREF_V_DIM + d) = make_float2(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
        } else {
            *(__half2 *)(part + (ob + r0) * KREF_V_DIM + d) = __floats2half2_rn(o[4 * jj] * i0, o[4 * jj + 1] * i0);
            *(__half2 *)(part + (ob + r1) * KREF_V_DIM + d) = __floats2half2_rn(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
        }
    }
    }
    if (a.splits > 1 && w == 0 && qd == 0) {
        a.part_lse[ob + r0] = L0 > 0 ? m0 + log2f(L0) : -INFINITY;
        a.part_lse[ob + r1] = L1 > 0 ? m1 + log2f(L1) : -INFINITY;
    }
    if (MERGE && a.splits > 1) a6_merge(a, out, sm, tid, q, split, hb);
}

template <int V>
static void a6_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn6_kernel<KREF_ROW_FP8, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        cudaCheck(cudaFuncSetAttribute(attn6_kernel<KREF_ROW_BF16, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    dim3 grid(a.splits, a.nq, a.heads / 64);
    const void *fn = a.format == KREF_ROW_FP8 ? (const void *)attn6_kernel<KREF_ROW_FP8, V>
                                             : (const void *)attn6_kernel<KREF_ROW_BF16, V>;
    if (a6_variant<V>::merge && a.splits > 1) {
        /* Cooperative: the launch fails rather than run with a split block not resident. */
        attn_args args = a;
        void *params[] = {&args, &out};
        cudaCheck(cudaLaunchCooperativeKernel(fn, grid, dim3(A6_THREADS), params, A6_SMEM_BYTES, stream));
    } else if (a.format == KREF_ROW_FP8) {
        attn6_kernel<KREF_ROW_FP8, V><<<grid, A6_THREADS, A6_SMEM_BYTES, stream>>>(a, out);
    } else {
        attn6_kernel<KREF_ROW_BF16, V><<<grid, A6_THREADS, A6_SMEM_BYTES, stream>>>(a, out);
    }
    CUDA_LAUNCH_CHECK();
}

#endif
