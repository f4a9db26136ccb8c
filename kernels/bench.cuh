/* bench.cuh: what every benchmark file of bin/dhbench (kernels/versions/) shares, and the
 * version dispatch that bin/dhreplay's --attention-version, --topk-version and
 * --indexer-version reach.
 *
 * cudaCheck() and CUDA_LAUNCH_CHECK() (kernels/dhk.h) fail fast with file and line (every CUDA
 * call and every launch is checked); bench_params is one point of a parameter grid (read from a suite file);
 * bench_record is one CSV line of the fixed schema the calibration tool parses; bench_time()
 * times a launch with CUDA events after a warm-up and returns the median and spread;
 * rel_l2() is the ||out - ref|| / ||ref|| check every kernel passes before it is timed. */
#ifndef BENCH_CUH
#define BENCH_CUH

#include "kernels/dhk.h"
#include "kernels/karch.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

/* One grid point: every key of a suite line, each with one value. Missing keys read as the
 * given default; get() of a key that is not in the grid and has no default is a suite error. */
struct bench_params {
    std::vector<std::pair<std::string, std::string>> kv;
    bool has(const char *key) const;
    std::string str(const char *key, const char *def) const;
    long long num(const char *key, long long def) const;
    double real(const char *key, double def) const;
};

struct bench_tracer;
struct bench_ktiming;
struct bench_gtiming;

/* Ceilings measured at start-up on this device (never taken from a datasheet). */
struct bench_env {
    cudaDeviceProp prop;
    std::string device;
    std::string arch;     /* the GPU's own architecture, "sm_90": the CSV's arch column */
    karch_dev kdev;       /* what the version choice sees (kernels/karch.h): the code's or the forced architecture */
    int forced;           /* 1 under --as-arch / DHK_AS_ARCH */
    int skipped;          /* grid points skipped: a version this GPU cannot run */
    double hbm_gbps;      /* device-to-device copy, bytes read + written */
    double h2d_gbps;      /* pinned cudaMemcpy host to device */
    double bf16_tflops;   /* large cuBLASLt BF16 GEMM */
    double fp8_tflops;    /* large cuBLASLt FP8 GEMM */
    int reps;             /* timed repeats per measurement */
    int b2b;              /* launches per timed sample: 1 = each on its own from an idle GPU,
                             N > 1 = N back to back between the two events, time / N */
    int quick;            /* smaller problems, for sanitizers */
    /* --timing kernel: besides the events' figure, each bench_time() also times the launch as
     * FlashMLA's bench_kineto does, from the kernels' own start and end timestamps (CUPTI); the
     * tracer is bin/dhbench's (NULL in a build without CUPTI, where the option is refused). */
    int timing_kernel = 0;
    const bench_tracer *tracer = nullptr;
    /* --timing graph: besides the events' figure, each bench_time() also captures the --b2b
     * count of launches into one CUDA graph and times its replays (bench_gtiming). stream is what
     * a benchmark that supports it (attention) launches on: 0, the legacy stream, except while
     * bench_time captures, when it is a created stream (the legacy stream cannot be captured). */
    int timing_graph = 0;
    cudaStream_t stream = 0;
    FILE *csv;
    int failures;         /* configurations that failed their check */
    std::string suite;
};

/* One CSV line; numbers left negative (ints) or NaN (doubles) print as empty fields. */
struct bench_record {
    std::string kernel, version, dtype, pattern, ceiling_name;
    long long row_bytes = -1, rows = -1, sms = -1, pool_bytes = -1, batch = -1, queries = -1,
              k = -1, union_rows = -1, ctx = -1, heads = -1, m = -1, n = -1, kdim = -1, reps = -1;
    double bytes = -1, flops = -1, median_us = -1, p10_us = -1, p90_us = -1, ceiling_value = -1;
    int checked = 0;
    bool diagnostic = false;   /* a variant with a stage left out: its output is wrong by design, not checked */
    int per = 1;          /* launches per timed sample (the CSV's "timing" column) */
    std::shared_ptr<bench_ktiming> kt;   /* --timing kernel's figures (bench_emit's extra lines), or none */
    std::shared_ptr<bench_gtiming> gt;   /* --timing graph's figures (bench_emit's extra line), or none */
};

