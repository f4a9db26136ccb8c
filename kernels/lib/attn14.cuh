/* attn14.cuh: attention version 14 (kernels/versions/attention_wgmma.cu instantiates it), version
 * 8 (attn6.cuh) with the dequantisation of every tile shared by the two blocks of a cluster,
 * sm_90a. FP8 rows with at least 128 heads (an even number of 64-head groups); every other case
 * (BF16 rows, 64 heads) takes version 8 unchanged.
 *
 * The idea is FlashMLA's "crossover" (deepseek-ai/FlashMLA/docs/20250929-hopper-fp8-sparse-
 * deep-dive.md and deepseek-ai/FlashMLA/csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh; read for the design, no code
 * taken): all query heads of a query attend to the same selected rows (MLA decodes as
 * multi-query attention), so the two blocks that hold the 64-head groups 2 c and 2 c + 1 of a
 * (query, split) need the same dequantised key tiles. They run as one cluster of two blocks
 * (cluster dims 1 x 1 x 2 over the grid (splits, nq, heads / 64)); each block's producer
 * loads and dequantises only half of each tile's 64 rows (rank r: rows 32 r .. 32 r + 31) and
 * writes every 16-byte fp16 chunk twice: an ordinary store into its own stage and an st.async
 * into the same offset of the peer block's stage (distributed shared memory), which counts its
 * bytes on the peer's full barrier (complete_tx). So per tile and SM the producer's loads, its
 * conversions and its loads in flight halve, where version 8's producer alone (4 warps gathering
 * through registers) bounds the kernel at batch 128 (kernels/NOTES.md, "Each side alone").
 *
 * Barriers per stage s (both blocks have the same tiles, the same ring positions and phases):
 *   full[s]: 128 arrivals of the block's own producer threads (after their stores and a proxy
 *     fence) plus, through its transaction count, the peer producer's 32 rows x 1152 B =
 *     36,864 bytes of st.async (producer thread 0 adds them to the phase with expect_tx after
 *     the stage is free, so the count never waits for bytes of a later phase); the consumers
 *     wait on it with acquire at cluster scope, then fence the async proxy before their wgmma;
 *   empty[s]: 16 arrivals, one per consumer warp of both blocks (lane 0, after the warp's
 *     wait for its last wgmma on the stage), the peer's by a remote arrive with release at
 *     cluster scope: a producer writes into both blocks' stage s, so it must wait until both
 *     blocks' consumers are done with it.
 * The barriers are initialised before a cluster barrier, and both blocks pass a second cluster
 * barrier before they exit, so no remote arrival or store reaches a block that has left.
 * Consumers, softmax, P V, the epilogue and the splits' combine: version 8's. */
/* Version 15 is version 14 (and, where 14 takes version 8, version 8) with the row loads
 * prefetching 256 B into L2 (attn6.cuh, a6_ld_row16); version 16 is version 14 with the next
 * tile's loads in flight in the producer (a14_producer_pipe); version 17 is version 16 with the
 * barriers' waits and arrivals at CTA scope (a14_wait, a14_arrive_any); its diagnostic variants
 * A14_DIAG_NOREMOTE(_PRODUCER) leave the remote stores out (of the whole kernel, or of the
 * producer alone). */
#ifndef KERNELS_ATTN14_CUH
#define KERNELS_ATTN14_CUH

#include "kernels/lib/attn6.cuh"

#define A14_PEER_BYTES (32 * 576 * 2)   /* the peer's 32 rows of 576 fp16 = 36,864 B per tile */
#define A14_EMPTY_COUNT 16                           /* 8 consumer warps x 2 blocks */

__device__ __forceinline__ uint32_t a14_cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
/* The shared::cluster address of local shared address addr in block rank's shared memory. */
__device__ __forceinline__ uint32_t a14_mapa(uint32_t addr, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void a14_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/* 16 bytes into the peer's shared memory (cluster address dst), counted on its barrier bar. */
__device__ __forceinline__ void a14_st_async(uint32_t dst, uint4 v, uint32_t bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(dst),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar) : "memory");
}
__device__ __forceinline__ void a14_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
/* An arrival on a barrier of any block of the cluster (cluster address), release at cluster scope. */
__device__ __forceinline__ void a14_arrive_cluster(uint32_t bar)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* Version 17's: an arrival on a barrier of any block of the cluster with the default semantics
 * (release at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id) issues it. */
