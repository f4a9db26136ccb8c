/* test_specrun.c: speculative decoding through the whole simulator
 * (sim/specrun.h), the profile's [fit_range] report, and the workload modes.
 *   - acceptance all zero: one token per step, slower than plain decoding;
 *     all one: gamma + 1 tokens per step;
 *   - the sampled mean accepted length matches the table's expectation
 *     within five standard errors (and a wrong expectation does not);
 *   - shared retrieval fetches the union, per-query retrieval the sum over
 *     queries: both computed by hand on a workload whose selections slide by
 *     half a selection per position;
 *   - staging reuse reserves one group's union rows, no reuse every group's;
 *     the draft ring holds W rows, without it the whole context;
 *   - every new config key rejects bad values; same inputs, same bytes;
 *   - a profile with [fit_range] loads; a run outside it is reported;
 *   - a load step changes the admitted concurrency at the given time;
 *     Poisson and Gamma arrivals match their rate within a statistical bound. */
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
static char set_buf[16][400];

#define K 64
#define H 32          /* rows a selection slides per position in the sliding source */
#define LAYERS 4
#define ROW_BYTES 1000.0
#define GATHER_BW 10e9
#define REQS 4
#define PROMPT 10000
#define GAMMA 3
#define DRAFT_ROW_BYTES 100.0
#define WINDOW 4096

static void write_file(const char *name, const char *text) { tiny_write(dir, name, text); }

static void write_draft(const char *name, const char *kind, const char *target, const char *marginal)
{
    char buf[2048];
    snprintf(buf, sizeof buf,
             "[draft]\nname = %s\nkind = %s\ntarget = %s\nlayers = 2\nhidden = 1024\nblock = %d\ngamma = %d\n"
             "window = %d\nrow_bytes = %g\nweight_bytes = 1e6\nweight_shards = 1\npass_bytes = 1e6\n"
             "flops_per_token = 1e6\nattn_flops_per_row = 1000\nfp8 = false\n"
             "[accept.ctx_any]\nmarginal = %s\n%s",
             name, kind, target, GAMMA + 1, GAMMA, WINDOW, DRAFT_ROW_BYTES, marginal,
             strcmp(kind, "dspark") ? "" :
             "[dspark]\nmarkov_rank = 8\nvocab = 1000\nmarkov_value_bytes = 2\nconfidence_params = 100\n"
             "confidence_concentration = 8\nconfidence_error = 0.5\n");
    char file[128];
    snprintf(file, sizeof file, "%s.ini", name);
    write_file(file, buf);
}


static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_sim_spec.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char buf[4096];
    tiny_write_model(dir, ROW_BYTES, K);
    tiny_hw_text(buf, sizeof buf, GATHER_BW, "");
    write_file("hw.ini", buf);
    tiny_hw_text(buf, sizeof buf, GATHER_BW, "[fit_range]\nfetch_row_bytes = 100, 5000\nfetch_rows = 1, 2\n");
    write_file("hw_narrow.ini", buf);
    tiny_hw_text(buf, sizeof buf, GATHER_BW, "[fit_range]\nfetch_row_bytes = 100, 5000\nfetch_rows = 1, 1e9\nattention_batch = 1, 64\n");
    write_file("hw_wide.ini", buf);
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(1)
             "[workload]\nmode = closed\nconcurrency = %d\nprompt_len = %d\noutput_len = 48\nsteps = 12\n"
             "[policy]\nname = hisparse\nhisparse_budget_k = 100\n"
             "[trace]\npreset = unused\nseed = 3\n", dir, dir, REQS, PROMPT);
    write_file("inst.ini", buf);
    snprintf(inst_path, sizeof inst_path, "%s/inst.ini", dir);
    write_draft("ones", "dflash2", "tiny", "1, 1, 1");
    write_draft("zeros", "dflash2", "tiny", "0, 0, 0");
    write_draft("table", "dflash2", "tiny", "0.9, 0.6, 0.3");
    write_draft("spark", "dspark", "tiny", "0.9, 0.6, 0.3");
    write_draft("other", "dflash2", "glm53", "0.9, 0.6, 0.3");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tiny_rmdir(dir);
}

/* "key=value" strings; %D in value is the test directory. */
static char **sets_of(int n, const char **kv)
{
    static char *p[16];
    for (int i = 0; i < n; i++) {
        const char *d = strstr(kv[i], "%D");
        if (d) snprintf(set_buf[i], sizeof set_buf[i], "%.*s%s%s", (int)(d - kv[i]), kv[i], dir, d + 2);
        else snprintf(set_buf[i], sizeof set_buf[i], "%s", kv[i]);
        p[i] = set_buf[i];
    }
    return p;
}

