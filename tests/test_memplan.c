/* test_memplan.c: the memory plan (sim/memplan.c, the instance loader in sim/sim.c)
 * against sums by hand from the models' published dimensions.
 *
 * The expected weights per GPU are computed here from the config.json fields the model
 * files quote (hidden size, heads, LoRA ranks, head dims, vocabulary, expert width,
 * IndexShare's freq and offset, DeepSeek-V4's compress_ratios), with the projections'
 * shapes written out, the selecting layers counted by the published rule, and the
 * parallelism applied part by part; the model files give parameter counts per kind, so
 * a wrong count there, a wrong layer list, a part split the wrong way or a framework
 * term charged twice fails. The ledger is checked on a short run: its weights and
 * workspace must be the plan's. The straggler form's E[max of n normals] is checked
 * against the closed forms for n = 2, 3 (1 / sqrt(pi), 3 / (2 sqrt(pi))). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dh_err.h"
#include "sim/cost.h"
#include "sim/sim.h"

static const double Q = 1 + 4.0 / (128 * 128); /* block FP8 with an fp32 scale per 128 x 128 */

static void close_to(double got, double want, const char *what)
{
    if (!(fabs(got - want) <= 1e-9 * fabs(want) + 1e-6)) fail_msg("%s: %.3f, by hand %.3f", what, got, want);
}

static void load(const char *inst, char **sets, int n, sim_config *sc)
{
    if (sim_config_load(inst, sets, n, sc) < 0) fail_msg("%s", dh_errmsg());
}

/* GLM-5.x, by hand from config.json. */
typedef struct {
    double attn, indexer, mlp, shared, router, expert_bytes, embed;
} glm_dims;

static glm_dims glm(void)
{
    const double H = 6144, heads = 64, ql = 2048, kvl = 512, nope = 192, rope = 64, v = 256;
    glm_dims d;
    d.attn = H * ql + ql * heads * (nope + rope) + H * (kvl + rope) + kvl * heads * (nope + v) + heads * v * H;
    d.indexer = ql * 32 * 128 + H * 128 + 2 * 128 + H * 32;
    d.mlp = 3 * H * 12288;
    d.shared = 3 * H * 2048;
    d.router = 256 * H + 256;
    /* gate and up 2048 x 6144, down 6144 x 2048: one byte a weight, 4 per 128 x 128 block */
    d.expert_bytes = 3 * H * 2048 + 4 * 3 * (2048 / 128) * (H / 128);
    d.embed = 154880 * H;
    return d;
}

static void check_glm(const sim_config *sc, uint32_t selecting, double gpus, double dense_tp, double lm_tp)
{
    glm_dims d = glm();
    const memplan *mp = &sc->mem;
    close_to(mp->part[MP_ATTN], 78 * d.attn * Q, "attention");
    close_to(mp->part[MP_INDEXER], selecting * d.indexer * Q, "indexer");
    close_to(mp->part[MP_DENSE_MLP], 3 * d.mlp * Q / dense_tp, "dense MLP");
    close_to(mp->part[MP_SHARED_EXPERT], 75 * d.shared * Q, "shared expert");
    close_to(mp->part[MP_ROUTER], 75 * d.router * 2, "router");
    close_to(mp->part[MP_ROUTED_EXPERTS], 75 * (256 / gpus) * d.expert_bytes, "routed experts");
    close_to(mp->part[MP_EMBED], d.embed * 2, "embedding");
    close_to(mp->part[MP_LM_HEAD], d.embed * 2 / lm_tp, "LM head");
    double sum = 78 * d.attn * Q + selecting * d.indexer * Q + 3 * d.mlp * Q / dense_tp + 75 * d.shared * Q +
                 75 * d.router * 2 + 75 * (256 / gpus) * d.expert_bytes + d.embed * 2 + d.embed * 2 / lm_tp;
    close_to(mp->computed, sum, "weights");
    close_to(sc->weights_per_gpu, sum, "weights in use");
}

/* IndexShare: layer l selects when max(l - offset + 1, 0) % freq == 0. */
static uint32_t selecting_layers(uint32_t freq, uint32_t offset)
{
    uint32_t n = 0;
    for (int l = 0; l < 78; l++) n += ((l - (int)offset + 1 > 0 ? l - (int)offset + 1 : 0) % (int)freq) == 0;
    return n;
}

