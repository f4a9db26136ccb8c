/* cores.h: the process's idle worker threads, lent to a parallel section inside one job.
 *
 * A tool runs its jobs (policies, deployment points, sweep points) on a pool of N threads.
 * When there are fewer jobs than threads, or once a worker finds no more jobs, its thread
 * would idle while the last, longest job runs alone. The pool lends each such thread here
 * (cores_lend), and a job's own parallel section (the admission's stream opens, sim/admit.c)
 * borrows what is lent at that moment, never waiting (cores_borrow), and gives it back when
 * it is done (cores_give_back). At its end the pool takes back all it lent (cores_withdraw).
 *
 * Only how many threads work changes, never what they compute: a section borrows only for
 * work whose results do not depend on the thread that did it, and merges them in a fixed
 * order. Nothing is lent unless a pool lends it, so a library caller runs sequentially. */
#ifndef DH_CORES_H
#define DH_CORES_H

#include <stddef.h>

/* Run fn(arg) on min(threads, jobs) threads (on the caller's own when none can be started);
 * fn takes jobs from arg until none is left, then returns. The threads the jobs cannot use
 * from the start, and each worker's thread as its fn returns, are lent until every worker has
 * returned, then withdrawn. Returns the number of threads started (0: the caller ran fn). */
int cores_run_pool(int threads, size_t jobs, void *(*fn)(void *), void *arg);

/* n threads become available (n >= 0). */
void cores_lend(int n);
/* Up to want of the lent threads, taken at once; 0 when none is lent. */
int cores_borrow(int want);
/* Give back n borrowed threads. */
void cores_give_back(int n);
/* The pool that lent n threads in all takes them back (every borrower has given back). */
void cores_withdraw(int n);

#endif
