/* test_search.c: the steady-state latency search (sim/search.h) and the
 * per-request latencies (sim/reqlat.h).
 *   - a known answer: on the tiny fixture every position misses all K rows,
 *     so a step of c requests takes c x K x layers x row bytes / gather
 *     bandwidth, by hand; the search's answer for a bound between two such
 *     figures is the integer below, its check (answer + 1) exceeds it, the
 *     stop reason is latency;
 *   - a memory limit: HBM sized by hand to hold M requests (their
 *     reservations from admit_need) gives the answer M with the stop reason
 *     memory, although M + 1 meets the latency bound;
 *   - the same answer for every run length above the stated minimum;
 *   - a differential test: the answer equals a scan of every concurrency
 *     judged one by one (the largest c before the first failure);
 *   - MSER-5: a decaying start is cut, a stationary series is not, a series
 *     still rising at mid-run is an error;
 *   - per-request latencies: arrival, first token and finish of a closed
 *     loop by hand (every step takes the same time), their quantiles;
 *   - a planted fault: a run function that reports one request too many
 *     running is caught as the trace running dry is not (the check fails). */
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
#include "sim/admit.h"
#include "sim/reqlat.h"
#include "sim/search.h"
#include "sim/sim.h"
#include "traces/memsrc.h"
#include "test_sim_tiny.h"

#define K 64
#define LAYERS 4
#define ROW_BYTES 1000.0
#define GATHER_BW 10e9
#define PROMPT 10000
/* One step of c requests, every row a miss: c x TAU seconds. */
#define TAU (K * LAYERS * ROW_BYTES / GATHER_BW)

static char dir[256], inst_path[300];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_search.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char buf[4096];
    tiny_write_model(dir, ROW_BYTES, K);
    tiny_hw_text(buf, sizeof buf, GATHER_BW, "");
    tiny_write(dir, "hw.ini", buf);
    /* Output lengths of 8 to 16 tokens: requests finish and are replaced all
     * run long. */
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(1)
             "[workload]\nmode = closed\nconcurrency = 4\nprompt_len = %d\noutput_len = 8\noutput_len_max = 16\nsteps = 60\n"
             "[policy]\nname = hisparse\nhisparse_budget_k = 1\n"
             "[trace]\npreset = unused\nseed = 3\n", dir, dir, PROMPT);
    tiny_write(dir, "inst.ini", buf);
    snprintf(inst_path, sizeof inst_path, "%s/inst.ini", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tiny_rmdir(dir);
}


/* The search's run function: the tiny instance at per-GPU concurrency c
 * with the extra overrides of ctx. */
typedef struct {
    const char *sets[4];
    int n_sets;
    int lie;                   /* planted fault: report one request more running than there is */
} tiny_ctx;

static int tiny_run(void *ctx, uint32_t c, sim_result *res)
{
    tiny_ctx *x = ctx;
    char conc[64];
    snprintf(conc, sizeof conc, "workload.concurrency=%u", c);
    char *sets[6];
    int n = 0;
    for (int i = 0; i < x->n_sets; i++) sets[n++] = (char *)x->sets[i];
    sets[n++] = conc;
    sim_config sc;
    if (sim_config_load(inst_path, sets, n, &sc) < 0) fail_msg("%s", dh_errmsg());
    sel_source *src = tiny_fresh_rows_source(&sc, K);
    int rc = sim_run(&sc, POL_HISPARSE, src, res);
    if (rc < 0) fail_msg("%s", dh_errmsg());
    if (x->lie)
        for (uint32_t i = 0; i < res->n_tl; i++) res->tl[i].active = c;
    sel_source_free(src);
    sim_config_release(&sc);
    return rc;
}

static search_cfg tiny_cfg(tiny_ctx *x, double bound_s)
{
    search_cfg c = { .bound_s = bound_s, .stat = { SEARCH_TOKEN, 0.90 }, .max_per_gpu = 65536, .run = tiny_run, .ctx = x };
    return c;
}

