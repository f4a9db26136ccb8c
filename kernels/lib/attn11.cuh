/* attn11.cuh: attention versions 11-13 (kernels/versions/attention_wgmma.cu instantiates them),
 * the sparse decode attention with FP8 rows multiplied as FP8 (wgmma e4m3 x e4m3) for the scores,
 * sm_90a. BF16 rows take version 8 (attn6.cuh) unchanged. All three measured slower than
 * version 8 (kernels/NOTES.md, "Versions 12 and 13: outcome"), which stays the library's; they
 * are kept as measured results and as the starting point named there.
 *
 * Version 8's limits (kernels/NOTES.md): its producer warpgroup gathers each tile through
 * registers (one tile of loads in flight, then the dequantisation of all 576 dims, then the
 * stores), which alone takes 97.5 us at batch 128; and the keys stay 16-bit in shared memory,
 * so Q's fp16 copy and two 72 KB key stages fill it and no deeper ring fits. Version 11:
 *
 *   - the producer (warpgroup 2) copies each selected row's 656 bytes as they are by cp.async
 *     (no registers, completion counted on the stage's full mbarrier) into a two-stage ring of
 *     raw tiles: the 512 e4m3 codes in the wgmma layout (4 column blocks of 64 rows x 128 B,
 *     128-byte swizzle), the bf16 RoPE (one such block) and the four fp32 group scales;
 *     tile t + 1's copies are issued before tile t is dequantised, so up to two tiles of rows
 *     are in flight per SM;
 *   - the scores S = Q K^T read the raw codes straight from the ring: per 128-dim group g one
 *     fp32 accumulator of wgmma m64n32k32 e4m3, Q quantised once per block to e4m3 with one
 *     scale per head, as two terms (hi = e4m3(q / s), lo = e4m3(q / s - hi), both multiplied
 *     into the same accumulator: the query's rounding error drops from e4m3's 2^-4 to ~2^-8,
 *     which one term alone would leave at ~3 % of the output, over the 1e-2 check); the RoPE
 *     part in bf16 (m64n32k16, queries and keys as stored). S = s_h (sum_g k_rg acc_g) + rope;
 *   - the producer dequantises only the values (the 512 latent dims, codes x group scale ->
 *     fp16) from the raw stage into one value tile (8 column blocks, version 8's layout),
 *     in two halves of 256 dims with their own full / empty mbarriers, one per consumer
 *     warpgroup: the dequantisation of tile t runs while the consumers compute S and the
 *     softmax of tile t, and half w's P V starts when its half has landed;
 *   - the consumers (warpgroups 0, 1) as version 8: softmax, P (fp16) through shared memory,
 *     O_w += P V_w (m64n256k16 f16), the output staged through shared memory.
 * Shared memory: Q hi and lo 2 x 32 KB, Q RoPE 8 KB, 2 raw stages of 41 KB, the value tile
 * 64 KB, P 8 KB, maxima, scales, barriers: 232,256 of the 232,448 bytes a block may have, with
 * no room for a rounding of the base, so the kernel relies on (and checks) the dynamic shared
 * memory starting on a 1024-byte boundary. Blocks of one (query, split) for the 64-head groups
 * of a query are adjacent in the grid, so with 128 heads the two blocks reading the same rows
 * run together and the second finds them in L2. */
#ifndef KERNELS_ATTN11_CUH
#define KERNELS_ATTN11_CUH

#include "kernels/lib/attn6.cuh"

#define A11_QH_OFF 0                          /* Q hi codes: 4 blocks of 64 heads x 128 B */
#define A11_QL_OFF 32768                      /* Q lo codes */
#define A11_QR_OFF 65536                      /* Q RoPE, bf16: one block */
#define A11_RAW_OFF 73728                     /* 2 raw stages */
#define A11_RAW_BYTES 41984                   /* codes 32 KB, RoPE 8 KB, scales 64 x 16 B */
#define A11_RAW_ROPE 32768
#define A11_RAW_SC 40960
#define A11_V_OFF (A11_RAW_OFF + 2 * A11_RAW_BYTES)   /* 157696: the fp16 value tile, 64 KB */
#define A11_P_OFF (A11_V_OFF + 65536)                 /* 223232: P, 64 x 64 fp16 */
#define A11_RED_OFF (A11_P_OFF + 8192)                /* [2][64] tile row maxima */
#define A11_QS_OFF (A11_RED_OFF + 512)                /* [64] Q scales */
#define A11_BAR_OFF (A11_QS_OFF + 256)                /* raw full [2], raw empty [2], v full [2], v empty [2] */
#define A11_SMEM_BYTES (A11_BAR_OFF + 64)
#define A11_PRODUCER_REGS 56
#define A11_CONSUMER_REGS 224
static_assert(A11_SMEM_BYTES <= 232448, "version 11's shared memory must fit one block of the H200");
static_assert(A11_PRODUCER_REGS + 2 * A11_CONSUMER_REGS == 504, "setmaxnreg counts must add up to 3 x 168");

