/* stats.c: locality statistics of selection streams; see stats.h for the
 * definitions and the cache model.
 *
 * Design. Streams are analysed one at a time, request-major. Each stream is
 * read once into an in-memory delta log (4 bytes per changed row) while the
 * streaming pass measures LRU at every budget, reuse distances, the union of
 * the last q selections and the step overlap; the fixed-budget policies then
 * replay that one log (no policy decodes the stream again), FIFO and random
 * simulating all their budgets in one pass over it and Belady all its budgets
 * in another, and the next group of the same request replays the previous
 * group's log in lockstep to measure the cross-group overlap. Memory is
 * bounded by one stream's log plus per-row arrays of the longest context,
 * never by the trace.
 *
 * Only rows entering or leaving the selection cost work (about 1,200 per
 * position on a 100K-row context with k = 2048), and the hot loops are
 * written for the machine: per-row state is prefetched, data-dependent
 * branches are replaced by arithmetic where rows hit or miss unpredictably,
 * and each loop lives in a function of its own so its variables stay in
 * registers (bench/RESULTS-traces.md has the measured effect of each).
 *
 * LRU, Mattson with whole-selection accesses. LRU orders rows by (last
 * position selected, row index). The rows selected at t-1 share the newest
 * key, so they are exactly the top n_sel(t-1) of the stack and never miss at
 * any budget >= k; only rows entering at t can miss. A row that is not
 * selected has a fixed key from the moment it left, so the stack below the
 * current selection is the sequence of leave events, numbered in order (a
 * position's leaving rows in ascending row order, which realises the tie
 * rule). For an entering row whose leave event is e, the rows that left
 * after it and are still out are the live events after e: the live events
 * minus those numbered <= e, which lru_rank reads from a per-block prefix,
 * a per-word prefix inside the block and one popcount. Its stack distance is
 * d = n_sel(t-1) + that count + 1, and it misses at budget B iff d > B. All
 * entering rows of a position are ranked before any leave event dies (the
 * accesses are simultaneous). O(1) per entering and per leaving row, plus
 * the lazy rebuild of the block prefix from the oldest block that changed.
 *
 * Budgets that need no simulation. If B is at least the number of distinct
 * rows the stream ever selects, nothing is ever evicted and every policy
 * misses exactly the first-time rows; if every position selects exactly B
 * rows, the buffer always equals the selection and every policy misses
 * exactly the entering rows. Both hold for a whole stream or not at all, and
 * are checked from the log, so the common default budget B = k costs nothing.
 *
 * FIFO: a ring of insertion numbers per budget with a bitset over the numbers
 * marking the evictable ones (resident, not selected); a cursor never passes
 * the earliest of them, so the victim is found by scanning words from the
 * cursor. Numbers are compacted when they reach 8B + 64. O(1) per changed
 * row and per miss, amortised.
 *
 * Random: the victim is the j-th evictable row in row order, j drawn from
 * the budget's Philox stream. The evictable rows are a bitset with a count
 * per word; a position that evicts builds a 16-ary tree of prefix counts
 * over the words (O(words), vectorised) and finds each victim by comparing
 * 16 counts at once on each of three levels and a select in one word. Four
 * draws at a time are turned into ranks in the set before them, so their
 * searches are independent and overlap. O(1) per changed row, O(1) per
 * eviction (three levels for up to 262,144 rows).
 *
 * Belady MIN by counting. A row that leaves the selection at t with next
 * selection u (recorded by the streaming pass when the row re-enters, so no
 * backward pass is needed) joins bucket u of the evictable rows (a bucket
 * past the end stands for "never again"). At u every row of bucket u is
 * selected again: it is a hit if still resident, and every other entering
 * row misses. Eviction takes the furthest bucket first. Which rows of one
 * bucket are evicted cannot change any later miss count (they are not
 * accessed before u and are all selected at u), so only the number evicted
 * from each bucket matters: the pushes per bucket are shared by all budgets,
 * each budget keeps an evicted count per bucket and a bitmap of non-empty
 * buckets, and no row identity is stored. The counts equal those of MIN
 * with the tie rule of stats.h (tests/test_stats.c compares them with a
 * plain implementation that uses the rule). O(1) per leaving row, shared;
 * O(buckets touched + positions / 64) per budget and position. */
#include "common/mem.h"
#include "traces/stats.h"
#include "common/dh_err.h"
#include "common/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEVER UINT32_MAX       /* row never selected */
#define SELECTED (UINT32_MAX - 1)
/* Rows ahead whose per-row state is prefetched in loops over a delta: the
 * rows of a delta are spread over the context, so each is a cache miss. */
#define STATS_PREFETCH 16
/* For the functions holding the hot loops: inlined into one large caller,
 * their loop variables would be spilled to the stack. */
#define HOT __attribute__((noinline))

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

/* Budgets are computed in double and 64 bits: k_mult * k overflows 32 bits
 * for a k near 2^32. A budget that large holds every context (a context has
 * at most 2^32 - 1 rows), so it is capped there and stays exact in effect. */
static uint32_t budget_rows(const stats_budget *b, uint32_t k)
{
    if (!(b->k_mult > 0)) return b->rows;
    double rows = ceil(b->k_mult * (double)k - 1e-9);
    return rows >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)rows;
}


/* Grow *p to hold at least need elements of size sz (contents kept, new part zeroed). */
static void grow(void *pp, size_t *cap, size_t need, size_t sz)
{
    void **p = pp;
    if (need <= *cap && *p) return;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * sz);
    if (!q) { fprintf(stderr, "out of memory\n"); abort(); }
    memset((char *)q + *cap * sz, 0, (n - *cap) * sz);
    *p = q;
    *cap = n;
}

/* ---------------------------------------------------------------- bitsets */

static inline int bget(const uint64_t *b, uint64_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }
static inline void bset(uint64_t *b, uint64_t i) { b[i >> 6] |= 1ull << (i & 63); }
static inline void bclr(uint64_t *b, uint64_t i) { b[i >> 6] &= ~(1ull << (i & 63)); }

/* Population count without relying on the popcnt instruction (the build
 * targets baseline x86-64, where __builtin_popcountll is a library call). */