static void load(sim_config *sc, int n, const char **kv)
{
    if (sim_config_load(inst_path, sets_of(n, kv), n, sc) < 0) fail_msg("%s", dh_errmsg());
}

/* Position p of every stream selects rows [p H, p H + K): half of a selection
 * is new at every position, and no selected row is ever a newest row. */
static sel_source *sliding_source(const sim_config *sc)
{
    trace_shape sh;
    assert_int_equal(sim_shape(sc, &sh), 0);
    sel_source *src;
    assert_int_equal(memsrc_new(&sh, 8, 1, &src), 0);
    uint32_t rows[K];
    for (uint32_t r = 0; r < sh.n_requests; r++)
        for (uint32_t g = 0; g < sh.n_groups; g++)
            for (uint32_t p = 0; p < sh.output_len[r]; p++) {
                for (uint32_t i = 0; i < K; i++) rows[i] = p * H + i;
                memsrc_put(src, r, g, p, rows, K);
            }
    trace_shape_release(&sh);
    return src;
}

static void run(const sim_config *sc, pol_kind p, sel_source *src, sim_result *r)
{
    if (sim_run(sc, p, src, r) < 0) fail_msg("%s", dh_errmsg());
}

static void test_acceptance_zero_and_one(void **state)
{
    (void)state;
    sim_config plain, zero, one;
    load(&plain, 0, NULL);
    load(&zero, 1, (const char *[]){ "spec.draft=%D/zeros.ini" });
    load(&one, 1, (const char *[]){ "spec.draft=%D/ones.ini" });
    sel_source *src = sliding_source(&plain);
    sim_result rp, rz, r1;
    run(&plain, POL_HISPARSE, src, &rp);
    run(&zero, POL_HISPARSE, src, &rz);
    run(&one, POL_HISPARSE, src, &r1);
    /* Nothing accepted: one token per request and step, the full block verified. */
    assert_string_equal(rz.spec, "dflash2");
    assert_true(rz.mean_accepted == 0 && rz.tokens_per_step == 1 && rz.mean_verify_len == GAMMA);
    for (uint32_t s = 0; s < rz.n_tl; s++) assert_true(rz.tl[s].tokens == rz.tl[s].active);
    if (!(rz.tok_s_gpu < rp.tok_s_gpu)) fail_msg("all-rejecting draft %.3f tok/s, plain %.3f", rz.tok_s_gpu, rp.tok_s_gpu);
    /* Everything accepted: gamma + 1 tokens per request and step (48 = 12 x 4). */
    assert_true(r1.mean_accepted == GAMMA && r1.tokens_per_step == GAMMA + 1);
    for (uint32_t s = 0; s < r1.n_tl; s++) assert_true(r1.tl[s].tokens == r1.tl[s].active * (GAMMA + 1.0));
    assert_int_equal(r1.completed, REQS);
    sim_result_release(&rp); sim_result_release(&rz); sim_result_release(&r1);
    sel_source_free(src);
    sim_config_release(&plain); sim_config_release(&zero); sim_config_release(&one);
}

static void test_mean_accepted_matches_table(void **state)
{
    (void)state;
    sim_config sc;
    load(&sc, 3, (const char *[]){ "spec.draft=%D/table.ini", "workload.output_len=1300", "workload.steps=300" });
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    sel_source *src = ts_source(&sh, 0.3, 21);
    trace_shape_release(&sh);
    for (int p = POL_RESIDENT; p <= POL_ADAPTIVE; p++) {
        sim_result r;
        run(&sc, (pol_kind)p, src, &r);
        const spec_accept_table *t = spec_table(sc.spec.draft, PROMPT);
        double e = spec_expected_accepted(t, GAMMA), var = spec_variance_accepted(t, GAMMA);
        double n = REQS * 300.0, se = sqrt(var / n);
        assert_true(r.mean_verify_len == GAMMA); /* no request reached its end */
        if (!(fabs(r.mean_accepted - e) < 5 * se))
            fail_msg("%s: mean accepted %.4f, table %.4f (se %.4f)", r.policy, r.mean_accepted, e, se);
        /* Planted fault: the expectation over gamma - 1 positions is far outside the bound. */
        double wrong = spec_expected_accepted(t, GAMMA - 1);
        assert_false(fabs(r.mean_accepted - wrong) < 5 * se);
        /* Acceptance is keyed by (request, position): every policy sees the same draws. */
        static double first = -1;
        if (p == POL_RESIDENT) first = r.mean_accepted;
        else assert_true(r.mean_accepted == first);
        sim_result_release(&r);
    }
    sel_source_free(src);
    sim_config_release(&sc);
}

