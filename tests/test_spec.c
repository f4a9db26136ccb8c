/* test_spec.c: speculative decoding (sim/spec.h) and the verification union
 * (sim/union.h): draft configs, acceptance sampling against its analytic
 * expectation, DSpark's verify-length rule against brute force, the union and
 * missing-row counts against plain sorted-set references, staging and ring
 * bytes. Every differential check has a planted fault showing it can fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/rng.h"
#include "sim/spec.h"
#include "sim/union.h"

/* ---- helpers ---------------------------------------------------------- */

static const char *base_ini =
    "[draft]\n"
    "name = t\n"
    "kind = dflash2\n"
    "target = glm53\n"
    "layers = 5\n"
    "hidden = 6144\n"
    "block = 4\n"
    "gamma = 3\n"
    "window = 4096\n"
    "row_bytes = 20480\n"
    "weight_bytes = 3.5e9\n"
    "weight_shards = 1\n"
    "pass_bytes = 3.6e9\n"
    "flops_per_token = 5e9\n"
    "attn_flops_per_row = 122880\n"
    "fp8 = false\n"
    "[accept.ctx_le_1000]\n"
    "marginal = 0.9, 0.8, 0.7\n"
    "[accept.ctx_any]\n"
    "marginal = 0.6, 0.3, 0.1\n"
    "reported_tau = 2.0\n"
    "reported_tau_positions = 3\n";

static const char *dspark_ini =
    "[draft]\n"
    "name = t\n"
    "kind = dspark\n"
    "target = glm53\n"
    "layers = 3\n"
    "hidden = 6144\n"
    "block = 5\n"
    "gamma = 5\n"
    "window = 2048\n"
    "row_bytes = 1920\n"
    "weight_bytes = 14.2e9\n"
    "weight_shards = 4\n"
    "pass_bytes = 3.7e9\n"
    "flops_per_token = 3.7e9\n"
    "attn_flops_per_row = 417792\n"
    "fp8 = true\n"
    "[accept.ctx_any]\n"
    "marginal = 0.74, 0.52, 0.36, 0.24, 0.16\n"
    "[dspark]\n"
    "markov_rank = 256\n"
    "vocab = 129280\n"
    "markov_value_bytes = 2\n"
    "confidence_params = 1311233\n"
    "confidence_concentration = 8\n"
    "confidence_error = 0.5\n";

/* text with the first line starting "key =" replaced by repl (NULL: removed),
 * or, with key NULL, with repl appended. */
static char *variant(const char *text, const char *key, const char *repl)
{
    size_t n = strlen(text) + (repl ? strlen(repl) : 0) + 8;
    char *out = malloc(n);
    assert_non_null(out);
    if (!key) {
        snprintf(out, n, "%s%s\n", text, repl);
        return out;
    }
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s =", key);
    const char *p = strstr(text, pat);
    assert_non_null(p);
    p++;
    const char *eol = strchr(p, '\n');
    size_t head = (size_t)(p - text);
    memcpy(out, text, head);
    out[head] = 0;
    if (repl) { strcat(out, repl); strcat(out, "\n"); }
    strcat(out, eol + 1);
    return out;
}

static int load_text(const char *text, spec_draft **d)
{
    cfg *c;
    if (cfg_load_string("drafts/t.ini", text, &c) < 0) return -1;
    int rc = spec_draft_from_cfg(c, d);
    cfg_free(c);
    return rc;
}

/* Load must fail with a message naming the file and containing want. */
static void expect_error(const char *text, const char *want)
{
    spec_draft *d = NULL;
    int rc = load_text(text, &d);
    if (rc == 0 || !strstr(dh_errmsg(), want) || !strstr(dh_errmsg(), "drafts/t.ini"))
        fail_msg("expected an error containing '%s', got rc %d: '%s'", want, rc, dh_errmsg());
    assert_null(d);
}

/* ---- configs ---------------------------------------------------------- */

