/* kref.c: CPU references for the CUDA kernels; see kref.h. Plain C11 and libc only, so the
 * benchmark driver can link it on a machine that has nothing but the CUDA toolkit. */
#include "kernels/kref.h"

#include "common/dh_err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- number formats ---- */

float kref_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t kref_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float kref_e4m3_to_f32(uint8_t b)
{
    int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
    float v;
    if (exp == 15 && man == 7) return NAN;
    if (exp == 0) v = ldexpf((float)man / 8.0f, -6);
    else v = ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return sign ? -v : v;
}

uint8_t kref_f32_to_e4m3(float f)
{
    /* The 127 non-negative finite codes are increasing in value, so a binary search finds the
     * two neighbours; ties go to the even code (even mantissa). */
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (isnan(f)) return 0x7f;
    if (a >= 448.0f) return sign | 0x7e;
    int lo = 0, hi = 126;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (kref_e4m3_to_f32((uint8_t)mid) <= a) lo = mid; else hi = mid;
    }
    float dlo = a - kref_e4m3_to_f32((uint8_t)lo), dhi = kref_e4m3_to_f32((uint8_t)hi) - a;
    int code = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (uint8_t)code;
}

size_t kref_row_bytes(int format)
{
    return format == KREF_ROW_FP8 ? KREF_ROW_BYTES_FP8
         : format == KREF_ROW_BF16 ? KREF_ROW_BYTES_BF16 : 0;
}

void kref_row_decode(const uint8_t *row, int format, float out[KREF_QK_DIM])
{
    if (format == KREF_ROW_FP8) {
        float scale[4];
        memcpy(scale, row + KREF_LATENT, sizeof scale);
        for (int i = 0; i < KREF_LATENT; i++) out[i] = kref_e4m3_to_f32(row[i]) * scale[i / 128];
        for (int i = 0; i < KREF_ROPE; i++) {
            uint16_t h;
            memcpy(&h, row + KREF_LATENT + 16 + 2 * i, 2);
            out[KREF_LATENT + i] = kref_bf16_to_f32(h);
        }
    } else {
        for (int i = 0; i < KREF_QK_DIM; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = kref_bf16_to_f32(h);
        }
    }
}

void kref_row_encode(const float in[KREF_QK_DIM], int format, uint8_t *row)
{
    if (format == KREF_ROW_FP8) {
        float scale[4];
        for (int g = 0; g < 4; g++) {
            float amax = 0;
            for (int i = 0; i < 128; i++) amax = fmaxf(amax, fabsf(in[g * 128 + i]));
            scale[g] = amax > 0 ? amax / 448.0f : 1.0f;
            for (int i = 0; i < 128; i++)
                row[g * 128 + i] = kref_f32_to_e4m3(in[g * 128 + i] / scale[g]);
        }
        memcpy(row + KREF_LATENT, scale, sizeof scale);
        for (int i = 0; i < KREF_ROPE; i++) {
            uint16_t h = kref_f32_to_bf16(in[KREF_LATENT + i]);
            memcpy(row + KREF_LATENT + 16 + 2 * i, &h, 2);
        }
    } else {
        for (int i = 0; i < KREF_QK_DIM; i++) {
            uint16_t h = kref_f32_to_bf16(in[i]);
            memcpy(row + 2 * i, &h, 2);
        }
    }
}

/* ---- miss fetch ---- */

void kref_gather_rows(const uint8_t *pool, size_t pool_stride, const int64_t *rows,
                      const int32_t *slots, size_t n, size_t row_bytes, uint8_t *hot,
                      size_t hot_stride)
{
    for (size_t i = 0; i < n; i++)
        memcpy(hot + (size_t)slots[i] * hot_stride, pool + (size_t)rows[i] * pool_stride, row_bytes);
}

/* ---- residency ---- */

