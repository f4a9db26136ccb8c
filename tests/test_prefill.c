/* test_prefill.c: colocated chunked prefill (sim/prefill.h).
 *
 * Differential: a prefill iteration's cost against a slow reference that walks every query
 * token of every span and every layer (its rows min(k, p / compress + 1), its indexer keys
 * p / compress + 1) instead of the closed-form sums; the iteration's parts add up to its
 * compute; the prompt KV written is tokens x the kv-owning layers' row bytes. A mixed step (a
 * decode batch with a chunk) lasts the decode step alone plus the chunk, exactly: the chunk is
 * queued on the compute server before the layer graph. A rank prefilling alone (dp_hold =
 * disjoint) has its experts take its chunk's share only. Planted faults (the reference without
 * the indexer; the lone rank's experts with every rank's chunk) must differ. */
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
#include "sim/evq.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/prefill.h"
#include "sim/res.h"
#include "sim/step.h"

#include "tests/test_step_fixture.h"

static step_ctx ctx_of(const fixture *f)
{
    step_ctx cx = {.model = &f->model, .hw = &f->hw, .attention_dp = 8, .moe_ep = 8, .compute_sms = f->hw.sms,
                   .dense_bytes_per_layer = 56e6};
    const double lat[2] = {22.8e-6, 22.4e-6}, gbps[2] = {691, 851};
    for (int p = 0; p < 2; p++) { cx.a2a_lat_s[p] = lat[p]; cx.a2a_gbps[p] = gbps[p]; }
    cx.a2a_ranks_per_token = cost_a2a_ranks(f->model.experts, f->model.experts_per_token, 8);
    return cx;
}

/* The measured prefill GEMM rate at m, written from the profile's description (hw.h): linear
 * in log(m) between the table's points, its end values beyond them. */
static double table_rate(const cost_table *t, double m)
{
    if (m <= t->x[0]) return t->y[0];
    if (m >= t->x[t->n - 1]) return t->y[t->n - 1];
    size_t i = 1;
    while (t->x[i] < m) i++;
    const double u = (log(m) - log(t->x[i - 1])) / (log(t->x[i]) - log(t->x[i - 1]));
    return t->y[i - 1] + u * (t->y[i] - t->y[i - 1]);
}

/* The data-parallel ranks prefilling at once (step_ctx.prefill_ranks; 0: attention_dp). */
static double ranks_of(const step_ctx *cx) { return cx->prefill_ranks > 0 ? cx->prefill_ranks : cx->attention_dp; }

/* A layer's GEMMs in the reference (prefill.h): with the profile's prefill table, this rank's
 * non-expert FLOPs (all but k experts of expert_bytes / bytes per parameter, per token) at
 * M = tokens, and the expert FLOPs this GPU computes, its experts' share of the chunks of the
 * pr ranks prefilling at once (tokens x pr x k / ep rows; the decode tokens beside them only
 * set the rows' rate), at the rate of all its rows; the weights at weight_bw as the floor,
 * plus the layer's fixed cost; without it the GEMM form. */
static double ref_gemm(const fixture *f, const step_ctx *cx, int moe, double w, double tokens, double dec)
{
    const model_cfg *md = &f->model;
    const double flops = 2.0 * md->active_params / md->n_layers * tokens, pr = ranks_of(cx);
    if (!f->hw.prefill_gemm.n) return cost_gemm_time(&f->hw.cost, w, flops, 1, cx->compute_sms);
    const double per_row = 2.0 * md->expert_bytes / md->quant_bytes_per_param;
    const double own = moe ? per_row * md->experts_per_token * tokens : 0;
    const double mine = moe ? per_row * tokens * pr * md->experts_per_token / cx->moe_ep : 0;
    const double rows = (tokens * pr + dec) * md->experts_per_token / cx->moe_ep;
    const double tf = (flops - own) / table_rate(&f->hw.prefill_gemm, tokens) + mine / table_rate(&f->hw.prefill_expert, rows);
    return f->hw.cost.gemm.fixed_s + fmax(w / f->hw.cost.gemm.bw, tf);
}

