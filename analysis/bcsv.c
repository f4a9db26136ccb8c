/* bcsv.c: the dhbench result CSV reader; see bcsv.h.
 *
 * Cells are split on commas; a cell may be double-quoted (a device name with a
 * comma), with "" for a literal quote.  Parsing is O(bytes) per file. */
#include "analysis/bcsv.h"
#include "common/dh_err.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The canonical column order of the schema, as dhbench writes it. */
static const char *const schema[] = {
    "suite", "kernel", "version", "device", "dtype", "row_bytes", "rows", "sms",
    "pool_bytes", "pattern", "batch", "queries", "k", "union_rows", "ctx", "heads", "m",
    "n", "kdim", "bytes", "flops", "reps", "median_us", "p10_us", "p90_us", "gbps",
    "tflops", "ceiling_name", "ceiling_value", "pct_of_ceiling", "checked", "timing", "arch"};
#define NCOL (sizeof schema / sizeof schema[0])
/* Every column but the last two is required; "timing" came after the first recorded results,
 * and a file without it timed every launch on its own; "arch" (the GPU's "sm_XY") after the
 * builds for every architecture, and a file without it reads as "" (the device column still
 * names the GPU: the earlier files are all the H200's, sm_90). */
#define NREQ (NCOL - 2)
#define TIMING_DEFAULT "isolated"

static const char *const str_names[BCSV_NSTR] = {
    "suite", "kernel", "version", "device", "dtype", "pattern", "ceiling_name", "checked", "timing", "arch"};
static const char *const num_names[BCSV_NNUM] = {
    "row_bytes", "rows", "sms", "pool_bytes", "batch", "queries", "k", "union_rows", "ctx",
    "heads", "m", "n", "kdim", "bytes", "flops", "reps", "median_us", "p10_us", "p90_us",
    "gbps", "tflops", "ceiling_value", "pct_of_ceiling"};

const char *bcsv_str_name(int col) { return str_names[col]; }
const char *bcsv_num_name(int col) { return num_names[col]; }

const char *bcsv_header(void)
{
    static char buf[512];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < NREQ; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? "," : "", schema[i]);
    }
    return buf;
}

void bcsv_init(bcsv_table *t) { memset(t, 0, sizeof *t); }

void bcsv_release(bcsv_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        for (int c = 0; c < BCSV_NSTR; c++) free(t->rows[i].s[c]);
    for (size_t i = 0; i < t->nfiles; i++) free(t->files[i]);
    free(t->rows);
    free(t->files);
    bcsv_init(t);
}

int bcsv_row_checked(const bcsv_row *r)
{
    const char *c = r->s[BCSV_CHECKED];
    return c && (!strcmp(c, "1") || !strcasecmp(c, "yes") || !strcasecmp(c, "ok") ||
                 !strcasecmp(c, "pass") || !strcasecmp(c, "true"));
}

/* Split one line into at most cap cells (in place).  Returns the cell count,
 * or -1 for an unterminated quote. */
static int split_cells(char *line, char **cells, int cap)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == cap) return cap + 1;
        if (*p == '"') {
            char *w = ++p, *start = p;
            for (;;) {
                if (!*p) return -1;
                if (*p == '"' && p[1] == '"') { *w++ = '"'; p += 2; continue; }
                if (*p == '"') { p++; break; }
                *w++ = *p++;
            }
            *w = 0;
            cells[n++] = start;
            if (*p == ',') { p++; continue; }
            if (*p) return -1;
            return n;
        }
        cells[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma) return n;
        *comma = 0;
        p = comma + 1;
    }
}

static void chomp(char *s)
{
    size_t l = strlen(s);
    while (l && (s[l - 1] == '\n' || s[l - 1] == '\r')) s[--l] = 0;
}

static int is_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t') return 0;
    return 1;
}

