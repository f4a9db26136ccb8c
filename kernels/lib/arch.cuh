/* arch.cuh: the guards of device code whose instructions need an architecture after sm_80
 * (kernels/karch.h lists the features and the versions that use them). The generic units are
 * compiled for every architecture of the Makefile's CUDA_ARCHS; on a target without the
 * instructions such code compiles to a trap, and the host never launches it there
 * (kernels/karch.c decides from the GPU's compute capability before any launch). Outside the
 * device pass (__CUDA_ARCH__ undefined) every guard is 1. */
#ifndef KERNELS_ARCH_CUH
#define KERNELS_ARCH_CUH

/* cp.async.bulk, mbarrier try_wait / expect_tx, fence.proxy.async, cluster scope: sm_90. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define DH_HAS_SM90 1
#else
#define DH_HAS_SM90 0
#endif
/* mma.sync with e4m3 operands: sm_89. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define DH_HAS_FP8MMA 1
#else
#define DH_HAS_FP8MMA 0
#endif

/* What a guarded body becomes on a target without its instructions. */
#define DH_ARCH_TRAP() __trap()

#endif