/* The slow reference: token by token. with_indexer 0 is the planted fault. */
static double reference(const fixture *f, const step_ctx *cx, const prefill_span *sp, uint32_t n, double dec,
                        int with_indexer, double *written)
{
    const model_cfg *md = &f->model;
    double t = 0, tokens = 0;
    *written = 0;
    for (uint32_t i = 0; i < n; i++) tokens += sp[i].tokens;
    for (uint32_t l = 0; l < md->n_layers; l++) {
        const model_kind *k = &md->layer[l];
        const int32_t g = md->layer_group[l];
        double rows = 0, keys = 0, macs = 0;
        for (uint32_t i = 0; i < n; i++)
            for (double p = sp[i].start; p < sp[i].start + sp[i].tokens; p++) {
                if (g < 0) { rows += fmin(k->window, p + 1); continue; }
                const double c = md->group[g].compress, ctx = floor(p / c) + 1;
                rows += fmin(md->group[g].k, ctx);
                if (k->select == MODEL_SELECT_OWN) macs += ctx * k->indexer_heads * k->indexer_dim;
                if (g >= 0 && k->kv_own && fmod(p + 1, c) == 0) *written += k->row_bytes;
            }
        for (uint32_t i = 0; i < n; i++)
            if (g >= 0 && k->select == MODEL_SELECT_OWN)
                keys += floor((sp[i].start + sp[i].tokens - 1) / md->group[g].compress) + 1;
        const double ab = rows * k->row_bytes, af = 2.0 * k->attn_heads * rows * (k->attn_qk_dim + k->attn_v_dim);
        /* The prefill kernel's rate when the profile gives one: FLOPs at it, bytes at hbm_bw. */
        if (f->hw.prefill_attn_flops > 0)
            t += f->hw.cost.attn.launch_s + fmax(ab / f->hw.cost.roof.hbm_bw, af / f->hw.prefill_attn_flops);
        else
            t += cost_attention_time(&f->hw.cost, ab, af, tokens, k->attn_fp8, cx->compute_sms);
        if (with_indexer && macs > 0)
            t += cost_roofline_time(&f->hw.cost.roof, keys * k->indexer_key_bytes, 2 * macs, 1, cx->compute_sms);
        double w = cx->dense_bytes_per_layer;
        if (k->moe)
            w += md->experts / cx->moe_ep * (1 - pow(1 - md->experts_per_token / md->experts, tokens * ranks_of(cx) + dec)) *
                 md->expert_bytes;
        t += ref_gemm(f, cx, k->moe, w, tokens, dec);
        if (k->moe)
            for (int p = 0; p < 2; p++)
                t += cx->a2a_lat_s[p] + tokens * cx->a2a_ranks_per_token *
                                            (p ? md->moe_combine_bytes : md->moe_dispatch_bytes) / (cx->a2a_gbps[p] * 1e9);
    }
    return t;
}

/* One rank's prefill attention under TP attention (prefill.h prefill_rank_heads): heads /
 * attn_tp, padded up to prefill_attn_head_multiple. The reference walks every query token's
 * rows and charges the FLOPs of the padded heads at the prefill kernel's rate (made the
 * binding bound here), the rows' bytes at hbm_bw; a multiple of 1 is the plain split. */
static double ref_attention(const fixture *f, const hw_profile *hw, const prefill_span *sp, double heads_per_rank)
{
    const model_cfg *md = &f->model;
    double t = 0;
    for (uint32_t l = 0; l < md->n_layers; l++) {
        const model_kind *k = &md->layer[l];
        const int32_t g = md->layer_group[l];
        double rows = 0;
        for (double p = sp->start; p < sp->start + sp->tokens; p++)
            rows += g < 0 ? fmin(k->window, p + 1) : fmin(md->group[g].k, floor(p / md->group[g].compress) + 1);
        const double af = 2.0 * heads_per_rank * rows * (k->attn_qk_dim + k->attn_v_dim);
        t += hw->cost.attn.launch_s + fmax(rows * k->row_bytes / hw->cost.roof.hbm_bw, af / hw->prefill_attn_flops);
    }
    return t;
}

