/* attention_wgmma.cu: attention version 8's main kernel, the library's instance of the wgmma
 * kernel of kernels/lib/attn6.cuh (which describes it), version 18's (kernels/lib/attn18.cuh) and
 * version 22's (kernels/lib/attn21.cuh: clusters of two blocks, FP8 rows at 128 heads),
 * and versions 23-25's (kernels/lib/attn23.cuh: 22 with per-warp bulk copies to the peer; 25
 * persistent, 26 = 25 with the output staged in the Q region; 25 and 26 run 23 on shapes whose
 * splits are not multiples of 4 tiles),
 * and versions 27-29's (kernels/lib/attn27.cuh: 18 with the splits merged in the kernel through
 * distributed shared memory; 28 with programmatic dependent launch; 29 in clusters of two splits),
 * and version 30's (kernels/lib/attn30.cuh: 18 with programmatic dependent launch on its main
 * kernel and its combine), and versions 37 and 38's (30 and 23 with version 37's consumers,
 * kernels/lib/attn18.cuh a18_loop),
 * built for sm_90a because wgmma exists only there; kernels/lib/attention.cu's
 * dhk_attention_launch adds the splits and the combine. */
#include "kernels/dhk.h"
#include "kernels/lib/attn27.cuh"
#include "kernels/lib/attn30.cuh"  // defines: attn30_kernel, a30_launch<PDL, D>
#include "kernels/lib/attn23.cuh"  // defines: attn6_kernel, a6_launch<V>, attn18_kernel, a18_launch<V, D>, attn21_kernel, a21_launch<D, V>, attn23_kernel, a23_launch<D, V>

void dhk__attn8_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    a6_launch<8>(a, out, stream);
}

void dhk__attn18_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    a18_launch<18, A6_DIAG_NONE>(a, out, stream);
}

void dhk__attn22_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    a21_launch<A6_DIAG_NONE, 22>(a, out, stream);
}

int dhk__attn22_resident_blocks() { return 2 * a21_max_clusters<22>(); }

void dhk__attn23_launch(const attn_args &a, float *out, cudaStream_t stream, int version)
{
    if (version == 25 && a25_applies(a)) a25_launch<A6_DIAG_NONE, 25>(a, out, stream, a25_max_clusters());
    else if (version == 26 && a25_applies(a)) a25_launch<A6_DIAG_NONE, 26>(a, out, stream, a25_max_clusters());
    else if (version == 24) a23_launch<A6_DIAG_NONE, 24>(a, out, stream);
    else if (version == 38) a23_launch<A6_DIAG_NONE, 38>(a, out, stream);
    else a23_launch<A6_DIAG_NONE, 23>(a, out, stream);
}

int dhk__attn23_resident_blocks(int version)
{
    return 2 * (version >= 25 ? std::min(a25_max_clusters(), a23_max_clusters<23>())
                : version == 24 ? a23_max_clusters<24>() : a23_max_clusters<23>());
}

void dhk__attn27_launch(const attn_args &a, float *out, cudaStream_t stream, int version)
{
    a27_launch(a, out, stream, version);
}

int dhk__attn27_max_clusters(int splits) { return a27_max_clusters(splits); }

void dhk__attn30_launch(const attn_args &a, float *out, cudaStream_t stream, int version)
{
    if (version == 37) a30_launch<true, A6_DIAG_NONE, A33_PF_NONE, 1, 37>(a, out, stream);
    else if (version == 39) a30_launch<true, A6_DIAG_NONE, A33_PF_NONE, 1, 39>(a, out, stream);
    else if (version == 41) a30_launch<true, A6_DIAG_NONE, A33_PF_NONE, 1, 41>(a, out, stream);
    else if (version == 43) a30_launch<true, A6_DIAG_NONE, A33_PF_NONE, 1, 43>(a, out, stream);
    else a30_launch<true, A6_DIAG_NONE>(a, out, stream);
}
