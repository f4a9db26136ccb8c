/* attn30.cuh: attention version 30 (kernels/lib/attention_wgmma.cu instantiates it for the
 * library, kernels/versions/attention_wgmma.cu its diagnostic variants), version 18 (attn18.cuh:
 * FlashMLA's division of the consumers over 16-bit keys, one block per (split, query, 64 heads),
 * fp16 partials and version 8's combine) with both of its kernels launched with programmatic
 * dependent launch (programmatic stream serialization), as FlashMLA's and SGLang's decode
 * kernels are; sm_90a, FP8 and BF16 rows, any multiple of 64 heads.
 *
 * Why (kernels/NOTES.md, "Version 30"): at batch 16, 64 heads, k 2048 each measured iteration is
 * two launches, the main kernel (8 splits of 4 tiles, 128 blocks) and the combine (1,024 blocks),
 * in series with nothing overlapping them on the GPU; version 28 showed 1.1-2.4 us per launch
 * from programmatic dependent launch alone.
 *
 * The main kernel: each block initialises its barriers and sets its registers, then every thread
 * waits (griddepcontrol.wait: the previous grid of the stream complete and its writes visible)
 * before its first global read (the producer: the row ids and rows; the consumers: Q), so nothing
 * the predecessor writes (back to back the previous iteration's combine, which reads the partials
 * this kernel rewrites; in a decode step the top-k's row ids) is touched early. The producer lets
 * the dependents launch (griddepcontrol.launch_dependents, one thread of the block is enough) as
 * soon as it has issued its last tile's row loads: the combine's blocks are then placed on SMs as
 * they free, while this grid drains. The combine (attn30_combine_kernel, kernels/lib/attention.cu:
 * version 8's merge) lets its own dependents launch at once (the next main kernel, whose wait
 * still holds it until the combine is complete) and waits before reading the partials.
 *
 * Diagnostic variants (A30_DIAG_*, version 18's block without programmatic launch, version 30's
 * with it; outputs wrong by design except FULL, none checked): the block's fixed cost in parts
 * (kernels/NOTES.md, "The fixed cost at batch 16"): LAUNCH only the barriers' init and the register
 * split; QONLY also the consumers' Q load; EMPTY also the epilogue (a block of no tiles: zero
 * partials and log-sum-exps written); TILE1 the block's first tile only, then the epilogue; FULL
 * the whole kernel; A30_DIAG_NOCOMBINE added to any of them leaves the combine out. */
#ifndef KERNELS_ATTN30_CUH
#define KERNELS_ATTN30_CUH

#include "kernels/lib/attn18.cuh"
#include "kernels/lib/l2prefetch.cuh"

__device__ __forceinline__ void a30_grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void a30_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/* FP8 rows, row j of a stage: latent chunk o (16 e4m3 codes) times its 128-dim group's scale, stored
 * as fp16 chunks 2 o and 2 o + 1 of the stage's swizzled layout. */
__device__ __forceinline__ void a30_put_latent(uint8_t *stage, int j, int o, uint4 codes, float4 sc)
{
    const float g = (o >> 3) == 0 ? sc.x : (o >> 3) == 1 ? sc.y : (o >> 3) == 2 ? sc.z : sc.w;
    uint4 w[2];
    dh_fp8x16_to_f16(codes, __float2half2_rn(g), w);
    *(uint4 *)(stage + a6_swz(j, 2 * o)) = w[0];
    *(uint4 *)(stage + a6_swz(j, 2 * o + 1)) = w[1];
}

/* Version 39 (RA): row j's RoPE chunks hf + 2 i as they are (BF16; src null, a row past the split:
 * zeros) by cp.async into the stage at sst, arriving on the stage's full barrier bar when they land
 * (without .noinc: the barrier's count unchanged); issued before the thread's own arrival. */
