/*
 * build.c: ambuild and ambuildempty.
 *
 * Pass 1 reads the heap through the table AM's build scan and keeps a
 * reservoir sample (draws from the seeded PRNG, so the same data and seed
 * give the same sample).  k-means (src/math) turns the sample into
 * centroids.  Pass 2 reads the heap again, assigns each row to its nearest
 * centroid in batches, and feeds (list, tid, vector) to a tuplesort; with
 * max_parallel_maintenance_workers, parallel workers share that scan and
 * the sort (build_parallel.c; the result is the same, see build.h).  Pass 3
 * writes the lists in order through page.c, summing each member's distance
 * to its centroid on the way: the baseline cvivf_health compares with
 * (drift.c), written after the lists.  Last, the sample calibrates recall
 * against probes for clustervec.target_recall (calibrate.c).
 */
#include "postgres.h"

#include <math.h>

#include "access/relscan.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_operator_d.h"
#include "commands/progress.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"

#include "citus.h"
#include "gpu/gpu.h"
#include "ivf/build.h"
#include "ivf/ivf.h"
#include "math/distance.h"
#include "math/kmeans.h"
#include "math_backend.h"
#include "math/nearest.h"
#include "math/prng.h"
#include "optimizer/plancat.h"
#include "type/cvec.h"

#define ASSIGN_BATCH 2048
#define MIN_AUTO_SAMPLE 10000
#define SAMPLE_PER_LIST 50

const CvIvfOptions *
cvivf_build_options(Relation index)
{
	static const CvIvfOptions defaults = {0, 0, 10, 0, 0, CVIVF_QUANTIZATION_NONE};

	return index->rd_options ? (const CvIvfOptions *) index->rd_options : &defaults;
}

/* A code entry must fit a page (codes.c); refused before any work when the type says so. */
void
cvivf_check_quantized_dimensions(Relation index, const CvIvfOptions *options, int dimensions)
{
	if (options->quantization != CVIVF_QUANTIZATION_NONE &&
		dimensions > cvivf_max_quantized_dimensions())
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvivf quantization sq8 supports at most %d dimensions, index \"%s\" has %d",
						cvivf_max_quantized_dimensions(), RelationGetRelationName(index),
						dimensions),
				 errhint("Use quantization = none for wider vectors.")));
}

/* The first vector fixes the dimensions; every other must match. */
static void
check_build_dimensions(CvIvfBuildState *state, const CVec *v)
{
	if (state->dimensions == 0)
		state->dimensions = v->dim;
	else if (v->dim != state->dimensions)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %d and %d in column indexed by \"%s\"",
						state->dimensions, v->dim, RelationGetRelationName(state->index)),
				 errhint("Declare the column as cvec(n) so every row has n dimensions.")));
}

/* The vector of an index tuple, or NULL when it is not indexed. */
static CVec *
indexable_vector(CvIvfBuildState *state, Datum value, bool isnull)
{
	CVec	   *v;

	if (isnull)
		return NULL;
	v = DatumGetCVec(value);
	check_build_dimensions(state, v);
	if (!cvivf_vector_is_indexable(state->metric, v->x, v->dim))
		return NULL;
	return v;
}

static int64 choose_sample_capacity(Relation index, const CvIvfOptions *options,
									int lists, int dims, double estimated_rows,
									bool *capped);

/* The reservoir, sized once the first vector tells the dimensions. */
static void
allocate_sample(CvIvfBuildState *state)
{
	state->sample_capacity = choose_sample_capacity(state->index, state->options,
													state->estimated_lists,
													state->dimensions,
													state->estimated_rows,
													&state->sample_capped);
	state->sample = MemoryContextAllocHuge(state->tuple_context->parent,
										   sizeof(float) * state->dimensions *
										   state->sample_capacity);
}

/* Reservoir sampling (Algorithm R) with the seeded PRNG. */
void
cvivf_build_sample_callback(Relation index pg_attribute_unused(),
							ItemPointer tid pg_attribute_unused(), Datum *values, bool *isnull,
							bool alive pg_attribute_unused(), void *arg)
{
	CvIvfBuildState *state = (CvIvfBuildState *) arg;
	MemoryContext old = MemoryContextSwitchTo(state->tuple_context);
	CVec	   *v = indexable_vector(state, values[0], isnull[0]);
	int64		slot = -1;

	if (v != NULL)
	{
		if (state->sample == NULL)
			allocate_sample(state);
		if (state->sample_count < state->sample_capacity)
			slot = state->sample_count++;
		else
		{
			int64		j = cv_prng_below(&state->prng, state->rows + 1);

			if (j < state->sample_capacity)
				slot = j;
		}
		if (slot >= 0)
			memcpy(state->sample + slot * state->dimensions, v->x,
				   sizeof(float) * state->dimensions);
		state->rows++;
		if ((state->rows & 1023) == 0)
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, state->rows);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->tuple_context);
}

