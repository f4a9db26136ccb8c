/* attn23.cuh: attention versions 23-26 (kernels/lib/attention_wgmma.cu instantiates them for the
 * library, kernels/versions/attention_wgmma.cu the diagnostic variants of 23 and 24; 25 and 26, the
 * persistent forms, are further below), version 22
 * (attn21.cuh: FlashMLA's crossover at 128 heads, the half tile sent to the peer block by bulk
 * copies, version 18's consumers) with the producer's copies to the peer issued by each of its four
 * warps for its own eight rows, as soon as that warp's rows are written, instead of by one thread
 * after a barrier of the whole producer warpgroup. FP8 rows with an even number of 64-head groups;
 * the caller sends the rest to version 18. sm_90a.
 *
 * Why (kernels/NOTES.md, "Versions 21 and 22: outcome"): version 22's producer alone takes 271 us
 * at 128 heads x 256 queries where leaving the remote half out takes 201.6; its nine 4 KB copies
 * per tile are issued only after a 128-thread named barrier, so every tile's copies wait for the
 * slowest of the four producer warps (the one whose row loads land last) and then run in series
 * with the arrival on the full barrier.
 *
 * Producer thread p of rank r's block owns tile row 32 r + p / 4 (attn14.cuh's assignment), so
 * warp w holds rows 32 r + 8 w .. 32 r + 8 w + 7, which in every 64-column block of the swizzled
 * stage (a6_swz: 128 B per row, the swizzle repeating every 8 rows) are one contiguous, 1024-byte
 * aligned run of 1 KB. Latent chunk i (codes 16 (qt + 4 i) .. +15, fp16 chunks 2 (qt + 4 i), +1) of
 * the warp's four threads per row falls in column block i; the two RoPE chunks in block 8.
 *   version 23: after all its stores and a proxy fence, the warp's lane 0 issues its nine 1 KB
 *     copies (one per column block), then every thread arrives on its own full barrier;
 *   version 24: the copy of column block i is issued (lane 0) right after the warp's stores of
 *     block i and a proxy fence: nine fences per thread per tile, the first copies leaving while
 *     the rest of the tile is converted.
 * Either way 36 copies of 1 KB per tile and block, the same 36,864 bytes counted on the peer's full
 * barrier as version 22's nine copies of 4 KB, so the barriers' protocol (attn14.cuh) is unchanged:
 * a warp's stores are visible to the async proxy (fence.proxy.async by every lane, then __syncwarp)
 * before its lane issues the copy that reads them; the stage is rewritten only after both blocks'
 * consumers released it, which the peer's consumers do only after its full barrier, i.e. after
 * these copies completed. */
#ifndef KERNELS_ATTN23_CUH
#define KERNELS_ATTN23_CUH

#include "kernels/lib/attn21.cuh"
#include "kernels/lib/l2prefetch.cuh"

/* setmaxnreg counts: at version 22's (warpgroup 0 208, warpgroup 1 176, producer 120) ptxas spills
 * 12 B in this producer's code (none in 22's); with 8 registers moved from warpgroup 1 to the
 * producer, nothing spills on either side. */
#define A23_WG0_REGS A18_WG0_REGS
#define A23_WG1_REGS 168
#define A23_PRODUCER_REGS 128
static_assert(A23_WG0_REGS + A23_WG1_REGS + A23_PRODUCER_REGS == 504, "setmaxnreg counts must add up to 3 x 168");

/* One bulk copy of bytes from this block's shared address src to cluster address dst, counted on
 * the (peer's) barrier bar. */
__device__ __forceinline__ void a23_bulk_to_peer(uint32_t dst, uint32_t src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(dst), "r"(src), "r"(bytes), "r"(bar) : "memory");
}

/* Version 16's pipelined producer (attn14.cuh, a14_producer_pipe: two tiles' loads over register
 * sets A and B) with version VER's (23, 24) per-warp copies to the peer. */
