/* sync.cuh: the shared-memory barrier (mbarrier) operations, the 16-byte cp.async copies and
 * the conversions of one 16-byte chunk to fp16 (FP8 codes times a scale, or bf16), shared by
 * the kernels that use them (attention.cu, attention_wgmma.cu, gather.cu, indexer.cu, indexer_wgmma.cu). Addresses are shared-memory (cvta'd) 32-bit
 * addresses. */
#ifndef KERNELS_SYNC_CUH
#define KERNELS_SYNC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kernels/lib/arch.cuh"

/* 16 bytes global -> shared, asynchronous (cp.async.cg: L2 only); _zfill reads src_bytes of
 * them and fills the rest with zeros. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(smem)),
                 "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async16_zfill(void *smem, const void *gmem, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint32_t)__cvta_generic_to_shared(smem)),
                 "l"(gmem), "r"(src_bytes) : "memory");
}

/* 4 bytes global -> shared, asynchronous (cp.async.ca: the 4-byte size exists only through L1),
 * src_bytes of them read (0 or 4), the rest zeros: for arrays whose runs need not start
 * 16-byte aligned. */
__device__ __forceinline__ void cp_async4_zfill(void *smem, const void *gmem, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint32_t)__cvta_generic_to_shared(smem)),
                 "l"(gmem), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void dh_mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void dh_mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* Spins until the barrier's phase with the given parity has completed (try_wait from sm_90,
 * which suspends the thread for a while; test_wait before). */
__device__ __forceinline__ void dh_mbar_wait(uint32_t bar, int parity)
{
    uint32_t done;
    do {
#if DH_HAS_SM90
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
#else
        asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
#endif
    } while (!done);
}

/* Sixteen e4m3 codes (one 16-byte chunk of a row) times the group scale g2, as sixteen fp16
 * (two 16-byte chunks): e4m3 converts to fp16 exactly, the product rounds once. */
__device__ __forceinline__ void dh_fp8x16_to_f16(uint4 v, __half2 g2, uint4 (&w)[2])
{
    const __nv_fp8x2_storage_t *p2 = (const __nv_fp8x2_storage_t *)&v;
    __half2 *h2 = (__half2 *)w;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(p2[e], __NV_E4M3);
        h2[e] = __hmul2(*(__half2 *)&hr, g2);
    }
}

/* Eight bf16 (one 16-byte chunk) -> eight fp16. */
__device__ __forceinline__ uint4 dh_bf16x8_to_f16(uint4 v)
{
    const __nv_bfloat162 *b2 = (const __nv_bfloat162 *)&v;
    uint4 w;
    uint32_t *w32 = (uint32_t *)&w;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float2 f = __bfloat1622float2(b2[e]);
        __half2 h = __floats2half2_rn(f.x, f.y);
        w32[e] = *(uint32_t *)&h;
    }
    return w;
}

#endif
