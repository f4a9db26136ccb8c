/* swdef.c: reading and checking a sweep file; see swdef.h.
 *
 * The file is small and read once; everything here is linear scans. The
 * points themselves are never stored: a unit's inputs are computed from its
 * index (mixed-radix digits for product, one index for zip). */
#include "sweep/swdef.h"
#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/path.h"
#include "sim/prov.h"
#include "sim/sim.h"
#include "traces/gen.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_INSTANCE "models/instances/glm53-h200x8.ini"
#define MAX_AXIS_VALUES 1000000
#define MAX_UNITS 100000000

uint64_t swdef_fnv(uint64_t h, const void *data, size_t n) { return prov_fnv(h, data, n); }

/* ---- the schema (docs/CONFIG.md is printed from it: bin/dhconfig schema) ---- */

static const cfg_key swdef_keys[] = {
    CK_ROW("sweep", "config", CK_STR, "", 0, 0, DEFAULT_INSTANCE, "The instance every point starts from.", 0),
    CK_ROW("sweep", "policies", CK_STR, "", 0, 0, "", "Comma-separated policy columns (NAME or NAME+MODE, as dhsim "
           "--policy); empty: the instance's.", 0),
    CK_ROW("sweep", "seeds", CK_STR, "", 0, 0, "", "Seeds: a list a,b,c or a range FIRST:LAST:STEP; empty: the "
           "instance's.", 0),
    CK_ROW("sweep", "steps", CK_STR, "", 0, 0, "", "Decode steps of every point; empty: the instance's.", 0),
    CK_ROW("sweep", "output", CK_STR, "", 0, 0, NULL, "The output folder (created; must be writable).", 0),
    CK_STR_ROW("sweep", "combine", "product", "product|zip", "Points: every combination of the axes, or their i-th "
               "values together (axes of one length).", 0),
    CK_ROW("base", "SECTION.KEY", CK_STR, "", 0, 0, "(none)", "Any key of the instance, its model or its profile, set for "
           "every point (as --set SECTION.KEY=VALUE).", 0),
    CK_ROW("axes", "SECTION.KEY", CK_STR, "", 0, 0, "(none)", "An axis: the values of that key, a list a,b,c (or a|b|c) "
           "or a range FIRST:LAST:STEP.", 0),
};
const cfg_schema swdef_schema = CFG_SCHEMA("sweeps/NAME.ini", "Sweep", "A parameter sweep for bin/dhsweep "
    "(sweep/swdef.h): the points are the axes' values over a base instance.", swdef_keys);

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(dh_malloc(n), s, n);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
    return s;
}

static void push_str(char ***v, size_t *n, const char *s)
{
    *v = dh_reallocarray(*v, *n + 1, sizeof **v);
    (*v)[(*n)++] = xstrdup(s);
}

/* A key of [base] or [axes]: SECTION.KEY, or gen.SECTION.KEY. */
static int check_key(const char *file, const char *sec, const char *key)
{
    const char *dot = strchr(key, '.');
    if (!dot || dot == key || !dot[1] || strchr(key, '=') || strchr(key, ' '))
        return dh_err("%s: [%s] key '%s': expected SECTION.KEY", file, sec, key);
    if (!strncmp(key, "gen.", 4)) {
        const char *d2 = strchr(key + 4, '.');
        if (!d2 || d2 == key + 4 || !d2[1])
            return dh_err("%s: [%s] key '%s': expected gen.SECTION.KEY (a generator preset parameter)", file, sec, key);
    }
    if (strlen(key) >= 120) return dh_err("%s: [%s] key '%s' is too long", file, sec, key);
    return 0;
}

