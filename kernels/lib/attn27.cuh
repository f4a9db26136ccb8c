/* attn27.cuh: attention versions 27-29 (kernels/lib/attention_wgmma.cu instantiates them for
 * the library), version 18 (attn18.cuh: FlashMLA's division of the consumers, one block per 64
 * heads of a query and split) with the splits of a (query, 64 heads) merged inside the kernel,
 * through distributed shared memory, instead of by fp16 partials in global memory and a second
 * kernel (version 8's combine); sm_90a, FP8 and BF16 rows, any multiple of 64 heads.
 *
 * Why (kernels/NOTES.md, "Version 27"): at batch 16, 64 heads, k 2048 the library runs 8 splits
 * of 4 tiles per (query, 64 heads), 128 blocks, whose 64 KB of fp16 partials each go to global
 * memory, then a second launch merges them (1,024 blocks of 128 threads) and writes the output:
 * per measured iteration two launches, the partials' round trip and the combine's ramp, in
 * series with a main kernel that is itself mostly fixed cost at 4 tiles per block.
 *
 * Version 27: the S splits of one (query, 64 heads) form one cluster of S blocks (grid (S, nq,
 * heads / 64), cluster (S, 1, 1), 2 <= S <= 8). After its tile loop each block stages its output
 * (normalised by its row sums, fp32, version 8's padded rows in the two free key stages) and the
 * 64 heads' log-sum-exps in its own shared memory; a cluster barrier (release / acquire) makes
 * them visible to the cluster; block r then merges heads [r H, r H + H) (H = ceil(64 / S)): the S
 * log-sum-exps of each head read once into local shared memory as weights, then every consumer
 * thread reads the S blocks' float4 of its (head, 4 value dims) by ld.shared::cluster, sums them
 * weighted and stores the output; a second cluster barrier keeps every block's shared memory
 * alive until its peers have read it. One launch per iteration, no partials in global memory.
 *
 * Version 28: version 27 launched with programmatic stream serialization (programmatic dependent
 * launch, as FlashMLA's and SGLang's decode kernels are): the grid may start while the previous
 * kernel of the stream drains; each block initialises its barriers, then waits (griddepcontrol.wait:
 * the previous grid complete and its writes visible) before its first global read (Q, the row
 * ids, the rows), and at once lets the next kernel of the stream launch (launch_dependents: that
 * kernel's own wait still holds it until this grid is complete). What overlaps is the launch and
 * the block's setup with the previous kernel's tail; back to back that kernel is the previous
 * iteration's, in a decode step the top-k that chose the rows.
 *
 * Version 29: version 28 in clusters of two splits (clusters of 8 and 4 do not all fit in the GPCs
 * at batch 16 and 32; kernels/NOTES.md, "Versions 27 and 28: outcome"): each pair merged as above,
 * the pairs of a (query, 64 heads) by the last block to arrive (a29_last_merge). Measured slower
 * than 18 except at one pair (NOTES, "Version 29: outcome"); not the library's. */
#ifndef KERNELS_ATTN27_CUH
#define KERNELS_ATTN27_CUH

#include "kernels/lib/attn14.cuh"
#include "kernels/lib/attn18.cuh"

#define A27_MAX_SPLITS 8                                   /* the portable cluster size */
#define A27_PITCH (KREF_V_DIM * 4 + 32)                    /* a staged fp32 output row: a6_store_out's */
#define A27_LSE_OFF (A6_RED_OFF + 128 * 4)                 /* 64 log-sum-exps after alpha and the row sums */
#define A27_WT_OFF (A6_P_OFF)                              /* the merge's weights: [S][H] floats, in P's region */
static_assert(64 * A27_PITCH <= 2 * A6_TILE_BYTES, "the staged output must fit in the two key stages");
static_assert(A27_LSE_OFF + 64 * 4 <= A6_BAR_OFF, "the log-sum-exps must fit in the reduce area");
static_assert(A27_MAX_SPLITS * 64 * 4 <= 64 * 64 * 2, "the weights must fit in P's region");

__device__ __forceinline__ float a27_ld_cluster_f32(uint32_t addr)
{
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ float4 a27_ld_cluster_f32x4(uint32_t addr)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr) : "memory");
    return v;
}

/* The consumers' epilogue (w = 0, 1), up to the first cluster barrier: version 18's row sums, the
 * output normalised and staged in fp32, and the heads' log-sum-exps. */