/* S (+)= Q K^T in e4m3 for 32 rows (m64n32k32, both K-major). */
__device__ __forceinline__ void a11_mma_s_e4m3(float (&d)[16], uint64_t da, uint64_t db, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {" DH_WG_REGS16 "}, %16, %17, p, 1, 1;\n}\n"
                 : DH_WG_F16(0)
                 : "l"(da), "l"(db), "r"(scale_d));
}

/* Byte offset of 16-byte chunk c (0..7) of row r inside one 64 x 128 B swizzled block. */
__device__ __forceinline__ uint32_t a11_swz(int r, int c) { return (uint32_t)(r * 128 + (((c & 7) ^ (r & 7)) << 4)); }

/* The raw stage's destination of 16-byte chunk c (0..40) of a 656-byte row j: codes 0..31,
 * scales 32, RoPE 33..40. */
__device__ __forceinline__ uint32_t a11_raw_dst(int j, int c)
{
    if (c < 32) return (uint32_t)((c >> 3) * A6_BLOCK_BYTES) + a11_swz(j, c);
    if (c == 32) return (uint32_t)(A11_RAW_SC + 16 * j);
    return (uint32_t)A11_RAW_ROPE + a11_swz(j, c - 33);
}

/* Version 12: all 384 threads copy, six per row (thread i: row i / 6, chunks i % 6 + 6 m), tile t
 * into raw stage t % 2, the completion counted on its full barrier (384 arrivals); id holds the
 * row's id for tile t and is reloaded for tile t + 1 after the copies are issued. */
template <int D>
__device__ __forceinline__ void a12_copy_tile(const attn_args &a, uint32_t sbase, int i, int q, int rb, int re,
                                              int ntiles, int t, long long &id)
{
    const int j = i / 6, p = i - 6 * (i / 6);
    const uint32_t full = sbase + A11_BAR_OFF + 8 * (t & 1);
    if (D == A6_DIAG_CONSUMERS) {   /* the stage handed over unfilled */
        dh_mbar_arrive(full);
        return;
    }
    const bool valid = rb + t * A6_N + j < re;
    const uint8_t *src = valid ? attn4_row_ptr(a, id) : nullptr;
    const uint32_t dst = sbase + A11_RAW_OFF + A11_RAW_BYTES * (t & 1);
#pragma unroll
    for (int m = 0; m < 7; m++) {
        const int c = p + 6 * m;
        if (c < 41) a6_cp_async16(dst + a11_raw_dst(j, c), valid ? (const void *)(src + c * 16) : (const void *)a.q, valid ? 16 : 0);
    }
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full) : "memory");
    if (t + 1 < ntiles && rb + (t + 1) * A6_N + j < re) id = attn4_row_id(a, q, rb + (t + 1) * A6_N + j);
}

