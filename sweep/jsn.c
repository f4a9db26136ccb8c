/* jsn.c: strict recursive-descent JSON; see jsn.h.
 *
 * Cost: O(bytes) per document; objects are arrays of (key, value) in file
 * order and jsn_get is a linear scan, which is right for the few dozen keys
 * of a run object. */
#include "sweep/jsn.h"
#include "common/dh_err.h"
#include "common/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define JSN_MAX_DEPTH 32

typedef struct {
    const char *s, *p, *name;
} parser;

static int fail(parser *ps, const char *what)
{
    return dh_err("'%s': invalid JSON at byte %zu: %s", ps->name, (size_t)(ps->p - ps->s), what);
}

static void skip_ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static jsn *node(jsn_kind k)
{
    jsn *j = dh_calloc(1, sizeof *j);
    j->kind = k;
    return j;
}

static void push(jsn *j, char *key, jsn *item)
{
    j->items = dh_reallocarray(j->items, j->n + 1, sizeof *j->items);
    if (j->kind == JSN_OBJ) {
        j->keys = dh_reallocarray(j->keys, j->n + 1, sizeof *j->keys);
        j->keys[j->n] = key;
    }
    j->items[j->n++] = item;
}

/* A string literal at ps->p into a new buffer; \u escapes below 0x80 only,
 * because this tool writes nothing else (jsn_write_str escapes only control
 * characters, which are below 0x20). */
static int parse_string(parser *ps, char **out)
{
    if (*ps->p != '"') return fail(ps, "expected a string");
    ps->p++;
    size_t cap = 32, n = 0;
    char *b = dh_malloc(cap);
    for (;;) {
        char c = *ps->p++;
        if (c == 0) { free(b); ps->p--; return fail(ps, "unterminated string"); }
        if (c == '"') break;
        if ((unsigned char)c < 0x20) { free(b); return fail(ps, "control character in a string"); }
        if (c == '\\') {
            char e = *ps->p++;
            switch (e) {
            case '"': case '\\': case '/': c = e; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                unsigned v = 0;
                for (int i = 0; i < 4; i++) {
                    char h = *ps->p++;
                    v <<= 4;
                    if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
                    else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
                    else { free(b); return fail(ps, "bad \\u escape"); }
                }
                if (v == 0 || v >= 0x80) { free(b); return fail(ps, "\\u escape outside ASCII"); }
                c = (char)v;
                break;
            }
            default: free(b); return fail(ps, "bad escape");
            }
        }
        if (n + 2 > cap) b = dh_realloc(b, cap *= 2);
        b[n++] = c;
    }
    b[n] = 0;
    *out = b;
    return 0;
}

static int parse_value(parser *ps, int depth, jsn **out);

static int parse_number(parser *ps, jsn **out)
{
    const char *start = ps->p;
    if (*ps->p == '-') ps->p++;
    if (*ps->p < '0' || *ps->p > '9') return fail(ps, "expected a value");
    while ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '.' || *ps->p == 'e' || *ps->p == 'E' ||
           *ps->p == '+' || *ps->p == '-')
        ps->p++;
    size_t n = (size_t)(ps->p - start);
    char *t = dh_malloc(n + 1);
    memcpy(t, start, n);
    t[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (*end || errno == ERANGE) { free(t); ps->p = start; return fail(ps, "bad number"); }
    jsn *j = node(JSN_NUM);
    j->text = t;
    j->num = v;
    *out = j;
    return 0;
}

