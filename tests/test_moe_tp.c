/* test_moe_tp.c: the tensor-parallel MoE form (sim/cost.h moe_tp) and its charge in a decode
 * layer (sim/step.c), a prefill pass (sim/prefill.c) and the memory plan (sim/memplan.c).
 *
 * Differential: the expected distinct experts of T tokens, each routing to k distinct of E
 * experts, against brute-force enumeration of every routing (small E, k, T: the mean over all
 * C(E, k)^T outcomes, exact) and a Monte-Carlo draw of GLM-5's 256 / 8 at 1 .. 64 tokens (the
 * mean of the draws within 5 standard errors). A planted fault, the with-replacement formula
 * E (1 - (1 - 1 / E)^(k T)), is caught by both. By hand: a MoE layer's compute under moe_tp = 8
 * rebuilt here from the cost forms (the touched experts x expert bytes / 8, the all-reduce
 * of the gathered hidden states from the table's points by linear interpolation written out,
 * no all-to-all, no straggler), under DP8 and TP8 attention; the planted faults (the
 * all-to-all and the straggler left in, as the expert-parallel path charges them; the
 * all-reduce left out) all differ. The memory plan: the routed experts per GPU under moe_tp = 8
 * are EP8's bytes, by hand from GLM-5's config.json dimensions. */
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
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/prefill.h"
#include "sim/sim.h"
#include "sim/step.h"
#include "sim/tp.h"

#include "tests/test_step_fixture.h"

/* The with-replacement expectation: the planted fault. */
static double touched_fault(double E, double k, double T) { return E * (1 - pow(1 - 1 / E, k * T)); }

/* Every k-subset of E experts as a bit mask. */
static int subsets(int E, int k, unsigned *out)
{
    int n = 0;
    for (unsigned m = 0; m < (1u << E); m++)
        if (__builtin_popcount(m) == k) out[n++] = m;
    return n;
}

/* The mean distinct experts over every routing of T tokens (each token any k-subset, all
 * equally likely): sum over the C(E,k)^T tuples of |union|, enumerated. */
static double touched_enumerated(int E, int k, int T)
{
    unsigned sub[256];
    const int n = subsets(E, k, sub);
    long total = 1;
    for (int t = 0; t < T; t++) total *= n;
    double sum = 0;
    for (long idx = 0; idx < total; idx++) {
        unsigned u = 0;
        long r = idx;
        for (int t = 0; t < T; t++, r /= n) u |= sub[r % n];
        sum += __builtin_popcount(u);
    }
    return sum / (double)total;
}

static void test_touched_enumerated(void **state)
{
    (void)state;
    struct { int E, k, T; } c[] = { { 4, 1, 3 }, { 4, 2, 3 }, { 6, 2, 4 }, { 8, 2, 3 },
                                    { 8, 3, 3 }, { 8, 4, 2 }, { 5, 5, 2 } };
    int caught = 0;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const double want = touched_enumerated(c[i].E, c[i].k, c[i].T);
        const double got = cost_moe_experts_touched(c[i].E, c[i].k, c[i].T);
        if (!(fabs(got - want) <= 1e-12 * want))
            fail_msg("E %d k %d T %d: %.15f, enumerated %.15f", c[i].E, c[i].k, c[i].T, got, want);
        caught += fabs(touched_fault(c[i].E, c[i].k, c[i].T) - want) > 1e-6 * want;
    }
    /* the fault differs everywhere but k = 1, where the two routings coincide */
    assert_int_equal(caught, (int)(sizeof c / sizeof c[0]) - 1);
    /* no tokens, no experts read */
    assert_true(cost_moe_experts_touched(256, 8, 0) == 0);
}

/* xorshift64*: the test's own stream, seeded. */
static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return rs * 2685821657736338717ull;
}

static void test_touched_monte_carlo(void **state)
{
    (void)state;
    const int E = 256, k = 8, trials = 20000;
    const int tokens[] = { 1, 2, 8, 16, 64 };
    int caught = 0;
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        double s = 0, s2 = 0;
        for (int r = 0; r < trials; r++) {
            unsigned char hit[256] = { 0 };
            int d = 0;
            for (int t = 0; t < tokens[i]; t++) {
                /* k distinct experts: a partial Fisher-Yates shuffle */
                int perm[256];
                for (int e = 0; e < E; e++) perm[e] = e;
                for (int j = 0; j < k; j++) {
                    int x = j + (int)(rnd() % (uint64_t)(E - j)), tmp = perm[j];
                    perm[j] = perm[x];
                    perm[x] = tmp;
                    if (!hit[perm[j]]) { hit[perm[j]] = 1; d++; }
                }
            }
            s += d;
            s2 += (double)d * d;
        }
        const double mean = s / trials, se = sqrt((s2 / trials - mean * mean) / trials);
        const double got = cost_moe_experts_touched(E, k, tokens[i]);
        if (!(fabs(got - mean) <= 5 * se + 1e-12)) fail_msg("T %d: %.4f, Monte Carlo %.4f +- %.4f", tokens[i], got, mean, se);
        caught += fabs(touched_fault(E, k, tokens[i]) - mean) > 5 * se;
    }
    /* the with-replacement fault is caught from a few tokens up (at one token it is 0.11 off) */
    assert_true(caught >= 3);
}