/* Values "a,b,c", "a|b|c" (values holding commas) or "lo:hi:step" (numbers). */
static int parse_values(const char *file, const char *what, const char *text, char ***vals, size_t *n)
{
    *vals = NULL;
    *n = 0;
    char *t = xstrdup(text), *s = trim(t);
    if (!*s) { free(t); return dh_err("%s: %s: no values", file, what); }
    int range = 0;
    if (!strchr(s, ',') && !strchr(s, '|')) {
        char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2 && !strchr(c2 + 1, ':')) {
            char *e0, *e1, *e2;
            *c1 = *c2 = 0;
            double lo = strtod(s, &e0), hi = strtod(c1 + 1, &e1), st = strtod(c2 + 1, &e2);
            int ok = e0 != s && !*trim(e0) && e1 != c1 + 1 && !*trim(e1) && e2 != c2 + 1 && !*trim(e2);
            if (!ok) { free(t); return dh_err("%s: %s: range '%s' is not lo:hi:step with three numbers", file, what, text); }
            if (!isfinite(lo) || !isfinite(hi) || !(st > 0) || !isfinite(st) || hi < lo) {
                free(t);
                return dh_err("%s: %s: range '%s' needs lo <= hi and step > 0", file, what, text);
            }
            /* The count is rounded with a tolerance so that 0.1:0.5:0.1 has its 0.5. */
            double cnt = floor((hi - lo) / st + 1e-9) + 1;
            if (cnt > MAX_AXIS_VALUES) { free(t); return dh_err("%s: %s: range '%s' has more than %d values", file, what, text, MAX_AXIS_VALUES); }
            for (long i = 0; i < (long)cnt; i++) {
                char b[64];
                snprintf(b, sizeof b, "%.10g", lo + (double)i * st);
                push_str(vals, n, b);
            }
            range = 1;
        }
    }
    if (!range) {
        const char *sep = strchr(s, '|') ? "|" : ",";
        char *save, *tok;
        for (tok = strtok_r(s, sep, &save); tok; tok = strtok_r(NULL, sep, &save)) {
            char *v = trim(tok);
            if (!*v) { free(t); return dh_err("%s: %s: empty value in '%s'", file, what, text); }
            push_str(vals, n, v);
        }
        if (*n == 0) { free(t); return dh_err("%s: %s: no values", file, what); }
    }
    free(t);
    return 0;
}

/* The (key, value) entries of one section, in file order. cfg.h has no
 * iterator over a section's keys, so they are read from cfg_to_string's
 * "[section]" / "key = value" lines (keys never hold '=' in INI), and each is
 * then read through cfg_str so that cfg_check_unused sees it used. */
static int section_entries(cfg *c, const char *sec, swdef_kv **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char *text = cfg_to_string(c), *save, *line;
    int in = 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '[') {
            size_t l = strlen(line);
            in = l >= 2 && line[l - 1] == ']' && strlen(sec) == l - 2 && !strncmp(line + 1, sec, l - 2);
            continue;
        }
        if (!in) continue;
        char *eq = strstr(line, " = ");
        if (!eq) continue;
        *eq = 0;
        *out = dh_reallocarray(*out, *n + 1, sizeof **out);
        (*out)[*n].key = xstrdup(line);
        (*out)[*n].val = xstrdup(cfg_str(c, sec, line));
        (*n)++;
    }
    free(text);
    return 0;
}

/* A policy column from NAME or NAME+MODE, as dhsim's add_column. */
static int add_policy(swdef *d, const char *file, const char *tok, const char *cfg_mode, const char *default_mode)
{
    if (d->n_pol == SWDEF_MAX_POL) return dh_err("%s: [sweep] policies: at most %d", file, SWDEF_MAX_POL);
    char name[64];
    snprintf(name, sizeof name, "%s", tok);
    char *mode = strchr(name, '+');
    if (mode) *mode++ = 0;
    swdef_policy *c = &d->pol[d->n_pol];
    memset(c, 0, sizeof *c);
    if (!strcmp(name, "hisparse-spec")) {
        /* HiSparse with speculation but without the mechanisms the paper adds. */
        c->pol = POL_HISPARSE;
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.shared_retrieval=false");
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.draft_ring=false");
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.staging_reuse=false");
        if (!mode && !cfg_mode) snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=%s", default_mode);
    } else if (pol_parse(name, &c->pol) < 0) {
        return dh_err_prefix("%s: [sweep] policies: ", file);
    }
    if (mode) {
        int m;
        if (specrun_parse_mode(mode, &m) < 0) return dh_err_prefix("%s: [sweep] policies '%s': ", file, tok);
        if (c->n_sets == 4) return dh_err("%s: [sweep] policies '%s': too many overrides", file, tok);
        snprintf(c->sets[c->n_sets++], sizeof c->sets[0], "spec.mode=%s", mode);
    }
    snprintf(c->label, sizeof c->label, "%s", tok);
    for (int i = 0; i < d->n_pol; i++)
        if (!strcmp(d->pol[i].label, c->label)) return dh_err("%s: [sweep] policies: '%s' given twice", file, tok);
    d->n_pol++;
    return 0;
}

/* The output folder must exist or be creatable, and be writable: a file is
 * created and removed there now, before any point runs. */