__device__ __forceinline__ void a30_rope_async(const attn_args &a, uint32_t sst, uint32_t bar, int j, int hf, const uint8_t *src)
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        a6_cp_async16(sst + a6_swz(j, 64 + hf + 2 * i),
                      src ? (const void *)(src + KREF_LATENT + 16 + (hf + 2 * i) * 16) : (const void *)a.q, src ? 16 : 0);
    asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/* Version 43 (kernels/NOTES.md, "Version 43"): version 41 with the splits of each (query, 64 heads)
 * merged inside the kernel when there are 2, 4 or 8 of them (64 heads divide among them), in place
 * of the combine kernel and its launch. After its epilogue has written its fp16 partials and
 * log-sum-exps, each block waits until every split of its (query, 64 heads) has written its own
 * (a6_merge_wait, thread 128 counting in a.merge_cnt; the launch is cooperative, so every block is
 * resident), then merges its 1/S share of the heads, 64/S heads x 512 outputs, in one round trip:
 * the share's 4096/S pieces of 8 outputs each, a quarter held by warpgroup 0 (8/S pieces per thread)
 * and three quarters by warpgroup 1 (24/S), whose registers after the tile loop allow it (with
 * half each, ptxas spills in warpgroup 0); each thread loads all S splits' fp16 partials of its
 * pieces at once (8 or 24 x 16 bytes in flight) and one log-sum-exp per lane and piece, from L2. A
 * warp's 32 pieces are of one head (a43_piece), so lane s holds split s's log-sum-exp and the
 * others take it by shuffle. Piece p of a block's share: head p / 64 of the share, outputs
 * 8 (p % 64) .. 8 (p % 64) + 7. */
/* (a43_merges, the split counts it merges: kernels/lib/attention.cuh) */
/* Piece u of consumer thread tid (warpgroup 0: tid < 128, u < 8 / S; warpgroup 1: u < 24 / S). */
template <int S>
__host__ __device__ constexpr int a43_piece(int tid, int u) { return tid < 128 ? tid + 128 * u : 128 * (8 / S) + tid - 128 + 128 * u; }

template <int S, int W>
__device__ __forceinline__ void a43_merge(const attn_args &a, float *__restrict__ out, int tid, int q, int split, int hb)
{
    constexpr int HS = 64 / S, U = W == 0 ? 8 / S : 24 / S;   /* heads of the share; pieces per thread */
    static_assert(HS * 64 == 128 * (8 / S + 24 / S), "a share's pieces are the consumers' threads' pieces");
    a6_merge_wait<W == 1>(a, tid, q, hb, 128);
    const int lane = tid & 31;
    const size_t row0 = (size_t)q * S * a.heads + (size_t)hb * 64 + (size_t)split * HS;   /* split 0, the share's head 0 */
    const __half *part = (const __half *)a.part_o;
    uint4 v[U][S];
    float l[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int p = a43_piece<S>(tid, u), h = p >> 6, c = p & 63;
        l[u] = __ldcg(a.part_lse + row0 + (size_t)(lane % S) * a.heads + h);
#pragma unroll
        for (int s = 0; s < S; s++) v[u][s] = __ldcg((const uint4 *)(part + (row0 + (size_t)s * a.heads + h) * KREF_V_DIM) + c);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int p = a43_piece<S>(tid, u), h = p >> 6, c = p & 63;
        float ls[S], mx = -INFINITY;
#pragma unroll
        for (int s = 0; s < S; s++) ls[s] = __shfl_sync(0xffffffffu, l[u], s), mx = fmaxf(mx, ls[s]);
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, den = 0.f;
#pragma unroll
        for (int s = 0; s < S; s++) {
            const float w = mx == -INFINITY || ls[s] == -INFINITY ? 0.f : exp2f(ls[s] - mx);
            const __half2 *h2 = (const __half2 *)&v[u][s];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float2 f = __half22float2(h2[i]);
                acc[2 * i] += w * f.x, acc[2 * i + 1] += w * f.y;
            }
            den += w;
        }
        const float inv = den > 0 ? 1.f / den : 0.f;
        float4 *o = (float4 *)(out + ((size_t)q * a.heads + (size_t)hb * 64 + (size_t)split * HS + h) * KREF_V_DIM + c * 8);
        o[0] = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
        o[1] = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
    }
}

template <int W>
__device__ __forceinline__ void a43_merge_splits(const attn_args &a, float *__restrict__ out, int tid, int q, int split, int hb)
{
    if (a.splits == 2) a43_merge<2, W>(a, out, tid, q, split, hb);
    else if (a.splits == 4) a43_merge<4, W>(a, out, tid, q, split, hb);
    else if (a.splits == 8) a43_merge<8, W>(a, out, tid, q, split, hb);
}