template <int DIAG, int VER, int PF = A33_PF_NONE, int PD = 1>
__device__ __forceinline__ void a23_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb, int re,
                                             int ntiles, uint32_t rank)
{
    if (DIAG == A6_DIAG_CONSUMERS) {
        a14_producer<DIAG, false, true>(a, sm, sbase, p, q, rb, re, ntiles, rank);
        return;
    }
    const int jr = 32 * (int)rank + (p >> 2), qt = p & 3;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const uint32_t peer = rank ^ 1u, peer_full = a14_mapa(bar_full, peer), peer_sm = a14_mapa(sbase, peer);
    auto has_row = [&](int t) { return t < ntiles && rb + t * A6_N + jr < re; };
    /* Version 42: the ids fetched ahead held as their 32-bit entries (a41_rid), widened at use. */
    auto row_id = [&](int t) {
        if constexpr (VER == 42) return has_row(t) ? a41_rid_load(a, q, rb + t * A6_N + jr) : a41_rid{0, 0};
        else return has_row(t) ? attn4_row_id(a, q, rb + t * A6_N + jr) : 0ll;
    };
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
        const int s = t & 1;
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        if (p == 0) a14_expect_tx(bar_full + 8 * s, A14_PEER_BYTES);
        const uint32_t st_off = A6_TILE_BYTES * (1 + s);
        uint8_t *stage = sm + st_off;
        /* This warp's 1 KB run in each 64-column block: rows jr & ~7 .. (jr & ~7) + 7. */
        const uint32_t run = st_off + (uint32_t)(jr & ~7) * 128, pbar = peer_full + 8 * s;
        const int lane = p & 31;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int o = qt + 4 * i;
            const uint32_t gb = (i >> 1) == 0 ? r.sc.x : (i >> 1) == 1 ? r.sc.y : (i >> 1) == 2 ? r.sc.z : r.sc.w;
            uint4 w[2];
            dh_fp8x16_to_f16(r.lat[i], __float2half2_rn(__uint_as_float(gb)), w);
            *(uint4 *)(stage + a6_swz(jr, 2 * o)) = w[0];
            *(uint4 *)(stage + a6_swz(jr, 2 * o + 1)) = w[1];
            if (VER == 24) {
                dh_fence_proxy_async();
                __syncwarp();
                if (lane == 0) a23_bulk_to_peer(peer_sm + run + i * A6_BLOCK_BYTES, sbase + run + i * A6_BLOCK_BYTES, 1024, pbar);
            }
        }
#pragma unroll
        for (int i = 0; i < 2; i++) *(uint4 *)(stage + a6_swz(jr, 64 + qt + 4 * i)) = dh_bf16x8_to_f16(r.rope[i]);
        dh_fence_proxy_async();
        __syncwarp();
        if (VER == 24) {
            if (lane == 0) a23_bulk_to_peer(peer_sm + run + 8 * A6_BLOCK_BYTES, sbase + run + 8 * A6_BLOCK_BYTES, 1024, pbar);
        } else if (lane == 0) {
#pragma unroll
            for (int cb = 0; cb < 9; cb++)
                a23_bulk_to_peer(peer_sm + run + cb * A6_BLOCK_BYTES, sbase + run + cb * A6_BLOCK_BYTES, 1024, pbar);
        }
        dh_mbar_arrive(bar_full + 8 * s);
    };
    /* Version 34: this block's rows of tiles 2 .. PD + 1 once tile 0's loads are issued (tile 1's
     * follow at once), then after each tile T's stores tile T + 2 + PD: PD tiles ahead of the next
     * demand loads, issued while one register set is free. */
    a33_rows<PF> pf = {q, rb, re, jr, ntiles, KREF_ROW_BYTES_FP8, qt, 4, 0, 0};
    a14_rowset A, B;
    if (ntiles > 0) load(A, a41_widen(a, q, row_id(0)), has_row(0));
    pf.start(a, 2, PD + 1);
    auto id_odd = row_id(1);
