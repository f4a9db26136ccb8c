/* mem.c: allocation that never returns NULL; see mem.h. */
#include "common/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void out_of_memory(size_t n, size_t size)
{
    fprintf(stderr, "out of memory (%zu x %zu bytes)\n", n, size);
    abort();
}

void *dh_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n, 1);
    return p;
}

void *dh_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(n, size);
    return p;
}

void *dh_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n, 1);
    return q;
}

void *dh_reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) out_of_memory(n, size);
    return dh_realloc(p, n * size);
}
