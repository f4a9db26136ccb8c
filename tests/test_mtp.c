/* test_mtp.c: MTP speculation (sim/spec.h kind = mtp, sim/specrun.c): the shipped draft's
 * settings, its draft cost against the target layer it copies, and SGLang's adaptive steps
 * (models/spec/sglang-adaptive.ini) traced by hand through AdaptiveStepSlot's rules.
 *
 * Adaptive trace, slot bs.8 (candidates 0, 1, 3; the draft's 3 steps to start, EMA 2):
 * every batch accepts nothing, so the EMA after b batches is 2 x 0.8^b. Batches 1..10 are the
 * warm-up, the first decision is at batch 15 (update_interval 5): EMA 2 x 0.8^15 = 0.070 is
 * below 1 - 0.5 and below 0.5, so the steps fall from 3 past 1 to 0 in one decision. At 0 the
 * EMA no longer moves; the decision at batch 20 probes the next candidate, 1. A planted fault
 * (a trace fed accepted drafts that keep the EMA high) must keep 3.
 *
 * DeepSeek-V4-Flash's MTP draft (models/drafts/dsv41flash-mtp.ini, issue 18): MTP-1 on the
 * window-only layer kind its config gives the MTP layer (compress ratio 0); its per-GPU
 * weights against a hand sum from models/dsv41flash.ini's kinds; its KV the window's rows;
 * one draft forward the swa layer's cost over the window rows, which a context-long read (the
 * planted fault) would exceed; `--spec mtp` resolving the draft from the model's name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/model.h"
#include "sim/spec.h"
#include "sim/specrun.h"
#include "sim/step.h"

typedef struct {
    model_cfg model;
    hw_profile hw;
    specrun_cfg sp;
} fixture;

static int setup(void **state)
{
    static fixture f;
    cfg *mc, *hc, *ic;
    memset(&f, 0, sizeof f);
    if (cfg_load("models/glm53.ini", &mc) < 0 || model_load(mc, &f.model) < 0 ||
        cfg_load("models/hw/h200.ini", &hc) < 0 || hw_load(hc, &f.hw) < 0 ||
        cfg_load_string("inst", "[spec]\nmode = mtp\nadaptive = models/spec/sglang-adaptive.ini\n", &ic) < 0 ||
        specrun_config_load(ic, &f.model, &f.sp) < 0) {
        fprintf(stderr, "%s\n", dh_errmsg());
        return -1;
    }
    cfg_free(mc);
    cfg_free(hc);
    cfg_free(ic);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    specrun_config_release(&f->sp);
    model_release(&f->model);
    return 0;
}

static void test_shipped_draft(void **state)
{
    fixture *f = *state;
    const spec_draft *d = f->sp.draft;
    assert_int_equal(d->kind, SPEC_MTP);
    /* SGLang's recipe: 3 steps, topk 1, 4 draft tokens; the chain drafts num_steps. */
    assert_int_equal(d->gamma, 3);
    assert_int_equal(d->topk, 1);
    assert_int_equal(d->draft_tokens, 4);
    assert_string_equal(f->model.layer[f->sp.mtp_layer].name, "moe_own");
    /* Acceptance falls with context, bucket by bucket, at every position. */
    for (uint32_t b = 1; b < d->n_buckets; b++)
        for (uint32_t i = 0; i < d->gamma; i++) assert_true(d->bucket[b].marginal[i] < d->bucket[b - 1].marginal[i]);
    /* The MTP KV is kept for the whole context: no ring. */
    assert_true(spec_ring_rows(d, 100000, 1) == 100000);
}

/* One draft forward is the target layer of its kind at the draft's tokens, plus the extra
 * bytes and FLOPs; steps forwards cost steps times one. */
static void test_draft_cost_is_the_layer(void **state)
{
    fixture *f = *state;
    const spec_draft *d = f->sp.draft;
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = 8, .moe_ep = 8,
                   .compute_sms = f->hw.sms - f->hw.fetch_sms, .dense_bytes_per_layer = 56e6, .a2a_ranks_per_token = 1};
    specrun_slot sl[16];
    memset(sl, 0, sizeof sl);
    for (int i = 0; i < 16; i++) sl[i].ctx = 100000;
    enum { G = 64 };
    double z[9][G];
    memset(z, 0, sizeof z);
    const uint32_t l = (uint32_t)f->sp.mtp_layer;
    const int32_t g = f->model.layer_group[l];
    z[0][g] = 16 * 2048.0;   /* selected rows: every request's k */
    z[1][g] = 16 * 100000.0; /* indexed rows */
    step_mb m = {.n_req = 16, .tokens = 16, .sel = z[0], .idx_rows = z[1], .miss = z[2], .pages = z[3], .written = z[4]};
    const double layer = step_indexer_s(&cx, &m, l) + step_compute_s(&cx, &m, l);
    const double extra = cost_roofline_time(&f->hw.cost.roof, d->pass_bytes, d->flops_per_token * 16, d->fp8, cx.compute_sms);
    const double one = specrun_mtp_draft_s(&f->sp, &cx, 16, sl, 1);
    assert_true(fabs(one - (layer + extra)) <= 1e-12 * one);
    assert_true(fabs(specrun_mtp_draft_s(&f->sp, &cx, 16, sl, 3) - 3 * one) <= 1e-12 * one);
    assert_true(specrun_mtp_draft_s(&f->sp, &cx, 16, sl, 0) == 0);
}

