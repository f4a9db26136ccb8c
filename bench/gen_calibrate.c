/* gen_calibrate.c: fit a generator preset's parameters to its published targets.
 *
 *   make build/bench/gen_calibrate
 *   build/bench/gen_calibrate [options] PRESET TARGETS PARAM:LO:HI [PARAM:LO:HI ...]
 *
 * TARGETS is a comma-separated list of [targets] keys of the preset (their
 * values and the tolerance are read from the file; the names are the
 * statistics of stats_target_value()). Each PARAM is a "section.key" of the
 * preset, searched within [LO, HI]. The search is a coordinate descent with
 * shrinking steps from the preset's current values, minimising the sum of
 * squared errors in units of the tolerance, on a small trace (options
 * --requests, --groups, --positions, --seed). It prints the best parameters
 * as "key = value" lines to paste into the preset, and the measured targets.
 * The fit is then checked on a fresh trace by tests/test_gen.c. */
#include "traces/gen.h"
#include "traces/stats.h"
#include "common/dh_err.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 16
#define MAXT 16

typedef struct {
    const char *preset;
    uint32_t requests, groups, group_step, positions;
    uint64_t seed;
    char *tname[MAXT];
    double tval[MAXT], tol;
    int nt;
    char *pname[MAXP];
    double lo[MAXP], hi[MAXP], val[MAXP];
    int np;
} calib;

/* Evaluate: generate, analyse, and return the squared error in tolerance units. */
static double evaluate(const calib *c, const double *val, double *measured)
{
    gen_params *p;
    if (gen_params_load(c->preset, &p) < 0) dh_die_last("gen_calibrate");
    char buf[256];
    for (int i = 0; i < c->np; i++) {
        snprintf(buf, sizeof buf, "%s=%.6g", c->pname[i], val[i]);
        if (gen_params_set(p, buf) < 0) { gen_params_free(p); return INFINITY; }
    }
    trace_shape sh;
    if (gen_params_default_shape(p, &sh) < 0) dh_die_last("gen_calibrate");
    sh.n_requests = c->requests;
    for (uint32_t r = 0; r < sh.n_requests; r++) sh.output_len[r] = c->positions;
    sel_source *src;
    if (gen_source_new(p, &sh, c->seed, 64, &src) < 0) dh_die_last("gen_calibrate");
    stats_options o;
    stats_options_init(&o);
    o.max_groups = c->groups;
    o.group_step = c->group_step;
    stats_report *r;
    if (stats_run(src, &o, &r) < 0) dh_die_last("gen_calibrate");
    double err = 0;
    for (int t = 0; t < c->nt; t++) {
        if (stats_target_value(r, c->tname[t], &measured[t]) < 0) dh_die_last("gen_calibrate");
        double e = (measured[t] - c->tval[t]) / c->tol;
        err += e * e;
    }
    stats_report_free(r);
    sel_source_free(src);
    trace_shape_release(&sh);
    gen_params_free(p);
    return err;
}

int main(int argc, char **argv)
{
    calib c = {.requests = 2, .groups = 2, .group_step = 1, .positions = 400, .seed = 7};
    static const struct option opts[] = {
        {"requests", required_argument, 0, 'r'}, {"groups", required_argument, 0, 'g'},
        {"group-step", required_argument, 0, 's'}, {"positions", required_argument, 0, 'p'},
        {"seed", required_argument, 0, 'S'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int ch, rounds = 6;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r': c.requests = (uint32_t)atoi(optarg); break;
        case 'g': c.groups = (uint32_t)atoi(optarg); break;
        case 's': c.group_step = (uint32_t)atoi(optarg); break;
        case 'p': c.positions = (uint32_t)atoi(optarg); break;
        case 'S': c.seed = strtoull(optarg, NULL, 10); break;
        default:
            fprintf(stderr, "usage: gen_calibrate [--requests N] [--groups N] [--group-step N] [--positions N] [--seed S]\n"
                            "                     PRESET TARGET[,TARGET..] SECTION.KEY:LO:HI ...\n");
            return ch == 'h' ? 0 : 1;
        }
    }
    if (argc - optind < 3) dh_die("gen_calibrate", "need a preset, a target list and at least one parameter (--help)");
    c.preset = argv[optind];
    gen_params *p;
    if (gen_params_load(c.preset, &p) < 0) dh_die_last("gen_calibrate");
    if (gen_params_target(p, "tolerance", &c.tol) < 0) dh_die_last("gen_calibrate");
    for (char *tok = strtok(argv[optind + 1], ","); tok; tok = strtok(NULL, ",")) {
        if (c.nt == MAXT) dh_die("gen_calibrate", "too many targets");
        c.tname[c.nt] = tok;
        if (gen_params_target(p, tok, &c.tval[c.nt]) < 0) dh_die_last("gen_calibrate");
        c.nt++;
    }
    char *text = gen_params_to_string(p);
    for (int i = optind + 2; i < argc; i++) {
        if (c.np == MAXP) dh_die("gen_calibrate", "too many parameters");
        char *spec = argv[i], *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) dh_die("gen_calibrate", "parameter '%s': expected SECTION.KEY:LO:HI", spec);
        *c1 = 0;
        c.pname[c.np] = spec;
        c.lo[c.np] = atof(c1 + 1);
        c.hi[c.np] = atof(c2 + 1);
        /* The starting value is the preset's current one. */
        char *dot = strchr(spec, '.'), key[128], sec[64];
        if (!dot) dh_die("gen_calibrate", "parameter '%s': expected SECTION.KEY", spec);
        snprintf(sec, sizeof sec, "%.*s", (int)(dot - spec), spec);
        snprintf(key, sizeof key, "%s", dot + 1);
        char pat[256];
        snprintf(pat, sizeof pat, "[%s]", sec);
        char *s = strstr(text, pat), *line;
        if (!s) dh_die("gen_calibrate", "no section [%s]", sec);
        snprintf(pat, sizeof pat, "\n%s = ", key);
        line = strstr(s, pat);
        if (!line) dh_die("gen_calibrate", "no key '%s' in [%s]", key, sec);
        c.val[c.np] = atof(line + strlen(pat));
        c.np++;
    }
    free(text);
    gen_params_free(p);

    double meas[MAXT], best = evaluate(&c, c.val, meas), step[MAXP];
    for (int i = 0; i < c.np; i++) step[i] = (c.hi[i] - c.lo[i]) / 4;
    fprintf(stderr, "start: error %.3f\n", best);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < c.np; i++) {
            for (int dir = -1; dir <= 1; dir += 2) {
                for (;;) {
                    double v[MAXP];
                    memcpy(v, c.val, sizeof v);
                    v[i] = fmin(c.hi[i], fmax(c.lo[i], c.val[i] + dir * step[i]));
                    if (v[i] == c.val[i]) break;
                    double m[MAXT], e = evaluate(&c, v, m);
                    if (e >= best) break;
                    best = e;
                    memcpy(c.val, v, sizeof v);
                    memcpy(meas, m, sizeof m);
                    fprintf(stderr, "round %d: %s = %.6g, error %.3f\n", round, c.pname[i], v[i], e);
                }
            }
        }
        for (int i = 0; i < c.np; i++) step[i] /= 2;
    }
    printf("# best fit, error %.3f (sum of squared errors in units of the %.4g tolerance)\n", best, c.tol);
    for (int i = 0; i < c.np; i++) printf("%s = %.6g\n", c.pname[i], c.val[i]);
    for (int t = 0; t < c.nt; t++) printf("# %s: measured %.4f, target %.4f\n", c.tname[t], meas[t], c.tval[t]);
    return 0;
}
