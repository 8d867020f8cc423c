/*
 * engine.c: runs the statistics over the sorted rows in two passes.
 *
 * Pass 1 reads every cluster once for the centroid family (each cluster's
 * centroid, mean distance and mean norm are what the neighbour family and
 * the global centroid need).  Pass 2 gathers chunks of whole clusters into
 * compressed-sparse-row form (one flat member array and offsets) up to
 * clustervec.health_memory and runs the other families chunk by chunk,
 * family after family, the shape the GPU kernels take.
 */
#include "postgres.h"

#include <math.h>

#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "health/gpu_passes.h"
#include "health/health_sql.h"
#include "gpu/gpu.h"
#include "type/cvec.h"

#define PROGRESS_EVERY_MS 5000

/* A chunk of whole clusters: members back to back, offsets per cluster. */
typedef struct Chunk
{
	int64		first_cluster;
	int64		clusters;
	int64	   *offsets;		/* clusters + 1 entries, in members */
	float	   *members;
	int64		member_count;
	int64		member_capacity;
	int64		offset_capacity;
} Chunk;

static void
report_progress(HealthRun *run, const char *pass, int64 done, int64 total)
{
	TimestampTz now;

	if (!run->progress)
		return;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(run->last_report, now, PROGRESS_EVERY_MS))
		return;
	run->last_report = now;
	if (total < 0)
		ereport(NOTICE,
				(errmsg("cluster_health: %s, %lld clusters after %.1f s",
						pass, (long long) done, (double) (now - run->started) / 1000000.0)));
	else
		ereport(NOTICE,
				(errmsg("cluster_health: %s, %lld of %lld clusters after %.1f s",
						pass, (long long) done, (long long) total,
						(double) (now - run->started) / 1000000.0)));
}

static void
chunk_reset(Chunk *chunk, int64 first_cluster)
{
	chunk->first_cluster = first_cluster;
	chunk->clusters = 0;
	chunk->member_count = 0;
	chunk->offsets[0] = 0;
}

/* Appends one member to the chunk's current cluster. */
static void
chunk_add_member(Chunk *chunk, const CVec *v)
{
	if (chunk->member_count == chunk->member_capacity)
	{
		chunk->member_capacity *= 2;
		chunk->members = repalloc_huge(chunk->members,
									   sizeof(float) * v->dim * chunk->member_capacity);
	}
	memcpy(chunk->members + chunk->member_count * v->dim, v->x, sizeof(float) * v->dim);
	chunk->member_count++;
}

/* Closes the current cluster of the chunk. */
static void
chunk_end_cluster(Chunk *chunk)
{
	if (chunk->clusters + 2 > chunk->offset_capacity)
	{
		chunk->offset_capacity *= 2;
		chunk->offsets = repalloc_huge(chunk->offsets, sizeof(int64) * chunk->offset_capacity);
	}
	chunk->clusters++;
	chunk->offsets[chunk->clusters] = chunk->member_count;
}

static bool
same_label(const HealthRun *run, Datum a, Datum b)
{
	if (!run->input.text_labels)
		return DatumGetInt64(a) == DatumGetInt64(b);
	/* compare contents: a sorted tuple may hold the label with a short header */
	return VARSIZE_ANY_EXHDR(DatumGetPointer(a)) == VARSIZE_ANY_EXHDR(DatumGetPointer(b)) &&
		memcmp(VARDATA_ANY(DatumGetPointer(a)), VARDATA_ANY(DatumGetPointer(b)),
			   VARSIZE_ANY_EXHDR(DatumGetPointer(a))) == 0;
}

/* Records cluster k's label during pass 1. */
static void
add_cluster(HealthRun *run, Datum label, int64 *capacity)
{
	if (run->k == *capacity)
	{
		*capacity *= 2;
		run->clusters = repalloc_huge(run->clusters, sizeof(HealthCluster) * *capacity);
	}
	memset(&run->clusters[run->k], 0, sizeof(HealthCluster));
	run->clusters[run->k].label = run->input.text_labels ?
		PointerGetDatum(PG_DETOAST_DATUM_COPY(label)) : label;
	run->k++;
}

