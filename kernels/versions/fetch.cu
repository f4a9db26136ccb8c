/* fetch.cu: miss fetch, hot[slot[i]] = pool[row[i]], from a pinned host pool into GPU hot-buffer
 * slots, on a given number of SMs. CPU reference: kref_gather_rows (kernels/kref.c).
 *
 * Versions (suite key versions=...; version 5 with 16-byte rows is the library's,
 * kernels/lib/fetch.cu, dhk_fetch_launch):
 *   1  one warp per row, 16-byte loads (8-byte for 584 B rows), rows interleaved over warps:
 *      HiSparse's kernel; every load waits on its own PCIe round trip.
 *   2  each warp takes a contiguous run of the list and keeps 8 rows (up to 24 loads per lane)
 *      in flight before the first store: latency hidden; runs of the list stay on one warp,
 *      so a warp's rows share host pages when the list is grouped by window.
 *   3  version 2 with the pool and the hot buffer padded to 128-byte rows (656 -> 768,
 *      584 -> 640, 1152 stays): every row starts on a 128-byte line, so no row costs an
 *      extra partial line read.
 *   4  bulk asynchronous copies (cp.async.bulk, the Hopper copy engine of each SM): one lane
 *      per warp streams 8-row batches host -> shared memory -> hot buffer through 4 stages;
 *      needs 16-byte aligned rows, so 584 B rows use the padded layout.
 *   6  host gather + DMA: host threads memcpy the rows into a pinned staging buffer in
 *      chunks, each chunk goes over the link in one cudaMemcpyAsync while the next is
 *      gathered, and a device kernel scatters the staging rows into their slots. Timed with
 *      a wall clock around all of it. The GPU translates no host addresses at all here.
 *   5  version 1's interleaving (consecutive list entries on consecutive warps, so the rows
 *      in flight on the whole GPU are one short stretch of the list) with 4 rows in flight
 *      per warp: version 2's contiguous runs per warp spread the rows in flight over as many
 *      windows as there are warps, and the GPU's host-address translation pays for it.
 *   7  hybrid: the host threads gather and DMA the first host_share of the list while version
 *      1 reads the rest zero-copy, concurrently; the two paths have different limits (host
 *      memcpy rate, GPU translation), and together can fill more of the link. Wall clock.
 *   8  bounded window: version 5's warps (4 rows in flight each) take their rows from a shared
 *      counter, and a warp may start list entry i only once i + 4 - window rows are done, so
 *      at most `window` rows are in flight on the whole launch and they are one stretch of
 *      about `window` entries of the (sorted) list: the distinct host pages in flight are
 *      bounded by the window, whatever the warps' drift. Sweeping the window measures the rate
 *      against the pages in flight.
 *   9  version 6 with the host threads prefetching the rows `prefetch` entries ahead (many
 *      row misses in flight per core, not one memcpy's), 16-byte scatter words, and the
 *      scatter launched per group of scatter_rows rows on its own stream so that it overlaps
 *      the copies of the following chunks instead of running after all of them. Wall clock.
 *   10 hybrid of 9 and 1: host_share of the list by 9 (scatter on scatter_sms SMs), the rest
 *      zero-copy by version 1 on the other sms - scatter_sms SMs, concurrently. Wall clock.
 * (Per-row copy-engine copies, cudaMemcpyBatchAsync, were measured at 0.3-1.6 GB/s below
 *  1 KB: the per-copy cost dominates, so no version here uses them.)
 *
 * Host pools (pages=): pinned (cudaHostAlloc, 4 KB pages), thp / register (mmap + cudaHostRegister,
 * transparent huge pages or 4 KB), huge2m / huge1g (MAP_HUGETLB + cudaHostRegister), vmm (the
 * driver's virtual memory management: cuMemCreate of pinned host memory on NUMA node 0, mapped
 * into the unified address space at the allocation granularity the driver recommends, with
 * read-write access for the GPU and the CPU; the driver entry points come through the runtime,
 * so no libcuda is needed at build time).
 *
 * Patterns: uniform (rows uniform over the pool), serving ((request, layer) windows of
 * window_rows rows, miss_per_window rows missed in each, ascending inside a window, windows
 * in random order), serving_sorted (windows in address order). Index sets rotate so the
 * bytes read over the reps exceed L2 several times.
 *
 * Beside other work (beside=, versions 1-5 and 8): a background kernel runs on its own
 * non-blocking stream through the whole timing, two 256-thread blocks per SM (room left for
 * the fetch's blocks beside them): hbm streams 16-byte reads over a 4 GB device buffer (what
 * a decode step's weight-streaming GEMMs and attention do to the memory system), alu runs
 * dependent FMAs on registers (the SMs' issue slots busy, memory idle). The fetch is timed on
 * its own stream; the background's own rate is printed. What the compute beside a fetch does
 * to it, by locality (suites/fetch-beside.suite; the simulator's [hw] compute_interference). */
#include "kernels/bench.cuh"
#include "kernels/kref.h"
#include "kernels/lib/arch.cuh"
#include "kernels/lib/fetch_rows.cuh"   // defines: fetch_rows_kernel (versions 1, 2, 3, 5), FETCH_CPL

#include <cuda.h>
#include <sys/mman.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

/* ---- device kernels ---- */

/* ---- version 8: a bounded window of rows in flight ---- */

/* ctr[0] counts list entries handed out, ctr[1] list entries whose loads have returned; both are
 * zero at launch. A warp takes R entries from ctr[0] and waits until ctr[1] >= i0 + R - window:
 * rows in flight never exceed window, and they are the entries just behind the hand-out point.
 * No deadlock while window >= R: the warp holding the lowest pending entry j waits for
 * ctr[1] >= j + R - window <= j, and every entry below j is done. Every block must be resident
 * at once (one block per SM, grid <= SM count), which the launch guarantees. */
template <typename V, int R, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
fetch_window_kernel(const uint8_t *__restrict__ pool, size_t pool_stride,
                    const int64_t *__restrict__ rows, const int32_t *__restrict__ slots, int n,
                    int row_bytes, uint8_t *__restrict__ hot, size_t hot_stride, int window,
                    unsigned int *ctr)
{
    const int lane = threadIdx.x & 31;
    const int nvec = row_bytes / (int)sizeof(V);
    for (;;) {
        int i0 = 0;
        if (lane == 0) {
            i0 = (int)atomicAdd(&ctr[0], (unsigned)R);
            if (i0 < n) {
                int need = min(i0 + R, n) - window;
                while ((int)*(volatile unsigned int *)&ctr[1] < need) __nanosleep(32);
            }
        }
        i0 = __shfl_sync(0xffffffffu, i0, 0);
        if (i0 >= n) break;
        V buf[R][FETCH_CPL];
#pragma unroll
        for (int r = 0; r < R; r++) {
            int i = i0 + r;
            if (i < n) {
                const V *src = (const V *)(pool + (size_t)rows[i] * pool_stride);
#pragma unroll
                for (int c = 0; c < FETCH_CPL; c++)
                    if (lane + 32 * c < nvec) buf[r][c] = src[lane + 32 * c];
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            int i = i0 + r;
            if (i < n) {
                V *dst = (V *)(hot + (size_t)slots[i] * hot_stride);
#pragma unroll
                for (int c = 0; c < FETCH_CPL; c++)
                    if (lane + 32 * c < nvec) dst[lane + 32 * c] = buf[r][c];
            }
        }
        /* Each lane's stores consumed its loaded registers, so once every lane is past them all
         * of the warp's loads have returned: the rows leave the window. */
        __syncwarp();
        if (lane == 0) atomicAdd(&ctr[1], (unsigned)(min(i0 + R, n) - i0));
    }
}

/* ---- version 4: cp.async.bulk through shared memory ---- */

#define BULK_STAGES 4
#define BULK_BATCH 8
#define BULK_WARPS 4

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Version 4's instructions exist from sm_90 on; on earlier targets the kernel is a trap, never
 * launched there (kernels/karch.c). */
#if DH_HAS_SM90
__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT_%=;\n"
        "}\n" ::"r"(smem_u32(bar)), "r"(parity) : "memory");
}