#pragma unroll 1
    for (int t = 0; t < ntiles; t += 2) {
        const auto id_even = row_id(t + 2);
        if (t + 1 < ntiles) load(B, a41_widen(a, q, id_odd), has_row(t + 1));
        fill(A, t);
        pf.step(a);
        if (t + 1 >= ntiles) break;
        id_odd = row_id(t + 3);
        if (t + 2 < ntiles) load(A, a41_widen(a, q, id_even), has_row(t + 2));
        fill(B, t + 1);
        pf.step(a);
    }
}

/* Version 36 (kernels/NOTES.md, "Version 36"): version 23 with its rows read whole by warps, as
 * version 35 reads them at 64 heads (kernels/lib/attn30.cuh). The ownership is 23's (warp w of rank
 * r's block: tile rows 32 r + 8 w .. + 7, one 1 KB run in each 64-column block, copied to the peer
 * by lane 0 as in version 23); the loads are 11 instructions per tile, as 23's, but each touches
 * one row or, for the scales and RoPE, eight whole 16- or 128-byte pieces: lat[i] is row i's 512
 * codes (lane l its 16-byte chunk l), rope[k] rows 4 k .. 4 k + 3 (lanes 8 m .. 8 m + 7 row
 * 4 k + m's eight chunks), sc lane l's one float, the scale of row l >> 2 and group l & 3. Lane
 * i < 8 of the ids holds row i's (lanes 8-31 a copy of lane l & 7's). */
struct a36_rowset {
    uint4 lat[8], rope[2];
    float sc;
};

template <int DIAG>
__device__ __forceinline__ void a36_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb, int re,
                                             int ntiles, uint32_t rank)
{
    if (DIAG == A6_DIAG_CONSUMERS) {
        a14_producer<DIAG, false, true>(a, sm, sbase, p, q, rb, re, ntiles, rank);
        return;
    }
    const int w = p >> 5, lane = p & 31;
    const int jr0 = 32 * (int)rank + 8 * w, g = lane >> 3, rc = lane & 7;
    const bool swap = a35_swap(lane);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const uint32_t peer = rank ^ 1u, peer_full = a14_mapa(bar_full, peer), peer_sm = a14_mapa(sbase, peer);
    auto row_id = [&](int t) {
        const int idx = rb + t * A6_N + jr0 + rc;
        return t < ntiles && idx < re ? (int)attn4_row_id(a, q, idx) : INT_MIN;
    };
    auto load = [&](a36_rowset &r, int id) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint8_t *src = a35_row(a, id, i);
            r.lat[i] = src ? *(const uint4 *)(src + 16 * lane) : make_uint4(0, 0, 0, 0);
        }
        const uint8_t *srs = a35_row(a, id, lane >> 2);
        r.sc = srs ? *(const float *)(srs + KREF_LATENT + 4 * (lane & 3)) : 0.f;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const uint8_t *src = a35_row(a, id, 4 * k + g);
            r.rope[k] = src ? *(const uint4 *)(src + KREF_LATENT + 16 + 16 * rc) : make_uint4(0, 0, 0, 0);
        }
    };
    auto fill = [&](const a36_rowset &r, int t) {
        const int s = t & 1;
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        if (p == 0) a14_expect_tx(bar_full + 8 * s, A14_PEER_BYTES);
        const uint32_t st_off = A6_TILE_BYTES * (1 + s), run = st_off + (uint32_t)jr0 * 128, pbar = peer_full + 8 * s;
        a35_rows rows(sbase + st_off, jr0, lane);   /* version 35's conflict-free stores (attn18.cuh) */
        rows.opaque();
#pragma unroll
        for (int i = 0; i < 8; i++) rows.put(i, r.lat[i], __shfl_sync(0xffffffffu, r.sc, 4 * i + g), swap);
#pragma unroll
        for (int k = 0; k < 2; k++) a35_st(sbase + st_off + a6_swz(jr0 + 4 * k + g, 64 + rc), dh_bf16x8_to_f16(r.rope[k]));
        dh_fence_proxy_async();
        __syncwarp();
        if (lane == 0) {
#pragma unroll
            for (int cb = 0; cb < 9; cb++)
                a23_bulk_to_peer(peer_sm + run + cb * A6_BLOCK_BYTES, sbase + run + cb * A6_BLOCK_BYTES, 1024, pbar);
        }
        dh_mbar_arrive(bar_full + 8 * s);
    };
    /* Version 23's pipeline: two tiles' loads over register sets A and B. */
    a36_rowset A, B;
    if (ntiles > 0) load(A, row_id(0));
    int id_odd = row_id(1);
