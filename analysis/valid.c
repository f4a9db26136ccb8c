/* valid.c: replay-versus-simulator comparison; see valid.h. */
#include "analysis/valid.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void val_init(val_set *v) { memset(v, 0, sizeof *v); }
void val_release(val_set *v) { free(v->s); val_init(v); }

/* A small delimited-text reader: header names the columns; cells are plain
 * (no quotes: ids and policy names have no commas). */
typedef struct {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    long lineno;
    char delim;
    int ncol;
    char *cells[32];
    char header[32][32];
} dtext;

static int split(dtext *d)
{
    int n = 0;
    char *p = d->line;
    p[strcspn(p, "\r\n")] = 0;
    for (;;) {
        if (n == 32) return dh_err("file '%s' line %ld: more than 32 columns", d->path, d->lineno);
        d->cells[n++] = p;
        char *e = strchr(p, d->delim);
        if (!e) break;
        *e = 0;
        p = e + 1;
    }
    return n;
}

static int dtext_open(dtext *d, const char *path)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    d->f = fopen(path, "r");
    if (!d->f) return dh_err("file '%s': cannot open: %s", path, strerror(errno));
    while (getline(&d->line, &d->cap, d->f) > 0) {
        d->lineno++;
        if (d->line[0] == '#' || d->line[strspn(d->line, " \t\r\n")] == 0) continue;
        d->delim = strchr(d->line, '\t') ? '\t' : ',';
        int n = split(d);
        if (n < 0) return -1;
        d->ncol = n;
        for (int i = 0; i < n; i++) snprintf(d->header[i], sizeof d->header[i], "%s", d->cells[i]);
        return 0;
    }
    return dh_err("file '%s': no header line", path);
}

/* Next data line: 1, 0 at end, -1 on error. */
static int dtext_next(dtext *d)
{
    while (getline(&d->line, &d->cap, d->f) > 0) {
        d->lineno++;
        if (d->line[0] == '#' || d->line[strspn(d->line, " \t\r\n")] == 0) continue;
        int n = split(d);
        if (n < 0) return -1;
        if (n != d->ncol) return dh_err("file '%s' line %ld: %d columns, the header has %d", d->path, d->lineno, n, d->ncol);
        return 1;
    }
    return 0;
}

static void dtext_close(dtext *d)
{
    if (d->f) fclose(d->f);
    free(d->line);
}

/* Column indexes of names[] in the header; every one required, no others. */
static int dtext_columns(dtext *d, const char *const *names, int n, int *idx)
{
    for (int j = 0; j < n; j++) {
        idx[j] = -1;
        for (int i = 0; i < d->ncol; i++)
            if (!strcmp(d->header[i], names[j])) idx[j] = i;
        if (idx[j] < 0) return dh_err("file '%s': header lacks column '%s'", d->path, names[j]);
    }
    for (int i = 0; i < d->ncol; i++) {
        int known = 0;
        for (int j = 0; j < n; j++) known |= !strcmp(d->header[i], names[j]);
        if (!known) return dh_err("file '%s': unknown column '%s'", d->path, d->header[i]);
    }
    return 0;
}

#define VAL_COUNT_MAX 9007199254740992.0 /* 2^53 */
/* A step takes more than nothing and less than 1000 s: a predicted or
 * measured time outside that range is a broken file, not a figure. */
#define VAL_TIME_MAX_US 1e9

static int cell_num(dtext *d, int col, const char *name, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(d->cells[col], &end);
    if (end == d->cells[col] || *end || errno == ERANGE || !isfinite(x))
        return dh_err("file '%s' line %ld: column '%s' is not a number", d->path, d->lineno, name);
    *out = x;
    return 0;
}

static int cell_count(dtext *d, int col, const char *name, long *out)
{
    double x;
    if (cell_num(d, col, name, &x) < 0) return -1;
    /* Above 2^53 a double no longer holds every integer, and the cast to long
     * would overflow: such a count is an error, not a wrapped number. */
    if (x < 0 || x != floor(x) || x > VAL_COUNT_MAX)
        return dh_err("file '%s' line %ld: column '%s' is not a count in 0 .. 2^53", d->path, d->lineno, name);
    *out = (long)x;
    return 0;
}

