/* swtab.h: the merged results table of a sweep.
 *
 * One row per (point, seed, policy), in unit order and then policy order
 * (never completion order), read from the units' files under DIR/points
 * (swrun.h). Columns: point, seed, policy, status, error; every input key
 * (config, the [base] keys, workload.steps, trace.seed, the axes); commit,
 * sweep_digest, config_digest; then every field of the simulator's JSON run
 * object (out_json, sim/out.h; nested objects flattened with '_', arrays
 * counted as KEY_n). With two or more seeds, each numeric metric M is
 * followed by M_mean and M_ci95 over the successful seeds of its
 * (point, policy): the mean and the 95 % half-width s t(0.975, n-1) / sqrt(n)
 * (Student's t, GSL), and ci_n holds n; the simulator reports point figures
 * only, so this is the interval.
 *
 *   DIR/results.csv   RFC 4180 CSV, a header line, empty cells for no value
 *   DIR/results.h5    /results, a compound dataset of the same columns
 *                     (numbers as float64, NaN for no value; text as
 *                     fixed-length strings), which h5py reads as a numpy
 *                     record array and pandas as a DataFrame:
 *                       pandas.DataFrame(h5py.File("DIR/results.h5")["results"][()])
 *                     with the attribute "units", one per field in field order
 *                     (out_unit_of, sim/out.h: "" for counts and text, "1" for
 *                     ratios), and on the root the tool, its commit and the
 *                     sweep's digest (each row holds its point's commit and
 *                     config_digest)
 * Both are written to a temporary name and renamed, byte-reproducibly. */
#ifndef DH_SWTAB_H
#define DH_SWTAB_H

#include <stddef.h>

typedef struct {
    char *name;
    int numeric;         /* every non-empty cell is a finite number */
    char **cells;        /* [n_rows]; NULL: no value */
} swtab_col;

typedef struct {
    swtab_col *cols;
    size_t n_cols, n_rows;
    size_t units, units_found, rows_failed;
    char **axes;         /* the sweep's axis keys */
    size_t n_axes;
    char digest[17];     /* the sweep's (its manifest's) */
} swtab;

/* The sweep manifest, DIR/sweep.json, written by every run of the sweep. */
int swtab_write_manifest(const char *dir, const char *digest, size_t units, size_t n_seeds, char *const *axes, size_t n_axes);
/* Read the units' files of the sweep in dir (its manifest names the digest;
 * files of another sweep are ignored). 0, or -1 with dh_err(). */
int swtab_load(const char *dir, swtab *t);
void swtab_release(swtab *t);
/* The column named name, or NULL. */
const swtab_col *swtab_col_find(const swtab *t, const char *name);
int swtab_write_csv(const swtab *t, const char *path);
int swtab_write_h5(const swtab *t, const char *path);
/* Load, then write DIR/results.csv and DIR/results.h5. */
int swtab_merge(const char *dir, swtab *t);

#endif
