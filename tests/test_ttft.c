/* test_ttft.c: per-request time to first token with colocated chunked prefill (sim/reqlat.h,
 * sim/prefill.h), on the tiny fixture (tests/test_sim_tiny.h) made compute-bound.
 *
 * Known answer: one request (prompt P, chunk C) on an otherwise idle GPU runs ceil(P / C)
 * prefill iterations back to back, the spans (0, C), (C, C), ..., the last one cut, then its
 * first decode step. So its prefill ends at the sum of those iterations' costs
 * (prefill_iter_s on the run's own layer-graph context, sim_step_ctx; the iteration cost
 * itself is checked against a token-by-token reference in tests/test_prefill.c) and its TTFT
 * is that sum plus the first decode step, which is the TTFT of the same request under
 * disaggregated prefill (admitted at 0 with its prompt's KV in place: the same first step).
 * Checked under both mixing rules (nothing decodes beside a lone request, so they agree),
 * with P a multiple of C and not. A planted fault (every span from position 0, as if the
 * chunks did not advance) must miss the answer. Under disaggregated prefill the prefill is
 * not modelled: -1 in the record, empty in the CSV. */
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
#include "sim/prefill.h"
#include "sim/reqlat.h"
#include "sim/sim.h"
#include "test_sim_src.h"
#include "test_sim_tiny.h"

static char dir[256];
static char inst_path[300];

#define K 64
#define OUTPUT 8

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_ttft.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char buf[4096];
    tiny_write_model(dir, 1000.0, K);
    /* Compute-bound: tensor rates of 1e12 FLOP/s, so that an iteration's cost grows with its
     * tokens and with its spans' positions (attention rows, indexer keys). */
    tiny_hw_text_at(buf, sizeof buf, 1e13, 1e12, 1e-6, 1e11, "");
    tiny_write(dir, "hw.ini", buf);
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(1)
             "[workload]\nmode = closed\nconcurrency = 1\nprompt_len = 4096\noutput_len = %d\nsteps = %d\n"
             "[policy]\nname = resident\n"
             "[trace]\npreset = unused\nseed = 3\n", dir, dir, OUTPUT, OUTPUT);
    tiny_write(dir, "inst.ini", buf);
    snprintf(inst_path, sizeof inst_path, "%s/inst.ini", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tiny_rmdir(dir);
}

/* Run the resident policy with the given overrides; the first request's record. */
static reqlat_rec run_one(char **sets, int n, sim_config *sc)
{
    if (sim_config_load(inst_path, sets, n, sc) < 0) fail_msg("%s", dh_errmsg());
    trace_shape sh;
    assert_int_equal(sim_shape(sc, &sh), 0);
    sel_source *src;
    assert_int_equal(memsrc_new(&sh, 8, 1, &src), 0);
    for (uint32_t r = 0; r < sh.n_requests; r++)
        for (uint32_t g = 0; g < sh.n_groups; g++) ts_walk(src, &sh, r, g, 0.1, 7);
    trace_shape_release(&sh);
    pol_kind kind;
    assert_int_equal(pol_parse("resident", &kind), 0);
    sim_result res;
    if (sim_run(sc, kind, src, &res) < 0) fail_msg("%s", dh_errmsg());
    assert_true(res.n_req >= 1);
    reqlat_rec x = res.req[0];
    sim_result_release(&res);
    sel_source_free(src);
    return x;
}

/* The sum of the iterations' costs for a prompt of p tokens in chunks of c; planted: every
 * span from position 0. */
static double expected_prefill(const sim_config *sc, double p, double c, int planted)
{
    pol_kind kind;
    assert_int_equal(pol_parse("resident", &kind), 0);
    step_ctx cx;
    assert_int_equal(sim_step_ctx(sc, kind, &cx), 0);
    double t = 0;
    int iters = 0;
    for (double s = 0; s < p; s += c, iters++) {
        prefill_span sp = {.start = planted ? 0 : s, .tokens = fmin(c, p - s)};
        t += prefill_iter_s(&cx, &sp, 1, 0, NULL, NULL);
    }
    assert_int_equal(iters, (int)ceil(p / c));
    return t;
}

