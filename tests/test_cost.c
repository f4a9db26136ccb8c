/* test_cost.c: the cost model's forms (sim/cost.h) as the profile loader chooses them, and
 * the fit's use of them: the datasheet profile is the roofline form of every kernel, the
 * calibrated one the fitted forms (each against its formula written out here); the top-k
 * and indexer fits (analysis/fitcost.c) evaluate the simulator's forms, and their gradients are
 * checked against central differences of those forms on a grid, with a planted fault (one
 * component 1 % off) that each check must catch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/fitcost.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/cost.h"
#include "sim/hw.h"

static void load(const char *path, hw_profile *hw)
{
    cfg *c;
    if (cfg_load(path, &c) < 0 || hw_load(c, hw) < 0) fail_msg("%s", dh_errmsg());
    cfg_free(c);
}

static double max2(double a, double b) { return a > b ? a : b; }

/* The datasheet profile gives no fitted key: every kernel is its roofline, no top-k waves. */
static void test_datasheet_is_roofline(void **state)
{
    (void)state;
    static hw_profile hw;
    load("models/hw/h200-datasheet.ini", &hw);
    const cost_model *c = &hw.cost;
    assert_true(c->attn.form == COST_ROOFLINE && c->gemm.form == COST_ROOFLINE && c->indexer.form == COST_ROOFLINE);
    assert_true(c->topk.slots == 0 && c->inter.fetch == 0 && c->inter.compute == 0);
    const double sms = hw.sms - hw.fetch_sms;
    for (double bytes = 1e5; bytes <= 1e9; bytes *= 10) {
        const double flops = 3e3 * bytes;
        const double want8 = 4e-6 + max2(bytes / 4.8e12, flops / (1979e12 * sms / 132));
        const double want16 = 4e-6 + max2(bytes / 4.8e12, flops / (989e12 * sms / 132));
        assert_true(fabs(cost_roofline_time(&c->roof, bytes, flops, 1, sms) - want8) <= 1e-12 * want8);
        assert_true(fabs(cost_roofline_time(&c->roof, bytes, flops, 0, sms) - want16) <= 1e-12 * want16);
        assert_true(cost_attention_time(c, bytes, flops, 8, 0, sms) == cost_roofline_time(&c->roof, bytes, flops, 0, sms));
        assert_true(cost_gemm_time(c, bytes, flops, 1, sms) == cost_roofline_time(&c->roof, bytes, flops, 1, sms));
        assert_true(cost_indexer_time(c, bytes, flops, 128, 1e5, 2048, sms) == cost_roofline_time(&c->roof, bytes, flops, 1, sms));
    }
}

/* The calibrated profile: the fitted forms, each against its formula. */
static void test_calibrated_is_fitted(void **state)
{
    (void)state;
    static hw_profile hw;
    load("models/hw/h200.ini", &hw);
    const cost_model *c = &hw.cost;
    assert_true(c->attn.form == COST_FITTED && c->gemm.form == COST_FITTED && c->indexer.form == COST_FITTED);
    assert_true(c->topk.slots > 0);
    const double sms = hw.sms - hw.fetch_sms;
    for (double bytes = 1e5; bytes <= 1e9; bytes *= 10) {
        const double flops = 30 * bytes;
        const double tensor = flops / (c->roof.fp8_flops * c->roof.mma_efficiency * sms / c->roof.sms);
        /* 8 query tokens: a verification of 7 drafted tokens per request. */
        const double attn = c->attn.launch_s + 8 * c->attn.query_s + max2(bytes / c->attn.bw, tensor);
        assert_true(fabs(cost_attention_time(c, bytes, flops, 8, 1, sms) - attn) <= 1e-12 * attn);
        const double gemm = c->gemm.fixed_s + max2(bytes / c->gemm.bw, tensor);
        assert_true(fabs(cost_gemm_time(c, bytes, flops, 1, sms) - gemm) <= 1e-12 * gemm);
        const double idx = max2(bytes / c->indexer.bw, flops / 2 / c->indexer.ops_s) + c->indexer.select_s +
                           cost_topk_time(&c->topk, 0, 128, 1e5, 2048);
        assert_true(fabs(cost_indexer_time(c, bytes, flops, 128, 1e5, 2048, sms) - idx) <= 1e-12 * idx);
    }
    /* No rows, no fetch; the all-to-all is its latencies without a bandwidth. */
    assert_true(cost_fetch_time(&c->fetch, 0, 656, 0, 0, hw.fetch_sms, 0) == 0);
    const double lat[2] = {20e-6, 30e-6}, none[2] = {0, 0}, msg[2] = {7168, 14336};
    assert_true(cost_a2a_add(1.0, lat, none, 6, 128, msg) == 1.0 + 20e-6 + 30e-6);
}

