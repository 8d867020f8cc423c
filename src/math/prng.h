/*
 * prng.h: a small seeded pseudo-random generator (pure C, no postgres.h).
 *
 * xoshiro256** seeded through splitmix64: the same seed gives the same
 * stream on every platform and compiler, which is what makes k-means
 * seeding reproducible bit for bit.  Not for cryptography.
 */
#ifndef CV_MATH_PRNG_H
#define CV_MATH_PRNG_H

#include <stdint.h>

typedef struct CvPrng
{
	uint64_t	s[4];
} CvPrng;

/* Initialises the state from any 64-bit seed (0 included). */
extern void cv_prng_seed(CvPrng *rng, uint64_t seed);

/* The next 64 random bits. */
extern uint64_t cv_prng_next(CvPrng *rng);

/* Uniform double in [0, 1), a multiple of 2^-53. */
extern double cv_prng_uniform(CvPrng *rng);

/* Uniform integer in [0, n), without modulo bias; 0 when n is 0. */
extern uint64_t cv_prng_below(CvPrng *rng, uint64_t n);

#endif
