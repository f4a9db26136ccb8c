/* stats.c: locality statistics of selection streams; see stats.h for the
 * definitions and the cache model.
 *
 * Design. Streams are analysed one at a time, request-major. The streaming
 * pass keeps a selection bitset and per-row arrays (when the row last left
 * the selection, its LRU key) and does O(changed rows · log rows) work per
 * position: Mattson's stack algorithm for LRU at every budget, reuse
 * distances, the union of the last q selections, and the step overlap. It
 * also appends the deltas to an in-memory log of the stream (4 bytes per
 * changed row), which serves two later uses: the fixed-budget policies (FIFO,
 * random, Belady, which needs the future) replay it, and the next group of
 * the same request replays the previous group's log in lockstep to measure
 * the cross-group overlap. Memory is bounded by one stream's log plus per-row
 * arrays of the longest context, never by the trace.
 *
 * Mattson with whole-selection accesses. LRU orders rows by (last position
 * selected, row index). The rows selected at t-1 share the newest key, so
 * they are exactly the top n_sel(t-1) of the stack and never miss at any
 * budget >= k; only rows entering at t can miss. A row that is not selected
 * has a fixed key from the moment it left, so the stack below the current
 * selection is the sequence of leave events: each leaving row gets the next
 * number of a per-stream counter (rows leaving at one position numbered in
 * ascending row order, which realises the tie rule), and a Fenwick tree over
 * these numbers counts, for an entering row x, the rows that left after it
 * and are still out. Its stack distance is d = n_sel(t-1) + that count + 1,
 * and it misses at budget B iff d > B. All entering rows of a position are
 * ranked before any is taken out of the tree (the accesses are simultaneous).
 * The counter is compacted (live leave events renumbered in order) when it
 * reaches the tree's capacity, so the tree stays at twice the context. */
#include "traces/stats.h"
#include "common/dh_err.h"
#include "common/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEVER UINT32_MAX       /* row never selected */
#define SELECTED (UINT32_MAX - 1)

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) { fprintf(stderr, "out of memory\n"); abort(); }
    return p;
}

void stats_options_init(stats_options *o)
{
    memset(o, 0, sizeof *o);
    o->n_budgets = 3;
    o->budgets[0].k_mult = 1;
    o->budgets[1].k_mult = 2;
    o->budgets[2].k_mult = 4;
    o->union_qmax = STATS_MAX_Q;
    o->fifo = o->random = o->belady = 1;
    o->request_step = o->group_step = 1;
    o->seed = 1;
}

int stats_parse_budgets(stats_options *o, const char *list)
{
    const char *s = list;
    uint32_t n = 0;
    while (*s) {
        char *end;
        while (*s == ' ') s++;
        double v = strtod(s, &end);
        if (end == s || !(v > 0)) return dh_err("budget list '%s': item %u is not a positive number", list, n + 1);
        s = end;
        if (n == STATS_MAX_BUDGETS) return dh_err("budget list '%s': more than %d budgets", list, STATS_MAX_BUDGETS);
        if (*s == 'k') {
            if (v < 1) return dh_err("budget list '%s': %gk is below k (the selection must fit)", list, v);
            o->budgets[n].k_mult = v;
            o->budgets[n].rows = 0;
            s++;
        } else {
            if (v != floor(v) || v > 4e9) return dh_err("budget list '%s': %g is not a whole number of rows", list, v);
            o->budgets[n].k_mult = 0;
            o->budgets[n].rows = (uint32_t)v;
        }
        n++;
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s) return dh_err("budget list '%s': expected ',' after item %u", list, n);
    }
    if (n == 0) return dh_err("budget list is empty");
    o->n_budgets = n;
    return 0;
}

static uint32_t budget_rows(const stats_budget *b, uint32_t k)
{
    return b->k_mult > 0 ? (uint32_t)ceil(b->k_mult * k - 1e-9) : b->rows;
}

/* ---------------------------------------------------------------- Fenwick */

typedef struct {
    int32_t *t;
    uint32_t n; /* capacity; indices 1..n */
} fenwick;

static void fw_init(fenwick *f, uint32_t n) { f->n = n; f->t = xcalloc(n + 1, sizeof(int32_t)); }
static void fw_clear(fenwick *f) { memset(f->t, 0, (f->n + 1) * sizeof(int32_t)); }
static inline void fw_add(fenwick *f, uint32_t i, int32_t v) { for (; i <= f->n; i += i & -i) f->t[i] += v; }
static inline int32_t fw_prefix(const fenwick *f, uint32_t i) { int32_t s = 0; for (; i; i -= i & -i) s += f->t[i]; return s; }
/* Smallest i with prefix(i) >= rank (1-based; the tree must hold that many). */
static inline uint32_t fw_select(const fenwick *f, int32_t rank)
{
    uint32_t pos = 0, step = 1;
    while (step * 2 <= f->n) step *= 2;
    for (; step; step >>= 1)
        if (pos + step <= f->n && f->t[pos + step] < rank) { pos += step; rank -= f->t[pos]; }
    return pos + 1;
}
static inline uint32_t fw_first(const fenwick *f) { return fw_select(f, 1); }
/* Build from a 0/1 array in O(n). */
static void fw_build(fenwick *f, const uint8_t *live, uint32_t n)
{
    fw_clear(f);
    for (uint32_t i = 1; i <= n; i++) f->t[i] += live[i];
    for (uint32_t i = 1; i <= f->n; i++) {
        uint32_t j = i + (i & -i);
        if (j <= f->n) f->t[j] += f->t[i];
    }
}

/* ---------------------------------------------------------------- stream log */

typedef struct {
    uint32_t *rows;        /* per position: added rows then removed rows */
    size_t n, cap;
    size_t *off;           /* [positions + 1] */
    uint32_t *n_add;       /* [positions] */
    uint32_t *n_sel;       /* [positions] */
    uint32_t positions, pos_cap;
} slog;

static void slog_reset(slog *l) { l->n = 0; l->positions = 0; }

