/* l2prefetch.cuh: the L2 prefetch of selected rows ahead of their demand loads, for attention
 * versions 33 (kernels/lib/attn30.cuh: version 31 with it) and 34 (kernels/lib/attn23.cuh: version
 * 23 with it); sm_90 (the bulk form). Why (kernels/NOTES.md, "Version 33"): the producer's four
 * warps gather their rows at a pace set by the loads' round trip with one tile in flight; a
 * prefetch a few tiles ahead puts more of the gather's bytes in flight without holding a register
 * or a byte of shared memory for them, so the demand loads find the rows in L2. */
#ifndef KERNELS_L2PREFETCH_CUH
#define KERNELS_L2PREFETCH_CUH

#include "kernels/lib/attention.cuh"

/* How a row of `bytes` bytes at p is
 * brought into L2 ahead of its demand loads, by part `part` of the `nparts` threads that load the
 * row. PF 1: `prefetch.global.L2` of every 128-byte line the row touches (the parts take every
 * nparts-th line, the last part also the row's last byte, whose line a row not aligned to 128 B
 * adds); PF 2: one `cp.async.bulk.prefetch.L2` of the whole row by part 0 (16-byte aligned rows of
 * a multiple of 16 bytes: 656 and 1152). Both are fire-and-forget: no register, no shared memory,
 * no barrier holds the bytes in flight. Host rows (id < 0) are not prefetched. */
enum { A33_PF_NONE = 0, A33_PF_LINES = 1, A33_PF_BULK = 2 };
template <int PF>
__device__ __forceinline__ void a33_prefetch_row(const uint8_t *p, int bytes, int part, int nparts)
{
    const size_t g = __cvta_generic_to_global(p);
    if (PF == A33_PF_LINES) {
        for (int o = 128 * part; o < bytes; o += 128 * nparts) asm volatile("prefetch.global.L2 [%0];" ::"l"(g + o));
        if (part == nparts - 1) asm volatile("prefetch.global.L2 [%0];" ::"l"(g + bytes - 1));
    } else if (PF == A33_PF_BULK && part == 0) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(g), "r"(bytes) : "memory");
    }
}
/* The prefetches of one producer thread: row `row` of each tile of a split (rows rb .. re of query
 * q, ntiles tiles), as part `part` of the `nparts` threads that load that row. start(first, last)
 * prefetches tiles first .. last at once and loads the row id of tile last + 1; each step()
 * prefetches that tile and loads the next tile's row id, which the next step() uses: a step
 * issues its prefetch without waiting for a load, and holds one 32-bit id in flight between
 * steps, so the producers call it where their rows' registers are free (after a tile's stores). */
template <int PF>
struct a33_rows {
    int q, rb, re, row, ntiles, bytes, part, nparts;
    int next;
    int id;   /* a hot slot or host row fits 32 bits: a.src holds int32, a ring's pool is smaller */
    __device__ __forceinline__ int idx(int t) const { return rb + t * ATTN6_TILE_ROWS + row; }
    __device__ __forceinline__ bool has(int t) const { return t < ntiles && idx(t) < re; }
    __device__ __forceinline__ void issue(const attn_args &a, int i) const
    {
        if (i >= 0) a33_prefetch_row<PF>(attn4_row_ptr(a, i), bytes, part, nparts);
    }
    __device__ __forceinline__ void start(const attn_args &a, int first, int last)
    {
        if (PF != A33_PF_NONE) {
            for (int t = first; t <= last && t < ntiles; t++)
                if (has(t)) issue(a, (int)attn4_row_id(a, q, idx(t)));
            next = last + 1;
            id = has(next) ? (int)attn4_row_id(a, q, idx(next)) : 0;
        }
    }
    __device__ __forceinline__ void step(const attn_args &a)
    {
        if (PF == A33_PF_NONE || next >= ntiles) return;
        if (has(next)) issue(a, id);
        next++;
        if (has(next)) id = (int)attn4_row_id(a, q, idx(next));
    }
};

#endif
