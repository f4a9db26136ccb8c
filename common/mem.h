/* mem.h: the one allocation helper of the project.
 *
 * The simulator and the trace tools size their buffers from validated inputs, so
 * running out of memory is not an input error that a caller could report and
 * recover from: these wrappers print one line naming the request and abort (as a
 * DH_BUG would). A zero size allocates one byte, so a valid pointer always comes
 * back, and the n x size products are checked for overflow. */
#ifndef DH_MEM_H
#define DH_MEM_H

#include <stddef.h>

void *dh_malloc(size_t n);
void *dh_calloc(size_t n, size_t size);
void *dh_realloc(void *p, size_t n);
/* realloc of n elements of size bytes, the product checked. */
void *dh_reallocarray(void *p, size_t n, size_t size);

#endif