#pragma unroll 1
    for (int t = 0; t < ntiles; t += 2) {
        const int id_even = row_id(t + 2);
        if (t + 1 < ntiles) load(B, id_odd);
        fill(A, t);
        if (t + 1 >= ntiles) break;
        id_odd = row_id(t + 3);
        if (t + 2 < ntiles) load(A, id_even);
        fill(B, t + 1);
    }
}

/* Versions 23, 24, 36, 38 and 42: version 22's kernel (attn21.cuh, attn21_kernel with VER 22) with a23_producer
 * (36: a36_producer; 38: 23's producer, the consumers' tile loop a18_loop with V 37; 42: 38 with
 * the producer's row ids held 32-bit until used, a41_rid). */
template <int DIAG, int VER, int PF = A33_PF_NONE, int PD = 1>
__global__ void __launch_bounds__(A6_THREADS, 1) attn23_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a23_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a23_smem_raw);
    uint8_t *sm = a23_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int split = blockIdx.x, q = blockIdx.y, hb = blockIdx.z;
    const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
    const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
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
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A23_PRODUCER_REGS));
        if (VER == 36) a36_producer<DIAG>(a, sm, sbase, tid - 256, q, rb, re, ntiles, rank);
        else a23_producer<DIAG, VER, PF, PD>(a, sm, sbase, tid - 256, q, rb, re, ntiles, rank);
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A23_WG0_REGS));
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<KREF_ROW_FP8, VER == 38 || VER == 42 ? 37 : 18, DIAG, 0, true>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<KREF_ROW_FP8>(a, out, sm, 0, tid, q, split, hb, o, m0, m1, l0, l1);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A23_WG1_REGS));
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<KREF_ROW_FP8, VER == 38 || VER == 42 ? 37 : 18, DIAG, 1, true>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<KREF_ROW_FP8>(a, out, sm, 1, tid, q, split, hb, o, m0, m1, l0, l1);
    }
    /* No block leaves while the peer may still copy into it or arrive on its barriers. */
    a14_cluster_sync();
}

/* The launch configuration of version VER's kernel: grid (splits, nq, heads / 64) in clusters of
 * the two 64-head groups 2 c, 2 c + 1 (as a21_launch). */
template <int DIAG, int VER, int PF = A33_PF_NONE, int PD = 1>
static cudaLaunchConfig_t a23_config(dim3 grid, cudaStream_t stream, cudaLaunchAttribute *attr)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn23_kernel<DIAG, VER, PF, PD>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
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

template <int DIAG, int VER, int PF = A33_PF_NONE, int PD = 1>
static void a23_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg = a23_config<DIAG, VER, PF, PD>(dim3(a.splits, a.nq, a.heads / 64), stream, attr);
    cudaCheck(cudaLaunchKernelEx(&cfg, attn23_kernel<DIAG, VER, PF, PD>, a, out));
    CUDA_LAUNCH_CHECK();
}

/* Clusters of version VER resident at once on this GPU (one block per SM, two per cluster). */
template <int VER>
static inline int a23_max_clusters()
{
    static int n = -1;
    if (n < 0) {
        cudaLaunchAttribute attr[1];
        cudaLaunchConfig_t cfg = a23_config<A6_DIAG_NONE, VER>(dim3(1, 1, 2), 0, attr);
        cudaCheck(cudaOccupancyMaxActiveClusters(&n, (void *)attn23_kernel<A6_DIAG_NONE, VER>, &cfg));
    }
    return n;
}