__device__ __forceinline__ void bulk_load(void *dst_smem, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(smem_u32(dst_smem)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void bulk_store(void *dst, const void *src_smem, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(dst), "r"(smem_u32(src_smem)), "r"(bytes) : "memory");
}

__global__ void __launch_bounds__(32 * BULK_WARPS)
fetch_bulk_kernel(const uint8_t *__restrict__ pool, size_t pool_stride,
                  const int64_t *__restrict__ rows, const int32_t *__restrict__ slots, int n,
                  int copy_bytes, uint8_t *__restrict__ hot, size_t hot_stride)
{
    extern __shared__ __align__(128) uint8_t fetch_smem[];
    __shared__ __align__(8) uint64_t bars[BULK_WARPS][BULK_STAGES];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const int warp = blockIdx.x * BULK_WARPS + wib, nwarps = gridDim.x * BULK_WARPS;
    const int slot_bytes = (copy_bytes + 127) & ~127;
    uint8_t *stage_base = fetch_smem + (size_t)wib * BULK_STAGES * BULK_BATCH * slot_bytes;
    if (lane != 0) return;  /* one lane drives the copy engine; the others have nothing to do */
    for (int s = 0; s < BULK_STAGES; s++) mbar_init(&bars[wib][s], 1);
    int per = (n + nwarps - 1) / nwarps;
    int begin = warp * per, end = min(n, begin + per);
    int nb = end > begin ? (end - begin + BULK_BATCH - 1) / BULK_BATCH : 0;
    for (int b = 0; b <= nb; b++) {
        if (b < nb) {
            int s = b % BULK_STAGES;
            /* Stage s was last read by the stores of batch b - STAGES; those are at most the
             * (STAGES - 2)-th newest committed group, so waiting down to STAGES - 2
             * outstanding groups frees it while newer stores keep streaming. */
            asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(BULK_STAGES - 2) : "memory");
            int i0 = begin + b * BULK_BATCH, cnt = min(BULK_BATCH, end - i0);
            mbar_expect_tx(&bars[wib][s], (uint32_t)(cnt * copy_bytes));
            for (int r = 0; r < cnt; r++)
                bulk_load(stage_base + (size_t)(s * BULK_BATCH + r) * slot_bytes,
                          pool + (size_t)rows[i0 + r] * pool_stride, (uint32_t)copy_bytes, &bars[wib][s]);
        }
        if (b >= 1) {
            int pb = b - 1, ps = pb % BULK_STAGES;
            mbar_wait(&bars[wib][ps], (uint32_t)((pb / BULK_STAGES) & 1));
            int i0 = begin + pb * BULK_BATCH, cnt = min(BULK_BATCH, end - i0);
            for (int r = 0; r < cnt; r++)
                bulk_store(hot + (size_t)slots[i0 + r] * hot_stride,
                           stage_base + (size_t)(ps * BULK_BATCH + r) * slot_bytes, (uint32_t)copy_bytes);
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
#else
__global__ void fetch_bulk_kernel(const uint8_t *__restrict__ pool, size_t pool_stride,
                                  const int64_t *__restrict__ rows, const int32_t *__restrict__ slots, int n,
                                  int copy_bytes, uint8_t *__restrict__ hot, size_t hot_stride)
{
    DH_ARCH_TRAP();
}
#endif

/* ---- version 6: device scatter from a contiguous staging buffer ---- */

__global__ void scatter_rows_kernel(const uint8_t *__restrict__ staging, int row_bytes,
                                    const int32_t *__restrict__ slots, int n,
                                    uint8_t *__restrict__ hot, size_t hot_stride)
{
    /* Rows are 8-byte multiples in every supported format; one warp per row, 8-byte words. */
    const int lane = threadIdx.x & 31;
    const int nw = row_bytes / 8;
    for (int i = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); i < n;
         i += (int)((gridDim.x * blockDim.x) >> 5)) {
        const uint2 *src = (const uint2 *)(staging + (size_t)i * row_bytes);
        uint2 *dst = (uint2 *)(hot + (size_t)slots[i] * hot_stride);
        for (int w = lane; w < nw; w += 32) dst[w] = src[w];
    }
}

/* Versions 9-10: the same scatter with 16-byte words where the row allows, launched per group
 * of chunks so that it overlaps the copies of the next ones. */
template <typename V>
__global__ void scatter_rows_vec_kernel(const uint8_t *__restrict__ staging, int row_bytes,
                                        const int32_t *__restrict__ slots, int n,
                                        uint8_t *__restrict__ hot, size_t hot_stride)
{
    const int lane = threadIdx.x & 31;
    const int nw = row_bytes / (int)sizeof(V);
    for (int i = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); i < n;
         i += (int)((gridDim.x * blockDim.x) >> 5)) {
        const V *src = (const V *)(staging + (size_t)i * row_bytes);
        V *dst = (V *)(hot + (size_t)slots[i] * hot_stride);
        for (int w = lane; w < nw; w += 32) dst[w] = src[w];
    }
}

/* Host threads that gather rows into the staging buffer. Each timed call publishes one job;
 * worker w copies its share of every chunk and counts the chunk done, so the launching thread
 * can send chunk c over the link while the workers gather chunk c + 1. Workers spin while a
 * job is live (a condition variable would add tens of microseconds per chunk). */
struct host_gather {
    int nthreads = 0;
    std::vector<std::thread> threads;
    std::atomic<int> generation{0};
    std::atomic<int> stop{0};
    std::vector<std::atomic<int>> *chunk_done = nullptr;
    const uint8_t *pool = nullptr;
    size_t pool_stride = 0, row_bytes = 0;
    const int64_t *rows = nullptr;
    int n = 0, chunk_rows = 0, nchunks = 0;
    int prefetch = 0;  /* rows ahead to prefetch (versions 9-10), 0 = plain memcpy loop */
    uint8_t *staging = nullptr;

    void worker(int w)
    {
        int seen = 0;
        for (;;) {
            int g;
            while ((g = generation.load(std::memory_order_acquire)) == seen) {
                if (stop.load(std::memory_order_relaxed)) return;
                sched_yield();
            }
            seen = g;
            for (int c = 0; c < nchunks; c++) {
                int c0 = c * chunk_rows, c1 = std::min(n, c0 + chunk_rows);
                int per = (c1 - c0 + nthreads - 1) / nthreads;
                int a = c0 + w * per, b = std::min(c1, a + per);
                if (prefetch == 0) {
                    for (int i = a; i < b; i++)
                        memcpy(staging + (size_t)i * row_bytes, pool + (size_t)rows[i] * pool_stride, row_bytes);
                } else {
                    /* Versions 9-10: prefetch the lines of the row `prefetch` entries ahead of
                     * this worker's position (into the next chunk's share where this one ends),
                     * so each core keeps many row misses in flight instead of one memcpy's. */
                    int per_next = 0, a_next = 0;
                    if (c + 1 < nchunks) {
                        int d0 = c1, d1 = std::min(n, d0 + chunk_rows);
                        per_next = (d1 - d0 + nthreads - 1) / nthreads;
                        a_next = d0 + w * per_next;
                        per_next = std::max(0, std::min(d1, a_next + per_next) - a_next);
                    }
                    for (int i = a; i < b; i++) {
                        int j = i + prefetch;
                        if (j >= b) j = j - b < per_next ? a_next + (j - b) : -1;
                        if (j >= 0) {
                            const uint8_t *q = pool + (size_t)rows[j] * pool_stride;
                            for (size_t off = 0; off < row_bytes + 63; off += 64)
                                __builtin_prefetch(q + std::min(off, row_bytes - 1), 0, 3);
                        }
                        memcpy(staging + (size_t)i * row_bytes, pool + (size_t)rows[i] * pool_stride, row_bytes);
                    }
                }
                (*chunk_done)[c].fetch_add(1, std::memory_order_release);
            }
        }
    }
};

void fetch_launch(const uint8_t *pool, size_t pool_stride, const int64_t *rows, const int32_t *slots,
                  int n, int row_bytes, uint8_t *hot, size_t hot_stride, int sms, cudaStream_t stream)
{
    if (row_bytes % 16 == 0 && pool_stride % 16 == 0 && hot_stride % 16 == 0)
        fetch_rows_kernel<uint4, 8, true, 512><<<sms, 512, 0, stream>>>(pool, pool_stride, rows, slots, n, row_bytes, hot, hot_stride);
    else
        fetch_rows_kernel<uint2, 8, true, 512><<<sms, 512, 0, stream>>>(pool, pool_stride, rows, slots, n, row_bytes, hot, hot_stride);
    CUDA_LAUNCH_CHECK();
}

/* ---- host side ---- */

struct host_pool {
    uint8_t *ptr = nullptr;
    size_t bytes = 0;        /* the pool's size as the benchmark sees it */
    size_t map_bytes = 0;    /* the mapping's size: bytes rounded up to the page size */
    std::string pages;       /* see the file comment */
    double reg_gb = 0;       /* registration piece size, 0 = one registration */
    std::vector<std::pair<uint8_t *, size_t>> regs;  /* cudaHostRegister'd pieces */
    CUmemGenericAllocationHandle vmm = 0;            /* pages=vmm: the allocation's handle */
};

static host_pool g_pool;

/* A driver API function through the runtime's entry-point query (ABI of CUDA 12.0). */
template <class F> static F drv_fn(const char *name)
{
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return (F)fn;
}

struct vmm_api {
    decltype(&cuMemGetAllocationGranularity) granularity;
    decltype(&cuMemCreate) create;
    decltype(&cuMemAddressReserve) reserve;
    decltype(&cuMemMap) map;
    decltype(&cuMemSetAccess) access;
    decltype(&cuMemUnmap) unmap;
    decltype(&cuMemAddressFree) address_free;
    decltype(&cuMemRelease) release;
    decltype(&cuGetErrorString) error_string;
    bool ok() const
    {
        return granularity && create && reserve && map && access && unmap && address_free && release && error_string;
    }
};

static const vmm_api &vmm(void)
{
    static const vmm_api a = {
        drv_fn<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity"),
        drv_fn<decltype(&cuMemCreate)>("cuMemCreate"),
        drv_fn<decltype(&cuMemAddressReserve)>("cuMemAddressReserve"),
        drv_fn<decltype(&cuMemMap)>("cuMemMap"),
        drv_fn<decltype(&cuMemSetAccess)>("cuMemSetAccess"),
        drv_fn<decltype(&cuMemUnmap)>("cuMemUnmap"),
        drv_fn<decltype(&cuMemAddressFree)>("cuMemAddressFree"),
        drv_fn<decltype(&cuMemRelease)>("cuMemRelease"),
        drv_fn<decltype(&cuGetErrorString)>("cuGetErrorString"),
    };
    return a;
}

/* pages=vmm: pinned host memory through cuMemCreate, mapped for the GPU and the CPU at one
 * address. 0, or -1 after one error line. */
static int vmm_pool_alloc(size_t bytes, void **out, size_t *map_bytes, size_t *gran_out, CUmemGenericAllocationHandle *h)
{
    const vmm_api &a = vmm();
    if (!a.ok()) {
        fprintf(stderr, "dhbench: fetch: pages=vmm: the driver lacks the virtual memory management entry points\n");
        return -1;
    }
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    int numa = -1;
    (void)cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, dev);
    (void)cudaGetLastError();
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = numa < 0 ? 0 : numa;  /* no NUMA: node 0, as the driver asks */
    size_t gran = 0;
    const char *msg = nullptr;
    CUresult r = a.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    const char *step = "cuMemGetAllocationGranularity";
    CUdeviceptr va = 0;
    bool reserved = false, created = false;
    if (r == CUDA_SUCCESS) {
        *map_bytes = (bytes + gran - 1) / gran * gran;
        step = "cuMemCreate";
        r = a.create(h, *map_bytes, &prop, 0);
        created = r == CUDA_SUCCESS;
    }
    if (r == CUDA_SUCCESS) { step = "cuMemAddressReserve"; r = a.reserve(&va, *map_bytes, gran, 0, 0); reserved = r == CUDA_SUCCESS; }
    if (r == CUDA_SUCCESS) { step = "cuMemMap"; r = a.map(va, *map_bytes, 0, *h, 0); }
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc acc[2] = {};
        acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        acc[0].location.id = dev;
        acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        acc[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        acc[1].location.id = prop.location.id;
        acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        step = "cuMemSetAccess";
        r = a.access(va, *map_bytes, acc, 2);
        if (r != CUDA_SUCCESS) a.unmap(va, *map_bytes);
    }
    if (r != CUDA_SUCCESS) {
        a.error_string(r, &msg);
        fprintf(stderr, "dhbench: fetch: pages=vmm: %s of a %zu-byte host pool (NUMA node %d) failed: %s\n", step, bytes,
                prop.location.id, msg ? msg : "unknown error");
        if (reserved) a.address_free(va, *map_bytes);
        if (created) a.release(*h);
        return -1;
    }
    *out = (void *)va;
    *gran_out = gran;
    return 0;
}

