/* calibrate.h: the calibration of a hardware profile (`dhcal fit`, `dhcal refit`,
 * `dhcal calibrate`).
 *
 * cal_fit       fits the cost forms to dhbench CSVs (fitcost.h) and writes the
 *               fitted keys into a profile (prof.h), with the fit report.
 * cal_refit     one coefficient refitted on the replay from two simulator runs
 *               (refit.h), its report, and the profile written once converged.
 * cal_calibrate the H200 calibration in one call, the simulator run in-process
 *               (rsim.h) on the replay's fitted configurations:
 *   1. cal_fit on the kernel benchmarks of BENCH_DIR, every key the step model
 *      uses, from the kernel versions the replay runs (the selections, held-out
 *      lines and their reasons are in cal_calibrate's table in calibrate.c);
 *      layer_fixed_s starts as 8 GEMM launches per layer x the GEMM's fixed cost;
 *   2. [hw] fetch_interference from the replay's diagnostics: per fitted
 *      configuration (its step - the step without the fetch) / the fetch alone,
 *      steps 4-11, then the mean over the configurations;
 *   3. [hw] compute_interference, solved by the secant from 0 and 1 (until the
 *      value repeats at 4 significant digits) so that the simulator's fetch time
 *      per step (pcie_h2d_util x the step, steps 4-11), summed over the fitted
 *      configurations, equals the fetch kernels' time measured in those steps
 *      (dhreplay --fetch-times);
 *   4. layer_fixed_s refitted on whole decode steps of the fitted configurations
 *      (runs at two values, the least-squares solution, a run at it, until the
 *      solution repeats at 4 significant digits); compute_interference solved
 *      again at the refitted value and layer_fixed_s refitted once more;
 *   5. the interference keys written into [hw] with their provenance, and the
 *      refitted layer_fixed_s with its statistics (refit_write).
 * Deterministic: the same inputs give the same bytes. The arithmetic is that of
 * the shell version this replaces (analysis/README.md): values that it passed
 * through text (the timelines' %.10g, the per-configuration fetch time's %.9g,
 * the keys' %.4g) are rounded the same way here, so the profile is identical.
 * Each simulator run is made once (runs are cached by their coefficients). */
#ifndef DH_CALIBRATE_H
#define DH_CALIBRATE_H

#include "analysis/fitcost.h"
#include "analysis/prof.h"
#include "analysis/valid.h"

#include <stdio.h>

/* Print one fitted section as the fit report does. */
void cal_print_section(FILE *f, const fit_section *s);

/* Load the CSVs bench[0..nbench-1], fit with fo, print the report to report and
 * notes to log; when out is given, write the profile (po->base_path its base).
 * 0, or -1 with dh_err(). */
int cal_fit(const char *const *bench, size_t nbench, fit_opts *fo, prof_opts *po, const char *out, FILE *report,
            FILE *log);

/* The replay loaded into v and joined with one simulator run of each fitted
 * configuration (heldout = 0; held-out ones are not needed and not joined):
 * add(v, config, mode, ctx) joins the run of each (config, mode), once. 0, or
 * -1 with dh_err(). */
typedef int (*cal_join_fn)(val_set *v, const char *config, const char *mode, void *ctx);
int cal_refit_join(val_set *v, const char *replay, cal_join_fn add, void *ctx);

/* Refit SECTION.KEY (key) from joins a and b at values at[0] and at[1] (runs
 * described by where[0], where[1] in the report); print the report; with out,
 * write profile in with the solution (only when it is at[1] at REFIT_DIGITS:
 * converged), else an error. *value gets the solution as printed. */
int cal_refit(const char *replay, const char *key, const double at[2], const char *const where[2], const val_set *a,
              const val_set *b, const char *in, const char *out, FILE *report, char *value, size_t value_cap);

typedef struct {
    const char *out_path;      /* the profile written (models/hw/h200.ini) */
    const char *bench_dir;     /* the kernel benchmarks and the replay diagnostics */
    const char *replay_path;   /* the GPU replay CSV the refit and the interference use */
    const char *base_path;     /* the profile whose unfitted keys are kept */
    const char *configs_path;  /* replay configurations (NULL: rcfg.h's default) */
    int threads;               /* simulator runs at once (results do not depend on it) */
} cal_opts;

/* The whole calibration; the report goes to report when everything succeeded,
 * the fit's notes to log as they come. The profile is written only at the end;
 * on error nothing is written. 0, or -1 with dh_err(). */
int cal_calibrate(const cal_opts *o, FILE *report, FILE *log);

#endif
