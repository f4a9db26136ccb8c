/* valid.h: step-by-step comparison of GPU replay measurements with the
 * simulator's predictions (`dhcal validate`).
 *
 * Replay file (CSV, written by the GPU replay; format in analysis/README.md):
 *   config_id,policy,mode,step,measured_us,misses,selected,heldout
 * one line per decode step of one (configuration, policy, mode); misses and
 * selected are summed over the step's requests and layers; heldout is 1 for a
 * configuration kept out of the fit.
 * Prediction file (CSV or TSV, the simulator's per-step output):
 *   config_id,policy,mode,step,predicted_us,misses
 * Lines join on (config_id, policy, mode, step); a step present in one file
 * and not the other is an error, never skipped.  Join is a sort plus a merge,
 * O(n log n). */
#ifndef DH_VALID_H
#define DH_VALID_H

#include "analysis/fit.h"
#include "sim/sim.h"

#include <stdio.h>

typedef struct {
    char config[64], policy[32], mode[32];
    long step;
    double measured_us, predicted_us;
    long misses_meas, misses_pred, selected;
    int heldout, have_pred;
    int warmup; /* the replay process's first timed step (see val_load_replay) */
    long line;  /* in the replay file */
} val_step;

typedef struct {
    val_step *s;
    size_t n, cap;
    char replay_path[512];
} val_set;

/* A replay configuration in the order of the file: the mode and heldout of its
 * first line. */
typedef struct {
    char config[64], mode[32];
    int heldout;
} val_config;

void val_init(val_set *v);
void val_release(val_set *v);
/* Load a replay file. Its first step (the lowest line: a file is one dhreplay call) is the
 * process's warm-up: it also pays the process's one-time costs (kernel modules loaded at their
 * first launch, the libraries' first calls), so that the same configuration's step 0 is 15 ms
 * slower when it runs first (measurements/h200/replay-glm53-16x100k.csv: hs4k 66.4 ms,
 * hs4k-seed2 50.3) and lazy loading alone adds 11 ms (replay-glm53-64x25k-loading.csv). It is
 * marked warmup: val_summarize and the refit leave it out of the times (its misses are still
 * compared), and val_report prints it apart. */
int val_load_replay(val_set *v, const char *path);
/* The attention version the replay CSV at path records on its "# device:" lines (bin/dhreplay
 * writes "attention version N"): *version = N, 0 where it records none; a malformed version or
 * two versions in one file: an error naming the file and the line (who prefixes it). */
int val_replay_attention(const char *path, const char *who, int *version);
/* Join one prediction file (several may be given, e.g. one per config). */
int val_add_predictions(val_set *v, const char *path);
/* Join a dhsim per-step timeline (dhsim --timeline PREFIX writes PREFIX.tsv):
 * one header with policy, step, t_start_s, t_end_s and missed_rows, one line
 * per policy and step (timelines written before the long form: blocks
 * "# policy NAME", each with a header without the policy); predicted_us = (t_end_s - t_start_s) * 1e6,
 * less the step's draft_s in mode "verify" (a GPU replay of verification steps
 * runs no draft model). The timeline does not name the configuration or the
 * decode mode: the caller gives them (dhcal validate --sim-timeline FILE:CONFIG:MODE). */
int val_add_dhsim_timeline(val_set *v, const char *path, const char *config, const char *mode);
/* Join a simulator run's per-step timeline as val_add_dhsim_timeline joins
 * the file dhsim writes for it: the times and counts are taken at the
 * precision the file prints them (VAL_TIMELINE_DIGITS significant digits), so
 * that a comparison made in-process and one made from the files give the same
 * bytes. The policy is the run's (r->policy). */
int val_add_sim_result(val_set *v, const sim_result *r, const char *config, const char *mode);
/* A timeline value as dhsim's timeline file holds it (sim/out.h prints %.10g). */
#define VAL_TIMELINE_DIGITS 10
double val_timeline_value(double x);
/* The configurations of a loaded replay in the order they first appear in its
 * file (*out is allocated; free() it). */
int val_configs(const val_set *v, val_config **out, size_t *n);
/* Error naming the first replay step without a prediction. */
int val_check_complete(const val_set *v);

typedef struct {
    size_t steps, miss_mismatch_steps;
    fit_errdist err;      /* |pred - meas| / meas */
    long misses_meas, misses_pred;
    double mean_meas_us, mean_pred_us;
} val_summary;

/* Summary of the steps with heldout == which (which < 0: all), optionally of
 * one (config, policy, mode) (NULLs: any); a warm-up step counts in the misses only. */
void val_summarize(const val_set *v, int which, const char *config, const char *policy, const char *mode,
                   val_summary *out);

/* The full report: one line per (config, policy, mode), then the fit and
 * held-out groups; steps != 0 also prints every step side by side. */
void val_report(const val_set *v, int steps, FILE *out);

#endif