/* Version 18's producer (a18_producer) with the dependents' launch allowed (PDL) once the last
 * tile's loads are issued: FP8 rows' loads into registers before the wait for the stage, BF16
 * rows' cp.async after it. RA (version 39, FP8 rows): the RoPE part (128 bytes of BF16, which needs
 * no dequantisation) goes by cp.async straight into the stage once it is free, left BF16, its
 * completion on the stage's full barrier (cp.async.mbarrier.arrive without .noinc: the barrier's
 * count unchanged), while the latent codes are converted; the consumers multiply it as BF16. */
template <int FMT, bool PDL, int PF = A33_PF_NONE, int PD = 1, bool RA = false, bool I32 = false>
__device__ __forceinline__ void a30_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                             int re, int ntiles)
{
    const int j = a18_row<FMT>(p >> 1), hf = p & 1;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    constexpr int RB = FMT == KREF_ROW_FP8 ? KREF_ROW_BYTES_FP8 : KREF_ROW_BYTES_BF16;
    if (PDL && ntiles == 0) a30_launch_dependents();
    long long next_id = 0;
    a41_rid next_r = {0, 0};   /* I32 (version 41): the next tile's id as loaded */
    if (j < min(A6_N, re - rb)) {
        if (I32) next_r = a41_rid_load(a, q, rb + j);
        else next_id = attn4_row_id(a, q, rb + j);
    }
    /* Version 33: tiles 1 .. PD before the first demand loads, then after tile t's stores tile t + 1 +
     * PD: PD tiles ahead of the next demand loads. */
    a33_rows<PF> pf = {q, rb, re, j, ntiles, RB, hf, 2, 0, 0};
    pf.start(a, 1, PD);
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, base = rb + t * A6_N, cnt = min(A6_N, re - base);
        const long long id = I32 ? a41_widen(a, q, next_r) : next_id;
        if (t + 1 < ntiles && j < min(A6_N, re - base - A6_N)) {
            if (I32) next_r = a41_rid_load(a, q, base + A6_N + j);
            else next_id = attn4_row_id(a, q, base + A6_N + j);
        }
        const bool valid = j < cnt;
        const uint8_t *src = valid ? attn4_row_ptr(a, id) : nullptr;
        uint8_t *stage = sm + A6_TILE_BYTES * (1 + s);
        if (FMT == KREF_ROW_FP8) {
            uint4 lat[16], rope[RA ? 1 : 4];
            float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
            if (valid) {
#pragma unroll
                for (int i = 0; i < 16; i++) lat[i] = *(const uint4 *)(src + (hf + 2 * i) * 16);
                if (!RA) {
#pragma unroll
                    for (int i = 0; i < 4; i++) rope[i] = *(const uint4 *)(src + KREF_LATENT + 16 + (hf + 2 * i) * 16);
                }
                sc = *(const float4 *)(src + KREF_LATENT);
            } else {
#pragma unroll
                for (int i = 0; i < 16; i++) lat[i] = make_uint4(0, 0, 0, 0);
                if (!RA) {
#pragma unroll
                    for (int i = 0; i < 4; i++) rope[i] = make_uint4(0, 0, 0, 0);
                }
            }
            if (PDL && t == ntiles - 1) a30_launch_dependents();
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
            if (RA) a30_rope_async(a, sbase + A6_TILE_BYTES * (1 + s), bar_full + 8 * s, j, hf, valid ? src : nullptr);
#pragma unroll
            for (int i = 0; i < 16; i++) a30_put_latent(stage, j, hf + 2 * i, lat[i], sc);
            if (!RA) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const uint4 v = hf ? rope[i ^ 1] : rope[i];
                    *(uint4 *)(stage + a6_swz(j, 64 + hf + 2 * (i ^ hf))) = dh_bf16x8_to_f16(v);
                }
            }
        } else {
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
            a6_cp_async_row(sbase + A6_TILE_BYTES * (1 + s), j, hf, valid, src, a.q);
            asm volatile("cp.async.commit_group;" ::: "memory");
            if (PDL && t == ntiles - 1) a30_launch_dependents();
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
        pf.step(a);
    }
}

/* Version 40's producer (FP8 rows; kernels/NOTES.md, "Version 40"): version 39's (the RoPE part by
 * cp.async, the latent codes through registers, converted and stored) with the loads rolled one tile
 * ahead: as soon as latent chunk i of tile t is converted, the register set it held is reloaded
 * with chunk i of tile t + 1, and tile t + 1's scales are loaded before tile t's conversion, so the
 * next tile's round trip runs under this tile's conversion and stores, the stage's wait and
 * arrival, where version 39 issues a tile's loads only after the previous tile is stored. The same
 * 64 registers of loads; row ids two tiles ahead. */
