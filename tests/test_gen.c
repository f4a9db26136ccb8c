/* test_gen.c: the synthetic generator (traces/gen.c).
 *
 * - Every stream obeys sel.h: min(k, nrows) distinct rows below nrows, sorted
 *   added/removed arrays consistent with the previous selection, keyframes
 *   equal to the selection rebuilt from the deltas (also for contexts that
 *   start below k).
 * - Determinism: streams read in order, in reverse, interleaved, and from
 *   several threads give identical content (a hash of every delta).
 * - Sharing changes nothing: with the groups of a request sharing their
 *   latent process (read in lockstep, one at a time, reversed; logs evicted
 *   and streams giving up half-way under a small limit), and with sources of
 *   one workload sharing whole streams across threads, every stream equals
 *   the one generated with sharing off.
 * - Each preset reproduces its [targets] within the preset's tolerance, on a
 *   freshly generated trace measured by traces/stats.c; the target values are
 *   read from the preset file, not written here.
 * - The step_overlap knob moves the measured overlap and the verification union.
 * - Bad parameters are refused with one clear message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dh_err.h"
#include "traces/gen.h"
#include "traces/stats.h"

static gen_params *load(const char *preset)
{
    gen_params *p;
    if (gen_params_load(preset, &p) < 0) fail_msg("%s", dh_errmsg());
    return p;
}

static void set(gen_params *p, const char *a)
{
    if (gen_params_set(p, a) < 0) fail_msg("%s: %s", a, dh_errmsg());
}

/* A small workload: k = 256, three groups, one request starting below k. */
static sel_source *small_source(uint64_t seed)
{
    gen_params *p = load("glm51-longbench");
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "small", 3, 6, 2, 256, 3000, 120), 0);
    sh.prompt_len[1] = 200;  /* 200 rows < k: the whole context is selected at first */
    sh.output_len[2] = 70;
    sel_source *src;
    if (gen_source_new(p, &sh, seed, 16, &src) < 0) fail_msg("%s", dh_errmsg());
    trace_shape_release(&sh);
    gen_params_free(p);
    return src;
}

static void test_stream_invariants(void **state)
{
    (void)state;
    sel_source *src = small_source(11);
    const trace_shape *sh = &sel_meta(src)->shape;
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) {
            sel_stream *st;
            assert_int_equal(sel_open(src, r, g, &st), 0);
            uint32_t maxr = sel_rows_at(sh, r, g, sh->output_len[r] - 1);
            uint8_t *cur = calloc(maxr, 1);
            uint32_t n = 0, pos = 0;
            sel_delta d;
            int rc;
            while ((rc = sel_next(st, &d)) == 0) {
                uint32_t nrows = sel_rows_at(sh, r, g, pos);
                assert_int_equal(d.pos, pos);
                assert_int_equal(d.nrows, nrows);
                for (uint32_t i = 0; i < d.n_removed; i++) {
                    assert_true(i == 0 || d.removed[i] > d.removed[i - 1]);
                    assert_true(d.removed[i] < nrows && cur[d.removed[i]]);
                    cur[d.removed[i]] = 0;
                    n--;
                }
                for (uint32_t i = 0; i < d.n_added; i++) {
                    assert_true(i == 0 || d.added[i] > d.added[i - 1]);
                    assert_true(d.added[i] < nrows && !cur[d.added[i]]);
                    cur[d.added[i]] = 1;
                    n++;
                }
                uint32_t want = nrows < sh->group_k[g] ? nrows : sh->group_k[g];
                assert_int_equal(n, want);
                assert_int_equal(d.n_sel, want);
                assert_int_equal(d.keyframe, pos % 16 == 0);
                if (d.keyframe) {
                    uint32_t m = 0;
                    for (uint32_t x = 0; x < nrows; x++)
                        if (cur[x]) { assert_int_equal(d.full[m], x); m++; }
                    assert_int_equal(m, want);
                }
                pos++;
            }
            assert_int_equal(rc, 1);
            assert_int_equal(pos, sh->output_len[r]);
            free(cur);
            sel_close(st);
        }
    sel_source_free(src);
}

