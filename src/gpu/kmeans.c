/*
 * kmeans.c: the GPU worker's part of an index build.
 *
 * k-means on the sample: the sample goes to the device once; k-means++
 * seeding stays on the host (src/math's draws, the same seeds as the CPU
 * path) while the worker folds each group of pending centres into the
 * weights (bit for bit the CPU's float64 distances); then the worker runs
 * Lloyd.  Pass 2: the heap's rows go to the worker in staging-sized
 * batches and come back assigned to their nearest list (exact FP32
 * ranking: equal to the CPU's float64 choice except on near ties).
 *
 * kmeans() (src/kmeans) runs the same training over all its rows and then
 * has the device assign every row to its nearest final centroid.
 *
 * Every function returns false when the worker failed, after freeing its
 * device buffers; the build then calls cv_gpu_fall_back and continues on
 * the CPU (clustervec.gpu = auto) or raises (require).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/float.h"

#include "clustervec_cuda.h"
#include "gpu/request.h"

struct CvGpuAssigner
{
	int			d;
	int			lists;
	int			metric;			/* CvKmeansMetric */
	int			mode;			/* CV_GPU_ASSIGN_* */
	int			capacity;		/* rows per batch */
	uint64		points;
	uint64		centroids;
	uint64		assign;
	uint64		score;
};

StaticAssertDecl(CV_GPU_ASSIGN_FP32 == CVCUDA_ASSIGN_FP32 && CV_GPU_ASSIGN_BF16 == CVCUDA_ASSIGN_BF16,
				 "the assignment modes are the library's");

typedef struct SeedRefresh
{
	CvGpuKmeansArgs args;
	CvGpuError	error;
	bool		failed;
} SeedRefresh;

/* Centres one refresh request carries. */
static int
centres_per_request(int d)
{
	return (int) ((CV_GPU_STAGING_BYTES - MAXALIGN(sizeof(CvGpuKmeansArgs))) /
				  (sizeof(float) * (Size) d));
}

/* src/math's refresh hook: the device folds the centres into the weights. */
static CvMathStatus
refresh_on_gpu(void *arg, const float *centres, int count, double *dist)
{
	SeedRefresh *r = (SeedRefresh *) arg;
	int			d = r->args.d;
	int			step = centres_per_request(d);
	Size		dist_bytes = sizeof(double) * (Size) r->args.n;

	CHECK_FOR_INTERRUPTS();
	if (!cv_gpu_write(r->args.dist, 0, dist, dist_bytes, &r->error))
		r->failed = true;
	for (int first = 0; first < count && !r->failed; first += step)
	{
		int			group = Min(step, count - first);

		r->args.k = group;
		if (!cv_gpu_call(CV_OP_KMEANS_REFRESH, &r->args, sizeof(r->args),
						 centres + (Size) first * d, sizeof(float) * (Size) group * d,
						 NULL, 0, &r->error))
			r->failed = true;
	}
	if (!r->failed && !cv_gpu_read(r->args.dist, 0, dist, dist_bytes, &r->error))
		r->failed = true;
	return r->failed ? CV_MATH_BAD_ARGUMENT : CV_MATH_OK;
}

/* Seeding with the device's refresh; the seeds are written to centroids. */
static bool
seed_on_gpu(const float *sample, int64 n, const CvKmeansParams *params, SeedRefresh *r,
			float *centroids, int *seeds)
{
	CvMathStatus status;

	status = cv_kmeans_seed_with(sample, (size_t) n, r->args.d, params, refresh_on_gpu, r,
								 centroids, seeds);
	if (r->failed)
		return false;
	if (status == CV_MATH_OUT_OF_MEMORY)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory during k-means seeding")));
	if (status != CV_MATH_OK)
		elog(ERROR, "k-means seeding failed: %s", cv_math_status_string(status));
	return true;
}

/* Lloyd on the device from the *lists seeds in centroids; history gets each assignment's inertia. */
static bool
lloyd_on_gpu(const SeedRefresh *r, const CvKmeansParams *params, int mode, float *centroids,
			 int lists, CvGpuKmeansArgs *lloyd, double *history, CvGpuError *error)
{
	*lloyd = r->args;
	lloyd->dist = 0;
	lloyd->k = lists;
	lloyd->iterations = params->iterations;
	lloyd->metric = params->metric;
	lloyd->mode = mode;
	lloyd->centroids = cv_gpu_upload(centroids, sizeof(float) * (Size) lists * r->args.d, error);
	if (lloyd->centroids == 0 ||
		(lloyd->assign = cv_gpu_alloc(sizeof(int32) * (Size) r->args.n, error)) == 0)
		return false;
	if (params->iterations == 0)
		return true;
	return cv_gpu_call(CV_OP_KMEANS_LLOYD, lloyd, sizeof(*lloyd), NULL, 0, history,
					   sizeof(double) * params->iterations, error) &&
		cv_gpu_read(lloyd->centroids, 0, centroids, sizeof(float) * (Size) lists * r->args.d,
					error);
}

/* Every point's nearest final centroid, ranked by L2 or inner product (objective). */
static bool
final_assignment(CvGpuKmeansArgs *lloyd, CvKmeansMetric objective, int32 *assignment,
				 CvGpuError *error)
{
	CvGpuKmeansArgs args = *lloyd;

	args.metric = objective;
	args.score = cv_gpu_alloc(sizeof(float) * (Size) args.n, error);
	lloyd->score = args.score;	/* freed with the rest */
	return args.score != 0 &&
		cv_gpu_call(CV_OP_KMEANS_ASSIGN, &args, sizeof(args), NULL, 0, NULL, 0, error) &&
		cv_gpu_read(args.assign, 0, assignment, sizeof(int32) * (Size) args.n, error);
}

