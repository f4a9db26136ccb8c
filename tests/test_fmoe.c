/* test_fmoe.c: the TP MoE's measured routed-expert table (sim/fmoe.h) and its charge in a
 * decode layer (sim/step.c).
 *
 * Differential: fmoe_time_s against a plain re-implementation written from the header's rule
 * (find the two points around m by scanning every pair; below the first and above the last
 * the nearest segment's line; 0 at m <= 0), on the shipped table and on random tables, at the
 * points, between them, beyond both ends; a planted fault (the ends held flat, a clamp) is
 * caught beyond the ends. By hand: a MoE layer of the shipped GLM-5.3 model under moe_tp = 8
 * with the table, rebuilt from the cost forms (the dense weights at the GEMM form with the
 * routed FLOPs and the table's share of the fixed cost taken out, the table at the gathered
 * tokens, the all-reduce), under DP8 and TP8
 * attention; the old form (the touched experts' bytes in the GEMM form) differs. Config errors,
 * each one dh_err line naming the file and the problem: a missing file, m not ascending, a
 * non-positive time, a first m other than 1, counts that differ, an unknown curve, a shape
 * that is not the model's, an unknown key; and through an instance: the curve key without the
 * table, the table with moe_tp = 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "sim/cost.h"
#include "sim/fmoe.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/sim.h"
#include "sim/step.h"
#include "sim/tp.h"

#include "tests/test_step_fixture.h"

static const fmoe_shape glm5_tp8 = { 8, 256, 8, 6144, 37757952 };

/* The plain rule: the segment is the pair (i, i + 1) with m[i] <= m <= m[i + 1] found by
 * trying every pair; m below the first point: the first pair; above the last: the last pair. */
static double plain(const double *pm, const double *ps, int n, double m, int clamp_fault)
{
    if (m <= 0) return 0;
    if (clamp_fault && m < pm[0]) return ps[0];
    if (clamp_fault && m > pm[n - 1]) return ps[n - 1];
    int seg = -1;
    for (int i = 0; i + 1 < n; i++)
        if (pm[i] <= m && m <= pm[i + 1]) { seg = i; break; }
    if (seg < 0) seg = m < pm[0] ? 0 : n - 2;
    const double x0 = pm[seg], x1 = pm[seg + 1], y0 = ps[seg], y1 = ps[seg + 1];
    return y0 + (y1 - y0) * (m - x0) / (x1 - x0);
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

static void check_against_plain(const fmoe_curve *c, int *faults_caught, int *beyond)
{
    const double lo = c->m[0], hi = c->m[c->n_points - 1];
    for (int t = 0; t < 4000; t++) {
        double m;
        switch (t % 4) {
        case 0: m = c->m[(t / 4) % c->n_points]; break;               /* on a point */
        case 1: m = lo + (hi - lo) * urand(); break;                  /* inside */
        case 2: m = lo * urand(); break;                              /* below the first point */
        default: m = hi * (1 + 3 * urand()); break;                   /* beyond the last */
        }
        const double got = fmoe_time_s(c, m), want = plain(c->m, c->s, c->n_points, m, 0);
        if (!(fabs(got - want) <= 1e-12 * fabs(want) + 1e-18))
            fail_msg("m = %.9g: %.12g s, plain %.12g s", m, got, want);
        assert_int_equal(fmoe_outside(c, m), m < lo || m > hi);
        if (m < lo || m > hi) {
            (*beyond)++;
            *faults_caught += fabs(got - plain(c->m, c->s, c->n_points, m, 1)) > 1e-12 * want;
        }
    }
    assert_true(fmoe_time_s(c, 0) == 0 && fmoe_time_s(c, -1) == 0);
}

static void test_shipped_table_against_plain(void **state)
{
    (void)state;
    fmoe_curve c;
    if (fmoe_load("models/hw/fused-moe-h200-tp8.ini", "sglang_triton", &glm5_tp8, &c) < 0) fail_msg("%s", dh_errmsg());
    assert_true(c.n_points >= 2 && c.m[0] == 1);
    int caught = 0, beyond = 0;
    check_against_plain(&c, &caught, &beyond);
    /* a clamp differs wherever a slope is not 0: everywhere beyond the shipped table's ends */
    assert_true(beyond > 0);
    assert_int_equal(caught, beyond);
}

static void test_random_tables_against_plain(void **state)
{
    (void)state;
    for (int r = 0; r < 200; r++) {
        fmoe_curve c = { 0 };
        c.n_points = 2 + (int)(urand() * (FMOE_MAX_POINTS - 1));
        c.m[0] = 1;
        c.s[0] = 1e-5 + 1e-4 * urand();
        for (int i = 1; i < c.n_points; i++) {
            c.m[i] = c.m[i - 1] + 0.25 + 50 * urand();
            c.s[i] = c.s[i - 1] + 1e-5 * (urand() - 0.2); /* not monotonic: any measured shape */
            if (c.s[i] <= 0) c.s[i] = 1e-6;
        }
        int caught = 0, beyond = 0;
        check_against_plain(&c, &caught, &beyond);
    }
}

/* ------------------------------------------------------------------ the layer */

typedef fixture_batch batch;

static void batch_of(const fixture *f, batch *b, double tokens)
{
    assert_true(f->model.n_groups <= FIXTURE_GROUPS);
    fixture_batch_of(f, b, tokens, 32768, 0);
}

static step_ctx ctx_of(const fixture *f, double attention_dp)
{
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = attention_dp, .moe_ep = 1, .moe_tp = 8,
                   .compute_sms = f->hw.sms, .dense_bytes_per_layer = 56e6, .straggler_factor = 1.0284};
    cx.moe_ar.ranks = 8;
    if (tp_table_load("models/hw/allreduce-h200x8.ini", "nccl_graph", &cx.moe_ar) < 0) fail_msg("%s", dh_errmsg());
    if (attention_dp == 1) {
        cx.tp.ranks = 8;
        if (tp_table_load("models/hw/allreduce-h200x8.ini", "mscclpp_graph", &cx.tp) < 0) fail_msg("%s", dh_errmsg());
    }
    assert_true(f->hw.cost.gemm.form == COST_FITTED && f->hw.cost.gemm.fixed_s > 0);
    fmoe_shape want = glm5_tp8;
    want.expert_bytes = f->model.expert_bytes;
    if (fmoe_load("models/hw/fused-moe-h200-tp8.ini", "sglang_triton", &want, &cx.moe_fm) < 0) fail_msg("%s", dh_errmsg());
    return cx;
}