static int cell_str(dtext *d, int col, const char *name, char *buf, size_t cap)
{
    if (!d->cells[col][0]) return dh_err("file '%s' line %ld: column '%s' is empty", d->path, d->lineno, name);
    if (strlen(d->cells[col]) >= cap) return dh_err("file '%s' line %ld: column '%s' is too long", d->path, d->lineno, name);
    strcpy(buf, d->cells[col]);
    return 0;
}

static int key_cmp(const val_step *a, const val_step *b)
{
    int c = strcmp(a->config, b->config);
    if (!c) c = strcmp(a->policy, b->policy);
    if (!c) c = strcmp(a->mode, b->mode);
    if (!c) c = (a->step > b->step) - (a->step < b->step);
    return c;
}

static int qcmp(const void *a, const void *b) { return key_cmp(a, b); }

static int join_one(val_set *v, const char *path, long lineno, val_step *k, double pred, long misses);

int val_load_replay(val_set *v, const char *path)
{
    static const char *const names[] = {"config_id", "policy", "mode", "step", "measured_us", "misses", "selected", "heldout"};
    int idx[8];
    dtext d;
    int rc = dtext_open(&d, path);
    if (rc == 0) rc = dtext_columns(&d, names, 8, idx);
    snprintf(v->replay_path, sizeof v->replay_path, "%s", path);
    while (rc == 0) {
        int more = dtext_next(&d);
        if (more <= 0) { rc = more; break; }
        val_step s;
        memset(&s, 0, sizeof s);
        long held;
        double step;
        if (cell_str(&d, idx[0], names[0], s.config, sizeof s.config) < 0 ||
            cell_str(&d, idx[1], names[1], s.policy, sizeof s.policy) < 0 ||
            cell_str(&d, idx[2], names[2], s.mode, sizeof s.mode) < 0 ||
            cell_num(&d, idx[3], names[3], &step) < 0 || cell_num(&d, idx[4], names[4], &s.measured_us) < 0 ||
            cell_count(&d, idx[5], names[5], &s.misses_meas) < 0 || cell_count(&d, idx[6], names[6], &s.selected) < 0 ||
            cell_count(&d, idx[7], names[7], &held) < 0) { rc = -1; break; }
        if (step < 0 || step != floor(step) || step > VAL_COUNT_MAX) { rc = dh_err("file '%s' line %ld: column 'step' is not a count", path, d.lineno); break; }
        if (!(s.measured_us > 0 && s.measured_us <= VAL_TIME_MAX_US)) {
            rc = dh_err("file '%s' line %ld: measured_us = %g is outside (0, %g]", path, d.lineno, s.measured_us, VAL_TIME_MAX_US);
            break;
        }
        if (held > 1) { rc = dh_err("file '%s' line %ld: heldout must be 0 or 1", path, d.lineno); break; }
        if (s.misses_meas > s.selected) { rc = dh_err("file '%s' line %ld: misses %ld exceed selected %ld", path, d.lineno, s.misses_meas, s.selected); break; }
        s.step = (long)step;
        s.heldout = (int)held;
        s.line = d.lineno;
        if (v->n == v->cap) {
            v->cap = v->cap ? 2 * v->cap : 256;
            v->s = realloc(v->s, v->cap * sizeof *v->s);
            if (!v->s) abort();
        }
        v->s[v->n++] = s;
    }
    dtext_close(&d);
    if (rc) return -1;
    size_t first = 0;
    for (size_t i = 1; i < v->n; i++)
        if (v->s[i].line < v->s[first].line) first = i;
    if (v->n) v->s[first].warmup = 1;
    qsort(v->s, v->n, sizeof *v->s, qcmp);
    for (size_t i = 1; i < v->n; i++)
        if (!key_cmp(&v->s[i - 1], &v->s[i]))
            return dh_err("file '%s' line %ld: step %ld of config '%s' policy '%s' mode '%s' appears twice", path,
                          v->s[i].line > v->s[i - 1].line ? v->s[i].line : v->s[i - 1].line, v->s[i].step, v->s[i].config, v->s[i].policy, v->s[i].mode);
    for (size_t i = 1; i < v->n; i++)
        if (!strcmp(v->s[i].config, v->s[i - 1].config) && v->s[i].heldout != v->s[i - 1].heldout)
            return dh_err("file '%s': config '%s' is held out on some lines and not on others", path, v->s[i].config);
    return 0;
}

