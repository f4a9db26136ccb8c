/* test_fit.c: the calibration fits (analysis/fit*.c), the dhbench CSV reader,
 * the profile checker and the validation statistics.
 *
 * Fits are tested on synthetic measurements generated from known
 * coefficients with seeded Gaussian relative noise of sigma = 1 %: a
 * coefficient is recovered when it lies within 4 of its standard errors of the
 * truth (a 6e-5 chance of a false failure per coefficient for a correct fit)
 * and that standard error is at most 10 % of the truth (the data determine
 * it), and the residual RMS must estimate the noise
 * (between 0.7 sigma and 1.3 sigma).  A planted fault (a truth off by 10 %)
 * must fail the same check. */
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

#include "analysis/bcsv.h"
#include "analysis/fit.h"
#include "analysis/fitcost.h"
#include "analysis/prof.h"
#include "analysis/valid.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/rng.h"
#include "sim/hw.h"

#define SIGMA 0.01

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/dhcal_test_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static double gauss(rng_stream *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* A dhbench line; text columns then numbers by name. */
typedef struct {
    const char *kernel, *version, *dtype, *pattern;
    double row_bytes, rows, sms, pool, batch, queries, k, union_rows, ctx, heads, m, n, kdim, bytes, flops, median_us;
    const char *ceiling_name; /* NULL: no ceiling cells */
    double ceiling;
} line_in;

static void write_line(FILE *f, const line_in *l)
{
#define N(x) (isnan(x) ? fprintf(f, ",") : fprintf(f, ",%.17g", (x)))
    fprintf(f, "test,%s,%s,H200,%s", l->kernel, l->version, l->dtype ? l->dtype : "");
    N(l->row_bytes); N(l->rows); N(l->sms); N(l->pool);
    fprintf(f, ",%s", l->pattern ? l->pattern : "");
    N(l->batch); N(l->queries); N(l->k); N(l->union_rows); N(l->ctx); N(l->heads); N(l->m); N(l->n); N(l->kdim);
    N(l->bytes); N(l->flops);
    fprintf(f, ",5");
    N(l->median_us);
    if (l->ceiling_name) fprintf(f, ",,,,,%s,%.17g,,1\n", l->ceiling_name, l->ceiling);
    else fprintf(f, ",,,,,,,,1\n");
#undef N
}

static line_in blank(const char *kernel)
{
    line_in l = {kernel, "1", NULL, NULL, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NULL, NAN};
    return l;
}

static FILE *open_csv(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# synthetic\n%s\n", bcsv_header());
    return f;
}

static const fit_coef *find_coef(const fit_section *s, const char *key)
{
    for (size_t i = 0; i < s->ncoef; i++)
        if (!strcmp(s->coef[i].key, key)) return &s->coef[i];
    return NULL;
}

/* The recovery check: within 4 standard errors, themselves at most 10 % of the truth. */
static int recovered(const fit_section *s, const char *key, double truth)
{
    const fit_coef *c = find_coef(s, key);
    if (!c) return 0;
    int ok = fabs(c->value - truth) <= 4 * c->se + 1e-12 && c->se <= 0.1 * fabs(truth);
    if (!ok) print_message("  %s: fitted %g +- %g, truth %g\n", key, c->value, c->se, truth);
    return ok;
}

static int fit_file_opts(const char *path, const fit_opts *o, fit_section **secs, size_t *ns)
{
    bcsv_table t;
    bcsv_init(&t);
    int rc = bcsv_load(&t, path);
    if (rc == 0) rc = fit_bench(&t, o, secs, ns, NULL);
    if (rc) print_message("  fit: %s\n", dh_errmsg());
    bcsv_release(&t);
    return rc;
}

static int fit_file(const char *path, fit_section **secs, size_t *ns, const char *const *holdout)
{
    fit_opts o;
    fit_opts_default(&o);
    o.holdout = holdout;
    return fit_file_opts(path, &o, secs, ns);
}

/* The top-k's truth (the topk form of fitcost.h): t0 + per wave of n blocks, wave_us + k x k_ns
 * + (a^q + b^q)^(1/q), a = ctx x row_ns, b = n x ctx / score rate, full waves of 132 and a
 * last of the rest, computed here without fitcost's scaling; top-ks = batch x queries
 * (queries empty: 1, as dhbench's topk lines). */
#define TK_WAVE_US 10.0
#define TK_ROW_NS 0.07
#define TK_K_NS 10.0
#define TK_GPS 1200.0
#define TK_Q 1.6
#define TK_SLOTS 132.0
static double tk_gps = TK_GPS;   /* INFINITY: no memory term (every point bound by its blocks' pass) */
static double topk_truth(double t0, double topks, double ctx, double k)
{
    double t = t0;
    for (double left = topks; left > 0; left -= TK_SLOTS) {
        const double n = left < TK_SLOTS ? left : TK_SLOTS, a = ctx * TK_ROW_NS / 1000, b = n * ctx / (tk_gps * 1e3);
        t += TK_WAVE_US + k * TK_K_NS / 1000 + pow(pow(a, TK_Q) + pow(b, TK_Q), 1 / TK_Q);
    }
    return t;
}

/* Top-k lines of fixed cost t0 on a grid of top-ks per launch (across the waves' edges),
 * scores per request and k, sms = TK_SLOTS (sms_of(i), when given, sets line i's). */
static void write_topk_grid(FILE *f, rng_stream *r, double t0, double (*sms_of)(int))
{
    static const double batch[] = {1, 66, 132, 133, 264, 400}, ctx[] = {25000, 100000, 500000}, kk[] = {512, 2048};
    int i = 0;
    for (size_t b = 0; b < 6; b++)
        for (size_t c = 0; c < 3; c++)
            for (size_t j = 0; j < 2; j++, i++) {
                line_in l = blank("topk");
                l.batch = batch[b]; l.ctx = ctx[c]; l.k = kk[j];
                l.sms = sms_of ? sms_of(i) : TK_SLOTS;
                l.median_us = topk_truth(t0, batch[b], ctx[c], kk[j]) * (1 + SIGMA * gauss(r));
                write_line(f, &l);
            }
}

static void write_topk(FILE *f, rng_stream *r, double t0)
{
    write_topk_grid(f, r, t0, NULL);
}

/* Attention form: t = t0 + bytes / bw + batch*queries * q + batch*union_rows * u. */
static void test_hbm_recovers(void **state)
{
    (void)state;
    const double t0 = 6.0, gbps = 3900.0, q_us = 0.3, u_us = 0.0002;
    char path[256];
    FILE *f = open_csv("attn.csv", path, sizeof path);
    rng_stream r;
    rng_init(&r, 42, 0, 0, 1);
    for (int b = 1; b <= 64; b *= 2)
        for (int q = 1; q <= 8; q *= 2)
            for (int k = 512; k <= 4096; k *= 2) {
                line_in l = blank("attention");
                l.batch = b; l.queries = q; l.k = k;
                l.union_rows = k * (1 + 0.3 * (q - 1));
                /* Each query reads its own k rows; the union is staged once. */
                l.bytes = (double)b * q * k * 656.0;
                double t = t0 + l.bytes / (gbps * 1e3) + b * q * q_us + b * l.union_rows * u_us;
                l.median_us = t * (1 + SIGMA * gauss(&r));
                write_line(f, &l);
            }
    fclose(f);
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
    assert_int_equal(ns, 1);
    assert_true(recovered(s, "t0_us", t0));
    assert_true(recovered(s, "hbm_gbps", gbps));
    assert_true(recovered(s, "query_us", q_us));
    assert_true(recovered(s, "union_row_us", u_us));
    assert_true(s->res.rms_rel > 0.7 * SIGMA && s->res.rms_rel < 1.3 * SIGMA);
    assert_true(s->res.r2 > 0.99);
    /* Planted fault: a truth 10 % off must fail the same check. */
    assert_false(recovered(s, "hbm_gbps", gbps * 1.1));
    free(s);
}

/* Decode GEMM bytes: FP8 or BF16 weights and activations, BF16 output. */
static double gemm_bytes(int fp8, double m, double n, double kdim)
{
    return (fp8 ? 1.0 : 2.0) * (m * kdim + kdim * n) + 2.0 * m * n;
}

/* GEMM per dtype (weights streamed: t0 + bytes / bandwidth), the indexer
 * (multiply-adds from the shape, or from the flops column), the top-k (a
 * constant), plus the version choice: version 2 is 20 % faster on every
 * shared configuration and must be chosen. */
static void test_gemm_indexer_versions(void **state)
{
    (void)state;
    const double t0 = 4.0, bw_bf16 = 4200.0, bw_fp8 = 4400.0, rate = 900.0, t0i = 7.0, topk = 29.0;
    char path[256];
    FILE *f = open_csv("gemm.csv", path, sizeof path);
    rng_stream r;
    rng_init(&r, 42, 1, 0, 1);
    for (int v = 1; v <= 2; v++)
        for (int d = 0; d < 2; d++)
            for (int m = 16; m <= 64; m *= 2)
                for (int n = 1024; n <= 16384; n *= 2) {
                    line_in l = blank("gemm");
                    l.version = v == 1 ? "1" : "2";
                    l.dtype = d ? "fp8" : "bf16";
                    l.m = m; l.n = n; l.kdim = 6144;
                    l.flops = 2.0 * m * n * l.kdim;
                    l.bytes = gemm_bytes(d, m, n, l.kdim);
                    double t = t0 + l.bytes / ((d ? bw_fp8 : bw_bf16) * 1e3);
                    if (v == 1) t *= 1.2;
                    l.median_us = t * (1 + SIGMA * gauss(&r));
                    write_line(f, &l);
                }
    for (int ctx = 8192; ctx <= 131072; ctx *= 2)
        for (int h = 32; h <= 64; h *= 2)
            for (int b = 1; b <= 16; b *= 4) {
                line_in l = blank("indexer");
                l.ctx = ctx; l.heads = h; l.batch = b; l.queries = 1;
                /* Half the lines give the shape, half only the flops (as dhbench writes them). */
                if (h == 32) l.kdim = 128;
                else l.flops = 2.0 * b * ctx * h * 128;
                l.median_us = (t0i + (double)b * ctx * h * 128 / (rate * 1e3)) * (1 + SIGMA * gauss(&r));
                write_line(f, &l);
            }
    write_topk(f, &r, topk);
    fclose(f);
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
    assert_int_equal(ns, 4);
    int seen = 0;
    for (size_t i = 0; i < ns; i++) {
        if (!strcmp(s[i].section, "gemm_bf16")) { seen |= 1; assert_true(recovered(&s[i], "weight_gbps", bw_bf16)); assert_string_equal(s[i].version, "2"); }
        if (!strcmp(s[i].section, "gemm_fp8")) {
            seen |= 2;
            assert_true(recovered(&s[i], "weight_gbps", bw_fp8));
            assert_true(recovered(&s[i], "t0_us", t0));
            assert_false(recovered(&s[i], "weight_gbps", bw_fp8 * 1.1)); /* planted */
        }
        if (!strcmp(s[i].section, "indexer")) { seen |= 4; assert_true(recovered(&s[i], "rate_gmacs", rate)); assert_true(recovered(&s[i], "t0_us", t0i)); }
        if (!strcmp(s[i].section, "topk")) {
            seen |= 8;
            assert_int_equal(s[i].form, FIT_FORM_TOPK);
            assert_true(recovered(&s[i], "t0_us", topk));
            assert_true(recovered(&s[i], "wave_us", TK_WAVE_US));
            assert_true(recovered(&s[i], "row_ns", TK_ROW_NS));
            assert_true(recovered(&s[i], "k_ns", TK_K_NS));
            assert_true(recovered(&s[i], "score_gps", TK_GPS));
            assert_true(recovered(&s[i], "steepness", TK_Q));
            assert_false(recovered(&s[i], "row_ns", TK_ROW_NS * 1.1)); /* planted */
            assert_true(s[i].slots == TK_SLOTS);
            /* batch: the top-ks per launch. */
            assert_true(s[i].nrange >= 3 && !strcmp(s[i].range[0].name, "batch") && s[i].range[0].min == 1 &&
                        s[i].range[0].max == 400);
        }
    }
    assert_int_equal(seen, 15);
    free(s);
}

static double sms_mixed(int i) { return i == 7 ? 264 : TK_SLOTS; }
static double sms_missing(int i) { return i == 3 ? NAN : TK_SLOTS; }

/* The top-k form's inputs: a line that ran another count of blocks at once, or one without
 * the count, is an error naming the line; a single working point fitted as a constant (the
 * const form by --form) gives the mean; the indexer's top-k lines count batch x queries. */
static void test_topk_form(void **state)
{
    (void)state;
    char path[256];
    fit_section *s;
    size_t ns;
    rng_stream r;
    rng_init(&r, 42, 7, 0, 1);
    for (int bad = 0; bad < 2; bad++) {
        FILE *f = open_csv("topk-bad.csv", path, sizeof path);
        write_topk_grid(f, &r, 30.0, bad ? sms_missing : sms_mixed);
        fclose(f);
        assert_int_equal(fit_file(path, &s, &ns, NULL), -1);
        assert_non_null(strstr(dh_errmsg(), "topk-bad.csv"));
        assert_non_null(strstr(dh_errmsg(), bad ? "lacks ctx, k or sms" : "blocks at once"));
    }
    /* Queries: 16 requests x 1-16 queries are 16-256 top-ks, past one wave at 132. */
    FILE *f = open_csv("topk-q.csv", path, sizeof path);
    for (int q = 1; q <= 16; q *= 2)
        for (int ctx = 25000; ctx <= 400000; ctx *= 4)
            for (int k = 512; k <= 2048; k *= 4) {
                line_in l = blank("topk");
                l.pattern = "indexer";
                l.batch = 16; l.queries = q; l.ctx = ctx; l.k = k; l.sms = TK_SLOTS;
                l.median_us = topk_truth(30.0, 16.0 * q, ctx, k) * (1 + SIGMA * gauss(&r));
                write_line(f, &l);
            }
    fclose(f);
    assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
    assert_true(recovered(s, "t0_us", 30.0) && recovered(s, "wave_us", TK_WAVE_US) && recovered(s, "row_ns", TK_ROW_NS));
    assert_true(s->range[0].max == 256);
    free(s);
    /* The simulator's top-k (sim/cost.c) is the fitted form: against fit_topk_time_us on the
     * same coefficients, across waves' edges, short contexts and both regimes. */
    hw_profile hw;
    memset(&hw, 0, sizeof hw);
    hw.cost.topk.slots = TK_SLOTS;
    hw.cost.topk.wave_s = TK_WAVE_US * 1e-6;
    hw.cost.topk.row_s = TK_ROW_NS * 1e-9;
    hw.cost.topk.k_s = TK_K_NS * 1e-9;
    hw.cost.topk.score_rate = TK_GPS * 1e9;
    hw.cost.topk.steepness = TK_Q;
    const double pf[] = {0, TK_WAVE_US, TK_ROW_NS / 1000, TK_K_NS / 1000, 1 / (TK_GPS * 1e3), TK_Q};
    for (double topks = 1; topks <= 1000; topks = topks * 2 + 1)
        for (double ctx = 1000; ctx <= 1e6; ctx *= 10)
            for (double k = 512; k <= 2048; k *= 4) {
                const double want = fit_topk_time_us(pf, topks, ctx, k < ctx ? k : ctx, TK_SLOTS, NULL) * 1e-6;
                assert_true(fabs(cost_topk_time(&hw.cost.topk, 0, topks, ctx, k) - want) <= 1e-12 * want);
                assert_true(fabs(want - (topk_truth(0, topks, ctx, k < ctx ? k : ctx)) * 1e-6) <= 1e-9 * want);
            }
    hw.cost.topk.slots = 0;
    assert_true(cost_topk_time(&hw.cost.topk, 0, 100, 1e5, 2048) == 0);
    /* One working point: as a constant, the mean weighted by 1 / time^2 (relative errors). */
    f = open_csv("topk-one.csv", path, sizeof path);
    double sum = 0, sumw = 0;
    for (int i = 0; i < 6; i++) {
        line_in l = blank("topk");
        l.batch = 16; l.ctx = 100000; l.k = 2048;
        l.median_us = 33.0 * (1 + SIGMA * gauss(&r));
        sum += 1 / l.median_us;
        sumw += 1 / (l.median_us * l.median_us);
        write_line(f, &l);
    }
    fclose(f);
    fit_opts o;
    fit_opts_default(&o);
    const char *const forms[] = {"topk=const", NULL};
    o.forms = forms;
    assert_int_equal(fit_file_opts(path, &o, &s, &ns), 0);
    assert_int_equal(s->form, FIT_FORM_CONST);
    assert_true(fabs(find_coef(s, "t0_us")->value - sum / sumw) < 1e-9);
    free(s);
}

/* The fetch form, nonlinear: SM saturation, issue and link bottlenecks and
 * the translation penalty, with a hold-out pool size reported separately. */
static const double FP[] = {5.0, 70.0, 15.0, 0.002, 1.0 / 50.0, 2.0, 0.0, 0.0, 20.0, 15000.0};

static void test_fetch_recovers(void **state)
{
    (void)state;
    char path[256];
    FILE *f = open_csv("fetch.csv", path, sizeof path);
    rng_stream r;
    rng_init(&r, 42, 2, 0, 1);
    static const double rb[] = {128, 512, 656, 1152, 2048, 4096};
    static const double sms[] = {2, 4, 8, 32};
    static const double rows[] = {1024, 16384, 65536, 262144};
    static const double pool_gib[] = {2, 16, 64, 96};
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++)
                for (size_t d = 0; d < 4; d++) {
                    line_in l = blank("fetch");
                    l.pattern = "uniform";
                    l.row_bytes = rb[a]; l.sms = sms[b]; l.rows = rows[c]; l.pool = pool_gib[d] * 1073741824.0;
                    double pages;
                    assert_int_equal(fit_fetch_pages("uniform", l.rows, l.row_bytes, l.pool, NAN, NAN, 4096, &pages), 0);
                    l.median_us = fit_fetch_time_us(FP, l.rows, l.row_bytes, l.sms, l.pool, pages, NAN, 0) * (1 + SIGMA * gauss(&r));
                    write_line(f, &l);
                }
    fclose(f);
    fit_section *s;
    size_t ns;
    const char *const hold[] = {"pool_bytes>=100000000000", NULL};
    assert_int_equal(fit_file(path, &s, &ns, hold), 0);
    assert_int_equal(ns, 1);
    assert_true(recovered(s, "t0_us", FP[0]));
    assert_true(recovered(s, "sm_row_ns", FP[1]));
    assert_true(recovered(s, "row_issue_ns", FP[2]));
    assert_true(recovered(s, "link_gbps", 1.0 / FP[4]));
    assert_true(recovered(s, "walk_reach_gb", FP[5]));
    assert_true(recovered(s, "page_ns_uniform", FP[8]));
    assert_true(recovered(s, "page_reach_uniform", FP[9]));
    /* No region size given: no density term in the fit or the section. */
    assert_null(find_coef(s, "density_ns"));
    assert_true(s->res.rms_rel > 0.7 * SIGMA && s->res.rms_rel < 1.3 * SIGMA);
    /* The 96 GiB lines were held out: 96 lines, predicted to within the noise. */
    assert_int_equal(s->held_out, 96);
    assert_true(s->holdout_err.median < 2 * SIGMA);
    /* The fitted pool range ends at 64 GiB: the held-out pool is outside it. */
    int found = 0;
    for (size_t i = 0; i < s->nrange; i++)
        if (!strcmp(s->range[i].name, "pool_bytes")) { found = 1; assert_true(s->range[i].max == 64 * 1073741824.0); }
    assert_true(found);
    assert_false(recovered(s, "link_gbps", 1.1 / FP[4]));
    free(s);
}