/* One kernel as the tracer recorded it: its (short) name, start and end in ns, and the
 * correlation id of the launch that made it (increasing in launch order). */
struct bench_kact { std::string name; uint64_t start, end; uint32_t corr; };
/* The kernel tracer: begin() starts recording every kernel, now() is the tracer's clock (the
 * kernels' timestamps are on it), end() waits for the device, stops and returns the kernels
 * recorded since begin(). */
struct bench_tracer {
    void (*begin)(void);
    uint64_t (*now)(void);
    void (*end)(std::vector<bench_kact> &out);
};
/* --timing kernel's figures of one measurement (kernels/bench.cu, bench_time):
 * span: per sample, an L2 flush (FlashMLA's 8 GB memset), one launch, then the time from the
 *   first kernel's start to the last kernel's end of that launch (FlashMLA's get_e2e_time);
 * b2b_us: one sample of `per` launches back to back, traced without flushes: the kernels' span
 *   per launch (the first kernel's start to the last kernel's end, averaged over the launches),
 *   i.e. the events' back-to-back figure without the gaps between launches;
 * parts: each kernel's own duration per launch of the flushed samples (median, p10, p90). */
struct bench_ktiming {
    double median_us = -1, p10_us = -1, p90_us = -1, b2b_us = -1;
    int reps = 0, per = 0, kernels = 0;
    struct part { std::string name; double median_us, p10_us, p90_us; };
    std::vector<part> parts;
};

/* --timing graph's figures of one measurement (kernels/bench.cu, bench_time): per launches
 * captured from a created (non-blocking) stream into one CUDA graph, instantiated once, replayed
 * as a deployment's decode step is (SGLang, vLLM: each step's kernels in a graph), a warm-up and
 * then reps samples of one replay between two events on that stream, each replay / per: median,
 * p10, p90 per launch. The graph's kernel nodes and its edges (programmatic: the programmatic
 * dependent launches, which capture turns into programmatic edges) as captured. */
struct bench_gtiming {
    double median_us = -1, p10_us = -1, p90_us = -1;
    int reps = 0, per = 0;
    long long kernels = 0, edges = -1, programmatic = -1;   /* -1: the toolkit cannot tell (before 12.3) */
};

struct bench_timing {
    double median_us, p10_us, p90_us;
    int reps, per;
    std::shared_ptr<bench_ktiming> kt;   /* --timing kernel: the kernels' own times (else empty) */
    std::shared_ptr<bench_gtiming> gt;   /* --timing graph: the graph's replays (else empty) */
};
/* The timing's figures into the record. */
static inline void bench_take(bench_record &r, const bench_timing &t)
{
    r.median_us = t.median_us; r.p10_us = t.p10_us; r.p90_us = t.p90_us; r.reps = t.reps; r.per = t.per;
    r.kt = t.kt;
    r.gt = t.gt;
}

extern const char *bench_csv_header;
/* Where bench_emit's CSV lines go: stdout (the human-readable lines then to stderr), or kept in
 * bench_csv() for the driver to write at the end and appended to partial as they come. */
void bench_csv_to(bool to_stdout, FILE *partial);
std::string &bench_csv(void);
/* Fills gbps/tflops/pct from bytes, flops and the ceiling, prints the CSV line and a short
 * human-readable line on stdout. */
void bench_emit(bench_env *env, const bench_record &r);

