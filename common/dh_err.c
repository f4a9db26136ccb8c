/* dh_err.c: one per-thread error message; see dh_err.h. */
#include "common/dh_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char errbuf[1024];

int dh_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return -1;
}

int dh_err_prefix(const char *fmt, ...)
{
    char prefix[512], old[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, errbuf, sizeof old);
    snprintf(errbuf, sizeof errbuf, "%s%s", prefix, old);
    return -1;
}

const char *dh_errmsg(void) { return errbuf; }

void dh_die_last(const char *tool)
{
    fprintf(stderr, "%s: %s\n", tool, errbuf[0] ? errbuf : "unknown error");
    exit(1);
}

void dh_die(const char *tool, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", tool);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void dh_bug(const char *file, int line, const char *cond)
{
    fprintf(stderr, "BUG: %s:%d: %s\n", file, line, cond);
    abort();
}
