/* dhbench.cu: the kernel microbenchmark driver (bin/dhbench).
 *
 *   dhbench --suite NAME [--only KERNEL] [--out DIR] [--reps N] [--b2b N] [--timing kernel|graph] [--quick] [--as-arch sm_XY]
 *   dhbench --kernel KERNEL [key=v1,v2,... ...] [--out DIR] [--reps N] [--b2b N] [--timing kernel|graph] [--quick] [--as-arch sm_XY]
 *
 * A suite is a text file (kernels/suites/NAME.suite, or a path): one grid per line, a kernel
 * name then key=value lists; every combination is one grid point. Each grid point is checked
 * against the CPU reference before it is timed; a failed check is reported, counted, and the
 * run goes on; the exit status is 1 if any check failed. Results are CSV lines of one fixed
 * schema (bench_csv_header), to DIR/NAME.csv (written whole at the end) or to stdout.
 * Kernels: fetch, residency, attention, verify, ring, indexer, topk, gemm, gather.
 * --b2b N times N launches back to back per sample (the median is per launch): what a launch
 * costs inside a stream of work (a decode step), without the idle-GPU start and the host
 * round trip that a lone launch between two events pays; the CSV's "timing" column says which
 * (benchmarks with host threads in the launch, fetch versions 6, 7, 9, 10, stay isolated).
 * --timing kernel (a build with CUPTI) also times every launch as FlashMLA's bench_kineto does
 * (deepseek-ai/FlashMLA/tests/kernelkit/bench.py): CUPTI's activity records of every kernel,
 * per sample an 8 GB memset to flush L2, one launch, and the span from its first kernel's start
 * to its last kernel's end (get_e2e_time); median and p10-p90 as CSV lines with timing "kernel",
 * each kernel's own duration ("kernel_part=NAME"), and the kernels' span per launch back to
 * back without the flush ("kernel_b2bN"), beside the events' line (kernels/bench.cuh).
 * --timing graph (the attention benchmark only) also times the launches as a deployment issues a
 * decode step's (SGLang, vLLM: CUDA graphs): the --b2b count of launches captured from a created
 * stream into one graph, instantiated once, replayed; per launch = replay / count, CSV timing
 * "graph" (median, p10-p90), beside the events' line.
 * Ceilings are measured at start: device-to-device copy (HBM, bytes read + written), pinned
 * host-to-device cudaMemcpy, and an 8192^3 cuBLASLt GEMM in BF16 and FP8.
 * Any GPU from sm_80 on (kernels/karch.h): a grid point whose version this GPU cannot run (its
 * instructions, or its shared memory per block) is skipped, the first of each version with
 * one "dhbench: skipped: ..." line, and counted; skipping is not a failure. --as-arch sm_XY
 * (or DHK_AS_ARCH) decides as if the GPU were sm_XY ("generic" = sm_80): on an H200 it runs the
 * fallbacks of every other GPU, each checked against its CPU reference like any version; the
 * output is then NAME-as-sm_XY.csv. Each CSV line records the device and its architecture.
 * Needs only the CUDA toolkit (runtime, cuBLASLt; CUPTI for --timing kernel) and libc. */
#include "kernels/bench.cuh"
#include "kernels/kref.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#ifdef DHK_CUPTI
#include <cupti.h>
#include <cxxabi.h>
#endif

/* ---- the kernel tracer of --timing kernel (CUPTI's activity API) ---- */

#ifdef DHK_CUPTI
/* The newest kernel record of the toolkit; the fields read here (start, end, correlationId,
 * name) sit at the same place in every version since the fourth. */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kact_rec;
