/* gather.cu: the ceiling of the sparse attention's own memory access, a gather of rows of 656
 * (FP8) or 1152 (BF16) bytes from random slots of a large device pool. The attention target
 * counts "the bytes of the selected rows" against the HBM copy rate, which moves long
 * sequential runs; this measures what random rows of these sizes can reach, with the warps per
 * SM the attention's producer has (4) and with a full SM (up to 64).
 *
 * Each row is reduced to a 32-bit checksum (the sum of its 32-bit words), so that no load is
 * dead, and every checksum is compared with the CPU's before timing. The pool is filled on the
 * GPU from a hash of (slot, word), which the CPU recomputes for the selected rows.
 * Versions (one block per SM, `warps` warps each, rows taken in a grid-stride loop):
 *   1  two threads per row, every second 16-byte chunk each: the attention producer's pattern
 *      (a warp instruction touches 16 rows x 32 bytes);
 *   2  one warp per row, lanes on consecutive 16-byte chunks (a warp instruction touches one
 *      row's 512 contiguous bytes);
 *   3  = 2 with 4 rows per warp loaded before any is reduced (4x the bytes in flight per warp);
 *   4  the copy engine: warp 0 issues a bulk asynchronous copy per row (lane i: row i of a stage)
 *      (cp.async.bulk, completion counted in bytes on a stage's mbarrier) into a ring of
 *      shared-memory stages of 16 rows (~180 KB in all), the other warps reduce each landed
 *      stage and hand it back: bytes in flight without registers or load instructions, the
 *      way a producer with few threads could keep many rows moving. */
#include "kernels/bench.cuh"
#include "kernels/kref.h"
#include "kernels/lib/sync.cuh"

#include <algorithm>
#include <string>
#include <vector>

static __host__ __device__ inline uint32_t gather_word(uint64_t slot, uint32_t w)
{
    uint64_t x = slot * 0x9E3779B97F4A7C15ull + w * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(x >> 32);
}

__global__ void gather_fill_kernel(uint32_t *pool, size_t words, uint32_t row_words)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
        pool[i] = gather_word(i / row_words, (uint32_t)(i % row_words));
}

__device__ __forceinline__ uint32_t gather_sum4(uint4 v) { return v.x + v.y + v.z + v.w; }

/* Version 1: thread pair per row; CH chunks of 16 B per row. */
template <int CH>
__global__ void gather_v1(const uint8_t *__restrict__ pool, size_t stride, const int32_t *__restrict__ idx, int n,
                          uint32_t *__restrict__ out)
{
    const int pairs = gridDim.x * blockDim.x / 2;
    const int hf = threadIdx.x & 1;
    /* The loop bound is the warp's first row, so all 32 lanes stay for the shuffle. */
    const int warp_row0 = (blockIdx.x * blockDim.x + threadIdx.x) / 32 * 16;
    for (int r = (blockIdx.x * blockDim.x + threadIdx.x) / 2, w0 = warp_row0; w0 < n; r += pairs, w0 += pairs) {
        const bool in = r < n;
        const uint8_t *row = pool + (size_t)idx[in ? r : w0] * stride;
        uint4 v[(CH + 1) / 2];
#pragma unroll
        for (int i = 0; i < (CH + 1) / 2; i++) {
            const int c = hf + 2 * i;
            v[i] = c < CH ? *(const uint4 *)(row + c * 16) : make_uint4(0, 0, 0, 0);
        }
        uint32_t s = 0;
#pragma unroll
        for (int i = 0; i < (CH + 1) / 2; i++) s += gather_sum4(v[i]);
        s += __shfl_xor_sync(0xffffffff, s, 1);
        if (!hf && in) out[r] = s;
    }
}

