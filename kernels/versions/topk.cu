/* topk.cu: the selection of the DSA indexer, the k largest scores of each request's context
 * (k = 2048 of ~100K), as ascending row indices with ties at the threshold going to the lower
 * row: the rule of the CPU reference kref_topk. Scores must be finite.
 *
 * Versions (versions 5 and 6 are compiled in the library, kernels/lib/topk.cu, 6 behind
 * dhk_topk_launch; one block of 1024 threads per request; 2-6 keep a request's candidates, 64 KB of
 * keys and 64 KB of rows, and its output bitmaps in 180 KB of shared memory):
 *   1  a radix select of the k-th largest score in 4 passes of 8 bits over the request's
 *      scores in global memory (a 256-bin shared histogram, one plain atomic per score), then
 *      an in-order compaction with one block scan per 1024 scores: 6 dependent passes, one
 *      load in flight per thread, and the histogram's atomics serialised where the scores
 *      share their high bits (indexer scores do: one sign, a few exponents).
 *   2  the threshold from a 12-bit histogram in one pass, each warp's equal digits counted by
 *      one atomic (match.any); the scores of the threshold's bin are then gathered into shared
 *      memory (up to TK2_CAND of them; a larger bin is refined by another pass over global
 *      memory first), where two 10-bit rounds finish the select. The output comes in row order
 *      from two bitmaps (above the threshold, equal to it) that warp ballots build, with two
 *      block scans per TK2_SEG scores. 3 passes over the scores when the bin fits, each with
 *      8 loads in flight per thread.
 *   3  = 2 with one plain atomic per score in the histograms (what the aggregation saves).
 *   4  a lower bound L of the threshold first: each thread keeps its 4 largest scores (a subset
 *      of the context, so the k-th largest of those 4096 is at most the whole's), then every
 *      score >= L goes with its row into shared memory in one pass; when they fit (TK2_CAND),
 *      the select and the bitmaps work from them alone: 2 passes over the scores.
 *   5  = 4 with L guessed from a sample (1024 runs of 8 scores spread over the context) so that
 *      ~1.25 k + 512 scores lie above it, checked by the count (fewer than k, or more than
 *      TK2_CAND, fall back to version 3's passes): 1 pass over the scores and a sample. The
 *      candidates go in with one shared atomic per thread that holds any (version 4: a warp
 *      vote per score). Version 4 falls back the same way when k > 4096 or too many tie.
 *   6  = 5 with the sample's rank also bounded by its noise (kref_topk_sample_rank): at long
 *      contexts few sampled scores lie above version 5's guess, and fewer than k scores of the
 *      context lie above it in ~1-2 % of requests at 1M (2 % at k 2048, 1 % at 512; 0.1-0.3 %
 *      at 500K): such a block takes the radix passes, 3-6x longer, and a wave of blocks waits
 *      for it. Version 6 keeps that below ~1e-6 per request by taking more candidates (e.g.
 *      ~5,600 instead of ~3,100 at 1M, k 2048); identical to 5 where 5's guess is safe (to
 *      ~200K at k 2048). */
#include "kernels/bench.cuh"
#include "kernels/lib/block_scan.cuh"
#include "kernels/lib/topk2.cuh"   // defines: topk2_kernel (versions 2-4 here; 5, 6 in the library), score_key, TK_*
#include "kernels/kref.h"

#include <string.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

__global__ void __launch_bounds__(TK_THREADS) topk_kernel(const float *__restrict__ scores, int ctx, int k,
                                                          int32_t *__restrict__ out)
{
    __shared__ uint32_t hist[256];
    __shared__ int s_digit, s_need, s_gt;
    const int b = blockIdx.x, tid = threadIdx.x;
    const float *sc = scores + (size_t)b * ctx;
    /* Rank (1-based, from the smallest) of the k-th largest key. */
    int need = ctx - k + 1;
    uint32_t prefix = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        uint32_t hi_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
        for (int i = tid; i < ctx; i += blockDim.x) {
            uint32_t key = score_key(sc[i]);
            if ((key & hi_mask) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1u);
        }
        __syncthreads();
        radix_select_digit(hist, need, &s_digit, &s_need);
        prefix |= (uint32_t)s_digit << shift;
        need = s_need;
        __syncthreads();
    }
    const uint32_t T = prefix;
    if (tid == 0) s_gt = 0;
    __syncthreads();
    int my_gt = 0;
    for (int i = tid; i < ctx; i += blockDim.x) my_gt += score_key(sc[i]) > T;
    atomicAdd(&s_gt, my_gt);
    __syncthreads();
    const int take_eq = k - s_gt;
    int out_run = 0, eq_run = 0;
    for (int c0 = 0; c0 < ctx; c0 += blockDim.x) {
        int i = c0 + tid;
        uint32_t key = i < ctx ? score_key(sc[i]) : 0;
        int gt = i < ctx && key > T, eq = i < ctx && key == T;
        int total;
        int excl = block_excl_scan(gt | (eq << 16), &total);
        int gt_before = excl & 0xffff, eq_before = excl >> 16;
        int rem = max(0, take_eq - eq_run);
        if (gt || (eq && eq_before < rem)) out[(size_t)b * k + out_run + gt_before + min(eq_before, rem)] = i;
        out_run += (total & 0xffff) + min(total >> 16, rem);
        eq_run += total >> 16;
    }
}

