/* fetch_rows.cuh: the row-copy kernel that fetch versions 1, 2, 3 and 5 instantiate
 * (kernels/versions/fetch.cu), hot[slot[i]] = pool[row[i]] one warp per row at a time; the
 * library's fetch (kernels/lib/fetch.cu, dhk_fetch_launch) is its version-5 instance with
 * 16-byte words. A template in a header so that both translation units instantiate the same
 * device code. */
#ifndef KERNELS_FETCH_ROWS_CUH
#define KERNELS_FETCH_ROWS_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* Largest lane chunk count any supported row needs: 1152 B / 16 B = 72 chunks = 3 per lane;
 * 584 B / 8 B = 73 chunks = 3 per lane; padded 768 / 16 = 48 = 2 per lane. */
#define FETCH_CPL 3

/* THREADS is the block size: one block per SM, so a launch of sms blocks uses sms SMs; version 1
 * uses 1024 threads, versions 2-3 use 512 so that 8 rows of 16-byte chunks fit in registers
 * (128 per thread) without spilling. */
template <typename V, int R, bool CONTIG, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
fetch_rows_kernel(const uint8_t *__restrict__ pool, size_t pool_stride,
                  const int64_t *__restrict__ rows, const int32_t *__restrict__ slots, int n,
                  int row_bytes, uint8_t *__restrict__ hot, size_t hot_stride)
{
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * blockDim.x) >> 5);
    const int nvec = row_bytes / (int)sizeof(V);
    int begin, end, step;
    if (CONTIG) {
        int per = (n + nwarps - 1) / nwarps;
        begin = warp * per;
        end = min(n, begin + per);
        step = R;
    } else {
        begin = warp * R;
        end = n;
        step = nwarps * R;
    }
    for (int i0 = begin; i0 < end; i0 += step) {
        V buf[R][FETCH_CPL];
        /* All loads of R rows are issued before the first store, so R * FETCH_CPL requests
         * per lane are in flight at once. */
#pragma unroll
        for (int r = 0; r < R; r++) {
            int i = i0 + r;
            if (i < end) {
                const V *src = (const V *)(pool + (size_t)rows[i] * pool_stride);
#pragma unroll
                for (int c = 0; c < FETCH_CPL; c++)
                    if (lane + 32 * c < nvec) buf[r][c] = src[lane + 32 * c];
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            int i = i0 + r;
            if (i < end) {
                V *dst = (V *)(hot + (size_t)slots[i] * hot_stride);
#pragma unroll
                for (int c = 0; c < FETCH_CPL; c++)
                    if (lane + 32 * c < nvec) dst[lane + 32 * c] = buf[r][c];
            }
        }
    }
}

#endif
