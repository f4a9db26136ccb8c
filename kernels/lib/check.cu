/* check.cu: the library's error exits (cudaCheck, CUDA_LAUNCH_CHECK and cublasCheck of
 * kernels/dhk.h). A kernel tool cannot go on after a failed CUDA call, so each prints one
 * line naming the call, its file and line, and exits; the line starts with the program's name
 * (dhbench, dhreplay), which is what a user ran. */
#include "kernels/dhk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void dhk_cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "%s: %s:%d: %s: %s\n", program_invocation_short_name, file, line, what, cudaGetErrorString(err));
        exit(1);
    }
}

/* An empty kernel of this unit: its attributes say which of the binary's codes the GPU runs. */
__global__ void dhk_probe_kernel() {}

int dhk_code_arch(cudaError_t *err)
{
    cudaFuncAttributes fa;
    const cudaError_t e = cudaFuncGetAttributes(&fa, dhk_probe_kernel);
    if (err) *err = e;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();   /* not sticky: clear it */
        return -1;
    }
    return fa.ptxVersion;
}

const char *dhk_built_archs(void)
{
#ifdef DHK_CUDA_ARCHS
    return DHK_CUDA_ARCHS;
#else
    return "?";
#endif
}

void dhk_cublas_check(cublasStatus_t st, const char *what, const char *file, int line)
{
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "%s: %s:%d: %s failed: cuBLAS status %d\n", program_invocation_short_name, file, line, what,
                (int)st);
        exit(1);
    }
}
