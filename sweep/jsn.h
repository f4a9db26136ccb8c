/* jsn.h: a small JSON reader and writer for the sweep's own files.
 *
 * dhsweep stores each point's results as JSON (sweep/swrun.h) and reads them
 * back to check a point before it is skipped and to merge the table
 * (sweep/swtab.h); the run objects inside come from out_json (sim/out.h).
 * Numbers keep their text as written ("%.17g"), so a value read and written
 * again is the same bytes, and objects keep their keys in file order, so the
 * columns of the merged table follow the simulator's own order.
 *
 * Inputs are files this tool wrote, a few KB each; the parser is recursive
 * descent with a depth limit and rejects anything that is not strict JSON. */
#ifndef DH_JSN_H
#define DH_JSN_H

#include <stddef.h>
#include <stdio.h>

typedef enum { JSN_NULL, JSN_BOOL, JSN_NUM, JSN_STR, JSN_ARR, JSN_OBJ } jsn_kind;

typedef struct jsn jsn;
struct jsn {
    jsn_kind kind;
    char *text;        /* JSN_NUM: the number as written; JSN_STR: the decoded string */
    double num;        /* JSN_NUM */
    int boolean;       /* JSN_BOOL */
    size_t n;          /* JSN_ARR, JSN_OBJ: items */
    char **keys;       /* JSN_OBJ: [n] */
    jsn **items;       /* JSN_ARR, JSN_OBJ: [n] */
};

/* Parse text (name is used in messages). 0, or -1 with dh_err() naming name
 * and the byte offset. */
int jsn_parse(const char *text, const char *name, jsn **out);
void jsn_free(jsn *j);
/* The member key of an object (NULL if absent or j is not an object). */
const jsn *jsn_get(const jsn *j, const char *key);
/* A string member's text, or NULL when absent or not a string. */
const char *jsn_str(const jsn *j, const char *key);
/* A number member, 0 with *out set, or -1 when absent or not a number. */
int jsn_num(const jsn *j, const char *key, double *out);

/* Write s as a JSON string literal (quotes and escapes included). */
void jsn_write_str(FILE *f, const char *s);
/* Write j compactly on one line ({"a": 1, "b": [2, 3]}). */
void jsn_write(FILE *f, const jsn *j);

/* Read a whole file into a NUL-terminated buffer (malloc'd). 0 or -1 with dh_err(). */
int jsn_read_file(const char *path, char **out, size_t *len);

#endif