static void test_tp_heads_padded(void **state)
{
    fixture *f = *state;
    hw_profile hw = f->hw;
    hw.prefill_attn_flops = 2e11; /* slow enough that the FLOPs bind */
    step_ctx cx = ctx_of(f);
    cx.hw = &hw;
    cx.attention_dp = 1;
    cx.tp.ranks = 8;
    cx.tp.lat_s = 10e-6;
    cx.tp.busbw_gbps = 300;
    const prefill_span sp = {0, 3000};
    const double h = f->model.layer[f->model.n_layers - 1].attn_heads / 8.0;
    prefill_parts plain, padded;
    cx.tp.prefill_head_multiple = 1;
    prefill_iter_s(&cx, &sp, 1, 0, &plain, NULL);
    cx.tp.prefill_head_multiple = 64;
    prefill_iter_s(&cx, &sp, 1, 0, &padded, NULL);
    const double want_plain = ref_attention(f, &hw, &sp, h), want_pad = ref_attention(f, &hw, &sp, ceil(h / 64) * 64);
    assert_true(fabs(plain.attention - want_plain) <= 1e-9 * want_plain);
    assert_true(fabs(padded.attention - want_pad) <= 1e-9 * want_pad);
    assert_true(padded.attention > 1.5 * plain.attention); /* the padding is charged */
    assert_true(prefill_rank_heads(&cx, 64) == 64 && prefill_rank_heads(&cx, 1024) == 128);
    cx.tp.prefill_head_multiple = 1;
    assert_true(prefill_rank_heads(&cx, 64) == 8);
}

static void test_iteration_against_reference(void **state)
{
    fixture *f = *state;
    const step_ctx cx = ctx_of(f);
    /* A prompt's first chunk, a chunk crossing k = 2048 rows, the tail of a long prompt. */
    const prefill_span sp[3] = {{0, 700}, {1800, 500}, {60000, 24}};
    prefill_parts P;
    double wr;
    const double got = prefill_iter_s(&cx, sp, 3, 128, &P, NULL);
    const double want = reference(f, &cx, sp, 3, 128, 1, &wr);
    assert_true(fabs(got - want) <= 1e-9 * want);
    assert_true(fabs(P.written - wr) <= 1e-9 * wr);
    assert_true(P.tokens == 1224);
    assert_true(fabs(P.attention + P.indexer + P.gemm + P.comm - P.compute) <= 1e-9 * P.compute);
    /* The planted fault is seen. */
    assert_true(fabs(got - reference(f, &cx, sp, 3, 128, 0, &wr)) > 1e-6 * want);
    /* Nothing to prefill costs nothing. */
    const prefill_span none = {5, 0};
    assert_true(prefill_iter_s(&cx, &none, 1, 0, NULL, NULL) == 0);
}

/* The measured table at its own points: a dense layer's GEMMs at M = 2048 tokens take their
 * FLOPs over the table's projection rate at 2048 (models/hw/h200.ini: 1226e12), a MoE
 * layer's experts at 8 DP ranks x 2048 tokens x 8 / 8 = 16384 rows the experts' rate there
 * (1409e12); without the table the GEMM form (cost_gemm_time) as before. */
