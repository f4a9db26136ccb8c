/* test_sim.c: whole simulations on small hand-built configurations.
 *   - fetch-bound: with compute made free, tokens/s per GPU equals the gather
 *     bandwidth divided by the bytes fetched per token, computed by hand;
 *   - adaptive with HBM to spare behaves like a fixed budget covering the
 *     whole context (identical misses);
 *   - resident fetches nothing; a policy's fetched bytes are its misses x row bytes;
 *   - determinism: two runs give byte-identical JSON;
 *   - a policy registered through the ops table (pol_register) runs, and only
 *     through its operations: an LRU buffer of exactly k rows, written here,
 *     gives hisparse's figures at B = k (and not at B = 2k);
 *   - open loop: a request too large for an idle GPU is an error naming it;
 *   - bad config keys and values are rejected with a message naming them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dh_err.h"
#include "sim/out.h"
#include "sim/sim.h"
#include "test_sim_src.h"
#include "test_sim_tiny.h"

static char dir[256];
static char inst_path[300];

#define K 64
#define LAYERS 4
#define ROW_BYTES 1000.0
#define GATHER_BW 10e9
#define REQS 4
#define PROMPT 10000
#define OUTPUT 50

static void write_file(const char *name, const char *text) { tiny_write(dir, name, text); }

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_sim_run.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char buf[4096];
    /* One selection group of 4 layers (one indexer, three reusing it), no MoE;
     * compute and HBM effectively free; a flat gather bandwidth; no fixed costs. */
    tiny_write_model(dir, ROW_BYTES, K);
    tiny_hw_text(buf, sizeof buf, GATHER_BW, "");
    write_file("hw.ini", buf);
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(2)
             "[workload]\nmode = closed\nconcurrency = %d\nprompt_len = %d\noutput_len = %d\nsteps = %d\n"
             "[policy]\nname = hisparse\nhisparse_budget_k = 1\n"
             "[trace]\npreset = unused\nseed = 3\n", dir, dir, REQS, PROMPT, OUTPUT, OUTPUT);
    write_file("inst.ini", buf);
    snprintf(inst_path, sizeof inst_path, "%s/inst.ini", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tiny_rmdir(dir);
}

static void load(sim_config *sc, char **sets, int n)
{
    if (sim_config_load(inst_path, sets, n, sc) < 0) fail_msg("%s", dh_errmsg());
}

static void test_fetch_bound_throughput_by_hand(void **state)
{
    (void)state;
    sim_config sc;
    load(&sc, NULL, 0);
    sel_source *src = tiny_fresh_rows_source(&sc, K);
    sim_result r;
    if (sim_run(&sc, POL_HISPARSE, src, &r) < 0) fail_msg("%s", dh_errmsg());
    /* Each token fetches K rows in each of the LAYERS layers. */
    double bytes_per_token = K * LAYERS * ROW_BYTES;
    double expect = GATHER_BW / bytes_per_token;
    /* Indexer, weights and attention are not exactly free (1e15 B/s, 1e19 FLOP/s): the
     * indexer before the first fetch and the compute after the last add about 1 ns to a
     * 102 us step, so 1e-4 slack; a wrong factor (layers, rows, micro-batches) is far off. */
    if (!(fabs(r.tok_s_gpu - expect) < 1e-4 * expect)) fail_msg("tokens/s %.6f, by hand %.6f", r.tok_s_gpu, expect);
    assert_true(fabs(r.fetch_fraction - 1.0) < 1e-12);
    assert_true(fabs(r.fetch_bytes - r.missed_rows * ROW_BYTES) < 1e-6);
    /* Halving the bandwidth halves the throughput. */
    char *sets[] = { "gather.row_bw=5e9", "gather.pages_bw=5e9" };
    sim_config sc2;
    load(&sc2, sets, 2);
    sim_result r2;
    if (sim_run(&sc2, POL_HISPARSE, src, &r2) < 0) fail_msg("%s", dh_errmsg());
    assert_true(fabs(r2.tok_s_gpu - expect / 2) < 1e-4 * expect);
    sim_result_release(&r);
    sim_result_release(&r2);
    sel_source_free(src);
    sim_config_release(&sc);
    sim_config_release(&sc2);
}

static void test_resident_fetches_nothing(void **state)
{
    (void)state;
    sim_config sc;
    load(&sc, NULL, 0);
    sel_source *src = tiny_fresh_rows_source(&sc, K);
    sim_result r;
    if (sim_run(&sc, POL_RESIDENT, src, &r) < 0) fail_msg("%s", dh_errmsg());
    assert_true(r.fetch_fraction == 0 && r.fetch_bytes == 0);
    assert_true(r.tok_s_gpu > 0);
    sim_result_release(&r);
    sel_source_free(src);
    sim_config_release(&sc);
}

