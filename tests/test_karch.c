/* test_karch.c: the kernels' architecture dispatch (kernels/karch.c) without a GPU: for every
 * compute capability from Ampere to Blackwell, which versions of each kernel run and which
 * are skipped with what line, against an expectation written here from the hardware's
 * documented instruction sets (PTX ISA target notes; the CUDA programming guide's
 * capability table), not from the table itself; the shared-memory refusals; the replay's
 * fallback choice; the forced architecture's parse and its refusal to add features; the
 * device slug of the calibration's profile name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "kernels/karch.h"

/* The GPUs of the issue (A100, A10/RTX 30, L40S/RTX 40, H100/H200, B200, GB300, RTX 50 / RTX PRO
 * 6000) and their opt-in shared memory per block (programming guide, "Technical
 * Specifications per Compute Capability"). */
static const struct { int cc; size_t smem; } gpus[] = {
    {80, 166912}, {86, 101376}, {87, 166912}, {89, 101376}, {90, 232448}, {100, 232448}, {103, 232448},
    {120, 101376}, {121, 101376},
};

/* The expectation: what each version's instructions need, per capability. */
static int expect_runs(const char *kernel, int v, const char *dtype, int cc)
{
    const int wgmma = cc == 90;            /* sm_90a code runs on 9.0 alone */
    const int bulk = cc >= 90;             /* cp.async.bulk: sm_90 and later */
    const int fp8mma = cc >= 89;           /* mma.sync e4m3: sm_89 and later */
    if (!strcmp(kernel, "attention") || !strcmp(kernel, "verify") || !strcmp(kernel, "ring")) return v <= 5 || wgmma;
    if (!strcmp(kernel, "indexer")) return v == 1 || (v <= 4 && fp8mma) || (v == 5 && wgmma);
    if (!strcmp(kernel, "fetch") || !strcmp(kernel, "gather")) return v != 4 || bulk;
    if (!strcmp(kernel, "gemm")) return strcmp(dtype, "fp8") || fp8mma;
    return 1;   /* residency, topk */
}

static void test_versions_by_capability(void **state)
{
    (void)state;
    static const struct { const char *k; int vmax; } ks[] = {
        {"attention", 13}, {"verify", 13}, {"ring", 13}, {"indexer", 5}, {"fetch", 10},
        {"gather", 4}, {"topk", 6}, {"residency", 2}, {"gemm", 1},
    };
    const char *dtypes[] = {"bf16", "fp8"};
    int ran = 0, skipped = 0;
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        const karch_dev dev = {gpus[g].cc, gpus[g].smem};
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
            for (int v = 1; v <= ks[i].vmax; v++)
                for (int d = 0; d < 2; d++) {
                    char why[256];
                    const int runs = karch_check(ks[i].k, v, dtypes[d], 0, &dev, why, sizeof why);
                    if (runs != expect_runs(ks[i].k, v, dtypes[d], dev.cc))
                        fail_msg("%s version %d %s on sm_%d: karch says %d (%s)", ks[i].k, v, dtypes[d], dev.cc, runs, why);
                    if (runs) { assert_string_equal(why, ""); ran++; continue; }
                    skipped++;
                    /* One line naming the kernel, the version, what is missing and the GPU. */
                    char head[64], gpu[32];
                    snprintf(head, sizeof head, "%s version %d", ks[i].k, v);
                    snprintf(gpu, sizeof gpu, "this GPU is sm_%d", dev.cc);
                    assert_non_null(strstr(why, head));
                    assert_non_null(strstr(why, gpu));
                    assert_non_null(strstr(why, " needs "));
                    assert_null(strchr(why, '\n'));
                }
    }
    assert_true(ran > 0 && skipped > 0);
}

static void test_skip_lines(void **state)
{
    (void)state;
    char why[256];
    const karch_dev a100 = {80, 166912}, b200 = {100, 232448};
    assert_int_equal(karch_check("attention", 8, "fp8", 0, &a100, why, sizeof why), 0);
    assert_string_equal(why, "attention version 8 needs wgmma (sm_90a: compute capability 9.0 only); this GPU is sm_80");
    /* sm_90a code does not run on Blackwell, although Blackwell has every sm_90 feature. */
    assert_int_equal(karch_check("indexer", 5, NULL, 0, &b200, why, sizeof why), 0);
    assert_non_null(strstr(why, "wgmma"));
    assert_int_equal(karch_check("fetch", 4, NULL, 0, &b200, why, sizeof why), 1);
    assert_int_equal(karch_check("gemm", 1, "fp8", 0, &a100, why, sizeof why), 0);
    assert_string_equal(why, "gemm version 1 fp8 needs cuBLASLt FP8 matmul (compute capability 8.9 or later); this GPU is sm_80");
    assert_int_equal(karch_check("gemm", 1, "bf16", 0, &a100, why, sizeof why), 1);
}

