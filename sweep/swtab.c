/* swtab.c: merging the units' files into one table, CSV and HDF5; see swtab.h.
 *
 * Cost: O(rows x fields) to build, plus a linear column lookup that starts
 * at the column after the previous one, so rows whose fields come in the
 * same order (all of them) find each column at the first try. */
#include "sweep/swtab.h"
#include "common/dh_err.h"
#include "common/h5attr.h"
#include "common/h5det.h"
#include "common/version.h"
#include "common/mem.h"
#include "sim/out.h"
#include "sweep/jsn.h"

#include <dirent.h>
#include <errno.h>
#include <gsl/gsl_cdf.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(dh_malloc(n), s, n);
}

static int write_atomic_begin(const char *path, char *tmp, size_t cap, FILE **f)
{
    snprintf(tmp, cap, "%s.tmp%ld", path, (long)getpid());
    *f = fopen(tmp, "w");
    if (!*f) return dh_err("unable to write '%s': %s", tmp, strerror(errno));
    return 0;
}

static int write_atomic_end(const char *path, const char *tmp, FILE *f)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) { remove(tmp); return dh_err("write error on '%s'", tmp); }
    if (rename(tmp, path) < 0) { int e = errno; remove(tmp); return dh_err("unable to rename '%s' to '%s': %s", tmp, path, strerror(e)); }
    return 0;
}

int swtab_write_manifest(const char *dir, const char *digest, size_t units, size_t n_seeds, char *const *axes, size_t n_axes)
{
    char path[1200], tmp[1300];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    FILE *f;
    if (write_atomic_begin(path, tmp, sizeof tmp, &f) < 0) return -1;
    fprintf(f, "{\"dhsweep_sweep\": 1, \"sweep_digest\": \"%s\", \"units\": %zu, \"seeds\": %zu, \"axes\": [", digest, units, n_seeds);
    for (size_t i = 0; i < n_axes; i++) { if (i) fputs(", ", f); jsn_write_str(f, axes[i]); }
    fputs("]}\n", f);
    return write_atomic_end(path, tmp, f);
}

/* ---------------------------------------------------------------- building */

typedef struct {
    swtab *t;
    size_t cap_rows;
    size_t hint;
    size_t *is_metric;   /* [n_cols]: 1 for fields of the run object */
} builder;

static size_t col_index(builder *b, const char *name, int metric)
{
    swtab *t = b->t;
    for (size_t k = 0; k < t->n_cols; k++) {
        size_t i = (b->hint + k) % t->n_cols;
        if (!strcmp(t->cols[i].name, name)) { b->hint = i + 1; return i; }
    }
    t->cols = dh_reallocarray(t->cols, t->n_cols + 1, sizeof *t->cols);
    b->is_metric = dh_reallocarray(b->is_metric, t->n_cols + 1, sizeof *b->is_metric);
    swtab_col *c = &t->cols[t->n_cols];
    c->name = xstrdup(name);
    c->numeric = 0;
    c->cells = dh_calloc(b->cap_rows ? b->cap_rows : 1, sizeof *c->cells);
    b->is_metric[t->n_cols] = (size_t)metric;
    b->hint = t->n_cols + 1;
    return t->n_cols++;
}

static void put(builder *b, size_t row, const char *name, const char *val, int metric)
{
    size_t i = col_index(b, name, metric);
    free(b->t->cols[i].cells[row]);
    b->t->cols[i].cells[row] = val ? xstrdup(val) : NULL;
}

/* The run object's fields as columns: nested objects flattened with '_',
 * arrays as their length, booleans as 0 / 1. */
static void put_run(builder *b, size_t row, const char *prefix, const jsn *o)
{
    for (size_t i = 0; i < o->n; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, o->keys[i]);
        const jsn *v = o->items[i];
        if (!*prefix && !strcmp(o->keys[i], "policy")) continue; /* the policy column has it */
        switch (v->kind) {
        case JSN_OBJ: {
            char p2[256];
            snprintf(p2, sizeof p2, "%s_", name);
            put_run(b, row, p2, v);
            break;
        }
        case JSN_ARR: {
            char n2[300], num[32];
            snprintf(n2, sizeof n2, "%s_n", name);
            snprintf(num, sizeof num, "%zu", v->n);
            put(b, row, n2, num, 1);
            break;
        }
        case JSN_NUM: case JSN_STR: put(b, row, name, v->text, 1); break;
        case JSN_BOOL: put(b, row, name, v->boolean ? "1" : "0", 1); break;
        case JSN_NULL: put(b, row, name, NULL, 1); break;
        }
    }
}