__device__ __forceinline__ void a14_arrive_remote_cta(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* CS (version 17): waits and arrivals at CTA scope, the st.async bytes ordered by their
 * complete_tx on the barrier (the pattern of CUTLASS's multicast loads and of FlashMLA's
 * crossover). Versions 14-16: acquire and release at cluster scope, which ptxas compiles to an
 * L1 invalidation (CCTL.IVALL) after every wait and a GPU-scope memory barrier (MEMBAR.ALL.GPU,
 * ERRBAR) before every remote arrival. */
template <bool CS>
__device__ __forceinline__ void a14_wait(uint32_t bar, int parity);
template <bool CS>
__device__ __forceinline__ void a14_arrive_any(uint32_t bar)
{
    if (CS) a14_arrive_remote_cta(bar);
    else a14_arrive_cluster(bar);
}
__device__ __forceinline__ void a14_wait_cluster(uint32_t bar, int parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

template <bool CS>
__device__ __forceinline__ void a14_wait(uint32_t bar, int parity)
{
    if (CS) dh_mbar_wait(bar, parity);
    else a14_wait_cluster(bar, parity);
}

/* The producer: thread p owns row 32 rank + p / 4 of each tile and its 16-byte chunks p % 4 +
 * 4 i (latent i = 0..7: 128 of its codes, in group i / 2; RoPE i = 0, 1), so a warp's load
 * covers 8 rows x 64 contiguous bytes. DIAG == A6_DIAG_CONSUMERS: stages handed over unfilled. */
template <int DIAG, bool HINT, bool CS = false>
__device__ __forceinline__ void a14_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                             int re, int ntiles, uint32_t rank)
{
    const int jr = 32 * (int)rank + (p >> 2), qt = p & 3;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const uint32_t peer = rank ^ 1u, peer_full = a14_mapa(bar_full, peer), peer_sm = a14_mapa(sbase, peer);
    long long next_id = jr < min(A6_N, re - rb) ? attn4_row_id(a, q, rb + jr) : 0;
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, base = rb + t * A6_N, cnt = min(A6_N, re - base);
        if (DIAG == A6_DIAG_CONSUMERS) {
            if (t >= 2) a14_wait<CS>(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
            dh_mbar_arrive(bar_full + 8 * s);
            continue;
        }
        const long long id = next_id;
        if (t + 1 < ntiles && jr < min(A6_N, re - base - A6_N)) next_id = attn4_row_id(a, q, base + A6_N + jr);
        const bool valid = jr < cnt;
        const uint8_t *src = valid ? attn4_row_ptr(a, id) : nullptr;
        uint4 lat[8], rope[2];
        float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
        if (valid) {
#pragma unroll
            for (int i = 0; i < 8; i++) lat[i] = a6_ld_row16<HINT>(src + (qt + 4 * i) * 16);
#pragma unroll
            for (int i = 0; i < 2; i++) rope[i] = a6_ld_row16<HINT>(src + KREF_LATENT + 16 + (qt + 4 * i) * 16);
            const uint4 s4 = a6_ld_row16<HINT>(src + KREF_LATENT);
            sc = make_float4(__uint_as_float(s4.x), __uint_as_float(s4.y), __uint_as_float(s4.z), __uint_as_float(s4.w));
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) lat[i] = make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int i = 0; i < 2; i++) rope[i] = make_uint4(0, 0, 0, 0);
        }
        if (t >= 2) a14_wait<CS>(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        /* The peer's half of this phase: its bytes may land before or after this. */
        if (p == 0) a14_expect_tx(bar_full + 8 * s, A14_PEER_BYTES);
        const uint32_t st_off = A6_TILE_BYTES * (1 + s);
        uint8_t *stage = sm + st_off;
        const uint32_t pst = peer_sm + st_off, pbar = peer_full + 8 * s;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int o = qt + 4 * i;   /* codes 16 o .. 16 o + 15: fp16 chunks 2 o, 2 o + 1 */
            const float g = (i >> 1) == 0 ? sc.x : (i >> 1) == 1 ? sc.y : (i >> 1) == 2 ? sc.z : sc.w;
            uint4 w[2];
            dh_fp8x16_to_f16(lat[i], __float2half2_rn(g), w);
            const uint32_t o0 = a6_swz(jr, 2 * o), o1 = a6_swz(jr, 2 * o + 1);
            *(uint4 *)(stage + o0) = w[0];
            *(uint4 *)(stage + o1) = w[1];
            a14_st_async(pst + o0, w[0], pbar);
            a14_st_async(pst + o1, w[1], pbar);
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint4 w = dh_bf16x8_to_f16(rope[i]);
            const uint32_t o = a6_swz(jr, 64 + qt + 4 * i);
            *(uint4 *)(stage + o) = w;
            a14_st_async(pst + o, w, pbar);
        }
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

/* Version 16's producer: version 14's with the next tile's loads in flight while this tile is
 * converted and stored. Half a tile per block leaves a thread 11 loads (44 registers) per tile,
 * so two tiles' loads fit in the producer's 120 registers, where version 8's 21 per thread
 * (84 registers) fit once (version 10 split them in halves instead). The loop is unrolled by
 * two tiles over two register sets, A and B, so that no register move waits for a load in
 * flight; row ids are loaded two tiles ahead. */
struct a14_rowset {
    uint4 lat[8], rope[2], sc;
};
template <int DIAG, bool CS, bool BULK = false>
__device__ __forceinline__ void a14_producer_pipe(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                                  int re, int ntiles, uint32_t rank)
{
    if (DIAG == A6_DIAG_CONSUMERS) {
        a14_producer<DIAG, false, CS>(a, sm, sbase, p, q, rb, re, ntiles, rank);
        return;
    }
    /* A14_DIAG_NOREMOTE: each block's half of every tile for itself alone (no st.async, no
     * transaction count on the full barrier). */
    constexpr bool REMOTE = DIAG != A14_DIAG_NOREMOTE && DIAG != A14_DIAG_NOREMOTE_PRODUCER;
    /* BULK (versions 21, 22): the half tile reaches the peer by nine bulk copies (one 4 KB run of
     * rows 32 rank .. 32 rank + 31 per 64-column block) from this block's stage after it is
     * written, in place of 2,304 16-byte st.async; STA: the st.async. */
    constexpr bool STA = REMOTE && !BULK;
    const int jr = 32 * (int)rank + (p >> 2), qt = p & 3;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const uint32_t peer = rank ^ 1u, peer_full = a14_mapa(bar_full, peer), peer_sm = a14_mapa(sbase, peer);
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
        const int s = t & 1;
        if (t >= 2) a14_wait<CS>(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        if (REMOTE && p == 0) a14_expect_tx(bar_full + 8 * s, A14_PEER_BYTES);
        const uint32_t st_off = A6_TILE_BYTES * (1 + s);
        uint8_t *stage = sm + st_off;
        const uint32_t pst = peer_sm + st_off, pbar = peer_full + 8 * s;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int o = qt + 4 * i;
            const uint32_t gb = (i >> 1) == 0 ? r.sc.x : (i >> 1) == 1 ? r.sc.y : (i >> 1) == 2 ? r.sc.z : r.sc.w;
            uint4 w[2];
            dh_fp8x16_to_f16(r.lat[i], __float2half2_rn(__uint_as_float(gb)), w);
            const uint32_t o0 = a6_swz(jr, 2 * o), o1 = a6_swz(jr, 2 * o + 1);
            *(uint4 *)(stage + o0) = w[0];
            *(uint4 *)(stage + o1) = w[1];
            if (STA) {
                a14_st_async(pst + o0, w[0], pbar);
                a14_st_async(pst + o1, w[1], pbar);
            }
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const uint4 w = dh_bf16x8_to_f16(r.rope[i]);
            const uint32_t o = a6_swz(jr, 64 + qt + 4 * i);
            *(uint4 *)(stage + o) = w;
            if (STA) a14_st_async(pst + o, w, pbar);
        }
        dh_fence_proxy_async();
        if (BULK && REMOTE) {
            /* Every producer thread's stores visible to the async proxy (the fence above), then one
             * thread copies the half tile; its completion counts on the peer's full barrier. */
            asm volatile("bar.sync 5, 128;" ::: "memory");
            if (p == 0) {
                const uint32_t half = (uint32_t)(32 * (int)rank * 128);
                const uint32_t lst = sbase + st_off + half;
#pragma unroll
                for (int cb = 0; cb < 9; cb++)
                    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], 4096, [%2];"
                                 ::"r"(pst + half + cb * A6_BLOCK_BYTES), "r"(lst + cb * A6_BLOCK_BYTES), "r"(pbar) : "memory");
            }
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
}