/* The density term: serving lines whose windows and rows per window set the rows per 2 MB
 * region entered, planted on the fetch form with a page term; the curve's two parameters
 * come back, and a window size the fit never saw (held out) is predicted from its density. */
/* The profile dhcal writes from secs over tests/data/hw_base.ini with [gather] region_bytes
 * added (tmpdir/name), loaded back through the simulator's loader into *c and *hw. */
static void write_region_profile(const char *name, double region, double pool, const fit_section *secs, size_t ns,
                                 cfg **c, hw_profile *hw)
{
    char base[256], out[256], line[512];
    snprintf(base, sizeof base, "%s/base_region.ini", tmpdir);
    snprintf(out, sizeof out, "%s/%s", tmpdir, name);
    FILE *in = fopen("tests/data/hw_base.ini", "r"), *bf = fopen(base, "w");
    assert_non_null(in);
    assert_non_null(bf);
    while (fgets(line, sizeof line, in)) {
        fputs(line, bf);
        if (!strcmp(line, "[gather]\n")) fprintf(bf, "region_bytes = %.0f\n", region);
    }
    fclose(in);
    fclose(bf);
    (void)pool;
    prof_opts po = {.base_path = base, .fetch_pattern = "serving", .command = "test",
                    .weight_dtype = "fp8", .layer_gemms = NAN};
    if (prof_write(&po, secs, ns, out, NULL) < 0) fail_msg("prof_write: %s", dh_errmsg());
    assert_int_equal(cfg_load(out, c), 0);
    assert_int_equal(hw_load(*c, hw), 0);
}

