/*
 * gpu_passes.c: the engine's side of cluster_health on the GPU worker: a
 * chunk's arrays go to src/gpu, and what comes back is written into the
 * run's clusters.  A pass the worker does not serve switches the run to
 * the CPU for good.
 */
#include "postgres.h"

#include "gpu/gpu.h"
#include "health/gpu_passes.h"

/* Gives up on the GPU: raise under "require", count the fallback under "auto". */
static bool
gpu_failed(HealthRun *run, const CvGpuError *error)
{
	cv_gpu_fall_back("cluster_health", error);
	health_gpu_release(run);
	run->use_gpu = false;
	return false;
}

static CvGpuHealth *
run_state(HealthRun *run)
{
	if (run->gpu == NULL)
		run->gpu = cv_gpu_health_begin(run->input.dimensions, &run->params);
	return run->gpu;
}

bool
health_gpu_centroid_pass(HealthRun *run, const HealthChunkView *chunk)
{
	int			d = run->input.dimensions;
	CvGpuError	error = {0};
	double	   *centroids = palloc_extended(sizeof(double) * d * chunk->clusters,
											MCXT_ALLOC_HUGE);
	CvClusterStats *stats = palloc_extended(sizeof(CvClusterStats) * chunk->clusters,
											MCXT_ALLOC_HUGE);

	if (!cv_gpu_health_centroids(run_state(run), chunk->members, chunk->offsets,
								 chunk->clusters, centroids, stats, &error))
	{
		pfree(centroids);
		pfree(stats);
		return gpu_failed(run, &error);
	}
	run->gpu_chunk_first = chunk->first_cluster;
	for (int64 i = 0; i < chunk->clusters; i++)
	{
		HealthCluster *cluster = &run->clusters[chunk->first_cluster + i];

		cluster->n = chunk->offsets[i + 1] - chunk->offsets[i];
		cluster->centroid = palloc_extended(sizeof(double) * d, MCXT_ALLOC_HUGE);
		memcpy(cluster->centroid, centroids + i * d, sizeof(double) * d);
		cluster->stats = stats[i];
	}
	pfree(centroids);
	pfree(stats);
	return true;
}

bool
health_gpu_prepare(HealthRun *run, const CvCentroidSet *set)
{
	CvGpuError	error = {0};

	if (!cv_gpu_health_prepare(run_state(run), set, &error))
		return gpu_failed(run, &error);
	return true;
}

/* Pass 2 of clusters [first, first + clusters); members NULL: the kept chunk. */
static bool
members_pass(HealthRun *run, const float *members, const int64 *offsets, int64 first,
			 int64 clusters)
{
	CvGpuError	error = {0};
	CvClusterStats *stats = palloc_extended(sizeof(CvClusterStats) * clusters, MCXT_ALLOC_HUGE);
	bool		ok;

	for (int64 i = 0; i < clusters; i++)
		stats[i] = run->clusters[first + i].stats;
	ok = cv_gpu_health_members(run_state(run), members, offsets, first, clusters, stats, &error);
	if (ok)
		for (int64 i = 0; i < clusters; i++)
			run->clusters[first + i].stats = stats[i];
	pfree(stats);
	return ok ? true : gpu_failed(run, &error);
}

bool
health_gpu_members_pass(HealthRun *run, const HealthChunkView *chunk)
{
	return members_pass(run, chunk->members, chunk->offsets, chunk->first_cluster,
						chunk->clusters);
}

bool
health_gpu_members_pass_kept(HealthRun *run)
{
	if (run->gpu == NULL || run->gpu_chunk_first != 0 || !cv_gpu_health_kept_all(run->gpu))
		return false;
	return members_pass(run, NULL, NULL, 0, run->k);
}

void
health_gpu_release(HealthRun *run)
{
	cv_gpu_health_end(run->gpu);
	run->gpu = NULL;
}