static int is_number(const char *s)
{
    if (!s || !*s) return 0;
    char *e;
    double v = strtod(s, &e);
    return !*e && isfinite(v);
}

typedef struct {
    char *path;
    double unit;
    jsn *j;
} unit_file;

static int by_unit(const void *a, const void *b)
{
    double x = ((const unit_file *)a)->unit, y = ((const unit_file *)b)->unit;
    return x < y ? -1 : x > y;
}

int swtab_load(const char *dir, swtab *t)
{
    memset(t, 0, sizeof *t);
    char path[1200];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    char *text;
    if (jsn_read_file(path, &text, NULL) < 0) return dh_err_prefix("%s: not a sweep's output folder: ", dir);
    jsn *man;
    int rc = jsn_parse(text, path, &man);
    free(text);
    if (rc < 0) return -1;
    const char *digest = jsn_str(man, "sweep_digest");
    double units, seeds;
    const jsn *axes = jsn_get(man, "axes");
    if (!digest || jsn_num(man, "units", &units) < 0 || jsn_num(man, "seeds", &seeds) < 0 || !axes || axes->kind != JSN_ARR) {
        jsn_free(man);
        return dh_err("'%s': not a dhsweep manifest", path);
    }
    t->units = (size_t)units;
    for (size_t i = 0; i < axes->n; i++)
        if (axes->items[i]->kind == JSN_STR) {
            t->axes = dh_reallocarray(t->axes, t->n_axes + 1, sizeof *t->axes);
            t->axes[t->n_axes++] = xstrdup(axes->items[i]->text);
        }
    char want[17];
    snprintf(want, sizeof want, "%s", digest);
    snprintf(t->digest, sizeof t->digest, "%s", digest);
    jsn_free(man);

    snprintf(path, sizeof path, "%s/points", dir);
    DIR *dp = opendir(path);
    if (!dp) return dh_err("unable to read '%s': %s", path, strerror(errno));
    unit_file *files = NULL;
    size_t nf = 0;
    struct dirent *de;
    rc = 0;
    while (rc == 0 && (de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
        char fp[1500];
        snprintf(fp, sizeof fp, "%s/%s", path, de->d_name);
        if (jsn_read_file(fp, &text, NULL) < 0) { rc = -1; break; }
        jsn *j;
        rc = jsn_parse(text, fp, &j);
        free(text);
        if (rc < 0) break;
        const char *dg = jsn_str(j, "sweep_digest");
        double u;
        if (!dg || jsn_num(j, "unit", &u) < 0 || !jsn_get(j, "results")) { jsn_free(j); rc = dh_err("'%s': not a dhsweep point file", fp); break; }
        if (strcmp(dg, want)) { jsn_free(j); continue; } /* another sweep's file in the same folder */
        files = dh_reallocarray(files, nf + 1, sizeof *files);
        files[nf++] = (unit_file){ xstrdup(fp), u, j };
    }
    closedir(dp);
    if (rc == 0 && nf) qsort(files, nf, sizeof *files, by_unit);
    for (size_t i = 1; rc == 0 && i < nf; i++)
        if (files[i].unit == files[i - 1].unit) rc = dh_err("'%s' and '%s' hold the same unit", files[i - 1].path, files[i].path);
    builder b = { t, 0, 0, NULL };
    for (size_t i = 0; rc == 0 && i < nf; i++) b.cap_rows += jsn_get(files[i].j, "results")->n;
    for (size_t i = 0; rc == 0 && i < nf; i++) {
        const jsn *j = files[i].j, *res = jsn_get(j, "results"), *in = jsn_get(j, "inputs");
        const jsn *pt = jsn_get(j, "point"), *seed = jsn_get(j, "seed");
        const char *commit = jsn_str(j, "commit");
        if (!pt || pt->kind != JSN_NUM || !seed || seed->kind != JSN_STR || !in || in->kind != JSN_OBJ || res->kind != JSN_ARR) {
            rc = dh_err("'%s': not a dhsweep point file", files[i].path);
            break;
        }
        t->units_found++;
        for (size_t p = 0; p < res->n; p++) {
            const jsn *r = res->items[p];
            size_t row = t->n_rows++;
            const char *st = jsn_str(r, "status");
            put(&b, row, "point", pt->text, 0);
            put(&b, row, "seed", seed->text, 0);
            put(&b, row, "policy", jsn_str(r, "policy"), 0);
            put(&b, row, "status", st, 0);
            put(&b, row, "error", jsn_str(r, "error"), 0);
            for (size_t k = 0; k < in->n; k++)
                put(&b, row, in->keys[k], in->items[k]->kind == JSN_STR ? in->items[k]->text : NULL, 0);
            put(&b, row, "commit", commit, 0);
            put(&b, row, "sweep_digest", want, 0);
            put(&b, row, "config_digest", jsn_str(r, "config_digest"), 0);
            if (seeds >= 2) put(&b, row, "ci_n", NULL, 0);
            const jsn *run = jsn_get(r, "run");
            if (st && !strcmp(st, "ok") && run && run->kind == JSN_OBJ) put_run(&b, row, "", run);
            else t->rows_failed++;
        }
    }
    for (size_t i = 0; i < nf; i++) { free(files[i].path); jsn_free(files[i].j); }
    free(files);
    if (rc < 0) { free(b.is_metric); swtab_release(t); return -1; }
    /* A column is numeric when every value parses as a number, except the table's own text
     * columns: a commit or a digest is hex, and one such as "765e114" parses as a number. */
    static const char *const text_cols[] = { "policy", "status", "error", "config", "commit", "sweep_digest",
                                             "config_digest" };
    for (size_t c = 0; c < t->n_cols; c++) {
        int any = 0, num = 1;
        for (size_t k = 0; k < sizeof text_cols / sizeof text_cols[0]; k++)
            if (!strcmp(t->cols[c].name, text_cols[k])) num = 0;
        for (size_t r = 0; r < t->n_rows && num; r++) {
            const char *s = t->cols[c].cells[r];
            if (!s) continue;
            any = 1;
            num = is_number(s);
        }
        t->cols[c].numeric = any && num;
    }
    if (seeds < 2) { free(b.is_metric); return 0; }

    /* Intervals over seeds: rows of one point are contiguous (units are
     * point-major), so each (point, policy) is found among the rows of the
     * current point only. */
    size_t nc0 = t->n_cols;
    size_t *grp = dh_calloc(t->n_rows ? t->n_rows : 1, sizeof *grp);
    size_t *first = dh_calloc(t->n_rows ? t->n_rows : 1, sizeof *first); /* a group's first row */
    size_t ng = 0, seg = 0;
    /* Indices, not pointers: the columns array grows below. */
    size_t ip = (size_t)(swtab_col_find(t, "point") - t->cols), ipol = (size_t)(swtab_col_find(t, "policy") - t->cols),
           ist = (size_t)(swtab_col_find(t, "status") - t->cols);
#define cp (&t->cols[ip])
#define cpol (&t->cols[ipol])
#define cst (&t->cols[ist])
    for (size_t r = 0; r < t->n_rows; r++) {
        if (r > 0 && strcmp(cp->cells[r], cp->cells[r - 1])) seg = ng;
        size_t g;
        for (g = seg; g < ng; g++)
            if (!strcmp(cpol->cells[first[g]], cpol->cells[r])) break;
        if (g == ng) first[ng++] = r;
        grp[r] = g;
    }
    double *sum = dh_calloc(ng ? ng : 1, sizeof *sum), *sq = dh_calloc(ng ? ng : 1, sizeof *sq);
    size_t *cnt = dh_calloc(ng ? ng : 1, sizeof *cnt);
    for (size_t r = 0; r < t->n_rows; r++)
        if (cst->cells[r] && !strcmp(cst->cells[r], "ok")) cnt[grp[r]]++;
    size_t ci_n = (size_t)(swtab_col_find(t, "ci_n") - t->cols);
    for (size_t r = 0; r < t->n_rows; r++) {
        char num[32];
        snprintf(num, sizeof num, "%zu", cnt[grp[r]]);
        t->cols[ci_n].cells[r] = xstrdup(num);
    }
    t->cols[ci_n].numeric = 1;
    /* The new columns go after their metric: build the final order at the end. */
    size_t *order = dh_calloc(3 * nc0 + 1, sizeof *order), no = 0;
    for (size_t c = 0; c < nc0; c++) {
        order[no++] = c;
        if (!b.is_metric[c] || !t->cols[c].numeric) continue;
        memset(sum, 0, ng * sizeof *sum);
        memset(sq, 0, ng * sizeof *sq);
        size_t *m = dh_calloc(ng ? ng : 1, sizeof *m);
        for (size_t r = 0; r < t->n_rows; r++) {
            const char *s = t->cols[c].cells[r];
            if (!s || !cst->cells[r] || strcmp(cst->cells[r], "ok")) continue;
            sum[grp[r]] += strtod(s, NULL);
            m[grp[r]]++;
        }
        for (size_t r = 0; r < t->n_rows; r++) {
            const char *s = t->cols[c].cells[r];
            if (!s || !cst->cells[r] || strcmp(cst->cells[r], "ok")) continue;
            double d = strtod(s, NULL) - sum[grp[r]] / (double)m[grp[r]];
            sq[grp[r]] += d * d;
        }
        char name[300];
        snprintf(name, sizeof name, "%s_mean", t->cols[c].name);
        size_t cm = col_index(&b, name, 0);
        snprintf(name, sizeof name, "%s_ci95", t->cols[c].name);
        size_t cc = col_index(&b, name, 0);
        for (size_t r = 0; r < t->n_rows; r++) {
            size_t g = grp[r], n = m[g];
            char v[40];
            if (n >= 1) { snprintf(v, sizeof v, "%.12g", sum[g] / (double)n); t->cols[cm].cells[r] = xstrdup(v); }
            if (n >= 2) {
                double sd = sqrt(sq[g] / (double)(n - 1));
                double half = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1)) * sd / sqrt((double)n);
                snprintf(v, sizeof v, "%.12g", half);
                t->cols[cc].cells[r] = xstrdup(v);
            }
        }
        t->cols[cm].numeric = 1;
        t->cols[cc].numeric = 1;
        order[no++] = cm;
        order[no++] = cc;
        free(m);
    }
    swtab_col *sorted = dh_calloc(t->n_cols, sizeof *sorted);
    for (size_t i = 0; i < no; i++) sorted[i] = t->cols[order[i]];
    free(t->cols);
    t->cols = sorted;
    free(order);