static void fill_part(uint8_t *p, size_t words0, size_t words1)
{
    uint64_t *w = (uint64_t *)p;
    for (size_t i = words0; i < words1; i++) w[i] = bench_mix(i) | 0x0101010101010101ull;
}

static double now_s(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void pool_free(void)
{
    if (!g_pool.ptr) return;
    if (g_pool.pages == "pinned") cudaCheck(cudaFreeHost(g_pool.ptr));
    else if (g_pool.pages == "vmm") {
        const vmm_api &a = vmm();
        a.unmap((CUdeviceptr)g_pool.ptr, g_pool.map_bytes);
        a.address_free((CUdeviceptr)g_pool.ptr, g_pool.map_bytes);
        a.release(g_pool.vmm);
        g_pool.vmm = 0;
    } else {
        for (auto &r : g_pool.regs) cudaCheck(cudaHostUnregister(r.first));
        munmap(g_pool.ptr, g_pool.map_bytes);
    }
    g_pool.regs.clear();
    g_pool.ptr = nullptr;
}

/* Prints the smaps fields of the mapping that holds p: what backs the pool (KernelPageSize,
 * AnonHugePages for transparent huge pages), read back rather than assumed. */
static void pool_report_backing(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return;
    char line[512];
    int in = 0;
    std::string fields;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            if (in) break;
            in = a >= lo && a < hi;
            continue;
        }
        if (!in) continue;
        char key[64];
        unsigned long long v;
        if (sscanf(line, "%63[^:]: %llu kB", key, &v) == 2 &&
            (!strcmp(key, "Size") || !strcmp(key, "Rss") || !strcmp(key, "KernelPageSize") ||
             !strcmp(key, "MMUPageSize") || !strcmp(key, "AnonHugePages") || !strcmp(key, "Private_Hugetlb")))
            fields += std::string(" ") + key + "=" + std::to_string(v) + "kB";
    }
    fclose(f);
    fprintf(stderr, "dhbench: fetch: pool backing:%s\n", fields.empty() ? " (mapping not found)" : fields.c_str());
}

