/* path.h: where the project's data files are found.
 *
 * Config files name other files (a model, a hardware profile, a draft, a preset)
 * relative to the source tree. A relative path is looked up in the current
 * directory first, then under $DHSPARSE_ROOT when it is set, so the tools run from
 * anywhere once that variable names the checkout. This is the one place that rule
 * is written. */
#ifndef DH_PATH_H
#define DH_PATH_H

#include <stddef.h>

/* Write into out (cap bytes) the readable file rel names: rel itself when it is absolute
 * or readable here, else $DHSPARSE_ROOT/rel when that is readable, else rel unchanged
 * (the caller's open then reports it). 0, or -1 with dh_err() when the path does not fit
 * in cap (nothing is truncated). */
int dh_path_find(const char *rel, char *out, size_t cap);

#endif
