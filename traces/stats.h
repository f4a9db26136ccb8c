/* stats.h: locality statistics of a stream of attention selections (dhtrace stats).
 *
 * stats_run() reads every sampled (request, selection group) stream of a
 * sel_source once, request by request with all sampled groups of a request in
 * lockstep, and measures:
 *   - step-to-step overlap per group: |S_t ∩ S_t-1| / k;
 *   - cross-group overlap at the same position: |S_t^g ∩ S_t^g+1| / k for
 *     adjacent sampled groups;
 *   - the reuse-distance histogram: positions between a row leaving the
 *     selection and re-entering it, in log2 buckets;
 *   - the LRU miss-ratio curve at every budget in one pass (Mattson's stack
 *     algorithm adapted to whole-selection accesses, O(changed rows) per
 *     position);
 *   - FIFO, random and Belady MIN miss rates at chosen budgets;
 *   - the mean size of the union of q consecutive selections, q = 1..8,
 *     relative to k (the verification union).
 *
 * The cache model (one hot buffer of B rows per (request, group), B >= k):
 * at each position the whole selection is accessed and must be resident
 * afterwards; a selected row that was not resident before the position is a
 * miss. Position 0 is warm-up: its rows fill the buffer and are counted
 * neither as accesses nor as misses; every later position counts all its
 * selected rows as accesses (miss rate = misses / selected rows over
 * positions >= 1). Rows selected for the first time after position 0 are
 * compulsory misses at every budget. Eviction, when a miss finds the buffer
 * full, takes one resident row that is not selected at this position:
 *   LRU    the least recently accessed (last position selected); equal
 *          positions are broken by row index, the smaller index is evicted first;
 *   FIFO   the earliest inserted (hits do not reorder);
 *   random one uniformly at random, from a Philox stream keyed by
 *          (options seed, request, group);
 *   Belady the one whose next access is furthest in the future (never
 *          accessed again counts as infinitely far); ties evict the larger
 *          row index.
 * Each policy's misses are counted per budget in rows; a budget given as a
 * multiple of k resolves per group to ceil(mult · k) rows.
 *
 * Cost: O(1) per changed row for every statistic and policy, O(1) per
 * eviction of the random policy, and small terms per position (stats.c says
 * which); a budget at which every position selects exactly B rows, or which
 * exceeds every row the stream selects, needs no simulation at all. The
 * deltas of one stream are held in memory (every policy replays them, and
 * Belady needs the future), with a few per-row arrays per budget
 * (bench/RESULTS-traces.md has the measured throughput). */
#ifndef DH_STATS_H
#define DH_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "traces/sel.h"

#define STATS_MAX_BUDGETS 16
#define STATS_MAX_Q 8
#define STATS_REUSE_BUCKETS 32 /* bucket b counts distances in [2^b, 2^(b+1)) */
#define STATS_MRC_RES 64       /* the LRU curve is exact at every budget that is a multiple of k/64 */
#define STATS_MRC_MAX (1u << 24) /* LRU curve bins (128 MiB): contexts up to 2^18 times k */

enum { STATS_LRU = 0, STATS_FIFO, STATS_RANDOM, STATS_BELADY, STATS_N_POLICIES };

/* A budget: either k_mult > 0 (a multiple of each group's k) or rows > 0. */
typedef struct {
    double k_mult;
    uint32_t rows;
} stats_budget;

typedef void (*stats_progress_fn)(uint64_t done, uint64_t total, void *arg);

typedef struct {
    uint32_t n_budgets;
    stats_budget budgets[STATS_MAX_BUDGETS];
    uint32_t union_qmax;  /* 1 .. STATS_MAX_Q */
    int fifo, random, belady; /* which fixed-budget policies to simulate besides LRU */
    /* Sampling (any non-default value is stated in every output): requests
     * and groups taken with a stride, at most max_* of them (0 = no cap), and
     * the first max_positions positions of each stream (0 = all). */
    uint32_t request_step, max_requests;
    uint32_t group_step, max_groups;
    uint32_t max_positions;
    uint64_t seed;        /* random eviction */
    stats_progress_fn progress; /* called with (streams done, total); may be NULL */
    void *progress_arg;
} stats_options;