typedef void (*ChunkHandler) (HealthRun *run, Chunk *chunk);

/*
 * Members per chunk: clustervec.health_memory; on the GPU also at most a
 * quarter of the device memory free now (the members, a centred copy and
 * the per-member scratch of the pairwise pass must fit beside the mirrors).
 */
static Size
chunk_bytes(const HealthRun *run)
{
	Size		bytes = (Size) cv_health_memory_kb * 1024;
	uint64		free_bytes;

	if (!run->use_gpu)
		return bytes;
	free_bytes = cv_gpu_device_free_bytes();
	if (free_bytes > 0)
		bytes = Min(bytes, (Size) (free_bytes / 4));
	return Max(bytes, (Size) 1024 * 1024);
}

/*
 * Reads the sorted rows once, handing chunks of whole clusters (at most
 * memory_bytes of members, or one larger cluster) to handler.  In pass 1
 * (record_labels) it also records the clusters.
 */
static void
for_each_chunk(HealthRun *run, bool record_labels, ChunkHandler handler)
{
	HealthInput *input = &run->input;
	Size		memory_bytes = chunk_bytes(run);
	int			d = input->dimensions;
	Chunk		chunk = {0};
	int64		capacity = 64;
	int64		cluster = -1;
	Datum		current = (Datum) 0;
	bool		isnull;

	chunk.member_capacity = 1024;
	chunk.members = palloc_extended(sizeof(float) * d * chunk.member_capacity, MCXT_ALLOC_HUGE);
	chunk.offset_capacity = 64;
	chunk.offsets = palloc(sizeof(int64) * chunk.offset_capacity);
	chunk_reset(&chunk, 0);
	if (record_labels)
		run->clusters = palloc_extended(sizeof(HealthCluster) * capacity, MCXT_ALLOC_HUGE);
	tuplesort_rescan(input->sort);
	while (tuplesort_gettupleslot(input->sort, true, false, input->slot, NULL))
	{
		Datum		label = slot_getattr(input->slot, HEALTH_COL_LABEL, &isnull);
		CVec	   *v;

		if (cluster < 0 || !same_label(run, label, current))
		{
			if (cluster >= 0)
				chunk_end_cluster(&chunk);
			if (chunk.clusters > 0 &&
				(Size) chunk.member_count * d * sizeof(float) >= memory_bytes)
			{
				handler(run, &chunk);
				chunk_reset(&chunk, cluster + 1);
			}
			cluster++;
			if (record_labels)
				add_cluster(run, label, &capacity);
			current = run->clusters[cluster].label;
		}
		v = DatumGetCVec(slot_getattr(input->slot, HEALTH_COL_VECTOR, &isnull));
		chunk_add_member(&chunk, v);
	}
	if (cluster >= 0)
	{
		chunk_end_cluster(&chunk);
		handler(run, &chunk);
	}
	pfree(chunk.members);
	pfree(chunk.offsets);
}

/* The members and count of the chunk's i-th cluster. */
static const float *
chunk_cluster(const Chunk *chunk, int64 i, int d, int64 *n)
{
	*n = chunk->offsets[i + 1] - chunk->offsets[i];
	return chunk->members + chunk->offsets[i] * d;
}

static HealthChunkView
chunk_view(const Chunk *chunk)
{
	HealthChunkView view;

	view.first_cluster = chunk->first_cluster;
	view.clusters = chunk->clusters;
	view.offsets = chunk->offsets;
	view.members = chunk->members;
	view.member_count = chunk->member_count;
	return view;
}

