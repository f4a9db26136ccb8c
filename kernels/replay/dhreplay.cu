/* dhreplay.cu: the GPU replay of decode steps (bin/dhreplay): a trace's selections under a
 * residency policy, run through the project's real kernels at a scale one GPU holds, with
 * every step timed (CUDA events) and its misses counted.
 *
 *   dhreplay --run ID [--run ...] [--configs kernels/replay/configs.ini] [--model models/glm53-replay.ini]
 *            [--preset glm51-longbench] [--seed S] [--keyframe 64] [--requests R]
 *            [--prompt-len P] [--steps N] [--attention-dp 8] [--moe-ep 8]
 *            [--fetch-sms 8] [--attention-version 8] [--topk-version 6] [--indexer-version 5]
 *            [--out FILE.csv] [--dry-run] [--fetch-only] [--fetch-times] [--timeline FILE.csv]
 *            [--fetch-priority default|high]
 *
 * A run is a configuration of kernels/replay/configs.ini (analysis/rcfg.h), the file the
 * simulator's side reads too: its policy, budget, held-out flag, seed and batch (requests,
 * prompt length, steps; the runs of one call share the batch). --seed, --requests,
 * --prompt-len and --steps override the file's values for every run (diagnostics, dry runs).
 *
 * On a GPU that cannot run a default version (attention 8, indexer 5: sm_90a; top-k 6: 176 KB of
 * shared memory; FP8 GEMMs: sm_89), the fastest one it runs takes its place, each named in one
 * line and in the CSV's header (kernels/karch.h; --as-arch sm_XY chooses as on sm_XY).
 *
 * One decode step, per layer l of the model (group g = the layer's selection group):
 *   if l runs g's indexer: indexer scoring (--indexer-version, default 5: the library's,
 *     kernels/lib/indexer_wgmma.cu) over every request's context and top-k (--topk-version, default 6:
 *     kernels/lib/topk.cu; other versions from kernels/versions/)
 *     -- their output is discarded: the trace's selection stands in for it, since top-k of
 *     random keys carries nothing --
 *     then the hot-buffer classification of g for all requests (one block per request,
 *     the library's dhk_residency_launch, kernels/lib/residency.cu) and the compaction of the
 *     misses into one list;
 *     the misses of every layer of g are then fetched on a second stream on fetch_sms SMs
 *     (dhk_fetch_launch: fetch version 5, zero-copy from the pinned host pool into the layer's
 *     hot buffer),
 *     as the simulator's IndexShare prefetch does;
 *   q_a, q_b, kv_a projections (cuBLASLt FP8, dhk_gemm_*);
 *   sparse attention over the k selected rows of every request from the layer's hot buffer
 *     (--attention-version, default 8: the calibrated profile's, models/hw/h200.ini; the library,
 *     kernels/lib/attention.cu, now takes 39 at these shapes: kernels/NOTES.md, "Version 39:
 *     outcome"; FP8 656-byte rows), after the
 *     layer's fetch;
 *   o_proj, the shared expert (gate_up, down) and, in MoE layers, the local experts that the
 *     instance's tokens touch as one strided-batched GEMM each for gate_up and down.
 * Weights are constants (they set only the cost); the host pool holds every row of every
 * (layer, request) window in the serving layout [layer][request][row].
 *
 * Residency: the classification keeps one state per (request, group) -- layers that share
 * a selection share its slot map, and each layer has its own hot buffer with those slots --
 * and implements the simulator's policy (sim/hotbuf.h) exactly, including the rows a decode step
 * writes: they enter residency without a fetch (kernels/versions/residency.cu leaves them out). The
 * host runs the simulator's own hot buffer on the same deltas (rp_host.h) and every step's
 * GPU miss count of every pair must equal it; two pairs' resident sets are compared row by row
 * at every step. A difference stops the replay (exit 1).
 *
 * Verification steps (POLICY hisparse+dflash2 or adaptive+dflash2, CSV mode "verify"; like
 * plain adaptive, adaptive runs at the fixed budget BUDGET, which the simulator's adaptive
 * reaches when HBM holds every optional row, kernels/replay/configs.ini): the simulator's speculative
 * step (sim/specrun.h) with the model's DFlash2 draft (models/drafts/MODEL-dflash2.ini), every
 * request verifying gamma drafts, Q = gamma + 1 queries; the host runs the simulator's own
 * verification, union and acceptance (rp_host_spec_step) and the GPU repeats them: the base
 * position's classification and misses as in a plain step; the union's rows outside the base
 * selection and not resident are fetched beside the misses into a staging area after each
 * layer's hot buffers; the indexer scores Q queries per request and the top-k runs on each;
 * rp_map_kernel gives every query's k rows their slots (hot buffer or staging; a row in
 * neither stops the replay); attention runs R x Q queries; the GEMMs run R x Q tokens, the
 * experts those tokens touch. After the timed step the accepted drafts' positions are applied
 * to the hot buffers (dhk_residency_launch on the pairs that accepted that many; their misses
 * checked against the simulator's) -- untimed, as the simulator charges nothing for it -- and
 * the draft pass is not run (dhcal validate takes the simulator's draft_s out). The streams
 * hold steps x Q + 1 positions (kernels/replay/configs.ini gives the simulator the same).
 *
 * --fetch-only (a diagnostic; CSV mode "plain-fetch-only" / "verify-fetch-only"): the same
 * steps with only the classification, the map and the fetches, the compute stream waiting for
 * each layer's fetch: the fetch of the trace's own misses, timed alone. --skip LIST (modes
 * "plain-skip-..." / "verify-skip-...") leaves the listed parts out of every step (indexer
 * and top-k, attention, dense GEMMs, routed experts, the fetches): what each part adds.
 * --fetch-times adds a row per step (mode "MODE-fetch-busy") whose measured_us is the time the
 * fetch stream spent on the step's fetch kernels (CUDA events around each layer's fetches):
 * against the same with --fetch-only, how much the compute beside it slows the fetch.
 * --timeline FILE.csv writes every step's layers on both streams (CUDA events, microseconds
 * from the step's start): each layer's fetch start and end on the fetch stream with the rows it
 * fetched, and on the compute stream when the layer reached its wait for the fetch, when the
 * wait ended (attention start) and when the layer ended; what the fetch overlapped, layer by
 * layer (kernels/replay/timeline.sh sums it; it implies --fetch-times). --fetch-priority high creates the fetch stream at
 * the device's greatest stream priority, so that its blocks are dispatched before the compute
 * stream's pending ones (default: the same priority as the compute stream).
 *
 * Modules load eagerly (CUDA_MODULE_LOADING=EAGER unless the environment sets it), so that no
 * step times a kernel's first load.
 *
 * Output: the replay CSV of analysis/README.md (config_id,policy,mode,step,measured_us,misses,
 * selected,heldout), misses and selected summed over requests and layers; the command line in
 * a comment. Not replayed: the new rows' KV write and its write-through to the host (the
 * simulator charges it off the critical path), the expert-parallel all-to-all (no peers on
 * one GPU: run the simulator with moe_comm_s = 0), the draft model's pass. */
#include "kernels/dhk.h"     // defines: the library's kernels (dhk_residency_launch, dhk_fetch_launch, dhk_gemm_*, ...)
#include "kernels/bench.cuh" // defines: attn_launch, topk_launch, indexer_launch (any version of kernels/versions/)
#include "kernels/kref.h"

#include <cuda_bf16.h>
#include <errno.h>

extern "C" {
#include "common/dh_err.h"
#include "kernels/replay/rp_host.h"
}
#include "analysis/rcfg.h"

#include <math.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#define RP_WMAX DHK_RES_WMAX   /* rows one step may write per request */

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

/* A verification's attention sources for the R pairs of one group (block r = request r):
 * query t's k rows -> slots of the layer's slot space, src[(r * Q + t) * k + i]. Query 0 is the
 * base selection, whose slots the residency kernel found (sel_slot). A later query's row is in
 * the hot buffer (row_slot after the base's update: slot r * stride + s) or staged: the
 * union's rows outside the base and not resident, xr[r * xcap ..] ascending, n_xr[r] of them,
 * at slots staging + r * xcap + j. A row in neither is counted in *bad (the host's union and
 * the GPU's hot buffer disagree). */
