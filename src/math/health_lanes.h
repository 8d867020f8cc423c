/*
 * health_lanes.h: the eight float64 lanes the neighbour and rank kernels
 * sum in (internal to src/math).  The lanes are two GNU C vectors of four
 * (lanes 0-3, 4-7): GCC keeps them in registers for every target (one ymm,
 * or two xmm), where a plain array went through the stack in the AVX2
 * build.  Lane i of every operation is the plain float64 operation on lane
 * i, and the fold is one fixed tree, so the bits do not depend on the target.
 */
#ifndef CV_MATH_HEALTH_LANES_H
#define CV_MATH_HEALTH_LANES_H

#include <string.h>

/* Partial sums per result; the reduction order is part of the result. */
#define LANES 8

typedef double Half __attribute__((vector_size(4 * sizeof(double))));

/* Unaligned load and store of four float64. */
#define LOAD_HALF(dst, src) memcpy(&(dst), (src), sizeof(Half))
#define STORE_HALF(dst, src) memcpy((dst), &(src), sizeof(Half))

/* Folds eight lanes by the fixed tree (i += i+4, i+2, i+1). */
static inline double
fold_lanes(const double *l)
{
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* Stores both halves, adds the tail (term t into lane t) and folds. */
static inline __attribute__((always_inline)) double
finish_lanes(const Half *lo, const Half *hi, const double *tail, int count)
{
	double		l[LANES];
	int			t;

	memcpy(l, lo, sizeof(Half));
	memcpy(l + 4, hi, sizeof(Half));
	for (t = 0; t < count; t++)
		l[t] += tail[t];
	return fold_lanes(l);
}

#endif