/* The table's piecewise-linear all-reduce, written out from its points. */
static double ar_by_hand(const tp_cfg *c, double bytes)
{
    if (bytes <= c->pt_bytes[0]) return c->pt_s[0];
    for (int i = 1; i < c->n_points; i++)
        if (bytes <= c->pt_bytes[i])
            return c->pt_s[i - 1] +
                   (c->pt_s[i] - c->pt_s[i - 1]) * (bytes - c->pt_bytes[i - 1]) / (c->pt_bytes[i] - c->pt_bytes[i - 1]);
    const int n = c->n_points - 1;
    return c->pt_s[n] + (bytes - c->pt_bytes[n]) / (c->busbw_gbps * 1e9 * c->ranks / (2 * (c->ranks - 1)));
}

typedef fixture_batch batch;

static void batch_of(const fixture *f, batch *b, double n_req)
{
    assert_true(f->model.n_groups <= FIXTURE_GROUPS);
    fixture_batch_of(f, b, n_req, 32768, 0);
}

/* moe_tp = 8 over DP attention (attention_dp 8) or TP attention (attention_dp 1, attn_tp 8). */
static step_ctx ctx_of(const fixture *f, double attention_dp, const char *curve)
{
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = attention_dp, .moe_ep = 1, .moe_tp = 8,
                   .compute_sms = f->hw.sms, .dense_bytes_per_layer = 56e6, .straggler_factor = 1.0284};
    const double lat[2] = {22.5e-6, 22.5e-6}, gbps[2] = {300, 300};
    for (int p = 0; p < 2; p++) { cx.a2a_lat_s[p] = lat[p]; cx.a2a_gbps[p] = gbps[p]; }
    cx.a2a_ranks_per_token = 1;
    cx.moe_ar.ranks = 8;
    if (tp_table_load("models/hw/allreduce-h200x8.ini", curve, &cx.moe_ar) < 0) fail_msg("%s", dh_errmsg());
    if (attention_dp == 1) {
        cx.tp.ranks = 8;
        if (tp_table_load("models/hw/allreduce-h200x8.ini", "mscclpp_graph", &cx.tp) < 0) fail_msg("%s", dh_errmsg());
    }
    return cx;
}

/* A MoE layer's compute rebuilt from the cost forms. fault: 1 the all-to-all added, 2 the
 * straggler factor applied, 3 the all-reduce left out, 0 none. */
static double by_hand(const fixture *f, const step_ctx *cx, const step_mb *m, uint32_t l, int fault)
{
    const model_cfg *md = &f->model;
    const double n = cx->tp.ranks > 1 ? cx->tp.ranks : 1;
    double t = fixture_attention_s(f, cx, m, l);
    /* the gathered batch: every DP rank's tokens (TP attention: the group's) */
    const double T = m->tokens * cx->attention_dp, E = md->experts, kk = md->experts_per_token;
    const double w = cx->dense_bytes_per_layer + E * (1 - pow(1 - kk / E, T)) * md->expert_bytes / 8;
    t += cost_gemm_time(&f->hw.cost, w, 2.0 * md->active_params / md->n_layers * m->tokens / n, 1, cx->compute_sms);
    if (n > 1) t += ar_by_hand(&cx->tp, m->tokens * md->hidden * 2);
    if (fault != 3) t += ar_by_hand(&cx->moe_ar, T * md->hidden * 2);
    if (fault == 1)
        for (int p = 0; p < 2; p++)
            t += cx->a2a_lat_s[p] + m->tokens * (p ? md->moe_combine_bytes : md->moe_dispatch_bytes) / (cx->a2a_gbps[p] * 1e9);
    if (fault == 2) t *= cx->straggler_factor;
    return t;
}

static void check_layers(const fixture *f, const step_ctx *cx, double n_req)
{
    batch b;
    batch_of(f, &b, n_req);
    int moe = 0, faults[4] = { 0 };
    for (uint32_t l = 0; l + 1 < f->model.n_layers; l++) {
        if (!f->model.layer[l].moe) continue;
        moe++;
        const double got = step_compute_s(cx, &b.m, l), want = by_hand(f, cx, &b.m, l, 0);
        if (!(fabs(got - want) <= 1e-12 + 1e-9 * want)) fail_msg("layer %u: %.9g s, by hand %.9g s", l, got, want);
        for (int q = 1; q < 4; q++) faults[q] += fabs(got - by_hand(f, cx, &b.m, l, q)) > 1e-9 * want;
    }
    assert_true(moe > 0);
    for (int q = 1; q < 4; q++) assert_int_equal(faults[q], moe);
}

