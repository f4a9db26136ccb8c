/* test_rand.h: test content for the trace tests (tests/test_stats.c,
 * tests/test_trace.c) from xorshift64*, a generator independent of the
 * project's own RNG, so a test does not share code with what it checks.
 * Each test program sets rnd_state to its own seed in main(). */
#ifndef TEST_RAND_H
#define TEST_RAND_H

#include <stdint.h>

static uint64_t rnd_state;

/* Uniform in [0, n), n > 0. */
static uint32_t rnd(uint32_t n)
{
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return (uint32_t)(((rnd_state * 2685821657736338717ull) >> 32) % n);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

#endif
