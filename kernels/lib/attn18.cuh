/* attn18.cuh: attention versions 18-20 (kernels/lib/attention_wgmma.cu instantiates them
 * for the library, kernels/versions/attention_wgmma.cu their diagnostic variants), version 8
 * (attn6.cuh) with the consumer warpgroups divided as FlashMLA's sparse FP8 decode kernel divides
 * them, over version 8's 16-bit key tiles, and a producer whose shared-memory stores are free of
 * bank conflicts; sm_90a, FP8 and BF16 rows, any multiple of 64 heads.
 *
 * The division (deepseek-ai/FlashMLA, csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh; read for the
 * design, no code taken; version 13 tried it over FP8 scores, kernels/NOTES.md):
 *   warpgroup 0 computes the whole tile's S = Q K^T (36 wgmma m64n64k16: Q read once per tile,
 *     where version 8's two warpgroups each read all of Q for their 32 rows), runs the softmax
 *     alone (no exchange of row maxima), writes P (64 x 64, 16-bit, swizzled) and the heads'
 *     rescaling factors to shared memory for warpgroup 1, and computes O[:, 0:256] += P V with P
 *     from its own registers (version 18: wgmma with A in registers, as FlashMLA's local P V) or
 *     from shared memory (version 19, the same arithmetic: a check on the register form);
 *   warpgroup 1 waits for P, rescales its half of O and computes O[:, 256:512] += P V from
 *     shared memory; its P V of tile t runs while warpgroup 0 computes tile t + 1's S.
 * Each warpgroup runs its own tile loop (a18_loop), then the epilogue (a18_epilogue).
 * Named barriers (256 threads): 1 version 8's (Q, the row sums, the epilogue), 2 P ready
 * (warpgroup 0 arrives, 1 waits), 3 P free (1 arrives after its P V, 0 waits before writing the
 * next P); version 19 adds 4 (128 threads: warpgroup 0's P visible to its own wgmma).
 *
 * The producer is version 8's (one tile of loads through registers, dequantised to fp16 in the
 * wgmma layout) with its rows assigned so that its 16-byte stores do not conflict: a 16-byte
 * store is served a quarter warp (8 threads, 4 rows) at a time, and version 8's threads 0-7 hold
 * rows 0-3, whose swizzle (chunk XOR row % 8) keeps both threads of a row's chunks in the same
 * half of the 128-byte bank window: two-way conflicts on every latent store (an ncu profile of
 * version 8's producer: 47 % of its shared wavefronts excessive, measurements/h200/
 * ncu-attention-v8-producer.txt). Here pair m of threads takes row a18_row(m), which spreads a
 * quarter warp's four rows over both halves; the RoPE chunks of odd threads are stored in the
 * other order for the same reason. Shared memory, the epilogue and the splits' combine are
 * version 8's. Version 20 is version 18 with, for FP8 rows, version 10's producer (half a tile
 * of the next tile's loads in flight while this one is converted: a18_producer_pipe) over the
 * same rows and stores. */
#ifndef KERNELS_ATTN18_CUH
#define KERNELS_ATTN18_CUH

#include "kernels/lib/attn6.cuh"

/* setmaxnreg counts. Versions 18, 20: warpgroup 0 208, warpgroup 1 176, each warpgroup's code
 * (its tile loop and its instance of the epilogue) compiled apart under its own count. Version 19:
 * both consumer warpgroups at 192 and one instance of the epilogue after their loops (with 208 /
 * 176 ptxas spills ~180 B where the two warpgroups' code merges). */
#define A18_WG0_REGS 208
#define A18_WG1_REGS 176
#define A18_CONSUMER_REGS 192
#define A18_PRODUCER_REGS 120
static_assert(A18_WG0_REGS + A18_WG1_REGS + A18_PRODUCER_REGS == 504, "setmaxnreg counts must add up to 3 x 168");
static_assert(2 * A18_CONSUMER_REGS + A18_PRODUCER_REGS == 504, "setmaxnreg counts must add up to 3 x 168");