static void test_gemm_table_known_answer(void **state)
{
    fixture *f = *state;
    const step_ctx cx = ctx_of(f);
    const model_cfg *md = &f->model;
    assert_true(f->hw.prefill_gemm.n == 5 && f->hw.prefill_gemm.x[1] == 2048 && f->hw.prefill_gemm.y[1] == 1226e12);
    const double flops = 2.0 * md->active_params / md->n_layers * 2048;
    const double dense = prefill_gemm_s(&cx, 0, 0, flops, 2048, 0);
    assert_true(fabs(dense - (f->hw.cost.gemm.fixed_s + flops / 1226e12)) <= 1e-12 * dense);
    const double fe = 2.0 * 8 * md->expert_bytes / md->quant_bytes_per_param * 2048;
    const double moe = prefill_gemm_s(&cx, 1, 0, flops, 2048, 0);
    assert_true(fabs(moe - (f->hw.cost.gemm.fixed_s + (flops - fe) / 1226e12 + fe / 1409e12)) <= 1e-12 * moe);
    /* Weights larger than the tensor time: the streaming floor. */
    const double w = 1e10;
    assert_true(fabs(prefill_gemm_s(&cx, 0, w, flops, 2048, 0) - (f->hw.cost.gemm.fixed_s + w / f->hw.cost.gemm.bw)) <= 1e-15);
    /* The prefill attention: FLOPs at the published 640 TFLOP/s (models/hw/h200.ini), the
     * rows' bytes at hbm_bw when they take longer, plus the attention's launch. */
    assert_true(f->hw.prefill_attn_flops == 640e12);
    const double la = f->hw.cost.attn.launch_s;
    assert_true(fabs(prefill_attention_s(&cx, 1e6, 6.4e12, 1, 0) - (la + 0.01)) <= 1e-12);
    assert_true(fabs(prefill_attention_s(&cx, 4.8e10, 6.4e9, 1, 0) - (la + 0.01)) <= 1e-12);
    /* No table: the decode GEMM form. */
    hw_profile bare = f->hw;
    bare.prefill_gemm.n = bare.prefill_expert.n = 0;
    step_ctx c2 = cx;
    c2.hw = &bare;
    assert_true(prefill_gemm_s(&c2, 1, 3e8, flops, 2048, 0) == cost_gemm_time(&bare.cost, 3e8, flops, 1, cx.compute_sms));
}

/* dp_hold = disjoint: a rank prefilling alone beside the others' decode batches. Its experts'
 * rows are its chunk's share and the decode tokens (prefill_ranks 1), the iteration against the
 * reference and shorter than the lockstep one of the same chunk, whose experts take every
 * rank's chunk; the planted fault (the lone iteration costed with every rank's chunk in the
 * experts) is the lockstep figure and must differ. */
static void test_lone_rank_iteration(void **state)
{
    fixture *f = *state;
    step_ctx lock = ctx_of(f), lone = ctx_of(f);
    lone.prefill_ranks = 1;
    const prefill_span sp = {4096, 1024};
    const double dec = 7 * 9; /* seven other ranks decoding nine requests each */
    double wr;
    const double got = prefill_iter_s(&lone, &sp, 1, dec, NULL, NULL), want = reference(f, &lone, &sp, 1, dec, 1, &wr);
    assert_true(fabs(got - want) <= 1e-9 * want);
    const double full = prefill_iter_s(&lock, &sp, 1, 0, NULL, NULL);
    assert_true(fabs(full - reference(f, &lock, &sp, 1, 0, 1, &wr)) <= 1e-9 * full);
    assert_true(got < full);
    step_ctx planted = lone;
    planted.prefill_ranks = 8;
    assert_true(fabs(got - reference(f, &planted, &sp, 1, dec, 1, &wr)) > 1e-6 * got);
}

static void test_written_is_prompt_kv(void **state)
{
    fixture *f = *state;
    const step_ctx cx = ctx_of(f);
    double per_token = 0;
    for (uint32_t l = 0; l < f->model.n_layers; l++)
        if (f->model.layer_group[l] >= 0 && f->model.layer[l].kv_own) per_token += f->model.layer[l].row_bytes;
    const prefill_span sp = {4096, 1024};
    prefill_parts P;
    prefill_iter_s(&cx, &sp, 1, 0, &P, NULL);
    assert_true(fabs(P.written - 1024 * per_token) <= 1e-9 * P.written);
}