/* Version 25: version 23 persistent, FlashMLA's way of paying a block's setup once per SM (its
 * sparse decode kernel walks a range of (request, block) pairs per cluster). The grid is one wave
 * of clusters; cluster c takes the work items c, c + C, c + 2 C, ... (C clusters; an item is one
 * (split, query, pair of 64-head groups), the grid point of versions 22-24), in order. Between two
 * items nothing is torn down: the barriers stay initialised, the producer's stage and phase count
 * runs on, and the producer issues the row loads of the next item's first two tiles as soon as it
 * has filled the last tile of the current one, while the consumers finish it, write its output and
 * load the next query. One more barrier per block, stg (16 arrivals: every consumer warp of both
 * blocks, after its epilogue's copy-out), guards the staging of the output in the key stages: the
 * producer waits on it before its first store of every item after the first (it writes both
 * blocks' stages). The consumers' tile loop (a18_loop) counts stages and phases from each item's
 * first tile, so every item must have a multiple of 4 tiles (each stage then ends an item at the
 * phase it began with); a25_applies checks that and the launch sends other shapes to version 23. */
#define A25_BAR_STG_OFF 32   /* after full[2] and empty[2] in the barrier area */

template <int DIAG, int VER>
__device__ __forceinline__ void a25_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, uint32_t rank,
                                             int nitems)
{
    const int qt = p & 3;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16, bar_stg = bar_full + A25_BAR_STG_OFF;
    const int jr = 32 * (int)rank + (p >> 2);
    int T = 0;   /* tiles filled before this item */
    int j = 0;   /* this cluster's items before this one */
    /* Few values live across the items (two tiles' loads fill most of the producer's registers):
     * the cluster's index and count, and the peer's addresses, are read again where used. */
#pragma unroll 1
    for (int it = blockIdx.x; it < nitems; it += gridDim.x, j++) {
        const int split = it % a.splits, q = (it / a.splits) % a.nq;
        const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
        const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
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
            const int g = T + t, s = g & 1;
            if (g >= 2) dh_mbar_wait(bar_empty + 8 * s, ((g >> 1) - 1) & 1);
            /* Both blocks' consumers have copied the last item's staged output out of the stages. */
            if (VER == 25 && t == 0 && j > 0) dh_mbar_wait(bar_stg, (j - 1) & 1);
            if (p == 0) a14_expect_tx(bar_full + 8 * s, A14_PEER_BYTES);
            const uint32_t st_off = A6_TILE_BYTES * (1 + s);
            uint8_t *stage = sm + st_off;
            const uint32_t peer = rank ^ 1u, peer_sm = a14_mapa(sbase, peer), pbar = a14_mapa(bar_full, peer) + 8 * s;
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
        if (ntiles > 0) load(A, row_id(0), has_row(0));
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
        T += ntiles;
    }
}

/* Version 26: version 25 with the output staged in the Q region instead of the key stages, so the
 * producer never waits for an item's epilogue (no stg barrier) and fills the next item's first two
 * tiles while the consumers write the output and load the next query. The Q region (72 KB) holds
 * half of a 64 x 512 fp32 output (64 rows of 1,024 B, padded by 32 B as version 8's staging), so
 * the two warpgroups' halves (value dims 256 w .. 256 w + 255) go out one after the other: the
 * owner stages its half, both warpgroups copy it out in 16-byte chunks, and a named barrier
 * separates the copy-out from the next half's staging (and from the next query's Q stores). The
 * row sums and the split's log-sum-exp as version 18's epilogue. */
