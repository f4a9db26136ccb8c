/* attention.cuh: what the sparse decode attention's two translation units share.
 *
 * attention.cu (versions 1-5, the combine kernels and the benchmarks, built for sm_90) and
 * attention_wgmma.cu (versions 6-9, built for sm_90a because wgmma exists only there) take the
 * same launch arguments and resolve a selected row to its bytes the same way: a hot-buffer
 * slot (id >= 0), a row of the mapped host pool (id < 0, row -id-1), or a ring position. */
#ifndef ATTENTION_CUH
#define ATTENTION_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

struct attn_args {
    const uint8_t *hot;
    size_t hot_stride;
    const uint8_t *host;       /* device pointer of the mapped host pool, or null */
    size_t host_stride;
    const int32_t *src;        /* [nq][k]: >= 0 hot slot, < 0 host row -src-1; null: ring mode */
    int ring_cap;              /* ring mode: query q's ring is hot rows [q*cap, (q+1)*cap) */
    long long ring_appended;   /* rows appended so far; the k newest are attended */
    const __nv_bfloat16 *q;    /* [nq][heads][576] */
    float *part_o;             /* [nq][splits][heads][512] (versions 4-6: fp16 partials) */
    float *part_lse;           /* [nq][splits][heads], log2 domain */
    unsigned *merge_cnt;       /* version 9: [nq][heads / 64][2] arrival and departure counts, zero between launches */
    int nq, k, heads, splits, rows_per_split, format, row_bytes;
    float sm_scale;
};

/* The id of the idx-th selected row of query q: a hot slot (>= 0) or a host row (-row-1);
 * in ring mode the hot slot of the idx-th oldest of the k newest ring rows. */
__device__ __forceinline__ long long attn4_row_id(const attn_args &a, int q, int idx)
{
    if (a.src) return a.src[(size_t)q * a.k + idx];
    return (long long)q * a.ring_cap + (a.ring_appended - a.k + idx) % a.ring_cap;
}
__device__ __forceinline__ const uint8_t *attn4_row_ptr(const attn_args &a, long long id)
{
    return id >= 0 ? a.hot + (size_t)id * a.hot_stride : a.host + (size_t)(-id - 1) * a.host_stride;
}

/* Versions 6-9 (attention_wgmma.cu): rows per tile (rows_per_split must be a multiple of
 * it), and the launch of the main kernel over grid (splits, nq, heads / 64). With one split it
 * writes the final fp32 output to out; with several, fp16 partials to a.part_o and the
 * log-sum-exp to a.part_lse, which attn4_combine_kernel (versions 6, 7), attn8_combine_kernel
 * (version 8) or the kernel itself (version 9, a cooperative launch) merges. */
enum { ATTN6_TILE_ROWS = 64 };

/* One merged output piece: value dims 4c .. 4c+3 of the (query, head) whose split 0 partial
 * row is base, from the fp16 partials of its splits weighted by their log-sum-exp (version 8's
 * combine kernel and version 9's in-kernel merge). Loads go to L2 (ld.global.cg): in version 9
 * other blocks wrote them during this launch. Each thread keeps 8 splits' loads in flight with
 * no branch between them; an empty split (log-sum-exp -inf) wrote zeros, so its weight 0
 * needs no branch either. */
__device__ __forceinline__ float4 attn8_merge4(const __half *__restrict__ part_o, const float *__restrict__ part_lse,
                                               size_t base, int splits, int heads, int c)
{
    constexpr int U = 8;
    constexpr int V = 512;   /* value dims */
    float mx = -INFINITY;
#pragma unroll 8
    for (int s = 0; s < splits; s++) mx = fmaxf(mx, __ldcg(part_lse + base + (size_t)s * heads));
    float acc[4] = {0.f, 0.f, 0.f, 0.f}, den = 0.f;
    for (int s0 = 0; s0 < splits; s0 += U) {
        float lse[U];
        uint2 v[U];
#pragma unroll
        for (int j = 0; j < U; j++) {
            const bool in = s0 + j < splits;
            const size_t r = base + (size_t)(in ? s0 + j : s0) * heads;
            lse[j] = in ? __ldcg(part_lse + r) : -INFINITY;
            v[j] = __ldcg((const uint2 *)(part_o + r * V + c * 4));
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
void attn6_launch(const attn_args &a, float *out, cudaStream_t stream, int version);

#endif