/* A mixed step: the decode step's layer graph with the chunk queued before it. */
static double decode_step(const fixture *f, step_ctx *cx, double pre)
{
    enum { G = 64 };
    double sel[G] = {0}, zero[G] = {0}, idx[G] = {0}, wr[G] = {0};
    for (uint32_t g = 0; g < f->model.n_groups; g++) { sel[g] = 16 * 2048; idx[g] = 16 * 8192; wr[g] = 16; }
    step_mb m = {.n_req = 16, .tokens = 16, .sel = sel, .miss = zero, .pages = zero, .idx_rows = idx, .written = wr};
    res_server srv[3];
    for (int i = 0; i < 3; i++) res_init(&srv[i], "s");
    evq q;
    evq_init(&q);
    step_stats st = {0};
    cx->pre_s = pre;
    const double end = step_run(cx, &m, 1, 0, &srv[0], &srv[1], &srv[2], &q, &st);
    cx->pre_s = 0;
    evq_release(&q);
    for (int i = 0; i < 3; i++) res_release(&srv[i]);
    return end;
}

static void test_mixed_step_is_sum_of_parts(void **state)
{
    fixture *f = *state;
    step_ctx cx = ctx_of(f);
    const prefill_span sp = {2048, 1008};
    const double chunk = prefill_iter_s(&cx, &sp, 1, 16 * 8, NULL, NULL);
    const double alone = decode_step(f, &cx, 0), mixed = decode_step(f, &cx, chunk);
    assert_true(chunk > 0);
    assert_true(fabs(mixed - (alone + chunk)) <= 1e-12 * mixed);
}

static void expect_err(const char *text, const char *want)
{
    cfg *c;
    prefill_cfg p;
    assert_int_equal(cfg_load_string("inst.ini", text, &c), 0);
    int rc = prefill_config_load(c, &p);
    if (rc == 0 || !strstr(dh_errmsg(), want) || !strstr(dh_errmsg(), "inst.ini"))
        fail_msg("expected an error containing '%s', got rc %d: '%s'", want, rc, dh_errmsg());
    cfg_free(c);
}

static void test_config(void **state)
{
    (void)state;
    cfg *c;
    prefill_cfg p;
    assert_int_equal(cfg_load_string("inst.ini", "[instance]\nx = 1\n", &c), 0);
    assert_int_equal(prefill_config_load(c, &p), 0);
    assert_int_equal(p.mode, PREFILL_DISAGG);
    cfg_free(c);
    assert_int_equal(cfg_load_string("inst.ini", "[prefill]\nmode = chunked\nchunk_tokens = 1024\nmixing = mixed\n", &c), 0);
    assert_int_equal(prefill_config_load(c, &p), 0);
    assert_true(p.mode == PREFILL_CHUNKED && p.chunk_tokens == 1024 && p.mixing == PREFILL_MIXED);
    cfg_free(c);
    expect_err("[prefill]\nmode = colocated\n", "mode = 'colocated'");
    expect_err("[prefill]\nmode = chunked\n", "chunk_tokens");
    expect_err("[prefill]\nchunk_tokens = 512\n", "mode = disaggregated");
    expect_err("[prefill]\nmode = chunked\nchunk_tokens = 512\nmixing = both\n", "mixing = 'both'");
    expect_err("[prefill]\nmode = chunked\nchunk_tokens = 512\ndp_hold = sometimes\n", "dp_hold");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iteration_against_reference),
        cmocka_unit_test(test_tp_heads_padded),
        cmocka_unit_test(test_written_is_prompt_kv),
        cmocka_unit_test(test_lone_rank_iteration),
        cmocka_unit_test(test_gemm_table_known_answer),
        cmocka_unit_test(test_mixed_step_is_sum_of_parts),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
