/* test_res.c: the resources of sim/res.h: FIFO service, work held in flight with its
 * completion events, and the re-rating of that work beside other work (res_slow), against
 * a brute-force integral over the window, with a planted fault (each slice charged at the
 * next job's weight) that the comparison must catch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "sim/evq.h"
#include "sim/res.h"

static void test_fifo_service(void **state)
{
    (void)state;
    res_server r;
    res_init(&r, "test");
    assert_true(res_submit(&r, 1.0, 2.0, 10) == 3.0);
    assert_true(res_start_at(&r, 2.0) == 3.0 && res_start_at(&r, 4.0) == 4.0);
    assert_true(res_submit(&r, 2.0, 1.0, 5) == 4.0);   /* waits for the first */
    assert_true(res_submit(&r, 6.0, 0.5, 0) == 6.5);   /* idle until submitted */
    assert_true(r.busy == 3.5 && r.bytes == 15 && r.jobs == 3);
    assert_int_equal(res_check(&r, 6.5), 0);
    assert_int_equal(res_check(&r, 3.0), -1);
}

/* Work in flight completes through its events in FIFO order; the array goes when the last
 * job leaves; re-rating with a zero factor or span moves nothing. */
static void test_in_flight_completes(void **state)
{
    (void)state;
    res_server r;
    res_init(&r, "test");
    evq q;
    evq_init(&q);
    for (uint32_t i = 0; i < 40; i++) res_submit_event(&r, &q, 0, 0.25, 1, 1, 1, i, 0);
    assert_true(res_slow(&r, &q, 0, 0, 0.5) == 0 && res_slow(&r, &q, 0, 1, 0) == 0);
    assert_true(r.free_at == 10.0);
    evq_event e;
    for (uint32_t i = 0; i < 40; i++) {
        assert_int_equal(evq_pop(&q, &e), 1);
        assert_int_equal(e.a, i);
        assert_true(e.time == 0.25 * (i + 1));
        res_complete(&r, &e);
    }
    assert_true(r.flight == NULL && r.n_flight == 0);
    evq_release(&q);
}

/* The reference: the jobs in flight after from are one queue of back-to-back work, job i's
 * work over (end[i-1], end[i]] in the original times (an idle gap before it included);
 * each quarter-step slice (x, x + 0.25] inside [from, from + span] is done by the earliest
 * job ending at or after x + 0.25 and adds factor x its weight x 0.25 to every job ending
 * at or after the slice's end. planted_fault charges the slice at the next job's weight. */
static void integral(const double *end, const double *w, uint32_t n, double from, double span, double factor,
                     int planted_fault, double *want)
{
    for (uint32_t i = 0; i < n; i++) want[i] = end[i];
    for (double x = from; x + 0.25 <= from + span + 1e-12; x += 0.25) {
        uint32_t owner = 0;
        while (owner < n && end[owner] < x + 0.25) owner++;
        if (owner == n) continue;
        if (planted_fault && owner + 1 < n) owner++;
        for (uint32_t i = 0; i < n; i++)
            if (end[i] >= x + 0.25) want[i] += factor * w[owner] * 0.25;
    }
}

/* One round: jobs of grid durations and gaps submitted to a resource beside unrelated events
 * (kind 0, which must not move), one re-rating, then every event popped. Grid times, weights
 * and factors keep every sum exact. Returns 1 if the resource and the reference disagree. */
static int round_differs(rng_stream *s, int planted_fault)
{
    enum { N = 24 };
    res_server r;
    res_init(&r, "fetch");
    evq q;
    evq_init(&q);
    double end[N], w[N], want[N], other[N];
    for (uint32_t i = 0; i < N; i++) {
        const double t = r.free_at + rng_below(s, 4) * 0.25, d = (1 + rng_below(s, 6)) * 0.25;
        w[i] = rng_below(s, 4) * 0.5;
        end[i] = res_submit_event(&r, &q, t, d, 0, w[i], 1, i, 0);
        other[i] = rng_below(s, 80) * 0.25;
        evq_push(&q, other[i], 0, i, 0);
    }
    const double from = rng_below(s, 24) * 0.25, span = rng_below(s, 40) * 0.25, factor = (1 + rng_below(s, 4)) * 0.25;
    integral(end, w, N, from, span, factor, planted_fault, want);
    const double free_before = r.free_at, busy_before = r.busy;
    const double moved = res_slow(&r, &q, from, span, factor);
    int differs = moved != (end[N - 1] > from ? want[N - 1] - end[N - 1] : 0);
    differs |= r.free_at != free_before + moved || r.busy != busy_before + moved;
    evq_event e;
    while (evq_pop(&q, &e)) {
        if (e.kind == 0) { differs |= e.time != other[e.a]; continue; }
        differs |= e.time != want[e.a];
        res_complete(&r, &e);
    }
    evq_release(&q);
    res_release(&r);
    return differs;
}

static void test_slow_matches_integral(void **state)
{
    (void)state;
    rng_stream s;
    rng_init(&s, 7, 0, 0, 1);
    for (int round = 0; round < 300; round++) assert_int_equal(round_differs(&s, 0), 0);
}

static void test_planted_weight_fault_is_caught(void **state)
{
    (void)state;
    rng_stream s;
    rng_init(&s, 7, 0, 0, 1);
    int caught = 0;
    for (int round = 0; round < 300; round++) caught |= round_differs(&s, 1);
    assert_int_equal(caught, 1);
}

/* With one weight w, every job after from moves by exactly factor x w x min(end - from,
 * span): the closed form of a uniform slowdown. */
static void test_equal_weights_closed_form(void **state)
{
    (void)state;
    res_server r;
    res_init(&r, "fetch");
    evq q;
    evq_init(&q);
    double end[16];
    for (uint32_t i = 0; i < 16; i++) end[i] = res_submit_event(&r, &q, 0.3 * i, 0.7, 0, 0.8, 1, i, 0);
    const double from = 1.1, span = 3.3, factor = 0.35;
    res_slow(&r, &q, from, span, factor);
    evq_event e;
    while (evq_pop(&q, &e)) {
        const double t = end[e.a];
        const double want = t > from ? t + factor * (0.8 * (t - from < span ? t - from : span)) : t;
        assert_true(e.time == want);
        res_complete(&r, &e);
    }
    evq_release(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_service),
        cmocka_unit_test(test_in_flight_completes),
        cmocka_unit_test(test_slow_matches_integral),
        cmocka_unit_test(test_planted_weight_fault_is_caught),
        cmocka_unit_test(test_equal_weights_closed_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
