/* test_rowmap.c: the row map (sim/rowmap.c) against a plain reference, a
 * direct array over the rows a test draws from (present, state, value per
 * row). Random inserts, lookups, updates and removals, in phases that grow
 * the map through several doublings and shrink it again, over rows that are
 * clustered (a stream's rows: 0 .. 2^18) and rows spread over the whole
 * 32-bit range; after every operation the touched row agrees, and at
 * intervals every row of the universe and every slot of the table are
 * checked (present rows found with their state and value, absent ones not
 * found, no slot holding a row the reference lacks, the count). A planted
 * fault (removal that empties the slot without the backward shift, as a
 * naive open-addressing delete would) shows the check can fail. The dense
 * layout (slot = row) runs the same workloads over the clustered rows. The
 * memory bound is checked too: the table stays within a small factor of
 * the rows held at the peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/rowmap.h"
#include "test_rand.h"

#define UNIVERSE (1u << 18)

typedef struct {
    uint8_t *present, *state; /* [UNIVERSE] */
    uint64_t *val;            /* [UNIVERSE] */
    uint32_t count;
} ref_map;

/* The row of universe index i: clustered (the index itself) or spread over
 * the 32-bit range (a stride below 2^32 / UNIVERSE, never ROWMAP_NONE). */
static uint32_t row_of(uint32_t i, int spread) { return spread ? i * 16381u + 7u : i; }

static void ref_init(ref_map *r)
{
    r->present = calloc(UNIVERSE, 1);
    r->state = calloc(UNIVERSE, 1);
    r->val = calloc(UNIVERSE, sizeof *r->val);
    r->count = 0;
}

static void ref_free(ref_map *r) { free(r->present); free(r->state); free(r->val); }

static uint64_t rnd64(void) { return ((uint64_t)rnd(UINT32_MAX) << 32) | rnd(UINT32_MAX); }

/* Every row of the universe and every slot of the table; returns the
 * disagreements (0: the map is the reference). */
static uint32_t full_check(const rowmap *m, const ref_map *r, int spread)
{
    uint32_t bad = 0, occupied = 0;
    for (uint32_t i = 0; i < UNIVERSE; i++) {
        const rowmap_ent *e = rowmap_find(m, row_of(i, spread));
        if (r->present[i]) bad += !e || e->state != r->state[i] || e->val != r->val[i];
        else bad += e != NULL;
    }
    for (uint32_t s = 0; s < m->cap; s++) {
        const rowmap_ent *e = &m->ent[s];
        if (e->row == ROWMAP_NONE) continue;
        occupied++;
        uint32_t i = spread ? (e->row - 7u) / 16381u : e->row;
        bad += i >= UNIVERSE || row_of(i, spread) != e->row || !r->present[i];
    }
    bad += occupied != r->count;
    bad += m->count != r->count;
    return bad;
}

/* One random operation on index i; returns disagreements on the touched
 * row. naive_remove: the planted fault. */
static uint32_t random_op(rowmap *m, ref_map *r, uint32_t i, int spread, uint32_t insert_pct, int naive_remove)
{
    uint32_t row = row_of(i, spread), bad = 0, op = rnd(100);
    if (op < insert_pct) {
        int added = -1;
        rowmap_ent *e = rowmap_insert(m, row, &added);
        bad += e == NULL || e->row != row;
        if (!e) return bad + 1;
        bad += added != !r->present[i];
        if (r->present[i]) bad += e->state != r->state[i] || e->val != r->val[i];
        else bad += e->state != 0 || e->val != 0;
        if (!r->present[i]) r->count++;
        r->present[i] = 1;
        e->state = r->state[i] = (uint8_t)rnd(256);
        e->val = r->val[i] = rnd64();
    } else if (op < insert_pct + 15) {
        /* Lookup and update in place. */
        rowmap_ent *e = rowmap_find(m, row);
        bad += (e != NULL) != r->present[i];
        if (e && r->present[i]) {
            bad += e->state != r->state[i] || e->val != r->val[i];
            e->val = r->val[i] = rnd64();
        }
    } else {
        rowmap_ent *e = rowmap_find(m, row);
        bad += (e != NULL) != r->present[i];
        if (e) {
            if (naive_remove) { e->row = ROWMAP_NONE; m->count--; }
            else rowmap_remove_ent(m, e);
        }
        if (r->present[i]) r->count--;
        r->present[i] = 0;
        bad += rowmap_find(m, row) != NULL;
    }
    return bad;
}

/* Phases: grow to about `peak` rows (75 % inserts), shrink (25 %), grow
 * again; indices drawn from a window that slides as a stream's context
 * does, plus a share over the whole universe. */
