/* fuzz_trace.c: libFuzzer harness of the HDF5 trace reader (traces/trace.c).
 *
 * Each input is written to a file and read the three ways the tools read a
 * trace: 'dhtrace check' (trace_check: every stream, every position), the
 * simulator's open (trace_open and one stream opened and read the way the
 * policies read it, position by position), and 'dhtrace stats' (stats_run,
 * which sizes its work from the shape). A bad file must give -1 with a
 * message, never a crash, a sanitizer report or a hang.
 *
 *   make fuzz && build-fuzz/fuzz_trace tests/fuzz/corpus/trace */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dh_err.h"
#include "traces/stats.h"
#include "traces/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_trace.%ld.h5", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();

    int checked = trace_check(path, NULL, NULL);
    sel_source *src;
    if (trace_open(path, &src) == 0) {
        sel_stream *st;
        if (sel_open(src, 0, 0, &st) == 0) {
            sel_delta d;
            while (sel_next(st, &d) == 0) {}
            sel_close(st);
        }
        stats_options o;
        stats_options_init(&o);
        o.max_positions = 64;
        stats_report *r;
        int rc = stats_run(src, &o, &r);
        /* What check rejects, stats must reject too. */
        if (rc == 0 && checked < 0) {
            fprintf(stderr, "stats accepted a file check rejects: %s\n", dh_errmsg());
            abort();
        }
        if (rc == 0) stats_report_free(r);
        sel_source_free(src);
    }
    unlink(path);
    return 0;
}
