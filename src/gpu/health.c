/*
 * health.c: cluster_health's passes on the GPU worker.
 *
 * The engine (src/health/engine.c) hands each chunk of whole clusters in
 * CSR form here first when clustervec.gpu routes work to the worker; each
 * call uploads what it needs, runs one statistics operation over all the
 * chunk's clusters and reads the records back.  A failure returns false
 * after freeing what the call allocated; the engine then computes that
 * chunk, and the rest of the run, on the CPU (auto) or raises (require).
 * The worker frees anything left at the end of the transaction.
 */
#include "postgres.h"

#include "gpu/request.h"

/* The device state of one cluster_health run. */
struct CvGpuHealth
{
	int			d;
	CvHealthParams params;
	/* the last pass-1 chunk, kept for a run of one chunk */
	uint64		chunk_members;
	uint64		chunk_offsets;
	int64		chunk_clusters;
	/* the whole input's centroid set and neighbour table, between the passes */
	bool		prepared;
	int64		set_k;
	int			m;
	uint64		set_centroids;
	uint64		set_mean_dist;
	uint64		set_mean_norm;
	uint64		set_nearest;
	uint64		set_nearest_dist;
	uint64		set_db_ratio;
};

CvGpuHealth *
cv_gpu_health_begin(int d, const CvHealthParams *params)
{
	CvGpuHealth *health = palloc0(sizeof(CvGpuHealth));

	health->d = d;
	health->params = *params;
	return health;
}

/* The chunk's members and offsets on the device. */
static bool
upload_chunk(int d, const float *members, const int64 *offsets, int64 clusters,
			 uint64 *members_id, uint64 *offsets_id, CvGpuError *error)
{
	*members_id = cv_gpu_upload(members, sizeof(float) * d * offsets[clusters], error);
	*offsets_id = *members_id == 0 ? 0 :
		cv_gpu_upload(offsets, sizeof(int64) * (clusters + 1), error);
	if (*offsets_id == 0)
	{
		cv_gpu_free(*members_id);
		*members_id = 0;
	}
	return *offsets_id != 0;
}

static void
forget_chunk(CvGpuHealth *health)
{
	cv_gpu_free(health->chunk_members);
	cv_gpu_free(health->chunk_offsets);
	health->chunk_members = health->chunk_offsets = 0;
	health->chunk_clusters = 0;
}

/* The arguments every operation over the set shares. */
static void
set_args(const CvGpuHealth *health, CvGpuHealthArgs *args)
{
	memset(args, 0, sizeof(*args));
	args->d = health->d;
	args->params = health->params;
	args->set_k = health->set_k;
	args->m = health->m;
	args->set_centroids = health->set_centroids;
	args->set_mean_dist = health->set_mean_dist;
	args->set_mean_norm = health->set_mean_norm;
	args->set_nearest = health->set_nearest;
	args->set_nearest_dist = health->set_nearest_dist;
	args->set_db_ratio = health->set_db_ratio;
}

bool
cv_gpu_health_centroids(CvGpuHealth *health, const float *members, const int64 *offsets,
						int64 clusters, double *centroids, CvClusterStats *stats,
						CvGpuError *error)
{
	int			d = health->d;
	CvGpuHealthArgs args;
	uint64		ids[4] = {0, 0, 0, 0};
	bool		ok;

	forget_chunk(health);
	ok = upload_chunk(d, members, offsets, clusters, &ids[0], &ids[1], error);
	ok = ok && (ids[2] = cv_gpu_alloc(sizeof(double) * d * clusters, error)) != 0;
	ok = ok && (ids[3] = cv_gpu_alloc(sizeof(CvClusterStats) * clusters, error)) != 0;
	if (ok)
	{
		set_args(health, &args);
		args.members = ids[0];
		args.offsets = ids[1];
		args.centroids = ids[2];
		args.stats = ids[3];
		args.nclusters = clusters;
		ok = cv_gpu_call(CV_OP_HEALTH_CENTROID, &args, sizeof(args), NULL, 0, NULL, 0, error) &&
			cv_gpu_read(ids[2], 0, centroids, sizeof(double) * d * clusters, error) &&
			cv_gpu_read(ids[3], 0, stats, sizeof(CvClusterStats) * clusters, error);
	}
	cv_gpu_free(ids[2]);
	cv_gpu_free(ids[3]);
	if (!ok)
	{
		cv_gpu_free(ids[0]);
		cv_gpu_free(ids[1]);
		return false;
	}
	health->chunk_members = ids[0];
	health->chunk_offsets = ids[1];
	health->chunk_clusters = clusters;
	return true;
}

