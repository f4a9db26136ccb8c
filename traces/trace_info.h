/* trace_info.h: the storage figures of a trace file (dhtrace info).
 *
 * Reads only HDF5 metadata (dataset extents and storage sizes), never the
 * rows, so it is instant even on a large trace. Like the rest of dhtrace it
 * runs on one thread (HDF5 is the serial build). */
#ifndef DH_TRACE_INFO_H
#define DH_TRACE_INFO_H

#include "traces/sel.h"

typedef struct {
    uint64_t file_bytes;
    uint64_t streams;          /* (request, group) pairs */
    uint64_t positions;        /* index entries over all streams */
    uint64_t keyframes;        /* positions stored as full sets */
    uint64_t stored_rows;      /* entries of all rows datasets */
    uint64_t selected_rows;    /* sum over positions of the selection size */
    uint64_t rows_raw_bytes, rows_disk_bytes;   /* rows datasets: 4 B per row; on disk */
    uint64_t index_raw_bytes, index_disk_bytes; /* index datasets: 17 B per position; on disk */
} trace_sizes;

/* Fill *out for the trace at path whose attributes are m (from trace_open). */
int trace_sizes_get(const char *path, const trace_meta *m, trace_sizes *out);

#endif
