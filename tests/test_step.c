/* test_step.c: a decode step's cost terms on GLM-5.3 and the calibrated H200 profile: the
 * expert-parallel all-to-all term of a MoE layer's cost, the miss fetch's interference with
 * compute ([hw] fetch_interference, sim/cost.c), and the step inputs checked against the
 * profile's [fit_range].
 *
 * All-to-all:
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
#include "sim/evq.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/res.h"
#include "sim/step.h"

#include "tests/test_step_fixture.h"

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
    cx.a2a_ranks_per_token = cost_a2a_ranks(f->model.experts, f->model.experts_per_token, 8);
    return step_compute_s(&cx, &m, layer);
}

static void test_ranks_per_token(void **state)
{
    (void)state;
    /* GLM-5.3 on 8 GPUs: 256 experts, top-8. */
    assert_true(fabs(cost_a2a_ranks(256, 8, 8) - ranks_by_binomials(256, 8, 8)) < 1e-9);
    assert_true(fabs(cost_a2a_ranks(384, 6, 4) - ranks_by_binomials(384, 6, 4)) < 1e-9);
    /* One GPU holds every expert; as many GPUs as experts: every expert is its own GPU. */
    assert_true(cost_a2a_ranks(256, 8, 1) == 1);
    assert_true(fabs(cost_a2a_ranks(256, 8, 256) - 8) < 1e-9);
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

/* The fetch's interference: a compute task that runs while the fetch is still streaming
 * lengthens by fetch_interference x the overlap. One decode step (16 requests, one
 * micro-batch) through step_run at several coefficients; the properties, each of which a
 * wrong term breaks: 0 changes nothing (equal times); with misses, the compute busy time grows,
 * by at most coefficient x the fetch's busy time (the overlap cannot exceed the fetch), and
 * more with a larger coefficient; without misses nothing changes; the fetch's time never
 * changes. */
typedef struct { double end, compute, fetch; hw_range_log ranges; } step_out;

static step_out step_full(fixture *f, double coef, double beta, double miss_rows, double n_req, double queries,
                          double regions);
static step_out step_of(fixture *f, double coef, double beta, double miss_rows, double n_req, double queries)
{
    return step_full(f, coef, beta, miss_rows, n_req, queries, -1);
}

/* One step of 16 requests at 100K context, k rows selected per request and group, miss_rows
 * of them missed, with the given fetch_interference (compute_interference 0). */
static step_out one_step(fixture *f, double coef, double miss_rows) { return step_of(f, coef, 0, miss_rows, 16, 1); }

/* The same with both coefficients and n_req requests of queries query tokens each; the misses
 * touch `regions` 2 MB regions per group (< 0: not given, the step_mb has none). */
static step_out step_full(fixture *f, double coef, double beta, double miss_rows, double n_req, double queries,
                          double regions)
{
    enum { G = 64 };
    const uint32_t ng = f->model.n_groups;
    assert_true(ng <= G);
    double sel[G], miss[G], pages[G], idx[G], wr[G], reg[G];
    for (uint32_t g = 0; g < ng; g++) {
        sel[g] = n_req * queries * 2048;
        miss[g] = miss_rows;
        pages[g] = miss_rows;
        idx[g] = n_req * 100000;
        wr[g] = n_req;
        reg[g] = regions;
    }
    step_mb m = {.n_req = n_req, .tokens = n_req * queries, .sel = sel, .miss = miss, .pages = pages,
                 .regions = regions < 0 ? NULL : reg, .idx_rows = idx, .written = wr};
    hw_profile hw = f->hw;
    hw.cost.inter.fetch = coef;
    hw.cost.inter.compute = beta;
    step_ctx cx = {.model = &f->model, .hw = &hw, .attention_dp = 8, .moe_ep = 8, .compute_sms = hw.sms - hw.fetch_sms,
                   .dense_bytes_per_layer = 188e6};
    res_server srv[3];   /* compute, the fetch path, write-through */
    for (int i = 0; i < 3; i++) res_init(&srv[i], i == 0 ? "gpu" : i == 1 ? "h2d" : "d2h");
    evq q;
    evq_init(&q);
    step_stats st = {0};
    step_out o = {step_run(&cx, &m, 1, 0, &srv[0], &srv[1], &srv[2], &q, &st), st.compute_busy, st.fetch_busy, st.ranges};
    evq_release(&q);
    return o;
}