static void test_known_answer_latency(void **state)
{
    (void)state;
    tiny_ctx x = { .n_sets = 0 };
    /* Between 11 and 12 requests' step times. */
    search_cfg cfg = tiny_cfg(&x, 11.5 * TAU);
    search_out o;
    if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(o.best, 11);
    assert_int_equal(o.stop, SEARCH_STOP_LATENCY);
    assert_int_equal(o.above.per_gpu, 12);
    assert_false(o.above.ok);
    if (!(fabs(o.at.value - 11 * TAU) < 1e-4 * 11 * TAU)) fail_msg("TPOT p90 at 11: %g s, by hand %g s", o.at.value, 11 * TAU);
    if (!(fabs(o.above.value - 12 * TAU) < 1e-4 * 12 * TAU)) fail_msg("TPOT p90 at 12: %g s, by hand %g s", o.above.value, 12 * TAU);
    /* Every measured step ran the target: finished requests were replaced. */
    for (uint32_t i = 0; i < o.res.n_tl; i++) assert_int_equal(o.res.tl[i].active, 11);
    assert_true(o.res.completed > 11);
    assert_int_equal(o.noisy, 0);
    /* 1, 2, 4, 8, 16 doubling, then the line through 8 and 16 meets the
     * bound at 11.5: 11 meets it, the line through 11 and 16 gives 12. */
    assert_int_equal(o.runs, 7);
    search_out_release(&o);
    /* The upper limit: the answer is the limit, the stop reason max. */
    cfg.max_per_gpu = 5;
    if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(o.best, 5);
    assert_int_equal(o.stop, SEARCH_STOP_MAX);
    search_out_release(&o);
    /* Not even one request: answer 0, and the check is per GPU 1. */
    cfg = tiny_cfg(&x, 0.5 * TAU);
    if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(o.best, 0);
    assert_int_equal(o.above.per_gpu, 1);
    assert_int_equal(o.stop, SEARCH_STOP_LATENCY);
    search_out_release(&o);
}

/* HBM for exactly m requests of the tiny instance beside weights and workspace. */
static double hbm_for(uint32_t m)
{
    sim_config sc;
    if (sim_config_load(inst_path, NULL, 0, &sc) < 0) fail_msg("%s", dh_errmsg());
    sel_source *src = tiny_fresh_rows_source(&sc, K);
    admit_state a;
    assert_int_equal(admit_init(&a, &sc, pol_ops_of(POL_HISPARSE), src), 0);
    /* Requests differ in output length: the largest reservation bounds them. */
    double need = 0;
    for (uint32_t r = 0; r < a.sh->n_requests; r++)
        if (admit_need(&a, r) > need) need = admit_need(&a, r);
    double used = a.hbm.total;
    admit_release(&a);
    sel_source_free(src);
    sim_config_release(&sc);
    /* Every request of the longest output fits m times, m + 1 times does not;
     * shorter ones need less: m + 1 of them must not fit either. */
    return used + m * need + 0.01 * need;
}

static void test_known_answer_memory(void **state)
{
    (void)state;
    char hbm[64];
    snprintf(hbm, sizeof hbm, "hw.hbm_bytes=%.17g", hbm_for(6));
    tiny_ctx x = { .sets = { hbm }, .n_sets = 1 };
    search_cfg cfg = tiny_cfg(&x, 11.5 * TAU);
    search_out o;
    if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(o.best, 6);
    assert_int_equal(o.stop, SEARCH_STOP_MEMORY);
    assert_true(o.above.memory_short);
    /* At 7 the GPU runs at most 6 at once: its latency meets the bound (6
     * requests' step), so only memory makes 7 fail. */
    assert_true(o.above.value <= cfg.bound_s);
    search_out_release(&o);
}

