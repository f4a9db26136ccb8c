/* attn21.cuh: attention versions 21 and 22 (kernels/lib/attention_wgmma.cu instantiates 22 for
 * the library, kernels/versions/attention_wgmma.cu 21 and the diagnostic variants), FlashMLA's crossover at 128 heads (attn14.cuh: the two 64-head blocks of a query in a
 * cluster, each dequantising half of every tile for both) with the half tile sent to the peer by
 * nine bulk copies of 4 KB from the block's own stage (cp.async.bulk shared::cta ->
 * shared::cluster, completion counted on the peer's full barrier) instead of version 17's 2,304
 * 16-byte st.async per tile: version 17's producer alone took 346.6 us at 128 heads x 256
 * queries, and 201.6 us with the remote stores left out (kernels/NOTES.md, "Versions 18-20 and version 17 without its remote stores: outcome").
 * Version 21: version 17's producer (CTA-scope barriers, the next tile's loads in flight) and
 * consumers with the bulk copies. Version 22: the same producer with version 18's consumers
 * (FlashMLA's division of the two warpgroups), their empty arrivals one per warp on both blocks'
 * barriers. FP8 rows with an even number of 64-head groups; the caller sends the rest to
 * version 18. sm_90a. */
#ifndef KERNELS_ATTN21_CUH
#define KERNELS_ATTN21_CUH

#include "kernels/lib/attn14.cuh"
#include "kernels/lib/attn18.cuh"

template <int DIAG, int VER>
__global__ void __launch_bounds__(A6_THREADS, 1) attn21_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a21_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a21_smem_raw);
    uint8_t *sm = a21_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
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
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A6_PRODUCER_REGS(0)));
        a14_producer_pipe<DIAG, true, true>(a, sm, sbase, tid - 256, q, rb, re, ntiles, rank);
    } else if (VER == 21) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A6_CONSUMER_REGS(0)));
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        a14_consumer<DIAG, true>(a, out, sm, sbase, wg, tid, q, split, hb, rb, re, ntiles, rank);
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG0_REGS));
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<KREF_ROW_FP8, 18, DIAG, 0, true>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<KREF_ROW_FP8>(a, out, sm, 0, tid, q, split, hb, o, m0, m1, l0, l1);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG1_REGS));
        a6_load_q<KREF_ROW_FP8, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<KREF_ROW_FP8, 18, DIAG, 1, true>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<KREF_ROW_FP8>(a, out, sm, 1, tid, q, split, hb, o, m0, m1, l0, l1);
    }
    /* No block leaves while the peer may still copy into it or arrive on its barriers. */
    a14_cluster_sync();
}

/* Version VER's (21, 22) main kernel over grid (splits, nq, heads / 64) in clusters of the two
 * 64-head groups 2 c, 2 c + 1, as a14_launch. */
template <int DIAG, int VER>
static void a21_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn21_kernel<DIAG, VER>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
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
    cudaCheck(cudaLaunchKernelEx(&cfg, attn21_kernel<DIAG, VER>, a, out));
    CUDA_LAUNCH_CHECK();
}

/* Clusters of versions 21, 22 resident at once on this GPU (one block per SM, two per cluster). */
template <int VER>
static inline int a21_max_clusters()
{
    static int n = -1;
    if (n < 0) {
        cudaCheck(cudaFuncSetAttribute(attn21_kernel<A6_DIAG_NONE, VER>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
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
        cudaCheck(cudaOccupancyMaxActiveClusters(&n, (void *)attn21_kernel<A6_DIAG_NONE, VER>, &cfg));
    }
    return n;
}

#endif
