/*
 * knn.c: exact k-NN on the worker (cvsearch_exact).  One request carries a
 * group of queries and a chunk of rows in one staging buffer (see
 * cv_knn_request_bytes); the answer is read from the same buffer.
 */
#include "postgres.h"

#include "gpu/request.h"

/* The library's largest k. */
#define KNN_MAX_K 1024

bool
cv_gpu_knn_plan(int nq, int d, int k, int *group, int64 *chunk_rows)
{
	Size		per_query = sizeof(float) * (Size) d + 16 * (Size) k;

	if (k < 1 || k > KNN_MAX_K || d < 1 || nq < 1)
		return false;
	*group = (int) Max(1, Min((Size) nq, (CV_GPU_STAGING_BYTES / 2) / per_query));
	if ((Size) *group * per_query + 8 >= CV_GPU_STAGING_BYTES)
		return false;
	*chunk_rows = (int64) ((CV_GPU_STAGING_BYTES - 8 - (Size) *group * per_query) /
						   (sizeof(float) * (Size) d));
	return *chunk_rows >= 1;
}

bool
cv_gpu_knn_exact(const float *queries, int nq, const float *rows, int64 nrows, int d, int k,
				 int64 *index, double *distance, CvGpuError *error)
{
	CvGpuRequest request;
	Size		query_bytes = sizeof(float) * (Size) nq * d;
	Size		row_bytes = sizeof(float) * (Size) nrows * d;
	int64		args[4] = {nrows, d, nq, k};
	volatile bool ok = false;

	if (cv_knn_request_bytes(nq, nrows, d, k) > CV_GPU_STAGING_BYTES)
	{
		cv_gpu_set_error(error, CV_GPU_ERR_BAD_REQUEST, "k-NN request larger than a staging buffer");
		return false;
	}
	if (!cv_gpu_begin(&request, CV_OP_KNN_EXACT, true, error))
		return false;
	PG_TRY();
	{
		memcpy(request.payload, queries, query_bytes);
		memcpy(request.payload + query_bytes, rows, row_bytes);
		ok = cv_gpu_run(&request, args, 4, query_bytes + row_bytes, error, NULL);
		if (ok)
		{
			const char *answer = request.payload + cv_knn_results_offset(nq, nrows, d);

			memcpy(index, answer, sizeof(int64) * (Size) nq * k);
			memcpy(distance, answer + sizeof(int64) * (Size) nq * k,
				   sizeof(double) * (Size) nq * k);
		}
	}
	PG_FINALLY();
	{
		cv_gpu_end(&request);
	}
	PG_END_TRY();
	return ok;
}
