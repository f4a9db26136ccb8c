/* test_tp.c: tensor-parallel attention (sim/tp.h) in a decode layer's cost (sim/step.c).
 *
 * Differential: at one rank (attn_tp = 1, or a context that never set it) every layer's
 * compute, indexer and the whole step's timing are the data-parallel model's to the bit.
 * By hand: at 4 ranks a layer's compute is rebuilt here from the cost forms, with the
 * attention's FLOPs and the GEMMs' FLOPs divided by 4, the latent bytes whole, the all-reduce
 * written in NCCL's algorithm-bandwidth form (bytes / (busbw x n / (2 (n - 1)))) rather than
 * the simulator's, and the all-to-all over the rank's quarter of the tokens. A planted fault
 * (the all-reduce left out) shows the comparison fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/cost.h"
#include "sim/evq.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/res.h"
#include "sim/step.h"
#include "sim/tp.h"

#include "tests/test_step_fixture.h"

typedef fixture_batch batch;

/* n_req requests at 100K context, k rows selected per group, misses per group. */
static void batch_of(const fixture *f, batch *b, double n_req, double misses)
{
    assert_true(f->model.n_groups <= FIXTURE_GROUPS);
    fixture_batch_of(f, b, n_req, 100000, misses);
}

static step_ctx ctx_of(const fixture *f, double attention_dp)
{
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = attention_dp, .moe_ep = 8,
                   .compute_sms = f->hw.sms - f->hw.fetch_sms, .dense_bytes_per_layer = 56e6};
    const double lat[2] = {22.8e-6, 22.4e-6}, gbps[2] = {691, 851};
    for (int p = 0; p < 2; p++) { cx.a2a_lat_s[p] = lat[p]; cx.a2a_gbps[p] = gbps[p]; }
    cx.a2a_ranks_per_token = cost_a2a_ranks(f->model.experts, f->model.experts_per_token, 8);
    return cx;
}

static double run_step(const step_ctx *cx, const step_mb *m, step_stats *st)
{
    res_server srv[3];
    for (int i = 0; i < 3; i++) res_init(&srv[i], i == 0 ? "gpu" : i == 1 ? "h2d" : "d2h");
    evq q;
    evq_init(&q);
    memset(st, 0, sizeof *st);
    double end = step_run(cx, m, 1, 0, &srv[0], &srv[1], &srv[2], &q, st);
    evq_release(&q);
    for (int i = 0; i < 3; i++) res_release(&srv[i]);
    return end;
}

static void test_one_rank_is_data_parallel(void **state)
{
    fixture *f = *state;
    batch b;
    batch_of(f, &b, 16, 900);
    step_ctx dp = ctx_of(f, 8), tp1 = dp, tp0 = dp;
    tp1.tp = (tp_cfg){.ranks = 1, .lat_s = 10e-6, .busbw_gbps = 460};
    tp0.tp = (tp_cfg){0};
    for (uint32_t l = 0; l < f->model.n_layers; l++) {
        assert_true(step_compute_s(&tp1, &b.m, l) == step_compute_s(&dp, &b.m, l));
        assert_true(step_compute_s(&tp0, &b.m, l) == step_compute_s(&dp, &b.m, l));
        assert_true(step_indexer_s(&tp1, &b.m, l) == step_indexer_s(&dp, &b.m, l));
    }
    step_stats s1, s2;
    double e1 = run_step(&dp, &b.m, &s1), e2 = run_step(&tp1, &b.m, &s2);
    assert_true(e1 == e2 && s1.compute_busy == s2.compute_busy && s1.fetch_busy == s2.fetch_busy);
    /* The comparison can fail: two ranks change the layer's cost. */
    step_ctx tp2 = dp;
    tp2.tp = (tp_cfg){.ranks = 2, .lat_s = 10e-6, .busbw_gbps = 460};
    assert_true(step_compute_s(&tp2, &b.m, f->model.n_layers - 1) != step_compute_s(&dp, &b.m, f->model.n_layers - 1));
}