int val_add_predictions(val_set *v, const char *path)
{
    static const char *const names[] = {"config_id", "policy", "mode", "step", "predicted_us", "misses"};
    int idx[6];
    dtext d;
    int rc = dtext_open(&d, path);
    if (rc == 0) rc = dtext_columns(&d, names, 6, idx);
    while (rc == 0) {
        int more = dtext_next(&d);
        if (more <= 0) { rc = more; break; }
        val_step k;
        memset(&k, 0, sizeof k);
        double step, pred;
        long misses;
        if (cell_str(&d, idx[0], names[0], k.config, sizeof k.config) < 0 ||
            cell_str(&d, idx[1], names[1], k.policy, sizeof k.policy) < 0 ||
            cell_str(&d, idx[2], names[2], k.mode, sizeof k.mode) < 0 ||
            cell_num(&d, idx[3], names[3], &step) < 0 || cell_num(&d, idx[4], names[4], &pred) < 0 ||
            cell_count(&d, idx[5], names[5], &misses) < 0) { rc = -1; break; }
        if (!(pred > 0 && pred <= VAL_TIME_MAX_US)) {
            rc = dh_err("file '%s' line %ld: predicted_us = %g is outside (0, %g]", path, d.lineno, pred, VAL_TIME_MAX_US);
            break;
        }
        if (step < 0 || step != floor(step) || step > VAL_COUNT_MAX) {
            rc = dh_err("file '%s' line %ld: column 'step' is not a count in 0 .. 2^53", path, d.lineno);
            break;
        }
        k.step = (long)step;
        rc = join_one(v, path, d.lineno, &k, pred, misses);
    }
    dtext_close(&d);
    return rc;
}

static int join_one(val_set *v, const char *path, long lineno, val_step *k, double pred, long misses)
{
    val_step *hit = bsearch(k, v->s, v->n, sizeof *v->s, qcmp);
    if (!hit)
        return dh_err("file '%s' line %ld: step %ld of config '%s' policy '%s' mode '%s' is not in the replay '%s'", path,
                      lineno, k->step, k->config, k->policy, k->mode, v->replay_path);
    if (hit->have_pred) return dh_err("file '%s' line %ld: step %ld of config '%s' predicted twice", path, lineno, k->step, k->config);
    hit->predicted_us = pred;
    hit->misses_pred = misses;
    hit->have_pred = 1;
    return 0;
}

