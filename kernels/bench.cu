/* bench.cu: the benchmarks' shared helpers (kernels/bench.cuh): a grid point's parameters, the
 * CSV line of the fixed schema, the timing with CUDA events or a wall clock, the relative L2
 * check and the deterministic random numbers. bin/dhbench's driver (kernels/dhbench.cu) sets
 * where the CSV goes; bin/dhreplay links these too, as the version dispatch of
 * kernels/versions/ that its --*-version options reach lives beside the benchmarks. */
#include "kernels/bench.cuh"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

/* ---- parameters ---- */

bool bench_params::has(const char *key) const
{
    for (auto &e : kv) if (e.first == key) return true;
    return false;
}

std::string bench_params::str(const char *key, const char *def) const
{
    for (auto &e : kv) if (e.first == key) return e.second;
    return def;
}

long long bench_params::num(const char *key, long long def) const
{
    for (auto &e : kv)
        if (e.first == key) {
            char *end;
            errno = 0;
            long long v = strtoll(e.second.c_str(), &end, 10);
            if (errno || *end || end == e.second.c_str()) {
                fprintf(stderr, "dhbench: %s=%s is not an integer\n", key, e.second.c_str());
                exit(2);
            }
            return v;
        }
    return def;
}

double bench_params::real(const char *key, double def) const
{
    for (auto &e : kv)
        if (e.first == key) {
            char *end;
            errno = 0;
            double v = strtod(e.second.c_str(), &end);
            if (errno || *end || end == e.second.c_str()) {
                fprintf(stderr, "dhbench: %s=%s is not a number\n", key, e.second.c_str());
                exit(2);
            }
            return v;
        }
    return def;
}

/* ---- output ---- */

const char *bench_csv_header =
    "suite,kernel,version,device,dtype,row_bytes,rows,sms,pool_bytes,pattern,batch,queries,k,union_rows,"
    "ctx,heads,m,n,kdim,bytes,flops,reps,median_us,p10_us,p90_us,gbps,tflops,ceiling_name,ceiling_value,"
    "pct_of_ceiling,checked,timing,arch";

static std::string g_csv;   /* the whole CSV, written at the end */
static bool g_csv_stdout;
static FILE *g_csv_partial;

void bench_csv_to(bool to_stdout, FILE *partial)
{
    g_csv_stdout = to_stdout;
    g_csv_partial = partial;
}

std::string &bench_csv(void)
{
    return g_csv;
}

static std::string fld_i(long long v) { return v < 0 ? "" : std::to_string(v); }
static std::string fld_d(double v, const char *fmt = "%.4g")
{
    if (!(v >= 0) || std::isinf(v)) return "";
    char b[64];
    snprintf(b, sizeof b, fmt, v);
    return b;
}
static std::string fld_s(const std::string &s)
{
    std::string o = s;
    for (auto &c : o) if (c == ',' || c == '\n') c = ';';
    return o;
}

static std::string timing_name(int per)
{
    return per > 1 ? "b2b" + std::to_string(per) : "isolated";
}

