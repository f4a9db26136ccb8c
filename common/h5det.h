/* h5det.h: HDF5 property lists for byte-reproducible files.
 *
 * HDF5 stores access, modification, change and birth times in every object header unless
 * told not to, so two runs with the same inputs would write different bytes. Every file the
 * project writes is created with h5_untimed_fcpl() (the root group) and its groups and
 * datasets with lists from h5_untimed() (their parent groups by h5_make_parents()), and a test writes the same file twice, more than a
 * second apart, and compares the bytes.
 *
 *   hid_t fcpl = h5_untimed_fcpl(), gcpl = h5_untimed(H5P_GROUP_CREATE);
 *   hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
 *   ... H5Pclose(fcpl); H5Pclose(gcpl);
 * Each returns a new list (close it with H5Pclose), or -1 on an HDF5 failure. */
#ifndef DH_H5DET_H
#define DH_H5DET_H

#include <hdf5.h>

/* A file creation list whose root group records no times. */
hid_t h5_untimed_fcpl(void);
/* An object creation list of class cls (H5P_GROUP_CREATE, H5P_DATASET_CREATE) that records
 * no times. */
hid_t h5_untimed(hid_t cls);
/* Creates, with group creation list gcpl, each missing group above the last component of
 * path ("a/b/c" makes a and a/b), because groups that HDF5 creates on its own as
 * intermediate groups take the default lists, times included. Returns 0, or -1 on an HDF5
 * failure or a path of 512 bytes or more. */
int h5_make_parents(hid_t loc, const char *path, hid_t gcpl);

#endif
