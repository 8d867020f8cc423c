/*
 * run.c: kmeans() proper.  Training is an index build's (src/ivf/build.c):
 * k-means++ seeding from the seeded PRNG of src/math, then Lloyd, by
 * cv_kmeans on the CPU or by the GPU worker (cv_gpu_kmeans_cluster, the
 * same host-side draws); 'l2' is standard k-means, 'ip' and 'cosine' are
 * spherical k-means on the rows' directions, as the builds map them.
 * Then every row goes to its nearest final centroid (so the rows and the
 * centroids returned agree), and its distance is the metric's SQL
 * distance to it.
 *
 * Progress: a NOTICE per Lloyd iteration with the inertia of that
 * iteration's assignment, and one with the final inertia.  A cancel is
 * seen within every bounded step of src/math's seeding and Lloyd passes
 * (its progress hook) and between chunks of the final assignment; on the
 * GPU the wait itself is interruptible.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/float.h"

#include "gpu/gpu.h"
#include "ivf/ivf.h"
#include "kmeans/kmeans.h"
#include "math/distance.h"
#include "math/kmeans.h"
#include "math_backend.h"

/* Multiply-adds of the final assignment between interrupt checks (as src/math's steps). */
#define ASSIGN_STEP_WORK ((int64) 1 << 27)

/* Rows measured between interrupt checks. */
#define MEASURE_CHUNK 16384

typedef struct Progress
{
	double	   *history;		/* iterations entries, NaN until known */
	int			reported;		/* iterations already in a NOTICE */
	int			iterations;
} Progress;

/* A NOTICE for each iteration whose inertia is known and not yet reported. */
static void
report_iterations(Progress *p)
{
	while (p->reported < p->iterations && !isnan(p->history[p->reported]))
	{
		ereport(NOTICE,
				(errmsg("k-means iteration %d of %d: inertia %.9g",
						p->reported + 1, p->iterations, p->history[p->reported])));
		p->reported++;
	}
}

/* src/math's progress hook: seeding steps (iteration 0) and iterations. */
static void
on_progress(void *arg, int iteration, int total pg_attribute_unused())
{
	if (iteration > 0)
		report_iterations((Progress *) arg);
	CHECK_FOR_INTERRUPTS();
}

/* Each row's nearest centroid on the CPU, exact float64 ranking, in interruptible chunks. */
static void
assign_on_cpu(const KmeansRequest *request, const KmeansRows *rows, KmeansResult *result)
{
	CvNearest  *nearest;
	int64		step = Max(ASSIGN_STEP_WORK / ((int64) result->k * rows->d), 64);

	cv_check_math(cv_nearest_create(result->centroids, result->k, rows->d,
								 request->metric == CV_METRIC_L2 ?
								 CV_NEAREST_L2 : CV_NEAREST_INNER_PRODUCT,
								 &cv_palloc_allocator, &nearest), "the k-means assignment");
	for (int64 first = 0; first < rows->n; first += step)
	{
		int64		count = Min(step, rows->n - first);

		cv_check_math(cv_nearest_assign(nearest, rows->points + first * rows->d, (size_t) count,
									 result->cluster + first, NULL), "the k-means assignment");
		CHECK_FOR_INTERRUPTS();
	}
	cv_nearest_free(nearest);
}

/* Trains on the GPU worker; false when it did not serve (then counted, or an ERROR under require). */
static bool
train_on_gpu(const KmeansRows *rows, const CvKmeansParams *params, Progress *p,
			 KmeansResult *result)
{
	CvGpuError	error = {0};

	if (!cv_gpu_should_use())
		return false;
	if (!cv_gpu_kmeans_cluster(rows->points, rows->n, rows->d, params, cv_gpu_assign_mode,
							   result->centroids, &result->k, p->history, result->cluster,
							   &error))
	{
		cv_gpu_fall_back("kmeans", &error);
		return false;
	}
	report_iterations(p);
	return true;
}

