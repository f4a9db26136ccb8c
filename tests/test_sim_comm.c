/* test_sim_comm.c: the expert-parallel all-to-all term of a MoE layer's cost.
 *
 * Per MoE layer and phase (dispatch, combine) the cost is a latency plus
 * tokens x (distinct GPUs a token's top-k experts live on) x message bytes /
 * bandwidth. The expected values are computed here independently: the
 * distinct-GPU count from binomial coefficients (lgamma) rather than the
 * product the simulator uses, and the time by hand from the model config's
 * numbers, so a wrong factor in sim/step.c fails the test. */
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
    if (cfg_load("models/glm53.ini", &mc) < 0 || model_load(mc, &f.model) < 0 ||
        cfg_load("models/hw/h200.ini", &hc) < 0 || hw_load(hc, &f.hw) < 0) {
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

static double log_choose(double n, double k) { return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1); }

/* E[distinct GPUs] = G x (1 - C(E - E/G, k) / C(E, k)). */
static double ranks_by_binomials(double e, double k, double g)
{
    return g * (1 - exp(log_choose(e - e / g, k) - log_choose(e, k)));
}

static double layer_cost(fixture *f, const double lat[2], const double gbps[2], double tokens, uint32_t layer)
{
    double zeros[128] = {0};
    step_mb m = {.n_req = tokens, .tokens = tokens, .sel = zeros, .miss = zeros, .pages = zeros,
                 .idx_rows = zeros, .written = zeros};
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = 8, .moe_ep = 8, .compute_sms = 132};
    for (int p = 0; p < 2; p++) { cx.a2a_lat_s[p] = lat[p]; cx.a2a_gbps[p] = gbps[p]; }
    cx.a2a_ranks_per_token = a2a_ranks_per_token(f->model.experts, f->model.experts_per_token, 8);
    return step_compute_s(&cx, &m, layer);
}

static void test_ranks_per_token(void **state)
{
    (void)state;
    /* GLM-5.3 on 8 GPUs: 256 experts, top-8. */
    assert_true(fabs(a2a_ranks_per_token(256, 8, 8) - ranks_by_binomials(256, 8, 8)) < 1e-9);
    assert_true(fabs(a2a_ranks_per_token(384, 6, 4) - ranks_by_binomials(384, 6, 4)) < 1e-9);
    /* One GPU holds every expert; as many GPUs as experts: every expert is its own GPU. */
    assert_true(a2a_ranks_per_token(256, 8, 1) == 1);
    assert_true(fabs(a2a_ranks_per_token(256, 8, 256) - 8) < 1e-9);
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
    const double none[2] = {0, 0}, lat[2] = {22.8e-6, 22.4e-6}, gbps[2] = {691, 851};
    const double tokens = 16;
    double ranks = ranks_by_binomials(md->experts, md->experts_per_token, 8);
    double expect = lat[0] + lat[1] + tokens * ranks * md->moe_dispatch_bytes / (gbps[0] * 1e9) +
                    tokens * ranks * md->moe_combine_bytes / (gbps[1] * 1e9);
    double got = layer_cost(f, lat, gbps, tokens, moe) - layer_cost(f, none, none, tokens, moe);
    assert_true(fabs(got - expect) < 1e-9 * expect);
    /* Doubling the tokens doubles the bandwidth terms, not the latency. */
    double got2 = layer_cost(f, lat, gbps, 2 * tokens, moe) - layer_cost(f, none, none, 2 * tokens, moe);
    assert_true(fabs(got2 - (2 * expect - lat[0] - lat[1])) < 1e-9 * expect);
    /* A dense layer pays no all-to-all. */
    assert_true(layer_cost(f, lat, gbps, tokens, dense) == layer_cost(f, none, none, tokens, dense));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_per_token),
        cmocka_unit_test(test_all_to_all_bytes_over_bandwidth),
    };
    return cmocka_run_group_tests_name("sim_comm", tests, setup, teardown);
}