static void slog_push(slog *l, const sel_delta *d)
{
    if (l->positions + 1 >= l->pos_cap) {
        l->pos_cap = l->pos_cap ? 2 * l->pos_cap : 1024;
        l->off = realloc(l->off, (l->pos_cap + 1) * sizeof *l->off);
        l->n_add = realloc(l->n_add, l->pos_cap * sizeof *l->n_add);
        l->n_sel = realloc(l->n_sel, l->pos_cap * sizeof *l->n_sel);
        if (!l->off || !l->n_add || !l->n_sel) abort();
    }
    size_t need = l->n + d->n_added + d->n_removed;
    if (need > l->cap) {
        while (l->cap < need) l->cap = l->cap ? 2 * l->cap : 65536;
        l->rows = realloc(l->rows, l->cap * sizeof *l->rows);
        if (!l->rows) abort();
    }
    l->off[l->positions] = l->n;
    memcpy(l->rows + l->n, d->added, d->n_added * sizeof(uint32_t));
    memcpy(l->rows + l->n + d->n_added, d->removed, d->n_removed * sizeof(uint32_t));
    l->n = need;
    l->n_add[l->positions] = d->n_added;
    l->n_sel[l->positions] = d->n_sel;
    l->positions++;
    l->off[l->positions] = l->n;
}

static void slog_free(slog *l) { free(l->rows); free(l->off); free(l->n_add); free(l->n_sel); }

/* ---------------------------------------------------------------- analysis state */

typedef struct {
    uint32_t max_rows;
    uint64_t *sel;        /* current selection */
    uint32_t *leave;      /* position the row last left, NEVER or SELECTED */
    uint32_t *lru_seq;    /* leave-event number of a row that is out */
    uint32_t *seq_row;    /* [cap + 1] row of each leave-event number (or NEVER) */
    uint8_t *live;        /* scratch for compaction */
    fenwick fw;
    uint32_t next_seq, n_live;
    uint32_t *rank;       /* scratch: stack distance of each entering row */
    uint32_t rank_cap;
    uint32_t left_at[STATS_MAX_Q]; /* rows that left at position p (slot p % Q) and are still out */
    /* Cross-group: the previous group's selection replayed from its log. */
    uint64_t *prev_sel;
    /* Fixed-budget policies. */
    uint64_t *res;        /* resident */
    uint32_t *pslot;      /* FIFO: insertion number of a resident row */
    uint32_t *nextuse;    /* Belady: per log entry of a removal, the next position it is added */
    size_t nextuse_cap;
    uint32_t *next_add;   /* Belady scratch per row */
} sstate;

static inline int bget(const uint64_t *b, uint32_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }
static inline void bset(uint64_t *b, uint32_t i) { b[i >> 6] |= 1ull << (i & 63); }
static inline void bclr(uint64_t *b, uint32_t i) { b[i >> 6] &= ~(1ull << (i & 63)); }

static void sstate_init(sstate *s, uint32_t max_rows)
{
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    size_t words = (max_rows + 63) / 64;
    s->sel = xcalloc(words, 8);
    s->prev_sel = xcalloc(words, 8);
    s->res = xcalloc(words, 8);
    s->leave = xcalloc(max_rows, sizeof(uint32_t));
    s->lru_seq = xcalloc(max_rows, sizeof(uint32_t));
    s->pslot = xcalloc(max_rows, sizeof(uint32_t));
    s->next_add = xcalloc(max_rows, sizeof(uint32_t));
    uint32_t cap = 2 * max_rows + 64;
    fw_init(&s->fw, cap);
    s->seq_row = xcalloc(cap + 1, sizeof(uint32_t));
    s->live = xcalloc(cap + 1, 1);
}

static void sstate_free(sstate *s)
{
    free(s->sel); free(s->prev_sel); free(s->res); free(s->leave); free(s->lru_seq);
    free(s->pslot); free(s->next_add); free(s->fw.t); free(s->seq_row); free(s->live);
    free(s->rank); free(s->nextuse);
}

static void sstate_reset(sstate *s)
{
    size_t words = (s->max_rows + 63) / 64;
    memset(s->sel, 0, words * 8);
    for (uint32_t i = 0; i < s->max_rows; i++) s->leave[i] = NEVER;
    fw_clear(&s->fw);
    s->next_seq = 0;
    s->n_live = 0;
    memset(s->left_at, 0, sizeof s->left_at);
}

/* Renumber the live leave events 1..n_live in order and rebuild the tree. */
static void lru_compact(sstate *s)
{
    uint32_t n = 0;
    for (uint32_t q = 1; q <= s->next_seq; q++) {
        uint32_t row = s->seq_row[q];
        if (row != NEVER && s->leave[row] != SELECTED && s->lru_seq[row] == q) {
            n++;
            s->seq_row[n] = row;
            s->lru_seq[row] = n;
        }
    }
    DH_BUG_ON(n != s->n_live);
    for (uint32_t q = n + 1; q <= s->fw.n; q++) s->seq_row[q] = NEVER;
    memset(s->live, 0, s->fw.n + 1);
    memset(s->live + 1, 1, n);
    fw_build(&s->fw, s->live, s->fw.n);
    s->next_seq = n;
}

/* ---------------------------------------------------------------- report helpers */

static void group_add(stats_group *dst, const stats_group *src)
{
    if (src->positions && (dst->positions == 0 || src->overlap_min < dst->overlap_min)) dst->overlap_min = src->overlap_min;
    if (src->positions && (dst->positions == 0 || src->overlap_max > dst->overlap_max)) dst->overlap_max = src->overlap_max;
    dst->streams += src->streams;
    dst->positions += src->positions;
    dst->selected += src->selected;
    dst->added += src->added;
    dst->cold += src->cold;
    dst->overlap_sum += src->overlap_sum;
    dst->overlap_sq += src->overlap_sq;
    dst->cross_positions += src->cross_positions;
    dst->cross_sum += src->cross_sum;
    for (int p = 0; p < STATS_N_POLICIES; p++)
        for (int b = 0; b < STATS_MAX_BUDGETS; b++) dst->miss[p][b] += src->miss[p][b];
}

/* ---------------------------------------------------------------- streaming pass */

typedef struct {
    const stats_options *o;
    stats_report *r;
    uint32_t budget[STATS_MAX_BUDGETS]; /* in rows, for the current group */
} ctx;