/* Versions 2 and 3: a warp per row, R rows per warp in flight. */
template <int CH, int R>
__global__ void gather_v2(const uint8_t *__restrict__ pool, size_t stride, const int32_t *__restrict__ idx, int n,
                          uint32_t *__restrict__ out)
{
    constexpr int PER = (CH + 31) / 32;   /* chunks per lane */
    const int lane = threadIdx.x & 31;
    const int warps = gridDim.x * blockDim.x / 32;
    for (int r0 = (blockIdx.x * blockDim.x + threadIdx.x) / 32 * R; r0 < n; r0 += warps * R) {
        uint4 v[R][PER];
#pragma unroll
        for (int k = 0; k < R; k++) {
            const int r = min(r0 + k, n - 1);
            const uint8_t *row = pool + (size_t)idx[r] * stride;
#pragma unroll
            for (int i = 0; i < PER; i++) {
                const int c = lane + 32 * i;
                v[k][i] = c < CH ? *(const uint4 *)(row + c * 16) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int k = 0; k < R; k++) {
            uint32_t s = 0;
#pragma unroll
            for (int i = 0; i < PER; i++) s += gather_sum4(v[k][i]);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
            if (lane == 0 && r0 + k < n) out[r0 + k] = s;
        }
    }
}

/* Version 4. Stage s of the ring holds G4_ROWS rows; full[s] completes when its bytes have
 * landed (expect_tx by the issuing thread), empty[s] when the reducing warps are done. */
#define G4_ROWS 16
#define G4_SMEM (180 * 1024)
static constexpr __host__ __device__ int g4_stages(int row_bytes) { return G4_SMEM / (G4_ROWS * row_bytes); }

template <int ROW>
__global__ void gather_v4(const uint8_t *__restrict__ pool, size_t stride, const int32_t *__restrict__ idx, int n,
                          uint32_t *__restrict__ out)
{
#if DH_HAS_SM90
    constexpr int ST = g4_stages(ROW);
    extern __shared__ __align__(128) uint8_t g4_smem[];
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(g4_smem);
    const uint32_t full = base + ST * G4_ROWS * ROW, empty = full + 8 * ST;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, reducers = blockDim.x / 32 - 1;
    const int tiles = (n + G4_ROWS - 1) / G4_ROWS;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            dh_mbar_init(full + 8 * s, 1);
            dh_mbar_init(empty + 8 * s, reducers);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    int k = 0;   /* this block's k-th tile */
    if (warp == 0) {
        /* Lane i issues row i's copy: the 16 row ids load in parallel, and lane 0 alone waits
         * for the free stage and announces the stage's bytes. */
        for (int t = blockIdx.x; t < tiles; t += gridDim.x, k++) {
            const int s = k % ST, rows = min(G4_ROWS, n - t * G4_ROWS);
            const int32_t id = lane < rows ? idx[t * G4_ROWS + lane] : 0;
            if (lane == 0) {
                if (k >= ST) dh_mbar_wait(empty + 8 * s, ((k / ST) - 1) & 1);
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full + 8 * s), "r"(rows * ROW) : "memory");
            }
            __syncwarp();
            if (lane < rows)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             ::"r"(base + (s * G4_ROWS + lane) * ROW), "l"(pool + (size_t)id * stride), "r"(ROW), "r"(full + 8 * s)
                             : "memory");
        }
        return;
    }
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, k++) {
        const int s = k % ST, rows = min(G4_ROWS, n - t * G4_ROWS);
        dh_mbar_wait(full + 8 * s, (k / ST) & 1);
        for (int i = warp - 1; i < rows; i += reducers) {
            const uint8_t *row = g4_smem + (s * G4_ROWS + i) * ROW;
            uint32_t sum = 0;
            for (int c = lane; c < ROW / 16; c += 32) sum += gather_sum4(*(const uint4 *)(row + c * 16));
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
            if (lane == 0) out[t * G4_ROWS + i] = sum;
        }
        __syncwarp();
        if (lane == 0) dh_mbar_arrive(empty + 8 * s);
    }
#else
    DH_ARCH_TRAP();   /* version 4 needs sm_90 (kernels/karch.c) */
#endif
}

size_t gather_smem_need(int version, int row_bytes)
{
    return version == 4 ? (size_t)g4_stages(row_bytes) * G4_ROWS * row_bytes + 16 * g4_stages(row_bytes) : 0;
}

template <int CH>
static void gather_launch(int version, int blocks, int threads, const uint8_t *pool, size_t stride, const int32_t *idx,
                          int n, uint32_t *out)
{
    constexpr int ROW = CH * 16;
    constexpr size_t smem4 = (size_t)g4_stages(ROW) * G4_ROWS * ROW + 16 * g4_stages(ROW);
    if (version == 1) gather_v1<CH><<<blocks, threads>>>(pool, stride, idx, n, out);
    else if (version == 2) gather_v2<CH, 1><<<blocks, threads>>>(pool, stride, idx, n, out);
    else if (version == 3) gather_v2<CH, 4><<<blocks, threads>>>(pool, stride, idx, n, out);
    else {
        static bool attr = false;
        if (!attr) cudaCheck(cudaFuncSetAttribute(gather_v4<ROW>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem4));
        attr = true;
        gather_v4<ROW><<<blocks, threads, smem4>>>(pool, stride, idx, n, out);
    }
    CUDA_LAUNCH_CHECK();
}

/* A grid point's parameters that need no device: 0, or -1 after an error line. */
int bench_gather_check(const bench_params &p)
{
    const int version = (int)p.num("version", 2);
    const int row_bytes = (int)p.num("row_bytes", KREF_ROW_BYTES_FP8);
    const int n = (int)p.num("rows", 262144);
    const int warps = (int)p.num("warps", 4);
    if (version < 1 || version > 4) { fprintf(stderr, "dhbench: gather: version %d is not 1 to 4\n", version); return -1; }
    if (row_bytes != KREF_ROW_BYTES_FP8 && row_bytes != KREF_ROW_BYTES_BF16) {
        fprintf(stderr, "dhbench: gather: row_bytes %d is not %d or %d\n", row_bytes, (int)KREF_ROW_BYTES_FP8,
                (int)KREF_ROW_BYTES_BF16);
        return -1;
    }
    if (warps < (version == 4 ? 2 : 1) || warps > 32 || n < 1) {
        fprintf(stderr, "dhbench: gather: warps=%d rows=%d: need 1 <= warps <= 32 (2 for version 4) and rows >= 1\n",
                warps, n);
        return -1;
    }
    const double pool_gb = p.real("pool_gb", 4.0);
    const size_t slots = pool_gb > 0 ? (size_t)(pool_gb * 1e9) / row_bytes : 0;
    if (slots < (size_t)n || slots > 0x7fffffff) {
        fprintf(stderr, "dhbench: gather: a %.3g GB pool holds %zu rows, need rows <= slots < 2^31\n", pool_gb, slots);
        return -1;
    }
    return 0;
}

