/* test_knobs.c: every policy's claim about the [policy] keys it does not read
 * (pol_ops.knobs), which dhsweep relies on to run a policy once across the
 * values of such a key (sweep/swrun.c). For every built-in policy with a
 * claim, every [policy] key of the instance schema it leaves out is set to
 * its default and to another valid value, and the two runs must give the
 * same JSON byte for byte:
 *   - on the tiny hand-built configuration (tests/test_sim_tiny.h) with a
 *     random-walk workload, HBM to spare;
 *   - on the built-in default instance (GLM-5.3, 8 x H200) at a small
 *     concurrency and a few steps, the generator's streams and the real
 *     memory plan (resident is HBM-limited there).
 * The comparison can fail: a key a policy does read (hisparse's budget,
 * adaptive's cap on optional rows) changes its JSON in the same harness. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "sim/pol.h"
#include "sim/sim.h"
#include "test_sim_src.h"
#include "test_sim_tiny.h"

static char dir[256];
static char tiny_inst[300];
static const char *default_inst = "models/instances/glm53-h200x8.ini";

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_knobs.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char buf[4096];
    tiny_write_model(dir, 1000.0, 64);
    tiny_hw_text(buf, sizeof buf, 10e9, "");
    tiny_write(dir, "hw.ini", buf);
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(2)
             "[workload]\nmode = closed\nconcurrency = 3\nprompt_len = 3000\noutput_len = 40\noutput_len_max = 80\n"
             "steps = 100\n[policy]\nname = hisparse\n[trace]\npreset = unused\nseed = 3\n", dir, dir);
    tiny_write(dir, "inst.ini", buf);
    snprintf(tiny_inst, sizeof tiny_inst, "%s/inst.ini", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tiny_rmdir(dir);
}

/* The JSON of policy pol on the instance with sets, from src; NULL with the
 * message in err when the run (or the configuration) fails. */
static char *run_json(const char *inst, char **sets, int n, pol_kind pol, sel_source *src, char *err, size_t cap)
{
    sim_config sc;
    memset(&sc, 0, sizeof sc);
    if (sim_config_load(inst, sets, n, &sc) < 0) { snprintf(err, cap, "%s", dh_errmsg()); sim_config_release(&sc); return NULL; }
    sim_result r;
    memset(&r, 0, sizeof r);
    char *j = NULL;
    if (sim_run(&sc, pol, src, &r) == 0) j = json_of(&r);
    else snprintf(err, cap, "%s", dh_errmsg());
    sim_result_release(&r);
    sim_config_release(&sc);
    return j;
}

/* Another valid value of the row than its default: another choice, or the
 * first of a few candidates the configuration accepts (cross-key checks
 * such as low watermark < high watermark). 0 with val set, -1 if none. */
static int other_value(const char *inst, char **base, int n_base, const cfg_key *k, char *val, size_t cap)
{
    char cands[6][64];
    int nc = 0;
    if (k->type == CK_STR) {
        if (!k->choices) return -1;
        for (const char *w = k->choices; *w && nc < 6;) {
            size_t len = strcspn(w, "|");
            snprintf(cands[nc], sizeof cands[nc], "%.*s", (int)len, w);
            if (strcmp(cands[nc], k->def)) nc++;
            w += len + (w[len] == '|');
        }
    } else {
        double d = k->def ? atof(k->def) : k->min, c[5] = { 2 * d + 1, (d + k->max) / 2, (d + k->min) / 2, k->min, k->max };
        for (int i = 0; i < 5; i++) {
            double v = k->type == CK_INT ? (double)(long long)c[i] : c[i];
            if (v < k->min || v > k->max || v == d) continue;
            snprintf(cands[nc++], sizeof cands[0], "%.17g", v);
        }
    }
    for (int i = 0; i < nc; i++) {
        char set[200];
        snprintf(set, sizeof set, "policy.%s=%s", k->key, cands[i]);
        char **sets = calloc((size_t)n_base + 1, sizeof *sets);
        if (n_base) memcpy(sets, base, (size_t)n_base * sizeof *sets);
        sets[n_base] = set;
        sim_config sc;
        memset(&sc, 0, sizeof sc);
        int ok = sim_config_load(inst, sets, n_base + 1, &sc) == 0;
        sim_config_release(&sc);
        free(sets);
        if (ok) { snprintf(val, cap, "%s", cands[i]); return 0; }
    }
    return -1;
}

/* Run pol with key at its default and at another value; 1 if the JSON is the
 * same bytes (or both runs fail with the same message). */