int kref_lru_init(kref_lru *lru, int32_t capacity, int32_t ctx)
{
    memset(lru, 0, sizeof *lru);
    if (capacity <= 0 || ctx <= 0 || ctx >= (1 << 24))
        return dh_err("lru: capacity %d and ctx %d must be positive, ctx below 2^24", capacity, ctx);
    lru->capacity = capacity;
    lru->ctx = ctx;
    lru->slot_row = malloc(sizeof(int32_t) * (size_t)capacity);
    lru->slot_last = malloc(sizeof(int32_t) * (size_t)capacity);
    lru->row_slot = malloc(sizeof(int32_t) * (size_t)ctx);
    if (!lru->slot_row || !lru->slot_last || !lru->row_slot) {
        kref_lru_release(lru);
        return dh_err("lru: out of memory for %d slots, %d rows", capacity, ctx);
    }
    for (int32_t s = 0; s < capacity; s++) lru->slot_row[s] = -1, lru->slot_last[s] = -1;
    for (int32_t r = 0; r < ctx; r++) lru->row_slot[r] = -1;
    return 0;
}

void kref_lru_release(kref_lru *lru)
{
    free(lru->slot_row);
    free(lru->slot_last);
    free(lru->row_slot);
    memset(lru, 0, sizeof *lru);
}

uint64_t kref_lru_key(int32_t slot, int32_t row, int32_t last, int protected_now)
{
    if (protected_now) return UINT64_MAX;
    if (row < 0) return (uint64_t)slot;  /* free slots first, lowest slot first */
    return (1ull << 62) | ((uint64_t)(uint32_t)last << 24) | (uint64_t)row;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

int kref_lru_step(kref_lru *lru, int32_t step, const int32_t *sel, int k, int32_t *sel_slot,
                  uint8_t *sel_hit, int32_t *miss_rows, int32_t *miss_slots, int *n_miss)
{
    if (k > lru->capacity) return dh_err("lru: k %d exceeds capacity %d", k, lru->capacity);
    if (step < 0) return dh_err("lru: negative step %d", step);
    for (int i = 0; i < k; i++) {
        if (sel[i] < 0 || sel[i] >= lru->ctx)
            return dh_err("lru: selected row %d outside [0, %d)", sel[i], lru->ctx);
        if (i > 0 && sel[i] <= sel[i - 1])
            return dh_err("lru: selection not strictly ascending at %d", i);
    }
    int32_t cap = lru->capacity;
    uint8_t *prot = calloc((size_t)cap, 1);
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)cap);
    int32_t *victims = malloc(sizeof(int32_t) * (size_t)(k > 0 ? k : 1));
    if (!prot || !keys || !victims) {
        free(prot), free(keys), free(victims);
        return dh_err("lru: out of memory");
    }
    int m = 0;
    for (int i = 0; i < k; i++) {
        int32_t s = lru->row_slot[sel[i]];
        sel_hit[i] = s >= 0;
        if (s >= 0) prot[s] = 1; else m++;
    }
    /* The m smallest keys are the victims; keys are unique (slot or row in the low bits). */
    for (int32_t s = 0; s < cap; s++)
        keys[s] = kref_lru_key(s, lru->slot_row[s], lru->slot_last[s], prot[s]);
    qsort(keys, (size_t)cap, sizeof *keys, cmp_u64);
    for (int v = 0; v < m; v++) {
        uint64_t key = keys[v];
        DH_BUG_ON(key == UINT64_MAX);
        int32_t s = key < (1ull << 62) ? (int32_t)key : lru->row_slot[(int32_t)(key & 0xffffff)];
        victims[v] = s;
    }
    qsort(victims, (size_t)m, sizeof *victims, cmp_i32);
    int v = 0;
    for (int i = 0; i < k; i++) {
        int32_t s = lru->row_slot[sel[i]];
        if (s < 0) {
            s = victims[v];
            if (lru->slot_row[s] >= 0) lru->row_slot[lru->slot_row[s]] = -1;
            lru->slot_row[s] = sel[i];
            lru->row_slot[sel[i]] = s;
            miss_rows[v] = sel[i];
            miss_slots[v] = s;
            v++;
        }
        lru->slot_last[s] = step;
        sel_slot[i] = s;
    }
    *n_miss = m;
    free(prot), free(keys), free(victims);
    return 0;
}

/* ---- attention ---- */

