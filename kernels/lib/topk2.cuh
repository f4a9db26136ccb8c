/* topk2.cuh: the top-k kernel that top-k versions 2-6 instantiate (kernels/versions/topk.cu
 * describes each), its helpers and sizes; the library's top-k (kernels/lib/topk.cu,
 * dhk_topk_launch) is its version-6 instance. A template in a header so that both translation
 * units instantiate the same device code; version 1's kernel uses score_key and TK_THREADS. */
#ifndef KERNELS_TOPK2_CUH
#define KERNELS_TOPK2_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/lib/block_scan.cuh"   // defines: block_excl_scan, radix_select_digit

#define TK_THREADS 1024
#define TK2_UNROLL 8          /* loads in flight per thread in the passes over global memory */
#define TK2_BINS 4096         /* the first digit's 12 bits; the later ones have 10 */
#define TK2_CAND 16384        /* candidate keys (and, version 4, rows) kept in shared memory */
#define TK4_M 4               /* version 4: keys each thread keeps for the lower bound */
#define TK5_SAMPLE 8192       /* versions 5, 6: the sample, a run of 8 scores per thread */
#define TK6_Z 4.3             /* version 6: the guess's margin in standard deviations of the sample */
static_assert(TK5_SAMPLE == 8 * TK_THREADS, "version 5 samples 8 scores per thread");
#define TK2_SEG 131072        /* scores per output segment: two bitmaps of TK2_SEG bits */

static const size_t tk2_smem_bytes = (TK2_BINS + 2 * TK2_CAND + 2 * (TK2_SEG / 32)) * sizeof(uint32_t);

