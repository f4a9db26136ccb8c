/* rsim.h: a GPU replay configuration (rcfg.h) run in the simulator, in-process.
 *
 * The run is the one `dhsim` makes with the replay's settings: the instance of
 * [replay], the batch of the configuration (concurrency = requests x
 * attention_dp, workload.requests, prompt_len, output_len, steps), the shared
 * and the configuration's overrides, trace.seed, then the caller's overrides
 * (e.g. hw.layer_fixed_s while a coefficient is refitted), the profile as
 * instance.hw, and a verification policy's mode (spec.mode) last, as dhsim
 * appends a column's mode. One run costs what the simulator costs:
 * O(steps x requests x layers) plus the rows that change. */
#ifndef DH_RSIM_H
#define DH_RSIM_H

#include "analysis/rcfg.h"
#include "sim/sim.h"

/* Simulate configuration c of set s with hardware profile `profile` and n_sets
 * extra overrides "SECTION.KEY=VALUE". res->policy is named as dhsim names the
 * column (POLICY, or POLICY+MODE for verification steps). 0, or -1 with dh_err(). */
int rsim_run(const rcfg_set *s, const rcfg_config *c, const char *profile, char *const *sets, int n_sets,
             sim_result *res);

/* Run configurations c[0..n-1] on up to `threads` threads (results do not depend
 * on it: each run is deterministic), res[i] for c[i]. On error every result is
 * released and the first failing configuration's message is kept. */
int rsim_run_many(const rcfg_set *s, const rcfg_config *const *c, size_t n, const char *profile, char *const *sets,
                  int n_sets, int threads, sim_result *res);

/* Write dir/ID.tsv, the per-step timeline dhsim --timeline writes (sim/out.h),
 * creating dir if needed. 0, or -1 with dh_err(). */
int rsim_write_timeline(const char *dir, const char *id, const sim_result *res);

#endif