static void test_shared_retrieval_by_hand(void **state)
{
    (void)state;
    sim_config on, off;
    load(&on, 1, (const char *[]){ "spec.draft=%D/ones.ini" });
    load(&off, 2, (const char *[]){ "spec.draft=%D/ones.ini", "spec.shared_retrieval=false" });
    sel_source *src = sliding_source(&on);
    sim_result a, b;
    run(&on, POL_HISPARSE, src, &a);
    run(&off, POL_HISPARSE, src, &b);
    /* 12 steps of 4 queries, bases at positions 0, 4, 8, ... and nothing
     * evicted (B = 100 k). First step: nothing resident, the union
     * [0, 3H + K) = 160 rows; per query 4 x 64. Later steps: the base misses
     * [pH + H, pH + K) = 32 rows, the drafts add 3 x 32 unseen rows: 128;
     * per query 32 + 3 x 64 = 224 (each draft misses its whole selection
     * but the base's rows, which were missing too). */
    double shared = LAYERS * REQS * (160.0 + 11 * 128), per_q = LAYERS * REQS * (256.0 + 11 * 224);
    assert_true(shared != per_q);
    if (a.missed_rows != shared) fail_msg("shared: %.0f rows fetched, by hand %.0f", a.missed_rows, shared);
    if (b.missed_rows != per_q) fail_msg("per query: %.0f rows fetched, by hand %.0f", b.missed_rows, per_q);
    assert_true(a.fetch_bytes == shared * ROW_BYTES && b.fetch_bytes == per_q * ROW_BYTES);
    /* Planted fault: each switch's total is not the other's. */
    assert_true(a.missed_rows != per_q && b.missed_rows != shared);
    assert_true(!b.fetched_shared_rows.known && b.fetched_per_query_rows.known);
    assert_true(b.fetched_per_query_rows.value == per_q / LAYERS / (REQS * 12.0));
    assert_true(!a.fetched_per_query_rows.known && a.fetched_shared_rows.known);
    assert_true(a.fetched_shared_rows.value == shared / LAYERS / (REQS * 12.0));
    /* The union: 160 rows (steps are alike after the first). */
    assert_true(a.union_rows.known && a.union_rows.value == (3.0 * H + K));
    sim_result_release(&a); sim_result_release(&b);
    sel_source_free(src);
    sim_config_release(&on); sim_config_release(&off);
}

static void test_staging_and_ring_in_the_ledger(void **state)
{
    (void)state;
    const char *two = "model.layers=own, reuse*3, own, reuse*3";
    sim_config reuse, noreuse, noring;
    load(&reuse, 2, (const char *[]){ "spec.draft=%D/ones.ini", two });
    load(&noreuse, 3, (const char *[]){ "spec.draft=%D/ones.ini", two, "spec.staging_reuse=false" });
    load(&noring, 3, (const char *[]){ "spec.draft=%D/ones.ini", two, "spec.draft_ring=false" });
    assert_int_equal(reuse.model.n_groups, 2);
    sel_source *src = sliding_source(&reuse);
    sim_result a, b, c;
    run(&reuse, POL_HISPARSE, src, &a);
    run(&noreuse, POL_HISPARSE, src, &b);
    run(&noring, POL_HISPARSE, src, &c);
    /* Worst case per request: (gamma + 1) k union rows of 4 layers' rows, one group or both. */
    double group = (GAMMA + 1.0) * K * LAYERS * ROW_BYTES;
    assert_true(a.hbm_peak[MEM_STAGING] == REQS * group);
    assert_true(b.hbm_peak[MEM_STAGING] == REQS * 2 * group);
    /* The rows staged at once: one group's union, or both groups'. */
    assert_true(a.staging_used_peak > 0 && b.staging_used_peak == 2 * a.staging_used_peak);
    /* The draft KV: W rows per request with the ring, the final context without. */
    assert_true(a.hbm_peak[MEM_DRAFT] == REQS * (double)WINDOW * DRAFT_ROW_BYTES);
    assert_true(c.hbm_peak[MEM_DRAFT] == REQS * (PROMPT + 48.0) * DRAFT_ROW_BYTES);
    /* The draft pass reads its KV: longer without the ring. */
    assert_true(c.draft_share > a.draft_share);
    sim_result_release(&a); sim_result_release(&b); sim_result_release(&c);
    sel_source_free(src);
    sim_config_release(&reuse); sim_config_release(&noreuse); sim_config_release(&noring);
}

