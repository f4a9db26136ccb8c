/* union.c: the verification union of gamma + 1 selections, shared versus
 * per-query missing-row retrieval, staging bytes and the lookahead queue; see
 * union.h.
 *
 * State lives in a map of the rows this union touched (sim/rowmap.h, the
 * flags in each entry's state): rows of X and rows of S_0 that were missing
 * or left the selection. Entries are never deleted during a union; a new union
 * clears the table, which is sized by the most rows a union touched, so a
 * union costs O(rows it touched), independent of k. */
#include "common/mem.h"
#include "sim/union.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <string.h>

enum {
    F_M0 = 1,      /* a row of S_0 that was missing before the step */
    F_OUT = 2,     /* a row of S_0 that the latest query does not select */
    F_X = 4,       /* a row of X (union rows outside S_0) */
    F_D = 8,       /* in S_t \ S_0 for the latest query t */
    F_NONRES = 16  /* a row of X that was not resident */
};

void union_init(union_set *u)
{
    memset(u, 0, sizeof *u);
    rowmap_init(&u->touched);
}

void union_release(union_set *u)
{
    rowmap_release(&u->touched);
    free(u->extra);
    memset(u, 0, sizeof *u);
}

/* The flags of row, inserting it (flags 0) when absent. Valid until the next
 * insert: every caller updates them at once. */
static uint8_t *slot(union_set *u, uint32_t row)
{
    return &rowmap_insert(&u->touched, row, NULL)->state;
}

/* The flags of row, or NULL when the union never touched it. */
static uint8_t *find(const union_set *u, uint32_t row)
{
    rowmap_ent *e = rowmap_find(&u->touched, row);
    return e ? &e->state : NULL;
}

void union_begin(union_set *u, uint32_t n_base, union_member_fn in_base, const void *base_user,
                  const uint32_t *missed, uint32_t n_missed, union_member_fn resident, const void *res_user,
                  int per_query)
{
    rowmap_clear(&u->touched);
    u->n_extra = 0;
    u->n_base = n_base;
    u->in_base = in_base;
    u->base_user = base_user;
    u->resident = resident;
    u->res_user = res_user;
    u->per_query = per_query;
    u->queries = 1;
    u->cur_sel = n_base;
    u->d_size = u->d_missed = u->extra_missed = 0;
    DH_BUG_ON(n_missed > n_base);
    for (uint32_t i = 0; i < n_missed; i++) {
        DH_BUG_ON(!in_base(base_user, missed[i]));
        uint8_t *f = slot(u, missed[i]);
        DH_BUG_ON(*f & F_M0); /* a row listed twice */
        *f |= F_M0;
    }
    u->base_missed = u->m0_in_cur = n_missed;
    u->query_missed = n_missed;
}

static int in_sorted(const void *user, uint32_t row)
{
    const union_set *u = user;
    const uint32_t *a = u->base_sorted;
    uint32_t lo = 0, hi = u->n_base;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < row) lo = mid + 1;
        else hi = mid;
    }
    return lo < u->n_base && a[lo] == row;
}

void union_begin_sorted(union_set *u, const uint32_t *base, uint32_t n_base, const uint32_t *missed,
                         uint32_t n_missed, union_member_fn resident, const void *res_user, int per_query)
{
    u->base_sorted = base;
    u->n_base = n_base; /* in_sorted reads it while begin checks the missed rows */
    union_begin(u, n_base, in_sorted, u, missed, n_missed, resident, res_user, per_query);
}

static void add_union_only(union_set *u, const uint32_t *added, uint32_t n_added)
{
    for (uint32_t i = 0; i < n_added; i++) {
        uint32_t x = added[i];
        if (u->in_base(u->base_user, x)) continue;
        uint8_t *f = slot(u, x);
        if (*f & F_X) continue;
        *f |= F_X;
        if (u->n_extra == u->cap_extra) {
            u->cap_extra = u->cap_extra ? 2 * u->cap_extra : 256;
            u->extra = dh_realloc(u->extra, u->cap_extra * sizeof *u->extra);
        }
        u->extra[u->n_extra++] = x;
        if (!u->resident(u->res_user, x)) u->extra_missed++;
    }
}

