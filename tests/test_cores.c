/* test_cores.c: idle worker threads lent to a job's parallel section (common/cores.h), and
 * the admission's stream opens on them (pol_open_groups, sim/pol.c).
 *
 * The lending: a pool with more threads than jobs lends the rest to its jobs at once; a
 * thread is lent only while its pool runs; nothing is lent without a pool. The opens: every
 * policy that declares open_parallel opens a request's groups on lent threads with results
 * equal, position by position, to the same opens on one thread; a failing group gives the
 * error of the lowest group that failed, on any number of threads, and leaves nothing open
 * (the sanitized build's leak check sees what a test leaves). A planted fault (one group's
 * budget changed in the parallel run) shows the comparison can fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cores.h"
#include "common/dh_err.h"
#include "sim/model.h"
#include "sim/pol.h"
#include "traces/gen.h"

#define NREQ 2
#define NG 8
#define K 256
#define NPOS 64

/* ---- the lending ---- */

typedef struct {
    int next, borrowed;
} one_job;

static void *borrow_job(void *arg)
{
    one_job *j = arg;
    if (__atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED) == 0) {
        j->borrowed = cores_borrow(100);
        cores_give_back(j->borrowed);
    }
    return NULL;
}

static void test_pool_lends_what_its_jobs_cannot_use(void **state)
{
    (void)state;
    assert_int_equal(cores_borrow(8), 0); /* no pool: nothing lent */
    one_job j = {0, -1};
    cores_run_pool(4, 1, borrow_job, &j);
    /* One job on a pool of four: the three threads it cannot use, lent from the start (the
     * one worker's own thread is lent only when it has returned). */
    assert_int_equal(j.borrowed, 3);
    assert_int_equal(cores_borrow(8), 0); /* the pool took back all it lent */
    one_job k = {0, -1};
    cores_run_pool(1, 1, borrow_job, &k);
    assert_int_equal(k.borrowed, 0);
    assert_int_equal(cores_borrow(8), 0);
}

/* ---- the opens ---- */

typedef struct {
    trace_shape sh;
    sel_source *src;
    model_cfg m;
    model_group grp[NG];
} world;

static void world_init(world *w)
{
    memset(w, 0, sizeof *w);
    gen_params *p;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(trace_shape_uniform(&w->sh, "t", NREQ, NG, 1, K, 3000, NPOS), 0);
    if (gen_source_new(p, &w->sh, 7, 16, &w->src) < 0) fail_msg("%s", dh_errmsg());
    gen_params_free(p);
    w->m.n_groups = NG;
    w->m.group = w->grp;
    for (uint32_t g = 0; g < NG; g++)
        w->grp[g] = (model_group){ .first_layer = g, .n_layers = 1, .k = K, .compress = 1, .kv_bytes_per_row = 1000.0 };
}

static void world_release(world *w)
{
    sel_source_free(w->src);
    trace_shape_release(&w->sh);
}

/* Open request req's groups with `lend` threads lent (none: one thread), and read every
 * position of every group into out[g][pos]. */
static void open_and_read(const pol_ops *pol, pol_env *e, world *w, uint32_t req, int lend, pol_out out[NG][NPOS])
{
    pol_stream ps[NG];
    double rpr[NG];
    for (uint32_t g = 0; g < NG; g++) rpr[g] = 37.0;
    belady_work *bw = belady_work_new();
    pol_open_args oa = { .src = w->src, .sh = &w->sh, .req = req, .horizon = NPOS, .bw = bw };
    cores_lend(lend);
    int rc = pol_open_groups(pol, e, ps, NG, &oa, rpr);
    assert_int_equal(cores_borrow(100), lend); /* every borrowed thread was given back */
    if (rc < 0) fail_msg("%s", dh_errmsg());
    for (uint32_t g = 0; g < NG; g++) {
        for (uint32_t p = 0; p < NPOS; p++)
            if (pol->next(&ps[g], &w->sh, &out[g][p]) < 0) fail_msg("%s", dh_errmsg());
        pol->close(&ps[g]);
    }
    belady_work_free(bw);
}

