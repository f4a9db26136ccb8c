/* residency.cu: hot-buffer residency on the GPU, HiSparse-style: for each (request, layer),
 * classify the k selected rows as hits or misses against its LRU hot buffer and give every
 * miss a slot. CPU reference: kref_lru_step (kernels/kref.c), which states the policy; the
 * GPU result must equal it slot for slot at every step. The replay's classification, which
 * also takes in the rows a step writes, is the library's (kernels/lib/residency.cu).
 *
 * Version 1: one block of 1024 threads per (request, layer), all pairs in one launch.
 *   hits:    a row -> slot table per pair (O(1) lookup per selected row, like HiSparse's);
 *   victims: each slot gets the eviction key of kref_lru_key(); the m-th smallest key is found
 *            by a radix select (8 passes of 8 bits, 256-bin shared-memory histogram), and the
 *            slots at or below it are compacted in slot order with a block scan;
 *   assign:  misses in ascending row order take the victims in ascending slot order.
 * Cost per pair: O(B + k) work, 8 histogram passes over B keys, a handful of block scans;
 * no sort.
 * Version 2: the same, starting the select at the first byte where the smallest and largest
 *   candidate keys differ, and with warp-aggregated histogram atomics (__match_any_sync): in
 *   the high passes every key has the same digit, and 4096 atomics on one shared-memory
 *   address serialise. State per pair: slot_row[B], slot_last[B], row_slot[ctx]. */
#include "kernels/bench.cuh"
#include "kernels/kref.h"
extern "C" {
#include "common/dh_err.h"
}
#include "kernels/lib/block_scan.cuh"

#include <string.h>

#include <algorithm>
#include <thread>

#define RES_THREADS 1024
#define RES_MAX_B 4096  /* static shared memory: 32 KB of keys */
#define RES_MAX_K 2048

__device__ __forceinline__ uint64_t lru_key(int32_t slot, int32_t row, int32_t last, bool prot)
{
    if (prot) return ~0ull;
    if (row < 0) return (uint64_t)slot;
    return (1ull << 62) | ((uint64_t)(uint32_t)last << 24) | (uint64_t)row;
}

