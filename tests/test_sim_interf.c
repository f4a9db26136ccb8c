/* test_sim_interf.c: the miss fetch's interference with compute (hw.fetch_interference,
 * sim/step.c): a compute task that runs while the fetch is still streaming lengthens by
 * fetch_interference x the overlap.
 *
 * One decode step of GLM-5.3 on the calibrated H200 profile, 16 requests, one micro-batch,
 * run through step_run at several values of the coefficient. The properties, each of which a
 * wrong term breaks: 0 changes nothing (byte-equal times); with misses, the compute busy time
 * grows, by at most coefficient x the fetch's busy time (the overlap cannot exceed the fetch),
 * and it grows with the coefficient; without misses nothing overlaps and nothing changes; the
 * fetch's own time never changes. */
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

typedef struct { double end, compute, fetch; } step_out;

/* One step of 16 requests at 100K context, k rows selected per request and group, miss_rows
 * of them missed, with the given coefficient. */
static step_out one_step(fixture *f, double coef, double miss_rows)
{
    enum { G = 64 };
    const uint32_t ng = f->model.n_groups;
    assert_true(ng <= G);
    double sel[G], miss[G], pages[G], idx[G], wr[G];
    for (uint32_t g = 0; g < ng; g++) {
        sel[g] = 16.0 * 2048;
        miss[g] = miss_rows;
        pages[g] = miss_rows;
        idx[g] = 16.0 * 100000;
        wr[g] = 16;
    }
    step_mb m = {.n_req = 16, .tokens = 16, .sel = sel, .miss = miss, .pages = pages, .idx_rows = idx, .written = wr};
    hw_profile hw = f->hw;
    hw.fetch_interference = coef;
    step_ctx cx = {.model = &f->model, .hw = &hw, .attention_dp = 8, .moe_ep = 8, .compute_sms = hw.sms - hw.fetch_sms,
                   .dense_bytes_per_layer = 188e6};
    res_server gpu, h2d, d2h;
    res_init(&gpu, "gpu");
    res_init(&h2d, "h2d");
    res_init(&d2h, "d2h");
    evq q;
    evq_init(&q);
    step_stats st;
    memset(&st, 0, sizeof st);
    step_out o = {step_run(&cx, &m, 1, 0, &gpu, &h2d, &d2h, &q, &st), st.compute_busy, st.fetch_busy};
    evq_release(&q);
    return o;
}

static void test_interference(void **state)
{
    fixture *f = *state;
    /* The profile's own coefficient is a measured, positive one. */
    assert_true(f->hw.fetch_interference > 0 && f->hw.fetch_interference < 1);

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interference),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
