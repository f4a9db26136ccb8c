/* attn32.cuh: attention version 32 (kernels/versions/attn32_wgmma.cu instantiates it for the
 * benchmarks), version 23 (attn23.cuh: FlashMLA's crossover at 128 heads, the producer's per-warp
 * bulk copies to the peer block) made persistent with FlashMLA's balanced split schedule. FP8 rows
 * with an even number of 64-head groups; the caller sends the rest elsewhere. sm_90a.
 *
 * Why (kernels/NOTES.md, "Versions 23-25: outcome", "Version 26: outcome"): version 23 runs
 * FlashMLA's shape (128 heads x 256 queries, k 2048) as 256 clusters of 32 tiles in ~3.9 waves
 * of 66 clusters, so the slowest SM runs 4 x 32 = 128 tiles and pays a block's fixed cost four
 * times; the persistent versions 25 and 26 dealt out whole items round robin (some clusters 4,
 * some 3: the same 128 tiles at most) and lost to 23.
 *
 * The schedule (FlashMLA's get_mla_metadata_kernel, deepseek-ai/FlashMLA csrc/smxx/decode/
 * get_decoding_sched_meta/get_decoding_sched_meta.cu, read for the design, no code taken: every
 * partition the same payload of 64-row blocks, requests split across partitions, the split ones
 * merged by csrc/smxx/decode/combine/combine.cu; here no fixed overhead per piece is counted and
 * the merge is in the kernel): the work is the sequence of tiles of every
 * (query, pair of 64-head groups) in order, ntq = ceil(k / 64) tiles each, total = nq x pairs x
 * ntq; cluster c of C takes tiles [total c / C, total (c + 1) / C), so no cluster runs more than
 * ceil(total / C) tiles (125 at FlashMLA's shape on 66 clusters, against 23's 128). A cluster's
 * range is cut at the queries' boundaries into pieces (rows rb .. re of one query), walked in
 * order with the barriers, the stages and their phases running on across pieces (the tile count G
 * counts from the cluster's first tile, so a piece may have any number of tiles: the loop is
 * version 18's with the phase taken from G + t). A piece is
 *   whole: the query's every tile: the normalised fp32 output, stored from registers;
 *   a writer: a query's later tiles (t0 > 0), necessarily the first piece of its cluster: the
 *     normalised output in fp16, in the threads' own fragment order, to scratch slot (c, rank),
 *     the rows' log-sum-exps beside it, then one release arrival on the (query, head group)'s
 *     count in a.merge_cnt;
 *   a merger: a query's first tiles when the query goes on in later clusters, necessarily the
 *     last piece of its cluster: waits (acquire) until the count holds every later piece of the
 *     query, sets it back to zero, merges their partials from L2 with its own registers and
 *     stores the fp32 output.
 * Only a cluster's first piece can be a writer and only its last a merger, and a merger waits
 * only for writers of later clusters, which wait for nothing before writing: with every cluster
 * resident at once (the grid is at most one wave: a32_max_clusters) no cluster waits forever.
 * Nothing passes through the key stages or the Q region after the loop, so the producer runs on
 * into the next piece's first tiles while the consumers finish the current one (version 26's aim,
 * without its two-half staging); the consumers' chain at a piece boundary is the row sums, the
 * stores, the next query's Q load and its first S.
 * Measured (kernels/NOTES.md, "Version 32: outcome"): 1-4 % slower than version 23 at FlashMLA's
 * shape, 7-8 % at 128 queries; not the library's. */
#ifndef KERNELS_ATTN32_CUH
#define KERNELS_ATTN32_CUH

#include <climits>

#include "kernels/lib/attn23.cuh"

/* setmaxnreg counts, per instance VAR (the benchmark's A32_VARIANT; kernels/NOTES.md, "Version
 * 32: outcome"): 1, the default, version 23's 208 / 168 / 128 (ptxas: 116 B spilled); 0 192 / 176
 * / 136 (16 B spilled: the fewest of a sweep of the splits, 216 / 168 / 120 264 B, 192 / 184 /
 * 128 56 B, 184 / 176 / 144 136 B, 184 / 184 / 136 672 B), the one of the suite's second and
 * third runs; 2 200 / 176 / 128 (88 B). Measured in one run, instance 1 was the fastest at 128 x
 * 256 and 128 x 128 by 2-7 %, instance 0 the slowest: fewer spilled bytes did not mean a faster
 * kernel (where the spills sit, not looked at: no SASS tool on the build machine). */