int val_add_dhsim_timeline(val_set *v, const char *path, const char *config, const char *mode)
{
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("file '%s': cannot open: %s", path, strerror(errno));
    char *line = NULL, policy[32] = "";
    size_t cap = 0;
    long lineno = 0;
    int rc = 0, c_step = -1, c_start = -1, c_end = -1, c_miss = -1, c_draft = -1, c_pol = -1, ncol = 0;
    /* A GPU replay of verification steps runs no draft model: the step's draft pass is left out. */
    const int verify = !strcmp(mode, "verify");
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (!strncmp(line, "# policy ", 9)) {
            snprintf(policy, sizeof policy, "%s", line + 9);
            ncol = 0;
            continue;
        }
        if (line[0] == '#' || !line[0]) continue;
        char *cells[64];
        int n = 0;
        for (char *save, *t = strtok_r(line, "\t", &save); t && n < 64; t = strtok_r(NULL, "\t", &save)) cells[n++] = t;
        if (n == 0) continue;
        /* The header: dhsim's long form starts with the policy column (sim/out.h);
         * a timeline written before it, with "# policy NAME" blocks, with step. */
        if (!strcmp(cells[0], "step") || !strcmp(cells[0], "policy")) {
            c_step = c_start = c_end = c_miss = c_draft = c_pol = -1;
            for (int i = 0; i < n; i++) {
                if (!strcmp(cells[i], "policy")) c_pol = i;
                if (!strcmp(cells[i], "step")) c_step = i;
                if (!strcmp(cells[i], "t_start_s")) c_start = i;
                if (!strcmp(cells[i], "t_end_s")) c_end = i;
                if (!strcmp(cells[i], "missed_rows")) c_miss = i;
                if (!strcmp(cells[i], "draft_s")) c_draft = i;
            }
            if (c_step < 0 || c_start < 0 || c_end < 0 || c_miss < 0)
                rc = dh_err("file '%s' line %ld: timeline header lacks step, t_start_s, t_end_s or missed_rows", path, lineno);
            else if (verify && c_draft < 0)
                rc = dh_err("file '%s' line %ld: a verify-mode timeline needs the draft_s column", path, lineno);
            ncol = n;
            continue;
        }
        if (!ncol || (c_pol < 0 && !policy[0])) {
            rc = dh_err("file '%s' line %ld: step line before the header (and, without a policy column, a '# policy' line)", path, lineno);
            break;
        }
        if (n != ncol) { rc = dh_err("file '%s' line %ld: %d columns, the header has %d", path, lineno, n, ncol); break; }
        if (c_pol >= 0) snprintf(policy, sizeof policy, "%s", cells[c_pol]);
        char *e1, *e2, *e3, *e4;
        double step = strtod(cells[c_step], &e1), t0 = strtod(cells[c_start], &e2), t1 = strtod(cells[c_end], &e3);
        double miss = strtod(cells[c_miss], &e4), draft = 0;
        if (*e1 || *e2 || *e3 || *e4 || !(t1 >= t0) || !(miss >= 0 && miss <= VAL_COUNT_MAX && miss == floor(miss)) ||
            !(step >= 0 && step <= VAL_COUNT_MAX && step == floor(step)) || !(t1 - t0 <= VAL_TIME_MAX_US * 1e-6)) {
            rc = dh_err("file '%s' line %ld: bad step line", path, lineno);
            break;
        }
        if (verify) {
            char *e5;
            draft = strtod(cells[c_draft], &e5);
            if (*e5 || !(draft >= 0) || draft > t1 - t0) { rc = dh_err("file '%s' line %ld: bad draft_s", path, lineno); break; }
        }
        val_step k;
        memset(&k, 0, sizeof k);
        snprintf(k.config, sizeof k.config, "%s", config);
        snprintf(k.policy, sizeof k.policy, "%s", policy);
        snprintf(k.mode, sizeof k.mode, "%s", mode);
        k.step = (long)step;
        rc = join_one(v, path, lineno, &k, (t1 - t0 - draft) * 1e6, (long)miss);
    }
    free(line);
    fclose(f);
    return rc;
}

double val_timeline_value(double x)
{
    char b[40];
    snprintf(b, sizeof b, "%.*g", VAL_TIMELINE_DIGITS, x);
    return strtod(b, NULL);
}