__global__ void __launch_bounds__(256)
rp_map_kernel(int Q, int k, int win, int stride, int staging, int xcap, const int32_t *__restrict__ selq,
              size_t sel_tstride, const int32_t *__restrict__ sel_slot, const int32_t *__restrict__ row_slot_all,
              const int32_t *__restrict__ xr_all, const uint32_t *__restrict__ n_xr, int32_t *__restrict__ src,
              int32_t *__restrict__ bad)
{
    const int r = blockIdx.x;
    const int32_t *row_slot = row_slot_all + (size_t)r * win, *xr = xr_all + (size_t)r * xcap;
    const int nx = (int)n_xr[r];
    int my_bad = 0;
    for (int i = threadIdx.x; i < k; i += blockDim.x) src[(size_t)r * Q * k + i] = sel_slot[(size_t)r * k + i];
    for (int t = 1; t < Q; t++) {
        const int32_t *sel = selq + t * sel_tstride + (size_t)r * k;
        int32_t *out = src + ((size_t)r * Q + t) * k;
        for (int i = threadIdx.x; i < k; i += blockDim.x) {
            const int32_t row = sel[i], s = row_slot[row];
            if (s >= 0) { out[i] = r * stride + s; continue; }
            int lo = 0, hi = nx;
            while (lo < hi) {
                const int mid = (lo + hi) >> 1;
                if (xr[mid] < row) lo = mid + 1;
                else hi = mid;
            }
            if (lo < nx && xr[lo] == row) out[i] = staging + r * xcap + lo;
            else { out[i] = 0; my_bad++; }
        }
    }
    if (my_bad) atomicAdd(bad, my_bad);
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
    dhk_gemm plan;
    int m, n, kdim, batch;
    size_t wbytes;  /* one weight matrix */
    uint8_t *w[2];  /* two copies, alternated by layer so that no layer reads another's from L2 */
};

/* FP8 GEMMs where the GPU has them (kernels/karch.h: compute capability 8.9 on), BF16 before. */
static bool rp_gemm_fp8 = true;

static void rp_gemm_make(rp_gemm &g, int m, int n, int kdim, int batch, void *ws, size_t ws_bytes)
{
    g.m = m; g.n = n; g.kdim = kdim; g.batch = batch;
    g.wbytes = (size_t)n * kdim * (rp_gemm_fp8 ? 1 : 2);
    if (dhk_gemm_make(g.plan, rp_gemm_fp8, m, n, kdim, ws, ws_bytes)) {
        fprintf(stderr, "dhreplay: cuBLASLt has no %s algorithm for m %d n %d k %d\n", rp_gemm_fp8 ? "fp8" : "bf16", m, n, kdim);
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
            fprintf(stderr, "dhreplay: cuBLASLt has no batched %s algorithm for %d x (m %d n %d k %d)\n",
                    rp_gemm_fp8 ? "fp8" : "bf16", batch, m, n, kdim);
            exit(1);
        }
        g.plan.algo = res.algo;
    }
    for (int c = 0; c < 2; c++) {
        cudaCheck(cudaMalloc(&g.w[c], g.wbytes * batch));
        /* 0x30 is e4m3 0.5 (0x3030 a small bf16): constant weights, the cost does not depend on them. */
        cudaCheck(cudaMemset(g.w[c], 0x30, g.wbytes * batch));
    }
}

static void rp_gemm_run(rp_gemm &g, int layer, const void *x, void *y)
{
    dhk_gemm_run(g.plan, g.w[layer & 1], x, y);
}

/* ---- driver ---- */

struct rp_run { std::string id, policy; int budget, heldout; long seed; bool spec; };

/* Parts of a step the diagnostics leave out (--skip, --fetch-only): the indexer and top-k, the
 * attention, the dense GEMMs (projections, shared expert), the routed experts, the fetches
 * (the attention then reads whatever the slots hold: only the time means anything). */
enum { RP_SKIP_INDEXER = 1, RP_SKIP_ATTENTION = 2, RP_SKIP_DENSE = 4, RP_SKIP_EXPERTS = 8, RP_SKIP_COMPUTE = 15,
       RP_SKIP_FETCH = 16 };

/* The DFlash2 draft of a model file: models/drafts/<its [model] name>-dflash2.ini, as bin/dhsim
 * finds a mode's default draft (models/glm53-replay.ini is model glm53: glm53-dflash2.ini). */
static std::string rp_draft_path(const char *model)
{
    std::string m = model, base = m.substr(m.find_last_of('/') + 1), sec, line;
    if (base.size() > 4 && base.compare(base.size() - 4, 4, ".ini") == 0) base.resize(base.size() - 4);
    if (FILE *f = fopen(model, "r")) {
        char buf[512];
        while (fgets(buf, sizeof buf, f)) {
            line = buf;
            line.erase(0, line.find_first_not_of(" \t"));
            line.erase(line.find_last_not_of(" \t\r\n") + 1);
            if (!line.empty() && line[0] == '[') { sec = line; continue; }
            if (sec != "[model]" || line.compare(0, 4, "name") != 0) continue;
            size_t eq = line.find('=');
            if (eq == std::string::npos || line.find_first_not_of(" \t", 4) != eq) continue;
            std::string v = line.substr(eq + 1);
            v.erase(0, v.find_first_not_of(" \t"));
            v = v.substr(0, v.find_first_of(" \t;#"));
            if (!v.empty()) base = v;
            break;
        }
        fclose(f);
    }
    std::string dir = m.find('/') == std::string::npos ? "" : m.substr(0, m.find_last_of('/') + 1);
    return dir + "drafts/" + base + "-dflash2.ini";
}

/* Host-side buffers of one speculative step (rp_host.h). */
struct rp_spec_host {
    std::vector<int32_t> sel, wf, wc, xr, cwf, cwc;
    std::vector<uint32_t> miss, n_xr, cmiss, acc, nrows, pos;
    rp_spec_out o;
    void size(size_t P, size_t R, size_t k, size_t gamma)
    {
        sel.resize(P * (gamma + 1) * k); wf.resize(P); wc.resize(P); xr.resize(P * gamma * k); n_xr.resize(P);
        cwf.resize(P * gamma); cwc.resize(P * gamma); cmiss.resize(P * gamma); miss.resize(P);
        acc.resize(R); nrows.resize(R); pos.resize(R);
        o = {sel.data(), wf.data(), wc.data(), miss.data(), xr.data(), n_xr.data(), cwf.data(), cwc.data(),
             cmiss.data(), acc.data(), nrows.data(), pos.data()};
    }
};