void kref_attn_decode(const float *q, int heads, const float *rows, int n, float sm_scale,
                      float *out)
{
    /* Online softmax in double: one pass over the rows per head, O(heads * n * 1088). */
    double acc[KREF_V_DIM];
    for (int h = 0; h < heads; h++) {
        const float *qh = q + (size_t)h * KREF_QK_DIM;
        double m = -INFINITY, l = 0;
        for (int d = 0; d < KREF_V_DIM; d++) acc[d] = 0;
        for (int j = 0; j < n; j++) {
            const float *r = rows + (size_t)j * KREF_QK_DIM;
            double s = 0;
            for (int d = 0; d < KREF_QK_DIM; d++) s += (double)qh[d] * r[d];
            s *= sm_scale;
            double mn = s > m ? s : m, alpha = exp(m - mn), p = exp(s - mn);
            l = l * alpha + p;
            for (int d = 0; d < KREF_V_DIM; d++) acc[d] = acc[d] * alpha + p * r[d];
            m = mn;
        }
        for (int d = 0; d < KREF_V_DIM; d++)
            out[(size_t)h * KREF_V_DIM + d] = n > 0 ? (float)(acc[d] / l) : 0.0f;
    }
}

/* ---- verification union ---- */

int kref_union(const int32_t *sels, int nq, int k, int32_t *union_rows, int32_t *pos)
{
    /* nq-way merge of sorted lists: O(nq * k * nq), fine for nq <= 16. */
    int *at = calloc((size_t)nq, sizeof *at);
    int nu = 0;
    if (!at) return -1;
    for (;;) {
        int32_t best = INT32_MAX;
        for (int q = 0; q < nq; q++)
            if (at[q] < k && sels[(size_t)q * k + at[q]] < best) best = sels[(size_t)q * k + at[q]];
        if (best == INT32_MAX) break;
        for (int q = 0; q < nq; q++)
            if (at[q] < k && sels[(size_t)q * k + at[q]] == best) pos[(size_t)q * k + at[q]++] = nu;
        union_rows[nu++] = best;
    }
    free(at);
    return nu;
}

int32_t kref_ring_slot(int64_t appended, int len, int cap, int j)
{
    return (int32_t)((appended - len + j) % cap);
}

/* ---- indexer ---- */

void kref_indexer_scores(const uint8_t *q, const float *w, int heads, const uint8_t *keys,
                         const float *scales, int ctx, float *scores)
{
    float qf[64 * KREF_IDX_DIM], kf[KREF_IDX_DIM];
    for (int i = 0; i < heads * KREF_IDX_DIM && i < 64 * KREF_IDX_DIM; i++)
        qf[i] = kref_e4m3_to_f32(q[i]);
    for (int t = 0; t < ctx; t++) {
        const uint8_t *key = keys + (size_t)t * KREF_IDX_DIM;
        float scale = scales[t];
        for (int d = 0; d < KREF_IDX_DIM; d++) kf[d] = kref_e4m3_to_f32(key[d]);
        double s = 0;
        for (int h = 0; h < heads; h++) {
            double dot = 0;
            for (int d = 0; d < KREF_IDX_DIM; d++) dot += (double)qf[h * KREF_IDX_DIM + d] * kf[d];
            if (dot > 0) s += w[h] * dot;
        }
        scores[t] = (float)(s * scale);
    }
}

typedef struct { float score; int32_t row; } scored_row;

static int cmp_scored(const void *a, const void *b)
{
    const scored_row *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

long long kref_topk_sample_rank(long long ctx, long long k, int sample, double z)
{
    long long r = ((long long)sample * (5 * k / 4 + 512) + ctx - 1) / ctx;
    if (z > 0) {
        const double x = (double)k * sample / (double)ctx, root = (z + sqrt(z * z + 4 * x)) / 2;
        const long long rmin = (long long)ceil(root * root - 1e-9);
        if (rmin > r) r = rmin;
    }
    return r;
}

int kref_topk(const float *scores, int n, int k, int32_t *out_rows)
{
    if (k > n || k < 0) return dh_err("topk: k %d outside [0, %d]", k, n);
    scored_row *all = malloc(sizeof *all * (size_t)(n > 0 ? n : 1));
    if (!all) return dh_err("topk: out of memory for %d scores", n);
    for (int i = 0; i < n; i++) all[i].score = scores[i], all[i].row = i;
    qsort(all, (size_t)n, sizeof *all, cmp_scored);
    for (int i = 0; i < k; i++) out_rows[i] = all[i].row;
    qsort(out_rows, (size_t)k, sizeof *out_rows, cmp_i32);
    free(all);
    return 0;
}