/* lists: the reloption, or about rows / 1000, within [1, CVIVF_MAX_LISTS]. */
int
cvivf_build_choose_lists(const CvIvfOptions *options, double rows)
{
	if (options->lists > 0)
		return options->lists;
	return (int) Max(1.0, Min((double) CVIVF_MAX_LISTS, rint(rows / 1000.0)));
}

static Size
megabytes_up(Size bytes)
{
	return (bytes + 1024 * 1024 - 1) / (1024 * 1024);
}

/* The memory of a sample of rows vectors and of lists centroids. */
static Size
sample_bytes(int dims, int lists, int64 rows)
{
	Size		row_bytes = sizeof(float) * (Size) dims;

	/* centroids, k-means and assignment copies */
	return 3 * row_bytes * lists + row_bytes * (Size) Max(rows, lists);
}

/*
 * How many rows pass 1 keeps: sample_rows, or 50 per list (at least
 * 10,000, at most about the table's rows), within maintenance_work_mem
 * together with the centroids.  The reservoir is sized before the scan,
 * from the planner's estimate; *capped says maintenance_work_mem held it
 * down, which report_capped_sample tells once the rows are counted.
 */
static int64
choose_sample_capacity(Relation index, const CvIvfOptions *options, int lists, int dims,
					   double estimated_rows, bool *capped)
{
	Size		row_bytes = sizeof(float) * (Size) dims;
	Size		centroid_bytes = 3 * row_bytes * lists;
	Size		budget = (Size) maintenance_work_mem * 1024;
	int64		wanted = options->sample_rows > 0 ? options->sample_rows :
		Min(Max((int64) MIN_AUTO_SAMPLE, (int64) SAMPLE_PER_LIST * lists),
			(int64) (estimated_rows * 1.2) + 100);
	Size		needed = sample_bytes(dims, lists, wanted);
	int64		fits;

	*capped = false;
	if (needed <= budget)
		return wanted;
	fits = budget > centroid_bytes ? (int64) ((budget - centroid_bytes) / row_bytes) : 0;
	if (options->sample_rows > 0 || fits < (int64) lists * 4)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvivf build of \"%s\" needs %zu MB of memory, maintenance_work_mem is %d MB",
						RelationGetRelationName(index), megabytes_up(needed),
						maintenance_work_mem / 1024),
				 errhint("Increase maintenance_work_mem to at least %zu MB, or use fewer lists or sample_rows.",
						 megabytes_up(needed))));
	*capped = true;
	return fits;
}

/*
 * After pass 1, with the rows counted rather than estimated: whether the
 * reservoir maintenance_work_mem allowed kept fewer rows than the full
 * sample of the rows actually scanned would hold.
 */
void
cvivf_build_report_capped_sample(const CvIvfBuildState *state)
{
	int			lists = cvivf_build_choose_lists(state->options, (double) state->rows);
	int64		full = Min(Max((int64) MIN_AUTO_SAMPLE, (int64) SAMPLE_PER_LIST * lists),
						   state->rows);

	if (!state->sample_capped || full <= state->sample_count)
		return;
	ereport(NOTICE,
			(errmsg("cvivf samples %lld rows instead of %lld to fit maintenance_work_mem",
					(long long) state->sample_count, (long long) full),
			 errdetail("The scan read %.0f rows, %lld of them with a vector to index.",
					   state->heap_tuples, (long long) state->rows),
			 errhint("Increase maintenance_work_mem to at least %zu MB for the full sample.",
					 megabytes_up(sample_bytes(state->dimensions, lists, full)))));
}

static void
kmeans_progress(void *arg pg_attribute_unused(), int iteration, int total pg_attribute_unused())
{
	pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_DONE, iteration);
	CHECK_FOR_INTERRUPTS();
}

/* Cosine and inner product train on directions: the sample becomes unit length. */
static void
normalize_sample(CvIvfBuildState *state)
{
	for (int64 i = 0; i < state->sample_count; i++)
	{
		float	   *x = state->sample + i * state->dimensions;
		double		norm = sqrt(cv_distance->norm_squared(x, state->dimensions));

		if (norm > 0)
			for (int j = 0; j < state->dimensions; j++)
				x[j] = (float) (x[j] / norm);
	}
}

