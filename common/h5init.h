/* h5init.h: HDF5 set up the one way every tool of the project uses it.
 *
 * HDF5 prints its whole error stack on every failure unless told not to, and
 * at exit it runs a library shutdown that, after a failed open of a truncated
 * file (HDF5 1.10), prints "infinite loop closing library" and a line of its
 * internal state. The tools report one line per error themselves, and close
 * every file they open, so h5_init() turns both off. Call it before any other
 * HDF5 call (it is idempotent and thread-safe). */
#ifndef DH_H5INIT_H
#define DH_H5INIT_H

void h5_init(void);

#endif
