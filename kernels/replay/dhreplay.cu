/* dhreplay.cu: the GPU replay of decode steps (bin/dhreplay): a trace's selections under a
 * residency policy, run through the project's real kernels at a scale one GPU holds, with
 * every step timed (CUDA events) and its misses counted.
 *
 *   dhreplay --run ID:POLICY:BUDGET:HELDOUT [--run ...] [--model models/glm53.ini]
 *            [--preset glm51-longbench] [--seed 1] [--keyframe 64] [--requests 16]
 *            [--prompt-len 100000] [--steps 32] [--attention-dp 8] [--moe-ep 8]
 *            [--fetch-sms 8] [--attention-version 8] [--topk-version 5] [--indexer-version 5]
 *            [--out FILE.csv] [--dry-run]
 *
 * One decode step, per layer l of the model (group g = the layer's selection group):
 *   if l runs g's indexer: indexer scoring (indexer.cu and indexer_wgmma.cu, --indexer-version, default 5) over
 *     every request's context and top-k (topk.cu, --topk-version, default 5) -- their output is discarded: the
 *     trace's selection stands in for it, since top-k of random keys carries nothing --
 *     then the hot-buffer classification of g for all requests (one block per request,
 *     rp_residency_kernel below) and the compaction of the misses into one list;
 *     the misses of every layer of g are then fetched on a second stream on fetch_sms SMs
 *     (fetch.cu version 5, zero-copy from the pinned host pool into the layer's hot buffer),
 *     as the simulator's IndexShare prefetch does;
 *   q_a, q_b, kv_a projections (cuBLASLt FP8, gemm.cu);
 *   sparse attention over the k selected rows of every request from the layer's hot buffer
 *     (--attention-version, default 8: attention_wgmma.cu; FP8 656-byte rows), after the
 *     layer's fetch;
 *   o_proj, the shared expert (gate_up, down) and, in MoE layers, the local experts that the
 *     instance's tokens touch as one strided-batched GEMM each for gate_up and down.
 * Weights are constants (they set only the cost); the host pool holds every row of every
 * (layer, request) window in the serving layout [layer][request][row].
 *
 * Residency: the classification keeps one state per (request, group) -- layers that share
 * a selection share its slot map, and each layer has its own hot buffer with those slots --
 * and implements the simulator's policy (sim/hb.h) exactly, including the rows a decode step
 * writes: they enter residency without a fetch (kernels/residency.cu leaves them out). The
 * host runs the simulator's own hot buffer on the same deltas (rp_host.h) and every step's
 * GPU miss count of every pair must equal it; two pairs' resident sets are compared row by row
 * at every step. A difference stops the replay (exit 1).
 *
 * Output: the replay CSV of analysis/README.md (config_id,policy,mode,step,measured_us,misses,
 * selected,heldout), misses and selected summed over requests and layers; the command line in
 * a comment. Not replayed: the new rows' KV write and its write-through to the host (the
 * simulator charges it off the critical path), the expert-parallel all-to-all (no peers on
 * one GPU: run the simulator with moe_comm_s = 0), speculative verification. */
#include "kernels/fetch.cu"
#include "kernels/attention.cu"
#include "kernels/indexer.cu"
#include "kernels/topk.cu"
#include "kernels/gather.cu"
#include "kernels/gemm.cu"
#include "kernels/residency.cu"
#include "kernels/block_scan.cuh"

extern "C" {
#include "common/dh_err.h"
#include "kernels/replay/rp_host.h"
}

#include <math.h>
#include <string.h>

#include <string>
#include <vector>

#define RP_THREADS 1024
#define RP_WMAX 64        /* rows one step may write per request */

/* The eviction key of kref_lru_key() (kernels/kref.h), as residency.cu computes it. */
__device__ __forceinline__ uint64_t rp_lru_key(int32_t slot, int32_t row, int32_t last, bool prot)
{
    if (prot) return ~0ull;
    if (row < 0) return (uint64_t)slot;
    return (1ull << 62) | ((uint64_t)(uint32_t)last << 24) | (uint64_t)row;
}

/* ---- residency: the simulator's policy (sim/hb.h) with the written rows ----
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
 * count; n_miss = -1 if the selection does not fit the budget. */