size_t topk_smem_need(int version)
{
    return version == 1 ? 0 : tk2_smem_bytes;
}

/* Launches top-k version 1-6 for batch requests of ctx scores each (1 <= k <= ctx). */
void topk_launch(int version, const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t st)
{
    static bool attr_done = false;
    /* Only versions 2-4 ask for their shared memory here (version 1 needs none: it runs on a GPU
     * without 180 KB per block, where kernels/karch.c refuses the others). */
    if (!attr_done && version >= 2 && version <= 4) {
        cudaCheck(cudaFuncSetAttribute(topk2_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tk2_smem_bytes));
        cudaCheck(cudaFuncSetAttribute(topk2_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tk2_smem_bytes));
        cudaCheck(cudaFuncSetAttribute(topk2_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tk2_smem_bytes));
        attr_done = true;
    }
    if (version == 1) topk_kernel<<<batch, TK_THREADS, 0, st>>>(scores, ctx, k, out);
    else if (version == 2) topk2_kernel<2><<<batch, TK_THREADS, tk2_smem_bytes, st>>>(scores, ctx, k, out, 0);
    else if (version == 3) topk2_kernel<3><<<batch, TK_THREADS, tk2_smem_bytes, st>>>(scores, ctx, k, out, 0);
    else if (version == 4) topk2_kernel<4><<<batch, TK_THREADS, tk2_smem_bytes, st>>>(scores, ctx, k, out, 0);
    else if (version == 5) {
        dhk__topk5_launch(scores, batch, ctx, k, out, st);   /* compiled beside version 6 (kernels/lib/topk.cu) */
        return;
    } else {
        dhk_topk_launch(scores, batch, ctx, k, out, st);     /* version 6: the library's */
        return;
    }
    CUDA_LAUNCH_CHECK();
}

/* The top-k blocks (one per request or verified query) that run at once: SMs x resident blocks
 * per SM. A launch of more runs in waves (analysis/fitcost.h's topk form); dhbench records it
 * as the top-k lines' sms. Call after topk_launch has set the kernels' shared-memory limit. */
long long topk_concurrent_blocks(int version, const cudaDeviceProp &prop)
{
    int per_sm = 0;
    if (version == 1)
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, topk_kernel, TK_THREADS, 0));
    else
        per_sm = dhk__topk2_blocks_per_sm();   /* versions 2-6: one kernel, one shared-memory size */
    return (long long)per_sm * prop.multiProcessorCount;
}

static const char *const topk_dists[] = {"normal", "narrow", "uniform", "ties", "binary", "sorted"};

int bench_topk_check(const bench_params &p)
{
    const long long version = p.num("version", 5), batch = p.num("batch", 16), ctx = p.num("ctx", 100000),
                    k = p.num("k", 2048);
    if (version < 1 || version > TK_MAX_VERSION) {
        fprintf(stderr, "dhbench: topk: version %lld is not 1 to %d\n", version, TK_MAX_VERSION);
        return -1;
    }
    if (batch < 1 || batch > 65535 || ctx < 1 || ctx > (1 << 30) || k < 1 || k > ctx) {
        fprintf(stderr, "dhbench: topk: batch=%lld ctx=%lld k=%lld: need 1 <= batch <= 65535, 1 <= k <= ctx <= 2^30\n",
                batch, ctx, k);
        return -1;
    }
    const std::string d = p.str("dist", "normal");
    for (const char *x : topk_dists)
        if (d == x) return 0;
    fprintf(stderr, "dhbench: topk: dist '%s' is not normal, narrow, uniform, ties, binary or sorted\n", d.c_str());
    return -1;
}