/* The producer: tile t's copies issued, then tile t - 1 dequantised into the value tile. */
template <int V, int D>
__device__ __forceinline__ void a11_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                             int re, int ntiles, long long id12)
{
    const int j = p >> 1, hf = p & 1;
    const uint32_t raw_full = sbase + A11_BAR_OFF, raw_empty = raw_full + 16, v_full = raw_full + 32,
                   v_empty = raw_full + 48;
    auto has_row = [&](int t) { return t < ntiles && rb + t * A6_N + j < re; };
    long long id_next = has_row(0) ? attn4_row_id(a, q, rb + j) : 0;
    for (int t = V == 12 ? 1 : 0; t <= ntiles; t++) {
        if (V == 11 && t < ntiles) {
            const int s = t & 1;
            const bool valid = has_row(t);
            const uint8_t *src = valid ? attn4_row_ptr(a, id_next) : nullptr;
            id_next = has_row(t + 1) ? attn4_row_id(a, q, rb + (t + 1) * A6_N + j) : 0;
            if (t >= 2) dh_mbar_wait(raw_empty + 8 * s, ((t >> 1) - 1) & 1);
            const uint32_t dst = sbase + A11_RAW_OFF + A11_RAW_BYTES * s;
            if (D == A6_DIAG_CONSUMERS) {   /* the stage handed over unfilled */
                dh_mbar_arrive(raw_full + 8 * s);
            } else {
#pragma unroll
                for (int i = 0; i < 21; i++) {
                    const int c = hf + 2 * i;
                    if (c < 41) a6_cp_async16(dst + a11_raw_dst(j, c), valid ? (const void *)(src + c * 16) : (const void *)a.q, valid ? 16 : 0);
                }
                asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(raw_full + 8 * s) : "memory");
            }
        }
        if (t >= 1) {
            const int u = t - 1, s = u & 1;
            dh_mbar_wait(raw_full + 8 * s, (u >> 1) & 1);
            const uint8_t *raw = sm + A11_RAW_OFF + A11_RAW_BYTES * s;
            const float4 sc = *(const float4 *)(raw + A11_RAW_SC + 16 * j);
            uint8_t *vt = sm + A11_V_OFF;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (u >= 1) dh_mbar_wait(v_empty + 8 * h, (u - 1) & 1);
#pragma unroll 4
                for (int i = 8 * h; i < (D == A6_DIAG_CONSUMERS || D == A11_DIAG_NODEQUANT ? 8 * h : 8 * h + 8); i++) {
                    const int o = hf + 2 * i;   /* codes 16 o .. 16 o + 15, group o / 8 */
                    const uint4 v = *(const uint4 *)(raw + (o >> 3) * A6_BLOCK_BYTES + a11_swz(j, o));
                    const float g = (o >> 3) == 0 ? sc.x : (o >> 3) == 1 ? sc.y : (o >> 3) == 2 ? sc.z : sc.w;
                    a6_dequant_chunk(vt, j, o, v, g);
                }
                dh_fence_proxy_async();
                dh_mbar_arrive(v_full + 8 * h);
            }
            dh_mbar_arrive(raw_empty + 8 * s);
            if (V == 12 && u + 2 < ntiles) {   /* this thread's share of tile u + 2 into the stage */
                dh_mbar_wait(raw_empty + 8 * s, (u >> 1) & 1);
                a12_copy_tile<D>(a, sbase, 256 + p, q, rb, re, ntiles, u + 2, id12);
            }
        }
    }
}

/* Q of the block's 64 heads by the 256 consumer threads: thread t quantises head t / 4's
 * dims [128 (t % 4), +128) (one column block), the head's scale from the four threads' maxima;
 * the RoPE part is copied as bf16. */
__device__ __forceinline__ void a11_load_q(const attn_args &a, uint8_t *sm, int tid, int q, int hb)
{
    const __nv_bfloat16 *qg = a.q + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_QK_DIM;
    const int h = tid >> 2, part = tid & 3;
    const __nv_bfloat16 *src = qg + (size_t)h * KREF_QK_DIM + 128 * part;
    uint4 rp[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int c = tid + 256 * i;   /* RoPE chunk: head c / 8, chunk c % 8 */
        rp[i] = __ldg((const uint4 *)(qg + (size_t)(c >> 3) * KREF_QK_DIM + KREF_LATENT + 8 * (c & 7)));
    }
    float amax = 0.f;   /* first pass: the maximum (the second reads the same 256 B again, from L1) */
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint4 v = __ldg((const uint4 *)(src + 8 * i));
        const __nv_bfloat162 *b2 = (const __nv_bfloat162 *)&v;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float2 f = __bfloat1622float2(b2[e]);
            amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
        }
    }
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 2));
    const float qs = amax > 0.f ? amax / 448.f : 1.f, inv = 1.f / qs;
    if (part == 0) ((float *)(sm + A11_QS_OFF))[h] = qs;
