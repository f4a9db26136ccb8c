/* version.h: the build's commit, for every output that records what made it.
 *
 * dh_commit() is `git describe --always --dirty` of the checkout the tool was
 * built from (the Makefile passes it to common/version.c alone, and rebuilds
 * that file only when the commit changes: build/commit.stamp), or "unknown"
 * when it was built outside a git checkout. dhsweep's point files, dhsim's
 * JSON "inputs" and the HDF5 outputs' "commit" attributes all read it here. */
#ifndef DH_VERSION_H
#define DH_VERSION_H

const char *dh_commit(void);

#endif