static void test_interference(void **state)
{
    fixture *f = *state;
    /* The profile's own coefficient is a measured, positive one. */
    assert_true(f->hw.cost.inter.fetch > 0 && f->hw.cost.inter.fetch < 1);

    const step_out none = one_step(f, 0, 20000), a = one_step(f, 0.25, 20000), b = one_step(f, 0.5, 20000);
    assert_true(none.fetch > 0);
    assert_true(a.fetch == none.fetch && b.fetch == none.fetch);
    /* Compute grows, within coefficient x the fetch, and more with the larger coefficient. */
    assert_true(a.compute > none.compute);
    assert_true(a.compute - none.compute <= 0.25 * none.fetch * (1 + 1e-9));
    assert_true(b.compute - none.compute <= 0.5 * none.fetch * (1 + 1e-9));
    assert_true(b.compute > a.compute);
    assert_true(b.end >= a.end && a.end >= none.end);

    /* 0 is the independent model, to the bit, whatever the misses. */
    const step_out z1 = one_step(f, 0, 20000), z2 = one_step(f, 0, 20000);
    assert_true(z1.end == z2.end && z1.compute == none.compute);

    /* Without misses there is no fetch to overlap: the coefficient changes nothing. */
    const step_out q0 = one_step(f, 0, 0), q1 = one_step(f, 0.5, 0);
    assert_true(q0.fetch == 0 && q1.end == q0.end && q1.compute == q0.compute);
}

/* The other side: the fetch work queued while a compute task runs lengthens by
 * compute_interference x its time inside the task. The fetch's busy time grows, by at most
 * coefficient x the compute's busy time (a fetch can overlap no more compute than there is),
 * more with a larger coefficient; the compute's own time does not change (fetch_interference
 * 0); 0 is the independent model to the bit; without misses nothing changes. A fetch-bound
 * step (every row missed) ends later by about the pushed fetch time. */
static void test_compute_interference(void **state)
{
    fixture *f = *state;
    /* With the profile's beside fit (its maximum, at the sparsest density, <= 1) the coefficient
     * is the share of a saturated memory system, the loader's bound at most. */
    assert_true(f->hw.cost.inter.compute > 0 && f->hw.cost.inter.compute <= 10 && f->hw.cost.fetch.beside.max > 0);
    assert_true(f->hw.cost.fetch.beside.max <= 1);
    const step_out none = step_of(f, 0, 0, 20000, 16, 1), a = step_of(f, 0, 0.25, 20000, 16, 1),
                   b = step_of(f, 0, 0.5, 20000, 16, 1);
    assert_true(a.compute == none.compute && b.compute == none.compute);
    assert_true(a.fetch > none.fetch && b.fetch > a.fetch);
    assert_true(a.fetch - none.fetch <= 0.25 * none.compute * (1 + 1e-9));
    assert_true(b.fetch - none.fetch <= 0.5 * none.compute * (1 + 1e-9));
    assert_true(b.end >= a.end && a.end >= none.end);
    const step_out z = step_of(f, 0, 0, 20000, 16, 1);
    assert_true(z.end == none.end && z.fetch == none.fetch);
    const step_out q0 = step_of(f, 0, 0, 0, 16, 1), q1 = step_of(f, 0, 0.5, 0, 16, 1);
    assert_true(q0.fetch == 0 && q1.fetch == 0 && q1.end == q0.end);
    /* All 2048 rows of every request missed: the fetch sets the step; its end moves by the
     * fetch's added busy time, to within the compute that follows the last fetch. */
    const step_out fb0 = step_of(f, 0, 0, 16 * 2048, 16, 1), fb = step_of(f, 0, 0.5, 16 * 2048, 16, 1);
    assert_true(fb0.fetch > fb0.compute);
    assert_true(fb.end - fb0.end > 0.5 * (fb.fetch - fb0.fetch));
    assert_true(fb.end - fb0.end <= (fb.fetch - fb0.fetch) * (1 + 1e-9));
}