__device__ __forceinline__ void a18_bar_sync(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void a18_bar_arrive(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void a18_wg_bar() { asm volatile("bar.sync 4, 128;" ::: "memory"); }
__device__ __forceinline__ void a18_fence_u32(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }
/* Version 37's consumers (a18_loop with V 37, kernels/NOTES.md "Version 37"): a step of off16
 * (bytes / 16) inside a wgmma operand whose descriptor d (dh_wgmma_desc) is built once per tile,
 * added to its low 32-bit half only (the 14-bit start-address field, (addr & 0x3FFFF) >> 4, does
 * not carry into the leading offset for any shared-memory address; attn33_check checks it); exp2
 * on the special-function unit alone (ex2.approx.ftz: exp2f's fix-up of subnormal results, three
 * instructions, goes); and the rescale threshold: the running
 * maximum of a warp's rows moves only when some row's new maximum exceeds it by more than
 * A37_RESCALE (log2 units), so P stays below 2^A37_RESCALE (256: exact enough in fp16 and bf16)
 * and the rescaling of O is skipped for the tiles where no row of the warp moved (FlashAttention
 * 4's conditional rescaling). The result is the same softmax: O, l and m are kept relative to the
 * same (possibly stale) maximum. */
#define A37_RESCALE 8.0f
__host__ __device__ __forceinline__ uint64_t a37_step(uint64_t d, uint32_t off16)
{
#ifdef __CUDA_ARCH__
    uint64_t r;
    asm("mov.b64 %0, {%1, %2};" : "=l"(r) : "r"((uint32_t)d + off16), "r"((uint32_t)(d >> 32)));
    return r;
#else
    return (d >> 32) << 32 | (uint32_t)((uint32_t)d + off16);
#endif
}
__device__ __forceinline__ float a37_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
/* Versions 35 and 36 (rows read whole by warps, kernels/lib/attn30.cuh and attn23.cuh): row id `id`
 * of lane src (INT_MIN: no row) as a pointer, null for no row; a 16-byte store at a 32-bit shared
 * address. */
__device__ __forceinline__ const uint8_t *a35_row(const attn_args &a, int id, int src)
{
    const int v = __shfl_sync(0xffffffffu, id, src);
    return v == INT_MIN ? nullptr : attn4_row_ptr(a, v);
}
__device__ __forceinline__ void a35_st(uint32_t addr, uint4 v)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
/* Versions 35 and 36: lane `lane`'s stores of a warp's rows row0 + i (row0 a multiple of 8) into the
 * swizzled stage at shared address stage, fp16 latent chunks 2 lane and 2 lane + 1 of each row.
 * a6_swz(row0 + i, 2 lane + e) is column block lane >> 2 and position ((2 lane + e) & 7) ^ (i & 7),
 * so a lane's two positions are computed once per tile and each row's are an XOR with an immediate;
 * odd lane quads store their second chunk first (a35_swap), so that each quarter warp's eight stores
 * of a row fall in eight distinct 16-byte positions (no bank conflict). at(i, 0) takes chunk
 * 2 lane + a35_swap(lane), at(i, 1) the other; attn33_check (kernels/versions/attn33_wgmma.cu)
 * checks both against a6_swz and the positions' distinctness on the host. The swap is the caller's
 * (computed once, outside the tiles' loop: as a member of this struct ptxas spills 20 B more in
 * version 35). */
__host__ __device__ __forceinline__ bool a35_swap(int lane) { return (lane >> 2) & 1; }
struct a35_rows {
    uint32_t st0, p0, p1;
    __host__ __device__ a35_rows(uint32_t stage, int row0, int lane)
    {
        const bool swap = a35_swap(lane);
        st0 = stage + (uint32_t)(lane >> 2) * A6_BLOCK_BYTES + (uint32_t)row0 * 128;
        p0 = (uint32_t)((2 * lane + (swap ? 1 : 0)) & 7) << 4;
        p1 = (uint32_t)((2 * lane + (swap ? 0 : 1)) & 7) << 4;
    }
    __host__ __device__ uint32_t at(int i, int second) const { return st0 + i * 128 + ((second ? p1 : p0) ^ ((i & 7) << 4)); }
    /* Kept opaque per tile, so that the compiler does not hold one address per row across the loop. */
    __device__ __forceinline__ void opaque()
    {
        a18_fence_u32(st0);
        a18_fence_u32(p0);
        a18_fence_u32(p1);
    }
    /* Row row0 + i's 16 codes of this lane, times scale, as fp16; swap = a35_swap(lane). */
    __device__ __forceinline__ void put(int i, uint4 codes, float scale, bool swap) const
    {
        uint4 h[2];
        dh_fp8x16_to_f16(codes, __float2half2_rn(scale), h);
        a35_st(at(i, 0), swap ? h[1] : h[0]);
        a35_st(at(i, 1), swap ? h[0] : h[1]);
    }
};
/* Clusters of two blocks (versions 21, 22, kernels/lib/attn21.cuh): the shared::cluster address of
 * local address addr in block rank's shared memory, and an arrival there (release at CTA scope,
 * as version 17's). */
__device__ __forceinline__ uint32_t a18_mapa(uint32_t addr, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void a18_arrive_remote(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* The tile row of producer thread pair m: inside each group of 8 rows, FP8 rows: bits 1 and 2 of
 * m swapped (a quarter warp holds rows {0, 1, 4, 5} or {2, 3, 6, 7} of the group: its threads'
 * latent chunks 2o, 2o + 2 XOR those rows cover all 8 16-byte positions of a 128-byte window);
 * BF16 rows (chunks c, c + 1 per pair): rows {0, 2, 4, 6} or {1, 3, 5, 7}. */
template <int FMT>
__device__ __forceinline__ int a18_row(int m)
{
    const int x = m & 7;
    const int px = FMT == KREF_ROW_FP8 ? (x & 1) | ((x & 2) << 1) | ((x & 4) >> 1) : ((x & 3) << 1) | (x >> 2);
    return (m & ~7) | px;
}

/* The wgmma instructions of warpgroup 0: S += Q K^T for the tile's 64 rows (m64n64k16, both
 * operands K-major from shared memory) and O += P V with P in registers (m64n256k16, A from
 * registers: four 32-bit registers per thread per 16 columns of P, V N-major). */
#define A18_MMA(name, T)                                                                              \
    __device__ __forceinline__ void a18_mma_s_##name(float (&d)[32], uint64_t da, uint64_t db, int scale_d) \
    {                                                                                                 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                     \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " {" DH_WG_REGS32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
                     : DH_WG_F16(0), DH_WG_F16(16)                                                     \
                     : "l"(da), "l"(db), "r"(scale_d));                                              \
    }                                                                                                 \
    __device__ __forceinline__ void a18_mma_o_rs_##name(float (&d)[128], uint32_t a0, uint32_t a1, uint32_t a2, \
                                                        uint32_t a3, uint64_t db)                    \
    {                                                                                                 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                       \
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32." T "." T " {" DH_WG_REGS128 "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n" \
                     : DH_WG_F64(0), DH_WG_F64(64)                                                    \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db));                                 \
    }
A18_MMA(f16, "f16")
A18_MMA(bf16, "bf16")

template <int FMT> struct a18_ops;
template <> struct a18_ops<KREF_ROW_FP8> {
    static __device__ __forceinline__ void mma_s(float (&d)[32], uint64_t a, uint64_t b, int sd) { a18_mma_s_f16(d, a, b, sd); }
    static __device__ __forceinline__ void mma_o_rs(float (&d)[128], const uint32_t *p, uint64_t b)
    {
        a18_mma_o_rs_f16(d, p[0], p[1], p[2], p[3], b);
    }
};
template <> struct a18_ops<KREF_ROW_BF16> {
    static __device__ __forceinline__ void mma_s(float (&d)[32], uint64_t a, uint64_t b, int sd) { a18_mma_s_bf16(d, a, b, sd); }
    static __device__ __forceinline__ void mma_o_rs(float (&d)[128], const uint32_t *p, uint64_t b)
    {
        a18_mma_o_rs_bf16(d, p[0], p[1], p[2], p[3], b);
    }
};

/* The producer warpgroup: version 8's (a6_producer) with thread p on row a18_row(p / 2) and the
 * odd threads' RoPE chunks stored in the other order (the pair's chunks 2i, 2i + 1 go to
 * positions 2i and 2(i ^ 1) + 1, so with the rows above a quarter warp's eight stores fall in
 * eight distinct 16-byte positions); the loads are version 8's (the two threads of a row read
 * adjacent 16-byte chunks). */
template <int FMT>
__device__ __forceinline__ void a18_producer(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                             int re, int ntiles)
{
    const int j = a18_row<FMT>(p >> 1), hf = p & 1;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    long long next_id = j < min(A6_N, re - rb) ? attn4_row_id(a, q, rb + j) : 0;
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, base = rb + t * A6_N, cnt = min(A6_N, re - base);
        const long long id = next_id;
        if (t + 1 < ntiles && j < min(A6_N, re - base - A6_N)) next_id = attn4_row_id(a, q, base + A6_N + j);
        const bool valid = j < cnt;
        const uint8_t *src = valid ? attn4_row_ptr(a, id) : nullptr;
        uint8_t *stage = sm + A6_TILE_BYTES * (1 + s);
        if (FMT == KREF_ROW_FP8) {
            uint4 lat[16], rope[4];
            float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
            if (valid) {
#pragma unroll
                for (int i = 0; i < 16; i++) lat[i] = *(const uint4 *)(src + (hf + 2 * i) * 16);
#pragma unroll
                for (int i = 0; i < 4; i++) rope[i] = *(const uint4 *)(src + KREF_LATENT + 16 + (hf + 2 * i) * 16);
                sc = *(const float4 *)(src + KREF_LATENT);
            } else {
#pragma unroll
                for (int i = 0; i < 16; i++) lat[i] = make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int i = 0; i < 4; i++) rope[i] = make_uint4(0, 0, 0, 0);
            }
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const int o = hf + 2 * i;   /* latent codes 16 o .. 16 o + 15: chunks 2 o, 2 o + 1 */
                const float g = (o >> 3) == 0 ? sc.x : (o >> 3) == 1 ? sc.y : (o >> 3) == 2 ? sc.z : sc.w;
                uint4 w[2];
                dh_fp8x16_to_f16(lat[i], __float2half2_rn(g), w);
                *(uint4 *)(stage + a6_swz(j, 2 * o)) = w[0];
                *(uint4 *)(stage + a6_swz(j, 2 * o + 1)) = w[1];
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                /* Step i stores the pair's chunk i ^ hf: RoPE chunk hf + 2 (i ^ hf). */
                const uint4 v = hf ? rope[i ^ 1] : rope[i];
                *(uint4 *)(stage + a6_swz(j, 64 + hf + 2 * (i ^ hf))) = dh_bf16x8_to_f16(v);
            }
        } else {
            if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
            a6_cp_async_row(sbase + A6_TILE_BYTES * (1 + s), j, hf, valid, src, a.q);
            asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
        }
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

/* Version 20's producer for FP8 rows: a18_producer's rows and stores with version 10's loads in
 * flight (a6_producer_pipe): a thread's share of its row in two halves, A (latent chunks hf, hf +
 * 2, .. hf + 14 and the scales) and B (the other 8 latent chunks and RoPE); the next tile's A is
 * loaded as soon as this tile's A is converted, its B as soon as this B is, in the same
 * registers, so half a tile of loads travels while the other half is converted and while the
 * producer waits for a free stage. Row ids two tiles ahead. BF16 rows: a18_producer. */
__device__ __forceinline__ void a18_producer_pipe(const attn_args &a, uint8_t *sm, uint32_t sbase, int p, int q, int rb,
                                                  int re, int ntiles)
{
    const int j = a18_row<KREF_ROW_FP8>(p >> 1), hf = p & 1;
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    auto has_row = [&](int t) { return t < ntiles && rb + t * A6_N + j < re; };
    long long id_next = has_row(1) ? attn4_row_id(a, q, rb + A6_N + j) : 0;
    uint4 lat[16], rope[4];
    float4 sc = make_float4(0.f, 0.f, 0.f, 0.f);
    const uint8_t *src = has_row(0) ? attn4_row_ptr(a, attn4_row_id(a, q, rb + j)) : nullptr;
    auto load_a = [&](const uint8_t *r) {
#pragma unroll
        for (int i = 0; i < 8; i++) lat[i] = r ? *(const uint4 *)(r + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
        sc = r ? *(const float4 *)(r + KREF_LATENT) : make_float4(0.f, 0.f, 0.f, 0.f);
    };
    auto load_b = [&](const uint8_t *r) {
#pragma unroll
        for (int i = 8; i < 16; i++) lat[i] = r ? *(const uint4 *)(r + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < 4; i++) rope[i] = r ? *(const uint4 *)(r + KREF_LATENT + 16 + (hf + 2 * i) * 16) : make_uint4(0, 0, 0, 0);
    };
    if (ntiles > 0) {
        load_a(src);
        load_b(src);
    }
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1;
        uint8_t *stage = sm + A6_TILE_BYTES * (1 + s);
        const uint8_t *nsrc = has_row(t + 1) ? attn4_row_ptr(a, id_next) : nullptr;
        id_next = has_row(t + 2) ? attn4_row_id(a, q, rb + (t + 2) * A6_N + j) : 0;
        if (t >= 2) dh_mbar_wait(bar_empty + 8 * s, ((t >> 1) - 1) & 1);
        const float gz = sc.z, gw = sc.w;   /* half B's scales, before half A is reloaded */
#pragma unroll
        for (int i = 0; i < 8; i++) a6_dequant_chunk(stage, j, hf + 2 * i, lat[i], (hf + 2 * i) < 8 ? sc.x : sc.y);
        if (t + 1 < ntiles) load_a(nsrc);
#pragma unroll
        for (int i = 8; i < 16; i++) a6_dequant_chunk(stage, j, hf + 2 * i, lat[i], (hf + 2 * i) < 24 ? gz : gw);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 v = hf ? rope[i ^ 1] : rope[i];
            *(uint4 *)(stage + a6_swz(j, 64 + hf + 2 * (i ^ hf))) = dh_bf16x8_to_f16(v);
        }
        if (t + 1 < ntiles) load_b(nsrc);
        dh_fence_proxy_async();
        dh_mbar_arrive(bar_full + 8 * s);
    }
}

/* Consumer warpgroup W (0 or 1) of version V (18, 20: warpgroup 0's P V with P in registers; 19:
 * from shared memory). D: A6_DIAG_PRODUCER hands each stage back unread (the barriers between the
 * warpgroups still run), anything else computes. */
template <int FMT, int V, int D, int W, bool CL = false>
__device__ __forceinline__ void a18_loop(const attn_args &a, uint8_t *sm, uint32_t sbase, int tid, int rb, int re,
                                         int ntiles, float (&o)[128], float &m0, float &m1, float &l0, float &l1)
{
    constexpr bool RS = V != 19;
    constexpr bool LEAN = V == 37 || V == 39;   /* version 37's consumers (a37_step, a37_ex2, A37_RESCALE) */
    constexpr bool RA = V == 39;   /* version 39 (FP8 rows): the stage's and Q's RoPE block BF16, by cp.async */
    const uint32_t sQ = sbase, sK = sbase + A6_TILE_BYTES, sP = sbase + A6_P_OFF;
    float *alpha = (float *)(sm + A6_RED_OFF);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    const float sscale = a.sm_scale * A6_LOG2E;
    /* CL: the stage's empty barrier of both blocks of the cluster, one arrival per warp on each. */
    uint32_t rank = 0;
    if (CL) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const uint32_t my_empty = CL ? a18_mapa(bar_empty, rank) : 0, peer_empty = CL ? a18_mapa(bar_empty, rank ^ 1u) : 0;
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.f;
    m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    for (int t = 0; t < ntiles; t++) {
        const int s = t & 1, cnt = min(A6_N, re - (rb + t * A6_N));
        const uint32_t stage = sK + A6_TILE_BYTES * s;
        if (W == 0) {
            dh_mbar_wait(bar_full + 8 * s, (t >> 1) & 1);
            /* The peer's bytes (CL), the RoPE's cp.async (RA), before the tensor cores read them. */
            if (CL || RA) dh_fence_proxy_async();
            if (D == A6_DIAG_PRODUCER) {
                if (t >= 1) a18_bar_sync(3);
                if (qd == 0) alpha[r0] = 1.f, alpha[r1] = 1.f;
                a18_bar_arrive(2);
            } else {
                /* S for the whole tile: columns 8 (i / 4) + 2 qd + (i % 2) of rows r0 (i % 4 < 2), r1. */
                float sc[32];
#pragma unroll
                for (int i = 0; i < 32; i++) sc[i] = 0.f;
#pragma unroll
                for (int i = 0; i < 32; i++) dh_fence_reg(sc[i]);
                dh_wgmma_fence();
                if (LEAN) {
                    const uint64_t dq = dh_wgmma_desc(sQ, 16, 1024), dk = dh_wgmma_desc(stage, 16, 1024);
#pragma unroll
                    for (int ks = 0; ks < 36; ks++) {
                        const uint32_t off = ((ks >> 2) * A6_BLOCK_BYTES + (ks & 3) * 32) >> 4;
                        if (RA && ks >= 32) a18_ops<KREF_ROW_BF16>::mma_s(sc, a37_step(dq, off), a37_step(dk, off), 1);
                        else a18_ops<FMT>::mma_s(sc, a37_step(dq, off), a37_step(dk, off), ks > 0);
                    }
                } else {
#pragma unroll
                    for (int ks = 0; ks < 36; ks++) {
                        const uint32_t off = (ks >> 2) * A6_BLOCK_BYTES + (ks & 3) * 32;
                        a18_ops<FMT>::mma_s(sc, dh_wgmma_desc(sQ + off, 16, 1024), dh_wgmma_desc(stage + off, 16, 1024), ks > 0);
                    }
                }
                dh_wgmma_commit();
                dh_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < 32; i++) dh_fence_reg(sc[i]);
                /* The online softmax of the whole tile (log2 domain; columns past cnt masked). */
                float mx0 = -INFINITY, mx1 = -INFINITY, al0, al1;
                bool up = true;   /* this warp's rows rescaled (version 37: only past A37_RESCALE) */
                uint32_t pa[16];
                float ps0 = 0.f, ps1 = 0.f;
                if (LEAN) {
                    /* Raw scores: masked (last tile only) and maximised unscaled, scaled in the
                     * exponent's fma (sscale > 0). */
                    if (cnt < A6_N) {
#pragma unroll
                        for (int i = 0; i < 32; i++)
                            if (8 * (i >> 2) + 2 * qd + (i & 1) >= cnt) sc[i] = -INFINITY;
                    }
#pragma unroll
                    for (int i = 0; i < 32; i++) {
                        if (i & 2) mx1 = fmaxf(mx1, sc[i]);
                        else mx0 = fmaxf(mx0, sc[i]);
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 32; i++) {
                        const int col = 8 * (i >> 2) + 2 * qd + (i & 1);
                        const float v = col < cnt ? sc[i] * sscale : -INFINITY;
                        sc[i] = v;
                        if (i & 2) mx1 = fmaxf(mx1, v);
                        else mx0 = fmaxf(mx0, v);
                    }
                }
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 1));
                mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffff, mx0, 2));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 1));
                mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffff, mx1, 2));
                if (LEAN) {
                    const float mn0 = fmaxf(m0, mx0 * sscale), mn1 = fmaxf(m1, mx1 * sscale);
                    up = __any_sync(0xffffffff, mn0 > m0 + A37_RESCALE || mn1 > m1 + A37_RESCALE);
                    al0 = 1.f, al1 = 1.f;
                    if (up) {
                        al0 = mn0 == -INFINITY ? 1.f : a37_ex2(m0 - mn0);
                        al1 = mn1 == -INFINITY ? 1.f : a37_ex2(m1 - mn1);
                        m0 = mn0;
                        m1 = mn1;
                    }
                    /* m == -inf: every score of the row masked (-inf), so p = ex2(-inf) = 0. */
                    const float nm0 = m0 == -INFINITY ? 0.f : -m0, nm1 = m1 == -INFINITY ? 0.f : -m1;
#pragma unroll
                    for (int jj = 0; jj < 8; jj++) {
                        const float p00 = a37_ex2(fmaf(sc[4 * jj], sscale, nm0));
                        const float p01 = a37_ex2(fmaf(sc[4 * jj + 1], sscale, nm0));
                        const float p10 = a37_ex2(fmaf(sc[4 * jj + 2], sscale, nm1));
                        const float p11 = a37_ex2(fmaf(sc[4 * jj + 3], sscale, nm1));
                        ps0 += p00 + p01;
                        ps1 += p10 + p11;
                        pa[2 * jj] = a6_ops<FMT>::pack(p00, p01);
                        pa[2 * jj + 1] = a6_ops<FMT>::pack(p10, p11);
                    }
                } else {
                    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
                    al0 = mn0 == -INFINITY ? 1.f : exp2f(m0 - mn0), al1 = mn1 == -INFINITY ? 1.f : exp2f(m1 - mn1);
                    m0 = mn0;
                    m1 = mn1;
                    /* P packed two columns per register: pa[2 jj + e] holds row (e ? r1 : r0), columns
                     * 8 jj + 2 qd, +1, which is wgmma's A fragment of columns 16 kk .. 16 kk + 15 in
                     * pa[4 kk .. 4 kk + 3] (the accumulator layout of S, two 8-column halves). */
#pragma unroll
                    for (int jj = 0; jj < 8; jj++) {
                        const float p00 = mn0 == -INFINITY ? 0.f : exp2f(sc[4 * jj] - mn0);
                        const float p01 = mn0 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 1] - mn0);
                        const float p10 = mn1 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 2] - mn1);
                        const float p11 = mn1 == -INFINITY ? 0.f : exp2f(sc[4 * jj + 3] - mn1);
                        ps0 += p00 + p01;
                        ps1 += p10 + p11;
                        pa[2 * jj] = a6_ops<FMT>::pack(p00, p01);
                        pa[2 * jj + 1] = a6_ops<FMT>::pack(p10, p11);
                    }
                }
                l0 = l0 * al0 + ps0;   /* this thread's columns; summed over the quad at the end */
                l1 = l1 * al1 + ps1;
                if (up) {
#pragma unroll
                    for (int jj = 0; jj < 32; jj++) o[4 * jj] *= al0, o[4 * jj + 1] *= al0, o[4 * jj + 2] *= al1, o[4 * jj + 3] *= al1;
                }
                if (t >= 1) a18_bar_sync(3);   /* warpgroup 1 is done with the last P and factors */
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    *(uint32_t *)(sm + A6_P_OFF + r0 * 128 + ((jj ^ (r0 & 7)) << 4) + qd * 4) = pa[2 * jj];
                    *(uint32_t *)(sm + A6_P_OFF + r1 * 128 + ((jj ^ (r1 & 7)) << 4) + qd * 4) = pa[2 * jj + 1];
                }
                if (qd == 0) alpha[r0] = al0, alpha[r1] = al1;
                dh_fence_proxy_async();
                if (RS) {
#pragma unroll
                    for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
#pragma unroll
                    for (int i = 0; i < 16; i++) a18_fence_u32(pa[i]);
                    dh_wgmma_fence();
                    if (LEAN) {
                        const uint64_t dv = dh_wgmma_desc(stage, A6_BLOCK_BYTES, 1024);
#pragma unroll
                        for (int kk = 0; kk < 4; kk++) a18_ops<FMT>::mma_o_rs(o, pa + 4 * kk, a37_step(dv, kk * (2048 >> 4)));
                    } else {
#pragma unroll
                        for (int kk = 0; kk < 4; kk++)
                            a18_ops<FMT>::mma_o_rs(o, pa + 4 * kk, dh_wgmma_desc(stage + kk * 2048, A6_BLOCK_BYTES, 1024));
                    }
                    dh_wgmma_commit();
                    a18_bar_arrive(2);   /* P and the factors are ready */
                    dh_wgmma_wait0();
#pragma unroll
                    for (int i = 0; i < 16; i++) a18_fence_u32(pa[i]);
                } else {
                    a18_wg_bar();   /* this warpgroup's P whole before its own wgmma reads it */
                    a6_issue_pv<FMT>(o, sP, stage, 0);
                    a18_bar_arrive(2);
                    dh_wgmma_wait0();
                }
