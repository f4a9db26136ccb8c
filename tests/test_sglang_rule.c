/* test_sglang_rule.c: the steps of the GPU kernel of SGLang's hot buffer
 * (kernels/lib/sglang_rule.cuh, run by dhk_sglang_residency_launch), executed one
 * element at a time on the CPU (sglr_step_cpu), against the simulator's hot
 * buffer (sim/sglhb.c, the kernel's scan, itself checked against a plain
 * reference by tests/test_sglhb.c): at every position of generated streams, in
 * the hashed top-k order, with both cold starts and a short start, the misses
 * (count and rows in top-k order), the evictions, the whole LRU order and the
 * slot of every selected row agree. A planted fault (the hits' new positions
 * before the misses') shows the comparison can fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "kernels/lib/sglang_rule.cuh"
#include "sim/sglhb.h"
#include "traces/gen.h"

static const sglhb_config *key_cfg;
static uint32_t key_pos;
static int cmp_key(const void *a, const void *b)
{
    uint64_t x = sglhb_order_key(key_cfg, key_pos, *(const uint32_t *)a), y = sglhb_order_key(key_cfg, key_pos, *(const uint32_t *)b);
    return (x > y) - (x < y);
}

/* Positions where the two disagree, over one stream of npos positions. */
static int compare(uint32_t prompt, uint32_t npos, uint32_t B, sglhb_cold cold, int fault)
{
    gen_params *p;
    trace_shape sh;
    sel_source *src;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    assert_int_equal(trace_shape_uniform(&sh, "t", 1, 1, 1, 256, prompt, npos), 0);
    if (gen_source_new(p, &sh, 7, 32, &src) < 0) fail_msg("%s", dh_errmsg());
    gen_params_free(p);
    sglhb_config cfg = { .device_buffer_size = B, .page_size = 64, .cold = cold, .order = SGLHB_ORDER_HASHED, .order_seed = 5 };
    sglhb h;
    assert_int_equal(sglhb_init(&h, &cfg), 0);
    const int win = (int)sel_rows_at(&sh, 0, 0, npos) + 1;
    int32_t *lru = malloc(B * 4), *slot_row = malloc(B * 4), *row_slot = malloc(win * 4), *evict = malloc(B * 4),
            *lru2 = malloc(B * 4), *topk = malloc(B * 4), *sel_slot = malloc(B * 4), *mr = malloc(B * 4), *ms = malloc(B * 4);
    uint32_t *row_mark = malloc(win * 4), *sel = malloc(B * 4), *rows = malloc(B * 4);
    uint8_t *flag = calloc(win, 1);
    sel_stream *st;
    assert_int_equal(sel_open(src, 0, 0, &st), 0);
    int bad = 0, ready = 0;
    uint32_t first_nrows = 0;
    uint64_t misses = 0;
    for (uint32_t pos = 0; pos < npos; pos++) {
        sel_delta d;
        assert_int_equal(sel_next(st, &d), 0);
        for (uint32_t i = 0; i < d.n_removed; i++) flag[d.removed[i]] = 0;
        for (uint32_t i = 0; i < d.n_added; i++) flag[d.added[i]] = 1;
        uint32_t n = 0;
        for (uint32_t x = 0; x < d.nrows; x++) if (flag[x]) sel[n++] = x;
        key_cfg = &cfg;
        key_pos = pos;
        qsort(sel, n, sizeof *sel, cmp_key);
        for (uint32_t i = 0; i < n; i++) topk[i] = (int32_t)sel[i];
        if (pos == 0) first_nrows = d.nrows;
        sglhb_result r;
        assert_int_equal(sglhb_step_topk(&h, pos, d.nrows, sel, n, &r), 0);
        if (d.nrows > B && !ready) {
            sglr_pair_init(lru, slot_row, row_slot, row_mark, (int)B, win, cold == SGLHB_COLD_STAGING || first_nrows <= B);
            ready = 1;
        }
        int ev = 0, m = 0;
        if (ready) {
            m = sglr_step_cpu((int)B, pos + 1, (int32_t)d.nrows, topk, (int)n, lru, slot_row, row_slot, row_mark, evict,
                              lru2, sel_slot, mr, ms, &ev);
            if (fault && m > 0 && d.nrows > B) { int32_t t = lru[0]; lru[0] = lru[B - 1]; lru[B - 1] = t; }
        } else {
            for (uint32_t i = 0; i < n; i++) sel_slot[i] = topk[i];
        }
        misses += (uint64_t)m;
        int wrong = (uint32_t)m != r.misses || (uint32_t)ev != r.evicted;
        for (int i = 0; !wrong && i < m; i++) wrong = (uint32_t)mr[i] != r.miss_rows[i];
        if (!wrong && ready) {
            sglhb_lru_rows(&h, rows);
            for (uint32_t i = 0; !wrong && i < B; i++)
                wrong = (slot_row[lru[i]] < 0 ? SGLHB_EMPTY : (uint32_t)slot_row[lru[i]]) != rows[i];
            for (uint32_t i = 0; !wrong && i < n; i++)
                wrong = topk[i] == (int32_t)d.nrows - 1 ? sel_slot[i] != (int32_t)B
                                                        : sel_slot[i] < 0 || slot_row[sel_slot[i]] != topk[i];
        }
        bad += wrong;
    }
    assert_true(misses > 0);
    sel_close(st);
    sglhb_release(&h);
    free(lru); free(slot_row); free(row_slot); free(evict); free(lru2); free(topk); free(sel_slot); free(mr); free(ms);
    free(row_mark); free(sel); free(rows); free(flag);
    sel_source_free(src);
    trace_shape_release(&sh);
    return bad;
}

static void test_kernel_steps_match_sglhb(void **state)
{
    (void)state;
    for (int cold = 0; cold < 2; cold++) {
        assert_int_equal(compare(4000, 200, 600, (sglhb_cold)cold, 0), 0);
        assert_int_equal(compare(4000, 200, 300, (sglhb_cold)cold, 0), 0);
        assert_int_equal(compare(500, 300, 600, (sglhb_cold)cold, 0), 0); /* short, long from position 101 */
    }
}

static void test_planted_fault_is_caught(void **state)
{
    (void)state;
    assert_true(compare(4000, 100, 600, SGLHB_COLD_DIRECT, 1) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_steps_match_sglhb),
        cmocka_unit_test(test_planted_fault_is_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