/* Trains up to lists centroids; returns how many there are (fewer distinct rows: fewer). */
static int
train_centroids(CvIvfBuildState *state, int lists, int iterations, uint64 seed, float *centroids)
{
	CvKmeansParams params = {0};
	CvKmeansResult result = {0};

	params.k = lists;
	params.iterations = iterations;
	params.seed = seed;
	params.metric = state->metric == CV_METRIC_L2 ? CV_KMEANS_L2 : CV_KMEANS_SPHERICAL;
	params.progress = kmeans_progress;
	params.progress_arg = state;
	params.allocator = &cv_palloc_allocator;
	if (state->metric != CV_METRIC_L2)
		normalize_sample(state);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CVIVF_PHASE_KMEANS);
	pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_TOTAL, iterations);
	pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_DONE, 0);
	if (state->use_gpu)
	{
		int			trained;
		CvGpuError	error = {0};

		if (cv_gpu_kmeans_train(state->sample, state->sample_count, state->dimensions, &params,
								cv_gpu_assign_mode, centroids, &trained, &error))
		{
			state->gpu_served = true;
			return trained;
		}
		cv_gpu_fall_back("the cvivf build", &error);
		state->use_gpu = false;
	}
	cv_check_math(cv_kmeans(state->sample, state->sample_count, state->dimensions, &params,
						 centroids, NULL, NULL, &result), "k-means");
	return result.n_centroids;
}

/* The CPU assigner, made when the CPU first assigns. */
static void
ensure_cpu_nearest(CvIvfBuildState *state)
{
	CvNearestMetric metric = state->metric == CV_METRIC_L2 ?
		CV_NEAREST_L2 : CV_NEAREST_INNER_PRODUCT;

	MemoryContext old;

	if (state->nearest != NULL)
		return;
	/* it outlives the per-row context the assignment runs in */
	old = MemoryContextSwitchTo(state->tuple_context->parent);
	cv_check_math(cv_nearest_create(state->centroids, state->lists, state->dimensions, metric,
								 &cv_palloc_allocator, &state->nearest), "list assignment");
	MemoryContextSwitchTo(old);
}

/* Each buffered row's nearest list: on the GPU while it serves, else on the CPU. */
static void
assign_batch(CvIvfBuildState *state)
{
	if (state->gpu != NULL)
	{
		CvGpuError	error = {0};

		if (cv_gpu_assign(state->gpu, state->batch, state->batch_count, state->batch_lists,
						  &error))
		{
			state->gpu_served = true;
			return;
		}
		cv_gpu_fall_back("the cvivf build", &error);
		cv_gpu_assigner_end(state->gpu);
		state->gpu = NULL;
	}
	ensure_cpu_nearest(state);
	cv_check_math(cv_nearest_assign(state->nearest, state->batch, state->batch_count,
								 state->batch_lists, NULL), "list assignment");
}

/*
 * Counts a batch's rows for pg_stat_progress_create_index: in a parallel
 * build the participants add them up in shared memory and the leader
 * reports the total (a worker's own progress row is not the command's).
 */
static void
count_assigned(CvIvfBuildState *state, int rows)
{
	int64		done;

	state->assigned += rows;
	done = state->assigned;
	if (state->shared_assigned != NULL)
		done = (int64) pg_atomic_add_fetch_u64(state->shared_assigned, rows);
	if (state->report_progress)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, done);
}

/* Assigns the buffered rows to lists and hands them to the sort. */
static void
flush_batch(CvIvfBuildState *state)
{
	assign_batch(state);
	for (int i = 0; i < state->batch_count; i++)
	{
		TupleTableSlot *slot = state->slot;
		CVec	   *v = cvec_alloc(state->dimensions);

		memcpy(v->x, state->batch + (Size) i * state->dimensions,
			   sizeof(float) * state->dimensions);
		ExecClearTuple(slot);
		slot->tts_values[0] = Int32GetDatum(state->batch_lists[i]);
		slot->tts_values[1] = PointerGetDatum(&state->batch_tids[i]);
		slot->tts_values[2] = PointerGetDatum(v);
		slot->tts_isnull[0] = slot->tts_isnull[1] = slot->tts_isnull[2] = false;
		ExecStoreVirtualTuple(slot);
		tuplesort_puttupleslot(state->sort, slot);
		pfree(v);
	}
	count_assigned(state, state->batch_count);
	state->batch_count = 0;
}

