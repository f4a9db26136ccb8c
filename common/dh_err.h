/* dh_err.h: error reporting shared by every library of the project.
 *
 * Library functions never print and never exit: they record one message with
 * dh_err() (which returns -1, so "return dh_err(...)" reads naturally) and the
 * command-line tool prints it as one line, "tool: message", and exits non-zero.
 * Messages are lower-case and quote the thing they are about:
 *   dh_err("trace '%s': dataset '%s' has %u rows, expected %u", ...)
 * DH_BUG() is for invariants that only a bug in this project can break. */
#ifndef DH_ERR_H
#define DH_ERR_H

#include <stdarg.h>

#if defined(__GNUC__)
#define DH_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DH_PRINTF(a, b)
#endif

/* Record a message (replacing any earlier one) and return -1. */
int dh_err(const char *fmt, ...) DH_PRINTF(1, 2);
/* Prefix the recorded message with more context ("trace 'x.h5': " + old) and return -1. */
int dh_err_prefix(const char *fmt, ...) DH_PRINTF(1, 2);
/* The last recorded message of this thread ("" if none). */
const char *dh_errmsg(void);
/* Print "tool: message" for the last error and exit(1). */
void dh_die_last(const char *tool) __attribute__((noreturn));
/* Print "tool: formatted message" and exit(1). */
void dh_die(const char *tool, const char *fmt, ...) DH_PRINTF(2, 3) __attribute__((noreturn));

void dh_bug(const char *file, int line, const char *cond) __attribute__((noreturn));
#define DH_BUG_ON(cond) do { if (cond) dh_bug(__FILE__, __LINE__, #cond); } while (0)

#endif
