/* belady.c: MIN replacement over one stream; see belady.h.
 *
 * Eviction candidates are kept in buckets by the position of their next use
 * (one bucket per position of the stream plus one for "never again"): a row
 * enters the bucket of its next use when it leaves the selection or is
 * written, and leaves it either by eviction or, at exactly that position, by
 * being selected again; so at position t the buckets of positions <= t hold
 * only rows selected again and are dropped, and every row in a later bucket
 * is an unselected resident. Eviction takes the highest non-empty bucket
 * (a bitmap over the buckets finds it) and in it the largest row. A bucket
 * is two sorted runs, LSM-like: the main run and a pending run that takes
 * the pushes (unsorted until the bucket is next evicted from, then sorted
 * and merged with what was left of the pending run); an eviction pops the
 * larger of the two tails, and the pending run is merged into the main one
 * only once it is a quarter of its size. So the bucket of rows never used
 * again, which grows over the whole stream and is evicted from at most
 * positions, costs O(pushed rows) per eviction round, not O(bucket): merging
 * the whole bucket at every round was a quarter of the oracle's time. Pushes
 * are O(1); memory is the live candidates, not every removal. */
#include "common/mem.h"
#include "sim/belady.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

#define NEVER 0xFFFFFFFFu

/* Rows whose next use is one position: the main run row[0, n) ascending,
 * and the pending run pend[0, np): [0, psorted) ascending, then the rows
 * pushed since. */
typedef struct {
    uint32_t *row;
    uint32_t n, cap;
    uint32_t *pend;
    uint32_t np, psorted, cap_p;
} bel_bucket;

struct belady_work {
    /* The stream's deltas, concatenated. */
    uint32_t *add, *rem;           /* rows */
    uint64_t n_add, cap_add, n_rem, cap_rem;
    uint64_t *add_off, *rem_off;   /* [npos + 1] */
    uint32_t *nrows;               /* [npos] */
    uint32_t *rem_key;             /* next use of each removed row */
    uint32_t *wr_key;              /* next use of each written row, by position's new rows */
    uint64_t *wr_off;
    uint64_t n_wr, cap_wr, cap_pos;
    uint32_t *next_use;            /* [rows] during the backward pass */
    uint8_t *resident;             /* [rows] during the forward pass */
    uint64_t cap_rows;
    bel_bucket *bucket;            /* [npos + 1]: by next use; [npos] = never */
    uint64_t *nonempty;            /* bitmap over the buckets */
    uint64_t cap_bucket;
    uint32_t *merge;               /* scratch for merging a bucket */
    uint64_t cap_merge;
    uint32_t *radix;               /* scratch for sorting pushed rows */
    uint64_t cap_radix;
};

#define GROW(arr, cap, need) do { if ((need) > (cap)) { (cap) = (need) > 2 * (cap) ? (need) : 2 * (cap); \
        (arr) = dh_realloc((arr), (cap) * sizeof *(arr)); } } while (0)

belady_work *belady_work_new(void)
{
    belady_work *w = calloc(1, sizeof *w);
    if (!w) abort();
    return w;
}

void belady_work_free(belady_work *w)
{
    if (!w) return;
    free(w->add); free(w->rem); free(w->add_off); free(w->rem_off); free(w->nrows);
    free(w->rem_key); free(w->wr_key); free(w->wr_off); free(w->next_use); free(w->resident);
    for (uint64_t i = 0; i < w->cap_bucket; i++) { free(w->bucket[i].row); free(w->bucket[i].pend); }
    free(w->bucket); free(w->nonempty); free(w->merge); free(w->radix);
    free(w);
}

void belady_seq_release(belady_seq *s)
{
    free(s->n_sel); free(s->misses); free(s->written); free(s->evicted); free(s->miss_regions);
    memset(s, 0, sizeof *s);
}

