/* attention_wgmma.cu: versions 6, 7, 9 and 10 of the sparse decode attention of
 * attention.cu and the diagnostic variants of versions 8 and 10, instances of the wgmma kernel
 * of kernels/lib/attn6.cuh (which describes the design and each version), and versions 11-13
 * with their diagnostic variants, instances of kernels/lib/attn11.cuh (FP8 rows multiplied as
 * e4m3; BF16 rows go to version 8), and version 14 with its diagnostic variants, instances of
 * kernels/lib/attn14.cuh (FP8 rows at 128 heads or more: clusters of two blocks sharing each
 * tile's dequantisation; the rest go to version 8), and version 15 (14 and 8 with the row loads
 * prefetching 256 B into L2), 16 (14 with the next tile's loads in flight) and 17 (16 with the
 * cluster's barriers at CTA scope; its diagnostic variant without the remote stores), and
 * versions 18-20 (version 8 with the consumers divided as FlashMLA's over 16-bit keys,
 * kernels/lib/attn18.cuh; 20 with version 10's producer) and 21-22 (the crossover with bulk copies
 * between the blocks, kernels/lib/attn21.cuh) and 23-24 (22 with per-warp bulk copies,
 * kernels/lib/attn23.cuh) with their diagnostic variants, and the fixed-cost diagnostics of
 * versions 18 and 30 (kernels/lib/attn30.cuh), built for sm_90a. Versions 8, 18 and 30
 * themselves are the library's (kernels/lib/attention_wgmma.cu). */
#include "kernels/bench.cuh"
#include "kernels/lib/attn11.cuh"  // defines: attn6_kernel, a6_launch<V>, attn11_kernel, a11_launch<D>
#include "kernels/lib/attn14.cuh"  // defines: attn14_kernel, a14_launch<D, V>
#include "kernels/lib/attn30.cuh"  // defines: attn30_kernel, a30_launch<PDL, D>
#include "kernels/lib/attn23.cuh"  // defines: attn18_kernel, a18_launch<V, D>, attn21_kernel, a21_launch<D, V>, attn23_kernel, a23_launch<D, V>

/* Versions 11-13 (V): FP8 rows by attn11_kernel, BF16 rows by version 8's kernel. */
template <int V>
static void a11_or_8(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a.format == KREF_ROW_FP8) a11_launch<V, A6_DIAG_NONE>(a, out, stream);
    else dhk__attn8_launch(a, out, stream);
}

/* Version 14: FP8 rows with an even number of 64-head groups in clusters of two blocks; the
 * rest by version 8's kernel. */
static bool a14_applies(const attn_args &a) { return a.format == KREF_ROW_FP8 && (a.heads / 64) % 2 == 0; }

int attn14_resident_blocks(const attn_args &a) { return a14_applies(a) ? 2 * a14_max_clusters() : 1 << 30; }

template <int D>
static void a14_or_8(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a14_applies(a)) a14_launch<D, 14>(a, out, stream);
    else if (D == A6_DIAG_NONE) dhk__attn8_launch(a, out, stream);
    else a6_launch<80 + D>(a, out, stream);
}
/* Version V = 16 (version 14 with the next tile's loads in flight in the producer) or 17 (16
 * with the barriers at CTA scope); the rest by 8. */
template <int D, int V = 16>
static void a16_or_8(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a14_applies(a)) a14_launch<D, V>(a, out, stream);
    else if (D == A6_DIAG_NONE) dhk__attn8_launch(a, out, stream);
    else a6_launch<80 + D>(a, out, stream);
}
/* Version 17 without its remote stores (A14_DIAG_NOREMOTE, _PRODUCER): 128 heads only. */
template <int D>
static void a17_noremote(const attn_args &a, float *out, cudaStream_t stream)
{
    if (!a14_applies(a)) {
        fprintf(stderr, "dhbench: attention v17: diag=noremote needs FP8 rows and an even number of 64-head groups\n");
        exit(1);
    }
    a14_launch<D, 17>(a, out, stream);
}
/* Versions 21, 22 (V): FP8 rows with an even number of 64-head groups in clusters of two blocks,
 * the half tiles exchanged by bulk copies; the rest by version 18's kernel. */
