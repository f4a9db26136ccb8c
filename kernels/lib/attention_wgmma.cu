/* attention_wgmma.cu: attention version 8's main kernel, the library's instance of the wgmma
 * kernel of kernels/lib/attn6.cuh (which describes it), and version 18's (kernels/lib/attn18.cuh),
 * built for sm_90a because wgmma exists only there; kernels/lib/attention.cu's
 * dhk_attention_launch adds the splits and the combine. */
#include "kernels/dhk.h"
#include "kernels/lib/attn18.cuh"  // defines: attn6_kernel, a6_launch<V>, attn18_kernel, a18_launch<V, D>

void dhk__attn8_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    a6_launch<8>(a, out, stream);
}

void dhk__attn18_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    a18_launch<18, A6_DIAG_NONE>(a, out, stream);
}
