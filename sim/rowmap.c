/* rowmap.c: open-addressing row -> (state, value) map; see rowmap.h. */
#include "sim/rowmap.h"

#include "common/dh_err.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

/* Smallest table: 64 slots (1 KiB); a stream holding a few rows stays small. */
#define ROWMAP_MIN_CAP 64u

static inline uint32_t home(const rowmap *m, uint32_t row) { return rowmap_home(m, row); }

static void table_alloc(rowmap *m, uint32_t cap)
{
    m->ent = dh_malloc((size_t)cap * sizeof *m->ent);
    for (uint32_t i = 0; i < cap; i++) m->ent[i].row = ROWMAP_NONE;
    m->cap = cap;
    uint32_t bits = 0;
    while ((1u << bits) < cap) bits++;
    m->shift = 64 - bits;
}

void rowmap_init(rowmap *m) { memset(m, 0, sizeof *m); }

void rowmap_init_dense(rowmap *m)
{
    memset(m, 0, sizeof *m);
    m->dense = 1;
}

void rowmap_cover(rowmap *m, uint32_t nrows)
{
    if (!m->dense || nrows <= m->cap) return;
    uint32_t cap = m->cap ? m->cap : 1024;
    while (cap < nrows) cap = cap > 0x7FFFFFFFu ? nrows : 2 * cap;
    m->ent = dh_reallocarray(m->ent, cap, sizeof *m->ent);
    for (uint32_t i = m->cap; i < cap; i++) m->ent[i].row = ROWMAP_NONE;
    m->cap = cap;
}

void rowmap_release(rowmap *m)
{
    int dense = m->dense;
    free(m->ent);
    memset(m, 0, sizeof *m);
    m->dense = dense; /* released, still usable in its layout */
}

void rowmap_clear(rowmap *m)
{
    for (uint32_t i = 0; i < m->cap; i++) m->ent[i].row = ROWMAP_NONE;
    m->count = 0;
}

/* Rehash into a table of cap slots: O(old cap). The entries are reinserted
 * in the order of the old table, so the new layout is a function of the old. */
static void rehash(rowmap *m, uint32_t cap)
{
    rowmap_ent *old = m->ent;
    uint32_t old_cap = m->cap;
    table_alloc(m, cap);
    uint32_t mask = cap - 1;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i].row == ROWMAP_NONE) continue;
        uint32_t j = home(m, old[i].row);
        while (m->ent[j].row != ROWMAP_NONE) j = (j + 1) & mask;
        m->ent[j] = old[i];
    }
    free(old);
}

void rowmap_reserve(rowmap *m, uint32_t n)
{
    if (m->dense) return;
    /* At most three quarters full: n <= cap - cap / 4. */
    uint32_t cap = m->cap ? m->cap : ROWMAP_MIN_CAP;
    while ((uint64_t)n > (uint64_t)cap - cap / 4) {
        DH_BUG_ON(cap >= 0x80000000u);
        cap *= 2;
    }
    if (!m->cap) table_alloc(m, cap);
    else if (cap != m->cap) rehash(m, cap);
}

rowmap_ent *rowmap_insert_any(rowmap *m, uint32_t row, int *added)
{
    DH_BUG_ON(row == ROWMAP_NONE);
    if (m->dense) {
        if (row >= m->cap) rowmap_cover(m, row + 1);
        rowmap_ent *e = &m->ent[row];
        if (added) *added = e->row == ROWMAP_NONE;
        if (e->row == ROWMAP_NONE) {
            e->row = row;
            e->state = 0;
            e->val = 0;
            m->count++;
        }
        return e;
    }
    if (!m->cap || m->count + 1 > m->cap - m->cap / 4) rowmap_reserve(m, m->count + 1);
    uint32_t mask = m->cap - 1, j = home(m, row);
    for (;; j = (j + 1) & mask) {
        rowmap_ent *e = &m->ent[j];
        if (e->row == row) {
            if (added) *added = 0;
            return e;
        }
        if (e->row == ROWMAP_NONE) break;
    }
    rowmap_ent *e = &m->ent[j];
    e->row = row;
    e->state = 0;
    e->val = 0;
    m->count++;
    if (added) *added = 1;
    return e;
}

void rowmap_remove_ent(rowmap *m, rowmap_ent *e)
{
    /* Backward shift: walk the run after the hole; an entry whose home is
     * not cyclically in (hole, j] may move into the hole (its probe path
     * passes through it), and the hole moves to where it was. */
    uint32_t mask = m->cap - 1, hole = (uint32_t)(e - m->ent);
    DH_BUG_ON(hole >= m->cap || e->row == ROWMAP_NONE);
    if (m->dense) {
        e->row = ROWMAP_NONE;
        m->count--;
        return;
    }
    for (uint32_t j = (hole + 1) & mask; m->ent[j].row != ROWMAP_NONE; j = (j + 1) & mask) {
        uint32_t k = home(m, m->ent[j].row);
        int stays = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
        if (stays) continue;
        m->ent[hole] = m->ent[j];
        hole = j;
    }
    m->ent[hole].row = ROWMAP_NONE;
    m->count--;
}

int rowmap_remove(rowmap *m, uint32_t row)
{
    rowmap_ent *e = rowmap_find(m, row);
    if (!e) return 0;
    rowmap_remove_ent(m, e);
    return 1;
}

uint64_t rowmap_bytes(const rowmap *m) { return (uint64_t)m->cap * sizeof(rowmap_ent); }
