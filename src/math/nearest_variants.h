/*
 * nearest_variants.h: the float32 scoring kernels behind nearest.h, one per
 * SIMD level, and what they share.  For nearest*.c and the unit test only.
 *
 * The kernels' contract (what makes every variant bitwise equal):
 * - centroids are stored in blocks of CV_NEAREST_BLOCK: block b holds, for
 *   each dimension j, the values of centroids 16b .. 16b+15 contiguously
 *   (blocks[(b * d + j) * 16 + lane]), padded with zero centroids whose
 *   bias is +infinity, so they never win;
 * - the score of point x and centroid c is bias[c] - scale * acc, where
 *   acc = ((x0 c0 + x1 c1) + x2 c2) + ... in float32, each product rounded
 *   and then added (no fused multiply-add), in dimension order;
 * - a point keeps the smallest score, the lowest index among equal scores,
 *   and the smallest score of the other centroids (CvNearestBest).
 * The best/second pair is a function of the score multiset alone, so the
 * order in which lanes and chunks are merged cannot change it.
 */
#ifndef CV_MATH_NEAREST_VARIANTS_H
#define CV_MATH_NEAREST_VARIANTS_H

#include <math.h>
#include <stdint.h>

#include "distance.h"
#include "distance_variants.h"
#include "nearest.h"

#define CV_NEAREST_BLOCK 16

/* Most points one kernel call scores (the AVX-512 tile height). */
#define CV_NEAREST_MAX_ROWS 8

/* Running state of one point: best score, its centroid, next-best score. */
typedef struct CvNearestBest
{
	float		best;
	float		second;
	int32_t		index;			/* -1 until a finite score is seen */
} CvNearestBest;

/*
 * Scores 'rows' points (row pointers, d floats each) against blocks
 * [first_block, first_block + n_blocks) and merges into best[0 .. rows-1].
 */
typedef void (*CvNearestScanFn) (const float *const *rows, int d,
								 const float *blocks, const float *bias,
								 int first_block, int n_blocks, float scale,
								 CvNearestBest *best);

/*
 * dst = fl(x - m) elementwise (the same bits at any vector width) and
 * returns |dst| in float64.  The norm only feeds the certificate's error
 * bound, which has slack for any summation order, so variants may sum it
 * in their own (fixed) order.
 */
typedef double (*CvNearestCenterFn) (const float *x, const float *m,
									 float *dst, int d);

typedef struct CvNearestKernels
{
	const char *name;			/* matches CvDistanceKernels.name */
	int			rows;			/* points per scan call */
	CvNearestScanFn scan;
	CvNearestCenterFn center;
} CvNearestKernels;

extern const CvNearestKernels cv_nearest_kernels_scalar;

#ifdef CV_HAVE_X86_SIMD
extern const CvNearestKernels cv_nearest_kernels_avx2;
extern const CvNearestKernels cv_nearest_kernels_avx512;
#endif

/* The kernels of a level, or NULL when this CPU cannot run it. */
extern const CvNearestKernels *cv_nearest_kernels_for(CvSimdLevel level);

/*
 * Test hook: the raw float32 pass of cv_nearest_assign with the given
 * kernels (centring included, no certification or rescan); best[i] gets
 * point i's state.  CV_MATH_BAD_ARGUMENT when the float32 pass is disabled
 * for these centroids (magnitudes near float32 overflow).
 */
extern CvMathStatus cv_nearest_scan_points(CvNearest *nearest,
										   const CvNearestKernels *kernels,
										   const float *points, size_t n,
										   CvNearestBest *best);

/* Empty state: no score seen. */
static inline void
cv_nearest_best_reset(CvNearestBest *best)
{
	best->best = (float) INFINITY;
	best->second = (float) INFINITY;
	best->index = -1;
}

/*
 * Merges a candidate (its best score, next-best score and index, from a
 * disjoint set of centroids) into a point's state.  Among equal best
 * scores the lower index wins; the loser's score becomes a second-best
 * candidate, so a tie leaves best == second (never certified).
 */
static inline void
cv_nearest_best_merge(CvNearestBest *into, float best, float second,
					  int32_t index)
{
	if (index < 0)
		return;
	if (best < into->best || (best == into->best && index < into->index))
	{
		float		old = into->best;

		into->second = second < old ? second : old;
		into->best = best;
		into->index = index;
	}
	else if (best < into->second)
		into->second = best;
}

/*
 * Folds per-lane states (lanes[l] covers the centroids of lane l) into the
 * points' states: rows x width lanes, row-major.
 */
static inline void
cv_nearest_merge_lanes(CvNearestBest *best, int rows, int width,
					   const float *lane_best, const float *lane_second,
					   const int32_t *lane_index)
{
	int			p;
	int			l;

	for (p = 0; p < rows; p++)
		for (l = 0; l < width; l++)
			cv_nearest_best_merge(&best[p], lane_best[p * width + l],
								  lane_second[p * width + l],
								  lane_index[p * width + l]);
}

#endif