/* Times launch(rep) with CUDA events: warm-up launches first, then env->reps timed samples of
 * per launches each (the median etc. are per launch; per < 1 means env->b2b); rep counts
 * from 0 so the caller can rotate among input sets, and runs to warmup + reps * per - 1.
 * The events go on the legacy stream, which orders against every blocking stream the launch
 * uses; with on != 0 they go on that stream and only it is waited for, so work on other
 * (non-blocking) streams may run through the timing. Under --timing graph (on == 0 only) the
 * launches must go on env->stream: per of them are captured into a graph and timed replayed. */
bench_timing bench_time(bench_env *env, const std::function<void(int)> &launch, int warmup = 3, int per = 0,
                        cudaStream_t on = 0);
/* Same, with a host wall clock around one launch + device synchronize, for work that is
 * partly on host threads: always one launch per sample, because such launches share host
 * staging buffers that only the synchronize makes free again. */
bench_timing bench_time_wall(bench_env *env, const std::function<void(int)> &launch, int warmup = 3);

/* The GPU as kernels/karch.h decides for it: the architecture its generic code was compiled
 * for (dhk_code_arch), or as_arch ("sm_80", "generic"; NULL or "": the environment's
 * DHK_AS_ARCH, else none), with its opt-in shared memory. One line naming prog and exit 1
 * when the binary holds no code for the GPU; exit 2 for a forced architecture that is not one
 * or that has a feature the GPU lacks. *forced (may be NULL) gets 1 when forced. */
karch_dev bench_karch_dev(const cudaDeviceProp &prop, const char *as_arch, const char *prog, int *forced);
/* Whether version of kernel runs here (karch_check with smem bytes of dynamic shared memory);
 * the first refusal of each (kernel, version, dtype) prints one "dhbench: skipped: ..." line,
 * and every one counts in env->skipped. */
bool bench_version_runs(bench_env *env, const char *kernel, int version, const char *dtype, size_t smem);
/* Dynamic shared memory per block of each version (the launch's own figure; 0: no opt-in),
 * for the checks above: attention (and verify, ring) by row format, top-k, gather by row
 * size, the indexer's scoring by heads. */
size_t attn_smem_need(int version, int format);
size_t attn6_smem_need(int version, int format);   /* versions 6-13 (attention_wgmma.cu) */
size_t topk_smem_need(int version);
size_t gather_smem_need(int version, int row_bytes);
size_t indexer_smem_need(int version, int heads, int queries);

/* Relative L2 error; NaN anywhere (an unwritten, poisoned element) gives +inf. */
double rel_l2(const float *out, const float *ref, size_t n);
/* Deterministic random numbers (splitmix64): the driver must need nothing but libc and CUDA. */
static inline uint64_t bench_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
struct bench_rng {
    uint64_t s;
    explicit bench_rng(uint64_t seed) : s(seed) {}
    uint64_t next() { s += 0x9E3779B97F4A7C15ull; return bench_mix(s); }
    uint32_t below(uint32_t n) { return (uint32_t)(((next() >> 32) * (uint64_t)n) >> 32); }
    double uniform() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
    float normal();
};

/* k distinct sorted values from [0, n) (Floyd's algorithm, O(k log k)). */
std::vector<int32_t> bench_sample_sorted(bench_rng &rng, int32_t n, int k);

/* Each benchmark: runs every configuration of one grid point, checking before timing.
 * Returns 0, or -1 after a failed check (the driver counts failures and goes on). */
int bench_fetch(bench_env *env, const bench_params &p);
int bench_residency(bench_env *env, const bench_params &p);
int bench_attention(bench_env *env, const bench_params &p);
int bench_verify(bench_env *env, const bench_params &p);
int bench_ring(bench_env *env, const bench_params &p);
int bench_indexer(bench_env *env, const bench_params &p);
int bench_gemm(bench_env *env, const bench_params &p);
int bench_gather(bench_env *env, const bench_params &p);
int bench_topk(bench_env *env, const bench_params &p);
/* The parameter checks that need no device, run on every grid point before the first CUDA
 * call (dhbench exits 2 on the first failure): 0, or -1 after one error line. bench is
 * "attention", "verify" or "ring" for bench_attention_check. */
