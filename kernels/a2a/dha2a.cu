/* dha2a.cu: expert-parallel all-to-all benchmark (MoE dispatch and combine) over NCCL.
 *
 *   make bin/dha2a            (or sh kernels/a2a/build.sh where make's packages are absent)
 *   NCCL_NVLS_ENABLE=0 ./bin/dha2a --gpus 1,2,4,8 --out a2a.csv --fit-out a2a.ini
 *   ./bin/dha2a --host --gpus 1,2,4,8      (no GPU: layout and checker through memcpy)
 *   ./bin/dha2a --fit-from a2a.csv --fit-out models/hw/a2a.ini   (refit a CSV, no GPU)
 *
 * One process drives every local GPU: ncclCommInitAll over the first G devices,
 * then one all-to-all is one ncclGroupStart .. ncclGroupEnd holding, for every
 * GPU, an ncclSend and an ncclRecv per peer with a non-empty block (itself
 * included: NCCL copies a self block locally), which works for 1 to 8 GPUs of
 * a host. Message sizes, routing and block layout come from a2a_plan.h; shapes
 * come from kernels/a2a/shapes.ini.
 *
 * Per (model, GPU count, tokens per GPU, phase) the program
 *   1. fills every rank's send buffer with messages naming their source rank,
 *      token, destination and expert, and sets every receive buffer to 0xA5;
 *   2. runs the all-to-all once and compares every rank's receive buffer with
 *      what the routing says it must receive (a mismatch ends the program with
 *      one line naming rank, source, token and byte) -- before any timing;
 *   3. runs warm-ups, then timed repeats back to back: per repeat, a CUDA event
 *      before and after the group on every GPU's stream; the repeat's time is
 *      the largest of the GPUs' elapsed times (each all-to-all ends only when
 *      every peer has sent, so this is the collective's time as the slowest
 *      GPU sees it, host launch gaps included);
 *   4. checks the receive buffers again after the timed repeats;
 *   5. prints a CSV row: median, p10 and p90 of the repeats, algbw = mean bytes
 *      a rank sends / median time, busbw = algbw * (G - 1) / G (the share that
 *      leaves the GPU, as nccl-tests reports all-to-all).
 * The per-peer message counts are known to every rank from the routing; the
 * count exchange a serving system does first (DeepEP's notify step) is not
 * timed. */
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "common/dh_err.h"
}
#include "kernels/a2a/a2a_plan.h"

static const char *TOOL = "dha2a";

#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess)                                                                  \
            dh_die(TOOL, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
    } while (0)
