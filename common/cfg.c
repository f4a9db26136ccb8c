/* cfg.c: INI entries in file order with typed, range-checked getters; see cfg.h.
 *
 * Configs are small (tens to a few hundred keys) and read once at start-up, so
 * lookups are linear scans: O(entries) each, which keeps the code obvious. */
#include "common/cfg.h"
#include "common/mem.h"
#include "common/dh_err.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char *section, *key, *value;
    int used;
} cfg_entry;

struct cfg {
    char *name;
    cfg_entry *e;
    size_t n, cap;
    char **sections;
    size_t nsec, capsec;
    int parse_error; /* set by the handler when an entry could not be stored */
    /* Keys a getter read while the file did not give them, with the default it
     * took, in the order they were read (cfg_default_at): the records of a run
     * list them beside the entries. */
    cfg_entry *d;
    size_t nd, capd;
};

static char *xstrdup(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    return memcpy(dh_malloc(n), s, n);
}

static cfg_entry *find(const cfg *c, const char *sec, const char *key)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].section, sec) && !strcmp(c->e[i].key, key))
            return &c->e[i];
    return NULL;
}

static void add_section(cfg *c, const char *sec)
{
    for (size_t i = 0; i < c->nsec; i++)
        if (!strcmp(c->sections[i], sec)) return;
    if (c->nsec == c->capsec) {
        c->capsec = c->capsec ? 2 * c->capsec : 16;
        c->sections = realloc(c->sections, c->capsec * sizeof *c->sections);
        if (!c->sections) abort();
    }
    c->sections[c->nsec++] = xstrdup(sec);
}

int cfg_set(cfg *c, const char *section, const char *key, const char *value)
{
    cfg_entry *e = find(c, section, key);
    if (e) {
        free(e->value);
        e->value = xstrdup(value);
        return 0;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->e = realloc(c->e, c->cap * sizeof *c->e);
        if (!c->e) abort();
    }
    add_section(c, section);
    c->e[c->n++] = (cfg_entry){xstrdup(section), xstrdup(key), xstrdup(value), 0};
    return 0;
}

static void note_default(cfg *c, const char *sec, const char *key, const char *value)
{
    for (size_t i = 0; i < c->nd; i++)
        if (!strcmp(c->d[i].section, sec) && !strcmp(c->d[i].key, key)) return;
    if (c->nd == c->capd) {
        c->capd = c->capd ? 2 * c->capd : 32;
        c->d = realloc(c->d, c->capd * sizeof *c->d);
        if (!c->d) abort();
    }
    c->d[c->nd++] = (cfg_entry){xstrdup(sec), xstrdup(key), xstrdup(value), 1};
}

/* The shortest text that reads back as x (%.15g, else %.17g). */
static void note_default_num(cfg *c, const char *sec, const char *key, double x)
{
    char b[40];
    snprintf(b, sizeof b, "%.15g", x);
    if (strtod(b, NULL) != x) snprintf(b, sizeof b, "%.17g", x);
    note_default(c, sec, key, b);
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    cfg *c = user;
    if (!name) { /* inih reports a bare section header with name == NULL when built so */
        add_section(c, section);
        return 1;
    }
    if (find(c, section, name)) {
        dh_err("%s: key '%s' given twice in [%s]", c->name, name, section);
        c->parse_error = 1;
        return 0;
    }
    cfg_set(c, section, name, value);
    return 1;
}

static cfg *cfg_new(const char *name)
{
    cfg *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->name = xstrdup(name);
    return c;
}

/* Debian's libinih is built with a fixed line buffer of INI_MAX_LINE (200)
 * bytes on the stack; its run-time ini_max_line is not honoured, so the limit
 * cannot be raised. A longer line would be split silently and its tail parsed
 * as a line of its own (the end of a long comment could set a key), so every
 * line is measured before parsing and an overlong one is an error. */
#define CFG_MAX_LINE (INI_MAX_LINE - 3) /* characters, without '\r', '\n' and '\0' */

static int check_lines(const char *name, const char *text)
{
    unsigned line = 1;
    for (const char *p = text; *p; line++) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n && p[n - 1] == '\r') n--;
        if (n > CFG_MAX_LINE)
            return dh_err("config '%s': line %u is longer than %d characters", name, line, CFG_MAX_LINE);
        if (!nl) break;
        p = nl + 1;
    }
    return 0;
}

/* Configs are small text files: read whole, at most CFG_MAX_BYTES. */
#define CFG_MAX_BYTES (16u << 20)