#pragma unroll
                for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
            }
        } else {
            a18_bar_sync(2);   /* P of tile t and the factors */
            const float al0 = alpha[r0], al1 = alpha[r1];
            /* Version 37: warpgroup 0's warp on the same rows skipped its rescale where all are 1. */
            if (!LEAN || __any_sync(0xffffffff, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
                for (int jj = 0; jj < 32; jj++) o[4 * jj] *= al0, o[4 * jj + 1] *= al0, o[4 * jj + 2] *= al1, o[4 * jj + 3] *= al1;
            }
            if (D != A6_DIAG_PRODUCER) {
                /* Complete already (warpgroup 0 waited for it); orders the producer's bytes here too. */
                dh_mbar_wait(bar_full + 8 * s, (t >> 1) & 1);
                if (CL) dh_fence_proxy_async();
                a6_issue_pv<FMT>(o, sP, stage, 1);
                dh_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < 128; i++) dh_fence_reg(o[i]);
            }
            if (t + 1 < ntiles) a18_bar_arrive(3);   /* P and the factors may be rewritten */
        }
        if (CL) {
            __syncwarp();
            if (lane == 0) {
                a18_arrive_remote(my_empty + 8 * s);
                a18_arrive_remote(peer_empty + 8 * s);
            }
        } else {
            dh_mbar_arrive(bar_empty + 8 * s);
        }
    }
}

