/* residency.cu: the library's hot-buffer residency (kernels/dhk.h: dhk_residency_launch), the
 * classification bin/dhreplay runs: the simulator's policy (sim/hotbuf.h) exactly, including
 * the rows a decode step writes, which enter residency without a fetch. It is
 * kernels/versions/residency.cu's version 1 (the victims by a radix select of the LRU keys,
 * compacted in slot order) extended by the written rows, the active pairs of a verification's
 * commit and a budget per launch below the slots per pair (stride), in dynamic shared memory.
 * CPU reference: kref_lru_key()'s order (kernels/kref.h) with the simulator's list order for
 * the written rows; dhreplay checks every pair's misses against the simulator's own hot buffer
 * (rp_host.h) at every step, and two pairs' resident sets row by row. */
#include "kernels/dhk.h"
#include "kernels/lib/block_scan.cuh"   // defines: block_excl_scan, radix_select_digit, block_compact_le
#include "kernels/lib/sglang_rule.cuh"  // defines: sglr_is_miss, sglr_is_hit, sglr_new_position (SGLang's rule)

/* The eviction key of kref_lru_key() (kernels/kref.h), as kernels/versions/residency.cu computes it. */
static __device__ __forceinline__ uint64_t res_lru_key(int32_t slot, int32_t row, int32_t last, bool prot)
{
    if (prot) return ~0ull;
    if (row < 0) return (uint64_t)slot;
    return (1ull << 62) | ((uint64_t)(uint32_t)last << 24) | (uint64_t)row;
}

/* ---- residency: the simulator's policy (sim/hotbuf.h) with the written rows ----
 *
 * Per pair p (one block): the slots 0..B-1 of the pair's hot buffer, slot_row/slot_last per
 * slot, row_slot per context row. Eviction key per slot as kref_lru_key(): free slots first
 * (by slot), then resident unselected rows by (last step selected, row); selected rows are
 * protected. The rows written at this step (w rows from wfirst, above every older row) enter
 * with last = step - 1, i.e. as the most recent unselected rows -- exactly the simulator's
 * list order (rows leaving at this position, ascending, then the written rows) -- or with
 * last = step when selected (a hit). The V = misses + surviving written rows smallest keys
 * are the victims; when the unprotected slots cannot hold them all, the lowest written
 * unselected rows are dropped, as the simulator evicts them from its list. Misses, in
 * ascending row order, take the victims in ascending slot order, then the written rows.
 * Outputs: sel_slot (global slot: pair * stride + slot), the misses (rows, slots) and their
 * count; n_miss = -1 if the selection does not fit the budget. active (NULL: every pair) skips
 * the pairs with active[pair] == 0 (a verification's commit: requests accept different counts
 * of drafts); step only has to grow from one call to the next for each pair. */