static void test_adaptive_with_spare_hbm_is_a_large_fixed_budget(void **state)
{
    (void)state;
    char *big[] = { "policy.hisparse_budget_k=1000", "workload.output_len=120", "workload.steps=120" };
    sim_config sc;
    load(&sc, big, 3);
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    sel_source *src = ts_source(&sh, 0.3, 11);
    sim_result a, h;
    if (sim_run(&sc, POL_ADAPTIVE, src, &a) < 0) fail_msg("%s", dh_errmsg());
    if (sim_run(&sc, POL_HISPARSE, src, &h) < 0) fail_msg("%s", dh_errmsg());
    assert_true(a.missed_rows > 0);
    assert_true(a.missed_rows == h.missed_rows);
    assert_true(a.mean_optional_rows >= PROMPT + 120);
    /* A budget of k instead misses more. */
    char *small[] = { "policy.hisparse_budget_k=1", "workload.output_len=120", "workload.steps=120" };
    sim_config sc2;
    load(&sc2, small, 3);
    sim_result h1;
    if (sim_run(&sc2, POL_HISPARSE, src, &h1) < 0) fail_msg("%s", dh_errmsg());
    assert_true(h1.missed_rows > a.missed_rows);
    sim_result_release(&a); sim_result_release(&h); sim_result_release(&h1);
    sel_source_free(src);
    trace_shape_release(&sh);
    sim_config_release(&sc);
    sim_config_release(&sc2);
}

static void test_same_inputs_same_bytes(void **state)
{
    (void)state;
    sim_config sc;
    char *sets[] = { "workload.output_len=40", "workload.output_len_max=80", "workload.steps=100", "workload.concurrency=3" };
    load(&sc, sets, 4);
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    for (int p = 0; p < POL_N; p++) {
        sel_source *s1 = ts_source(&sh, 0.25, 5), *s2 = ts_source(&sh, 0.25, 5);
        sim_result a, b;
        if (sim_run(&sc, (pol_kind)p, s1, &a) < 0) fail_msg("%s", dh_errmsg());
        if (sim_run(&sc, (pol_kind)p, s2, &b) < 0) fail_msg("%s", dh_errmsg());
        char *ja = json_of(&a), *jb = json_of(&b);
        assert_string_equal(ja, jb);
        assert_true(a.completed > 0);
        free(ja); free(jb);
        sim_result_release(&a); sim_result_release(&b);
        sel_source_free(s1); sel_source_free(s2);
    }
    trace_shape_release(&sh);
    sim_config_release(&sc);
}

/* A policy written outside the simulator: an LRU hot buffer of exactly k rows
 * per (request, group), whatever [policy] says. Its operations count their calls. */
static int lruk_reserved, lruk_opened, lruk_stepped;

static void lruk_reserve(const pol_env *e, uint32_t g, double rows, double *prot, double *opt)
{
    lruk_reserved++;
    *prot += e->model->group[g].kv_bytes_per_row * e->model->group[g].k;
}

static double lruk_budget(const pol_env *e, uint32_t g) { return e->model->group[g].k; }

static int lruk_open(const pol_env *e, pol_stream *ps, const pol_open_args *a)
{
    lruk_opened++;
    return pol_stream_open(ps, POL_AHEAD_LRU, a->src, a->sh, a->req, a->group, e->model->group[a->group].k,
                           a->horizon, a->bw, a->rows_per_region);
}

static int lruk_next(pol_stream *ps, const trace_shape *sh, pol_out *o)
{
    lruk_stepped++;
    return pol_stream_next(ps, sh, o);
}

static const pol_ops lruk_ops = {
    .name = "lru-k", .host_tier = 1, .no_spec = "not written for it",
    .reserve = lruk_reserve, .budget = lruk_budget, .open = lruk_open, .next = lruk_next, .close = pol_stream_close,
};