/* The weight of compute_interference is the fetch's slowdown beside a saturated memory system
 * at its density: the same misses spread over more 2 MB regions are stretched more, regions
 * not given count as density 1 (the sparsest), and without the fit every fetch has weight 1,
 * which stretches more than the fit's slowdowns (all below 1). */
static void test_beside_weight(void **state)
{
    fixture *f = *state;
    const double miss = 20000;
    const step_out sparse0 = step_full(f, 0, 0, miss, 16, 1, miss), sparse = step_full(f, 0, 0.5, miss, 16, 1, miss),
                   dense0 = step_full(f, 0, 0, miss, 16, 1, miss / 200), dense = step_full(f, 0, 0.5, miss, 16, 1, miss / 200),
                   none0 = step_full(f, 0, 0, miss, 16, 1, -1), none = step_full(f, 0, 0.5, miss, 16, 1, -1);
    assert_true(dense.fetch - dense0.fetch > 0);
    assert_true(sparse.fetch - sparse0.fetch > 2 * (dense.fetch - dense0.fetch));
    assert_true(fabs((none.fetch - none0.fetch) - (sparse.fetch - sparse0.fetch)) <= 1e-12 * none.fetch);
    const cost_beside keep = f->hw.cost.fetch.beside;
    f->hw.cost.fetch.beside.max = 0;
    const step_out flat0 = step_full(f, 0, 0, miss, 16, 1, miss), flat = step_full(f, 0, 0.5, miss, 16, 1, miss);
    f->hw.cost.fetch.beside = keep;
    assert_true(flat.fetch - flat0.fetch > sparse.fetch - sparse0.fetch);
    const double at1 = cost_beside_slowdown(&f->hw.cost.fetch.beside, 1);
    assert_true(cost_fetch_beside(&f->hw.cost.fetch, miss, miss) == at1);
    assert_true(cost_fetch_beside(&f->hw.cost.fetch, miss, 0) == at1);
}

/* A verification's layer fetch is two launches (sim/step.h: stage): the hot buffer's misses
 * and the staged union rows, each with its own pages and regions; its time is the sum of the
 * two launches' times, with no staged rows the one launch of all the misses, and with every
 * row staged the staging launch alone. */
static void test_stage_launches(void **state)
{
    fixture *f = *state;
    enum { G = 64 };
    const uint32_t ng = f->model.n_groups;
    double miss[G], pages[G], reg[G], stage[G], spages[G], sreg[G], zero[G] = {0};
    for (uint32_t g = 0; g < ng; g++) {
        miss[g] = 30000;
        pages[g] = 4500;
        reg[g] = 450;
        stage[g] = 25000;
        spages[g] = 21000;
        sreg[g] = 490;
    }
    step_mb m = {.n_req = 16, .tokens = 128, .sel = zero, .miss = miss, .pages = pages, .regions = reg,
                 .idx_rows = zero, .written = zero, .stage = stage, .stage_pages = spages, .stage_regions = sreg};
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = 8, .moe_ep = 8, .compute_sms = f->hw.sms - f->hw.fetch_sms};
    uint32_t l = 0;
    while (l < f->model.n_layers && (f->model.layer_group[l] < 0 || !f->model.layer[l].kv_own)) l++;
    assert_true(l < f->model.n_layers);
    const double rb = f->model.layer[l].row_bytes;
    double bytes;
    const double two = step_fetch_s(&cx, &m, l, &bytes);
    const cost_fetch *cf = &f->hw.cost.fetch;
    const double want = cost_fetch_time(cf, 5000, rb, 4500, 450, f->hw.fetch_sms, 0) + cost_fetch_time(cf, 25000, rb, 21000, 490, f->hw.fetch_sms, 0);
    assert_true(fabs(two - want) <= 1e-12 * want && bytes == 30000 * rb);
    m.stage = NULL;
    const double one = step_fetch_s(&cx, &m, l, &bytes);
    assert_true(one == cost_fetch_time(cf, 30000, rb, 4500, 450, f->hw.fetch_sms, 0));
    m.stage = zero;
    assert_true(step_fetch_s(&cx, &m, l, &bytes) == one);
    /* Every fetched row staged: the staging launch alone. */
    for (uint32_t g = 0; g < ng; g++) stage[g] = miss[g];
    m.stage = stage;
    assert_true(step_fetch_s(&cx, &m, l, &bytes) == cost_fetch_time(cf, 30000, rb, 21000, 490, f->hw.fetch_sms, 0));
}

