/* gemm.cu: the dense GEMMs of a decode step (projections and experts) through cuBLASLt, BF16
 * and FP8 (e4m3 x e4m3, fp32 accumulation, bf16 output), to calibrate the non-attention part of
 * a step. Y[m][n] = X[m][kdim] . W[n][kdim]^T, weights row-major as a Linear layer stores them
 * (cuBLASLt's "TN" layout, the one its FP8 path requires).
 *
 * Version 1: cuBLASLt's first heuristic algorithm, 32 MB workspace.
 * Check: 256 sampled outputs against float64 dot products of the same (rounded) inputs;
 * bf16 output rounding bounds the error near 4e-3. The CPU reference here is that sampled dot
 * product: a full reference GEMM would take minutes at these shapes. The plans are the
 * library's (kernels/lib/gemm.cu, dhk_gemm_*), which bin/dhreplay runs too. */
#include "kernels/bench.cuh"
#include "kernels/kref.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <string.h>

#include <algorithm>

/* Random inputs of the given type; host copies as floats for the sampled check. */
static void gemm_inputs(bool fp8, size_t n, bench_rng &rng, std::vector<uint8_t> &dev_bytes, std::vector<float> &vals)
{
    /* FP8: codes with exponents 5..8 (magnitudes 1/4 .. 3.75), no NaN; BF16: uniform in
     * (-1, 1). Drawn directly, so an 8192^2 operand takes well under a second. */
    dev_bytes.resize(n * (fp8 ? 1 : 2));
    vals.resize(n);
    float e4m3[256];
    for (int c = 0; c < 256; c++) e4m3[c] = kref_e4m3_to_f32((uint8_t)c);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = rng.next();
        if (fp8) {
            uint8_t c = (uint8_t)((x & 0x80) | ((5 + (x >> 8) % 4) << 3) | ((x >> 16) & 7));
            dev_bytes[i] = c;
            vals[i] = e4m3[c];
        } else {
            uint16_t h = kref_f32_to_bf16((float)((double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0));
            memcpy(&dev_bytes[2 * i], &h, 2);
            vals[i] = kref_bf16_to_f32(h);
        }
    }
}