static void test_v4_flash_draft(void **state)
{
    (void)state;
    model_cfg m;
    hw_profile hw;
    specrun_cfg sp;
    cfg *mc, *hc, *ic;
    memset(&m, 0, sizeof m);
    memset(&hw, 0, sizeof hw);
    memset(&sp, 0, sizeof sp);
    /* mode mtp without a draft: the loader takes models/drafts/<model>-mtp.ini. */
    if (cfg_load("models/dsv41flash.ini", &mc) < 0 || model_load(mc, &m) < 0 || cfg_load("models/hw/h200.ini", &hc) < 0 ||
        hw_load(hc, &hw) < 0 || cfg_load_string("inst", "[spec]\nmode = mtp\n", &ic) < 0 ||
        specrun_config_load(ic, &m, &sp) < 0)
        fail_msg("%s", dh_errmsg());
    cfg_free(mc);
    cfg_free(hc);
    cfg_free(ic);
    const spec_draft *d = sp.draft;
    assert_int_equal(d->kind, SPEC_MTP);
    assert_string_equal(d->target, "dsv41flash");
    /* MTP-1: one drafted token, verified with the last accepted one. */
    assert_int_equal(d->gamma, 1);
    assert_int_equal(d->topk, 1);
    assert_int_equal(d->draft_tokens, 2);
    const uint32_t l = (uint32_t)sp.mtp_layer;
    const model_kind *k = &m.layer[l];
    assert_string_equal(k->name, "swa");
    assert_int_equal(m.layer_group[l], -1);
    assert_int_equal(k->select, MODEL_SELECT_WINDOW);
    /* Its KV: the window's rows at the layer's row size, whatever the context. */
    assert_true(spec_ring_bytes(d, 500000, 1) == (double)k->window * k->row_bytes);
    assert_true(spec_ring_rows(d, 100, 1) == 100);
    /* Per GPU (EP 4, DP attention 4): a quarter of the routed experts, and the attention,
     * shared expert, router and eh_proj (2 hidden -> hidden) replicated, in block FP8. */
    const double rest = (k->attn_params + k->shared_expert_params + k->router_params + 2 * m.hidden * m.hidden) *
                        m.quant_bytes_per_param;
    const double per_gpu = m.experts * m.expert_bytes / 4 + rest;
    assert_true(fabs(spec_weight_bytes_per_gpu(d) - per_gpu) <= 1e-9 * per_gpu);
    /* Acceptance falls with context, one bucket after the other. */
    for (uint32_t b = 1; b < d->n_buckets; b++) assert_true(d->bucket[b].marginal[0] < d->bucket[b - 1].marginal[0]);
    /* One draft forward: the swa layer over its window rows (no indexer, no selection). */
    step_ctx cx = {.model = &m, .hw = &hw, .attention_dp = 4, .moe_ep = 4, .compute_sms = hw.sms - hw.fetch_sms,
                   .dense_bytes_per_layer = 107e6, .a2a_ranks_per_token = 1};
    specrun_slot sl[8];
    memset(sl, 0, sizeof sl);
    for (int i = 0; i < 8; i++) sl[i].ctx = 500000;
    enum { G = 64 };
    double z[9][G];
    memset(z, 0, sizeof z);
    step_mb mb = {.n_req = 8, .tokens = 8, .sel = z[0], .idx_rows = z[1], .miss = z[2], .pages = z[3], .written = z[4],
                  .window_rows = 8.0 * k->window, .ctx_tokens = 8 * 500000.0};
    assert_true(step_indexer_s(&cx, &mb, l) == 0);
    const double layer = step_compute_s(&cx, &mb, l);
    const double extra = cost_roofline_time(&hw.cost.roof, d->pass_bytes, d->flops_per_token * 8, d->fp8, cx.compute_sms);
    const double one = specrun_mtp_draft_s(&sp, &cx, 8, sl, 1);
    assert_true(fabs(one - (layer + extra)) <= 1e-12 * one);
    /* The planted fault: reading the whole context instead of the window costs more. */
    mb.window_rows = 8 * 500000.0;
    assert_true(step_compute_s(&cx, &mb, l) + extra > one * 1.01);
    specrun_config_release(&sp);
    model_release(&m);
}

static void test_adaptive_routing(void **state)
{
    fixture *f = *state;
    specrun_adapt_state st;
    specrun_adapt_init(&f->sp, &st);
    /* bs.1's 1, 3, 5, 7 become 1, 3 under gamma 3; it starts at 3; bs.64 has only 0. */
    assert_int_equal(f->sp.adaptive.n_cand[0], 2);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 1), 3);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 7), 3);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 31), 3);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 32), 1);  /* bs.32: 0, 1; 3 is not one: the middle, 1 */
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 63), 1);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 64), 0);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 100000), 0);
}

