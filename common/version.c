/* version.c: the build's commit; see version.h. */
#include "common/version.h"

#ifndef DH_COMMIT
#define DH_COMMIT "unknown"
#endif

const char *dh_commit(void) { return DH_COMMIT; }