static int check_delta(const sel_delta *d, const sstate *s, uint32_t req, uint32_t g, uint32_t expect_pos)
{
    if (d->pos != expect_pos)
        return dh_err("stats: request %u group %u: position %u follows position %u", req, g, d->pos, expect_pos - 1);
    if (d->nrows > s->max_rows)
        return dh_err("stats: request %u group %u position %u: %u rows, more than the shape's %u", req, g, d->pos, d->nrows, s->max_rows);
    for (uint32_t i = 0; i < d->n_added; i++)
        if (d->added[i] >= d->nrows || bget(s->sel, d->added[i]))
            return dh_err("stats: request %u group %u position %u: added row %u is %s", req, g, d->pos, d->added[i],
                          d->added[i] >= d->nrows ? "beyond the context" : "already selected");
    for (uint32_t i = 0; i < d->n_removed; i++)
        if (d->removed[i] >= d->nrows || !bget(s->sel, d->removed[i]))
            return dh_err("stats: request %u group %u position %u: removed row %u is not selected", req, g, d->pos, d->removed[i]);
    return 0;
}

/* Analyse one stream (LRU, reuse, union, overlap, cross with prev log). */
static int stream_pass(ctx *c, sstate *s, sel_stream *st, uint32_t req, uint32_t g, uint32_t k,
                       slog *log, const slog *prev, stats_group *gs)
{
    const stats_options *o = c->o;
    stats_report *r = c->r;
    sel_delta d;
    uint32_t t = 0, prev_n_sel = 0, cross_inter = 0;
    size_t words = (s->max_rows + 63) / 64;
    memset(s->prev_sel, 0, words * 8);
    sstate_reset(s);
    slog_reset(log);
    gs->streams++;
    for (;;) {
        if (o->max_positions && t >= o->max_positions) break;
        int rc = sel_next(st, &d);
        if (rc < 0) return -1;
        if (rc > 0) break;
        if (check_delta(&d, s, req, g, t) < 0) return -1;
        slog_push(log, &d);
        if (t > 0) {
            /* Accesses of this position. */
            gs->positions++;
            gs->selected += d.n_sel;
            gs->added += d.n_added;
            double ov = (double)(prev_n_sel - d.n_removed) / k;
            if (gs->positions == 1 || ov < gs->overlap_min) gs->overlap_min = ov;
            if (gs->positions == 1 || ov > gs->overlap_max) gs->overlap_max = ov;
            gs->overlap_sum += ov;
            gs->overlap_sq += ov * ov;
            /* Rank every entering row against the stack of t-1 before any
             * leaves the tree: O(log) each. */
            if (d.n_added > s->rank_cap) {
                s->rank_cap = d.n_added * 2;
                s->rank = realloc(s->rank, s->rank_cap * sizeof *s->rank);
                if (!s->rank) abort();
            }
            for (uint32_t i = 0; i < d.n_added; i++) {
                uint32_t x = d.added[i], lv = s->leave[x];
                if (lv == NEVER) { s->rank[i] = 0; continue; }
                uint32_t newer = s->n_live - (uint32_t)fw_prefix(&s->fw, s->lru_seq[x]);
                s->rank[i] = prev_n_sel + newer + 1;
            }
            for (uint32_t i = 0; i < d.n_added; i++) {
                uint32_t x = d.added[i], lv = s->leave[x], dist = s->rank[i];
                if (lv == NEVER) {
                    gs->cold++;
                    for (uint32_t b = 0; b < o->n_budgets; b++) gs->miss[STATS_LRU][b]++;
                    continue;
                }
                fw_add(&s->fw, s->lru_seq[x], -1);
                s->n_live--;
                uint64_t bin = ((uint64_t)dist * STATS_MRC_RES + k - 1) / k;
                if (bin >= r->mrc_len) bin = r->mrc_len - 1;
                r->mrc_hist[bin]++;
                for (uint32_t b = 0; b < o->n_budgets; b++) gs->miss[STATS_LRU][b] += dist > c->budget[b];
                uint32_t reuse = t - lv;
                r->reuse_hist[31 - __builtin_clz(reuse)]++;
            }
        }
        /* Union bookkeeping and the selection itself. */
        s->left_at[t % STATS_MAX_Q] = 0;
        for (uint32_t i = 0; i < d.n_added; i++) {
            uint32_t x = d.added[i], lv = s->leave[x];
            if (lv != NEVER && t - lv < STATS_MAX_Q) s->left_at[lv % STATS_MAX_Q]--;
            s->leave[x] = SELECTED;
            bset(s->sel, x);
        }
        if (s->next_seq + d.n_removed > s->fw.n) lru_compact(s);
        for (uint32_t i = 0; i < d.n_removed; i++) {
            uint32_t x = d.removed[i];
            bclr(s->sel, x);
            s->leave[x] = t;
            s->lru_seq[x] = ++s->next_seq;
            s->seq_row[s->next_seq] = x;
            fw_add(&s->fw, s->next_seq, 1);
            s->n_live++;
        }
        s->left_at[t % STATS_MAX_Q] += d.n_removed;
        uint32_t u = d.n_sel;
        for (uint32_t q = 1; q <= o->union_qmax; q++) {
            if (q > 1) u += s->left_at[(t - q + 2) % STATS_MAX_Q];
            if (t + 1 >= q) { r->union_sum[q] += (double)u / k; r->union_n[q]++; }
        }
        /* Cross-group overlap against the previous sampled group's log. */
        if (prev && t < prev->positions) {
            for (uint32_t i = 0; i < d.n_added; i++) cross_inter += bget(s->prev_sel, d.added[i]);
            for (uint32_t i = 0; i < d.n_removed; i++) cross_inter -= bget(s->prev_sel, d.removed[i]);
            const uint32_t *pr = prev->rows + prev->off[t];
            uint32_t pa = prev->n_add[t], pn = (uint32_t)(prev->off[t + 1] - prev->off[t]);
            for (uint32_t i = 0; i < pn; i++) {
                uint32_t x = pr[i];
                if (x >= s->max_rows) continue;
                if (i < pa) { bset(s->prev_sel, x); cross_inter += bget(s->sel, x); }
                else { bclr(s->prev_sel, x); cross_inter -= bget(s->sel, x); }
            }
            gs->cross_positions++;
            gs->cross_sum += (double)cross_inter / k;
        }
        prev_n_sel = d.n_sel;
        t++;
    }
    return 0;
}

/* ---------------------------------------------------------------- fixed-budget policies */

/* FIFO: residents carry insertion numbers; a bitset over the numbers marks
 * the evictable ones (resident, not selected) and a cursor never passes the
 * earliest of them, so the victim is found by scanning words from the cursor
 * (rows pinned by the selection at the head cost one bit each). Numbers are
 * compacted when they reach the bitset's capacity (2B + 64), so memory is
 * proportional to the budget. */
