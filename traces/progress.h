/* progress.h: a progress bar on stderr for long runs of the command-line tools.
 *
 * The bar is drawn only when stderr is a terminal, and only once a run has
 * lasted half a second, so short runs, pipes and logs stay clean. It redraws
 * at most ten times a second: cost O(1) per update call otherwise.
 *
 *   progress bar;
 *   progress_init(&bar, "writing");
 *   trace_write(path, src, progress_update, &bar);   // a trace_progress_fn
 *   progress_done(&bar);                              // erases the bar */
#ifndef DH_PROGRESS_H
#define DH_PROGRESS_H

#include <stdint.h>

typedef struct {
    const char *label;
    int enabled;          /* stderr is a terminal */
    int drawn;            /* something is on the line */
    double t_start, t_drawn;
} progress;

void progress_init(progress *p, const char *label);
/* (done, total) in any unit; arg is the progress. */
void progress_update(uint64_t done, uint64_t total, void *arg);
void progress_done(progress *p);

#endif
