/* cfgkey.c: typed reads of a config through its schema table, and the table as
 * Markdown; see cfgkey.h. Tables are tens of rows and read once at start-up:
 * lookups are linear scans. */
#include "common/cfgkey.h"
#include "common/dh_err.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Does the runtime section name sec match the table's pattern pat? Segments are
 * separated by '.'; a pattern segment of upper-case letters (and digits or '_')
 * matches any one non-empty segment. */
static int upper_segment(const char *p, size_t n)
{
    if (!n || !isupper((unsigned char)p[0])) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isupper((unsigned char)p[i]) && !isdigit((unsigned char)p[i]) && p[i] != '_') return 0;
    return 1;
}

static int section_match(const char *pat, const char *sec)
{
    for (;;) {
        size_t np = strcspn(pat, "."), ns = strcspn(sec, ".");
        if (upper_segment(pat, np) ? ns == 0 : (np != ns || strncmp(pat, sec, np) != 0)) return 0;
        pat += np;
        sec += ns;
        if (!*pat || !*sec) return !*pat && !*sec;
        pat++;
        sec++;
    }
}

/* A row's key in upper case (KERNEL_INPUT, SECTION.KEY) stands for any key of its section:
 * the keys there are names the file chooses. Exact rows are found first. */
static int key_placeholder(const char *k)
{
    if (!isupper((unsigned char)*k)) return 0;
    for (; *k; k++)
        if (!isupper((unsigned char)*k) && !isdigit((unsigned char)*k) && *k != '_' && *k != '.') return 0;
    return 1;
}

const cfg_key *cfgk_find(const cfg_schema *s, const char *section, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->k[i].key, key) && section_match(s->k[i].section, section)) return &s->k[i];
    for (size_t i = 0; i < s->n; i++)
        if (key_placeholder(s->k[i].key) && section_match(s->k[i].section, section)) return &s->k[i];
    return NULL;
}

int cfgk_has_section(const cfg_schema *s, const char *section)
{
    for (size_t i = 0; i < s->n; i++)
        if (section_match(s->k[i].section, section)) return 1;
    return 0;
}

/* The row a loader reads: one the table lacks, or of another type, is the loader's bug. */
static const cfg_key *row(const cfg_schema *s, const char *sec, const char *key, ck_type t)
{
    const cfg_key *k = cfgk_find(s, sec, key);
    if (!k) {
        fprintf(stderr, "cfgkey: [%s] %s is not in the schema of %s\n", sec, key, s->files);
        DH_BUG_ON(!k);
    }
    DH_BUG_ON(k->type != t);
    return k;
}

/* The row's own default, for the plain getters: a CK_DYNAMIC row has none. */
static const char *row_default(const cfg_key *k)
{
    DH_BUG_ON(k->flags & CK_DYNAMIC);
    return k->def;
}

static double parse_def(const cfg_key *k, const char *d)
{
    char *end;
    double x = strtod(d, &end);
    DH_BUG_ON(end == d || *end);
    return x;
}

int cfgk_double_in(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out, const double *def,
                   double min, double max)
{
    row(s, sec, key, CK_NUM);
    return cfg_get_double(c, sec, key, out, def, min, max);
}

int cfgk_int_in(cfg *c, const cfg_schema *s, const char *sec, const char *key, long *out, const long *def, long min,
                long max)
{
    row(s, sec, key, CK_INT);
    return cfg_get_int(c, sec, key, out, def, min, max);
}

int cfgk_double_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out, const double *def)
{
    const cfg_key *k = row(s, sec, key, CK_NUM);
    return cfg_get_double(c, sec, key, out, def, k->min, k->max);
}

int cfgk_double(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out)
{
    const cfg_key *k = row(s, sec, key, CK_NUM);
    const char *d = row_default(k);
    double v = d ? parse_def(k, d) : 0;
    return cfg_get_double(c, sec, key, out, d ? &v : CFG_REQUIRED, k->min, k->max);
}

int cfgk_int_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, long *out, const long *def)
{
    const cfg_key *k = row(s, sec, key, CK_INT);
    return cfg_get_int(c, sec, key, out, def, (long)k->min, (long)k->max);
}

