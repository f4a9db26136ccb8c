/* h5pre_time.c: time of the HDF5 pre-check (traces/h5pre.c) per file, 20 repetitions after a
 * warm-up (so the file is in the page cache); tests/fuzz/RESULTS.md records a run.
 *   make bin/dhtrace CUDA=0 && cc -O2 -I. tests/fuzz/h5pre_time.c build/traces/h5pre.o \
 *     build/common/dh_err.o build/common/mem.o -o build/h5pre_time && build/h5pre_time FILE... */
#include "traces/h5pre.h"
#include "common/dh_err.h"
#include <stdio.h>
#include <time.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        struct timespec a, b;
        int rc = 0; int reps = 20;
        h5pre_check(argv[i]);
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int r = 0; r < reps; r++) rc |= h5pre_check(argv[i]);
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%s: rc %d, %.2f ms per check\n", argv[i], rc, ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6) / reps);
    }
}