template <bool FAST>
__global__ void __launch_bounds__(RES_THREADS)
residency_kernel(int B, int k, int ctx, int32_t step, const int32_t *__restrict__ sel_all,
                 int32_t *__restrict__ slot_row_all, int32_t *__restrict__ slot_last_all,
                 int32_t *__restrict__ row_slot_all, int32_t *__restrict__ sel_slot_all,
                 uint8_t *__restrict__ sel_hit_all, int32_t *__restrict__ miss_rows_all,
                 int32_t *__restrict__ miss_slots_all, int32_t *__restrict__ n_miss_all)
{
    __shared__ uint64_t keys[RES_MAX_B];
    __shared__ uint8_t prot[RES_MAX_B];
    __shared__ int32_t victims[RES_MAX_K];
    __shared__ uint32_t hist[256];
    __shared__ int32_t s_m, s_digit, s_need;
    const size_t p = blockIdx.x;
    const int32_t *sel = sel_all + p * k;
    int32_t *slot_row = slot_row_all + p * B, *slot_last = slot_last_all + p * B;
    int32_t *row_slot = row_slot_all + p * (size_t)ctx;
    int32_t *sel_slot = sel_slot_all + p * k;
    const int tid = threadIdx.x;

    for (int s = tid; s < B; s += blockDim.x) prot[s] = 0;
    if (tid == 0) s_m = 0;
    __syncthreads();
    int my_miss = 0;
    for (int i = tid; i < k; i += blockDim.x) {
        int32_t s = row_slot[sel[i]];
        sel_slot[i] = s;
        if (s >= 0) prot[s] = 1; else my_miss++;
    }
    if (my_miss) atomicAdd(&s_m, my_miss);
    __syncthreads();
    for (int s = tid; s < B; s += blockDim.x) keys[s] = lru_key(s, slot_row[s], slot_last[s], prot[s]);
    const int m = s_m;
    __syncthreads();

    /* Radix select of the m-th smallest key, most significant digit first. prefix holds the
     * digits fixed so far; need is the rank still to find among keys matching the prefix. */
    uint64_t prefix = 0;
    int need = m, start = 56;
    if (FAST && m > 0) {
        /* Version 2: the bytes that the smallest and largest unprotected keys share are shared
         * by every key between them, so the select starts at the first byte where they
         * differ (usually 4 passes instead of 8 once no slot is free). */
        __shared__ uint64_t red_min[32], red_max[32];
        uint64_t mn = ~0ull, mx = 0;
        for (int s = tid; s < B; s += blockDim.x)
            if (keys[s] != ~0ull) mn = min(mn, keys[s]), mx = max(mx, keys[s]);
        for (int o = 16; o > 0; o >>= 1) {
            mn = min(mn, __shfl_xor_sync(0xffffffff, mn, o));
            mx = max(mx, __shfl_xor_sync(0xffffffff, mx, o));
        }
        if ((tid & 31) == 0) red_min[tid >> 5] = mn, red_max[tid >> 5] = mx;
        __syncthreads();
        mn = red_min[0], mx = red_max[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) mn = min(mn, red_min[w]), mx = max(mx, red_max[w]);
        uint64_t diff = mn ^ mx;
        start = diff ? ((63 - __clzll((long long)diff)) / 8) * 8 : -8;
        prefix = start >= 0 ? (start == 56 ? 0 : mn & (~0ull << (start + 8))) : mn;
        __syncthreads();
    }
    if (m > 0) {
        for (int shift = start; shift >= 0; shift -= 8) {
            for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
            __syncthreads();
            uint64_t hi_mask = shift == 56 ? 0 : (~0ull << (shift + 8));
            for (int base = 0; base < B; base += blockDim.x) {
                int s = base + tid;
                bool match = s < B && (keys[s] & hi_mask) == prefix;
                int bin = match ? (int)((keys[s] >> shift) & 255) : 256 + (tid & 31);
                if (FAST) {
                    /* Most keys share a digit in the high passes: one atomic per distinct
                     * digit per warp instead of one per key. */
                    unsigned same = __match_any_sync(0xffffffff, bin);
                    if (match && (tid & 31) == __ffs(same) - 1) atomicAdd(&hist[bin], (unsigned)__popc(same));
                } else if (match) {
                    atomicAdd(&hist[bin], 1u);
                }
            }
            __syncthreads();
            radix_select_digit(hist, need, &s_digit, &s_need);
            prefix |= (uint64_t)s_digit << shift;
            need = s_need;
            __syncthreads();
        }
    }
    const uint64_t threshold = prefix;  /* the m-th smallest key; keys are unique */

    /* Victims in slot order: each thread scans a contiguous range of slots. */
    block_compact_le(keys, B, threshold, m > 0, victims);

    /* Misses in selection (= ascending row) order take victims in order. */
    const int kper = (k + blockDim.x - 1) / blockDim.x;
    const int i0 = tid * kper, i1 = min(k, i0 + kper);
    int mc = 0;
    for (int i = i0; i < i1; i++) mc += sel_slot[i] < 0;
    int mtotal;
    int j = block_excl_scan(mc, &mtotal);
    for (int i = i0; i < i1; i++) {
        int32_t s = sel_slot[i];
        uint8_t hit = s >= 0;
        if (!hit) {
            s = victims[j];
            int32_t old = slot_row[s];
            if (old >= 0) row_slot[old] = -1;
            slot_row[s] = sel[i];
            row_slot[sel[i]] = s;
            miss_rows_all[p * k + j] = sel[i];
            miss_slots_all[p * k + j] = s;
            sel_slot[i] = s;
            j++;
        }
        sel_hit_all[p * k + i] = hit;
        slot_last[s] = step;
    }
    if (tid == 0) n_miss_all[p] = m;
}

