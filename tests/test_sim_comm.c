/* test_sim_comm.c: the expert-parallel all-to-all term of a MoE layer's cost.
 *
 * The cost is moe_comm_s + tokens x experts_per_token x (moe_ep - 1) / moe_ep x
 * (dispatch + combine bytes) / bandwidth, added to every MoE layer and to no
 * dense layer. The expected differences are computed here by hand from the
 * model config's own numbers, so a wrong factor (local share, bytes, units)
 * in sim/step.c fails the test. */
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
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/step.h"

typedef struct {
    model_cfg model;
    hw_profile hw;
} fixture;

static int setup(void **state)
{
    static fixture f;
    cfg *mc, *hc;
    memset(&f, 0, sizeof f);
    if (cfg_load("models/glm53.ini", &mc) < 0 || model_load(mc, &f.model) < 0) {
        fprintf(stderr, "%s\n", dh_errmsg());
        return -1;
    }
    if (cfg_load("models/hw/h200.ini", &hc) < 0 || hw_load(hc, &f.hw) < 0) {
        fprintf(stderr, "%s\n", dh_errmsg());
        return -1;
    }
    cfg_free(mc);
    cfg_free(hc);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    model_release(&f->model);
    return 0;
}

static double layer_cost(fixture *f, double gbps, double comm_s, double tokens, uint32_t layer)
{
    double zeros[128] = {0};
    step_mb m = {.n_req = tokens, .tokens = tokens, .sel = zeros, .miss = zeros, .pages = zeros,
                 .idx_rows = zeros, .written = zeros};
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = 8, .moe_ep = 8,
                   .moe_comm_s = comm_s, .moe_comm_gbps = gbps, .compute_sms = 132};
    return step_compute_s(&cx, &m, layer);
}

static void test_all_to_all_bytes_over_bandwidth(void **state)
{
    fixture *f = *state;
    const model_cfg *md = &f->model;
    uint32_t moe = 0, dense = 0;
    int have_moe = 0, have_dense = 0;
    for (uint32_t l = 0; l < md->n_layers; l++) {
        if (md->layer[l].moe && !have_moe) { moe = l; have_moe = 1; }
        if (!md->layer[l].moe && !have_dense) { dense = l; have_dense = 1; }
    }
    assert_true(have_moe && have_dense);
    assert_true(md->moe_dispatch_bytes > 0 && md->moe_combine_bytes > 0);
    const double tokens = 16, gbps = 300;
    double base = layer_cost(f, 0, 0, tokens, moe);
    double with = layer_cost(f, gbps, 25e-6, tokens, moe);
    double bytes = tokens * md->experts_per_token * 7.0 / 8.0 * (md->moe_dispatch_bytes + md->moe_combine_bytes);
    double expect = 25e-6 + bytes / (gbps * 1e9);
    assert_true(fabs((with - base) - expect) < 1e-12 + 1e-9 * expect);
    /* Doubling the tokens doubles the bandwidth term, not the latency. */
    double base2 = layer_cost(f, 0, 0, 2 * tokens, moe);
    double with2 = layer_cost(f, gbps, 25e-6, 2 * tokens, moe);
    assert_true(fabs((with2 - base2) - (25e-6 + 2 * bytes / (gbps * 1e9))) < 1e-12 + 1e-9 * expect);
    /* A dense layer pays no all-to-all. */
    assert_true(layer_cost(f, gbps, 25e-6, tokens, dense) == layer_cost(f, 0, 0, tokens, dense));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_to_all_bytes_over_bandwidth),
    };
    return cmocka_run_group_tests_name("sim_comm", tests, setup, teardown);
}
