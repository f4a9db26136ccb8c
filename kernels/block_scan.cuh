/* block_scan.cuh: a block-wide exclusive scan, shared by the kernels that compact lists in
 * order (residency victims and misses, top-k output). Every thread of the block must call it. */
#ifndef BLOCK_SCAN_CUH
#define BLOCK_SCAN_CUH

/* Exclusive block scan of one int per thread; returns the prefix, *total gets the sum. */
static __device__ __forceinline__ int block_excl_scan(int v, int *total)
{
    __shared__ int warp_sums[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffff, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[w] = x;
    __syncthreads();
    if (w == 0) {
        int s = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffff, s, o);
            if (lane >= o) s += y;
        }
        warp_sums[lane] = s;
    }
    __syncthreads();
    int before = (w > 0 ? warp_sums[w - 1] : 0) + x - v;
    *total = warp_sums[(blockDim.x >> 5) - 1];
    __syncthreads();
    return before;
}

#endif