/* Scores as unsigned keys in the same order (-0 and +0 one value). */
__device__ __forceinline__ uint32_t score_key(float x)
{
    uint32_t u = __float_as_uint(x == 0.f ? 0.f : x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* One count into hist[digit] for each lane with take set. AGG: the lanes of a warp with the same
 * digit are counted by one atomic. Every lane of the warp must call it. */
template <bool AGG>
__device__ __forceinline__ void tk2_hist_add(uint32_t *hist, uint32_t digit, bool take)
{
    if (AGG) {
        const unsigned peers = __match_any_sync(0xffffffffu, take ? digit : 0xffffffffu);
        if (take && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[digit], (uint32_t)__popc(peers));
    } else if (take) {
        atomicAdd(&hist[digit], 1u);
    }
}

/* The bin of hist[0, nbins) that holds rank need (1-based, from the smallest): res[0] the bin,
 * res[1] the rank within it, res[2] its count (res in shared memory). nbins is a multiple of
 * the block's 1024 threads, need lies in [1, the histogram's total]. Every thread must call it;
 * it ends with a barrier. */
__device__ __forceinline__ void tk2_select(const uint32_t *hist, int nbins, int need, int *res)
{
    const int per = nbins / TK_THREADS, b0 = threadIdx.x * per;
    int sum = 0;
    for (int j = 0; j < per; j++) sum += (int)hist[b0 + j];
    int total;
    const int excl = block_excl_scan(sum, &total);
    if (excl < need && need <= excl + sum) {
        int run = excl;
        for (int j = 0; j < per; j++) {
            const int c = (int)hist[b0 + j];
            if (need <= run + c) {
                res[0] = b0 + j; res[1] = need - run; res[2] = c;
                break;
            }
            run += c;
        }
    }
    __syncthreads();
}

/* The key of rank need (1-based, from the smallest) among keys[0, n) in shared memory, by
 * the same three digits (12, 10, 10 bits); hist holds TK2_BINS counts, res 3 ints. Every
 * thread must call it; it ends with a barrier. */
template <bool AGG>
__device__ uint32_t tk_kth_smem(const uint32_t *keys, int n, int need, uint32_t *hist, int *res)
{
    uint32_t prefix = 0;
    int hi = 32;
    for (int r = 0; r < 3; r++) {
        const int width = r == 0 ? 12 : 10, shift = hi - width, nb = 1 << width;
        const uint32_t fixed = hi == 32 ? 0u : ~0u << hi, dmask = (uint32_t)nb - 1;
        for (int i = threadIdx.x; i < nb; i += TK_THREADS) hist[i] = 0;
        __syncthreads();
        for (int c0 = 0; c0 < n; c0 += TK_THREADS) {
            const int c = c0 + threadIdx.x;
            const uint32_t key = c < n ? keys[c] : 0u;
            tk2_hist_add<AGG>(hist, (key >> shift) & dmask, c < n && (key & fixed) == prefix);
        }
        __syncthreads();
        tk2_select(hist, nb, need, res);
        prefix |= (uint32_t)res[0] << shift;
        need = res[1];
        hi = shift;
        __syncthreads();
    }
    return prefix;
}

/* Calls f(i, key, valid) for every score of one request: the block's threads stride over it
 * with TK2_UNROLL loads in flight each, 16-byte loads (4 scores) when ctx is a multiple of 4.
 * Every lane of a warp makes the same calls (valid false past the end), so f may vote. */
template <class F>
__device__ __forceinline__ void tk_for_scores(const float *__restrict__ sc, int ctx, F f)
{
    const int tid = threadIdx.x;
    if ((ctx & 3) == 0) {
        const float4 *s4 = (const float4 *)sc;
        const int n4 = ctx >> 2;
        for (int j0 = 0; j0 < n4; j0 += TK_THREADS * TK2_UNROLL) {
            float4 v[TK2_UNROLL];
#pragma unroll
            for (int u = 0; u < TK2_UNROLL; u++) {
                const int j = j0 + u * TK_THREADS + tid;
                v[u] = j < n4 ? s4[j] : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int u = 0; u < TK2_UNROLL; u++) {
                const int j = j0 + u * TK_THREADS + tid;
                const bool ok = j < n4;
                f(4 * j, score_key(v[u].x), ok);
                f(4 * j + 1, score_key(v[u].y), ok);
                f(4 * j + 2, score_key(v[u].z), ok);
                f(4 * j + 3, score_key(v[u].w), ok);
            }
        }
    } else {
        for (int i0 = 0; i0 < ctx; i0 += TK_THREADS * TK2_UNROLL) {
            float v[TK2_UNROLL];
#pragma unroll
            for (int u = 0; u < TK2_UNROLL; u++) {
                const int i = i0 + u * TK_THREADS + tid;
                v[u] = i < ctx ? sc[i] : 0.f;
            }
#pragma unroll
            for (int u = 0; u < TK2_UNROLL; u++) {
                const int i = i0 + u * TK_THREADS + tid;
                f(i, score_key(v[u]), i < ctx);
            }
        }
    }
}

/* The score of a key (score_key's inverse; -0 comes back as +0). */
__device__ __forceinline__ float key_score(uint32_t key)
{
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

/* Calls f(i, v) for the scores i .. i + 3 of one request (v, the ones past the end -inf), the
 * block's threads striding over them with TK2_UNROLL loads in flight each (one 16-byte load
 * when ctx is a multiple of 4). Every lane of a warp makes the same calls, so f may vote. */
template <class F>
__device__ __forceinline__ void tk_for_quads(const float *__restrict__ sc, int ctx, F f)
{
    const int tid = threadIdx.x, nq = (ctx + 3) >> 2;
    const bool vec = (ctx & 3) == 0;
    for (int j0 = 0; j0 < nq; j0 += TK_THREADS * TK2_UNROLL) {
        float4 v[TK2_UNROLL];
#pragma unroll
        for (int u = 0; u < TK2_UNROLL; u++) {
            const int j = j0 + u * TK_THREADS + tid, i = 4 * j;
            if (vec) {
                v[u] = j < nq ? ((const float4 *)sc)[j] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
            } else {
                v[u].x = i < ctx ? sc[i] : -INFINITY;
                v[u].y = i + 1 < ctx ? sc[i + 1] : -INFINITY;
                v[u].z = i + 2 < ctx ? sc[i + 2] : -INFINITY;
                v[u].w = i + 3 < ctx ? sc[i + 3] : -INFINITY;
            }
        }
#pragma unroll
        for (int u = 0; u < TK2_UNROLL; u++) f(4 * (j0 + u * TK_THREADS + tid), v[u]);
    }
}

/* Appends (key, row) for each lane with take set to the shared list at *count (one atomic per
 * warp); entries past cap are counted, not written. Every lane of the warp must call it. */
__device__ __forceinline__ void tk_append(uint32_t *keys, int32_t *rows, int *count, int cap, uint32_t key, int row,
                                          bool take)
{
    const int lane = threadIdx.x & 31;
    const unsigned bal = __ballot_sync(0xffffffffu, take);
    int base = 0;
    if (lane == 0 && bal) base = atomicAdd(count, __popc(bal));
    base = __shfl_sync(0xffffffffu, base, 0);
    const int at = base + __popc(bal & ((1u << lane) - 1));
    if (take && at < cap) {
        keys[at] = key;
        if (rows) rows[at] = row;
    }
}

/* Versions 2-6. V = 2: warp-aggregated histogram counts; 4-6: a lower bound first (below; 5 and 6 guess it
 * from a sample at rank sample_rank, kref_topk_sample_rank). */
template <int V>
__global__ void __launch_bounds__(TK_THREADS) topk2_kernel(const float *__restrict__ scores, int ctx, int k,
                                                           int32_t *__restrict__ out, long long sample_rank)
{
    constexpr bool AGG = V == 2;
    extern __shared__ uint32_t tk_smem[];
    uint32_t *hist = tk_smem;
    uint32_t *cand = hist + TK2_BINS;
    int32_t *crow = (int32_t *)(cand + TK2_CAND);
    uint32_t *bm_gt = (uint32_t *)(crow + TK2_CAND), *bm_eq = bm_gt + TK2_SEG / 32;
    __shared__ int s_res[4];   /* 16 bytes: its vector loads overlap nothing else */
    __shared__ int s_ncand;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float *sc = scores + (size_t)blockIdx.x * ctx;
    if (tid == 0) s_ncand = 0;
    __syncthreads();

    /* need is the rank (1-based, from the smallest) of the k-th largest key among the keys that
     * match the digits found so far, cnt how many match; the candidates in shared memory, when
     * in_smem, hold every key that can still be the threshold. */
    int need = ctx - k + 1, cnt = ctx, ncand = 0;
    bool in_smem = false, have_rows = false;
    if (V == 4 && k <= TK_THREADS * TK4_M) {
        /* A lower bound L of the k-th largest: each thread's TK4_M largest keys are a subset of
         * the scores, so their k-th largest is at most the whole's; then every score >= L
         * (~k of them when each thread's share of the top k is under TK4_M) into shared memory. */
        /* Scores compared as floats here (the key order for finite scores), 4 at a time. */
        float t[TK4_M];
#pragma unroll
        for (int j = 0; j < TK4_M; j++) t[j] = -INFINITY;
        auto insert = [&](float x) {
            if (x > t[TK4_M - 1]) {
                t[TK4_M - 1] = x;
#pragma unroll
                for (int j = TK4_M - 1; j > 0; j--)
                    if (t[j] > t[j - 1]) { const float y = t[j]; t[j] = t[j - 1]; t[j - 1] = y; }
            }
        };
        tk_for_quads(sc, ctx, [&](int, float4 v) {
            if (fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)) > t[TK4_M - 1]) {
                insert(v.x); insert(v.y); insert(v.z); insert(v.w);
            }
        });
#pragma unroll
        for (int j = 0; j < TK4_M; j++) cand[tid * TK4_M + j] = score_key(t[j]);
        __syncthreads();
        const uint32_t L = tk_kth_smem<AGG>(cand, TK_THREADS * TK4_M, TK_THREADS * TK4_M - k + 1, hist, s_res);
        const float Lf = key_score(L);
        tk_for_quads(sc, ctx, [&](int i, float4 v) {
            if (!__any_sync(0xffffffffu, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)) >= Lf)) return;
            tk_append(cand, crow, &s_ncand, TK2_CAND, score_key(v.x), i, i < ctx && v.x >= Lf);
            tk_append(cand, crow, &s_ncand, TK2_CAND, score_key(v.y), i + 1, i + 1 < ctx && v.y >= Lf);
            tk_append(cand, crow, &s_ncand, TK2_CAND, score_key(v.z), i + 2, i + 2 < ctx && v.z >= Lf);
            tk_append(cand, crow, &s_ncand, TK2_CAND, score_key(v.w), i + 3, i + 3 < ctx && v.w >= Lf);
        });
    }
    if (V >= 5) {
        /* A guess of L from a sample, checked after: the key ranked r-th from the top among
         * 1024 runs of 8 scores spread evenly over the context, r = sample_rank
         * (kref_topk_sample_rank: version 5 aims at ~1.25 k + 512 scores above it, version 6
         * also keeps fewer than k above it rare at long contexts). Too few (< k) or too many
         * (> TK2_CAND) scores >= L fall back to the radix passes below, so the guess costs
         * speed, never the result. A context that fits the candidates whole is taken whole
         * (L = -inf). */
        const long long r = sample_rank;
        float Lf = -INFINITY;
        if (ctx > TK2_CAND && r <= TK5_SAMPLE) {
            /* Thread t takes the run of 8 at t / 1023 of the way (one 32-byte sector). */
            const int i = (int)((long long)(ctx - 8) * tid / (TK_THREADS - 1)) & ~3;
            float4 a, b;
            if ((ctx & 3) == 0) {
                a = *(const float4 *)(sc + i);
                b = *(const float4 *)(sc + i + 4);
            } else {
                a = make_float4(sc[i], sc[i + 1], sc[i + 2], sc[i + 3]);
                b = make_float4(sc[i + 4], sc[i + 5], sc[i + 6], sc[i + 7]);
            }
            uint32_t *c = cand + 8 * tid;
            c[0] = score_key(a.x); c[1] = score_key(a.y); c[2] = score_key(a.z); c[3] = score_key(a.w);
            c[4] = score_key(b.x); c[5] = score_key(b.y); c[6] = score_key(b.z); c[7] = score_key(b.w);
            __syncthreads();
            Lf = key_score(tk_kth_smem<false>(cand, TK5_SAMPLE, TK5_SAMPLE - (int)r + 1, hist, s_res));
        }
        /* Every score >= L with its row: one shared atomic per thread that holds any. */
        tk_for_quads(sc, ctx, [&](int i, float4 v) {
            const bool a = v.x >= Lf && i < ctx, b = v.y >= Lf && i + 1 < ctx, c = v.z >= Lf && i + 2 < ctx,
                       d = v.w >= Lf && i + 3 < ctx;
            const int n = a + b + c + d;
            if (n) {
                int at = atomicAdd(&s_ncand, n);
                auto put = [&](bool q, float x, int row) {
                    if (q) {
                        if (at < TK2_CAND) { cand[at] = score_key(x); crow[at] = row; }
                        at++;
                    }
                };
                put(a, v.x, i); put(b, v.y, i + 1); put(c, v.z, i + 2); put(d, v.w, i + 3);
            }
        });
    }
    if (V >= 4) {
        __syncthreads();
        ncand = s_ncand;
        if (ncand >= k && ncand <= TK2_CAND) {
            in_smem = have_rows = true;
            need = ncand - k + 1;
            cnt = ncand;
        } else {
            ncand = 0;
        }
        __syncthreads();
        if (tid == 0) s_ncand = 0;
    }

    /* The threshold T, the k-th largest key: three digits (12, 10, 10 bits) from the top. */
    uint32_t prefix = 0;
    int hi = 32;                        /* bits hi..31 are fixed in prefix */
    for (int r = 0; r < 3; r++) {
        const int width = r == 0 ? 12 : 10, shift = hi - width, nb = 1 << width;
        const uint32_t fixed = hi == 32 ? 0u : ~0u << hi, dmask = (uint32_t)nb - 1;
        for (int i = tid; i < nb; i += TK_THREADS) hist[i] = 0;
        __syncthreads();
        if (in_smem) {
            for (int c0 = 0; c0 < ncand; c0 += TK_THREADS) {   /* bound uniform over the warp */
                const int c = c0 + tid;
                const uint32_t key = c < ncand ? cand[c] : 0u;
                tk2_hist_add<AGG>(hist, (key >> shift) & dmask, c < ncand && (key & fixed) == prefix);
            }
        } else {
            tk_for_scores(sc, ctx, [&](int, uint32_t key, bool ok) {
                tk2_hist_add<AGG>(hist, (key >> shift) & dmask, ok && (key & fixed) == prefix);
            });
        }
        __syncthreads();
        tk2_select(hist, nb, need, s_res);
        prefix |= (uint32_t)s_res[0] << shift;
        need = s_res[1];
        cnt = s_res[2];
        hi = shift;
        if (!in_smem && hi > 0 && cnt <= TK2_CAND) {
            /* Gather the bin's keys (their order does not matter: the output reads global). */
            const uint32_t fx = ~0u << hi;
            tk_for_scores(sc, ctx, [&](int, uint32_t key, bool ok) {
                tk_append(cand, nullptr, &s_ncand, TK2_CAND, key, 0, ok && (key & fx) == prefix);
            });
            __syncthreads();
            ncand = s_ncand;
            in_smem = true;
        }
        __syncthreads();   /* every thread has read s_res before the next round's select */
    }
    const uint32_t T = prefix;
    /* Of the cnt keys equal to T, the k-th largest has rank need: the cnt - need + 1 of them at
     * the lowest rows are selected, with every key above T. */
    const int take_eq = cnt - need + 1;

    /* Output in row order, one segment of TK2_SEG scores at a time, from two bitmaps: built by
     * warp ballots over the scores (warp w the words w, w + 32, ...), or from the candidates
     * when they hold every score >= T with its row; then each thread owns 4 consecutive words. */
    int32_t *o = out + (size_t)blockIdx.x * k;
    int out_run = 0, eq_run = 0;
    for (int s0 = 0; s0 < ctx; s0 += TK2_SEG) {
        const int n = min(TK2_SEG, ctx - s0), nw = (n + 31) / 32;
        if (have_rows) {
            for (int w = tid; w < nw; w += TK_THREADS) bm_gt[w] = bm_eq[w] = 0u;
            __syncthreads();
            for (int c = tid; c < ncand; c += TK_THREADS) {
                const int i = crow[c] - s0;
                const uint32_t key = cand[c];
                if (i >= 0 && i < n && key >= T) atomicOr(key > T ? &bm_gt[i >> 5] : &bm_eq[i >> 5], 1u << (i & 31));
            }
        } else {
            for (int w0 = warp; w0 < nw; w0 += 32 * TK2_UNROLL) {
                float v[TK2_UNROLL];
#pragma unroll
                for (int u = 0; u < TK2_UNROLL; u++) {
                    const int w = w0 + 32 * u, i = w * 32 + lane;
                    v[u] = w < nw && i < n ? sc[s0 + i] : 0.f;
                }
#pragma unroll
                for (int u = 0; u < TK2_UNROLL; u++) {
                    const int w = w0 + 32 * u, i = w * 32 + lane;
                    if (w >= nw) break;   /* uniform over the warp */
                    const uint32_t key = score_key(v[u]);
                    const unsigned gt = __ballot_sync(0xffffffffu, i < n && key > T);
                    const unsigned eq = __ballot_sync(0xffffffffu, i < n && key == T);
                    if (lane == 0) { bm_gt[w] = gt; bm_eq[w] = eq; }
                }
            }
        }
        __syncthreads();
        enum { PER = TK2_SEG / 32 / TK_THREADS };
        const int wb = tid * PER;
        uint32_t g[PER], e[PER];
        int ne = 0;
#pragma unroll
        for (int j = 0; j < PER; j++) {
            g[j] = wb + j < nw ? bm_gt[wb + j] : 0u;
            e[j] = wb + j < nw ? bm_eq[wb + j] : 0u;
            ne += __popc(e[j]);
        }
        int tot_eq, tot_sel;
        int eb = eq_run + block_excl_scan(ne, &tot_eq);   /* equal keys at lower rows */
        int ns = 0;
#pragma unroll
        for (int j = 0; j < PER; j++) {
            for (uint32_t x = e[j]; x && eb < take_eq; x &= x - 1, eb++) g[j] |= x & (0u - x);
            ns += __popc(g[j]);
        }
        eq_run += tot_eq;
        int at = out_run + block_excl_scan(ns, &tot_sel);
#pragma unroll
        for (int j = 0; j < PER; j++)
            for (uint32_t x = g[j]; x; x &= x - 1) o[at++] = s0 + (wb + j) * 32 + __ffs(x) - 1;
        out_run += tot_sel;
        __syncthreads();   /* the bitmaps are rewritten by the next segment */
    }
}

/* Inside the library (kernels/lib/topk.cu): version 5's launch, and the resident blocks per SM
 * of versions 2-6 (one kernel, one shared-memory size), for kernels/versions/topk.cu; callers
 * outside use dhk_topk_launch (kernels/dhk.h). */
void dhk__topk5_launch(const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t stream);
int dhk__topk2_blocks_per_sm(void);

#endif