#define NCCL_CHECK(call)                                                                        \
    do {                                                                                        \
        ncclResult_t r_ = (call);                                                               \
        if (r_ != ncclSuccess)                                                                  \
            dh_die(TOOL, "%s:%d: %s: %s", __FILE__, __LINE__, #call, ncclGetErrorString(r_));   \
    } while (0)

struct options {
    const char *shapes = "kernels/a2a/shapes.ini";
    std::vector<std::string> models; /* empty: every model in the shapes file */
    std::vector<int> gpus;           /* empty: all visible GPUs */
    std::vector<int> tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    a2a_routing routing = A2A_ROUTE_RANDOM;
    a2a_dedup dedup = A2A_DEDUP_RANK;
    uint64_t seed = 1;
    int warmup = 20, repeats = 200;
    const char *out = nullptr, *fit_out = nullptr, *fit_from = nullptr;
    bool host = false, plant_fault = false;
};

static void usage(void)
{
    fprintf(stderr,
            "usage: dha2a [--shapes FILE] [--models a,b] [--gpus 1,2,4,8] [--tokens 1,2,...]\n"
            "             [--routing random|balanced] [--dedup rank|expert] [--seed N]\n"
            "             [--warmup N] [--repeats N] [--out CSV] [--fit-out INI]\n"
            "             [--host] [--plant-fault]\n"
            "       dha2a --fit-from CSV --fit-out INI [--routing R --dedup D as in the run]\n");
    exit(2);
}

static long parse_long(const char *flag, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        dh_die(TOOL, "%s '%s': expected an integer in [%ld, %ld]", flag, s, lo, hi);
    return v;
}

static std::vector<std::string> split(const char *s)
{
    std::vector<std::string> out;
    std::string cur;
    for (const char *p = s;; p++) {
        if (*p == ',' || *p == '\0') {
            out.push_back(cur);
            cur.clear();
            if (!*p)
                break;
        } else {
            cur += *p;
        }
    }
    return out;
}

static std::vector<int> parse_ints(const char *flag, const char *s, long lo, long hi)
{
    std::vector<int> v;
    for (const std::string &x : split(s))
        v.push_back((int)parse_long(flag, x.c_str(), lo, hi));
    return v;
}

static options parse_args(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        auto val = [&](void) -> const char * {
            if (i + 1 >= argc)
                dh_die(TOOL, "%s needs a value", a);
            return argv[++i];
        };
        if (!strcmp(a, "--shapes")) o.shapes = val();
        else if (!strcmp(a, "--models")) o.models = split(val());
        else if (!strcmp(a, "--gpus")) o.gpus = parse_ints(a, val(), 1, A2A_MAX_RANKS);
        else if (!strcmp(a, "--tokens")) o.tokens = parse_ints(a, val(), 1, 1 << 20);
        else if (!strcmp(a, "--seed")) o.seed = (uint64_t)parse_long(a, val(), 0, LONG_MAX);
        else if (!strcmp(a, "--warmup")) o.warmup = (int)parse_long(a, val(), 0, 1 << 20);
        else if (!strcmp(a, "--repeats")) o.repeats = (int)parse_long(a, val(), 1, 1 << 20);
        else if (!strcmp(a, "--out")) o.out = val();
        else if (!strcmp(a, "--fit-out")) o.fit_out = val();
        else if (!strcmp(a, "--fit-from")) o.fit_from = val();
        else if (!strcmp(a, "--host")) o.host = true;
        else if (!strcmp(a, "--plant-fault")) o.plant_fault = true;
        else if (!strcmp(a, "--routing")) {
            const char *v = val();
            if (!strcmp(v, "random")) o.routing = A2A_ROUTE_RANDOM;
            else if (!strcmp(v, "balanced")) o.routing = A2A_ROUTE_BALANCED;
            else dh_die(TOOL, "--routing '%s': expected random or balanced", v);
        } else if (!strcmp(a, "--dedup")) {
            const char *v = val();
            if (!strcmp(v, "rank")) o.dedup = A2A_DEDUP_RANK;
            else if (!strcmp(v, "expert")) o.dedup = A2A_DEDUP_EXPERT;
            else dh_die(TOOL, "--dedup '%s': expected rank or expert", v);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
        else dh_die(TOOL, "unknown option '%s' (try --help)", a);
    }
    if (o.host && o.gpus.empty())
        dh_die(TOOL, "--host needs --gpus (the rank counts to emulate)");
    if (o.host && o.fit_out)
        dh_die(TOOL, "--fit-out needs timings; it cannot be used with --host");
    if (o.fit_from && !o.fit_out)
        dh_die(TOOL, "--fit-from needs --fit-out");
    return o;
}

/* ------------------------------------------------------------------ results */

static const char *CSV_HEADER = "model,phase,gpus,tokens_per_gpu,hidden,topk,bytes_per_rank,"
                                 "median_us,p10_us,p90_us,algbw_gbps,busbw_gbps,checked,device";

struct row {
    std::string model;
    a2a_phase phase;
    int gpus, tokens;
    long hidden, topk;
    double bytes_per_rank;
    double median_us, p10_us, p90_us; /* NAN under --host */
    std::string checked, device;
};

/* Nearest-rank quantile of a sorted sample. */
static double quantile(const std::vector<double> &sorted, double q)
{
    size_t i = (size_t)std::floor(q * (double)(sorted.size() - 1) + 0.5);
    return sorted[std::min(i, sorted.size() - 1)];
}

static std::string fmt_num(double x, const char *f)
{
    if (std::isnan(x))
        return "";
    char b[64];
    snprintf(b, sizeof b, f, x);
    return b;
}

static std::string csv_text(const std::vector<row> &rows)
{
    std::string s = std::string(CSV_HEADER) + "\n";
    for (const row &r : rows) {
        double alg = r.bytes_per_rank / (r.median_us * 1e3); /* bytes/us -> GB/s is /1e3 */
        double bus = alg * (r.gpus - 1) / r.gpus;
        char b[512];
        snprintf(b, sizeof b, "%s,%s,%d,%d,%ld,%ld,%.0f,%s,%s,%s,%s,%s,%s,%s\n", r.model.c_str(),
                 a2a_phase_name(r.phase), r.gpus, r.tokens, r.hidden, r.topk, r.bytes_per_rank,
                 fmt_num(r.median_us, "%.2f").c_str(), fmt_num(r.p10_us, "%.2f").c_str(),
                 fmt_num(r.p90_us, "%.2f").c_str(), fmt_num(alg, "%.3f").c_str(),
                 fmt_num(bus, "%.3f").c_str(), r.checked.c_str(), r.device.c_str());
        s += b;
    }
    return s;
}

/* Write a whole file or nothing: a temporary beside it, then rename. */
static void write_atomic(const char *path, const std::string &text)
{
    std::string tmp = std::string(path) + ".tmp";
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f)
        dh_die(TOOL, "unable to open '%s': %s", tmp.c_str(), strerror(errno));
    bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp.c_str(), path) != 0) {
        remove(tmp.c_str());
        dh_die(TOOL, "unable to write '%s'", path);
    }
}