__device__ __forceinline__ void a27_stage(uint8_t *sm, int w, int tid, const float (&o)[128], float m0, float m1, float l0,
                                          float l1)
{
    float *lsum = (float *)(sm + A6_RED_OFF) + 64, *lse = (float *)(sm + A27_LSE_OFF);
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    if (w == 0) {
        l0 += __shfl_xor_sync(0xffffffff, l0, 1);
        l0 += __shfl_xor_sync(0xffffffff, l0, 2);
        l1 += __shfl_xor_sync(0xffffffff, l1, 1);
        l1 += __shfl_xor_sync(0xffffffff, l1, 2);
        if (qd == 0) {
            lsum[r0] = l0, lsum[r1] = l1;
            lse[r0] = l0 > 0 ? m0 + log2f(l0) : -INFINITY;
            lse[r1] = l1 > 0 ? m1 + log2f(l1) : -INFINITY;
        }
    }
    a6_consumer_bar();
    const float L0 = lsum[r0], L1 = lsum[r1];
    const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
    /* Both warpgroups have waited for their last P V (the barrier above), so the stages are free. */
    uint8_t *st = sm + A6_TILE_BYTES;
#pragma unroll
    for (int jj = 0; jj < 32; jj++) {
        const int d = 256 * w + 8 * jj + 2 * qd;
        *(float2 *)(st + r0 * A27_PITCH + d * 4) = make_float2(o[4 * jj] * i0, o[4 * jj + 1] * i0);
        *(float2 *)(st + r1 * A27_PITCH + d * 4) = make_float2(o[4 * jj + 2] * i1, o[4 * jj + 3] * i1);
    }
}

/* Between the two cluster barriers: block rank merges heads [rank H, rank H + H) of the cluster's
 * S blocks (tid: the 256 consumer threads) into dst, the rows of the 64 heads (KREF_V_DIM floats
 * apart); dst_lse, when given, receives the merged heads' log-sum-exps (version 29's groups). */
__device__ __forceinline__ void a27_merge(float *__restrict__ dst, float *__restrict__ dst_lse, uint8_t *sm, uint32_t sbase,
                                          int tid, int S, uint32_t rank)
{
    const int H = (64 + S - 1) / S, h0 = (int)rank * H, nh = min(H, 64 - h0);
    float *wt = (float *)(sm + A27_WT_OFF);   /* [S][H]: the normalised weights */
    const uint32_t lse_l = sbase + A27_LSE_OFF, st_l = sbase + A6_TILE_BYTES;
    if (tid < nh) {
        float l[A27_MAX_SPLITS], mx = -INFINITY;
#pragma unroll
        for (int s = 0; s < A27_MAX_SPLITS; s++)
            if (s < S) l[s] = a27_ld_cluster_f32(a18_mapa(lse_l + 4 * (h0 + tid), (uint32_t)s)), mx = fmaxf(mx, l[s]);
        float den = 0.f;
#pragma unroll
        for (int s = 0; s < A27_MAX_SPLITS; s++)
            if (s < S) l[s] = mx == -INFINITY || l[s] == -INFINITY ? 0.f : exp2f(l[s] - mx), den += l[s];
        const float inv = den > 0 ? 1.f / den : 0.f;
#pragma unroll
        for (int s = 0; s < A27_MAX_SPLITS; s++)
            if (s < S) wt[s * H + tid] = l[s] * inv;
        if (dst_lse) dst_lse[h0 + tid] = den > 0 ? mx + log2f(den) : -INFINITY;
    }
    a6_consumer_bar();
    constexpr int C4 = KREF_V_DIM / 4;   /* float4 per head */
    float *ob = dst + (size_t)h0 * KREF_V_DIM;
#pragma unroll 1
    for (int i = tid; i < nh * C4; i += 256) {
        const int h = i / C4, c = i % C4;
        const uint32_t off = st_l + (uint32_t)(h0 + h) * A27_PITCH + 16u * c;
        float4 v[A27_MAX_SPLITS];
#pragma unroll
        for (int s = 0; s < A27_MAX_SPLITS; s++)
            if (s < S) v[s] = a27_ld_cluster_f32x4(a18_mapa(off, (uint32_t)s));
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int s = 0; s < A27_MAX_SPLITS; s++)
            if (s < S) {
                const float g = wt[s * H + h];
                acc.x += g * v[s].x, acc.y += g * v[s].y, acc.z += g * v[s].z, acc.w += g * v[s].w;
            }
        *(float4 *)(ob + (size_t)h * KREF_V_DIM + 4 * c) = acc;
    }
}