/* Seeding and Lloyd (GPU or CPU), then the final assignment: result's centroids and clusters. */
static void
train(const KmeansRequest *request, const KmeansRows *rows, KmeansResult *result)
{
	CvKmeansParams params = {0};
	CvKmeansResult math = {0};
	Progress	p = {0};

	p.iterations = request->iterations;
	p.history = palloc(sizeof(double) * Max(request->iterations, 1));
	for (int t = 0; t < Max(request->iterations, 1); t++)
		p.history[t] = get_float8_nan();
	params.k = request->k;
	params.iterations = request->iterations;
	params.seed = request->seed;
	params.metric = request->metric == CV_METRIC_L2 ? CV_KMEANS_L2 : CV_KMEANS_SPHERICAL;
	params.progress = on_progress;
	params.progress_arg = &p;
	params.allocator = &cv_palloc_allocator;
	result->gpu = train_on_gpu(rows, &params, &p, result);
	if (!result->gpu)
	{
		cv_check_math(cv_kmeans(rows->points, (size_t) rows->n, rows->d, &params, result->centroids,
							 NULL, p.history, &math), "k-means");
		result->k = math.n_centroids;
		assign_on_cpu(request, rows, result);
	}
	if (p.reported < p.iterations && p.reported > 0)
		ereport(NOTICE,
				(errmsg("k-means converged after %d of %d iterations: no row changed cluster",
						p.reported, p.iterations)));
	pfree(p.history);
}

/* The distance of row i to centroid c, as the metric's SQL operator measures it. */
static double
row_distance(const KmeansRequest *request, const KmeansRows *rows, int64 i, const float *c)
{
	const float *x = rows->points + i * rows->d;

	switch (request->metric)
	{
		case CV_METRIC_L2:
			return cv_distance->l2_squared(x, c, rows->d);	/* squared; rooted by the caller */
		case CV_METRIC_INNER_PRODUCT:
			return -rows->norms[i] * cv_distance->inner_product(x, c, rows->d);
		case CV_METRIC_COSINE:
			return cv_cosine_distance_from_parts(cv_distance->cosine_parts(x, c, rows->d));
	}
	elog(ERROR, "unknown metric %d", (int) request->metric);
	return 0;
}

/* Each row's distance; each cluster's members and inertia. */
static void
measure(const KmeansRequest *request, const KmeansRows *rows, KmeansResult *result)
{
	result->members = palloc0(sizeof(int64) * result->k);
	result->inertia = palloc0(sizeof(double) * result->k);
	result->total = 0;
	for (int64 i = 0; i < rows->n; i++)
	{
		int			c = result->cluster[i];
		double		value;

		if (c < 0 || c >= result->k)
			elog(ERROR, "k-means assigned row " INT64_FORMAT " to cluster %d of %d", i, c,
				 result->k);
		value = row_distance(request, rows, i, result->centroids + (Size) c * rows->d);
		result->distance[i] = request->metric == CV_METRIC_L2 ? sqrt(value) : value;
		result->members[c]++;
		result->inertia[c] += value;
		result->total += value;
		if (i % MEASURE_CHUNK == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

void
kmeans_run(const KmeansRequest *request, const KmeansRows *rows, KmeansResult *result)
{
	memset(result, 0, sizeof(*result));
	result->centroids = palloc_extended(sizeof(float) * request->k * rows->d, MCXT_ALLOC_HUGE);
	result->cluster = palloc_extended(sizeof(int32) * rows->n, MCXT_ALLOC_HUGE);
	result->distance = palloc_extended(sizeof(double) * rows->n, MCXT_ALLOC_HUGE);
	train(request, rows, result);
	if (result->k < request->k)
		ereport(NOTICE,
				(errmsg("k-means found %d clusters instead of %d: the rows have only %d distinct %s",
						result->k, request->k, result->k,
						request->metric == CV_METRIC_L2 ? "vectors" : "directions")));
	measure(request, rows, result);
	ereport(NOTICE,
			(errmsg("k-means of " INT64_FORMAT " rows into %d clusters on the %s: inertia %.9g",
					rows->n, result->k, result->gpu ? "GPU" : "CPU", result->total)));
}