static void test_shipped_drafts_load(void **state)
{
    (void)state;
    const char *paths[] = {"models/drafts/glm53-dflash2.ini", "models/drafts/glm53-dspark.ini",
                           "models/drafts/dsv41flash-dspark.ini"};
    for (int i = 0; i < 3; i++) {
        spec_draft *d;
        if (spec_draft_load(paths[i], &d) < 0) fail_msg("%s", dh_errmsg());
        assert_true(d->gamma <= d->block);
        /* Every bucket is a valid marginal table with conditionals in [0, 1]. */
        for (uint32_t b = 0; b < d->n_buckets; b++)
            for (uint32_t j = 0; j < d->gamma; j++) {
                assert_true(d->bucket[b].cond[j] >= 0 && d->bucket[b].cond[j] <= 1);
                if (j) assert_true(d->bucket[b].marginal[j] <= d->bucket[b].marginal[j - 1]);
            }
        spec_draft_free(d);
    }
    spec_draft *d;
    assert_int_equal(spec_draft_load("models/drafts/glm53-dflash2.ini", &d), 0);
    assert_int_equal(d->kind, SPEC_DFLASH2);
    assert_int_equal(d->gamma, d->block - 1);
    spec_draft_free(d);
    /* Buckets: bounds are inclusive, sorted, and the last covers everything. */
    assert_int_equal(spec_draft_load("models/drafts/dsv41flash-dspark.ini", &d), 0);
    assert_int_equal(d->kind, SPEC_DSPARK);
    assert_int_equal(d->n_buckets, 3);
    assert_ptr_equal(spec_table(d, 100000), &d->bucket[0]);
    assert_ptr_equal(spec_table(d, d->bucket[0].ctx_max), &d->bucket[0]);
    assert_ptr_equal(spec_table(d, d->bucket[0].ctx_max + 1), &d->bucket[1]);
    assert_ptr_equal(spec_table(d, 1000000), &d->bucket[2]);
    assert_ptr_equal(spec_table(d, UINT64_MAX), &d->bucket[2]);
    spec_draft_free(d);
}

