/* path.c: the source-tree lookup of data files; see path.h. */
#include "common/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/dh_err.h"

static int put(char *out, size_t cap, const char *a, const char *b, const char *c)
{
    int n = snprintf(out, cap, "%s%s%s", a, b, c);
    /* The message shows the path's start only: the whole of it would not fit in one. */
    if (n < 0 || (size_t)n >= cap)
        return dh_err("path '%.60s%s%.60s...' is longer than %zu bytes", a, b, c, cap - 1);
    return 0;
}

int dh_path_find(const char *rel, char *out, size_t cap)
{
    if (rel[0] == '/' || access(rel, R_OK) == 0) return put(out, cap, rel, "", "");
    const char *root = getenv("DHSPARSE_ROOT");
    if (root && root[0]) {
        if (put(out, cap, root, "/", rel) < 0) return -1;
        if (access(out, R_OK) == 0) return 0;
    }
    return put(out, cap, rel, "", "");
}