template <typename OT>
__device__ __forceinline__ void a26_store_out(const float (&o)[128], float i0, float i1, uint8_t *sm, int w, int tid,
                                              int r0, int r1, int qd, OT *__restrict__ dst)
{
    constexpr int HROW = 256 * (int)sizeof(OT), PITCH = HROW + (sizeof(OT) == 4 ? 32 : 16), CH = HROW / 16;
    static_assert(64 * PITCH <= A6_TILE_BYTES, "half the staged output must fit in the Q region");
    uint8_t *g = (uint8_t *)dst;
#pragma unroll 1
    for (int h = 0; h < 2; h++) {
        if (w == h) {
#pragma unroll
            for (int jj = 0; jj < 32; jj++) {
                const int d = 8 * jj + 2 * qd;
                if (sizeof(OT) == 4) {
                    *(float2 *)(sm + r0 * PITCH + d * 4) = make_float2(o[4 * jj] * i0, o[4 * jj + 1] * i0);
                    *(float2 *)(sm + r1 * PITCH + d * 4) = make_float2(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
                } else {
                    *(__half2 *)(sm + r0 * PITCH + d * 2) = __floats2half2_rn(o[4 * jj] * i0, o[4 * jj + 1] * i0);
                    *(__half2 *)(sm + r1 * PITCH + d * 2) = __floats2half2_rn(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
                }
            }
        }
        a6_consumer_bar();
#pragma unroll 4
        for (int c = tid; c < 64 * CH; c += 256)
            *(uint4 *)(g + (size_t)(c / CH) * (2 * HROW) + h * HROW + (c % CH) * 16) = *(const uint4 *)(sm + (c / CH) * PITCH + (c % CH) * 16);
        a6_consumer_bar();
    }
}

__device__ __forceinline__ void a26_epilogue(const attn_args &a, float *__restrict__ out, uint8_t *sm, int w, int tid, int q,
                                             int split, int hb, const float (&o)[128], float m0, float m1, float l0, float l1)
{
    float *lsum = (float *)(sm + A6_RED_OFF) + 64;
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    if (w == 0) {
        l0 += __shfl_xor_sync(0xffffffff, l0, 1);
        l0 += __shfl_xor_sync(0xffffffff, l0, 2);
        l1 += __shfl_xor_sync(0xffffffff, l1, 1);
        l1 += __shfl_xor_sync(0xffffffff, l1, 2);
        if (qd == 0) lsum[r0] = l0, lsum[r1] = l1;
    }
    a6_consumer_bar();   /* also: warpgroup 0's last S (the last reader of Q) is complete */
    const float L0 = lsum[r0], L1 = lsum[r1];
    const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
    const size_t ob = ((size_t)q * a.splits + split) * a.heads + (size_t)hb * 64;
    if (a.splits == 1) a26_store_out<float>(o, i0, i1, sm, w, tid, r0, r1, qd, out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM);
    else a26_store_out<__half>(o, i0, i1, sm, w, tid, r0, r1, qd, (__half *)a.part_o + ob * KREF_V_DIM);
    if (a.splits > 1 && w == 0 && qd == 0) {
        a.part_lse[ob + r0] = L0 > 0 ? m0 + log2f(L0) : -INFINITY;
        a.part_lse[ob + r1] = L1 > 0 ? m1 + log2f(L1) : -INFINITY;
    }
}

/* Consumer warpgroup W of version 25: version 22's (a18_loop, a18_epilogue) once per item, then
 * one arrival per warp on both blocks' stg barrier. */
template <int DIAG, int W, int VER>
__device__ __forceinline__ void a25_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                             int tid, uint32_t rank, int nitems, int nclu, int cid)
{
    const uint32_t bar_stg = sbase + A6_BAR_OFF + A25_BAR_STG_OFF;
    const uint32_t my_stg = a18_mapa(bar_stg, rank), peer_stg = a18_mapa(bar_stg, rank ^ 1u);
#pragma unroll 1
    for (int it = cid; it < nitems; it += nclu) {
        const int split = it % a.splits, q = (it / a.splits) % a.nq, hb = 2 * (it / (a.splits * a.nq)) + (int)rank;
        const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
        const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<KREF_ROW_FP8, 18, DIAG, W, true>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        if (VER == 26) {
            a26_epilogue(a, out, sm, W, tid, q, split, hb, o, m0, m1, l0, l1);
            continue;
        }
        a18_epilogue<KREF_ROW_FP8>(a, out, sm, W, tid, q, split, hb, o, m0, m1, l0, l1);
        /* This thread's reads of the staged output are done (their values are stored); ordered
         * before the next item's stores and bulk copies into the stages. */
        dh_fence_proxy_async();
        __syncwarp();
        if ((tid & 31) == 0) {
            a18_arrive_remote(my_stg);
            a18_arrive_remote(peer_stg);
        }
    }
}

template <int DIAG, int VER>
__global__ void __launch_bounds__(A6_THREADS, 1) attn25_kernel(const attn_args a, float *__restrict__ out, int nitems)
{
    extern __shared__ __align__(1024) uint8_t a25_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a25_smem_raw);
    uint8_t *sm = a25_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int nclu = gridDim.x, cid = blockIdx.x;
    const uint32_t rank = a14_cluster_rank();
    if (tid == 0) {
        dh_mbar_init(bar_full, 128);
        dh_mbar_init(bar_full + 8, 128);
        dh_mbar_init(bar_empty, A14_EMPTY_COUNT);
        dh_mbar_init(bar_empty + 8, A14_EMPTY_COUNT);
        dh_mbar_init(bar_full + A25_BAR_STG_OFF, A14_EMPTY_COUNT);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    a14_cluster_sync();
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A23_PRODUCER_REGS));
        a25_producer<DIAG, VER>(a, sm, sbase, tid - 256, rank, nitems);
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A23_WG0_REGS));
        a25_consumer<DIAG, 0, VER>(a, out, sm, sbase, tid, rank, nitems, nclu, cid);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A23_WG1_REGS));
        a25_consumer<DIAG, 1, VER>(a, out, sm, sbase, tid, rank, nitems, nclu, cid);
    }
    /* No block leaves while the peer may still copy into it or arrive on its barriers. */
    a14_cluster_sync();
}

