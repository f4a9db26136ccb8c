/* refit.c: one coefficient refitted on the replay's fitted configurations; see
 * refit.h.  O(steps) per solve; the profile rewrite is a line scan. */
#include "analysis/refit.h"
#include "analysis/prof.h"
#include "common/dh_err.h"
#include "common/ofile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int refit_solve(const val_set *a, double va, const val_set *b, double vb, refit_result *out)
{
    memset(out, 0, sizeof *out);
    if (!(va != vb)) return dh_err("refit: the two simulator runs need different values (both %g)", va);
    if (a->n != b->n) return dh_err("refit: the two joins have %zu and %zu steps (not the same replay)", a->n, b->n);
    double swss = 0, swsr = 0;
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++) {
        const val_step *x = &a->s[i], *y = &b->s[i];
        if (strcmp(x->config, y->config) || strcmp(x->policy, y->policy) || strcmp(x->mode, y->mode) || x->step != y->step)
            return dh_err("refit: the two joins differ at replay line %ld (not the same replay)", x->line);
        if (x->heldout || x->warmup) continue;
        if (!x->have_pred || !y->have_pred)
            return dh_err("refit: step %ld of fitted config '%s' policy '%s' mode '%s' has no prediction at %s = %g",
                          x->step, x->config, x->policy, x->mode, "the value", x->have_pred ? vb : va);
        double m = x->measured_us, w = 1.0 / (m * m), slope = (y->predicted_us - x->predicted_us) / (vb - va);
        swss += w * slope * slope;
        swsr += w * slope * (m - x->predicted_us);
        out->mean_slope += slope;
        n++;
        if (!strstr(out->config_list, x->config) && strlen(out->config_list) + strlen(x->config) + 2 < sizeof out->config_list) {
            if (out->config_list[0]) strcat(out->config_list, " ");
            strcat(out->config_list, x->config);
            out->configs++;
        }
    }
    if (n < 2) return dh_err("refit: %zu steps of fitted configurations (heldout = 0); need at least 2", n);
    if (!(swss > 0)) return dh_err("refit: the predicted step times do not change with the coefficient: it cannot be fitted on the replay");
    double c = va + swsr / swss;
    /* Predictions at c from the linearisation, then the statistics. */
    double *pred = malloc(n * sizeof *pred), *meas = malloc(n * sizeof *meas), *w = malloc(n * sizeof *w);
    if (!pred || !meas || !w) abort();
    size_t k = 0;
    out->meas_min_us = INFINITY;
    out->meas_max_us = -INFINITY;
    for (size_t i = 0; i < a->n; i++) {
        const val_step *x = &a->s[i], *y = &b->s[i];
        if (x->heldout || x->warmup) continue;
        double slope = (y->predicted_us - x->predicted_us) / (vb - va);
        pred[k] = x->predicted_us + (c - va) * slope;
        meas[k] = x->measured_us;
        w[k] = 1.0 / (meas[k] * meas[k]);
        out->mean_meas_us += meas[k];
        out->mean_pred_us += pred[k];
        if (meas[k] < out->meas_min_us) out->meas_min_us = meas[k];
        if (meas[k] > out->meas_max_us) out->meas_max_us = meas[k];
        k++;
    }
    fit_result fr;
    fit_stats(pred, meas, w, n, &fr);
    fit_error_distribution(pred, meas, n, &out->err);
    out->value = c;
    out->se = sqrt(fr.chisq / (double)(n - 1) / swss);
    out->steps = n;
    out->rms_rel = fr.rms_rel;
    out->r2 = fr.r2;
    out->mean_meas_us /= (double)n;
    out->mean_pred_us /= (double)n;
    out->mean_slope /= (double)n;
    free(pred);
    free(meas);
    free(w);
    return 0;
}

/* Section name of a "[name]" line, or 0. */
static int section_of(const char *line, char *sec, size_t cap)
{
    const char *p = line + strspn(line, " \t");
    if (*p != '[') return 0;
    size_t l = strcspn(p + 1, "]");
    if (p[1 + l] != ']' || l >= cap) return 0;
    memcpy(sec, p + 1, l);
    sec[l] = 0;
    return 1;
}

static int is_key(const char *line, const char *key)
{
    const char *p = line + strspn(line, " \t");
    size_t l = strlen(key);
    if (strncmp(p, key, l)) return 0;
    p += l;
    p += strspn(p, " \t");
    return *p == '=';
}

int refit_write(const char *in_path, const char *out_path, const char *section, const char *key,
                const char *value, const char *comment)
{
    FILE *in, *out;
    char *tmp;
    if (prof_out_open(in_path, out_path, &in, &out, &tmp) < 0) return -1;
    char *line = NULL, sec[128] = "";
    size_t cap = 0;
    int found = 0, rc = 0;
    /* Earlier refit comments directly above the key are held back and dropped
     * when the key comes; anything else between them is written. */
    char *held = NULL;
    size_t held_len = 0;
    FILE *hold = open_memstream(&held, &held_len);
    if (!hold) abort();
    while (getline(&line, &cap, in) > 0) {
        section_of(line, sec, sizeof sec);
        if (!strncmp(line, "; dhcal: refit:", 15)) { fputs(line, hold); continue; }
        fflush(hold);
        if (!strcmp(sec, section) && is_key(line, key)) {
            if (found++) { rc = dh_err("profile '%s': [%s] %s appears twice", in_path, section, key); break; }
            for (const char *c = comment; *c;) {
                size_t l = strcspn(c, "\n");
                fprintf(out, "; dhcal: refit: %.*s\n", (int)l, c);
                c += l + (c[l] == '\n');
            }
            fprintf(out, "%s = %s\n", key, value);
        } else {
            fwrite(held, 1, held_len, out);
            fputs(line, out);
        }
        rewind(hold);
        fflush(hold);
        held_len = 0;
    }
    fflush(hold);
    fwrite(held, 1, held_len, out);
    fclose(hold);
    free(held);
    free(line);
    fclose(in);
    if (rc == 0 && !found) rc = dh_err("profile '%s': has no [%s] %s to refit", in_path, section, key);
    return prof_out_finish(out, tmp, out_path, rc, "refitted profile fails its check: ");
}