static void test_fetch_density_recovers(void **state)
{
    (void)state;
    static const double P[] = {15.0, 60.0, 13.5, 0.001, 1.0 / 52.0, 0.0, 22.0, 0.7, 3.0, 16384.0};
    const double region = 2097152, pool = 64e9;
    char path[256];
    FILE *f = open_csv("fetch_density.csv", path, sizeof path);
    rng_stream r;
    rng_init(&r, 42, 5, 0, 1);
    static const double rows[] = {4700, 16384, 131072};
    static const double kpw[] = {5, 17, 50, 100, 291, 1000, 3000, 10000, 30000};
    static const double ctxs[] = {100000, 25000};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 9; b++)
            for (size_t c = 0; c < 2; c++)
                for (double sms = 4; sms <= 8; sms += 4) {
                    if (kpw[b] > rows[a] || kpw[b] > ctxs[c]) continue;
                    line_in l = blank("fetch");
                    l.pattern = "serving";
                    l.row_bytes = 656; l.sms = sms; l.rows = rows[a]; l.pool = pool; l.ctx = ctxs[c]; l.k = kpw[b];
                    double pages, rho;
                    assert_int_equal(fit_fetch_pages("serving", l.rows, 656, pool, l.ctx, l.k, 4096, &pages), 0);
                    assert_int_equal(fit_fetch_density("serving", l.rows, 656, pool, l.ctx, l.k, region, &rho), 0);
                    l.median_us = fit_fetch_time_us(P, l.rows, 656, sms, pool, pages, rho, 0) * (1 + SIGMA * gauss(&r));
                    write_line(f, &l);
                }
    fclose(f);
    fit_opts o;
    fit_opts_default(&o);
    o.region_bytes = region;
    const char *const hold[] = {"ctx<=25000", NULL};
    o.holdout = hold;
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file_opts(path, &o, &s, &ns), 0);
    assert_int_equal(ns, 1);
    assert_true(recovered(s, "density_ns", P[6]));
    assert_true(recovered(s, "density_pow", P[7]));
    assert_false(recovered(s, "density_ns", P[6] * 1.2));
    assert_true(s->held_out > 0);
    assert_true(s->holdout_err.median < 2 * SIGMA);
    int found = 0;
    for (size_t i = 0; i < s->nrange; i++) found |= !strcmp(s->range[i].name, "density");
    assert_true(found);

    /* Differential: the profile dhcal writes from this fit, read back by the simulator, gives the
     * fit's own launch times (8 SMs, the base's fetch_sms) to within the six digits it prints
     * its coefficients with: the simulator evaluates the fitted form itself. */
    cfg *c;
    hw_profile hw;
    write_region_profile("density.ini", region, pool, s, ns, &c, &hw);
    assert_true(hw.cost.fetch.form == COST_FITTED && hw.cost.fetch.fit.density > 0 && hw.region_bytes == region);
    double worst = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 9; b++) {
            if (kpw[b] > rows[a]) continue;
            double pages, rho;
            assert_int_equal(fit_fetch_pages("serving", rows[a], 656, pool, 100000, kpw[b], 4096, &pages), 0);
            assert_int_equal(fit_fetch_density("serving", rows[a], 656, pool, 100000, kpw[b], region, &rho), 0);
            double fit_us = fit_fetch_time_us(s->res.p, rows[a], 656, 8, pool, pages, rho, 0);
            double sim_us = cost_fetch_time(&hw.cost.fetch, rows[a], 656, pages, rows[a] / rho, hw.fetch_sms, pool) * 1e6;
            double e = fabs(sim_us / fit_us - 1);
            if (e > worst) worst = e;
        }
    if (worst >= 1e-4) print_message("  profile vs fit: worst relative difference %g\n", worst);
    assert_true(worst < 1e-4);
    cfg_free(c);
    free(s);

    /* A serving line without its window (ctx, k) cannot be placed once the density term is on:
     * the fit fails naming the file and line. */
    char bad[256];
    f = open_csv("fetch_nowindow.csv", bad, sizeof bad);
    line_in l = blank("fetch");
    l.pattern = "serving";
    l.row_bytes = 656; l.sms = 8; l.rows = 16384; l.pool = pool; l.median_us = 300;
    write_line(f, &l);
    fclose(f);
    assert_int_equal(fit_file_opts(bad, &o, &s, &ns), -1);
    assert_non_null(strstr(dh_errmsg(), "fetch_nowindow.csv' line "));
    assert_non_null(strstr(dh_errmsg(), "ctx"));

    /* The density of a window read in address order: one region per row when the rows are
     * far apart, all of a window's rows when it fits one region; uniform lines enter a region
     * per row; a serving line without its window cannot be placed. */
    const double Rw = ceil(100000.0 * 656 / region); /* 32 regions span a 100K-row window */
    assert_true(fabs(fit_window_density(10, 100000, 656, region) - 10 / (Rw * (1 - pow(1 - 1 / Rw, 10)))) < 1e-12);
    assert_true(fabs(fit_window_density(291, 1000, 656, region) - 291) < 1e-9);
    double rho;
    assert_int_equal(fit_fetch_density("uniform+huge2m", 16384, 656, pool, NAN, NAN, region, &rho), 0);
    assert_true(rho == 1);
    assert_int_equal(fit_fetch_density("serving", 16384, 656, pool, NAN, NAN, region, &rho), -1);
    assert_non_null(strstr(dh_errmsg(), "ctx"));
}

