/* test_cfgkey.c: reading a config through its schema table (common/cfgkey.h).
 *  - section patterns: an upper-case segment matches one segment, nothing else does;
 *  - differential: cfgk_double and cfgk_int accept and reject exactly what cfg_get_double
 *    and cfg_get_int do with the row's range and default, over values in, at and beyond the
 *    ends (the reference is the plain getter given the numbers by hand);
 *  - choices, the table's own check (a planted bad default is caught), and the Markdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"

static const cfg_key rows[] = {
    CK_ROW("hw", "bw", CK_NUM, "bytes/s", 1e3, 1e12, NULL, "A required rate.", 0),
    CK_ROW("hw", "eff", CK_NUM, "", 0.01, 1, "0.5", "An optional fraction.", 0),
    CK_ROW("kind.NAME", "n", CK_INT, "", -4, 40, "7", "An integer | with a pipe.", 0),
    CK_STR_ROW("kind.NAME", "sel", "own", "own|reuse|window", "A choice.", 0),
    CK_ROW("gpus.N.PHASE", "lat", CK_NUM, "us", 0, 1e6, "0", "A patterned section.", 0),
};
static const cfg_schema S = CFG_SCHEMA("x.ini", "Test", "A test schema.", rows);

static cfg *text(const char *t)
{
    cfg *c;
    if (cfg_load_string("x.ini", t, &c) < 0) fail_msg("%s", dh_errmsg());
    return c;
}

static void test_patterns(void **state)
{
    (void)state;
    assert_non_null(cfgk_find(&S, "kind.mla", "n"));
    assert_non_null(cfgk_find(&S, "gpus.8.dispatch", "lat"));
    assert_null(cfgk_find(&S, "kind", "n"));
    assert_null(cfgk_find(&S, "kind.a.b", "n"));
    assert_null(cfgk_find(&S, "kinds.a", "n"));
    assert_null(cfgk_find(&S, "kind.", "n"));
    assert_null(cfgk_find(&S, "gpus.8", "lat"));
    assert_null(cfgk_find(&S, "hw", "n"));
    assert_null(cfgk_find(&S, "hw.x", "bw"));
    assert_true(cfgk_has_section(&S, "kind.z") && !cfgk_has_section(&S, "pcie"));
}

static void test_against_plain_getters(void **state)
{
    (void)state;
    static const char *const vals[] = { "999.99", "1000", "5e11", "1e12", "1.0000001e12", "-1", "abc", "", "0.01", "1",
                                        "0.009", "7", "40", "41", "-4", "-5", "3.5", "1e400" };
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, "[hw]\nbw = %s\neff = %s\n[kind.a]\nn = %s\n", vals[i], vals[i], vals[i]);
        cfg *a = text(t), *b = text(t);
        double x = -7, y = -7, half = 0.5;
        long m = -7, n = -7, seven = 7;
        int ra = cfgk_double(a, &S, "hw", "bw", &x), rb = cfg_get_double(b, "hw", "bw", &y, CFG_REQUIRED, 1e3, 1e12);
        assert_int_equal(ra, rb);
        assert_true(ra < 0 || x == y);
        ra = cfgk_double(a, &S, "hw", "eff", &x);
        rb = cfg_get_double(b, "hw", "eff", &y, &half, 0.01, 1);
        assert_int_equal(ra, rb);
        assert_true(ra < 0 || x == y);
        ra = cfgk_int(a, &S, "kind.a", "n", &m);
        rb = cfg_get_int(b, "kind.a", "n", &n, &seven, -4, 40);
        assert_int_equal(ra, rb);
        assert_true(ra < 0 || m == n);
        cfg_free(a);
        cfg_free(b);
    }
    /* Absent: the row's default (1), or an error naming the key when required. */
    cfg *c = text("[hw]\n[kind.a]\n");
    double x;
    long n;
    assert_int_equal(cfgk_double(c, &S, "hw", "eff", &x), 1);
    assert_true(x == 0.5);
    assert_int_equal(cfgk_int(c, &S, "kind.a", "n", &n), 1);
    assert_int_equal(n, 7);
    assert_int_equal(cfgk_double(c, &S, "hw", "bw", &x), -1);
    assert_string_equal(dh_errmsg(), "x.ini: missing key 'bw' in [hw]");
    cfg_free(c);
}

static void test_choices(void **state)
{
    (void)state;
    cfg *c = text("[kind.a]\nsel = reuse\n[kind.b]\nsel = reus\n");
    int i = -1;
    assert_int_equal(cfgk_choice(c, &S, "kind.a", "sel", &i), 0);
    assert_int_equal(i, 1);
    assert_int_equal(cfgk_choice(c, &S, "kind.b", "sel", &i), -1);
    assert_string_equal(dh_errmsg(), "x.ini: [kind.b] sel = 'reus' (expected one of: own, reuse, window)");
    assert_int_equal(cfgk_choice(c, &S, "kind.c", "sel", &i), 1);
    assert_int_equal(i, 0);
    cfg_free(c);
}

static void test_schema_check(void **state)
{
    (void)state;
    assert_int_equal(cfgk_schema_check(&S), 0);
    static const cfg_key bad_def[] = { CK_ROW("a", "x", CK_NUM, "", 0, 1, "2", "Out of range.", 0) };
    static const cfg_key bad_choice[] = { CK_STR_ROW("a", "x", "maybe", "yes|no", "Not a choice.", 0) };
    static const cfg_key twice[] = { CK_ROW("a", "x", CK_NUM, "", 0, 1, "0", "One.", 0),
                                     CK_ROW("a", "x", CK_NUM, "", 0, 1, "0", "Two.", 0) };
    static const cfg_key empty[] = { CK_ROW("a", "x", CK_INT, "", 5, 4, NULL, "Empty range.", 0) };
    const cfg_schema b1 = CFG_SCHEMA("b", "B", "", bad_def), b2 = CFG_SCHEMA("b", "B", "", bad_choice),
                     b3 = CFG_SCHEMA("b", "B", "", twice), b4 = CFG_SCHEMA("b", "B", "", empty);
    assert_int_equal(cfgk_schema_check(&b1), -1);
    assert_int_equal(cfgk_schema_check(&b2), -1);
    assert_int_equal(cfgk_schema_check(&b3), -1);
    assert_int_equal(cfgk_schema_check(&b4), -1);
}

static void test_markdown(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const cfg_schema *all[] = { &S };
    cfgk_markdown(f, all, 1);
    fclose(f);
    assert_non_null(strstr(buf, "## Test (`x.ini`)"));
    assert_non_null(strstr(buf, "| `[hw]` | `bw` | number | bytes/s | 1000 .. 1e+12 | required | A required rate. |"));
    assert_non_null(strstr(buf, "| `[kind.NAME]` | `n` | integer | - | -4 .. 40 | `7` | An integer \\| with a pipe. |"));
    assert_non_null(strstr(buf, "`own`, `reuse`, `window`"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_against_plain_getters),
        cmocka_unit_test(test_choices),
        cmocka_unit_test(test_schema_check),
        cmocka_unit_test(test_markdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