/* Pass 2's heap scan callback: rows are buffered and assigned a batch at a time. */
void
cvivf_build_assign_callback(Relation index pg_attribute_unused(), ItemPointer tid, Datum *values,
							bool *isnull, bool alive pg_attribute_unused(), void *arg)
{
	CvIvfBuildState *state = (CvIvfBuildState *) arg;
	MemoryContext old = MemoryContextSwitchTo(state->tuple_context);
	CVec	   *v = indexable_vector(state, values[0], isnull[0]);

	if (v != NULL)
	{
		memcpy(state->batch + (Size) state->batch_count * state->dimensions, v->x,
			   sizeof(float) * state->dimensions);
		state->batch_tids[state->batch_count++] = *tid;
		if (state->batch_count == state->batch_capacity)
			flush_batch(state);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->tuple_context);
}

/* The rows pass 2 sorts: (list int4, heap tid, vector). */
TupleDesc
cvivf_build_sort_desc(Relation index)
{
	TupleDesc	desc = CreateTemplateTupleDesc(3);

	TupleDescInitEntry(desc, 1, "list", INT4OID, -1, 0);
	TupleDescInitEntry(desc, 2, "tid", TIDOID, -1, 0);
	TupleDescInitEntry(desc, 3, "vector",
					   TupleDescAttr(RelationGetDescr(index), 0)->atttypid, -1, 0);
	return desc;
}

/*
 * A sort by list, then heap TID.  The TID makes the order total (no two
 * rows share one), so the order of the rows within a list is the same
 * whichever process assigned them and in whatever order they arrived: this
 * is what makes a parallel build's index equal the serial build's.
 */
Tuplesortstate *
cvivf_build_sort_begin(TupleDesc desc, int work_mem, SortCoordinate coordinate)
{
	AttrNumber	columns[2] = {1, 2};
	Oid			operators[2] = {Int4LessOperator, TIDLessOperator};
	Oid			collations[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};

	return tuplesort_begin_heap(desc, 2, columns, operators, collations, nulls_first,
								work_mem, coordinate, TUPLESORT_NONE);
}

/* The row buffers of pass 2, batch_capacity rows each. */
static void
allocate_batches(CvIvfBuildState *state)
{
	state->batch = palloc_extended(sizeof(float) * state->dimensions * state->batch_capacity,
								   MCXT_ALLOC_HUGE);
	state->batch_tids = palloc(sizeof(ItemPointerData) * state->batch_capacity);
	state->batch_lists = palloc(sizeof(int32) * state->batch_capacity);
}

/*
 * A participant of a parallel pass 2 (the leader or a worker): assigns on
 * the CPU, into a sort the caller begins.
 */
void
cvivf_build_participant_init(CvIvfBuildState *state, Relation heap, Relation index,
							 CvMetric metric, int dimensions, const float *centroids, int lists)
{
	memset(state, 0, sizeof(*state));
	state->heap = heap;
	state->index = index;
	state->metric = metric;
	state->dimensions = dimensions;
	state->centroids = centroids;
	state->lists = lists;
	state->tuple_context = AllocSetContextCreate(CurrentMemoryContext, "cvivf build tuple",
												 ALLOCSET_DEFAULT_SIZES);
	state->batch_capacity = ASSIGN_BATCH;
	allocate_batches(state);
	state->slot = MakeSingleTupleTableSlot(cvivf_build_sort_desc(index), &TTSOpsVirtual);
}

/* After pass 2's scan: the last partial batch, then the assigners' memory. */
void
cvivf_build_assign_end(CvIvfBuildState *state)
{
	if (state->batch_count > 0)
		flush_batch(state);
	cv_gpu_assigner_end(state->gpu);
	state->gpu = NULL;
	if (state->nearest != NULL)
		cv_nearest_free(state->nearest);
	state->nearest = NULL;
	pfree(state->batch);
	pfree(state->batch_tids);
	pfree(state->batch_lists);
	state->batch = NULL;
	state->batch_tids = NULL;
	state->batch_lists = NULL;
}

/* The worker ranks by L2 or by inner product (cosine: the rows are normalised first). */
static void
begin_gpu_assigner(CvIvfBuildState *state, const float *centroids, int lists)
{
	CvGpuError	error = {0};

	state->gpu = cv_gpu_assigner_begin(centroids, lists, state->dimensions,
									   state->metric == CV_METRIC_L2 ?
									   CV_KMEANS_L2 : CV_KMEANS_INNER_PRODUCT,
									   cv_gpu_assign_mode, &error);
	if (state->gpu == NULL)
		cv_gpu_fall_back("the cvivf build", &error);
}