/*
 * Seeding, Lloyd and, when assignment is not NULL, the final assignment
 * (see gpu.h); history (NULL: none) gets iterations_run inertias, the
 * rest NaN.
 */
static bool
kmeans_on_gpu(const float *points, int64 n, int d, const CvKmeansParams *params, int mode,
			  float *centroids, int *lists, double *history, int32 *assignment,
			  CvGpuError *error)
{
	SeedRefresh r = {0};
	CvGpuKmeansArgs lloyd = {0};
	double	   *h = palloc(sizeof(double) * Max(params->iterations, 1));
	bool		ok;

	for (int t = 0; t < Max(params->iterations, 1); t++)
		h[t] = get_float8_nan();
	r.args.n = n;
	r.args.d = d;
	r.args.points = cv_gpu_upload(points, sizeof(float) * (Size) n * d, &r.error);
	ok = r.args.points != 0 &&
		(r.args.dist = cv_gpu_alloc(sizeof(double) * (Size) n, &r.error)) != 0;
	ok = ok && seed_on_gpu(points, n, params, &r, centroids, lists);
	if (ok && params->progress)
		params->progress(params->progress_arg, 0, params->iterations);
	ok = ok && lloyd_on_gpu(&r, params, mode, centroids, *lists, &lloyd, h, &r.error);
	if (ok && params->iterations > 0 && params->progress)
		params->progress(params->progress_arg, params->iterations, params->iterations);
	if (ok && assignment != NULL)
		ok = final_assignment(&lloyd, params->metric == CV_KMEANS_L2 ?
							  CV_KMEANS_L2 : CV_KMEANS_INNER_PRODUCT, assignment, &r.error);
	if (ok && history != NULL)
		for (int t = 0; t < params->iterations; t++)
			history[t] = t < lloyd.iterations_run ? h[t] : get_float8_nan();
	cv_gpu_free(lloyd.centroids);
	cv_gpu_free(lloyd.assign);
	cv_gpu_free(lloyd.score);
	cv_gpu_free(r.args.points);
	cv_gpu_free(r.args.dist);
	pfree(h);
	if (!ok)
		*error = r.error;
	return ok;
}

bool
cv_gpu_kmeans_train(const float *sample, int64 n, int d, const CvKmeansParams *params, int mode,
					float *centroids, int *lists, CvGpuError *error)
{
	return kmeans_on_gpu(sample, n, d, params, mode, centroids, lists, NULL, NULL, error);
}

bool
cv_gpu_kmeans_cluster(const float *points, int64 n, int d, const CvKmeansParams *params,
					  int mode, float *centroids, int *clusters, double *history,
					  int32 *assignment, CvGpuError *error)
{
	return kmeans_on_gpu(points, n, d, params, mode, centroids, clusters, history, assignment,
						 error);
}

int
cv_gpu_assign_batch_rows(int d)
{
	return (int) (CV_GPU_STAGING_BYTES / (sizeof(float) * (Size) d));
}

CvGpuAssigner *
cv_gpu_assigner_begin(const float *centroids, int lists, int d, CvKmeansMetric objective,
					  int mode, CvGpuError *error)
{
	CvGpuAssigner *a = palloc0(sizeof(CvGpuAssigner));
	bool		ok;

	a->d = d;
	a->lists = lists;
	a->metric = objective;
	a->mode = mode;
	a->capacity = cv_gpu_assign_batch_rows(d);
	a->centroids = cv_gpu_upload(centroids, sizeof(float) * (Size) lists * d, error);
	ok = a->centroids != 0 &&
		(a->points = cv_gpu_alloc(sizeof(float) * (Size) a->capacity * d, error)) != 0 &&
		(a->assign = cv_gpu_alloc(sizeof(int32) * (Size) a->capacity, error)) != 0 &&
		(a->score = cv_gpu_alloc(sizeof(float) * (Size) a->capacity, error)) != 0;
	if (!ok)
	{
		cv_gpu_assigner_end(a);
		return NULL;
	}
	return a;
}

bool
cv_gpu_assign(CvGpuAssigner *a, const float *rows, int count, int32 *lists, CvGpuError *error)
{
	CvGpuKmeansArgs args = {0};

	Assert(count <= a->capacity);
	args.points = a->points;
	args.n = count;
	args.d = a->d;
	args.k = a->lists;
	args.metric = a->metric;
	args.mode = a->mode;
	args.centroids = a->centroids;
	args.assign = a->assign;
	args.score = a->score;
	return cv_gpu_write(a->points, 0, rows, sizeof(float) * (Size) count * a->d, error) &&
		cv_gpu_call(CV_OP_KMEANS_ASSIGN, &args, sizeof(args), NULL, 0, NULL, 0, error) &&
		cv_gpu_read(a->assign, 0, lists, sizeof(int32) * (Size) count, error);
}

void
cv_gpu_assigner_end(CvGpuAssigner *a)
{
	if (a == NULL)
		return;
	cv_gpu_free(a->points);
	cv_gpu_free(a->centroids);
	cv_gpu_free(a->assign);
	cv_gpu_free(a->score);
	pfree(a);
}