#pragma unroll
    for (int c = 0; c < 8; c++) {   /* 16 codes from bf16 chunks 2c, 2c + 1 */
        uint32_t hi[4], lo[4];
        const uint4 v[2] = {__ldg((const uint4 *)(src + 16 * c)), __ldg((const uint4 *)(src + 16 * c + 8))};
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const __nv_bfloat162 b = ((const __nv_bfloat162 *)&v[e >> 2])[e & 3];
            const float2 f = __bfloat1622float2(b);
            const float2 x = make_float2(f.x * inv, f.y * inv);
            const __nv_fp8x2_storage_t ch = __nv_cvt_float2_to_fp8x2(x, __NV_SATFINITE, __NV_E4M3);
            const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(ch, __NV_E4M3);
            const float2 back = __half22float2(*(const __half2 *)&hr);
            const __nv_fp8x2_storage_t cl =
                __nv_cvt_float2_to_fp8x2(make_float2(x.x - back.x, x.y - back.y), __NV_SATFINITE, __NV_E4M3);
            if (e & 1) hi[e >> 1] |= (uint32_t)ch << 16, lo[e >> 1] |= (uint32_t)cl << 16;
            else hi[e >> 1] = ch, lo[e >> 1] = cl;
        }
        const uint32_t off = part * A6_BLOCK_BYTES + a11_swz(h, c);
        *(uint4 *)(sm + A11_QH_OFF + off) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        *(uint4 *)(sm + A11_QL_OFF + off) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int c = tid + 256 * i;
        *(uint4 *)(sm + A11_QR_OFF + a11_swz(c >> 3, c & 7)) = rp[i];
    }
}

/* S for this warpgroup's 32 rows of the raw stage, one piece at a time (the consumers' 168
 * registers hold the 128 output accumulators, the scores and one accumulator, no more):
 * piece g < 4 is latent group g (hi and lo terms, 4 steps of 32 codes each, e4m3), piece 4 the
 * RoPE (4 steps of 16, bf16). Issued and committed, not waited for. */
template <int D>
__device__ __forceinline__ void a11_issue_piece(float (&acc)[16], uint32_t sbase, uint32_t raw, int w, int g)
{
#pragma unroll
    for (int i = 0; i < 16; i++) dh_fence_reg(acc[i]);
    dh_wgmma_fence();
    if (g < 4) {
#pragma unroll
        for (int kk = 0; kk < (D == A11_DIAG_QHI ? 4 : 8); kk++) {
            const uint32_t qo = (kk < 4 ? A11_QH_OFF : A11_QL_OFF) + g * A6_BLOCK_BYTES + (kk & 3) * 32;
            const uint32_t ko = g * A6_BLOCK_BYTES + w * 32 * 128 + (kk & 3) * 32;
            a11_mma_s_e4m3(acc, dh_wgmma_desc(sbase + qo, 16, 1024), dh_wgmma_desc(raw + ko, 16, 1024), kk > 0);
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            a6_mma_s_bf16(acc, dh_wgmma_desc(sbase + A11_QR_OFF + kk * 32, 16, 1024),
                          dh_wgmma_desc(raw + A11_RAW_ROPE + w * 32 * 128 + kk * 32, 16, 1024), kk > 0);
    }
    dh_wgmma_commit();
}

template <int V, int D>
__device__ __forceinline__ void a11_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                             int w, int tid, int q, int split, int hb, int rb, int re, int ntiles,
                                             long long id12)
{
    const uint32_t raw_full = sbase + A11_BAR_OFF, raw_empty = raw_full + 16, v_full = raw_full + 32,
                   v_empty = raw_full + 48;
    float *red = (float *)(sm + A11_RED_OFF);
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const float sscale = a.sm_scale * A6_LOG2E;
    const float qs0 = ((const float *)(sm + A11_QS_OFF))[r0], qs1 = ((const float *)(sm + A11_QS_OFF))[r1];
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, cnt = min(A6_N, re - (rb + t * A6_N));
        const uint32_t raw = sbase + A11_RAW_OFF + A11_RAW_BYTES * s;
        dh_mbar_wait(raw_full + 8 * s, (t >> 1) & 1);
        if (D == A6_DIAG_PRODUCER) {   /* take the tile and the values, hand both back unread */
            dh_mbar_arrive(raw_empty + 8 * s);
            dh_mbar_wait(v_full + 8 * w, t & 1);
            dh_mbar_arrive(v_empty + 8 * w);
            if (V == 12 && t + 2 < ntiles) {
                dh_mbar_wait(raw_empty + 8 * s, (t >> 1) & 1);
                a12_copy_tile<D>(a, sbase, tid, q, rb, re, ntiles, t + 2, id12);
            }
            continue;
        }
        dh_fence_proxy_async();   /* the stage was filled by cp.async (generic proxy) */
        float acc[16], sc[16];
#pragma unroll
        for (int i = 0; i < 16; i++) sc[i] = 0.f;
        const float *scb = (const float *)(sm + A11_RAW_OFF + A11_RAW_BYTES * s + A11_RAW_SC);
#pragma unroll
        for (int g = 0; g < 5; g++) {
            a11_issue_piece<D>(acc, sbase, raw, w, g);
            float ks[8];   /* this group's scale of the thread's 8 columns, read while the multiplies run */
            if (g < 4) {
#pragma unroll
                for (int c = 0; c < 8; c++) ks[c] = scb[4 * (32 * w + 8 * (c >> 1) + 2 * qd + (c & 1)) + g];
            }
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 16; i++) dh_fence_reg(acc[i]);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                /* element i: row r0 (i % 4 < 2) or r1, column 8 (i / 4) + 2 qd + i % 2 */
                if (g < 4) sc[i] += ks[2 * (i >> 2) + (i & 1)] * acc[i];
                else sc[i] = sc[i] * ((i & 2) ? qs1 : qs0) + acc[i];
            }
        }
        dh_mbar_arrive(raw_empty + 8 * s);
        a6_softmax<KREF_ROW_FP8, A11_P_OFF>(sc, o, sm, red, w, qd, r0, r1, cnt, sscale, m0, m1, l0, l1);
        dh_mbar_wait(v_full + 8 * w, t & 1);
        a6_issue_pv<KREF_ROW_FP8>(o, sbase + A11_P_OFF, sbase + A11_V_OFF, w);
        dh_wgmma_wait0();