#undef cp
#undef cpol
#undef cst
    free(sum); free(sq); free(cnt); free(grp); free(first);
    free(b.is_metric);
    return 0;
}

void swtab_release(swtab *t)
{
    for (size_t c = 0; c < t->n_cols; c++) {
        for (size_t r = 0; r < t->n_rows; r++) free(t->cols[c].cells[r]);
        free(t->cols[c].cells);
        free(t->cols[c].name);
    }
    free(t->cols);
    for (size_t i = 0; i < t->n_axes; i++) free(t->axes[i]);
    free(t->axes);
    memset(t, 0, sizeof *t);
}

const swtab_col *swtab_col_find(const swtab *t, const char *name)
{
    for (size_t c = 0; c < t->n_cols; c++)
        if (!strcmp(t->cols[c].name, name)) return &t->cols[c];
    return NULL;
}

static void csv_cell(FILE *f, const char *s)
{
    if (!s) return;
    if (!strpbrk(s, ",\"\n\r")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) { if (*s == '"') fputc('"', f); fputc(*s, f); }
    fputc('"', f);
}

int swtab_write_csv(const swtab *t, const char *path)
{
    char tmp[1300];
    FILE *f;
    if (write_atomic_begin(path, tmp, sizeof tmp, &f) < 0) return -1;
    for (size_t c = 0; c < t->n_cols; c++) { if (c) fputc(',', f); csv_cell(f, t->cols[c].name); }
    fputc('\n', f);
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) { if (c) fputc(',', f); csv_cell(f, t->cols[c].cells[r]); }
        fputc('\n', f);
    }
    return write_atomic_end(path, tmp, f);
}

