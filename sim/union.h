/* union.h: verification over gamma + 1 query positions of one (request,
 * selection group): the union of their selections, shared missing-row
 * retrieval versus per-query retrieval, the staging buffer, and a lookahead
 * queue of stream positions.
 *
 * Queries t = 0..q-1 are consecutive positions of the selection stream; query
 * 0 (the last accepted token) selects S_0 and each later query arrives as a
 * delta (added, removed) against the one before it. Consecutive selections
 * share most rows, so the union is
 *     U = S_0  +  X,   X = (S_1 u ... u S_{q-1}) \ S_0,
 * and only X -- the rows the drafts add -- is ever touched: S_0 is known by a
 * membership callback (e.g. hotbuf_selected on the hot buffer that applied S_0)
 * and its size. Cost per query: O(changed rows) expected hash operations and
 * one membership and at most one residency call per added row; never O(k).
 *
 * Fetch counts are taken against the residency R before the verification
 * fetch. The caller names the rows of S_0 that were missing (M_0: with a hot
 * buffer these are the misses its step on S_0 just fetched). Then
 *     shared retrieval:    fetched = |U \ R|   = |M_0| + |X \ R|
 *     per-query (ablation): fetched = sum_t |S_t \ R|
 *                                   = sum_t (|M_0 n S_t| + |(S_t \ S_0) \ R|),
 * both maintained incrementally as the deltas arrive. Residency of a row of X
 * is asked once, when it first enters X.
 *
 * The union itself needs only the added rows (U = S_0 + every added row), so
 * a union begun with per_query = 0 skips removed rows altogether: half the work
 * of the per-query bookkeeping, which only the retrieval ablation (and the
 * consistency checks on removals) needs.
 *
 * Staging: the verification staging buffer holds the union rows of one layer
 * group while that group computes, and is reused by the next group (reuse on),
 * so it is sized by the largest group; without reuse every group keeps its own.
 *
 *   union_set u; union_init(&u);
 *   union_begin(&u, buf.n_sel, in_sel, &buf, missed0, n_missed0, is_resident, &buf, !shared);
 *   for (t = 1; t <= L; t++) union_add(&u, d[t].added, d[t].n_added, d[t].removed, d[t].n_removed);
 *   fetched = shared ? union_missed_shared(&u) : union_missed_per_query(&u);
 *   union_rows = union_size(&u);
 *   union_release(&u); */
#ifndef DH_UNION_H
#define DH_UNION_H

#include <stdint.h>

#include "common/dh_err.h"
#include "sim/rowmap.h"
#include "traces/sel.h"

/* Is row a member (of S_0, or resident)? */
typedef int (*union_member_fn)(const void *user, uint32_t row);

typedef struct {
    /* The rows touched this union, each with its flags (the entry's state). */
    rowmap touched;
    uint32_t *extra;          /* X in insertion order */
    uint32_t n_extra, cap_extra;
    /* The base S_0. */
    uint32_t n_base;
    union_member_fn in_base;
    const void *base_user;
    const uint32_t *base_sorted;  /* for union_begin_sorted */
    union_member_fn resident;
    const void *res_user;
    /* Counters. */
    int per_query;            /* keep the per-query counts (and check removals) */
    uint32_t queries;         /* positions folded in, S_0 included */
    uint32_t cur_sel;         /* |S_t| of the latest query */
    uint32_t base_missed;     /* |M_0| */
    uint32_t m0_in_cur;       /* |M_0 n S_t| */
    uint32_t d_size, d_missed;/* |S_t \ S_0|, |(S_t \ S_0) \ R| */
    uint32_t extra_missed;    /* |X \ R| */
    uint64_t query_missed;    /* sum over folded queries of |S_t \ R| */
} union_set;

void union_init(union_set *u);
void union_release(union_set *u);
/* Start a union with S_0 of n_base rows: in_base(row) tells membership,
 * missed[0..n_missed) are S_0's rows not resident before the step (any order),
 * resident(row) tells residency of rows outside S_0; per_query = 1 keeps the
 * per-query miss counts (union_missed_per_query), 0 keeps only the union.
 * Reuses memory of earlier unions; costs O(rows touched by the previous union
 * + n_missed). */
