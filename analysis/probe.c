/* probe.c: H200 probe text files to dhbench CSV lines; see probe.h. */
#include "analysis/probe.h"
#include "common/dh_err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The row size pool_probe measured and its serving layout, from the
 * measurements README ("656-byte rows", "windows of 100K rows", "291 missed
 * rows per window"). */
enum { POOL_ROW_BYTES = 656, SERVING_WINDOW_ROWS = 100000, SERVING_MISSES = 291 };

/* Writes one line in the dhbench column order; NAN prints as empty. */
static void emit(FILE *out, const char *kernel, const char *version, const char *pattern, double row_bytes,
                 double rows, double sms, double pool_bytes, double ctx, double k, double median_us, double gbps)
{
#define NUM(x) do { if (isnan(x)) fputc(',', out); else fprintf(out, ",%.17g", (double)(x)); } while (0)
    fprintf(out, "probe,%s,%s,NVIDIA H200,%s", kernel, version, row_bytes == 1152 ? "bf16" : "fp8");
    NUM(row_bytes); NUM(rows); NUM(sms); NUM(pool_bytes);
    fprintf(out, ",%s", pattern);
    fputs(",,", out);          /* batch, queries */
    NUM(k); fputc(',', out);   /* union_rows */
    NUM(ctx);
    fputs(",,,,", out);        /* heads, m, n, kdim */
    NUM(isnan(rows) ? NAN : rows * row_bytes);
    fputc(',', out);           /* flops */
    fputc(',', out);           /* reps */
    /* The order after flops: reps, median_us, p10_us, p90_us, gbps, ... */
    NUM(median_us);
    fputs(",,", out);          /* p10, p90 */
    NUM(gbps);
    /* The ceiling is the pinned-copy figure of the same probe (55.5 GB/s). */
    fputs(",,h2d_memcpy_pinned,55.5", out);
    NUM(isnan(gbps) ? NAN : 100.0 * gbps / 55.5);
    fputs(",1\n", out);
#undef NUM
}

int probe_convert(const char *path, FILE *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return dh_err("file '%s': cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        char a[64], b[64], c[80];
        double x, y, z;
        int serving = 0, thp, sorted, n;
        long pool, rows, sms;
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || !strncmp(p, "real", 4) || !strncmp(p, "user", 4) || !strncmp(p, "sys", 3) ||
            !strncmp(p, "row_B", 5) || !strncmp(p, "device", 6))
            continue;
        if (sscanf(p, "serving=%d %n", &serving, &n) == 1) p += n;
        if (sscanf(p, "thp=%d pool=%ldGB rows=%ld sorted=%d sms=%ld %lf GB/s", &thp, &pool, &rows, &sorted, &sms, &x) == 6 ||
            sscanf(p, "thp=%d pool= %ldGB rows= %ld sorted=%d sms= %ld %lf GB/s", &thp, &pool, &rows, &sorted, &sms, &x) == 6) {
            char pattern[64];
            snprintf(pattern, sizeof pattern, "%s%s%s", serving ? "serving" : "uniform", sorted ? "_sorted" : "", thp ? "+thp" : "");
            double us = (double)rows * POOL_ROW_BYTES / (x * 1e3);
            emit(out, "fetch", "probe_zc4", pattern, POOL_ROW_BYTES, (double)rows, (double)sms, (double)pool * 1073741824.0,
                 serving ? SERVING_WINDOW_ROWS : NAN, serving ? SERVING_MISSES : NAN, us, x);
            continue;
        }
        if (sscanf(p, "%lf %63s %63s %lf", &y, a, b, &z) == 4) {
            const char *version = !strcmp(a, "host_zc") ? "probe_zc" : !strcmp(a, "host_zc4") ? "probe_zc4" : NULL;
            if (version) {
                char *end;
                double smsd = strtod(b, &end);
                if (*end) { rc = dh_err("file '%s' line %ld: SMs '%s' is not a number", path, lineno, b); break; }
                emit(out, "fetch", version, "uniform", y, NAN, smsd, 2.0 * 1073741824.0, NAN, NAN, NAN, z);
            } else if (!strcmp(a, "hbm") || !strcmp(a, "batchcpy")) {
                snprintf(c, sizeof c, "probe_%s", !strcmp(a, "hbm") ? "hbm_gather" : "batchcpy");
                emit(out, c, "1", "uniform", y, NAN, strcmp(b, "CE") ? strtod(b, NULL) : NAN, 2.0 * 1073741824.0, NAN, NAN, NAN, z);
            } else {
                rc = dh_err("file '%s' line %ld: unknown path '%s'", path, lineno, a);
            }
            continue;
        }
        if (sscanf(p, "%63s %63s %lf", a, b, &z) == 3 && strstr(b, "GB/s")) {
            snprintf(c, sizeof c, "probe_%s", a);
            emit(out, c, "1", "", NAN, NAN, NAN, NAN, NAN, NAN, NAN, z);
            continue;
        }
        rc = dh_err("file '%s' line %ld: not a probe line: '%.60s'", path, lineno, p);
    }
    free(line);
    fclose(f);
    return rc;
}