static uint64_t sim_fifo(sstate *s, const slog *l, uint32_t B)
{
    size_t words = (s->max_rows + 63) / 64;
    memset(s->res, 0, words * 8);
    memset(s->sel, 0, words * 8);
    uint32_t cap = 2 * B + 64, cwords = cap / 64 + 1;
    uint64_t *ev = xcalloc(cwords, 8);
    uint32_t *slot_row = xcalloc(cap + 1, sizeof(uint32_t));
    uint32_t next = 0, count = 0, cursor = 1;
    uint64_t miss = 0;
    for (uint32_t t = 0; t < l->positions; t++) {
        const uint32_t *rows = l->rows + l->off[t];
        uint32_t na = l->n_add[t], nr = (uint32_t)(l->off[t + 1] - l->off[t]) - na;
        for (uint32_t i = 0; i < nr; i++) {
            uint32_t x = rows[na + i];
            bclr(s->sel, x);
            if (bget(s->res, x)) {
                bset(ev, s->pslot[x]);
                if (s->pslot[x] < cursor) cursor = s->pslot[x];
            }
        }
        for (uint32_t i = 0; i < na; i++) {
            uint32_t x = rows[i];
            bset(s->sel, x);
            if (bget(s->res, x)) bclr(ev, s->pslot[x]);
        }
        for (uint32_t i = 0; i < na; i++) {
            uint32_t x = rows[i];
            if (bget(s->res, x)) continue;
            if (t > 0) miss++;
            if (count == B) {
                uint32_t w = cursor >> 6;
                uint64_t bits = ev[w] & (~0ull << (cursor & 63));
                while (!bits) bits = ev[++w];
                uint32_t q = w * 64 + (uint32_t)__builtin_ctzll(bits), y = slot_row[q];
                bclr(ev, q);
                cursor = q + 1;
                bclr(s->res, y);
                count--;
            }
            if (next == cap) {
                /* Renumber residents in insertion order. */
                uint32_t n = 0;
                for (uint32_t q = 1; q <= cap; q++) {
                    uint32_t y = slot_row[q];
                    if (bget(s->res, y) && s->pslot[y] == q) {
                        n++;
                        slot_row[n] = y;
                        s->pslot[y] = n;
                    }
                }
                memset(ev, 0, cwords * 8);
                for (uint32_t q = 1; q <= n; q++)
                    if (!bget(s->sel, slot_row[q])) bset(ev, q);
                next = n;
                cursor = 1;
            }
            s->pslot[x] = ++next;
            slot_row[next] = x;
            bset(s->res, x);
            count++;
        }
    }
    free(ev);
    free(slot_row);
    return miss;
}

/* Random: the evictable residents are marked in a Fenwick tree over row
 * indices, and the victim is the j-th of them in row order for j drawn
 * uniformly (so the choice does not depend on any internal order and a plain
 * implementation can reproduce it). O(log rows) per change. */
static uint64_t sim_random(sstate *s, const slog *l, uint32_t B, uint64_t seed, uint32_t req, uint32_t g)
{
    size_t words = (s->max_rows + 63) / 64;
    memset(s->res, 0, words * 8);
    memset(s->sel, 0, words * 8);
    rng_stream rng;
    rng_init(&rng, seed, req, g, 3);
    fenwick fw;
    fw_init(&fw, s->max_rows);
    uint32_t n_ev = 0, count = 0;
    uint64_t miss = 0;
    for (uint32_t t = 0; t < l->positions; t++) {
        const uint32_t *rows = l->rows + l->off[t];
        uint32_t na = l->n_add[t], nr = (uint32_t)(l->off[t + 1] - l->off[t]) - na;
        for (uint32_t i = 0; i < nr; i++) {
            uint32_t x = rows[na + i];
            bclr(s->sel, x);
            if (bget(s->res, x)) { fw_add(&fw, x + 1, 1); n_ev++; }
        }
        for (uint32_t i = 0; i < na; i++) {
            uint32_t x = rows[i];
            bset(s->sel, x);
            if (bget(s->res, x)) { fw_add(&fw, x + 1, -1); n_ev--; }
        }
        for (uint32_t i = 0; i < na; i++) {
            uint32_t x = rows[i];
            if (bget(s->res, x)) continue;
            if (t > 0) miss++;
            if (count == B) {
                uint32_t j = rng_below(&rng, n_ev), y = fw_select(&fw, (int32_t)j + 1) - 1;
                fw_add(&fw, y + 1, -1);
                n_ev--;
                bclr(s->res, y);
                count--;
            }
            bset(s->res, x);
            count++;
        }
    }
    free(fw.t);
    return miss;
}

/* Belady MIN: next uses come from a backward scan of the log; evictable
 * residents sit in a max-heap keyed by (next use, row) with lazy deletion
 * (an entry is valid while its row is resident, unselected and still has
 * that next use). */
typedef struct { uint32_t next, row; } bel_ent;

static inline int bel_less(bel_ent a, bel_ent b) { return a.next != b.next ? a.next < b.next : a.row < b.row; }

static void heap_push(bel_ent *h, uint32_t *n, bel_ent e)
{
    uint32_t i = (*n)++;
    while (i && bel_less(h[(i - 1) / 2], e)) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = e;
}

static bel_ent heap_pop(bel_ent *h, uint32_t *n)
{
    bel_ent top = h[0], e = h[--*n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && bel_less(h[c], h[c + 1])) c++;
        if (!bel_less(e, h[c])) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = e;
    return top;
}

