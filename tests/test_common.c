/* test_common.c: the config reader and the counter-based random streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/rng.h"

static const char *ini =
    "[model]\n"
    "layers = 78   ; GLM-5.3 config.json\n"
    "hidden = 6144\n"
    "accept = 0.6, 0.3 ,0.1\n"
    "fp8 = yes\n"
    "[hw]\n"
    "bw = 55.5e9\n";

static void test_cfg_typed_getters(void **state)
{
    (void)state;
    cfg *c;
    assert_int_equal(cfg_load_string("t.ini", ini, &c), 0);
    long layers;
    assert_int_equal(cfg_get_int(c, "model", "layers", &layers, CFG_REQUIRED, 1, 1000), 0);
    assert_int_equal(layers, 78);
    double bw, list[8];
    size_t n;
    assert_int_equal(cfg_get_double(c, "hw", "bw", &bw, CFG_REQUIRED, 0, 1e12), 0);
    assert_true(bw == 55.5e9);
    assert_int_equal(cfg_get_doubles(c, "model", "accept", list, 8, &n, 0, 1), 0);
    assert_int_equal(n, 3);
    assert_true(list[1] == 0.3);
    int fp8;
    assert_int_equal(cfg_get_bool(c, "model", "fp8", &fp8, NULL), 0);
    assert_int_equal(fp8, 1);
    /* hidden was never read: the unused-key check must name it. */
    assert_int_equal(cfg_check_unused(c), -1);
    assert_non_null(strstr(dh_errmsg(), "'hidden'"));
    long hidden, def = 1;
    assert_int_equal(cfg_get_int(c, "model", "hidden", &hidden, &def, 1, 100000), 0);
    assert_int_equal(cfg_check_unused(c), 0);
    /* An absent optional key takes its default and returns 1. */
    long absent;
    assert_int_equal(cfg_get_int(c, "model", "absent", &absent, &def, 0, 10), 1);
    assert_int_equal(absent, 1);
    cfg_free(c);
}

static void test_cfg_rejects_bad_values(void **state)
{
    (void)state;
    cfg *c;
    assert_int_equal(cfg_load_string("bad.ini", "[a]\nx = 12abc\ny = -3\nz = maybe\nw = 1,,2\n", &c), 0);
    long x;
    double y, w[4];
    size_t n;
    int z;
    assert_int_equal(cfg_get_int(c, "a", "x", &x, CFG_REQUIRED, 0, 100), -1);
    assert_non_null(strstr(dh_errmsg(), "bad.ini"));
    assert_non_null(strstr(dh_errmsg(), "not an integer"));
    /* Out of range is an error, never clamped. */
    assert_int_equal(cfg_get_double(c, "a", "y", &y, CFG_REQUIRED, 0, 1), -1);
    assert_non_null(strstr(dh_errmsg(), "outside"));
    assert_int_equal(cfg_get_bool(c, "a", "z", &z, NULL), -1);
    assert_int_equal(cfg_get_doubles(c, "a", "w", w, 4, &n, 0, 10), -1);
    assert_int_equal(cfg_get_int(c, "a", "missing", &x, CFG_REQUIRED, 0, 1), -1);
    assert_non_null(strstr(dh_errmsg(), "missing key 'missing'"));
    cfg_free(c);
    /* Duplicate keys and syntax errors fail at load. */
    assert_int_equal(cfg_load_string("dup.ini", "[a]\nx = 1\nx = 2\n", &c), -1);
    assert_non_null(strstr(dh_errmsg(), "twice"));
    assert_int_equal(cfg_load_string("syn.ini", "[a\nx = 1\n", &c), -1);
    assert_int_equal(cfg_load("/nonexistent/dir/x.ini", &c), -1);
}

static void test_cfg_set_arg_and_roundtrip(void **state)
{
    (void)state;
    cfg *c, *d;
    assert_int_equal(cfg_load_string("t.ini", ini, &c), 0);
    assert_int_equal(cfg_set_arg(c, "model.layers=61"), 0);
    assert_int_equal(cfg_set_arg(c, "nodot=1"), -1);
    assert_int_equal(cfg_set_arg(c, "a.=1"), -1);
    char *text = cfg_to_string(c);
    assert_int_equal(cfg_load_string("round", text, &d), 0);
    long layers;
    assert_int_equal(cfg_get_int(d, "model", "layers", &layers, CFG_REQUIRED, 1, 100), 0);
    assert_int_equal(layers, 61);
    assert_int_equal(cfg_section_count(d), 2);
    assert_string_equal(cfg_section_name(d, 1), "hw");
    free(text);
    cfg_free(c);
    cfg_free(d);
}