/* Pass 1: the centroid family of every cluster in the chunk. */
static void
centroid_pass(HealthRun *run, Chunk *chunk)
{
	int			d = run->input.dimensions;
	HealthChunkView view = chunk_view(chunk);

	if (run->use_gpu && health_gpu_centroid_pass(run, &view))
	{
		run->gpu_served = true;
		report_progress(run, "pass 1 (centroids, GPU)", chunk->first_cluster + chunk->clusters, -1);
		return;
	}
	for (int64 i = 0; i < chunk->clusters; i++)
	{
		HealthCluster *cluster = &run->clusters[chunk->first_cluster + i];
		int64		n;
		const float *x = chunk_cluster(chunk, i, d, &n);

		cluster->n = n;
		cluster->centroid = palloc_extended(sizeof(double) * d, MCXT_ALLOC_HUGE);
		cv_health_centroid(x, n, d, &run->params, cluster->centroid, &cluster->stats);
		CHECK_FOR_INTERRUPTS();
	}
	report_progress(run, "pass 1 (centroids)", chunk->first_cluster + chunk->clusters, -1);
}

/* Everything pass 2 shares: the centroid set, g and the neighbour table. */
typedef struct Globals
{
	CvCentroidSet set;
	double	   *global;
	double		global_mean_norm;
	CvNeighbourTable table;
} Globals;

/* The neighbour table is malloc'ed by src/math: free it with the memory context, even after an ERROR. */
static void
free_neighbour_table(void *arg)
{
	cv_health_neighbour_free(&((Globals *) arg)->table);
}

static void
register_table_cleanup(Globals *globals)
{
	MemoryContextCallback *callback = palloc(sizeof(MemoryContextCallback));

	callback->func = free_neighbour_table;
	callback->arg = globals;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, callback);
}

/* The centroid set of this run's own clusters. */
static void
own_centroid_set(HealthRun *run, CvCentroidSet *set)
{
	int			d = run->input.dimensions;
	double	   *centroids = palloc_extended(sizeof(double) * d * run->k, MCXT_ALLOC_HUGE);
	int64	   *n = palloc(sizeof(int64) * run->k);
	double	   *mean_dist = palloc(sizeof(double) * run->k);
	double	   *mean_norm = palloc(sizeof(double) * run->k);

	for (int64 i = 0; i < run->k; i++)
	{
		memcpy(centroids + i * d, run->clusters[i].centroid, sizeof(double) * d);
		n[i] = run->clusters[i].n;
		mean_dist[i] = run->clusters[i].stats.value[CV_STAT_MEAN_DIST];
		mean_norm[i] = run->clusters[i].stats.value[CV_STAT_MEAN_NORM];
	}
	set->k = run->k;
	set->d = d;
	set->centroids = centroids;
	set->n = n;
	set->mean_dist = mean_dist;
	set->mean_norm = mean_norm;
}

/* Whether cluster i of this shard has the label of cluster j of the table. */
static bool
is_global_cluster(const HealthRun *run, int64 i, int64 j)
{
	const HealthGlobalSet *g = run->external;
	const HealthCluster *c = &run->clusters[i];

	return same_label(run, c->label, g->labels[j]);
}

static void
refuse_changed_rows(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("rows of the shard changed while cluster_health read it"),
			 errhint("Run cluster_health again.")));
}

/*
 * The shard path: every cluster of the table is the set, and each of this
 * shard's clusters gets its number in it.  Both lists are in label order,
 * so one walk finds them.  A cluster must have the members the coordinator
 * saw (n and centroid bit for bit): the rows may have changed between the
 * two rounds, which run in separate transactions.
 */
static void
external_centroid_set(HealthRun *run, CvCentroidSet *set)
{
	const HealthGlobalSet *g = run->external;
	int			d = run->input.dimensions;
	int64		j = 0;

	if (g->d != d)
		refuse_changed_rows();
	run->global_index = palloc(sizeof(int64) * Max(run->k, 1));
	for (int64 i = 0; i < run->k; i++)
	{
		while (j < g->k && !is_global_cluster(run, i, j))
			j++;
		if (j == g->k || g->n[j] != run->clusters[i].n ||
			memcmp(g->centroids + j * d, run->clusters[i].centroid, sizeof(double) * d) != 0)
			refuse_changed_rows();
		run->global_index[i] = j;
	}
	set->k = g->k;
	set->d = d;
	set->centroids = g->centroids;
	set->n = g->n;
	set->mean_dist = g->mean_dist;
	set->mean_norm = g->mean_norm;
}