static void usage(void)
{
    fprintf(stderr,
            "usage: dhreplay --run ID [--run ...] [--configs FILE] [--model FILE] [--preset NAME]\n"
            "                [--seed S] [--keyframe N] [--requests R] [--prompt-len P] [--steps N]\n"
            "                [--attention-dp D] [--moe-ep E] [--fetch-sms S] [--attention-version V]\n"
            "                [--topk-version V] [--indexer-version V] [--as-arch sm_XY] [--out FILE.csv] [--dry-run] [--fetch-only] [--fetch-times]\n"
            "                [--timeline FILE.csv] [--fetch-priority default|high] [--skip indexer,attention,dense,experts,fetch]\n"
            "  ID: a configuration of FILE (default " RCFG_DEFAULT_PATH ")\n");
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

/* The command line (usage() above); the batch of the runs once resolve() has read them. */
struct rp_opts {
    const char *model = "models/glm53-replay.ini", *preset = "glm51-longbench", *out = NULL;
    long seed = 1, keyframe = 64, R = 16, prompt = 100000, steps = 32, dp = 8, ep = 8, fetch_sms = 8;
    long attn_version = 8, topk_version = 6, indexer_version = 5;
    int given_attn = 0, given_topk = 0, given_indexer = 0;   /* else the GPU's best (choose_versions) */
    const char *as_arch = NULL;  /* --as-arch: choose as on that architecture (kernels/karch.h) */
    std::vector<std::string> run_ids;
    const char *configs = NULL;
    int given_seed = 0, given_R = 0, given_prompt = 0, given_steps = 0; /* overrides of the file's values */
    int dry_run = 0, skip = 0;   /* skip: RP_SKIP_* parts left out of every step (diagnostics) */
    int fetch_times = 0;         /* --fetch-times: each step's fetch kernels timed on their stream */
    const char *timeline = NULL; /* --timeline: every layer's events on both streams */
    int fetch_high = 0;          /* --fetch-priority high */
    std::string skip_name;
    std::string cmdline = "#";

    void parse(int argc, char **argv);
    /* --skip LIST: a comma-separated list of parts; the CSV's mode says which were left out. */
    void parse_skip(const char *v);
    /* The runs from the configurations file; a bad file or an unknown ID is an option error. */
    std::vector<rp_run> resolve();
};

void rp_opts::parse(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) cmdline += std::string(" ") + argv[i];
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const bool flag = a == "--dry-run" || a == "--fetch-only" || a == "--fetch-times";
        if (!flag && i + 1 >= argc) usage();
        const char *v = flag ? "" : argv[++i];
        if (a == "--model") model = v;
        else if (a == "--preset") preset = v;
        else if (a == "--out") out = v;
        else if (a == "--seed") seed = parse_long("--seed", v, 0, 1L << 62), given_seed = 1;
        else if (a == "--keyframe") keyframe = parse_long("--keyframe", v, 1, 1 << 20);
        else if (a == "--requests") R = parse_long("--requests", v, 1, 1024), given_R = 1;
        else if (a == "--prompt-len") prompt = parse_long("--prompt-len", v, 1, 1 << 23), given_prompt = 1;
        else if (a == "--steps") steps = parse_long("--steps", v, 1, 1 << 20), given_steps = 1;
        else if (a == "--configs") configs = v;
        else if (a == "--attention-dp") dp = parse_long("--attention-dp", v, 1, 1024);
        else if (a == "--moe-ep") ep = parse_long("--moe-ep", v, 1, 1024);
        else if (a == "--fetch-sms") fetch_sms = parse_long("--fetch-sms", v, 1, 1024);
        else if (a == "--attention-version") attn_version = parse_long("--attention-version", v, 1, ATTN_MAX_VERSION), given_attn = 1;
        else if (a == "--topk-version") topk_version = parse_long("--topk-version", v, 1, TK_MAX_VERSION), given_topk = 1;
        else if (a == "--indexer-version") indexer_version = parse_long("--indexer-version", v, 1, IX_MAX_VERSION), given_indexer = 1;
        else if (a == "--as-arch") {
            char why[256];
            int cc;
            if (karch_parse(v, &cc, why, sizeof why)) {
                fprintf(stderr, "dhreplay: --as-arch: %s\n", why);
                exit(2);
            }
            as_arch = v;
        }
        else if (a == "--dry-run") dry_run = 1;
        else if (a == "--fetch-only") skip = RP_SKIP_COMPUTE, skip_name = "fetch-only";
        else if (a == "--fetch-times") fetch_times = 1;
        else if (a == "--timeline") timeline = v;
        else if (a == "--fetch-priority") {
            if (strcmp(v, "high") && strcmp(v, "default")) {
                fprintf(stderr, "dhreplay: --fetch-priority '%s' is not default or high\n", v);
                exit(2);
            }
            fetch_high = !strcmp(v, "high");
        }
        else if (a == "--skip") parse_skip(v);
        else if (a == "--run") run_ids.push_back(v);
        else usage();
    }
    if (run_ids.empty()) usage();
}

void rp_opts::parse_skip(const char *v)
{
    std::string list = v, part;
    size_t pos = 0;
    skip_name = "skip";
    while (pos <= list.size()) {
        size_t e = list.find(',', pos);
        part = list.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
        int bit = part == "indexer" ? RP_SKIP_INDEXER : part == "attention" ? RP_SKIP_ATTENTION
                : part == "dense" ? RP_SKIP_DENSE : part == "experts" ? RP_SKIP_EXPERTS
                : part == "fetch" ? RP_SKIP_FETCH : 0;
        if (!bit) {
            fprintf(stderr, "dhreplay: --skip '%s': '%s' is not indexer, attention, dense, experts or fetch\n", v,
                    part.c_str());
            exit(2);
        }
        skip |= bit;
        skip_name += "-" + part;
        if (e == std::string::npos) break;
        pos = e + 1;
    }
}

std::vector<rp_run> rp_opts::resolve()
{
    std::vector<rp_run> runs;
    rcfg_set rs;
    if (rcfg_load(configs, &rs) < 0) {
        fprintf(stderr, "dhreplay: %s\n", dh_errmsg());
        exit(2);
    }
    for (size_t i = 0; i < run_ids.size(); i++) {
        const rcfg_config *c = rcfg_find(&rs, run_ids[i].c_str());
        if (!c) {
            fprintf(stderr, "dhreplay: --run: %s\n", dh_errmsg());
            exit(2);
        }
        const rcfg_config *c0 = rcfg_find(&rs, run_ids[0].c_str());
        if ((!given_R && c->requests != c0->requests) || (!given_prompt && c->prompt_len != c0->prompt_len) ||
            (!given_steps && c->steps != c0->steps)) {
            fprintf(stderr, "dhreplay: --run %s and %s: configurations of different batches run in separate calls\n",
                    c0->id, c->id);
            exit(2);
        }
        rp_run r;
        r.id = c->id; r.policy = c->policy; r.budget = (int)c->budget; r.heldout = c->heldout;
        r.seed = given_seed ? seed : (long)c->seed; r.spec = c->spec != 0;
        runs.push_back(r);
        if (i == 0) {
            if (!given_R) R = c->requests;
            if (!given_prompt) prompt = c->prompt_len;
            if (!given_steps) steps = c->steps;
        }
    }
    rcfg_release(&rs);
    return runs;
}

/* Verification steps: each request's stream must hold gamma + 1 positions per step (the
 * simulator's workload.output_len of the same run, kernels/replay/configs.ini); gamma is the
 * draft's (0 when no run verifies). */
static long rp_gamma(const rp_opts &o, const std::vector<rp_run> &runs, const std::string &draft)
{
    for (auto &r : runs)
        if (r.spec) {
            rp_host_cfg dc = {o.model, o.preset, (uint64_t)r.seed, (uint32_t)o.keyframe, 1, (uint32_t)o.prompt, 1,
                              (uint32_t)r.budget, draft.c_str(), 2};
            rp_host *hg;
            if (rp_host_open(&dc, &hg) < 0) dh_die_last("dhreplay");
            const long gamma = rp_host_gamma(hg);
            rp_host_close(hg);
            return gamma;
        }
    return 0;
}

/* The runs of one call on the GPU: the options, the device's buffers, kernels' plans, events
 * and host staging (set up once for the largest budget), and one method per part of a step. */