/* Per group (and summed over groups as the report's total). */
typedef struct {
    uint64_t streams;      /* sampled streams */
    uint64_t positions;    /* positions >= 1 */
    uint64_t selected;     /* selected rows at those positions (the accesses) */
    uint64_t added;        /* rows entering the selection (= LRU misses at B = k) */
    uint64_t cold;         /* rows selected for the first time in their stream */
    double overlap_sum, overlap_sq; /* per-position step overlap |S_t ∩ S_t-1| / k */
    double overlap_min, overlap_max;
    uint64_t cross_positions; /* positions compared with the next sampled group */
    double cross_sum;         /* sum of |S^g ∩ S^next| / k */
    uint64_t miss[STATS_N_POLICIES][STATS_MAX_BUDGETS]; /* per policy and budget */
    uint32_t k;               /* this group's k (0 in the total when groups differ) */
} stats_group;

typedef struct {
    stats_options opt;
    int sampled;              /* 1 when any sampling option cut the trace */
    char model[64], preset[64];
    uint64_t seed;            /* the trace's seed */
    uint32_t n_requests, n_groups;          /* in the trace */
    uint32_t requests_used, groups_used;    /* analysed */
    uint32_t *group_used;     /* [n_groups] 1 if analysed */
    stats_group *group;       /* [n_groups] */
    stats_group total;
    uint64_t reuse_hist[STATS_REUSE_BUCKETS];
    /* LRU stack distances of re-entering rows, in units of k/STATS_MRC_RES:
     * mrc_hist[i] counts rows whose distance d satisfies
     * ceil(STATS_MRC_RES · d / k) == i (first-time rows are in total.cold). */
    uint64_t *mrc_hist;
    uint32_t mrc_len;
    double union_sum[STATS_MAX_Q + 1]; /* sum over windows of |S_t ∪ .. ∪ S_t+q-1| / k */
    uint64_t union_n[STATS_MAX_Q + 1];
} stats_report;

/* Defaults: budgets 1k,2k,4k, q up to 8, all policies, no sampling, seed 1. */
void stats_options_init(stats_options *o);
/* Parse a budget list: "1k,2k,1.5k" (multiples of k) or "4096,8192" (rows), mixed allowed. */
int stats_parse_budgets(stats_options *o, const char *list);

/* Analyse src. 0 or -1 with dh_err() set (a bad stream, or a budget below k). */
int stats_run(sel_source *src, const stats_options *o, stats_report **out);
void stats_report_free(stats_report *r);

/* Miss rate (misses / selected rows) of a policy at budget index b, for group
 * g or the total (g = -1); NaN when nothing was measured. */
double stats_miss_rate(const stats_report *r, int policy, uint32_t b, int g);
/* LRU miss rate over all sampled streams at budget k_mult · k, exact when
 * k_mult is a multiple of 1/STATS_MRC_RES (rounded down to one otherwise). */
double stats_lru_curve(const stats_report *r, double k_mult);
/* Mean step overlap of group g (-1: all); mean cross-group overlap likewise. */
double stats_step_overlap(const stats_report *r, int g);
double stats_cross_overlap(const stats_report *r, int g);
/* Mean union of q consecutive selections relative to k. */
double stats_union(const stats_report *r, uint32_t q);

/* The measured value of a named statistic, as presets name their targets:
 *   POLICY_miss_Mk               POLICY in lru, fifo, random, belady; budget M·k
 *                                (LRU at any multiple of k/64 from the curve,
 *                                the others must be among the report's budgets)
 *   step_overlap_mean_groups_A_B mean over groups A..B of their mean step overlap
 *   step_overlap_min_groups_A_B  smallest (largest: _max_) per-group mean in A..B
 *   cross_overlap_mean           mean overlap of adjacent sampled groups
 *   union_Q                      mean union of Q consecutive selections / k
 * 0, or -1 with dh_err() set for an unknown name or a statistic not measured. */
int stats_target_value(const stats_report *r, const char *name, double *out);

/* Output: a human-readable table, JSON (one object), or TSV for gnuplot
 * (one block per statistic, separated by two blank lines, each headed by a
 * "# name" comment and a column header). 0 or -1 on a write error. */
int stats_print_table(FILE *f, const stats_report *r);
int stats_print_json(FILE *f, const stats_report *r);
int stats_print_tsv(FILE *f, const stats_report *r);

#endif