static int check_output(const char *file, const char *out)
{
    char path[1200];
    size_t n = strlen(out);
    if (n == 0 || n >= 1000) return dh_err("%s: [sweep] output: empty or too long", file);
    snprintf(path, sizeof path, "%s", out);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) < 0 && errno != EEXIST) { int e = errno; *p = '/'; return dh_err("%s: [sweep] output '%s': unable to create '%.*s': %s", file, out, (int)(p - path), path, strerror(e)); }
        *p = '/';
    }
    if (mkdir(path, 0777) < 0 && errno != EEXIST)
        return dh_err("%s: [sweep] output '%s': unable to create it: %s", file, out, strerror(errno));
    snprintf(path, sizeof path, "%s/points", out);
    if (mkdir(path, 0777) < 0 && errno != EEXIST)
        return dh_err("%s: [sweep] output '%s': unable to create '%s': %s", file, out, path, strerror(errno));
    snprintf(path, sizeof path, "%s/points/.write-test.%ld", out, (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f || fputs("x\n", f) < 0 || fclose(f) != 0)
        return dh_err("%s: [sweep] output '%s': not writable: %s", file, out, strerror(errno));
    remove(path);
    return 0;
}

int swdef_load(const char *path, swdef *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->file, sizeof d->file, "%s", path);
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    int rc = -1;
    const char *config, *policies, *seeds, *steps, *output, *combine;
    sim_config sc;
    memset(&sc, 0, sizeof sc);
    for (size_t i = 0; i < cfg_section_count(c); i++) {
        const char *s = cfg_section_name(c, i);
        if (strcmp(s, "sweep") && strcmp(s, "base") && strcmp(s, "axes")) {
            dh_err("%s: unknown section [%s] (expected [sweep], [base], [axes])", path, s);
            goto done;
        }
    }
    const cfg_schema *S = &swdef_schema;
    if (cfgk_string(c, S, "sweep", "config", &config) < 0 || cfgk_string(c, S, "sweep", "policies", &policies) < 0 ||
        cfgk_string(c, S, "sweep", "seeds", &seeds) < 0 || cfgk_string(c, S, "sweep", "steps", &steps) < 0 ||
        cfgk_string(c, S, "sweep", "output", &output) < 0 || cfgk_string(c, S, "sweep", "combine", &combine) < 0)
        goto done;
    snprintf(d->config, sizeof d->config, "%s", config);
    if (!strcmp(combine, "zip")) d->zip = 1;
    else if (strcmp(combine, "product")) { dh_err("%s: [sweep] combine '%s': expected product or zip", path, combine); goto done; }
    if (!*output) { dh_err("%s: [sweep] output: empty", path); goto done; }
    snprintf(d->output, sizeof d->output, "%s", output);

    if (section_entries(c, "base", &d->base, &d->n_base) < 0) goto done;
    for (size_t i = 0; i < d->n_base; i++)
        if (check_key(path, "base", d->base[i].key) < 0) goto done;
    swdef_kv *ax;
    size_t nax;
    if (section_entries(c, "axes", &ax, &nax) < 0) goto done;
    d->axes = dh_calloc(nax, sizeof *d->axes);
    for (size_t i = 0; i < nax; i++) {
        swdef_axis *a = &d->axes[d->n_axes++];
        a->key = ax[i].key;
        char what[200];
        snprintf(what, sizeof what, "[axes] %s", a->key);
        int bad = check_key(path, "axes", a->key) < 0 || parse_values(path, what, ax[i].val, &a->vals, &a->n) < 0;
        free(ax[i].val);
        if (bad) {
            for (size_t j = i + 1; j < nax; j++) { free(ax[j].key); free(ax[j].val); }
            free(ax);
            goto done;
        }
    }
    free(ax);
    if (cfg_check_unused(c) < 0) goto done;

    /* Points: the product of the axes, or their common length when zipped. */
    d->n_points = 1;
    for (size_t i = 0; i < d->n_axes; i++) {
        if (d->zip) {
            if (i > 0 && d->axes[i].n != d->axes[0].n) {
                dh_err("%s: combine = zip needs axes of one length: '%s' has %zu values, '%s' %zu", path,
                       d->axes[0].key, d->axes[0].n, d->axes[i].key, d->axes[i].n);
                goto done;
            }
            d->n_points = d->axes[0].n;
        } else {
            if (d->n_points > MAX_UNITS / d->axes[i].n) { dh_err("%s: more than %d points", path, MAX_UNITS); goto done; }
            d->n_points *= d->axes[i].n;
        }
    }

    /* The base config, with the base overrides: it gives the default policy,
     * seed and steps, and the default speculative mode of hisparse-spec. */
    char **sets = dh_calloc(d->n_base + d->n_axes + 1, sizeof *sets);
    int ns = 0;
    /* With the first point's axis values: the base alone may be incomplete
     * (a trace path that only the axes give). */
    for (size_t i = 0; i < d->n_base + d->n_axes; i++) {
        const char *key = i < d->n_base ? d->base[i].key : d->axes[i - d->n_base].key;
        const char *val = i < d->n_base ? d->base[i].val : d->axes[i - d->n_base].vals[0];
        if (!strncmp(key, "gen.", 4)) continue;
        size_t l = strlen(key) + strlen(val) + 2;
        sets[ns] = dh_malloc(l);
        snprintf(sets[ns++], l, "%s=%s", key, val);
    }
    int lrc = sim_config_load(d->config, sets, ns, &sc);
    for (int i = 0; i < ns; i++) free(sets[i]);
    free(sets);
    if (lrc < 0) { dh_err_prefix("%s: [sweep] config: ", path); goto done; }

    if (*seeds) {
        if (parse_values(path, "[sweep] seeds", seeds, &d->seeds, &d->n_seeds) < 0) goto done;
        for (size_t i = 0; i < d->n_seeds; i++) {
            char *e;
            errno = 0;
            long long v = strtoll(d->seeds[i], &e, 10);
            if (*e || errno || v < 0) { dh_err("%s: [sweep] seeds: '%s' is not an integer >= 0", path, d->seeds[i]); goto done; }
            for (size_t j = 0; j < i; j++)
                if (!strcmp(d->seeds[i], d->seeds[j])) { dh_err("%s: [sweep] seeds: %s given twice", path, d->seeds[i]); goto done; }
        }
    } else {
        char b[32];
        snprintf(b, sizeof b, "%llu", (unsigned long long)sc.seed);
        push_str(&d->seeds, &d->n_seeds, b);
    }
    if (*steps) {
        char *e;
        long v = strtol(steps, &e, 10);
        if (*e || v < 1 || v > 100000000) { dh_err("%s: [sweep] steps '%s': expected an integer >= 1", path, steps); goto done; }
        snprintf(d->steps, sizeof d->steps, "%ld", v);
    } else {
        snprintf(d->steps, sizeof d->steps, "%u", sc.wl.steps);
    }
    if (d->n_points > MAX_UNITS / d->n_seeds) { dh_err("%s: more than %d units", path, MAX_UNITS); goto done; }
    d->n_units = d->n_points * d->n_seeds;

    const char *cfg_mode = sc.spec.mode ? spec_kind_name((spec_kind)sc.spec.mode) : NULL;
    char default_mode[16] = "dflash2";
    if (!cfg_mode) {
        /* No configured mode: DFlash2 where the model has a DFlash2 draft, else DSpark (as dhsim). */
        char p1[600], p2[4096];
        snprintf(p1, sizeof p1, "models/drafts/%s-dflash2.ini", sc.model.name);
        if (dh_path_find(p1, p2, sizeof p2) < 0) goto done;
        if (access(p2, R_OK) != 0) snprintf(default_mode, sizeof default_mode, "dspark");
    }
    if (*policies) {
        char *l = xstrdup(policies), *save, *tok;
        for (tok = strtok_r(l, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (add_policy(d, path, trim(tok), cfg_mode, default_mode) < 0) { free(l); goto done; }
        }
        free(l);
    } else if (add_policy(d, path, pol_name_of(sc.policy), cfg_mode, default_mode) < 0) {
        goto done;
    }
    if (d->n_pol == 0) { dh_err("%s: [sweep] policies: none given", path); goto done; }

    /* Generator overrides need a preset to apply to; each is tried on it. */
    gen_params *gp = NULL;
    for (size_t i = 0; i < d->n_base + d->n_axes; i++) {
        const char *key = i < d->n_base ? d->base[i].key : d->axes[i - d->n_base].key;
        if (strncmp(key, "gen.", 4)) continue;
        if (!*sc.preset) { dh_err("%s: '%s' needs a generator preset, and the config reads a trace file", path, key); goto done; }
        if (!gp && gen_params_load(sc.preset, &gp) < 0) goto done;
        size_t nv = i < d->n_base ? 1 : d->axes[i - d->n_base].n;
        for (size_t v = 0; v < nv; v++) {
            const char *val = i < d->n_base ? d->base[i].val : d->axes[i - d->n_base].vals[v];
            char a[512];
            snprintf(a, sizeof a, "%s=%s", key + 4, val);
            if (gen_params_set(gp, a) < 0) { gen_params_free(gp); dh_err_prefix("%s: '%s': ", path, key); goto done; }
        }
    }
    gen_params_free(gp);

    if (check_output(path, d->output) < 0) goto done;

    /* The digest covers everything that decides the results, in one canonical text. */
    uint64_t h = SWDEF_FNV_INIT;
#define H(s) (h = swdef_fnv(h, (s), strlen(s) + 1))
    H("dhsweep 1"); H(d->config); H(d->zip ? "zip" : "product"); H(d->steps);
    for (size_t i = 0; i < d->n_base; i++) { H(d->base[i].key); H(d->base[i].val); }
    for (size_t i = 0; i < d->n_axes; i++) { H(d->axes[i].key); for (size_t v = 0; v < d->axes[i].n; v++) H(d->axes[i].vals[v]); }
    for (int i = 0; i < d->n_pol; i++) H(d->pol[i].label);
    for (size_t i = 0; i < d->n_seeds; i++) H(d->seeds[i]);
#undef H
    snprintf(d->digest, sizeof d->digest, "%016llx", (unsigned long long)h);
    rc = 0;
done:
    sim_config_release(&sc);
    cfg_free(c);
    return rc;
}