struct rp_replay : rp_opts {
    std::vector<rp_run> runs;
    std::string draft;
    long gamma = 0, out_len = 0;
    FILE *fo = stdout, *ftl = NULL;
    rp_host_cfg hc;
    int L = 0, G = 0, k = 0, row_bytes = 0, idx_heads = 0;
    std::vector<int> layer_group, selects, moe, group_layers;
    double experts = 0, ept = 0, expert_bytes = 0;
    uint32_t moe_layers = 0;
    int Bmax = 0, win = 0;   /* win: rows per (layer, request) window */
    cudaDeviceProp prop;
    size_t smem_res = 0;
    /* Host pool: every row of every (layer, request) window, pinned and mapped. */
    size_t pool_bytes = 0;
    uint8_t *pool_h = nullptr, *pool_d = nullptr;
    /* Device state. Per layer, the slot space is the hot buffers' R x Bmax slots and, for
     * verification steps, a staging area of gamma x k slots per request after them. */
    int Q = 1, xcap = 0;   /* queries per request of a verification step; staging slots per request */
    size_t P = 0, LS = 0;  /* pairs (group, request); slots per layer */
    uint8_t *hot = nullptr;
    size_t hot_bytes = 0;
    int32_t *slot_row, *slot_last, *row_slot, *sel_d, *wfirst_d, *wcnt_d, *sel_slot, *miss_rows, *miss_slots, *n_miss;
    int64_t *flat_rows;
    int32_t *flat_slots;
    /* Verification: attention sources, the union's staged rows (per pair, and as one fetch list
     * per group), the commit's active pairs, the map's disagreement count. */
    int32_t *src_q = nullptr, *xr_d = nullptr, *xs_slots = nullptr, *active_d = nullptr, *bad_d = nullptr;
    uint32_t *nxr_d = nullptr;
    int64_t *xs_rows = nullptr;
    /* Indexer keys and queries (setup()). */
    uint8_t *ikeys, *iq;
    float *iscales, *iw, *scores;
    int32_t *top;
    /* Attention. */
    __nv_bfloat16 *q;
    float *aout;
    attn_scratch sc;
    /* GEMMs, one set per tokens per step (R plain, R x Q verifying). */
    void *ws;
    size_t ws_bytes = 32u << 20;
    struct rp_layer_gemms {
        rp_gemm qa, qb, kva, o, sgu, sd, egu, ed;
        int tokens, touched, m_exp;
    } gm[2];
    uint8_t *x_act;
    void *y_act;
    cudaStream_t fst;
    std::vector<cudaEvent_t> ev_sel, ev_fetch, ev_fs, ev_fe, ev_pw, ev_as, ev_le;
    std::vector<int> fetch_rows;
    std::vector<float> tl_ms;   /* per layer: fetch start, end, wait, attention, end */
    std::vector<char> fetch_timed;
    float fetch_busy_ms = 0;
    cudaEvent_t t0, t1, t2;
    /* Host staging of a step. */
    std::vector<int32_t> sel_h, wf_h, wc_h, nm_h, sr_h;
    std::vector<uint32_t> miss_h, nrows_h;
    std::vector<int> group_miss, group_stage, group_stage_off;
    rp_spec_host sp;
    std::vector<int32_t> selq_h, xs_slots_h, act_h;
    std::vector<int64_t> xs_rows_h;
    float sm_scale = 0;
    int failed = 0;
    int32_t stamp = 0;   /* residency steps so far: the LRU stamp, one per hot-buffer step of a pair */

    /* The output files, opened before any CUDA call. */
    void open_outputs();
    /* Shapes from the first run's host side, every device buffer, plan and event, the CSV
     * headers; 1 when the model or budget does not fit the replay. */
    int setup();
    /* The kernel versions this GPU runs (kernels/karch.h): a version given on the command line
     * must run here (else one line, exit 2); the defaults fall back, in order of speed on the
     * H200, from the library's (attention 8, indexer 5, top-k 6: Hopper) to what the GPU runs,
     * each fallback named in one line. 1 when nothing runs. */
    int choose_versions();
    karch_dev kdev;
    int kforced = 0;
    void setup_buffers();
    void setup_gemms();
    void setup_events();
    float run_layers(const rp_run &run, int ctx, int Qn, rp_layer_gemms &e, bool with_union);
    void write_step(const rp_run &run, const std::string &mode, long step, float ms, double misses, double selected);
    void check_misses(const rp_run &run, long step, const char *what, const uint32_t *want, const int32_t *act);
    void check_resident(const rp_run &run, long step, rp_host *h);
    /* One plain or verification step of run; 1 on a replay error (the message printed). */
    int plain_step(const rp_run &run, rp_host *h, long step, float &ms, double &misses);
    int verify_step(const rp_run &run, rp_host *h, long step, float &ms, double &misses, double &commit_ms);
    /* Every step of run; 1 on a replay error. */
    int run_one(const rp_run &run);
};

/* --dry-run: the host side alone (no GPU): every step's misses, summed over requests and
 * layers, as the replay would count and check them. */
static int rp_dry_run(const rp_opts &o, const std::vector<rp_run> &runs, const std::string &draft, long gamma,
                      long out_len)
{
    const char *model = o.model, *preset = o.preset;
    const long keyframe = o.keyframe, R = o.R, prompt = o.prompt, steps = o.steps;
    printf("config_id,policy,step,misses,selected\n");
    for (auto &run : runs) {
        rp_host_cfg dc = {model, preset, (uint64_t)run.seed, (uint32_t)keyframe, (uint32_t)R, (uint32_t)prompt,
                          (uint32_t)steps, (uint32_t)run.budget, run.spec ? draft.c_str() : NULL,
                          (uint32_t)(run.spec ? out_len : 0)};
        rp_host *h;
        if (rp_host_open(&dc, &h) < 0) dh_die_last("dhreplay");
        const size_t P = (size_t)rp_host_groups(h) * R, k = rp_host_k(h);
        std::vector<int> gl(rp_host_groups(h), 0);
        for (uint32_t l = 0; l < rp_host_layers(h); l++) gl[rp_host_layer_group(h, l)]++;
        if (run.spec) {
            /* Rows fetched: the base's misses and the union's staged rows, per layer. */
            rp_spec_host sh;
            sh.size(P, R, k, gamma);
            for (long step = 0; step < steps; step++) {
                if (rp_host_spec_step(h, &sh.o) != 0) dh_die_last("dhreplay");
                double m = 0;
                for (size_t p = 0; p < P; p++) m += (double)(sh.miss[p] + sh.n_xr[p]) * gl[p / R];
                printf("%s,%s,%ld,%.0f,%.0f\n", run.id.c_str(), run.policy.c_str(), step, m,
                       (double)rp_host_layers(h) * R * k * (gamma + 1));
            }
            rp_host_close(h);
            continue;
        }
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

void rp_replay::open_outputs()
{
    auto open_out = [](const char *opt, const char *path) {
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "dhreplay: %s: cannot write '%s': %s\n", opt, path, strerror(errno));
            exit(2);
        }
        return f;
    };
    if (out) fo = open_out("--out", out);
    if (timeline) ftl = open_out("--timeline", timeline);
}

int rp_replay::choose_versions()
{
    kdev = bench_karch_dev(prop, as_arch, "dhreplay", &kforced);
    const int qn = gamma ? (int)gamma + 1 : 1;
    struct pick { const char *kernel; long *version; int given; std::vector<int> cand; };
    std::vector<pick> picks = {{"attention", &attn_version, given_attn, {8, 5, 4, 3, 2, 1}},
                               {"indexer", &indexer_version, given_indexer, {5, 4, 1}},
                               {"topk", &topk_version, given_topk, {6, 5, 4, 3, 2, 1}}};
    auto need = [&](const char *kernel, int v) -> size_t {
        if (!strcmp(kernel, "attention")) return attn_smem_need(v, KREF_ROW_FP8);
        if (!strcmp(kernel, "indexer")) return indexer_smem_need(v, idx_heads, qn);
        return topk_smem_need(v);
    };
    for (auto &pk : picks) {
        char why[320];
        if (pk.given) {
            if (!karch_check(pk.kernel, (int)*pk.version, NULL, need(pk.kernel, (int)*pk.version), &kdev, why, sizeof why)) {
                fprintf(stderr, "dhreplay: --%s-version: %s\n", pk.kernel, why);
                exit(2);
            }
            continue;
        }
        std::vector<size_t> needs;
        for (int v : pk.cand) needs.push_back(need(pk.kernel, v));
        const int v = karch_pick(pk.kernel, pk.cand.data(), needs.data(), (int)pk.cand.size(), NULL, &kdev, why, sizeof why);
        if (v < 0) {
            fprintf(stderr, "dhreplay: no %s version runs on %s: %s\n", pk.kernel, prop.name, why);
            return 1;
        }
        if (v != pk.cand[0]) {
            karch_check(pk.kernel, pk.cand[0], NULL, needs[0], &kdev, why, sizeof why);
            fprintf(stderr, "dhreplay: %s version %d in place of %d: %s\n", pk.kernel, v, pk.cand[0], why);
        }
        *pk.version = v;
    }
    if (indexer_version == 5 && gamma && !dhk_indexer_supports(idx_heads, qn)) {
        fprintf(stderr, "dhreplay: model '%s': indexer version 5 has no build for %d heads x %d queries\n", model,
                idx_heads, qn);
        return 1;
    }
    char why[320];
    rp_gemm_fp8 = karch_check("gemm", 1, "fp8", 0, &kdev, why, sizeof why);
    if (!rp_gemm_fp8) fprintf(stderr, "dhreplay: BF16 GEMMs in place of FP8: %s\n", why);
    return 0;
}