/*
 * A serial pass 2 (the build's, or a retrain's over the index's rows):
 * the assigner of state->centroids (the GPU's when it serves) and the
 * sort; rows then go to cvivf_build_assign_callback.
 */
void
cvivf_build_assign_begin(CvIvfBuildState *state)
{
	TupleDesc	desc;

	state->batch_capacity = ASSIGN_BATCH;
	if (state->use_gpu)
		begin_gpu_assigner(state, state->centroids, state->lists);
	if (state->gpu != NULL)
		state->batch_capacity = Max(ASSIGN_BATCH, cv_gpu_assign_batch_rows(state->dimensions));
	allocate_batches(state);
	desc = cvivf_build_sort_desc(state->index);
	state->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	state->sorted_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	state->sort = cvivf_build_sort_begin(desc, maintenance_work_mem, NULL);
}

/*
 * Pass 2: every row to its nearest list, through the sort.  In parallel
 * workers when they can help (the GPU assigns alone: its worker serves one
 * request at a time, so CPU workers beside it would only compete).
 */
static void
assign_rows(CvIvfBuildState *state, IndexInfo *info, const float *centroids, int lists)
{
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CVIVF_PHASE_ASSIGNING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, state->rows);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
	state->centroids = centroids;
	state->lists = lists;
	if (!state->use_gpu && cvivf_parallel_assign(state, info))
		return;
	cvivf_build_assign_begin(state);
	table_index_build_scan(state->heap, state->index, info, true, true,
						   cvivf_build_assign_callback, state, NULL);
	cvivf_build_assign_end(state);
	tuplesort_performsort(state->sort);
}

/* Pass 3: the sorted rows, list after list, onto pages. */
void
cvivf_build_write_lists(CvIvfBuildState *state, CvIvfBuildWriter *writer)
{
	int			current = -1;
	int64		written = 0;
	bool		isnull;

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CVIVF_PHASE_WRITING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, state->assigned);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
	while (tuplesort_gettupleslot(state->sort, true, false, state->sorted_slot, NULL))
	{
		TupleTableSlot *slot = state->sorted_slot;
		int			list = DatumGetInt32(slot_getattr(slot, 1, &isnull));
		ItemPointer tid = (ItemPointer) DatumGetPointer(slot_getattr(slot, 2, &isnull));
		CVec	   *v = DatumGetCVec(slot_getattr(slot, 3, &isnull));

		if (list != current)
			cvivf_writer_start_list(writer, current = list);
		cvivf_writer_add(writer, tid, v->x);
		cvivf_distance_sums_add(state->baseline, state->metric, list, v->x,
								state->centroids + (Size) list * state->dimensions,
								state->dimensions);
		if ((++written & 1023) == 0)
		{
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, written);
			CHECK_FOR_INTERRUPTS();
		}
	}
	tuplesort_end(state->sort);
}

/* An index with one list and no centroid: exact scans until a REINDEX. */
static void
write_empty_index(Relation index, ForkNumber fork, CvMetric metric, int dims)
{
	CvIvfMetaPageData meta;
	CvIvfBuildWriter *writer;

	cvivf_init_meta(&meta, metric, dims, 1, false);
	writer = cvivf_writer_begin(index, fork, &meta);
	cvivf_writer_centroids(writer, NULL, NULL);
	cvivf_writer_finish(writer);
}

/* The planner's estimate of the table's rows (a build's progress total, its sample's size). */
double
cvivf_estimate_heap_rows(Relation heap)
{
	BlockNumber pages;
	double		tuples;
	double		allvisfrac;

	estimate_rel_size(heap, NULL, &pages, &tuples, &allvisfrac);
	return tuples;
}

/* Pass 1: the reservoir sample and the exact number of indexable rows. */
static void
sample_rows(CvIvfBuildState *state, IndexInfo *info)
{
	double		estimate = cvivf_estimate_heap_rows(state->heap);

	state->estimated_rows = estimate;
	state->estimated_lists = cvivf_build_choose_lists(state->options, estimate);
	cv_prng_seed(&state->prng, (uint64) state->options->seed);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CVIVF_PHASE_SAMPLING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, (int64) estimate);
	/*
	 * No synchronized scan: one starting where another scan of a large table
	 * is (or where a cancelled build left it) would draw another sample, and
	 * the same data and seed must give the same centroids.
	 */
	state->heap_tuples = table_index_build_scan(state->heap, state->index, info, false, true,
												cvivf_build_sample_callback, state, NULL);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, state->rows);
	cvivf_build_report_capped_sample(state);
}

