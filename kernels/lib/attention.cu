/* attention.cu: the library's sparse decode attention (kernels/dhk.h: dhk_attention_launch),
 * attention versions 38, 28, 39 and 8 of kernels/versions/attention.cu (and 18, 22-27, 29-31, 37 by
 * name): the splits of the k rows chosen so that
 * one wave of blocks fills the SMs, the wgmma kernel (kernels/lib/attention_wgmma.cu, sm_90a)
 * writing fp16 partials with a log-sum-exp per head when there is more than one split, and
 * version 8's combine, which merges them with 8 splits' loads in flight per thread. This file
 * is built for sm_90 like the combine kernels of versions 1-7. CPU reference:
 * kref_attn_decode (kernels/kref.c), which bin/dhbench checks every version against. */
#include "kernels/dhk.h"
#include "kernels/kref.h"

#include <cuda_fp16.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>

/* One merged output piece: value dims 4c .. 4c+3 of the (query, head) whose split 0 partial
 * row is base, from the fp16 partials of its splits weighted by their log-sum-exp. Each thread
 * keeps 8 splits' loads in flight with no branch between them; an empty split (log-sum-exp
 * -inf) wrote zeros, so its weight 0 needs no branch either. */
__device__ __forceinline__ float4 attn8_merge4(const __half *__restrict__ part_o, const float *__restrict__ part_lse,
                                               size_t base, int splits, int heads, int c)
{
    constexpr int U = 8;
    float mx = -INFINITY;
#pragma unroll 8
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, part_lse[base + (size_t)s * heads]);
    float acc[4] = {0.f, 0.f, 0.f, 0.f}, den = 0.f;
    for (int s0 = 0; s0 < splits; s0 += U) {
        float lse[U];
        uint2 v[U];
#pragma unroll
        for (int j = 0; j < U; j++) {
            const bool in = s0 + j < splits;
            const size_t r = base + (size_t)(in ? s0 + j : s0) * heads;
            lse[j] = in ? part_lse[r] : -INFINITY;
            v[j] = *(const uint2 *)(part_o + r * AT_V + c * 4);
        }
#pragma unroll
        for (int j = 0; j < U; j++) {
            const float w = mx == -INFINITY || lse[j] == -INFINITY ? 0.f : exp2f(lse[j] - mx);
            const __half2 *h2 = (const __half2 *)&v[j];
            const float2 f0 = __half22float2(h2[0]), f1 = __half22float2(h2[1]);
            acc[0] += w * f0.x, acc[1] += w * f0.y, acc[2] += w * f1.x, acc[3] += w * f1.y;
            den += w;
        }
    }
    const float inv = den > 0 ? 1.f / den : 0.f;
    return make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
}

/* Version 8's merge of the fp16 partials: one thread per (query, head, 4 value dims), twice
 * version 4's threads, each with 8 splits' loads in flight (attn8_merge4). attn4_combine_kernel
 * walks the splits one dependent load after another: 19 us for a single query's 32 splits in
 * an ncu profile, longer than the attention itself. */
__global__ void attn8_combine_kernel(const __half *__restrict__ part_o, const float *__restrict__ part_lse, int nq,
                                     int splits, int heads, float *__restrict__ out)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)nq * heads * (AT_V / 4)) return;
    const int c = (int)(i % (AT_V / 4));
    const size_t qh = i / (AT_V / 4);
    const size_t base = (qh / heads) * splits * heads + qh % heads;
    *(float4 *)(out + qh * AT_V + c * 4) = attn8_merge4(part_o, part_lse, base, splits, heads, c);
}

void dhk_attention_combine(const void *part_o, const float *part_lse, int nq, int splits, int heads, float *out,
                           cudaStream_t stream)
{
    const size_t items = (size_t)nq * heads * (AT_V / 4);
    attn8_combine_kernel<<<(unsigned)((items + 127) / 128), 128, 0, stream>>>((const __half *)part_o, part_lse, nq,
                                                                             splits, heads, out);
    CUDA_LAUNCH_CHECK();
}

/* Version 30's combine: version 8's, launched with programmatic stream serialization after the
 * main kernel (which lets it launch once its last tiles' loads are issued, kernels/lib/attn30.cuh):
 * its blocks let the next kernel of the stream launch at once (that kernel's own wait holds it
 * until this grid is complete), then wait for the main kernel's partials. The wait and the trigger
 * exist from sm_90 on; this file is also built for earlier targets, where version 30 never runs. */