/* Least squares fit of median_us = latency_us + bytes / bandwidth over the rows
 * of one (GPU count, phase), all models together: the hardware profile is
 * model-independent, and a model enters only through its bytes per rank. */
static std::string fit_text(const std::vector<row> &rows, const options &o)
{
    std::string s;
    char b[1024];
    std::string from = o.fit_from ? std::string("the medians in ") + o.fit_from
                                  : std::string("the medians of this run");
    snprintf(b, sizeof b,
             "; models/hw/a2a.ini: expert-parallel all-to-all cost per GPU count and phase,\n"
             "; time_us = latency_us + bytes_per_rank / (bandwidth_gbps * 1e3), least squares\n"
             "; over every model and tokens-per-GPU point of %s\n"
             "; (bin/dha2a; schema in kernels/a2a/README.md). GPU counts without measurements\n"
             "; say 'unmeasured'.\n\n"
             "[a2a]\nrouting = %s\ndedup = %s\n",
             from.c_str(), a2a_routing_name(o.routing), a2a_dedup_name(o.dedup));
    s += b;
    std::vector<int> counts = {1, 2, 4, 8};
    for (const row &r : rows)
        if (std::find(counts.begin(), counts.end(), r.gpus) == counts.end())
            counts.push_back(r.gpus);
    std::sort(counts.begin(), counts.end());
    for (int g : counts)
        for (int ph = 0; ph < 2; ph++) {
            std::vector<const row *> pts;
            for (const row &r : rows)
                if (r.gpus == g && r.phase == ph)
                    pts.push_back(&r);
            snprintf(b, sizeof b, "\n[gpus.%d.%s]\n", g, a2a_phase_name((a2a_phase)ph));
            s += b;
            if (g == 1 && pts.size() >= 2)
                s += "; One GPU: NCCL copies the self block inside the GPU, no link is crossed;\n"
                     "; this validates the code path and gives the launch floor, not an EP cost.\n";
            if (pts.size() < 2) {
                s += "status = unmeasured\nlatency_us = unmeasured\nbandwidth_gbps = unmeasured\n";
                continue;
            }
            double n = (double)pts.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
            for (const row *r : pts) {
                sx += r->bytes_per_rank;
                sy += r->median_us;
                sxx += r->bytes_per_rank * r->bytes_per_rank;
                sxy += r->bytes_per_rank * r->median_us;
            }
            double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx); /* us per byte */
            double alpha = (sy - slope * sx) / n;
            double worst = 0;
            for (const row *r : pts) {
                double pred = alpha + slope * r->bytes_per_rank;
                worst = std::max(worst, std::fabs(pred - r->median_us) / r->median_us);
            }
            std::string bw = slope > 0 ? fmt_num(1e-3 / slope, "%.2f") : "unfit";
            snprintf(b, sizeof b,
                     "status = measured\nlatency_us = %.3f\nbandwidth_gbps = %s\n"
                     "fit_points = %zu\nfit_max_rel_residual = %.3f\ndevice = %s\n",
                     alpha, bw.c_str(), pts.size(), worst, pts[0]->device.c_str());
            s += b;
        }
    return s;
}

