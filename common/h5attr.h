/* h5attr.h: attributes that say what an HDF5 output holds (units, inputs, commit).
 *
 * Scalar attributes on any object (a file's root group, a group, a dataset):
 * text as a fixed-length, NUL-terminated UTF-8 string (h5dump prints it,
 * h5py reads it as bytes: .decode()), numbers as little-endian IEEE doubles or
 * unsigned 64-bit integers. An attribute is created once; writing a name the
 * object already holds is an error. Each returns 0, or -1 with dh_err() naming
 * the attribute (the caller adds the file).
 *
 *   if (h5_attr_str(ds, "unit", "bytes") < 0) return -1;
 *
 * An object header holds at most 64 KiB of attributes in HDF5's default
 * (compact) storage: a configuration's three files as INI text are a few KiB. */
#ifndef DH_H5ATTR_H
#define DH_H5ATTR_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

int h5_attr_str(hid_t obj, const char *name, const char *value);
int h5_attr_f64(hid_t obj, const char *name, double value);
int h5_attr_u64(hid_t obj, const char *name, uint64_t value);
/* n texts as one 1-D attribute of fixed-length strings (the longest's length;
 * h5py reads a numpy array of bytes), e.g. a unit per field of a compound dataset. */
int h5_attr_strs(hid_t obj, const char *name, const char *const *v, size_t n);

#endif