static void test_config_rejects_bad_values(void **state)
{
    (void)state;
    spec_draft *d;
    /* The base configs are valid, so each failure below is the planted fault's. */
    if (load_text(base_ini, &d) < 0) fail_msg("%s", dh_errmsg());
    spec_draft_free(d);
    if (load_text(dspark_ini, &d) < 0) fail_msg("%s", dh_errmsg());
    spec_draft_free(d);

    /* Every key of [draft] and [dspark]: missing, non-numeric, out of range. */
    const char *draft_keys[] = {"name", "kind", "target", "layers", "hidden", "block", "gamma", "window",
                                "row_bytes", "weight_bytes", "weight_shards", "pass_bytes", "flops_per_token",
                                "attn_flops_per_row", "fp8"};
    const char *dspark_keys[] = {"markov_rank", "vocab", "markov_value_bytes", "confidence_params",
                                 "confidence_concentration", "confidence_error"};
    for (size_t i = 0; i < sizeof draft_keys / sizeof *draft_keys + sizeof dspark_keys / sizeof *dspark_keys; i++) {
        int is_draft = i < sizeof draft_keys / sizeof *draft_keys;
        const char *key = is_draft ? draft_keys[i] : dspark_keys[i - sizeof draft_keys / sizeof *draft_keys];
        const char *text = is_draft ? base_ini : dspark_ini;
        char want[128], line[128];
        char *t = variant(text, key, NULL);
        snprintf(want, sizeof want, "missing key '%s'", key);
        expect_error(t, want);
        free(t);
        if (!strcmp(key, "name") || !strcmp(key, "target")) continue; /* free-form labels */
        snprintf(line, sizeof line, "%s = x7", key);
        t = variant(text, key, line);
        snprintf(want, sizeof want, "%s = ", key);
        expect_error(t, want);
        free(t);
        if (!strcmp(key, "kind") || !strcmp(key, "fp8")) continue;
        snprintf(line, sizeof line, "%s = -1", key);
        t = variant(text, key, line);
        expect_error(t, "outside");
        free(t);
    }
    struct { const char *key, *repl, *want; } cases[] = {
        {"marginal", "marginal = 0.9, 1.2, 0.1", "outside [0, 1]"},
        {"marginal", "marginal = 0.9, 0.8, -0.1", "outside [0, 1]"},
        {"marginal", "marginal = 0.9, zero, 0.1", "not a number"},
        {"marginal", "marginal = 0.5, 0.6, 0.1", "cannot rise"},
        {"marginal", "marginal = 0.9, 0.8", "expected gamma = 3"},
        {"kind", "kind = eagle", "kind = 'eagle'"},
        {"gamma", "gamma = 5", "exceeds block"},
        {"window", "windw = 4096", "missing key 'window'"},
        {"reported_tau", "reported_tau = 2.5", "reported_tau = 2.5"},
        {"reported_tau_positions", NULL, "go together"},
        {"layers", "layers = 5.5", "not an integer"},
        {"fp8", "fp8 = maybe", "not a boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* marginal appears twice; the first (ctx_le_1000) table is the one replaced,
         * except for the tau cases which live in ctx_any. */
        char *t = variant(base_ini, cases[i].key, cases[i].repl);
        expect_error(t, cases[i].want);
        free(t);
    }
    /* Lines appended at the end of the file. */
    static const struct { const char *append, *want; } appended[] = {
        {"windw = 3", "unknown key 'windw' in [accept.ctx_any]"},
        {"[extra]\nx = 1", "unknown section [extra]"},
        {"[accept.ctx_le_12k]\nmarginal = 0.5, 0.4, 0.3", "is not a context length"},
        {"[accept.ctx_le_01000]\nmarginal = 0.5, 0.4, 0.3", "repeats an earlier bucket"},
        {"[accept.recent]\nmarginal = 0.5, 0.4, 0.3", "expected [accept.ctx_le_N]"},
        {"[dspark]\nmarkov_rank = 256", "belongs to kind = dspark"},
    };
    for (size_t i = 0; i < sizeof appended / sizeof *appended; i++) {
        char *t = variant(base_ini, NULL, appended[i].append);
        expect_error(t, appended[i].want);
        free(t);
    }
    /* No catch-all bucket. */
    const char *cut = strstr(base_ini, "[accept.ctx_any]");
    char *no_any = strndup(base_ini, (size_t)(cut - base_ini));
    expect_error(no_any, "missing section [accept.ctx_any]");
    free(no_any);
    /* DSpark without its section. */
    cut = strstr(dspark_ini, "[dspark]");
    char *no_ds = strndup(dspark_ini, (size_t)(cut - dspark_ini));
    expect_error(no_ds, "needs a [dspark] section");
    free(no_ds);
    /* A file: the message names its path; a missing file is an error too. */
    char path[] = "/tmp/test_spec_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char *t = variant(base_ini, "hidden", "hidden = wide");
    assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
    close(fd);
    free(t);
    assert_int_equal(spec_draft_load(path, &d), -1);
    assert_non_null(strstr(dh_errmsg(), path));
    assert_non_null(strstr(dh_errmsg(), "hidden"));
    unlink(path);
    assert_int_equal(spec_draft_load("models/drafts/no-such-draft.ini", &d), -1);
}

/* ---- acceptance ------------------------------------------------------- */

static spec_draft *draft_with(const char *kind_ini, const char *marginal)
{
    char *t = variant(kind_ini, "marginal", marginal);
    spec_draft *d;
    if (load_text(t, &d) < 0) fail_msg("%s", dh_errmsg());
    free(t);
    return d;
}

static void test_accept_extremes(void **state)
{
    (void)state;
    spec_draft *zero = draft_with(dspark_ini, "marginal = 0, 0, 0, 0, 0");
    spec_draft *one = draft_with(dspark_ini, "marginal = 1, 1, 1, 1, 1");
    for (uint32_t r = 0; r < 50; r++)
        for (uint32_t step = 0; step < 40; step++) {
            rng_stream s;
            spec_stream(&s, 7, r, step, SPEC_RNG_ACCEPT);
            assert_int_equal(spec_sample_accepted(zero, 100000, zero->gamma, &s), 0);
            spec_stream(&s, 7, r, step, SPEC_RNG_ACCEPT);
            assert_int_equal(spec_sample_accepted(one, 100000, one->gamma, &s), one->gamma);
            /* DSpark's per-request confidence keeps 0 and 1 exact. */
            spec_conf c0, c1;
            spec_confidence(zero, 100000, 7, r, step, &c0);
            spec_confidence(one, 100000, 7, r, step, &c1);
            for (uint32_t L = 0; L <= one->gamma; L++) {
                assert_int_equal(spec_accept(&c0, L, 7, r, step), 0);
                assert_int_equal(spec_accept(&c1, L, 7, r, step), L);
            }
        }
    spec_draft_free(zero);
    spec_draft_free(one);
}

/* Mean of accepted drafts over n (request, step) draws: from the table
 * (dspark = 0) or through DSpark's per-request confidence at full length. */
static void sample_moments(const spec_draft *d, const double *marginal, int dspark, uint64_t seed, uint32_t n,
                           double *mean, double *var)
{
    double s = 0, s2 = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = i % 97, step = i / 97;
        uint32_t a;
        if (dspark) {
            spec_conf c;
            spec_confidence(d, 100000, seed, r, step, &c);
            a = spec_accept(&c, d->gamma, seed, r, step);
        } else {
            rng_stream st;
            spec_stream(&st, seed, r, step, SPEC_RNG_ACCEPT);
            a = spec_sample_marginal(marginal, d->gamma, &st);
        }
        s += a;
        s2 += (double)a * a;
    }
    *mean = s / n;
    *var = (s2 - s * s / n) / (n - 1);
}

