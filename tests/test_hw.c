/* test_hw.c: hardware profiles that say what they are (sim/hw.h, docs/HARDWARE.md).
 *  - a fitted key never overrides a datasheet rate silently: a copy of the calibrated profile
 *    with a new hbm_bw is an error until [fitted_at] says so, and a fitted byte rate above
 *    hbm_bw is rejected;
 *  - a scaled profile scales: each fitted key that replaces a datasheet rate is the base's
 *    times the ratio of that rate, read here from the files' own text (cfg, not hw_load),
 *    everything else is carried over bit for bit, and a scaled profile that changes nothing
 *    is its base exactly; the shipped H100 and B200 profiles are checked the same way;
 *  - the datasheet profile's roofline is the fitted form at efficiency 1 (the same cost model,
 *    a bound), so the gap to the calibrated profile is in the parameters alone. */
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
#include "sim/cost.h"
#include "sim/hw.h"

static void load(const char *path, hw_profile *hw)
{
    cfg *c;
    if (cfg_load(path, &c) < 0 || hw_load(c, hw) < 0) fail_msg("%s: %s", path, dh_errmsg());
    cfg_free(c);
}

/* hw_load of text named name (a path: a scaled profile's base is found beside it); 0 or -1. */
static int load_text(const char *name, const char *text, hw_profile *hw)
{
    cfg *c;
    if (cfg_load_string(name, text, &c) < 0) fail_msg("%s", dh_errmsg());
    int rc = hw_load(c, hw);
    if (rc == 0 && cfg_check_unused(c) < 0) rc = -1;
    cfg_free(c);
    return rc;
}

/* A raw number of a profile's text, as the file gives it. */
static double raw(const char *path, const char *sec, const char *key)
{
    cfg *c;
    double v = NAN;
    if (cfg_load(path, &c) < 0 || cfg_get_double(c, sec, key, &v, CFG_REQUIRED, -1e300, 1e300) < 0)
        fail_msg("%s", dh_errmsg());
    cfg_free(c);
    return v;
}