static int load_file(bcsv_table *t, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("file '%s': cannot open: %s", path, strerror(errno));
    t->files = realloc(t->files, (t->nfiles + 1) * sizeof *t->files);
    if (!t->files) abort();
    int file = (int)t->nfiles;
    t->files[t->nfiles++] = strdup(path);

    int map[NCOL];       /* file column -> schema index */
    int have_header = 0, ncols = 0, rc = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        chomp(line);
        if (line[0] == '#' || is_blank(line)) continue;
        char *cells[2 * NCOL + 1];
        int nc = split_cells(line, cells, 2 * (int)NCOL);
        if (nc < 0) { rc = dh_err("file '%s' line %ld: unterminated quote", path, lineno); break; }
        if (!have_header) {
            int seen[NCOL] = {0};
            for (int i = 0; i < nc; i++) {
                size_t j = 0;
                while (j < NCOL && strcmp(cells[i], schema[j])) j++;
                if (j == NCOL) { rc = dh_err("file '%s' line %ld: unknown column '%s'", path, lineno, cells[i]); goto out; }
                if (seen[j]++ || i >= (int)NCOL) { rc = dh_err("file '%s' line %ld: column '%s' appears twice", path, lineno, cells[i]); goto out; }
                map[i] = (int)j;
            }
            for (size_t j = 0; j < NCOL; j++)
                if (!seen[j] && j < NREQ) { rc = dh_err("file '%s' line %ld: header lacks column '%s'", path, lineno, schema[j]); goto out; }
            ncols = nc;
            have_header = 1;
            continue;
        }
        if (nc != ncols) {
            rc = dh_err("file '%s' line %ld: %s%d columns, the header has %d", path, lineno, nc > 2 * (int)NCOL ? "more than " : "", nc > 2 * (int)NCOL ? 2 * (int)NCOL : nc, ncols);
            break;
        }
        bcsv_row r;
        memset(&r, 0, sizeof r);
        r.file = file;
        r.line = lineno;
        for (int c = 0; c < BCSV_NNUM; c++) r.v[c] = NAN;
        for (int i = 0; i < nc && rc == 0; i++) {
            const char *name = schema[map[i]];
            int sc = -1, nu = -1;
            for (int c = 0; c < BCSV_NSTR; c++) if (!strcmp(name, str_names[c])) sc = c;
            for (int c = 0; c < BCSV_NNUM; c++) if (!strcmp(name, num_names[c])) nu = c;
            if (sc >= 0) { r.s[sc] = strdup(cells[i]); continue; }
            if (is_blank(cells[i])) continue; /* not applicable */
            char *end;
            errno = 0;
            double x = strtod(cells[i], &end);
            while (*end == ' ' || *end == '\t') end++;
            if (end == cells[i] || *end || errno == ERANGE || !isfinite(x))
                rc = dh_err("file '%s' line %ld: column '%s' is not a number: '%s'", path, lineno, name, cells[i]);
            else
                r.v[nu] = x;
        }
        if (!r.s[BCSV_TIMING]) r.s[BCSV_TIMING] = strdup(TIMING_DEFAULT);
        if (!r.s[BCSV_ARCH]) r.s[BCSV_ARCH] = strdup("");
        if (rc == 0 && (!r.s[BCSV_KERNEL] || !r.s[BCSV_KERNEL][0]))
            rc = dh_err("file '%s' line %ld: column 'kernel' is empty", path, lineno);
        if (rc) {
            for (int c = 0; c < BCSV_NSTR; c++) free(r.s[c]);
            break;
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 256;
            t->rows = realloc(t->rows, t->cap * sizeof *t->rows);
            if (!t->rows) abort();
        }
        t->rows[t->n++] = r;
    }
    if (rc == 0 && ferror(f)) rc = dh_err("file '%s': read error", path);
    if (rc == 0 && !have_header) rc = dh_err("file '%s': no header line", path);
out:
    free(line);
    fclose(f);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int bcsv_load(bcsv_table *t, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) return dh_err("file '%s': %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return load_file(t, path);
    DIR *d = opendir(path);
    if (!d) return dh_err("directory '%s': %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".csv")) continue;
        names = realloc(names, (n + 1) * sizeof *names);
        if (!names) abort();
        size_t pl = strlen(path) + l + 2;
        names[n] = malloc(pl);
        if (!names[n]) abort();
        snprintf(names[n++], pl, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = n ? 0 : dh_err("directory '%s': no .csv files", path);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) rc = load_file(t, names[i]);
        free(names[i]);
    }
    free(names);
    return rc;
}