static void test_glm53_weights(void **state)
{
    (void)state;
    sim_config sc;
    load("models/instances/glm53-h200x8.ini", NULL, 0, &sc);
    assert_int_equal(sc.model.n_groups, selecting_layers(4, 3));
    assert_int_equal(selecting_layers(4, 3), 21);
    check_glm(&sc, 21, 8, 8, 8);
    /* The framework, as SGLang sizes the pool: 0.85 of what is free before the model load
     * (HBM less the context) less the weights; the rest of it is outside the static share. */
    const memplan *mp = &sc.mem;
    double hbm = sc.hw.hbm_bytes;
    close_to(mp->part[MP_ATTN_ABSORB], 0, "no absorbed copies");
    close_to(mp->kv_pool, 0.85 * (hbm - 1e9) - sc.weights_per_gpu, "KV pool");
    close_to(mp->workspace, 0.15 * (hbm - 1e9) + 1e9, "framework");
    close_to(mp->activations, 0.15 * (hbm - 1e9) - 3e9 - 3e9, "activations");
    sim_config_release(&sc);
    /* Replicated dense MLPs and LM head (--moe-dense-tp-size 1, --enable-dp-lm-head). */
    char *sets[] = { "instance.dense_mlp_tp=1", "instance.lm_head_tp=1" };
    load("models/instances/glm53-h200x8.ini", sets, 2, &sc);
    check_glm(&sc, 21, 8, 1, 1);
    sim_config_release(&sc);
}

static void test_glm51_weights_and_bf16_rows(void **state)
{
    (void)state;
    sim_config sc;
    char *sets[] = { "instance.model=models/glm51.ini", "instance.kv_dtype=bf16" };
    load("models/instances/glm53-h200x8.ini", sets, 2, &sc);
    assert_int_equal(sc.model.n_groups, 78);
    check_glm(&sc, 78, 8, 8, 8);
    /* BF16 rows: (512 + 64) x 2 bytes on every layer. */
    for (uint32_t g = 0; g < sc.model.n_groups; g++) close_to(sc.model.group[g].kv_bytes_per_row, 576 * 2, "BF16 row");
    sim_config_release(&sc);
}

/* The SGLang instances: the absorbed w_kc, w_vc in BF16 beside the checkpoint's weights,
 * split as attention is; the pool from the free memory SGLang logged before the model load
 * (sgl-project/sglang#6017: 137.46 GiB on a DP-attention node; SemiAnalysisAI/InferenceX#2128:
 * 12.25 + 125.65 GiB on TP8), 0.85 or 0.8 of it less the weights. */
