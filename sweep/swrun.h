/* swrun.h: running the units of a sweep in-process on worker threads.
 *
 * Each unit (a point at one seed, swdef.h) runs every policy; its results go
 * to OUTPUT/points/pPPPPPP-sSEED.json, written to a temporary name and
 * renamed, so a file that exists is whole. A unit whose file exists, parses,
 * and names this sweep's digest, unit and policies, all with status "ok", is
 * skipped: a killed sweep restarts where it stopped, and a unit that failed
 * runs again. A policy whose run fails is recorded with its error and the
 * others go on.
 *
 * Sharing: every (unit, policy) is a task. Tasks whose selection streams
 * come from one generation (same preset and generator overrides, trace seed,
 * keyframe interval and selection groups: they differ only in policy knobs,
 * such as the HiSparse budget, in the policy, or in the number of requests,
 * such as the concurrency) form a group, run one after the other in the
 * queue, the largest shape first, and hold one generator source open until
 * the group's last task ends, so gen_source_new_shared (traces/gen.h)
 * generates each stream once for the whole group, as dhsim --compare does
 * for one point: a smaller shape's streams are the largest one's first
 * requests'. Within a group, a task whose results another gives (the same
 * configuration but for [policy] keys its policy does not read,
 * pol_ops.knobs: resident and adaptive across HiSparse budgets) is not run:
 * the first one's run is copied into it (--no-reuse runs it).
 * Parallelism keeps the sharing: the workers take the queue's tasks in
 * order, so they work in one group at a time; MPI ranks and shards split
 * the units by u % parts, which keeps a group whole only when the split
 * falls along the seeds (seeds a multiple of the parts, as in
 * sweeps/bench-1000.ini); otherwise each rank generates the groups' streams
 * it needs itself.
 *
 * Determinism: a task's result depends only on its inputs, and each unit's
 * file is written from its own results in policy order, so the files (and
 * the merged table, swtab.h) are the same bytes for any worker count, shard
 * split or completion order. */
#ifndef DH_SWRUN_H
#define DH_SWRUN_H

#include <stddef.h>

#include "sweep/swdef.h"

typedef struct {
    int workers;         /* threads (>= 1) */
    size_t part, parts;  /* run the units u with u % parts == part */
    int progress;        /* a progress bar on stderr when it is a terminal */
    const char *commit;  /* recorded in every unit file */
    /* Called once every task of this part is checked, with ok = 1 or 0; the
     * run goes on only if it returns 1. MPI ranks agree here, so that one
     * rank's bad configuration stops them all before any runs (NULL: ok). */
    int (*agree)(int ok, void *arg);
    int check_only;      /* check every task of the part, done or not, and run nothing */
    int no_reuse;        /* run every task, even those whose results another task gives */
    void *agree_arg;
} swrun_opts;

typedef struct {
    size_t units;        /* units of this part */
    size_t skipped;      /* already done */
    size_t ran, failed;  /* units run now, and those with a failing policy */
    size_t tasks;        /* (unit, policy) runs now */
    size_t reused;       /* of them, copied from an equal task instead of run */
} swrun_stats;

/* Check every task's configuration of this part (nothing runs if one is
 * wrong), then run the units not done yet. 0 (failed units are counted, not
 * errors), or -1 with dh_err() for a bad configuration or a write error. */
int swrun_run(const swdef *d, const swrun_opts *o, swrun_stats *st);
/* The results file of unit u. */
void swrun_point_path(const swdef *d, size_t u, char *buf, size_t cap);

#endif