template <int VAR> struct a32_regs {
    static constexpr int wg0 = VAR == 0 ? 192 : VAR == 2 ? 200 : A23_WG0_REGS;
    static constexpr int wg1 = VAR == 0 ? 176 : VAR == 2 ? 176 : A23_WG1_REGS;
    static constexpr int producer = VAR == 0 ? 136 : A23_PRODUCER_REGS;
    static_assert(wg0 + wg1 + producer == 504, "setmaxnreg counts must add up to 3 x 168");
};

/* The first tile of cluster c of C in a work of total tiles. */
__host__ __device__ __forceinline__ int a32_begin(int total, int C, int c) { return (int)((long long)total * c / C); }

/* One piece of a cluster's range: query-pair qp (query qp / pairs, heads 128 (qp % pairs) ..),
 * its tiles t0 .. t1 - 1 (of ntq); x is the range position of its first tile. */
struct a32_piece {
    int qp, t0, t1;
};
__device__ __forceinline__ a32_piece a32_piece_at(int x, int xe, int ntq)
{
    a32_piece p;
    p.qp = x / ntq;
    p.t0 = x - p.qp * ntq;
    p.t1 = min(ntq, xe - p.qp * ntq);
    return p;
}

/* The producer: version 23's (a23_producer, two tiles' loads over register sets A and B, each
 * warp's bulk copies of its rows to the peer) over the cluster's pieces, the stage and phase from
 * the cluster's tile count; the next piece's first loads are issued as soon as the last tile of
 * this one is filled. */
__device__ __forceinline__ void a32_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, uint32_t rank,
                                             int xb, int xe, int ntq, int pairs)
{
    const int qt = p & 3;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int jr = 32 * (int)rank + (p >> 2);
    int G = 0;   /* tiles filled before this piece */
#pragma unroll 1
    for (int x = xb; x < xe;) {
        const a32_piece pc = a32_piece_at(x, xe, ntq);
        const int q = pc.qp / pairs, rb = pc.t0 * A6_N, re = min(a.k, pc.t1 * A6_N), ntiles = pc.t1 - pc.t0;
        auto has_row = [&](int t) { return t < ntiles && rb + t * A6_N + jr < re; };
        auto row_id = [&](int t) { return has_row(t) ? attn4_row_id(a, q, rb + t * A6_N + jr) : 0ll; };
        auto load = [&](a14_rowset &r, long long id, bool valid) {
            const uint8_t *src = valid ? attn4_row_ptr(a, id) : nullptr;
#pragma unroll
            for (int i = 0; i < 8; i++) r.lat[i] = valid ? *(const uint4 *)(src + (qt + 4 * i) * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int i = 0; i < 2; i++)
                r.rope[i] = valid ? *(const uint4 *)(src + KREF_LATENT + 16 + (qt + 4 * i) * 16) : make_uint4(0, 0, 0, 0);
            r.sc = valid ? *(const uint4 *)(src + KREF_LATENT) : make_uint4(0, 0, 0, 0);
        };
        auto fill = [&](const a14_rowset &r, int t) {
            const int g = G + t, s = g & 1;
            if (g >= 2) dh_mbar_wait(bar_empty + 8 * s, ((g >> 1) - 1) & 1);
            if (p == 0) a14_expect_tx(bar_full + 8 * s, A14_PEER_BYTES);
            const uint32_t st_off = A6_TILE_BYTES * (1 + s);
            uint8_t *stage = sm + st_off;
            const uint32_t peer_sm = a14_mapa(sbase, rank ^ 1u), pbar = a14_mapa(bar_full, rank ^ 1u) + 8 * s;
            const uint32_t run = st_off + (uint32_t)(jr & ~7) * 128;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int o = qt + 4 * i;
                const uint32_t gb = (i >> 1) == 0 ? r.sc.x : (i >> 1) == 1 ? r.sc.y : (i >> 1) == 2 ? r.sc.z : r.sc.w;
                uint4 w[2];
                dh_fp8x16_to_f16(r.lat[i], __float2half2_rn(__uint_as_float(gb)), w);
                *(uint4 *)(stage + a6_swz(jr, 2 * o)) = w[0];
                *(uint4 *)(stage + a6_swz(jr, 2 * o + 1)) = w[1];
            }
#pragma unroll
            for (int i = 0; i < 2; i++) *(uint4 *)(stage + a6_swz(jr, 64 + qt + 4 * i)) = dh_bf16x8_to_f16(r.rope[i]);
            dh_fence_proxy_async();
            __syncwarp();
            if ((p & 31) == 0) {
#pragma unroll
                for (int cb = 0; cb < 9; cb++)
                    a23_bulk_to_peer(peer_sm + run + cb * A6_BLOCK_BYTES, sbase + run + cb * A6_BLOCK_BYTES, 1024, pbar);
            }
            dh_mbar_arrive(bar_full + 8 * s);
        };
        a14_rowset A, B;
        load(A, row_id(0), has_row(0));
        long long id_odd = row_id(1);
#pragma unroll 1
        for (int t = 0; t < ntiles; t += 2) {
            const long long id_even = row_id(t + 2);
            if (t + 1 < ntiles) load(B, id_odd, has_row(t + 1));
            fill(A, t);
            if (t + 1 >= ntiles) break;
            id_odd = row_id(t + 3);
            if (t + 2 < ntiles) load(A, id_even, has_row(t + 2));
            fill(B, t + 1);
        }
        G += ntiles;
        x = pc.qp * ntq + pc.t1;
    }
}