int union_add(union_set *u, const uint32_t *added, uint32_t n_added, const uint32_t *removed, uint32_t n_removed)
{
    if (!u->per_query) {
        /* The union grows only by added rows; removals change no count kept here. */
        add_union_only(u, added, n_added);
        u->cur_sel = u->cur_sel - n_removed + n_added;
        u->queries++;
        return 0;
    }
    /* Removed rows first: S_t = (S_{t-1} \ removed) u added. */
    for (uint32_t i = 0; i < n_removed; i++) {
        uint32_t x = removed[i];
        uint8_t *f = find(u, x);
        if (f && (*f & F_D)) {
            *f &= (uint8_t)~F_D;
            u->d_size--;
            if (*f & F_NONRES) u->d_missed--;
        } else if (u->in_base(u->base_user, x)) {
            f = slot(u, x);
            if (*f & F_OUT)
                return dh_err("verification union: query %u removes row %u, which query %u did not select",
                              u->queries, x, u->queries - 1);
            *f |= F_OUT;
            if (*f & F_M0) u->m0_in_cur--;
        } else {
            return dh_err("verification union: query %u removes row %u, which query %u did not select",
                          u->queries, x, u->queries - 1);
        }
    }
    for (uint32_t i = 0; i < n_added; i++) {
        uint32_t x = added[i];
        if (u->in_base(u->base_user, x)) {
            uint8_t *f = slot(u, x);
            if (!(*f & F_OUT))
                return dh_err("verification union: query %u adds row %u, which query %u already selected",
                              u->queries, x, u->queries - 1);
            *f &= (uint8_t)~F_OUT;
            if (*f & F_M0) u->m0_in_cur++;
            continue;
        }
        uint8_t *f = slot(u, x);
        if (*f & F_D)
            return dh_err("verification union: query %u adds row %u, which query %u already selected",
                          u->queries, x, u->queries - 1);
        if (!(*f & F_X)) {
            /* First time in the union: one residency question, one slot of X. */
            *f |= F_X;
            if (u->n_extra == u->cap_extra) {
                u->cap_extra = u->cap_extra ? 2 * u->cap_extra : 256;
                u->extra = dh_realloc(u->extra, u->cap_extra * sizeof *u->extra);
            }
            u->extra[u->n_extra++] = x;
            if (!u->resident(u->res_user, x)) {
                *f |= F_NONRES;
                u->extra_missed++;
            }
        }
        *f |= F_D;
        u->d_size++;
        if (*f & F_NONRES) u->d_missed++;
    }
    u->cur_sel = u->cur_sel - n_removed + n_added;
    u->queries++;
    u->query_missed += (uint64_t)u->m0_in_cur + u->d_missed;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

uint32_t union_rows(union_set *u, const uint32_t *base_sorted, uint32_t n_base, uint32_t *out)
{
    DH_BUG_ON(n_base != u->n_base);
    uint32_t *x = dh_realloc(NULL, (size_t)u->n_extra * sizeof *x);
    if (u->n_extra) memcpy(x, u->extra, (size_t)u->n_extra * sizeof *x); /* extra is NULL when empty */
    qsort(x, u->n_extra, sizeof *x, cmp_u32);
    /* X and S_0 are disjoint by construction: a plain two-way merge. */
    uint32_t i = 0, j = 0, n = 0;
    while (i < n_base || j < u->n_extra) {
        if (j == u->n_extra || (i < n_base && base_sorted[i] < x[j])) out[n++] = base_sorted[i++];
        else out[n++] = x[j++];
    }
    free(x);
    return n;
}

void union_diff(const uint32_t *prev, uint32_t n_prev, const uint32_t *cur, uint32_t n_cur,
                 uint32_t *added, uint32_t *n_added, uint32_t *removed, uint32_t *n_removed)
{
    uint32_t i = 0, j = 0, na = 0, nr = 0;
    while (i < n_prev || j < n_cur) {
        if (j == n_cur || (i < n_prev && prev[i] < cur[j])) removed[nr++] = prev[i++];
        else if (i == n_prev || cur[j] < prev[i]) added[na++] = cur[j++];
        else { i++; j++; }
    }
    *n_added = na;
    *n_removed = nr;
}

double union_staging_bytes(const double *union_rows, const double *row_bytes, uint32_t n_groups, int reuse)
{
    double sum = 0, max = 0;
    for (uint32_t g = 0; g < n_groups; g++) {
        double b = union_rows[g] * row_bytes[g];
        sum += b;
        if (b > max) max = b;
    }
    return reuse ? max : sum;
}

/* ---- lookahead -------------------------------------------------------- */

void union_ahead_init(union_ahead *a, uint32_t cap)
{
    DH_BUG_ON(cap == 0);
    a->q = calloc(cap, sizeof *a->q);
    if (!a->q) abort();
    a->cap = cap;
    a->head = a->n = 0;
}

void union_ahead_release(union_ahead *a)
{
    for (uint32_t i = 0; i < a->cap; i++) free(a->q[i].rows);
    free(a->q);
    memset(a, 0, sizeof *a);
}

int union_ahead_push(union_ahead *a, const sel_delta *d)
{
    if (a->n == a->cap) return dh_err("lookahead of %u positions is full at position %u", a->cap, d->pos);
    union_pos *p = &a->q[(a->head + a->n) % a->cap];
    uint32_t need = d->n_added + d->n_removed;
    if (need > p->cap) {
        p->cap = need;
        p->rows = dh_realloc(p->rows, (size_t)need * sizeof *p->rows);
    }
    memcpy(p->rows, d->added, (size_t)d->n_added * sizeof *p->rows);
    memcpy(p->rows + d->n_added, d->removed, (size_t)d->n_removed * sizeof *p->rows);
    p->pos = d->pos;
    p->nrows = d->nrows;
    p->n_sel = d->n_sel;
    p->n_added = d->n_added;
    p->n_removed = d->n_removed;
    a->n++;
    return 0;
}

void union_ahead_peek(const union_ahead *a, uint32_t i, sel_delta *d)
{
    DH_BUG_ON(i >= a->n);
    const union_pos *p = &a->q[(a->head + i) % a->cap];
    memset(d, 0, sizeof *d);
    d->pos = p->pos;
    d->nrows = p->nrows;
    d->n_sel = p->n_sel;
    d->n_added = p->n_added;
    d->n_removed = p->n_removed;
    d->added = p->rows;
    d->removed = p->rows + p->n_added;
}

void union_ahead_pop(union_ahead *a)
{
    DH_BUG_ON(a->n == 0);
    a->head = (a->head + 1) % a->cap;
    a->n--;
}