/* One CSV line (and its human-readable line) of r, with the given timing column. */
static void emit_line(bench_env *env, const bench_record &r, const std::string &timing)
{
    double gbps = r.bytes > 0 && r.median_us > 0 ? r.bytes / r.median_us / 1e3 : -1;
    double tflops = r.flops > 0 && r.median_us > 0 ? r.flops / r.median_us / 1e6 : -1;
    bool rate_ceiling = r.ceiling_name.find("gemm") != std::string::npos;
    double achieved = rate_ceiling ? tflops : gbps;
    double pct = achieved > 0 && r.ceiling_value > 0 ? 100.0 * achieved / r.ceiling_value : -1;
    std::string line = fld_s(env->suite) + "," + fld_s(r.kernel) + "," + fld_s(r.version) + "," + fld_s(env->device) +
                       "," + fld_s(r.dtype) + "," + fld_i(r.row_bytes) + "," + fld_i(r.rows) + "," + fld_i(r.sms) + "," +
                       fld_i(r.pool_bytes) + "," + fld_s(r.pattern) + "," + fld_i(r.batch) + "," + fld_i(r.queries) + "," +
                       fld_i(r.k) + "," + fld_i(r.union_rows) + "," + fld_i(r.ctx) + "," + fld_i(r.heads) + "," +
                       fld_i(r.m) + "," + fld_i(r.n) + "," + fld_i(r.kdim) + "," + fld_d(r.bytes, "%.0f") + "," +
                       fld_d(r.flops, "%.0f") + "," + fld_i(r.reps) + "," + fld_d(r.median_us, "%.2f") + "," +
                       fld_d(r.p10_us, "%.2f") + "," + fld_d(r.p90_us, "%.2f") + "," + fld_d(gbps, "%.2f") + "," +
                       fld_d(tflops, "%.2f") + "," + fld_s(r.ceiling_name) + "," + fld_d(r.ceiling_value, "%.1f") + "," +
                       fld_d(pct, "%.1f") + "," + (r.checked ? "1" : "0") + "," + fld_s(timing) + "," + fld_s(env->arch);
    if (g_csv_stdout) printf("%s\n", line.c_str()), fflush(stdout);
    else {
        g_csv += line + "\n";
        /* Also appended to DIR/NAME.csv.tmp as it is measured, so a run that dies keeps what it
         * had measured (the finished file replaces it at the end). */
        if (g_csv_partial) fprintf(g_csv_partial, "%s\n", line.c_str()), fflush(g_csv_partial);
    }
    FILE *h = g_csv_stdout ? stderr : stdout;
    fprintf(h, "%-14s v%-10s %-5s %-24s rb=%-5s rows=%-7s sms=%-4s batch=%-4s q=%-3s k=%-5s mnk=%s/%s/%s  %9s us  %8s GB/s %7s TF/s  %5s%% of %s%s%s\n",
            r.kernel.c_str(), r.version.c_str(), r.dtype.c_str(), r.pattern.c_str(), fld_i(r.row_bytes).c_str(),
            fld_i(r.rows).c_str(), fld_i(r.sms).c_str(), fld_i(r.batch).c_str(), fld_i(r.queries).c_str(),
            fld_i(r.k).c_str(), fld_i(r.m).c_str(), fld_i(r.n).c_str(), fld_i(r.kdim).c_str(),
            fld_d(r.median_us, "%.1f").c_str(), fld_d(gbps, "%.1f").c_str(), fld_d(tflops, "%.1f").c_str(),
            fld_d(pct, "%.0f").c_str(), r.ceiling_name.c_str(),
            r.checked ? "" : r.diagnostic ? "  (diagnostic: not checked)" : "  CHECK FAILED",
            timing == timing_name(r.per) ? "" : ("  [" + timing + "]").c_str());
    fflush(h);
}

void bench_emit(bench_env *env, const bench_record &r)
{
    emit_line(env, r, timing_name(r.per));
    if (r.gt && r.gt->reps > 0) {
        /* --timing graph: the graph's replay per launch as a further line (timing "graph"). */
        bench_record e = r;
        e.kt = nullptr;
        e.gt = nullptr;
        e.median_us = r.gt->median_us; e.p10_us = r.gt->p10_us; e.p90_us = r.gt->p90_us; e.reps = r.gt->reps;
        emit_line(env, e, "graph");
    }
    if (!r.kt || r.kt->reps < 1) return;
    /* --timing kernel: the kernels' own times as further lines of the same configuration, told
     * apart by the timing column ("kernel", "kernel_b2bN", "kernel_part=NAME"), so that a reader
     * that selects timing=b2bN (the calibration) sees the same lines as before. */
    const bench_ktiming &k = *r.kt;
    bench_record e = r;
    e.kt = nullptr;
    e.median_us = k.median_us; e.p10_us = k.p10_us; e.p90_us = k.p90_us; e.reps = k.reps;
    emit_line(env, e, "kernel");
    if (k.b2b_us > 0) {
        e.median_us = e.p10_us = e.p90_us = k.b2b_us; e.reps = 1;
        emit_line(env, e, "kernel_b2b" + std::to_string(k.per));
    }
    if (k.parts.size() > 1)
        for (auto &pt : k.parts) {
            e.median_us = pt.median_us; e.p10_us = pt.p10_us; e.p90_us = pt.p90_us; e.reps = k.reps;
            emit_line(env, e, "kernel_part=" + pt.name);
        }
}