bool
cv_gpu_health_prepare(CvGpuHealth *health, const CvCentroidSet *set, CvGpuError *error)
{
	CvGpuHealthArgs args;
	int			d = set->d;
	bool		ok;

	health->set_k = set->k;
	health->m = (int) Min((int64) health->params.neighbours, set->k - 1);
	health->set_centroids = cv_gpu_upload(set->centroids, sizeof(double) * d * set->k, error);
	ok = health->set_centroids != 0 &&
		(health->set_mean_dist = cv_gpu_upload(set->mean_dist, sizeof(double) * set->k,
											   error)) != 0 &&
		(health->set_mean_norm = cv_gpu_upload(set->mean_norm, sizeof(double) * set->k,
											   error)) != 0 &&
		(health->set_db_ratio = cv_gpu_alloc(sizeof(double) * set->k, error)) != 0;
	if (ok && health->m > 0)
		ok = (health->set_nearest = cv_gpu_alloc(sizeof(int64) * set->k * health->m,
												 error)) != 0 &&
			(health->set_nearest_dist = cv_gpu_alloc(sizeof(double) * set->k * health->m,
													 error)) != 0;
	if (ok)
	{
		set_args(health, &args);
		ok = cv_gpu_call(CV_OP_HEALTH_TABLE, &args, sizeof(args), NULL, 0, NULL, 0, error);
	}
	health->prepared = ok;
	return ok;
}

/* Pass 2 over clusters whose members and offsets are on the device already. */
static bool
members_on(CvGpuHealth *health, uint64 members, uint64 offsets, int64 first_cluster,
		   int64 clusters, CvClusterStats *stats, CvGpuError *error)
{
	CvGpuHealthArgs args;
	Size		stats_bytes = sizeof(CvClusterStats) * clusters;
	uint64		stats_id = cv_gpu_upload(stats, stats_bytes, error);
	bool		ok = stats_id != 0;

	if (ok)
	{
		set_args(health, &args);
		args.members = members;
		args.offsets = offsets;
		args.stats = stats_id;
		args.nclusters = clusters;
		args.first_cluster = first_cluster;
		ok = cv_gpu_call(CV_OP_HEALTH_MEMBERS, &args, sizeof(args), NULL, 0, NULL, 0, error) &&
			cv_gpu_read(stats_id, 0, stats, stats_bytes, error);
	}
	cv_gpu_free(stats_id);
	return ok;
}

bool
cv_gpu_health_kept_all(const CvGpuHealth *health)
{
	return health->prepared && health->chunk_members != 0 &&
		health->chunk_clusters == health->set_k;
}

bool
cv_gpu_health_members(CvGpuHealth *health, const float *members, const int64 *offsets,
					  int64 first_cluster, int64 clusters, CvClusterStats *stats,
					  CvGpuError *error)
{
	uint64		ids[2] = {0, 0};
	bool		ok;

	if (!health->prepared)
	{
		cv_gpu_set_error(error, CV_GPU_ERR_BAD_REQUEST, "cluster_health pass 2 before its set");
		return false;
	}
	if (members == NULL)
	{
		Assert(cv_gpu_health_kept_all(health) && first_cluster == 0);
		ok = members_on(health, health->chunk_members, health->chunk_offsets, 0, clusters,
						stats, error);
		forget_chunk(health);
		return ok;
	}
	forget_chunk(health);
	ok = upload_chunk(health->d, members, offsets, clusters, &ids[0], &ids[1], error) &&
		members_on(health, ids[0], ids[1], first_cluster, clusters, stats, error);
	cv_gpu_free(ids[0]);
	cv_gpu_free(ids[1]);
	return ok;
}

void
cv_gpu_health_end(CvGpuHealth *health)
{
	if (health == NULL)
		return;
	forget_chunk(health);
	cv_gpu_free(health->set_centroids);
	cv_gpu_free(health->set_mean_dist);
	cv_gpu_free(health->set_mean_norm);
	cv_gpu_free(health->set_nearest);
	cv_gpu_free(health->set_nearest_dist);
	cv_gpu_free(health->set_db_ratio);
	pfree(health);
}