#pragma unroll
        for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
        dh_mbar_arrive(v_empty + 8 * w);
        if (V == 12 && t + 2 < ntiles) {   /* this thread's share of tile t + 2 into the freed stage */
            dh_mbar_wait(raw_empty + 8 * s, (t >> 1) & 1);
            a12_copy_tile<D>(a, sbase, tid, q, rb, re, ntiles, t + 2, id12);
        }
    }
    l0 += __shfl_xor_sync(0xffffffff, l0, 1);
    l0 += __shfl_xor_sync(0xffffffff, l0, 2);
    l1 += __shfl_xor_sync(0xffffffff, l1, 1);
    l1 += __shfl_xor_sync(0xffffffff, l1, 2);
    a6_consumer_bar();   /* both warpgroups past their last P V: P's space is free */
    float *lsum = (float *)(sm + A11_P_OFF);
    if (qd == 0) lsum[w * 64 + r0] = l0, lsum[w * 64 + r1] = l1;
    a6_consumer_bar();
    const float L0 = l0 + lsum[(w ^ 1) * 64 + r0], L1 = l1 + lsum[(w ^ 1) * 64 + r1];
    const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
    const size_t ob = ((size_t)q * a.splits + split) * a.heads + (size_t)hb * 64;
    /* The staging of a6_store_out starts at A6_TILE_BYTES = A11_RAW_OFF: the raw stages and the
     * value tile (149,504 B) are free now. */
    static_assert(A11_RAW_OFF == A6_TILE_BYTES && 64 * (KREF_V_DIM * 4 + 32) <= A11_P_OFF - A11_RAW_OFF,
                  "version 11's staged output must fit in its raw stages and value tile");
    if (a.splits == 1) a6_store_out<float>(o, i0, i1, sm, w, tid, r0, r1, qd, out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM);
    else a6_store_out<__half>(o, i0, i1, sm, w, tid, r0, r1, qd, (__half *)a.part_o + ob * KREF_V_DIM);
    if (a.splits > 1 && w == 0 && qd == 0) {
        a.part_lse[ob + r0] = L0 > 0 ? m0 + log2f(L0) : -INFINITY;
        a.part_lse[ob + r1] = L1 > 0 ? m1 + log2f(L1) : -INFINITY;
    }
}

/* Version 13: the consumers split as FlashMLA's sparse FP8 decode kernel splits them
 * (deepseek-ai/FlashMLA, csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh): warpgroup 0 computes the
 * whole tile's S (64 heads x 64 rows, m64n64: Q read once per tile instead of once per warpgroup),
 * runs the softmax alone (no exchange of row maxima, no barrier between the warpgroups inside the
 * softmax), writes P and the heads' rescaling factors to shared memory and multiplies its half of
 * P V; warpgroup 1 only rescales and multiplies the other half, so its P V of tile t runs while
 * warpgroup 0 computes tile t + 1's S. Two named barriers: P ready (2) and P free (3). */