static int same_at_two_values(const char *inst, char **base, int n_base, pol_kind pol, const cfg_key *k, sel_source *src)
{
    char other[64];
    if (other_value(inst, base, n_base, k, other, sizeof other) < 0) fail_msg("[policy] %s: no other valid value", k->key);
    char set_a[200], set_b[200], err_a[1024] = "", err_b[1024] = "";
    snprintf(set_a, sizeof set_a, "policy.%s=%s", k->key, k->def ? k->def : "0");
    snprintf(set_b, sizeof set_b, "policy.%s=%s", k->key, other);
    char **sets = calloc((size_t)n_base + 1, sizeof *sets);
    if (n_base) memcpy(sets, base, (size_t)n_base * sizeof *sets);
    sets[n_base] = set_a;
    char *a = run_json(inst, sets, n_base + 1, pol, src, err_a, sizeof err_a);
    sets[n_base] = set_b;
    char *b = run_json(inst, sets, n_base + 1, pol, src, err_b, sizeof err_b);
    free(sets);
    int same = a && b ? !strcmp(a, b) : (!a && !b && !strcmp(err_a, err_b));
    if (!same) print_message("  %s: %s and %s differ\n", pol_name_of(pol), set_a, set_b);
    free(a);
    free(b);
    return same;
}

static const cfg_key *policy_row(const char *key)
{
    const cfg_key *k = cfgk_find(&instance_schema, "policy", key);
    assert_non_null(k);
    return k;
}

/* Every claim of every built-in policy, on the instance with base sets and
 * source src; returns the (policy, key) pairs checked. */
static int check_claims(const char *inst, char **base, int n_base, sel_source *src)
{
    int checked = 0;
    for (int p = 0; p < POL_N; p++) {
        const pol_ops *o = pol_ops_of((pol_kind)p);
        if (!o->knobs) continue;
        for (size_t i = 0; i < instance_schema.n; i++) {
            const cfg_key *k = &instance_schema.k[i];
            if (strcmp(k->section, "policy") || !strcmp(k->key, "name") || pol_reads_knob((pol_kind)p, k->key)) continue;
            if (!same_at_two_values(inst, base, n_base, (pol_kind)p, k, src))
                fail_msg("policy %s claims not to read [policy] %s, but its results change with it", o->name, k->key);
            checked++;
        }
    }
    return checked;
}

static sel_source *tiny_source(void)
{
    sim_config sc;
    if (sim_config_load(tiny_inst, NULL, 0, &sc) < 0) fail_msg("%s", dh_errmsg());
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    sel_source *src = ts_source(&sh, 0.25, 5);
    trace_shape_release(&sh);
    sim_config_release(&sc);
    return src;
}

static void test_claims_hold_on_the_tiny_instance(void **state)
{
    (void)state;
    sel_source *src = tiny_source();
    int n = check_claims(tiny_inst, NULL, 0, src);
    assert_true(n >= 4 * 4); /* resident leaves out every key, the others most */
    sel_source_free(src);
}

static char *small_default[] = { "workload.concurrency=16", "workload.steps=30" };

static void test_claims_hold_on_the_default_instance(void **state)
{
    (void)state;
    sim_config sc;
    if (sim_config_load(default_inst, small_default, 2, &sc) < 0) fail_msg("%s", dh_errmsg());
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) fail_msg("%s", dh_errmsg());
    sim_config_release(&sc);
    check_claims(default_inst, small_default, 2, src);
    sel_source_free(src);
}

/* The planted fault: keys the policies do read change their JSON in the same
 * harness, so a wrong claim would be caught. */
static void test_a_read_key_changes_the_results(void **state)
{
    (void)state;
    sel_source *src = tiny_source();
    assert_true(pol_reads_knob(POL_HISPARSE, "hisparse_budget_k"));
    assert_false(same_at_two_values(tiny_inst, NULL, 0, POL_HISPARSE, policy_row("hisparse_budget_k"), src));
    assert_false(same_at_two_values(tiny_inst, NULL, 0, POL_ORACLE, policy_row("hisparse_budget_k"), src));
    sel_source_free(src);
    sim_config sc;
    if (sim_config_load(default_inst, small_default, 2, &sc) < 0) fail_msg("%s", dh_errmsg());
    if (sim_open_source(&sc, &src) < 0) fail_msg("%s", dh_errmsg());
    sim_config_release(&sc);
    assert_true(pol_reads_knob(POL_ADAPTIVE, "adaptive_max_optional_k"));
    assert_false(same_at_two_values(default_inst, small_default, 2, POL_ADAPTIVE, policy_row("adaptive_max_optional_k"), src));
    sel_source_free(src);
}

static void test_reads_knob_parses_the_list(void **state)
{
    (void)state;
    assert_false(pol_reads_knob(POL_RESIDENT, "hisparse_budget_k"));
    assert_true(pol_reads_knob(POL_HISPARSE, "host_to_device_ratio"));
    assert_false(pol_reads_knob(POL_HISPARSE, "hisparse_budget")); /* a prefix is not the key */
    assert_false(pol_reads_knob(POL_ADAPTIVE, "hisparse_budget_k"));
    /* No claim: every key counts as read. */
    assert_true(pol_reads_knob(POL_SGLANG_HISPARSE, "hisparse_budget_k"));
    assert_true(pol_reads_knob((pol_kind)POL_MAX, "anything"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_knob_parses_the_list),
        cmocka_unit_test(test_claims_hold_on_the_tiny_instance),
        cmocka_unit_test(test_claims_hold_on_the_default_instance),
        cmocka_unit_test(test_a_read_key_changes_the_results),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