/* Times one shape; returns -1 after a failed check. tflops_out gets the measured rate. */
static int gemm_measure(bench_env *env, bool fp8, int m, int n, int kdim, const std::string &name,
                        bool emit, double *tflops_out)
{
    bench_rng rng(0x6e77 ^ (uint64_t)m * 31 ^ (uint64_t)n * 7 ^ (uint64_t)kdim);
    std::vector<uint8_t> wb, xb;
    std::vector<float> wv, xv;
    gemm_inputs(fp8, (size_t)n * kdim, rng, wb, wv);
    gemm_inputs(fp8, (size_t)m * kdim, rng, xb, xv);
    /* Weights rotate over enough copies that the timed reads exceed L2 (small decode GEMMs read
     * their weights once per step, from HBM). */
    size_t wbytes = wb.size();
    int nsets = (int)std::min<size_t>(16, std::max<size_t>(1, 3 * (size_t)env->prop.l2CacheSize / wbytes + 1));
    void *w_d, *x_d, *y_d, *ws_d;
    size_t ws_bytes = 32u << 20;
    cudaCheck(cudaMalloc(&w_d, wbytes * nsets));
    cudaCheck(cudaMalloc(&x_d, xb.size()));
    cudaCheck(cudaMalloc(&y_d, (size_t)m * n * 2));
    cudaCheck(cudaMalloc(&ws_d, ws_bytes));
    for (int s = 0; s < nsets; s++)
        cudaCheck(cudaMemcpy((uint8_t *)w_d + wbytes * s, wb.data(), wbytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(x_d, xb.data(), xb.size(), cudaMemcpyHostToDevice));
    dhk_gemm g;
    int ok = 1;
    if (dhk_gemm_make(g, fp8, m, n, kdim, ws_d, ws_bytes)) {
        fprintf(stderr, "dhbench: gemm %s: cuBLASLt has no %s algorithm for m %d n %d k %d\n", name.c_str(),
                fp8 ? "fp8" : "bf16", m, n, kdim);
        ok = 0;
    }
    bench_timing t = {0, 0, 0, 0};
    if (ok) {
        cudaCheck(cudaMemset(y_d, 0xff, (size_t)m * n * 2));
        dhk_gemm_run(g, w_d, x_d, y_d);
        cudaCheck(cudaDeviceSynchronize());
        std::vector<uint16_t> y((size_t)m * n);
        cudaCheck(cudaMemcpy(y.data(), y_d, y.size() * 2, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int sidx = 0; sidx < 256; sidx++) {
            int i = (int)rng.below((uint32_t)m), j = (int)rng.below((uint32_t)n);
            double ref = 0;
            for (int kk = 0; kk < kdim; kk++) ref += (double)xv[(size_t)i * kdim + kk] * wv[(size_t)j * kdim + kk];
            double got = kref_bf16_to_f32(y[(size_t)i * n + j]);
            num += (got - ref) * (got - ref);
            den += ref * ref;
        }
        for (uint16_t v : y) if ((v & 0x7f80) == 0x7f80) { num = INFINITY; break; }
        double err = den > 0 ? sqrt(num / den) : INFINITY;
        if (!(err < 1e-2)) {
            fprintf(stderr, "dhbench: gemm %s %s: sampled relative error %.3g\n", name.c_str(), fp8 ? "fp8" : "bf16", err);
            ok = 0;
        }
    }
    if (ok) {
        /* The ceiling GEMM (not emitted) takes one launch per sample whatever --b2b says. */
        t = bench_time(env, [&](int rep) { dhk_gemm_run(g, (uint8_t *)w_d + wbytes * (rep % nsets), x_d, y_d); }, 3, emit ? 0 : 1);
        if (tflops_out) *tflops_out = 2.0 * m * n * kdim / (t.median_us * 1e-6) / 1e12;
    }
    if (emit) {
        bench_record r;
        r.kernel = "gemm";
        r.version = "1";
        r.dtype = fp8 ? "fp8" : "bf16";
        r.pattern = name;
        r.m = m; r.n = n; r.kdim = kdim;
        r.bytes = (double)wbytes + (double)xb.size() + (double)m * n * 2;
        r.flops = 2.0 * m * n * kdim;
        r.ceiling_name = fp8 ? "fp8_gemm_8192" : "bf16_gemm_8192";
        r.ceiling_value = fp8 ? env->fp8_tflops : env->bf16_tflops;
        r.checked = ok;
        if (ok) { bench_take(r, t); }
        bench_emit(env, r);
    }
    dhk_gemm_release(g);
    cudaCheck(cudaFree(w_d)); cudaCheck(cudaFree(x_d)); cudaCheck(cudaFree(y_d)); cudaCheck(cudaFree(ws_d));
    return ok ? 0 : -1;
}

int bench_gemm_ceiling(bench_env *env, bool fp8)
{
    int sz = env->quick ? 1024 : 8192;
    double bf = 0, f8 = 0;
    /* The ceiling's own check samples 256 dot products of 8192 terms: about 2M multiply-adds. */
    if (gemm_measure(env, false, sz, sz, sz, "ceiling", false, &bf)) return -1;
    if (fp8 && gemm_measure(env, true, sz, sz, sz, "ceiling", false, &f8)) return -1;
    if (!fp8) f8 = -1;   /* no FP8 GEMM on this GPU: the fp8 lines are skipped */
    env->bf16_tflops = bf;
    env->fp8_tflops = f8;
    return 0;
}

int bench_gemm(bench_env *env, const bench_params &p)
{
    const std::string dtype = p.str("dtype", "bf16");
    const int m = (int)p.num("m", 16), n = (int)p.num("n", 0), kdim = (int)p.num("kdim", 0);
    if (n <= 0 || kdim <= 0 || m <= 0 || (dtype != "bf16" && dtype != "fp8")) {
        fprintf(stderr, "dhbench: gemm: need m, n, kdim > 0 and dtype bf16 or fp8\n");
        return -1;
    }
    /* FP8 in cuBLASLt needs the leading dimensions to be multiples of 16. */
    if (dtype == "fp8" && (kdim % 16 || n % 16)) {
        fprintf(stderr, "dhbench: gemm: fp8 needs n and kdim multiples of 16\n");
        return -1;
    }
    return gemm_measure(env, dtype == "fp8", m, n, kdim, p.str("name", "gemm"), true, nullptr);
}