static void test_same_inputs_same_bytes(void **state)
{
    (void)state;
    const char *drafts[] = { "spec.draft=%D/table.ini", "spec.draft=%D/spark.ini" };
    for (int d = 0; d < 2; d++) {
        sim_config sc;
        load(&sc, 4, (const char *[]){ drafts[d], "workload.output_len=40", "workload.output_len_max=80", "workload.steps=60" });
        trace_shape sh;
        assert_int_equal(sim_shape(&sc, &sh), 0);
        for (int p = POL_RESIDENT; p <= POL_ADAPTIVE; p++) {
            sel_source *s1 = ts_source(&sh, 0.25, 5), *s2 = ts_source(&sh, 0.25, 5);
            sim_result a, b;
            run(&sc, (pol_kind)p, s1, &a);
            run(&sc, (pol_kind)p, s2, &b);
            char *ja = json_of(&a), *jb = json_of(&b);
            assert_string_equal(ja, jb);
            assert_true(a.completed > 0 && a.mean_verify_len <= GAMMA);
            free(ja); free(jb);
            sim_result_release(&a); sim_result_release(&b);
            sel_source_free(s1); sel_source_free(s2);
        }
        trace_shape_release(&sh);
        sim_config_release(&sc);
    }
}

static void expect_error(int n, const char **kv, const char *needle)
{
    sim_config sc;
    assert_int_equal(sim_config_load(inst_path, sets_of(n, kv), n, &sc), -1);
    if (!strstr(dh_errmsg(), needle)) fail_msg("'%s' gave '%s', expected '%s'", kv[n - 1], dh_errmsg(), needle);
    sim_config_release(&sc);
}

static void test_bad_spec_keys(void **state)
{
    (void)state;
    expect_error(1, (const char *[]){ "spec.mode=eagle" }, "unknown speculative mode 'eagle'");
    expect_error(2, (const char *[]){ "spec.draft=%D/ones.ini", "spec.shared_retrieval=maybe" }, "shared_retrieval");
    expect_error(2, (const char *[]){ "spec.draft=%D/ones.ini", "spec.draft_ring=2" }, "draft_ring");
    expect_error(2, (const char *[]){ "spec.draft=%D/ones.ini", "spec.staging_reuse=" }, "staging_reuse");
    expect_error(1, (const char *[]){ "spec.draft=%D/nope.ini" }, "nope.ini");
    expect_error(2, (const char *[]){ "spec.mode=dspark", "spec.draft=%D/ones.ini" }, "is of kind dflash2");
    expect_error(1, (const char *[]){ "spec.draft=%D/other.ini" }, "targets model 'glm53'");
    expect_error(1, (const char *[]){ "spec.mode=dflash2" }, "tiny-dflash2.ini");
    expect_error(1, (const char *[]){ "spec.verify=all" }, "unknown key 'verify'");
    /* [fit_range] values: two numbers, min <= max. */
    expect_error(2, (const char *[]){ "instance.hw=%D/hw_wide.ini", "fit_range.fetch_rows=5" }, "fetch_rows must be");
    expect_error(2, (const char *[]){ "instance.hw=%D/hw_wide.ini", "fit_range.fetch_rows=9, 3" }, "fetch_rows must be");
    expect_error(2, (const char *[]){ "instance.hw=%D/hw_wide.ini", "fit_range.fetch_rows=a, b" }, "fetch_rows");
    /* mode = none switches a configured draft off. */
    sim_config sc;
    load(&sc, 2, (const char *[]){ "spec.draft=%D/ones.ini", "spec.mode=none" });
    assert_true(sc.spec.mode == 0 && sc.spec.draft == NULL);
    sim_config_release(&sc);
}