/* Version 29, after the second cluster barrier: the G = splits / 2 groups (clusters of two splits)
 * of a (query, 64 heads) have each written their merged half-heads (fp32) and log-sum-exps to
 * a.part_o / a.part_lse ([nq][G][heads]); the last block to arrive for its head half (one counter
 * per (query, 64 heads, half) in a.merge_cnt, set back to zero by that block) merges the G groups
 * of its 32 heads into out, reading them from L2. Writers: every thread's stores, a fence, then
 * one arrival; the last: its arrival, a fence, then the reads (ld.global.cg). */
__device__ __forceinline__ void a29_last_merge(const attn_args &a, float *__restrict__ out, uint8_t *sm, int tid, int q, int hb,
                                               uint32_t rank, int G)
{
    volatile int *flag = (volatile int *)(sm + A6_RED_OFF) + 192;
    float *wt = (float *)(sm + A27_WT_OFF);   /* [G][32] */
    __threadfence();
    a6_consumer_bar();
    if (tid == 0) {
        unsigned *cnt = a.merge_cnt + 2 * ((size_t)q * (a.heads / 64) + hb) + rank;
        const bool last = atomicAdd(cnt, 1u) == (unsigned)G - 1;
        if (last) {
            atomicExch(cnt, 0u);   /* every group has arrived: the count is free for the next launch */
            __threadfence();
        }
        *flag = last;
    }
    a6_consumer_bar();
    if (!*flag) return;
    const int h0 = 32 * (int)rank;
    const size_t qh = (size_t)q * G * a.heads + (size_t)hb * 64 + h0;   /* group 0's row of head h0 */
    if (tid < 32) {
        float mx = -INFINITY;
        for (int g = 0; g < G; g++) mx = fmaxf(mx, __ldcg(a.part_lse + qh + (size_t)g * a.heads + tid));
        float den = 0.f;
        for (int g = 0; g < G; g++) {
            const float l = __ldcg(a.part_lse + qh + (size_t)g * a.heads + tid);
            const float w = mx == -INFINITY || l == -INFINITY ? 0.f : exp2f(l - mx);
            wt[g * 32 + tid] = w;
            den += w;
        }
        const float inv = den > 0 ? 1.f / den : 0.f;
        for (int g = 0; g < G; g++) wt[g * 32 + tid] *= inv;
    }
    a6_consumer_bar();
    constexpr int C4 = KREF_V_DIM / 4, U = 4;
    const float4 *part = (const float4 *)a.part_o;
    float4 *ob = (float4 *)(out + ((size_t)q * a.heads + (size_t)hb * 64 + h0) * KREF_V_DIM);
#pragma unroll 1
    for (int i = tid; i < 32 * C4; i += 256) {
        const int h = i / C4, c = i % C4;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
        for (int g0 = 0; g0 < G; g0 += U) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                v[u] = g0 + u < G ? __ldcg(part + ((qh + (size_t)(g0 + u) * a.heads + h) * C4 + c)) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const float w = g0 + u < G ? wt[(g0 + u) * 32 + h] : 0.f;
                acc.x += w * v[u].x, acc.y += w * v[u].y, acc.z += w * v[u].z, acc.w += w * v[u].w;
            }
        }
        ob[(size_t)h * C4 + c] = acc;
    }
}

__device__ __forceinline__ void a27_grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void a27_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/* The consumers' part after the tile loop: version 27 / 28 (V 27), version 29 (V 29: clusters of
 * two splits, the groups merged by the last to arrive). */
template <int V>
__device__ __forceinline__ void a27_finish(const attn_args &a, float *__restrict__ out, uint8_t *sm, uint32_t sbase, int tid,
                                           int q, int hb, uint32_t rank)
{
    const int S = V == 29 ? 2 : a.splits, G = a.splits / S, g = blockIdx.x / S;
    a14_cluster_sync();
    if (V == 29 && G > 1) {
        const size_t row = ((size_t)q * G + g) * a.heads + (size_t)hb * 64;
        a27_merge(a.part_o + row * KREF_V_DIM, a.part_lse + row, sm, sbase, tid, S, rank);
    } else {
        a27_merge(out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM, nullptr, sm, sbase, tid, S, rank);
    }
    a14_cluster_sync();
    if (V == 29 && G > 1) a29_last_merge(a, out, sm, tid, q, hb, rank, G);
}