template <int D, int V>
static void a21_or_18(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a14_applies(a)) a21_launch<D, V>(a, out, stream);
    else if (D == A6_DIAG_NONE) dhk__attn18_launch(a, out, stream);
    else a18_launch<18, D>(a, out, stream);
}
/* Versions 23, 24 (V) diagnostic variants (D: one side alone): 128 heads, FP8 rows; the rest by
 * version 18's variant. */
template <int D, int V>
static void a23_or_18(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a14_applies(a)) a23_launch<D, V>(a, out, stream);
    else a18_launch<18, D>(a, out, stream);
}
/* Version 15: versions 14 and 8 with the row loads prefetching 256 B into L2. */
template <int D>
static void a15_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a14_applies(a)) a14_launch<D, 15>(a, out, stream);
    else a6_launch<D == A6_DIAG_NONE ? 15 : 150 + D>(a, out, stream);
}

/* Versions 11-13 stage FP8 rows in their own, larger layout; the others in version 6's. */
size_t attn6_smem_need(int version, int format)
{
    return version >= 11 && version <= 13 && format == KREF_ROW_FP8 ? (size_t)A11_SMEM_BYTES : (size_t)A6_SMEM_BYTES;
}

/* The fixed-cost diagnostics (A30_DIAG_*) of version 18's block (pdl false) and version 30's. */
template <bool PDL>
static void a30_diag(const attn_args &a, float *out, cudaStream_t stream)
{
    switch (a.diag & ~A30_DIAG_NOCOMBINE) {
    case A30_DIAG_LAUNCH: a30_launch<PDL, A30_DIAG_LAUNCH>(a, out, stream); break;
    case A30_DIAG_QONLY: a30_launch<PDL, A30_DIAG_QONLY>(a, out, stream); break;
    case A30_DIAG_EMPTY: a30_launch<PDL, A30_DIAG_EMPTY>(a, out, stream); break;
    case A30_DIAG_TILE1: a30_launch<PDL, A30_DIAG_TILE1>(a, out, stream); break;
    default: a30_launch<PDL, A30_DIAG_FULL>(a, out, stream); break;
    }
}

void attn30_diag_launch(const attn_args &a, float *out, cudaStream_t stream, bool pdl)
{
    if (pdl) a30_diag<true>(a, out, stream);
    else a30_diag<false>(a, out, stream);
}