static inline uint32_t popc(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* select_in_byte[v][r]: the position of the set bit of rank r in byte v. */
typedef uint8_t byte_select[256][8];

static void byte_select_init(byte_select t)
{
    for (uint32_t v = 0; v < 256; v++)
        for (uint32_t b = 0, r = 0; b < 8; b++)
            if (v >> b & 1) t[v][r++] = (uint8_t)b;
}

/* Position of the set bit of rank r (0-based) in w, which has more than r
 * set bits: byte prefix counts locate the byte without branches (Vigna,
 * "Broadword implementation of rank/select queries", 2008), a table the bit
 * in it (evictable rows come in runs, so a loop over the byte's bits would
 * mispredict). */
static inline uint32_t select64(const byte_select t, uint64_t w, uint32_t r)
{
    const uint64_t L8 = 0x0101010101010101ull, H8 = 0x8080808080808080ull;
    uint64_t x = w - ((w >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    uint64_t upto = x * L8;                          /* byte i: set bits in bytes 0..i */
    uint64_t gt = ((upto | H8) - (uint64_t)(r + 1) * L8) & H8; /* bytes with upto > r */
    uint32_t byte = (uint32_t)__builtin_ctzll(gt) >> 3;
    uint32_t rr = r - (uint32_t)(((upto << 8) >> (8 * byte)) & 0xFF);
    return 8 * byte + t[(w >> (8 * byte)) & 0xFF][rr];
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

static int slog_push(slog *l, const sel_delta *d)
{
    if (l->positions + 1 >= l->pos_cap) {
        l->pos_cap = l->pos_cap ? 2 * l->pos_cap : 1024;
        l->off = realloc(l->off, (l->pos_cap + 1) * sizeof *l->off);
        l->n_add = realloc(l->n_add, l->pos_cap * sizeof *l->n_add);
        l->n_sel = realloc(l->n_sel, l->pos_cap * sizeof *l->n_sel);
        if (!l->off || !l->n_add || !l->n_sel) abort();
    }
    size_t need = l->n + d->n_added + d->n_removed;
    /* Leave events and log offsets are counted in 32 bits. */
    if (need >= UINT32_MAX) return dh_err("stats: a stream changes more than 4G rows; analyse fewer positions (--positions)");
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
    return 0;
}

static void slog_free(slog *l) { free(l->rows); free(l->off); free(l->n_add); free(l->n_sel); }

/* ---------------------------------------------------------------- policy state */

/* FIFO at one budget. */
typedef struct {
    uint32_t budget, cap, next, count, cursor;
    uint32_t *slot;       /* [rows] insertion number of a resident row, 0 if not resident */
    uint32_t *slot_row;   /* [cap + 1] row of each insertion number */
    uint64_t *ev, *ev_tmp;/* bit per insertion number: resident and not selected */
    uint64_t *alive;      /* bit per insertion number: resident */
    size_t slot_cap, slot_row_cap, ev_cap, ev_tmp_cap, alive_cap;
    uint64_t miss;
} fifo_sim;

/* Random at one budget. The evictable rows are a bitset with a count per
 * word; a position that evicts builds a 16-ary tree of exclusive prefix
 * sums over the word counts (groups of 16 words, supergroups of 16 groups,
 * then one entry per supergroup), so finding the j-th evictable row is three
 * comparisons of 16 counts at once and a select in one word, and taking it
 * out subtracts one from the entries after it at each level. */
typedef struct {
    uint32_t budget, count, n_ev, n_super;
    uint64_t *evictable;  /* bitset over rows: resident and not selected */
    uint8_t *word_count;  /* evictable rows per word */
    uint16_t (*group)[16];/* per group of 16 words: evictable rows in the words before each */
    uint16_t (*super)[16];/* per supergroup: evictable rows in the groups before each */
    uint32_t *top;        /* evictable rows in the supergroups before each; at least 16
                           * entries, those past the last supergroup INT32_MAX */
    uint32_t *draw;       /* the ranks drawn for one position's evictions */
    size_t evictable_cap, word_count_cap, group_cap, super_cap, top_cap, draw_cap;
    const byte_select *select;
    rng_stream rng;
    uint64_t miss;
} random_sim;

/* Belady at one budget: evicted rows per bucket and the non-empty buckets. */
typedef struct {
    uint32_t budget, top;  /* top: no non-empty bucket lies in a word above it */
    uint64_t resident;
    uint32_t *evicted;     /* [positions + 1] */
    uint64_t *nonempty;
    size_t evicted_cap, nonempty_cap;
    uint64_t miss;
} belady_sim;

/* ---------------------------------------------------------------- analysis state */

typedef struct {
    uint32_t leave; /* position the row last left, NEVER or SELECTED */
    uint32_t ev;    /* log index of that leave event */
} row_state;

/* The LRU stack below the selection: leave events numbered in order, a bit
 * per event that is still live (its row has not been selected again), the
 * live events per block of 256, the live events in the earlier words of the
 * same block (4 bytes packed in one word, kept exact on every change) and,
 * per block, the live events in all blocks before it. That last prefix is
 * rebuilt lazily from the lowest block whose count changed, once per
 * position before the ranks are read: rows re-enter mostly a few positions
 * after leaving, so that is a short tail of blocks. A rank is then two loads
 * and one popcount. */
#define EV_BLOCK_SHIFT 8

typedef struct {
    uint64_t *live;       /* bit per event */
    int32_t *count;       /* live events per block */
    uint32_t *within;     /* per block, byte i: live events in words 0..i-1 of the block */
    uint32_t *before;     /* live events in the blocks before b, valid for b < before_valid */
    size_t live_cap, count_cap, before_cap, within_cap;
    uint32_t before_valid, n_ev, n_live;
} lru_stack;

typedef struct {
    uint32_t max_rows;
    size_t words;         /* of a bitset over rows */
    uint64_t *sel;        /* current selection */
    row_state *row;       /* [max_rows] */
    lru_stack lru;
    uint32_t *dist;       /* scratch: stack distance of each entering row */
    uint32_t *lvs, *evs;  /* scratch: its leave position and leave event */
    size_t dist_cap, lvs_cap, evs_cap;
    uint32_t left_at[STATS_MAX_Q]; /* rows that left at position p (slot p % Q) and are still out */
    /* Cross-group: the previous group's selection replayed from its log. */
    uint64_t *prev_sel;
    /* Fixed-budget policies. */
    fifo_sim fifo[STATS_MAX_BUDGETS];
    random_sim rnd[STATS_MAX_BUDGETS];
    byte_select select;
    belady_sim bel[STATS_MAX_BUDGETS];
    uint32_t *key;        /* Belady: per leave event, the next position its row is selected (NEVER: not again) */
    uint32_t *pushed;     /* [positions + 1] leave events per bucket */
    uint64_t *touched;    /* bitmap of the buckets one position pushes to */
    size_t key_cap, pushed_cap, touched_cap;
} sstate;

static void sstate_init(sstate *s, uint32_t max_rows)
{
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    s->words = ((size_t)max_rows + 63) / 64;
    s->sel = dh_calloc(s->words, 8);
    s->prev_sel = dh_calloc(s->words, 8);
    s->row = dh_calloc(max_rows, sizeof *s->row);
    byte_select_init(s->select);
}

static void sstate_free(sstate *s)
{
    free(s->sel); free(s->prev_sel); free(s->row); free(s->lru.live); free(s->lru.count); free(s->lru.before);
    free(s->lru.within);
    free(s->dist); free(s->lvs); free(s->evs); free(s->key); free(s->pushed); free(s->touched);
    for (int b = 0; b < STATS_MAX_BUDGETS; b++) {
        free(s->fifo[b].slot); free(s->fifo[b].slot_row); free(s->fifo[b].ev); free(s->fifo[b].ev_tmp);
        free(s->fifo[b].alive);
        free(s->rnd[b].evictable); free(s->rnd[b].word_count); free(s->rnd[b].group); free(s->rnd[b].super);
        free(s->rnd[b].top); free(s->rnd[b].draw);
        free(s->bel[b].evicted); free(s->bel[b].nonempty);
    }
}

static void sstate_reset(sstate *s)
{
    memset(s->sel, 0, s->words * 8);
    for (uint32_t i = 0; i < s->max_rows; i++) s->row[i].leave = NEVER;
    lru_stack *L = &s->lru;
    size_t used = ((size_t)L->n_ev >> EV_BLOCK_SHIFT) + 1;
    if (L->live) memset(L->live, 0, used * (1u << EV_BLOCK_SHIFT) / 8);
    if (L->count) memset(L->count, 0, used * sizeof *L->count);
    if (L->within) memset(L->within, 0, used * sizeof *L->within);
    L->before_valid = L->n_ev = L->n_live = 0;
    memset(s->left_at, 0, sizeof s->left_at);
}

/* Room for n more events. */
static void lru_reserve(lru_stack *L, uint32_t n)
{
    size_t blocks = (((size_t)L->n_ev + n) >> EV_BLOCK_SHIFT) + 1;
    grow(&L->live, &L->live_cap, blocks << (EV_BLOCK_SHIFT - 6), 8);
    grow(&L->count, &L->count_cap, blocks, sizeof *L->count);
    grow(&L->before, &L->before_cap, blocks, sizeof *L->before);
    grow(&L->within, &L->within_cap, blocks, sizeof *L->within);
}

/* Byte i of AFTER_WORD[w] is 1 for the words i > w of a block. */
static const uint32_t AFTER_WORD[4] = {0x01010100u, 0x01010000u, 0x01000000u, 0};

/* Make before[] valid for every block: O(blocks since the lowest change). */
static void lru_prefix(lru_stack *L)
{
    uint32_t nb = (L->n_ev >> EV_BLOCK_SHIFT) + 1, b = L->before_valid ? L->before_valid : 1;
    L->before[0] = 0;
    for (; b < nb; b++) L->before[b] = L->before[b - 1] + (uint32_t)L->count[b - 1];
    L->before_valid = nb;
}

/* Live events numbered <= e. */
static inline uint32_t lru_rank(const lru_stack *L, uint32_t e)
{
    uint32_t b = e >> EV_BLOCK_SHIFT, wi = (e >> 6) & 3;
    return L->before[b] + ((L->within[b] >> (8 * wi)) & 0xFF) + popc(L->live[e >> 6] & (~0ull >> (63 - (e & 63))));
}

/* Events [e0, e0 + n) become live, a word at a time: one event at a time
 * would chain read-modify-writes of the same word through memory. */
static inline void lru_append(lru_stack *L, uint32_t e0, uint32_t n)
{
    for (uint32_t e = e0, end = e0 + n; e < end;) {
        uint32_t w = e >> 6, in_word = 64 - (e & 63), m = end - e < in_word ? end - e : in_word;
        uint64_t bits = (m == 64 ? ~0ull : ((1ull << m) - 1)) << (e & 63);
        uint32_t b = e >> EV_BLOCK_SHIFT;
        L->live[w] |= bits;
        L->count[b] += (int32_t)m;
        L->within[b] += AFTER_WORD[w & 3] * m;
        e += m;
    }
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

/* What the policies need to know of one stream. */
typedef struct {
    uint64_t added, cold;  /* over positions >= 1 */
    uint64_t distinct;     /* rows ever selected */
    uint32_t same_sel;     /* the number of rows every position selects, or UINT32_MAX */
} stream_sum;

/* A delta is checked against the selection before it as it is applied (the
 * rows entering while they are ranked, the rows leaving as they leave), so
 * the checks cost no pass of their own; a bad delta fails the whole run. */
static int check_position(const sel_delta *d, const sstate *s, uint32_t req, uint32_t g, uint32_t expect_pos)
{
    if (d->pos != expect_pos)
        return dh_err("stats: request %u group %u: position %u follows position %u", req, g, d->pos, expect_pos - 1);
    if (d->nrows > s->max_rows)
        return dh_err("stats: request %u group %u position %u: %u rows, more than the shape's %u", req, g, d->pos, d->nrows, s->max_rows);
    return 0;
}

static inline int bad_added(const sel_delta *d, const sstate *s, uint32_t x)
{
    return x >= d->nrows || bget(s->sel, x);
}

static int added_error(const sel_delta *d, uint32_t req, uint32_t g, uint32_t x)
{
    return dh_err("stats: request %u group %u position %u: added row %u is %s", req, g, d->pos, x,
                  x >= d->nrows ? "beyond the context" : "already selected");
}

/* floor(n / k) by Lemire's multiply-shift (kinv = ceil(2^64 / k); exact for
 * 32-bit n and k > 1): a 64-bit division per entering row would cost as much
 * as the rest of its ranking. */
static inline uint64_t div_k(uint64_t n, uint32_t k, uint64_t kinv)
{
    if (kinv && n < (1ull << 32)) return (uint64_t)(((unsigned __int128)kinv * n) >> 64);
    return n / k;
}

/* The per-position loops of the streaming pass, each in a function of its
 * own so that its variables stay in registers. */

/* Stack distances of the entering rows against the stack of t-1 (top =
 * n_sel(t-1) + live events + 1), before any leaves it: O(1) each after the
 * prefix rebuild. Returns the index of a row that cannot enter, or -1. */
HOT static int64_t rank_entering(const sel_delta *d, sstate *s, uint32_t top)
{
    row_state *const row = s->row;
    const lru_stack *L = &s->lru;
    uint32_t *const dist = s->dist, *const lvs = s->lvs, *const evs = s->evs;
    for (uint32_t i = 0; i < d->n_added; i++) {
        uint32_t x = d->added[i];
        if (i + STATS_PREFETCH < d->n_added) __builtin_prefetch(&row[d->added[i + STATS_PREFETCH]], 1);
        if (bad_added(d, s, x)) return i;
        row_state e = row[x];
        /* The row's state is copied out so the later passes read it in order. */
        lvs[i] = e.leave;
        evs[i] = e.ev;
        dist[i] = e.leave == NEVER ? 0 : top - lru_rank(L, e.ev);
    }
    return -1;
}

/* Leaving rows become the newest events, in ascending row order (the tie
 * rule). Returns the index of a row that was not selected, or -1. */
HOT static int64_t apply_leaving(const sel_delta *d, sstate *s, uint32_t t, uint32_t *key)
{
    row_state *const row = s->row;
    uint64_t *const sel = s->sel;
    lru_stack *L = &s->lru;
    const uint32_t ev0 = L->n_ev;
    for (uint32_t i = 0; i < d->n_removed; i++) {
        uint32_t x = d->removed[i], ev = ev0 + i;
        if (i + STATS_PREFETCH < d->n_removed) __builtin_prefetch(&row[d->removed[i + STATS_PREFETCH]], 1);
        if (x >= d->nrows || !bget(sel, x)) return i;
        bclr(sel, x);
        row[x].leave = t;
        row[x].ev = ev;
        if (key) key[ev] = NEVER;
    }
    lru_append(L, ev0, d->n_removed);
    L->n_ev += d->n_removed;
    return -1;
}

/* What the entering rows add to the histograms of one stream. */
typedef struct {
    uint64_t *mrc, *reuse_hist, *over; /* over: see stream_pass */
    const uint32_t *sorted;            /* the budgets in rows, ascending */
    uint32_t nb, mrc_last, k;
    uint64_t kinv;
    uint32_t *key;                     /* Belady's next uses, or NULL */
} enter_ctx;

/* The entering rows join the selection. */
HOT static void join_selection(const sel_delta *d, sstate *s)
{
    row_state *const row = s->row;
    uint64_t *const sel = s->sel;
    for (uint32_t i = 0; i < d->n_added; i++) {
        uint32_t x = d->added[i];
        row[x].leave = SELECTED;
        bset(sel, x);
    }
}

/* The entering rows: they join the selection, their leave events die, and
 * their distances and reuse go to the histograms, from the state that
 * rank_entering copied out (two passes, each with few enough variables to
 * keep them in registers). Returns the rows selected for the first time. */
HOT static uint32_t apply_entering(const sel_delta *d, sstate *s, uint32_t t, const enter_ctx *c)
{
    lru_stack *L = &s->lru;
    uint64_t *const live = L->live, *const mrc = c->mrc, *const reuse_hist = c->reuse_hist, *const over = c->over;
    int32_t *const count = L->count;
    uint32_t *const within = L->within, *const key = c->key, *const left_at = s->left_at;
    const uint32_t *const dist = s->dist, *const lvs = s->lvs, *const evs = s->evs, *const sorted = c->sorted;
    const uint32_t nb = c->nb, mrc_last = c->mrc_last, k = c->k;
    const uint64_t kinv = c->kinv;
    uint32_t valid = L->before_valid, killed = 0, fresh = 0;
    join_selection(d, s);
    for (uint32_t i = 0; i < d->n_added; i++) {
        uint32_t lv = lvs[i];
        if (lv == NEVER) {
            fresh++;
            continue;
        }
        /* The row's leave event dies. */
        uint32_t ev = evs[i], b = ev >> EV_BLOCK_SHIFT, dd = dist[i], j = 0;
        live[ev >> 6] &= ~(1ull << (ev & 63));
        count[b]--;
        within[b] -= AFTER_WORD[(ev >> 6) & 3];
        valid = b + 1 < valid ? b + 1 : valid;
        killed++;
        /* Belady's next use of that leave event is now known. */
        if (key) key[ev] = t;
        uint64_t bin = div_k((uint64_t)dd * STATS_MRC_RES + k - 1, k, kinv);
        mrc[bin < mrc_last ? bin : mrc_last]++;
        for (uint32_t q = 0; q < nb; q++) j += dd > sorted[q];
        over[j]++;
        uint32_t reuse = t - lv;
        reuse_hist[31 - __builtin_clz(reuse)]++;
        left_at[lv % STATS_MAX_Q] -= reuse < STATS_MAX_Q; /* branch-free: reuses straddle Q */
    }
    L->before_valid = valid;
    L->n_live -= killed;
    return fresh;
}

/* Analyse one stream (LRU, reuse, union, overlap, cross with prev log). */
HOT static int stream_pass(ctx *c, sstate *s, sel_stream *st, uint32_t req, uint32_t g, uint32_t k,
                       slog *log, const slog *prev, stats_group *gs, stream_sum *sum)
{
    const stats_options *o = c->o;
    stats_report *r = c->r;
    lru_stack *L = &s->lru;
    sel_delta d;
    uint32_t t = 0, prev_n_sel = 0, cross_inter = 0;
    const uint64_t kinv = k > 1 ? UINT64_MAX / k + 1 : 0;
    /* LRU misses per budget: each re-entering row counts once in over[j],
     * j = the number of budgets below its stack distance (budgets sorted),
     * which the end of the stream turns into misses per budget. */
    const uint32_t nb = o->n_budgets, mrc_last = r->mrc_len - 1;
    uint32_t sorted[STATS_MAX_BUDGETS], order[STATS_MAX_BUDGETS];
    uint64_t over[STATS_MAX_BUDGETS + 1] = {0};
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t j = b;
        for (; j > 0 && sorted[j - 1] > c->budget[b]; j--) { sorted[j] = sorted[j - 1]; order[j] = order[j - 1]; }
        sorted[j] = c->budget[b];
        order[j] = b;
    }
    enter_ctx ec = {r->mrc_hist, r->reuse_hist, over, sorted, nb, mrc_last, k, kinv, NULL};
    memset(s->prev_sel, 0, s->words * 8);
    sstate_reset(s);
    slog_reset(log);
    memset(sum, 0, sizeof *sum);
    gs->streams++;
    for (;;) {
        if (o->max_positions && t >= o->max_positions) break;
        int rc = sel_next(st, &d);
        if (rc < 0) return -1;
        if (rc > 0) break;
        if (check_position(&d, s, req, g, t) < 0) return -1;
        if (slog_push(log, &d) < 0) return -1;
        lru_reserve(L, d.n_removed);
        if (o->belady) {
            grow(&s->key, &s->key_cap, (size_t)L->n_ev + d.n_removed, sizeof *s->key);
            ec.key = s->key;
        }
        grow(&s->dist, &s->dist_cap, d.n_added, sizeof *s->dist);
        grow(&s->lvs, &s->lvs_cap, d.n_added, sizeof *s->lvs);
        grow(&s->evs, &s->evs_cap, d.n_added, sizeof *s->evs);
        if (t == 0) sum->same_sel = d.n_sel;
        else if (d.n_sel != sum->same_sel) sum->same_sel = UINT32_MAX;
        if (t > 0) {
            /* Accesses of this position. */
            gs->positions++;
            gs->selected += d.n_sel;
            gs->added += d.n_added;
            sum->added += d.n_added;
            double ov = (double)(prev_n_sel - d.n_removed) / k;
            if (gs->positions == 1 || ov < gs->overlap_min) gs->overlap_min = ov;
            if (gs->positions == 1 || ov > gs->overlap_max) gs->overlap_max = ov;
            gs->overlap_sum += ov;
            gs->overlap_sq += ov * ov;
            lru_prefix(L);
            int64_t bad = rank_entering(&d, s, prev_n_sel + L->n_live + 1);
            if (bad >= 0) return added_error(&d, req, g, d.added[bad]);
        } else {
            for (uint32_t i = 0; i < d.n_added; i++) {
                if (bad_added(&d, s, d.added[i])) return added_error(&d, req, g, d.added[i]);
                s->lvs[i] = NEVER; /* a fresh stream: nothing was selected before */
            }
        }
        s->left_at[t % STATS_MAX_Q] = 0;
        /* The leaving rows are applied before the entering rows so that
         * both are checked against the selection of t-1. */
        int64_t bad = apply_leaving(&d, s, t, o->belady ? s->key : NULL);
        if (bad >= 0)
            return dh_err("stats: request %u group %u position %u: removed row %u is not selected", req, g, d.pos,
                          d.removed[bad]);
        /* Stack, reuse and union bookkeeping of the entering rows, and the selection itself. */
        uint32_t fresh = apply_entering(&d, s, t, &ec);
        sum->distinct += fresh;
        if (t > 0) {
            gs->cold += fresh;
            sum->cold += fresh;
            over[nb] += fresh;
        }
        L->n_live += d.n_removed;
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
    for (uint32_t j = nb; j-- > 0;) {
        over[j] += over[j + 1];
        gs->miss[STATS_LRU][order[j]] += over[j + 1];
    }
    return 0;
}

/* ---------------------------------------------------------------- FIFO */

static void fifo_start(fifo_sim *f, uint32_t budget, uint32_t max_rows)
{
    f->budget = budget;
    /* Compaction renumbers the residents once per cap - B insertions at a
     * cost of cap / 64 words plus a store per resident: 8B keeps it to a
     * small share of the insertions' own cost. */
    uint64_t cap = 8ull * budget + 64;
    f->cap = cap < UINT32_MAX - 64 ? (uint32_t)cap : UINT32_MAX - 64;
    f->next = f->count = 0;
    f->cursor = 1;
    f->miss = 0;
    grow(&f->slot, &f->slot_cap, max_rows, sizeof *f->slot);
    grow(&f->slot_row, &f->slot_row_cap, (size_t)f->cap + 1, sizeof *f->slot_row);
    grow(&f->ev, &f->ev_cap, f->cap / 64 + 2, 8);
    grow(&f->ev_tmp, &f->ev_tmp_cap, f->cap / 64 + 2, 8);
    grow(&f->alive, &f->alive_cap, f->cap / 64 + 2, 8);
    memset(f->slot, 0, (size_t)max_rows * sizeof *f->slot);
    memset(f->ev, 0, (f->cap / 64 + 2) * 8);
    memset(f->alive, 0, (f->cap / 64 + 2) * 8);
}

/* Renumber the residents 1..count in insertion order, keeping their marks:
 * the live numbers come from the alive bits, so no row is read back. */
static void fifo_compact(fifo_sim *f)
{
    uint32_t n = 0, words = f->cap / 64 + 2;
    memset(f->ev_tmp, 0, words * 8);
    for (uint32_t w = 0; w < words; w++)
        for (uint64_t bits = f->alive[w]; bits; bits &= bits - 1) {
            uint32_t q = w * 64 + (uint32_t)__builtin_ctzll(bits), y = f->slot_row[q];
            n++;
            f->slot_row[n] = y;
            f->slot[y] = n;
            if (bget(f->ev, q)) bset(f->ev_tmp, n);
        }
    DH_BUG_ON(n != f->count);
    memset(f->alive, 0, words * 8);
    for (uint32_t q = 1; q <= n; q++) bset(f->alive, q);
    uint64_t *tmp = f->ev;
    f->ev = f->ev_tmp;
    f->ev_tmp = tmp;
    f->next = n;
    f->cursor = 1;
}

/* One position: O(1) per changed row, plus the word scan of each eviction. */
HOT static void fifo_step(fifo_sim *f, const uint32_t *add, uint32_t na, const uint32_t *rem, uint32_t nr, int counted,
                      uint32_t *miss_rows)
{
    /* Selected rows are resident, so every leaving row has a number. */
    for (uint32_t i = 0; i < nr; i++) {
        if (i + STATS_PREFETCH < nr) __builtin_prefetch(&f->slot[rem[i + STATS_PREFETCH]]);
        uint32_t q = f->slot[rem[i]];
        bset(f->ev, q);
        if (q < f->cursor) f->cursor = q;
    }
    /* Hits are pinned before any miss looks for a victim (branch-free:
     * hits and misses alternate unpredictably; number 0 is never marked). */
    uint32_t nm = 0;
    for (uint32_t i = 0; i < na; i++) {
        if (i + STATS_PREFETCH < na) __builtin_prefetch(&f->slot[add[i + STATS_PREFETCH]]);
        uint32_t x = add[i], q = f->slot[x];
        f->ev[q >> 6] &= ~((uint64_t)(q != 0) << (q & 63));
        miss_rows[nm] = x;
        nm += q == 0;
    }
    if (counted) f->miss += nm;
    const uint32_t last_word = f->cap / 64 + 1;
    for (uint32_t i = 0; i < nm; i++) {
        uint32_t x = miss_rows[i];
        if (f->count == f->budget) {
            uint32_t w = f->cursor >> 6;
            uint64_t bits = f->ev[w] & (~0ull << (f->cursor & 63));
            while (!bits) {
                DH_BUG_ON(w >= last_word);
                bits = f->ev[++w];
            }
            uint32_t q = w * 64 + (uint32_t)__builtin_ctzll(bits);
            bclr(f->ev, q);
            bclr(f->alive, q);
            f->slot[f->slot_row[q]] = 0;
            f->cursor = q + 1;
            f->count--;
        }
        if (f->next == f->cap) fifo_compact(f);
        f->slot[x] = ++f->next;
        f->slot_row[f->next] = x;
        bset(f->alive, f->next);
        f->count++;
    }
}

/* ---------------------------------------------------------------- random */

#define RND_SUPER_ROWS (16 * 16 * 64)

static void random_start(random_sim *m, uint32_t budget, const sstate *s, uint64_t seed, uint32_t req, uint32_t g)
{
    uint32_t max_rows = s->max_rows;
    m->select = &s->select;
    m->n_super = (max_rows + RND_SUPER_ROWS - 1) / RND_SUPER_ROWS;
    size_t groups = (size_t)m->n_super * 16, words = groups * 16;
    m->budget = budget;
    m->count = m->n_ev = 0;
    m->miss = 0;
    grow(&m->evictable, &m->evictable_cap, words, 8);
    grow(&m->word_count, &m->word_count_cap, words, 1);
    grow(&m->group, &m->group_cap, groups, sizeof *m->group);
    grow(&m->super, &m->super_cap, m->n_super, sizeof *m->super);
    grow(&m->top, &m->top_cap, m->n_super < 16 ? 16 : m->n_super, sizeof *m->top);
    memset(m->evictable, 0, words * 8);
    memset(m->word_count, 0, words);
    rng_init(&m->rng, seed, req, g, 3);
}

/* One position's changes: O(1) per changed row. Returns the evictions due. */
static uint32_t random_update(random_sim *m, const uint32_t *add, uint32_t na, const uint32_t *rem, uint32_t nr, int counted)
{
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t x = rem[i];
        bset(m->evictable, x);
        m->word_count[x >> 6]++;
    }
    m->n_ev += nr;
    /* A row entering the selection hits iff it is resident, i.e. evictable
     * until now (branch-free: clearing a clear bit changes nothing). */
    uint32_t hits = 0;
    for (uint32_t i = 0; i < na; i++) {
        uint32_t x = add[i], h = (uint32_t)bget(m->evictable, x);
        bclr(m->evictable, x);
        m->word_count[x >> 6] -= (uint8_t)h;
        hits += h;
    }
    m->n_ev -= hits;
    uint32_t misses = na - hits;
    if (counted) m->miss += misses;
    /* The misses are served in row order; the first ones fill free space,
     * every later one evicts. Inserted rows are selected, so only the
     * number of misses matters, not which rows they are. */
    uint32_t free_rows = m->budget - m->count, evict = misses > free_rows ? misses - free_rows : 0;
    m->count += misses - evict;
    return evict;
}

/* Exclusive prefix sums of 16 word counts into e; returns their total. */
static inline uint32_t group_prefix(uint16_t *e, const uint8_t *c)
{
#if defined(__SSE2__)
    __m128i b = _mm_loadu_si128((const __m128i *)c), z = _mm_setzero_si128();
    __m128i lo = _mm_unpacklo_epi8(b, z), hi = _mm_unpackhi_epi8(b, z);
    /* Inclusive sums within each half by shift-and-add, then exclusive. */
    lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 2));
    hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 2));
    lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 4));
    hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 4));
    lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 8));
    hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 8));
    hi = _mm_add_epi16(hi, _mm_shufflehi_epi16(_mm_shufflelo_epi16(_mm_unpackhi_epi64(lo, lo), 0xFF), 0xFF));
    uint32_t total = (uint32_t)_mm_extract_epi16(hi, 7);
    _mm_storeu_si128((__m128i *)e, _mm_slli_si128(lo, 2));
    _mm_storeu_si128((__m128i *)e + 1, _mm_or_si128(_mm_slli_si128(hi, 2), _mm_srli_si128(lo, 14)));
    return total;
