/* fuzz_bcsv.c: libFuzzer harness of dhcal's benchmark CSV reader
 * (analysis/bcsv.c). Each input is one CSV file, loaded whole; a bad file
 * must give -1 with a message naming its line and column, never a crash.
 *
 *   make fuzz && build-fuzz/fuzz_bcsv tests/fuzz/corpus/bcsv */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "analysis/bcsv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_bcsv.%ld.csv", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    bcsv_table t;
    bcsv_init(&t);
    if (bcsv_load(&t, path) == 0)
        for (size_t i = 0; i < t.n; i++) (void)bcsv_row_checked(&t.rows[i]);
    bcsv_release(&t);
    unlink(path);
    return 0;
}