#define A13_WG0_REGS 232
#define A13_WG1_REGS 200
#define A13_PRODUCER_REGS 72
static_assert(A13_WG0_REGS + A13_WG1_REGS + A13_PRODUCER_REGS == 504, "setmaxnreg counts must add up to 3 x 168");

__device__ __forceinline__ void a13_mma_s_e4m3(float (&d)[32], uint64_t da, uint64_t db, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" DH_WG_REGS32 "}, %32, %33, p, 1, 1;\n}\n"
                 : DH_WG_F16(0), DH_WG_F16(16)
                 : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void a13_mma_s_bf16(float (&d)[32], uint64_t da, uint64_t db, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" DH_WG_REGS32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : DH_WG_F16(0), DH_WG_F16(16)
                 : "l"(da), "l"(db), "r"(scale_d));
}

/* Piece g of the whole tile's S (g < 4: latent group g, hi and lo terms; 4: RoPE). */
template <int D>
__device__ __forceinline__ void a13_issue_piece(float (&acc)[32], uint32_t sbase, uint32_t raw, int g)
{
#pragma unroll
    for (int i = 0; i < 32; i++) dh_fence_reg(acc[i]);
    dh_wgmma_fence();
    if (g < 4) {
#pragma unroll
        for (int kk = 0; kk < (D == A11_DIAG_QHI ? 4 : 8); kk++) {
            const uint32_t qo = (kk < 4 ? A11_QH_OFF : A11_QL_OFF) + g * A6_BLOCK_BYTES + (kk & 3) * 32;
            a13_mma_s_e4m3(acc, dh_wgmma_desc(sbase + qo, 16, 1024),
                           dh_wgmma_desc(raw + g * A6_BLOCK_BYTES + (kk & 3) * 32, 16, 1024), kk > 0);
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
            a13_mma_s_bf16(acc, dh_wgmma_desc(sbase + A11_QR_OFF + kk * 32, 16, 1024),
                           dh_wgmma_desc(raw + A11_RAW_ROPE + kk * 32, 16, 1024), kk > 0);
    }
    dh_wgmma_commit();
}

__device__ __forceinline__ void a13_bar_sync(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void a13_bar_arrive(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }

template <int D, int w>
__device__ __forceinline__ void a13_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                             int tid, int q, int split, int hb, int rb, int re, int ntiles,
                                             long long id12)
{
    const uint32_t raw_full = sbase + A11_BAR_OFF, raw_empty = raw_full + 16, v_full = raw_full + 32,
                   v_empty = raw_full + 48;
    float *alpha = (float *)(sm + A11_RED_OFF), *lsum = alpha + 64;
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const float sscale = a.sm_scale * A6_LOG2E;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, cnt = min(A6_N, re - (rb + t * A6_N));
        float al0, al1;
        if (w == 0) {
            const uint32_t raw = sbase + A11_RAW_OFF + A11_RAW_BYTES * s;
            dh_mbar_wait(raw_full + 8 * s, (t >> 1) & 1);
            if (D == A6_DIAG_PRODUCER) {
                dh_mbar_arrive(raw_empty + 8 * s);
                al0 = al1 = 1.f;
                if (t >= 1) a13_bar_sync(3);
            } else {
                dh_fence_proxy_async();
                const float qs0 = ((const float *)(sm + A11_QS_OFF))[r0], qs1 = ((const float *)(sm + A11_QS_OFF))[r1];
                float acc[32], sc[32];
#pragma unroll
                for (int i = 0; i < 32; i++) sc[i] = 0.f;
                const float *scb = (const float *)(sm + A11_RAW_OFF + A11_RAW_BYTES * s + A11_RAW_SC);
#pragma unroll
                for (int g = 0; g < 5; g++) {
                    a13_issue_piece<D>(acc, sbase, raw, g);
                    dh_wgmma_wait0();
#pragma unroll
                    for (int i = 0; i < 32; i++) dh_fence_reg(acc[i]);
#pragma unroll
                    for (int i = 0; i < 32; i++) {
                        if (g < 4) sc[i] += scb[4 * (8 * (i >> 2) + 2 * qd + (i & 1)) + g] * acc[i];
                        else sc[i] = sc[i] * ((i & 2) ? qs1 : qs0) + acc[i];
                    }
                }
                dh_mbar_arrive(raw_empty + 8 * s);
                /* The softmax of the whole tile: rows r0, r1, 16 columns each in this thread. */
                float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    const int col = 8 * (i >> 2) + 2 * qd + (i & 1);
                    const float v = col < cnt ? sc[i] * sscale : -INFINITY;
                    sc[i] = v;
                    if (i & 2) mx1 = fmaxf(mx1, v);
                    else mx0 = fmaxf(mx0, v);
                }
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 1));
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 2));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 1));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 2));
                const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
                al0 = mn0 == -INFINITY ? 1.f : exp2f(m0 - mn0);
                al1 = mn1 == -INFINITY ? 1.f : exp2f(m1 - mn1);
                m0 = mn0;
                m1 = mn1;
                float ps0 = 0.f, ps1 = 0.f;
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    const float mn = (i & 2) ? mn1 : mn0;
                    const float pv = mn == -INFINITY ? 0.f : exp2f(sc[i] - mn);
                    sc[i] = pv;
                    if (i & 2) ps1 += pv;
                    else ps0 += pv;
                }
                l0 = l0 * al0 + ps0;
                l1 = l1 * al1 + ps1;
                if (t >= 1) a13_bar_sync(3);   /* warpgroup 1 is done with the last P and factors */
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    *(uint32_t *)(sm + A11_P_OFF + r0 * 128 + ((jj ^ (r0 & 7)) << 4) + qd * 4) =
                        a6_ops<KREF_ROW_FP8>::pack(sc[4 * jj], sc[4 * jj + 1]);
                    *(uint32_t *)(sm + A11_P_OFF + r1 * 128 + ((jj ^ (r1 & 7)) << 4) + qd * 4) =
                        a6_ops<KREF_ROW_FP8>::pack(sc[4 * jj + 2], sc[4 * jj + 3]);
                }
            }
            if (qd == 0) alpha[r0] = al0, alpha[r1] = al1;
            dh_fence_proxy_async();
            a13_bar_arrive(2);   /* P and the factors are ready */
        } else {
            a13_bar_sync(2);
            al0 = alpha[r0];
            al1 = alpha[r1];
        }