/* ---- architecture ---- */

karch_dev bench_karch_dev(const cudaDeviceProp &prop, const char *as_arch, const char *prog, int *forced)
{
    const int real = prop.major * 10 + prop.minor;
    cudaError_t e;
    const int code = dhk_code_arch(&e);
    if (code < 0) {
        fprintf(stderr, "%s: %s (sm_%d): this binary has no code for it (%s): built for sm_%s; rebuild with "
                        "make CUDA_ARCHS=%d\n", prog, prop.name, real, cudaGetErrorString(e),
                dhk_built_archs(), real);
        exit(1);
    }
    karch_dev d = {code, prop.sharedMemPerBlockOptin};
    if (!as_arch || !*as_arch) as_arch = getenv("DHK_AS_ARCH");
    if (forced) *forced = 0;
    if (as_arch && *as_arch) {
        char why[256];
        int cc;
        if (karch_parse(as_arch, &cc, why, sizeof why) || !karch_force_ok(cc, code, why, sizeof why)) {
            fprintf(stderr, "%s: --as-arch: %s\n", prog, why);
            exit(2);
        }
        d.cc = cc;
        if (forced) *forced = 1;
    }
    return d;
}

bool bench_version_runs(bench_env *env, const char *kernel, int version, const char *dtype, size_t smem)
{
    static std::vector<std::string> told;
    char why[320];
    if (karch_check(kernel, version, dtype, smem, &env->kdev, why, sizeof why)) return true;
    env->skipped++;
    const std::string key = std::string(kernel) + "/" + std::to_string(version) + "/" + (dtype ? dtype : "");
    if (std::find(told.begin(), told.end(), key) == told.end()) {
        told.push_back(key);
        if (env->forced) fprintf(stderr, "dhbench: skipped: %s (--as-arch; the GPU is %s)\n", why, env->arch.c_str());
        else fprintf(stderr, "dhbench: skipped: %s\n", why);
    }
    return false;
}

/* ---- timing ---- */

static bench_timing summarize(std::vector<double> &us)
{
    std::sort(us.begin(), us.end());
    size_t n = us.size();
    bench_timing t;
    t.reps = (int)n;
    t.median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
    t.p10_us = us[(size_t)floor(0.1 * (double)(n - 1))];
    t.p90_us = us[(size_t)ceil(0.9 * (double)(n - 1))];
    t.per = 1;
    return t;
}

/* ---- --timing kernel: the kernels' own timestamps (FlashMLA's bench_kineto) ---- */

static double quantile_sorted(const std::vector<double> &v, double q, bool up)
{
    const double x = q * (double)(v.size() - 1);
    return v[(size_t)(up ? ceil(x) : floor(x))];
}

static void median_p10_p90(std::vector<double> v, double &med, double &p10, double &p90)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    p10 = quantile_sorted(v, 0.1, false);
    p90 = quantile_sorted(v, 0.9, true);
}

/* FlashMLA's L2 flush before each sample: an 8 GB memset (deepseek-ai/FlashMLA/tests/kernelkit/bench.py,
 * flush_l2_size = 8e9 // 4 ints); 256 MB (4x a 60 MB L2) under --quick. Kept between calls. */
static void *g_flush;
static size_t g_flush_bytes;