#else
    uint32_t in_group = 0;
    for (uint32_t i = 0; i < 16; i++) { e[i] = (uint16_t)in_group; in_group += c[i]; }
    return in_group;
#endif
}

/* The prefix tree from the word counts: O(words). */
static void random_build(random_sim *m)
{
    uint32_t carry = 0;
    for (uint32_t h = 0; h < m->n_super; h++) {
        uint32_t in_super = 0;
        for (uint32_t gi = 0; gi < 16; gi++) {
            uint32_t g = h * 16 + gi, in_group = group_prefix(m->group[g], m->word_count + (size_t)g * 16);
            m->super[h][gi] = (uint16_t)in_super;
            in_super += in_group;
        }
        m->top[h] = carry;
        carry += in_super;
    }
    for (uint32_t h = m->n_super; h < 16; h++) m->top[h] = INT32_MAX;
}

/* An evictable row's place: supergroup, group in it, word in that, bit. */
typedef struct { uint32_t h, gi, wi, bit; } rnd_loc;

/* Among 16 non-decreasing counts with e[0] = 0 <= j (all at most 16384),
 * the last index whose count is <= j; and one subtracted from every entry
 * after index c. SSE2 where available (every x86-64), else plain loops. */
#if defined(__SSE2__)
#include <emmintrin.h>
/* The entry's value comes from the loaded vectors (the largest entry <= j):
 * reading it back as a scalar right after drop16's vector store would miss
 * store forwarding and stall. */