/* Whether version 25 takes a's shape (splits and rows_per_split set): every item's tile count a
 * multiple of 4 (the first splits' and the last's). */
static inline bool a25_applies(const attn_args &a)
{
    const int tn = A6_N, full = a.rows_per_split / tn;
    const int last_rows = a.k - (a.splits - 1) * a.rows_per_split;
    return a.rows_per_split % tn == 0 && full % 4 == 0 && last_rows > 0 && ((last_rows + tn - 1) / tn) % 4 == 0;
}

/* Version VER's (25, 26) kernel over min(items, clusters) clusters of two blocks (grid (clusters, 1, 2)). */
template <int DIAG, int VER>
static void a25_launch(const attn_args &a, float *out, cudaStream_t stream, int clusters)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn25_kernel<DIAG, VER>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    const int nitems = a.splits * a.nq * (a.heads / 128);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(nitems < clusters ? nitems : clusters, 1, 2);
    cfg.blockDim = dim3(A6_THREADS);
    cfg.dynamicSmemBytes = A6_SMEM_BYTES;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 2;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaCheck(cudaLaunchKernelEx(&cfg, attn25_kernel<DIAG, VER>, a, out, nitems));
    CUDA_LAUNCH_CHECK();
}

/* Clusters of version 25 resident at once on this GPU (one block per SM, two per cluster). */
static inline int a25_max_clusters()
{
    static int n = -1;
    if (n < 0) {
        cudaCheck(cudaFuncSetAttribute(attn25_kernel<A6_DIAG_NONE, 25>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(1, 1, 2);
        cfg.blockDim = dim3(A6_THREADS);
        cfg.dynamicSmemBytes = A6_SMEM_BYTES;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 1;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 2;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        cudaCheck(cudaOccupancyMaxActiveClusters(&n, (void *)attn25_kernel<A6_DIAG_NONE, 25>, &cfg));
    }
    return n;
}

#endif
