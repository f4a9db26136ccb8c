/* attention.cuh: what the sparse decode attention's translation units share.
 *
 * kernels/versions/attention.cu (versions 1-5, their combine kernels and the benchmarks, built
 * for sm_90), kernels/versions/attention_wgmma.cu and kernels/lib/attention_wgmma.cu (versions
 * 6-13, built for sm_90a because wgmma exists only there) and the library's launch
 * (kernels/lib/attention.cu, version 8 and its combine) take the same launch arguments and resolve a selected row to its bytes the same way: a hot-buffer
 * slot (id >= 0), a row of the mapped host pool (id < 0, row -id-1), or a ring position. */
#ifndef ATTENTION_CUH
#define ATTENTION_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* The MLA shape: 64 heads per block, 576-dim keys (512 latent + 64 RoPE), 512-dim values. */
#define AT_H 64
#define AT_QK 576
#define AT_V 512

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
    int diag;                  /* versions 8 and 10-13 only: A6_DIAG_* (below), 0 for the real kernel */
    float sm_scale;
};

/* The id of the idx-th selected row of query q: a hot slot (>= 0) or a host row (-row-1);
 * in ring mode the hot slot of the idx-th oldest of the k newest ring rows. */
__device__ __forceinline__ long long attn4_row_id(const attn_args &a, int q, int idx)
{
    if (a.src) return a.src[(size_t)q * a.k + idx];
    return (long long)q * a.ring_cap + (a.ring_appended - a.k + idx) % a.ring_cap;
}
/* Version 41: a row id fetched a tile ahead kept as the 32-bit entry it is in a.src (with its index,
 * for ring mode) and widened only where the row is addressed. Versions 18-40 hold it as the 64-bit
 * id attn4_row_id returns, and ptxas sign-extends it right after its load, so each tile's id
 * prefetch waits a whole round trip where it is issued (kernels/NOTES.md, "Versions 41 and 42"; version 42
 * does the same in version 38's producer, kernels/lib/attn23.cuh). */
struct a41_rid {
    int raw, idx;
};
__device__ __forceinline__ a41_rid a41_rid_load(const attn_args &a, int q, int idx)
{
    return {a.src ? a.src[(size_t)q * a.k + idx] : 0, idx};
}
/* The id to address a row by, from either form. */
__device__ __forceinline__ long long a41_widen(const attn_args &a, int q, a41_rid r)
{
    return a.src ? (long long)r.raw : attn4_row_id(a, q, r.idx);
}
__device__ __forceinline__ long long a41_widen(const attn_args &, int, long long id) { return id; }

__device__ __forceinline__ const uint8_t *attn4_row_ptr(const attn_args &a, long long id)
{
    return id >= 0 ? a.hot + (size_t)id * a.hot_stride : a.host + (size_t)(-id - 1) * a.host_stride;
}

/* Versions 6-13 (attention_wgmma.cu): rows per tile (rows_per_split must be a multiple of
 * it), and the launch of the main kernel over grid (splits, nq, heads / 64). With one split it
 * writes the final fp32 output to out; with several, fp16 partials to a.part_o and the
 * log-sum-exp to a.part_lse, which attn4_combine_kernel (versions 6, 7), attn8_combine_kernel
 * (versions 8, 10-13) or the kernel itself (version 9, a cooperative launch) merges. */
enum { ATTN6_TILE_ROWS = 64 };
/* Diagnostic variants of versions 8 and 10-13 (diag != A6_DIAG_NONE): one side of the pipeline
 * alone; versions 11-13 also without their dequantisation (NODEQUANT) and with Q's hi term alone (QHI,
 * the one variant whose output is meant to be right: it measures the lo term's accuracy and cost). */
enum { A6_DIAG_NONE = 0, A6_DIAG_PRODUCER = 1, A6_DIAG_CONSUMERS = 2, A11_DIAG_NODEQUANT = 3, A11_DIAG_QHI = 4 };
/* Version 17 at 128 heads without its remote stores (each block dequantises its half of every
 * tile for itself alone; outputs wrong by design): the st.async's cost apart from the pairing's;
 * the whole kernel (NOREMOTE) and the producer alone (NOREMOTE_PRODUCER: the consumers hand each
 * stage back unread, still to both blocks' empty barriers). */
enum { A14_DIAG_NOREMOTE = 5, A14_DIAG_NOREMOTE_PRODUCER = 6 };
/* Versions 18 and 30 (kernels/lib/attn30.cuh): the block's fixed cost in parts (outputs wrong by
 * design except FULL's; none checked): barriers and registers only, + Q, + the epilogue (no tiles),
 * the first tile only, the whole kernel; A30_DIAG_NOCOMBINE added: without the combine. */
enum { A30_DIAG_LAUNCH = 7, A30_DIAG_QONLY = 8, A30_DIAG_EMPTY = 9, A30_DIAG_TILE1 = 10, A30_DIAG_FULL = 11,
       A30_DIAG_NOCOMBINE = 16 };
void attn6_launch(const attn_args &a, float *out, cudaStream_t stream, int version);
/* Version 14 (clusters of two blocks): the blocks of its clusters resident at once for a's
 * shape, or a very large count where a falls back to version 8 (BF16 rows, 64 heads). */