int bench_gather(bench_env *env, const bench_params &p)
{
    if (bench_gather_check(p)) return -1;
    const int version = (int)p.num("version", 2);
    const int row_bytes = (int)p.num("row_bytes", KREF_ROW_BYTES_FP8);
    const int n = (int)p.num("rows", 262144);
    const double pool_gb = p.real("pool_gb", 4.0);
    const int warps = (int)p.num("warps", 4);
    const int sms = (int)p.num("sms", env->prop.multiProcessorCount);
    if (sms < 1 || sms > env->prop.multiProcessorCount) {
        fprintf(stderr, "dhbench: gather: sms=%d is not 1 to %d\n", sms, env->prop.multiProcessorCount);
        return -1;
    }
    const size_t slots = (size_t)(pool_gb * 1e9) / row_bytes;
    /* Distinct random slots in a random order, several sets rotated over the timed runs. */
    const int nsets = env->quick ? 1 : 4;
    bench_rng rng(0x9a7e ^ (uint64_t)row_bytes * 977 ^ (uint64_t)n);
    std::vector<int32_t> idx_h((size_t)n * nsets);
    for (int s = 0; s < nsets; s++) {
        std::vector<int32_t> pick;
        while ((int)pick.size() < n) {   /* random slots, duplicates dropped, until n remain */
            for (int i = (int)pick.size(); i < n + n / 16 + 16; i++) pick.push_back((int32_t)rng.below((uint32_t)slots));
            std::sort(pick.begin(), pick.end());
            pick.erase(std::unique(pick.begin(), pick.end()), pick.end());
        }
        for (int i = (int)pick.size() - 1; i > 0; i--) std::swap(pick[i], pick[rng.below((uint32_t)i + 1)]);
        std::copy(pick.begin(), pick.begin() + n, idx_h.begin() + (size_t)s * n);
    }
    uint8_t *pool;
    int32_t *idx;
    uint32_t *out;
    cudaCheck(cudaMalloc(&pool, slots * row_bytes));
    cudaCheck(cudaMalloc(&idx, idx_h.size() * 4));
    cudaCheck(cudaMalloc(&out, (size_t)n * 4));
    cudaCheck(cudaMemcpy(idx, idx_h.data(), idx_h.size() * 4, cudaMemcpyHostToDevice));
    gather_fill_kernel<<<env->prop.multiProcessorCount * 8, 256>>>((uint32_t *)pool, slots * row_bytes / 4, row_bytes / 4);
    CUDA_LAUNCH_CHECK();
    const int threads = 32 * warps;
    auto launch = [&](int rep) {
        const int32_t *ix = idx + (size_t)(rep % nsets) * n;
        if (row_bytes == KREF_ROW_BYTES_FP8) gather_launch<KREF_ROW_BYTES_FP8 / 16>(version, sms, threads, pool, row_bytes, ix, n, out);
        else gather_launch<KREF_ROW_BYTES_BF16 / 16>(version, sms, threads, pool, row_bytes, ix, n, out);
    };
    cudaCheck(cudaMemset(out, 0, (size_t)n * 4));
    launch(0);
    std::vector<uint32_t> out_h(n);
    cudaCheck(cudaMemcpy(out_h.data(), out, (size_t)n * 4, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        uint32_t s = 0;
        for (int w = 0; w < row_bytes / 4; w++) s += gather_word((uint64_t)idx_h[i], (uint32_t)w);
        if (s != out_h[i]) {
            fprintf(stderr, "dhbench: gather v%d: row %d (slot %d) checksum %08x, CPU %08x\n", version, i, idx_h[i],
                    out_h[i], s);
            ok = 0;
        }
    }
    bench_record r;
    r.kernel = "gather";
    r.version = std::to_string(version);
    r.row_bytes = row_bytes;
    r.rows = n;
    r.sms = sms;
    r.pool_bytes = (long long)(slots * row_bytes);
    r.pattern = "random_w" + std::to_string(warps);
    r.bytes = (double)n * row_bytes;
    r.ceiling_name = "hbm_d2d";
    r.ceiling_value = env->hbm_gbps;
    r.checked = ok;
    if (ok) bench_take(r, bench_time(env, launch));
    bench_emit(env, r);
    cudaCheck(cudaFree(pool));
    cudaCheck(cudaFree(idx));
    cudaCheck(cudaFree(out));
    return ok ? 0 : -1;
}