template <int FMT, bool PDL, int V = 27>
__global__ void __launch_bounds__(A6_THREADS, 1) attn27_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a27_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a27_smem_raw);
    uint8_t *sm = a27_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int split = blockIdx.x, q = blockIdx.y, hb = blockIdx.z;
    const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
    const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
    const uint32_t rank = a14_cluster_rank();   /* the split within the cluster (grid x) */
    if (tid == 0) {
        dh_mbar_init(bar_full, 128);
        dh_mbar_init(bar_full + 8, 128);
        dh_mbar_init(bar_empty, 256);
        dh_mbar_init(bar_empty + 8, 256);
    }
    dh_fence_proxy_async();
    __syncthreads();
    if (PDL) {
        a27_grid_wait();
        a27_launch_dependents();
    }
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A18_PRODUCER_REGS));
        a18_producer<FMT>(a, sm, sbase, tid - 256, q, rb, re, ntiles);
        a14_cluster_sync();   /* the consumers' two cluster barriers */
        a14_cluster_sync();
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG0_REGS));
        a6_load_q<FMT, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<FMT, 18, A6_DIAG_NONE, 0>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a27_stage(sm, 0, tid, o, m0, m1, l0, l1);
        a27_finish<V>(a, out, sm, sbase, tid, q, hb, rank);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG1_REGS));
        a6_load_q<FMT, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<FMT, 18, A6_DIAG_NONE, 1>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a27_stage(sm, 1, tid, o, m0, m1, l0, l1);
        a27_finish<V>(a, out, sm, sbase, tid, q, hb, rank);
    }
}

/* The launch configuration of version 27 (PDL false), 28 (true) or 29 (V 29, PDL true) over grid
 * (splits, nq, heads / 64) in clusters of the splits (29: of two splits). */
template <int FMT, bool PDL, int V = 27>
static cudaLaunchConfig_t a27_config(dim3 grid, cudaStream_t stream, cudaLaunchAttribute *attr)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn27_kernel<FMT, PDL, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(A6_THREADS);
    cfg.dynamicSmemBytes = A6_SMEM_BYTES;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = V == 29 ? 2 : grid.x;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = PDL ? 2 : 1;
    return cfg;
}

template <int FMT, bool PDL, int V>
static void a27_launch_fmt(const attn_args &a, float *out, cudaStream_t stream)
{
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = a27_config<FMT, PDL, V>(dim3(a.splits, a.nq, a.heads / 64), stream, attr);
    cudaCheck(cudaLaunchKernelEx(&cfg, attn27_kernel<FMT, PDL, V>, a, out));
    CUDA_LAUNCH_CHECK();
}

/* Version 27 or 28 over a.splits (2 .. A27_MAX_SPLITS) splits; version 29 over an even number of
 * splits (a.part_o, a.part_lse: nq x splits / 2 x heads rows; a.merge_cnt zero). */
static inline void a27_launch(const attn_args &a, float *out, cudaStream_t stream, int version)
{
    if (a.format == KREF_ROW_FP8) {
        if (version == 29) a27_launch_fmt<KREF_ROW_FP8, true, 29>(a, out, stream);
        else if (version == 28) a27_launch_fmt<KREF_ROW_FP8, true, 27>(a, out, stream);
        else a27_launch_fmt<KREF_ROW_FP8, false, 27>(a, out, stream);
    } else {
        if (version == 29) a27_launch_fmt<KREF_ROW_BF16, true, 29>(a, out, stream);
        else if (version == 28) a27_launch_fmt<KREF_ROW_BF16, true, 27>(a, out, stream);
        else a27_launch_fmt<KREF_ROW_BF16, false, 27>(a, out, stream);
    }
}

/* Clusters of S blocks (2 <= S <= A27_MAX_SPLITS) of version 27 resident at once (one block per
 * SM; the clusters must fit in a GPC). */
static inline int a27_max_clusters(int S)
{
    static int n[A27_MAX_SPLITS + 1] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    if (S < 2 || S > A27_MAX_SPLITS) return 0;
    if (n[S] < 0) {
        cudaLaunchAttribute attr[2];
        cudaLaunchConfig_t cfg = a27_config<KREF_ROW_FP8, false>(dim3(S, 1, 1), 0, attr);
        cudaCheck(cudaOccupancyMaxActiveClusters(&n[S], (void *)attn27_kernel<KREF_ROW_FP8, false>, &cfg));
    }
    return n[S];
}

#endif