static void check_case(const char *prompt, const char *chunk, const char *mixing)
{
    char s0[64], s1[64], s2[64], s3[64];
    snprintf(s0, sizeof s0, "workload.prompt_len=%s", prompt);
    snprintf(s1, sizeof s1, "prefill.chunk_tokens=%s", chunk);
    snprintf(s2, sizeof s2, "prefill.mixing=%s", mixing);
    snprintf(s3, sizeof s3, "prefill.mode=chunked");
    char *disagg[] = {s0};
    char *chunked[] = {s0, s3, s1, s2};
    sim_config a, b;
    const reqlat_rec d = run_one(disagg, 1, &a);
    const reqlat_rec x = run_one(chunked, 4, &b);
    const double want_pf = expected_prefill(&b, atof(prompt), atof(chunk), 0);
    const double planted = expected_prefill(&b, atof(prompt), atof(chunk), 1);
    /* The disaggregated request: no prefill here, TTFT = its first decode step. */
    assert_true(d.prefill < 0 && reqlat_prefill_s(&d) < 0);
    assert_true(d.admit == 0 && d.first > 0);
    /* The colocated one: admitted at 0, prefill done after its iterations, first token one
     * decode step later. */
    assert_true(x.admit == 0);
    assert_true(fabs(x.prefill - want_pf) <= 1e-9 * want_pf);
    assert_true(fabs(reqlat_prefill_s(&x) - want_pf) <= 1e-9 * want_pf);
    assert_true(fabs(reqlat_value(&x, RL_TTFT) - (want_pf + d.first)) <= 1e-9 * (want_pf + d.first));
    /* The planted fault is far from it when there is more than one chunk (the indexer's
     * keys grow with the position). */
    if (atof(prompt) > atof(chunk)) assert_true(fabs(x.prefill - planted) > 1e-3 * want_pf);
    else assert_true(planted == want_pf);
    /* TPOT and e2e follow: the decode steps are the same after the prefill. */
    assert_true(fabs((x.finish - x.first) - (d.finish - d.first)) <= 1e-9 * (d.finish - d.first) + 1e-15);
    sim_config_release(&a);
    sim_config_release(&b);
}

static void test_ttft_known_answer(void **state)
{
    (void)state;
    check_case("4096", "1024", "alternate");
    check_case("4096", "1024", "mixed");
    check_case("4000", "1024", "alternate");
    check_case("3000", "3000", "alternate");
}

/* The per-request CSV: prefill columns filled when colocated, empty when disaggregated. */
static void test_csv_prefill_columns(void **state)
{
    (void)state;
    reqlat l;
    const uint32_t prompt[2] = {100, 100}, output[2] = {4, 4};
    reqlat_init(&l, 2, prompt, output, NULL);
    reqlat_arrive(&l, 0, 2, 0);
    reqlat_admit(&l, 0, 0.5);
    reqlat_admit(&l, 1, 0.5);
    reqlat_prefill(&l, 0, 2.0);
    reqlat_tokens(&l, 0, 2.25, 0);
    reqlat_tokens(&l, 1, 2.25, 0);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_int_equal(reqlat_csv(f, "p", l.r, l.n, 0, 1), 0);
    fclose(f);
    assert_non_null(strstr(buf, ",prefill_done_s,prefill_s\n"));
    assert_non_null(strstr(buf, "p,0,100,4,1,0,0.5,2.25,,0.5,2.25,,,2,1.5\n"));
    assert_non_null(strstr(buf, "p,1,100,4,1,0,0.5,2.25,,0.5,2.25,,,,\n"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &n);
    assert_int_equal(reqlat_cdf_tsv(f, "p", l.r, l.n, 0, 1), 0);
    fclose(f);
    assert_non_null(strstr(buf, "p\tprefill\t1\t0.5\t1.5\n"));
    free(buf);
    reqlat_release(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttft_known_answer),
        cmocka_unit_test(test_csv_prefill_columns),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
