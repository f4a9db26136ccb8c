/* karch.h: which kernel versions a GPU can run, decided on the host from its compute
 * capability and its shared memory per block, before any launch (plain C11, no CUDA: tested
 * without a GPU by tests/test_karch.c).
 *
 * bin/dhbench and bin/dhreplay are fat binaries: machine code for every architecture the
 * Makefile's CUDA_ARCHS lists (sm_80 on, Blackwell included) plus PTX of the newest, and the
 * wgmma units (*_wgmma.cu) for sm_90a alone. A version whose instructions an architecture
 * lacks is compiled there as a trap, never launched: the table in karch.c says what each
 * version needs (karch_feature), karch_check() answers "runs" or one line saying why not, and
 * karch_pick() chooses the replay's fallback among a kernel's versions.
 *
 * The features (PTX ISA, "Target ISA notes"; CUDA C++ Programming Guide, "Compute
 * Capabilities"; cuBLASLt "cublasLtMatmul" data-type table):
 *   KARCH_BASE    sm_80: cp.async, mma.sync bf16/fp16, ldmatrix, mbarrier init/arrive/test_wait;
 *   KARCH_FP8MMA  sm_89: mma.sync with e4m3 operands (Ada, Hopper, Blackwell);
 *   KARCH_SM90    sm_90: cp.async.bulk, mbarrier try_wait and expect_tx, clusters;
 *   KARCH_WGMMA   sm_90a: wgmma and setmaxnreg, compute capability 9.0 exactly (an "a"
 *                 target's code runs on that capability alone: not on 10.x or 12.x);
 *   KARCH_FP8GEMM cuBLASLt FP8 (e4m3) matmul: compute capability 8.9 and up.
 *
 * A forced path (dhbench --as-arch, dhreplay --as-arch, or DHK_AS_ARCH=sm_XY) decides as if
 * the GPU were sm_XY: on an H200, --as-arch sm_80 runs every non-Hopper fallback, checked
 * against the CPU references like any version. It may only take away features: an
 * architecture with a feature the device lacks is refused (karch_force_ok). */
#ifndef KERNELS_KARCH_H
#define KERNELS_KARCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KARCH_BASE, KARCH_FP8MMA, KARCH_SM90, KARCH_WGMMA, KARCH_FP8GEMM, KARCH_NFEAT } karch_feature;

/* The GPU as the decisions see it: compute capability as major * 10 + minor (sm_XY = XY),
 * and the shared memory a block may opt in to (cudaDeviceProp.sharedMemPerBlockOptin). */
typedef struct {
    int cc;
    size_t smem_optin;
} karch_dev;

/* Whether capability cc has feature f. */
int karch_has(karch_feature f, int cc);
/* "wgmma (sm_90a: compute capability 9.0 only)" and the like. */
const char *karch_feature_name(karch_feature f);
/* The feature version `version` of `kernel` needs (dtype: "fp8", "bf16" or NULL, for the
 * GEMM's FP8 plans); KARCH_BASE for a version with no entry. The attention's versions also
 * stand for verify and ring, which run them. */
karch_feature karch_need(const char *kernel, int version, const char *dtype);
/* 1 when version runs on dev with smem_need bytes of dynamic shared memory per block (0: no
 * opt-in needed); else 0 and one line in why (no newline), e.g.
 *   "attention version 6 needs wgmma (sm_90a: compute capability 9.0 only); this GPU is sm_80". */
int karch_check(const char *kernel, int version, const char *dtype, size_t smem_need, const karch_dev *dev,
                char *why, size_t cap);
/* The first of the n versions cand[] (in order of preference) that runs on dev, with
 * smem_need[i] the bytes cand[i] needs; -1 when none does (why then holds the last refusal). */
int karch_pick(const char *kernel, const int *cand, const size_t *smem_need, int n, const char *dtype,
               const karch_dev *dev, char *why, size_t cap);

/* "sm_XY" (or "generic" = sm_80) into *cc: 0, or -1 with a message in why. */
int karch_parse(const char *s, int *cc, char *why, size_t cap);
/* 1 when a device of capability real may decide as forced (every feature of forced is one of
 * real's); else 0 and one line in why. */
int karch_force_ok(int forced, int real, char *why, size_t cap);
/* "nvidia-h200" from "NVIDIA H200": lower case, every run of characters other than letters
 * and digits one '-', none at either end; at most cap - 1 characters. */
void karch_slug(const char *device, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
