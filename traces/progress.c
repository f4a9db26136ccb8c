/* progress.c: the stderr progress bar; see progress.h. */
#include "traces/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_DELAY_S 0.5   /* runs shorter than this never show a bar */
#define PROGRESS_PERIOD_S 0.1  /* at most ten redraws a second */
#define PROGRESS_WIDTH 30

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void progress_init(progress *p, const char *label)
{
    p->label = label;
    p->enabled = isatty(STDERR_FILENO);
    p->drawn = 0;
    p->t_start = now_s();
    p->t_drawn = 0;
}

void progress_update(uint64_t done, uint64_t total, void *arg)
{
    progress *p = arg;
    if (!p || !p->enabled || !total) return;
    double t = now_s();
    if (t - p->t_start < PROGRESS_DELAY_S || (t - p->t_drawn < PROGRESS_PERIOD_S && done < total)) return;
    p->t_drawn = t;
    double frac = (double)done / (double)total;
    int fill = (int)(frac * PROGRESS_WIDTH);
    char bar[PROGRESS_WIDTH + 1];
    for (int i = 0; i < PROGRESS_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[PROGRESS_WIDTH] = 0;
    double elapsed = t - p->t_start, left = done ? elapsed * (1 - frac) / frac : 0;
    fprintf(stderr, "\r%s [%s] %3.0f%% %llu/%llu, %.0f s left ", p->label, bar, 100 * frac,
            (unsigned long long)done, (unsigned long long)total, left);
    fflush(stderr);
    p->drawn = 1;
}

void progress_done(progress *p)
{
    if (p->drawn) fprintf(stderr, "\r\033[K");
    p->drawn = 0;
}