/* A MoE layer (not the last) rebuilt: attention, the GEMM form on the dense weights with the
 * routed experts' FLOPs (experts_per_token x expert_bytes parameters a token) removed, the
 * table at the gathered tokens, the attention's all-reduce under TP, the MoE's all-reduce. */
static double by_hand(const fixture *f, const step_ctx *cx, const step_mb *m, uint32_t l)
{
    const model_cfg *md = &f->model;
    const double n = cx->tp.ranks > 1 ? cx->tp.ranks : 1;
    double t = fixture_attention_s(f, cx, m, l);
    const double T = m->tokens * cx->attention_dp;
    const double dense_flops = 2.0 * (md->active_params / md->n_layers - md->experts_per_token * md->expert_bytes) *
                               m->tokens / n;
    t += cost_gemm_time(&f->hw.cost, cx->dense_bytes_per_layer, dense_flops, 1, cx->compute_sms);
    t -= cx->moe_fm.fixed_share * f->hw.cost.gemm.fixed_s; /* the calibrated profile: the fitted form */
    t += plain(cx->moe_fm.m, cx->moe_fm.s, cx->moe_fm.n_points, T, 0);
    if (n > 1) t += tp_allreduce_s(&cx->tp, m->tokens * md->hidden * 2);
    t += tp_allreduce_s(&cx->moe_ar, T * md->hidden * 2);
    return t;
}

static void check_layers(const fixture *f, const step_ctx *cx, double tokens)
{
    batch b;
    batch_of(f, &b, tokens);
    step_ctx old = *cx;
    old.moe_fm.n_points = 0;
    int moe = 0, differ = 0;
    for (uint32_t l = 0; l + 1 < f->model.n_layers; l++) {
        if (!f->model.layer[l].moe) {
            /* a dense layer does not read the table */
            assert_true(step_compute_s(cx, &b.m, l) == step_compute_s(&old, &b.m, l));
            continue;
        }
        moe++;
        const double got = step_compute_s(cx, &b.m, l), want = by_hand(f, cx, &b.m, l);
        if (!(fabs(got - want) <= 1e-12 + 1e-9 * want)) fail_msg("layer %u: %.9g s, by hand %.9g s", l, got, want);
        differ += fabs(got - step_compute_s(&old, &b.m, l)) > 1e-9 * want;
    }
    assert_true(moe > 0);
    assert_int_equal(differ, moe);
}