static void test_adaptive_trace(void **state)
{
    fixture *f = *state;
    specrun_adapt_state st, keep;
    specrun_adapt_init(&f->sp, &st);
    specrun_adapt_init(&f->sp, &keep);
    const uint32_t none[8] = {0}, good[8] = {3, 3, 2, 3, 3, 2, 3, 3};
    for (int b = 1; b <= 14; b++) specrun_adapt_update(&f->sp, &st, 8, none);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 8), 3);
    assert_true(fabs(st.ema[1] - 2 * pow(0.8, 14)) < 1e-12);
    specrun_adapt_update(&f->sp, &st, 8, none);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 8), 0);
    for (int b = 16; b <= 19; b++) specrun_adapt_update(&f->sp, &st, 8, none);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 8), 0);
    assert_true(fabs(st.ema[1] - 2 * pow(0.8, 15)) < 1e-12); /* frozen at 0 steps */
    specrun_adapt_update(&f->sp, &st, 8, none);
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 8), 1);
    /* Other slots are untouched. */
    assert_int_equal(specrun_adapt_steps(&f->sp, &st, 1), 3);
    /* The planted fault: accepted drafts near 2.75 keep 3 steps. */
    for (int b = 1; b <= 40; b++) specrun_adapt_update(&f->sp, &keep, 8, good);
    assert_int_equal(specrun_adapt_steps(&f->sp, &keep, 8), 3);
}

/* [spec] accept = batch (sim/specrun.h): SGLang's pinned acceptance draws once per
 * verification for the whole batch. With the low-latency cell's draft (two drafts always
 * accepted, the third half the time): every batch's requests accept alike, 2 or 3, about
 * half each over 400 batches (the mean within 0.15 of 2.5: 4.2 standard errors); a request
 * with one token left accepts at most its verify length of 1; the planted fault, accept =
 * request, gives some batch two different counts; a bad value is one error naming it. */
static void plan_batches(fixture *f, const char *accept, int *all_alike, double *mean, uint32_t *short_max)
{
    cfg *ic;
    char text[256];
    snprintf(text, sizeof text, "[spec]\nmode = mtp\ndraft = analysis/deployments/drafts/glm52-mtp-5-1-6-acc3.5.ini\n"
                                "accept = %s\n", accept);
    assert_int_equal(cfg_load_string("inst", text, &ic), 0);
    specrun_cfg sp;
    if (specrun_config_load(ic, &f->model, &sp) < 0) fail_msg("%s", dh_errmsg());
    cfg_free(ic);
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = 1, .moe_ep = 8, .compute_sms = f->hw.sms,
                   .dense_bytes_per_layer = 56e6, .a2a_ranks_per_token = 1};
    specrun_adapt_state st;
    specrun_adapt_init(&sp, &st);
    enum { N = 16, B = 400 };
    specrun_slot sl[N];
    double sum = 0;
    *all_alike = 1;
    *short_max = 0;
    for (uint32_t b = 0; b < B; b++) {
        /* The last request has one token left: its verify length is 1. */
        for (uint32_t i = 0; i < N; i++)
            sl[i] = (specrun_slot){.req = i, .pos = b * 4, .ctx = 8192 + b * 4, .left = i == N - 1 ? 1 : 1000};
        specrun_plan(&sp, &cx, 0, 7, N, sl, &st);
        for (uint32_t i = 1; i + 1 < N; i++) *all_alike &= sl[i].a == sl[0].a;
        if (sl[N - 1].a > *short_max) *short_max = sl[N - 1].a;
        sum += sl[0].a;
    }
    *mean = sum / B;
    specrun_config_release(&sp);
}

static void test_accept_per_batch(void **state)
{
    fixture *f = *state;
    int alike;
    double mean;
    uint32_t short_max;
    plan_batches(f, "batch", &alike, &mean, &short_max);
    assert_true(alike);
    assert_true(fabs(mean - 2.5) < 0.15);
    assert_true(short_max <= 1);
    plan_batches(f, "request", &alike, &mean, &short_max);
    assert_false(alike);
    cfg *ic;
    specrun_cfg sp;
    assert_int_equal(cfg_load_string("inst.ini", "[spec]\nmode = mtp\naccept = sometimes\n", &ic), 0);
    assert_true(specrun_config_load(ic, &f->model, &sp) < 0);
    assert_non_null(strstr(dh_errmsg(), "accept = 'sometimes'"));
    assert_non_null(strstr(dh_errmsg(), "inst.ini"));
    cfg_free(ic);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_draft),
        cmocka_unit_test(test_draft_cost_is_the_layer),
        cmocka_unit_test(test_v4_flash_draft),
        cmocka_unit_test(test_adaptive_routing),
        cmocka_unit_test(test_adaptive_trace),
        cmocka_unit_test(test_accept_per_batch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
