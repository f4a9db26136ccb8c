/* sglang_rule.cuh: SGLang's hot-buffer rule (sim/sglhb.h; sgl-project/sglang
 * hisparse.cuh, load_cache_to_device_buffer_kernel) as the per-element steps of
 * a parallel kernel, in plain C so that the same steps run in the GPU kernel
 * (kernels/lib/residency.cu, dhk_sglang_residency_launch) and, one element at
 * a time with a sequential scan, on the CPU (sglr_step_cpu, checked against
 * the simulator's sim/sglhb.c by tests/test_sglang_rule.c).
 *
 * State of one pair (request, selection group): lru[B], the LRU slots least
 * recent first; slot_row[B], the row each slot holds (-1: empty); row_slot[win],
 * the LRU slot of each context row (-1: none); row_mark[win], the stamp of the
 * step that selects the row (the kernel's hash of the top-k). Slot B, the newest
 * row's, is outside the LRU and not stored.
 *
 * One long step (nrows > B), from the top-k in its output order:
 *   mark      row_mark[topk[i]] = stamp                          (per top-k entry)
 *   miss      topk[i] != newest && row_slot[topk[i]] < 0; an exclusive scan of
 *             the flags in top-k order gives each miss its rank m (per top-k entry)
 *   hit       the slot at LRU position i holds a selected row that is not the
 *             newest; a scan in LRU order gives its hit rank h, and the evictable
 *             slots' rank e = i - h (per LRU position)
 *   order     the slot's new LRU position: n_evict + h for a hit; e - M for an
 *             evictable slot no miss takes (e >= M); n_evict - M + e for the one
 *             the e-th miss takes (e < M) -- untouched evictables in their old
 *             order, then the misses in top-k order, then the hits in their old
 *             order, exactly the kernel's write-back
 *   place     the m-th miss takes the evictable slot of rank m (evict[m]); its
 *             old row loses its slot (evicted when it held one)
 * The short-sequence fast path (nrows <= B: slot = row) needs none of it. */
#ifndef DH_SGLANG_RULE_CUH
#define DH_SGLANG_RULE_CUH

#include <stdint.h>

#ifdef __CUDACC__
#define SGLR_HD __host__ __device__ __forceinline__
#else
#define SGLR_HD static inline
#endif

/* The pair's slots when its first long step comes: lru = 0 .. B-1 and, when the
 * buffer starts filled (a staging start, or a short start the fast path filled),
 * rows 0 .. B-1 in slots 0 .. B-1; otherwise empty. row_slot and row_mark cover win rows. */
SGLR_HD void sglr_pair_init(int32_t *lru, int32_t *slot_row, int32_t *row_slot, uint32_t *row_mark, int B, int win,
                            int filled)
{
    for (int r = 0; r < win; r++) row_slot[r] = -1, row_mark[r] = 0;
    for (int s = 0; s < B; s++) {
        lru[s] = s;
        slot_row[s] = filled ? s : -1;
        if (filled && s < win) row_slot[s] = s;
    }
}

SGLR_HD int sglr_is_miss(const int32_t *row_slot, int32_t row, int32_t newest)
{
    return row != newest && row_slot[row] < 0;
}

SGLR_HD int sglr_is_hit(const int32_t *lru, const int32_t *slot_row, const uint32_t *row_mark, uint32_t stamp,
                        int32_t newest, int i)
{
    int32_t row = slot_row[lru[i]];
    return row >= 0 && row != newest && row_mark[row] == stamp;
}

/* The new LRU position of the slot at position i (hit: its hit rank h; else its evictable
 * rank e = i - h), with n_evict evictable slots and M misses. */
SGLR_HD int sglr_new_position(int hit, int h, int i, int n_evict, int M)
{
    if (hit) return n_evict + h;
    int e = i - h;
    return e >= M ? e - M : n_evict - M + e;
}

/* One step on the CPU, the kernel's steps one element at a time (the scans sequential).
 * topk[0 .. n) in output order; evict and lru2 are scratch of B. Outputs: sel_slot[i] (the
 * slot of each selected row, B for the newest), miss_rows/miss_slots[0 .. return value) in
 * top-k order, *evicted. The fast path when nrows <= B. */
static inline int sglr_step_cpu(int B, uint32_t stamp, int32_t nrows, const int32_t *topk, int n, int32_t *lru,
                                int32_t *slot_row, int32_t *row_slot, uint32_t *row_mark, int32_t *evict,
                                int32_t *lru2, int32_t *sel_slot, int32_t *miss_rows, int32_t *miss_slots,
                                int *evicted)
{
    *evicted = 0;
    if (nrows <= B) {
        for (int i = 0; i < n; i++) sel_slot[i] = topk[i];
        return 0;
    }
    const int32_t newest = nrows - 1;
    for (int i = 0; i < n; i++) row_mark[topk[i]] = stamp;
    int M = 0;
    for (int i = 0; i < n; i++) {
        if (sglr_is_miss(row_slot, topk[i], newest)) miss_rows[M++] = topk[i];
    }
    int n_hit = 0;
    for (int i = 0; i < B; i++) n_hit += sglr_is_hit(lru, slot_row, row_mark, stamp, newest, i);
    const int n_evict = B - n_hit;
    int h = 0;
    for (int i = 0; i < B; i++) {
        int hit = sglr_is_hit(lru, slot_row, row_mark, stamp, newest, i);
        if (!hit && i - h < M) evict[i - h] = lru[i];
        lru2[sglr_new_position(hit, h, i, n_evict, M)] = lru[i];
        h += hit;
    }
    for (int m = 0; m < M; m++) {
        int32_t s = evict[m], old = slot_row[s];
        if (old >= 0) row_slot[old] = -1, (*evicted)++;
        slot_row[s] = miss_rows[m];
        row_slot[miss_rows[m]] = s;
        miss_slots[m] = s;
    }
    for (int i = 0; i < n; i++) sel_slot[i] = topk[i] == newest ? B : row_slot[topk[i]];
    for (int i = 0; i < B; i++) lru[i] = lru2[i];
    return M;
}

#endif