__global__ void attn30_combine_kernel(const __half *__restrict__ part_o, const float *__restrict__ part_lse, int nq,
                                      int splits, int heads, float *__restrict__ out)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)nq * heads * (AT_V / 4)) return;
    const int c = (int)(i % (AT_V / 4));
    const size_t qh = i / (AT_V / 4);
    const size_t base = (qh / heads) * splits * heads + qh % heads;
    *(float4 *)(out + qh * AT_V + c * 4) = attn8_merge4(part_o, part_lse, base, splits, heads, c);
}

/* Version 31's combine: version 30's with, up to 8 splits, every split's log-sum-exp and partial
 * loaded in one round trip (attn8_merge4 reads the log-sum-exps for their maximum first, then
 * the partials: two dependent trips through L2); more splits: attn8_merge4. */
__global__ void attn31_combine_kernel(const __half *__restrict__ part_o, const float *__restrict__ part_lse, int nq,
                                      int splits, int heads, float *__restrict__ out)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)nq * heads * (AT_V / 4)) return;
    const int c = (int)(i % (AT_V / 4));
    const size_t qh = i / (AT_V / 4);
    const size_t base = (qh / heads) * splits * heads + qh % heads;
    if (splits > 8) {
        *(float4 *)(out + qh * AT_V + c * 4) = attn8_merge4(part_o, part_lse, base, splits, heads, c);
        return;
    }
    float lse[8], mx = -INFINITY;
    uint2 v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const bool in = j < splits;
        const size_t r = base + (size_t)(in ? j : 0) * heads;
        lse[j] = in ? part_lse[r] : -INFINITY;
        v[j] = *(const uint2 *)(part_o + r * AT_V + c * 4);
    }
#pragma unroll
    for (int j = 0; j < 8; j++) mx = fmaxf(mx, lse[j]);
    float acc[4] = {0.f, 0.f, 0.f, 0.f}, den = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float w = mx == -INFINITY || lse[j] == -INFINITY ? 0.f : exp2f(lse[j] - mx);
        const __half2 *h2 = (const __half2 *)&v[j];
        const float2 f0 = __half22float2(h2[0]), f1 = __half22float2(h2[1]);
        acc[0] += w * f0.x, acc[1] += w * f0.y, acc[2] += w * f1.x, acc[3] += w * f1.y;
        den += w;
    }
    const float inv = den > 0 ? 1.f / den : 0.f;
    *(float4 *)(out + qh * AT_V + c * 4) = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
}

void dhk__attn30_combine(const void *part_o, const float *part_lse, int nq, int splits, int heads, float *out,
                         cudaStream_t stream, int version)
{
    const size_t items = (size_t)nq * heads * (AT_V / 4);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)((items + 127) / 128));
    cfg.blockDim = dim3(128);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaCheck(cudaLaunchKernelEx(&cfg, version == 31 ? attn31_combine_kernel : attn30_combine_kernel, (const __half *)part_o,
                                 part_lse, nq, splits, heads, out));
    CUDA_LAUNCH_CHECK();
}

void dhk_attn_scratch_alloc(dhk_attn_scratch &sc, size_t max_q_heads)
{
    /* At most 64 splits per (query, head): the launches cap them there. */
    sc.cap_lse = max_q_heads * 64;
    sc.cap_o = sc.cap_lse * AT_V;
    cudaCheck(cudaMalloc(&sc.part_o, sc.cap_o * sizeof(float)));
    cudaCheck(cudaMalloc(&sc.part_lse, sc.cap_lse * sizeof(float)));
    const size_t groups = (max_q_heads + AT_H - 1) / AT_H;
    cudaCheck(cudaMalloc(&sc.merge_cnt, 2 * groups * sizeof(unsigned)));
    cudaCheck(cudaMemset(sc.merge_cnt, 0, 2 * groups * sizeof(unsigned)));
}

void dhk_attn_scratch_free(dhk_attn_scratch &sc)
{
    cudaCheck(cudaFree(sc.part_o));
    cudaCheck(cudaFree(sc.part_lse));
    cudaCheck(cudaFree(sc.merge_cnt));
}

/* Versions 22-26 apply to FP8 rows with an even number of 64-head groups (a query's two 64-head
 * blocks in one cluster). */