template <bool PDL>
__device__ __forceinline__ void a40_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb, int re,
                                             int ntiles)
{
    const int j = a18_row<KREF_ROW_FP8>(p >> 1), hf = p & 1;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    if (ntiles == 0) {
        if (PDL) a30_launch_dependents();
        return;
    }
    const uint8_t *src = j < min(A6_N, re - rb) ? attn4_row_ptr(a, attn4_row_id(a, q, rb + j)) : nullptr;
    long long next_id = ntiles > 1 && j < min(A6_N, re - rb - A6_N) ? attn4_row_id(a, q, rb + A6_N + j) : 0;
    uint4 lat[16];
    float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < 16; i++) lat[i] = src ? *(const uint4 *)(src + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
    if (src) sc = *(const float4 *)(src + KREF_LATENT);
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, base = rb + t * A6_N;
        const bool more = t + 1 < ntiles;
        const uint8_t *nsrc = more && j < min(A6_N, re - base - A6_N) ? attn4_row_ptr(a, next_id) : nullptr;
        if (t + 2 < ntiles && j < min(A6_N, re - base - 2 * A6_N)) next_id = attn4_row_id(a, q, base + 2 * A6_N + j);
        float4 nsc = make_float4(0.f, 0.f, 0.f, 0.f);
        if (nsrc) nsc = *(const float4 *)(nsrc + KREF_LATENT);
        if (PDL && t == ntiles - 1) a30_launch_dependents();   /* every load of the block issued */
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        uint8_t *stage = sm + A6_TILE_BYTES * (1 + s);
        a30_rope_async(a, sbase + A6_TILE_BYTES * (1 + s), bar_full + 8 * s, j, hf, src);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            a30_put_latent(stage, j, hf + 2 * i, lat[i], sc);
            if (more) lat[i] = nsrc ? *(const uint4 *)(nsrc + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
        }
        sc = nsc;
        src = nsrc;
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

/* Version 35's setmaxnreg split, version 23's (warpgroup 0 208, warpgroup 1 168, producer 128): at
 * 18's 120 this producer spills 28 B (its loads are 84 registers, version 30's, beside its shuffled
 * ids and scales). */
#define A35_PRODUCER_REGS 128
#define A35_WG1_REGS 168
static_assert(A18_WG0_REGS + A35_WG1_REGS + A35_PRODUCER_REGS == 504, "setmaxnreg counts must add up to 3 x 168");

/* Version 35's producer for FP8 rows (kernels/NOTES.md, "Version 35"): version 30's stages,
 * barriers and conversion, with the rows read whole by warps instead of in 32-byte pieces. Warp w
 * owns tile rows 16 w .. 16 w + 15 and reads them in 21 instructions: one per row for its 512 codes
 * (lane l the row's 16-byte chunk l: 512 contiguous bytes, ~5 lines, where an instruction of
 * version 30's producer touches 16 rows' lines, 32 bytes of each), one for the 16 rows' scales
 * (lane i < 16 row i's 16 bytes) and four for their RoPE (lanes 8 m .. 8 m + 7 the 8 chunks of the
 * m-th of four rows): 84 registers of loads, version 30's. Lane i < 16 holds row 16 w + i's id
 * (32 bits: a.src holds int32) one tile ahead; the lanes take a row's id by shuffle, and every lane
 * its scale from the lane that loaded it. Lane l converts latent chunk l of each row and stores fp16
 * chunks 2 l, 2 l + 1 (odd lane quads the second first, so a quarter warp's eight stores fall in
 * eight distinct 16-byte positions); RoPE lanes convert and store their chunk. */
template <bool PDL>
__device__ __forceinline__ void a35_producer(const attn_args &a, uint32_t sbase, int p, int q, int rb, int re, int ntiles,
                                             uint32_t bar_full, uint32_t bar_empty)
{
    const int w = p >> 5, lane = p & 31;
    const int ri = 16 * w + (lane & 15);   /* the row whose id this lane holds (lanes 16-31 copy 0-15) */
    if (PDL && ntiles == 0) a30_launch_dependents();
    int next_id = ri < min(A6_N, re - rb) ? (int)attn4_row_id(a, q, rb + ri) : INT_MIN;
    /* lane >> 3: the scale group of latent chunk lane, and the row (4 k + lane >> 3) of RoPE
     * instruction k, whose chunk lane & 7 this lane reads. */
    const int g = lane >> 3, rc = lane & 7;
    const bool swap = a35_swap(lane);
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, base = rb + t * A6_N, cnt = min(A6_N, re - base);
        const int id = ri < cnt ? next_id : INT_MIN;
        if (t + 1 < ntiles && ri < min(A6_N, re - base - A6_N)) next_id = (int)attn4_row_id(a, q, base + A6_N + ri);
        uint4 lat[16], rope[4], scl;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint8_t *src = a35_row(a, id, i);
            lat[i] = src ? *(const uint4 *)(src + 16 * lane) : make_uint4(0, 0, 0, 0);
        }
        scl = lane < 16 && id != INT_MIN ? *(const uint4 *)(attn4_row_ptr(a, id) + KREF_LATENT) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint8_t *src = a35_row(a, id, 4 * k + g);
            rope[k] = src ? *(const uint4 *)(src + KREF_LATENT + 16 + 16 * rc) : make_uint4(0, 0, 0, 0);
        }
        if (PDL && t == ntiles - 1) a30_launch_dependents();
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        a35_rows rows(sbase + A6_TILE_BYTES * (1 + s), 16 * w, lane);
        rows.opaque();
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const float s0 = __shfl_sync(0xffffffffu, __uint_as_float(scl.x), i);
            const float s1 = __shfl_sync(0xffffffffu, __uint_as_float(scl.y), i);
            const float s2 = __shfl_sync(0xffffffffu, __uint_as_float(scl.z), i);
            const float s3 = __shfl_sync(0xffffffffu, __uint_as_float(scl.w), i);
            rows.put(i, lat[i], g == 0 ? s0 : g == 1 ? s1 : g == 2 ? s2 : s3, swap);
        }
        const uint32_t stage = sbase + A6_TILE_BYTES * (1 + s);
