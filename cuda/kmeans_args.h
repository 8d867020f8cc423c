/*
 * kmeans_args.h: the argument checks of the k-means entry points
 * (cvcuda_kmeans_refresh, cvcuda_kmeans_assign, cvcuda_kmeans_lloyd), shared
 * by clustervec_cuda.so and the CPU shim so both refuse the same calls with
 * the same messages.  Plain C99 that also compiles as CUDA C++.  Internal:
 * include from cuda/ only.
 */
#ifndef CVCUDA_KMEANS_ARGS_H
#define CVCUDA_KMEANS_ARGS_H

#include "cvcuda_internal.h"

/* Largest d the k-means entry points accept (src/math's CV_NEAREST_MAX_DIM). */
#define CVCUDA_KMEANS_MAX_DIMS (1 << 20)

/* Largest n: assignments are int32. */
#define CVCUDA_KMEANS_MAX_POINTS 2147483647LL

/* True when the buffer holds at least count elements of size bytes. */
static inline int
cvcuda_kmeans_holds(const CvCudaBuffer *buffer, long long count, size_t size)
{
	if (buffer == NULL || count < 0)
		return 0;
	return (unsigned long long) count <= buffer->bytes / size;
}

/* The checks every k-means entry point shares: n, d, the points buffer. */
static inline CvCudaStatus
cvcuda_kmeans_check_points(const char *what, const CvCudaBuffer *points, long long n,
						   int d, CvCudaError *err)
{
	if (n < 0 || n > CVCUDA_KMEANS_MAX_POINTS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: n (%lld) must be between 0 and %lld",
								what, n, CVCUDA_KMEANS_MAX_POINTS);
	if (d < 1 || d > CVCUDA_KMEANS_MAX_DIMS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: d (%d) must be between 1 and %d",
								what, d, CVCUDA_KMEANS_MAX_DIMS);
	if (points == NULL || !cvcuda_kmeans_holds(points, n * (long long) d, sizeof(float)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: the points buffer must hold %lld x %d floats",
								what, n, d);
	return CVCUDA_OK;
}

/* cvcuda_kmeans_refresh's arguments. */
static inline CvCudaStatus
cvcuda_kmeans_check_refresh(const CvCudaBuffer *points, long long n, int d,
							const float *centres, int count, const CvCudaBuffer *dist,
							CvCudaError *err)
{
	CvCudaStatus status = cvcuda_kmeans_check_points("kmeans_refresh", points, n, d, err);

	if (status != CVCUDA_OK)
		return status;
	if (count < 0 || (count > 0 && centres == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_refresh: count (%d) must not be negative, "
								"and centres must not be NULL", count);
	if ((long long) count * d > (1LL << 40))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_refresh: %d centres of %d dimensions are too many",
								count, d);
	if (dist == NULL || !cvcuda_kmeans_holds(dist, n, sizeof(double)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_refresh: the dist buffer must hold %lld doubles", n);
	return CVCUDA_OK;
}

/* The centroids, metric and mode of cvcuda_kmeans_assign and cvcuda_kmeans_lloyd. */
static inline CvCudaStatus
cvcuda_kmeans_check_model(const char *what, const CvCudaBuffer *centroids, int k, int d,
						  int metric, int mode, CvCudaError *err)
{
	if (k < 1)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: k (%d) must be at least 1", what, k);
	if (centroids == NULL || !cvcuda_kmeans_holds(centroids, (long long) k * d, sizeof(float)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: the centroids buffer must hold %d x %d floats",
								what, k, d);
	if (metric != CVCUDA_KMEANS_L2 && metric != CVCUDA_KMEANS_SPHERICAL
		&& metric != CVCUDA_KMEANS_INNER_PRODUCT)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: unknown metric %d", what, metric);
	if (mode != CVCUDA_ASSIGN_FP32 && mode != CVCUDA_ASSIGN_BF16)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: unknown mode %d", what, mode);
	return CVCUDA_OK;
}

/* cvcuda_kmeans_assign's arguments (score may be NULL: not wanted). */
static inline CvCudaStatus
cvcuda_kmeans_check_assign(const CvCudaBuffer *points, long long n, int d,
						   const CvCudaBuffer *centroids, int k, int metric, int mode,
						   const CvCudaBuffer *assign, const CvCudaBuffer *score,
						   CvCudaError *err)
{
	CvCudaStatus status = cvcuda_kmeans_check_points("kmeans_assign", points, n, d, err);

	if (status == CVCUDA_OK)
		status = cvcuda_kmeans_check_model("kmeans_assign", centroids, k, d, metric, mode, err);
	if (status != CVCUDA_OK)
		return status;
	if (assign == NULL || !cvcuda_kmeans_holds(assign, n, sizeof(int32_t)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_assign: the assign buffer must hold %lld int32", n);
	if (score != NULL && !cvcuda_kmeans_holds(score, n, sizeof(float)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_assign: the score buffer must hold %lld floats", n);
	return CVCUDA_OK;
}

/* cvcuda_kmeans_lloyd's arguments. */
static inline CvCudaStatus
cvcuda_kmeans_check_lloyd(const CvCudaBuffer *points, long long n, int d,
						  const CvCudaBuffer *centroids, int k, int iterations, int metric,
						  int mode, const CvCudaBuffer *assign, const int *iterations_run,
						  const double *inertia, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_kmeans_check_points("kmeans_lloyd", points, n, d, err);

	if (status == CVCUDA_OK)
		status = cvcuda_kmeans_check_model("kmeans_lloyd", centroids, k, d, metric, mode, err);
	if (status != CVCUDA_OK)
		return status;
	if (n < 1)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_lloyd: needs at least one point");
	if (iterations < 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_lloyd: iterations (%d) must not be negative", iterations);
	if (assign == NULL || !cvcuda_kmeans_holds(assign, n, sizeof(int32_t)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_lloyd: the assign buffer must hold %lld int32", n);
	if (iterations_run == NULL || inertia == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"kmeans_lloyd: iterations_run and inertia must not be NULL");
	return CVCUDA_OK;
}

#endif
