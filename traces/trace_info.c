/* trace_info.c: storage figures of a trace file; see trace_info.h and the
 * schema in traces/README.md. */
#include "traces/trace_info.h"
#include "common/dh_err.h"

#include "common/h5init.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Extent, element size and storage size of one dataset. */
static int dataset_sizes(hid_t f, const char *path, const char *name, uint64_t *n, uint64_t *elem, uint64_t *disk)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return dh_err("trace '%s': cannot open dataset '%s'", path, name);
    hid_t sp = H5Dget_space(d), t = H5Dget_type(d);
    hsize_t dims[1] = { 0 };
    int ok = sp >= 0 && t >= 0 && H5Sget_simple_extent_ndims(sp) == 1 && H5Sget_simple_extent_dims(sp, dims, NULL) == 1;
    if (ok) {
        *n = dims[0];
        *elem = H5Tget_size(t);
        *disk = H5Dget_storage_size(d);
    }
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(d);
    return ok ? 0 : dh_err("trace '%s': dataset '%s' is not a 1-D array", path, name);
}

int trace_sizes_get(const char *path, const trace_meta *m, trace_sizes *out)
{
    const trace_shape *sh = &m->shape;
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0) return dh_err("trace '%s': cannot stat the file", path);
    out->file_bytes = (uint64_t)st.st_size;
    h5_init();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return dh_err("trace '%s': cannot open", path);
    int rc = 0;
    for (uint32_t r = 0; r < sh->n_requests && rc == 0; r++)
        for (uint32_t g = 0; g < sh->n_groups && rc == 0; g++) {
            char name[96];
            uint64_t n, elem, disk;
            snprintf(name, sizeof name, "/req/%u/g/%u/index", r, g);
            if ((rc = dataset_sizes(f, path, name, &n, &elem, &disk)) < 0) break;
            out->positions += n;
            out->index_raw_bytes += n * elem;
            out->index_disk_bytes += disk;
            snprintf(name, sizeof name, "/req/%u/g/%u/rows", r, g);
            if ((rc = dataset_sizes(f, path, name, &n, &elem, &disk)) < 0) break;
            out->stored_rows += n;
            out->rows_raw_bytes += n * elem;
            out->rows_disk_bytes += disk;
            out->streams++;
            /* Selection sizes follow from the shape: min(k, context rows). */
            for (uint32_t p = 0; p < sh->output_len[r]; p++) {
                uint32_t nrows = sel_rows_at(sh, r, g, p);
                out->selected_rows += nrows < sh->group_k[g] ? nrows : sh->group_k[g];
            }
            out->keyframes += (sh->output_len[r] + m->keyframe_interval - 1) / m->keyframe_interval;
        }
    H5Fclose(f);
    return rc;
}
