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

void dhk_cublas_check(cublasStatus_t st, const char *what, const char *file, int line)
{
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "%s: %s:%d: %s failed: cuBLAS status %d\n", program_invocation_short_name, file, line, what,
                (int)st);
        exit(1);
    }
}
