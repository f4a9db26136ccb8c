/* gemm.cu: the dense GEMMs of a decode step through cuBLASLt (kernels/dhk.h: dhk_gemm_*), the
 * plans bin/dhbench times (kernels/versions/gemm.cu, version 1) and bin/dhreplay runs. One
 * cuBLASLt handle for the process, created on the first plan. */
#include "kernels/dhk.h"

static cublasLtHandle_t g_lt;

/* Plans D (n x m column-major = Y row-major) = W^T(op T on k x n) . X (k x m). Returns -1 when
 * cuBLASLt has no algorithm for the shape. */
int dhk_gemm_make(dhk_gemm &g, bool fp8, int m, int n, int kdim, void *ws, size_t ws_bytes)
{
    if (!g_lt) cublasCheck(cublasLtCreate(&g_lt));
    g.lt = g_lt;
    g.ws = ws;
    g.ws_bytes = ws_bytes;
    cudaDataType_t in_t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    cublasCheck(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    cublasCheck(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasCheck(cublasLtMatrixLayoutCreate(&g.la, in_t, kdim, n, kdim));
    cublasCheck(cublasLtMatrixLayoutCreate(&g.lb, in_t, kdim, m, kdim));
    cublasCheck(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g.lt, g.op, g.la, g.lb, g.lc, g.lc, pref, 1, &res, &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) return -1;
    g.algo = res.algo;
    return 0;
}

void dhk_gemm_release(dhk_gemm &g)
{
    cublasCheck(cublasLtMatrixLayoutDestroy(g.la));
    cublasCheck(cublasLtMatrixLayoutDestroy(g.lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(g.lc));
    cublasCheck(cublasLtMatmulDescDestroy(g.op));
}

void dhk_gemm_run(dhk_gemm &g, const void *w, const void *x, void *y)
{
    const float one = 1.f, zero = 0.f;
    cublasCheck(cublasLtMatmul(g.lt, g.op, &one, w, g.la, x, g.lb, &zero, y, g.lc, y, g.lc, &g.algo, g.ws, g.ws_bytes, 0));
}
