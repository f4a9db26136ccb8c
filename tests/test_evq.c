/* test_evq.c: the event queue against a naive sorted list on random
 * event streams with many equal times, with and without evq_stretch of one
 * kind's events, plus a planted fault (ties broken the wrong way) that the
 * comparison must catch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "sim/evq.h"

typedef struct { double t; uint64_t seq; uint32_t a, kind; } naive_ev;

/* The obvious reference: insert into a sorted array (stable: after equal times). */
static void naive_push(naive_ev *l, size_t *n, naive_ev e, int planted_fault)
{
    size_t i = *n;
    while (i > 0 && (planted_fault ? l[i - 1].t >= e.t : l[i - 1].t > e.t)) { l[i] = l[i - 1]; i--; }
    l[i] = e;
    (*n)++;
}

/* The reference stretch: move the kind's events after from, then re-sort by (time, seq). */
static int naive_cmp(const void *x, const void *y)
{
    const naive_ev *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void naive_stretch(naive_ev *l, size_t n, uint32_t kind, double from, double span, double factor)
{
    for (size_t i = 0; i < n; i++)
        if (l[i].kind == kind && l[i].t > from) l[i].t += factor * (l[i].t - from < span ? l[i].t - from : span);
    qsort(l, n, sizeof *l, naive_cmp);
}

/* Interleave pushes and pops (and with stretch, evq_stretch of kind 1 now and then); 1 if heap
 * and reference ever disagree. */
static int run_stream(uint64_t seed, int planted_fault, int stretch)
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
        if (stretch && n > 0 && u < 0.05) {
            /* Quarter-step factors and spans keep stretched times on the grid: ties stay. */
            double span = rng_below(&s, 8) * 0.25, factor = (1 + rng_below(&s, 4)) * 0.25;
            evq_stretch(&q, 1, now, span, factor);
            naive_stretch(l, n, 1, now, span, factor);
        } else if (n == 0 || u < 0.55) {
            /* Times on a coarse grid so that ties are frequent. */
            double t = now + rng_below(&s, 8) * 0.25;
            uint32_t a = rng_u32(&s), kind = stretch ? rng_below(&s, 2) : 0;
            evq_push(&q, t, kind, a, 0);
            naive_push(l, &n, (naive_ev){ t, seq++, a, kind }, planted_fault);
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

static void test_stretch_matches_sorted_list(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 5; seed++) assert_int_equal(run_stream(seed, 0, 1), 0);
    /* A stretch of nothing (factor or span 0) changes no event. */
    evq q;
    evq_init(&q);
    evq_push(&q, 2.0, 1, 7, 0);
    evq_stretch(&q, 1, 0.0, 0.0, 0.5);
    evq_stretch(&q, 1, 0.0, 1.0, 0.0);
    evq_event e;
    assert_int_equal(evq_pop(&q, &e), 1);
    assert_true(e.time == 2.0);
    evq_release(&q);
}

/* evq_stretch_weighted against a brute-force integral: the kind's events after from are one
 * queue of back-to-back work, event i's work over (t[i-1], t[i]] in the original times; each
 * quarter-step slice of it inside [from, from + span] adds factor x its event's weight x 0.25.
 * Grid times, weights and factors keep every sum exact. */
static double weight_of(const void *ctx, uint32_t a, uint32_t b)
{
    (void)ctx;
    (void)b;
    return (a % 4) * 0.5;
}

static void test_weighted_stretch_matches_integral(void **state)
{
    (void)state;
    rng_stream s;
    rng_init(&s, 7, 0, 0, 1);
    for (int round = 0; round < 200; round++) {
        evq q;
        evq_init(&q);
        enum { N = 24 };
        double t[N], want[N];
        uint32_t kind[N];
        double from = rng_below(&s, 8) * 0.25, span = rng_below(&s, 24) * 0.25, factor = (1 + rng_below(&s, 4)) * 0.25;
        for (uint32_t i = 0; i < N; i++) {
            t[i] = rng_below(&s, 40) * 0.25;
            kind[i] = rng_below(&s, 3) ? 1 : 0;
            evq_push(&q, t[i], kind[i], i, 0);
        }
        /* The reference: for each quarter-step slice (x, x + 0.25] inside the window, the event
         * doing that work is the earliest of the kind at or after x + 0.25 (ties: the first
         * pushed); every event at or after the slice's end moves by factor x its weight. */
        for (uint32_t i = 0; i < N; i++) want[i] = t[i];
        for (double x = from; x + 0.25 <= from + span + 1e-12; x += 0.25) {
            int owner = -1;
            for (uint32_t i = 0; i < N; i++)
                if (kind[i] == 1 && t[i] >= x + 0.25 && (owner < 0 || t[i] < t[owner])) owner = (int)i;
            if (owner < 0) continue;
            double add = factor * weight_of(NULL, (uint32_t)owner, 0) * 0.25;
            for (uint32_t i = 0; i < N; i++)
                if (kind[i] == 1 && t[i] >= x + 0.25) want[i] += add;
        }
        double last_want = 0, last_t = -1;
        for (uint32_t i = 0; i < N; i++)
            if (kind[i] == 1 && t[i] > from && t[i] >= last_t) { last_t = t[i]; last_want = want[i] - t[i]; }
        double moved = evq_stretch_weighted(&q, 1, from, span, factor, weight_of, NULL);
        assert_true(moved == last_want);
        evq_event e;
        while (evq_pop(&q, &e)) assert_true(e.time == want[e.a]);
        evq_release(&q);
    }
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
        cmocka_unit_test(test_stretch_matches_sorted_list),
        cmocka_unit_test(test_weighted_stretch_matches_integral),
        cmocka_unit_test(test_planted_tie_fault_is_caught),
        cmocka_unit_test(test_equal_times_leave_in_push_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