static void test_layer_dp_attention(void **state)
{
    fixture *f = *state;
    const double reqs[] = { 1, 4, 16, 64 };
    for (size_t i = 0; i < 4; i++) {
        step_ctx cx = ctx_of(f, 8, "nccl_graph");
        check_layers(f, &cx, reqs[i]);
    }
}

static void test_layer_tp_attention(void **state)
{
    fixture *f = *state;
    const double reqs[] = { 1, 16, 96 };
    for (size_t i = 0; i < 3; i++) {
        step_ctx cx = ctx_of(f, 1, "mscclpp_graph");
        check_layers(f, &cx, reqs[i]);
    }
}

/* moe_tp 0 or 1 is the expert-parallel path, to the bit. */
static void test_one_rank_is_expert_parallel(void **state)
{
    fixture *f = *state;
    batch b;
    batch_of(f, &b, 16);
    step_ctx ep = ctx_of(f, 8, "nccl_graph"), one;
    ep.moe_ep = 8;
    ep.moe_tp = 0;
    one = ep;
    one.moe_tp = 1;
    for (uint32_t l = 0; l < f->model.n_layers; l++) assert_true(step_compute_s(&one, &b.m, l) == step_compute_s(&ep, &b.m, l));
    step_ctx tp = ep;
    tp.moe_tp = 8;
    uint32_t l = 0;
    while (!f->model.layer[l].moe) l++;
    assert_true(step_compute_s(&tp, &b.m, l) != step_compute_s(&ep, &b.m, l));
}

/* A prefill pass under DP attention: two all-reduces of the gathered chunk's hidden states
 * (SUM_LEN), none under moe_tp = 1; and no all-to-all. */
static void test_prefill_allreduces(void **state)
{
    fixture *f = *state;
    step_ctx cx = ctx_of(f, 8, "nccl_graph");
    cx.prefill_ranks = 8;
    prefill_span sp = {.start = 0, .tokens = 8192};
    prefill_parts P, Q;
    prefill_iter_s(&cx, &sp, 1, 0, &P, NULL);
    step_ctx off = cx;
    off.a2a_lat_s[0] = off.a2a_lat_s[1] = 1;   /* an all-to-all would now cost a second a layer */
    prefill_iter_s(&off, &sp, 1, 0, &Q, NULL);
    assert_true(P.comm == Q.comm);
    double want = 0;
    for (uint32_t l = 0; l < f->model.n_layers; l++)
        if (f->model.layer[l].moe) want += 2 * ar_by_hand(&cx.moe_ar, 8192.0 * 8 * f->model.hidden * 2);
    if (!(fabs(P.comm - want) <= 1e-9 * want)) fail_msg("prefill comm %.9g s, by hand %.9g s", P.comm, want);
}

/* The memory plan: the routed experts per GPU under moe_tp = 8 are EP8's, by hand from
 * GLM-5's config.json (75 MoE layers of 256 experts of 3 x 6144 x 2048 FP8 parameters with a
 * 4-byte scale per 128 x 128 block); the rest of the plan is the instance's with moe_ep = 8. */
static void test_memory_plan(void **state)
{
    (void)state;
    const double Q = 1 + 4.0 / (128 * 128), by_hand_experts = 75 * 256 * 3 * 6144 * 2048.0 * Q / 8;
    sim_config tp, ep;
    if (sim_config_load("models/instances/glm53-h200x8-sglang-moetp.ini", NULL, 0, &tp) < 0) fail_msg("%s", dh_errmsg());
    /* the same instance expert-parallel: the DeepEP instance with the TP one's shared expert
     * split and buffers */
    char *ep_sets[] = { "instance.shared_expert_tp=8", "instance.comm_buffer_bytes=0" };
    if (sim_config_load("models/instances/glm53-h200x8-sglang.ini", ep_sets, 2, &ep) < 0) fail_msg("%s", dh_errmsg());
    if (!(fabs(tp.mem.part[MP_ROUTED_EXPERTS] - by_hand_experts) <= 1e-9 * by_hand_experts))
        fail_msg("routed experts %.0f B, by hand %.0f B", tp.mem.part[MP_ROUTED_EXPERTS], by_hand_experts);
    for (int i = 0; i < MP_N_PARTS; i++) assert_true(tp.mem.part[i] == ep.mem.part[i]);
    assert_true(tp.mem.kv_pool == ep.mem.kv_pool);
    assert_true(tp.moe_tp == 8 && tp.moe_ar.ranks == 8 && tp.moe_ar.n_points > 0);
    sim_config_release(&tp);
    sim_config_release(&ep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_touched_enumerated),
        cmocka_unit_test(test_touched_monte_carlo),
        cmocka_unit_test(test_layer_dp_attention),
        cmocka_unit_test(test_layer_tp_attention),
        cmocka_unit_test(test_one_rank_is_expert_parallel),
        cmocka_unit_test(test_prefill_allreduces),
        cmocka_unit_test(test_memory_plan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