__global__ void __launch_bounds__(DHK_RES_THREADS)
dhk_residency_kernel(int B, int stride, int k, int win, int32_t step, const int32_t *__restrict__ active,
                    const int32_t *__restrict__ sel_all,
                    const int32_t *__restrict__ wfirst, const int32_t *__restrict__ wcnt,
                    int32_t *__restrict__ slot_row_all, int32_t *__restrict__ slot_last_all,
                    int32_t *__restrict__ row_slot_all, int32_t *__restrict__ sel_slot_all,
                    int32_t *__restrict__ miss_rows_all, int32_t *__restrict__ miss_slots_all,
                    int32_t *__restrict__ n_miss_all)
{
    /* 128, not the 16 the arrays need: ptxas aligns a module's dynamic shared memory to its
     * most aligned extern array, and this kernel was measured compiled beside the fetch's
     * (__align__(128)) in one unit, its dynamic area at byte 1280; 128 here keeps it there,
     * so the instructions are the ones measured. */
    extern __shared__ __align__(128) uint8_t res_smem[];
    uint64_t *keys = (uint64_t *)res_smem;
    uint8_t *prot = res_smem + (size_t)B * 8;
    int32_t *victims = (int32_t *)(res_smem + (size_t)B * 8 + (((size_t)B + 15) & ~(size_t)15));
    __shared__ uint32_t hist[256];
    __shared__ int32_t s_m, s_wsel, s_free, s_unprot, s_digit, s_need;
    const size_t p = blockIdx.x;
    if (active && !active[p]) return;
    const int32_t *sel = sel_all + p * k;
    int32_t *slot_row = slot_row_all + p * stride, *slot_last = slot_last_all + p * stride;
    int32_t *row_slot = row_slot_all + p * (size_t)win;
    int32_t *sel_slot = sel_slot_all + p * k;
    const int tid = threadIdx.x;
    const int w0 = wfirst[p], w = wcnt[p];

    for (int s = tid; s < B; s += blockDim.x) prot[s] = 0;
    if (tid == 0) s_m = 0, s_wsel = 0, s_free = 0, s_unprot = 0;
    __syncthreads();
    int my_miss = 0, my_wsel = 0;
    for (int i = tid; i < k; i += blockDim.x) {
        int32_t row = sel[i];
        int32_t s = row >= w0 && row < w0 + w ? -2 : row_slot[row];
        sel_slot[i] = s;  /* local for now: >= 0 hit, -1 miss, -2 written and selected */
        if (s >= 0) prot[s] = 1;
        else if (s == -1) my_miss++;
        else my_wsel++;
    }
    if (my_miss) atomicAdd(&s_m, my_miss);
    if (my_wsel) atomicAdd(&s_wsel, my_wsel);
    __syncthreads();
    int my_free = 0, my_unprot = 0;
    for (int s = tid; s < B; s += blockDim.x) {
        keys[s] = res_lru_key(s, slot_row[s], slot_last[s], prot[s]);
        my_free += slot_row[s] < 0;
        my_unprot += slot_row[s] >= 0 && !prot[s];
    }
    if (my_free) atomicAdd(&s_free, my_free);
    if (my_unprot) atomicAdd(&s_unprot, my_unprot);
    __syncthreads();
    const int m = s_m, wsel = s_wsel, avail = s_free + s_unprot;
    if (m + wsel > avail) {  /* the selection outgrows the budget: the simulator refuses it too */
        if (tid == 0) n_miss_all[p] = -1;
        return;
    }
    const int drop = max(0, m + w - avail);
    const int V = m + w - drop;

    /* Radix select of the V-th smallest key (kernels/versions/residency.cu version 1). */
    uint64_t prefix = 0;
    int need = V;
    if (V > 0) {
        for (int shift = 56; shift >= 0; shift -= 8) {
            for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
            __syncthreads();
            uint64_t hi_mask = shift == 56 ? 0 : (~0ull << (shift + 8));
            for (int s = tid; s < B; s += blockDim.x)
                if ((keys[s] & hi_mask) == prefix) atomicAdd(&hist[(keys[s] >> shift) & 255], 1u);
            __syncthreads();
            radix_select_digit(hist, need, &s_digit, &s_need);
            prefix |= (uint64_t)s_digit << shift;
            need = s_need;
            __syncthreads();
        }
    }
    const uint64_t threshold = prefix;
    block_compact_le(keys, B, threshold, V > 0, victims);

    /* Misses in ascending row order take the first m victims. */
    const int kper = (k + blockDim.x - 1) / blockDim.x;
    const int i0 = min(k, tid * kper), i1 = min(k, i0 + kper);
    int mc = 0;
    for (int i = i0; i < i1; i++) mc += sel_slot[i] == -1;
    int mtotal;
    int j = block_excl_scan(mc, &mtotal);
    for (int i = i0; i < i1; i++) {
        int32_t s = sel_slot[i];
        if (s == -2) continue;  /* written and selected: placed below */
        if (s == -1) {
            s = victims[j];
            int32_t old = slot_row[s];
            if (old >= 0) row_slot[old] = -1;
            slot_row[s] = sel[i];
            row_slot[sel[i]] = s;
            miss_rows_all[p * k + j] = sel[i];
            miss_slots_all[p * k + j] = s;
            j++;
        }
        slot_last[s] = step;
        sel_slot[i] = (int32_t)(p * stride + s);
    }
    __syncthreads();
    /* The written rows (a handful per step), ascending, take the remaining victims; the
     * lowest unselected ones are dropped when there is no room. */
    if (tid == 0) {
        int v = m, dropped = 0;
        for (int t = 0; t < w; t++) {
            int32_t row = w0 + t;
            int lo = 0, hi = k - 1, pos = -1;
            while (lo <= hi) {
                int mid = (lo + hi) >> 1;
                if (sel[mid] == row) { pos = mid; break; }
                if (sel[mid] < row) lo = mid + 1; else hi = mid - 1;
            }
            if (pos < 0 && dropped < drop) { dropped++; continue; }
            int32_t s = victims[v++];
            int32_t old = slot_row[s];
            if (old >= 0) row_slot[old] = -1;
            slot_row[s] = row;
            row_slot[row] = s;
            slot_last[s] = pos >= 0 ? step : step - 1;
            if (pos >= 0) sel_slot[pos] = (int32_t)(p * stride + s);
        }
        n_miss_all[p] = m;
    }
}