void union_begin(union_set *u, uint32_t n_base, union_member_fn in_base, const void *base_user,
                  const uint32_t *missed, uint32_t n_missed, union_member_fn resident, const void *res_user,
                  int per_query);
/* The same with S_0 as a sorted array (membership by binary search, O(log k));
 * base must stay valid until the next begin. */
void union_begin_sorted(union_set *u, const uint32_t *base, uint32_t n_base, const uint32_t *missed,
                         uint32_t n_missed, union_member_fn resident, const void *res_user, int per_query);
/* Fold in the next query position as a delta against the previous one (sorted
 * or not). With per_query, -1 with dh_err() if the delta contradicts the state
 * (removing a row the previous query did not select, adding one it did). */
int union_add(union_set *u, const uint32_t *added, uint32_t n_added, const uint32_t *removed, uint32_t n_removed);

static inline uint32_t union_size(const union_set *u) { return u->n_base + u->n_extra; }
static inline uint32_t union_queries(const union_set *u) { return u->queries; }
/* X: rows of the union outside S_0, in the order they entered. */
static inline const uint32_t *union_extra(const union_set *u, uint32_t *n) { *n = u->n_extra; return u->extra; }
/* Rows fetched with shared missing-row retrieval: the union's misses. */
static inline uint64_t union_missed_shared(const union_set *u) { return (uint64_t)u->base_missed + u->extra_missed; }
/* Rows fetched when every query retrieves its own misses (the ablation; the
 * union must have been begun with per_query = 1). */
static inline uint64_t union_missed_per_query(const union_set *u)
{
    DH_BUG_ON(!u->per_query);
    return u->query_missed;
}
static inline uint64_t union_fetched(const union_set *u, int shared)
{
    return shared ? union_missed_shared(u) : union_missed_per_query(u);
}
/* The whole union, sorted, into out[union_size()]: merges the sorted S_0 with
 * X sorted; O(k + |X| log |X|), for reports and tests, not the step. */
uint32_t union_rows(union_set *u, const uint32_t *base_sorted, uint32_t n_base, uint32_t *out);

/* Delta between two sorted selections (a sorted merge, O(|prev| + |cur|)):
 * for selections that arrive whole (keyframes, tests). added and removed need
 * room for |cur| and |prev| rows. */
void union_diff(const uint32_t *prev, uint32_t n_prev, const uint32_t *cur, uint32_t n_cur,
                 uint32_t *added, uint32_t *n_added, uint32_t *removed, uint32_t *n_removed);

/* Staging bytes: union_rows[g] (summed over the batch's requests) x
 * row_bytes[g] (bytes per union row of group g, all its kv-owning layers); with
 * reuse the largest group's, without reuse the sum over groups. */
double union_staging_bytes(const double *union_rows, const double *row_bytes, uint32_t n_groups, int reuse);

/* Lookahead: a FIFO of copied stream positions of one (request, group). A
 * verification reads positions beyond the committed one; those that are not
 * accepted are read again (as the new base or drafts) next step, so they are
 * kept here instead of being asked from the stream twice. Copies hold only the
 * delta (O(changed rows)); full keyframe sets are not kept. */
typedef struct {
    uint32_t pos, nrows, n_sel, n_added, n_removed;
    uint32_t *rows;           /* added[0..n_added) then removed[0..n_removed) */
    uint32_t cap;
} union_pos;

typedef struct {
    union_pos *q;
    uint32_t cap, head, n;
} union_ahead;

void union_ahead_init(union_ahead *a, uint32_t cap);
void union_ahead_release(union_ahead *a);
/* Forget every queued position (keeps memory). */
static inline void union_ahead_clear(union_ahead *a) { a->head = a->n = 0; }
static inline uint32_t union_ahead_count(const union_ahead *a) { return a->n; }
/* Copy d to the tail. -1 with dh_err() when full. */
int union_ahead_push(union_ahead *a, const sel_delta *d);
/* The i-th queued position (0 = oldest), as a delta whose arrays stay valid
 * until that entry is popped. */
void union_ahead_peek(const union_ahead *a, uint32_t i, sel_delta *d);
void union_ahead_pop(union_ahead *a);

#endif