int attn14_resident_blocks(const attn_args &a);
/* Inside the library: version 8's main kernel alone (kernels/lib/attention_wgmma.cu); callers
 * use dhk_attention_launch (kernels/dhk.h), which adds the splits and their combine. */
void dhk__attn8_launch(const attn_args &a, float *out, cudaStream_t stream);
/* Version 18's main kernel (kernels/lib/attn18.cuh), the same arguments and outputs as version 8's. */
void dhk__attn18_launch(const attn_args &a, float *out, cudaStream_t stream);
/* Version 22's main kernel (kernels/lib/attn21.cuh): FP8 rows with an even number of 64-head
 * groups only, in clusters of two blocks; the blocks of its clusters resident at once. */
void dhk__attn22_launch(const attn_args &a, float *out, cudaStream_t stream);
int dhk__attn22_resident_blocks();
/* Versions 23-26 (kernels/lib/attn23.cuh, version = 23 ... 26): version 22 with the producer's
 * copies to the peer issued per warp (25: persistent, one wave of clusters walking the work items,
 * 26: 25 with the output staged in the Q region; 25 and 26 run 23 where a split is not a multiple
 * of 4 tiles); the same cases as 22. */
void dhk__attn23_launch(const attn_args &a, float *out, cudaStream_t stream, int version);
int dhk__attn23_resident_blocks(int version);
/* Versions 27 and 28 (kernels/lib/attn27.cuh): version 18 with the a.splits (2 .. 8) splits of a
 * (query, 64 heads) in one cluster, merged there through distributed shared memory (no partials,
 * no combine kernel); 28 with programmatic dependent launch. Version 29 (= 28 in clusters of two
 * splits, an even a.splits: each pair merged there, the pairs by the last block to arrive, through
 * a.part_o / a.part_lse and a.merge_cnt). Clusters of that many blocks resident at once:
 * dhk__attn27_max_clusters. */
void dhk__attn27_launch(const attn_args &a, float *out, cudaStream_t stream, int version);
int dhk__attn27_max_clusters(int splits);
/* Version 30 (kernels/lib/attn30.cuh): version 18's main kernel launched with programmatic
 * dependent launch (waiting for the previous grid before its first global read, letting its
 * dependents launch once its last tile's loads are issued); dhk__attn30_combine: version 8's
 * combine launched the same way (kernels/lib/attention.cu). attn30_diag_launch: the main
 * kernel's diagnostic variants (a.diag: A30_DIAG_*, without the NOCOMBINE bit), version 18's block
 * (pdl false) or 30's (kernels/versions/attention_wgmma.cu). Version 31 = 30 with its combine's
 * loads in one round trip (version = 31 to dhk__attn30_combine). Version 37 (version = 37 to
 * dhk__attn30_launch; any other: 30's kernel) = 30's kernel with version 37's consumers
 * (kernels/lib/attn18.cuh, a18_loop with V 37) and 31's combine; version 39 (version = 39) = 37
 * with FP8 rows' RoPE part copied by cp.async into the stage (kernels/lib/attn30.cuh, a30_producer
 * with RA); version 38 (version = 38 to dhk__attn23_launch) = 23 with 37's consumers. */
void dhk__attn30_launch(const attn_args &a, float *out, cudaStream_t stream, int version);
void dhk__attn30_combine(const void *part_o, const float *part_lse, int nq, int splits, int heads, float *out,
                         cudaStream_t stream, int version);
void attn30_diag_launch(const attn_args &a, float *out, cudaStream_t stream, bool pdl);
struct dhk_attn_scratch;
/* dhk_attention_launch with its main kernel named (8, 18, 22-26, 27-29, 30, 31, 37-39, 41, 43; 22-26
 * run 18 where they do not apply, 38 runs 37 there, 27-28 run 18 where the splits are not 2-8 or
 * their clusters do not fit at once, 29 where they are odd or their clusters of two do not fit)
 * instead of chosen (the benchmarks). */
void dhk__attention_launch_version(attn_args a, dhk_attn_scratch &sc, float *out, int sms, cudaStream_t stream,
                                   int version);
/* Whether dhk__attention_launch_version runs version (the list above; the benchmarks' dispatch). */
static inline bool dhk__attention_has_version(int version)
{
    return version == 8 || version == 18 || (version >= 22 && version <= 31) || (version >= 37 && version <= 39) || version == 41 ||
           version == 43;
}
/* The split counts version 43 merges inside its kernel (64 heads divide among them;
 * kernels/lib/attn30.cuh a43_merge); at other counts it runs 41's kernel and the combine. */
__host__ __device__ constexpr bool a43_merges(int splits) { return splits == 2 || splits == 4 || splits == 8; }
/* The splits of a launch on sms SMs (a.splits <= 0: one wave; whole 64-row tiles, at most 64),
 * rows_per_split and the scratch's partials set in a; an error line and exit when k < 1 or the
 * scratch is too small (dhk__attention_launch_version's first step, for kernels/versions). */
void dhk__attention_splits(attn_args &a, const dhk_attn_scratch &sc, int sms);

#endif