#else
typedef CUpti_ActivityKernel9 kact_rec;
#endif
#define cuptiCheck(x)                                                                                  \
    do {                                                                                               \
        CUptiResult r_ = (x);                                                                          \
        if (r_ != CUPTI_SUCCESS) {                                                                     \
            const char *m_ = "?";                                                                      \
            cuptiGetResultString(r_, &m_);                                                             \
            fprintf(stderr, "dhbench: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, m_);                   \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

static std::vector<bench_kact> g_kacts;
static size_t g_dropped;

/* "void a18_kernel<656, true>(attn_args, float *)" -> "a18_kernel". */
static std::string kernel_short_name(const char *mangled)
{
    if (!mangled) return "?";
    int st = 0;
    char *d = abi::__cxa_demangle(mangled, NULL, NULL, &st);
    std::string s = st == 0 && d ? d : mangled;
    free(d);
    size_t cut = s.find_first_of("<(");
    if (cut != std::string::npos) s.resize(cut);
    size_t sp = s.rfind(' ');
    if (sp != std::string::npos) s = s.substr(sp + 1);
    size_t ns = s.rfind("::");
    if (ns != std::string::npos) s = s.substr(ns + 2);
    return s.empty() ? mangled : s;
}

static void CUPTIAPI kact_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    if (!*buf) { fprintf(stderr, "dhbench: out of memory for the kernel tracer\n"); exit(1); }
    *max_records = 0;
}

static void CUPTIAPI kact_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const kact_rec *k = (const kact_rec *)rec;
            g_kacts.push_back({kernel_short_name(k->name), k->start, k->end, k->correlationId});
        }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
    free(buf);
}