void attn6_launch(const attn_args &a, float *out, cudaStream_t stream, int version)
{
    if ((version == 18 || version == 30) && a.diag >= A30_DIAG_LAUNCH) {
        attn30_diag_launch(a, out, stream, version == 30);
        return;
    }
    const int diag = version == 8 || version >= 10 ? a.diag : A6_DIAG_NONE;
    switch (version * 10 + diag) {
    case 70: a6_launch<7>(a, out, stream); break;
    case 80: dhk__attn8_launch(a, out, stream); break;   /* the library's instance */
    case 80 + A6_DIAG_PRODUCER: a6_launch<80 + A6_DIAG_PRODUCER>(a, out, stream); break;
    case 80 + A6_DIAG_CONSUMERS: a6_launch<80 + A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 90: a6_launch<9>(a, out, stream); break;
    case 100: a6_launch<10>(a, out, stream); break;
    case 110: a11_or_8<11>(a, out, stream); break;
    case 110 + A6_DIAG_PRODUCER: a11_launch<11, A6_DIAG_PRODUCER>(a, out, stream); break;
    case 110 + A6_DIAG_CONSUMERS: a11_launch<11, A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 110 + A11_DIAG_NODEQUANT: a11_launch<11, A11_DIAG_NODEQUANT>(a, out, stream); break;
    case 110 + A11_DIAG_QHI: a11_launch<11, A11_DIAG_QHI>(a, out, stream); break;
    case 120: a11_or_8<12>(a, out, stream); break;
    case 120 + A6_DIAG_PRODUCER: a11_launch<12, A6_DIAG_PRODUCER>(a, out, stream); break;
    case 120 + A6_DIAG_CONSUMERS: a11_launch<12, A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 120 + A11_DIAG_NODEQUANT: a11_launch<12, A11_DIAG_NODEQUANT>(a, out, stream); break;
    case 120 + A11_DIAG_QHI: a11_launch<12, A11_DIAG_QHI>(a, out, stream); break;
    case 130: a11_or_8<13>(a, out, stream); break;
    case 130 + A6_DIAG_PRODUCER: a11_launch<13, A6_DIAG_PRODUCER>(a, out, stream); break;
    case 130 + A6_DIAG_CONSUMERS: a11_launch<13, A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 130 + A11_DIAG_QHI: a11_launch<13, A11_DIAG_QHI>(a, out, stream); break;
    case 140: a14_or_8<A6_DIAG_NONE>(a, out, stream); break;
    case 140 + A6_DIAG_PRODUCER: a14_or_8<A6_DIAG_PRODUCER>(a, out, stream); break;
    case 140 + A6_DIAG_CONSUMERS: a14_or_8<A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 170: a16_or_8<A6_DIAG_NONE, 17>(a, out, stream); break;
    case 170 + A6_DIAG_PRODUCER: a16_or_8<A6_DIAG_PRODUCER, 17>(a, out, stream); break;
    case 170 + A6_DIAG_CONSUMERS: a16_or_8<A6_DIAG_CONSUMERS, 17>(a, out, stream); break;
    case 160: a16_or_8<A6_DIAG_NONE>(a, out, stream); break;
    case 160 + A6_DIAG_PRODUCER: a16_or_8<A6_DIAG_PRODUCER>(a, out, stream); break;
    case 160 + A6_DIAG_CONSUMERS: a16_or_8<A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 170 + A14_DIAG_NOREMOTE: a17_noremote<A14_DIAG_NOREMOTE>(a, out, stream); break;
    case 170 + A14_DIAG_NOREMOTE_PRODUCER: a17_noremote<A14_DIAG_NOREMOTE_PRODUCER>(a, out, stream); break;
    case 180: dhk__attn18_launch(a, out, stream); break;   /* the library's instance */
    case 180 + A6_DIAG_PRODUCER: a18_launch<18, A6_DIAG_PRODUCER>(a, out, stream); break;
    case 180 + A6_DIAG_CONSUMERS: a18_launch<18, A6_DIAG_CONSUMERS>(a, out, stream); break;
    case 190: a18_launch<19, A6_DIAG_NONE>(a, out, stream); break;
    case 200: a18_launch<20, A6_DIAG_NONE>(a, out, stream); break;
    case 200 + A6_DIAG_PRODUCER: a18_launch<20, A6_DIAG_PRODUCER>(a, out, stream); break;
    case 210: a21_or_18<A6_DIAG_NONE, 21>(a, out, stream); break;
    case 210 + A6_DIAG_PRODUCER: a21_or_18<A6_DIAG_PRODUCER, 21>(a, out, stream); break;
    case 220: a21_or_18<A6_DIAG_NONE, 22>(a, out, stream); break;
    case 220 + A6_DIAG_PRODUCER: a21_or_18<A6_DIAG_PRODUCER, 22>(a, out, stream); break;
    case 220 + A6_DIAG_CONSUMERS: a21_or_18<A6_DIAG_CONSUMERS, 22>(a, out, stream); break;
    case 230 + A6_DIAG_PRODUCER: a23_or_18<A6_DIAG_PRODUCER, 23>(a, out, stream); break;
    case 230 + A6_DIAG_CONSUMERS: a23_or_18<A6_DIAG_CONSUMERS, 23>(a, out, stream); break;
    case 240 + A6_DIAG_PRODUCER: a23_or_18<A6_DIAG_PRODUCER, 24>(a, out, stream); break;
    case 150: a15_launch<A6_DIAG_NONE>(a, out, stream); break;
    case 150 + A6_DIAG_PRODUCER: a15_launch<A6_DIAG_PRODUCER>(a, out, stream); break;
    case 150 + A6_DIAG_CONSUMERS: a15_launch<A6_DIAG_CONSUMERS>(a, out, stream); break;
    default: a6_launch<6>(a, out, stream); break;
    }
}