static std::shared_ptr<bench_ktiming> kernel_time(bench_env *env, const std::function<void(int)> &launch, int rep0,
                                                  int per, cudaStream_t on)
{
    const size_t want = env->quick ? (256ull << 20) : 8000000000ull;
    if (g_flush_bytes != want) {
        if (g_flush) cudaCheck(cudaFree(g_flush));
        cudaCheck(cudaMalloc(&g_flush, want));
        g_flush_bytes = want;
    }
    auto sync = [&] { if (on) cudaCheck(cudaStreamSynchronize(on)); else cudaCheck(cudaDeviceSynchronize()); };
    sync();
    const bench_tracer &tr = *env->tracer;
    std::vector<uint64_t> bound;   /* the tracer's clock after each sample's synchronize */
    tr.begin();
    bound.push_back(tr.now());
    /* FlashMLA's loop: flush, launch; here a synchronize after each, so that every kernel that
     * starts after one bound and before the next is of that sample's launch (the flush's 2 ms
     * keep the launch queued behind it: no launch gap enters the span either way). */
    for (int i = 0; i < env->reps; i++) {
        cudaCheck(cudaMemsetAsync(g_flush, i & 0xff, g_flush_bytes, on));
        launch(rep0 + i);
        sync();
        bound.push_back(tr.now());
    }
    /* One sample of per launches back to back, without flushes. */
    for (int j = 0; j < per; j++) launch(rep0 + env->reps + j);
    sync();
    std::vector<bench_kact> ks;
    tr.end(ks);
    std::sort(ks.begin(), ks.end(), [](const bench_kact &x, const bench_kact &y) { return x.corr < y.corr; });
    /* The launches' kernels: sample i's are those that start between bound i and bound i + 1
     * (each sample's kernels wait behind its 2 ms flush, far from either bound); then the
     * back-to-back launches', nk each in launch order. Should the clocks not allow that (a count
     * that differs between samples), the kernels in launch order, (reps + per) x nk. */
    const int reps = env->reps, nl = reps + per;
    std::vector<std::vector<bench_kact>> group(nl);
    std::vector<bench_kact> tail;
    for (auto &k : ks) {
        int at = -1;
        for (int i = 0; i < reps && at < 0; i++)
            if (k.start > bound[i] && k.start <= bound[i + 1]) at = i;
        if (at >= 0) group[at].push_back(k);
        else if (k.start > bound[reps]) tail.push_back(k);
    }
    int nk = (int)group[0].size();
    bool even = nk > 0 && (int)tail.size() == nk * per;
    for (int i = 0; i < reps; i++) even = even && (int)group[i].size() == nk;
    if (!even) {
        if (ks.empty() || ks.size() % (size_t)nl) {
            fprintf(stderr, "dhbench: --timing kernel: %zu kernels traced for %d launches; the kernel figures are left out\n",
                    ks.size(), nl);
            return nullptr;
        }
        fprintf(stderr, "dhbench: --timing kernel: the kernels taken in launch order (the clock bounds did not split them)\n");
        nk = (int)(ks.size() / (size_t)nl);
        for (auto &g : group) g.clear();
        tail.clear();
    }
    for (int i = 0; i < nl; i++)
        if (!even)
            for (int q = 0; q < nk; q++) (i < reps ? group[i] : tail).push_back(ks[(size_t)i * nk + q]);
    auto kt = std::make_shared<bench_ktiming>();
    std::vector<double> span;
    std::vector<std::string> names;                 /* in the order of the first sample's kernels */
    std::vector<std::vector<double>> part;          /* per name, per sample: the kernels' summed durations */
    for (int i = 0; i < reps; i++) {
        uint64_t s0 = UINT64_MAX, e1 = 0;
        std::vector<double> dur(names.size(), 0.0);
        for (auto &k : group[i]) {
            s0 = std::min(s0, k.start);
            e1 = std::max(e1, k.end);
            size_t at = std::find(names.begin(), names.end(), k.name) - names.begin();
            if (at == names.size()) {
                names.push_back(k.name);
                dur.push_back(0.0);
                part.push_back(std::vector<double>(i, 0.0));
            }
            dur[at] += (double)(k.end - k.start) * 1e-3;
        }
        span.push_back((double)(e1 - s0) * 1e-3);
        for (size_t q = 0; q < names.size(); q++) part[q].push_back(dur[q]);
    }
    median_p10_p90(span, kt->median_us, kt->p10_us, kt->p90_us);
    kt->reps = (int)span.size();
    kt->kernels = nk;
    for (size_t q = 0; q < names.size(); q++) {
        bench_ktiming::part pt;
        pt.name = names[q];
        median_p10_p90(part[q], pt.median_us, pt.p10_us, pt.p90_us);
        kt->parts.push_back(pt);
    }
    /* Back to back: each launch's span, averaged. */
    double sum = 0;
    for (int j = 0; j < per; j++) {
        uint64_t s0 = UINT64_MAX, e1 = 0;
        for (int q = 0; q < nk; q++) {
            s0 = std::min(s0, tail[(size_t)j * nk + q].start);
            e1 = std::max(e1, tail[(size_t)j * nk + q].end);
        }
        sum += (double)(e1 - s0) * 1e-3;
    }
    kt->b2b_us = sum / per;
    kt->per = per;
    return kt;
}