/* The fetch beside a saturated memory system: pairs of lines (pattern "serving" and
 * "serving+beside_hbm", the same parameters) whose ratio follows the beside form with known
 * parameters plus noise; the fit recovers them, the beside lines leave the fetch fit itself
 * unchanged, the written profile's table is the form at its densities, and a beside line
 * without its partner is an error naming the file and line. */
static void test_fetch_beside_recovers(void **state)
{
    (void)state;
    static const double P[] = {15.0, 60.0, 13.5, 0.001, 1.0 / 52.0, 0.0, 22.0, 0.7, 3.0, 16384.0};
    const double truth[3] = {0.7, log(25.0), 1.8};
    const double region = 2097152, pool = 64e9;
    char path[256], plain[256];
    FILE *f = open_csv("fetch_beside.csv", path, sizeof path), *g = open_csv("fetch_plain.csv", plain, sizeof plain);
    rng_stream r;
    rng_init(&r, 43, 5, 0, 1);
    static const double rows[] = {4700, 16384, 131072};
    static const double kpw[] = {5, 17, 50, 100, 291, 1000, 3000, 10000, 30000};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 9; b++)
            for (double sms = 4; sms <= 8; sms += 4) {
                if (kpw[b] > rows[a]) continue;
                line_in l = blank("fetch");
                l.pattern = "serving";
                l.row_bytes = 656; l.sms = sms; l.rows = rows[a]; l.pool = pool; l.ctx = 100000; l.k = kpw[b];
                double pages, rho;
                assert_int_equal(fit_fetch_pages("serving", l.rows, 656, pool, l.ctx, l.k, 4096, &pages), 0);
                assert_int_equal(fit_fetch_density("serving", l.rows, 656, pool, l.ctx, l.k, region, &rho), 0);
                const double alone = fit_fetch_time_us(P, l.rows, 656, sms, pool, pages, rho, 0) * (1 + SIGMA * gauss(&r));
                l.median_us = alone;
                write_line(f, &l);
                write_line(g, &l);
                l.pattern = "serving+beside_hbm";
                l.median_us = alone * (1 + fit_beside_eval(truth, rho, NULL) + 0.01 * gauss(&r));
                write_line(f, &l);
            }
    fclose(f);
    fclose(g);
    fit_opts o;
    fit_opts_default(&o);
    o.region_bytes = region;
    fit_section *s, *s0;
    size_t ns, ns0;
    assert_int_equal(fit_file_opts(path, &o, &s, &ns), 0);
    assert_int_equal(fit_file_opts(plain, &o, &s0, &ns0), 0);
    assert_int_equal(ns, 2);
    assert_int_equal(ns0, 1);
    /* The fetch fit sees the same lines with and without the beside ones. */
    assert_int_equal(s[0].res.npoints, s0[0].res.npoints);
    for (size_t i = 0; i < s0[0].res.npar; i++) assert_true(s[0].res.p[i] == s0[0].res.p[i]);
    const fit_section *b = &s[1];
    assert_int_equal(b->form, FIT_FORM_BESIDE);
    assert_string_equal(b->section, "fetch_beside");
    assert_true(recovered(b, "slowdown_max", truth[0]));
    assert_true(recovered(b, "density_half", exp(truth[1])));
    assert_true(recovered(b, "steepness", truth[2]));
    assert_false(recovered(b, "density_half", exp(truth[1]) * 1.5));

    /* The profile holds the fitted form's coefficients; read back, the simulator's slowdown is
     * the fit's at every density, to the six digits they are printed with. */
    cfg *c;
    hw_profile hw;
    write_region_profile("beside.ini", region, pool, s, ns, &c, &hw);
    assert_true(hw.cost.fetch.beside.max > 0);
    for (double rho = 1; rho <= 1000; rho *= 1.5) {
        const double want = fit_beside_eval(b->res.p, rho, NULL);
        assert_true(fabs(cost_fetch_beside(&hw.cost.fetch, rho, 1) - want) <= 1e-4 * want);
    }
    cfg_free(c);
    free(s);
    free(s0);

    /* A beside line whose partner timed alone is missing (another window size): the plain
     * lines, then the orphan as the file's last line. */
    char bad[256], want[64], line[512];
    f = open_csv("fetch_beside_alone.csv", bad, sizeof bad);
    FILE *pl = fopen(plain, "r");
    assert_non_null(pl);
    long nlines = 2;   /* the comment and the header */
    for (int skip = 2; fgets(line, sizeof line, pl);)
        if (skip) skip--;
        else { fputs(line, f); nlines++; }
    fclose(pl);
    line_in l = blank("fetch");
    l.pattern = "serving+beside_hbm";
    l.row_bytes = 656; l.sms = 8; l.rows = 16384; l.pool = pool; l.ctx = 25000; l.k = 291; l.median_us = 400;
    write_line(f, &l);
    fclose(f);
    assert_int_equal(fit_file_opts(bad, &o, &s, &ns), -1);
    snprintf(want, sizeof want, "fetch_beside_alone.csv line %ld", nlines + 1);
    assert_non_null(strstr(dh_errmsg(), want));
    assert_non_null(strstr(dh_errmsg(), "without its partner"));
}

