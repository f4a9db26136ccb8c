/* karch.c: the table of what each kernel version needs of the GPU, and the decisions made
 * from it (karch.h). A version with no line needs only sm_80 (KARCH_BASE). A new version
 * that uses an instruction of a later architecture adds its line here, and its device code
 * is guarded by the same architecture (__CUDA_ARCH__) so that the other targets compile. */
#include "kernels/karch.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *kernel;
    int vmin, vmax;
    const char *dtype;   /* NULL: any */
    karch_feature need;
} karch_rule;

static const karch_rule rules[] = {
    {"fetch", 4, 4, NULL, KARCH_SM90},        /* cp.async.bulk through shared memory */
    {"gather", 4, 4, NULL, KARCH_SM90},       /* cp.async.bulk, mbarrier expect_tx */
    /* kernels/lib/attn6.cuh, attn11.cuh: 6-13; later versions are taken to be wgmma ones too
     * until a line here says otherwise (a wrong "needs" skips a version, a wrong "runs" traps). */
    {"attention", 6, 99, NULL, KARCH_WGMMA},
    {"indexer", 2, 4, NULL, KARCH_FP8MMA},    /* mma.sync m16n8k32 e4m3 */
    {"indexer", 5, 5, NULL, KARCH_WGMMA},     /* kernels/lib/indexer_wgmma.cu */
    {"gemm", 1, 1, "fp8", KARCH_FP8GEMM},     /* cuBLASLt CUDA_R_8F_E4M3 */
};

int karch_has(karch_feature f, int cc)
{
    switch (f) {
    case KARCH_BASE: return cc >= 80;
    case KARCH_FP8MMA: return cc >= 89;
    case KARCH_SM90: return cc >= 90;
    case KARCH_WGMMA: return cc == 90;
    case KARCH_FP8GEMM: return cc >= 89;
    default: return 0;
    }
}

const char *karch_feature_name(karch_feature f)
{
    switch (f) {
    case KARCH_BASE: return "sm_80 (cp.async, mma.sync)";
    case KARCH_FP8MMA: return "FP8 mma.sync (sm_89 or later)";
    case KARCH_SM90: return "cp.async.bulk and mbarrier try_wait (sm_90 or later)";
    case KARCH_WGMMA: return "wgmma (sm_90a: compute capability 9.0 only)";
    case KARCH_FP8GEMM: return "cuBLASLt FP8 matmul (compute capability 8.9 or later)";
    default: return "?";
    }
}

/* verify and ring run the attention's versions. */
static const char *table_kernel(const char *kernel)
{
    return !strcmp(kernel, "verify") || !strcmp(kernel, "ring") ? "attention" : kernel;
}

karch_feature karch_need(const char *kernel, int version, const char *dtype)
{
    const char *k = table_kernel(kernel);
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        const karch_rule *r = &rules[i];
        if (strcmp(r->kernel, k) || version < r->vmin || version > r->vmax) continue;
        if (r->dtype && (!dtype || strcmp(r->dtype, dtype))) continue;
        return r->need;
    }
    return KARCH_BASE;
}

int karch_check(const char *kernel, int version, const char *dtype, size_t smem_need, const karch_dev *dev,
                char *why, size_t cap)
{
    const karch_feature f = karch_need(kernel, version, dtype);
    const char *dt = dtype && karch_need(kernel, version, NULL) != f ? dtype : NULL;
    if (!karch_has(f, dev->cc)) {
        snprintf(why, cap, "%s version %d%s%s needs %s; this GPU is sm_%d", kernel, version, dt ? " " : "",
                 dt ? dt : "", karch_feature_name(f), dev->cc);
        return 0;
    }
    if (smem_need > dev->smem_optin) {
        snprintf(why, cap, "%s version %d%s%s needs %zu bytes of shared memory per block; this GPU (sm_%d) allows %zu",
                 kernel, version, dtype ? " " : "", dtype ? dtype : "", smem_need, dev->cc, dev->smem_optin);
        return 0;
    }
    if (cap) why[0] = 0;
    return 1;
}

int karch_pick(const char *kernel, const int *cand, const size_t *smem_need, int n, const char *dtype,
               const karch_dev *dev, char *why, size_t cap)
{
    if (cap) snprintf(why, cap, "%s: no candidate version", kernel);
    for (int i = 0; i < n; i++)
        if (karch_check(kernel, cand[i], dtype, smem_need ? smem_need[i] : 0, dev, why, cap)) return cand[i];
    return -1;
}

int karch_parse(const char *s, int *cc, char *why, size_t cap)
{
    if (!strcmp(s, "generic")) {
        *cc = 80;
        return 0;
    }
    int v = 0, nd = 0;
    if (!strncmp(s, "sm_", 3))
        for (const char *p = s + 3; *p; p++, nd++) {
            if (!isdigit((unsigned char)*p) || nd == 3) { nd = 0; break; }
            v = v * 10 + (*p - '0');
        }
    if (nd < 2 || v < 80) {
        snprintf(why, cap, "'%s' is not an architecture: sm_XY with XY >= 80 (sm_80, sm_86, sm_89, sm_90, sm_100, sm_120), or generic", s);
        return -1;
    }
    *cc = v;
    return 0;
}

int karch_force_ok(int forced, int real, char *why, size_t cap)
{
    for (int f = 0; f < KARCH_NFEAT; f++)
        if (karch_has((karch_feature)f, forced) && !karch_has((karch_feature)f, real)) {
            snprintf(why, cap, "sm_%d has %s, which this GPU (sm_%d) lacks: a forced architecture may only take features away",
                     forced, karch_feature_name((karch_feature)f), real);
            return 0;
        }
    if (cap) why[0] = 0;
    return 1;
}

void karch_slug(const char *device, char *out, size_t cap)
{
    size_t n = 0;
    int dash = 0;
    if (!cap) return;
    for (const char *p = device; *p && n + 1 < cap; p++) {
        const unsigned char c = (unsigned char)*p;
        if (isalnum(c)) {
            if (dash && n) {
                if (n + 2 >= cap) break;
                out[n++] = '-';
            }
            dash = 0;
            out[n++] = (char)tolower(c);
        } else dash = 1;
    }
    out[n] = 0;
}