int bench_residency(bench_env *env, const bench_params &p)
{
    const int batch = (int)p.num("batch", 16);
    const int layers = (int)p.num("layers", 78);
    const int B = (int)p.num("hot_rows", 4096);
    const int k = (int)p.num("k", 2048);
    const int ctx = (int)p.num("ctx", 100000);
    const double keep = p.real("keep", 0.6);   /* fraction of a selection kept at the next step */
    const int check_pairs = (int)p.num("check_pairs", 16);
    const int check_steps = 4;
    if (B > RES_MAX_B || k > RES_MAX_K || k > B || k > ctx || ctx >= (1 << 24)) {
        fprintf(stderr, "dhbench: residency: need k <= hot_rows <= %d, k <= %d, k <= ctx < 2^24\n", RES_MAX_B, RES_MAX_K);
        return -1;
    }
    const int P = env->quick ? std::min(batch * layers, 8) : batch * layers;
    /* One selection per launch: the checked steps, the warm-up, and every timed launch. */
    const int warm = 3, steps = check_steps + warm + env->reps * std::max(1, env->b2b);

    /* Selections evolve: each step keeps a random 'keep' fraction of the last and draws the
     * rest fresh, like a decode step's top-k drifting with the context. */
    std::vector<int32_t> sels((size_t)steps * P * k);
    {
        std::vector<std::thread> th;
        int nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
        for (int t = 0; t < nt; t++)
            th.emplace_back([&, t]() {
                std::vector<uint8_t> in((size_t)ctx);
                for (int pr = t; pr < P; pr += nt) {
                    bench_rng rng(0xabcdull + (uint64_t)pr * 7919);
                    std::vector<int32_t> cur = bench_sample_sorted(rng, ctx, k);
                    for (int st = 0; st < steps; st++) {
                        if (st > 0) {
                            std::vector<int32_t> next;
                            std::fill(in.begin(), in.end(), 0);
                            for (int32_t r : cur) if (rng.uniform() < keep) next.push_back(r), in[r] = 1;
                            while ((int)next.size() < k) {
                                int32_t r = (int32_t)rng.below((uint32_t)ctx);
                                if (!in[r]) in[r] = 1, next.push_back(r);
                            }
                            std::sort(next.begin(), next.end());
                            cur.swap(next);
                        }
                        memcpy(&sels[((size_t)st * P + pr) * k], cur.data(), sizeof(int32_t) * k);
                    }
                }
            });
        for (auto &t : th) t.join();
    }
    int32_t *sel_d, *slot_row_d, *slot_last_d, *row_slot_d, *sel_slot_d, *miss_rows_d, *miss_slots_d, *n_miss_d;
    uint8_t *hit_d;
    cudaCheck(cudaMalloc(&sel_d, sels.size() * 4));
    cudaCheck(cudaMemcpy(sel_d, sels.data(), sels.size() * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&slot_row_d, (size_t)P * B * 4));
    cudaCheck(cudaMalloc(&slot_last_d, (size_t)P * B * 4));
    cudaCheck(cudaMalloc(&row_slot_d, (size_t)P * ctx * 4));
    cudaCheck(cudaMalloc(&sel_slot_d, (size_t)P * k * 4));
    cudaCheck(cudaMalloc(&miss_rows_d, (size_t)P * k * 4));
    cudaCheck(cudaMalloc(&miss_slots_d, (size_t)P * k * 4));
    cudaCheck(cudaMalloc(&n_miss_d, (size_t)P * 4));
    cudaCheck(cudaMalloc(&hit_d, (size_t)P * k));
    cudaCheck(cudaMemset(slot_row_d, 0xff, (size_t)P * B * 4));
    cudaCheck(cudaMemset(slot_last_d, 0xff, (size_t)P * B * 4));
    cudaCheck(cudaMemset(row_slot_d, 0xff, (size_t)P * ctx * 4));

    int step = 0;
    const int version = (int)p.num("version", 2);
    if (version != 1 && version != 2) { fprintf(stderr, "dhbench: residency: version %d is not 1 or 2\n", version); return -1; }
    auto launch = [&](int) {
        (version == 1 ? residency_kernel<false> : residency_kernel<true>)<<<P, RES_THREADS>>>(B, k, ctx, step, sel_d + (size_t)step * P * k, slot_row_d,
                                             slot_last_d, row_slot_d, sel_slot_d, hit_d, miss_rows_d,
                                             miss_slots_d, n_miss_d);
        CUDA_LAUNCH_CHECK();
        step++;
    };

    /* Check: the first steps against the CPU LRU for the first check_pairs pairs, every output
     * poisoned before the launch. */
    int ncheck = std::min(P, check_pairs), ok = 1;
    std::vector<kref_lru> lru((size_t)ncheck);
    for (auto &l : lru)
        if (kref_lru_init(&l, B, ctx)) { fprintf(stderr, "dhbench: residency: %s\n", dh_errmsg()); return -1; }
    std::vector<int32_t> g_slot((size_t)P * k), g_mrow((size_t)P * k), g_mslot((size_t)P * k), g_nm(P);
    std::vector<uint8_t> g_hit((size_t)P * k);
    std::vector<int32_t> r_slot(k), r_mrow(k), r_mslot(k);
    std::vector<uint8_t> r_hit(k);
    double miss_sum = 0;
    for (int st = 0; st < check_steps && ok; st++) {
        cudaCheck(cudaMemset(sel_slot_d, 0x7f, (size_t)P * k * 4));
        cudaCheck(cudaMemset(miss_rows_d, 0x7f, (size_t)P * k * 4));
        cudaCheck(cudaMemset(miss_slots_d, 0x7f, (size_t)P * k * 4));
        cudaCheck(cudaMemset(hit_d, 0x7f, (size_t)P * k));
        cudaCheck(cudaMemset(n_miss_d, 0x7f, (size_t)P * 4));
        launch(0);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(g_slot.data(), sel_slot_d, g_slot.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_mrow.data(), miss_rows_d, g_mrow.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_mslot.data(), miss_slots_d, g_mslot.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_hit.data(), hit_d, g_hit.size(), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_nm.data(), n_miss_d, g_nm.size() * 4, cudaMemcpyDeviceToHost));
        for (int pr = 0; pr < ncheck && ok; pr++) {
            int nm;
            if (kref_lru_step(&lru[pr], st, &sels[((size_t)st * P + pr) * k], k, r_slot.data(), r_hit.data(),
                              r_mrow.data(), r_mslot.data(), &nm)) {
                fprintf(stderr, "dhbench: residency: %s\n", dh_errmsg());
                return -1;
            }
            size_t o = (size_t)pr * k;
            if (g_nm[pr] != nm || memcmp(&g_slot[o], r_slot.data(), 4 * (size_t)k) ||
                memcmp(&g_hit[o], r_hit.data(), (size_t)k) || memcmp(&g_mrow[o], r_mrow.data(), 4 * (size_t)nm) ||
                memcmp(&g_mslot[o], r_mslot.data(), 4 * (size_t)nm)) {
                fprintf(stderr, "dhbench: residency: pair %d step %d differs from the CPU LRU (misses %d vs %d)\n",
                        pr, st, g_nm[pr], nm);
                ok = 0;
            }
            if (st == check_steps - 1) miss_sum += nm;
        }
        /* Every pair, checked or not, must have all outputs written. */
        for (int pr = 0; pr < P && ok; pr++) {
            if (g_nm[pr] < 0 || g_nm[pr] > k) { ok = 0; fprintf(stderr, "dhbench: residency: pair %d miss count unwritten\n", pr); }
            for (int i = 0; i < k && ok; i++)
                if (g_slot[(size_t)pr * k + i] < 0 || g_slot[(size_t)pr * k + i] >= B || g_hit[(size_t)pr * k + i] > 1) {
                    ok = 0;
                    fprintf(stderr, "dhbench: residency: pair %d output %d unwritten or out of range\n", pr, i);
                }
        }
    }
    for (auto &l : lru) kref_lru_release(&l);

    bench_record r;
    r.kernel = "residency";
    r.version = std::to_string(version);
    r.dtype = "int32";
    r.batch = batch;
    r.rows = B;
    r.k = k;
    r.ctx = ctx;
    r.queries = P;  /* (request, layer) pairs in one launch */
    r.pattern = "keep" + std::to_string(keep).substr(0, 4) + "_miss" + std::to_string(miss_sum / ncheck / k).substr(0, 5);
    /* Bytes: selections, the two slot arrays read and written, the table lookups and outputs. */
    r.bytes = (double)P * ((double)k * (4 + 4 + 4 + 1) + (double)B * 16 + (double)k * 8 * 0.2);
    r.ceiling_name = "hbm_d2d";
    r.ceiling_value = env->hbm_gbps;
    r.checked = ok;
    if (ok) {
        bench_timing t = bench_time(env, launch, warm);
        bench_take(r, t);
    }
    bench_emit(env, r);
    cudaCheck(cudaFree(sel_d)); cudaCheck(cudaFree(slot_row_d)); cudaCheck(cudaFree(slot_last_d));
    cudaCheck(cudaFree(row_slot_d)); cudaCheck(cudaFree(sel_slot_d)); cudaCheck(cudaFree(miss_rows_d));
    cudaCheck(cudaFree(miss_slots_d)); cudaCheck(cudaFree(n_miss_d)); cudaCheck(cudaFree(hit_d));
    return ok ? 0 : -1;
}