static inline uint32_t child16(const uint16_t *e, uint32_t j, uint32_t *value)
{
    __m128i jj = _mm_set1_epi16((short)j);
    __m128i a = _mm_loadu_si128((const __m128i *)e), b = _mm_loadu_si128((const __m128i *)e + 1);
    __m128i ga = _mm_cmpgt_epi16(a, jj), gb = _mm_cmpgt_epi16(b, jj);
    __m128i m = _mm_max_epi16(_mm_andnot_si128(ga, a), _mm_andnot_si128(gb, b));
    m = _mm_max_epi16(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epi16(m, _mm_shuffle_epi32(m, 0xB1));
    m = _mm_max_epi16(m, _mm_shufflelo_epi16(m, 0xB1));
    *value = (uint32_t)_mm_cvtsi128_si32(m) & 0xFFFF;
    uint32_t above = (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(ga, gb));
    return (uint32_t)__builtin_ctz(above | 0x10000) - 1;
}
static inline void drop16(uint16_t *e, uint32_t c)
{
    const __m128i lo = _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7), hi = _mm_setr_epi16(8, 9, 10, 11, 12, 13, 14, 15);
    __m128i cc = _mm_set1_epi16((short)c), *p = (__m128i *)e;
    _mm_storeu_si128(p, _mm_add_epi16(_mm_loadu_si128(p), _mm_cmpgt_epi16(lo, cc)));
    _mm_storeu_si128(p + 1, _mm_add_epi16(_mm_loadu_si128(p + 1), _mm_cmpgt_epi16(hi, cc)));
}
/* The same over 16 entries of 32 bits (below 2^31). */
/* Over the first 4 * nv entries (nv = 2 or 4; the rest are INT32_MAX). */
static inline uint32_t child16_32(const uint32_t *e, uint32_t j, uint32_t *value, int nv)
{
    __m128i jj = _mm_set1_epi32((int)j), g[4], v[4];
    for (int i = 0; i < 4; i++) {
        if (i >= nv) { g[i] = _mm_set1_epi32(-1); continue; }
        v[i] = _mm_loadu_si128((const __m128i *)e + i);
        g[i] = _mm_cmpgt_epi32(v[i], jj);
        v[i] = _mm_andnot_si128(g[i], v[i]); /* entries <= j; non-negative, so a signed max finds the largest */
    }
    __m128i m = v[0];
    for (int i = 1; i < nv; i++) {
        __m128i gt = _mm_cmpgt_epi32(v[i], m);
        m = _mm_or_si128(_mm_and_si128(gt, v[i]), _mm_andnot_si128(gt, m));
    }
    /* Two steps written out: the shuffle's control must be a constant (clang insists). */
    __m128i o = _mm_shuffle_epi32(m, 0x4E), gt = _mm_cmpgt_epi32(o, m);
    m = _mm_or_si128(_mm_and_si128(gt, o), _mm_andnot_si128(gt, m));
    o = _mm_shuffle_epi32(m, 0xB1);
    gt = _mm_cmpgt_epi32(o, m);
    m = _mm_or_si128(_mm_and_si128(gt, o), _mm_andnot_si128(gt, m));
    *value = (uint32_t)_mm_cvtsi128_si32(m);
    __m128i w = _mm_packs_epi16(_mm_packs_epi32(g[0], g[1]), _mm_packs_epi32(g[2], g[3]));
    return (uint32_t)__builtin_ctz((uint32_t)_mm_movemask_epi8(w) | 0x10000) - 1;
}
/* One subtracted from the entries after each L[k].h (the first 4 * v). */
static inline void drop16_32_n(uint32_t *e, const rnd_loc *L, uint32_t n, int v)
{
    __m128i *p = (__m128i *)e;
    for (int i = 0; i < v; i++) {
        __m128i idx = _mm_setr_epi32(4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3), acc = _mm_setzero_si128();
        for (uint32_t k = 0; k < n; k++) acc = _mm_add_epi32(acc, _mm_cmpgt_epi32(idx, _mm_set1_epi32((int)L[k].h)));
        _mm_storeu_si128(p + i, _mm_add_epi32(_mm_loadu_si128(p + i), acc));
    }
}
#else
static inline uint32_t child16(const uint16_t *e, uint32_t j, uint32_t *value)
{
    uint32_t c = 0;
    for (uint32_t i = 1; i < 16; i++) c += e[i] <= j;
    *value = e[c];
    return c;
}
static inline void drop16(uint16_t *e, uint32_t c)
{
    for (uint32_t i = 1; i < 16; i++) e[i] -= i > c;
}
static inline uint32_t child16_32(const uint32_t *e, uint32_t j, uint32_t *value, int nv)
{
    (void)nv;
    uint32_t c = 0;
    for (uint32_t i = 1; i < 16; i++) c += e[i] <= j;
    *value = e[c];
    return c;
}
static inline void drop16_32_n(uint32_t *e, const rnd_loc *L, uint32_t n, int v)
{
    (void)v;
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 1; i < 16; i++) e[i] -= i > L[k].h;
}
#endif