/* Consumer warpgroup W's tile loop over one piece: version 18's (a18_loop, FP8 rows, P V of
 * warpgroup 0 from registers, the stages' empty barriers of both blocks) with the stage and the
 * full barrier's phase of tile t taken from G + t, the cluster's tiles before this piece. */
template <int W>
__device__ __forceinline__ void a32_loop(const attn_args &a, uint8_t *sm, uint32_t sbase, int tid, int rb, int re,
                                         int ntiles, int G, uint32_t rank, float (&o)[128], float &m0, float &m1,
                                         float &l0, float &l1)
{
    constexpr int FMT = KREF_ROW_FP8;
    const uint32_t sQ = sbase, sK = sbase + A6_TILE_BYTES, sP = sbase + A6_P_OFF;
    float *alpha = (float *)(sm + A6_RED_OFF);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const float sscale = a.sm_scale * A6_LOG2E;
    const uint32_t my_empty = a18_mapa(bar_empty, rank), peer_empty = a18_mapa(bar_empty, rank ^ 1u);
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
#pragma unroll 1
    for (int t = 0; t < ntiles; t++) {
        const int g = G + t, s = g & 1, cnt = min(A6_N, re - (rb + t * A6_N));
        const uint32_t stage = sK + A6_TILE_BYTES * s;
        if (W == 0) {
            dh_mbar_wait(bar_full + 8 * s, (g >> 1) & 1);
            dh_fence_proxy_async();   /* the peer's bytes, before the tensor cores read them */
            float sc[32];
#pragma unroll
            for (int i = 0; i < 32; i++) sc[i] = 0.f;
#pragma unroll
            for (int i = 0; i < 32; i++) dh_fence_reg(sc[i]);
            dh_wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < 36; ks++) {
                const uint32_t off = (ks >> 2) * A6_BLOCK_BYTES + (ks & 3) * 32;
                a18_ops<FMT>::mma_s(sc, dh_wgmma_desc(sQ + off, 16, 1024), dh_wgmma_desc(stage + off, 16, 1024), ks > 0);
            }
            dh_wgmma_commit();
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 32; i++) dh_fence_reg(sc[i]);
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
            const float al0 = mn0 == -INFINITY ? 1.f : exp2f(m0 - mn0), al1 = mn1 == -INFINITY ? 1.f : exp2f(m1 - mn1);
            m0 = mn0;
            m1 = mn1;
            float ps0 = 0.f, ps1 = 0.f;
            uint32_t pa[16];
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                const float p00 = mn0 == -INFINITY ? 0.f : exp2f(sc[4 * jj] - mn0);
                const float p01 = mn0 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 1] - mn0);
                const float p10 = mn1 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 2] - mn1);
                const float p11 = mn1 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 3] - mn1);
                ps0 += p00 + p01;
                ps1 += p10 + p11;
                pa[2 * jj] = a6_ops<FMT>::pack(p00, p01);
                pa[2 * jj + 1] = a6_ops<FMT>::pack(p10, p11);
            }
            l0 = l0 * al0 + ps0;
            l1 = l1 * al1 + ps1;
