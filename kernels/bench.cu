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

void bench_emit(bench_env *env, const bench_record &r)
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
                       fld_d(pct, "%.1f") + "," + (r.checked ? "1" : "0") + "," + timing_name(r.per) + "," + fld_s(env->arch);
    if (g_csv_stdout) printf("%s\n", line.c_str()), fflush(stdout);
    else {
        g_csv += line + "\n";
        /* Also appended to DIR/NAME.csv.tmp as it is measured, so a run that dies keeps what it
         * had measured (the finished file replaces it at the end). */
        if (g_csv_partial) fprintf(g_csv_partial, "%s\n", line.c_str()), fflush(g_csv_partial);
    }
    FILE *h = g_csv_stdout ? stderr : stdout;
    fprintf(h, "%-14s v%-10s %-5s %-24s rb=%-5s rows=%-7s sms=%-4s batch=%-4s q=%-3s k=%-5s mnk=%s/%s/%s  %9s us  %8s GB/s %7s TF/s  %5s%% of %s%s\n",
            r.kernel.c_str(), r.version.c_str(), r.dtype.c_str(), r.pattern.c_str(), fld_i(r.row_bytes).c_str(),
            fld_i(r.rows).c_str(), fld_i(r.sms).c_str(), fld_i(r.batch).c_str(), fld_i(r.queries).c_str(),
            fld_i(r.k).c_str(), fld_i(r.m).c_str(), fld_i(r.n).c_str(), fld_i(r.kdim).c_str(),
            fld_d(r.median_us, "%.1f").c_str(), fld_d(gbps, "%.1f").c_str(), fld_d(tflops, "%.1f").c_str(),
            fld_d(pct, "%.0f").c_str(), r.ceiling_name.c_str(),
            r.checked ? "" : r.diagnostic ? "  (diagnostic: not checked)" : "  CHECK FAILED");
    fflush(h);
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