/* ---- --timing graph: the launches captured into one CUDA graph and replayed ---- */

/* The graph's edges and how many of them are programmatic (the toolkit's edge data: 12.3 on). */
static void graph_edges(cudaGraph_t g, long long &edges, long long &programmatic)
{
    edges = programmatic = -1;
#if CUDART_VERSION >= 12030
    size_t n = 0;
#if CUDART_VERSION >= 13000
    cudaCheck(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
#else
    cudaCheck(cudaGraphGetEdges_v2(g, nullptr, nullptr, nullptr, &n));
#endif
    std::vector<cudaGraphNode_t> from(n), to(n);
    std::vector<cudaGraphEdgeData> data(n);
    if (n) {
#if CUDART_VERSION >= 13000
        cudaCheck(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &n));
#else
        cudaCheck(cudaGraphGetEdges_v2(g, from.data(), to.data(), data.data(), &n));
#endif
    }
    edges = (long long)n;
    programmatic = 0;
    for (size_t i = 0; i < n; i++) programmatic += data[i].type == cudaGraphDependencyTypeProgrammatic;
#else
    (void)g;
#endif
}

/* per launches (launch(rep0) .. launch(rep0 + per - 1)) captured on a created non-blocking
 * stream, which env->stream names while they are issued; instantiated once, uploaded, two
 * replays of warm-up, then env->reps replays, each between two events on the stream. A capture
 * that holds no kernel, or a kernel count that is not a multiple of per (a launch that went to
 * another stream), is an error: no figure, one line, counted as a failure. */
static std::shared_ptr<bench_gtiming> graph_time(bench_env *env, const std::function<void(int)> &launch, int rep0, int per)
{
    cudaStream_t s;
    cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    env->stream = s;
    /* Global mode: an unsafe call (a synchronous copy, an allocation) from the launch path fails
     * the capture instead of passing into the graph unseen. */
    cudaCheck(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int j = 0; j < per; j++) launch(rep0 + j);
    cudaCheck(cudaStreamEndCapture(s, &g));
    env->stream = 0;
    size_t nn = 0;
    cudaCheck(cudaGraphGetNodes(g, nullptr, &nn));
    std::vector<cudaGraphNode_t> nodes(nn);
    if (nn) cudaCheck(cudaGraphGetNodes(g, nodes.data(), &nn));
    auto gt = std::make_shared<bench_gtiming>();
    for (size_t i = 0; i < nn; i++) {
        cudaGraphNodeType ty;
        cudaCheck(cudaGraphNodeGetType(nodes[i], &ty));
        gt->kernels += ty == cudaGraphNodeTypeKernel;
    }
    graph_edges(g, gt->edges, gt->programmatic);
    if (gt->kernels == 0 || gt->kernels % per) {
        fprintf(stderr, "dhbench: --timing graph: %lld kernel(s) captured from %d launches: a launch is not on the "
                        "benchmark's stream (env->stream); no graph figure\n", gt->kernels, per);
        env->failures++;
        cudaCheck(cudaGraphDestroy(g));
        cudaCheck(cudaStreamDestroy(s));
        return nullptr;
    }
    fprintf(stderr, "dhbench: --timing graph: %d launches, %lld kernel nodes, %lld edges of which %lld programmatic\n",
            per, gt->kernels, gt->edges, gt->programmatic);
    cudaGraphExec_t x;
    cudaCheck(cudaGraphInstantiate(&x, g, 0));
    cudaCheck(cudaGraphUpload(x, s));
    for (int i = 0; i < 2; i++) cudaCheck(cudaGraphLaunch(x, s));
    cudaCheck(cudaStreamSynchronize(s));
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    std::vector<double> us;
    for (int i = 0; i < env->reps; i++) {
        cudaCheck(cudaEventRecord(a, s));
        cudaCheck(cudaGraphLaunch(x, s));
        cudaCheck(cudaEventRecord(b, s));
        cudaCheck(cudaEventSynchronize(b));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, a, b));
        us.push_back(ms * 1e3 / per);
    }
    median_p10_p90(us, gt->median_us, gt->p10_us, gt->p90_us);
    gt->reps = (int)us.size();
    gt->per = per;
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    cudaCheck(cudaGraphExecDestroy(x));
    cudaCheck(cudaGraphDestroy(g));
    cudaCheck(cudaStreamDestroy(s));
    return gt;
}

