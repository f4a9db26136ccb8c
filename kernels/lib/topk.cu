/* topk.cu: the library's top-k (kernels/dhk.h: dhk_topk_launch), top-k version 6 of
 * kernels/versions/topk.cu: one 1024-thread block per request reads its scores once, keeps
 * every score above a threshold guessed from a sample (its rank bounded by the sample's noise,
 * kref_topk_sample_rank) in shared memory with its row, and selects and orders the k largest
 * from there; a guess that admits fewer than k or too many scores falls back to radix passes,
 * so the result never depends on it. CPU reference: kref_topk (kernels/kref.c).
 *
 * Version 5 (the same kernel with version 5's guess) is compiled here too, and reached by
 * kernels/versions/topk.cu through dhk__topk5_launch: the compiler inlines the template's
 * helpers differently when one instance is alone in its translation unit (version 6 alone
 * compiles to 93,184 bytes of code, beside version 5 to the 92,416 bytes that every committed
 * measurement ran), so the two stay together and the code stays what was measured. */
#include "kernels/dhk.h"
#include "kernels/kref.h"
#include "kernels/lib/topk2.cuh"   // defines: topk2_kernel, tk2_smem_bytes, TK_THREADS, TK5_SAMPLE, TK6_Z

/* Both instances may use the 180 KB of shared memory (once per process). */
static void tk_allow_smem(void)
{
    static bool done = false;
    if (done) return;
    cudaCheck(cudaFuncSetAttribute(topk2_kernel<5>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tk2_smem_bytes));
    cudaCheck(cudaFuncSetAttribute(topk2_kernel<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tk2_smem_bytes));
    done = true;
}

void dhk_topk_launch(const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t stream)
{
    tk_allow_smem();
    topk2_kernel<6><<<batch, TK_THREADS, tk2_smem_bytes, stream>>>(scores, ctx, k, out,
                                                                   kref_topk_sample_rank(ctx, k, TK5_SAMPLE, TK6_Z));
    CUDA_LAUNCH_CHECK();
}

void dhk__topk5_launch(const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t stream)
{
    tk_allow_smem();
    topk2_kernel<5><<<batch, TK_THREADS, tk2_smem_bytes, stream>>>(scores, ctx, k, out,
                                                                   kref_topk_sample_rank(ctx, k, TK5_SAMPLE, 0));
    CUDA_LAUNCH_CHECK();
}

int dhk__topk2_blocks_per_sm(void)
{
    tk_allow_smem();
    int per_sm = 0;
    cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, topk2_kernel<5>, TK_THREADS, tk2_smem_bytes));
    return per_sm;
}