/* Read the rows of a CSV this program wrote with timings (checked = yes), to
 * fit them again without a GPU; any other content is an error naming the line. */
static std::vector<row> read_csv(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        dh_die(TOOL, "unable to open '%s': %s", path, strerror(errno));
    std::vector<row> rows;
    char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (lineno == 1) {
            if (strcmp(line, CSV_HEADER) != 0)
                dh_die(TOOL, "'%s': first line is not the dha2a CSV header", path);
            continue;
        }
        std::vector<std::string> c = split(line);
        if (c.size() != 14)
            dh_die(TOOL, "'%s' line %d: %zu fields, expected 14", path, lineno, c.size());
        row r;
        r.model = c[0];
        if (c[1] == "dispatch") r.phase = A2A_DISPATCH;
        else if (c[1] == "combine") r.phase = A2A_COMBINE;
        else dh_die(TOOL, "'%s' line %d: phase '%s'", path, lineno, c[1].c_str());
        char *end;
        double v[5];
        const int idx[5] = {2, 3, 6, 7, 4};
        for (int k = 0; k < 5; k++) {
            v[k] = strtod(c[idx[k]].c_str(), &end);
            if (c[idx[k]].empty() || *end || !(v[k] > 0))
                dh_die(TOOL, "'%s' line %d: field %d '%s' is not a positive number", path, lineno,
                       idx[k] + 1, c[idx[k]].c_str());
        }
        if (c[12] != "yes")
            dh_die(TOOL, "'%s' line %d: row is not checked ('%s')", path, lineno, c[12].c_str());
        r.gpus = (int)v[0];
        r.tokens = (int)v[1];
        r.bytes_per_rank = v[2];
        r.median_us = v[3];
        r.hidden = (long)v[4];
        r.topk = atol(c[5].c_str());
        r.checked = c[12];
        r.device = c[13];
        rows.push_back(r);
    }
    fclose(f);
    if (rows.empty())
        dh_die(TOOL, "'%s': no rows", path);
    return rows;
}

/* ------------------------------------------------------------------ host emulation */

/* The rank whose received bytes a planted fault corrupts: the last one that
 * receives anything (every all-to-all of at least one token has one). */
static int fault_rank(const a2a_plan &p)
{
    int g = p.ranks - 1;
    while (g > 0 && p.recv_bytes[g] == 0)
        g--;
    return g;
}