static void test_run_length_does_not_move_answer(void **state)
{
    (void)state;
    char hbm[64];
    snprintf(hbm, sizeof hbm, "hw.hbm_bytes=%.17g", hbm_for(9));
    const char *steps[] = { "workload.steps=40", "workload.steps=80", "workload.steps=200" };
    uint32_t lat[3], mem[3];
    for (int i = 0; i < 3; i++) {
        tiny_ctx x = { .sets = { steps[i] }, .n_sets = 1 };
        search_cfg cfg = tiny_cfg(&x, 7.5 * TAU);
        search_out o;
        if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
        lat[i] = o.best;
        search_out_release(&o);
        tiny_ctx y = { .sets = { steps[i], hbm }, .n_sets = 2 };
        cfg = tiny_cfg(&y, 20.5 * TAU);
        if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
        mem[i] = o.best;
        assert_int_equal(o.stop, SEARCH_STOP_MEMORY);
        search_out_release(&o);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lat[i], 7);
        assert_int_equal(mem[i], 9);
    }
    /* Below the minimum (20 steps, four batches of 5) the search refuses. */
    tiny_ctx z = { .sets = { "workload.steps=12" }, .n_sets = 1 };
    search_cfg cfg = tiny_cfg(&z, 7.5 * TAU);
    search_out o;
    assert_int_equal(search_run(&cfg, &o), -1);
    assert_non_null(strstr(dh_errmsg(), "raise --steps"));
}

static void test_matches_scan_of_every_concurrency(void **state)
{
    (void)state;
    char hbm[64];
    snprintf(hbm, sizeof hbm, "hw.hbm_bytes=%.17g", hbm_for(13));
    double bounds[] = { 3.5 * TAU, 9.2 * TAU, 30 * TAU };
    for (int b = 0; b < 3; b++) {
        tiny_ctx x = { .sets = { hbm }, .n_sets = 1 };
        search_cfg cfg = tiny_cfg(&x, bounds[b]);
        /* The reference: judge every concurrency from 1 up; the answer is the
         * last one before the first failure. */
        uint32_t expect = 0;
        int why = -1;
        for (uint32_t c = 1; c <= 20; c++) {
            sim_result r;
            search_eval e;
            assert_int_equal(tiny_run(&x, c, &r), 0);
            if (search_judge(&cfg, c, &r, &e) < 0) fail_msg("%s", dh_errmsg());
            sim_result_release(&r);
            if (!e.ok) { why = e.memory_short ? SEARCH_STOP_MEMORY : SEARCH_STOP_LATENCY; break; }
            expect = c;
        }
        search_out o;
        if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
        if (o.best != expect || (int)o.stop != why)
            fail_msg("bound %g s: search %u (%s), scan %u (%d)", bounds[b], o.best, search_stop_name[o.stop], expect, why);
        search_out_release(&o);
    }
}

static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    /* HBM for 6, a run function claiming c run at every step: the judge sees
     * no short step, so the memory limit is missed and the answer moves
     * past 6 -- the memory test above would fail on such a simulator. */
    char hbm[64];
    snprintf(hbm, sizeof hbm, "hw.hbm_bytes=%.17g", hbm_for(6));
    tiny_ctx x = { .sets = { hbm }, .n_sets = 1, .lie = 1 };
    search_cfg cfg = tiny_cfg(&x, 11.5 * TAU);
    search_out o;
    if (search_run(&cfg, &o) < 0) fail_msg("%s", dh_errmsg());
    assert_true(o.best > 6);
    assert_int_not_equal(o.stop, SEARCH_STOP_MEMORY);
    search_out_release(&o);
}

static void test_mser5(void **state)
{
    (void)state;
    double x[200];
    /* A start decaying over 30 steps onto a level with a small periodic ripple. */
    for (int i = 0; i < 200; i++) x[i] = 1 + 0.01 * ((i * 7) % 5) + (i < 30 ? 5.0 * (30 - i) / 30 : 0);
    int64_t w = search_mser5(x, 200);
    assert_true(w >= 25 && w <= 35);
    for (int i = 0; i < 200; i++) x[i] = 1 + 0.01 * ((i * 7) % 5);
    assert_true(search_mser5(x, 200) <= 5);
    /* Still rising: the cut lands at mid-run, no steady state. */
    for (int i = 0; i < 200; i++) x[i] = i;
    assert_int_equal(search_mser5(x, 200), -1);
    assert_int_equal(search_mser5(x, 19), -1);
}