/* Layer l's compute at n ranks, rebuilt from the cost forms; with_ar 0 is the planted fault. */
static double by_hand(const fixture *f, const step_ctx *cx, const step_mb *m, uint32_t l, double n, int with_ar)
{
    const model_cfg *md = &f->model;
    const model_kind *k = &md->layer[l];
    const int32_t g = md->layer_group[l];
    const double rows = m->sel[g];
    double t = cost_attention_time(&f->hw.cost, rows * k->row_bytes,
                                   2.0 * k->attn_heads * rows * (k->attn_qk_dim + k->attn_v_dim) / n, m->tokens, k->attn_fp8,
                                   cx->compute_sms);
    double w = cx->dense_bytes_per_layer;
    if (k->moe) {
        const double local = md->experts / cx->moe_ep, global = m->tokens * cx->attention_dp;
        w += local * (1 - pow(1 - md->experts_per_token / md->experts, global)) * md->expert_bytes;
    }
    t += cost_gemm_time(&f->hw.cost, w, 2.0 * md->active_params / md->n_layers * m->tokens / n, 1, cx->compute_sms);
    if (with_ar) {
        const double bytes = m->tokens * md->hidden * 2, algbw = cx->tp.busbw_gbps * 1e9 * n / (2 * (n - 1));
        t += cx->tp.lat_s + bytes / algbw;
    }
    if (k->moe)
        for (int p = 0; p < 2; p++)
            t += cx->a2a_lat_s[p] + m->tokens / n * cx->a2a_ranks_per_token *
                                        (p ? md->moe_combine_bytes : md->moe_dispatch_bytes) / (cx->a2a_gbps[p] * 1e9);
    return t;
}

static void test_four_ranks_by_hand(void **state)
{
    fixture *f = *state;
    batch b;
    batch_of(f, &b, 64, 0);
    step_ctx cx = ctx_of(f, 2);
    cx.tp = (tp_cfg){.ranks = 4, .lat_s = 10e-6, .busbw_gbps = 460};
    int faults = 0;
    for (uint32_t l = 0; l < f->model.n_layers; l++) {
        const double got = step_compute_s(&cx, &b.m, l), want = by_hand(f, &cx, &b.m, l, 4, 1);
        assert_true(fabs(got - want) <= 1e-12 + 1e-9 * want);
        faults += fabs(got - by_hand(f, &cx, &b.m, l, 4, 0)) > 1e-9 * want;
    }
    assert_int_equal(faults, f->model.n_layers);
    /* The indexer is replicated: a rank scores every key whatever the ranks. */
    step_ctx dp = ctx_of(f, 2);
    for (uint32_t l = 0; l < f->model.n_layers; l++) assert_true(step_indexer_s(&cx, &b.m, l) == step_indexer_s(&dp, &b.m, l));
}

/* The latent rows are read whole by each rank: where the attention is bound by its bytes, TP
 * leaves its time as it is (the heads' FLOPs shrink, the bytes do not). */
static void test_latent_bytes_not_split(void **state)
{
    fixture *f = *state;
    const model_kind *k = &f->model.layer[0];
    const double rows = 16 * 2048, bytes = rows * k->row_bytes;
    const double flops = 2.0 * k->attn_heads * rows * (k->attn_qk_dim + k->attn_v_dim);
    const double sms = f->hw.sms - f->hw.fetch_sms;
    const double t1 = cost_attention_time(&f->hw.cost, bytes, flops, 16, k->attn_fp8, sms);
    const double t8 = cost_attention_time(&f->hw.cost, bytes, flops / 8, 16, k->attn_fp8, sms);
    /* 16 requests' decode attention is memory-bound on the H200 at one rank already. */
    assert_true(t8 == t1);
}

static void test_allreduce_form(void **state)
{
    (void)state;
    const tp_cfg one = {.ranks = 1, .lat_s = 1e-5, .busbw_gbps = 100}, eight = {.ranks = 8, .lat_s = 1e-5, .busbw_gbps = 100};
    assert_true(tp_allreduce_s(&one, 1e9) == 0);
    /* 8 ranks, 1 GB at 100 GB/s bus bandwidth: 1e9 x 14 / 8 / 1e11 s plus the latency. */
    assert_true(fabs(tp_allreduce_s(&eight, 1e9) - (1e-5 + 0.0175)) < 1e-12);
}

/* The table form against the NCCL form (a differential test): points placed on the line
 * latency + bytes x 2 (n - 1) / n / busbw give that line at every size from the first point on,
 * interpolated between points and extended beyond the last by the same busbw; below the first
 * point the table holds its first time. A planted fault (a point moved off the line) shows the
 * comparison can fail. */
static void test_table_on_a_line_is_the_nccl_form(void **state)
{
    (void)state;
    const tp_cfg nccl = {.ranks = 8, .lat_s = 9e-6, .busbw_gbps = 475};
    tp_cfg tab = {.ranks = 8, .busbw_gbps = 475, .n_points = 6};
    const double sizes[6] = {2048, 8192, 65536, 100000, 524288, 1048576};
    for (int i = 0; i < 6; i++) {
        tab.pt_bytes[i] = sizes[i];
        tab.pt_s[i] = tp_allreduce_s(&nccl, sizes[i]);
    }
    for (double b = 2048; b < 64e6; b *= 1.37) {
        const double want = tp_allreduce_s(&nccl, b);
        assert_true(fabs(tp_allreduce_s(&tab, b) - want) <= 1e-12 * want);
    }
    assert_true(tp_allreduce_s(&tab, 100) == tab.pt_s[0]);
    tp_cfg bent = tab;
    bent.pt_s[3] *= 1.1;
    assert_true(fabs(tp_allreduce_s(&bent, 90000) - tp_allreduce_s(&nccl, 90000)) > 1e-9);
    /* One rank: no all-reduce, table or not. */
    tab.ranks = 1;
    assert_true(tp_allreduce_s(&tab, 1e6) == 0);
}