/* Run the plan's exchange through memcpy and check it: the CPU path of CI. */
static void run_host(const a2a_plan &p, bool fault)
{
    int G = p.ranks;
    std::vector<std::vector<uint8_t>> send(G), recv(G);
    std::vector<uint8_t *> sp(G), rp(G);
    for (int r = 0; r < G; r++) {
        send[r].resize(p.send_bytes[r] + 1);
        recv[r].assign(p.recv_bytes[r] + 1, 0xA5);
        a2a_fill_send(&p, r, send[r].data());
        sp[r] = send[r].data();
        rp[r] = recv[r].data();
    }
    a2a_exchange_host(&p, sp.data(), rp.data());
    if (fault)
        recv[fault_rank(p)][p.recv_bytes[fault_rank(p)] / 2] ^= 0x10;
    for (int r = 0; r < G; r++)
        if (a2a_check_recv(&p, r, recv[r].data()) < 0)
            dh_die_last(TOOL);
}

/* ------------------------------------------------------------------ GPU */

struct gpu_set {
    int n = 0;
    std::vector<ncclComm_t> comm;
    std::vector<cudaStream_t> stream;
    std::string device;
};

static void gpu_open(gpu_set &gs, int n)
{
    gs.n = n;
    gs.comm.resize(n);
    gs.stream.resize(n);
    std::vector<int> devs(n);
    for (int g = 0; g < n; g++)
        devs[g] = g;
    NCCL_CHECK(ncclCommInitAll(gs.comm.data(), n, devs.data()));
    for (int g = 0; g < n; g++) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaStreamCreateWithFlags(&gs.stream[g], cudaStreamNonBlocking));
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    gs.device = prop.name;
    std::replace(gs.device.begin(), gs.device.end(), ',', ' ');
}

static void gpu_close(gpu_set &gs)
{
    for (int g = 0; g < gs.n; g++) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaStreamDestroy(gs.stream[g]));
        NCCL_CHECK(ncclCommDestroy(gs.comm[g]));
    }
    gs.n = 0;
}

/* Enqueue one all-to-all of the plan on every GPU. */
static void gpu_exchange(const gpu_set &gs, const a2a_plan &p, const std::vector<uint8_t *> &send,
                         const std::vector<uint8_t *> &recv)
{
    int G = p.ranks;
    NCCL_CHECK(ncclGroupStart());
    for (int g = 0; g < G; g++)
        for (int peer = 0; peer < G; peer++) {
            size_t sb = p.count[g * G + peer] * p.msg_bytes;
            size_t rb = p.count[peer * G + g] * p.msg_bytes;
            /* Empty blocks are skipped on both sides: the counts agree. */
            if (sb)
                NCCL_CHECK(ncclSend(send[g] + p.send_off[g * G + peer], sb, ncclUint8, peer,
                                    gs.comm[g], gs.stream[g]));
            if (rb)
                NCCL_CHECK(ncclRecv(recv[g] + p.recv_off[g * G + peer], rb, ncclUint8, peer,
                                    gs.comm[g], gs.stream[g]));
        }
    NCCL_CHECK(ncclGroupEnd());
}

static void gpu_sync(const gpu_set &gs)
{
    for (int g = 0; g < gs.n; g++) {
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaStreamSynchronize(gs.stream[g]));
    }
}

/* Copy every rank's receive buffer back and check it; `fault` flips one byte
 * of one rank's copy first (fault_rank), to show that the check catches it. */
static void gpu_check(const gpu_set &gs, const a2a_plan &p, const std::vector<uint8_t *> &recv,
                      bool fault, const char *when)
{
    for (int g = 0; g < p.ranks; g++) {
        std::vector<uint8_t> host(p.recv_bytes[g] + 1);
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaMemcpy(host.data(), recv[g], p.recv_bytes[g], cudaMemcpyDeviceToHost));
        if (fault && g == fault_rank(p))
            host[p.recv_bytes[g] / 2] ^= 0x10;
        if (a2a_check_recv(&p, g, host.data()) < 0) {
            dh_err_prefix("%s: ", when);
            dh_die_last(TOOL);
        }
    }
}