/* Time falling with bytes is a negative bandwidth: an error, not a profile. */
static void test_nonphysical_rejected(void **state)
{
    (void)state;
    char path[256];
    FILE *f = open_csv("bad.csv", path, sizeof path);
    for (int i = 1; i <= 20; i++) {
        line_in l = blank("attention");
        l.bytes = i * 1e6;
        l.batch = 1; l.queries = 1;
        l.median_us = 1000 - i * 10.0 + (i % 3) * 0.1;
        write_line(f, &l);
    }
    fclose(f);
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file(path, &s, &ns, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "non-physical"));
    assert_non_null(strstr(dh_errmsg(), "hbm_gbps"));

    /* A fixed cost far below zero: t = -50 + bytes / bw, 0.1 % noise. */
    f = open_csv("neg_t0.csv", path, sizeof path);
    rng_stream r;
    rng_init(&r, 42, 3, 0, 1);
    for (int i = 1; i <= 20; i++) {
        line_in l = blank("attention");
        l.bytes = i * 1e9;
        l.batch = 1; l.queries = 1;
        l.median_us = (-50 + l.bytes / 3e6) * (1 + 0.001 * gauss(&r));
        write_line(f, &l);
    }
    fclose(f);
    assert_int_equal(fit_file(path, &s, &ns, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "t0_us"));
    assert_non_null(strstr(dh_errmsg(), "below zero beyond the noise"));

    /* Noise with no trend: R^2 below the threshold. */
    f = open_csv("noise.csv", path, sizeof path);
    for (int i = 1; i <= 40; i++) {
        line_in l = blank("gemm");
        l.dtype = "bf16";
        l.bytes = 1e6 * i;
        l.median_us = 100 * (1 + 0.3 * gauss(&r)) + 0.0001 * i;
        if (l.median_us < 1) l.median_us = 1;
        write_line(f, &l);
    }
    fclose(f);
    int rc = fit_file(path, &s, &ns, NULL);
    assert_int_equal(rc, -1);
    assert_true(strstr(dh_errmsg(), "below the threshold") || strstr(dh_errmsg(), "non-physical"));
}

static void expect_csv_error(const char *name, const char *body, const char *msg)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    bcsv_table t;
    bcsv_init(&t);
    assert_int_equal(bcsv_load(&t, path), -1);
    char want[512];
    snprintf(want, sizeof want, "file '%s'%s", path, msg);
    if (!strstr(dh_errmsg(), want)) print_message("got: %s\nwant: %s\n", dh_errmsg(), want);
    assert_non_null(strstr(dh_errmsg(), want));
    bcsv_release(&t);
}

static void test_malformed_csv(void **state)
{
    (void)state;
    char body[4096];
    const char *ok = "test,fetch,1,H200,fp8,656,100,8,2e9,uniform,,,,,,,,,,,,5,10.5,,,,,,,,1\n";
    snprintf(body, sizeof body, "%s\n%s%s", bcsv_header(), ok,
             "test,fetch,1,H200,fp8,656,100,8,2e9,uniform,,,,,,,,,,,,5,fast,,,,,,,,1\n");
    expect_csv_error("nan.csv", body, " line 3: column 'median_us' is not a number");
    snprintf(body, sizeof body, "%s\n%s", bcsv_header(), "test,fetch,1,H200,fp8,656,100,8\n");
    expect_csv_error("short.csv", body, " line 2: 8 columns, the header has 31");
    expect_csv_error("hdr.csv", "suite,kernel,version\n", " line 1: header lacks column 'device'");
    snprintf(body, sizeof body, "%s,colour\n", bcsv_header());
    expect_csv_error("unknown.csv", body, " line 1: unknown column 'colour'");
    snprintf(body, sizeof body, "%s\n%s", bcsv_header(), "test,fetch,1,H200,fp8,656,1e999,8,2e9,uniform,,,,,,,,,,,,5,10,,,,,,,,1\n");
    expect_csv_error("inf.csv", body, " line 2: column 'rows' is not a number");
    /* A well-formed file reads back with empty cells as NAN. */
    char path[256];
    snprintf(path, sizeof path, "%s/good.csv", tmpdir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n%s", bcsv_header(), ok);
    fclose(f);
    bcsv_table t;
    bcsv_init(&t);
    assert_int_equal(bcsv_load(&t, path), 0);
    assert_int_equal(t.n, 1);
    assert_true(t.rows[0].v[BCSV_MEDIAN_US] == 10.5);
    assert_true(isnan(t.rows[0].v[BCSV_BATCH]));
    assert_string_equal(t.rows[0].s[BCSV_PATTERN], "uniform");
    /* Without the optional "timing" column every line was timed on its own. */
    assert_string_equal(t.rows[0].s[BCSV_TIMING], "isolated");
    /* Nor the optional "arch": it reads as empty. */
    assert_string_equal(t.rows[0].s[BCSV_ARCH], "");
    bcsv_release(&t);

    /* With "arch" first, the GPU's architecture as written. */
    snprintf(path, sizeof path, "%s/arch.csv", tmpdir);
    f = fopen(path, "w");
    fprintf(f, "arch,%s\nsm_86,%s", bcsv_header(), ok);
    fclose(f);
    bcsv_init(&t);
    assert_int_equal(bcsv_load(&t, path), 0);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.rows[0].s[BCSV_ARCH], "sm_86");
    assert_true(t.rows[0].v[BCSV_MEDIAN_US] == 10.5);
    bcsv_release(&t);

    /* With it, in any position, the cell is read as written; and it can be selected. */
    snprintf(path, sizeof path, "%s/timed.csv", tmpdir);
    f = fopen(path, "w");
    fprintf(f, "timing,%s\nb2b8,%sisolated,%s", bcsv_header(), ok, ok);
    fclose(f);
    bcsv_init(&t);
    assert_int_equal(bcsv_load(&t, path), 0);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.rows[0].s[BCSV_TIMING], "b2b8");
    assert_true(t.rows[0].v[BCSV_MEDIAN_US] == 10.5);
    assert_string_equal(t.rows[1].s[BCSV_TIMING], "isolated");
    int match = -1;
    assert_int_equal(fit_holdout_match(&t.rows[0], "timing=b2b8", &match), 0);
    assert_int_equal(match, 1);
    assert_int_equal(fit_holdout_match(&t.rows[1], "timing=b2b8", &match), 0);
    assert_int_equal(match, 0);
    bcsv_release(&t);
    /* It may appear once, like every column. */
    snprintf(body, sizeof body, "timing,%s,timing\n", bcsv_header());
    expect_csv_error("twice.csv", body, " line 1: column 'timing' appears twice");
}