static void test_sglang_instances(void **state)
{
    (void)state;
    const double GiB = 1073741824.0, absorb = 78 * 64 * (192 + 256) * 512.0 * 2;
    struct { const char *inst; double attn_tp, frac, pre; uint32_t selecting; } t[] = {
        { "models/instances/glm53-h200x8-sglang.ini", 1, 0.85, 137.46 * GiB, 21 },
        { "models/instances/glm53-h200x8-sglang-tp8.ini", 8, 0.8, (12.25 + 125.65) * GiB, 21 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        sim_config sc;
        load(t[i].inst, NULL, 0, &sc);
        const memplan *mp = &sc.mem;
        close_to(mp->part[MP_ATTN_ABSORB], absorb / t[i].attn_tp, "absorbed w_kc, w_vc");
        double other = mp->computed - mp->part[MP_ATTN_ABSORB];
        close_to(sc.weights_per_gpu, other + absorb / t[i].attn_tp, "weights with the copies");
        /* the instance's context_bytes is the log's, to its 0.005 GiB */
        if (!(fabs(mp->context - (sc.hw.hbm_bytes - t[i].pre)) <= 0.005 * GiB))
            fail_msg("%s: context %.0f B, the log's %.0f", t[i].inst, mp->context, sc.hw.hbm_bytes - t[i].pre);
        double pool = t[i].frac * (sc.hw.hbm_bytes - mp->context) - sc.weights_per_gpu;
        close_to(mp->kv_pool, pool, "KV pool");
        if (!(fabs(mp->kv_pool - (t[i].frac * t[i].pre - sc.weights_per_gpu)) <= t[i].frac * 0.005 * GiB))
            fail_msg("%s: pool %.0f B, from the log's free memory %.0f", t[i].inst, mp->kv_pool,
                     t[i].frac * t[i].pre - sc.weights_per_gpu);
        /* the decode reads the BF16 copies in place of the checkpoint's FP8 kv_b_proj (its
         * absorb params at the model's quant_bytes_per_param, split as attention is) */
        const double kvb = 78 * 64 * (192 + 256) * 512.0 * sc.model.quant_bytes_per_param / t[i].attn_tp;
        close_to(mp->read_per_step, other - kvb + absorb / t[i].attn_tp - mp->part[MP_ROUTED_EXPERTS] - mp->part[MP_EMBED],
                 "read per step");
        sim_config_release(&sc);
    }
}

/* The DSA pool's bytes per token against SGLang's own log (sgl-project/sglang#11309,
 * DeepSeek-V3.2-Exp on 8 x B200, FP8 KV, 61 layers, page size 64): "KV Cache is allocated.
 * #tokens: 975424, KV size: 43.67 GB" with the indexer keys, "#tokens: 1462784, KV size:
 * 54.52 GB" without them (the log before that pull request). SGLang's pool holds #tokens +
 * one page (the padded slot) of 61 rows and, in the first, 61 indexer keys; GLM's kinds
 * have the same layout (kv_lora_rank 512 + rope 64, index_head_dim 128). The tolerance is
 * the log's rounding, 0.005 GiB. */
static void test_dsa_pool_bytes_per_token(void **state)
{
    (void)state;
    const double GiB = 1073741824.0;
    sim_config sc;
    char *sets[] = { "instance.model=models/glm51.ini" };
    load("models/instances/glm53-h200x8.ini", sets, 1, &sc);
    const double row = sc.model.group[0].kv_bytes_per_row, key = sc.model.group[0].indexer_bytes_per_row;
    struct { double tokens, gib, per_layer; } t[] = { { 975424, 43.67, row + key }, { 1462784, 54.52, row } };
    for (size_t i = 0; i < 2; i++) {
        double bytes = (t[i].tokens + 64) * 61 * t[i].per_layer;
        if (!(fabs(bytes - t[i].gib * GiB) <= 0.005 * GiB))
            fail_msg("log %zu: %.0f B by the model's rows, the log's %.2f GiB = %.0f B", i, bytes, t[i].gib, t[i].gib * GiB);
    }
    sim_config_release(&sc);
}

static void test_dsv4flash_weights(void **state)
{
    (void)state;
    /* compress_ratios of the 43 layers (config.json, the MTP entry dropped). */
    int ratio[43];
    ratio[0] = ratio[1] = 0;
    for (int l = 2; l < 43; l++) ratio[l] = (l % 2 == 0) ? 4 : 128;
    const double H = 4096, ql = 1024, heads = 64, hd = 512, og = 8, ol = 1024;
    const double attn = H * ql + ql * heads * hd + H * hd + (heads * hd / og) * (og * ol) + og * ol * H;
    double a = 0, idx = 0;
    uint32_t c4 = 0, c128 = 0;
    for (int l = 0; l < 43; l++) {
        a += attn;
        if (ratio[l] == 4) { a += 2 * H * 2 * hd; idx += ql * 64 * 128 + H * 64 + 2 * H * 2 * 128; c4++; }
        if (ratio[l] == 128) { a += 2 * H * hd; c128++; }
    }
    const double expert = 3 * H * 2048 * (0.5 + 1.0 / 32), shared = 3 * H * 2048, router = 256 * H + 256, embed = 129280 * H;
    sim_config sc;
    load("models/instances/dsv41flash-h200x4.ini", NULL, 0, &sc);
    assert_int_equal(sc.model.n_groups, c4);
    assert_int_equal(sc.model.dense_layers, c128);
    assert_int_equal(sc.model.n_layers, 43);
    const memplan *mp = &sc.mem;
    close_to(mp->part[MP_ATTN], a * Q, "attention");
    close_to(mp->part[MP_INDEXER], idx * Q, "indexer");
    close_to(mp->part[MP_SHARED_EXPERT], 43 * shared * Q, "shared expert");
    close_to(mp->part[MP_ROUTER], 43 * router * 2, "router");
    close_to(mp->part[MP_ROUTED_EXPERTS], 43 * (256 / 4.0) * expert, "routed experts");
    close_to(mp->computed, a * Q + idx * Q + 43 * shared * Q + 43 * router * 2 + 43 * 64 * expert + embed * 2 + embed * 2 / 4,
             "weights");
    /* The C128 layers' rows and the windows are the resident KV besides the C4 groups. */
    close_to(sc.model.dense_bytes_per_token, c128 * 584 / 128.0, "dense bytes per token");
    close_to(sc.model.window_bytes_per_token_row, 43 * 584, "window bytes per row");
    sim_config_release(&sc);
}

/* The ledger of a run holds the plan: its weights and its framework reservation. */
static void test_ledger_holds_the_plan(void **state)
{
    (void)state;
    sim_config sc;
    char *sets[] = { "workload.steps=1", "workload.concurrency=8", "workload.prompt_len=4096", "workload.output_len=16",
                     "workload.output_len_max=16" };
    load("models/instances/glm53-h200x8.ini", sets, 5, &sc);
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) fail_msg("%s", dh_errmsg());
    sim_result r;
    if (sim_run(&sc, POL_RESIDENT, src, &r) < 0) fail_msg("%s", dh_errmsg());
    glm_dims d = glm();
    double w = 78 * d.attn * Q + 21 * d.indexer * Q + 3 * d.mlp * Q / 8 + 75 * d.shared * Q + 75 * d.router * 2 +
               75 * 32 * d.expert_bytes + d.embed * 2 + d.embed * 2 / 8;
    close_to(r.hbm_peak[MEM_WEIGHTS], w, "ledger weights");
    close_to(r.hbm_peak[MEM_WORKSPACE], 0.15 * (sc.hw.hbm_bytes - 1e9) + 1e9, "ledger framework");
    sim_result_release(&r);
    sel_source_free(src);
    sim_config_release(&sc);
}