/* The consumers: version 8's tile loop (S, softmax, P V) with the cluster's barriers. */
template <int DIAG, bool CS>
__device__ __forceinline__ void a14_consumer(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase,
                                             int w, int tid, int q, int split, int hb, int rb, int re, int ntiles,
                                             uint32_t rank)
{
    constexpr int FMT = KREF_ROW_FP8;
    const uint32_t sQ = sbase, sK = sbase + A6_TILE_BYTES, sP = sbase + A6_P_OFF;
    float *red = (float *)(sm + A6_RED_OFF);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const uint32_t my_empty = a14_mapa(bar_empty, rank), peer_empty = a14_mapa(bar_empty, rank ^ 1u);
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const float sscale = a.sm_scale * A6_LOG2E;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    float sc[16];
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, cnt = min(A6_N, re - (rb + t * A6_N));
        const uint32_t stage = sK + A6_TILE_BYTES * s;
        a14_wait<CS>(bar_full + 8 * s, (t >> 1) & 1);
        if (DIAG != A6_DIAG_PRODUCER && DIAG != A14_DIAG_NOREMOTE_PRODUCER) {
            dh_fence_proxy_async();   /* the peer's st.async bytes, before the tensor cores read them */
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
        __syncwarp();
        if (lane == 0) {
            a14_arrive_any<CS>(my_empty + 8 * s);
            a14_arrive_any<CS>(peer_empty + 8 * s);
        }
    }
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
    /* The staged output reuses the key stages: every tile (the peer's writes into them
     * included) has been consumed, so nothing writes them any more. */
    if (a.splits == 1)
        a6_store_out<float>(o, i0, i1, sm, w, tid, r0, r1, qd, out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM);
    else
        a6_store_out<__half>(o, i0, i1, sm, w, tid, r0, r1, qd, (__half *)a.part_o + ob * KREF_V_DIM);
    if (a.splits > 1 && w == 0 && qd == 0) {
        a.part_lse[ob + r0] = L0 > 0 ? m0 + log2f(L0) : -INFINITY;
        a.part_lse[ob + r1] = L1 > 0 ? m1 + log2f(L1) : -INFINITY;
    }
}