static int same_outputs(pol_out a[NG][NPOS], pol_out b[NG][NPOS], char *why, size_t n)
{
    for (uint32_t g = 0; g < NG; g++)
        for (uint32_t p = 0; p < NPOS; p++) {
            const pol_out *x = &a[g][p], *y = &b[g][p];
            if (x->nrows != y->nrows || x->n_sel != y->n_sel || x->hits != y->hits || x->misses != y->misses ||
                x->written != y->written || x->evicted != y->evicted || x->resident != y->resident ||
                x->miss_regions != y->miss_regions) {
                snprintf(why, n, "group %u, position %u: hits %u/%u, misses %u/%u, evicted %u/%u", g, p, x->hits, y->hits,
                         x->misses, y->misses, x->evicted, y->evicted);
                return 0;
            }
        }
    return 1;
}

static void env_of(pol_env *e, world *w)
{
    pol_env_init(e, &w->m, 1.5, 0);
    e->sgl = (pol_sglang_cfg){ .device_buffer_size = 600, .page_size = 64, .order = SGLHB_ORDER_HASHED, .order_seed = 5 };
}

static void test_parallel_opens_equal_one_thread(void **state)
{
    (void)state;
    world w;
    world_init(&w);
    static pol_out one[NG][NPOS], many[NG][NPOS];
    int checked = 0;
    for (int k = 0; k < POL_N; k++) {
        const pol_ops *pol = pol_ops_of((pol_kind)k);
        if (!pol || !pol->open_parallel) continue;
        for (uint32_t req = 0; req < NREQ; req++) {
            pol_env e;
            env_of(&e, &w);
            open_and_read(pol, &e, &w, req, 0, one);
            open_and_read(pol, &e, &w, req, 3, many);
            char why[256];
            if (!same_outputs(one, many, why, sizeof why)) fail_msg("%s, request %u: %s", pol->name, req, why);
            pol_env_release(&e);
        }
        checked++;
    }
    assert_true(checked >= 3); /* hisparse, oracle, sglang-hisparse */
    world_release(&w);
}

static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    world w;
    world_init(&w);
    static pol_out one[NG][NPOS], many[NG][NPOS];
    const pol_ops *pol = pol_ops_of(POL_HISPARSE);
    pol_env e;
    env_of(&e, &w);
    open_and_read(pol, &e, &w, 0, 0, one);
    e.budget[5] -= 40; /* a parallel open that read another budget for one group */
    open_and_read(pol, &e, &w, 0, 3, many);
    char why[256];
    assert_false(same_outputs(one, many, why, sizeof why));
    pol_env_release(&e);
    world_release(&w);
}

/* A source whose streams of groups 3 and 6 fail to open; the others are the generator's. */
static sel_source *inner;
static int failing_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out)
{
    (void)src;
    if (group == 3 || group == 6) return dh_err("planted: group %u cannot be opened", group);
    return sel_open(inner, req, group, out);
}
static void no_free(sel_source *src) { (void)src; }
static const sel_source_ops failing_ops = { failing_open, NULL, NULL, no_free };

static void test_failure_is_the_lowest_group_on_any_thread_count(void **state)
{
    (void)state;
    world w;
    world_init(&w);
    inner = w.src;
    sel_source bad = { .ops = &failing_ops, .meta = *sel_meta(w.src) };
    pol_stream ps[NG];
    double rpr[NG] = {0};
    belady_work *bw = belady_work_new();
    for (int k = 0; k < POL_N; k++) {
        const pol_ops *pol = pol_ops_of((pol_kind)k);
        if (!pol || !pol->open_parallel) continue;
        for (int lend = 0; lend <= 7; lend += 7) {
            pol_env e;
            env_of(&e, &w);
            pol_open_args oa = { .src = &bad, .sh = &w.sh, .req = 1, .horizon = NPOS, .bw = bw };
            cores_lend(lend);
            assert_int_equal(pol_open_groups(pol, &e, ps, NG, &oa, rpr), -1);
            assert_int_equal(cores_borrow(100), lend);
            if (!strstr(dh_errmsg(), "group 3 cannot"))
                fail_msg("%s on %d lent threads: the error is '%s'", pol->name, lend, dh_errmsg());
            pol_env_release(&e);
        }
    }
    belady_work_free(bw);
    world_release(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_lends_what_its_jobs_cannot_use),
        cmocka_unit_test(test_parallel_opens_equal_one_thread),
        cmocka_unit_test(test_planted_fault_is_caught),
        cmocka_unit_test(test_failure_is_the_lowest_group_on_any_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
