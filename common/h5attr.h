/* h5attr.h: attributes that say what an HDF5 output holds (units, inputs, commit).
 *
 * Scalar attributes on any object (a file's root group, a group, a dataset):
 * text as a variable-length UTF-8 string, as the trace files' attributes
 * (h5dump prints it, h5py reads it as str), numbers as little-endian IEEE doubles or
 * unsigned 64-bit integers. An attribute is created once; writing a name the
 * object already holds is an error. Each returns 0, or -1 with dh_err() naming
 * the attribute (the caller adds the file).
 *
 *   if (h5_attr_str(ds, "unit", "bytes") < 0) return -1;
 * Variable-length text lives in the file's global heap, so a long text (a
 * configuration's files as INI) does not count against an object header's
 * 64 KiB of attributes. */
#ifndef DH_H5ATTR_H
#define DH_H5ATTR_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

int h5_attr_str(hid_t obj, const char *name, const char *value);
int h5_attr_f64(hid_t obj, const char *name, double value);
int h5_attr_u64(hid_t obj, const char *name, uint64_t value);
/* n texts as one 1-D attribute of strings (h5py reads a numpy array of str
 * objects), e.g. a unit per field of a compound dataset. */
int h5_attr_strs(hid_t obj, const char *name, const char *const *v, size_t n);

#endif