static void expect_error(char **sets, int n, const char *needle)
{
    sim_config sc;
    if (sim_config_load("models/instances/glm53-h200x8.ini", sets, n, &sc) == 0) fail_msg("no error for %s", needle);
    if (!strstr(dh_errmsg(), needle)) fail_msg("error '%s' lacks '%s'", dh_errmsg(), needle);
    sim_config_release(&sc);
}

static void test_bad_memory_keys(void **state)
{
    (void)state;
    char *both[] = { "instance.workspace_bytes=8e9" };
    expect_error(both, 1, "not both");
    char *big[] = { "instance.cuda_graph_bytes=30e9" };
    expect_error(big, 1, "exceed");
    char *dtype[] = { "instance.kv_dtype=fp16" };
    expect_error(dtype, 1, "expected fp8 or bf16");
    char *ctx[] = { "instance.context_bytes=200e9" };
    expect_error(ctx, 1, "is not below");
    char *tp[] = { "instance.lm_head_tp=16" };
    expect_error(tp, 1, "may not exceed gpus");
}

static void test_host_pool(void **state)
{
    (void)state;
    sim_config sc;
    char *sets[] = { "policy.host_to_device_ratio=8" };
    load("models/instances/glm53-h200x8.ini", sets, 1, &sc);
    close_to(sc.mem.host_pool, 8 * sc.mem.kv_pool, "host pool");
    sim_config_release(&sc);
}

/* A host tier admits as many requests as their whole KV fits the host pool: by hand,
 * floor(host pool / (final tokens x 78 rows of 656 B)), when the device holds more. */
static void test_host_pool_binds(void **state)
{
    (void)state;
    sim_config sc;
    char *sets[] = { "policy.host_to_device_ratio=2", "workload.steps=2", "workload.prompt_len=100000",
                     "workload.output_len=64", "workload.output_len_max=64" };
    load("models/instances/glm53-h200x8.ini", sets, 5, &sc);
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) fail_msg("%s", dh_errmsg());
    sim_result r;
    if (sim_run(&sc, POL_HISPARSE, src, &r) < 0) fail_msg("%s", dh_errmsg());
    double per_req = (100000.0 + 64) * 78 * 656;
    double want = floor(sc.mem.host_pool / per_req);
    assert_true(want >= 1 && want < 16);   /* the host pool binds below the 16 offered */
    if (r.admitted != (uint32_t)want) fail_msg("admitted %u, by hand %.0f", r.admitted, want);
    sim_result_release(&r);
    sel_source_free(src);
    sim_config_release(&sc);
}

static void test_straggler_forms(void **state)
{
    (void)state;
    close_to(cost_normal_max(2), 1 / sqrt(M_PI), "E max of 2");
    close_to(cost_normal_max(3), 3 / (2 * sqrt(M_PI)), "E max of 3");
    assert_true(cost_normal_max(1) == 0);
    assert_true(cost_straggler_factor(0, 8) == 1);
    close_to(cost_straggler_factor(0.1, 2), 1 + 0.1 / sqrt(M_PI), "factor");
    close_to(cost_collective_time(1e-5, 100, 8e9, 8), 1e-5 + 8e9 * 7 / 8 / 100e9, "collective");
    assert_true(cost_collective_time(1e-5, 100, 8e9, 1) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glm53_weights),
        cmocka_unit_test(test_glm51_weights_and_bf16_rows),
        cmocka_unit_test(test_sglang_instances),
        cmocka_unit_test(test_dsa_pool_bytes_per_token),
        cmocka_unit_test(test_dsv4flash_weights),
        cmocka_unit_test(test_ledger_holds_the_plan),
        cmocka_unit_test(test_bad_memory_keys),
        cmocka_unit_test(test_host_pool),
        cmocka_unit_test(test_host_pool_binds),
        cmocka_unit_test(test_straggler_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