/* Where the j-th evictable row in row order lies: O(supergroups + 1) with
 * no data-dependent branch. */

static inline rnd_loc random_locate(const random_sim *m, uint32_t j)
{
    rnd_loc L;
    uint32_t before;
    if (m->n_super <= 8) {
        L.h = child16_32(m->top, j, &before, 2); /* up to 131,072 rows */
    } else if (m->n_super <= 16) {
        L.h = child16_32(m->top, j, &before, 4);
    } else {
        L.h = 0;
        for (uint32_t i = 1; i < m->n_super; i++) L.h += m->top[i] <= j;
        before = m->top[L.h];
    }
    j -= before;
    L.gi = child16(m->super[L.h], j, &before);
    j -= before;
    uint32_t g = L.h * 16 + L.gi;
    L.wi = child16(m->group[g], j, &before);
    j -= before;
    L.bit = select64(*m->select, m->evictable[g * 16 + L.wi], j);
    return L;
}

/* Take located rows out; the top level, which every eviction changes, once
 * for all of them (a chain of read-modify-writes through memory otherwise). */
static inline void random_remove(random_sim *m, const rnd_loc *L, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        uint32_t g = L[k].h * 16 + L[k].gi, w = g * 16 + L[k].wi;
        m->evictable[w] &= ~(1ull << L[k].bit);
        m->word_count[w]--;
        drop16(m->group[g], L[k].wi);
        drop16(m->super[L[k].h], L[k].gi);
    }
    if (m->n_super <= 16) {
        drop16_32_n(m->top, L, n, m->n_super <= 8 ? 2 : 4);
    } else {
        for (uint32_t k = 0; k < n; k++)
            for (uint32_t i = 1; i < m->n_super; i++) m->top[i] -= i > L[k].h; /* a fixed trip count predicts well */
    }
    m->n_ev -= n;
}