static void test_layer_dp_attention(void **state)
{
    fixture *f = *state;
    const double reqs[] = { 1, 2, 16, 64, 100 }; /* M = 8 .. 800: 800 beyond the table's last point */
    step_ctx cx = ctx_of(f, 8);
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) check_layers(f, &cx, reqs[i]);
}

static void test_layer_tp_attention(void **state)
{
    fixture *f = *state;
    const double toks[] = { 1, 6, 96, 600 };
    step_ctx cx = ctx_of(f, 1);
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) check_layers(f, &cx, toks[i]);
}

/* ------------------------------------------------------------------ config errors */

static char dir[64];

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static const char *head =
    "[fused_moe]\ndevice = test\nranks = 8\nexperts = 256\nexperts_per_token = 8\nhidden = 6144\n"
    "expert_bytes = 4719744\nfixed_share = 0.25\n";

/* Load a table of head + body (or head_override + body); expect failure with every needle in
 * the one message line, the file's path among them. */
static void expect_error(const char *hd, const char *body, const char *curve, const char *n1, const char *n2)
{
    char path[128], text[4096];
    snprintf(path, sizeof path, "%s/fused-moe-t.ini", dir);
    snprintf(text, sizeof text, "%s%s", hd ? hd : head, body);
    write_file(path, text);
    fmoe_curve c = { 0 };
    c.n_points = 7; /* untouched on failure */
    assert_int_equal(fmoe_load(path, curve, &glm5_tp8, &c), -1);
    assert_int_equal(c.n_points, 7);
    const char *msg = dh_errmsg();
    if (!strstr(msg, path) || !strstr(msg, n1) || (n2 && !strstr(msg, n2)) || strchr(msg, '\n'))
        fail_msg("message '%s' lacks '%s' / '%s' / the path, or has two lines", msg, n1, n2 ? n2 : "");
}

static void test_config_errors(void **state)
{
    (void)state;
    const char *good = "[curve.a]\nm = 1, 2, 4\nlayer_us = 50, 56, 75\nlayer_sd_us = 0.2, 0.1, 0.8\n";
    char path[128];
    snprintf(path, sizeof path, "%s/fused-moe-t.ini", dir);
    write_file(path, "");
    {
        char text[1024];
        snprintf(text, sizeof text, "%s%s", head, good);
        write_file(path, text);
        fmoe_curve c;
        if (fmoe_load(path, "a", &glm5_tp8, &c) < 0) fail_msg("%s", dh_errmsg());
        assert_int_equal(c.n_points, 3);
        assert_true(fabs(fmoe_time_s(&c, 3) - 65.5e-6) < 1e-15);
    }
    /* a missing file */
    {
        char missing[128];
        snprintf(missing, sizeof missing, "%s/no-such-table.ini", dir);
        fmoe_curve c = { 0 };
        assert_int_equal(fmoe_load(missing, "a", &glm5_tp8, &c), -1);
        assert_non_null(strstr(dh_errmsg(), "no-such-table.ini"));
        assert_null(strchr(dh_errmsg(), '\n'));
    }
    expect_error(NULL, "[curve.a]\nm = 1, 4, 2\nlayer_us = 50, 56, 75\nlayer_sd_us = 0, 0, 0\n", "a", "[curve.a] m",
                 "not above");
    expect_error(NULL, "[curve.a]\nm = 1, 2, 2\nlayer_us = 50, 56, 75\nlayer_sd_us = 0, 0, 0\n", "a", "not above", NULL);
    expect_error(NULL, "[curve.a]\nm = 1, 2, 4\nlayer_us = 50, 0, 75\nlayer_sd_us = 0, 0, 0\n", "a", "layer_us", NULL);
    expect_error(NULL, "[curve.a]\nm = 1, 2, 4\nlayer_us = 50, -3, 75\nlayer_sd_us = 0, 0, 0\n", "a", "layer_us", NULL);
    expect_error(NULL, "[curve.a]\nm = 2, 4\nlayer_us = 50, 56\nlayer_sd_us = 0, 0\n", "a", "m = 1", NULL);
    expect_error(NULL, "[curve.a]\nm = 1, 2, 4\nlayer_us = 50, 56\nlayer_sd_us = 0, 0, 0\n", "a", "3 m, 2 layer_us", NULL);
    expect_error(NULL, "[curve.a]\nm = 1\nlayer_us = 50\nlayer_sd_us = 0\n", "a", "one point", NULL);
    expect_error(NULL, "[curve.a]\nm = 1, 2\nlayer_us = 10, 30\nlayer_sd_us = 0, 0\n", "a", "reaches 0 s", NULL);
    expect_error(NULL, good, "b", "no [curve.b]", NULL);
    expect_error(NULL, "[curve.a]\nm = 1, 2, 4\nlayer_us = 50, 56, 75\nlayer_sd_us = 0, 0, 0\nbogus = 1\n", "a", "bogus",
                 NULL);
    expect_error(NULL, "[other]\nx = 1\n", "a", "[other]", NULL);
    /* a share of the fixed cost outside [0, 1], and none */
    expect_error("[fused_moe]\ndevice = t\nranks = 8\nexperts = 256\nexperts_per_token = 8\nhidden = 6144\n"
                 "expert_bytes = 4719744\nfixed_share = 1.5\n", good, "a", "fixed_share", NULL);
    expect_error("[fused_moe]\ndevice = t\nranks = 8\nexperts = 256\nexperts_per_token = 8\nhidden = 6144\n"
                 "expert_bytes = 4719744\n", good, "a", "fixed_share", NULL);
    /* a shape that is not the model's */
    expect_error("[fused_moe]\ndevice = t\nranks = 4\nexperts = 256\nexperts_per_token = 8\nhidden = 6144\n"
                 "expert_bytes = 4719744\nfixed_share = 0.25\n", good, "a", "ranks = 4", "moe_tp = 8");
    expect_error("[fused_moe]\ndevice = t\nranks = 8\nexperts = 256\nexperts_per_token = 8\nhidden = 7168\n"
                 "expert_bytes = 4719744\nfixed_share = 0.25\n", good, "a", "hidden 7168", NULL);
    expect_error("[fused_moe]\ndevice = t\nranks = 8\nexperts = 256\nexperts_per_token = 8\nhidden = 6144\n"
                 "expert_bytes = 4719000\nfixed_share = 0.25\n", good, "a", "expert_bytes", NULL);
}

