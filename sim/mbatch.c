/* mbatch.c: micro-batch tallies; see mbatch.h. */
#include "sim/mbatch.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

/* The per-group arrays of a step_mb, listed once. A step_mb that grows an
 * array grows STEP_MB_ARRAYS, and the entry left NULL here fails at once. */
static void arrays_of(step_mb *m, double **a[STEP_MB_ARRAYS])
{
    double **list[STEP_MB_ARRAYS] = { &m->sel, &m->miss, &m->pages, &m->idx_rows, &m->written,
                                      &m->regions, &m->stage, &m->stage_pages, &m->stage_regions };
    memcpy(a, list, sizeof list);
}

void mbatch_init(mbatch *s, uint32_t n_mb, uint32_t n_groups)
{
    s->n = n_mb;
    s->G = n_groups;
    s->mb = dh_calloc(n_mb ? n_mb : 1, sizeof *s->mb);
    s->store = dh_calloc((size_t)(n_mb ? n_mb : 1) * STEP_MB_ARRAYS * (n_groups ? n_groups : 1), sizeof *s->store);
    for (uint32_t i = 0; i < n_mb; i++) {
        double **a[STEP_MB_ARRAYS];
        arrays_of(&s->mb[i], a);
        for (int j = 0; j < STEP_MB_ARRAYS; j++) *a[j] = s->store + ((size_t)i * STEP_MB_ARRAYS + j) * n_groups;
    }
}

void mbatch_clear(mbatch *s)
{
    memset(s->store, 0, (size_t)s->n * STEP_MB_ARRAYS * s->G * sizeof *s->store);
    for (uint32_t i = 0; i < s->n; i++) s->mb[i].n_req = s->mb[i].tokens = s->mb[i].window_rows = s->mb[i].ctx_tokens = 0;
}

void mbatch_release(mbatch *s)
{
    free(s->mb);
    free(s->store);
    memset(s, 0, sizeof *s);
}