static uint32_t run_workload(uint64_t seed, int spread, uint32_t peak, int naive_remove, uint32_t *max_cap)
{
    rnd_state = seed;
    rowmap m;
    int dense = spread == 2; /* the dense layout, over the clustered rows */
    if (dense) { rowmap_init_dense(&m); spread = 0; }
    else rowmap_init(&m);
    ref_map r;
    ref_init(&r);
    uint32_t bad = 0, ops = 0, max_count = 0;
    *max_cap = 0;
    for (int phase = 0; phase < 3; phase++) {
        uint32_t insert_pct = phase == 1 ? 25 : 75;
        uint32_t phase_ops = 3 * peak;
        for (uint32_t n = 0; n < phase_ops; n++) {
            uint32_t window = 2 * peak, base = (ops / 8) % (UNIVERSE - window);
            uint32_t i = rnd(10) < 8 ? base + rnd(window) : rnd(UNIVERSE);
            bad += random_op(&m, &r, i, spread, insert_pct, naive_remove);
            ops++;
            if (m.count > max_count) max_count = m.count;
            if (m.cap > *max_cap) *max_cap = m.cap;
            if (ops % 4096 == 0) bad += full_check(&m, &r, spread);
        }
        bad += full_check(&m, &r, spread);
    }
    /* The bound: the smallest power of two (at least 64) holding the peak
     * at three quarters, i.e. at most 8/3 slots per row held. */
    uint32_t want = 64;
    while ((uint64_t)max_count * 4 > (uint64_t)want * 3) want *= 2;
    if (!naive_remove && !dense) assert_true(*max_cap <= want);
    if (dense) assert_true(*max_cap <= 2 * UNIVERSE); /* covers the rows seen, doubled */
    /* Clear forgets every row, keeps the table; the map is usable again. */
    uint32_t cap = m.cap;
    rowmap_clear(&m);
    memset(r.present, 0, UNIVERSE);
    r.count = 0;
    bad += full_check(&m, &r, spread);
    bad += m.cap != cap;
    for (uint32_t n = 0; n < 1000; n++) bad += random_op(&m, &r, rnd(UNIVERSE), spread, 75, naive_remove);
    bad += full_check(&m, &r, spread);
    rowmap_release(&m);
    ref_free(&r);
    return bad;
}

static void test_matches_reference_clustered(void **state)
{
    (void)state;
    uint32_t cap;
    for (uint64_t seed = 1; seed <= 3; seed++) assert_int_equal(run_workload(seed, 0, 6000, 0, &cap), 0);
    assert_true(cap >= 8192); /* it grew through several doublings */
}

static void test_matches_reference_spread(void **state)
{
    (void)state;
    uint32_t cap;
    for (uint64_t seed = 11; seed <= 13; seed++) assert_int_equal(run_workload(seed, 1, 6000, 0, &cap), 0);
    assert_true(cap >= 8192);
}

/* Small maps: many removals around the table's end (the probe runs wrap). */
static void test_matches_reference_small(void **state)
{
    (void)state;
    uint32_t cap;
    for (uint64_t seed = 21; seed <= 40; seed++) assert_int_equal(run_workload(seed, (int)(seed & 1), 40, 0, &cap), 0);
}

/* The dense layout (slot = row) through the same workload. */
static void test_matches_reference_dense(void **state)
{
    (void)state;
    uint32_t cap;
    for (uint64_t seed = 31; seed <= 32; seed++) assert_int_equal(run_workload(seed, 2, 6000, 0, &cap), 0);
    for (uint64_t seed = 41; seed <= 45; seed++) assert_int_equal(run_workload(seed, 2, 40, 0, &cap), 0);
}

static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    uint32_t cap;
    assert_true(run_workload(5, 0, 6000, 1, &cap) > 0);
}

/* Reserve makes room without changing what the map holds. */
static void test_reserve_keeps_rows(void **state)
{
    (void)state;
    rowmap m;
    rowmap_init(&m);
    assert_null(rowmap_find(&m, 3));
    for (uint32_t row = 0; row < 100; row++) rowmap_insert(&m, row * 977u, NULL)->val = row;
    uint32_t cap = m.cap;
    rowmap_reserve(&m, 5000);
    assert_true(m.cap > cap);
    assert_true(5000 * 4 <= m.cap * 3);
    cap = m.cap;
    for (uint32_t row = 100; row < 5000; row++) rowmap_insert(&m, row * 977u, NULL)->val = row;
    assert_int_equal(m.cap, cap); /* no rehash after the reserve */
    for (uint32_t row = 0; row < 5000; row++) {
        const rowmap_ent *e = rowmap_find(&m, row * 977u);
        assert_non_null(e);
        assert_int_equal(e->val, row);
    }
    assert_int_equal(rowmap_remove(&m, 977u), 1);
    assert_int_equal(rowmap_remove(&m, 977u), 0);
    assert_int_equal(m.count, 4999);
    assert_int_equal(rowmap_bytes(&m), (uint64_t)m.cap * sizeof(rowmap_ent));
    rowmap_release(&m);
}

int main(void)
{
    (void)cmp_u32; /* test_rand.h's sort helper is not needed here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference_clustered),
        cmocka_unit_test(test_matches_reference_spread),
        cmocka_unit_test(test_matches_reference_small),
        cmocka_unit_test(test_matches_reference_dense),
        cmocka_unit_test(test_planted_fault_is_caught),
        cmocka_unit_test(test_reserve_keeps_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