static void test_stat_parse(void **state)
{
    (void)state;
    search_stat s;
    char b[32];
    assert_int_equal(search_stat_parse("p90", &s), 0);
    assert_int_equal(s.metric, SEARCH_TOKEN);
    assert_string_equal(search_stat_name(s, b, sizeof b), "token_p90");
    assert_int_equal(search_stat_parse("e2e_p99", &s), 0);
    assert_int_equal(s.metric, RL_E2E);
    assert_string_equal(search_stat_name(s, b, sizeof b), "e2e_p99");
    assert_int_equal(search_stat_parse("ttft_mean", &s), 0);
    assert_true(s.metric == RL_TTFT && s.q == 0);
    assert_int_equal(search_stat_parse("tpot_p95", &s), -1);
    assert_int_equal(search_stat_parse("itl_p90", &s), -1);
    assert_int_equal(search_stat_parse("", &s), -1);
}

/* A closed loop of 3 requests whose steps all take c x TAU: by hand, a
 * request of n tokens admitted at step s has TTFT (from its arrival at the
 * end of the request it replaces) one step, e2e n steps, TPOT one step. */
static void test_request_latencies_by_hand(void **state)
{
    (void)state;
    tiny_ctx x = { .sets = { "workload.steps=40" }, .n_sets = 1 };
    sim_result r;
    assert_int_equal(tiny_run(&x, 3, &r), 0);
    const double step = 3 * TAU;
    uint32_t finished = 0;
    for (uint32_t i = 0; i < r.n_req; i++) {
        const reqlat_rec *q = &r.req[i];
        if (q->arrival < 0) continue;
        assert_true(q->admit >= 0);
        assert_true(fabs(reqlat_value(q, RL_QUEUE)) < 1e-12);
        assert_true(fabs(reqlat_value(q, RL_TTFT) - step) < 1e-4 * step);
        if (q->finish < 0) continue;
        finished++;
        assert_true(fabs(reqlat_value(q, RL_E2E) - q->output * step) < 1e-4 * step * q->output);
        assert_true(fabs(reqlat_value(q, RL_TPOT) - step) < 1e-4 * step);
    }
    assert_true(finished == r.completed && finished > 3);
    /* Memory for one request at a time: the second waits the first out. */
    char hbm[64];
    snprintf(hbm, sizeof hbm, "hw.hbm_bytes=%.17g", hbm_for(1));
    tiny_ctx y = { .sets = { "workload.steps=40", hbm }, .n_sets = 2 };
    sim_result m;
    assert_int_equal(tiny_run(&y, 2, &m), 0);
    const reqlat_rec *a = &m.req[0], *b = &m.req[1];
    assert_true(a->arrival == 0 && b->arrival == 0);
    assert_true(fabs(b->admit - a->finish) < 1e-12);
    assert_true(fabs(reqlat_value(b, RL_TTFT) - (a->output + 1) * TAU) < 1e-4 * TAU * a->output);
    sim_result_release(&r);
    sim_result_release(&m);
}

static void test_quantile_and_ci(void **state)
{
    (void)state;
    double v[1000];
    for (int i = 0; i < 1000; i++) v[i] = i + 1;
    reqlat_q q = reqlat_quantile(v, 1000, 0.9);
    assert_true(q.v == 900);
    /* n q -/+ 1.96 sqrt(n q (1 - q)) = 900 -/+ 18.6: ranks 881 and 920. */
    assert_true(q.lo == 881 && q.hi == 920);
    q = reqlat_quantile(v, 10, 0.99);
    assert_true(q.v == 10 && q.lo < 0 && q.hi < 0);
    q = reqlat_quantile(v, 0, 0.5);
    assert_true(q.n == 0 && q.v < 0);
    assert_true(reqlat_mean(v, 4) == 2.5);
}

int main(void)
{
    (void)json_of; /* the fixture's, not used here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stat_parse),
        cmocka_unit_test(test_mser5),
        cmocka_unit_test(test_quantile_and_ci),
        cmocka_unit_test(test_known_answer_latency),
        cmocka_unit_test(test_known_answer_memory),
        cmocka_unit_test(test_run_length_does_not_move_answer),
        cmocka_unit_test(test_matches_scan_of_every_concurrency),
        cmocka_unit_test(test_planted_fault_is_caught),
        cmocka_unit_test(test_request_latencies_by_hand),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
