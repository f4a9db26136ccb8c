/* h5pre.h: a structural check of an HDF5 file's metadata, run before HDF5
 * itself reads the file.
 *
 * HDF5 1.10 (Debian 12's 1.10.8, the library the tools link) trusts sizes,
 * counts and indices it reads from a file in several decoders: a damaged file
 * makes it loop forever, copy past a buffer or allocate gigabytes. Where the
 * damage is in a structure that a valid file can never hold, h5pre_check
 * rejects the file with one message before HDF5 sees it. What it checks, and
 * what it leaves to HDF5, is listed in h5pre.c. */
#ifndef DH_H5PRE_H
#define DH_H5PRE_H

/* 0 when nothing damaged was found (or the file is of a shape the check does
 * not read: HDF5 then decides), -1 with a dh_err message that starts with
 * "trace 'PATH': " and names the structure and its byte offset. */
int h5pre_check(const char *path);

#endif