int cfg_load(const char *path, cfg **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("unable to open config '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *text = dh_malloc(cap);
    for (;;) {
        size_t got = fread(text + n, 1, cap - n - 1, f);
        n += got;
        if (n < cap - 1) break;
        if (cap >= CFG_MAX_BYTES) {
            fclose(f);
            free(text);
            return dh_err("config '%s': larger than %u bytes", path, CFG_MAX_BYTES);
        }
        cap *= 2;
        text = dh_realloc(text, cap);
    }
    int bad = ferror(f);
    fclose(f);
    text[n] = 0;
    if (bad) {
        free(text);
        return dh_err("config '%s': read error", path);
    }
    if (memchr(text, 0, n)) {
        free(text);
        return dh_err("config '%s': contains a NUL byte (not a text file)", path);
    }
    int rc = cfg_load_string(path, text, out);
    free(text);
    return rc;
}

int cfg_load_string(const char *name, const char *text, cfg **out)
{
    *out = NULL;
    if (check_lines(name, text) < 0) return -1;
    cfg *c = cfg_new(name);
    int rc = ini_parse_string(text, handler, c);
    if (c->parse_error) { cfg_free(c); return -1; }
    if (rc != 0) {
        cfg_free(c);
        return dh_err("config '%s': syntax error at line %d", name, rc);
    }
    *out = c;
    return 0;
}

void cfg_free(cfg *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->e[i].section);
        free(c->e[i].key);
        free(c->e[i].value);
    }
    for (size_t i = 0; i < c->nsec; i++) free(c->sections[i]);
    for (size_t i = 0; i < c->nd; i++) {
        free(c->d[i].section);
        free(c->d[i].key);
        free(c->d[i].value);
    }
    free(c->d);
    free(c->sections);
    free(c->e);
    free(c->name);
    free(c);
}

const char *cfg_name(const cfg *c) { return c->name; }

int cfg_set_arg(cfg *c, const char *a)
{
    const char *dot = strchr(a, '.'), *eq = strchr(a, '=');
    if (!dot || !eq || dot > eq || dot == a || eq == dot + 1)
        return dh_err("bad setting '%s': expected section.key=value", a);
    char sec[256], key[256];
    if ((size_t)(dot - a) >= sizeof sec || (size_t)(eq - dot - 1) >= sizeof key)
        return dh_err("bad setting '%s': name too long", a);
    memcpy(sec, a, dot - a);
    sec[dot - a] = 0;
    memcpy(key, dot + 1, eq - dot - 1);
    key[eq - dot - 1] = 0;
    return cfg_set(c, sec, key, eq + 1);
}

int cfg_has(const cfg *c, const char *section, const char *key) { return find(c, section, key) != NULL; }

int cfg_has_section(const cfg *c, const char *section)
{
    for (size_t i = 0; i < c->nsec; i++)
        if (!strcmp(c->sections[i], section)) return 1;
    return 0;
}

const char *cfg_str(cfg *c, const char *section, const char *key)
{
    cfg_entry *e = find(c, section, key);
    if (!e) return NULL;
    e->used = 1;
    return e->value;
}

/* A value of spaces only (or nothing) is no value: strtod would read it as
 * 0 with end == v only when nothing is skipped, so it is caught here. */