static void test_fit_range_reported(void **state)
{
    (void)state;
    sim_config wide, narrow;
    load(&wide, 1, (const char *[]){ "instance.hw=%D/hw_wide.ini" });
    load(&narrow, 1, (const char *[]){ "instance.hw=%D/hw_narrow.ini" });
    assert_int_equal((int)wide.hw.n_fit, 3);
    sel_source *src = sliding_source(&wide);
    sim_result a, b;
    run(&wide, POL_HISPARSE, src, &a);
    run(&narrow, POL_HISPARSE, src, &b);
    assert_int_equal(a.ranges.n, 0);
    assert_int_equal(b.ranges.n, 1);
    assert_string_equal(b.ranges.e[0].key, "fetch_rows");
    assert_true(b.ranges.e[0].first > 2 && b.ranges.e[0].count >= 1);
    /* Reported once, in the table and the JSON; not at all when inside. */
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_int_equal(out_table(f, &b, 1), 0);
    fclose(f);
    /* One line per policy naming each input (sim/out.c). */
    char *note = strstr(buf, "note: hisparse: outside the profile's [fit_range]");
    assert_non_null(note);
    assert_non_null(strstr(note, " fetch_rows up to "));
    assert_null(strstr(note + 1, "note:"));
    free(buf);
    char *jb = json_of(&b), *ja = json_of(&a);
    assert_non_null(strstr(jb, "\"fit_range_exceeded\": [{\"input\": \"fetch_rows\""));
    assert_non_null(strstr(ja, "\"fit_range_exceeded\": []"));
    free(ja); free(jb);
    sim_result_release(&a); sim_result_release(&b);
    sel_source_free(src);
    sim_config_release(&wide); sim_config_release(&narrow);
}

static void test_load_step_changes_concurrency(void **state)
{
    (void)state;
    /* Each step fetches about K x 4 layers x 1000 B per request at 10 GB/s:
     * tens of microseconds; the load rises from 2 to 4 at 0.2 ms. */
    const double t1 = 2e-4;
    sim_config sc;
    load(&sc, 5, (const char *[]){ "workload.mode=step", "workload.step_times=0, 0.0002",
                                   "workload.step_concurrency=2, 4", "workload.output_len=400", "workload.steps=80" });
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    sel_source *src = ts_source(&sh, 0.3, 9);
    sim_result r;
    run(&sc, POL_HISPARSE, src, &r);
    uint32_t before = 0, after = 0;
    for (uint32_t s = 0; s < r.n_tl; s++) {
        if (r.tl[s].t_start < t1) { assert_int_equal(r.tl[s].active, 2); before++; }
        else { assert_int_equal(r.tl[s].active, 4); after++; }
    }
    if (!(before > 3 && after > 3)) fail_msg("%u steps before the load step, %u after (last ends at %g s)", before, after, r.tl[r.n_tl - 1].t_end);
    sim_result_release(&r);
    sel_source_free(src);
    trace_shape_release(&sh);
    sim_config_release(&sc);
}

static void test_arrivals_match_rate(void **state)
{
    (void)state;
    const uint32_t n = 4000;
    double *t = malloc(n * sizeof *t);
    for (int gamma = 0; gamma <= 1; gamma++) {
        wl_cfg w;
        memset(&w, 0, sizeof w);
        w.mode = WL_OPEN;
        w.gamma = gamma;
        w.rate = 2000;      /* instance-wide; 1000/s on each of 2 GPUs */
        w.gamma_cv = 2;
        wl_arrivals(&w, 17, 2, n, t);
        double lambda = 1000, T = 3.0;
        uint32_t count = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (i) assert_true(t[i] >= t[i - 1]);
            if (t[i] <= T) count++;
        }
        assert_true(t[n - 1] > T);
        /* A renewal process: Var N(T) ~ cv^2 lambda T (cv 1 for Poisson). */
        double cv = gamma ? w.gamma_cv : 1, sd = cv * sqrt(lambda * T);
        if (!(fabs(count - lambda * T) < 5 * sd)) fail_msg("arrivals in %g s: %u, rate x T = %g (sd %g)", T, count, lambda * T, sd);
        /* Planted fault: the instance rate without the split over GPUs. */
        assert_false(fabs(count - 2 * lambda * T) < 5 * sd);
        if (gamma) {
            /* The gaps' coefficient of variation (loose: its sampling spread is large for cv 2). */
            double m = 0, v = 0;
            for (uint32_t i = 0; i < n; i++) m += t[i] - (i ? t[i - 1] : 0);
            m /= n;
            for (uint32_t i = 0; i < n; i++) { double g = t[i] - (i ? t[i - 1] : 0) - m; v += g * g; }
            double c = sqrt(v / (n - 1)) / m;
            if (!(c > 1.5 && c < 2.5)) fail_msg("gamma gaps cv %.3f, configured 2", c);
        }
    }
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acceptance_zero_and_one),
        cmocka_unit_test(test_mean_accepted_matches_table),
        cmocka_unit_test(test_shared_retrieval_by_hand),
        cmocka_unit_test(test_staging_and_ring_in_the_ledger),
        cmocka_unit_test(test_same_inputs_same_bytes),
        cmocka_unit_test(test_bad_spec_keys),
        cmocka_unit_test(test_fit_range_reported),
        cmocka_unit_test(test_load_step_changes_concurrency),
        cmocka_unit_test(test_arrivals_match_rate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