/* A copy of the shipped TP MoE instance without the lines starting with any of drop[]. */
static void instance_without(const char *out, const char *const *drop, int n)
{
    FILE *in = fopen("models/instances/glm53-h200x8-sglang-moetp.ini", "r");
    assert_non_null(in);
    FILE *o = fopen(out, "w");
    assert_non_null(o);
    char line[2048];
    while (fgets(line, sizeof line, in)) {
        int keep = 1;
        for (int i = 0; i < n; i++) keep &= strncmp(line, drop[i], strlen(drop[i])) != 0;
        if (keep) fputs(line, o);
    }
    fclose(in);
    fclose(o);
}

/* Through an instance: the shipped one loads the table; the curve key without the table, and
 * the table with moe_tp = 1, are errors naming the instance file. */
static void test_instance_keys(void **state)
{
    (void)state;
    sim_config sc;
    if (sim_config_load("models/instances/glm53-h200x8-sglang-moetp.ini", NULL, 0, &sc) < 0) fail_msg("%s", dh_errmsg());
    assert_true(sc.moe_fm.n_points > 0 && sc.moe_fm.m[0] == 1);
    sim_config_release(&sc);
    char inst[128];
    snprintf(inst, sizeof inst, "%s/inst.ini", dir);
    static const char *const no_table[] = { "moe_tp_experts = " };
    instance_without(inst, no_table, 1);
    assert_int_equal(sim_config_load(inst, NULL, 0, &sc), -1);
    if (!strstr(dh_errmsg(), inst) || !strstr(dh_errmsg(), "moe_tp_experts_curve is given without moe_tp_experts"))
        fail_msg("'%s'", dh_errmsg());
    sim_config_release(&sc);
    static const char *const no_tp[] = { "moe_tp = ", "moe_tp_allreduce = ", "moe_tp_allreduce_curve = " };
    instance_without(inst, no_tp, 3);
    assert_int_equal(sim_config_load(inst, NULL, 0, &sc), -1);
    if (!strstr(dh_errmsg(), inst) || !strstr(dh_errmsg(), "moe_tp_experts is given but moe_tp = 1"))
        fail_msg("'%s'", dh_errmsg());
    sim_config_release(&sc);
}

static int make_dir(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/test_fmoe.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    return setup(state);
}

static int remove_dir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return -1;
    return teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_table_against_plain),
        cmocka_unit_test(test_random_tables_against_plain),
        cmocka_unit_test(test_layer_dp_attention),
        cmocka_unit_test(test_layer_tp_attention),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_instance_keys),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