/* The consumers' epilogue, one instance for both warpgroups (w = 0, 1): the row sums (warpgroup 0
 * holds them whole), version 8's staged output and the split's log-sum-exp. */
template <int FMT>
__device__ __forceinline__ void a18_epilogue(const attn_args &a, float *__restrict__ out, uint8_t *sm, int w, int tid,
                                             int q, int split, int hb, const float (&o)[128], float m0, float m1,
                                             float l0, float l1)
{
    float *lsum = (float *)(sm + A6_RED_OFF) + 64;
    const int lane = tid & 31, wq = (tid >> 5) & 3, qd = lane & 3;
    const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
    if (w == 0) {
        l0 += __shfl_xor_sync(0xffffffff, l0, 1);
        l0 += __shfl_xor_sync(0xffffffff, l0, 2);
        l1 += __shfl_xor_sync(0xffffffff, l1, 1);
        l1 += __shfl_xor_sync(0xffffffff, l1, 2);
        if (qd == 0) lsum[r0] = l0, lsum[r1] = l1;
    }
    a6_consumer_bar();
    const float L0 = lsum[r0], L1 = lsum[r1];
    const float i0 = L0 > 0 ? 1.f / L0 : 0.f, i1 = L1 > 0 ? 1.f / L1 : 0.f;
    const size_t ob = ((size_t)q * a.splits + split) * a.heads + (size_t)hb * 64;
    /* Both warpgroups have waited for their last P V, so the key stages are free for the staging. */
    if (a.splits == 1) a6_store_out<float>(o, i0, i1, sm, w, tid, r0, r1, qd, out + ((size_t)q * a.heads + (size_t)hb * 64) * KREF_V_DIM);
    else a6_store_out<__half>(o, i0, i1, sm, w, tid, r0, r1, qd, (__half *)a.part_o + ob * KREF_V_DIM);
    if (a.splits > 1 && w == 0 && qd == 0) {
        a.part_lse[ob + r0] = L0 > 0 ? m0 + log2f(L0) : -INFINITY;
        a.part_lse[ob + r1] = L1 > 0 ? m1 + log2f(L1) : -INFINITY;
    }
}

