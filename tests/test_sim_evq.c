/* test_sim_evq.c: the event queue against a naive sorted list on random
 * event streams with many equal times, plus a planted fault (ties broken the
 * wrong way) that the comparison must catch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "sim/evq.h"

typedef struct { double t; uint64_t seq; uint32_t a; } naive_ev;

/* The obvious reference: insert into a sorted array (stable: after equal times). */
static void naive_push(naive_ev *l, size_t *n, naive_ev e, int planted_fault)
{
    size_t i = *n;
    while (i > 0 && (planted_fault ? l[i - 1].t >= e.t : l[i - 1].t > e.t)) { l[i] = l[i - 1]; i--; }
    l[i] = e;
    (*n)++;
}

/* Interleave pushes and pops; 1 if heap and reference ever disagree. */
static int run_stream(uint64_t seed, int planted_fault)
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
        if (n == 0 || rng_uniform(&s) < 0.55) {
            /* Times on a coarse grid so that ties are frequent. */
            double t = now + rng_below(&s, 8) * 0.25;
            uint32_t a = rng_u32(&s);
            evq_push(&q, t, 0, a, 0);
            naive_push(l, &n, (naive_ev){ t, seq++, a }, planted_fault);
        } else {
            evq_event e;
            assert_int_equal(evq_pop(&q, &e), 1);
            naive_ev r = l[0];
            memmove(l, l + 1, (n - 1) * sizeof *l);
            n--;
            if (e.time != r.t || e.a != r.a) mismatch = 1;
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
    for (uint64_t seed = 1; seed <= 5; seed++) assert_int_equal(run_stream(seed, 0), 0);
}

static void test_planted_tie_fault_is_caught(void **state)
{
    (void)state;
    assert_int_equal(run_stream(1, 1), 1);
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
        cmocka_unit_test(test_planted_tie_fault_is_caught),
        cmocka_unit_test(test_equal_times_leave_in_push_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