int val_add_sim_result(val_set *v, const sim_result *r, const char *config, const char *mode)
{
    char what[160];
    snprintf(what, sizeof what, "simulator run of '%s'", config);
    const int verify = !strcmp(mode, "verify");
    for (uint32_t i = 0; i < r->n_tl; i++) {
        const sim_tl_row *t = &r->tl[i];
        double t0 = val_timeline_value(t->t_start), t1 = val_timeline_value(t->t_end);
        double miss = val_timeline_value(t->missed), draft = verify ? val_timeline_value(t->draft_s) : 0;
        if (!(t1 >= t0) || miss < 0) return dh_err("%s step %u: bad step", what, t->step);
        if (!(draft >= 0) || draft > t1 - t0) return dh_err("%s step %u: bad draft_s", what, t->step);
        val_step k;
        memset(&k, 0, sizeof k);
        snprintf(k.config, sizeof k.config, "%s", config);
        snprintf(k.policy, sizeof k.policy, "%s", r->policy);
        snprintf(k.mode, sizeof k.mode, "%s", mode);
        k.step = (long)t->step;
        if (join_one(v, what, (long)i + 1, &k, (t1 - t0 - draft) * 1e6, (long)miss) < 0) return -1;
    }
    return 0;
}

int val_configs(const val_set *v, val_config **out, size_t *n)
{
    /* v->s is sorted by key; the file order is in each step's line. O(steps x configurations). */
    val_config *c = dh_calloc(v->n ? v->n : 1, sizeof *c);
    long *first = dh_calloc(v->n ? v->n : 1, sizeof *first);
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++) {
        const val_step *x = &v->s[i];
        size_t j = 0;
        while (j < k && strcmp(c[j].config, x->config)) j++;
        if (j == k) { snprintf(c[k].config, sizeof c[k].config, "%s", x->config); first[k++] = x->line + 1; }
        if (x->line < first[j]) {
            first[j] = x->line;
            snprintf(c[j].mode, sizeof c[j].mode, "%s", x->mode);
            c[j].heldout = x->heldout;
        }
    }
    /* Insertion sort by first line: a replay has a handful of configurations. */
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0 && first[j] < first[j - 1]; j--) {
            val_config t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
            long f = first[j]; first[j] = first[j - 1]; first[j - 1] = f;
        }
    free(first);
    *out = c;
    *n = k;
    return 0;
}

int val_check_complete(const val_set *v)
{
    if (v->n == 0) return dh_err("replay '%s' has no steps", v->replay_path);
    for (size_t i = 0; i < v->n; i++)
        if (!v->s[i].have_pred)
            return dh_err("replay '%s' line %ld: step %ld of config '%s' policy '%s' mode '%s' has no prediction", v->replay_path,
                          v->s[i].line, v->s[i].step, v->s[i].config, v->s[i].policy, v->s[i].mode);
    return 0;
}

void val_summarize(const val_set *v, int which, const char *config, const char *policy, const char *mode,
                   val_summary *out)
{
    memset(out, 0, sizeof *out);
    double *pred = malloc((v->n + 1) * sizeof *pred), *meas = malloc((v->n + 1) * sizeof *meas);
    if (!pred || !meas) abort();
    size_t n = 0;
    for (size_t i = 0; i < v->n; i++) {
        const val_step *s = &v->s[i];
        if (which >= 0 && s->heldout != which) continue;
        if (config && strcmp(s->config, config)) continue;
        if (policy && strcmp(s->policy, policy)) continue;
        if (mode && strcmp(s->mode, mode)) continue;
        out->misses_meas += s->misses_meas;
        out->misses_pred += s->misses_pred;
        out->miss_mismatch_steps += s->misses_meas != s->misses_pred;
        if (s->warmup) continue;
        pred[n] = s->predicted_us;
        meas[n] = s->measured_us;
        n++;
        out->mean_meas_us += s->measured_us;
        out->mean_pred_us += s->predicted_us;
    }
    out->steps = n;
    if (n) { out->mean_meas_us /= (double)n; out->mean_pred_us /= (double)n; }
    fit_error_distribution(pred, meas, n, &out->err);
    free(pred);
    free(meas);
}

static void summary_line(FILE *out, const char *label, const val_summary *s)
{
    if (!s->steps) { fprintf(out, "%-36s %6s  (no steps)\n", label, "0"); return; }
    fprintf(out, "%-36s %6zu %9.1f %9.1f %8.2f %8.2f %8.2f %12ld %12ld %8zu\n", label, s->steps, s->mean_meas_us,
            s->mean_pred_us, 100 * s->err.median, 100 * s->err.p95, 100 * s->err.max, s->misses_meas, s->misses_pred,
            s->miss_mismatch_steps);
}

