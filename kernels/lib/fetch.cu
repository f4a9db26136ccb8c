/* fetch.cu: the library's miss fetch (kernels/dhk.h: dhk_fetch_launch), fetch version 5 of
 * kernels/versions/fetch.cu with 16-byte words: consecutive list entries on consecutive warps
 * (version 1's interleaving, so the rows in flight on the whole GPU are one short stretch of
 * the list and share host pages) with 4 rows in flight per warp, one 512-thread block per SM.
 * CPU reference: kref_gather_rows (kernels/kref.c); bin/dhbench checks it byte for byte. */
#include "kernels/dhk.h"
#include "kernels/lib/fetch_rows.cuh"   // defines: fetch_rows_kernel, FETCH_CPL

void dhk_fetch_launch(const uint8_t *pool, size_t pool_stride, const int64_t *rows, const int32_t *slots, int n,
                      int row_bytes, uint8_t *hot, size_t hot_stride, int sms, cudaStream_t stream)
{
    fetch_rows_kernel<uint4, 4, false, 512><<<sms, 512, 0, stream>>>(pool, pool_stride, rows, slots, n, row_bytes, hot,
                                                                      hot_stride);
    CUDA_LAUNCH_CHECK();
}