#pragma unroll
        for (int jj = 0; jj < 32; jj++) o[4 * jj] *= al0, o[4 * jj + 1] *= al0, o[4 * jj + 2] *= al1, o[4 * jj + 3] *= al1;
        dh_mbar_wait(v_full + 8 * w, t & 1);
        if (D != A6_DIAG_PRODUCER) {
            a6_issue_pv<KREF_ROW_FP8>(o, sbase + A11_P_OFF, sbase + A11_V_OFF, w);
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
        }
        dh_mbar_arrive(v_empty + 8 * w);
        if (w == 1 && t + 1 < ntiles) a13_bar_arrive(3);   /* P and the factors may be rewritten */
        if (t + 2 < ntiles) {
            dh_mbar_wait(raw_empty + 8 * s, (t >> 1) & 1);
            a12_copy_tile<D>(a, sbase, tid, q, rb, re, ntiles, t + 2, id12);
        }
    }
    /* The output is staged over the value tile: both halves of the last tile's values must have
     * landed for this warpgroup too (the other half's barrier; its phase is complete). */
    if (ntiles > 0) dh_mbar_wait(v_full + 8 * (w ^ 1), (ntiles - 1) & 1);
    /* Row sums: warpgroup 0 holds them whole (over its quad). */
    if (w == 0) {
        l0 += __shfl_xor_sync(0xffffffff, l0, 1);
        l0 += __shfl_xor_sync(0xffffffff, l0, 2);
        l1 += __shfl_xor_sync(0xffffffff, l1, 1);
        l1 += __shfl_xor_sync(0xffffffff, l1, 2);
        if (qd == 0) lsum[r0] = l0, lsum[r1] = l1;
    }
    a6_consumer_bar();
    const float L0 = lsum[r0], L1 = lsum[r1];
    const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
    const size_t ob = ((size_t)q * a.splits + split) * a.heads + (size_t)hb * 64;
    if (a.splits == 1) a6_store_out<float>(o, i0, i1, sm, w, tid, r0, r1, qd, out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM);
    else a6_store_out<__half>(o, i0, i1, sm, w, tid, r0, r1, qd, (__half *)a.part_o + ob * KREF_V_DIM);
    if (a.splits > 1 && w == 0 && qd == 0) {
        a.part_lse[ob + r0] = L0 > 0 ? m0 + log2f(L0) : -INFINITY;
        a.part_lse[ob + r1] = L1 > 0 ? m1 + log2f(L1) : -INFINITY;
    }
}