static int rel_eq(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void test_fitted_override_is_explicit(void **state)
{
    (void)state;
    static hw_profile hw;
    cfg *c;
    assert_int_equal(cfg_load("models/hw/h200.ini", &c), 0);
    /* A copy with another GPU's memory rate: the fitted rates were measured beside 4.8 TB/s. */
    cfg_set(c, "hw", "hbm_bw", "3.35e12");
    assert_int_equal(hw_load(c, &hw), -1);
    assert_non_null(strstr(dh_errmsg(), "[fitted_at] hbm_bw"));
    /* Stating the override makes it explicit; the fitted weight rate (4.42 TB/s) is then
     * above the file's own HBM rate, which no kernel can be. */
    cfg_set(c, "fitted_at", "hbm_bw", "3.35e12");
    assert_int_equal(hw_load(c, &hw), -1);
    assert_non_null(strstr(dh_errmsg(), "weight_bw"));
    assert_non_null(strstr(dh_errmsg(), "above"));
    cfg_set(c, "hw", "hbm_bw", "6e12");
    cfg_set(c, "fitted_at", "hbm_bw", "6e12");
    assert_int_equal(hw_load(c, &hw), 0);
    assert_true(hw.cost.roof.hbm_bw == 6e12);
    /* A fitted key without its [fitted_at] entry. */
    cfg_free(c);
    assert_int_equal(cfg_load("models/hw/h200-datasheet.ini", &c), 0);
    cfg_set(c, "hw", "attn_bw", "1e12");
    assert_int_equal(hw_load(c, &hw), -1);
    assert_non_null(strstr(dh_errmsg(), "attn_bw is fitted"));
    cfg_set(c, "fitted_at", "hbm_bw", cfg_str(c, "hw", "hbm_bw"));
    assert_int_equal(hw_load(c, &hw), 0);
    /* Each fitted byte rate, and the indexer's multiply-adds against half the FP8 rate. */
    static const char *const above[][2] = { { "attn_bw", "5e12" }, { "weight_bw", "4.9e12" }, { "indexer_bw", "4.81e12" } };
    for (size_t i = 0; i < 3; i++) {
        cfg_set(c, "hw", above[i][0], above[i][1]);
        assert_int_equal(hw_load(c, &hw), -1);
        assert_non_null(strstr(dh_errmsg(), above[i][0]));
        cfg_set(c, "hw", above[i][0], "1e12");
    }
    cfg_set(c, "hw", "indexer_ops_s", "1e15");
    cfg_set(c, "fitted_at", "fp8_flops", cfg_str(c, "hw", "fp8_flops"));
    assert_int_equal(hw_load(c, &hw), -1);
    assert_non_null(strstr(dh_errmsg(), "indexer_ops_s"));
    cfg_free(c);
}

/* b is a scaled from a with the rate ratios given: each fitted key that replaces a rate is
 * a's times its ratio, the rest a's exactly. */
static void check_scaled(const hw_profile *a, const hw_profile *b, double r_hbm, double r_fp8, double r_launch,
                         double r_sms, double r_h2d)
{
    const cost_model *x = &a->cost, *y = &b->cost;
    assert_true(rel_eq(y->attn.bw, x->attn.bw * r_hbm));
    assert_true(rel_eq(y->gemm.bw, x->gemm.bw * r_hbm));
    assert_true(rel_eq(y->indexer.bw, x->indexer.bw * r_hbm));
    assert_true(rel_eq(y->topk.score_rate, x->topk.score_rate * r_hbm));
    assert_true(rel_eq(y->indexer.ops_s, x->indexer.ops_s * r_fp8));
    assert_true(rel_eq(y->attn.launch_s, x->attn.launch_s * r_launch));
    assert_true(rel_eq(y->gemm.fixed_s, x->gemm.fixed_s * r_launch));
    assert_true(rel_eq(y->indexer.select_s, x->indexer.select_s * r_launch));
    assert_true(rel_eq(y->topk.wave_s, x->topk.wave_s * r_launch));
    assert_true(y->topk.slots == floor(x->topk.slots * r_sms + 0.5));
    assert_int_equal(y->fetch.form, x->fetch.form);
    assert_int_equal(y->fetch.row.n, x->fetch.row.n);
    for (size_t i = 0; i < x->fetch.row.n; i++) assert_true(rel_eq(y->fetch.row.y[i], x->fetch.row.y[i] * r_h2d));
    for (size_t i = 0; i < x->fetch.pages.n; i++) assert_true(rel_eq(y->fetch.pages.y[i], x->fetch.pages.y[i] * r_h2d));
    /* The fitted fetch form: its link's time per byte divided by the link's ratio, the rest as fitted. */
    assert_true(rel_eq(y->fetch.fit.link_per_byte, x->fetch.fit.link_per_byte / r_h2d));
    cost_fetch_fit fx = x->fetch.fit, fy = y->fetch.fit;
    fx.link_per_byte = fy.link_per_byte = 0;
    assert_memory_equal(&fy, &fx, sizeof fx);
    /* Carried over as they are: efficiencies, shapes, the fitted ranges. */
    assert_true(y->roof.mma_efficiency == x->roof.mma_efficiency);
    assert_true(y->topk.row_s == x->topk.row_s && y->topk.k_s == x->topk.k_s && y->topk.steepness == x->topk.steepness);
    assert_true(y->inter.fetch == x->inter.fetch && y->inter.compute == x->inter.compute);
    assert_memory_equal(&y->fetch.sms, &x->fetch.sms, sizeof x->fetch.sms);
    assert_memory_equal(&y->fetch.beside, &x->fetch.beside, sizeof x->fetch.beside);
    assert_true(y->fetch.launch_s == x->fetch.launch_s && y->fetch.ref_row_bytes == x->fetch.ref_row_bytes);
    assert_int_equal(b->n_fit, a->n_fit);
    assert_memory_equal(b->fit, a->fit, sizeof a->fit);
}

static void test_scaled_profile_scales(void **state)
{
    (void)state;
    static hw_profile h200, s;
    load("models/hw/h200.ini", &h200);
    /* Nothing changed: the base exactly, but for its name. */
    assert_int_equal(load_text("models/hw/same.ini", "[profile]\nbase = h200.ini\n[hw]\nname = same\n", &s), 0);
    assert_string_equal(s.name, "same");
    assert_string_equal(s.base, "h200");
    assert_memory_equal(&s.cost, &h200.cost, sizeof s.cost);
    assert_true(s.hbm_bytes == h200.hbm_bytes && s.sms == h200.sms && s.h2d_bw == h200.h2d_bw);
    /* Every rate changed at once. */
    const char *text = "[profile]\nbase = h200.ini\n[hw]\nname = x\nhbm_bw = 9.6e12\nfp8_flops = 2968.5e12\n"
                       "kernel_launch_s = 2e-6\nsms = 264\n[pcie]\nh2d_bw = 111e9\nduplex_bw = 200.4e9\n";
    assert_int_equal(load_text("models/hw/x.ini", text, &s), 0);
    check_scaled(&h200, &s, 2, 1.5, 0.5, 2, 2);
    assert_true(s.cost.roof.hbm_bw == 9.6e12 && s.h2d_bw == 111e9 && s.d2h_bw == h200.d2h_bw);
    /* A fitted key, a scaled base, an unknown key: errors. */
    assert_int_equal(load_text("models/hw/x.ini", "[profile]\nbase = h200.ini\n[hw]\nname = x\nattn_bw = 1e12\n", &s), -1);
    assert_non_null(strstr(dh_errmsg(), "attn_bw is a fitted key"));
    assert_int_equal(load_text("models/hw/x.ini", "[profile]\nbase = b200.ini\n[hw]\nname = x\n", &s), -1);
    assert_non_null(strstr(dh_errmsg(), "itself scaled"));
    assert_int_equal(load_text("models/hw/x.ini", "[profile]\nbase = h200.ini\n[hw]\nname = x\nhbm_bww = 1\n", &s), -1);
    assert_int_equal(load_text("models/hw/x.ini", "[profile]\nbase = h200-datasheet.ini\n[hw]\nname = x\n", &s), 0);
    /* The shipped profiles, against the ratios of the numbers their files give. */
    static const char *const shipped[] = { "models/hw/h100-sxm.ini", "models/hw/b200.ini" };
    const char *h = "models/hw/h200.ini";
    for (size_t i = 0; i < 2; i++) {
        const char *p = shipped[i];
        load(p, &s);
        check_scaled(&h200, &s, raw(p, "hw", "hbm_bw") / raw(h, "fitted_at", "hbm_bw"),
                     raw(p, "hw", "fp8_flops") / raw(h, "fitted_at", "fp8_flops"), 1,
                     raw(p, "hw", "sms") / raw(h, "fitted_at", "sms"), raw(p, "pcie", "h2d_bw") / raw(h, "pcie", "h2d_bw"));
        assert_true(s.cost.roof.hbm_bw == raw(p, "hw", "hbm_bw") && s.hbm_bytes == raw(p, "hw", "hbm_bytes"));
    }
}

/* The prefill GEMM table ([hw] prefill_gemm_m, prefill_gemm_flops, prefill_expert_flops): the
 * three keys together, M increasing, no rate above the FP8 peak; a scaled profile scales it
 * by the FP8 ratio. */
static void test_prefill_gemm_table(void **state)
{
    (void)state;
    static hw_profile hw, s;
    load("models/hw/h200.ini", &hw);
    assert_true(hw.prefill_gemm.n == 5 && hw.prefill_expert.n == 5);
    assert_true(hw.prefill_gemm.x[0] == 1024 && hw.prefill_expert.x[4] == 16384);
    cfg *c;
    assert_int_equal(cfg_load("models/hw/h200-datasheet.ini", &c), 0);
    cfg_set(c, "hw", "prefill_gemm_m", "1024, 2048");
    assert_int_equal(hw_load(c, &s), -1);
    assert_non_null(strstr(dh_errmsg(), "go together"));
    cfg_free(c);
    assert_int_equal(cfg_load("models/hw/h200.ini", &c), 0);
    cfg_set(c, "hw", "prefill_expert_flops", "1e15, 1e15");
    assert_int_equal(hw_load(c, &s), -1);
    assert_non_null(strstr(dh_errmsg(), "has 5 items but prefill_expert_flops has 2"));
    cfg_set(c, "hw", "prefill_expert_flops", "1e15, 1e15, 1e15, 1e15, 2e15");
    assert_int_equal(hw_load(c, &s), -1);
    assert_non_null(strstr(dh_errmsg(), "prefill_expert_flops"));
    assert_non_null(strstr(dh_errmsg(), "above"));
    cfg_set(c, "hw", "prefill_expert_flops", "1e15, 1e15, 1e15, 1e15, 1e15");
    cfg_set(c, "hw", "prefill_gemm_m", "1024, 512, 4096, 8192, 16384");
    assert_int_equal(hw_load(c, &s), -1);
    assert_non_null(strstr(dh_errmsg(), "increasing"));
    cfg_free(c);
    assert_int_equal(load_text("models/hw/x.ini", "[profile]\nbase = h200.ini\n[hw]\nname = x\nfp8_flops = 3958e12\n", &s), 0);
    for (size_t i = 0; i < 5; i++) {
        assert_true(s.prefill_gemm.x[i] == hw.prefill_gemm.x[i]);
        assert_true(rel_eq(s.prefill_gemm.y[i], 2 * hw.prefill_gemm.y[i]));
        assert_true(rel_eq(s.prefill_expert.y[i], 2 * hw.prefill_expert.y[i]));
    }
}

/* The datasheet profile is the fitted forms at efficiency 1: attention and weights at hbm_bw,
 * one launch each. Written out as fitted keys, the same times. */
static void test_datasheet_is_fitted_form_at_efficiency_1(void **state)
{
    (void)state;
    static hw_profile roof, fit;
    load("models/hw/h200-datasheet.ini", &roof);
    cfg *c;
    assert_int_equal(cfg_load("models/hw/h200-datasheet.ini", &c), 0);
    const char *bw = cfg_str(c, "hw", "hbm_bw"), *l = cfg_str(c, "hw", "kernel_launch_s");
    cfg_set(c, "hw", "attn_bw", bw);
    cfg_set(c, "hw", "weight_bw", bw);
    cfg_set(c, "hw", "attn_launch_s", l);
    cfg_set(c, "hw", "layer_fixed_s", l);
    cfg_set(c, "fitted_at", "hbm_bw", bw);
    cfg_set(c, "fitted_at", "kernel_launch_s", l);
    assert_int_equal(hw_load(c, &fit), 0);
    cfg_free(c);
    assert_true(roof.cost.roof.mma_efficiency == 1);
    assert_true(fit.cost.attn.form == COST_FITTED && roof.cost.attn.form == COST_ROOFLINE);
    const double sms = roof.sms - roof.fetch_sms;
    for (double bytes = 1e4; bytes <= 1e10; bytes *= 3.7)
        for (double ai = 0.5; ai <= 5e3; ai *= 4.1) {
            double a0 = cost_attention_time(&roof.cost, bytes, ai * bytes, 1, sms);
            double a1 = cost_attention_time(&fit.cost, bytes, ai * bytes, 1, sms);
            double g0 = cost_gemm_time(&roof.cost, bytes, ai * bytes, sms), g1 = cost_gemm_time(&fit.cost, bytes, ai * bytes, sms);
            assert_true(fabs(a0 - a1) <= 1e-12 * a0 && fabs(g0 - g1) <= 1e-12 * g0);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fitted_override_is_explicit),
        cmocka_unit_test(test_scaled_profile_scales),
        cmocka_unit_test(test_prefill_gemm_table),
        cmocka_unit_test(test_datasheet_is_fitted_form_at_efficiency_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