static uint64_t sim_belady(sstate *s, const slog *l, uint32_t B)
{
    size_t words = (s->max_rows + 63) / 64;
    if (l->n > s->nextuse_cap) {
        s->nextuse_cap = l->n;
        free(s->nextuse);
        s->nextuse = xcalloc(l->n, sizeof(uint32_t));
    }
    /* Backward scan: the next position each removed row is added again. */
    for (uint32_t i = 0; i < s->max_rows; i++) s->next_add[i] = NEVER;
    for (uint32_t t = l->positions; t-- > 0;) {
        const uint32_t *rows = l->rows + l->off[t];
        uint32_t na = l->n_add[t], nr = (uint32_t)(l->off[t + 1] - l->off[t]) - na;
        for (uint32_t i = 0; i < nr; i++) s->nextuse[l->off[t] + na + i] = s->next_add[rows[na + i]];
        for (uint32_t i = 0; i < na; i++) s->next_add[rows[i]] = t;
    }
    memset(s->res, 0, words * 8);
    memset(s->sel, 0, words * 8);
    size_t heap_cap = 1024;
    bel_ent *heap = xcalloc(heap_cap, sizeof *heap);
    uint32_t hn = 0, count = 0;
    uint64_t miss = 0;
    for (uint32_t t = 0; t < l->positions; t++) {
        const uint32_t *rows = l->rows + l->off[t];
        uint32_t na = l->n_add[t], nr = (uint32_t)(l->off[t + 1] - l->off[t]) - na;
        for (uint32_t i = 0; i < nr; i++) {
            uint32_t x = rows[na + i];
            bclr(s->sel, x);
            s->next_add[x] = s->nextuse[l->off[t] + na + i];
            if (bget(s->res, x)) {
                if (hn == heap_cap) {
                    heap_cap *= 2;
                    heap = realloc(heap, heap_cap * sizeof *heap);
                    if (!heap) abort();
                }
                heap_push(heap, &hn, (bel_ent){s->next_add[x], x});
            }
        }
        for (uint32_t i = 0; i < na; i++) bset(s->sel, rows[i]);
        for (uint32_t i = 0; i < na; i++) {
            uint32_t x = rows[i];
            if (bget(s->res, x)) continue;
            if (t > 0) miss++;
            if (count == B) {
                for (;;) {
                    DH_BUG_ON(hn == 0);
                    bel_ent e = heap_pop(heap, &hn);
                    if (bget(s->res, e.row) && !bget(s->sel, e.row) && s->next_add[e.row] == e.next) {
                        bclr(s->res, e.row);
                        break;
                    }
                }
                count--;
            }
            bset(s->res, x);
            count++;
        }
        /* Heap entries of rows that were just selected are stale now; drop
         * them when the heap is mostly stale so it stays bounded. */
        if (hn > 4 * (uint64_t)B + 1024) {
            uint32_t m = 0;
            for (uint32_t i = 0; i < hn; i++) {
                bel_ent e = heap[i];
                if (bget(s->res, e.row) && !bget(s->sel, e.row) && s->next_add[e.row] == e.next) heap[m++] = e;
            }
            hn = 0;
            for (uint32_t i = 0; i < m; i++) heap_push(heap, &hn, heap[i]);
        }
    }
    free(heap);
    return miss;
}

/* ---------------------------------------------------------------- driver */

int stats_run(sel_source *src, const stats_options *o, stats_report **out)
{
    *out = NULL;
    const trace_meta *m = sel_meta(src);
    const trace_shape *sh = &m->shape;
    if (o->n_budgets == 0 || o->n_budgets > STATS_MAX_BUDGETS) return dh_err("stats: %u budgets (1 to %d)", o->n_budgets, STATS_MAX_BUDGETS);
    if (o->union_qmax < 1 || o->union_qmax > STATS_MAX_Q) return dh_err("stats: union q max %u is outside 1..%d", o->union_qmax, STATS_MAX_Q);
    if (o->request_step == 0 || o->group_step == 0) return dh_err("stats: sampling steps must be at least 1");
    for (uint32_t b = 0; b < o->n_budgets; b++)
        for (uint32_t g = 0; g < sh->n_groups; g++)
            if (budget_rows(&o->budgets[b], sh->group_k[g]) < sh->group_k[g])
                return dh_err("stats: budget %u rows is below group %u's k = %u (the selection must fit)",
                              budget_rows(&o->budgets[b], sh->group_k[g]), g, sh->group_k[g]);

    stats_report *r = xcalloc(1, sizeof *r);
    r->opt = *o;
    snprintf(r->model, sizeof r->model, "%s", sh->model);
    snprintf(r->preset, sizeof r->preset, "%s", m->preset);
    r->seed = m->seed;
    r->n_requests = sh->n_requests;
    r->n_groups = sh->n_groups;
    r->group = xcalloc(sh->n_groups, sizeof *r->group);
    r->group_used = xcalloc(sh->n_groups, sizeof *r->group_used);

    uint32_t reqs[sh->n_requests ? sh->n_requests : 1], groups[sh->n_groups];
    uint32_t nreq = 0, ngrp = 0;
    for (uint32_t q = 0; q < sh->n_requests && (!o->max_requests || nreq < o->max_requests); q += o->request_step) reqs[nreq++] = q;
    for (uint32_t g = 0; g < sh->n_groups && (!o->max_groups || ngrp < o->max_groups); g += o->group_step) groups[ngrp++] = g;
    r->requests_used = nreq;
    r->groups_used = ngrp;
    for (uint32_t i = 0; i < ngrp; i++) r->group_used[groups[i]] = 1;
    uint32_t max_rows = 1, min_k = UINT32_MAX;
    for (uint32_t i = 0; i < nreq; i++)
        for (uint32_t j = 0; j < ngrp; j++) {
            uint32_t q = reqs[i], g = groups[j];
            uint32_t last = sh->output_len[q] ? sh->output_len[q] - 1 : 0;
            uint32_t rows = sel_rows_at(sh, q, g, last);
            if (rows > max_rows) max_rows = rows;
            if (sh->group_k[g] < min_k) min_k = sh->group_k[g];
        }
    r->sampled = nreq < sh->n_requests || ngrp < sh->n_groups;
    for (uint32_t i = 0; i < nreq && o->max_positions; i++)
        if (sh->output_len[reqs[i]] > o->max_positions) r->sampled = 1;
    r->mrc_len = (uint32_t)(((uint64_t)max_rows * STATS_MRC_RES + min_k - 1) / min_k + 2);
    r->mrc_hist = xcalloc(r->mrc_len, sizeof(uint64_t));

    sstate s;
    sstate_init(&s, max_rows);
    slog logs[2] = {{0}};
    ctx c = {o, r, {0}};
    uint64_t done = 0, total = (uint64_t)nreq * ngrp;
    int rc = 0;
    for (uint32_t i = 0; i < nreq && rc == 0; i++) {
        for (uint32_t j = 0; j < ngrp && rc == 0; j++) {
            uint32_t q = reqs[i], g = groups[j], k = sh->group_k[g];
            slog *cur = &logs[j & 1], *prev = j ? &logs[(j - 1) & 1] : NULL;
            for (uint32_t b = 0; b < o->n_budgets; b++) c.budget[b] = budget_rows(&o->budgets[b], k);
            stats_group *gs = &r->group[g];
            gs->k = k;
            sel_stream *st;
            if (sel_open(src, q, g, &st) < 0) { rc = -1; break; }
            /* The cross overlap of group g is measured against the previous sampled group. */
            rc = stream_pass(&c, &s, st, q, g, k, cur, prev, gs);
            sel_close(st);
            if (rc < 0) break;
            for (uint32_t b = 0; b < o->n_budgets; b++) {
                if (o->fifo) gs->miss[STATS_FIFO][b] += sim_fifo(&s, cur, c.budget[b]);
                if (o->random) gs->miss[STATS_RANDOM][b] += sim_random(&s, cur, c.budget[b], o->seed, q, g);
                if (o->belady) gs->miss[STATS_BELADY][b] += sim_belady(&s, cur, c.budget[b]);
            }
            done++;
            if (o->progress) o->progress(done, total, o->progress_arg);
        }
    }
    sstate_free(&s);
    slog_free(&logs[0]);
    slog_free(&logs[1]);
    if (rc < 0) { stats_report_free(r); return -1; }
    uint32_t k0 = 0;
    int same_k = 1;
    for (uint32_t g = 0; g < sh->n_groups; g++) {
        if (!r->group_used[g]) continue;
        group_add(&r->total, &r->group[g]);
        if (!k0) k0 = r->group[g].k; else if (r->group[g].k != k0) same_k = 0;
    }
    r->total.k = same_k ? k0 : 0;
    *out = r;
    return 0;
}