#pragma unroll
            for (int jj = 0; jj < 32; jj++) o[4 * jj] *= al0, o[4 * jj + 1] *= al0, o[4 * jj + 2] *= al1, o[4 * jj + 3] *= al1;
            if (t >= 1) a18_bar_sync(3);   /* warpgroup 1 is done with the last P and factors */
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                *(uint32_t *)(sm + A6_P_OFF + r0 * 128 + ((jj ^ (r0 & 7)) << 4) + qd * 4) = pa[2 * jj];
                *(uint32_t *)(sm + A6_P_OFF + r1 * 128 + ((jj ^ (r1 & 7)) << 4) + qd * 4) = pa[2 * jj + 1];
            }
            if (qd == 0) alpha[r0] = al0, alpha[r1] = al1;
            dh_fence_proxy_async();
#pragma unroll
            for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
#pragma unroll
            for (int i = 0; i < 16; i++) a18_fence_u32(pa[i]);
            dh_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                a18_ops<FMT>::mma_o_rs(o, pa + 4 * kk, dh_wgmma_desc(stage + kk * 2048, A6_BLOCK_BYTES, 1024));
            dh_wgmma_commit();
            a18_bar_arrive(2);   /* P and the factors are ready */
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 16; i++) a18_fence_u32(pa[i]);
#pragma unroll
            for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
        } else {
            a18_bar_sync(2);   /* P of tile t and the factors */
            const float al0 = alpha[r0], al1 = alpha[r1];
#pragma unroll
            for (int jj = 0; jj < 32; jj++) o[4 * jj] *= al0, o[4 * jj + 1] *= al0, o[4 * jj + 2] *= al1, o[4 * jj + 3] *= al1;
            dh_mbar_wait(bar_full + 8 * s, (g >> 1) & 1);   /* complete already; orders the bytes here too */
            dh_fence_proxy_async();
            a6_issue_pv<FMT>(o, sP, stage, 1);
            dh_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
            if (t + 1 < ntiles) a18_bar_arrive(3);   /* P and the factors may be rewritten */
        }
        __syncwarp();
        if (lane == 0) {
            a18_arrive_remote(my_empty + 8 * s);
            a18_arrive_remote(peer_empty + 8 * s);
        }
    }
}

/* This thread's 128 output values, times f0 (row r0) and f1 (row r1), as fp32 into the output
 * rows of heads hb * 64 + r (dst: the query's output, heads x 512), straight from registers:
 * each warp's store writes 8 rows x 32 contiguous bytes, whole 32-byte sectors. */
__device__ __forceinline__ void a32_store_rows(const float (&o)[128], float f0, float f1, float *__restrict__ dst, int w,
                                               int r0, int r1, int qd)
{
    float *d0 = dst + (size_t)r0 * KREF_V_DIM + 256 * w + 2 * qd, *d1 = dst + (size_t)r1 * KREF_V_DIM + 256 * w + 2 * qd;
#pragma unroll
    for (int jj = 0; jj < 32; jj++) {
        *(float2 *)(d0 + 8 * jj) = make_float2(o[4 * jj] * f0, o[4 * jj + 1] * f0);
        *(float2 *)(d1 + 8 * jj) = make_float2(o[4 * jj + 2] * f1, o[4 * jj + 3] * f1);
    }
}

/* The scratch of a writer: slot (cluster, rank) holds 256 threads x 16 chunks of 16 B (chunk i of
 * thread tid at i * 256 + tid: o[8 i .. 8 i + 7] as fp16, normalised) and 64 log-sum-exps. */
