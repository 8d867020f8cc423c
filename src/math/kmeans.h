/*
 * kmeans.h: k-means for the IVF build (pure C, no postgres.h).
 *
 * k-means++ seeding (random draws from the seeded PRNG of prng.h), then
 * Lloyd iterations: assignment by nearest.h (blocked, exact float64 argmin,
 * never an n x k matrix) and a centroid update that buckets points by
 * cluster (counting sort) and averages each bucket in float64 (no atomics).
 * Same points, parameters and seed give bit-identical centroids, whatever
 * SIMD variant runs: every value that steers a decision is a float64
 * distance from cv_distance, which all variants compute bit for bit.
 *
 * Memory: O(n + k d) beyond the caller's n x d points (a few 4- and 8-byte
 * words per point, two copies of the centroids); nothing of size k^2 or
 * n x k.  All of it comes from params->allocator.
 */
#ifndef CV_MATH_KMEANS_H
#define CV_MATH_KMEANS_H

#include <stddef.h>
#include <stdint.h>

#include "nearest.h"

typedef enum CvKmeansMetric
{
	/* standard k-means: nearest by squared L2, centroids are means */
	CV_KMEANS_L2 = 0,
	/* cosine: the caller passes unit vectors; nearest by largest inner
	 * product, centroids are means re-normalised to unit length */
	CV_KMEANS_SPHERICAL = 1,
	/* inner product: nearest by largest inner product, plain means */
	CV_KMEANS_INNER_PRODUCT = 2
} CvKmeansMetric;

/*
 * Called after each Lloyd iteration with (1 .. total, total); when Lloyd
 * stops early because no point changed cluster, once more with
 * (total, total).  During seeding it is called with (0, total) every 256
 * centroids, so a long seeding can be watched and interrupted too; and
 * inside any long assignment pass (seeding's refresh, Lloyd's assignment)
 * with the iterations done so far, about every 2^27 multiply-adds, so a
 * caller that stops from it stops within a fraction of a second.
 */
typedef void (*CvKmeansProgress) (void *arg, int iteration, int total);

typedef struct CvKmeansParams
{
	int			k;				/* centroids wanted, >= 1 (may exceed n) */
	int			iterations;		/* Lloyd iterations, >= 0 (0: seeds only) */
	uint64_t	seed;			/* PRNG seed of the k-means++ draws */
	CvKmeansMetric metric;
	CvKmeansProgress progress;	/* NULL: none */
	void	   *progress_arg;
	const CvAllocator *allocator;	/* NULL: malloc/free */
} CvKmeansParams;

typedef struct CvKmeansResult
{
	/* centroids written: k, or the number of distinct points if smaller
	 * (the caller raises a NOTICE then) */
	int			n_centroids;
	int			iterations_run; /* Lloyd assignments done (<= iterations) */
	int			refilled;		/* empty clusters refilled, all iterations */
	/* objective of the last assignment: sum over points of the distance
	 * to their centroid (L2: squared L2, spherical: 1 - x.c, inner
	 * product: -x.c); 0 when iterations is 0 */
	double		inertia;
} CvKmeansResult;

/*
 * Runs seeding and Lloyd on n points of d floats (row-major, finite).
 *   centroids:       k x d floats; the first result->n_centroids rows are
 *                    written, the rest left as they were.
 *   assignment:      NULL, or n entries: each point's cluster in the
 *                    assignment the final centroids are the means of.
 *   inertia_history: NULL, or params->iterations entries: the objective of
 *                    each assignment done (result->iterations_run of them).
 * Returns CV_MATH_BAD_ARGUMENT (NULL pointer, n < 1 or > INT32_MAX,
 * d < 1 or > CV_NEAREST_MAX_DIM, k < 1, iterations < 0, unknown metric,
 * non-finite point) or CV_MATH_OUT_OF_MEMORY without touching the outputs
 * beyond what it may already have written; never aborts.
 */
extern CvMathStatus cv_kmeans(const float *points, size_t n, int d,
							  const CvKmeansParams *params, float *centroids,
							  int32_t *assignment, double *inertia_history,
							  CvKmeansResult *result);

/*
 * k-means++ seeding alone: the first centre is a uniform draw, each next
 * one a point drawn with probability proportional to its squared L2
 * distance to the nearest centre so far (for every metric: the seeds only
 * need spread).  Stops early when every point coincides with a centre, so
 * *n_seeds = min(k, distinct points), and the seeds are distinct points.
 */
extern CvMathStatus cv_kmeans_seed(const float *points, size_t n, int d,
								   const CvKmeansParams *params,
								   float *centroids, int *n_seeds);

/*
 * The refresh step of seeding, replaceable (cv_kmeans_seed_with): fold
 * count centres (count x d floats, row-major; the latest ones drawn) into
 * dist, the n doubles of the seeding weights, as
 *     dist[i] = min(dist[i], min over j of cv_distance->l2_squared(point i,
 *                                                          centre j))
 * for every point i, with l2_squared's float64 value bit for bit (on a
 * GPU: cvcuda_kmeans_refresh).  dist starts as +inf for every point.
 * Return CV_MATH_OK, or any other status to stop seeding, which then
 * returns that status (keep the real reason in arg).
 */
typedef CvMathStatus (*CvKmeansRefresh) (void *arg, const float *centres,
										 int count, double *dist);

/*
 * cv_kmeans_seed with the refresh done by refresh(arg, ...) instead of the
 * built-in blocked pass (NULL: the built-in, i.e. cv_kmeans_seed).  When
 * refresh produces the same dist values the seeds are identical to
 * cv_kmeans_seed's: all the draws, the per-candidate checks against the
 * pending centres (which read points) and the sums stay on the host.
 * Memory: the built-in's two n-sized work arrays are not allocated.
 */
extern CvMathStatus cv_kmeans_seed_with(const float *points, size_t n, int d,
										const CvKmeansParams *params,
										CvKmeansRefresh refresh, void *arg,
										float *centroids, int *n_seeds);

/*
 * Lloyd iterations alone, from the params->k centroids given in centroids
 * (refined in place); the other outputs as for cv_kmeans (result's
 * n_centroids is params->k).  Each iteration: assign; stop if no point
 * changed cluster; refill empty clusters; update.
 *
 * Empty clusters: for each empty cluster j, in index order, the largest
 * cluster (ties: lowest index) among those with at least two members and
 * a member away from its centroid gives up its member farthest from its
 * centroid (squared L2, ties: lowest point index), which becomes cluster
 * j's only member, so j's new centre is that point: the largest cluster is
 * split along its widest extent by the next assignment.  This never raises
 * the objective, and with at least k distinct points such a donor always
 * exists, so no cluster is empty after an update.  With fewer distinct
 * points than params->k an empty cluster can stay empty; its centroid is
 * left unchanged.
 */
extern CvMathStatus cv_kmeans_lloyd(const float *points, size_t n, int d,
									const CvKmeansParams *params,
									float *centroids, int32_t *assignment,
									double *inertia_history,
									CvKmeansResult *result);

#endif