static void test_registered_policy_runs(void **state)
{
    (void)state;
    pol_kind kind, again;
    if (pol_register(&lruk_ops, &kind) < 0) fail_msg("%s", dh_errmsg());
    assert_true(kind >= POL_N && pol_ops_of(kind) == &lruk_ops);
    assert_int_equal(pol_parse("lru-k", &again), 0);
    assert_int_equal(again, kind);
    assert_string_equal(pol_name_of(kind), "lru-k");
    assert_int_equal(pol_register(&lruk_ops, &again), -1); /* the name is taken */
    assert_int_equal(pol_register(&pol_hisparse_ops, &again), -1);

    sim_config sc, sc2;
    char *sets[] = { "workload.output_len=40", "workload.steps=40", "policy.hisparse_budget_k=1" };
    load(&sc, sets, 3);
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    sel_source *src = ts_source(&sh, 0.3, 17);
    sim_result a, h, h2;
    if (sim_run(&sc, kind, src, &a) < 0) fail_msg("%s", dh_errmsg());
    assert_true(a.admitted > 0);
    assert_int_equal(lruk_reserved, a.admitted); /* one group per request */
    assert_int_equal(lruk_opened, a.admitted);
    assert_true(lruk_stepped == a.tokens);
    if (sim_run(&sc, POL_HISPARSE, src, &h) < 0) fail_msg("%s", dh_errmsg());
    assert_string_equal(a.policy, "lru-k");
    assert_true(a.missed_rows > 0);
    /* The same run but for the name. */
    snprintf(a.policy, sizeof a.policy, "hisparse");
    char *ja = json_of(&a), *jh = json_of(&h);
    assert_string_equal(ja, jh);
    free(ja); free(jh);
    /* Planted: hisparse at B = 2k misses less, so the comparison can fail. */
    char *wide[] = { "workload.output_len=40", "workload.steps=40", "policy.hisparse_budget_k=2" };
    load(&sc2, wide, 3);
    if (sim_run(&sc2, POL_HISPARSE, src, &h2) < 0) fail_msg("%s", dh_errmsg());
    assert_true(h2.missed_rows < a.missed_rows);
    /* Its no_spec reason is what a speculative run reports. */
    sim_config sc3 = sc; /* a shallow copy, not released: the refusal comes before the draft is read */
    sc3.spec.mode = SPEC_DFLASH2;
    sim_result x;
    assert_int_equal(sim_run(&sc3, kind, src, &x), -1);
    assert_non_null(strstr(dh_errmsg(), "not written for it"));
    sim_result_release(&a); sim_result_release(&h); sim_result_release(&h2);
    sel_source_free(src);
    trace_shape_release(&sh);
    sim_config_release(&sc);
    sim_config_release(&sc2);
}

/* Open loop: a request that cannot fit even on an idle GPU is an error naming
 * it and the bytes (closed loop simply never admits it). */
static void test_unadmittable_request_is_an_error(void **state)
{
    (void)state;
    char *sets[] = { "hw.hbm_bytes=2e9", "workload.prompt_len=1000000", "workload.mode=open", "workload.rate=100",
                     "workload.output_len=10", "workload.steps=10" };
    sim_config sc;
    load(&sc, sets, 6);
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    sel_source *src = ts_source(&sh, 0.3, 3);
    sim_result r;
    assert_int_equal(sim_run(&sc, POL_RESIDENT, src, &r), -1);
    /* Resident reserves every row: 1,000,010 rows x (4 layers x 1000 B + 16 B of indexer key);
     * 2e9 B less 1e6 B of weights and 1e9 B of workspace are free. */
    if (!strstr(dh_errmsg(), "resident: request 0 cannot be admitted on an idle GPU: it needs 4.02 GB, 0.999 GB are free"))
        fail_msg("%s", dh_errmsg());
    assert_null(r.tl);
    sel_source_free(src);
    trace_shape_release(&sh);
    sim_config_release(&sc);
}

static void expect_config_error(char *set, const char *needle)
{
    sim_config sc;
    char *sets[] = { set };
    assert_int_equal(sim_config_load(inst_path, sets, 1, &sc), -1);
    if (!strstr(dh_errmsg(), needle)) fail_msg("'%s' gave '%s', expected '%s'", set, dh_errmsg(), needle);
    sim_config_release(&sc);
}

static void test_bad_config_is_rejected(void **state)
{
    (void)state;
    expect_config_error("workload.concurency=4", "unknown key 'concurency'");
    expect_config_error("instance.gpus=0", "gpus");
    expect_config_error("policy.name=lfu", "unknown policy 'lfu'");
    expect_config_error("policy.hisparse_budget_k=0.5", "hisparse_budget_k");
    expect_config_error("gather.row_bw=1e9,2e9", "row_bw has 2");
    expect_config_error("kind.own.topk=abc", "topk");
    expect_config_error("workload.mode=burst", "mode = 'burst'");
    expect_config_error("instance.weights_per_gpu_bytes=2e12", "exceed the GPU's HBM");
    expect_config_error("model.layers=own, nope", "unknown kind 'nope'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_bound_throughput_by_hand),
        cmocka_unit_test(test_resident_fetches_nothing),
        cmocka_unit_test(test_adaptive_with_spare_hbm_is_a_large_fixed_budget),
        cmocka_unit_test(test_same_inputs_same_bytes),
        cmocka_unit_test(test_registered_policy_runs),
        cmocka_unit_test(test_unadmittable_request_is_an_error),
        cmocka_unit_test(test_bad_config_is_rejected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
