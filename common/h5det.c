/* h5det.c: see h5det.h. */
#include "common/h5det.h"

#include <string.h>

hid_t h5_untimed(hid_t cls)
{
    hid_t p = H5Pcreate(cls);
    if (p >= 0 && H5Pset_obj_track_times(p, 0) < 0) {
        H5Pclose(p);
        p = -1;
    }
    return p;
}

/* A file creation list is a group creation list (the root group's). */
hid_t h5_untimed_fcpl(void) { return h5_untimed(H5P_FILE_CREATE); }

int h5_make_parents(hid_t loc, const char *path, hid_t gcpl)
{
    char buf[512];
    size_t n = strlen(path);
    if (n >= sizeof buf) return -1;
    memcpy(buf, path, n + 1);
    for (char *s = strchr(buf + (buf[0] == '/'), '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        htri_t e = H5Lexists(loc, buf, H5P_DEFAULT);
        if (e < 0) return -1;
        if (!e) {
            hid_t g = H5Gcreate2(loc, buf, H5P_DEFAULT, gcpl, H5P_DEFAULT);
            if (g < 0) return -1;
            H5Gclose(g);
        }
        *s = '/';
    }
    return 0;
}
