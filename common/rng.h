/* rng.h: counter-based random streams (Random123 Philox4x32-10, Debian librandom123-dev).
 *
 * A stream is named by a key (seed, a, b) -- e.g. (seed, request, layer) -- and
 * every draw by a counter, so any stream can be generated alone, in any order,
 * on any thread, with identical results. No state is shared between streams. */
#ifndef DH_RNG_H
#define DH_RNG_H

#include <Random123/philox.h>
#include <stdint.h>

typedef struct {
    philox4x32_key_t key;
    philox4x32_ctr_t ctr;
    uint32_t buf[4];
    int left;
} rng_stream;

/* Stream for (seed, a, b); purpose separates independent uses of one (a, b). */
static inline void rng_init(rng_stream *r, uint64_t seed, uint32_t a, uint32_t b, uint32_t purpose)
{
    r->key.v[0] = (uint32_t)seed ^ (purpose * 0x9E3779B9u);
    r->key.v[1] = (uint32_t)(seed >> 32) ^ (a * 0x85EBCA6Bu) ^ b;
    r->ctr.v[0] = 0; r->ctr.v[1] = a; r->ctr.v[2] = b; r->ctr.v[3] = purpose;
    r->left = 0;
}

/* Position the stream at a counter (e.g. the token position) so draws for a
 * position do not depend on how many draws earlier positions made. */
static inline void rng_seek(rng_stream *r, uint32_t position)
{
    r->ctr.v[0] = 0;
    r->ctr.v[3] = (r->ctr.v[3] & 0xFFu) | (position << 8);
    r->left = 0;
}

static inline uint32_t rng_u32(rng_stream *r)
{
    if (r->left == 0) {
        philox4x32_ctr_t out = philox4x32(r->ctr, r->key);
        r->ctr.v[0]++;
        for (int i = 0; i < 4; i++) r->buf[i] = out.v[i];
        r->left = 4;
    }
    return r->buf[--r->left];
}

/* Uniform double in [0, 1). */
static inline double rng_uniform(rng_stream *r)
{
    uint64_t x = ((uint64_t)rng_u32(r) << 21) ^ (rng_u32(r) >> 11);
    return (double)(x & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < n / 2^32). */
static inline uint32_t rng_below(rng_stream *r, uint32_t n)
{
    return (uint32_t)(((uint64_t)rng_u32(r) * n) >> 32);
}

#endif
