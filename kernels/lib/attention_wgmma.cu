/* attention_wgmma.cu: attention version 8's main kernel, the library's instance of the wgmma
 * kernel of kernels/lib/attn6.cuh (which describes it), built for sm_90a because wgmma exists
 * only there; kernels/lib/attention.cu's dhk_attention_launch adds the splits and the combine. */
#include "kernels/dhk.h"
#include "kernels/lib/attn6.cuh"   // defines: attn6_kernel, a6_launch<V>

void dhk__attn8_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    a6_launch<8>(a, out, stream);
}