static int blank(const char *v)
{
    while (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n' || *v == '\f' || *v == '\v') v++;
    return *v == 0;
}

static int missing(const cfg *c, const char *sec, const char *key)
{
    return dh_err("%s: missing key '%s' in [%s]", c->name, key, sec);
}

int cfg_get_double(cfg *c, const char *sec, const char *key, double *out,
                   const double *def, double min, double max)
{
    const char *v = cfg_str(c, sec, key);
    if (!v) {
        if (!def) return missing(c, sec, key);
        *out = *def;
        note_default_num(c, sec, key, *def);
        return 1;
    }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    while (*end == ' ' || *end == '\t') end++;
    if (blank(v) || end == v || *end || errno || !isfinite(x))
        return dh_err("%s: [%s] %s = '%s' is not a number", c->name, sec, key, v);
    if (x < min || x > max)
        return dh_err("%s: [%s] %s = %g is outside [%g, %g]", c->name, sec, key, x, min, max);
    *out = x;
    return 0;
}

int cfg_get_int(cfg *c, const char *sec, const char *key, long *out,
                const long *def, long min, long max)
{
    const char *v = cfg_str(c, sec, key);
    if (!v) {
        if (!def) return missing(c, sec, key);
        *out = *def;
        char b[32];
        snprintf(b, sizeof b, "%ld", *def);
        note_default(c, sec, key, b);
        return 1;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (blank(v) || end == v || *end || errno)
        return dh_err("%s: [%s] %s = '%s' is not an integer", c->name, sec, key, v);
    if (x < min || x > max)
        return dh_err("%s: [%s] %s = %ld is outside [%ld, %ld]", c->name, sec, key, x, min, max);
    *out = x;
    return 0;
}

int cfg_get_bool(cfg *c, const char *sec, const char *key, int *out, const int *def)
{
    const char *v = cfg_str(c, sec, key);
    if (!v) {
        if (!def) return missing(c, sec, key);
        *out = *def;
        note_default(c, sec, key, *def ? "true" : "false");
        return 1;
    }
    if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcmp(v, "0"))
        *out = 0;
    else
        return dh_err("%s: [%s] %s = '%s' is not a boolean (true/false)", c->name, sec, key, v);
    return 0;
}

int cfg_get_string(cfg *c, const char *sec, const char *key, const char **out, const char *def)
{
    const char *v = cfg_str(c, sec, key);
    if (!v) {
        if (!def) return missing(c, sec, key);
        *out = def;
        note_default(c, sec, key, def);
        return 1;
    }
    *out = v;
    return 0;
}

int cfg_get_doubles(cfg *c, const char *sec, const char *key, double *out, size_t cap,
                    size_t *n, double min, double max)
{
    const char *v = cfg_str(c, sec, key);
    *n = 0;
    if (!v) return missing(c, sec, key);
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == '\t') p++;
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !isfinite(x))
            return dh_err("%s: [%s] %s = '%s': item %zu is not a number", c->name, sec, key, v, *n + 1);
        if (x < min || x > max)
            return dh_err("%s: [%s] %s: item %zu = %g is outside [%g, %g]", c->name, sec, key, *n + 1, x, min, max);
        if (*n == cap)
            return dh_err("%s: [%s] %s has more than %zu items", c->name, sec, key, cap);
        out[(*n)++] = x;
        p = end;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ',') p++;
        else if (*p) return dh_err("%s: [%s] %s = '%s': expected ',' after item %zu", c->name, sec, key, v, *n);
    }
    if (*n == 0) return dh_err("%s: [%s] %s is empty", c->name, sec, key);
    return 0;
}

size_t cfg_section_count(const cfg *c) { return c->nsec; }
const char *cfg_section_name(const cfg *c, size_t i) { return i < c->nsec ? c->sections[i] : NULL; }

size_t cfg_entry_count(const cfg *c) { return c->n; }

size_t cfg_default_count(const cfg *c) { return c->nd; }

void cfg_default_at(const cfg *c, size_t i, const char **section, const char **key, const char **value)
{
    *section = c->d[i].section;
    *key = c->d[i].key;
    *value = c->d[i].value;
}

void cfg_entry_at(const cfg *c, size_t i, const char **section, const char **key, const char **value)
{
    *section = c->e[i].section;
    *key = c->e[i].key;
    *value = c->e[i].value;
}

int cfg_check_unused(const cfg *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (!c->e[i].used)
            return dh_err("%s: unknown key '%s' in [%s]", c->name, c->e[i].key, c->e[i].section);
    return 0;
}

int cfg_check_unused_section(const cfg *c, const char *section)
{
    for (size_t i = 0; i < c->n; i++)
        if (!c->e[i].used && !strcmp(c->e[i].section, section))
            return dh_err("%s: unknown key '%s' in [%s]", c->name, c->e[i].key, section);
    return 0;
}

char *cfg_to_string(const cfg *c)
{
    size_t len = 1;
    for (size_t s = 0; s < c->nsec; s++) {
        len += strlen(c->sections[s]) + 4;
        for (size_t i = 0; i < c->n; i++)
            if (!strcmp(c->e[i].section, c->sections[s]))
                len += strlen(c->e[i].key) + strlen(c->e[i].value) + 5;
    }
    char *out = malloc(len), *p = out;
    if (!out) abort();
    *p = 0;
    for (size_t s = 0; s < c->nsec; s++) {
        p += sprintf(p, "[%s]\n", c->sections[s]);
        for (size_t i = 0; i < c->n; i++)
            if (!strcmp(c->e[i].section, c->sections[s]))
                p += sprintf(p, "%s = %s\n", c->e[i].key, c->e[i].value);
    }
    return out;
}
