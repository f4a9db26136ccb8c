/* test_sim_src.h: small in-memory selection workloads for the simulator's
 * tests (included by tests/test_sim_*.c). A random walk over the context: at
 * each position a fraction `churn` of the selection is replaced by rows drawn
 * from a recent-biased mix (re-references of rows seen before and fresh rows),
 * so LRU, MIN and budgets behave non-trivially. Everything comes from a
 * seeded Philox stream, so a workload is reproducible. */
#ifndef TEST_SIM_SRC_H
#define TEST_SIM_SRC_H

#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "traces/memsrc.h"
#include "traces/sel.h"

static inline int ts_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Fill src's stream (r, g) with a random walk of npos positions. */
static inline void ts_walk(sel_source *src, const trace_shape *sh, uint32_t r, uint32_t g, double churn, uint64_t seed)
{
    uint32_t k = sh->group_k[g], npos = sh->output_len[r];
    uint32_t maxrows = sel_rows_at(sh, r, g, npos ? npos - 1 : 0);
    uint8_t *in = calloc(maxrows + 1, 1);
    uint32_t *cur = malloc(k * sizeof *cur), *srt = malloc(k * sizeof *srt);
    rng_stream s;
    rng_init(&s, seed, r, g, 77);
    uint32_t n = 0;
    for (uint32_t pos = 0; pos < npos; pos++) {
        uint32_t nrows = sel_rows_at(sh, r, g, pos);
        uint32_t want = nrows < k ? nrows : k;
        uint32_t drop = pos == 0 ? 0 : (uint32_t)(churn * n);
        for (uint32_t i = 0; i < drop && n > 0; i++) {
            uint32_t j = rng_below(&s, n);
            in[cur[j]] = 0;
            cur[j] = cur[--n];
        }
        while (n < want) {
            uint32_t x;
            double u = rng_uniform(&s);
            if (u < 0.5) x = nrows - 1 - rng_below(&s, nrows < 64 ? nrows : 64); /* recent rows */
            else if (u < 0.8) x = rng_below(&s, nrows < 4 * k ? nrows : 4 * k);  /* a hot region */
            else x = rng_below(&s, nrows);                                       /* anywhere */
            if (in[x]) continue;
            in[x] = 1;
            cur[n++] = x;
        }
        memcpy(srt, cur, n * sizeof *srt);
        qsort(srt, n, sizeof *srt, ts_cmp_u32);
        memsrc_put(src, r, g, pos, srt, n);
    }
    free(in); free(cur); free(srt);
}

/* A whole source: uniform shape, every stream a random walk. */
static inline sel_source *ts_source(trace_shape *sh, double churn, uint64_t seed)
{
    sel_source *src;
    if (memsrc_new(sh, 16, seed, &src) < 0) return NULL;
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) ts_walk(src, sh, r, g, churn, seed);
    return src;
}

#endif