void val_report(const val_set *v, int steps, FILE *out)
{
    fprintf(out, "# replay %s: %zu steps; error = |predicted - measured| / measured, p95 nearest-rank\n", v->replay_path, v->n);
    if (steps) {
        fprintf(out, "%-16s %-12s %-8s %6s %12s %12s %8s %10s %10s\n", "config", "policy", "mode", "step", "measured_us",
                "predicted_us", "err_%", "misses", "sim_misses");
        for (size_t i = 0; i < v->n; i++) {
            const val_step *s = &v->s[i];
            fprintf(out, "%-16s %-12s %-8s %6ld %12.2f %12.2f %8.2f %10ld %10ld%s\n", s->config, s->policy, s->mode, s->step,
                    s->measured_us, s->predicted_us, 100 * fabs(s->predicted_us - s->measured_us) / s->measured_us,
                    s->misses_meas, s->misses_pred, s->misses_meas != s->misses_pred ? "  MISMATCH" : "");
        }
        fputc('\n', out);
    }
    fprintf(out, "%-36s %6s %9s %9s %8s %8s %8s %12s %12s %8s\n", "config/policy/mode", "steps", "meas_us", "pred_us",
            "med_%", "p95_%", "max_%", "misses", "sim_misses", "differ");
    for (size_t i = 0; i < v->n; i++) {
        const val_step *s = &v->s[i];
        if (i && !strcmp(s->config, v->s[i - 1].config) && !strcmp(s->policy, v->s[i - 1].policy) && !strcmp(s->mode, v->s[i - 1].mode))
            continue;
        char label[160];
        snprintf(label, sizeof label, "%s/%s/%s%s", s->config, s->policy, s->mode, s->heldout ? " (held out)" : "");
        val_summary sm;
        val_summarize(v, -1, s->config, s->policy, s->mode, &sm);
        summary_line(out, label, &sm);
    }
    val_summary fit, held, all;
    val_summarize(v, 0, NULL, NULL, NULL, &fit);
    val_summarize(v, 1, NULL, NULL, NULL, &held);
    val_summarize(v, -1, NULL, NULL, NULL, &all);
    summary_line(out, "ALL fitted configurations", &fit);
    summary_line(out, "ALL held-out configurations", &held);
    summary_line(out, "ALL", &all);
    for (size_t i = 0; i < v->n; i++) {
        const val_step *s = &v->s[i];
        if (s->warmup)
            fprintf(out, "warm-up, not in the times above: %s/%s/%s step %ld, the replay process's first: measured %.1f us, "
                         "predicted %.1f (%+.1f %%)\n", s->config, s->policy, s->mode, s->step, s->measured_us,
                    s->predicted_us, 100 * (s->predicted_us - s->measured_us) / s->measured_us);
    }
}

/* The attention version a bin/dhreplay CSV records on its "# device:" lines ("attention version
 * N"): *version = N, or 0 where the file records none (a block appended without its header, as
 * the fetch alone, which runs no attention, is). Two different versions in one file: an error
 * naming the file, since its steps then mix kernels. who prefixes the messages. */
int val_replay_attention(const char *path, const char *who, int *version)
{
    *version = 0;
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("%s: %s: cannot open: %s", who, path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, lineno = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        if (strncmp(line, "# device:", 9)) continue;
        const char *p = strstr(line, "; attention version ");
        if (!p) continue;
        char *e;
        const long v = strtol(p + 20, &e, 10);
        if (e == p + 20 || v < 1 || v > 1000)
            rc = dh_err("%s: %s: line %d: no attention version after 'attention version'", who, path, lineno);
        else if (*version && v != *version)
            rc = dh_err("%s: %s: line %d: attention version %ld, where an earlier line of the file records %d", who, path,
                        lineno, v, *version);
        else *version = (int)v;
    }
    free(line);
    fclose(f);
    return rc;
}
