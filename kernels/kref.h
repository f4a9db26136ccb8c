/* kref.h: CPU references for the reference CUDA kernels (plain C11, tested in CI without a GPU).
 *
 * Every GPU kernel in kernels/ (the .cu files) is checked against one of these functions before it is
 * timed; tests/test_kernels_ref.c checks these functions in turn against slow, obvious
 * implementations (a float64 two-pass attention, a set-based LRU, a repeated-maximum top-k).
 *
 * Row formats (docs/DESIGN.md section 2; FlashMLA's FP8 sparse layout):
 *   KREF_ROW_FP8  656 B: 512 e4m3 latent values, 4 fp32 scales (one per 128 values), 64 bf16 RoPE
 *   KREF_ROW_BF16 1152 B: 576 bf16 values (512 latent, then 64 RoPE)
 * A decoded row is 576 floats; attention uses all 576 as the key and the first 512 as the value
 * (MLA with the up-projections absorbed into the query and output).
 *
 * Indexer keys (DSA "lightning indexer"): 128 e4m3 values and one fp32 scale per token,
 * 132 B, stored as two arrays (keys [ctx][128], scales [ctx]) as DeepGEMM's MQA-logits kernel
 * takes them; score(t) = scale_t * sum_h w_h * relu(q_h . k_t). */
#ifndef KREF_H
#define KREF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { KREF_LATENT = 512, KREF_ROPE = 64, KREF_QK_DIM = 576, KREF_V_DIM = 512 };
enum { KREF_ROW_FP8 = 0, KREF_ROW_BF16 = 1 };
enum { KREF_ROW_BYTES_FP8 = 656, KREF_ROW_BYTES_BF16 = 1152 };
enum { KREF_IDX_DIM = 128, KREF_IDX_KEY_BYTES = 132 };

/* ---- number formats ---- */
float kref_bf16_to_f32(uint16_t h);
uint16_t kref_f32_to_bf16(float f);     /* round to nearest even; NaN stays NaN */
float kref_e4m3_to_f32(uint8_t b);      /* OCP e4m3 ("fn"): no infinities, 0x7f/0xff are NaN */
uint8_t kref_f32_to_e4m3(float f);      /* round to nearest even, saturating at +-448 */

/* Bytes of one row in the given format, or 0 for an unknown format. */
size_t kref_row_bytes(int format);
/* Decode one row to 576 floats (scales applied). */
void kref_row_decode(const uint8_t *row, int format, float out[KREF_QK_DIM]);
/* Encode 576 floats as a row; FP8 picks each group's scale as amax / 448. */
void kref_row_encode(const float in[KREF_QK_DIM], int format, uint8_t *row);

/* ---- miss fetch: hot[slot[i]] = pool[rows[i]] for i < n ---- */
void kref_gather_rows(const uint8_t *pool, size_t pool_stride, const int64_t *rows,
                      const int32_t *slots, size_t n, size_t row_bytes, uint8_t *hot,
                      size_t hot_stride);

/* ---- hot-buffer residency: one (request, layer) LRU, HiSparse-style ----
 * Policy (the simulator's): the rows selected at this step are protected; resident rows not
 * selected are ordered by the step at which they were last selected (the position they left
 * the selection), ties broken by row index, and the oldest is evicted first. Free slots are
 * used before any eviction, lowest slot first. Misses, taken in ascending row order, receive
 * the chosen slots in ascending slot order, so the slot map is a function of the policy alone
 * and a GPU implementation can be compared with this one slot for slot.
 * Cost: O(capacity log capacity) per step (a sort of the candidate keys). */
typedef struct {
    int32_t capacity;   /* slots in the hot buffer (B >= k) */
    int32_t ctx;        /* rows of the (request, layer) history */
    int32_t *slot_row;  /* [capacity] row held by each slot, -1 when free */
    int32_t *slot_last; /* [capacity] step at which that row was last selected */
    int32_t *row_slot;  /* [ctx] slot holding each row, -1 when not resident */
} kref_lru;

int kref_lru_init(kref_lru *lru, int32_t capacity, int32_t ctx);
void kref_lru_release(kref_lru *lru);
/* Eviction key of a slot, smaller = evicted first; UINT64_MAX for protected slots. The GPU
 * kernel computes the same keys. */
uint64_t kref_lru_key(int32_t slot, int32_t row, int32_t last, int protected_now);
/* One step: sel holds k strictly ascending rows < ctx. Writes sel_slot[k] (the slot of every
 * selected row after the step), sel_hit[k] (1 for a hit), the misses (rows ascending) with their
 * slots, and *n_miss. Returns 0, or -1 with dh_err for an invalid selection. */
int kref_lru_step(kref_lru *lru, int32_t step, const int32_t *sel, int k, int32_t *sel_slot,
                  uint8_t *sel_hit, int32_t *miss_rows, int32_t *miss_slots, int *n_miss);

/* ---- sparse decode attention (MLA, absorbed) ----
 * q: [heads][576]; rows: [n][576] decoded rows; out: [heads][512].
 * out_h = sum_j softmax_j(sm_scale * q_h . row_j) row_j[0:512]; float inputs, double sums. */
void kref_attn_decode(const float *q, int heads, const float *rows, int n, float sm_scale,
                      float *out);

/* ---- verification: union of nq sorted selections of k rows each ----
 * Writes the sorted union to union_rows (capacity nq*k) and returns its size. For every query
 * and selected row, pos[q*k + j] is that row's index in the union. */
int kref_union(const int32_t *sels, int nq, int k, int32_t *union_rows, int32_t *pos);

/* ---- draft ring: slot of the j-th oldest of the last len rows appended, ring of cap slots,
 * next append at position 'appended' (rows appended so far) ---- */
int32_t kref_ring_slot(int64_t appended, int len, int cap, int j);

/* ---- indexer ----
 * q: [heads][128] e4m3 (heads <= 64); w: [heads] (query scale folded in); keys: [ctx][128]
 * e4m3; scales: [ctx]. scores[t] = scales[t] * sum_h w_h * relu(sum_d q[h][d] k[t][d]). */
void kref_indexer_scores(const uint8_t *q, const float *w, int heads, const uint8_t *keys,
                         const float *scales, int ctx, float *scores);
/* Top-k of scores (largest first, ties to the lower index), written as ascending indices.
 * Cost O(n log n). Returns 0, or -1 with dh_err when k > n. */
int kref_topk(const float *scores, int n, int k, int32_t *out_rows);
/* The threshold guess of top-k versions 5 and 6 (kernels/versions/topk.cu; version 6 is
 * kernels/lib/topk.cu): the rank r, from the top,
 * of the sampled key taken as the threshold, among `sample` scores spread over a context of
 * ctx (> 0) selecting k. Version 5 (z = 0) aims at 1.25 k + 512 scores above it (room for the
 * select): r = ceil(sample (5k/4 + 512) / ctx). The scores above the sample's r-th largest
 * number about ctx / sample x Gamma(r), so with few sampled scores above it (long contexts)
 * fewer than k lie above too often, and such a block falls back to the radix passes (a wave
 * of blocks then waits for it). Version 6 (z = 4.3) takes at least the least r with
 * r - z sqrt(r) >= k sample / ctx: fewer than k above in ~1e-6 of requests or fewer
 * (P(Poisson(k sample / ctx) >= r), tests/test_kernels_ref.c). */
long long kref_topk_sample_rank(long long ctx, long long k, int sample, double z);

#ifdef __cplusplus
}
#endif
#endif