template <int V, int D>
__global__ void __launch_bounds__(A6_THREADS, 1) attn11_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a11_smem[];
    uint8_t *sm = a11_smem;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    if (sbase & 1023) __trap();   /* the swizzled tiles need 1024-byte alignment (no slack left to round) */
    const uint32_t bar = sbase + A11_BAR_OFF;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int groups = a.heads / 64;
    const int hb = blockIdx.x % groups, split = blockIdx.x / groups, q = blockIdx.y;
    const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
    const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
    if (tid == 0) {
        dh_mbar_init(bar, V >= 12 ? 384 : 128);   /* raw full: the copiers' cp.async completions */
        dh_mbar_init(bar + 8, V >= 12 ? 384 : 128);
        dh_mbar_init(bar + 16, V == 13 ? 256 : 384);   /* raw empty: the consumers reading S (13: warpgroup 0) and the producer */
        dh_mbar_init(bar + 24, V == 13 ? 256 : 384);
        dh_mbar_init(bar + 32, 128);   /* value halves full: the producer */
        dh_mbar_init(bar + 40, 128);
        dh_mbar_init(bar + 48, 128);   /* value halves empty: consumer warpgroup 0, 1 */
        dh_mbar_init(bar + 56, 128);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    long long id12 = 0;   /* version 12: this thread's row id of the next tile it copies */
    if (V >= 12) {
        const int j = tid / 6;
        if (rb + j < re) id12 = attn4_row_id(a, q, rb + j);
        for (int t = 0; t < 2 && t < ntiles; t++) a12_copy_tile<D>(a, sbase, tid, q, rb, re, ntiles, t, id12);
    }
    if (wg == 2) {
        if (V == 13) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A13_PRODUCER_REGS));
        else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A11_PRODUCER_REGS));
        a11_producer<V == 13 ? 12 : V, D>(a, sm, sbase, tid - 256, q, rb, re, ntiles, id12);
        asm volatile("cp.async.wait_all;" ::: "memory");
    } else {
        if (V == 13) {
            /* Each warpgroup's code on its own, so that ptxas allocates each under its own count. */
            if (wg == 0) {
                asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A13_WG0_REGS));
                a11_load_q(a, sm, tid, q, hb);
                dh_fence_proxy_async();
                a6_consumer_bar();
                a13_consumer<D, 0>(a, out, sm, sbase, tid, q, split, hb, rb, re, ntiles, id12);
            } else {
                asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A13_WG1_REGS));
                a11_load_q(a, sm, tid, q, hb);
                dh_fence_proxy_async();
                a6_consumer_bar();
                a13_consumer<D, 1>(a, out, sm, sbase, tid, q, split, hb, rb, re, ntiles, id12);
            }
        } else {
            asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A11_CONSUMER_REGS));
            a11_load_q(a, sm, tid, q, hb);
            dh_fence_proxy_async();
            a6_consumer_bar();
            a11_consumer<V, D>(a, out, sm, sbase, wg, tid, q, split, hb, rb, re, ntiles, id12);
        }
        if (V >= 12) asm volatile("cp.async.wait_all;" ::: "memory");
    }
}

/* Version 11's main kernel over grid (heads / 64 x splits, nq): FP8 rows only (the caller
 * sends BF16 rows to version 8). D: A6_DIAG_NONE, or a diagnostic variant (outputs wrong by
 * design except A11_DIAG_QHI's, which only drops Q's lo term, to measure its accuracy and cost):
 * producer alone, consumers alone, no dequantisation, Q's hi term alone. */
template <int V, int D>
static void a11_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn11_kernel<V, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, A11_SMEM_BYTES));
        attr_done = true;
    }
    dim3 grid(a.splits * (a.heads / 64), a.nq);
    attn11_kernel<V, D><<<grid, A6_THREADS, A11_SMEM_BYTES, stream>>>(a, out);
    CUDA_LAUNCH_CHECK();
}

#endif