static void test_sampled_mean_matches_expectation(void **state)
{
    (void)state;
    const char *paths[] = {"models/drafts/glm53-dflash2.ini", "models/drafts/glm53-dspark.ini",
                           "models/drafts/dsv41flash-dspark.ini"};
    const uint32_t n = 20000;
    for (int i = 0; i < 3; i++) {
        spec_draft *d;
        assert_int_equal(spec_draft_load(paths[i], &d), 0);
        const spec_accept_table *t = spec_table(d, 100000);
        double expect = spec_expected_accepted(t, d->gamma), mean, var;
        for (int dspark = 0; dspark <= (d->kind == SPEC_DSPARK); dspark++) {
            sample_moments(d, t->marginal, dspark, 11, n, &mean, &var);
            double se = sqrt(var / n);
            if (fabs(mean - expect) > 5 * se)
                fail_msg("%s (%s): sampled mean %.4f vs expected %.4f, 5 SE = %.4f", paths[i],
                         dspark ? "confidence" : "table", mean, expect, 5 * se);
            /* Plain table draws: the sample variance agrees with the analytic one
             * (the ratio of a variance over 20000 draws is within a few %). */
            if (!dspark) assert_true(fabs(var / spec_variance_accepted(t, d->gamma) - 1) < 0.1);
        }
        /* Planted fault: a table 10 % lower at every position is caught by the same bound. */
        double wrong[SPEC_MAX_GAMMA];
        for (uint32_t j = 0; j < SPEC_MAX_GAMMA; j++) wrong[j] = 0.9 * t->marginal[j];
        sample_moments(d, wrong, 0, 11, n, &mean, &var);
        assert_true(fabs(mean - expect) > 5 * sqrt(var / n));
        spec_draft_free(d);
    }
}

static void test_accept_is_order_free_and_monotone(void **state)
{
    (void)state;
    spec_draft *d;
    assert_int_equal(spec_draft_load("models/drafts/glm53-dspark.ini", &d), 0);
    enum { N = 64 };
    uint32_t fwd[N], rev[N];
    for (uint32_t r = 0; r < N; r++) {
        spec_conf c;
        spec_confidence(d, 600000, 3, r, 17, &c);
        fwd[r] = spec_accept(&c, d->gamma, 3, r, 17);
    }
    for (uint32_t k = 0; k < N; k++) {
        uint32_t r = N - 1 - k;
        spec_conf c;
        spec_confidence(d, 600000, 3, r, 17, &c);
        rev[r] = spec_accept(&c, d->gamma, 3, r, 17);
    }
    assert_memory_equal(fwd, rev, sizeof fwd);
    /* One uniform per (request, step): a longer verify never accepts fewer. */
    for (uint32_t r = 0; r < N; r++) {
        spec_conf c;
        spec_confidence(d, 600000, 3, r, 5, &c);
        uint32_t prev = 0;
        for (uint32_t L = 0; L <= d->gamma; L++) {
            uint32_t a = spec_accept(&c, L, 3, r, 5);
            assert_true(a >= prev && a <= L);
            prev = a;
        }
        /* Predictions are non-increasing probabilities. */
        for (uint32_t i = 0; i < d->gamma; i++) {
            assert_true(c.predicted[i] >= 0 && c.predicted[i] <= 1);
            if (i) assert_true(c.predicted[i] <= c.predicted[i - 1]);
        }
    }
    spec_draft_free(d);
}

/* ---- DSpark verify length --------------------------------------------- */

typedef struct { double a, b, p, tile; } time_model;

