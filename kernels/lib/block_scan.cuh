/* block_scan.cuh: block-wide scans shared by the kernels: an exclusive scan for compacting
 * lists in order (residency victims and misses, top-k output), and the digit step of the
 * block-wide radix select (the residency kernel's victim threshold, the top-k threshold, the
 * replay's classification). Every thread of the block must call them. */
#ifndef BLOCK_SCAN_CUH
#define BLOCK_SCAN_CUH

#include <stdint.h>

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

/* One digit of a radix select: hist holds the 256 bin counts of the keys that match the
 * digits chosen so far; find the bin holding rank need (1-based) and write it to *s_digit and
 * the rank within it to *s_need (both in shared memory).  Lane l of the first warp owns bins
 * 8l .. 8l+7 and a warp scan over the lanes' sums finds the owner; O(256) work.  Ends with a
 * barrier, so every thread may read *s_digit and *s_need; the caller needs another barrier
 * before hist or the two results are written again. */
static __device__ __forceinline__ void radix_select_digit(const uint32_t *hist, int need, int32_t *s_digit,
                                                          int32_t *s_need)
{
    const int tid = threadIdx.x;
    if (tid < 32) {
        uint32_t c[8], sum = 0;
        for (int j = 0; j < 8; j++) c[j] = hist[8 * tid + j], sum += c[j];
        uint32_t incl = sum;
        for (int o = 1; o < 32; o <<= 1) {
            uint32_t y = __shfl_up_sync(0xffffffff, incl, o);
            if (tid >= o) incl += y;
        }
        uint32_t excl = incl - sum;
        if (excl < (uint32_t)need && (uint32_t)need <= incl) {
            uint32_t run = excl;
            for (int j = 0; j < 8; j++) {
                if ((uint32_t)need <= run + c[j]) { *s_digit = 8 * tid + j; *s_need = need - (int)run; break; }
                run += c[j];
            }
        }
    }
    __syncthreads();
}

/* The indices s < n whose key is at most threshold, in ascending order, into out (a
 * radix-selected victim set: keys are unique, so the count is the selected rank).  Each
 * thread takes a contiguous range of indices, so one exclusive scan orders the output.
 * any = 0 selects nothing.  Ends with a barrier. */
static __device__ __forceinline__ void block_compact_le(const uint64_t *keys, int n, uint64_t threshold, int any,
                                                        int32_t *out)
{
    const int per = (n + blockDim.x - 1) / blockDim.x;
    const int s0 = min(n, (int)threadIdx.x * per), s1 = min(n, s0 + per);
    int cnt = 0;
    if (any)
        for (int s = s0; s < s1; s++) cnt += keys[s] <= threshold;
    int total;
    int at = block_excl_scan(cnt, &total);
    if (any)
        for (int s = s0; s < s1; s++)
            if (keys[s] <= threshold) out[at++] = s;
    __syncthreads();
}

#endif