/* The pool is kept across grid points of the same size, page kind and registration: pinning
 * tens of GB takes seconds. Its contents are a hash of the word offset, non-zero in every byte. */
static int pool_get(size_t bytes, const std::string &pages, double reg_gb)
{
    if (g_pool.ptr && g_pool.bytes == bytes && g_pool.pages == pages && g_pool.reg_gb == reg_gb) return 0;
    pool_free();
    double t0 = now_s();
    void *p = nullptr;
    size_t page = 4096, map_bytes = bytes;
    if (pages == "pinned") {
        if (reg_gb > 0) {
            fprintf(stderr, "dhbench: fetch: reg_gb applies to mmap'd pools (thp, register, huge2m, huge1g), not pinned\n");
            return -1;
        }
        cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped);
        if (e != cudaSuccess) {
            fprintf(stderr, "dhbench: fetch: cannot pin a %zu-byte host pool: %s\n", bytes, cudaGetErrorString(e));
            (void)cudaGetLastError();
            return -1;
        }
    } else if (pages == "vmm") {
        if (reg_gb > 0) {
            fprintf(stderr, "dhbench: fetch: reg_gb applies to mmap'd pools (thp, register, huge2m, huge1g), not vmm\n");
            return -1;
        }
        if (vmm_pool_alloc(bytes, &p, &map_bytes, &page, &g_pool.vmm) < 0) return -1;
        fprintf(stderr, "dhbench: fetch: pages=vmm: allocation granularity %zu bytes\n", page);
    } else if (pages == "thp" || pages == "register" || pages == "huge2m" || pages == "huge1g") {
        int flags = MAP_PRIVATE | MAP_ANONYMOUS;
        if (pages == "huge2m") { flags |= MAP_HUGETLB | (21 << MAP_HUGE_SHIFT); page = (size_t)2 << 20; }
        if (pages == "huge1g") { flags |= MAP_HUGETLB | (30 << MAP_HUGE_SHIFT); page = (size_t)1 << 30; }
        map_bytes = (bytes + page - 1) / page * page;
        p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "dhbench: fetch: mmap of %zu bytes (pages=%s) failed: %s%s\n", map_bytes, pages.c_str(),
                    strerror(errno), page > 4096 ? " (reserve the huge pages in /sys/kernel/mm/hugepages/ first)" : "");
            return -1;
        }
        if (pages == "thp" && madvise(p, map_bytes, MADV_HUGEPAGE))
            fprintf(stderr, "dhbench: fetch: madvise(MADV_HUGEPAGE): %s (pool stays on small pages)\n", strerror(errno));
        if (pages == "register" && madvise(p, map_bytes, MADV_NOHUGEPAGE))
            fprintf(stderr, "dhbench: fetch: madvise(MADV_NOHUGEPAGE): %s\n", strerror(errno));
    } else {
        fprintf(stderr, "dhbench: fetch: unknown pages '%s' (bench_fetch_check)\n", pages.c_str());
        return -1;
    }
    double t1 = now_s();
    /* Filling touches every page; on a huge-page mapping whose reservation ran short that is a
     * SIGBUS, so the reservation is checked by the mmap above (MAP_HUGETLB fails without it). */
    size_t words = bytes / 8;
    int nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> th;
    for (int t = 0; t < nt; t++)
        th.emplace_back(fill_part, (uint8_t *)p, words * t / nt, words * (t + 1) / nt);
    for (auto &t : th) t.join();
    double t2 = now_s();
    g_pool.regs.clear();
    if (pages != "pinned" && pages != "vmm") {
        size_t piece = reg_gb > 0 ? std::max(page, (size_t)(reg_gb * 1e9) / page * page) : map_bytes;
        for (size_t off = 0; off < map_bytes; off += piece) {
            size_t len = std::min(piece, map_bytes - off);
            cudaError_t e = cudaHostRegister((uint8_t *)p + off, len, cudaHostRegisterMapped);
            if (e != cudaSuccess) {
                fprintf(stderr, "dhbench: fetch: cudaHostRegister of %zu bytes at offset %zu: %s\n", len, off,
                        cudaGetErrorString(e));
                (void)cudaGetLastError();
                for (auto &r : g_pool.regs) cudaCheck(cudaHostUnregister(r.first));
                g_pool.regs.clear();
                munmap(p, map_bytes);
                return -1;
            }
            g_pool.regs.push_back({(uint8_t *)p + off, len});
            /* One pointer serves the whole pool only if each piece's device address is its host
             * address (unified addressing); check it rather than assume it. */
            void *dp = nullptr;
            cudaCheck(cudaHostGetDevicePointer(&dp, (uint8_t *)p + off, 0));
            if (dp != (void *)((uint8_t *)p + off)) {
                fprintf(stderr, "dhbench: fetch: registered piece at offset %zu maps to a different device address; "
                                "reg_gb needs unified addressing\n", off);
                for (auto &r : g_pool.regs) cudaCheck(cudaHostUnregister(r.first));
                g_pool.regs.clear();
                munmap(p, map_bytes);
                return -1;
            }
        }
    }
    double t3 = now_s();
    fprintf(stderr, "dhbench: fetch: pool %.1f GB pages=%s: allocate %.1f s, fill %.1f s, %s %.1f s (%zu piece%s)\n",
            bytes / 1e9, pages.c_str(), t1 - t0, t2 - t1, pages == "pinned" || pages == "vmm" ? "-" : "register", t3 - t2,
            std::max<size_t>(1, g_pool.regs.size()), g_pool.regs.size() > 1 ? "s" : "");
    pool_report_backing(p);
    g_pool.ptr = (uint8_t *)p;
    g_pool.bytes = bytes;
    g_pool.map_bytes = map_bytes;
    g_pool.pages = pages;
    g_pool.reg_gb = reg_gb;
    return 0;
}

/* Distinct host pages of one index set, overall and within each stretch of `span` consecutive
 * list entries (the rows version 8 keeps in flight), for 4 KB, 2 MB and 1 GB pages. */
static void report_pages(const int64_t *rows, int n, size_t stride, int row_bytes, int span)
{
    const int shifts[3] = {12, 21, 30};
    char out[256];
    int len = snprintf(out, sizeof out, "dhbench: fetch: distinct pages 4K/2M/1G:");
    for (int k = 0; k < 3; k++) {
        std::vector<int64_t> pg;
        for (int i = 0; i < n; i++) {
            uint64_t a = (uint64_t)rows[i] * stride, b = a + (uint64_t)row_bytes - 1;
            for (uint64_t q = a >> shifts[k]; q <= b >> shifts[k]; q++) pg.push_back((int64_t)q);
        }
        std::sort(pg.begin(), pg.end());
        len += snprintf(out + len, sizeof out - (size_t)len, " %zu", (size_t)(std::unique(pg.begin(), pg.end()) - pg.begin()));
    }
    if (span > 0 && span < n) {
        len += snprintf(out + len, sizeof out - (size_t)len, "; per %d entries in list order:", span);
        for (int k = 0; k < 3; k++) {
            double sum = 0;
            int cnt = 0;
            for (int s0 = 0; s0 + span <= n; s0 += span, cnt++) {
                std::vector<int64_t> pg;
                for (int i = s0; i < s0 + span; i++) {
                    uint64_t a = (uint64_t)rows[i] * stride, b = a + (uint64_t)row_bytes - 1;
                    for (uint64_t q = a >> shifts[k]; q <= b >> shifts[k]; q++) pg.push_back((int64_t)q);
                }
                std::sort(pg.begin(), pg.end());
                sum += (double)(std::unique(pg.begin(), pg.end()) - pg.begin());
            }
            len += snprintf(out + len, sizeof out - (size_t)len, " %.1f", sum / cnt);
        }
    }
    fprintf(stderr, "%s\n", out);
}