size_t dhk_residency_smem_bytes(int B, int k)
{
    /* Keys (8 B per slot), the protected flags (one byte per slot, padded to 16 B) and the
     * victims (a miss or a written row each). */
    return (size_t)B * 8 + (((size_t)B + 15) & ~(size_t)15) + 4 * (size_t)(k + DHK_RES_WMAX);
}

void dhk_residency_setup(size_t smem)
{
    cudaCheck(cudaFuncSetAttribute(dhk_residency_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
}

void dhk_residency_launch(int pairs, int B, int stride, int k, int win, int32_t step, const int32_t *active,
                          const int32_t *sel, const int32_t *wfirst, const int32_t *wcnt, int32_t *slot_row,
                          int32_t *slot_last, int32_t *row_slot, int32_t *sel_slot, int32_t *miss_rows,
                          int32_t *miss_slots, int32_t *n_miss, size_t smem, cudaStream_t stream)
{
    dhk_residency_kernel<<<(unsigned)pairs, DHK_RES_THREADS, smem, stream>>>(B, stride, k, win, step, active, sel, wfirst,
                                                                           wcnt, slot_row, slot_last, row_slot, sel_slot,
                                                                           miss_rows, miss_slots, n_miss);
    CUDA_LAUNCH_CHECK();
}

/* ---- SGLang's hot buffer (sim/sglhb.h), the steps of kernels/lib/sglang_rule.cuh ----
 *
 * One block per pair, as SGLang's swap-in runs one block per request. Each thread takes a
 * contiguous chunk of the top-k and of the LRU positions, so that block-wide exclusive scans
 * of its counts give every element its rank in order: the misses' ranks in top-k order and
 * the hits' in LRU order (SGLang's kernel does the same with warp ballots). Dynamic shared
 * memory: the evictable slots a miss takes (evict) and the new LRU order (lru2), B each. The
 * CPU runs the same steps one element at a time (sglr_step_cpu), checked against sim/sglhb.c
 * by tests/test_sglang_rule.c; on the GPU the kernel is checked against sglr_step_cpu. */
__global__ void __launch_bounds__(DHK_RES_THREADS)
dhk_sglang_residency_kernel(int B, int k, int win, uint32_t stamp, const int32_t *__restrict__ topk_all,
                            const int32_t *__restrict__ n_sel_all, const int32_t *__restrict__ nrows_all,
                            int32_t *__restrict__ lru_all, int32_t *__restrict__ slot_row_all,
                            int32_t *__restrict__ row_slot_all, uint32_t *__restrict__ row_mark_all,
                            int32_t *__restrict__ sel_slot_all, int32_t *__restrict__ miss_rows_all,
                            int32_t *__restrict__ miss_slots_all, int32_t *__restrict__ n_miss_all,
                            int32_t *__restrict__ n_evicted_all)
{
    extern __shared__ __align__(16) int32_t sgl_smem[];
    int32_t *evict = sgl_smem, *lru2 = sgl_smem + B;
    __shared__ int s_evicted;
    const size_t p = blockIdx.x;
    const int tid = threadIdx.x, nt = blockDim.x, n = n_sel_all[p];
    const int32_t nrows = nrows_all[p], newest = nrows - 1;
    const int32_t *topk = topk_all + p * k;
    int32_t *lru = lru_all + p * B, *slot_row = slot_row_all + p * B;
    int32_t *row_slot = row_slot_all + p * (size_t)win;
    uint32_t *row_mark = row_mark_all + p * (size_t)win;
    int32_t *sel_slot = sel_slot_all + p * k, *miss_rows = miss_rows_all + p * k, *miss_slots = miss_slots_all + p * k;
    if (nrows <= B) { /* the fast path: slot = row */
        for (int i = tid; i < n; i += nt) sel_slot[i] = topk[i];
        if (tid == 0) n_miss_all[p] = 0, n_evicted_all[p] = 0;
        return;
    }
    if (tid == 0) s_evicted = 0;
    for (int i = tid; i < n; i += nt) row_mark[topk[i]] = stamp;
    __syncthreads();
    /* Misses in top-k order. */
    const int kper = (n + nt - 1) / nt, k0 = min(n, tid * kper), k1 = min(n, k0 + kper);
    int mc = 0;
    for (int i = k0; i < k1; i++) mc += sglr_is_miss(row_slot, topk[i], newest);
    int M;
    int m = block_excl_scan(mc, &M);
    /* Hits in LRU order, and every slot's new position. */
    const int bper = (B + nt - 1) / nt, b0 = min(B, tid * bper), b1 = min(B, b0 + bper);
    int hc = 0;
    for (int i = b0; i < b1; i++) hc += sglr_is_hit(lru, slot_row, row_mark, stamp, newest, i);
    int n_hit;
    int h = block_excl_scan(hc, &n_hit);
    const int n_evict = B - n_hit;
    for (int i = b0; i < b1; i++) {
        int hit = sglr_is_hit(lru, slot_row, row_mark, stamp, newest, i);
        if (!hit && i - h < M) evict[i - h] = lru[i];
        lru2[sglr_new_position(hit, h, i, n_evict, M)] = lru[i];
        h += hit;
    }
    __syncthreads();
    /* The m-th miss takes evict[m]: first the old rows leave (they are unselected, so no miss
     * row is among them), then the misses move in. */
    int my_ev = 0;
    for (int i = k0, j = m; i < k1; i++)
        if (sglr_is_miss(row_slot, topk[i], newest)) {
            int32_t old = slot_row[evict[j++]];
            if (old >= 0) row_slot[old] = -1, my_ev++;
        }
    if (my_ev) atomicAdd(&s_evicted, my_ev);
    __syncthreads();
    for (int i = k0, j = m; i < k1; i++) {
        int32_t row = topk[i];
        if (row != newest && row_slot[row] < 0) {
            int32_t s = evict[j];
            slot_row[s] = row;
            row_slot[row] = s;
            miss_rows[j] = row;
            miss_slots[j] = s;
            j++;
        }
    }
    __syncthreads();
    for (int i = tid; i < n; i += nt) {
        int32_t row = topk[i];
        sel_slot[i] = row == newest ? B : row_slot[row];
    }
    for (int i = tid; i < B; i += nt) lru[i] = lru2[i];
    if (tid == 0) n_miss_all[p] = M, n_evicted_all[p] = s_evicted;
}

size_t dhk_sglang_residency_smem_bytes(int B) { return 2 * (size_t)B * sizeof(int32_t); }

void dhk_sglang_residency_setup(size_t smem)
{
    cudaCheck(cudaFuncSetAttribute(dhk_sglang_residency_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
}

void dhk_sglang_residency_launch(int pairs, int B, int k, int win, uint32_t stamp, const int32_t *topk,
                                 const int32_t *n_sel, const int32_t *nrows, int32_t *lru, int32_t *slot_row,
                                 int32_t *row_slot, uint32_t *row_mark, int32_t *sel_slot, int32_t *miss_rows,
                                 int32_t *miss_slots, int32_t *n_miss, int32_t *n_evicted, size_t smem,
                                 cudaStream_t stream)
{
    dhk_sglang_residency_kernel<<<(unsigned)pairs, DHK_RES_THREADS, smem, stream>>>(
        B, k, win, stamp, topk, n_sel, nrows, lru, slot_row, row_slot, row_mark, sel_slot, miss_rows, miss_slots, n_miss,
        n_evicted);
    CUDA_LAUNCH_CHECK();
}