int rp_replay::setup()
{
    open_outputs();
    /* Shape and sizes from the first run's host side. */
    hc = {model, preset, (uint64_t)seed, (uint32_t)keyframe, (uint32_t)R, (uint32_t)prompt, (uint32_t)steps,
          (uint32_t)runs[0].budget};
    rp_host *h0;
    if (rp_host_open(&hc, &h0) < 0) dh_die_last("dhreplay");
    L = (int)rp_host_layers(h0), G = (int)rp_host_groups(h0), k = (int)rp_host_k(h0);
    row_bytes = (int)rp_host_row_bytes(h0);
    idx_heads = (int)rp_host_indexer_heads(h0);
    layer_group.resize(L), selects.resize(L), moe.resize(L), group_layers.assign(G, 0);
    for (int l = 0; l < L; l++) {
        layer_group[l] = rp_host_layer_group(h0, l);
        selects[l] = rp_host_layer_selects(h0, l);
        moe[l] = rp_host_layer_moe(h0, l);
        group_layers[layer_group[l]]++;
    }
    experts = rp_host_experts(h0), ept = rp_host_experts_per_token(h0);
    expert_bytes = rp_host_expert_bytes(h0);
    moe_layers = rp_host_moe_layers(h0);
    rp_host_close(h0);
    if (row_bytes != KREF_ROW_BYTES_FP8 || (idx_heads != 32 && idx_heads != 64)) {
        fprintf(stderr, "dhreplay: model '%s': the replay runs 656-byte FP8 rows and 32 or 64 indexer heads\n", model);
        return 1;
    }
    for (auto &r : runs) Bmax = std::max(Bmax, r.budget);
    win = (int)(prompt + out_len);

    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    if (choose_versions()) return 1;
    smem_res = dhk_residency_smem_bytes(Bmax, k);
    if (smem_res > prop.sharedMemPerBlockOptin - 4096) {
        fprintf(stderr, "dhreplay: budget %d needs %zu B of shared memory per block (limit %zu)\n", Bmax, smem_res,
                (size_t)prop.sharedMemPerBlockOptin);
        return 1;
    }
    dhk_residency_setup(smem_res);

    pool_bytes = (size_t)L * R * win * row_bytes;
    cudaError_t pe = cudaHostAlloc(&pool_h, pool_bytes, cudaHostAllocMapped);
    if (pe != cudaSuccess) {
        fprintf(stderr, "dhreplay: cannot pin a %zu-byte host pool: %s\n", pool_bytes, cudaGetErrorString(pe));
        return 1;
    }
    cudaCheck(cudaHostGetDevicePointer((void **)&pool_d, pool_h, 0));
    setup_buffers();
    setup_gemms();
    setup_events();

    fprintf(fo, "%s\n# device: %s (sm_%d%s); pool %zu bytes; fetch version 5 on %ld SMs; attention version %ld fp8; indexer version %ld (%d heads) + top-k version %ld; GEMMs %s\n",
            cmdline.c_str(), prop.name, prop.major * 10 + prop.minor, kforced ? (", versions chosen as on sm_" + std::to_string(kdev.cc)).c_str() : "",
            pool_bytes, fetch_sms, attn_version, indexer_version, idx_heads, topk_version, rp_gemm_fp8 ? "fp8" : "bf16");
    if (gamma)
        fprintf(fo, "# verify: DFlash2 draft %s, gamma %ld (%d queries per request), output length %ld; the draft pass and the commit of accepted drafts are not timed\n",
                draft.c_str(), gamma, Q, out_len);
    fprintf(fo, "config_id,policy,mode,step,measured_us,misses,selected,heldout\n");
    if (ftl)
        fprintf(ftl, "%s\n# fetch stream priority %s; microseconds from the step's start\n"
                     "config_id,mode,step,layer,fetch_rows,fetch_start_us,fetch_end_us,wait_us,attn_start_us,layer_end_us\n",
                cmdline.c_str(), fetch_high ? "high (the device's greatest)" : "default");

    sel_h.resize(P * k), wf_h.resize(P), wc_h.resize(P), nm_h.resize(P), sr_h.resize((size_t)Bmax);
    miss_h.resize(P), nrows_h.resize(R);
    group_miss.resize(G), group_stage.resize(G), group_stage_off.resize(G);
    if (gamma) {
        sp.size(P, R, k, gamma);
        selq_h.resize(P * Q * k);
        xs_rows_h.resize(P * xcap);
        xs_slots_h.resize(P * xcap);
        act_h.resize(P * Q);
    }
    sm_scale = (float)(1.0 / sqrt((double)KREF_QK_DIM));
    return 0;
}

void rp_replay::setup_buffers()
{
    Q = (int)gamma + 1;
    xcap = (int)gamma * k;
    P = (size_t)G * R;
    LS = (size_t)R * Bmax + (size_t)R * xcap;
    hot_bytes = (size_t)L * LS * row_bytes;
    cudaCheck(cudaMalloc(&hot, hot_bytes));
    cudaCheck(cudaMemset(hot, 0, hot_bytes));
    cudaCheck(cudaMalloc(&slot_row, P * Bmax * 4));
    cudaCheck(cudaMalloc(&slot_last, P * Bmax * 4));
    cudaCheck(cudaMalloc(&row_slot, P * (size_t)win * 4));
    cudaCheck(cudaMalloc(&sel_d, P * Q * k * 4));
    cudaCheck(cudaMalloc(&wfirst_d, P * Q * 4));
    cudaCheck(cudaMalloc(&wcnt_d, P * Q * 4));
    cudaCheck(cudaMalloc(&sel_slot, P * k * 4));
    cudaCheck(cudaMalloc(&miss_rows, P * k * 4));
    cudaCheck(cudaMalloc(&miss_slots, P * k * 4));
    cudaCheck(cudaMalloc(&n_miss, P * 4));
    cudaCheck(cudaMalloc(&flat_rows, P * k * 8));
    cudaCheck(cudaMalloc(&flat_slots, P * k * 4));
    if (gamma) {
        cudaCheck(cudaMalloc(&src_q, P * Q * k * 4));
        cudaCheck(cudaMalloc(&xr_d, P * xcap * 4));
        cudaCheck(cudaMalloc(&nxr_d, P * 4));
        cudaCheck(cudaMalloc(&xs_rows, P * xcap * 8));
        cudaCheck(cudaMalloc(&xs_slots, P * xcap * 4));
        cudaCheck(cudaMalloc(&active_d, P * Q * 4));
        cudaCheck(cudaMalloc(&bad_d, 4));
    }
    /* Indexer: one set of keys (every indexer layer reads as many bytes; 16 x 100K keys are
     * far beyond L2, so sharing them costs nothing in realism); Q query tokens per request in
     * verification steps. */
    cudaCheck(cudaMalloc(&ikeys, (size_t)R * win * DHK_IX_DIM));
    cudaCheck(cudaMalloc(&iscales, (size_t)R * win * 4));
    cudaCheck(cudaMalloc(&iq, (size_t)R * Q * idx_heads * DHK_IX_DIM));
    cudaCheck(cudaMalloc(&iw, (size_t)R * Q * idx_heads * 4));
    cudaCheck(cudaMalloc(&scores, (size_t)R * Q * win * 4));
    cudaCheck(cudaMalloc(&top, (size_t)R * Q * k * 4));
    rp_fill_e4m3<<<1024, 256>>>(ikeys, (size_t)R * win * DHK_IX_DIM, 0x1de7);
    rp_fill_e4m3<<<64, 256>>>(iq, (size_t)R * Q * idx_heads * DHK_IX_DIM, 0x9e);
    rp_fill_f32<<<1024, 256>>>(iscales, (size_t)R * win, 0x5c, 0.5f, 1.0f);
    rp_fill_f32<<<16, 256>>>(iw, (size_t)R * Q * idx_heads, 0x77, 0.01f, 0.02f);
    CUDA_LAUNCH_CHECK();
    /* Attention. */
    cudaCheck(cudaMalloc(&q, (size_t)R * Q * AT_H * AT_QK * 2));
    cudaCheck(cudaMemset(q, 0x3c, (size_t)R * Q * AT_H * AT_QK * 2));
    cudaCheck(cudaMalloc(&aout, (size_t)R * Q * AT_H * AT_V * 4));
    attn_setup(sc, (size_t)R * Q * AT_H);
}

