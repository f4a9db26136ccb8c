/* attention11_wgmma.cu: attention version 11's main kernel (kernels/lib/attn11.cuh, which
 * describes it: FP8 rows multiplied as e4m3 for the scores, rows copied raw by cp.async, the
 * values dequantised beside the multiplies), built for sm_90a; BF16 rows go to version 8's. */
#include "kernels/dhk.h"
#include "kernels/lib/attn11.cuh"   // defines: attn11_kernel, a11_launch

void dhk__attn11_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a.format == KREF_ROW_FP8) a11_launch<11, A6_DIAG_NONE>(a, out, stream);
    else dhk__attn8_launch(a, out, stream);
}

/* Version 12: version 11 with every warp of the block copying rows (kernels/lib/attn11.cuh). */
void dhk__attn12_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a.format == KREF_ROW_FP8) a11_launch<12, A6_DIAG_NONE>(a, out, stream);
    else dhk__attn8_launch(a, out, stream);
}

/* Version 13: version 12 with the consumers split as FlashMLA's (kernels/lib/attn11.cuh). */
void dhk__attn13_launch(const attn_args &a, float *out, cudaStream_t stream)
{
    if (a.format == KREF_ROW_FP8) a11_launch<13, A6_DIAG_NONE>(a, out, stream);
    else dhk__attn8_launch(a, out, stream);
}