static void kact_begin(void)
{
    g_kacts.clear();
    g_dropped = 0;
    cuptiCheck(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

static uint64_t kact_now(void)
{
    uint64_t t = 0;
    cuptiCheck(cuptiGetTimestamp(&t));
    return t;
}

static void kact_end(std::vector<bench_kact> &out)
{
    cudaCheck(cudaDeviceSynchronize());
    cuptiCheck(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    cuptiCheck(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    cuptiCheck(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    if (g_dropped) {
        fprintf(stderr, "dhbench: --timing kernel: CUPTI dropped %zu kernel record(s)\n", g_dropped);
        exit(1);
    }
    out.swap(g_kacts);
    g_kacts.clear();
}

static const bench_tracer kact_tracer = {kact_begin, kact_now, kact_end};
#endif

/* ---- ceilings ---- */

static void measure_ceilings(bench_env *env, bool gemm)
{
    /* The ceilings by CUDA events alone: copies (no kernels to trace) and cuBLASLt. */
    const int timing_kernel = env->timing_kernel, timing_graph = env->timing_graph;
    env->timing_kernel = env->timing_graph = 0;
    size_t bytes = env->quick ? (256u << 20) : (2ull << 30);
    void *d0, *d1, *h;
    cudaCheck(cudaMalloc(&d0, bytes));
    cudaCheck(cudaMalloc(&d1, bytes));
    cudaCheck(cudaMemset(d0, 0x5a, bytes));
    /* One copy per sample whatever --b2b says: the ceilings are the same in every mode. */
    bench_timing t = bench_time(env, [&](int) { cudaCheck(cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, 0)); }, 3, 1);
    env->hbm_gbps = 2.0 * bytes / t.median_us / 1e3;
    size_t hb = env->quick ? (128u << 20) : (1u << 30);
    cudaCheck(cudaHostAlloc(&h, hb, cudaHostAllocDefault));
    memset(h, 0x5a, hb);
    t = bench_time(env, [&](int) { cudaCheck(cudaMemcpyAsync(d1, h, hb, cudaMemcpyHostToDevice, 0)); }, 3, 1);
    env->h2d_gbps = (double)hb / t.median_us / 1e3;
    cudaCheck(cudaFreeHost(h));
    cudaCheck(cudaFree(d0));
    cudaCheck(cudaFree(d1));
    /* The GEMM ceilings only matter to the gemm lines (and cost seconds under a sanitizer). */
    char why[320];
    if (gemm && !karch_check("gemm", 1, "fp8", 0, &env->kdev, why, sizeof why)) {
        /* The FP8 ceiling needs an FP8 GEMM; the BF16 one alone (the fp8 lines are skipped). */
        fprintf(stderr, "dhbench: no FP8 GEMM ceiling: %s\n", why);
        if (bench_gemm_ceiling(env, false)) {
            fprintf(stderr, "dhbench: the GEMM ceiling failed its check\n");
            env->failures++;
        }
    } else if (gemm && bench_gemm_ceiling(env, true)) {
        fprintf(stderr, "dhbench: the GEMM ceiling failed its check\n");
        env->failures++;
    }
    fprintf(stderr, "dhbench: %s (%s, code sm_%d%s), %d SMs, %d MB L2: HBM copy %.0f GB/s (read+write), pinned H2D %.1f GB/s, "
                    "GEMM %.0f TFLOP/s bf16, %.0f fp8\n",
            env->device.c_str(), env->arch.c_str(), dhk_code_arch(NULL), env->forced ? (", decided as sm_" + std::to_string(env->kdev.cc)).c_str() : "",
            env->prop.multiProcessorCount, env->prop.l2CacheSize >> 20, env->hbm_gbps,
            env->h2d_gbps, env->bf16_tflops, env->fp8_tflops);
    env->timing_kernel = timing_kernel;
    env->timing_graph = timing_graph;
}

/* ---- suites ---- */

struct grid_line {
    std::string kernel;
    std::vector<std::pair<std::string, std::vector<std::string>>> keys;
    int lineno;
};

static std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> out;
    size_t a = 0;
    for (;;) {
        size_t b = s.find(sep, a);
        out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) break;
        a = b + 1;
    }
    return out;
}

static const char *kernels[] = {"fetch", "residency", "attention", "verify", "ring", "indexer", "topk", "gemm", "gather"};

static int parse_grid_words(const std::vector<std::string> &words, const char *where, int lineno, grid_line &g)
{
    g.kernel = words[0];
    g.lineno = lineno;
    bool known = false;
    for (const char *k : kernels) known |= g.kernel == k;
    if (!known) {
        fprintf(stderr, "dhbench: %s:%d: unknown kernel '%s'\n", where, lineno, g.kernel.c_str());
        return -1;
    }
    for (size_t i = 1; i < words.size(); i++) {
        size_t eq = words[i].find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == words[i].size()) {
            fprintf(stderr, "dhbench: %s:%d: '%s' is not key=value[,value...]\n", where, lineno, words[i].c_str());
            return -1;
        }
        g.keys.push_back({words[i].substr(0, eq), split(words[i].substr(eq + 1), ',')});
    }
    return 0;
}

static int read_suite(const std::string &name, std::vector<grid_line> &lines)
{
    std::string path = name.find('/') != std::string::npos ? name : "kernels/suites/" + name + ".suite";
    FILE *f = fopen(path.c_str(), "r");
    if (!f) {
        fprintf(stderr, "dhbench: cannot open suite '%s': %s\n", path.c_str(), strerror(errno));
        return -1;
    }
    char buf[4096];
    int lineno = 0;
    while (fgets(buf, sizeof buf, f)) {
        lineno++;
        std::string s(buf);
        size_t hash = s.find('#');
        if (hash != std::string::npos) s = s.substr(0, hash);
        std::vector<std::string> words;
        for (auto &w : split(s, ' '))
            for (auto &w2 : split(w, '\t')) {
                std::string t = w2;
                while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
                if (!t.empty()) words.push_back(t);
            }
        if (words.empty()) continue;
        grid_line g;
        if (parse_grid_words(words, path.c_str(), lineno, g)) { fclose(f); return -1; }
        lines.push_back(g);
    }
    fclose(f);
    return 0;
}

static int run_point(bench_env *env, const std::string &kernel, const bench_params &p)
{
    if (kernel == "fetch") return bench_fetch(env, p);
    if (kernel == "residency") return bench_residency(env, p);
    if (kernel == "attention") return bench_attention(env, p);
    if (kernel == "verify") return bench_verify(env, p);
    if (kernel == "ring") return bench_ring(env, p);
    if (kernel == "gather") return bench_gather(env, p);
    if (kernel == "indexer") return bench_indexer(env, p);
    if (kernel == "topk") return bench_topk(env, p);
    return bench_gemm(env, p);
}

/* Calls fn on every point of the grid, in the order the keys are written, the last key
 * varying fastest. */
static void for_each_point(const grid_line &g, const std::function<void(const bench_params &)> &fn)
{
    std::vector<size_t> at(g.keys.size(), 0);
    for (;;) {
        bench_params p;
        for (size_t i = 0; i < g.keys.size(); i++) p.kv.push_back({g.keys[i].first, g.keys[i].second[at[i]]});
        fn(p);
        size_t i = g.keys.size();
        while (i > 0) {
            i--;
            if (++at[i] < g.keys[i].second.size()) break;
            at[i] = 0;
            if (i == 0) return;
        }
        if (g.keys.empty()) return;
    }
}

/* Whether this GPU runs the point's versions (kernels/karch.h): the kernel's version with its
 * shared memory, and for the indexer also the top-k it runs on its scores. */
static bool point_runs(bench_env *env, const std::string &kernel, const bench_params &p)
{
    const char *k = kernel.c_str();
    if (kernel == "attention" || kernel == "verify" || kernel == "ring") {
        const int v = (int)p.num("version", 2);
        const std::string f = p.str("format", "fp8");
        return bench_version_runs(env, k, v, f.c_str(), attn_smem_need(v, f == "bf16" ? KREF_ROW_BF16 : KREF_ROW_FP8));
    }
    if (kernel == "topk") {
        const int v = (int)p.num("version", 5);
        return bench_version_runs(env, k, v, NULL, topk_smem_need(v));
    }
    if (kernel == "indexer") {
        const int v = (int)p.num("version", 2), tv = (int)p.num("topk", 6);
        return bench_version_runs(env, k, v, NULL, indexer_smem_need(v, (int)p.num("heads", 64), (int)p.num("queries", 1))) &&
               bench_version_runs(env, "topk", tv, NULL, topk_smem_need(tv));
    }
    if (kernel == "gather") {
        const int v = (int)p.num("version", 2);
        return bench_version_runs(env, k, v, NULL, gather_smem_need(v, (int)p.num("row_bytes", KREF_ROW_BYTES_FP8)));
    }
    if (kernel == "gemm") return bench_version_runs(env, k, 1, p.str("dtype", "bf16").c_str(), 0);
    return bench_version_runs(env, k, (int)p.num("version", 2), NULL, 0);   /* fetch, residency */
}

static void run_grid(bench_env *env, const grid_line &g)
{
    for_each_point(g, [&](const bench_params &p) {
        if (!point_runs(env, g.kernel, p)) return;
        if (run_point(env, g.kernel, p)) {
            env->failures++;
            std::string desc;
            for (auto &e : p.kv) desc += " " + e.first + "=" + e.second;
            fprintf(stderr, "dhbench: %s%s: failed\n", g.kernel.c_str(), desc.c_str());
        }
    });
}

/* The checks of every grid point that need no device, before the first CUDA call: a bad
 * value is one error line and exit 2, with nothing measured and no output file. */
static void check_grid(const grid_line &g)
{
    for_each_point(g, [&](const bench_params &p) {
        int bad = 0;
        if (g.kernel == "attention" || g.kernel == "verify" || g.kernel == "ring")
            bad = bench_attention_check(g.kernel.c_str(), p);
        else if (g.kernel == "gather")
            bad = bench_gather_check(p);
        else if (g.kernel == "fetch")
            bad = bench_fetch_check(p);
        else if (g.kernel == "topk")
            bad = bench_topk_check(p);
        else if (g.kernel == "indexer")
            bad = bench_indexer_check(p);
        if (bad) exit(2);
    });
}

/* A positive integer option value, or one error line and exit 2 (no CUDA call has run yet). */
static int positive_arg(const char *opt, const char *v)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 1 || x > 1000000) {
        fprintf(stderr, "dhbench: %s '%s': need an integer from 1 to 1000000\n", opt, v);
        exit(2);
    }
    return (int)x;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: dhbench --suite NAME [--only KERNEL] [--out DIR] [--reps N] [--b2b N] [--timing events|kernel|graph] [--quick] [--check-only] [--as-arch sm_XY]\n"
            "       dhbench --kernel KERNEL [key=v1,v2 ...] [--out DIR] [--reps N] [--b2b N] [--timing events|kernel|graph] [--quick] [--check-only] [--as-arch sm_XY]\n"
            "--timing kernel: also the kernels' own span per launch from CUPTI, L2 flushed (FlashMLA's bench_kineto)\n"
            "--timing graph: also the --b2b N launches captured into one CUDA graph, replayed (attention only)\n"
            "--check-only: run every grid point's device-free checks and exit (no GPU needed)\n"
            "--as-arch sm_XY|generic: choose versions as on that architecture (the fallbacks of other GPUs)\n"
            "kernels: fetch residency attention verify ring indexer topk gemm gather\n");
    exit(2);
}