/* The shipped table, by hand from its published lines: at a point its time, halfway between two
 * points their mean, beyond 1 MiB the 1 MiB time plus the extra bytes x 14 / 8 at 475 GB/s. */
static void test_shipped_table_by_hand(void **state)
{
    (void)state;
    tp_cfg c = {.ranks = 8};
    assert_int_equal(tp_table_load("models/hw/allreduce-h200x8.ini", "mscclpp_graph", &c), 0);
    assert_int_equal(c.n_points, 10);
    assert_true(fabs(tp_allreduce_s(&c, 1048576) - 14.01e-6) < 1e-15);
    assert_true(fabs(tp_allreduce_s(&c, 786432) - (11.96e-6 + 14.01e-6) / 2) < 1e-15);
    assert_true(fabs(tp_allreduce_s(&c, 12288) - (6.00e-6 + 6.37e-6) / 2) < 1e-15);
    assert_true(fabs(tp_allreduce_s(&c, 2097152) - (14.01e-6 + 1048576 * 14.0 / 8 / 475e9)) < 1e-15);
    tp_cfg n = {.ranks = 8};
    assert_int_equal(tp_table_load("models/hw/allreduce-h200x8.ini", "nccl_graph", &n), 0);
    assert_true(fabs(tp_allreduce_s(&n, 65536) - 19.92e-6) < 1e-15);
}

/* A bad table is one error naming the file, and leaves the config as it was. */
static void expect_table_err(const char *text, const char *curve, double ranks, const char *pattern)
{
    char path[] = "/tmp/test_tp_XXXXXX.ini";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    tp_cfg c = {.ranks = ranks, .lat_s = 1e-5, .busbw_gbps = 100};
    const int rc = tp_table_load(path, curve, &c);
    remove(path);
    if (rc != -1 || !strstr(dh_errmsg(), pattern) || !strstr(dh_errmsg(), path))
        fail_msg("expected an error with '%s' naming the file, got rc %d: %s", pattern, rc, dh_errmsg());
    assert_true(c.n_points == 0 && c.lat_s == 1e-5 && c.busbw_gbps == 100);
}

static void test_bad_tables(void **state)
{
    (void)state;
    const char *head = "[allreduce]\nranks = 8\nbusbw_gbps = 475\n";
    char t[512];
    snprintf(t, sizeof t, "%s[curve.a]\nbytes = 1, 2\ntime_us = 1, 2\n", head);
    expect_table_err(t, "a", 4, "attn_tp = 4");
    expect_table_err(t, "b", 8, "no [curve.b]");
    snprintf(t, sizeof t, "%s[curve.a]\nbytes = 2, 1\ntime_us = 1, 2\n", head);
    expect_table_err(t, "a", 8, "is not above");
    snprintf(t, sizeof t, "%s[curve.a]\nbytes = 1, 2, 3\ntime_us = 1, 2\n", head);
    expect_table_err(t, "a", 8, "3 sizes but 2 times");
    snprintf(t, sizeof t, "%s[curve.a]\nbytes = 1\ntime_us = 1\n", head);
    expect_table_err(t, "a", 8, "at least two");
    snprintf(t, sizeof t, "%s[points]\nbytes = 1, 2\n", head);
    expect_table_err(t, "a", 8, "is not [allreduce] or [curve.NAME]");
    snprintf(t, sizeof t, "%s[curve.a]\nbytes = 1, 2\ntime_us = 1, 2\nlatency_us = 3\n", head);
    expect_table_err(t, "a", 8, "latency_us");
    expect_table_err("[curve.a]\nbytes = 1, 2\ntime_us = 1, 2\n", "a", 8, "ranks");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_is_data_parallel),
        cmocka_unit_test(test_four_ranks_by_hand),
        cmocka_unit_test(test_latent_bytes_not_split),
        cmocka_unit_test(test_allreduce_form),
        cmocka_unit_test(test_table_on_a_line_is_the_nccl_form),
        cmocka_unit_test(test_shipped_table_by_hand),
        cmocka_unit_test(test_bad_tables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