/* The fetch's density: the same misses in fewer 2 MB regions fetch faster; no regions given is
 * one region per row; the balls-in-bins count of a window's regions against a direct sum. */
static void test_density(void **state)
{
    fixture *f = *state;
    assert_true(f->hw.cost.fetch.form == COST_FITTED && f->hw.cost.fetch.fit.density > 0 && f->hw.region_bytes > 0);
    const double miss = 4700;   /* one layer's misses of 16 requests */
    const step_out none = step_full(f, 0, 0, miss, 16, 1, -1), sparse = step_full(f, 0, 0, miss, 16, 1, miss),
                   mid = step_full(f, 0, 0, miss, 16, 1, miss / 9), dense = step_full(f, 0, 0, miss, 16, 1, miss / 100);
    assert_true(none.fetch == sparse.fetch);
    assert_true(sparse.fetch > mid.fetch && mid.fetch > dense.fetch);
    assert_true(dense.end <= sparse.end);
    /* Regions of m rows drawn from a window: B (1 - (1 - 1/B)^m), B the regions it spans. */
    const double n = 100000, rb = 656;
    const double B = ceil(n * rb / f->hw.region_bytes);
    for (double m = 1; m <= 4096; m *= 4) {
        double p = 1;
        for (double i = 0; i < m; i++) p *= 1 - 1 / B;
        assert_true(fabs(hw_window_regions(&f->hw, m, n, rb) - B * (1 - p)) < 1e-9 * B);
    }
    assert_true(hw_window_regions(&f->hw, 0, n, rb) == 0);
    assert_true(hw_window_regions(&f->hw, 50, 100, rb) == 1);   /* a window inside one region */
}

/* The top-k's waves (hw.h: topk_*): a selecting layer's indexer cost grows by the top-k's
 * waves over the constant select_s: full waves of topk_slots blocks and a last of the rest,
 * each topk_wave_s + min(k, rows) x topk_k_s + (a^q + b^q)^(1/q) with a = rows x topk_row_s,
 * b = blocks x rows / topk_score_rate, counted here wave by wave (`flat`, the profile without
 * the keys, is the constant select_s); a context shorter than k selects all its rows. */