/* FNV-1a over every delta of a stream. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001B3ull;
    return h;
}

static uint64_t hash_delta(uint64_t h, const sel_delta *d)
{
    h = fnv(h, &d->pos, 4);
    h = fnv(h, &d->n_added, 4);
    h = fnv(h, d->added, d->n_added * 4ull);
    h = fnv(h, &d->n_removed, 4);
    return fnv(h, d->removed, d->n_removed * 4ull);
}

static uint64_t hash_stream(sel_source *src, uint32_t r, uint32_t g)
{
    sel_stream *st;
    assert_int_equal(sel_open(src, r, g, &st), 0);
    uint64_t h = 0xCBF29CE484222325ull;
    sel_delta d;
    while (sel_next(st, &d) == 0) h = hash_delta(h, &d);
    sel_close(st);
    return h;
}

typedef struct {
    sel_source *src;
    int first, stride;
    uint64_t *h;
} worker_arg;

static void *worker(void *a)
{
    worker_arg *w = a;
    const trace_shape *sh = &sel_meta(w->src)->shape;
    for (int i = w->first; i < (int)(sh->n_requests * sh->n_groups); i += w->stride)
        w->h[i] = hash_stream(w->src, (uint32_t)i / sh->n_groups, (uint32_t)i % sh->n_groups);
    return NULL;
}

static void test_determinism(void **state)
{
    (void)state;
    sel_source *src = small_source(5);
    const trace_shape *sh = &sel_meta(src)->shape;
    uint32_t ns = sh->n_requests * sh->n_groups;
    uint64_t fwd[16], rev[16], inter[16], thr[16];
    for (uint32_t i = 0; i < ns; i++) fwd[i] = hash_stream(src, i / sh->n_groups, i % sh->n_groups);
    for (uint32_t i = ns; i-- > 0;) rev[i] = hash_stream(src, i / sh->n_groups, i % sh->n_groups);
    /* Interleaved: every stream open at once, advanced round robin. */
    sel_stream *st[16];
    int live[16];
    for (uint32_t i = 0; i < ns; i++) {
        assert_int_equal(sel_open(src, i / sh->n_groups, i % sh->n_groups, &st[i]), 0);
        inter[i] = 0xCBF29CE484222325ull;
        live[i] = 1;
    }
    for (int any = 1; any;) {
        any = 0;
        for (uint32_t i = ns; i-- > 0;) {
            sel_delta d;
            if (!live[i]) continue;
            if (sel_next(st[i], &d) == 0) { inter[i] = hash_delta(inter[i], &d); any = 1; }
            else live[i] = 0;
        }
    }
    for (uint32_t i = 0; i < ns; i++) sel_close(st[i]);
    /* Four threads sharing one source. */
    pthread_t tid[4];
    worker_arg wa[4];
    for (int t = 0; t < 4; t++) {
        wa[t] = (worker_arg){src, t, 4, thr};
        assert_int_equal(pthread_create(&tid[t], NULL, worker, &wa[t]), 0);
    }
    for (int t = 0; t < 4; t++) pthread_join(tid[t], NULL);
    for (uint32_t i = 0; i < ns; i++) {
        assert_true(fwd[i] == rev[i]);
        assert_true(fwd[i] == inter[i]);
        assert_true(fwd[i] == thr[i]);
    }
    /* Different streams differ, and another seed changes them. */
    assert_true(fwd[0] != fwd[1]);
    sel_source *other = small_source(6);
    assert_true(hash_stream(other, 0, 0) != fwd[0]);
    sel_source_free(other);
    sel_source_free(src);
}

/* Measure the preset's targets on a fresh trace of its default shape, cut to
 * n_req requests of out_len positions, analysing max_groups groups. */
