/* out.h: reports of simulation results.
 *
 * out_table   a readable table, one column per result (policies side by side);
 * out_json    the same figures as one JSON object {"runs": [...]}; with the
 *             inputs (out_json_inputs) each run ends with its "inputs" (its
 *             configuration digest, its own overrides, and every entry of its
 *             instance, model and hardware files after the overrides), and the
 *             object ends with "inputs": the tool, the commit, the config file
 *             and overrides as given, and the command-line options that are
 *             not config keys;
 * out_tsv     the per-step timelines as one TSV table in long form: one header,
 *             then one row per (policy, step), the policy and its speculative
 *             mode first (pandas.read_csv(path, sep="\t") reads it whole);
 * out_h5      the same timelines as HDF5, one 1-D dataset per column under
 *             /timeline/<policy>/, each with its "unit" and "description"
 *             attributes; each group carries its run's inputs and the root the
 *             command line's (out_h5_inputs; docs/OUTPUTS.md lists them all).
 * out_tsv and out_h5 write the path they are given; the tool gives them a
 * temporary name (common/ofile.h) and renames every output only once all of
 * them are complete, so a failing timeline leaves no report behind either.
 * Wall-clock figures (rows decided per second of wall time) are not
 * deterministic; they appear in the table, and in JSON only when asked, so
 * that the same inputs and seed give byte-identical JSON and TSV. The thread
 * count and the output paths are not recorded among the inputs for the same
 * reason: they do not change a figure. */
#ifndef DH_OUT_H
#define DH_OUT_H

#include <stdio.h>
#include <stdint.h>

#include "common/cfg.h"
#include "sim/prov.h"
#include "sim/sim.h"

/* A command-line option that is not a config key, as the records give it:
 * its name as typed ("--policy") and a text, a number or a flag. */
typedef enum { OUT_OPT_STR, OUT_OPT_NUM, OUT_OPT_BOOL } out_opt_kind;
typedef struct {
    const char *name;
    out_opt_kind kind;
    const char *str;   /* OUT_OPT_STR */
    double num;        /* OUT_OPT_NUM; OUT_OPT_BOOL: 0 or 1 */
} out_opt;

/* One result's inputs: its configuration after every override (prov.h). */
typedef struct {
    const cfg *files[PROV_N_FILES];
    char digest[17];
    char *const *sets;  /* the column's own overrides, after the command line's */
    int n_sets;
    uint64_t seed;
    uint32_t steps;
} out_run_inputs;

/* What a report was made from. */
typedef struct {
    const char *tool, *commit;
    const char *config;       /* the instance file as given (--config) */
    char *const *sets;        /* the overrides in command-line order (--set, --steps, ...) */
    int n_sets;
    const out_opt *opts;
    int n_opts;
    out_run_inputs base;      /* the command line's configuration, before any column's overrides */
    const out_run_inputs *run; /* [n]: one per result */
} out_inputs;

int out_table(FILE *f, const sim_result *r, int n);
int out_json(FILE *f, const sim_result *r, int n, int with_wall);
/* out_json with the inputs recorded (in NULL: none, as out_json). */
int out_json_inputs(FILE *f, const sim_result *r, int n, int with_wall, const out_inputs *in);
int out_tsv(const char *path, const sim_result *r, int n);
int out_h5(const char *path, const sim_result *r, int n);
/* The unit of a figure of the JSON run object ("tok_s_per_gpu": "tokens/s"; nested
 * keys joined with '_' as a flattening reader names them, "ci95_half_X" and a sweep
 * table's "X_mean" and "X_ci95" as X), or of a config key "section.key" (its schema
 * row's); "" for counts, flags and names, "1" for ratios; NULL when unknown. */
const char *out_unit_of(const char *name);
/* out_h5 with the inputs as attributes (in NULL: units and descriptions only). */
int out_h5_inputs(const char *path, const sim_result *r, int n, const out_inputs *in);

#endif