/* The small committed replay example, by hand (tests/data/replay_small.csv
 * and sim_small.tsv):
 *   fitted config a: errors 10 %, 0 %, 5 %, 20 %; its step 0 is the file's first line, the
 *     replay process's warm-up, left out of the times: 0 %, 5 %, 20 % -> median 5 %, p95
 *     (rank 3 of 3) 20 %, max 20 %
 *   held-out config b: errors 2 %, 4 %, 30 %      -> median 4 %,   p95 (rank 3 of 3) 30 %
 *   misses: a 10+20+30+40 = 100 measured, 100 predicted, b 5+5+5 = 15 vs 16 (step 2 differs). */
static void test_validation_small(void **state)
{
    (void)state;
    val_set v;
    val_init(&v);
    assert_int_equal(val_load_replay(&v, "tests/data/replay_small.csv"), 0);
    assert_int_equal(val_add_predictions(&v, "tests/data/sim_small.tsv"), 0);
    assert_int_equal(val_check_complete(&v), 0);
    val_summary fit, held;
    val_summarize(&v, 0, NULL, NULL, NULL, &fit);
    val_summarize(&v, 1, NULL, NULL, NULL, &held);
    assert_int_equal(fit.steps, 3);
    assert_true(fabs(fit.err.median - 0.05) < 1e-12);
    assert_true(fabs(fit.err.p95 - 0.20) < 1e-12);
    assert_true(fabs(fit.err.max - 0.20) < 1e-12);
    assert_int_equal(fit.misses_meas, 100);
    assert_int_equal(fit.misses_pred, 100);
    assert_int_equal(fit.miss_mismatch_steps, 0);
    assert_int_equal(held.steps, 3);
    assert_true(fabs(held.err.median - 0.04) < 1e-12);
    assert_true(fabs(held.err.p95 - 0.30) < 1e-12);
    assert_int_equal(held.misses_meas, 15);
    assert_int_equal(held.misses_pred, 16);
    assert_int_equal(held.miss_mismatch_steps, 1);
    /* The warm-up step's prediction does not enter the times; any other does (planted fault). */
    assert_true(v.s[0].warmup && !strcmp(v.s[0].config, "a") && v.s[0].step == 0);
    for (size_t i = 1; i < v.n; i++) assert_false(v.s[i].warmup);
    v.s[0].predicted_us *= 2;
    val_summarize(&v, 0, NULL, NULL, NULL, &fit);
    assert_true(fabs(fit.err.max - 0.20) < 1e-12 && fabs(fit.err.median - 0.05) < 1e-12);
    v.s[1].predicted_us *= 2;
    val_summarize(&v, 0, NULL, NULL, NULL, &fit);
    assert_false(fabs(fit.err.max - 0.20) < 1e-12);
    val_release(&v);

    /* A prediction for a step the replay lacks is an error naming it. */
    val_init(&v);
    assert_int_equal(val_load_replay(&v, "tests/data/replay_small.csv"), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/extra.tsv", tmpdir);
    FILE *f = fopen(path, "w");
    fprintf(f, "config_id\tpolicy\tmode\tstep\tpredicted_us\tmisses\na\thisparse\tplain\t99\t1\t0\n");
    fclose(f);
    assert_int_equal(val_add_predictions(&v, path), -1);
    assert_non_null(strstr(dh_errmsg(), "step 99 of config 'a'"));
    val_release(&v);
}

static void test_percentiles(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    assert_true(fit_median(v, 5) == 3);
    double w[] = {4, 1, 3, 2};
    assert_true(fit_median(w, 4) == 2.5);
    double x[20];
    for (int i = 0; i < 20; i++) x[i] = 20 - i; /* 1..20 */
    assert_true(fit_percentile(x, 20, 95) == 19); /* rank ceil(19) = 19 */
    assert_true(fit_percentile(x, 20, 100) == 20);
}

typedef struct { const char *from, *to, *msg; } prof_case;

/* Each case edits base (the first occurrence of from becomes to) and must fail prof_check
 * with msg in its error. */
static void expect_profile_errors(const char *base_path, const prof_case *cases, size_t n_cases)
{
    FILE *in = fopen(base_path, "r");
    assert_non_null(in);
    static char base[65536];
    size_t n = fread(base, 1, sizeof base - 1, in);
    fclose(in);
    base[n] = 0;
    for (size_t c = 0; c < n_cases; c++) {
        char *at = strstr(base, cases[c].from);
        assert_non_null(at);
        char path[256];
        snprintf(path, sizeof path, "%s/bad%zu.ini", tmpdir, c);
        FILE *f = fopen(path, "w");
        fwrite(base, 1, (size_t)(at - base), f);
        fputs(cases[c].to, f);
        fputs(at + strlen(cases[c].from), f);
        fclose(f);
        assert_int_equal(prof_check(path), -1);
        if (!strstr(dh_errmsg(), cases[c].msg)) print_message("got: %s\n", dh_errmsg());
        assert_non_null(strstr(dh_errmsg(), cases[c].msg));
    }
}

/* check-profile: the committed base (the tables' fetch form) and the calibrated profile (the
 * fitted form) pass; a missing key, a negative bandwidth, an SM factor above 1, a fitted link
 * faster than the link, keys of both fetch forms, ... are each rejected with the key named. */
static void test_profile_check(void **state)
{
    (void)state;
    assert_int_equal(prof_check("tests/data/hw_base.ini"), 0);
    assert_int_equal(prof_check("models/hw/h200.ini"), 0);
    static const prof_case tables[] = {
        {"hbm_bw = ", "; hbm_bw = ", "hbm_bw"},
        {"h2d_bw = 55.5e9", "h2d_bw = -55.5e9", "h2d_bw"},
        {"sms_factor = 1.0, 0.85", "sms_factor = 1.0, 1.5", "sms_factor"},
        {"launch_s = 5e-6", "launch_s = -5e-6", "launch_s"},
        {"pages = 16220, 129760, 259520", "pages = 16220, 129760", "pages_bw has 3"},
        {"pages = 16220, 129760, 259520", "pages = 16220, 259520, 129760", "strictly increasing"},
        {"hbm_bw = ", "compute_interference = -0.5\nhbm_bw = ", "compute_interference"},
        /* The top-k's waves need the blocks at once, a whole number. */
        {"hbm_bw = ", "topk_wave_s = 1e-5\nhbm_bw = ", "topk_slots"},
        {"hbm_bw = ", "topk_slots = 13.5\nhbm_bw = ", "whole number"},
        {"hbm_bw = ", "topk_slots = 132\ntopk_score_rate = 1e12\ntopk_steepness = 0.5\nhbm_bw = ", "topk_steepness"},
        /* One fetch form per profile. */
        {"launch_s = 5e-6", "launch_s = 5e-6\nsm_row_s = 4e-8", "give one"},
    };
    expect_profile_errors("tests/data/hw_base.ini", tables, sizeof tables / sizeof tables[0]);
    /* The fitted form: "key = NEW\n; " leaves the old value as a comment. */
    static const prof_case fitted[] = {
        {"\nsm_row_s = ", "\nrow_bw = 5e10\nsm_row_s = ", "give one"},
        {"\nrow_issue_s = ", "\n; row_issue_s = ", "row_issue_s"},
        {"\nlink_s_per_byte = ", "\nlink_s_per_byte = 1e-12\n; ", "above the link's duplex_bw"},
        {"\nlink_s_per_byte = ", "\nlink_s_per_byte = 0\n; ", "link_s_per_byte must be > 0"},
        {"\nregion_bytes = ", "\nregion_bytes = 0\n; ", "density_s needs region_bytes"},
        {"\nbeside_steepness = ", "\nbeside_steepness = 0\n; ", "beside_max needs"},
        {"\ndensity_pow = ", "\ndensity_pow = -1\n; ", "density_pow"},
    };
    expect_profile_errors("models/hw/h200.ini", fitted, sizeof fitted / sizeof fitted[0]);
}

/* n top-k lines (16 x 100K, k 2048) of us each, with the noise. */

/* The fitted forms land in the simulator's keys: attention -> attn_bw,
 * attn_launch_s; the weights' GEMM dtype -> weight_bw, layer_fixed_s
 * (launches x t0) and mma_efficiency (the measured GEMM ceiling over the
 * base's peak); indexer + top-k -> indexer_ops_s, select_s.  The base lacks
 * these optional keys: they are added to [hw]. */
static void write_fit_lines(const char *path, double ceiling_fp8, int with_topk)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", bcsv_header());
    rng_stream r;
    rng_init(&r, 42, 4, 0, 1);
    for (int b = 1; b <= 64; b *= 2)
        for (int k = 512; k <= 4096; k *= 2) {
            line_in l = blank("attention");
            l.batch = b; l.queries = 1; l.k = k;
            l.bytes = (double)b * k * 656.0;
            l.median_us = (6.0 + l.bytes / (700.0 * 1e3) + b * 0.3) * (1 + SIGMA * gauss(&r));
            write_line(f, &l);
        }
    for (int d = 0; d < 2; d++)
        for (int m = 16; m <= 64; m *= 2)
            for (int n = 1024; n <= 16384; n *= 2) {
                line_in l = blank("gemm");
                l.dtype = d ? "fp8" : "bf16";
                l.m = m; l.n = n; l.kdim = 6144;
                l.flops = 2.0 * m * n * l.kdim;
                l.bytes = gemm_bytes(d, m, n, l.kdim);
                l.ceiling_name = d ? "fp8_gemm_8192" : "bf16_gemm_8192";
                l.ceiling = d ? ceiling_fp8 : 800.0;
                l.median_us = (13.0 + l.bytes / ((d ? 4400.0 : 4200.0) * 1e3)) * (1 + SIGMA * gauss(&r));
                write_line(f, &l);
            }
    for (int h = 16; h <= 64; h *= 2)
        for (int ctx = 25000; ctx <= 100000; ctx *= 2) {
            line_in l = blank("indexer");
            l.batch = 16; l.ctx = ctx; l.heads = h; l.kdim = 128;
            l.median_us = (4.0 + 16.0 * ctx * h * 128 / (50000.0 * 1e3)) * (1 + SIGMA * gauss(&r));
            write_line(f, &l);
        }
    if (with_topk) write_topk(f, &r, 200.0);
    fclose(f);
}