/* Scores of one distribution: normal 10 + N(0, 1) (positive and clustered, as indexer scores
 * are: most share sign and exponent); narrow 10 + N(0, 0.01) (every score in one bin of the
 * first digit: version 2's refinement over global memory); uniform in [-1, 1); ties from 16 levels (the threshold's
 * bin holds ~1/16 of the context and k ends inside a tie); binary from 2 levels (half the
 * context ties at the threshold: version 4's bound admits too many and it falls back); sorted ascending (the k largest at
 * the end). */
static float topk_score(const std::string &dist, bench_rng &rng, int i)
{
    if (dist == "normal") return 10.f + rng.normal();
    if (dist == "narrow") return 10.f + 0.01f * rng.normal();
    if (dist == "uniform") return (float)(2.0 * rng.uniform() - 1.0);
    if (dist == "ties") return (float)rng.below(16);
    if (dist == "binary") return (float)rng.below(2);
    return 1.f + (float)i * 1e-3f;
}

int bench_topk(bench_env *env, const bench_params &p)
{
    if (bench_topk_check(p)) return -1;
    const int version = (int)p.num("version", 5), batch = (int)p.num("batch", 16), ctx = (int)p.num("ctx", 100000),
              k = (int)p.num("k", 2048);
    const std::string dist = p.str("dist", "normal");
    bench_rng rng(0x70b4 ^ (uint64_t)ctx << 8 ^ (uint64_t)dist.size() << 40 ^ (uint64_t)(unsigned char)dist[0] << 48);
    const size_t n = (size_t)batch * ctx;
    std::vector<float> sc_h(n);
    for (size_t i = 0; i < n; i++) sc_h[i] = topk_score(dist, rng, (int)(i % (size_t)ctx));
    float *sc_d;
    int32_t *top_d;
    cudaCheck(cudaMalloc(&sc_d, n * 4));
    cudaCheck(cudaMalloc(&top_d, (size_t)batch * k * 4));
    cudaCheck(cudaMemcpy(sc_d, sc_h.data(), n * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(top_d, 0xff, (size_t)batch * k * 4));
    topk_launch(version, sc_d, batch, ctx, k, top_d, 0);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<int32_t> top_h((size_t)batch * k);
    cudaCheck(cudaMemcpy(top_h.data(), top_d, top_h.size() * 4, cudaMemcpyDeviceToHost));
    /* Every request against the reference, on the host's cores (a sort of each context: the
     * scaling grid's 264 x 1M scores would take minutes on one); the first differing request
     * is reported. */
    std::atomic<int> next(0), first_bad(batch);
    auto check = [&] {
        std::vector<int32_t> ref((size_t)k);
        for (int b; (b = next.fetch_add(1)) < batch && b < first_bad.load();) {
            kref_topk(&sc_h[(size_t)b * ctx], ctx, k, ref.data());
            if (memcmp(ref.data(), &top_h[(size_t)b * k], 4 * (size_t)k)) {
                int cur = first_bad.load();
                while (b < cur && !first_bad.compare_exchange_weak(cur, b)) { }
            }
        }
    };
    const int nthreads = (int)std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()), (unsigned)batch);
    std::vector<std::thread> pool;
    for (int t = 1; t < nthreads; t++) pool.emplace_back(check);
    check();
    for (auto &t : pool) t.join();
    const int ok = first_bad.load() == batch;
    if (!ok)
        fprintf(stderr, "dhbench: topk v%d %s: request %d differs from the reference\n", version, dist.c_str(),
                first_bad.load());
    bench_record r;
    r.kernel = "topk";
    r.version = std::to_string(version);
    r.dtype = "fp32";
    r.pattern = dist;
    r.batch = batch; r.ctx = ctx; r.k = k;
    r.sms = topk_concurrent_blocks(version, env->prop);
    r.bytes = (double)n * 4;   /* the scores read once: the floor, whatever passes a version makes */
    r.ceiling_name = "hbm_d2d";
    r.ceiling_value = env->hbm_gbps;
    r.checked = ok;
    if (ok) bench_take(r, bench_time(env, [&](int) { topk_launch(version, sc_d, batch, ctx, k, top_d, 0); }));
    bench_emit(env, r);
    cudaCheck(cudaFree(sc_d));
    cudaCheck(cudaFree(top_d));
    return ok ? 0 : -1;
}