static inline uint32_t min32(uint32_t a, uint32_t b) { return a < b ? a : b; }
static inline uint32_t max32(uint32_t a, uint32_t b) { return a < b ? b : a; }

/* Evict for d[0..n), where d[e] is a rank among the rows still evictable
 * after the evictions before it. Four draws at a time are first turned into
 * ranks in the set before them (a rank at or above an earlier victim's moves
 * up by one; a sorting network keeps it branch-free), then located on the
 * same tree independently, so their work overlaps, and only then removed. */
static void random_evict(random_sim *m, const uint32_t *d, uint32_t n)
{
    uint32_t e = 0;
    for (; e + 4 <= n; e += 4) {
        uint32_t r0 = d[e], r1 = d[e + 1], r2 = d[e + 2], r3 = d[e + 3];
        r1 += r0 <= r1;
        uint32_t a = min32(r0, r1), b = max32(r0, r1);
        r2 += a <= r2;
        r2 += b <= r2;
        uint32_t s0 = min32(a, r2), mid = max32(a, r2), s1 = min32(mid, b), s2 = max32(mid, b);
        r3 += s0 <= r3;
        r3 += s1 <= r3;
        r3 += s2 <= r3;
        rnd_loc l0 = random_locate(m, r0), l1 = random_locate(m, r1), l2 = random_locate(m, r2), l3 = random_locate(m, r3);
        rnd_loc loc[4] = {l0, l1, l2, l3};
        random_remove(m, loc, 4);
    }
    for (; e < n; e++) {
        rnd_loc loc = random_locate(m, d[e]);
        random_remove(m, &loc, 1);
    }
}