void rp_replay::setup_gemms()
{
    /* GEMMs (FP8 e4m3, shapes of kernels/suites/default.suite: GLM-5.3 hidden 6144, q_lora 2048,
     * 64 heads x 256, kv 576, moe_intermediate 2048), one set per tokens per step (R plain, R x Q
     * verifying). Local experts the instance's tokens touch: E/ep * (1 - (1 - e/E)^(tokens * dp)),
     * the simulator's expectation, rounded. */
    const int hidden = 6144, qlora = 2048, qdim = 16384, kvdim = 576, inter = 2048;
    const double local = experts / ep;
    cudaCheck(cudaMalloc(&ws, ws_bytes));
    size_t x_bytes = 0;
    for (int i = 0; i < (gamma ? 2 : 1); i++) {
        rp_layer_gemms &e = gm[i];
        e.tokens = (int)R * (i ? Q : 1);
        e.touched = (int)lround(local * -expm1((double)e.tokens * dp * log1p(-ept / experts)));
        const double routed = (double)e.tokens * dp * ept / ep;   /* token-expert pairs on this GPU */
        e.m_exp = std::max(16, (int)ceil(routed / std::max(1, e.touched) / 16.0) * 16);
        rp_gemm_make(e.qa, e.tokens, qlora, hidden, 1, ws, ws_bytes);
        rp_gemm_make(e.qb, e.tokens, qdim, qlora, 1, ws, ws_bytes);
        rp_gemm_make(e.kva, e.tokens, kvdim, hidden, 1, ws, ws_bytes);
        rp_gemm_make(e.o, e.tokens, hidden, qdim, 1, ws, ws_bytes);
        rp_gemm_make(e.sgu, e.tokens, 2 * inter, hidden, 1, ws, ws_bytes);
        rp_gemm_make(e.sd, e.tokens, hidden, inter, 1, ws, ws_bytes);
        rp_gemm_make(e.egu, e.m_exp, 2 * inter, hidden, e.touched, ws, ws_bytes);
        rp_gemm_make(e.ed, e.m_exp, hidden, inter, e.touched, ws, ws_bytes);
        x_bytes = std::max(x_bytes, (size_t)std::max(e.tokens, e.m_exp) * std::max(e.touched, 1) * qdim * (rp_gemm_fp8 ? 1 : 2));
    }
    cudaCheck(cudaMalloc(&x_act, x_bytes));
    cudaCheck(cudaMemset(x_act, 0x30, x_bytes));
    cudaCheck(cudaMalloc(&y_act, x_bytes * 2));
    const rp_layer_gemms &g0 = gm[0];
    const double dense_bytes = (double)(g0.qa.wbytes + g0.qb.wbytes + g0.kva.wbytes + g0.o.wbytes + g0.sgu.wbytes + g0.sd.wbytes);
    const double expert_w = (double)(g0.egu.wbytes + g0.ed.wbytes);
    /* What the simulator must be told so that it charges the same weights (sim.c:
     * dense = (weights_per_gpu - moe_layers * E/ep * expert_bytes) / layers). */
    const double weights_equiv = dense_bytes * L + (double)moe_layers * local * expert_bytes;
    fprintf(stderr,
            "dhreplay: %d layers, %d groups, k %d, %ld requests x %d rows, pool %.1f GB pinned, hot buffers %.2f GB;\n"
            "  dense weights %.1f MB/layer, %d of %.0f local experts touched (%.1f MB each, model %.1f MB), m %d per expert;\n"
            "  simulator: --set instance.weights_per_gpu_bytes=%.0f --set instance.moe_comm_s=0\n",
            L, G, k, R, win, pool_bytes / 1e9, hot_bytes / 1e9, dense_bytes / 1e6, g0.touched, local, expert_w / 1e6,
            expert_bytes / 1e6, g0.m_exp, weights_equiv);
    if (gamma)
        fprintf(stderr, "  verification steps: %d queries per request, %d of %.0f local experts touched, m %d per expert\n", Q,
                gm[1].touched, local, gm[1].m_exp);
}

void rp_replay::setup_events()
{
    int prio_least = 0, prio_greatest = 0;   /* least is 0: the default priority */
    cudaCheck(cudaDeviceGetStreamPriorityRange(&prio_least, &prio_greatest));
    cudaCheck(cudaStreamCreateWithPriority(&fst, cudaStreamNonBlocking, fetch_high ? prio_greatest : 0));
    if (timeline) fetch_times = 1;
    ev_sel.resize(G), ev_fetch.resize(L);
    for (auto &e : ev_sel) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto &e : ev_fetch) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    /* --fetch-times: events around each layer's fetches on the fetch stream; their sum is the
     * time the fetch stream spent fetching, beside whatever the compute stream ran. */
    ev_fs.resize(fetch_times ? L : 0), ev_fe.resize(fetch_times ? L : 0);
    for (auto &e : ev_fs) cudaCheck(cudaEventCreate(&e));
    for (auto &e : ev_fe) cudaCheck(cudaEventCreate(&e));
    /* --timeline: on the compute stream, each layer's arrival at its fetch wait, the wait's end
     * and the layer's end; the rows each layer's fetch moved. */
    ev_pw.resize(timeline ? L : 0), ev_as.resize(timeline ? L : 0), ev_le.resize(timeline ? L : 0);
    for (auto *v : {&ev_pw, &ev_as, &ev_le})
        for (auto &e : *v) cudaCheck(cudaEventCreate(&e));
    fetch_rows.resize(L);
    tl_ms.resize(timeline ? (size_t)L * 5 : 0);
    fetch_timed.resize(L);
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));
    cudaCheck(cudaEventCreate(&t2));
}

/* One decode step's layers on the GPU, timed (ms, CUDA events): Qn queries per request (1
 * plain), the GEMMs of e, attention sources src (per group: R x Qn x k slots; plain: the
 * residency's sel_slot), and with a union the staged rows fetched beside the misses. The
 * step's residency launches take the next LRU stamp. */
