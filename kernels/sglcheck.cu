/* sglcheck.cu: bin/dhsglcheck, the GPU check of SGLang's hot-buffer kernel
 * (dhk_sglang_residency_launch, kernels/lib/residency.cu) against the same rule
 * on the CPU (sglr_step_cpu, kernels/lib/sglang_rule.cuh, itself checked against
 * the simulator's sim/sglhb.c by tests/test_sglang_rule.c).
 *
 *   make bin/dhsglcheck && bin/dhsglcheck [PAIRS B K CONTEXT STEPS]   (default 64 4096 2048 100000 50)
 *
 * PAIRS streams (a sliding recent window, re-referenced older rows and a few
 * fresh ones, from a fixed LCG: deterministic), half starting filled (staging)
 * and half empty (direct), the top-k in a shuffled order; every step launches
 * the kernel on all pairs and compares every output (misses, their rows and
 * slots in top-k order, evictions, the slot of each selected row, the whole
 * LRU) with the CPU, then prints "All results match" and the kernel's median
 * time per launch. A mismatch prints the first pair and step and exits 1. */
#include "kernels/dhk.h"
#include "kernels/lib/sglang_rule.cuh"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static uint64_t lcg = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { lcg = lcg * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(lcg >> 33) % n; }

int main(int argc, char **argv)
{
    const int P = argc > 1 ? atoi(argv[1]) : 64, B = argc > 2 ? atoi(argv[2]) : 4096, K = argc > 3 ? atoi(argv[3]) : 2048;
    const int ctx = argc > 4 ? atoi(argv[4]) : 100000, steps = argc > 5 ? atoi(argv[5]) : 50;
    if (P < 1 || K < 1 || B < K || ctx <= B || steps < 1) {
        fprintf(stderr, "dhsglcheck: need PAIRS >= 1, B >= K >= 1, CONTEXT > B, STEPS >= 1\n");
        return 2;
    }
    const int win = ctx + steps + 1;
    std::vector<int32_t> lru((size_t)P * B), slot_row((size_t)P * B), row_slot((size_t)P * win), topk((size_t)P * K);
    std::vector<uint32_t> row_mark((size_t)P * win);
    std::vector<int32_t> n_sel(P), nrows(P), evict(B), lru2(B), sel_slot((size_t)P * K), mr((size_t)P * K), ms((size_t)P * K);
    std::vector<int32_t> g_sel_slot((size_t)P * K), g_mr((size_t)P * K), g_ms((size_t)P * K), g_nm(P), g_ne(P),
        g_lru((size_t)P * B);
    std::vector<std::vector<int32_t>> cur(P);
    for (int p = 0; p < P; p++)
        sglr_pair_init(&lru[(size_t)p * B], &slot_row[(size_t)p * B], &row_slot[(size_t)p * win], &row_mark[(size_t)p * win],
                       B, win, p % 2 == 0);
    int32_t *d_lru, *d_slot_row, *d_row_slot, *d_topk, *d_n_sel, *d_nrows, *d_sel_slot, *d_mr, *d_ms, *d_nm, *d_ne;
    uint32_t *d_row_mark;
    cudaCheck(cudaMalloc(&d_lru, lru.size() * 4));
    cudaCheck(cudaMalloc(&d_slot_row, slot_row.size() * 4));
    cudaCheck(cudaMalloc(&d_row_slot, row_slot.size() * 4));
    cudaCheck(cudaMalloc(&d_row_mark, row_mark.size() * 4));
    cudaCheck(cudaMalloc(&d_topk, topk.size() * 4));
    cudaCheck(cudaMalloc(&d_n_sel, P * 4));
    cudaCheck(cudaMalloc(&d_nrows, P * 4));
    cudaCheck(cudaMalloc(&d_sel_slot, topk.size() * 4));
    cudaCheck(cudaMalloc(&d_mr, topk.size() * 4));
    cudaCheck(cudaMalloc(&d_ms, topk.size() * 4));
    cudaCheck(cudaMalloc(&d_nm, P * 4));
    cudaCheck(cudaMalloc(&d_ne, P * 4));
    cudaCheck(cudaMemcpy(d_lru, lru.data(), lru.size() * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_slot_row, slot_row.data(), slot_row.size() * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_row_slot, row_slot.data(), row_slot.size() * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_row_mark, row_mark.data(), row_mark.size() * 4, cudaMemcpyHostToDevice));
    const size_t smem = dhk_sglang_residency_smem_bytes(B);
    dhk_sglang_residency_setup(smem);
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    std::vector<float> ms_per;
    long total_miss = 0;
    for (int t = 0; t < steps; t++) {
        /* The selections: keep most of the last one, replace some by recent rows, some by older ones. */
        for (int p = 0; p < P; p++) {
            nrows[p] = ctx + t;
            std::vector<int32_t> &c = cur[p];
            std::vector<uint8_t> in(nrows[p], 0);
            if (c.empty()) while ((int)c.size() < K) { int32_t r = (int32_t)rnd(nrows[p]); if (!in[r]) in[r] = 1, c.push_back(r); }
            else {
                for (int32_t r : c) in[r] = 1;
                int churn = K / 20;
                for (int i = 0; i < churn; i++) {
                    int j = (int)rnd(K);
                    int32_t r = rnd(4) ? nrows[p] - 1 - (int32_t)rnd(4 * K) : (int32_t)rnd(nrows[p]);
                    if (r < 0 || in[r]) continue;
                    in[c[j]] = 0;
                    c[j] = r;
                    in[r] = 1;
                }
                if (!in[nrows[p] - 1]) { int j = (int)rnd(K); in[c[j]] = 0; c[j] = nrows[p] - 1; }
            }
            for (int i = K - 1; i > 0; i--) std::swap(c[i], c[rnd(i + 1)]);
            n_sel[p] = K;
            memcpy(&topk[(size_t)p * K], c.data(), K * 4);
        }
        cudaCheck(cudaMemcpy(d_topk, topk.data(), topk.size() * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_n_sel, n_sel.data(), P * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_nrows, nrows.data(), P * 4, cudaMemcpyHostToDevice));
        const uint32_t stamp = (uint32_t)t + 1;
        cudaCheck(cudaEventRecord(e0));
        dhk_sglang_residency_launch(P, B, K, win, stamp, d_topk, d_n_sel, d_nrows, d_lru, d_slot_row, d_row_slot, d_row_mark,
                                    d_sel_slot, d_mr, d_ms, d_nm, d_ne, smem, 0);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        float msec;
        cudaCheck(cudaEventElapsedTime(&msec, e0, e1));
        ms_per.push_back(msec);
        cudaCheck(cudaMemcpy(g_sel_slot.data(), d_sel_slot, topk.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_mr.data(), d_mr, topk.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_ms.data(), d_ms, topk.size() * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_nm.data(), d_nm, P * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_ne.data(), d_ne, P * 4, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(g_lru.data(), d_lru, lru.size() * 4, cudaMemcpyDeviceToHost));
        for (int p = 0; p < P; p++) {
            int ev;
            size_t o = (size_t)p * K;
            int m = sglr_step_cpu(B, stamp, nrows[p], &topk[o], K, &lru[(size_t)p * B], &slot_row[(size_t)p * B],
                                  &row_slot[(size_t)p * win], &row_mark[(size_t)p * win], evict.data(), lru2.data(),
                                  &sel_slot[o], &mr[o], &ms[o], &ev);
            total_miss += m;
            bool ok = g_nm[p] == m && g_ne[p] == ev &&
                      !memcmp(&g_mr[o], &mr[o], (size_t)m * 4) && !memcmp(&g_ms[o], &ms[o], (size_t)m * 4) &&
                      !memcmp(&g_sel_slot[o], &sel_slot[o], (size_t)K * 4) &&
                      !memcmp(&g_lru[(size_t)p * B], &lru[(size_t)p * B], (size_t)B * 4);
            if (!ok) {
                fprintf(stderr, "dhsglcheck: pair %d, step %d: the kernel differs from the CPU (misses %d / %d, evicted %d / %d)\n",
                        p, t, g_nm[p], m, g_ne[p], ev);
                return 1;
            }
        }
    }
    std::sort(ms_per.begin() + (steps > 1), ms_per.end());
    float med = ms_per[(steps > 1) + (ms_per.size() - (steps > 1)) / 2];
    printf("All results match (%d pairs x %d steps, B %d, k %d, context %d, %ld misses).\n", P, steps, B, K, ctx, total_miss);
    printf("dhk_sglang_residency: median %.1f us per launch (steps after the first)\n", med * 1e3);
    return 0;
}