static double key_of(cfg *c, const char *key)
{
    double v = NAN;
    assert_int_equal(cfg_get_double(c, "hw", key, &v, CFG_REQUIRED, -1e300, 1e300), 0);
    return v;
}

static void test_profile_write(void **state)
{
    (void)state;
    char csv[256], out[256];
    snprintf(csv, sizeof csv, "%s/ag.csv", tmpdir);
    snprintf(out, sizeof out, "%s/fitted.ini", tmpdir);
    write_fit_lines(csv, 1450.0, 1);
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file(csv, &s, &ns, NULL), 0);
    prof_opts po = {.base_path = "tests/data/hw_base.ini", .fetch_pattern = "serving", .command = "test",
                    .weight_dtype = "fp8", .layer_gemms = 8};
    assert_int_equal(prof_write(&po, s, ns, out, NULL), 0);
    assert_int_equal(prof_check(out), 0);
    cfg *c;
    assert_int_equal(cfg_load(out, &c), 0);
    /* Peaks of the base profile: FP8 1979 TFLOP/s; its hbm_bw and kernel_launch_s stay. */
    assert_true(fabs(key_of(c, "attn_bw") / 700e9 - 1) < 0.03);
    assert_true(fabs(key_of(c, "attn_launch_s") / 6e-6 - 1) < 0.2);
    assert_true(fabs(key_of(c, "weight_bw") / 4400e9 - 1) < 0.03);
    assert_true(fabs(key_of(c, "layer_fixed_s") / (8 * 13e-6) - 1) < 0.03);
    assert_true(fabs(key_of(c, "mma_efficiency") - 1450.0 / 1979.0) < 1e-4);
    assert_true(fabs(key_of(c, "indexer_ops_s") / 50000e9 - 1) < 0.03);
    assert_true(fabs(key_of(c, "select_s") / (204e-6) - 1) < 0.02);
    /* The top-k's waves (the topk form of write_topk): each key its coefficient, in SI. */
    assert_true(key_of(c, "topk_slots") == TK_SLOTS);
    const fit_section *tk = NULL;
    for (size_t i = 0; i < ns; i++)
        if (s[i].form == FIT_FORM_TOPK) tk = &s[i];
    assert_non_null(tk);
    static const struct { const char *key, *coef; double scale; } tkeys[] = {
        {"topk_wave_s", "wave_us", 1e-6}, {"topk_row_s", "row_ns", 1e-9}, {"topk_k_s", "k_ns", 1e-9},
        {"topk_score_rate", "score_gps", 1e9}, {"topk_steepness", "steepness", 1}};
    for (size_t i = 0; i < sizeof tkeys / sizeof tkeys[0]; i++)
        assert_true(fabs(key_of(c, tkeys[i].key) / (find_coef(tk, tkeys[i].coef)->value * tkeys[i].scale) - 1) < 1e-5);
    assert_true(fabs(key_of(c, "topk_row_s") / (TK_ROW_NS * 1e-9) - 1) < 0.05);
    cfg_free(c);
    free(s);
    /* Every top-k point bound by its blocks' pass: the memory term is only bounded, and is
     * written 0 (the simulator's soft maximum is then the pass alone, as fitted). */
    tk_gps = INFINITY;
    write_fit_lines(csv, 1450.0, 1);
    tk_gps = TK_GPS;
    assert_int_equal(fit_file(csv, &s, &ns, NULL), 0);
    for (size_t i = 0; i < ns; i++)
        if (s[i].form == FIT_FORM_TOPK) assert_true(find_coef(&s[i], "score_gps")->bound);
    assert_int_equal(prof_write(&po, s, ns, out, NULL), 0);
    assert_int_equal(cfg_load(out, &c), 0);
    assert_true(key_of(c, "topk_score_rate") == 0);
    assert_true(fabs(key_of(c, "topk_row_s") / (TK_ROW_NS * 1e-9) - 1) < 0.05);
    assert_true(key_of(c, "hbm_bw") == 4.8e12);
    assert_true(key_of(c, "kernel_launch_s") == 4e-6);
    cfg_free(c);

    /* Without the launches per layer, layer_fixed_s cannot be written. */
    po.layer_gemms = NAN;
    snprintf(out, sizeof out, "%s/nolaunch.ini", tmpdir);
    assert_int_equal(prof_write(&po, s, ns, out, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "--layer-gemms"));
    assert_int_equal(access(out, F_OK), -1);
    po.layer_gemms = 8;
    free(s);

    /* A measured GEMM rate above the datasheet peak is non-physical: no profile. */
    snprintf(out, sizeof out, "%s/over.ini", tmpdir);
    write_fit_lines(csv, 2500.0, 1);
    assert_int_equal(fit_file(csv, &s, &ns, NULL), 0);
    assert_int_equal(prof_write(&po, s, ns, out, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "non-physical"));
    assert_int_equal(access(out, F_OK), -1);
    free(s);

    /* An indexer without a top-k leaves select_s unknown: an error. */
    write_fit_lines(csv, 1450.0, 0);
    assert_int_equal(fit_file(csv, &s, &ns, NULL), 0);
    assert_int_equal(prof_write(&po, s, ns, out, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "top-k"));
    free(s);
}