/* One position of every random budget. (Interleaving the evictions of
 * different budgets, which are independent chains of loads, measured no
 * faster: the budgets' trees then compete for L1.) */
HOT static void random_step(random_sim *sims, uint32_t n, const uint32_t *add, uint32_t na, const uint32_t *rem, uint32_t nr,
                        int counted)
{
    uint32_t evict[STATS_MAX_BUDGETS];
    for (uint32_t i = 0; i < n; i++) {
        random_sim *m = &sims[i];
        evict[i] = random_update(m, add, na, rem, nr, counted);
        if (!evict[i]) continue;
        random_build(m);
        /* The draws depend only on how many rows are evictable, which drops
         * by one per eviction, so they are made before the evictions and
         * stay off the chain of dependent loads. */
        grow(&m->draw, &m->draw_cap, evict[i], sizeof *m->draw);
        for (uint32_t e = 0; e < evict[i]; e++) m->draw[e] = rng_below(&m->rng, m->n_ev - e);
    }
    for (uint32_t i = 0; i < n; i++) random_evict(&sims[i], sims[i].draw, evict[i]);
}

/* ---------------------------------------------------------------- Belady */

/* All budgets of MIN over the log, by counting (see the top of this file).
 * The next use of every leave event was recorded by the streaming pass when
 * its row re-entered, so no backward pass is needed. */