static void check_targets(const char *preset, const char *const *keys, uint32_t n_req, uint32_t out_len,
                          uint32_t max_groups, uint64_t seed)
{
    gen_params *p = load(preset);
    trace_shape sh;
    assert_int_equal(gen_params_default_shape(p, &sh), 0);
    sh.n_requests = n_req;
    for (uint32_t r = 0; r < n_req; r++) sh.output_len[r] = out_len;
    sel_source *src;
    if (gen_source_new(p, &sh, seed, 64, &src) < 0) fail_msg("%s", dh_errmsg());
    stats_options o;
    stats_options_init(&o);
    o.max_groups = max_groups;
    stats_report *r;
    if (stats_run(src, &o, &r) < 0) fail_msg("%s", dh_errmsg());
    double tol;
    assert_int_equal(gen_params_target(p, "tolerance", &tol), 0);
    int bad = 0;
    for (const char *const *k = keys; *k; k++) {
        double want, got;
        if (gen_params_target(p, *k, &want) < 0) fail_msg("%s", dh_errmsg());
        if (stats_target_value(r, *k, &got) < 0) fail_msg("%s", dh_errmsg());
        int ok = fabs(got - want) <= tol;
        printf("# %s %s: measured %.4f, target %.4f (tolerance %.4f)%s\n", preset, *k, got, want, tol, ok ? "" : "  OUT");
        bad |= !ok;
    }
    assert_false(bad);
    stats_report_free(r);
    sel_source_free(src);
    trace_shape_release(&sh);
    gen_params_free(p);
}

static void test_glm51_targets(void **state)
{
    (void)state;
    static const char *const keys[] = {"lru_miss_1k", "lru_miss_2k", "lru_miss_4k", "fifo_miss_2k",
                                       "random_miss_2k", "belady_miss_2k", NULL};
    check_targets("glm51-longbench", keys, 2, 400, 2, 2024);
}

static void test_dsv32_targets(void **state)
{
    (void)state;
    static const char *const keys[] = {"step_overlap_min_groups_20_60", "step_overlap_max_groups_20_60",
                                       "step_overlap_mean_groups_0_1", NULL};
    check_targets("dsv32-swebench", keys, 1, 60, 0, 2024);
}

/* The verification-union knob: a lower step_overlap gives a lower measured
 * overlap (on target) and a larger union of consecutive selections. */
static void test_overlap_knob(void **state)
{
    (void)state;
    double last_union = 0;
    const double knob[] = {0.95, 0.8, 0.65, 0.5};
    for (int i = 0; i < 4; i++) {
        gen_params *p = load("glm51-longbench");
        char a[64];
        snprintf(a, sizeof a, "selection.step_overlap=%g", knob[i]);
        set(p, a);
        trace_shape sh;
        assert_int_equal(trace_shape_uniform(&sh, "knob", 1, 1, 1, 1024, 50000, 60), 0);
        sel_source *src;
        assert_int_equal(gen_source_new(p, &sh, 3, 64, &src), 0);
        stats_options o;
        stats_options_init(&o);
        o.fifo = o.random = o.belady = 0;
        stats_report *r;
        assert_int_equal(stats_run(src, &o, &r), 0);
        assert_true(fabs(stats_step_overlap(r, -1) - knob[i]) < 0.015);
        assert_true(stats_union(r, 4) > last_union);
        last_union = stats_union(r, 4);
        stats_report_free(r);
        sel_source_free(src);
        trace_shape_release(&sh);
        gen_params_free(p);
    }
}

