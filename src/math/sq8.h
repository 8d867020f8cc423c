/*
 * sq8.h: 8-bit scalar codes of a vector's residual to its list centroid,
 * and a proven lower bound on the exact distance from a query to the
 * vector computed from the code alone (pure C, no postgres.h).
 *
 * A quantized cvivf list (src/ivf/codes.c) stores one code per tuple; the
 * scan ranks candidates by cv_sq8_lower_bound and computes the exact
 * float64 distance (src/ivf/metric.c, cvivf_distance) only for those whose
 * bound can still enter the results, so results equal the full-precision
 * scan's.  The bound must hold always, whatever the data and rounding:
 * sq8.c proves it in a comment and test/math/test_sq8.c checks it.
 */
#ifndef CV_MATH_SQ8_H
#define CV_MATH_SQ8_H

#include <stdbool.h>
#include <stdint.h>

#include "distance.h"

/*
 * Per-vector factors stored beside the codes.  With x the vector, c the
 * centroid (both float32) and k the codes, x^ = c + scale * k (exact
 * reals) approximates x:
 *   error       >= || x - x^ ||            (rounded up)
 *   code_norm   >= || k ||                 (rounded up)
 *   vector_norm <= || x ||                 (rounded down; cosine)
 */
typedef struct CvSq8Factors
{
	float		scale;
	float		error;
	float		code_norm;
	float		vector_norm;
} CvSq8Factors;

/*
 * Encodes x's residual to c (n elements) into codes[0..n-1] and factors.
 * Returns false, with codes zero and factors that make every bound
 * -INFINITY (error = +INFINITY), when x or c is not finite, the error
 * overflows float32, or n is outside [1, CV_SQ8_MAX_DIM].
 */
extern bool cv_sq8_encode(const float *x, const float *c, int n, int8_t *codes,
						  CvSq8Factors *factors);

/*
 * A query prepared against one list's centroid (cv_sq8_prepare), valid
 * while query, centroid and workspace live.  metric is a CvMetric value
 * (cuda/include/clustervec_metric.h: 1 L2, 2 inner product, 3 cosine).
 */
typedef struct CvSq8Query
{
	int			metric;
	int			n;
	const float *query;
	const float *residual;		/* float32((q - c) pow2), in the caller's
								 * workspace (L2) */
	double		query_norm;		/* upper bound on || q || */
	double		residual_norm;	/* upper bound on || q - c || (L2) */
	double		base;			/* <q, c> in float64 (inner product, cosine) */
	double		slack;			/* bound on base's rounding error */

	/* The rest is sq8.c's own; callers need not read it. */
	bool		usable;			/* false: every bound is -INFINITY */
	const float *scaled;		/* float32(q pow2), in the workspace (inner
								 * product, cosine) */
	double		pow2;			/* exact power of two keeping the float32
								 * sums far from overflow and underflow */
	double		inv_pow2;		/* 1 / pow2, exact */
	float		pow2_f32;		/* pow2 as a float32, or 0 if it is none */
	double		query_norm_low; /* lower bound on || q || */
	double		centroid_norm;	/* upper bound on || c || */
	double		gamma;			/* float32 g_{n+2} of the proof */
	double		kernel_down;	/* 1 - (n + 8) 2^-52: the kernels' rounding */
	double		fixed;			/* per-query part of the rounding allowance */
	double		per_code;		/* allowance per unit of scale * code_norm */
	/* L2's per-query constants, folded at prepare (see l2_bound) */
	double		l2_underflow;
	double		l2_square;
	double		l2_fixed;
	double		l2_subnormal;
	double		keep_low;
	double		keep_high;
} CvSq8Query;

/* Largest n the proof in sq8.c covers (cvec's limit is 16,000). */
#define CV_SQ8_MAX_DIM (1 << 20)

/*
 * workspace: n floats the prepared query points into, for every metric.
 * A query that is not finite, or n outside [1, CV_SQ8_MAX_DIM], gives a
 * prepared query whose bounds are all -INFINITY.
 */
extern void cv_sq8_prepare(CvSq8Query *prepared, int metric, const float *query,
						   const float *centroid, int n, float *workspace);

/*
 * A value never above cvivf_distance(metric, query, x, n) as the float64
 * distance kernels compute it (L2: sqrt(l2_squared); inner product:
 * -inner_product; cosine: cv_cosine_distance_from_parts, NaN for a zero
 * vector, which orders after every number), for the x that was encoded
 * into codes and factors.  -INFINITY when no bound can be had (a failed
 * encoding, an unusable query, a cosine vector of norm zero or below
 * float32's range); NaN for cosine with a zero query, whose every exact
 * distance is NaN.
 */
extern double cv_sq8_lower_bound(const CvSq8Query *prepared, const int8_t *codes,
								 const CvSq8Factors *factors);

/*
 * The kernels cv_sq8_lower_bound uses follow cv_simd_use's level; this one
 * runs a given level (the scalar one if this CPU cannot), for tests.
 */
extern double cv_sq8_lower_bound_at(CvSimdLevel level, const CvSq8Query *prepared,
									const int8_t *codes, const CvSq8Factors *factors);

#endif