#define A32_SLOT_CHUNKS (256 * 16)

__device__ __forceinline__ uint4 a32_pack(const float *o, float f0, float f1)
{
    uint4 v;
    __half2 h[4] = {__floats2half2_rn(o[0] * f0, o[1] * f0), __floats2half2_rn(o[2] * f1, o[3] * f1),
                    __floats2half2_rn(o[4] * f0, o[5] * f0), __floats2half2_rn(o[6] * f1, o[7] * f1)};
    v.x = *(uint32_t *)&h[0];
    v.y = *(uint32_t *)&h[1];
    v.z = *(uint32_t *)&h[2];
    v.w = *(uint32_t *)&h[3];
    return v;
}
__device__ __forceinline__ void a32_unpack_add(float *o, uint4 v, float f0, float f1)
{
    const __half2 *h = (const __half2 *)&v;
    const float2 a0 = __half22float2(h[0]), a1 = __half22float2(h[1]), a2 = __half22float2(h[2]), a3 = __half22float2(h[3]);
    o[0] += a0.x * f0, o[1] += a0.y * f0, o[2] += a1.x * f1, o[3] += a1.y * f1;
    o[4] += a2.x * f0, o[5] += a2.y * f0, o[6] += a3.x * f1, o[7] += a3.y * f1;
}

__device__ __forceinline__ unsigned a32_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void a32_red_release(unsigned *p)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}

/* The epilogue of one piece (both consumer warpgroups, w = 0, 1): kind 0 whole, 1 writer (to slot
 * `slot`), 2 merger (of the writers in slots c1 .. c2 - 1 of this rank). */