static void test_bad_params(void **state)
{
    (void)state;
    gen_params *p = load("glm51-longbench");
    assert_int_equal(gen_params_set(p, "selection.reuse_pp=0.5"), -1);
    assert_non_null(strstr(dh_errmsg(), "reuse_pp"));
    gen_params_free(p);
    p = load("glm51-longbench");
    assert_int_equal(gen_params_set(p, "selection.reuse_p=1.5"), -1);
    assert_non_null(strstr(dh_errmsg(), "reuse_p"));
    gen_params_free(p);
    p = load("glm51-longbench");
    assert_int_equal(gen_params_set(p, "selection.step_overlap=0.999"), -1);
    assert_non_null(strstr(dh_errmsg(), "step_overlap"));
    gen_params_free(p);
    p = load("glm51-longbench");
    assert_int_equal(gen_params_set(p, "shape.group_sizes=4*19"), -1);
    assert_non_null(strstr(dh_errmsg(), "group_sizes"));
    gen_params_free(p);
    /* A profile naming a group the shape lacks, and a prompt too short. */
    p = load("dsv32-swebench");
    trace_shape sh;
    sel_source *src;
    assert_int_equal(trace_shape_uniform(&sh, "x", 1, 4, 1, 2048, 68000, 10), 0);
    assert_int_equal(gen_source_new(p, &sh, 1, 64, &src), -1);
    assert_non_null(strstr(dh_errmsg(), "overlap_profile"));
    trace_shape_release(&sh);
    gen_params_free(p);
    p = load("glm51-longbench");
    assert_int_equal(trace_shape_uniform(&sh, "x", 1, 4, 1, 2048, 50, 10), 0);
    assert_int_equal(gen_source_new(p, &sh, 1, 64, &src), -1);
    assert_non_null(strstr(dh_errmsg(), "sinks + window"));
    trace_shape_release(&sh);
    gen_params_free(p);
    assert_int_equal(gen_params_load("no-such-preset", &p), -1);
    assert_non_null(strstr(dh_errmsg(), "no-such-preset"));
}

/* ---- sharing: the groups of a request share their latent process within a
 * source, and gen_source_new_shared sources share whole streams. Neither may
 * change a stream. The reference is a source with sharing off (every stream
 * regenerates its latent process alone). */

static void hash_all(sel_source *src, int order, uint64_t *h)
{
    const trace_shape *sh = &sel_meta(src)->shape;
    uint32_t G = sh->n_groups, n = sh->n_requests * G;
    if (order == 1) {
        /* Lockstep: every stream of a request open at once, one position each in turn. */
        for (uint32_t r = 0; r < sh->n_requests; r++) {
            sel_stream *st[16];
            for (uint32_t g = 0; g < G; g++) {
                assert_int_equal(sel_open(src, r, g, &st[g]), 0);
                h[r * G + g] = 0xCBF29CE484222325ull;
            }
            for (int any = 1; any;) {
                any = 0;
                for (uint32_t g = 0; g < G; g++) {
                    sel_delta d;
                    if (sel_next(st[g], &d) == 0) { h[r * G + g] = hash_delta(h[r * G + g], &d); any = 1; }
                }
            }
            for (uint32_t g = 0; g < G; g++) sel_close(st[g]);
        }
        return;
    }
    /* One stream at a time, in order (0) or reversed (2). */
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = order == 2 ? n - 1 - j : j;
        h[i] = hash_stream(src, i / G, i % G);
    }
}