#pragma unroll
        for (int k = 0; k < 4; k++) a35_st(stage + a6_swz(16 * w + 4 * k + g, 64 + rc), dh_bf16x8_to_f16(rope[k]));
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

/* Version 30 (PDL) or version 18's block (no PDL) with diagnostic D (A30_DIAG_*, without the
 * NOCOMBINE bit; A6_DIAG_PRODUCER: the producer alone, the consumers handing each stage back
 * unread, version 33's diagnostic; A6_DIAG_NONE: the real kernel).
 * PV: 30 (version 30's producer and consumers), 35 (version 35's producer for FP8 rows), 37
 * (version 37: 30's producer, the consumers' tile loop a18_loop with V 37), 39 (version 39: 37
 * with FP8 rows' RoPE part by cp.async, left BF16 in the stage and in Q; BF16 rows: 37) or 40
 * (version 40: 39 with the FP8 producer's loads rolled one tile ahead, a40_producer) or 41
 * (version 41: 39 with the next tile's row ids held as 32-bit entries, a41_rid; BF16 rows too) or 43
 * (version 43: 41 with 2, 4 or 8 splits merged in the kernel, a43_merge; its launch cooperative). */
template <int FMT, bool PDL, int D, int PF = A33_PF_NONE, int PD = 1, int PV = 30>
__global__ void __launch_bounds__(A6_THREADS, 1) attn30_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a30_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a30_smem_raw);
    uint8_t *sm = a30_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int split = blockIdx.x, q = blockIdx.y, hb = blockIdx.z;
    const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
    int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
    if (D == A30_DIAG_LAUNCH || D == A30_DIAG_QONLY || D == A30_DIAG_EMPTY) ntiles = 0;
    if (D == A30_DIAG_TILE1) ntiles = min(ntiles, 1);
    if (tid == 0) {
        dh_mbar_init(bar_full, 128);
        dh_mbar_init(bar_full + 8, 128);
        dh_mbar_init(bar_empty, 256);
        dh_mbar_init(bar_empty + 8, 256);
    }
    dh_fence_proxy_async();
    __syncthreads();
    constexpr bool P35 = PV == 35 && FMT == KREF_ROW_FP8;   /* version 35's producer (BF16 rows: 30's) */
    /* Version 39's RoPE by cp.async, with version 35's register split (warpgroup 1 168, the producer
     * 128; at 18's 176 / 120 its producer spills 56 B, none at these). */
    constexpr bool RA = (PV == 39 || PV == 40 || PV == 41 || PV == 43) && FMT == KREF_ROW_FP8;
    constexpr bool MERGE = PV == 43 && D == A6_DIAG_NONE;   /* version 43: the splits merged here (a43_merges) */
    constexpr int LV = RA ? 39 : PV == 37 || PV >= 39 ? 37 : 18;   /* a18_loop's version */
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(P35 || RA ? A35_PRODUCER_REGS : A18_PRODUCER_REGS));
        if (PDL) a30_grid_wait();
        if (P35) a35_producer<PDL>(a, sbase, tid - 256, q, rb, re, ntiles, bar_full, bar_empty);
        else if (RA && PV == 40) a40_producer<PDL>(a, sm, sbase, tid - 256, q, rb, re, ntiles);
        else a30_producer<FMT, PDL, PF, PD, RA, PV == 41 || PV == 43>(a, sm, sbase, tid - 256, q, rb, re, ntiles);
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG0_REGS));
        if (PDL) a30_grid_wait();
        if (D == A30_DIAG_LAUNCH) return;
        a6_load_q<FMT, 256, RA>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        if (D == A30_DIAG_QONLY) return;
        float o[128], m0, m1, l0, l1;
        a18_loop<FMT, LV, D == A6_DIAG_PRODUCER ? D : A6_DIAG_NONE, 0>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<FMT>(a, out, sm, 0, tid, q, split, hb, o, m0, m1, l0, l1);
        if (MERGE) a43_merge_splits<0>(a, out, tid, q, split, hb);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(P35 || RA ? A35_WG1_REGS : A18_WG1_REGS));
        if (PDL) a30_grid_wait();
        if (D == A30_DIAG_LAUNCH) return;
        a6_load_q<FMT, 256, RA>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        if (D == A30_DIAG_QONLY) return;
        float o[128], m0, m1, l0, l1;
        a18_loop<FMT, LV, D == A6_DIAG_PRODUCER ? D : A6_DIAG_NONE, 1>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<FMT>(a, out, sm, 1, tid, q, split, hb, o, m0, m1, l0, l1);
        if (MERGE) a43_merge_splits<1>(a, out, tid, q, split, hb);
    }
}

