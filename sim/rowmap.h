/* rowmap.h: a map from a context row to a small per-row record (a state byte
 * and a 64-bit value), sized by the rows it holds, not by the context.
 *
 * Why. A hot buffer tracks only the rows it has on the device plus this
 * position's selection (about device_buffer_size + top-k of them), while the
 * context it selects from grows to hundreds of thousands of rows per
 * (request, group). Arrays indexed by row cost bytes per CONTEXT row, and
 * thousands of streams at 500K context ran into tens of GB (sim/sglhb.c
 * before this module); this map costs 16 bytes per slot of a table of less
 * than 8/3 slots per row at the most rows it has held (it does not shrink).
 *
 * Design: open addressing with linear probing, one 16-byte entry per slot
 * (the row, its state, its value: one cache line per probe), Fibonacci
 * hashing of the row (the rows of one stream are clustered runs, which
 * multiplicative hashing spreads), the table a power of two kept at most
 * three quarters full (doubled and rehashed on growth; Knuth's estimates for
 * linear probing at load a: (1 + 1/(1-a)) / 2 probes for a present row,
 * (1 + 1/(1-a)^2) / 2 for an absent one, 1.6 and 3.1 for a hot buffer of
 * 4096 + 512 rows in 8192 slots, 2.5 and 8.5 at the 3/4 bound), and
 * backward-shift deletion, so there are no tombstones and a table that
 * stops growing never needs cleaning. Every operation is O(1) expected. The
 * layout depends only on the sequence of operations, so runs are
 * deterministic. A pointer into the table is valid until the next insert
 * (which may grow it) or removal (which may shift entries).
 *
 * The empty row: ROWMAP_NONE (UINT32_MAX) marks a free slot, so it is not a
 * valid key; a context of nrows rows (a uint32_t) has rows < UINT32_MAX.
 *
 * The dense layout (rowmap_init_dense): the same interface over a table
 * indexed by the row itself (slot = row), grown to cover the largest row
 * seen: no hashing, probing or shifting, 16 bytes per CONTEXT row. It is for
 * a map that lives while one stream is computed alone and is then released
 * (the static SGLang policy computes each stream's horizon at admission), so
 * that the memory is per thread, not per stream; there the table is in cache
 * and the hashed layout's probe loops cost a third more CPU time. */
#ifndef DH_ROWMAP_H
#define DH_ROWMAP_H

#include <stdint.h>

#define ROWMAP_NONE UINT32_MAX

typedef struct {
    uint64_t val;   /* the caller's value */
    uint32_t row;   /* the key, ROWMAP_NONE: free slot */
    uint8_t state;  /* the caller's flags */
} rowmap_ent;

typedef struct {
    rowmap_ent *ent; /* [cap] */
    uint32_t cap;    /* a power of two, or 0 before the first insert */
    uint32_t count;  /* rows held */
    uint32_t shift;  /* 64 - log2(cap): the hash's top bits index the table */
    int dense;       /* 1: slot = row (the dense layout) */
} rowmap;

void rowmap_init(rowmap *m);
void rowmap_init_dense(rowmap *m);
/* Dense layout: make the table cover rows [0, nrows) (no-op when hashed). */
void rowmap_cover(rowmap *m, uint32_t nrows);
void rowmap_release(rowmap *m);
/* Forget every row; keeps the table. O(cap). */
void rowmap_clear(rowmap *m);
/* Make room for n rows without growing again (hashed; the dense layout
 * grows by rowmap_cover or an insert beyond its rows, keeping slots = rows). */
void rowmap_reserve(rowmap *m, uint32_t n);
/* The slot where row's probe starts (the Fibonacci hash's top bits); cap > 0. */
static inline uint32_t rowmap_home(const rowmap *m, uint32_t row)
{
    return (uint32_t)(((uint64_t)row * 0x9E3779B97F4A7C15ull) >> m->shift);
}
/* The entry of row, or NULL. row must not be ROWMAP_NONE. Inline: it is the
 * hot buffer's innermost operation. */
static inline rowmap_ent *rowmap_find(const rowmap *m, uint32_t row)
{
    if (m->dense) return row < m->cap && m->ent[row].row == row ? &m->ent[row] : 0;
    if (!m->count) return 0;
    uint32_t mask = m->cap - 1;
    for (uint32_t j = rowmap_home(m, row);; j = (j + 1) & mask) {
        rowmap_ent *e = &m->ent[j];
        if (e->row == row) return e;
        if (e->row == ROWMAP_NONE) return 0;
    }
}
/* Start loading the cache line where row's probe starts: callers walking a
 * list of rows prefetch a few ahead, since tables of many streams stepped in
 * turn are not in cache. */
static inline void rowmap_prefetch(const rowmap *m, uint32_t row)
{
    if (m->dense) { if (row < m->cap) __builtin_prefetch(&m->ent[row]); }
    else if (m->cap) __builtin_prefetch(&m->ent[rowmap_home(m, row)]);
}
/* The entry of row, inserted with state 0 and value 0 if absent (*added set
 * to 1 then, 0 otherwise; added may be NULL). An insert never moves other
 * entries unless it grows the table (not after a rowmap_reserve that covers
 * it), so their slots stay valid. */
rowmap_ent *rowmap_insert_any(rowmap *m, uint32_t row, int *added);
static inline rowmap_ent *rowmap_insert(rowmap *m, uint32_t row, int *added)
{
    if (m->dense && row < m->cap) { /* the dense layout's common case, inline */
        rowmap_ent *e = &m->ent[row];
        int fresh = e->row == ROWMAP_NONE;
        if (added) *added = fresh;
        if (fresh) {
            e->row = row;
            e->state = 0;
            e->val = 0;
            m->count++;
        }
        return e;
    }
    return rowmap_insert_any(m, row, added);
}
/* Remove the entry e (from rowmap_find or rowmap_insert, still valid). The
 * backward shift may move entries after it: other slots are invalid after. */
void rowmap_remove_ent(rowmap *m, rowmap_ent *e);
/* Remove row if present; 1 if it was, 0 if not. */
int rowmap_remove(rowmap *m, uint32_t row);
/* Bytes the table holds (for the memory accounting of a caller). */
uint64_t rowmap_bytes(const rowmap *m);

#endif
