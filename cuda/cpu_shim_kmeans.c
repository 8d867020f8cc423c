/*
 * cpu_shim_kmeans.c: the CPU shim's k-means entry points, over src/math
 * (cv_nearest_* and cv_kmeans_lloyd): float64 exact throughout, so both
 * assignment modes give the exact float64 argmin.  Non-finite points or
 * centroids are refused (CVCUDA_INVALID_ARGUMENT), as src/math refuses them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shim.h"
#include "kmeans_args.h"
#include "math/kmeans.h"
#include "math/nearest.h"

/* A src/math status as the API's. */
static CvCudaStatus
math_status(CvMathStatus status, const char *what, CvCudaError *err)
{
	if (status == CV_MATH_OK)
		return cvcuda_set_ok(err);
	if (status == CV_MATH_OUT_OF_MEMORY)
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "%s: out of host memory", what);
	return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "%s: %s", what,
							cv_math_status_string(status));
}

CVCUDA_API CvCudaStatus
cvcuda_kmeans_refresh(const CvCudaBuffer *points, long long n, int d, const float *centres,
					  int count, CvCudaBuffer *dist, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_kmeans_check_refresh(points, n, d, centres, count, dist, err);
	const float *x;
	double	   *dd;
	double	   *fresh;
	int32_t    *index;
	CvNearest  *nn;
	CvMathStatus ms;

	if (status != CVCUDA_OK)
		return status;
	if (n == 0 || count == 0)
		return cvcuda_set_ok(err);
	x = points->data;
	dd = dist->data;
	fresh = malloc(sizeof(double) * (size_t) n);
	index = malloc(sizeof(int32_t) * (size_t) n);
	if (fresh == NULL || index == NULL)
	{
		free(fresh);
		free(index);
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "kmeans_refresh: out of host memory");
	}
	/* nearest.h's distance is cv_distance's l2_squared of the argmin: the minimum */
	ms = cv_nearest_create(centres, count, d, CV_NEAREST_L2, NULL, &nn);
	if (ms == CV_MATH_OK)
	{
		ms = cv_nearest_assign(nn, x, (size_t) n, index, fresh);
		cv_nearest_free(nn);
	}
	if (ms == CV_MATH_OK)
		for (long long i = 0; i < n; i++)
			if (fresh[i] < dd[i])
				dd[i] = fresh[i];
	free(fresh);
	free(index);
	return math_status(ms, "kmeans_refresh", err);
}

CVCUDA_API CvCudaStatus
cvcuda_kmeans_assign(const CvCudaBuffer *points, long long n, int d,
					 const CvCudaBuffer *centroids, int k, int metric, int mode,
					 CvCudaBuffer *assign, CvCudaBuffer *score, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_kmeans_check_assign(points, n, d, centroids, k, metric, mode,
													 assign, score, err);
	double	   *dist;
	CvNearest  *nn;
	CvMathStatus ms;

	if (status != CVCUDA_OK)
		return status;
	if (n == 0)
		return cvcuda_set_ok(err);
	dist = malloc(sizeof(double) * (size_t) n);
	if (dist == NULL)
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "kmeans_assign: out of host memory");
	ms = cv_nearest_create(centroids->data, k, d,
						   metric == CVCUDA_KMEANS_L2 ? CV_NEAREST_L2 : CV_NEAREST_INNER_PRODUCT,
						   NULL, &nn);
	if (ms == CV_MATH_OK)
	{
		ms = cv_nearest_assign(nn, points->data, (size_t) n, assign->data, dist);
		cv_nearest_free(nn);
	}
	if (ms == CV_MATH_OK && score != NULL)
		for (long long i = 0; i < n; i++)
			((float *) score->data)[i] = (float) dist[i];
	free(dist);
	return math_status(ms, "kmeans_assign", err);
}

CVCUDA_API CvCudaStatus
cvcuda_kmeans_lloyd(const CvCudaBuffer *points, long long n, int d, CvCudaBuffer *centroids,
					int k, int iterations, int metric, int mode, CvCudaBuffer *assign,
					double *inertia_history, int *iterations_run, double *inertia,
					CvCudaError *err)
{
	CvCudaStatus status = cvcuda_kmeans_check_lloyd(points, n, d, centroids, k, iterations,
													metric, mode, assign, iterations_run,
													inertia, err);
	CvKmeansParams params;
	CvKmeansResult result;
	CvMathStatus ms;

	if (status != CVCUDA_OK)
		return status;
	memset(&params, 0, sizeof(params));
	params.k = k;
	params.iterations = iterations;
	params.metric = (CvKmeansMetric) metric;
	ms = cv_kmeans_lloyd(points->data, (size_t) n, d, &params, centroids->data,
						 assign->data, inertia_history, &result);
	if (ms != CV_MATH_OK)
		return math_status(ms, "kmeans_lloyd", err);
	*iterations_run = result.iterations_run;
	*inertia = result.inertia;
	return cvcuda_set_ok(err);
}