/* The main kernel of version 30 (PDL) or version 18's block (no PDL), diagnostic D, over grid
 * (splits, nq, heads / 64), one block per SM; with PDL launched with programmatic stream
 * serialization. */
template <bool PDL, int D, int PF = A33_PF_NONE, int PD = 1, int PV = 30>
static void a30_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn30_kernel<KREF_ROW_FP8, PDL, D, PF, PD, PV>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        cudaCheck(cudaFuncSetAttribute(attn30_kernel<KREF_ROW_BF16, PDL, D, PF, PD, PV>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(a.splits, a.nq, a.heads / 64);
    cfg.blockDim = dim3(A6_THREADS);
    cfg.dynamicSmemBytes = A6_SMEM_BYTES;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = PDL ? 1 : 0;
    /* Version 43's merge waits for the other splits' blocks: a cooperative launch keeps them all
     * resident (a grid that cannot be is refused, not run). Where the runtime refuses the two
     * attributes together the launch is cooperative alone (said once). */
    static int coop_pdl = 1;
    const bool coop = PV == 43 && D == A6_DIAG_NONE && a43_merges(a.splits);
    if (coop) {
        attr[1].id = cudaLaunchAttributeCooperative;
        attr[1].val.cooperative = 1;
        if (PDL && coop_pdl) cfg.numAttrs = 2;
        else cfg.attrs = attr + 1, cfg.numAttrs = 1;
    }
    auto launch = [&]() {
        return a.format == KREF_ROW_FP8 ? cudaLaunchKernelEx(&cfg, attn30_kernel<KREF_ROW_FP8, PDL, D, PF, PD, PV>, a, out)
                                        : cudaLaunchKernelEx(&cfg, attn30_kernel<KREF_ROW_BF16, PDL, D, PF, PD, PV>, a, out);
    };
    cudaError_t e = launch();
    if (e != cudaSuccess && coop && PDL && coop_pdl) {
        fprintf(stderr, "attention v43: cooperative launch with programmatic serialization refused (%s); cooperative alone\n",
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        coop_pdl = 0;
        cfg.attrs = attr + 1, cfg.numAttrs = 1;
        e = launch();
    }
    cudaCheck(e);
    CUDA_LAUNCH_CHECK();
}

#endif
