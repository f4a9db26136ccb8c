/* trace.h: attention-selection traces in HDF5 (schema: traces/README.md).
 *
 * A trace file holds a trace_meta as attributes and, per (request, selection
 * group), the stream of selections as keyframes plus deltas, chunked and
 * compressed with shuffle + deflate. The reader streams: it holds one chunk
 * per open stream, never the whole file, and validates everything it reads
 * (format version, sizes, sortedness, a delta that removes a row that is not
 * selected, an index beyond the context); an error names the file, the
 * dataset and the position. */
#ifndef DH_TRACE_H
#define DH_TRACE_H

#include "traces/sel.h"

/* Open a trace file as a sel_source. */
int trace_open(const char *path, sel_source **out);

/* Write every stream of src to path. The file is written to a temporary name
 * and renamed when complete, so a failed write leaves no half-written trace.
 * progress (may be NULL) is called with (done, total) stream counts. */
typedef void (*trace_progress_fn)(uint64_t done, uint64_t total, void *arg);
int trace_write(const char *path, sel_source *src, trace_progress_fn progress, void *arg);

/* Read every stream of a trace end to end and validate it. */
int trace_check(const char *path, trace_progress_fn progress, void *arg);

#endif
