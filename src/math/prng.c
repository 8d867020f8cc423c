/*
 * prng.c: xoshiro256** (Blackman and Vigna) seeded by splitmix64.
 *
 * Only integer arithmetic on fixed-width types, so the stream is identical
 * everywhere; the uniform double uses the top 53 bits, exactly
 * representable, so it does not depend on the floating-point unit either.
 */
#include "prng.h"

/* One splitmix64 step: spreads a seed over a whole 64-bit word. */
static uint64_t
splitmix64(uint64_t *state)
{
	uint64_t	z = (*state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Left rotation; the compiler turns it into one instruction. */
static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/*
 * xoshiro256** must not start from the all-zero state; splitmix64 outputs
 * four words that are never all zero for any seed.
 */
void
cv_prng_seed(CvPrng *rng, uint64_t seed)
{
	uint64_t	state = seed;
	int			i;

	for (i = 0; i < 4; i++)
		rng->s[i] = splitmix64(&state);
}

/* The xoshiro256** step. */
uint64_t
cv_prng_next(CvPrng *rng)
{
	uint64_t   *s = rng->s;
	uint64_t	result = rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* The top 53 bits scaled by 2^-53: every value is exact, the maximum is 1 - 2^-53. */
double
cv_prng_uniform(CvPrng *rng)
{
	return (double) (cv_prng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * Rejects the lowest (2^64 mod n) raw values so every residue is equally
 * likely; at most half the draws are rejected, usually almost none.
 */
uint64_t
cv_prng_below(CvPrng *rng, uint64_t n)
{
	uint64_t	threshold;
	uint64_t	r;

	if (n == 0)
		return 0;
	threshold = (0 - n) % n;
	do
		r = cv_prng_next(rng);
	while (r < threshold);
	return r % n;
}