static void test_topk_waves(void **state)
{
    fixture *f = *state;
    enum { G = 64 };
    const uint32_t ng = f->model.n_groups;
    double sel[G], zero[G] = {0}, idx[G];
    uint32_t l = 0;
    while (l < f->model.n_layers && f->model.layer[l].select != MODEL_SELECT_OWN) l++;
    assert_true(l < f->model.n_layers);
    const int32_t g = f->model.layer_group[l];
    const double k = f->model.group[g].k, q = 1.6, rate = 1.2e12;
    hw_profile flat = f->hw, waves = f->hw;
    flat.cost.topk = (cost_topk){0};
    waves.cost.topk.slots = 132;
    waves.cost.topk.wave_s = 10e-6;
    waves.cost.topk.row_s = 0.07e-9;
    waves.cost.topk.k_s = 10e-9;
    waves.cost.topk.score_rate = rate;
    waves.cost.topk.steepness = q;
    for (double rows = 1000; rows <= 1000000; rows *= 10) {
        for (uint32_t j = 0; j < ng; j++) sel[j] = 0, idx[j] = 16 * rows;
        static const int tokens[] = {1, 16, 131, 132, 133, 264, 265, 1000};
        for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
            step_mb m = {.n_req = 16, .tokens = tokens[i], .sel = sel, .miss = zero, .pages = zero, .idx_rows = idx,
                         .written = zero};
            step_ctx cx = {.model = &f->model, .hw = &flat, .attention_dp = 8, .moe_ep = 8,
                           .compute_sms = f->hw.sms - f->hw.fetch_sms};
            const double base = step_indexer_s(&cx, &m, l);
            cx.hw = &waves;
            const double with = step_indexer_s(&cx, &m, l);
            double want = 0;
            for (int left = tokens[i]; left > 0; left -= 132) {
                const double n = left < 132 ? left : 132, a = rows * 0.07e-9, b = n * rows / rate;
                want += 10e-6 + (k < rows ? k : rows) * 10e-9 + pow(pow(a, q) + pow(b, q), 1 / q);
            }
            assert_true(fabs((with - base) - want) <= 1e-9 * want);
        }
    }
}

/* The step's inputs outside the profile's [fit_range] are noted, each once: 16 requests of
 * one query are inside every fitted range of the attention, GEMM and indexer (16 tokens,
 * 1-8 queries); 128 tokens (8 queries) lie outside the GEMM fit's m = 16 only; 9 queries also
 * outside the indexer's 1-8; the top-k's top-ks per launch, scores and k likewise. */
static int noted(const step_out *o, const char *key)
{
    for (uint32_t i = 0; i < o->ranges.n; i++)
        if (!strcmp(o->ranges.e[i].key, key)) return 1;
    return 0;
}

static void test_fit_ranges_noted(void **state)
{
    fixture *f = *state;
    const step_out a = step_of(f, 0, 0, 0, 16, 1), b = step_of(f, 0, 0, 0, 16, 8), c = step_of(f, 0, 0, 0, 16, 9);
    assert_false(noted(&a, "gemm_fp8_m") || noted(&a, "attention_batch") || noted(&a, "attention_bytes") ||
                 noted(&a, "indexer_ctx") || noted(&a, "indexer_batch") || noted(&a, "indexer_queries"));
    assert_true(noted(&b, "gemm_fp8_m") && !noted(&b, "indexer_queries") && !noted(&b, "attention_batch"));
    for (uint32_t i = 0; i < b.ranges.n; i++)
        if (!strcmp(b.ranges.e[i].key, "gemm_fp8_m")) assert_true(b.ranges.e[i].first == 128);
    assert_true(noted(&c, "indexer_queries") && noted(&c, "gemm_fp8_m"));
    /* The top-k's inputs (with the profile's topk form): 16-144 top-ks of 100K scores at k 2048
     * lie inside its range; 125 requests x 8 queries = 1000 top-ks per launch do not. */
    assert_true(f->hw.cost.topk.slots > 0);
    assert_false(noted(&a, "topk_batch") || noted(&a, "topk_ctx") || noted(&a, "topk_k") || noted(&b, "topk_batch") ||
                 noted(&c, "topk_batch"));
    const step_out d = step_of(f, 0, 0, 0, 125, 8);
    assert_true(noted(&d, "topk_batch") && !noted(&d, "topk_ctx") && !noted(&d, "topk_k"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_per_token),
        cmocka_unit_test(test_all_to_all_bytes_over_bandwidth),
        cmocka_unit_test(test_interference),
        cmocka_unit_test(test_compute_interference),
        cmocka_unit_test(test_beside_weight),
        cmocka_unit_test(test_stage_launches),
        cmocka_unit_test(test_density),
        cmocka_unit_test(test_fit_ranges_noted),
        cmocka_unit_test(test_topk_waves),
    };
    return cmocka_run_group_tests_name("sim_comm", tests, setup, teardown);
}