HOT static void belady_run(sstate *s, const slog *l, belady_sim *sims, uint32_t n_sims)
{
    /* Buckets 0..np-1 by next use, np for never again, and 8 scratch slots
     * past it (below). */
    const uint32_t np = l->positions, never = np, nb = np + 1 + 8, nwords = nb / 64 + 1;
    size_t ev0 = 0;
    grow(&s->pushed, &s->pushed_cap, nb, sizeof *s->pushed);
    grow(&s->touched, &s->touched_cap, nwords, sizeof *s->touched);
    memset(s->pushed, 0, nb * sizeof *s->pushed);
    memset(s->touched, 0, nwords * sizeof *s->touched);
    uint64_t *touched = s->touched;
    for (uint32_t j = 0; j < n_sims; j++) {
        belady_sim *b = &sims[j];
        grow(&b->evicted, &b->evicted_cap, nb, sizeof *b->evicted);
        grow(&b->nonempty, &b->nonempty_cap, nwords, 8);
        memset(b->evicted, 0, nb * sizeof *b->evicted);
        memset(b->nonempty, 0, nwords * 8);
        b->top = 0;
        b->resident = 0;
        b->miss = 0;
    }
    for (uint32_t t = 0; t < np; t++) {
        /* Shared: the leaving rows join their buckets, marked in a bitmap
         * that each budget then ORs into its own. Branch-free: rows leaving
         * for good are counted in a register, and their increments go to 8
         * scratch slots in turn (one slot would chain them through memory). */
        uint32_t na = l->n_add[t], nr = (uint32_t)(l->off[t + 1] - l->off[t]) - na, gone = 0;
        const uint32_t *key = s->key + ev0;
        ev0 += nr;
        for (uint32_t i = 0; i < nr; i++) {
            uint32_t u = key[i], is_gone = u == NEVER;
            gone += is_gone;
            u = is_gone ? never + 1 + (i & 7) : u;
            s->pushed[u]++;
            bset(touched, u);
        }
        for (uint32_t i = never + 1; i < never + 9; i++) bclr(touched, i);
        s->pushed[never] += gone;
        if (gone) bset(touched, never);
        /* Every bucket pushed now lies in (t, never]. */
        const uint32_t lo = (t + 1) >> 6, hi = never >> 6;
        for (uint32_t j = 0; j < n_sims; j++) {
            belady_sim *b = &sims[j];
            /* Bucket t is selected again now: its resident rows are the hits. */
            uint32_t hits = s->pushed[t] - b->evicted[t], misses = na - hits;
            if (t > 0) b->miss += misses;
            bclr(b->nonempty, t);
            for (uint32_t w = lo; w <= hi; w++) b->nonempty[w] |= touched[w];
            if (nr) b->top = hi;
            b->resident += misses;
            /* Evict from the furthest buckets. */
            uint64_t need = b->resident > b->budget ? b->resident - b->budget : 0;
            b->resident -= need;
            while (need) {
                while (!b->nonempty[b->top]) {
                    DH_BUG_ON(b->top == 0);
                    b->top--;
                }
                uint32_t u = b->top * 64 + 63 - (uint32_t)__builtin_clzll(b->nonempty[b->top]);
                uint32_t avail = s->pushed[u] - b->evicted[u], take = need < avail ? (uint32_t)need : avail;
                b->evicted[u] += take;
                need -= take;
                if (take == avail) bclr(b->nonempty, u);
            }
        }
        for (uint32_t w = lo; w <= hi; w++) touched[w] = 0;
    }
}

/* ---------------------------------------------------------------- fixed-budget policies */

/* Every enabled policy at every budget of one stream, from its log. */
static void run_policies(const ctx *c, sstate *s, const slog *l, uint32_t req, uint32_t g, const stream_sum *sum,
                         stats_group *gs)
{
    const stats_options *o = c->o;
    int on[STATS_N_POLICIES] = {0, o->fifo, o->random, o->belady};
    uint32_t sim_b[STATS_MAX_BUDGETS], ns = 0;
    for (uint32_t b = 0; b < o->n_budgets; b++) {
        uint32_t B = c->budget[b];
        uint64_t known = UINT64_MAX;
        if (B >= sum->distinct) known = sum->cold;        /* nothing is ever evicted */
        else if (B == sum->same_sel) known = sum->added;  /* the buffer is the selection */
        if (known == UINT64_MAX) { sim_b[ns++] = b; continue; }
        for (int p = STATS_FIFO; p < STATS_N_POLICIES; p++)
            if (on[p]) gs->miss[p][b] += known;
    }
    if (!ns || !l->positions) return;
    if (o->fifo || o->random) {
        for (uint32_t i = 0; i < ns; i++) {
            if (o->fifo) fifo_start(&s->fifo[i], c->budget[sim_b[i]], s->max_rows);
            if (o->random) random_start(&s->rnd[i], c->budget[sim_b[i]], s, o->seed, req, g);
        }
        /* Position-major so a position's rows are read from memory once for all budgets. */
        uint32_t max_add = 1;
        for (uint32_t t = 0; t < l->positions; t++) if (l->n_add[t] > max_add) max_add = l->n_add[t];
        grow(&s->dist, &s->dist_cap, max_add, sizeof *s->dist);
        for (uint32_t t = 0; t < l->positions; t++) {
            const uint32_t *add = l->rows + l->off[t];
            uint32_t na = l->n_add[t], nr = (uint32_t)(l->off[t + 1] - l->off[t]) - na;
            if (o->fifo)
                for (uint32_t i = 0; i < ns; i++) fifo_step(&s->fifo[i], add, na, add + na, nr, t > 0, s->dist);
            if (o->random) random_step(s->rnd, ns, add, na, add + na, nr, t > 0);
        }
        for (uint32_t i = 0; i < ns; i++) {
            if (o->fifo) gs->miss[STATS_FIFO][sim_b[i]] += s->fifo[i].miss;
            if (o->random) gs->miss[STATS_RANDOM][sim_b[i]] += s->rnd[i].miss;
        }
    }
    if (o->belady) {
        for (uint32_t i = 0; i < ns; i++) s->bel[i].budget = c->budget[sim_b[i]];
        belady_run(s, l, s->bel, ns);
        for (uint32_t i = 0; i < ns; i++) gs->miss[STATS_BELADY][sim_b[i]] += s->bel[i].miss;
    }
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

    /* Every sampled stream is opened (and so checked against its dataset
     * lengths, as 'check' does) before anything is sized by the shape: a file
     * that claims a huge output length is rejected here in milliseconds. */
    for (uint32_t q = 0, nq = 0; q < sh->n_requests && (!o->max_requests || nq < o->max_requests); q += o->request_step, nq++)
        for (uint32_t g = 0, ng = 0; g < sh->n_groups && (!o->max_groups || ng < o->max_groups); g += o->group_step, ng++) {
            sel_stream *st;
            if (sel_open(src, q, g, &st) < 0) return -1;
            sel_close(st);
        }

    stats_report *r = dh_calloc(1, sizeof *r);
    r->opt = *o;
    snprintf(r->model, sizeof r->model, "%s", sh->model);
    snprintf(r->preset, sizeof r->preset, "%s", m->preset);
    r->seed = m->seed;
    r->n_requests = sh->n_requests;
    r->n_groups = sh->n_groups;
    r->group = dh_calloc(sh->n_groups, sizeof *r->group);
    r->group_used = dh_calloc(sh->n_groups, sizeof *r->group_used);

    /* Heap, not the stack: both counts come from the file. */
    uint32_t *reqs = dh_calloc(sh->n_requests, sizeof *reqs), *groups = dh_calloc(sh->n_groups, sizeof *groups);
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
    uint64_t mrc_len = ((uint64_t)max_rows * STATS_MRC_RES + min_k - 1) / min_k + 2;
    if (mrc_len > STATS_MRC_MAX) {
        free(reqs);
        free(groups);
        stats_report_free(r);
        return dh_err("stats: a context of %u rows over k = %u needs an LRU curve of %llu bins, at most %u", max_rows,
                      min_k, (unsigned long long)mrc_len, STATS_MRC_MAX);
    }
    r->mrc_len = (uint32_t)mrc_len;
    r->mrc_hist = dh_calloc(r->mrc_len, sizeof(uint64_t));

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
            stream_sum sum;
            if (sel_open(src, q, g, &st) < 0) { rc = -1; break; }
            /* The cross overlap of group g is measured against the previous sampled group. */
            rc = stream_pass(&c, &s, st, q, g, k, cur, prev, gs, &sum);
            sel_close(st);
            if (rc < 0) break;
            run_policies(&c, &s, cur, q, g, &sum, gs);
            done++;
            if (o->progress) o->progress(done, total, o->progress_arg);
        }
    }
    free(reqs);
    free(groups);
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