/* The defaults a getter took are listed once each, in the order read, as text that
 * reads back to the same value; keys the file gives and required keys are not. */
static void test_cfg_defaults_listed(void **state)
{
    (void)state;
    cfg *c;
    assert_int_equal(cfg_load_string("d.ini", "[a]\nx = 2\n", &c), 0);
    double x, y, z = 0.1;
    long n, nd = -7;
    int b, bd = 1;
    const char *str;
    assert_int_equal(cfg_get_double(c, "a", "x", &x, &z, 0, 10), 0);
    assert_int_equal(cfg_get_double(c, "a", "y", &y, &z, 0, 10), 1);
    assert_int_equal(cfg_get_double(c, "a", "y", &y, &z, 0, 10), 1);
    assert_int_equal(cfg_get_int(c, "b", "n", &n, &nd, -10, 10), 1);
    assert_int_equal(cfg_get_bool(c, "a", "on", &b, &bd), 1);
    assert_int_equal(cfg_get_string(c, "a", "name", &str, "x y"), 1);
    assert_int_equal(cfg_get_double(c, "a", "req", &y, CFG_REQUIRED, 0, 1), -1);
    const char *want[][3] = { { "a", "y", "0.1" }, { "b", "n", "-7" }, { "a", "on", "true" }, { "a", "name", "x y" } };
    assert_int_equal(cfg_default_count(c), 4);
    for (size_t i = 0; i < 4; i++) {
        const char *sec, *key, *val;
        cfg_default_at(c, i, &sec, &key, &val);
        assert_string_equal(sec, want[i][0]);
        assert_string_equal(key, want[i][1]);
        assert_string_equal(val, want[i][2]);
    }
    /* A value that %.15g does not carry exactly is written with 17 digits. */
    double third = 1.0 / 3;
    assert_int_equal(cfg_get_double(c, "a", "third", &y, &third, 0, 1), 1);
    const char *sec, *key, *val;
    cfg_default_at(c, 4, &sec, &key, &val);
    assert_true(strtod(val, NULL) == third);
    cfg_free(c);
}

static void test_rng_streams_independent_of_order(void **state)
{
    (void)state;
    /* Drawing stream B first must not change stream A: no shared state. */
    rng_stream a1, a2, b;
    uint32_t first[64], second[64];
    rng_init(&a1, 42, 3, 7, 1);
    for (int i = 0; i < 64; i++) first[i] = rng_u32(&a1);
    rng_init(&b, 42, 3, 8, 1);
    for (int i = 0; i < 1000; i++) (void)rng_u32(&b);
    rng_init(&a2, 42, 3, 7, 1);
    for (int i = 0; i < 64; i++) second[i] = rng_u32(&a2);
    assert_memory_equal(first, second, sizeof first);
    /* Different keys give different streams. */
    rng_init(&b, 42, 3, 8, 1);
    int same = 0;
    for (int i = 0; i < 64; i++) same += rng_u32(&b) == first[i];
    assert_true(same < 4);
    /* Seeking to a position gives the same draws whatever came before. */
    rng_seek(&a1, 5);
    uint32_t x = rng_u32(&a1);
    rng_init(&a2, 42, 3, 7, 1);
    rng_seek(&a2, 5);
    assert_int_equal(rng_u32(&a2), x);
}

static void test_rng_uniform_moments(void **state)
{
    (void)state;
    rng_stream r;
    rng_init(&r, 1, 0, 0, 0);
    const int n = 200000;
    double sum = 0, sum2 = 0;
    uint32_t hist[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&r);
        assert_true(u >= 0 && u < 1);
        sum += u;
        sum2 += u * u;
        hist[rng_below(&r, 10)]++;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    /* Standard error of the mean is sqrt(1/12/n) ~ 6.5e-4: allow 5 sigma. */
    assert_true(mean > 0.5 - 3.3e-3 && mean < 0.5 + 3.3e-3);
    assert_true(var > 1.0 / 12 - 2e-3 && var < 1.0 / 12 + 2e-3);
    for (int i = 0; i < 10; i++) assert_true((int)hist[i] > n / 10 - 700 && (int)hist[i] < n / 10 + 700);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cfg_typed_getters),
        cmocka_unit_test(test_cfg_rejects_bad_values),
        cmocka_unit_test(test_cfg_set_arg_and_roundtrip),
        cmocka_unit_test(test_cfg_defaults_listed),
        cmocka_unit_test(test_rng_streams_independent_of_order),
        cmocka_unit_test(test_rng_uniform_moments),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