/* k-means on the sample; centroids and norms are allocated here. */
int
cvivf_build_centroids(CvIvfBuildState *state, float **centroids, double **norms)
{
	int			wanted = cvivf_build_choose_lists(state->options, (double) state->rows);
	int			lists;

	*centroids = MemoryContextAllocHuge(CurrentMemoryContext,
										sizeof(float) * state->dimensions * (Size) wanted);
	lists = train_centroids(state, wanted, state->options->iterations,
							(uint64) state->options->seed, *centroids);
	if (lists < wanted)
		ereport(NOTICE,
				(errmsg("cvivf index \"%s\" has %d lists instead of %d",
						RelationGetRelationName(state->index), lists, wanted),
				 errdetail("The sample holds only %d distinct vectors.", lists)));
	*norms = palloc(sizeof(double) * lists);
	for (int i = 0; i < lists; i++)
		(*norms)[i] = sqrt(cv_distance->norm_squared(*centroids + (Size) i * state->dimensions,
													  state->dimensions));
	return lists;
}

IndexBuildResult *
cvivfbuild(Relation heap, Relation index, IndexInfo *info)
{
	IndexBuildResult *result = palloc0(sizeof(IndexBuildResult));
	CvIvfBuildState state = {0};
	CvIvfMetaPageData meta;
	CvIvfBuildWriter *writer;
	float	   *centroids;
	double	   *norms;
	int			lists;

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data", RelationGetRelationName(index));
	state.heap = heap;
	state.index = index;
	state.metric = cvivf_metric_of_index(index);
	state.options = cvivf_build_options(index);
	state.dimensions = cvivf_declared_dimensions(index);
	cvivf_check_quantized_dimensions(index, state.options, state.dimensions);
	state.tuple_context = AllocSetContextCreate(CurrentMemoryContext, "cvivf build tuple",
												ALLOCSET_DEFAULT_SIZES);
	state.use_gpu = cv_gpu_should_use();
	state.report_progress = true;
	sample_rows(&state, info);
	if (state.rows == 0)
	{
		result->heap_tuples = state.heap_tuples;
		write_empty_index(index, MAIN_FORKNUM, state.metric, state.dimensions);
		cvivf_record_baseline(index, cvivf_distance_sums_new(1));
		/* a Citus distributed table's shell never gets rows: its shards hold them */
		if (!cv_citus_is_distributed(RelationGetRelid(heap)))
			ereport(NOTICE,
					(errmsg("cvivf index \"%s\" was built on a table without vectors",
							RelationGetRelationName(index)),
					 errdetail("It has one list and no centroid: scans read every row."),
					 errhint("REINDEX it once data is loaded.")));
		return result;
	}
	lists = cvivf_build_centroids(&state, &centroids, &norms);
	assign_rows(&state, info, centroids, lists);
	cvivf_init_meta(&meta, state.metric, state.dimensions, lists, true);
	cvivf_check_quantized_dimensions(index, state.options, state.dimensions);
	cvivf_meta_set_quantization(&meta, state.options->quantization);
	meta.iterations = state.options->iterations;
	meta.seed = (uint64) state.options->seed;
	meta.sample_rows = state.sample_count;
	writer = cvivf_writer_begin(index, MAIN_FORKNUM, &meta);
	cvivf_writer_centroids(writer, centroids, norms);
	state.baseline = cvivf_distance_sums_new(lists);
	cvivf_build_write_lists(&state, writer);
	if (state.parallel != NULL)
		cvivf_parallel_end(state.parallel);
	cvivf_writer_finish(writer);
	cvivf_record_baseline(index, state.baseline);
	cvivf_calibrate_sample(index, state.metric, state.sample, state.sample_count,
						   state.dimensions, centroids, lists, state.rows,
						   (uint64) state.options->seed);
	if (state.gpu_served)
		cv_gpu_count_served(CV_GPU_SERVED_BUILD);
	/* PostgreSQL stores heap_tuples as the table's reltuples: every row, not the indexed ones */
	result->heap_tuples = state.heap_tuples;
	result->index_tuples = state.assigned;
	return result;
}

/* The init fork of an unlogged index: empty, exact, logged. */
void
cvivfbuildempty(Relation index)
{
	write_empty_index(index, INIT_FORKNUM, cvivf_metric_of_index(index),
					  cvivf_declared_dimensions(index));
}