static void
prepare_globals(HealthRun *run)
{
	Globals    *globals = palloc0(sizeof(Globals));
	int			d = run->input.dimensions;

	if (run->external)
		external_centroid_set(run, &globals->set);
	else
		own_centroid_set(run, &globals->set);
	globals->global = palloc(sizeof(double) * d);
	cv_health_global_centroid(&globals->set, globals->global);
	globals->global_mean_norm = cv_health_global_mean_norm(&globals->set);
	run->globals = globals;
	register_table_cleanup(globals);
	if (run->use_gpu)
		(void) health_gpu_prepare(run, &globals->set);
}

/*
 * The CPU neighbour table, made the first time the CPU path needs it; over
 * 100,000 clusters that is minutes of work, so it stops for interrupts as
 * the pairwise pass does.
 */
static void
ensure_cpu_table(HealthRun *run)
{
	Globals    *globals = (Globals *) run->globals;
	int			rc;

	if (globals->table.nearest != NULL || globals->table.db_ratio != NULL)
		return;
	while ((rc = cv_health_neighbour_prepare(&globals->set, run->params.neighbours,
											 &globals->table)) == CV_HEALTH_STOPPED)
		CHECK_FOR_INTERRUPTS();
	if (rc != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory preparing the neighbour family of cluster_health")));
}

/* src/math polls this between blocks: a cancel or timeout must not wait for a large cluster. */
static bool
interrupt_pending(void)
{
	/* only what CHECK_FOR_INTERRUPTS can act on now, or the retry would spin */
	return InterruptPending && INTERRUPTS_CAN_BE_PROCESSED();
}

/* src/math's buffers: accounted in the current memory context, NULL (not an ERROR) when refused. */
static void *
context_alloc(size_t bytes)
{
	return palloc_extended(bytes, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

static void
context_release(void *block)
{
	pfree(block);
}

static const CvHealthMemory context_memory = {context_alloc, context_release};

/* Points src/math's hooks at this backend: interrupts stop it, memory comes from contexts. */
static void
install_math_hooks(void)
{
	cv_health_stop_requested = interrupt_pending;
	cv_health_memory = &context_memory;
}

/*
 * The pairwise class, stopping for pending interrupts: they raise their
 * ERROR here; one that turns out to need nothing (a catch-up signal, say)
 * lets the cluster start again.
 */
static int
pairwise_interruptibly(HealthRun *run, const float *x, int64 n, int d, const uint8 *side,
					   CvClusterStats *stats)
{
	int			rc;

	while ((rc = cv_health_pairwise(x, n, d, n >= 2 ? side : NULL, &run->params, NAN,
									stats)) == CV_HEALTH_STOPPED)
		CHECK_FOR_INTERRUPTS();
	return rc;
}

/* effective_rank, stopping for pending interrupts as the pairwise class does. */
static int
rank_interruptibly(HealthRun *run, const float *x, int64 n, const double *centroid,
				   CvClusterStats *stats)
{
	int			d = run->input.dimensions;
	int			rc;

	while ((rc = cv_health_effective_rank(x, n, d, centroid, &run->params,
										  stats)) == CV_HEALTH_STOPPED)
		CHECK_FOR_INTERRUPTS();
	return rc;
}

/* Pass 2 for one cluster: the families after the centroid family. */
static void
cluster_pass(HealthRun *run, int64 index, const float *x, int64 n)
{
	HealthCluster *cluster = &run->clusters[index];
	CvClusterStats *stats = &cluster->stats;
	Globals    *globals = (Globals *) run->globals;
	int			d = run->input.dimensions;
	uint8	   *side;

	cv_health_finish_centroid(cluster->centroid, globals->global, globals->global_mean_norm,
							  d, stats);
	cv_health_neighbour(x, n, d, run->external ? run->global_index[index] : index,
						&globals->set, &globals->table, stats);
	if (run->families == HEALTH_FAMILY_SUMMARY)
		return;
	side = palloc(Max(n, 1));
	if (cv_health_two_means(x, n, d, side, stats) != 0 ||
		pairwise_interruptibly(run, x, n, d, side, stats) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory computing the statistics of a cluster of %lld members",
						(long long) n)));
	pfree(side);
	cv_health_potential(x, n, d, cluster->centroid, globals->set.k, stats);
	if (rank_interruptibly(run, x, n, cluster->centroid, stats) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory computing effective_rank of a cluster of %lld members",
						(long long) n)));
	if (stats->rank_refused)
		run->refused++;
}