int cfgk_int(cfg *c, const cfg_schema *s, const char *sec, const char *key, long *out)
{
    const cfg_key *k = row(s, sec, key, CK_INT);
    const char *d = row_default(k);
    long v = d ? (long)parse_def(k, d) : 0;
    return cfg_get_int(c, sec, key, out, d ? &v : NULL, (long)k->min, (long)k->max);
}

int cfgk_bool_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *out, const int *def)
{
    row(s, sec, key, CK_BOOL);
    return cfg_get_bool(c, sec, key, out, def);
}

int cfgk_bool(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *out)
{
    const cfg_key *k = row(s, sec, key, CK_BOOL);
    const char *d = row_default(k);
    int v = d && (!strcmp(d, "true") || !strcmp(d, "yes") || !strcmp(d, "1"));
    DH_BUG_ON(d && !v && strcmp(d, "false") != 0 && strcmp(d, "no") != 0 && strcmp(d, "0") != 0);
    return cfg_get_bool(c, sec, key, out, d ? &v : NULL);
}

int cfgk_string_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, const char **out, const char *def)
{
    row(s, sec, key, CK_STR);
    return cfg_get_string(c, sec, key, out, def);
}

int cfgk_string(cfg *c, const cfg_schema *s, const char *sec, const char *key, const char **out)
{
    const cfg_key *k = row(s, sec, key, CK_STR);
    return cfg_get_string(c, sec, key, out, row_default(k));
}

/* The index of v among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *v)
{
    size_t lv = strlen(v);
    int i = 0;
    for (const char *p = choices;; i++) {
        size_t n = strcspn(p, "|");
        if (n == lv && !strncmp(p, v, n)) return i;
        if (!p[n]) return -1;
        p += n + 1;
    }
}

static int choice_of(cfg *c, const cfg_key *k, const char *sec, const char *v, int *idx)
{
    DH_BUG_ON(!k->choices);
    *idx = choice_index(k->choices, v);
    if (*idx >= 0) return 0;
    char list[256];
    size_t o = 0;
    for (const char *p = k->choices; *p && o + 8 < sizeof list; p++) {
        if (*p != '|') { list[o++] = *p; continue; }
        list[o++] = ',';
        list[o++] = ' ';
    }
    list[o] = 0;
    return dh_err("%s: [%s] %s = '%s' (expected one of: %s)", cfg_name(c), sec, k->key, v, list);
}

int cfgk_choice_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *idx, const char *def)
{
    const cfg_key *k = row(s, sec, key, CK_STR);
    const char *v;
    int rc = cfg_get_string(c, sec, key, &v, def);
    if (rc < 0) return -1;
    if (choice_of(c, k, sec, v, idx) < 0) return -1;
    return rc;
}

int cfgk_choice(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *idx)
{
    const cfg_key *k = row(s, sec, key, CK_STR);
    return cfgk_choice_or(c, s, sec, key, idx, row_default(k));
}

int cfgk_doubles(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out, size_t cap, size_t *n)
{
    const cfg_key *k = row(s, sec, key, CK_LIST);
    return cfg_get_doubles(c, sec, key, out, cap, n, k->min, k->max);
}

int cfgk_schema_check(const cfg_schema *s)
{
    for (size_t i = 0; i < s->n; i++) {
        const cfg_key *k = &s->k[i];
        for (size_t j = 0; j < i; j++)
            if (!strcmp(s->k[j].section, k->section) && !strcmp(s->k[j].key, k->key))
                return dh_err("schema of %s: [%s] %s has two rows", s->files, k->section, k->key);
        if (!k->doc || !*k->doc) return dh_err("schema of %s: [%s] %s has no meaning", s->files, k->section, k->key);
        if ((k->type == CK_NUM || k->type == CK_INT || k->type == CK_LIST) && !(k->min <= k->max))
            return dh_err("schema of %s: [%s] %s: range %g .. %g is empty", s->files, k->section, k->key, k->min, k->max);
        if (!k->def || (k->flags & CK_DYNAMIC) || k->def[0] == '(') continue;
        const char *d = k->def;
        char *end;
        double x;
        switch (k->type) {
        case CK_NUM:
        case CK_INT:
            x = strtod(d, &end);
            if (end == d || *end || x < k->min || x > k->max || (k->type == CK_INT && x != floor(x)))
                return dh_err("schema of %s: [%s] %s: default '%s' is not within %g .. %g", s->files, k->section, k->key, d,
                              k->min, k->max);
            break;
        case CK_BOOL:
            if (strcmp(d, "true") && strcmp(d, "false"))
                return dh_err("schema of %s: [%s] %s: default '%s' is not true or false", s->files, k->section, k->key, d);
            break;
        case CK_STR:
            if (k->choices && choice_index(k->choices, d) < 0)
                return dh_err("schema of %s: [%s] %s: default '%s' is not one of %s", s->files, k->section, k->key, d,
                              k->choices);
            break;
        case CK_LIST:
            return dh_err("schema of %s: [%s] %s: a list has no default", s->files, k->section, k->key);
        }
    }
    return 0;
}

/* ---- Markdown ---- */

