/* test_step_fixture.h: the cmocka group fixture of the step-model tests (included by
 * tests/test_step.c, test_tp.c, test_prefill.c, test_moe_tp.c and test_fmoe.c): the shipped GLM-5.3 model and the
 * calibrated H200 profile, loaded once per group. */
#ifndef TEST_STEP_FIXTURE_H
#define TEST_STEP_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/cost.h"
#include "sim/hw.h"
#include "sim/model.h"
#include "sim/step.h"

typedef struct {
    model_cfg model;
    hw_profile hw;
} fixture;

static int setup(void **state)
{
    static fixture f;
    cfg *mc, *hc;
    memset(&f, 0, sizeof f);
    if (cfg_load("models/glm53.ini", &mc) < 0 || model_load(mc, &f.model) < 0 ||
        cfg_load("models/hw/h200.ini", &hc) < 0 || hw_load(hc, &f.hw) < 0) {
        fprintf(stderr, "%s\n", dh_errmsg());
        return -1;
    }
    cfg_free(mc);
    cfg_free(hc);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    model_release(&f->model);
    return 0;
}

/* One micro-batch of n_req decode requests for step_compute_s and friends: k = 2048 rows
 * selected per group and request, idx_rows indexer keys per request, misses rows (and as many
 * pages) missed per group, one row written per request. The caller asserts the model's groups
 * fit (FIXTURE_GROUPS). */
enum { FIXTURE_GROUPS = 64 };
typedef struct {
    double sel[FIXTURE_GROUPS], miss[FIXTURE_GROUPS], pages[FIXTURE_GROUPS], idx[FIXTURE_GROUPS], wr[FIXTURE_GROUPS];
    step_mb m;
} fixture_batch;

static inline void fixture_batch_of(const fixture *f, fixture_batch *b, double n_req, double idx_rows, double misses)
{
    memset(b, 0, sizeof *b);
    for (uint32_t g = 0; g < f->model.n_groups && g < FIXTURE_GROUPS; g++) {
        b->sel[g] = n_req * 2048;
        b->miss[g] = misses;
        b->pages[g] = misses;
        b->idx[g] = n_req * idx_rows;
        b->wr[g] = n_req;
    }
    b->m = (step_mb){.n_req = n_req, .tokens = n_req, .sel = b->sel, .miss = b->miss, .pages = b->pages,
                     .idx_rows = b->idx, .written = b->wr, .window_rows = 0};
}

/* A decode layer's attention rebuilt from the cost form: its group's selected rows (and the
 * window's) at the row bytes, the FLOPs of every head over the attention's TP ranks. */
static inline double fixture_attention_s(const fixture *f, const step_ctx *cx, const step_mb *m, uint32_t l)
{
    const model_kind *k = &f->model.layer[l];
    const int32_t g = f->model.layer_group[l];
    const double n = cx->tp.ranks > 1 ? cx->tp.ranks : 1;
    const double rows = m->sel[g] + (k->window ? m->window_rows : 0);
    return cost_attention_time(&f->hw.cost, rows * k->row_bytes, 2.0 * k->attn_heads * rows * (k->attn_qk_dim + k->attn_v_dim) / n,
                               m->tokens, k->attn_fp8, cx->compute_sms);
}

#endif
