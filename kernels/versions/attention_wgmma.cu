/* attention_wgmma.cu: versions 6, 7, 9 and 10 of the sparse decode attention of
 * attention.cu and the diagnostic variants of versions 8 and 10, instances of the wgmma kernel
 * of kernels/lib/attn6.cuh (which describes the design and each version), and versions 11-13
 * with their diagnostic variants, instances of kernels/lib/attn11.cuh (FP8 rows multiplied as
 * e4m3; BF16 rows go to version 8), built for sm_90a. Version 8 itself is the library's
 * (kernels/lib/attention_wgmma.cu). */
#include "kernels/bench.cuh"
#include "kernels/lib/attn11.cuh"  // defines: attn6_kernel, a6_launch<V>, attn11_kernel, a11_launch<D>

/* Versions 11-13 (V): FP8 rows by attn11_kernel, BF16 rows by version 8's kernel. */
template <int V>
static void a11_or_8(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a.format == KREF_ROW_FP8) a11_launch<V, A6_DIAG_NONE>(a, out, stream);
    else dhk__attn8_launch(a, out, stream);
}

size_t attn6_smem_need(int version, int format)
{
    return version >= 11 && format == KREF_ROW_FP8 ? (size_t)A11_SMEM_BYTES : (size_t)A6_SMEM_BYTES;
}

void attn6_launch(const attn_args &a, float *out, cudaStream_t stream, int version)
{
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
    default: a6_launch<6>(a, out, stream); break;
    }
}
