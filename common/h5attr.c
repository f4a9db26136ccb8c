/* h5attr.c: scalar HDF5 attributes; see h5attr.h. */
#include "common/h5attr.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

/* Variable-length UTF-8 text, as the trace files' attributes (traces/README.md). */
static hid_t str_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* An attribute of type ftype over dataspace sp (closed here). */
static int attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, hid_t sp, const void *v)
{
    if (H5Aexists(obj, name) > 0) {
        if (sp >= 0) H5Sclose(sp);
        return dh_err("attribute '%s' written twice", name);
    }
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t w = a < 0 ? -1 : H5Awrite(a, mtype, v);
    if (a >= 0 && H5Aclose(a) < 0) w = -1;
    if (sp >= 0) H5Sclose(sp);
    return w < 0 ? dh_err("unable to write attribute '%s'", name) : 0;
}

int h5_attr_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = str_type();
    if (t < 0) return dh_err("unable to write attribute '%s'", name);
    int rc = attr(obj, name, t, t, H5Screate(H5S_SCALAR), &value);
    H5Tclose(t);
    return rc;
}

int h5_attr_f64(hid_t obj, const char *name, double value)
{
    return attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, H5Screate(H5S_SCALAR), &value);
}

int h5_attr_u64(hid_t obj, const char *name, uint64_t value)
{
    return attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, H5Screate(H5S_SCALAR), &value);
}

int h5_attr_strs(hid_t obj, const char *name, const char *const *v, size_t n)
{
    hid_t t = str_type();
    if (t < 0) return dh_err("unable to write attribute '%s'", name);
    hsize_t dims[1] = { n };
    int rc = attr(obj, name, t, t, H5Screate_simple(1, dims, NULL), v);
    H5Tclose(t);
    return rc;
}