__global__ void __launch_bounds__(RP_THREADS)
rp_residency_kernel(int B, int stride, int k, int win, int32_t step, const int32_t *__restrict__ sel_all,
                    const int32_t *__restrict__ wfirst, const int32_t *__restrict__ wcnt,
                    int32_t *__restrict__ slot_row_all, int32_t *__restrict__ slot_last_all,
                    int32_t *__restrict__ row_slot_all, int32_t *__restrict__ sel_slot_all,
                    int32_t *__restrict__ miss_rows_all, int32_t *__restrict__ miss_slots_all,
                    int32_t *__restrict__ n_miss_all)
{
    extern __shared__ __align__(16) uint8_t rp_smem[];
    uint64_t *keys = (uint64_t *)rp_smem;
    uint8_t *prot = rp_smem + (size_t)B * 8;
    int32_t *victims = (int32_t *)(rp_smem + (size_t)B * 8 + (((size_t)B + 15) & ~(size_t)15));
    __shared__ uint32_t hist[256];
    __shared__ int32_t s_m, s_wsel, s_free, s_unprot, s_digit, s_need;
    const size_t p = blockIdx.x;
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
        keys[s] = rp_lru_key(s, slot_row[s], slot_last[s], prot[s]);
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

    /* Radix select of the V-th smallest key (residency.cu version 1). */
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

/* The per-pair miss lists of one group as one list for the fetch: pool row r * win + row
 * (request r's window in the layer's part of the pool), hot slot r * stride + slot. */
__global__ void __launch_bounds__(1024)
rp_compact_kernel(int R, int k, int win, int stride, const int32_t *__restrict__ n_miss,
                  const int32_t *__restrict__ miss_rows, const int32_t *__restrict__ miss_slots,
                  int64_t *__restrict__ rows_out, int32_t *__restrict__ slots_out)
{
    __shared__ int off[1025];
    if (threadIdx.x == 0) {
        int o = 0;
        for (int r = 0; r < R; r++) off[r] = o, o += max(0, n_miss[r]);
        off[R] = o;
    }
    __syncthreads();
    for (int r = 0; r < R; r++) {
        int n = max(0, n_miss[r]);
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            rows_out[off[r] + j] = (int64_t)r * win + miss_rows[(size_t)r * k + j];
            slots_out[off[r] + j] = r * stride + miss_slots[(size_t)r * k + j];
        }
    }
}

__device__ __forceinline__ uint64_t rp_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Valid e4m3 codes (exponents 3..10, no NaN) and positive floats, from a hash of the index. */
__global__ void rp_fill_e4m3(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = rp_mix(seed ^ i);
        p[i] = (uint8_t)((x & 0x80) | ((3 + (x >> 8) % 8) << 3) | ((x >> 16) & 7));
    }
}

__global__ void rp_fill_f32(float *p, size_t n, uint64_t seed, float lo, float span)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = lo + span * (float)(rp_mix(seed ^ i) >> 40) * (1.0f / 16777216.0f);
}

/* ---- GEMMs ---- */

struct rp_gemm {
    gemm_plan plan;
    int m, n, kdim, batch;
    size_t wbytes;  /* one weight matrix */
    uint8_t *w[2];  /* two copies, alternated by layer so that no layer reads another's from L2 */
};