/* Table cells: '|' and '*' escaped, newlines as spaces. */
static void cell(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|' || *s == '*') { fputc('\\', f); fputc(*s, f); }
        else if (*s == '\n') fputc(' ', f);
        else fputc(*s, f);
    }
}

static void num(FILE *f, double x, int integer)
{
    if (x == floor(x) && fabs(x) < 1e7) fprintf(f, "%.0f", x);
    else if (integer && x >= 9.2e18) fputs("2^63-1", f);
    else fprintf(f, "%g", x);
}

static const char *type_name(ck_type t)
{
    switch (t) {
    case CK_NUM: return "number";
    case CK_INT: return "integer";
    case CK_BOOL: return "boolean";
    case CK_STR: return "text";
    case CK_LIST: return "list";
    }
    return "?";
}

static void range_cell(FILE *f, const cfg_key *k)
{
    if (k->range_doc) { cell(f, k->range_doc); return; }
    switch (k->type) {
    case CK_NUM: case CK_INT: case CK_LIST:
        if (k->type == CK_LIST) fputs("each ", f);
        num(f, k->min, k->type == CK_INT);
        fputs(" .. ", f);
        num(f, k->max, k->type == CK_INT);
        break;
    case CK_BOOL: fputs("true, false", f); break;
    case CK_STR:
        if (!k->choices) { fputs("any", f); break; }
        for (const char *p = k->choices; *p;) {
            size_t n = strcspn(p, "|");
            fprintf(f, "`%.*s`", (int)n, p);
            p += n;
            if (*p) { fputs(", ", f); p++; }
        }
        break;
    }
}

void cfgk_markdown(FILE *f, const cfg_schema *const *all, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const cfg_schema *s = all[i];
        fprintf(f, "## %s (`%s`)\n\n%s\n\n", s->title, s->files, s->doc);
        fputs("| section | key | type | unit | range | default | meaning |\n", f);
        fputs("|---|---|---|---|---|---|---|\n", f);
        for (size_t j = 0; j < s->n; j++) {
            const cfg_key *k = &s->k[j];
            fprintf(f, "| `[%s]` | `%s` | %s | ", k->section, k->key, type_name(k->type));
            cell(f, k->unit && *k->unit ? k->unit : "-");
            fputs(" | ", f);
            range_cell(f, k);
            fputs(" | ", f);
            if (!k->def) fputs("required", f);
            else if (!*k->def) fputs("(empty)", f);
            else if ((k->flags & CK_DYNAMIC) || k->def[0] == '(') cell(f, k->def);
            else { fputc('`', f); cell(f, k->def); fputc('`', f); }
            fputs(" | ", f);
            if (k->flags & CK_DATASHEET) fputs("*datasheet.* ", f);
            if (k->flags & CK_FITTED) fputs("*fitted.* ", f);
            cell(f, k->doc);
            fputs(" |\n", f);
        }
        fputc('\n', f);
    }
}