/* Builds one index set of n rows for the pattern, rows < pool_rows. */
static void make_rows(bench_rng &rng, const std::string &pattern, int64_t pool_rows, int n,
                      int64_t window_rows, int miss_per_window, std::vector<int64_t> &out)
{
    out.clear();
    if (pattern == "uniform" || pattern == "uniform_sorted") {
        for (int i = 0; i < n; i++) out.push_back((int64_t)(rng.uniform() * (double)pool_rows));
        if (pattern == "uniform_sorted") std::sort(out.begin(), out.end());
        return;
    }
    int64_t nwin_pool = pool_rows / window_rows;
    int nwin = (n + miss_per_window - 1) / miss_per_window;
    std::vector<int32_t> wins = bench_sample_sorted(rng, (int32_t)nwin_pool, nwin);
    if (pattern == "serving")
        for (int i = nwin - 1; i > 0; i--) std::swap(wins[i], wins[rng.below((uint32_t)i + 1)]);
    for (int w = 0; w < nwin && (int)out.size() < n; w++) {
        std::vector<int32_t> r = bench_sample_sorted(rng, (int32_t)window_rows, miss_per_window);
        for (int j = 0; j < miss_per_window && (int)out.size() < n; j++)
            out.push_back((int64_t)wins[w] * window_rows + r[j]);
    }
}

/* The background of beside=: streams 16-byte reads over buf (alu: dependent FMAs) until *stop
 * turns non-zero (each block's thread 0 polls it between passes and the block follows) or the
 * block has run max_ns on the global timer; adds its bytes to *bytes. Each block cycles over
 * its own part of buf: blocks that drift apart over a long run would otherwise read lines
 * that another block has just brought into L2 (measured: 8.4 TB/s "read" over a second, from
 * 4.3 at 50 ms). */
__global__ void __launch_bounds__(256) beside_kernel(const uint4 *__restrict__ buf, size_t n16, int alu,
                                                     const volatile int *stop, unsigned long long max_ns,
                                                     unsigned long long *bytes, float *sink)
{
    __shared__ int done;
    unsigned long long t_start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_start));
    const size_t part = n16 / gridDim.x / (8 * blockDim.x) * (8 * blockDim.x);   /* whole passes */
    const uint4 *mine = buf + (size_t)blockIdx.x * part;
    uint32_t acc = 0;
    float f = (float)threadIdx.x;
    unsigned long long moved = 0;
    size_t base = 0;
    for (;;) {
        if (threadIdx.x == 0) {
            unsigned long long now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
            done = *stop || now - t_start > max_ns;
        }
        __syncthreads();
        if (done) break;
        __syncthreads();
        if (alu) {
#pragma unroll 16
            for (int i = 0; i < 4096; i++) f = fmaf(f, 0.999999f, 0.5f);
        } else {
            /* One pass of 8 loads per thread, then the next stretch of the buffer. */
            uint4 v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = mine[base + threadIdx.x + (size_t)u * blockDim.x];
#pragma unroll
            for (int u = 0; u < 8; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
            base += 8 * blockDim.x;
            if (base == part) base = 0;
            moved += 8 * 16;
        }
    }
    atomicAdd(bytes, moved);
    if (acc == 0x12345678u || f == 1.2345f) sink[0] = (float)acc + f;   /* keeps the loads */
}

/* The background's buffer: distinct words, so that nothing measured rests on the values read. */
__global__ void beside_fill(uint4 *buf, size_t n16)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = (uint32_t)(i * 0x9E3779B97F4A7C15ull >> 32);
        buf[i] = make_uint4(h, h ^ 0x5bd1e995u, h * 2654435761u, (uint32_t)i);
    }
}

/* beside=: the background kernel's buffers, stream and rate. */
struct beside_load {
    cudaStream_t s = nullptr, ctl = nullptr;
    uint4 *buf = nullptr;
    int *stop_d = nullptr, *one_h = nullptr;
    unsigned long long *bytes_d = nullptr;
    float *sink = nullptr;
    std::chrono::steady_clock::time_point t0;
    int alu = 0;
    void start(bench_env *env, bool alu_only)
    {
        alu = alu_only;
        const size_t n16 = ((size_t)4 << 30) / 16;
        cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        cudaCheck(cudaStreamCreateWithFlags(&ctl, cudaStreamNonBlocking));
        cudaCheck(cudaMalloc(&buf, n16 * 16));
        beside_fill<<<4 * env->prop.multiProcessorCount, 256>>>(buf, n16);
        CUDA_LAUNCH_CHECK();
        cudaCheck(cudaMalloc(&stop_d, sizeof(int)));
        cudaCheck(cudaMemset(stop_d, 0, sizeof(int)));
        cudaCheck(cudaMalloc(&bytes_d, sizeof *bytes_d));
        cudaCheck(cudaMemset(bytes_d, 0, sizeof *bytes_d));
        cudaCheck(cudaMalloc(&sink, sizeof(float)));
        cudaCheck(cudaHostAlloc(&one_h, sizeof(int), cudaHostAllocDefault));
        *one_h = 1;
        cudaCheck(cudaDeviceSynchronize());
        t0 = std::chrono::steady_clock::now();
        /* A minute at most, whatever happens to the stop flag. */
        beside_kernel<<<2 * env->prop.multiProcessorCount, 256, 0, s>>>(buf, n16, alu, stop_d, 60000000000ull,
                                                                       bytes_d, sink);
        CUDA_LAUNCH_CHECK();
    }
    void stop()
    {
        cudaCheck(cudaMemcpyAsync(stop_d, one_h, sizeof(int), cudaMemcpyHostToDevice, ctl));
        cudaCheck(cudaStreamSynchronize(s));
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        unsigned long long bytes = 0;
        cudaCheck(cudaMemcpy(&bytes, bytes_d, sizeof bytes, cudaMemcpyDeviceToHost));
        if (alu) fprintf(stderr, "dhbench: fetch: beside=alu ran %.2f s\n", sec);
        else fprintf(stderr, "dhbench: fetch: beside=hbm read %.0f GB/s over %.2f s\n", (double)bytes / sec / 1e9, sec);
        cudaCheck(cudaFree(buf));
        cudaCheck(cudaFree(stop_d));
        cudaCheck(cudaFree(bytes_d));
        cudaCheck(cudaFree(sink));
        cudaCheck(cudaFreeHost(one_h));
        cudaCheck(cudaStreamDestroy(s));
        cudaCheck(cudaStreamDestroy(ctl));
    }
};

/* A fetch grid point's parameters, read once for the check and the benchmark (the order of the
 * fields is the order bench_fetch binds them in). */