static void test_latent_sharing_keeps_streams(void **state)
{
    (void)state;
    sel_source *ref = small_source(21);
    assert_int_equal(gen_source_set_share_limit(ref, 0), 0);
    const trace_shape *sh = &sel_meta(ref)->shape;
    uint32_t n = sh->n_requests * sh->n_groups;
    uint64_t want[16], got[16];
    hash_all(ref, 0, want);
    /* The check can fail: neighbouring groups differ, and a planted fault (a
     * stream read with one position's delta left out) is caught. */
    assert_true(want[0] != want[1]);
    sel_stream *st;
    assert_int_equal(sel_open(ref, 0, 0, &st), 0);
    uint64_t faulty = 0xCBF29CE484222325ull;
    sel_delta d;
    while (sel_next(st, &d) == 0)
        if (d.pos != 57) faulty = hash_delta(faulty, &d);
    sel_close(st);
    assert_true(faulty != want[0]);
    /* Default limit, and one small enough that logs are evicted and streams
     * give up sharing half-way. */
    const size_t limits[] = { (size_t)1 << 30, 150000 };
    for (size_t l = 0; l < 2; l++)
        for (int order = 0; order < 3; order++) {
            sel_source *src = small_source(21);
            assert_int_equal(gen_source_set_share_limit(src, limits[l]), 0);
            hash_all(src, order, got);
            for (uint32_t i = 0; i < n; i++) assert_true(got[i] == want[i]);
            sel_source_free(src);
        }
    /* Only generator sources take a limit. */
    assert_int_equal(gen_source_set_share_limit(NULL, 0), -1);
    sel_source_free(ref);
}

typedef struct {
    sel_source *src;
    int order;
    uint64_t h[16];
} shared_arg;

static void *shared_worker(void *a)
{
    shared_arg *w = a;
    hash_all(w->src, w->order, w->h);
    return NULL;
}

static sel_source *small_shared(uint64_t seed)
{
    gen_params *p = load("glm51-longbench");
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "small", 3, 6, 2, 256, 3000, 120), 0);
    sh.prompt_len[1] = 200;
    sh.output_len[2] = 70;
    sel_source *src;
    if (gen_source_new_shared(p, &sh, seed, 16, &src) < 0) fail_msg("%s", dh_errmsg());
    trace_shape_release(&sh);
    gen_params_free(p);
    return src;
}

static void test_shared_sources_keep_streams(void **state)
{
    (void)state;
    /* A plain source with sharing off is the reference. Each round uses its
     * own seed: sources of one workload made later find the records of the
     * earlier ones, which would bypass the round's limit. */
    const size_t limits[] = { (size_t)1 << 30, 40000, 0 };
    for (size_t l = 0; l < 3; l++) {
        uint64_t seed = 30 + l, want[16];
        sel_source *ref = small_source(seed);
        assert_int_equal(gen_source_set_share_limit(ref, 0), 0);
        const trace_shape *sh = &sel_meta(ref)->shape;
        uint32_t n = sh->n_requests * sh->n_groups;
        hash_all(ref, 0, want);
        /* Two sources of one workload read it on two threads, in different
         * orders; a third made after the first is gone reads it again. */
        sel_source *a = small_shared(seed), *b = small_shared(seed);
        assert_int_equal(gen_source_set_share_limit(a, limits[l]), 0);
        assert_true(sel_meta(a)->shape.n_requests == sh->n_requests);
        shared_arg wa = { a, (int)l % 3, {0} }, wb = { b, (int)(l + 1) % 3, {0} };
        pthread_t ta, tb;
        assert_int_equal(pthread_create(&ta, NULL, shared_worker, &wa), 0);
        assert_int_equal(pthread_create(&tb, NULL, shared_worker, &wb), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        sel_source_free(a);
        sel_source *c = small_shared(seed);
        shared_arg wc = { c, 2, {0} };
        shared_worker(&wc);
        for (uint32_t i = 0; i < n; i++) {
            assert_true(wa.h[i] == want[i]);
            assert_true(wb.h[i] == want[i]);
            assert_true(wc.h[i] == want[i]);
        }
        sel_source_free(b);
        sel_source_free(c);
        sel_source_free(ref);
    }
    sel_source *x = small_shared(30), *y = small_shared(31);
    assert_true(hash_stream(x, 0, 0) != hash_stream(y, 0, 0));
    sel_source_free(x);
    sel_source_free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_invariants),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_latent_sharing_keeps_streams),
        cmocka_unit_test(test_shared_sources_keep_streams),
        cmocka_unit_test(test_glm51_targets),
        cmocka_unit_test(test_dsv32_targets),
        cmocka_unit_test(test_overlap_knob),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
