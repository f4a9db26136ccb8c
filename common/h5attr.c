/* h5attr.c: scalar HDF5 attributes and text datasets; see h5attr.h. */
#include "common/h5attr.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

/* A fixed-length string type of strlen(s) + 1 bytes (at least 1). */
static hid_t str_type(const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    if (H5Tset_size(t, strlen(s) + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static int attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v)
{
    if (H5Aexists(obj, name) > 0) return dh_err("attribute '%s' written twice", name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t w = a < 0 ? -1 : H5Awrite(a, mtype, v);
    if (a >= 0 && H5Aclose(a) < 0) w = -1;
    if (sp >= 0) H5Sclose(sp);
    return w < 0 ? dh_err("unable to write attribute '%s'", name) : 0;
}

int h5_attr_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = str_type(value);
    if (t < 0) return dh_err("unable to write attribute '%s'", name);
    int rc = attr(obj, name, t, t, value);
    H5Tclose(t);
    return rc;
}

int h5_attr_f64(hid_t obj, const char *name, double value) { return attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value); }

int h5_attr_u64(hid_t obj, const char *name, uint64_t value) { return attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value); }

int h5_attr_strs(hid_t obj, const char *name, const char *const *v, size_t n)
{
    if (H5Aexists(obj, name) > 0) return dh_err("attribute '%s' written twice", name);
    size_t w = 1;
    for (size_t i = 0; i < n; i++)
        if (strlen(v[i]) + 1 > w) w = strlen(v[i]) + 1;
    char *buf = calloc(n ? n : 1, w);
    if (!buf) abort();
    for (size_t i = 0; i < n; i++) memcpy(buf + i * w, v[i], strlen(v[i]));
    hid_t t = H5Tcopy(H5T_C_S1);
    hsize_t dims[1] = { n };
    int bad = t < 0 || H5Tset_size(t, w) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0;
    hid_t sp = bad ? -1 : H5Screate_simple(1, dims, NULL);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t wr = a < 0 ? -1 : H5Awrite(a, t, buf);
    if (a >= 0 && H5Aclose(a) < 0) wr = -1;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    free(buf);
    return wr < 0 ? dh_err("unable to write attribute '%s'", name) : 0;
}