float rp_replay::run_layers(const rp_run &run, int ctx, int Qn, rp_layer_gemms &e, bool with_union)
{
    cudaCheck(cudaEventRecord(t0, 0));
    std::fill(fetch_timed.begin(), fetch_timed.end(), 0);
    for (int l = 0; l < L; l++) {
        const int g = layer_group[l];
        const size_t gp = (size_t)g * R;
        if (selects[l]) {
            if (!(skip & RP_SKIP_INDEXER)) {
                indexer_launch((int)indexer_version, idx_heads, iq, iw, ikeys, iscales, (int)R, ctx, scores, 0, 0, Qn);
                topk_launch((int)topk_version, scores, (int)R * Qn, ctx, k, top, 0);
            }
            dhk_residency_launch((int)R, run.budget, Bmax, k, win, stamp, nullptr, sel_d + gp * k, wfirst_d + gp,
                                 wcnt_d + gp, slot_row + gp * Bmax, slot_last + gp * Bmax, row_slot + gp * win,
                                 sel_slot + gp * k, miss_rows + gp * k, miss_slots + gp * k, n_miss + gp, smem_res, 0);
            rp_compact_kernel<<<1, 1024>>>((int)R, k, win, Bmax, n_miss + gp, miss_rows + gp * k,
                                           miss_slots + gp * k, flat_rows + gp * k, flat_slots + gp * k);
            CUDA_LAUNCH_CHECK();
            if (with_union) {
                rp_map_kernel<<<(unsigned)R, 256>>>(Qn, k, win, Bmax, (int)R * Bmax, xcap, sel_d + gp * k, P * k,
                                                    sel_slot + gp * k, row_slot + gp * win, xr_d + gp * xcap,
                                                    nxr_d + gp, src_q + gp * Qn * k, bad_d);
                CUDA_LAUNCH_CHECK();
            }
            cudaCheck(cudaEventRecord(ev_sel[g], 0));
            /* IndexShare prefetch: every layer of the group, on the fetch stream; a
             * verification's staged union rows beside the misses. */
            cudaCheck(cudaStreamWaitEvent(fst, ev_sel[g], 0));
            for (int j = l; j < L; j++) {
                if (layer_group[j] != g) continue;
                if (j > l && selects[j]) break;
                const uint8_t *pool_l = pool_d + (size_t)j * R * win * row_bytes;
                uint8_t *hot_l = hot + (size_t)j * LS * row_bytes;
                const bool any = !(skip & RP_SKIP_FETCH) && (group_miss[g] > 0 || (with_union && group_stage[g] > 0));
                if (fetch_times && any) {
                    cudaCheck(cudaEventRecord(ev_fs[j], fst));
                    fetch_timed[j] = 1;
                }
                if (group_miss[g] > 0 && !(skip & RP_SKIP_FETCH)) {
                    dhk_fetch_launch(pool_l, row_bytes, flat_rows + gp * k, flat_slots + gp * k, group_miss[g],
                                     row_bytes, hot_l, row_bytes, (int)fetch_sms, fst);
                }
                if (with_union && group_stage[g] > 0 && !(skip & RP_SKIP_FETCH)) {
                    dhk_fetch_launch(pool_l, row_bytes, xs_rows + group_stage_off[g], xs_slots + group_stage_off[g],
                                     group_stage[g], row_bytes, hot_l, row_bytes, (int)fetch_sms, fst);
                }
                if (fetch_timed[j]) cudaCheck(cudaEventRecord(ev_fe[j], fst));
                fetch_rows[j] = any ? group_miss[g] + (with_union ? group_stage[g] : 0) : 0;
                cudaCheck(cudaEventRecord(ev_fetch[j], fst));
            }
        }
        if (!(skip & RP_SKIP_DENSE)) {
            rp_gemm_run(e.qa, l, x_act, y_act);
            rp_gemm_run(e.qb, l, x_act, y_act);
            rp_gemm_run(e.kva, l, x_act, y_act);
        }
        /* The attention waits for its layer's fetch (with --fetch-only: the step does). */
        if (timeline) cudaCheck(cudaEventRecord(ev_pw[l], 0));
        cudaCheck(cudaStreamWaitEvent(0, ev_fetch[l], 0));
        if (timeline) cudaCheck(cudaEventRecord(ev_as[l], 0));
        if (skip == RP_SKIP_COMPUTE) {
            if (timeline) cudaCheck(cudaEventRecord(ev_le[l], 0));
            continue;
        }
        if (!(skip & RP_SKIP_ATTENTION)) {
            attn_args a;
            memset(&a, 0, sizeof a);
            a.hot = hot + (size_t)l * LS * row_bytes;
            a.hot_stride = row_bytes;
            a.src = with_union ? src_q + gp * Qn * k : sel_slot + gp * k;
            a.q = q; a.nq = (int)R * Qn; a.k = k; a.heads = AT_H; a.format = KREF_ROW_FP8; a.row_bytes = row_bytes;
            a.sm_scale = sm_scale;
            attn_launch((int)attn_version, a, sc, aout, prop.multiProcessorCount, 0);
        }
        if (!(skip & RP_SKIP_DENSE)) {
            rp_gemm_run(e.o, l, x_act, y_act);
            rp_gemm_run(e.sgu, l, x_act, y_act);
            rp_gemm_run(e.sd, l, x_act, y_act);
        }
        if (moe[l] && e.touched > 0 && !(skip & RP_SKIP_EXPERTS)) {
            const float one = 1.f, zero = 0.f;
            cublasCheck(cublasLtMatmul(e.egu.plan.lt, e.egu.plan.op, &one, e.egu.w[l & 1], e.egu.plan.la, x_act,
                                       e.egu.plan.lb, &zero, y_act, e.egu.plan.lc, y_act, e.egu.plan.lc,
                                       &e.egu.plan.algo, ws, ws_bytes, 0));
            cublasCheck(cublasLtMatmul(e.ed.plan.lt, e.ed.plan.op, &one, e.ed.w[l & 1], e.ed.plan.la, x_act,
                                       e.ed.plan.lb, &zero, y_act, e.ed.plan.lc, y_act, e.ed.plan.lc,
                                       &e.ed.plan.algo, ws, ws_bytes, 0));
        }
        if (timeline) cudaCheck(cudaEventRecord(ev_le[l], 0));
    }
    cudaCheck(cudaEventRecord(t1, 0));
    cudaCheck(cudaEventSynchronize(t1));
    cudaCheck(cudaGetLastError());
    float elapsed = 0;
    cudaCheck(cudaEventElapsedTime(&elapsed, t0, t1));
    fetch_busy_ms = 0;
    for (int j = 0; j < L; j++) {
        if (!fetch_timed[j]) continue;
        float f = 0;
        cudaCheck(cudaEventElapsedTime(&f, ev_fs[j], ev_fe[j]));
        fetch_busy_ms += f;
    }
    for (int j = 0; j < (timeline ? L : 0); j++) {
        float *t = &tl_ms[(size_t)j * 5];
        t[0] = t[1] = -1;
        if (fetch_timed[j]) {
            cudaCheck(cudaEventElapsedTime(&t[0], t0, ev_fs[j]));
            cudaCheck(cudaEventElapsedTime(&t[1], t0, ev_fe[j]));
        }
        cudaCheck(cudaEventElapsedTime(&t[2], t0, ev_pw[j]));
        cudaCheck(cudaEventElapsedTime(&t[3], t0, ev_as[j]));
        cudaCheck(cudaEventElapsedTime(&t[4], t0, ev_le[j]));
    }
    stamp++;
    return elapsed;
}

/* One step's CSV line, and with --fetch-times its fetch kernels' time as mode MODE-fetch-busy. */
void rp_replay::write_step(const rp_run &run, const std::string &mode, long step, float ms, double misses, double selected)
{
    fprintf(fo, "%s,%s,%s,%ld,%.1f,%.0f,%.0f,%d\n", run.id.c_str(), run.policy.c_str(), mode.c_str(), step,
            ms * 1000.0, misses, selected, run.heldout);
    if (fetch_times)
        fprintf(fo, "%s,%s,%s-fetch-busy,%ld,%.1f,%.0f,%.0f,%d\n", run.id.c_str(), run.policy.c_str(), mode.c_str(),
                step, fetch_busy_ms * 1000.0, misses, selected, run.heldout);
    for (int j = 0; j < (timeline ? L : 0); j++) {
        const float *t = &tl_ms[(size_t)j * 5];
        fprintf(ftl, "%s,%s,%ld,%d,%d,", run.id.c_str(), mode.c_str(), step, j, fetch_rows[j]);
        if (t[0] >= 0) fprintf(ftl, "%.1f,%.1f,", t[0] * 1000.0, t[1] * 1000.0);
        else fputs(",,", ftl);
        fprintf(ftl, "%.1f,%.1f,%.1f\n", t[2] * 1000.0, t[3] * 1000.0, t[4] * 1000.0);
    }
}

/* Every pair's miss count (n_miss on the GPU) against the host's want[p] (the simulator's
 * hot buffer); pairs with act[p] == 0 skipped. */
void rp_replay::check_misses(const rp_run &run, long step, const char *what, const uint32_t *want, const int32_t *act)
{
    cudaCheck(cudaMemcpy(nm_h.data(), n_miss, P * 4, cudaMemcpyDeviceToHost));
    for (size_t p = 0; p < P; p++) {
        if (act && !act[p]) continue;
        if (nm_h[p] != (int32_t)want[p]) {
            fprintf(stderr, "dhreplay: %s step %ld%s: request %zu group %zu: GPU %d misses, simulator %u\n",
                    run.id.c_str(), step, what, p % R, p / R, nm_h[p], want[p]);
            failed = 1;
        }
    }
}

/* The resident set of the first and last pair of group 0, row by row, against the host. */
void rp_replay::check_resident(const rp_run &run, long step, rp_host *h)
{
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
}

int rp_replay::plain_step(const rp_run &run, rp_host *h, long step, float &ms, double &misses)
{
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

    ms = run_layers(run, ctx, 1, gm[0], false);

    /* Check: every pair's miss count against the simulator's hot buffer, and the
     * resident set of the first and last pair of group 0 row by row. */
    check_misses(run, step, "", miss_h.data(), nullptr);
    for (size_t p = 0; p < P; p++) misses += (double)miss_h[p] * group_layers[p / R];
    check_resident(run, step, h);
    write_step(run, skip ? "plain-" + skip_name : "plain", step, ms, misses, (double)L * R * k);
    return 0;
}

