/* attn32_wgmma.cu: attention version 32 (kernels/lib/attn32.cuh: version 23 persistent, with
 * FlashMLA's balanced split schedule and the split queries merged in the kernel), built for
 * sm_90a; kernels/versions/attention.cu dispatches it. Shapes it does not take (BF16 rows, an odd
 * number of 64-head groups) run version 31, the library's choice there (kernels/lib/attention.cu). */
#include <cstdlib>
#include <cstring>

#include "kernels/bench.cuh"
#include "kernels/lib/attn32.cuh"

void attn32_bench_launch(attn_args a, attn_scratch &sc, float *out, int sms, cudaStream_t st)
{
    if (a.format != KREF_ROW_FP8 || (a.heads / 64) % 2) {
        dhk__attention_launch_version(a, sc, out, sms, st, 31);
        return;
    }
    if (a.k < 1) {
        fprintf(stderr, "dhbench: attention: k = %d, need at least one row\n", a.k);
        exit(1);
    }
    /* One wave of clusters on sms SMs (a mergers waits for writers of other clusters); splits=N
     * asks for at most N partitions (the tests: several pieces per cluster, a query over three). */
    int clusters = std::min(a32_max_clusters(), sms / 2);
    if (a.splits > 0) clusters = std::min(clusters, a.splits);
    /* The scratch: 2 x clusters slots of 64 x 512 fp16 and 64 log-sum-exps. */
    const size_t slot_floats = (size_t)A32_SLOT_CHUNKS * 16 / 4;
    clusters = (int)std::min<size_t>((size_t)clusters, std::min(sc.cap_o / (2 * slot_floats), sc.cap_lse / 128));
    if (clusters < 1) {
        fprintf(stderr, "dhbench: attention v32: scratch too small for one cluster\n");
        exit(1);
    }
    a.part_o = sc.part_o;
    a.part_lse = sc.part_lse;
    a.merge_cnt = sc.merge_cnt;   /* nq x heads / 64 counts at zero: the mergers leave them so */
    /* A32_VARIANT=0, 1, 2: the instance's setmaxnreg split (attn32.cuh, a32_regs); unset: 1. */
    static int var = -1;
    if (var < 0) {
        const char *v = getenv("A32_VARIANT");
        if (v && strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "2")) {
            fprintf(stderr, "dhbench: A32_VARIANT=%s: need 0, 1 or 2\n", v);
            exit(1);
        }
        var = v ? atoi(v) : 1;
    }
    a32_launch(a, out, st, clusters, var);
}
