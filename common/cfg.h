/* cfg.h: INI configuration files (models, hardware profiles, drafts, presets).
 *
 * Parsing is done by inih (Debian libinih); this module keeps the entries in
 * file order, offers typed getters that check ranges, and reports keys that
 * nobody read, so that a misspelt key is an error and never silently ignored.
 * Every number in a config carries its source in a comment next to it.
 *
 *   cfg *c; if (cfg_load("models/glm53.ini", &c) < 0) dh_die_last("dhsim");
 *   double x; if (cfg_get_double(c, "model", "hidden", &x, CFG_REQUIRED, 1, 1e6) < 0) ...
 *   if (cfg_check_unused(c) < 0) ...   // "models/glm53.ini: unknown key 'hiden' in [model]"
 *
 * All functions return 0 on success, 1 when an optional key is absent (the
 * default was stored), and -1 with dh_err() set on a bad or missing value. */
#ifndef DH_CFG_H
#define DH_CFG_H

#include <stddef.h>
#include <stdint.h>

typedef struct cfg cfg;

/* Sentinel for "no default: the key must be present". */
#define CFG_REQUIRED NULL

int cfg_load(const char *path, cfg **out);
int cfg_load_string(const char *name, const char *text, cfg **out);
void cfg_free(cfg *c);
const char *cfg_name(const cfg *c); /* the path or name given at load */

/* Add or replace an entry ("--set section.key=value" on a command line). */
int cfg_set(cfg *c, const char *section, const char *key, const char *value);
/* Parse "section.key=value" and cfg_set() it. */
int cfg_set_arg(cfg *c, const char *assignment);

int cfg_has(const cfg *c, const char *section, const char *key);
int cfg_has_section(const cfg *c, const char *section);
/* The raw string (NULL if absent); marks the key as used. */
const char *cfg_str(cfg *c, const char *section, const char *key);

/* Typed getters. def == CFG_REQUIRED makes the key mandatory. Values outside
 * [min, max] are errors, never clamped. */
int cfg_get_double(cfg *c, const char *sec, const char *key, double *out,
                   const double *def, double min, double max);
int cfg_get_int(cfg *c, const char *sec, const char *key, long *out,
                const long *def, long min, long max);
int cfg_get_bool(cfg *c, const char *sec, const char *key, int *out, const int *def);
int cfg_get_string(cfg *c, const char *sec, const char *key, const char **out, const char *def);
/* Comma-separated list of doubles, each within [min, max]. *n is the count read
 * (at most cap). */
int cfg_get_doubles(cfg *c, const char *sec, const char *key, double *out, size_t cap,
                    size_t *n, double min, double max);

/* Sections in file order: iterate i = 0 .. cfg_section_count()-1. */
size_t cfg_section_count(const cfg *c);
const char *cfg_section_name(const cfg *c, size_t i);

/* Entries in file order (sections in order of first appearance within the file):
 * i = 0 .. cfg_entry_count()-1. The pointers live as long as the entry. Does not
 * mark the entry used. */
size_t cfg_entry_count(const cfg *c);
void cfg_entry_at(const cfg *c, size_t i, const char **section, const char **key, const char **value);

/* Keys a typed getter read that the file does not give, with the default it
 * took as text (numbers in the shortest form that reads back exactly), in the
 * order first read: i = 0 .. cfg_default_count()-1. A key set after it was
 * defaulted stays listed (cfg_has() tells). What a run's records call its
 * defaults; writing them into the file is not always the same run, since a
 * loader may treat a key given explicitly otherwise (workload.warmup_steps). */
size_t cfg_default_count(const cfg *c);
void cfg_default_at(const cfg *c, size_t i, const char **section, const char **key, const char **value);

/* Error if any entry was never read by a getter (names the first one). */
int cfg_check_unused(const cfg *c);
/* Error if section has a key never read (for configs made of several sections read by different modules). */
int cfg_check_unused_section(const cfg *c, const char *section);

/* Write all entries back as INI text (for recording a preset inside a trace). */
char *cfg_to_string(const cfg *c);

#endif