/* The top-k fit's parameters, in its order (fitcost.h): t0_us, wave_us, us per score of a
 * block, us per selected row, us per score of a wave, steepness. */
enum { T0, WAVE, ROW, K, SCORE, Q, NPAR };

/* The worst relative difference between the fit's gradient (one component scaled by
 * fault) and central differences of the simulator's form over a grid of top-ks (across
 * the waves' edges), contexts and ks. */
static double topk_gradient_error(double fault)
{
    const double p[NPAR] = {2.0, 12.7, 7.9e-5, 2.2e-3, 1 / 1.27e6, 1.63}, slots = 132;
    double worst = 0;
    static const double topks[] = {1, 16, 131, 132, 133, 264, 300, 1000};
    for (size_t i = 0; i < sizeof topks / sizeof topks[0]; i++)
        for (double ctx = 1e3; ctx <= 1e6; ctx *= 10)
            for (double k = 256; k <= 2048; k *= 8) {
                double g[NPAR];
                const double t = fit_topk_time_us(p, topks[i], ctx, k, slots, g);
                /* The fit's value is the simulator's form, bit for bit. */
                const cost_topk form = {slots, p[WAVE], p[ROW], p[K], 1 / p[SCORE], p[Q]};
                assert_true(t == cost_topk_time(&form, p[T0], topks[i], ctx, k));
                g[K] *= fault;
                for (int j = 0; j < NPAR; j++) {
                    double hi[NPAR], lo[NPAR];
                    memcpy(hi, p, sizeof hi);
                    memcpy(lo, p, sizeof lo);
                    const double h = 1e-5 * p[j];
                    hi[j] += h;
                    lo[j] -= h;
                    const double fd = (fit_topk_time_us(hi, topks[i], ctx, k, slots, NULL) -
                                       fit_topk_time_us(lo, topks[i], ctx, k, slots, NULL)) / (2 * h);
                    /* Relative to the time a unit change of p[j] moves (|p_j| x |g_j| ~ t). */
                    const double e = fabs(fd - g[j]) * p[j] / t;
                    if (e > worst) worst = e;
                }
            }
    return worst;
}

static void test_topk_gradient_matches_form(void **state)
{
    (void)state;
    const double e = topk_gradient_error(1);
    if (e >= 1e-6) print_message("  top-k gradient: worst relative difference %g\n", e);
    assert_true(e < 1e-6);
    /* Planted: one component 1 % off is caught. */
    assert_true(topk_gradient_error(1.01) > 1e-4);
}

/* The indexer fit's parameters (fitcost.h): t0_us, us per key byte, us per multiply-add. The
 * fit's value is t0 + the simulator's scoring form bit for bit, and its gradient (the active
 * term's) matches central differences of it away from the knee; a planted 1 % fault in the
 * bytes' component is caught. */
static double indexer_gradient_error(double fault)
{
    const double p[3] = {6.6, 1 / 3.9e6, 1 / 3.0e8};
    double worst = 0;
    for (double bytes = 1e5; bytes <= 1e9; bytes *= 10)
        for (double ratio = 1e-2; ratio <= 1e3; ratio *= 10) {
            const double macs = bytes * ratio;
            double g[3];
            const double t = fit_indexer_time_us(p, bytes, macs, g);
            assert_true(t == p[0] + cost_scoring_time(bytes, 1 / p[1], macs, 1 / p[2]));
            g[1] *= fault;
            for (int j = 0; j < 3; j++) {
                double hi[3], lo[3];
                memcpy(hi, p, sizeof hi);
                memcpy(lo, p, sizeof lo);
                const double h = 1e-6 * p[j];
                hi[j] += h;
                lo[j] -= h;
                const double fd = (fit_indexer_time_us(hi, bytes, macs, NULL) - fit_indexer_time_us(lo, bytes, macs, NULL)) / (2 * h);
                const double e = fabs(fd - g[j]) * p[j] / t;
                if (e > worst) worst = e;
            }
        }
    return worst;
}

static void test_indexer_gradient_matches_form(void **state)
{
    (void)state;
    const double e = indexer_gradient_error(1);
    if (e >= 1e-6) print_message("  indexer gradient: worst relative difference %g\n", e);
    assert_true(e < 1e-6);
    assert_true(indexer_gradient_error(1.01) > 1e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_datasheet_is_roofline),
        cmocka_unit_test(test_calibrated_is_fitted),
        cmocka_unit_test(test_topk_gradient_matches_form),
        cmocka_unit_test(test_indexer_gradient_matches_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