static bool attn22_applies(const attn_args &a) { return a.format == KREF_ROW_FP8 && (a.heads / AT_H) % 2 == 0; }

/* At most one wave (one block per SM), so the splits fill the SMs once, in whole 64-row tiles;
 * fp16 partials and the combine only when there is more than one split (the same choice as
 * kernels/versions/attention.cu makes for versions 4-10). The main kernel, as measured on the
 * H200 back to back (kernels/NOTES.md, "Versions 18-20 and version 17 without its remote stores:
 * outcome", "Versions 21 and 22: outcome"): version 23 where it applies (FP8 rows at 128 heads: 1.04-1.10x over
 * version 22 on hot rows, "Versions 23-25: outcome"; 22 was 1.06-1.19x over version 8), with a
 * host pool too (14.2 % host rows: 2.6-3.1x over 8 at batch 16, 64 and 256, its pair of blocks
 * reading each row once, "Timed in a CUDA graph, and versions 30 and 31 with host rows: outcome");
 * elsewhere version 8 when rows may come from the host (a host pool given: with 14.2 % host rows
 * versions 8 and 18 are within their spread, 8 the faster median; 30 and 31 are faster only at
 * batch 1 and 7 % slower at BF16 batch 32, the same section) and version 18 on hot rows
 * (1.02-1.05x over version 8 at every batch, both formats, 64 heads). */
void dhk_attention_launch(attn_args a, dhk_attn_scratch &sc, float *out, int sms, cudaStream_t stream)
{
    /* Version 28 (18 with the splits merged in the kernel, programmatic dependent launch) where the
     * splits chosen below are two (64 heads: batch 45-66 at k 2048 on 132 SMs; 1.14x over 18 at
     * batch 64, "Versions 27 and 28: outcome"), for BF16 rows only; with more splits its clusters
     * (4, 8 blocks) do not all fit in the GPCs at once and it is slower than 18. With FP8 rows
     * version 39 is 1.04-1.08x faster than 28 there (batch 48 and 64), with BF16 rows 1.01-1.05x
     * slower ("Version 39 on the H200, and in the replay: outcome"). */
    attn_args t = a;   /* the split count the launch will choose (dhk__attention_splits) */
    dhk__attention_splits(t, sc, sms);
    const int splits = t.splits;
    /* Version 31 (18 with programmatic dependent launch on the main kernel and the combine, the
     * combine's loads in one round trip) in place of 18 on the other hot rows: 1.01-1.19x over 18
     * at every batch, both formats, 64 and 128 heads, 1.00-1.05x over 30 ("The fixed cost at batch
     * 16, and versions 30 and 31: outcome"); at two splits 28 stays faster (67.2 against 71.6 us).
     * Versions 37 and 38 (31 and 23 with lean consumers) in place of 31 and 23: 1.02-1.04x over 31
     * at 64 heads (FP8 and BF16 rows, batch 16-128), 1.07-1.12x over 23 at 128 heads (FlashMLA's
     * shape 413-418 TFLOP/s on the H100), errors within the check ("Version 37: outcome").
     * Version 39 (37 with FP8 rows' RoPE part by cp.async) in place of 37: 1.05-1.12x at 64 heads
     * (batch 16-128; BF16 rows run 37's producer), errors equal to 37's ("Version 39: outcome").
     * Versions 41 (39 with the next tiles' row ids kept 32-bit) and 43 (41 with 2, 4 or 8 splits
     * merged in the kernel) in place of 39 where they were faster, beside it in the same process
     * (on the H100; "Versions 41 and 43: outcome (H100)"): FP8 rows at one or two splits 43 (batch 128
     * 0.963-0.976x 39's time, 48 and 64 0.94-0.96x), three to eight splits 41 (batch 16 0.98x, 32
     * 0.97x; 43's merge of 4 and 8 splits is slower than the combine there), BF16 rows at three
     * to eight splits 41 (batch 16 0.98x); more splits (batch 1-12 at k 2048 on 132 SMs) 39 (41 1.03x
     * slower at batch 1).
     * At two splits 43's launch is cooperative: every block resident at once, so beside a kernel
     * that holds SMs on another stream it starts when enough are free (at one split, no merge, it
     * is not). */
    const bool fp8 = a.format == KREF_ROW_FP8;
    int version = 39;
    if (attn22_applies(a)) version = 38;
    else if (a.host) version = 8;
    else if (splits == 2 && !fp8) version = 28;
    else if (splits <= 2 && fp8) version = 43;
    else if (splits >= 3 && splits <= 8) version = 41;
    dhk__attention_launch_version(a, sc, out, sms, stream, version);
}

