/*
 * distance_lanes.h: the per-element terms, the partial-block lane update and
 * the fixed folding tree, shared by every distance variant.
 *
 * The SIMD variants only replace the full 16-element blocks; everything that
 * decides rounding order outside those blocks lives here, so the scalar,
 * AVX2 and AVX-512 variants cannot drift apart.  Internal header: include
 * only from src/math/distance_*.c.
 */
#ifndef CV_MATH_DISTANCE_LANES_H
#define CV_MATH_DISTANCE_LANES_H

#include <math.h>
#include <string.h>

#include "distance.h"

/* Squared difference, widened first so the subtraction is done in double. */
static inline double
cv_term_l2(float a, float b)
{
	double		d = (double) a - (double) b;

	return d * d;
}

/* Absolute difference, widened first so the subtraction is done in double. */
static inline double
cv_term_l1(float a, float b)
{
	return fabs((double) a - (double) b);
}

/* Product of two floats; exact in double, so no rounding here at all. */
static inline double
cv_term_ip(float a, float b)
{
	return (double) a * (double) b;
}

/*
 * How far ahead of the current block the SIMD loops prefetch: 128 floats,
 * i.e. eight cache lines.  The kernels run at most one add per lane per
 * block, so a long loop body (AVX2 cosine: ~40 uops per cache line) limits
 * how many misses out-of-order execution keeps in flight.  Measured on a
 * 2-core Xeon VM at d = 1024, out of cache: cosine_parts rose from ~0.6x to
 * ~0.75x memcpy bandwidth (AVX2) and ~0.67x to ~0.78x (AVX-512); 64 and 192
 * floats were no better, and in-cache speed did not change.
 */
#define CV_PREFETCH_AHEAD 128

/*
 * Prefetches the line CV_PREFETCH_AHEAD elements past element j, but only
 * inside the vector: in a real scan the next vector is rarely adjacent in
 * memory, so lines past the end would be cache pollution, and a benchmark
 * over one contiguous buffer would credit them unfairly.  always_inline:
 * otherwise GCC may not inline it into the target("avx*") callers before
 * its pure-const pass, which then deletes the calls as having no effect.
 */
static inline __attribute__((always_inline)) void
cv_prefetch_ahead(const float *p, int j, int n)
{
	if (n - j > CV_PREFETCH_AHEAD)
		__builtin_prefetch(p + j + CV_PREFETCH_AHEAD);
}

/* Zeroes one set of lanes. */
static inline void
cv_lanes_clear(double *lanes)
{
	memset(lanes, 0, sizeof(double) * CV_DISTANCE_LANES);
}

/*
 * Folds the lanes into lane 0 by the contract's fixed tree (i += i+8, i+4,
 * i+2, i+1); any other order would change the low bits between variants.
 */
static inline double
cv_lanes_fold(double *lanes)
{
	int			step;
	int			i;

	for (step = CV_DISTANCE_LANES / 2; step >= 1; step /= 2)
		for (i = 0; i < step; i++)
			lanes[i] += lanes[i + step];
	return lanes[0];
}

/*
 * The cv_lanes_add_* helpers add elements 0..count-1 (count <= 16) of a block
 * that starts at a multiple of 16 into lanes 0..count-1.  The scalar variant
 * uses them for every block, the SIMD variants for the tail only.
 */

/* Adds up to one block of squared differences into the lanes. */
static inline void
cv_lanes_add_l2(double *lanes, const float *a, const float *b, int count)
{
	int			i;

	for (i = 0; i < count; i++)
		lanes[i] += cv_term_l2(a[i], b[i]);
}

/* Adds up to one block of absolute differences into the lanes. */
static inline void
cv_lanes_add_l1(double *lanes, const float *a, const float *b, int count)
{
	int			i;

	for (i = 0; i < count; i++)
		lanes[i] += cv_term_l1(a[i], b[i]);
}

/* Adds up to one block of products into the lanes. */
static inline void
cv_lanes_add_ip(double *lanes, const float *a, const float *b, int count)
{
	int			i;

	for (i = 0; i < count; i++)
		lanes[i] += cv_term_ip(a[i], b[i]);
}

/* Adds up to one block of squares of one vector into the lanes. */
static inline void
cv_lanes_add_sq(double *lanes, const float *a, int count)
{
	int			i;

	for (i = 0; i < count; i++)
		lanes[i] += cv_term_ip(a[i], a[i]);
}

/* Adds up to one block into the three cosine lane sets. */
static inline void
cv_lanes_add_cosine(double *dot, double *aa, double *bb,
					const float *a, const float *b, int count)
{
	cv_lanes_add_ip(dot, a, b, count);
	cv_lanes_add_sq(aa, a, count);
	cv_lanes_add_sq(bb, b, count);
}

/*
 * The cv_finish_* helpers take the lanes after all full blocks (elements
 * before 'done', a multiple of 16), add the tail and fold.
 */

/* Adds the L2 tail and folds. */
static inline double
cv_finish_l2(double *lanes, const float *a, const float *b, int done, int n)
{
	cv_lanes_add_l2(lanes, a + done, b + done, n - done);
	return cv_lanes_fold(lanes);
}

/* Adds the L1 tail and folds. */
static inline double
cv_finish_l1(double *lanes, const float *a, const float *b, int done, int n)
{
	cv_lanes_add_l1(lanes, a + done, b + done, n - done);
	return cv_lanes_fold(lanes);
}

/* Adds the inner-product tail and folds. */
static inline double
cv_finish_ip(double *lanes, const float *a, const float *b, int done, int n)
{
	cv_lanes_add_ip(lanes, a + done, b + done, n - done);
	return cv_lanes_fold(lanes);
}

/* Adds the squared-norm tail and folds. */
static inline double
cv_finish_sq(double *lanes, const float *a, int done, int n)
{
	cv_lanes_add_sq(lanes, a + done, n - done);
	return cv_lanes_fold(lanes);
}

/* Adds the cosine tail to all three lane sets and folds each. */
static inline CvCosineParts
cv_finish_cosine(double *dot, double *aa, double *bb,
				 const float *a, const float *b, int done, int n)
{
	CvCosineParts parts;

	cv_lanes_add_cosine(dot, aa, bb, a + done, b + done, n - done);
	parts.dot = cv_lanes_fold(dot);
	parts.norm_a_sq = cv_lanes_fold(aa);
	parts.norm_b_sq = cv_lanes_fold(bb);
	return parts;
}

#endif