void stats_report_free(stats_report *r)
{
    if (!r) return;
    free(r->group);
    free(r->group_used);
    free(r->mrc_hist);
    free(r);
}

/* ---------------------------------------------------------------- accessors */

static const stats_group *pick(const stats_report *r, int g)
{
    if (g < 0) return &r->total;
    if ((uint32_t)g >= r->n_groups) return NULL;
    return &r->group[g];
}

double stats_miss_rate(const stats_report *r, int policy, uint32_t b, int g)
{
    const stats_group *x = pick(r, g);
    if (!x || !x->selected || b >= r->opt.n_budgets || policy < 0 || policy >= STATS_N_POLICIES) return NAN;
    if (policy == STATS_FIFO && !r->opt.fifo) return NAN;
    if (policy == STATS_RANDOM && !r->opt.random) return NAN;
    if (policy == STATS_BELADY && !r->opt.belady) return NAN;
    return (double)x->miss[policy][b] / (double)x->selected;
}

double stats_lru_curve(const stats_report *r, double k_mult)
{
    if (!r->total.selected || k_mult < 1) return NAN;
    uint64_t m = (uint64_t)floor(k_mult * STATS_MRC_RES + 1e-9), miss = r->total.cold;
    for (uint64_t i = m + 1; i < r->mrc_len; i++) miss += r->mrc_hist[i];
    return (double)miss / (double)r->total.selected;
}

double stats_step_overlap(const stats_report *r, int g)
{
    const stats_group *x = pick(r, g);
    return x && x->positions ? x->overlap_sum / (double)x->positions : NAN;
}

double stats_cross_overlap(const stats_report *r, int g)
{
    const stats_group *x = pick(r, g);
    return x && x->cross_positions ? x->cross_sum / (double)x->cross_positions : NAN;
}

double stats_union(const stats_report *r, uint32_t q)
{
    if (q < 1 || q > r->opt.union_qmax || !r->union_n[q]) return NAN;
    return r->union_sum[q] / (double)r->union_n[q];
}

/* ---------------------------------------------------------------- output */

static void budget_label(char *buf, size_t n, const stats_budget *b)
{
    if (b->k_mult > 0) snprintf(buf, n, "%gk", b->k_mult);
    else snprintf(buf, n, "%u", b->rows);
}

static const char *policy_name[STATS_N_POLICIES] = {"lru", "fifo", "random", "belady"};

static int policy_on(const stats_report *r, int p)
{
    return p == STATS_LRU || (p == STATS_FIFO && r->opt.fifo) || (p == STATS_RANDOM && r->opt.random) ||
           (p == STATS_BELADY && r->opt.belady);
}

