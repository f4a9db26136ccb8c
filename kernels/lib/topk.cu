/* topk.cu: the library's top-k (kernels/dhk.h: dhk_topk_launch), top-k version 6 of
 * kernels/versions/topk.cu: one 1024-thread block per request reads its scores once, keeps
 * every score above a threshold guessed from a sample (its rank bounded by the sample's noise,
 * kref_topk_sample_rank) in shared memory with its row, and selects and orders the k largest
 * from there; a guess that admits fewer than k or too many scores falls back to radix passes,
 * so the result never depends on it. CPU reference: kref_topk (kernels/kref.c). */
#include "kernels/dhk.h"
#include "kernels/kref.h"
#include "kernels/lib/topk2.cuh"   // defines: topk2_kernel, tk2_smem_bytes, TK_THREADS, TK5_SAMPLE, TK6_Z

void dhk_topk_launch(const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(topk2_kernel<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tk2_smem_bytes));
        attr_done = true;
    }
    topk2_kernel<6><<<batch, TK_THREADS, tk2_smem_bytes, stream>>>(scores, ctx, k, out,
                                                                   kref_topk_sample_rank(ctx, k, TK5_SAMPLE, TK6_Z));
    CUDA_LAUNCH_CHECK();
}