int bench_attention_check(const char *bench, const bench_params &p);
int bench_gather_check(const bench_params &p);
int bench_fetch_check(const bench_params &p);
int bench_topk_check(const bench_params &p);
int bench_indexer_check(const bench_params &p);
/* Indexer scoring (versions/indexer.cu) version 1-IX_MAX_VERSION of batch requests x ctx
 * tokens, 32 or 64 heads. Version 5 (the library's, dhk_indexer_launch) also scores queries > 1
 * query tokens per request against its keys (dhk_indexer_supports: heads x queries <= 256,
 * queries a power of two) and takes tiles = 64-token tiles per block, 0 = chosen so the launch
 * fills whole waves; the other versions take neither. */
#define IX_MAX_VERSION 5
#define IX_DIM DHK_IX_DIM
/* Version 5's tolerance on the scores' relative L2 error against the float64 reference: its
 * FP8 wgmma sums products in ~14 bits (2^-14 = 6e-5 per addition), so ~10x that, where a
 * wrong row, head or swizzle gives errors of order 1 (versions 1-4, summing in fp32: 1e-4). */
#define IX5_REL_TOL 1e-3
void indexer_launch(int version, int heads, const uint8_t *q, const float *w, const uint8_t *keys, const float *scales,
                    int batch, int ctx, float *scores, cudaStream_t st, int tiles = 0, int queries = 1);
/* Top-k (versions/topk.cu; version 6 is the library's) version 1-TK_MAX_VERSION of batch requests of ctx finite scores, 1 <= k <= ctx: ascending
 * row indices of each request's k largest, ties to the lower row. */
#define TK_MAX_VERSION 6
void topk_launch(int version, const float *scores, int batch, int ctx, int k, int32_t *out, cudaStream_t st);
/* The top-k blocks that run at once (SMs x resident blocks per SM), after a topk_launch. */
long long topk_concurrent_blocks(int version, const cudaDeviceProp &prop);
/* Sparse decode attention (versions/attention.cu; version 8 is the library's) version
 * 1-ATTN_MAX_VERSION. attn_setup allows every version's shared memory and allocates the scratch
 * for max_q_heads query heads; attn_launch chooses the splits (a.splits <= 0) for sms SMs. */
enum { ATTN_MAX_VERSION = 43 };
typedef dhk_attn_scratch attn_scratch;
void attn_setup(attn_scratch &sc, size_t max_q_heads);
void attn_launch(int version, attn_args a, attn_scratch &sc, float *out, int sms, cudaStream_t st);
/* Version 32 (kernels/versions/attn32_wgmma.cu; a.splits > 0: at most that many partitions). */
void attn32_bench_launch(attn_args a, attn_scratch &sc, float *out, int sms, cudaStream_t st);
/* Versions 33-36 and 39-43 (kernels/versions/attn33_wgmma.cu); attn33_check (33-43): A33_PF,
 * diag=producer's shapes, version 37's stepped descriptors (37-43) and version 43's merge shares, device-free (0, or -1 after
 * an error line). */
void attn33_bench_launch(attn_args a, attn_scratch &sc, float *out, int sms, cudaStream_t st, int version);
int attn33_check(int version, int format, int diag);
/* Fetch version 2 (8 rows in flight per warp) on the given SMs, for the paths that stage
 * misses (verification); pool is a device pointer of a mapped host pool. */
void fetch_launch(const uint8_t *pool, size_t pool_stride, const int64_t *rows, const int32_t *slots,
                  int n, int row_bytes, uint8_t *hot, size_t hot_stride, int sms, cudaStream_t stream);
/* Frees the host pool the fetch benchmarks keep between grid points. */
void bench_fetch_release(void);
/* Measures env->bf16_tflops and, with fp8, env->fp8_tflops with one large GEMM each. */
int bench_gemm_ceiling(bench_env *env, bool fp8);

#endif
