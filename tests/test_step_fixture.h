/* test_step_fixture.h: the cmocka group fixture of the step-model tests (included by
 * tests/test_step.c, test_tp.c and test_prefill.c): the shipped GLM-5.3 model and the
 * calibrated H200 profile, loaded once per group. */
#ifndef TEST_STEP_FIXTURE_H
#define TEST_STEP_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "sim/hw.h"
#include "sim/model.h"

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

#endif
