/* out.h: reports of simulation results.
 *
 * out_table   a readable table, one column per result (policies side by side);
 * out_json    the same figures as one JSON object {"runs": [...]};
 * out_tsv     the per-step timeline as TSV for gnuplot (one row per step);
 * out_h5      the same timeline as HDF5, one 1-D dataset per column under
 *             /timeline/<policy>/.
 * out_tsv and out_h5 write the path they are given; the tool gives them a
 * temporary name (common/ofile.h) and renames every output only once all of
 * them are complete, so a failing timeline leaves no report behind either.
 * Wall-clock figures (rows decided per second of wall time) are not
 * deterministic; they appear in the table, and in JSON only when asked, so
 * that the same inputs and seed give byte-identical JSON and TSV. */
#ifndef DH_OUT_H
#define DH_OUT_H

#include <stdio.h>

#include "sim/sim.h"

int out_table(FILE *f, const sim_result *r, int n);
int out_json(FILE *f, const sim_result *r, int n, int with_wall);
int out_tsv(const char *path, const sim_result *r, int n);
int out_h5(const char *path, const sim_result *r, int n);

#endif
