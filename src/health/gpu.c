/*
 * gpu.c: cluster_health's passes on the GPU worker.
 *
 * The engine hands each chunk (whole clusters in CSR form) to these
 * functions first when clustervec.gpu routes work to the worker; each
 * uploads the chunk, runs one statistics operation over all its clusters
 * and reads the records back.  A failure returns false after freeing what
 * it allocated: the engine then computes that chunk, and the rest of the
 * run, on the CPU (clustervec.gpu = auto), or raises (require).  The
 * worker frees anything left at the end of the transaction.
 */
#include "postgres.h"

#include "health/health_gpu.h"
#include "worker/remote.h"
#include "worker/worker.h"

/* The whole input's centroid set and neighbour table on the device. */
typedef struct GpuSet
{
	uint64		centroids;
	uint64		mean_dist;
	uint64		mean_norm;
	uint64		nearest;
	uint64		nearest_dist;
	uint64		db_ratio;
	int			m;
} GpuSet;

/* Gives up on the GPU: raise under "require", count the fallback under "auto". */
static bool
gpu_failed(HealthRun *run, const CvGpuError *error)
{
	cv_gpu_fall_back("cluster_health", error);
	run->use_gpu = false;
	return false;
}

/* The chunk's members and offsets on the device. */
static bool
upload_chunk(const HealthChunkView *chunk, int d, uint64 *members, uint64 *offsets,
			 CvGpuError *error)
{
	*members = cv_gpu_upload(chunk->members, sizeof(float) * d * chunk->member_count, error);
	*offsets = *members == 0 ? 0 :
		cv_gpu_upload(chunk->offsets, sizeof(int64) * (chunk->clusters + 1), error);
	return *offsets != 0;
}

static void
free_ids(const uint64 *ids, int count)
{
	for (int i = 0; i < count; i++)
		cv_gpu_free(ids[i]);
}