struct fetch_args {
    int row_bytes, n, sms;
    double pool_gb;
    std::string pattern, pages;
    int version, host_threads;
    double reg_gb;
    int window;         /* version 8: rows in flight on the whole launch at most */
    int prefetch;       /* versions 9-10: host prefetch distance (rows) */
    int scatter_rows;   /* versions 9-10: rows per scatter launch */
    int scatter_sms;    /* version 10: the scatter's SMs, the zero-copy part gets the rest */
    int64_t window_rows;
    int miss_per_window;  /* the serving layout's window and rows per window (the suites' comments give their source) */
    std::string beside;   /* none, hbm or alu: a background kernel through the timing */
};

static fetch_args fetch_args_of(const bench_params &p)
{
    return {(int)p.num("row_bytes", 656), (int)p.num("rows", 16384), (int)p.num("sms", 8), p.real("pool_gb", 4),
            p.str("pattern", "serving"), p.str("pages", "pinned"), (int)p.num("version", 2),
            (int)p.num("host_threads", 8), p.real("reg_gb", 0), (int)p.num("window", 256), (int)p.num("prefetch", 16),
            (int)p.num("scatter_rows", 8192), (int)p.num("scatter_sms", 2), p.num("window_rows", 100000),
            (int)p.num("miss_per_window", 291), p.str("beside", "none")};
}

/* The pool's rows at the version's stride: version 3 pads to 128 B; version 4 pads only rows
 * that are not 16-byte multiples (584 B), since a bulk copy needs 16-byte aligned addresses
 * and sizes. The pool's size does not depend on the stride, so every version reuses one pool
 * (--quick caps it at 1 GB). */
static size_t fetch_stride(const fetch_args &a)
{
    const bool padded = a.version == 3 || (a.version == 4 && a.row_bytes % 16);
    return padded ? (size_t)((a.row_bytes + 127) & ~127) : (size_t)a.row_bytes;
}

static size_t fetch_pool_bytes(const fetch_args &a, bool quick)
{
    const size_t bytes = (size_t)(a.pool_gb * 1e9) / 4096 * 4096;
    return quick ? std::min(bytes, (size_t)1 << 30) : bytes;
}

static int64_t fetch_pool_rows(const bench_params &p, bool quick)
{
    const fetch_args a = fetch_args_of(p);
    return (int64_t)(fetch_pool_bytes(a, quick) / fetch_stride(a));
}

int bench_fetch_check(const bench_params &p)
{
    const auto [row_bytes, n, sms, pool_gb, pattern, pages, version, host_threads, reg_gb, window, prefetch,
                scatter_rows, scatter_sms, window_rows, miss_per_window, beside] = fetch_args_of(p);
    (void)pool_gb;
    (void)host_threads;
    const bool serving = pattern == "serving" || pattern == "serving_sorted";

    if (version < 1 || version > 10) {
        fprintf(stderr, "dhbench: fetch: version %d is not 1 to 10\n", version);
        return -1;
    }
    if (row_bytes % 8 || row_bytes > 1152 || row_bytes <= 0) {
        fprintf(stderr, "dhbench: fetch: row_bytes %d must be a multiple of 8 up to 1152\n", row_bytes);
        return -1;
    }
    if (n < 1 || sms < 1) {
        fprintf(stderr, "dhbench: fetch: rows %d and sms %d must be >= 1\n", n, sms);
        return -1;
    }
    if (!serving && pattern != "uniform" && pattern != "uniform_sorted") {
        fprintf(stderr, "dhbench: fetch: pattern '%s' is not uniform, uniform_sorted, serving or serving_sorted\n",
                pattern.c_str());
        return -1;
    }
    if (pages != "pinned" && pages != "thp" && pages != "register" && pages != "huge2m" && pages != "huge1g" &&
        pages != "vmm") {
        fprintf(stderr, "dhbench: fetch: unknown pages '%s' (pinned, thp, register, huge2m, huge1g or vmm)\n", pages.c_str());
        return -1;
    }
    /* Version 8 hands out 4 rows at a time; a window below that would deadlock (see the kernel). */
    if (version == 8 && window < 4) {
        fprintf(stderr, "dhbench: fetch: window %d must be at least 4 (rows per warp)\n", window);
        return -1;
    }
    if ((version == 9 || version == 10) && (prefetch < 0 || scatter_rows < 1)) {
        fprintf(stderr, "dhbench: fetch: prefetch %d must be >= 0 and scatter_rows %d >= 1\n", prefetch, scatter_rows);
        return -1;
    }
    if (version == 10 && (scatter_sms < 1 || scatter_sms >= sms)) {
        fprintf(stderr, "dhbench: fetch: version 10 needs 1 <= scatter_sms (%d) < sms (%d)\n", scatter_sms, sms);
        return -1;
    }
    if (serving && (window_rows < 1 || miss_per_window < 1 || miss_per_window > window_rows || miss_per_window > n)) {
        fprintf(stderr, "dhbench: fetch: miss_per_window %d must be in [1, min(window_rows %lld, rows %d)]\n",
                miss_per_window, (long long)window_rows, n);
        return -1;
    }
    if (reg_gb < 0) {
        fprintf(stderr, "dhbench: fetch: reg_gb %g must be >= 0\n", reg_gb);
        return -1;
    }
    if (beside != "none" && beside != "hbm" && beside != "alu") {
        fprintf(stderr, "dhbench: fetch: beside '%s' is not none, hbm or alu\n", beside.c_str());
        return -1;
    }
    if (beside != "none" && (version == 6 || version == 7 || version == 9 || version == 10)) {
        fprintf(stderr, "dhbench: fetch: beside=%s needs a version timed on its stream (1-5, 8), not %d\n",
                beside.c_str(), version);
        return -1;
    }
    if (serving && fetch_pool_rows(p, false) / window_rows < (n + miss_per_window - 1) / miss_per_window) {
        fprintf(stderr, "dhbench: fetch: pool_gb %g holds %lld rows of this version's stride: too few %lld-row windows for "
                "%d rows at %d per window\n", pool_gb, (long long)fetch_pool_rows(p, false), (long long)window_rows, n,
                miss_per_window);
        return -1;
    }
    return 0;
}