static inline void bucket_push(belady_work *w, uint32_t key, uint32_t row)
{
    bel_bucket *b = &w->bucket[key];
    if (b->np == b->cap_p) {
        b->cap_p = b->cap_p ? 2 * b->cap_p : 64;
        b->pend = dh_realloc(b->pend, (size_t)b->cap_p * sizeof *b->pend);
    }
    b->pend[b->np++] = row;
    w->nonempty[key >> 6] |= 1ull << (key & 63);
}

/* Sort a[0, n) ascending: insertion sort when short, else an LSD radix sort
 * of 11-bit digits, as many passes as the largest row needs (two for a
 * context below 4M rows). O(n) per pass, no comparison callback: qsort was
 * a tenth of the oracle's time. */
static void sort_u32(belady_work *w, uint32_t *a, uint32_t n)
{
    if (n < 48) {
        for (uint32_t i = 1; i < n; i++) {
            uint32_t x = a[i], j = i;
            while (j > 0 && a[j - 1] > x) { a[j] = a[j - 1]; j--; }
            a[j] = x;
        }
        return;
    }
    uint32_t max = 0;
    for (uint32_t i = 0; i < n; i++) max = a[i] > max ? a[i] : max;
    GROW(w->radix, w->cap_radix, (uint64_t)n);
    uint32_t *src = a, *dst = w->radix;
    for (uint32_t shift = 0; shift < 32 && (shift == 0 || (max >> shift)); shift += 11) {
        uint32_t count[2048] = { 0 };
        for (uint32_t i = 0; i < n; i++) count[(src[i] >> shift) & 2047]++;
        for (uint32_t d = 0, sum = 0; d < 2048; d++) { uint32_t c = count[d]; count[d] = sum; sum += c; }
        for (uint32_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 2047]++] = src[i];
        uint32_t *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Sort r[s, n) and merge it with the ascending r[0, s) (scratch w->merge). */
static void run_merge_tail(belady_work *w, uint32_t *r, uint32_t s, uint32_t n)
{
    if (s == n) return;
    int ascending = 1;
    for (uint32_t i = s + 1; i < n && ascending; i++) ascending = r[i - 1] < r[i];
    if (!ascending) sort_u32(w, r + s, n - s);
    if (s > 0 && r[s - 1] > r[s]) {
        GROW(w->merge, w->cap_merge, (uint64_t)s);
        memcpy(w->merge, r, (size_t)s * sizeof *r);
        uint32_t i = 0, j = s, o = 0;
        while (i < s && j < n) r[o++] = w->merge[i] < r[j] ? w->merge[i++] : r[j++];
        while (i < s) r[o++] = w->merge[i++];
    }
}

/* Make both runs of b sorted: the pending pushes sorted into the pending
 * run, and that merged into the main run once it is a quarter of its size. */
static void bucket_sort(belady_work *w, bel_bucket *b)
{
    run_merge_tail(w, b->pend, b->psorted, b->np);
    b->psorted = b->np;
    if (b->np && (uint64_t)b->np * 4 >= b->n) {
        if (b->n + b->np > b->cap) {
            b->cap = b->n + b->np > 2 * b->cap ? b->n + b->np : 2 * b->cap;
            b->row = dh_realloc(b->row, (size_t)b->cap * sizeof *b->row);
        }
        memcpy(b->row + b->n, b->pend, (size_t)b->np * sizeof *b->pend);
        run_merge_tail(w, b->row, b->n, b->n + b->np);
        b->n += b->np;
        b->np = b->psorted = 0;
    }
}

/* The highest non-empty bucket above position p, or -1. */
static int64_t bucket_top(const belady_work *w, uint32_t nb, uint32_t p)
{
    for (int64_t wi = (int64_t)((nb - 1) >> 6); wi >= 0; wi--) {
        uint64_t m = w->nonempty[wi];
        if (!m) continue;
        int64_t k = wi * 64 + 63 - __builtin_clzll(m);
        return k > (int64_t)p ? k : -1;
    }
    return -1;
}

int belady_run(belady_work *w, sel_stream *st, uint32_t npos, uint32_t budget, belady_seq *out)
{
    memset(out, 0, sizeof *out);
    w->n_add = w->n_rem = 0;
    GROW(w->add_off, w->cap_pos, (uint64_t)npos + 1);
    w->rem_off = dh_realloc(w->rem_off, w->cap_pos * sizeof *w->rem_off);
    w->nrows = dh_realloc(w->nrows, w->cap_pos * sizeof *w->nrows);
    w->wr_off = dh_realloc(w->wr_off, w->cap_pos * sizeof *w->wr_off);
    uint32_t *n_sel_pos = malloc(((size_t)npos + 1) * sizeof *n_sel_pos);
    if (!n_sel_pos) abort();
    /* Read the stream. */
    uint32_t t = 0;
    for (; t < npos; t++) {
        sel_delta d;
        int rc = sel_next(st, &d);
        if (rc < 0) { free(n_sel_pos); return -1; }
        if (rc > 0) break;
        w->add_off[t] = w->n_add;
        w->rem_off[t] = w->n_rem;
        GROW(w->add, w->cap_add, w->n_add + d.n_added);
        GROW(w->rem, w->cap_rem, w->n_rem + d.n_removed);
        /* An empty delta may carry NULL arrays: memcpy of zero bytes from NULL is undefined. */
        if (d.n_added) memcpy(w->add + w->n_add, d.added, d.n_added * sizeof *d.added);
        if (d.n_removed) memcpy(w->rem + w->n_rem, d.removed, d.n_removed * sizeof *d.removed);
        w->n_add += d.n_added;
        w->n_rem += d.n_removed;
        w->nrows[t] = d.nrows;
        n_sel_pos[t] = d.n_sel;
        if (t > 0 && d.nrows < w->nrows[t - 1])
            { free(n_sel_pos); return dh_err("position %u: the context shrank", d.pos); }
    }
    uint32_t n = t;
    w->add_off[n] = w->n_add;
    w->rem_off[n] = w->n_rem;
    uint64_t rows = n ? w->nrows[n - 1] : 0;
    GROW(w->next_use, w->cap_rows, rows);
    w->resident = dh_realloc(w->resident, w->cap_rows);
    w->rem_key = dh_realloc(w->rem_key, w->n_rem * sizeof *w->rem_key);
    /* Written rows: positions t >= 1 whose context grew. */
    w->n_wr = 0;
    for (uint32_t p = 0; p < n; p++) {
        w->wr_off[p] = w->n_wr;
        if (p > 0) w->n_wr += w->nrows[p] - w->nrows[p - 1];
    }
    w->wr_off[n] = w->n_wr;
    w->wr_key = dh_realloc(w->wr_key, w->n_wr * sizeof *w->wr_key);
    /* Backward pass: next use of every removed and written row. */
    for (uint64_t r = 0; r < rows; r++) w->next_use[r] = NEVER;
    for (uint32_t p = n; p-- > 0;) {
        for (uint64_t i = w->add_off[p]; i < w->add_off[p + 1]; i++) {
            if (w->add[i] >= rows) { free(n_sel_pos); return dh_err("position %u adds row %u beyond the context", p, w->add[i]); }
            w->next_use[w->add[i]] = p;
        }
        for (uint64_t i = w->rem_off[p]; i < w->rem_off[p + 1]; i++) {
            if (w->rem[i] >= rows) { free(n_sel_pos); return dh_err("position %u removes row %u beyond the context", p, w->rem[i]); }
            w->rem_key[i] = w->next_use[w->rem[i]];
        }
        if (p > 0)
            for (uint32_t r = w->nrows[p - 1], j = 0; r < w->nrows[p]; r++, j++)
                w->wr_key[w->wr_off[p] + j] = w->next_use[r];
    }
    /* Forward pass. */
    out->npos = n;
    out->n_sel = n_sel_pos;
    out->misses = malloc(((size_t)n + 1) * sizeof *out->misses);
    out->written = malloc(((size_t)n + 1) * sizeof *out->written);
    out->evicted = malloc(((size_t)n + 1) * sizeof *out->evicted);
    if (!out->misses || !out->written || !out->evicted) abort();
    memset(w->resident, 0, rows);
    /* Buckets 0 .. n-1 by next use, bucket n for never. */
    uint32_t nb = n + 1;
    if (nb > w->cap_bucket) {
        w->bucket = dh_realloc(w->bucket, (size_t)nb * sizeof *w->bucket);
        memset(w->bucket + w->cap_bucket, 0, (size_t)(nb - w->cap_bucket) * sizeof *w->bucket);
        w->cap_bucket = nb;
    }
    for (uint32_t i = 0; i < nb; i++) w->bucket[i].n = w->bucket[i].np = w->bucket[i].psorted = 0;
    w->nonempty = dh_realloc(w->nonempty, (((size_t)nb + 63) / 64) * 8);
    memset(w->nonempty, 0, (((size_t)nb + 63) / 64) * 8);
    uint64_t n_res = 0, n_sel = 0;
    for (uint32_t p = 0; p < n; p++) {
        /* Rows whose next use is now are selected again: no longer candidates. */
        w->bucket[p].n = w->bucket[p].np = w->bucket[p].psorted = 0;
        w->nonempty[p >> 6] &= ~(1ull << (p & 63));
        for (uint64_t i = w->rem_off[p]; i < w->rem_off[p + 1]; i++) {
            if (!w->resident[w->rem[i]]) { belady_seq_release(out); return dh_err("position %u removes row %u, which is not selected", p, w->rem[i]); }
            bucket_push(w, w->rem_key[i] == NEVER ? n : w->rem_key[i], w->rem[i]);
            n_sel--;
        }
        uint32_t written = 0;
        if (p > 0)
            for (uint32_t r = w->nrows[p - 1], j = 0; r < w->nrows[p]; r++, j++) {
                w->resident[r] = 1;
                n_res++;
                uint32_t key = w->wr_key[w->wr_off[p] + j];
                bucket_push(w, key == NEVER ? n : key, r);
                written++;
            }
        /* Hit or miss is a coin toss for the branch predictor: no branch. */
        uint32_t miss = 0;
        for (uint64_t i = w->add_off[p]; i < w->add_off[p + 1]; i++) {
            uint32_t r = w->add[i], m = w->resident[r] ^ 1;
            w->resident[r] = 1;
            miss += m;
        }
        n_res += miss;
        n_sel += w->add_off[p + 1] - w->add_off[p];
        if (n_sel > budget) { belady_seq_release(out); return dh_err("position %u selects %llu rows, more than the budget of %u", p, (unsigned long long)n_sel, budget); }
        if (n_sel != n_sel_pos[p]) { belady_seq_release(out); return dh_err("position %u: deltas give %llu selected rows, the stream says %u", p, (unsigned long long)n_sel, n_sel_pos[p]); }
        /* Evict the furthest next use first, the larger row on a tie. */
        uint32_t ev = 0;
        while (n_res > budget) {
            int64_t k = bucket_top(w, nb, p);
            DH_BUG_ON(k < 0);
            bel_bucket *b = &w->bucket[k];
            bucket_sort(w, b);
            /* The larger of the two runs' tails first: the bucket in descending order. */
            while (n_res > budget && (b->n || b->np)) {
                uint32_t r;
                if (b->np && (!b->n || b->pend[b->np - 1] > b->row[b->n - 1])) r = b->pend[--b->np];
                else r = b->row[--b->n];
                w->resident[r] = 0;
                n_res--;
                ev++;
            }
            b->psorted = b->np;
            if (!b->n && !b->np) w->nonempty[k >> 6] &= ~(1ull << (k & 63));
        }
        out->misses[p] = miss;
        out->written[p] = written;
        out->evicted[p] = ev;
    }
    return 0;
}