__device__ __forceinline__ void a32_epilogue(const attn_args &a, float *__restrict__ out, uint8_t *sm, int w, int tid, int q,
                                             int hb, int kind, int slot, int c1, int c2, unsigned *cnt,
                                             float (&o)[128], float m0, float m1, float l0, float l1)
{
    /* Warpgroup 0 alone runs the softmax: its row sums and row maxima for both warpgroups. */
    float *lsum = (float *)(sm + A6_RED_OFF) + 64, *lmax = lsum + 64;
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const int rank = hb & 1;
    if (w == 0) {
        l0 += __shfl_xor_sync(0xffffffff, l0, 1);
        l0 += __shfl_xor_sync(0xffffffff, l0, 2);
        l1 += __shfl_xor_sync(0xffffffff, l1, 1);
        l1 += __shfl_xor_sync(0xffffffff, l1, 2);
        if (qd == 0) lsum[r0] = l0, lsum[r1] = l1, lmax[r0] = m0, lmax[r1] = m1;
        /* The merger: every later piece of the query has written its partial. */
        if (kind == 2 && tid == 0) {
            const unsigned need = (unsigned)(c2 - c1);
            while (a32_ld_acquire(cnt) < need) __nanosleep(32);
            *cnt = 0;   /* each count has one merger per launch; the next launch follows this one */
        }
    }
    a6_consumer_bar();   /* the row sums; warpgroup 0's last S (the last reader of Q) is complete */
    const float L0 = lsum[r0], L1 = lsum[r1];
    float *dst = out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM;
    if (kind == 0) {
        a32_store_rows(o, L0 > 0 ? 1.f / L0 : 0.f, L1 > 0 ? 1.f / L1 : 0.f, dst, w, r0, r1, qd);
        return;
    }
    const float lse0 = L0 > 0 ? lmax[r0] + log2f(L0) : -INFINITY, lse1 = L1 > 0 ? lmax[r1] + log2f(L1) : -INFINITY;
    uint4 *part = (uint4 *)a.part_o;
    if (kind == 1) {
        uint4 *sl = part + (size_t)(2 * slot + rank) * A32_SLOT_CHUNKS + (size_t)tid;
        const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
#pragma unroll
        for (int i = 0; i < 16; i++) sl[i * 256] = a32_pack(o + 8 * i, i0, i1);
        if (w == 0 && qd == 0) {
            a.part_lse[(size_t)(2 * slot + rank) * 64 + r0] = lse0;
            a.part_lse[(size_t)(2 * slot + rank) * 64 + r1] = lse1;
        }
        __threadfence();
        a6_consumer_bar();   /* every consumer thread's partial is written and fenced */
        if (tid == 0) a32_red_release(cnt);
        return;
    }
    /* Merger: the weights of the pieces from their log-sum-exps (log2 domain), then the sum. */
    float M0 = lse0, M1 = lse1;
    for (int c = c1; c < c2; c++) {
        M0 = fmaxf(M0, __ldcg(a.part_lse + (size_t)(2 * c + rank) * 64 + r0));
        M1 = fmaxf(M1, __ldcg(a.part_lse + (size_t)(2 * c + rank) * 64 + r1));
    }
    float S0 = lse0 == -INFINITY ? 0.f : exp2f(lse0 - M0), S1 = lse1 == -INFINITY ? 0.f : exp2f(lse1 - M1);
    const float own0 = S0, own1 = S1;
    for (int c = c1; c < c2; c++) {
        const float p0 = __ldcg(a.part_lse + (size_t)(2 * c + rank) * 64 + r0);
        const float p1 = __ldcg(a.part_lse + (size_t)(2 * c + rank) * 64 + r1);
        S0 += p0 == -INFINITY ? 0.f : exp2f(p0 - M0);
        S1 += p1 == -INFINITY ? 0.f : exp2f(p1 - M1);
    }
    const float iS0 = S0 > 0 ? 1.f / S0 : 0.f, iS1 = S1 > 0 ? 1.f / S1 : 0.f;
    {
        const float f0 = L0 > 0 ? own0 * iS0 / L0 : 0.f, f1 = L1 > 0 ? own1 * iS1 / L1 : 0.f;
#pragma unroll
        for (int jj = 0; jj < 32; jj++) o[4 * jj] *= f0, o[4 * jj + 1] *= f0, o[4 * jj + 2] *= f1, o[4 * jj + 3] *= f1;
    }
#pragma unroll 1
    for (int c = c1; c < c2; c++) {
        const float p0 = __ldcg(a.part_lse + (size_t)(2 * c + rank) * 64 + r0);
        const float p1 = __ldcg(a.part_lse + (size_t)(2 * c + rank) * 64 + r1);
        const float f0 = p0 == -INFINITY ? 0.f : exp2f(p0 - M0) * iS0, f1 = p1 == -INFINITY ? 0.f : exp2f(p1 - M1) * iS1;
        const uint4 *sl = part + (size_t)(2 * c + rank) * A32_SLOT_CHUNKS + (size_t)tid;
        /* Four rounds of four 16-byte loads in flight (the consumers' registers hold o). */
#pragma unroll
        for (int g = 0; g < 4; g++) {
            uint4 v[4];
#pragma unroll
            for (int i = 0; i < 4; i++) v[i] = __ldcg(sl + (4 * g + i) * 256);
#pragma unroll
            for (int i = 0; i < 4; i++) a32_unpack_add(o + 8 * (4 * g + i), v[i], f0, f1);
        }
    }
    a32_store_rows(o, 1.f, 1.f, dst, w, r0, r1, qd);
}

/* Consumer warpgroup W over the cluster's pieces. */
template <int W>
__device__ __forceinline__ void a32_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                             int tid, uint32_t rank, int cid, int C, int total, int ntq, int pairs)
{
    const int xb = a32_begin(total, C, cid), xe = a32_begin(total, C, cid + 1);
    int G = 0;
#pragma unroll 1
    for (int x = xb; x < xe;) {
        const a32_piece pc = a32_piece_at(x, xe, ntq);
        const int q = pc.qp / pairs, hb = 2 * (pc.qp % pairs) + (int)rank;
        const int rb = pc.t0 * A6_N, re = min(a.k, pc.t1 * A6_N), ntiles = pc.t1 - pc.t0;
        /* The piece's kind; a merger's writers are the clusters after this one up to the one
         * holding the query's last tile. */
        const int kind = pc.t0 > 0 ? 1 : pc.t1 < ntq ? 2 : 0;
        int c2 = cid + 1;
        if (kind == 2) {
            const int last = pc.qp * ntq + ntq - 1;
            while (a32_begin(total, C, c2 + 1) <= last) c2++;
            c2++;
        }
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a32_loop<W>(a, sm, sbase, tid, rb, re, ntiles, G, rank, o, m0, m1, l0, l1);
        a32_epilogue(a, out, sm, W, tid, q, hb, kind, cid, cid + 1, c2, a.merge_cnt + 2 * (size_t)pc.qp + rank, o, m0, m1, l0,
                     l1);
        G += ntiles;
        x = pc.qp * ntq + pc.t1;
    }
}