int bench_fetch(bench_env *env, const bench_params &p)
{
    /* Plain copies, not structured bindings: the launch lambdas below capture them (C++17). */
    const fetch_args a = fetch_args_of(p);
    const int row_bytes = a.row_bytes, n = a.n, sms = a.sms, version = a.version, host_threads = a.host_threads;
    const int window = a.window, prefetch = a.prefetch, scatter_rows = a.scatter_rows, scatter_sms = a.scatter_sms;
    const int miss_per_window = a.miss_per_window;
    const int64_t window_rows = a.window_rows;
    const double reg_gb = a.reg_gb;
    const std::string &beside = a.beside;
    const std::string &pattern = a.pattern, &pages = a.pages;
    const bool host_path = version == 6 || version == 7 || version == 9 || version == 10;

    if (bench_fetch_check(p)) return -1;
    if (sms > env->prop.multiProcessorCount) {
        fprintf(stderr, "dhbench: fetch: sms %d outside [1, %d]\n", sms, env->prop.multiProcessorCount);
        return -1;
    }
    const size_t stride = fetch_stride(a), pool_bytes = fetch_pool_bytes(a, env->quick);
    const int64_t pool_rows = fetch_pool_rows(p, env->quick);
    if (pool_get(pool_bytes, pages, reg_gb)) return -1;
    uint8_t *pool = g_pool.ptr;
    uint8_t *pool_dev = nullptr;
    /* A vmm pool is mapped at one address for both sides; the others are host allocations
     * whose device address the runtime gives. */
    if (pages == "vmm") pool_dev = pool;
    else cudaCheck(cudaHostGetDevicePointer((void **)&pool_dev, pool, 0));
    if (pool_rows / window_rows < (n + miss_per_window - 1) / miss_per_window && pattern.rfind("serving", 0) == 0) {
        fprintf(stderr, "dhbench: fetch: pool of %lld rows has too few %lld-row windows for %d rows\n",
                (long long)pool_rows, (long long)window_rows, n);
        return -1;
    }

    /* Index sets: enough that the reps read more than 4x L2 of distinct rows. */
    size_t batch_bytes = (size_t)n * row_bytes;
    int nsets = (int)std::min<size_t>(64, std::max<size_t>(2, 4 * (size_t)env->prop.l2CacheSize / batch_bytes + 1));
    bench_rng rng(0x5eedull ^ ((uint64_t)n << 20) ^ (uint64_t)row_bytes ^ ((uint64_t)version << 40));
    std::vector<int64_t> rows_h((size_t)nsets * n), one;
    std::vector<int32_t> slots_h((size_t)nsets * n);
    int hot_rows = n;  /* every set writes all slots of one hot buffer, in a random order */
    for (int s = 0; s < nsets; s++) {
        make_rows(rng, pattern, pool_rows, n, window_rows, miss_per_window, one);
        std::copy(one.begin(), one.end(), rows_h.begin() + (size_t)s * n);
        int32_t *sl = slots_h.data() + (size_t)s * n;
        for (int i = 0; i < n; i++) sl[i] = i;
        for (int i = n - 1; i > 0; i--) std::swap(sl[i], sl[rng.below((uint32_t)i + 1)]);
    }
    int64_t *rows_d;
    int32_t *slots_d;
    uint8_t *hot_d;
    size_t hot_bytes = (size_t)hot_rows * stride;
    cudaCheck(cudaMalloc(&rows_d, rows_h.size() * sizeof(int64_t)));
    cudaCheck(cudaMalloc(&slots_d, slots_h.size() * sizeof(int32_t)));
    cudaCheck(cudaMalloc(&hot_d, hot_bytes));
    cudaCheck(cudaMemcpy(rows_d, rows_h.data(), rows_h.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(slots_d, slots_h.data(), slots_h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    report_pages(rows_h.data(), n, stride, row_bytes, version == 8 ? window : 0);
    unsigned int *ctr_d = nullptr;
    cudaCheck(cudaMalloc(&ctr_d, 2 * sizeof(unsigned int)));

    /* Version 6 resources. */
    uint8_t *stage_h = nullptr, *stage_d = nullptr;
    host_gather *hg = nullptr;
    std::vector<std::atomic<int>> chunk_done;
    cudaStream_t stream;
    /* A blocking stream: the timing events, recorded on the legacy stream, order against it. */
    cudaCheck(cudaStreamCreate(&stream));
    const int chunk_rows = (int)p.num("chunk_rows", 1024);
    /* Version 7 gives the first host_share of the list to the host threads, the rest to the
     * zero-copy kernel; version 6 gives all of it to the host threads. */
    const bool hybrid = version == 7 || version == 10;
    const double host_share = hybrid ? p.real("host_share", 0.3) : 1.0;
    const int n_host = hybrid ? (int)(host_share * n) : n;
    cudaStream_t zc_stream;
    cudaCheck(cudaStreamCreate(&zc_stream));
    cudaStream_t scat_stream;
    cudaCheck(cudaStreamCreate(&scat_stream));
    std::vector<cudaEvent_t> scat_ev;
    if (host_path) {
        cudaCheck(cudaHostAlloc(&stage_h, batch_bytes, cudaHostAllocDefault));
        cudaCheck(cudaMalloc(&stage_d, batch_bytes));
        hg = new host_gather;
        hg->nthreads = host_threads;
        hg->nchunks = (n_host + chunk_rows - 1) / chunk_rows;
        chunk_done = std::vector<std::atomic<int>>(hg->nchunks);
        hg->chunk_done = &chunk_done;
        hg->prefetch = (version == 9 || version == 10) ? prefetch : 0;
        int ngroups = (n_host + scatter_rows - 1) / scatter_rows + hg->nchunks + 1;
        scat_ev.resize((size_t)ngroups);
        for (auto &e : scat_ev) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        for (int t = 0; t < host_threads; t++) hg->threads.emplace_back(&host_gather::worker, hg, t);
    }
    int bulk_smem = BULK_WARPS * BULK_STAGES * BULK_BATCH * (int)((stride + 127) & ~(size_t)127);
    if (version == 4)
        cudaCheck(cudaFuncSetAttribute(fetch_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bulk_smem));

    auto launch = [&](int rep) {
        int s = rep % nsets;
        const int64_t *rr = rows_d + (size_t)s * n;
        const int32_t *ss = slots_d + (size_t)s * n;
        switch (version) {
        case 1:
            if (row_bytes % 16 == 0)
                fetch_rows_kernel<uint4, 1, false, 1024><<<sms, 1024, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride);
            else
                fetch_rows_kernel<uint2, 1, false, 1024><<<sms, 1024, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride);
            CUDA_LAUNCH_CHECK();
            break;
        case 2:
        case 3:
            if (row_bytes % 16 == 0)
                fetch_rows_kernel<uint4, 8, true, 512><<<sms, 512, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride);
            else
                fetch_rows_kernel<uint2, 8, true, 512><<<sms, 512, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride);
            CUDA_LAUNCH_CHECK();
            break;
        case 4:
            fetch_bulk_kernel<<<sms, 32 * BULK_WARPS, bulk_smem, stream>>>(pool_dev, stride, rr, ss, n,
                                                                          (row_bytes + 15) & ~15, hot_d, stride);
            CUDA_LAUNCH_CHECK();
            break;
        case 5:
            /* 16-byte rows: the library's fetch (the replay's); 584 B rows take 8-byte words. */
            if (row_bytes % 16 == 0) {
                dhk_fetch_launch(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride, sms, stream);
            } else {
                fetch_rows_kernel<uint2, 4, false, 512><<<sms, 512, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride);
                CUDA_LAUNCH_CHECK();
            }
            break;
        case 6:
        case 7: {
            if (version == 7 && n_host < n) {
                /* The zero-copy part runs on its own stream while the host threads gather. */
                if (row_bytes % 16 == 0)
                    fetch_rows_kernel<uint4, 1, false, 1024><<<sms, 1024, 0, zc_stream>>>(
                        pool_dev, stride, rr + n_host, ss + n_host, n - n_host, row_bytes, hot_d, stride);
                else
                    fetch_rows_kernel<uint2, 1, false, 1024><<<sms, 1024, 0, zc_stream>>>(
                        pool_dev, stride, rr + n_host, ss + n_host, n - n_host, row_bytes, hot_d, stride);
                CUDA_LAUNCH_CHECK();
            }
            if (n_host == 0) break;
            hg->pool = pool; hg->pool_stride = stride; hg->row_bytes = (size_t)row_bytes;
            hg->rows = rows_h.data() + (size_t)s * n; hg->n = n_host; hg->chunk_rows = chunk_rows;
            hg->staging = stage_h;
            for (auto &c : chunk_done) c.store(0, std::memory_order_relaxed);
            hg->generation.fetch_add(1, std::memory_order_release);
            for (int c = 0; c < hg->nchunks; c++) {
                while (chunk_done[c].load(std::memory_order_acquire) < host_threads) { }
                size_t off = (size_t)c * chunk_rows * row_bytes;
                size_t len = (size_t)(std::min(n_host, (c + 1) * chunk_rows) - c * chunk_rows) * row_bytes;
                cudaCheck(cudaMemcpyAsync(stage_d + off, stage_h + off, len, cudaMemcpyHostToDevice, stream));
            }
            scatter_rows_kernel<<<sms, 1024, 0, stream>>>(stage_d, row_bytes, ss, n_host, hot_d, stride);
            CUDA_LAUNCH_CHECK();
            break;
        }
        case 9:
        case 10: {
            const int zc_sms = version == 10 ? sms - scatter_sms : 0, sc_sms = version == 10 ? scatter_sms : sms;
            if (version == 10 && n_host < n) {
                if (row_bytes % 16 == 0)
                    fetch_rows_kernel<uint4, 1, false, 1024><<<zc_sms, 1024, 0, zc_stream>>>(
                        pool_dev, stride, rr + n_host, ss + n_host, n - n_host, row_bytes, hot_d, stride);
                else
                    fetch_rows_kernel<uint2, 1, false, 1024><<<zc_sms, 1024, 0, zc_stream>>>(
                        pool_dev, stride, rr + n_host, ss + n_host, n - n_host, row_bytes, hot_d, stride);
                CUDA_LAUNCH_CHECK();
            }
            if (n_host == 0) break;
            hg->pool = pool; hg->pool_stride = stride; hg->row_bytes = (size_t)row_bytes;
            hg->rows = rows_h.data() + (size_t)s * n; hg->n = n_host; hg->chunk_rows = chunk_rows;
            hg->staging = stage_h;
            for (auto &c : chunk_done) c.store(0, std::memory_order_relaxed);
            hg->generation.fetch_add(1, std::memory_order_release);
            /* Each group of about scatter_rows copied rows is scattered on its own stream once its
             * copies are done, while the next chunks are gathered and copied. */
            int s0 = 0, g = 0;
            for (int c = 0; c < hg->nchunks; c++) {
                while (chunk_done[c].load(std::memory_order_acquire) < host_threads) { }
                int c0 = c * chunk_rows, c1 = std::min(n_host, c0 + chunk_rows);
                cudaCheck(cudaMemcpyAsync(stage_d + (size_t)c0 * row_bytes, stage_h + (size_t)c0 * row_bytes,
                                          (size_t)(c1 - c0) * row_bytes, cudaMemcpyHostToDevice, stream));
                if (c1 - s0 >= scatter_rows || c1 == n_host) {
                    cudaCheck(cudaEventRecord(scat_ev[(size_t)g], stream));
                    cudaCheck(cudaStreamWaitEvent(scat_stream, scat_ev[(size_t)g], 0));
                    if (row_bytes % 16 == 0)
                        scatter_rows_vec_kernel<uint4><<<sc_sms, 1024, 0, scat_stream>>>(
                            stage_d + (size_t)s0 * row_bytes, row_bytes, ss + s0, c1 - s0, hot_d, stride);
                    else
                        scatter_rows_vec_kernel<uint2><<<sc_sms, 1024, 0, scat_stream>>>(
                            stage_d + (size_t)s0 * row_bytes, row_bytes, ss + s0, c1 - s0, hot_d, stride);
                    CUDA_LAUNCH_CHECK();
                    s0 = c1;
                    g++;
                }
            }
            break;
        }
        case 8:
            /* The counters are reset inside the timed region: part of the version's cost. */
            cudaCheck(cudaMemsetAsync(ctr_d, 0, 2 * sizeof(unsigned int), stream));
            if (row_bytes % 16 == 0)
                fetch_window_kernel<uint4, 4, 512><<<sms, 512, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride, window, ctr_d);
            else
                fetch_window_kernel<uint2, 4, 512><<<sms, 512, 0, stream>>>(pool_dev, stride, rr, ss, n, row_bytes, hot_d, stride, window, ctr_d);
            CUDA_LAUNCH_CHECK();
            break;
        default:
            fprintf(stderr, "dhbench: fetch: unknown version %d\n", version);
            exit(1);
        }
    };

    /* Check before timing: poisoned hot buffer, every slot compared, on the first four index
     * sets (each set has fresh rows and slots; more sets only cost host time). */
    int ok = 1;
    std::vector<uint8_t> hot_h(hot_bytes), ref(hot_bytes);
    for (int s = 0; s < std::min(nsets, 4) && ok; s++) {
        cudaCheck(cudaMemset(hot_d, 0xA5, hot_bytes));
        launch(s);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(hot_h.data(), hot_d, hot_bytes, cudaMemcpyDeviceToHost));
        kref_gather_rows(pool, stride, rows_h.data() + (size_t)s * n, slots_h.data() + (size_t)s * n,
                         (size_t)n, (size_t)row_bytes, ref.data(), stride);
        for (int i = 0; i < n && ok; i++)
            if (memcmp(hot_h.data() + (size_t)i * stride, ref.data() + (size_t)i * stride, (size_t)row_bytes)) {
                fprintf(stderr, "dhbench: fetch v%d: slot %d differs from the host row (set %d)\n", version, i, s);
                ok = 0;
            }
        if (env->quick) break;
    }
    bench_record r;
    r.kernel = "fetch";
    r.version = std::to_string(version);
    r.dtype = row_bytes == 1152 ? "bf16" : "fp8";
    r.row_bytes = row_bytes;
    r.rows = n;
    r.sms = sms;
    r.pool_bytes = (long long)pool_bytes;
    /* The serving layout's locality: its window (ctx) and rows drawn per window (k). */
    if (pattern.rfind("serving", 0) == 0) {
        r.ctx = window_rows;
        r.k = miss_per_window;
    }
    r.pattern = pattern + (pages != "pinned" ? "+" + pages : "") +
                (reg_gb > 0 ? "+reg" + std::to_string(reg_gb).substr(0, 4) + "g" : "") +
                (version == 8 ? "+win" + std::to_string(window) : "") +
                (host_path ? "+threads" + std::to_string(host_threads) : "") +
                ((version == 9 || version == 10) ? "+pf" + std::to_string(prefetch) : "") +
                (version == 10 ? "+scat" + std::to_string(scatter_sms) : "") +
                (hybrid ? "+host" + std::to_string(host_share).substr(0, 4) : "") +
                (beside != "none" ? "+beside_" + beside : "");
    r.bytes = (double)batch_bytes;
    r.ceiling_name = "h2d_memcpy_pinned";
    r.ceiling_value = env->h2d_gbps;
    r.checked = ok;
    if (ok && beside != "none") {
        beside_load bg;
        bg.start(env, beside == "alu");
        bench_timing t = bench_time(env, launch, 3, 0, stream);
        bg.stop();
        bench_take(r, t);
    } else if (ok) {
        bench_timing t = host_path ? bench_time_wall(env, launch) : bench_time(env, launch);
        bench_take(r, t);
    }
    bench_emit(env, r);

    if (hg) {
        hg->stop.store(1);
        for (auto &t : hg->threads) t.join();
        delete hg;
        cudaCheck(cudaFreeHost(stage_h));
        cudaCheck(cudaFree(stage_d));
    }
    for (auto &e : scat_ev) cudaCheck(cudaEventDestroy(e));
    cudaCheck(cudaStreamDestroy(scat_stream));
    cudaCheck(cudaStreamDestroy(stream));
    cudaCheck(cudaStreamDestroy(zc_stream));
    cudaCheck(cudaFree(ctr_d));
    cudaCheck(cudaFree(rows_d));
    cudaCheck(cudaFree(slots_d));
    cudaCheck(cudaFree(hot_d));
    return ok ? 0 : -1;
}

void bench_fetch_release(void)
{
    pool_free();
}