/* Check, time and re-check one plan on the GPUs; returns the repeat times. */
static std::vector<double> run_gpu(const gpu_set &gs, const a2a_plan &p, const options &o,
                                   bool fault)
{
    int G = p.ranks;
    std::vector<uint8_t *> send(G), recv(G);
    for (int g = 0; g < G; g++) {
        std::vector<uint8_t> host(p.send_bytes[g] + 1);
        a2a_fill_send(&p, g, host.data());
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaMalloc(&send[g], p.send_bytes[g] + 1));
        CUDA_CHECK(cudaMalloc(&recv[g], p.recv_bytes[g] + 1));
        CUDA_CHECK(cudaMemcpy(send[g], host.data(), p.send_bytes[g], cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(recv[g], 0xA5, p.recv_bytes[g] + 1));
    }
    gpu_exchange(gs, p, send, recv);
    gpu_sync(gs);
    gpu_check(gs, p, recv, fault, "before timing");

    int R = o.repeats;
    std::vector<cudaEvent_t> ev_start((size_t)R * G), ev_stop((size_t)R * G);
    for (int g = 0; g < G; g++) {
        CUDA_CHECK(cudaSetDevice(g));
        for (int i = 0; i < R; i++) {
            CUDA_CHECK(cudaEventCreate(&ev_start[(size_t)i * G + g]));
            CUDA_CHECK(cudaEventCreate(&ev_stop[(size_t)i * G + g]));
        }
    }
    for (int i = 0; i < o.warmup; i++)
        gpu_exchange(gs, p, send, recv);
    gpu_sync(gs);
    for (int i = 0; i < R; i++) {
        for (int g = 0; g < G; g++) {
            CUDA_CHECK(cudaSetDevice(g));
            CUDA_CHECK(cudaEventRecord(ev_start[(size_t)i * G + g], gs.stream[g]));
        }
        gpu_exchange(gs, p, send, recv);
        for (int g = 0; g < G; g++) {
            CUDA_CHECK(cudaSetDevice(g));
            CUDA_CHECK(cudaEventRecord(ev_stop[(size_t)i * G + g], gs.stream[g]));
        }
    }
    gpu_sync(gs);
    CUDA_CHECK(cudaGetLastError());
    std::vector<double> us(R, 0.0);
    for (int i = 0; i < R; i++)
        for (int g = 0; g < G; g++) {
            float ms;
            CUDA_CHECK(cudaEventElapsedTime(&ms, ev_start[(size_t)i * G + g],
                                            ev_stop[(size_t)i * G + g]));
            us[i] = std::max(us[i], 1e3 * (double)ms);
        }
    gpu_check(gs, p, recv, false, "after timing");
    for (int g = 0; g < G; g++) {
        CUDA_CHECK(cudaSetDevice(g));
        for (int i = 0; i < R; i++) {
            CUDA_CHECK(cudaEventDestroy(ev_start[(size_t)i * G + g]));
            CUDA_CHECK(cudaEventDestroy(ev_stop[(size_t)i * G + g]));
        }
        CUDA_CHECK(cudaFree(send[g]));
        CUDA_CHECK(cudaFree(recv[g]));
    }
    return us;
}