int main(int argc, char **argv)
{
    std::string suite, kernel, only, out, as_arch;
    bool check_only = false;
    std::vector<std::string> kv_words;
    bench_env env;
    memset(&env.prop, 0, sizeof env.prop);
    env.reps = 20;
    env.b2b = 1;
    env.quick = 0;
    env.failures = 0;
    env.forced = 0;
    env.skipped = 0;
    env.hbm_gbps = env.h2d_gbps = env.bf16_tflops = env.fp8_tflops = -1;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--suite" && i + 1 < argc) suite = argv[++i];
        else if (a == "--kernel" && i + 1 < argc) kernel = argv[++i];
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else if (a == "--out" && i + 1 < argc) out = argv[++i];
        else if (a == "--reps" && i + 1 < argc) env.reps = positive_arg("--reps", argv[++i]);
        else if (a == "--b2b" && i + 1 < argc) env.b2b = positive_arg("--b2b", argv[++i]);
        else if (a == "--timing" && i + 1 < argc) {
            std::string v = argv[++i];
            env.timing_kernel = env.timing_graph = 0;
            if (v == "kernel") env.timing_kernel = 1;
            else if (v == "graph") env.timing_graph = 1;
            else if (v != "events") {
                fprintf(stderr, "dhbench: --timing '%s': need events (CUDA events around the launches), kernel "
                                "(also the kernels' own timestamps, CUPTI) or graph (also the launches replayed from a CUDA graph)\n", v.c_str());
                return 2;
            }
        }
        else if (a == "--quick") env.quick = 1;
        else if (a == "--check-only") check_only = true;
        else if (a == "--as-arch" && i + 1 < argc) as_arch = argv[++i];
        else if (a.find('=') != std::string::npos && !kernel.empty()) kv_words.push_back(a);
        else usage();
    }
    if (suite.empty() == kernel.empty()) usage();
    if (env.timing_kernel) {
#ifdef DHK_CUPTI
        env.tracer = &kact_tracer;
#else
        fprintf(stderr, "dhbench: --timing kernel: this build has no CUPTI (the Makefile found no cupti.h and libcupti "
                        "in the CUDA toolkit; set CUPTI_INC and CUPTI_LIB)\n");
        return 2;
#endif
    }
    std::vector<grid_line> lines;
    if (!suite.empty()) {
        if (read_suite(suite, lines)) return 1;
        if (!only.empty())
            lines.erase(std::remove_if(lines.begin(), lines.end(), [&](const grid_line &g) { return g.kernel != only; }), lines.end());
        size_t slash = suite.rfind('/');
        env.suite = suite.substr(slash == std::string::npos ? 0 : slash + 1);
        if (env.suite.size() > 6 && env.suite.compare(env.suite.size() - 6, 6, ".suite") == 0) env.suite.resize(env.suite.size() - 6);
        if (!only.empty()) env.suite += "-" + only;
    } else {
        std::vector<std::string> words = {kernel};
        words.insert(words.end(), kv_words.begin(), kv_words.end());
        grid_line g;
        if (parse_grid_words(words, "command line", 0, g)) return 1;
        lines.push_back(g);
        env.suite = "kernel-" + kernel;
    }
    /* --timing graph captures what the benchmark launches on env->stream: the attention benchmark's
     * launches; the others launch on the legacy stream, which a capture cannot record. */
    if (env.timing_graph)
        for (auto &g : lines)
            if (g.kernel != "attention") {
                const std::string at = suite.empty() ? "" : suite + ":" + std::to_string(g.lineno) + ": ";
                fprintf(stderr, "dhbench: --timing graph: %skernel '%s' launches on the legacy stream, which a "
                                "graph capture cannot record; graph timing is for attention (use --only attention)\n",
                        at.c_str(), g.kernel.c_str());
                return 2;
            }
    size_t points = 0;
    for (auto &g : lines) {
        check_grid(g);
        for_each_point(g, [&](const bench_params &) { points++; });
    }
    if (!as_arch.empty()) {   /* checked before any CUDA call */
        char why[256];
        int cc;
        if (karch_parse(as_arch.c_str(), &cc, why, sizeof why)) {
            fprintf(stderr, "dhbench: --as-arch: %s\n", why);
            return 2;
        }
    }
    if (check_only) {
        fprintf(stderr, "dhbench: %zu grid point(s) of %zu line(s) pass the device-free checks\n", points, lines.size());
        return 0;
    }
    const char *as_env = getenv("DHK_AS_ARCH");
    const std::string as_used = !as_arch.empty() ? as_arch : as_env ? as_env : "";
    if (!as_used.empty()) {
        char why[256];
        int cc;
        if (karch_parse(as_used.c_str(), &cc, why, sizeof why)) {
            fprintf(stderr, "dhbench: DHK_AS_ARCH: %s\n", why);
            return 2;
        }
        env.suite += "-as-sm_" + std::to_string(cc);
    }
    if (env.quick) env.suite += "-quick";
    if (env.b2b > 1) env.suite += "-b2b" + std::to_string(env.b2b);
    if (env.timing_kernel) env.suite += "-kernel";
    if (env.timing_graph) env.suite += "-graph";
    const bool csv_stdout = out.empty();
    if (!out.empty() && mkdir(out.c_str(), 0777) && errno != EEXIST) {
        fprintf(stderr, "dhbench: cannot create '%s': %s\n", out.c_str(), strerror(errno));
        return 1;
    }

    int dev_count = 0;
    cudaError_t e = cudaGetDeviceCount(&dev_count);
    if (e != cudaSuccess || dev_count == 0) {
        fprintf(stderr, "dhbench: no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 1;
    }
    cudaCheck(cudaSetDevice(0));
    cudaCheck(cudaGetDeviceProperties(&env.prop, 0));
    env.device = env.prop.name;
    env.arch = "sm_" + std::to_string(env.prop.major * 10 + env.prop.minor);
    env.kdev = bench_karch_dev(env.prop, as_arch.c_str(), "dhbench", &env.forced);
#ifdef DHK_CUPTI
    if (env.timing_kernel)
        cuptiCheck(cuptiActivityRegisterCallbacks(kact_buffer_requested, kact_buffer_completed));
#endif
    FILE *csv_partial = NULL;
    if (csv_stdout) {
        printf("%s\n", bench_csv_header);
        bench_csv_to(true, NULL);
    } else {
        bench_csv() = std::string(bench_csv_header) + "\n";
        std::string partial = out + "/" + env.suite + ".csv.tmp";
        csv_partial = fopen(partial.c_str(), "w");
        if (!csv_partial) {
            fprintf(stderr, "dhbench: cannot write '%s': %s\n", partial.c_str(), strerror(errno));
            return 1;
        }
        fprintf(csv_partial, "%s\n", bench_csv_header);
        fflush(csv_partial);
        bench_csv_to(false, csv_partial);
    }
    bool any_gemm = false;
    for (auto &g : lines) any_gemm |= g.kernel == "gemm";
    measure_ceilings(&env, any_gemm);
    for (auto &g : lines) run_grid(&env, g);
    bench_fetch_release();

    if (!out.empty()) {
        std::string path = out + "/" + env.suite + ".csv", tmp = path + ".tmp";
        fclose(csv_partial);
        const std::string &csv = bench_csv();
        FILE *f = fopen(tmp.c_str(), "w");
        if (!f || fwrite(csv.data(), 1, csv.size(), f) != csv.size() || fclose(f)) {
            fprintf(stderr, "dhbench: cannot write '%s': %s\n", tmp.c_str(), strerror(errno));
            return 1;
        }
        if (rename(tmp.c_str(), path.c_str())) {
            fprintf(stderr, "dhbench: cannot rename '%s': %s\n", tmp.c_str(), strerror(errno));
            return 1;
        }
        fprintf(stderr, "dhbench: wrote %s\n", path.c_str());
    }
    if (env.skipped)
        fprintf(stderr, "dhbench: %d grid point(s) skipped: versions this GPU (%s, %s sm_%d) cannot run\n", env.skipped,
                env.arch.c_str(), env.forced ? "decided as" : "code", env.kdev.cc);
    if (env.failures) fprintf(stderr, "dhbench: %d configuration(s) failed their check\n", env.failures);
    return env.failures ? 1 : 0;
}