bool
health_gpu_centroid_pass(HealthRun *run, const HealthChunkView *chunk)
{
	int			d = run->input.dimensions;
	CvGpuHealthArgs args = {0};
	CvGpuError	error = {0};
	uint64		ids[4] = {0, 0, 0, 0};
	CvClusterStats *stats = NULL;
	double	   *centroids = NULL;
	bool		ok;

	ok = upload_chunk(chunk, d, &ids[0], &ids[1], &error);
	ok = ok && (ids[2] = cv_gpu_alloc(sizeof(double) * d * chunk->clusters, &error)) != 0;
	ok = ok && (ids[3] = cv_gpu_alloc(sizeof(CvClusterStats) * chunk->clusters, &error)) != 0;
	if (ok)
	{
		args.members = ids[0];
		args.offsets = ids[1];
		args.centroids = ids[2];
		args.stats = ids[3];
		args.nclusters = chunk->clusters;
		args.d = d;
		args.params = run->params;
		ok = cv_gpu_call(CV_OP_HEALTH_CENTROID, &args, sizeof(args), NULL, 0, NULL, 0, &error);
	}
	if (ok)
	{
		centroids = palloc_extended(sizeof(double) * d * chunk->clusters, MCXT_ALLOC_HUGE);
		stats = palloc_extended(sizeof(CvClusterStats) * chunk->clusters, MCXT_ALLOC_HUGE);
		ok = cv_gpu_read(ids[2], 0, centroids, sizeof(double) * d * chunk->clusters, &error) &&
			cv_gpu_read(ids[3], 0, stats, sizeof(CvClusterStats) * chunk->clusters, &error);
	}
	free_ids(ids + 2, 2);
	health_gpu_forget_chunk(run);
	if (!ok)
	{
		free_ids(ids, 2);
		return gpu_failed(run, &error);
	}
	/* pass 2 reuses the members when this is the only chunk */
	run->gpu_chunk_members = ids[0];
	run->gpu_chunk_offsets = ids[1];
	run->gpu_chunk_first = chunk->first_cluster;
	run->gpu_chunk_clusters = chunk->clusters;
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

/* Uploads the set and builds the neighbour table on the device. */
bool
health_gpu_prepare(HealthRun *run, const CvCentroidSet *set)
{
	GpuSet	   *gpu = palloc0(sizeof(GpuSet));
	CvGpuHealthArgs args = {0};
	CvGpuError	error = {0};
	int			d = set->d;
	bool		ok;

	gpu->m = (int) Min((int64) run->params.neighbours, set->k - 1);
	gpu->centroids = cv_gpu_upload(set->centroids, sizeof(double) * d * set->k, &error);
	ok = gpu->centroids != 0;
	ok = ok && (gpu->mean_dist = cv_gpu_upload(set->mean_dist, sizeof(double) * set->k, &error)) != 0;
	ok = ok && (gpu->mean_norm = cv_gpu_upload(set->mean_norm, sizeof(double) * set->k, &error)) != 0;
	ok = ok && (gpu->db_ratio = cv_gpu_alloc(sizeof(double) * set->k, &error)) != 0;
	if (ok && gpu->m > 0)
	{
		ok = (gpu->nearest = cv_gpu_alloc(sizeof(int64) * set->k * gpu->m, &error)) != 0 &&
			(gpu->nearest_dist = cv_gpu_alloc(sizeof(double) * set->k * gpu->m, &error)) != 0;
	}
	if (ok)
	{
		health_gpu_set_args(run, gpu, &args);
		args.d = d;
		ok = cv_gpu_call(CV_OP_HEALTH_TABLE, &args, sizeof(args), NULL, 0, NULL, 0, &error);
	}
	run->gpu_set = gpu;
	if (!ok)
	{
		health_gpu_release(run);
		return gpu_failed(run, &error);
	}
	return true;
}

void
health_gpu_set_args(const HealthRun *run, const void *set, CvGpuHealthArgs *args)
{
	const GpuSet *gpu = (const GpuSet *) set;

	args->set_k = run->k;
	args->m = gpu->m;
	args->set_centroids = gpu->centroids;
	args->set_mean_dist = gpu->mean_dist;
	args->set_mean_norm = gpu->mean_norm;
	args->set_nearest = gpu->nearest;
	args->set_nearest_dist = gpu->nearest_dist;
	args->set_db_ratio = gpu->db_ratio;
	args->params = run->params;
}

void
health_gpu_release(HealthRun *run)
{
	GpuSet	   *gpu = (GpuSet *) run->gpu_set;

	health_gpu_forget_chunk(run);
	if (gpu == NULL)
		return;
	cv_gpu_free(gpu->centroids);
	cv_gpu_free(gpu->mean_dist);
	cv_gpu_free(gpu->mean_norm);
	cv_gpu_free(gpu->nearest);
	cv_gpu_free(gpu->nearest_dist);
	cv_gpu_free(gpu->db_ratio);
	pfree(gpu);
	run->gpu_set = NULL;
}

void
health_gpu_forget_chunk(HealthRun *run)
{
	cv_gpu_free(run->gpu_chunk_members);
	cv_gpu_free(run->gpu_chunk_offsets);
	run->gpu_chunk_members = run->gpu_chunk_offsets = 0;
}

/* Pass 2 over a chunk whose members and offsets are on the device already. */
static bool
members_pass_on(HealthRun *run, int64 first_cluster, int64 clusters, uint64 members,
				uint64 offsets, CvGpuError *error)
{
	CvGpuHealthArgs args = {0};
	Size		stats_bytes = sizeof(CvClusterStats) * clusters;
	CvClusterStats *stats = palloc_extended(stats_bytes, MCXT_ALLOC_HUGE);
	uint64		stats_id;
	bool		ok;

	for (int64 i = 0; i < clusters; i++)
		stats[i] = run->clusters[first_cluster + i].stats;
	stats_id = cv_gpu_upload(stats, stats_bytes, error);
	ok = stats_id != 0;
	if (ok)
	{
		health_gpu_set_args(run, run->gpu_set, &args);
		args.members = members;
		args.offsets = offsets;
		args.stats = stats_id;
		args.nclusters = clusters;
		args.first_cluster = first_cluster;
		args.d = run->input.dimensions;
		ok = cv_gpu_call(CV_OP_HEALTH_MEMBERS, &args, sizeof(args), NULL, 0, NULL, 0, error) &&
			cv_gpu_read(stats_id, 0, stats, stats_bytes, error);
	}
	cv_gpu_free(stats_id);
	if (ok)
		for (int64 i = 0; i < clusters; i++)
			run->clusters[first_cluster + i].stats = stats[i];
	pfree(stats);
	return ok;
}

bool
health_gpu_members_pass(HealthRun *run, const HealthChunkView *chunk)
{
	CvGpuError	error = {0};
	uint64		ids[2] = {0, 0};
	bool		ok;

	health_gpu_forget_chunk(run);
	ok = upload_chunk(chunk, run->input.dimensions, &ids[0], &ids[1], &error) &&
		members_pass_on(run, chunk->first_cluster, chunk->clusters, ids[0], ids[1], &error);
	free_ids(ids, 2);
	return ok ? true : gpu_failed(run, &error);
}

bool
health_gpu_members_pass_kept(HealthRun *run)
{
	CvGpuError	error = {0};
	bool		ok;

	if (run->gpu_chunk_members == 0 || run->gpu_chunk_first != 0 ||
		run->gpu_chunk_clusters != run->k || run->gpu_set == NULL)
		return false;
	ok = members_pass_on(run, 0, run->k, run->gpu_chunk_members, run->gpu_chunk_offsets, &error);
	health_gpu_forget_chunk(run);
	return ok ? true : gpu_failed(run, &error);
}