void dhk__attention_splits(attn_args &a, const dhk_attn_scratch &sc, int sms)
{
    if (a.k < 1) {
        fprintf(stderr, "%s: attention: k = %d, need at least one row\n", program_invocation_short_name, a.k);
        exit(1);
    }
    const int tn = (int)ATTN6_TILE_ROWS;
    const int per_split = a.nq * (a.heads / AT_H);
    if (a.splits <= 0) a.splits = std::max(1, std::min((a.k + tn - 1) / tn, sms / per_split));
    a.splits = std::min(a.splits, 64);  /* the scratch holds 64 splits per (query, head) */
    a.rows_per_split = ((a.k + a.splits - 1) / a.splits + tn - 1) / tn * tn;
    a.splits = (a.k + a.rows_per_split - 1) / a.rows_per_split;
    if ((size_t)a.nq * a.splits * a.heads > sc.cap_lse) {
        fprintf(stderr, "%s: attention: scratch too small for %d splits\n", program_invocation_short_name, a.splits);
        exit(1);
    }
    a.part_o = sc.part_o;   /* holds fp16 partials here */
    a.part_lse = sc.part_lse;
    a.merge_cnt = sc.merge_cnt;
}

void dhk__attention_launch_version(attn_args a, dhk_attn_scratch &sc, float *out, int sms, cudaStream_t stream,
                                   int version)
{
    const int tn = (int)ATTN6_TILE_ROWS;
    const int per_split = a.nq * (a.heads / AT_H);
    const bool paired = (version >= 22 && version <= 26) || version == 38;
    if (paired && !attn22_applies(a)) version = version == 38 ? 37 : 18;
    if (version == 22) sms = std::min(sms, dhk__attn22_resident_blocks());   /* one wave of clusters */
    if (version >= 23 && version <= 26) sms = std::min(sms, dhk__attn23_resident_blocks(version));
    if (version == 38) sms = std::min(sms, dhk__attn23_resident_blocks(23));   /* 23's block and clusters */
    dhk__attention_splits(a, sc, sms);
    if (version == 27 || version == 28) {
        /* Clusters of the splits: from the chosen count down, the first that is 2-8 splits and
         * whose nq x heads / 64 clusters are resident at once; none: version 18 as chosen. */
        int s = a.splits, chosen = 0, rps = a.rows_per_split;
        for (; s >= 2 && !chosen; s--) {
            const int r = ((a.k + s - 1) / s + tn - 1) / tn * tn, n = (a.k + r - 1) / r;
            if (n >= 2 && n <= 8 && (long long)per_split <= dhk__attn27_max_clusters(n)) chosen = n, rps = r;
        }
        if (chosen) a.splits = chosen, a.rows_per_split = rps;
        else version = 18;
    }
    /* Version 29: clusters of two splits, so an even count whose nq x heads / 64 x splits / 2
     * clusters are resident at once; otherwise version 18. */
    if (version == 29 && (a.splits % 2 || (long long)per_split * (a.splits / 2) > dhk__attn27_max_clusters(2))) version = 18;
    if (version >= 27 && version <= 29) {
        dhk__attn27_launch(a, out, stream, version);   /* merges its splits itself */
        return;
    }
    const bool on30 = version == 30 || version == 31 || version == 37 || version == 39 || version == 41 || version == 43;   /* 30's kernel and combine */
    if (version == 22) dhk__attn22_launch(a, out, stream);
    else if ((version >= 23 && version <= 26) || version == 38) dhk__attn23_launch(a, out, stream, version);
    else if (on30) dhk__attn30_launch(a, out, stream, version);
    else if (version == 18) dhk__attn18_launch(a, out, stream);
    else dhk__attn8_launch(a, out, stream);
    if (version == 43 && a43_merges(a.splits)) return;   /* merged in the kernel */
    if (a.splits > 1 && on30)
        dhk__attn30_combine(sc.part_o, sc.part_lse, a.nq, a.splits, a.heads, out, stream, version == 30 ? 30 : 31);
    else if (a.splits > 1) dhk_attention_combine(sc.part_o, sc.part_lse, a.nq, a.splits, a.heads, out, stream);
}