int main(int argc, char **argv)
{
    options o = parse_args(argc, argv);
    if (o.fit_from) {
        write_atomic(o.fit_out, fit_text(read_csv(o.fit_from), o));
        return 0;
    }
    /* NVLink multicast (NVLS) is not used by send/recv, and some shared hosts
     * require it off; keep the user's value if one is set. */
    if (!getenv("NCCL_NVLS_ENABLE"))
        setenv("NCCL_NVLS_ENABLE", "0", 0);

    a2a_shapes shapes;
    if (a2a_shapes_load(o.shapes, &shapes) < 0)
        dh_die_last(TOOL);
    std::vector<const a2a_shape *> models;
    if (o.models.empty())
        for (int i = 0; i < shapes.n; i++)
            models.push_back(&shapes.model[i]);
    for (const std::string &name : o.models) {
        const a2a_shape *m = a2a_shapes_find(&shapes, name.c_str());
        if (!m)
            dh_die(TOOL, "model '%s' is not in '%s'", name.c_str(), o.shapes);
        models.push_back(m);
    }
    /* Every plan is built and validated up front, so an impossible parameter
     * fails before any GPU work or output. */
    for (const a2a_shape *m : models)
        for (int g : o.gpus)
            if (m->experts % g != 0)
                dh_die(TOOL, "model '%s': %ld experts do not split evenly over %d GPUs", m->name,
                       m->experts, g);
    if (o.routing == A2A_ROUTE_BALANCED)
        for (const a2a_shape *m : models)
            if (m->experts % m->topk != 0)
                dh_die(TOOL, "model '%s': balanced routing needs experts divisible by topk",
                       m->name);

    if (!o.host) {
        int ndev = 0;
        CUDA_CHECK(cudaGetDeviceCount(&ndev));
        if (o.gpus.empty())
            o.gpus.push_back(ndev);
        for (int g : o.gpus)
            if (g > ndev)
                dh_die(TOOL, "--gpus %d: only %d GPUs are visible", g, ndev);
        int v = 0;
        NCCL_CHECK(ncclGetVersion(&v));
        fprintf(stderr, "dha2a: NCCL %d, NCCL_NVLS_ENABLE=%s, routing %s, dedup %s, seed %llu\n",
                v, getenv("NCCL_NVLS_ENABLE"), a2a_routing_name(o.routing),
                a2a_dedup_name(o.dedup), (unsigned long long)o.seed);
    }

    std::vector<row> rows;
    bool fault = o.plant_fault;
    for (int G : o.gpus) {
        gpu_set gs;
        if (!o.host)
            gpu_open(gs, G);
        for (const a2a_shape *m : models)
            for (int T : o.tokens) {
                std::vector<int32_t> route((size_t)G * T * m->topk);
                a2a_plan plan[2];
                if (a2a_route(m, G, T, o.routing, o.seed, route.data()) < 0 ||
                    a2a_plan_dispatch(m, G, T, route.data(), o.dedup, &plan[0]) < 0 ||
                    a2a_plan_combine(m, &plan[0], &plan[1]) < 0)
                    dh_die_last(TOOL);
                for (int ph = 0; ph < 2; ph++) {
                    row r;
                    r.model = m->name;
                    r.phase = (a2a_phase)ph;
                    r.gpus = G;
                    r.tokens = T;
                    r.hidden = m->hidden;
                    r.topk = m->topk;
                    r.bytes_per_rank = a2a_plan_mean_send_bytes(&plan[ph]);
                    if (o.host) {
                        run_host(plan[ph], fault);
                        r.median_us = r.p10_us = r.p90_us = NAN;
                        r.checked = "host";
                        r.device = "host-memcpy";
                    } else {
                        std::vector<double> us = run_gpu(gs, plan[ph], o, fault);
                        std::sort(us.begin(), us.end());
                        r.median_us = quantile(us, 0.5);
                        r.p10_us = quantile(us, 0.1);
                        r.p90_us = quantile(us, 0.9);
                        r.checked = "yes";
                        r.device = gs.device;
                        fprintf(stderr, "dha2a: %s %s G=%d T=%d %.0f B/rank median %.2f us\n",
                                m->name, a2a_phase_name(r.phase), G, T, r.bytes_per_rank,
                                r.median_us);
                    }
                    fault = false; /* a planted fault must have stopped the program */
                    rows.push_back(r);
                }
                a2a_plan_release(&plan[0]);
                a2a_plan_release(&plan[1]);
            }
        if (!o.host)
            gpu_close(gs);
    }

    std::string csv = csv_text(rows);
    if (o.out)
        write_atomic(o.out, csv);
    else
        fputs(csv.c_str(), stdout);
    if (o.fit_out)
        write_atomic(o.fit_out, fit_text(rows, o));
    return 0;
}