bench_timing bench_time(bench_env *env, const std::function<void(int)> &launch, int warmup, int per, cudaStream_t on)
{
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++) launch(i);
    if (on) cudaCheck(cudaStreamSynchronize(on));
    else cudaCheck(cudaDeviceSynchronize());
    std::vector<double> us;
    if (per < 1) per = env->b2b > 1 ? env->b2b : 1;
    for (int i = 0; i < env->reps; i++) {
        /* Events on the legacy stream order against every stream the launch uses. */
        cudaCheck(cudaEventRecord(a, on));
        for (int j = 0; j < per; j++) launch(warmup + i * per + j);
        cudaCheck(cudaEventRecord(b, on));
        cudaCheck(cudaEventSynchronize(b));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, a, b));
        us.push_back(ms * 1e3 / per);
    }
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    bench_timing t = summarize(us);
    t.per = per;
    if (env->timing_kernel && env->tracer) t.kt = kernel_time(env, launch, warmup + env->reps * per, per, on);
    if (env->timing_graph && !on) t.gt = graph_time(env, launch, warmup + env->reps * per, per);
    return t;
}

bench_timing bench_time_wall(bench_env *env, const std::function<void(int)> &launch, int warmup)
{
    for (int i = 0; i < warmup; i++) launch(i);
    cudaCheck(cudaDeviceSynchronize());
    std::vector<double> us;
    for (int i = 0; i < env->reps; i++) {
        auto t0 = std::chrono::steady_clock::now();
        launch(warmup + i);
        cudaCheck(cudaDeviceSynchronize());
        auto t1 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    return summarize(us);
}

double rel_l2(const float *out, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (std::isnan(out[i]) || std::isinf(out[i])) return INFINITY;
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

float bench_rng::normal()
{
    double u1 = (double)((next() >> 11) + 1) * (1.0 / 9007199254740993.0), u2 = uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

std::vector<int32_t> bench_sample_sorted(bench_rng &rng, int32_t n, int k)
{
    /* Floyd's algorithm on a sorted vector when k is a small part of n (the O(k) inserts into a
     * sorted vector are cheaper than a hash set); above n / 8, selection sampling (Knuth's
     * algorithm S), one pass over n that gives the rows in order. */
    std::vector<int32_t> s;
    s.reserve((size_t)k);
    if ((int64_t)k * 8 > (int64_t)n) {
        for (int32_t j = 0, left = k; j < n && left > 0; j++)
            if (rng.uniform() * (double)(n - j) < (double)left) { s.push_back(j); left--; }
        return s;
    }
    for (int32_t j = n - k; j < n; j++) {
        int32_t t = (int32_t)rng.below((uint32_t)j + 1);
        auto it = std::lower_bound(s.begin(), s.end(), t);
        if (it != s.end() && *it == t) s.insert(std::lower_bound(s.begin(), s.end(), j), j);
        else s.insert(it, t);
    }
    return s;
}