template <int FMT, int V, int D>
__global__ void __launch_bounds__(A6_THREADS, 1) attn18_kernel(const attn_args a, float *__restrict__ out)
{
    extern __shared__ __align__(1024) uint8_t a18_smem_raw[];
    const uint32_t raw_addr = (uint32_t)__cvta_generic_to_shared(a18_smem_raw);
    uint8_t *sm = a18_smem_raw + (((raw_addr + 1023) & ~1023u) - raw_addr);
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(sm);
    const uint32_t bar_full = sbase + A6_BAR_OFF, bar_empty = bar_full + 16;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int split = blockIdx.x, q = blockIdx.y, hb = blockIdx.z;
    const int rb = split * a.rows_per_split, re = min(a.k, rb + a.rows_per_split);
    const int ntiles = re > rb ? (re - rb + A6_N - 1) / A6_N : 0;
    if (tid == 0) {
        dh_mbar_init(bar_full, 128);
        dh_mbar_init(bar_full + 8, 128);
        dh_mbar_init(bar_empty, 256);
        dh_mbar_init(bar_empty + 8, 256);
    }
    dh_fence_proxy_async();
    __syncthreads();
    if (wg == 2) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(A18_PRODUCER_REGS));
        if (D == A6_DIAG_CONSUMERS) a6_producer_unfilled(bar_full, ntiles);
        else if (V == 20 && FMT == KREF_ROW_FP8) a18_producer_pipe(a, sm, sbase, tid - 256, q, rb, re, ntiles);
        else a18_producer<FMT>(a, sm, sbase, tid - 256, q, rb, re, ntiles);
    } else if (V == 19) {
        /* One instance of the epilogue for both warpgroups (racecheck's matching of a named
         * barrier reached from two code addresses is the question, kernels/NOTES.md). */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_CONSUMER_REGS));
        a6_load_q<FMT, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        if (wg == 0) a18_loop<FMT, V, D, 0>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        else a18_loop<FMT, V, D, 1>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<FMT>(a, out, sm, wg, tid, q, split, hb, o, m0, m1, l0, l1);
    } else if (wg == 0) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG0_REGS));
        a6_load_q<FMT, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<FMT, V, D, 0>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<FMT>(a, out, sm, 0, tid, q, split, hb, o, m0, m1, l0, l1);
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(A18_WG1_REGS));
        a6_load_q<FMT, 256>(a, sm, tid, q, hb);
        dh_fence_proxy_async();
        a6_consumer_bar();
        float o[128], m0, m1, l0, l1;
        a18_loop<FMT, V, D, 1>(a, sm, sbase, tid, rb, re, ntiles, o, m0, m1, l0, l1);
        a18_epilogue<FMT>(a, out, sm, 1, tid, q, split, hb, o, m0, m1, l0, l1);
    }
}

/* Version V's (18-20) main kernel over grid (splits, nq, heads / 64), one block per SM, as
 * version 8's (a6_launch). */
template <int V, int D>
static void a18_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    static bool attr_done = false;
    if (!attr_done) {
        cudaCheck(cudaFuncSetAttribute(attn18_kernel<KREF_ROW_FP8, V, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        cudaCheck(cudaFuncSetAttribute(attn18_kernel<KREF_ROW_BF16, V, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, A6_SMEM_BYTES));
        attr_done = true;
    }
    dim3 grid(a.splits, a.nq, a.heads / 64);
    if (a.format == KREF_ROW_FP8) attn18_kernel<KREF_ROW_FP8, V, D><<<grid, A6_THREADS, A6_SMEM_BYTES, stream>>>(a, out);
    else attn18_kernel<KREF_ROW_BF16, V, D><<<grid, A6_THREADS, A6_SMEM_BYTES, stream>>>(a, out);
    CUDA_LAUNCH_CHECK();
}

#endif
