/* prof.h: writes fitted coefficients into the simulator's hardware profile
 * (models/hw/<gpu>.ini, schema in sim/hw.h) and checks profiles.
 *
 * The fitted physics forms (fitcost.h) are translated into the keys the
 * simulator reads:
 *   fetch   -> [gather] the fitted form's keys (sim/hw.h), the fit's own
 *              coefficients in seconds and bytes: sm_row_s, row_issue_s,
 *              row_issue_s_per_byte, link_s_per_byte, density_s, density_pow,
 *              page_s, page_reach, walk_reach_bytes (the page term of the
 *              pattern fetch_pattern), launch_s = t0; the base's table keys
 *              are dropped. The simulator evaluates the fitted form itself
 *              (sim/cost.c), so nothing is re-derived from it.
 *   beside  -> [gather] beside_max, beside_half, beside_steepness.
 *   hbm     -> [hw] hbm_bw and kernel_launch_s (from the attention kernel);
 *   gemm    -> [hw] mma_efficiency = achieved / peak rate, averaged over the
 *              dtypes fitted (peaks stay the base profile's datasheet figures).
 * Every other key is kept as the base profile has it, with its comment.  Each
 * replaced key gets comment lines starting "; dhcal:" naming the CSV files,
 * kernel and version, the fit's points, residual RMS, R^2, coefficients with
 * standard errors and the fitted range; old "; dhcal:" lines are dropped, so
 * refitting a fitted profile is idempotent.  A [fit_range] section records
 * "<section>_<input> = min, max" for every fitted input; the simulator's loader
 * and `dhcal check-range` report points outside it.  The output is written to
 * a temporary file, loaded back through the simulator's own loader, and only
 * then renamed over the target: a failed fit leaves no half-written profile. */
#ifndef DH_PROF_H
#define DH_PROF_H

#include "analysis/fitcost.h"

typedef struct {
    const char *base_path;     /* profile whose unfitted keys are kept */
    const char *fetch_pattern; /* pattern group whose page term the profile takes ("serving") */
    const char *command;       /* recorded in the header comment */
    const char *weight_dtype;  /* the GEMM dtype whose fit gives weight_bw, layer_fixed_s, mma_efficiency */
    double layer_gemms;        /* GEMM launches per layer for layer_fixed_s (NAN: not given) */
    const char *carry_path;    /* a file of [hw] keys written into the profile as they are:
                                * rates measured or published elsewhere that no fit here
                                * gives (the prefill GEMM table), or NULL */
} prof_opts;

/* The fit's inputs from the base profile: page_bytes and region_bytes (0 when not given) of
 * its [gather] (the fit must count pages and regions as the simulator does) and its roofline
 * (the tensor term of the attention and GEMM forms). */
int prof_base_inputs(const char *base_path, fit_opts *fo);

int prof_write(const prof_opts *o, const fit_section *secs, size_t nsec, const char *out_path, FILE *log);

/* A profile's output, written beside out_path under a registered temporary name
 * (common/ofile.h: a signal or an error removes it), from in_path. 0 with *in, *out and
 * *tmp set, or -1 with dh_err() and nothing left open. */
int prof_out_open(const char *in_path, const char *out_path, FILE **in, FILE **out, char **tmp);

/* Close out; when rc is 0, check the profile it holds (prof_check, failures prefixed by
 * what) and rename it to out_path; otherwise, or when the check fails, remove it.
 * Returns rc, or -1 when closing, the check or the rename fails. */
int prof_out_finish(FILE *out, char *tmp, const char *out_path, int rc, const char *what);

/* Load through the simulator's loader, require every key known, check the
 * values are physical and [fit_range] well-formed.  0 or -1 with dh_err(). */
int prof_check(const char *path);
/* The attention version the profile at path was fitted on ([fitted_kernels] attention), 0 where
 * it records none; -1 with dh_err() when the profile does not load. */
int prof_fitted_attention(const char *path, long *version);

/* Whether value lies in [fit_range] name = min, max of the profile: *inside
 * set, min/max returned.  -1 if the profile has no such range. */
int prof_check_range(const char *path, const char *name, double value, int *inside, double *min, double *max);

#endif
