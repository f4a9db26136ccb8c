/* wgmma.cuh: the pieces of Hopper's asynchronous warpgroup matrix multiply (wgmma, sm_90a only)
 * that its kernels share (attention_wgmma.cu, indexer_wgmma.cu): the shared-memory matrix
 * descriptor, the fence / commit / wait instructions, and the proxy and register fences.
 * Addresses are shared-memory (cvta'd) 32-bit addresses. */
#ifndef KERNELS_WGMMA_CUH
#define KERNELS_WGMMA_CUH

#include <stdint.h>

/* wgmma shared-memory descriptor, 128-byte swizzle: start address, leading and stride byte
 * offsets (PTX ISA, "Matrix Descriptor Format"). K-major operands: the stride is 1024 B
 * between groups of 8 rows, the leading offset unused (1). N-major operands: leading = the
 * bytes between 64-column blocks, stride = 1024 B between groups of 8 rows (of K). The
 * operand's tile must start on a 1024-byte boundary (the swizzle pattern's period); a step
 * along K inside a 128-byte row adds its byte offset to the start address. */
__host__ __device__ __forceinline__ uint64_t dh_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)((lbo >> 4) & 0x3FFF) << 16 |
           (uint64_t)((sbo >> 4) & 0x3FFF) << 32 | (uint64_t)1 << 62;
}

__device__ __forceinline__ void dh_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void dh_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void dh_wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
/* Pins an accumulator register between wgmma and ordinary instructions: the compiler may not
 * move its reads or writes across this point (it sees the wgmma's outputs as ready at once). */
__device__ __forceinline__ void dh_fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* Makes this thread's ordinary (generic-proxy) shared-memory writes, cp.async's included once
 * waited for, visible to the tensor cores' (async-proxy) reads; a barrier must follow. */
__device__ __forceinline__ void dh_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* Accumulator lists of the wgmma instructions' inline asm: 16 to 128 fp32 registers, listed
 * as "%0,...,%N-1" in the instruction and "+f"(d[0]) ... as its operands. */
#define DH_WG_R10(i) "%" #i "0,%" #i "1,%" #i "2,%" #i "3,%" #i "4,%" #i "5,%" #i "6,%" #i "7,%" #i "8,%" #i "9"
#define DH_WG_F4(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3])
#define DH_WG_F16(b) DH_WG_F4(b), DH_WG_F4(b + 4), DH_WG_F4(b + 8), DH_WG_F4(b + 12)
#define DH_WG_F64(b) DH_WG_F16(b), DH_WG_F16(b + 16), DH_WG_F16(b + 32), DH_WG_F16(b + 48)
#define DH_WG_REGS16 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
#define DH_WG_REGS32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9," DH_WG_R10(1) "," DH_WG_R10(2) ",%30,%31"
#define DH_WG_REGS64                                                                                 \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9," DH_WG_R10(1) "," DH_WG_R10(2) "," DH_WG_R10(3) "," DH_WG_R10(4) \
    "," DH_WG_R10(5) ",%60,%61,%62,%63"
#define DH_WG_REGS128                                                                                     \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9," DH_WG_R10(1) "," DH_WG_R10(2) "," DH_WG_R10(3) "," DH_WG_R10(4) ","  \
    DH_WG_R10(5) "," DH_WG_R10(6) "," DH_WG_R10(7) "," DH_WG_R10(8) "," DH_WG_R10(9) "," DH_WG_R10(10) \
    "," DH_WG_R10(11) ",%120,%121,%122,%123,%124,%125,%126,%127"

#endif