/* Version 32's kernel: grid (C, 1, 2) in clusters of the two blocks (1, 1, 2), cluster c = blockIdx.x. */
template <int VAR>
__global__ void __launch_bounds__(A6_THREADS, 1) attn32_kernel(const attn_args a, float *__restrict__ out, int total, int ntq,
                                                                int pairs)
{
    extern __shared__ __align__(1024) uint8_t a32_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a32_smem_raw);
    uint8_t *sm = a32_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int C = gridDim.x, cid = blockIdx.x;
    const uint32_t rank = a14_cluster_rank();
    if (tid == 0) {
        dh_mbar_init(bar_full, 128);
        dh_mbar_init(bar_full + 8, 128);
        dh_mbar_init(bar_empty, A14_EMPTY_COUNT);
        dh_mbar_init(bar_empty + 8, A14_EMPTY_COUNT);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    a14_cluster_sync();
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(a32_regs<VAR>::producer));
        a32_producer(a, sm, sbase, tid - 256, rank, a32_begin(total, C, cid), a32_begin(total, C, cid + 1), ntq, pairs);
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(a32_regs<VAR>::wg0));
        a32_consumer<0>(a, out, sm, sbase, tid, rank, cid, C, total, ntq, pairs);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(a32_regs<VAR>::wg1));
        a32_consumer<1>(a, out, sm, sbase, tid, rank, cid, C, total, ntq, pairs);
    }
    /* No block leaves while the peer may still copy into it or arrive on its barriers. */
    a14_cluster_sync();
}

static inline cudaLaunchConfig_t a32_config(int clusters, cudaStream_t stream, cudaLaunchAttribute *attr)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn32_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        cudaCheck(cudaFuncSetAttribute(attn32_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        cudaCheck(cudaFuncSetAttribute(attn32_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(clusters, 1, 2);
    cfg.blockDim = dim3(A6_THREADS);
    cfg.dynamicSmemBytes = A6_SMEM_BYTES;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 2;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

/* Clusters of version 32 resident at once on this GPU (one block per SM, two per cluster). */
static inline int a32_max_clusters()
{
    static int n = -1;
    if (n < 0) {
        cudaLaunchAttribute attr[1];
        cudaLaunchConfig_t cfg = a32_config(1, 0, attr);
        cudaCheck(cudaOccupancyMaxActiveClusters(&n, (void *)attn32_kernel<1>, &cfg));
    }
    return n;
}

/* Version 32 over `clusters` clusters (at most a32_max_clusters(): the mergers wait for other
 * clusters), a.part_o, a.part_lse holding 2 x clusters slots, a.merge_cnt nq x heads / 64 counts
 * at zero. */
static void a32_launch(const attn_args &a, float *out, cudaStream_t stream, int clusters, int var = 1)
{
    const int ntq = (a.k + A6_N - 1) / A6_N, pairs = a.heads / 128;
    const long long tl = (long long)a.nq * pairs * ntq;
    if (tl > INT_MAX) {
        fprintf(stderr, "attention v32: %lld tiles, more than the schedule's int holds\n", tl);
        exit(1);
    }
    const int total = (int)tl, C = total < clusters ? total : clusters;
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = a32_config(C, stream, attr);
    if (var == 0) cudaCheck(cudaLaunchKernelEx(&cfg, attn32_kernel<0>, a, out, total, ntq, pairs));
    else if (var == 2) cudaCheck(cudaLaunchKernelEx(&cfg, attn32_kernel<2>, a, out, total, ntq, pairs));
    else cudaCheck(cudaLaunchKernelEx(&cfg, attn32_kernel<1>, a, out, total, ntq, pairs));
    CUDA_LAUNCH_CHECK();
}

#endif