/* Pass 2 of a chunk the GPU computed: what needs g, and the refusal count. */
static void
finish_gpu_chunk(HealthRun *run, const Chunk *chunk)
{
	Globals    *globals = (Globals *) run->globals;

	for (int64 i = 0; i < chunk->clusters; i++)
	{
		HealthCluster *cluster = &run->clusters[chunk->first_cluster + i];

		cv_health_finish_centroid(cluster->centroid, globals->global, globals->global_mean_norm,
								  run->input.dimensions, &cluster->stats);
		if (cluster->stats.rank_refused)
			run->refused++;
	}
	report_progress(run, "pass 2 (all families, GPU)", chunk->first_cluster + chunk->clusters,
					run->k);
}

/* Pass 2 of one chunk holding every cluster, computed on the device's kept copy. */
static void
finish_whole_input(HealthRun *run)
{
	Chunk		all = {0};

	all.first_cluster = 0;
	all.clusters = run->k;
	run->gpu_served = true;
	finish_gpu_chunk(run, &all);
}

static void
second_pass(HealthRun *run, Chunk *chunk)
{
	int			d = run->input.dimensions;
	HealthChunkView view = chunk_view(chunk);

	if (run->use_gpu && health_gpu_members_pass(run, &view))
	{
		run->gpu_served = true;
		finish_gpu_chunk(run, chunk);
		return;
	}
	health_gpu_release(run);
	ensure_cpu_table(run);
	for (int64 i = 0; i < chunk->clusters; i++)
	{
		int64		n;
		const float *x = chunk_cluster(chunk, i, d, &n);

		cluster_pass(run, chunk->first_cluster + i, x, n);
		CHECK_FOR_INTERRUPTS();
		report_progress(run, "pass 2 (all families)", chunk->first_cluster + i + 1, run->k);
	}
}

/* Pass 2 over every cluster, after the centroid set is known. */
static void
run_second_pass(HealthRun *run)
{
	prepare_globals(run);
	if (run->use_gpu && health_gpu_members_pass_kept(run))
		finish_whole_input(run);
	else
		for_each_chunk(run, false, second_pass);
}

/*
 * Runs both passes (pass 1 only for HEALTH_FAMILY_CENTROIDS); run->clusters
 * then holds one row per cluster.
 */
void
health_run(HealthRun *run)
{
	run->started = run->last_report = GetCurrentTimestamp();
	run->k = 0;
	install_math_hooks();
	/*
	 * A shard's rounds stay on the CPU: the GPU passes number clusters as the
	 * chunks do, not as the table's set, and round 2 checks round 1's
	 * centroids bit for bit.
	 */
	run->use_gpu = run->input.rows > 0 && run->external == NULL &&
		run->families != HEALTH_FAMILY_CENTROIDS && cv_gpu_should_use();
	if (run->input.rows > 0)
	{
		for_each_chunk(run, true, centroid_pass);
		if (run->families != HEALTH_FAMILY_CENTROIDS)
			run_second_pass(run);
	}
	health_gpu_release(run);
	if (run->gpu_served)
		cv_gpu_count_served(CV_GPU_SERVED_HEALTH);
	/* the sort's temporary files go now, not at the end of the transaction */
	ExecDropSingleTupleTableSlot(run->input.slot);
	tuplesort_end(run->input.sort);
	run->input.sort = NULL;
}