template <int DIAG, int VER>
__global__ void __launch_bounds__(A6_THREADS, 1) attn14_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a14_smem_raw[];
    /* The same offset from the window's start in both blocks (the rounding depends only on the
     * dynamic shared memory's base, the same in every block of a kernel). */
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a14_smem_raw);
    uint8_t *sm = a14_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
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
    /* Both blocks' barriers exist before either block's producer or consumers touch the peer's. */
    a14_cluster_sync();
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A6_PRODUCER_REGS(0)));
        if (VER >= 16) a14_producer_pipe<DIAG, VER == 17>(a, sm, sbase, tid - 256, q, rb, re, ntiles, rank);
        else a14_producer<DIAG, VER == 15>(a, sm, sbase, tid - 256, q, rb, re, ntiles, rank);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A6_CONSUMER_REGS(0)));
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        a14_consumer<DIAG, VER == 17>(a, out, sm, sbase, wg, tid, q, split, hb, rb, re, ntiles, rank);
    }
    /* No block leaves while the peer may still arrive on its barriers. */
    a14_cluster_sync();
}

/* Version VER's (14-17) main kernel over grid (splits, nq, heads / 64) in clusters of the two 64-head
 * groups 2 c, 2 c + 1; FP8 rows with heads / 64 even only (the caller sends the rest to
 * version 8). */
template <int DIAG, int VER>
static void a14_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn14_kernel<DIAG, VER>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(a.splits, a.nq, a.heads / 64);
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
    cudaCheck(cudaLaunchKernelEx(&cfg, attn14_kernel<DIAG, VER>, a, out));
    CUDA_LAUNCH_CHECK();
}

/* Clusters of version 14 resident at once on this GPU (one block per SM, two per cluster). */
static inline int a14_max_clusters()
{
    static int n = -1;
    if (n < 0) {
        cudaCheck(cudaFuncSetAttribute(attn14_kernel<A6_DIAG_NONE, 14>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
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
        cudaCheck(cudaOccupancyMaxActiveClusters(&n, (void *)attn14_kernel<A6_DIAG_NONE, 14>, &cfg));
    }
    return n;
}

#endif