/* A column's unit: the table's own columns are names, indices and counts; the
 * inputs' and the figures' units are the config schemas' and the JSON's. */
static const char *swtab_unit(const char *name)
{
    static const char *const own[] = { "point", "seed", "policy", "status", "error", "config", "commit", "sweep_digest",
                                       "config_digest", "ci_n" };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(name, own[i])) return "";
    const char *u = out_unit_of(name);
    return u ? u : "unknown";
}

int swtab_write_h5(const swtab *t, const char *path)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* The record layout: doubles and fixed-length strings, packed in column order. */
    size_t *off = dh_calloc(t->n_cols + 1, sizeof *off), *width = dh_calloc(t->n_cols + 1, sizeof *width);
    for (size_t c = 0; c < t->n_cols; c++) {
        if (t->cols[c].numeric) width[c] = sizeof(double);
        else {
            width[c] = 1;
            for (size_t r = 0; r < t->n_rows; r++)
                if (t->cols[c].cells[r] && strlen(t->cols[c].cells[r]) > width[c]) width[c] = strlen(t->cols[c].cells[r]);
        }
        off[c + 1] = off[c] + width[c];
    }
    size_t rec = off[t->n_cols] ? off[t->n_cols] : 1;
    unsigned char *buf = dh_calloc(t->n_rows ? t->n_rows : 1, rec);
    for (size_t r = 0; r < t->n_rows; r++)
        for (size_t c = 0; c < t->n_cols; c++) {
            unsigned char *p = buf + r * rec + off[c];
            const char *s = t->cols[c].cells[r];
            if (t->cols[c].numeric) { double v = s ? strtod(s, NULL) : NAN; memcpy(p, &v, sizeof v); }
            else if (s) memcpy(p, s, strlen(s));
        }
    int rc = -1;
    hid_t mem = H5Tcreate(H5T_COMPOUND, rec), fcpl = h5_untimed_fcpl(), dcpl = h5_untimed(H5P_DATASET_CREATE);
    hid_t file = -1, sp = -1, ds = -1;
    hid_t *st = dh_calloc(t->n_cols + 1, sizeof *st);
    for (size_t c = 0; c < t->n_cols; c++) {
        st[c] = -1;
        int bad;
        if (t->cols[c].numeric) bad = H5Tinsert(mem, t->cols[c].name, off[c], H5T_NATIVE_DOUBLE) < 0;
        else {
            st[c] = H5Tcopy(H5T_C_S1);
            bad = st[c] < 0 || H5Tset_size(st[c], width[c]) < 0 || H5Tset_strpad(st[c], H5T_STR_NULLPAD) < 0 ||
                  H5Tinsert(mem, t->cols[c].name, off[c], st[c]) < 0;
        }
        if (bad) { dh_err("'%s': unable to add column '%s' to the HDF5 record type", tmp, t->cols[c].name); goto done; }
    }
    hsize_t dims[1] = { t->n_rows };
    file = fcpl < 0 || dcpl < 0 ? -1 : H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    if (file < 0) { dh_err("unable to create HDF5 file '%s'", tmp); goto done; }
    sp = H5Screate_simple(1, dims, NULL);
    ds = sp < 0 ? -1 : H5Dcreate2(file, "results", mem, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0 || (t->n_rows && H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
        dh_err("'%s': unable to write dataset /results", tmp);
        goto done;
    }
    /* What the columns measure and what wrote the table (common/h5attr.h). */
    const char **units = dh_calloc(t->n_cols + 1, sizeof *units);
    for (size_t c = 0; c < t->n_cols; c++) units[c] = swtab_unit(t->cols[c].name);
    int bad = h5_attr_strs(ds, "units", units, t->n_cols) < 0 || h5_attr_str(file, "tool", "dhsweep") < 0 ||
              h5_attr_str(file, "commit", dh_commit()) < 0 || h5_attr_str(file, "sweep_digest", t->digest) < 0;
    free(units);
    if (bad) { dh_err_prefix("'%s': ", tmp); goto done; }
    rc = 0;
done:
    if (ds >= 0 && H5Dclose(ds) < 0 && rc == 0) rc = dh_err("'%s': HDF5 close failed", tmp);
    if (sp >= 0) H5Sclose(sp);
    if (file >= 0 && H5Fclose(file) < 0 && rc == 0) rc = dh_err("'%s': HDF5 close failed", tmp);
    if (rc == 0 && rename(tmp, path) != 0) rc = dh_err("unable to rename '%s' to '%s'", tmp, path);
    if (rc < 0) unlink(tmp);
    for (size_t c = 0; c < t->n_cols; c++) if (st[c] >= 0) H5Tclose(st[c]);
    free(st);
    if (mem >= 0) H5Tclose(mem);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    free(buf); free(off); free(width);
    return rc;
}

int swtab_merge(const char *dir, swtab *t)
{
    if (swtab_load(dir, t) < 0) return -1;
    char path[1200];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    if (swtab_write_csv(t, path) < 0) { swtab_release(t); return -1; }
    snprintf(path, sizeof path, "%s/results.h5", dir);
    if (swtab_write_h5(t, path) < 0) { swtab_release(t); return -1; }
    return 0;
}