/* The LRU curve is printed at B/k = 1, 1.25, .., 4, then 5, 6, 8, 12, 16, 24, 32, .. while rows remain. */
static uint32_t curve_points(const stats_report *r, double *pts, uint32_t cap)
{
    uint32_t n = 0;
    double maxm = (double)(r->mrc_len - 1) / STATS_MRC_RES;
    for (double m = 1; m <= 4 + 1e-9 && n < cap; m += 0.25) pts[n++] = m;
    static const double more[] = {5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
    for (size_t i = 0; i < sizeof more / sizeof *more && n < cap && more[i] <= maxm; i++) pts[n++] = more[i];
    return n;
}

static void sampling_line(FILE *f, const stats_report *r, const char *prefix)
{
    const stats_options *o = &r->opt;
    fprintf(f, "%ssampled: requests %u of %u (every %u%s), groups %u of %u (every %u%s), positions %s",
            prefix, r->requests_used, r->n_requests, o->request_step, o->max_requests ? ", capped" : "",
            r->groups_used, r->n_groups, o->group_step, o->max_groups ? ", capped" : "",
            o->max_positions ? "the first " : "all");
    if (o->max_positions) fprintf(f, "%u", o->max_positions);
    fprintf(f, "\n");
}

static double pct(double x) { return 100.0 * x; }

int stats_print_table(FILE *f, const stats_report *r)
{
    const stats_group *T = &r->total;
    fprintf(f, "trace: model %s, preset %s, seed %llu\n", r->model[0] ? r->model : "-",
            r->preset[0] ? r->preset : "-", (unsigned long long)r->seed);
    if (r->sampled) sampling_line(f, r, "");
    fprintf(f, "streams %llu, positions %llu after the first, selected rows %llu",
            (unsigned long long)T->streams, (unsigned long long)T->positions, (unsigned long long)T->selected);
    if (T->k) fprintf(f, ", k %u", T->k);
    fprintf(f, "\n\nmiss rate of selected rows (per request and group; position 0 is warm-up)\n");
    fprintf(f, "%-12s", "budget");
    for (int p = 0; p < STATS_N_POLICIES; p++)
        if (policy_on(r, p)) fprintf(f, " %8s", policy_name[p]);
    fprintf(f, "\n");
    for (uint32_t b = 0; b < r->opt.n_budgets; b++) {
        char lab[32];
        budget_label(lab, sizeof lab, &r->opt.budgets[b]);
        fprintf(f, "%-12s", lab);
        for (int p = 0; p < STATS_N_POLICIES; p++)
            if (policy_on(r, p)) fprintf(f, " %7.2f%%", pct(stats_miss_rate(r, p, b, -1)));
        fprintf(f, "\n");
    }
    fprintf(f, "first-time rows (a miss at every budget): %.2f%%\n",
            T->selected ? pct((double)T->cold / (double)T->selected) : NAN);

    double pts[64];
    uint32_t np = curve_points(r, pts, 64);
    fprintf(f, "\nLRU miss-ratio curve (Mattson, all budgets in one pass)\n%-10s", "B/k");
    for (uint32_t i = 0; i < np; i++) fprintf(f, " %6g", pts[i]);
    fprintf(f, "\n%-10s", "miss %");
    for (uint32_t i = 0; i < np; i++) fprintf(f, " %6.2f", pct(stats_lru_curve(r, pts[i])));
    fprintf(f, "\n\nunion of q consecutive selections / k (the verification union)\n%-10s", "q");
    for (uint32_t q = 1; q <= r->opt.union_qmax; q++) fprintf(f, " %6u", q);
    fprintf(f, "\n%-10s", "union/k");
    for (uint32_t q = 1; q <= r->opt.union_qmax; q++) fprintf(f, " %6.3f", stats_union(r, q));

    fprintf(f, "\n\nstep overlap |S_t ∩ S_t-1| / k and cross-group overlap with the previous group\n");
    fprintf(f, "%-6s %6s %8s %8s %8s %8s %8s\n", "group", "k", "mean", "sd", "min", "max", "cross");
    for (uint32_t g = 0; g < r->n_groups; g++) {
        if (!r->group_used[g]) continue;
        const stats_group *x = &r->group[g];
        double mean = stats_step_overlap(r, (int)g);
        double var = x->positions ? x->overlap_sq / (double)x->positions - mean * mean : NAN;
        fprintf(f, "%-6u %6u %8.4f %8.4f %8.4f %8.4f %8.4f\n", g, x->k, mean, sqrt(var > 0 ? var : 0),
                x->overlap_min, x->overlap_max, stats_cross_overlap(r, (int)g));
    }
    fprintf(f, "%-6s %6s %8.4f %8s %8.4f %8.4f %8.4f\n", "all", "", stats_step_overlap(r, -1), "",
            T->overlap_min, T->overlap_max, stats_cross_overlap(r, -1));

    uint64_t nre = 0;
    for (int b = 0; b < STATS_REUSE_BUCKETS; b++) nre += r->reuse_hist[b];
    fprintf(f, "\nreuse distance (positions out of the selection before re-entering), %llu re-entries\n",
            (unsigned long long)nre);
    int last = -1;
    for (int b = 0; b < STATS_REUSE_BUCKETS; b++) if (r->reuse_hist[b]) last = b;
    for (int b = 0; b <= last; b++) {
        char lab[40];
        snprintf(lab, sizeof lab, "[%u, %llu)", 1u << b, 2ull << b);
        fprintf(f, "  %-22s %12llu %7.2f%%\n", lab, (unsigned long long)r->reuse_hist[b],
                nre ? pct((double)r->reuse_hist[b] / (double)nre) : 0.0);
    }
    return ferror(f) ? dh_err("stats: write error") : 0;
}

static void json_num(FILE *f, double x)
{
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fprintf(f, "null");
}

int stats_print_json(FILE *f, const stats_report *r)
{
    const stats_group *T = &r->total;
    const stats_options *o = &r->opt;
    fprintf(f, "{\n  \"model\": \"%s\", \"preset\": \"%s\", \"seed\": %llu,\n", r->model, r->preset,
            (unsigned long long)r->seed);
    fprintf(f, "  \"sampling\": {\"sampled\": %s, \"requests_used\": %u, \"n_requests\": %u, \"request_step\": %u, "
               "\"max_requests\": %u, \"groups_used\": %u, \"n_groups\": %u, \"group_step\": %u, \"max_groups\": %u, "
               "\"max_positions\": %u},\n",
            r->sampled ? "true" : "false", r->requests_used, r->n_requests, o->request_step, o->max_requests,
            r->groups_used, r->n_groups, o->group_step, o->max_groups, o->max_positions);
    fprintf(f, "  \"streams\": %llu, \"positions\": %llu, \"selected\": %llu, \"added\": %llu, \"first_time\": %llu,\n",
            (unsigned long long)T->streams, (unsigned long long)T->positions, (unsigned long long)T->selected,
            (unsigned long long)T->added, (unsigned long long)T->cold);
    fprintf(f, "  \"miss_rates\": [");
    for (uint32_t b = 0; b < o->n_budgets; b++) {
        char lab[32];
        budget_label(lab, sizeof lab, &o->budgets[b]);
        fprintf(f, "%s\n    {\"budget\": \"%s\"", b ? "," : "", lab);
        for (int p = 0; p < STATS_N_POLICIES; p++) {
            fprintf(f, ", \"%s\": ", policy_name[p]);
            json_num(f, stats_miss_rate(r, p, b, -1));
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"lru_curve\": [");
    double pts[64];
    uint32_t np = curve_points(r, pts, 64);
    for (uint32_t i = 0; i < np; i++) {
        fprintf(f, "%s{\"budget_k\": %g, \"miss\": ", i ? ", " : "", pts[i]);
        json_num(f, stats_lru_curve(r, pts[i]));
        fprintf(f, "}");
    }
    fprintf(f, "],\n  \"union\": [");
    for (uint32_t q = 1; q <= o->union_qmax; q++) {
        fprintf(f, "%s{\"q\": %u, \"union_k\": ", q > 1 ? ", " : "", q);
        json_num(f, stats_union(r, q));
        fprintf(f, "}");
    }
    fprintf(f, "],\n  \"reuse_hist\": [");
    int last = 0;
    for (int b = 0; b < STATS_REUSE_BUCKETS; b++) if (r->reuse_hist[b]) last = b;
    for (int b = 0; b <= last; b++)
        fprintf(f, "%s{\"from\": %u, \"count\": %llu}", b ? ", " : "", 1u << b, (unsigned long long)r->reuse_hist[b]);
    fprintf(f, "],\n  \"groups\": [");
    int first = 1;
    for (uint32_t g = 0; g < r->n_groups; g++) {
        if (!r->group_used[g]) continue;
        const stats_group *x = &r->group[g];
        fprintf(f, "%s\n    {\"group\": %u, \"k\": %u, \"step_overlap\": ", first ? "" : ",", g, x->k);
        json_num(f, stats_step_overlap(r, (int)g));
        fprintf(f, ", \"min\": ");
        json_num(f, x->positions ? x->overlap_min : NAN);
        fprintf(f, ", \"max\": ");
        json_num(f, x->positions ? x->overlap_max : NAN);
        fprintf(f, ", \"cross_overlap\": ");
        json_num(f, stats_cross_overlap(r, (int)g));
        for (int p = 0; p < STATS_N_POLICIES; p++) {
            fprintf(f, ", \"%s\": [", policy_name[p]);
            for (uint32_t b = 0; b < o->n_budgets; b++) {
                if (b) fprintf(f, ", ");
                json_num(f, stats_miss_rate(r, p, b, (int)g));
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
        first = 0;
    }
    fprintf(f, "\n  ]\n}\n");
    return ferror(f) ? dh_err("stats: write error") : 0;
}

int stats_print_tsv(FILE *f, const stats_report *r)
{
    const stats_options *o = &r->opt;
    fprintf(f, "# dhtrace stats: model %s, preset %s, seed %llu\n", r->model, r->preset, (unsigned long long)r->seed);
    if (r->sampled) sampling_line(f, r, "# ");
    fprintf(f, "# miss_rates (one row per budget; fractions of selected rows; budget as given, then in units of k)\n"
               "budget\tbudget_k\tlru\tfifo\trandom\tbelady\n");
    for (uint32_t b = 0; b < o->n_budgets; b++) {
        char lab[32];
        const stats_budget *bu = &o->budgets[b];
        budget_label(lab, sizeof lab, bu);
        fprintf(f, "%s\t%.6g", lab, bu->k_mult > 0 ? bu->k_mult : r->total.k ? (double)bu->rows / r->total.k : NAN);
        for (int p = 0; p < STATS_N_POLICIES; p++) fprintf(f, "\t%.6g", stats_miss_rate(r, p, b, -1));
        fprintf(f, "\n");
    }
    fprintf(f, "\n\n# lru_curve\nbudget_k\tmiss\n");
    for (uint32_t m = STATS_MRC_RES; m < r->mrc_len; m += STATS_MRC_RES / 8)
        fprintf(f, "%g\t%.6g\n", (double)m / STATS_MRC_RES, stats_lru_curve(r, (double)m / STATS_MRC_RES));
    fprintf(f, "\n\n# union\nq\tunion_k\n");
    for (uint32_t q = 1; q <= o->union_qmax; q++) fprintf(f, "%u\t%.6g\n", q, stats_union(r, q));
    fprintf(f, "\n\n# step_overlap\ngroup\tk\tmean\tmin\tmax\tcross\n");
    for (uint32_t g = 0; g < r->n_groups; g++) {
        if (!r->group_used[g]) continue;
        const stats_group *x = &r->group[g];
        fprintf(f, "%u\t%u\t%.6g\t%.6g\t%.6g\t%.6g\n", g, x->k, stats_step_overlap(r, (int)g), x->overlap_min,
                x->overlap_max, stats_cross_overlap(r, (int)g));
    }
    fprintf(f, "\n\n# reuse_hist (distance bucket [from, 2*from))\nfrom\tcount\n");
    for (int b = 0; b < STATS_REUSE_BUCKETS; b++)
        if (r->reuse_hist[b]) fprintf(f, "%u\t%llu\n", 1u << b, (unsigned long long)r->reuse_hist[b]);
    return ferror(f) ? dh_err("stats: write error") : 0;
}

int stats_target_value(const stats_report *r, const char *name, double *out)
{
    char pol[16];
    double mult;
    unsigned a, b, q;
    int n = 0;
    if (sscanf(name, "%15[a-z]_miss_%lfk%n", pol, &mult, &n) == 2 && name[n] == 0) {
        int p = -1;
        for (int i = 0; i < STATS_N_POLICIES; i++) if (!strcmp(pol, policy_name[i])) p = i;
        if (p < 0) return dh_err("stats: target '%s': unknown policy '%s'", name, pol);
        if (p == STATS_LRU) {
            double m = mult * STATS_MRC_RES;
            if (fabs(m - floor(m + 0.5)) > 1e-9) return dh_err("stats: target '%s': LRU budgets are multiples of k/%d", name, STATS_MRC_RES);
            *out = stats_lru_curve(r, mult);
            return isnan(*out) ? dh_err("stats: target '%s': nothing measured", name) : 0;
        }
        for (uint32_t i = 0; i < r->opt.n_budgets; i++)
            if (fabs(r->opt.budgets[i].k_mult - mult) < 1e-9) {
                *out = stats_miss_rate(r, p, i, -1);
                return isnan(*out) ? dh_err("stats: target '%s': policy not simulated", name) : 0;
            }
        return dh_err("stats: target '%s': budget %gk was not among the simulated budgets", name, mult);
    }
    char what[8];
    if (sscanf(name, "step_overlap_%7[a-z]_groups_%u_%u%n", what, &a, &b, &n) == 3 && name[n] == 0) {
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        unsigned cnt = 0;
        for (uint32_t g = a; g <= b && g < r->n_groups; g++) {
            if (!r->group_used[g] || !r->group[g].positions) continue;
            double v = stats_step_overlap(r, (int)g);
            sum += v;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
            cnt++;
        }
        if (!cnt) return dh_err("stats: target '%s': no group of %u..%u was analysed", name, a, b);
        if (!strcmp(what, "mean")) *out = sum / cnt;
        else if (!strcmp(what, "min")) *out = lo;
        else if (!strcmp(what, "max")) *out = hi;
        else return dh_err("stats: target '%s': expected mean, min or max", name);
        return 0;
    }
    if (!strcmp(name, "cross_overlap_mean")) {
        *out = stats_cross_overlap(r, -1);
        return isnan(*out) ? dh_err("stats: target '%s': fewer than two groups analysed", name) : 0;
    }
    if (sscanf(name, "union_%u%n", &q, &n) == 1 && name[n] == 0) {
        *out = stats_union(r, q);
        return isnan(*out) ? dh_err("stats: target '%s': not measured", name) : 0;
    }
    return dh_err("stats: unknown statistic '%s'", name);
}