void swdef_release(swdef *d)
{
    for (size_t i = 0; i < d->n_base; i++) { free(d->base[i].key); free(d->base[i].val); }
    free(d->base);
    for (size_t i = 0; i < d->n_axes; i++) {
        free(d->axes[i].key);
        for (size_t v = 0; v < d->axes[i].n; v++) free(d->axes[i].vals[v]);
        free(d->axes[i].vals);
    }
    free(d->axes);
    for (size_t i = 0; i < d->n_seeds; i++) free(d->seeds[i]);
    free(d->seeds);
    memset(d, 0, sizeof *d);
}

static void input_put(swdef_task *t, const char *key, const char *val)
{
    for (size_t i = 0; i < t->n_inputs; i++)
        if (!strcmp(t->inputs[i].key, key)) { free(t->inputs[i].val); t->inputs[i].val = xstrdup(val); return; }
    t->inputs = dh_reallocarray(t->inputs, t->n_inputs + 1, sizeof *t->inputs);
    t->inputs[t->n_inputs].key = xstrdup(key);
    t->inputs[t->n_inputs].val = xstrdup(val);
    t->n_inputs++;
}

static void assign(swdef_task *t, const char *key, const char *val)
{
    int gen = !strncmp(key, "gen.", 4);
    const char *k = gen ? key + 4 : key;
    size_t l = strlen(k) + strlen(val) + 2;
    char *a = dh_malloc(l);
    snprintf(a, l, "%s=%s", k, val);
    if (gen) { t->gen_sets = dh_reallocarray(t->gen_sets, t->n_gen + 1, sizeof *t->gen_sets); t->gen_sets[t->n_gen++] = a; }
    else { t->sim_sets = dh_reallocarray(t->sim_sets, t->n_sim + 1, sizeof *t->sim_sets); t->sim_sets[t->n_sim++] = a; }
    input_put(t, key, val);
}

