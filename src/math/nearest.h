/*
 * nearest.h: nearest centroid of many points, blocked (pure C, no postgres.h).
 *
 * The IVF build assigns every heap row to its list with this, and k-means
 * uses the same code for its assignment step.  The answer is exact: the
 * index returned for a point is the argmin, over all centroids, of the
 * float64 distance that cv_distance computes (distance.h), ties going to the
 * lowest centroid index, and the distance returned is that float64 value.
 * It therefore never depends on the SIMD variant in use.
 *
 * How it is fast anyway: a float32 pass scores 8 points (AVX-512; 6 with
 * AVX2) against 32 (16) centroids at a time, centroid blocks transposed so
 * each dot product is accumulated sequentially over the dimensions,
 * vectorised across centroids (bitwise equal to the scalar loop).  Only a
 * running best and second-best score per point is kept, never an n x k
 * matrix.  A per-point rounding-error bound then certifies the float32
 * winner; the rare point whose two best scores are closer than the bound is
 * rescanned with the float64 kernels.  See nearest.c for the bound.
 *
 * Memory: about two copies of the k x d centroids plus one small tile of
 * points; nothing grows with the number of points assigned.
 */
#ifndef CV_MATH_NEAREST_H
#define CV_MATH_NEAREST_H

#include <stddef.h>
#include <stdint.h>

/* Result of the fallible calls of nearest.h and kmeans.h. */
typedef enum CvMathStatus
{
	CV_MATH_OK = 0,
	CV_MATH_BAD_ARGUMENT = 1,	/* a NULL buffer, a size out of range, a non-finite input */
	CV_MATH_OUT_OF_MEMORY = 2	/* the allocator returned NULL */
} CvMathStatus;

/* A short English description of a status, for error messages. */
extern const char *cv_math_status_string(CvMathStatus status);

/*
 * Where the math code gets its memory.  Inside a backend, pass functions
 * that palloc in a memory context (MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM) so
 * that an ERROR thrown from a callback (CHECK_FOR_INTERRUPTS in a progress
 * callback) cannot leak; NULL everywhere means malloc/free.  alloc may
 * return NULL, which the callers turn into CV_MATH_OUT_OF_MEMORY.
 */
typedef struct CvAllocator
{
	void	   *(*alloc) (size_t size, void *arg);
	void		(*free) (void *ptr, void *arg);
	void	   *arg;
} CvAllocator;

/* nmemb * size bytes from allocator (NULL: malloc); NULL on failure or overflow. */
extern void *cv_math_alloc(const CvAllocator *allocator, size_t nmemb, size_t size);

/* Returns memory from cv_math_alloc to the same allocator (NULL is fine). */
extern void cv_math_free(const CvAllocator *allocator, void *ptr);

typedef enum CvNearestMetric
{
	CV_NEAREST_L2 = 0,			/* argmin |x - c|^2; distance = squared L2 */
	CV_NEAREST_INNER_PRODUCT = 1	/* argmax x.c; distance = -(x.c) */
} CvNearestMetric;

/* Largest supported dimension; the error bound assumes d * 2^-24 << 1. */
#define CV_NEAREST_MAX_DIM (1 << 20)

/* Prepared centroids (transposed, centred, normed); opaque. */
typedef struct CvNearest CvNearest;

/*
 * Copies and prepares k centroids of d float4 (row-major) for assignment.
 * Non-finite centroid elements are a CV_MATH_BAD_ARGUMENT.  allocator may
 * be NULL (malloc).  On success *out must later go to cv_nearest_free.
 */
extern CvMathStatus cv_nearest_create(const float *centroids, int k, int d,
									  CvNearestMetric metric,
									  const CvAllocator *allocator,
									  CvNearest **out);

/* Frees what cv_nearest_create allocated (NULL is fine). */
extern void cv_nearest_free(CvNearest *nearest);

/*
 * For each of n points (row-major, d floats each, finite), writes the index
 * of its nearest centroid to index[i] and, when distance is not NULL, the
 * float64 distance to it (squared L2, or minus the inner product).
 * Allocates nothing; uses the SIMD variant cv_distance currently names.
 * Not safe for two threads on one CvNearest (it keeps a tile workspace).
 */
extern CvMathStatus cv_nearest_assign(CvNearest *nearest, const float *points,
									  size_t n, int32_t *index,
									  double *distance);

/* How many points so far needed the float64 rescan (statistics, tests). */
extern size_t cv_nearest_rescans(const CvNearest *nearest);

/*
 * The distances from one query to each of k centroids (row-major), in
 * float64 through cv_distance: squared L2, or minus the inner product.
 * For a scan choosing its probes; the caller sorts.
 */
extern CvMathStatus cv_nearest_distances(const float *centroids, int k, int d,
										 CvNearestMetric metric,
										 const float *query, double *distance);

#endif