static double step_time(double v, void *user)
{
    const time_model *m = user;
    /* Tile quantisation makes the time a staircase, as GEMMs over tokens are. */
    if (m->tile > 0) v = ceil(v / m->tile) * m->tile;
    return m->a + m->b * pow(v, m->p);
}

static double brute_force(const double *pred, uint32_t n, uint32_t gamma, uint32_t stride,
                          const time_model *m, int uniform_only)
{
    uint32_t L[8] = {0};
    double best = -1;
    for (;;) {
        double obj = spec_verify_objective(pred, n, stride, L, step_time, (void *)m);
        if (obj > best) best = obj;
        if (uniform_only) {
            if (L[0] == gamma) break;
            for (uint32_t r = 0; r < n; r++) L[r]++;
            continue;
        }
        uint32_t r = 0;
        while (r < n && L[r] == gamma) L[r++] = 0;
        if (r == n) break;
        L[r]++;
    }
    return best;
}

static void test_verify_length_matches_brute_force(void **state)
{
    (void)state;
    rng_stream rs;
    rng_init(&rs, 99, 0, 0, 1);
    int uniform_worse = 0;
    for (int trial = 0; trial < 400; trial++) {
        uint32_t n = 1 + rng_below(&rs, 4), gamma = 1 + rng_below(&rs, 4), stride = SPEC_MAX_GAMMA;
        double pred[4 * SPEC_MAX_GAMMA];
        for (uint32_t r = 0; r < n; r++) {
            double p = 1;
            for (uint32_t i = 0; i < gamma; i++) {
                /* Some ties (exact repeats) and some certain or hopeless drafts. */
                double c = rng_uniform(&rs);
                if (c < 0.1) c = 1;
                else if (c > 0.95) c = 0;
                p *= c;
                pred[r * stride + i] = p;
            }
        }
        time_model m = {1e-3 * (0.2 + rng_uniform(&rs)), 1e-4 * (0.1 + rng_uniform(&rs)),
                        0.5 + 1.5 * rng_uniform(&rs), (double)rng_below(&rs, 6)};
        uint32_t L[4];
        double got = spec_choose_verify(pred, n, gamma, stride, step_time, &m, L);
        double want = brute_force(pred, n, gamma, stride, &m, 0);
        for (uint32_t r = 0; r < n; r++) assert_true(L[r] <= gamma);
        /* The returned objective is the objective of the returned choice. */
        assert_true(fabs(got - spec_verify_objective(pred, n, stride, L, step_time, &m)) <= 1e-12 * got);
        if (fabs(got - want) > 1e-9 * want)
            fail_msg("trial %d (n %u, gamma %u): greedy %.12g vs brute force %.12g", trial, n, gamma, got, want);
        /* Planted fault: one verify length for the whole batch is a weaker rule;
         * the brute-force comparison must see it lose somewhere. */
        if (brute_force(pred, n, gamma, stride, &m, 1) < want * (1 - 1e-9)) uniform_worse++;
    }
    assert_true(uniform_worse > 0);
    /* With free verification every non-zero draft is worth verifying; with a
     * huge per-token cost nothing is. */
    double pred[2 * SPEC_MAX_GAMMA] = {0.9, 0.5, 0.1};
    pred[SPEC_MAX_GAMMA] = 0.4;
    uint32_t L[2];
    time_model flat = {1, 0, 1, 0}, steep = {1e-6, 1, 1, 0};
    spec_choose_verify(pred, 2, 3, SPEC_MAX_GAMMA, step_time, &flat, L);
    assert_int_equal(L[0], 3);
    assert_int_equal(L[1], 1);
    spec_choose_verify(pred, 2, 3, SPEC_MAX_GAMMA, step_time, &steep, L);
    assert_int_equal(L[0], 0);
    assert_int_equal(L[1], 0);
}

/* ---- verification union ----------------------------------------------- */

typedef struct { const uint8_t *bits; } bitset;