static int parse_value(parser *ps, int depth, jsn **out)
{
    *out = NULL;
    if (depth > JSN_MAX_DEPTH) return fail(ps, "nested too deeply");
    skip_ws(ps);
    char c = *ps->p;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        jsn *j = node(obj ? JSN_OBJ : JSN_ARR);
        ps->p++;
        skip_ws(ps);
        if (*ps->p == (obj ? '}' : ']')) { ps->p++; *out = j; return 0; }
        for (;;) {
            char *key = NULL;
            if (obj) {
                skip_ws(ps);
                if (parse_string(ps, &key) < 0) { jsn_free(j); return -1; }
                skip_ws(ps);
                if (*ps->p != ':') { free(key); jsn_free(j); return fail(ps, "expected ':'"); }
                ps->p++;
            }
            jsn *item;
            if (parse_value(ps, depth + 1, &item) < 0) { free(key); jsn_free(j); return -1; }
            push(j, key, item);
            skip_ws(ps);
            if (*ps->p == ',') { ps->p++; continue; }
            if (*ps->p == (obj ? '}' : ']')) { ps->p++; break; }
            jsn_free(j);
            return fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        *out = j;
        return 0;
    }
    if (c == '"') {
        jsn *j = node(JSN_STR);
        if (parse_string(ps, &j->text) < 0) { free(j); return -1; }
        *out = j;
        return 0;
    }
    if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "false", 5)) {
        jsn *j = node(JSN_BOOL);
        j->boolean = c == 't';
        ps->p += j->boolean ? 4 : 5;
        *out = j;
        return 0;
    }
    if (!strncmp(ps->p, "null", 4)) {
        ps->p += 4;
        *out = node(JSN_NULL);
        return 0;
    }
    return parse_number(ps, out);
}

int jsn_parse(const char *text, const char *name, jsn **out)
{
    parser ps = { text, text, name };
    if (parse_value(&ps, 0, out) < 0) return -1;
    skip_ws(&ps);
    if (*ps.p) {
        jsn_free(*out);
        *out = NULL;
        return fail(&ps, "trailing characters");
    }
    return 0;
}

void jsn_free(jsn *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        if (j->keys) free(j->keys[i]);
        jsn_free(j->items[i]);
    }
    free(j->keys);
    free(j->items);
    free(j->text);
    free(j);
}

const jsn *jsn_get(const jsn *j, const char *key)
{
    if (!j || j->kind != JSN_OBJ) return NULL;
    for (size_t i = 0; i < j->n; i++)
        if (!strcmp(j->keys[i], key)) return j->items[i];
    return NULL;
}

const char *jsn_str(const jsn *j, const char *key)
{
    const jsn *v = jsn_get(j, key);
    return v && v->kind == JSN_STR ? v->text : NULL;
}

int jsn_num(const jsn *j, const char *key, double *out)
{
    const jsn *v = jsn_get(j, key);
    if (!v || v->kind != JSN_NUM) return -1;
    *out = v->num;
    return 0;
}

void jsn_write_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void jsn_write(FILE *f, const jsn *j)
{
    switch (j->kind) {
    case JSN_NULL: fputs("null", f); break;
    case JSN_BOOL: fputs(j->boolean ? "true" : "false", f); break;
    case JSN_NUM: fputs(j->text, f); break;
    case JSN_STR: jsn_write_str(f, j->text); break;
    case JSN_ARR:
    case JSN_OBJ:
        fputc(j->kind == JSN_OBJ ? '{' : '[', f);
        for (size_t i = 0; i < j->n; i++) {
            if (i) fputs(", ", f);
            if (j->kind == JSN_OBJ) { jsn_write_str(f, j->keys[i]); fputs(": ", f); }
            jsn_write(f, j->items[i]);
        }
        fputc(j->kind == JSN_OBJ ? '}' : ']', f);
        break;
    }
}

int jsn_read_file(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return dh_err("unable to open '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *b = dh_malloc(cap);
    for (;;) {
        if (n + 1 >= cap) b = dh_realloc(b, cap *= 2);
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(b); return dh_err("read error on '%s'", path); }
    b[n] = 0;
    if (strlen(b) != n) { free(b); return dh_err("'%s': NUL byte in a text file", path); }
    *out = b;
    if (len) *len = n;
    return 0;
}
