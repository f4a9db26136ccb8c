/* test_evq.c: the event queue against a naive sorted list on random
 * event streams with many equal times, with and without cancels and reschedules by
 * handle, plus a planted fault (ties broken the wrong way) that the comparison must
 * catch. The re-rating of a resource's work in flight, which moves events through
 * evq_reschedule, is tested in test_res.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "sim/evq.h"

typedef struct { double t; uint64_t seq; uint32_t a, kind; evq_handle h; } naive_ev;

/* The obvious reference: insert into a sorted array (stable: after equal times). */
static void naive_push(naive_ev *l, size_t *n, naive_ev e, int planted_fault)
{
    size_t i = *n;
    while (i > 0 && (planted_fault ? l[i - 1].t >= e.t : l[i - 1].t > e.t)) { l[i] = l[i - 1]; i--; }
    l[i] = e;
    (*n)++;
}

/* The reference order: (time, seq), as the heap's. */
static int naive_cmp(const void *x, const void *y)
{
    const naive_ev *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Interleave pushes and pops (and with moves, a reschedule or a cancel of a random queued
 * event now and then: the reference changes its time or drops it and re-sorts by (time,
 * seq)); 1 if heap and reference ever disagree. */
static int run_stream(uint64_t seed, int planted_fault, int moves)
{
    evq q;
    evq_init(&q);
    naive_ev *l = malloc(20000 * sizeof *l);
    size_t n = 0;
    rng_stream s;
    rng_init(&s, seed, 0, 0, 1);
    double now = 0;
    int mismatch = 0;
    uint64_t seq = 0;
    for (int it = 0; it < 20000; it++) {
        double u = rng_uniform(&s);
        if (moves && n > 0 && u < 0.1) {
            /* Later times on the grid keep ties frequent; a reschedule keeps the sequence. */
            size_t i = rng_below(&s, (uint32_t)n);
            if (u < 0.03) {
                evq_cancel(&q, l[i].h);
                memmove(l + i, l + i + 1, (n - i - 1) * sizeof *l);
                n--;
            } else {
                l[i].t = now + rng_below(&s, 12) * 0.25;
                evq_reschedule(&q, l[i].h, l[i].t);
                qsort(l, n, sizeof *l, naive_cmp);
            }
        } else if (n == 0 || u < 0.55) {
            /* Times on a coarse grid so that ties are frequent. */
            double t = now + rng_below(&s, 8) * 0.25;
            uint32_t a = rng_u32(&s), kind = moves ? rng_below(&s, 2) : 0;
            evq_handle h = evq_push(&q, t, kind, a, 0);
            naive_push(l, &n, (naive_ev){ t, seq++, a, kind, h }, planted_fault);
        } else {
            evq_event e;
            assert_int_equal(evq_pop(&q, &e), 1);
            naive_ev r = l[0];
            memmove(l, l + 1, (n - 1) * sizeof *l);
            n--;
            if (e.time != r.t || e.a != r.a || e.kind != r.kind) mismatch = 1;
            now = e.time;
        }
        if (evq_size(&q) != n) mismatch = 1;
    }
    evq_event e;
    while (evq_pop(&q, &e)) {
        naive_ev r = l[0];
        memmove(l, l + 1, (n - 1) * sizeof *l);
        n--;
        if (e.time != r.t || e.a != r.a) mismatch = 1;
    }
    evq_release(&q);
    free(l);
    return mismatch;
}

static void test_heap_matches_sorted_list(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 5; seed++) assert_int_equal(run_stream(seed, 0, 0), 0);
}

static void test_moves_match_sorted_list(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 5; seed++) assert_int_equal(run_stream(seed, 0, 1), 0);
    /* A rescheduled event keeps its push order among equal times: b, pushed second, moved to
     * a's time, still leaves after a; moved earlier than a, before it. */
    evq q;
    evq_init(&q);
    evq_push(&q, 1.0, 0, 1, 0);
    evq_handle b = evq_push(&q, 3.0, 0, 2, 0);
    evq_reschedule(&q, b, 1.0);
    evq_event e;
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_int_equal(e.a, 1);
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_int_equal(e.a, 2);
    evq_push(&q, 1.0, 0, 1, 0);
    b = evq_push(&q, 3.0, 0, 2, 0);
    evq_reschedule(&q, b, 0.5);
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_int_equal(e.a, 2);
    /* A cancelled event never leaves. */
    evq_cancel(&q, evq_push(&q, 0.25, 0, 3, 0));
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_int_equal(e.a, 1);
    assert_int_equal(evq_pop(&q, &e), 0);
    evq_release(&q);
}

static void test_planted_tie_fault_is_caught(void **state)
{
    (void)state;
    assert_int_equal(run_stream(1, 1, 0), 1);
}

static void test_equal_times_leave_in_push_order(void **state)
{
    (void)state;
    evq q;
    evq_init(&q);
    for (uint32_t i = 0; i < 100; i++) evq_push(&q, 1.0, 0, i, 0);
    evq_event e;
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(evq_pop(&q, &e), 1);
        assert_int_equal(e.a, i);
    }
    assert_int_equal(evq_pop(&q, &e), 0);
    evq_release(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_matches_sorted_list),
        cmocka_unit_test(test_moves_match_sorted_list),
        cmocka_unit_test(test_planted_tie_fault_is_caught),
        cmocka_unit_test(test_equal_times_leave_in_push_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