static int bit_member(const void *user, uint32_t row)
{
    const bitset *b = user;
    return (b->bits[row >> 3] >> (row & 7)) & 1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Reference: the union of q sorted sets by repeated plain merges. */
static uint32_t ref_union(uint32_t **sets, const uint32_t *n, uint32_t q, uint32_t *out, uint32_t *tmp)
{
    uint32_t m = 0;
    for (uint32_t t = 0; t < q; t++) {
        uint32_t i = 0, j = 0, k = 0;
        while (i < m || j < n[t]) {
            if (j == n[t] || (i < m && out[i] < sets[t][j])) tmp[k++] = out[i++];
            else if (i == m || sets[t][j] < out[i]) tmp[k++] = sets[t][j++];
            else { tmp[k++] = out[i++]; j++; }
        }
        memcpy(out, tmp, k * sizeof *out);
        m = k;
    }
    return m;
}

static int same_rows(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb)
{
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

static int all_resident(const void *user, uint32_t row) { (void)user; (void)row; return 1; }
static int none_resident(const void *user, uint32_t row) { (void)user; (void)row; return 0; }

static void test_union_identical_and_disjoint(void **state)
{
    (void)state;
    uint32_t s0[100], s1[100], s2[100], out[300];
    for (uint32_t i = 0; i < 100; i++) { s0[i] = 3 * i; s1[i] = 3 * i + 1; s2[i] = 3 * i + 2; }
    union_set u;
    union_init(&u);
    /* Identical selections: the union is one selection, nothing fetched beyond it. */
    union_begin_sorted(&u, s0, 100, NULL, 0, none_resident, NULL, 1);
    for (int t = 0; t < 7; t++) assert_int_equal(union_add(&u, NULL, 0, NULL, 0), 0);
    assert_int_equal(union_size(&u), 100);
    assert_int_equal(union_queries(&u), 8);
    assert_int_equal(union_rows(&u, s0, 100, out), 100);
    assert_memory_equal(out, s0, sizeof s0);
    /* Disjoint selections: the union is their sum. */
    union_begin_sorted(&u, s0, 100, NULL, 0, all_resident, NULL, 1);
    assert_int_equal(union_add(&u, s1, 100, s0, 100), 0);
    assert_int_equal(union_add(&u, s2, 100, s1, 100), 0);
    assert_int_equal(union_size(&u), 300);
    assert_int_equal(union_rows(&u, s0, 100, out), 300);
    for (uint32_t i = 0; i < 300; i++) assert_int_equal(out[i], i);
    union_begin_sorted(&u, s0, 100, NULL, 0, all_resident, NULL, 0);
    assert_int_equal(union_add(&u, s1, 100, s0, 100), 0);
    assert_int_equal(union_add(&u, s2, 100, s1, 100), 0);
    assert_int_equal(union_size(&u), 300);
    /* A delta that contradicts the previous query is an error. */
    union_begin_sorted(&u, s0, 100, NULL, 0, all_resident, NULL, 1);
    assert_int_equal(union_add(&u, NULL, 0, s1, 1), -1);
    assert_non_null(strstr(dh_errmsg(), "did not select"));
    union_begin_sorted(&u, s0, 100, NULL, 0, all_resident, NULL, 1);
    assert_int_equal(union_add(&u, s0 + 5, 1, NULL, 0), -1);
    assert_non_null(strstr(dh_errmsg(), "already selected"));
    union_release(&u);
}

static void test_shared_retrieval_by_hand(void **state)
{
    (void)state;
    /* S_0 = 0..9 with rows 3 and 4 missing before the step; query 1 drops 0, 1
     * and 3 and adds 100, 101 (not resident) and 102 (resident); query 2 keeps
     * query 1's selection. Rows 100..199 are resident only if even. */
    uint8_t bits[32] = {0};
    for (uint32_t r = 0; r < 256; r++)
        if (r < 10 ? (r != 3 && r != 4) : (r >= 100 && r < 200 && r % 2 == 0)) bits[r >> 3] |= (uint8_t)(1u << (r & 7));
    bitset R = {bits};
    uint32_t s0[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, missed[2] = {3, 4};
    uint32_t add1[3] = {100, 101, 102}, rem1[3] = {0, 1, 3};
    union_set u;
    union_init(&u);
    union_begin_sorted(&u, s0, 10, missed, 2, bit_member, &R, 1);
    assert_int_equal(union_add(&u, add1, 3, rem1, 3), 0);
    assert_int_equal(union_add(&u, NULL, 0, NULL, 0), 0);
    assert_int_equal(union_size(&u), 13);
    /* Shared: the union's misses, 3, 4 and 101. Per query: S_0 {3, 4}, S_1 {4, 101}, S_2 {4, 101}. */
    assert_int_equal(union_fetched(&u, 1), 3);
    assert_int_equal(union_fetched(&u, 0), 6);
    union_release(&u);
}

static void test_union_differential(void **state)
{
    (void)state;
    enum { NROWS = 4096, K = 256, Q = 8 };
    uint8_t bits[NROWS / 8];
    bitset R = {bits};
    uint32_t *sets[Q], nset[Q], added[Q][K], removed[Q][K], na[Q], nr[Q];
    for (int t = 0; t < Q; t++) sets[t] = malloc(K * sizeof(uint32_t));
    uint32_t *ref = malloc(Q * K * sizeof(uint32_t)), *tmp = malloc(Q * K * sizeof(uint32_t)),
             *got = malloc(Q * K * sizeof(uint32_t)), missed[K];
    uint8_t *in = calloc(NROWS, 1);
    rng_stream rs;
    rng_init(&rs, 5, 0, 0, 1);
    union_set u;
    union_init(&u);
    for (int trial = 0; trial < 60; trial++) {
        for (uint32_t i = 0; i < NROWS / 8; i++) bits[i] = (uint8_t)rng_u32(&rs);
        uint32_t q = 1 + rng_below(&rs, Q), churn = 1 + rng_below(&rs, K / 2);
        /* S_0: K distinct rows; each later query drops some rows and adds as many
         * new ones (possibly rows that an earlier query dropped, S_0's included). */
        memset(in, 0, NROWS);
        for (uint32_t n = 0; n < K;) {
            uint32_t r = rng_below(&rs, NROWS);
            if (!in[r]) { in[r] = 1; sets[0][n++] = r; }
        }
        qsort(sets[0], K, sizeof(uint32_t), cmp_u32);
        nset[0] = K;
        for (uint32_t t = 1; t < q; t++) {
            uint32_t drop = rng_below(&rs, churn + 1), n = 0;
            memcpy(sets[t], sets[t - 1], K * sizeof(uint32_t));
            for (uint32_t i = 0; i < drop; i++) {
                uint32_t j = rng_below(&rs, K);
                in[sets[t][j]] = 0;
                uint32_t r;
                do r = rng_below(&rs, NROWS); while (in[r]);
                in[r] = 1;
                sets[t][j] = r;
            }
            (void)n;
            qsort(sets[t], K, sizeof(uint32_t), cmp_u32);
            nset[t] = K;
            union_diff(sets[t - 1], K, sets[t], K, added[t], &na[t], removed[t], &nr[t]);
        }
        uint32_t nm = 0;
        for (uint32_t i = 0; i < K; i++)
            if (!bit_member(&R, sets[0][i])) missed[nm++] = sets[0][i];
        uint32_t nref = ref_union(sets, nset, q, ref, tmp);
        /* The union-only mode (shared retrieval) gives the same union and misses. */
        union_begin_sorted(&u, sets[0], K, missed, nm, bit_member, &R, 0);
        for (uint32_t t = 1; t < q; t++) assert_int_equal(union_add(&u, added[t], na[t], removed[t], nr[t]), 0);
        uint32_t ngot = union_rows(&u, sets[0], K, got);
        assert_true(same_rows(got, ngot, ref, nref));
        uint64_t shared_fast = union_missed_shared(&u);
        union_begin_sorted(&u, sets[0], K, missed, nm, bit_member, &R, 1);
        for (uint32_t t = 1; t < q; t++) assert_int_equal(union_add(&u, added[t], na[t], removed[t], nr[t]), 0);
        ngot = union_rows(&u, sets[0], K, got);
        assert_int_equal(union_size(&u), nref);
        assert_true(same_rows(got, ngot, ref, nref));
        assert_int_equal(shared_fast, union_missed_shared(&u));
        /* Missing rows against the plain definitions. */
        uint64_t shared = 0, per_query = 0;
        for (uint32_t i = 0; i < nref; i++) shared += !bit_member(&R, ref[i]);
        for (uint32_t t = 0; t < q; t++)
            for (uint32_t i = 0; i < K; i++) per_query += !bit_member(&R, sets[t][i]);
        assert_int_equal(union_missed_shared(&u), shared);
        assert_int_equal(union_missed_per_query(&u), per_query);
        assert_true(union_missed_per_query(&u) >= union_missed_shared(&u));
        /* Planted fault: one wrong row makes the comparison fail. */
        if (ngot) {
            got[ngot / 2] ^= 1u << 20;
            assert_false(same_rows(got, ngot, ref, nref));
        }
    }
    union_release(&u);
    for (int t = 0; t < Q; t++) free(sets[t]);
    free(ref);
    free(tmp);
    free(got);
    free(in);
}

static void test_staging_and_ring_bytes(void **state)
{
    (void)state;
    /* Three groups with the same union rows: reuse charges one group, no reuse all three. */
    double rows[3] = {4096, 4096, 4096}, bytes[3] = {4 * 656, 4 * 656, 4 * 656};
    double one = rows[0] * bytes[0];
    assert_true(union_staging_bytes(rows, bytes, 3, 1) == one);
    assert_true(union_staging_bytes(rows, bytes, 3, 0) == 3 * one);
    /* Unequal groups: reuse is sized by the largest. */
    rows[1] = 9000;
    assert_true(union_staging_bytes(rows, bytes, 3, 1) == 9000 * bytes[1]);
    assert_true(union_staging_bytes(rows, bytes, 3, 0) == (4096 + 9000 + 4096) * bytes[0]);

    spec_draft *d;
    assert_int_equal(spec_draft_load("models/drafts/glm53-dflash2.ini", &d), 0);
    assert_true(spec_ring_rows(d, 1000, 1) == 1000);
    assert_true(spec_ring_rows(d, 100000, 1) == (double)d->window);
    assert_true(spec_ring_rows(d, 100000, 0) == 100000);
    assert_true(spec_ring_bytes(d, 100000, 1) == d->window * d->row_bytes);
    assert_true(spec_weight_bytes_per_gpu(d) == d->weight_bytes / d->weight_shards);
    /* The pass reads the rings: a context-long draft KV costs more. */
    spec_cost on, off;
    spec_draft_cost(d, 16, 16 * spec_ring_rows(d, 100000, 1), &on);
    spec_draft_cost(d, 16, 16 * spec_ring_rows(d, 100000, 0), &off);
    assert_true(off.bytes > on.bytes && off.flops > on.flops);
    spec_draft_free(d);
    assert_int_equal(spec_draft_load("models/drafts/glm53-dspark.ini", &d), 0);
    /* DSpark adds its bias factors and head to the weights. */
    assert_true(spec_weight_bytes_per_gpu(d) > d->weight_bytes / d->weight_shards);
    spec_draft_free(d);
}

static void test_lookahead_queue(void **state)
{
    (void)state;
    union_ahead a;
    union_ahead_init(&a, 3);
    uint32_t rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (uint32_t round = 0; round < 4; round++) {
        while (union_ahead_count(&a) < 3) {
            uint32_t pos = round * 10 + union_ahead_count(&a);
            sel_delta d = {.pos = pos, .nrows = 100 + pos, .n_sel = 50, .n_added = 1 + pos % 3,
                           .n_removed = pos % 2, .added = rows, .removed = rows + 4};
            assert_int_equal(union_ahead_push(&a, &d), 0);
        }
        sel_delta d = {.pos = 99, .added = rows};
        assert_int_equal(union_ahead_push(&a, &d), -1);
        assert_non_null(strstr(dh_errmsg(), "full"));
        sel_delta p;
        union_ahead_peek(&a, 0, &p);
        assert_int_equal(p.nrows, 100 + p.pos);
        assert_int_equal(p.n_added, 1 + p.pos % 3);
        assert_memory_equal(p.added, rows, p.n_added * sizeof *rows);
        assert_memory_equal(p.removed, rows + 4, p.n_removed * sizeof *rows);
        /* Pop one or two (accepted + 1 positions committed), keep the rest. */
        union_ahead_pop(&a);
        if (round % 2) union_ahead_pop(&a);
    }
    union_ahead_release(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_drafts_load),
        cmocka_unit_test(test_config_rejects_bad_values),
        cmocka_unit_test(test_accept_extremes),
        cmocka_unit_test(test_sampled_mean_matches_expectation),
        cmocka_unit_test(test_accept_is_order_free_and_monotone),
        cmocka_unit_test(test_verify_length_matches_brute_force),
        cmocka_unit_test(test_union_identical_and_disjoint),
        cmocka_unit_test(test_shared_retrieval_by_hand),
        cmocka_unit_test(test_union_differential),
        cmocka_unit_test(test_staging_and_ring_bytes),
        cmocka_unit_test(test_lookahead_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