static void test_shared_memory(void **state)
{
    (void)state;
    char why[256];
    const karch_dev rtx = {89, 101376};
    /* Runs by its instructions, refused by its shared memory: the line says both numbers. */
    assert_int_equal(karch_check("topk", 6, NULL, 180224, &rtx, why, sizeof why), 0);
    assert_string_equal(why, "topk version 6 needs 180224 bytes of shared memory per block; this GPU (sm_89) allows 101376");
    assert_int_equal(karch_check("topk", 6, NULL, 101376, &rtx, why, sizeof why), 1);
    assert_int_equal(karch_check("topk", 1, NULL, 0, &rtx, why, sizeof why), 1);
}

static void test_pick_fallback(void **state)
{
    (void)state;
    char why[256];
    /* The replay's attention: the library's 8, then 5, 4, 3, 2, 1 (the needs are made up here:
     * the choice follows them, not the real kernels' sizes). */
    const int cand[] = {8, 5, 4, 3, 2, 1};
    const size_t need[] = {200000, 150000, 150000, 218880, 148224, 0};
    const karch_dev h200 = {90, 232448}, a100 = {80, 166912}, rtx = {120, 101376}, tiny = {120, 1000};
    assert_int_equal(karch_pick("attention", cand, need, 6, "fp8", &h200, why, sizeof why), 8);
    assert_int_equal(karch_pick("attention", cand, need, 6, "fp8", &a100, why, sizeof why), 5);
    assert_int_equal(karch_pick("attention", cand, need, 6, "fp8", &rtx, why, sizeof why), 1);
    const size_t all_big[] = {2000, 2000, 2000, 2000, 2000, 6000};
    assert_int_equal(karch_pick("attention", cand, all_big, 6, "fp8", &tiny, why, sizeof why), -1);
    assert_non_null(strstr(why, "attention version 1"));
    /* The indexer: 5 on Hopper, 4 where FP8 mma exists, else 1. */
    const int ix[] = {5, 4, 1};
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        const karch_dev dev = {gpus[g].cc, gpus[g].smem};
        const int want = dev.cc == 90 ? 5 : dev.cc >= 89 ? 4 : 1;
        assert_int_equal(karch_pick("indexer", ix, NULL, 3, NULL, &dev, why, sizeof why), want);
    }
}

static void test_parse_and_force(void **state)
{
    (void)state;
    char why[256];
    int cc = 0;
    assert_int_equal(karch_parse("sm_80", &cc, why, sizeof why), 0);
    assert_int_equal(cc, 80);
    assert_int_equal(karch_parse("sm_120", &cc, why, sizeof why), 0);
    assert_int_equal(cc, 120);
    assert_int_equal(karch_parse("generic", &cc, why, sizeof why), 0);
    assert_int_equal(cc, 80);
    const char *bad[] = {"sm_75", "sm_9", "sm_9x", "90", "sm_1000", "", "sm_"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(karch_parse(bad[i], &cc, why, sizeof why), -1);
        assert_non_null(strstr(why, "is not an architecture"));
    }
    /* On an H200 every older or newer non-"a" path may be forced; on an A100 nothing above. */
    assert_int_equal(karch_force_ok(80, 90, why, sizeof why), 1);
    assert_int_equal(karch_force_ok(89, 90, why, sizeof why), 1);
    assert_int_equal(karch_force_ok(100, 90, why, sizeof why), 1);
    assert_int_equal(karch_force_ok(90, 90, why, sizeof why), 1);
    assert_int_equal(karch_force_ok(90, 80, why, sizeof why), 0);
    assert_non_null(strstr(why, "lacks"));
    assert_int_equal(karch_force_ok(89, 86, why, sizeof why), 0);
    assert_int_equal(karch_force_ok(90, 100, why, sizeof why), 0);   /* wgmma: not on Blackwell */
}

static void test_slug(void **state)
{
    (void)state;
    char s[64];
    karch_slug("NVIDIA H200", s, sizeof s);
    assert_string_equal(s, "nvidia-h200");
    karch_slug("NVIDIA A100-SXM4-80GB", s, sizeof s);
    assert_string_equal(s, "nvidia-a100-sxm4-80gb");
    karch_slug("  NVIDIA RTX PRO 6000 Blackwell Server Edition ", s, sizeof s);
    assert_string_equal(s, "nvidia-rtx-pro-6000-blackwell-server-edition");
    karch_slug("NVIDIA GeForce RTX 4090", s, 12);
    assert_string_equal(s, "nvidia-gefo");
    karch_slug("a/b", s, 3);   /* no room for the dash and the next character: stops */
    assert_string_equal(s, "a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_by_capability),
        cmocka_unit_test(test_skip_lines),
        cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_pick_fallback),
        cmocka_unit_test(test_parse_and_force),
        cmocka_unit_test(test_slug),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