int rp_replay::verify_step(const rp_run &run, rp_host *h, long step, float &ms, double &misses, double &commit_ms)
{
    /* A verification step: the base position's residency and misses as a plain step,
     * the union's other rows staged, Q queries per request through the indexer,
     * top-k and attention, GEMMs over R x Q tokens; then (not timed) the accepted
     * drafts' positions applied to the hot buffers, as the simulator commits them. */
    int rc = rp_host_spec_step(h, &sp.o);
    if (rc < 0) dh_die_last("dhreplay");
    int ctx = 0;
    for (long r = 0; r < R; r++) ctx = std::max(ctx, (int)sp.nrows[r]);
    /* The union and the commit write at most gamma + 1 positions' rows per request. */
    for (size_t p = 0; p < P; p++)
        if (sp.wc[p] > RP_WMAX) { fprintf(stderr, "dhreplay: %d rows written in one step\n", sp.wc[p]); return 1; }
    /* Selections as [t][pair][k]; staged rows as one fetch list per group. */
    for (size_t p = 0; p < P; p++)
        for (int t = 0; t < Q; t++)
            memcpy(&selq_h[((size_t)t * P + p) * k], &sp.sel[(p * Q + t) * k], (size_t)k * 4);
    int off = 0;
    for (int g = 0; g < G; g++) {
        group_miss[g] = 0;
        group_stage_off[g] = off;
        for (long r = 0; r < R; r++) {
            const size_t p = (size_t)g * R + r;
            group_miss[g] += (int)sp.miss[p];
            for (uint32_t j = 0; j < sp.n_xr[p]; j++) {
                xs_rows_h[off] = (int64_t)r * win + sp.xr[p * xcap + j];
                xs_slots_h[off] = (int32_t)(R * Bmax + r * xcap + j);
                off++;
            }
        }
        group_stage[g] = off - group_stage_off[g];
    }
    cudaCheck(cudaMemcpy(sel_d, selq_h.data(), P * Q * k * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(wfirst_d, sp.wf.data(), P * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(wcnt_d, sp.wc.data(), P * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(xr_d, sp.xr.data(), P * xcap * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(nxr_d, sp.n_xr.data(), P * 4, cudaMemcpyHostToDevice));
    if (off) {
        cudaCheck(cudaMemcpy(xs_rows, xs_rows_h.data(), (size_t)off * 8, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(xs_slots, xs_slots_h.data(), (size_t)off * 4, cudaMemcpyHostToDevice));
    }
    cudaCheck(cudaMemset(bad_d, 0, 4));
    cudaCheck(cudaDeviceSynchronize());

    ms = run_layers(run, ctx, Q, gm[1], true);
    check_misses(run, step, " (base)", sp.miss.data(), nullptr);
    int32_t bad = 0;
    cudaCheck(cudaMemcpy(&bad, bad_d, 4, cudaMemcpyDeviceToHost));
    if (bad) {
        fprintf(stderr, "dhreplay: %s step %ld: %d rows of the drafts' selections neither resident nor staged\n",
                run.id.c_str(), step, bad);
        failed = 1;
    }
    /* Commit: accepted draft t of every request that accepted t or more. */
    cudaCheck(cudaEventRecord(t1, 0));
    std::vector<uint32_t> want(P);
    std::vector<int32_t> cwf(P), cwc(P);
    for (int t = 1; t < Q && !failed; t++) {
        int any = 0;
        for (size_t p = 0; p < P; p++) {
            act_h[p] = (int)sp.acc[p % R] >= t;
            any |= act_h[p];
            const size_t i = p * gamma + t - 1;
            want[p] = act_h[p] ? sp.cmiss[i] : 0;
            cwf[p] = act_h[p] ? sp.cwf[i] : 0;
            cwc[p] = act_h[p] ? sp.cwc[i] : 0;
            if (cwc[p] > RP_WMAX) { fprintf(stderr, "dhreplay: %d rows written in one step\n", cwc[p]); return 1; }
        }
        if (!any) break;
        cudaCheck(cudaMemcpy(active_d, act_h.data(), P * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(wfirst_d, cwf.data(), P * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(wcnt_d, cwc.data(), P * 4, cudaMemcpyHostToDevice));
        for (int g = 0; g < G; g++) {
            const size_t gp = (size_t)g * R;
            dhk_residency_launch((int)R, run.budget, Bmax, k, win, stamp, active_d + gp,
                                 sel_d + (size_t)t * P * k + gp * k, wfirst_d + gp, wcnt_d + gp,
                                 slot_row + gp * Bmax, slot_last + gp * Bmax, row_slot + gp * win,
                                 sel_slot + gp * k, miss_rows + gp * k, miss_slots + gp * k, n_miss + gp,
                                 smem_res, 0);
        }
        stamp++;
        cudaCheck(cudaDeviceSynchronize());
        char what[32];
        snprintf(what, sizeof what, " (commit %d)", t);
        check_misses(run, step, what, want.data(), act_h.data());
    }
    cudaCheck(cudaEventRecord(t2, 0));
    cudaCheck(cudaEventSynchronize(t2));
    float cm = 0;
    cudaCheck(cudaEventElapsedTime(&cm, t1, t2));
    commit_ms = cm;
    for (size_t p = 0; p < P; p++) misses += (double)(sp.miss[p] + sp.n_xr[p]) * group_layers[p / R];
    check_resident(run, step, h);
    write_step(run, skip ? "verify-" + skip_name : "verify", step, ms, misses, (double)L * R * k * Q);
    return 0;
}

int rp_replay::run_one(const rp_run &run)
{
    hc.budget_rows = (uint32_t)run.budget;
    hc.seed = (uint64_t)run.seed;
    hc.draft_path = run.spec ? draft.c_str() : NULL;
    hc.output_len = (uint32_t)(run.spec ? out_len : 0);
    rp_host *h;
    if (rp_host_open(&hc, &h) < 0) dh_die_last("dhreplay");
    cudaCheck(cudaMemset(slot_row, 0xff, P * Bmax * 4));
    cudaCheck(cudaMemset(slot_last, 0xff, P * Bmax * 4));
    cudaCheck(cudaMemset(row_slot, 0xff, P * (size_t)win * 4));
    stamp = 0;
    for (long step = 0; step < steps && !failed; step++) {
        double misses = 0, commit_ms = 0;
        float ms = 0;
        if (!run.spec ? plain_step(run, h, step, ms, misses) : verify_step(run, h, step, ms, misses, commit_ms)) return 1;
        fflush(fo);
        if (step % 8 == 0 || step == steps - 1) {
            fprintf(stderr, "dhreplay: %s step %ld: %.1f us, %.0f misses", run.id.c_str(), step, ms * 1000.0, misses);
            if (run.spec) fprintf(stderr, " (commit, not timed: %.1f us)", commit_ms * 1000.0);
            fputc('\n', stderr);
        }
    }
    rp_host_close(h);
    return failed;
}

int main(int argc, char **argv)
{
    /* Every kernel's module loaded when the context is created, not at its first launch (CUDA
     * 12's lazy default): otherwise step 0 also times the loading (11 ms of a 64 x 25K step,
     * measurements/h200/replay-glm53-64x25k-loading.csv). The user's own setting stands. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    rp_replay rp;
    rp.parse(argc, argv);
    rp.runs = rp.resolve();
    rp.draft = rp_draft_path(rp.model);
    rp.gamma = rp_gamma(rp, rp.runs, rp.draft);
    rp.out_len = rp.gamma ? rp.steps * (rp.gamma + 1) + 1 : rp.steps;
    if (rp.dry_run) return rp_dry_run(rp, rp.runs, rp.draft, rp.gamma, rp.out_len);
    if (rp.setup()) return 1;
    int rc = 0;
    for (auto &run : rp.runs)
        if ((rc = rp.run_one(run))) break;
    if (rp.out) fclose(rp.fo);
    if (rp.ftl) fclose(rp.ftl);
    return rc || rp.failed ? 1 : 0;
}