/* Indexer lines of a roofline truth t0 + max(bytes / bw, macs / rate): keys of
 * batch x ctx tokens (132 B each) read once, queries x 32 heads x 128 multiply-adds per key.
 * qmax bounds the query tokens per request, hence whether any point is compute-bound. */
static void write_roofline(const char *path, double t0, double gbps, double gmacs, int qmax, int with_topk,
                           uint64_t seed)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", bcsv_header());
    rng_stream r;
    rng_init(&r, seed, 5, 0, 1);
    for (int b = 4; b <= 16; b *= 4)
        for (int ctx = 25000; ctx <= 200000; ctx *= 2)
            for (int q = 1; q <= qmax; q *= 2) {
                line_in l = blank("indexer");
                l.batch = b; l.ctx = ctx; l.heads = 32; l.queries = q; l.k = 2048;
                l.bytes = (double)b * ctx * 132;
                l.flops = 2.0 * b * ctx * q * 32 * 128;
                const double tb = l.bytes / (gbps * 1e3), tc = l.flops / 2 / (gmacs * 1e3);
                l.median_us = (t0 + (tb > tc ? tb : tc)) * (1 + SIGMA * gauss(&r));
                write_line(f, &l);
            }
    if (with_topk) write_topk(f, &r, 33.0);
    fclose(f);
}

/* The indexer's roofline: with 1-8 queries both regimes occur and all three coefficients
 * are recovered; with one query every point is bound by the keys' bytes and the rate is
 * only a lower bound (at most the truth); a planted fault fails. */
static void test_indexer_roofline(void **state)
{
    (void)state;
    const double t0 = 6.0, gbps = 3900.0, gmacs = 300000.0;
    char path[256];
    snprintf(path, sizeof path, "%s/roof.csv", tmpdir);
    write_roofline(path, t0, gbps, gmacs, 8, 0, 42);
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
    assert_int_equal(ns, 1);
    assert_int_equal(s->form, FIT_FORM_INDEXER);
    assert_int_equal(s->res.npar, 3);
    assert_true(recovered(s, "t0_us", t0));
    assert_true(recovered(s, "key_gbps", gbps));
    assert_true(recovered(s, "rate_gmacs", gmacs));
    assert_false(find_coef(s, "key_gbps")->bound || find_coef(s, "rate_gmacs")->bound);
    assert_true(s->res.rms_rel > 0.7 * SIGMA && s->res.rms_rel < 1.3 * SIGMA);
    assert_false(recovered(s, "rate_gmacs", gmacs * 1.1)); /* planted */
    assert_false(recovered(s, "key_gbps", gbps * 1.1));
    free(s);

    write_roofline(path, t0, gbps, gmacs, 1, 0, 43);
    assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
    assert_int_equal(s->res.npar, 2);
    assert_true(recovered(s, "t0_us", t0));
    assert_true(recovered(s, "key_gbps", gbps));
    const fit_coef *rate = find_coef(s, "rate_gmacs");
    assert_true(rate->bound && !find_coef(s, "key_gbps")->bound);
    /* The bound: the slowest rate that keeps every point bound by the bytes (here the
     * fitted bandwidth x 32 x 128 MACs per 132 B), below the truth. */
    const double want = find_coef(s, "key_gbps")->value * 32 * 128 / 132;
    assert_true(fabs(rate->value / want - 1) < 1e-9);
    assert_true(rate->value < gmacs);
    free(s);

    /* Every point compute-bound (a slow rate): the bandwidth is the bound. */
    write_roofline(path, t0, gbps, 20000.0, 8, 0, 44);
    assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
    assert_true(recovered(s, "rate_gmacs", 20000.0));
    assert_true(find_coef(s, "key_gbps")->bound && find_coef(s, "key_gbps")->value < gbps);
    free(s);

    /* Into the profile: indexer_bw and indexer_ops_s from the two-regime fit; with one query
     * indexer_bw alone is fitted and indexer_ops_s is the bound, said so. */
    char out[256];
    snprintf(out, sizeof out, "%s/roof.ini", tmpdir);
    prof_opts po = {.base_path = "tests/data/hw_base.ini", .fetch_pattern = "serving", .command = "test",
                    .weight_dtype = "fp8", .layer_gemms = 8};
    for (int qmax = 8; qmax >= 1; qmax /= 8) {
        write_roofline(path, t0, gbps, gmacs, qmax, 1, 45);
        assert_int_equal(fit_file(path, &s, &ns, NULL), 0);
        assert_int_equal(prof_write(&po, s, ns, out, NULL), 0);
        assert_int_equal(prof_check(out), 0);
        cfg *c;
        assert_int_equal(cfg_load(out, &c), 0);
        assert_true(fabs(key_of(c, "indexer_bw") / (gbps * 1e9) - 1) < 0.03);
        if (qmax == 8) assert_true(fabs(key_of(c, "indexer_ops_s") / (gmacs * 1e9) - 1) < 0.05);
        else assert_true(key_of(c, "indexer_ops_s") < gmacs * 1e9);
        assert_true(fabs(key_of(c, "select_s") / ((t0 + 33.0) * 1e-6) - 1) < 0.05);
        cfg_free(c);
        free(s);
    }
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char buf[65536];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = 0;
    fclose(f);
    assert_non_null(strstr(buf, "a lower bound"));
}

/* --select keeps only the matching lines: with attention v1 selected, the
 * other kernels and versions are not fitted. */
static void test_select(void **state)
{
    (void)state;
    char path[256];
    FILE *f = open_csv("sel.csv", path, sizeof path);
    rng_stream r;
    rng_init(&r, 42, 5, 0, 1);
    for (int v = 1; v <= 2; v++)
        for (int b = 1; b <= 64; b *= 2) {
            line_in l = blank("attention");
            l.version = v == 1 ? "1" : "2";
            l.batch = b; l.queries = 1; l.k = 2048;
            l.bytes = b * 2048 * 656.0;
            /* Version 2 is faster, so without --select it would be chosen. */
            l.median_us = (10.0 + l.bytes / ((v == 1 ? 500.0 : 900.0) * 1e3)) * (1 + SIGMA * gauss(&r));
            write_line(f, &l);
        }
    line_in g = blank("gemm");
    g.dtype = "fp8"; g.bytes = 1e6; g.median_us = 20;
    write_line(f, &g);
    fclose(f);
    fit_opts o;
    fit_opts_default(&o);
    const char *const sel[] = {"kernel=attention,version=1", NULL};
    o.select = sel;
    fit_section *s;
    size_t ns;
    assert_int_equal(fit_file_opts(path, &o, &s, &ns), 0);
    assert_int_equal(ns, 1);
    assert_string_equal(s->version, "1");
    assert_true(recovered(s, "hbm_gbps", 500.0));
    free(s);
    /* Without it, version 2 is chosen and the single GEMM line cannot be fitted. */
    o.select = NULL;
    assert_int_equal(fit_file_opts(path, &o, &s, &ns), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hbm_recovers),
        cmocka_unit_test(test_gemm_indexer_versions),
        cmocka_unit_test(test_topk_form),
        cmocka_unit_test(test_fetch_recovers),
        cmocka_unit_test(test_fetch_density_recovers),
        cmocka_unit_test(test_fetch_beside_recovers),
        cmocka_unit_test(test_nonphysical_rejected),
        cmocka_unit_test(test_malformed_csv),
        cmocka_unit_test(test_validation_small),
        cmocka_unit_test(test_percentiles),
        cmocka_unit_test(test_profile_check),
        cmocka_unit_test(test_profile_write),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_indexer_roofline),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
