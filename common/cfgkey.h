/* cfgkey.h: the schema of a config file as a table of keys, read through it.
 *
 * Every loader of a config file (models/NAME.ini, models/hw/NAME.ini, instances,
 * drafts, sweeps, replay configs, ...) describes its keys in one table of
 * cfg_key rows: section, key, type, unit, range, default and meaning. The
 * loader reads each key through that table (cfgk_double(c, &S, "hw", "hbm_bw",
 * &x) takes the range and the default from the row), so the range the loader
 * enforces and the range docs/CONFIG.md prints are one and the same: the page
 * is generated from these tables (bin/dhconfig schema) and a test fails when
 * the committed page differs.
 *
 *   static const cfg_key hw_keys[] = {
 *       CK_ROW("hw", "hbm_bw", CK_NUM, "bytes/s", 1e6, 1e15, NULL, "HBM bandwidth ...", CK_DATASHEET),
 *   };
 *   const cfg_schema hw_schema = CFG_SCHEMA("models/hw/NAME.ini", "Hardware profile", "...", hw_keys);
 *   if (cfgk_double(c, &hw_schema, "hw", "hbm_bw", &bw) < 0) return -1;
 *
 * A section name in a table may hold placeholders: a segment written in upper
 * case (kind.NAME, gpus.N.dispatch) matches any one non-empty segment, and a key written in
 * upper case (KERNEL_INPUT) any key of its section.
 * Reading a key the table does not have is a bug of the loader (DH_BUG). */
#ifndef DH_CFGKEY_H
#define DH_CFGKEY_H

#include <stdio.h>

#include "common/cfg.h"

typedef enum {
    CK_NUM,    /* a finite number within [min, max] */
    CK_INT,    /* an integer within [min, max] */
    CK_BOOL,   /* true/false (yes/no, on/off, 1/0) */
    CK_STR,    /* text; with choices, one of them */
    CK_LIST,   /* comma-separated numbers, each within [min, max] */
} ck_type;

/* Row flags. */
enum {
    CK_DYNAMIC = 1u << 0, /* the default (or the range) depends on other keys: def and range_doc
                           * say how, in words, and the loader passes the value it computes */
    CK_DATASHEET = 1u << 1, /* hardware profiles: a rate or size of the device (datasheet or probe) */
    CK_FITTED = 1u << 2,    /* hardware profiles: fitted to the project's kernel benchmarks (bin/dhcal) */
};

typedef struct {
    const char *section; /* "hw", "kind.NAME" (placeholders: upper-case segments) */
    const char *key;
    ck_type type;
    const char *unit;      /* SI: "bytes", "s", "bytes/s", "FLOP/s"; "" for a count or a name */
    double min, max;       /* CK_NUM, CK_INT, CK_LIST */
    const char *def;       /* NULL: required; else the default as the file would write it */
    const char *doc;       /* what the key means, one or two sentences */
    unsigned flags;
    const char *choices;   /* CK_STR: "own|reuse|window"; NULL: any text */
    const char *range_doc; /* CK_DYNAMIC: the range in words when it depends on other keys */
} cfg_key;

typedef struct {
    const char *files; /* the files it describes, e.g. "models/hw/NAME.ini" */
    const char *title;
    const char *doc;   /* a paragraph on the file as a whole (Markdown) */
    const cfg_key *k;
    size_t n;
} cfg_schema;

/* A row; CK_STR_ROW for a text key with choices, CK_DYN_ROW for one whose range the
 * loader computes (range_doc says it in words). */
#define CK_ROW(sec, key_, type_, unit_, lo, hi, def_, doc_, flags_) \
    { .section = (sec), .key = (key_), .type = (type_), .unit = (unit_), .min = (lo), .max = (hi), .def = (def_), \
      .doc = (doc_), .flags = (flags_) }
#define CK_STR_ROW(sec, key_, def_, choices_, doc_, flags_) \
    { .section = (sec), .key = (key_), .type = CK_STR, .unit = "", .def = (def_), .doc = (doc_), .flags = (flags_), \
      .choices = (choices_) }
#define CK_DYN_ROW(sec, key_, type_, unit_, lo, hi, def_, range_, doc_, flags_) \
    { .section = (sec), .key = (key_), .type = (type_), .unit = (unit_), .min = (lo), .max = (hi), .def = (def_), \
      .doc = (doc_), .flags = CK_DYNAMIC | (flags_), .range_doc = (range_) }

#define CFG_SCHEMA(files, title, doc, keys) { files, title, doc, keys, sizeof keys / sizeof keys[0] }

/* The row of (section, key), section matched against the table's patterns; NULL if none. */
const cfg_key *cfgk_find(const cfg_schema *s, const char *section, const char *key);
/* Does the table have a row for section (any key)? */
int cfgk_has_section(const cfg_schema *s, const char *section);

/* Read a key with the range and the default of its row. 0 (read), 1 (absent: the
 * default stored), -1 with dh_err(). */
int cfgk_double(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out);
int cfgk_int(cfg *c, const cfg_schema *s, const char *sec, const char *key, long *out);
int cfgk_bool(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *out);
int cfgk_string(cfg *c, const cfg_schema *s, const char *sec, const char *key, const char **out);
/* A CK_STR key with choices: *idx is the index of its value among them. */
int cfgk_choice(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *idx);
int cfgk_doubles(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out, size_t cap, size_t *n);

/* The same with a default the loader computes (CK_DYNAMIC rows; def NULL: required). The
 * range is the row's. */
int cfgk_double_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out, const double *def);
int cfgk_int_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, long *out, const long *def);
int cfgk_bool_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *out, const int *def);
int cfgk_string_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, const char **out, const char *def);
int cfgk_choice_or(cfg *c, const cfg_schema *s, const char *sec, const char *key, int *idx, const char *def);
/* A CK_DYNAMIC row whose range depends on other keys: min and max given here. */
int cfgk_double_in(cfg *c, const cfg_schema *s, const char *sec, const char *key, double *out, const double *def,
                   double min, double max);
int cfgk_int_in(cfg *c, const cfg_schema *s, const char *sec, const char *key, long *out, const long *def, long min,
                long max);

/* The table itself is sound: min <= max, every default of a plain row within its range (a
 * boolean true/false, a choice among the choices), no (section, key) twice. 0 or -1 with
 * dh_err() naming the row. */
int cfgk_schema_check(const cfg_schema *s);

/* The schemas as Markdown: one section per schema, one table row per key. */
void cfgk_markdown(FILE *f, const cfg_schema *const *all, size_t n);

#endif