void swdef_task_make(const swdef *d, size_t u, int pi, swdef_task *t)
{
    memset(t, 0, sizeof *t);
    t->unit = u;
    t->point = u / d->n_seeds;
    t->seed_index = u % d->n_seeds;
    input_put(t, "config", d->config);
    for (size_t i = 0; i < d->n_base; i++) assign(t, d->base[i].key, d->base[i].val);
    assign(t, "workload.steps", d->steps);
    assign(t, "trace.seed", d->seeds[t->seed_index]);
    /* Axis values: mixed-radix digits of the point, the last axis fastest. */
    size_t rest = t->point;
    size_t *digit = dh_calloc(d->n_axes + 1, sizeof *digit);
    for (size_t i = d->n_axes; i-- > 0;) {
        if (d->zip) digit[i] = t->point;
        else { digit[i] = rest % d->axes[i].n; rest /= d->axes[i].n; }
    }
    for (size_t i = 0; i < d->n_axes; i++) assign(t, d->axes[i].key, d->axes[i].vals[digit[i]]);
    free(digit);
    if (pi >= 0) {
        /* The policy's own overrides are not inputs of the table: the policy column names them. */
        const swdef_policy *p = &d->pol[pi];
        for (int i = 0; i < p->n_sets; i++) {
            t->sim_sets = dh_reallocarray(t->sim_sets, t->n_sim + 1, sizeof *t->sim_sets);
            t->sim_sets[t->n_sim++] = xstrdup(p->sets[i]);
        }
    }
}

void swdef_task_release(swdef_task *t)
{
    for (int i = 0; i < t->n_sim; i++) free(t->sim_sets[i]);
    free(t->sim_sets);
    for (int i = 0; i < t->n_gen; i++) free(t->gen_sets[i]);
    free(t->gen_sets);
    for (size_t i = 0; i < t->n_inputs; i++) { free(t->inputs[i].key); free(t->inputs[i].val); }
    free(t->inputs);
    memset(t, 0, sizeof *t);
}
