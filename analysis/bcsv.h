/* bcsv.h: reader for the microbenchmark result CSVs written by bin/dhbench.
 *
 * One line per measurement, with a fixed column schema (empty when a column
 * does not apply to the kernel):
 *
 *   suite,kernel,version,device,dtype,row_bytes,rows,sms,pool_bytes,pattern,
 *   batch,queries,k,union_rows,ctx,heads,m,n,kdim,bytes,flops,reps,median_us,
 *   p10_us,p90_us,gbps,tflops,ceiling_name,ceiling_value,pct_of_ceiling,checked[,timing][,arch]
 *
 * The first non-comment line is the header; columns are matched by name, so
 * their order may change, but every column of the schema must be present and
 * no unknown column may appear.  The one optional column, "timing", says how the
 * median was taken: "isolated" (one launch between two events, from an idle
 * GPU; what a file without the column holds) or "b2bN" (N launches back to back
 * between the events, the time divided by N); the other, "arch", the GPU's architecture
 * ("sm_90"; "" in a file without it).  Lines starting with '#' are comments (the
 * command that produced the file).  A numeric cell that is not a finite number
 * is an error naming the file, line and column; an empty numeric cell reads as
 * NAN ("not applicable").  Whole files are read into memory: result files are
 * thousands of lines at most.
 *
 *   bcsv_table t; bcsv_init(&t);
 *   if (bcsv_load(&t, "measurements/h200") < 0) dh_die_last("dhcal");
 *   for (size_t i = 0; i < t.n; i++) use(t.rows[i].v[BCSV_MEDIAN_US]);
 *   bcsv_release(&t); */
#ifndef DH_BCSV_H
#define DH_BCSV_H

#include <stddef.h>

/* Text columns. */
enum { BCSV_SUITE, BCSV_KERNEL, BCSV_VERSION, BCSV_DEVICE, BCSV_DTYPE, BCSV_PATTERN,
       BCSV_CEILING_NAME, BCSV_CHECKED, BCSV_TIMING, BCSV_ARCH, BCSV_NSTR };
/* Numeric columns (NAN when empty). */
enum { BCSV_ROW_BYTES, BCSV_ROWS, BCSV_SMS, BCSV_POOL_BYTES, BCSV_BATCH, BCSV_QUERIES,
       BCSV_K, BCSV_UNION_ROWS, BCSV_CTX, BCSV_HEADS, BCSV_M, BCSV_N, BCSV_KDIM,
       BCSV_BYTES, BCSV_FLOPS, BCSV_REPS, BCSV_MEDIAN_US, BCSV_P10_US, BCSV_P90_US,
       BCSV_GBPS, BCSV_TFLOPS, BCSV_CEILING_VALUE, BCSV_PCT_OF_CEILING, BCSV_NNUM };

typedef struct {
    char *s[BCSV_NSTR];
    double v[BCSV_NNUM];
    int file;   /* index into bcsv_table.files */
    long line;  /* 1-based line number in that file */
} bcsv_row;

typedef struct {
    bcsv_row *rows;
    size_t n, cap;
    char **files;
    size_t nfiles;
} bcsv_table;

void bcsv_init(bcsv_table *t);
void bcsv_release(bcsv_table *t);

/* Append the lines of one CSV file, or of every *.csv file in a directory (in
 * name order, so results do not depend on directory listing order). */
int bcsv_load(bcsv_table *t, const char *path);

/* Column names, for messages and for writing CSVs in the same schema. */
const char *bcsv_str_name(int col);
const char *bcsv_num_name(int col);
/* The schema header line, the required columns in the canonical order (no newline). */
const char *bcsv_header(void);

/* Whether the row's "checked" cell says its output was verified ("1", "yes",
 * "ok", "pass", "true"). */
int bcsv_row_checked(const bcsv_row *r);

#endif