static void rp_gemm_make(rp_gemm &g, int m, int n, int kdim, int batch, void *ws, size_t ws_bytes)
{
    g.m = m; g.n = n; g.kdim = kdim; g.batch = batch;
    g.wbytes = (size_t)n * kdim;
    if (gemm_plan_make(g.plan, true, m, n, kdim, ws, ws_bytes)) {
        fprintf(stderr, "dhreplay: cuBLASLt has no fp8 algorithm for m %d n %d k %d\n", m, n, kdim);
        exit(1);
    }
    if (batch > 1) {
        /* Strided batch: expert e reads weights e * n * kdim, inputs e * m * kdim, writes e * m * n. */
        int32_t bc = batch;
        int64_t sa = (int64_t)n * kdim, sb = (int64_t)m * kdim, sc = (int64_t)m * n;
        cublasCheck(cublasLtMatrixLayoutSetAttribute(g.plan.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(g.plan.lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(g.plan.lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(g.plan.la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(g.plan.lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(g.plan.lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc));
        cublasLtMatmulPreference_t pref;
        cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g.plan.lt, g.plan.op, g.plan.la, g.plan.lb, g.plan.lc, g.plan.lc,
                                                           pref, 1, &res, &found);
        cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
        if (st != CUBLAS_STATUS_SUCCESS || !found) {
            fprintf(stderr, "dhreplay: cuBLASLt has no batched fp8 algorithm for %d x (m %d n %d k %d)\n", batch, m, n, kdim);
            exit(1);
        }
        g.plan.algo = res.algo;
    }
    for (int c = 0; c < 2; c++) {
        cudaCheck(cudaMalloc(&g.w[c], g.wbytes * batch));
        /* 0x30 is e4m3 0.5: constant weights, the cost does not depend on them. */
        cudaCheck(cudaMemset(g.w[c], 0x30, g.wbytes * batch));
    }
}

static void rp_gemm_run(rp_gemm &g, int layer, const void *x, void *y)
{
    gemm_run(g.plan, g.w[layer & 1], x, y);
}

/* ---- driver ---- */

struct rp_run { std::string id, policy; int budget, heldout; long seed; };

static void usage(void)
{
    fprintf(stderr,
            "usage: dhreplay --run ID:POLICY:BUDGET:HELDOUT[:SEED] [--run ...] [--model FILE] [--preset NAME]\n"
            "                [--seed S] [--keyframe N] [--requests R] [--prompt-len P] [--steps N]\n"
            "                [--attention-dp D] [--moe-ep E] [--fetch-sms S] [--attention-version V]\n"
            "                [--topk-version V] [--indexer-version V] [--out FILE.csv] [--dry-run]\n");
    exit(2);
}

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "dhreplay: %s '%s' is not an integer in [%ld, %ld]\n", opt, s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    const char *model = "models/glm53.ini", *preset = "glm51-longbench", *out = NULL;
    long seed = 1, keyframe = 64, R = 16, prompt = 100000, steps = 32, dp = 8, ep = 8, fetch_sms = 8;
    long attn_version = 8, topk_version = 5, indexer_version = 5;
    std::vector<rp_run> runs;
    int dry_run = 0;
    std::string cmdline = "#";
    for (int i = 0; i < argc; i++) cmdline += std::string(" ") + argv[i];
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a != "--dry-run" && i + 1 >= argc) usage();
        const char *v = a == "--dry-run" ? "" : argv[++i];
        if (a == "--model") model = v;
        else if (a == "--preset") preset = v;
        else if (a == "--out") out = v;
        else if (a == "--seed") seed = parse_long("--seed", v, 0, 1L << 62);
        else if (a == "--keyframe") keyframe = parse_long("--keyframe", v, 1, 1 << 20);
        else if (a == "--requests") R = parse_long("--requests", v, 1, 1024);
        else if (a == "--prompt-len") prompt = parse_long("--prompt-len", v, 1, 1 << 23);
        else if (a == "--steps") steps = parse_long("--steps", v, 1, 1 << 20);
        else if (a == "--attention-dp") dp = parse_long("--attention-dp", v, 1, 1024);
        else if (a == "--moe-ep") ep = parse_long("--moe-ep", v, 1, 1024);
        else if (a == "--fetch-sms") fetch_sms = parse_long("--fetch-sms", v, 1, 1024);
        else if (a == "--attention-version") attn_version = parse_long("--attention-version", v, 1, ATTN_MAX_VERSION);
        else if (a == "--topk-version") topk_version = parse_long("--topk-version", v, 1, TK_MAX_VERSION);
        else if (a == "--indexer-version") indexer_version = parse_long("--indexer-version", v, 2, IX_MAX_VERSION);
        else if (a == "--dry-run") dry_run = 1;
        else if (a == "--run") {
            rp_run r;
            char id[128], pol[64];
            int b, h;
            long sd = -1;
            int nf = sscanf(v, "%127[^:]:%63[^:]:%d:%d:%ld", id, pol, &b, &h, &sd);
            if (nf < 4 || (h != 0 && h != 1) || b < 1 || (nf == 5 && sd < 0)) {
                fprintf(stderr, "dhreplay: --run '%s' is not ID:POLICY:BUDGET:HELDOUT[:SEED] (HELDOUT 0 or 1)\n", v);
                exit(2);
            }
            r.id = id; r.policy = pol; r.budget = b; r.heldout = h; r.seed = sd;
            if (r.policy != "hisparse" && r.policy != "adaptive") {
                fprintf(stderr, "dhreplay: policy '%s' is not hisparse or adaptive\n", pol);
                exit(2);
            }
            runs.push_back(r);
        } else usage();
    }
    if (runs.empty()) usage();
    for (auto &r : runs)
        if (r.seed < 0) r.seed = seed;

    /* --dry-run: the host side alone (no GPU): every step's misses, summed over requests and
     * layers, as the replay would count and check them. */
    if (dry_run) {
        printf("config_id,policy,step,misses,selected\n");
        for (auto &run : runs) {
            rp_host_cfg dc = {model, preset, (uint64_t)run.seed, (uint32_t)keyframe, (uint32_t)R, (uint32_t)prompt,
                              (uint32_t)steps, (uint32_t)run.budget};
            rp_host *h;
            if (rp_host_open(&dc, &h) < 0) dh_die_last("dhreplay");
            const size_t P = (size_t)rp_host_groups(h) * R, k = rp_host_k(h);
            std::vector<int> gl(rp_host_groups(h), 0);
            for (uint32_t l = 0; l < rp_host_layers(h); l++) gl[rp_host_layer_group(h, l)]++;
            std::vector<int32_t> sel(P * k), wf(P), wc(P);
            std::vector<uint32_t> miss(P), nr(R);
            for (long step = 0; step < steps; step++) {
                if (rp_host_step(h, sel.data(), wf.data(), wc.data(), miss.data(), nr.data()) != 0) dh_die_last("dhreplay");
                double m = 0;
                for (size_t p = 0; p < P; p++) m += (double)miss[p] * gl[p / R];
                printf("%s,%s,%ld,%.0f,%.0f\n", run.id.c_str(), run.policy.c_str(), step, m,
                       (double)rp_host_layers(h) * R * k);
            }
            rp_host_close(h);
        }
        return 0;
    }

    /* Shape and sizes from the first run's host side. */
    rp_host_cfg hc = {model, preset, (uint64_t)seed, (uint32_t)keyframe, (uint32_t)R, (uint32_t)prompt,
                      (uint32_t)steps, (uint32_t)runs[0].budget};
    rp_host *h0;
    if (rp_host_open(&hc, &h0) < 0) dh_die_last("dhreplay");
    const int L = (int)rp_host_layers(h0), G = (int)rp_host_groups(h0), k = (int)rp_host_k(h0);
    const int row_bytes = (int)rp_host_row_bytes(h0);
    const int idx_heads = (int)rp_host_indexer_heads(h0);
    std::vector<int> layer_group(L), selects(L), moe(L), group_layers(G, 0);
    for (int l = 0; l < L; l++) {
        layer_group[l] = rp_host_layer_group(h0, l);
        selects[l] = rp_host_layer_selects(h0, l);
        moe[l] = rp_host_layer_moe(h0, l);
        group_layers[layer_group[l]]++;
    }
    const double experts = rp_host_experts(h0), ept = rp_host_experts_per_token(h0);
    const double expert_bytes = rp_host_expert_bytes(h0);
    const uint32_t moe_layers = rp_host_moe_layers(h0);
    rp_host_close(h0);
    if (row_bytes != KREF_ROW_BYTES_FP8 || (idx_heads != 32 && idx_heads != 64)) {
        fprintf(stderr, "dhreplay: model '%s': the replay runs 656-byte FP8 rows and 32 or 64 indexer heads\n", model);
        return 1;
    }
    int Bmax = 0;
    for (auto &r : runs) Bmax = std::max(Bmax, r.budget);
    const int win = (int)(prompt + steps);   /* rows per (layer, request) window */

    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    size_t smem_res = (size_t)Bmax * 8 + (((size_t)Bmax + 15) & ~(size_t)15) + 4 * (size_t)(k + RP_WMAX);
    if (smem_res > prop.sharedMemPerBlockOptin - 4096) {
        fprintf(stderr, "dhreplay: budget %d needs %zu B of shared memory per block (limit %zu)\n", Bmax, smem_res,
                (size_t)prop.sharedMemPerBlockOptin);
        return 1;
    }
    cudaCheck(cudaFuncSetAttribute(rp_residency_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_res));

    /* Host pool: every row of every (layer, request) window, pinned and mapped. */
    size_t pool_bytes = (size_t)L * R * win * row_bytes;
    uint8_t *pool_h, *pool_d;
    cudaError_t pe = cudaHostAlloc(&pool_h, pool_bytes, cudaHostAllocMapped);
    if (pe != cudaSuccess) {
        fprintf(stderr, "dhreplay: cannot pin a %zu-byte host pool: %s\n", pool_bytes, cudaGetErrorString(pe));
        return 1;
    }
    cudaCheck(cudaHostGetDevicePointer((void **)&pool_d, pool_h, 0));

    /* Device state. */
    const size_t P = (size_t)G * R;
    uint8_t *hot;
    size_t hot_bytes = (size_t)L * R * Bmax * row_bytes;
    cudaCheck(cudaMalloc(&hot, hot_bytes));
    cudaCheck(cudaMemset(hot, 0, hot_bytes));
    int32_t *slot_row, *slot_last, *row_slot, *sel_d, *wfirst_d, *wcnt_d, *sel_slot, *miss_rows, *miss_slots, *n_miss;
    cudaCheck(cudaMalloc(&slot_row, P * Bmax * 4));
    cudaCheck(cudaMalloc(&slot_last, P * Bmax * 4));
    cudaCheck(cudaMalloc(&row_slot, P * (size_t)win * 4));
    cudaCheck(cudaMalloc(&sel_d, P * k * 4));
    cudaCheck(cudaMalloc(&wfirst_d, P * 4));
    cudaCheck(cudaMalloc(&wcnt_d, P * 4));
    cudaCheck(cudaMalloc(&sel_slot, P * k * 4));
    cudaCheck(cudaMalloc(&miss_rows, P * k * 4));
    cudaCheck(cudaMalloc(&miss_slots, P * k * 4));
    cudaCheck(cudaMalloc(&n_miss, P * 4));
    int64_t *flat_rows;
    int32_t *flat_slots;
    cudaCheck(cudaMalloc(&flat_rows, P * k * 8));
    cudaCheck(cudaMalloc(&flat_slots, P * k * 4));
    /* Indexer: one set of keys (every indexer layer reads as many bytes; 16 x 100K keys are
     * far beyond L2, so sharing them costs nothing in realism). */
    uint8_t *ikeys, *iq;
    float *iscales, *iw, *scores;
    int32_t *top;
    cudaCheck(cudaMalloc(&ikeys, (size_t)R * win * IX_DIM));
    cudaCheck(cudaMalloc(&iscales, (size_t)R * win * 4));
    cudaCheck(cudaMalloc(&iq, (size_t)R * idx_heads * IX_DIM));
    cudaCheck(cudaMalloc(&iw, (size_t)R * idx_heads * 4));
    cudaCheck(cudaMalloc(&scores, (size_t)R * win * 4));
    cudaCheck(cudaMalloc(&top, (size_t)R * k * 4));
    rp_fill_e4m3<<<1024, 256>>>(ikeys, (size_t)R * win * IX_DIM, 0x1de7);
    rp_fill_e4m3<<<64, 256>>>(iq, (size_t)R * idx_heads * IX_DIM, 0x9e);
    rp_fill_f32<<<1024, 256>>>(iscales, (size_t)R * win, 0x5c, 0.5f, 1.0f);
    rp_fill_f32<<<16, 256>>>(iw, (size_t)R * idx_heads, 0x77, 0.01f, 0.02f);
    CUDA_LAUNCH_CHECK();
    /* Attention. */
    __nv_bfloat16 *q;
    float *aout;
    cudaCheck(cudaMalloc(&q, (size_t)R * AT_H * AT_QK * 2));
    cudaCheck(cudaMemset(q, 0x3c, (size_t)R * AT_H * AT_QK * 2));
    cudaCheck(cudaMalloc(&aout, (size_t)R * AT_H * AT_V * 4));
    attn_scratch sc;
    attn_setup(sc, (size_t)R * AT_H);
    /* GEMMs (FP8 e4m3, shapes of kernels/suites/default.suite: GLM-5.3 hidden 6144, q_lora 2048,
     * 64 heads x 256, kv 576, moe_intermediate 2048). Local experts the instance's tokens touch:
     * E/ep * (1 - (1 - e/E)^(R * dp)), the simulator's expectation, rounded. */
    const int hidden = 6144, qlora = 2048, qdim = 16384, kvdim = 576, inter = 2048;
    const double local = experts / ep;
    const int touched = (int)lround(local * -expm1((double)R * dp * log1p(-ept / experts)));
    const double routed = (double)R * dp * ept / ep;                  /* token-expert pairs on this GPU */
    const int m_exp = std::max(16, (int)ceil(routed / std::max(1, touched) / 16.0) * 16);
    void *ws;
    size_t ws_bytes = 32u << 20;
    cudaCheck(cudaMalloc(&ws, ws_bytes));
    rp_gemm g_qa, g_qb, g_kva, g_o, g_sgu, g_sd, g_egu, g_ed;
    rp_gemm_make(g_qa, (int)R, qlora, hidden, 1, ws, ws_bytes);
    rp_gemm_make(g_qb, (int)R, qdim, qlora, 1, ws, ws_bytes);
    rp_gemm_make(g_kva, (int)R, kvdim, hidden, 1, ws, ws_bytes);
    rp_gemm_make(g_o, (int)R, hidden, qdim, 1, ws, ws_bytes);
    rp_gemm_make(g_sgu, (int)R, 2 * inter, hidden, 1, ws, ws_bytes);
    rp_gemm_make(g_sd, (int)R, hidden, inter, 1, ws, ws_bytes);
    rp_gemm_make(g_egu, m_exp, 2 * inter, hidden, touched, ws, ws_bytes);
    rp_gemm_make(g_ed, m_exp, hidden, inter, touched, ws, ws_bytes);
    uint8_t *x_act;
    void *y_act;
    size_t x_bytes = (size_t)std::max((int)R, m_exp) * std::max(touched, 1) * qdim;
    cudaCheck(cudaMalloc(&x_act, x_bytes));
    cudaCheck(cudaMemset(x_act, 0x30, x_bytes));
    cudaCheck(cudaMalloc(&y_act, (size_t)std::max((int)R, m_exp) * std::max(touched, 1) * qdim * 2));
    const double dense_bytes = (double)(g_qa.wbytes + g_qb.wbytes + g_kva.wbytes + g_o.wbytes + g_sgu.wbytes + g_sd.wbytes);
    const double expert_w = (double)(g_egu.wbytes + g_ed.wbytes);
    /* What the simulator must be told so that it charges the same weights (sim.c:
     * dense = (weights_per_gpu - moe_layers * E/ep * expert_bytes) / layers). */
    const double weights_equiv = dense_bytes * L + (double)moe_layers * local * expert_bytes;
    fprintf(stderr,
            "dhreplay: %d layers, %d groups, k %d, %ld requests x %d rows, pool %.1f GB pinned, hot buffers %.2f GB;\n"
            "  dense weights %.1f MB/layer, %d of %.0f local experts touched (%.1f MB each, model %.1f MB), m %d per expert;\n"
            "  simulator: --set instance.weights_per_gpu_bytes=%.0f --set instance.moe_comm_s=0\n",
            L, G, k, R, win, pool_bytes / 1e9, hot_bytes / 1e9, dense_bytes / 1e6, touched, local, expert_w / 1e6,
            expert_bytes / 1e6, m_exp, weights_equiv);

    cudaStream_t fst;
    cudaCheck(cudaStreamCreateWithFlags(&fst, cudaStreamNonBlocking));
    std::vector<cudaEvent_t> ev_sel(G), ev_fetch(L);
    for (auto &e : ev_sel) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto &e : ev_fetch) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaEvent_t t0, t1;
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));

    FILE *fo = out ? fopen(out, "w") : stdout;
    if (!fo) { fprintf(stderr, "dhreplay: cannot write '%s': %s\n", out, strerror(errno)); return 1; }
    fprintf(fo, "%s\n# device: %s; pool %zu bytes; fetch version 5 on %ld SMs; attention version %ld fp8; indexer version %ld (%d heads) + top-k version %ld\n",
            cmdline.c_str(), prop.name, pool_bytes, fetch_sms, attn_version, indexer_version, idx_heads, topk_version);
    fprintf(fo, "config_id,policy,mode,step,measured_us,misses,selected,heldout\n");

    std::vector<int32_t> sel_h(P * k), wf_h(P), wc_h(P), nm_h(P), sr_h((size_t)Bmax);
    std::vector<uint32_t> miss_h(P), nrows_h(R);
    std::vector<int> group_miss(G);
    const float sm_scale = (float)(1.0 / sqrt((double)KREF_QK_DIM));
    int failed = 0;
    for (auto &run : runs) {
        hc.budget_rows = (uint32_t)run.budget;
        hc.seed = (uint64_t)run.seed;
        rp_host *h;
        if (rp_host_open(&hc, &h) < 0) dh_die_last("dhreplay");
        cudaCheck(cudaMemset(slot_row, 0xff, P * Bmax * 4));
        cudaCheck(cudaMemset(slot_last, 0xff, P * Bmax * 4));
        cudaCheck(cudaMemset(row_slot, 0xff, P * (size_t)win * 4));
        for (long step = 0; step < steps && !failed; step++) {
            int rc = rp_host_step(h, sel_h.data(), wf_h.data(), wc_h.data(), miss_h.data(), nrows_h.data());
            if (rc < 0) dh_die_last("dhreplay");
            for (size_t p = 0; p < P; p++)
                if (wc_h[p] > RP_WMAX) { fprintf(stderr, "dhreplay: %d rows written in one step\n", wc_h[p]); return 1; }
            const int ctx = (int)nrows_h[0];
            for (long r = 1; r < R; r++)
                if ((int)nrows_h[r] != ctx) { fprintf(stderr, "dhreplay: requests are not aligned\n"); return 1; }
            for (int g = 0; g < G; g++) {
                group_miss[g] = 0;
                for (long r = 0; r < R; r++) group_miss[g] += (int)miss_h[(size_t)g * R + r];
            }
            cudaCheck(cudaMemcpy(sel_d, sel_h.data(), P * k * 4, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(wfirst_d, wf_h.data(), P * 4, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(wcnt_d, wc_h.data(), P * 4, cudaMemcpyHostToDevice));
            cudaCheck(cudaDeviceSynchronize());

            cudaCheck(cudaEventRecord(t0, 0));
            for (int l = 0; l < L; l++) {
                const int g = layer_group[l];
                const size_t gp = (size_t)g * R;
                if (selects[l]) {
                    indexer_launch((int)indexer_version, idx_heads, iq, iw, ikeys, iscales, (int)R, ctx, scores, 0);
                    topk_launch((int)topk_version, scores, (int)R, ctx, k, top, 0);
                    rp_residency_kernel<<<(unsigned)R, RP_THREADS, smem_res>>>(
                        run.budget, Bmax, k, win, (int32_t)step, sel_d + gp * k, wfirst_d + gp, wcnt_d + gp,
                        slot_row + gp * Bmax, slot_last + gp * Bmax, row_slot + gp * win, sel_slot + gp * k,
                        miss_rows + gp * k, miss_slots + gp * k, n_miss + gp);
                    CUDA_LAUNCH_CHECK();
                    rp_compact_kernel<<<1, 1024>>>((int)R, k, win, Bmax, n_miss + gp, miss_rows + gp * k,
                                                   miss_slots + gp * k, flat_rows + gp * k, flat_slots + gp * k);
                    CUDA_LAUNCH_CHECK();
                    cudaCheck(cudaEventRecord(ev_sel[g], 0));
                    /* IndexShare prefetch: every layer of the group, on the fetch stream. */
                    cudaCheck(cudaStreamWaitEvent(fst, ev_sel[g], 0));
                    for (int j = l; j < L; j++) {
                        if (layer_group[j] != g) continue;
                        if (j > l && selects[j]) break;
                        if (group_miss[g] > 0) {
                            const uint8_t *pool_l = pool_d + (size_t)j * R * win * row_bytes;
                            uint8_t *hot_l = hot + (size_t)j * R * Bmax * row_bytes;
                            fetch_rows_kernel<uint4, 4, false, 512><<<(unsigned)fetch_sms, 512, 0, fst>>>(
                                pool_l, row_bytes, flat_rows + gp * k, flat_slots + gp * k, group_miss[g], row_bytes,
                                hot_l, row_bytes);
                            CUDA_LAUNCH_CHECK();
                        }
                        cudaCheck(cudaEventRecord(ev_fetch[j], fst));
                    }
                }
                rp_gemm_run(g_qa, l, x_act, y_act);
                rp_gemm_run(g_qb, l, x_act, y_act);
                rp_gemm_run(g_kva, l, x_act, y_act);
                cudaCheck(cudaStreamWaitEvent(0, ev_fetch[l], 0));
                attn_args a;
                memset(&a, 0, sizeof a);
                a.hot = hot + (size_t)l * R * Bmax * row_bytes;
                a.hot_stride = row_bytes;
                a.src = sel_slot + gp * k;
                a.q = q; a.nq = (int)R; a.k = k; a.heads = AT_H; a.format = KREF_ROW_FP8; a.row_bytes = row_bytes;
                a.sm_scale = sm_scale;
                attn_launch((int)attn_version, a, sc, aout, prop.multiProcessorCount, 0);
                rp_gemm_run(g_o, l, x_act, y_act);
                rp_gemm_run(g_sgu, l, x_act, y_act);
                rp_gemm_run(g_sd, l, x_act, y_act);
                if (moe[l] && touched > 0) {
                    const float one = 1.f, zero = 0.f;
                    cublasCheck(cublasLtMatmul(g_egu.plan.lt, g_egu.plan.op, &one, g_egu.w[l & 1], g_egu.plan.la, x_act,
                                               g_egu.plan.lb, &zero, y_act, g_egu.plan.lc, y_act, g_egu.plan.lc,
                                               &g_egu.plan.algo, ws, ws_bytes, 0));
                    cublasCheck(cublasLtMatmul(g_ed.plan.lt, g_ed.plan.op, &one, g_ed.w[l & 1], g_ed.plan.la, x_act,
                                               g_ed.plan.lb, &zero, y_act, g_ed.plan.lc, y_act, g_ed.plan.lc,
                                               &g_ed.plan.algo, ws, ws_bytes, 0));
                }
            }
            cudaCheck(cudaEventRecord(t1, 0));
            cudaCheck(cudaEventSynchronize(t1));
            cudaCheck(cudaGetLastError());
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, t0, t1));

            /* Check: every pair's miss count against the simulator's hot buffer, and the resident
             * set of the first and last pair of group 0 row by row. */
            cudaCheck(cudaMemcpy(nm_h.data(), n_miss, P * 4, cudaMemcpyDeviceToHost));
            double misses = 0;
            for (size_t p = 0; p < P; p++) {
                if (nm_h[p] != (int32_t)miss_h[p]) {
                    fprintf(stderr, "dhreplay: %s step %ld: request %zu group %zu: GPU %d misses, simulator %u\n",
                            run.id.c_str(), step, p % R, p / R, nm_h[p], miss_h[p]);
                    failed = 1;
                }
                misses += (double)miss_h[p] * group_layers[p / R];
            }
            for (size_t p : {(size_t)0, (size_t)R - 1}) {
                cudaCheck(cudaMemcpy(sr_h.data(), slot_row + p * Bmax, (size_t)run.budget * 4, cudaMemcpyDeviceToHost));
                uint32_t n_res = 0;
                for (int s = 0; s < run.budget; s++) {
                    if (sr_h[s] < 0) continue;
                    n_res++;
                    if (!rp_host_resident(h, (uint32_t)p, (uint32_t)sr_h[s])) {
                        fprintf(stderr, "dhreplay: %s step %ld pair %zu: row %d resident on the GPU, not in the simulator\n",
                                run.id.c_str(), step, p, sr_h[s]);
                        failed = 1;
                        break;
                    }
                }
                if (n_res != rp_host_n_resident(h, (uint32_t)p)) {
                    fprintf(stderr, "dhreplay: %s step %ld pair %zu: %u rows resident on the GPU, %u in the simulator\n",
                            run.id.c_str(), step, p, n_res, rp_host_n_resident(h, (uint32_t)p));
                    failed = 1;
                }
            }
            fprintf(fo, "%s,%s,plain,%ld,%.1f,%.0f,%.0f,%d\n", run.id.c_str(), run.policy.c_str(), step, ms * 1000.0,
                    misses, (double)L * R * k, run.heldout);
            fflush(fo);
            if (step % 8 == 0 || step == steps - 1)
                fprintf(stderr, "dhreplay: %s step %ld: %.1f us, %.0f misses\n", run.id.c_str(), step, ms * 1000.0, misses);
        }
        rp_host_close(h);
        if (failed) break;
    }
    if (out) fclose(fo);
    return failed ? 1 : 0;
}
