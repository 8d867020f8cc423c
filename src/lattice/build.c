/*
 * build.c: ambuild and ambuildempty of cvlattice.  One pass over the heap
 * (in block order, no synchronised scan) groups the rows by label as they
 * come (groups.c: each group's count and float64 sum, its list number in
 * label order at the end) and copies each row's heap TID and vector into a
 * spool in memory.  Then the metapage, the centroids (the means) and the
 * lists go out through src/ivf/page.c's build writer, each list's rows
 * found in the spool by a counting placement (heap order within a list),
 * and the label pages come last.  When the spool would outgrow
 * maintenance_work_mem, its rows and the rest of the scan go to a tuplesort
 * by label then TID instead, read once to write the lists.  No k-means and
 * no sample: the user's labels are the partition.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "commands/progress.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "lattice/groups.h"
#include "lattice/lattice.h"
#include "math/mean.h"
#include "type/cvec.h"

/* build phases, as pg_stat_progress_create_index reports them */
#define CV_LATTICE_PHASE_GROUPING 2
#define CV_LATTICE_PHASE_SORTING 3
#define CV_LATTICE_PHASE_WRITING 4

/* A spooled row: its heap TID, then its vector as a cvec value (header and floats). */
#define SPOOL_VECTOR_OFFSET MAXALIGN(sizeof(ItemPointerData))
#define SPOOL_CHUNK_BYTES (8 * 1024 * 1024)
#define PROGRESS_EVERY 1024

typedef struct Spool
{
	Size		row_size;
	int64		rows;
	int64		max_rows;		/* what maintenance_work_mem holds */
	int64		rows_per_chunk;
	char	  **chunks;
	int64		chunk_count;	/* allocated */
	int64		chunk_capacity;
	int32	   *groups;			/* each row's group */
	int64		groups_capacity;
} Spool;

typedef struct LatticeBuild
{
	Relation	index;
	CvMetric metric;
	int			vector_column;	/* 0 or 1; the label is the other */
	int			dimensions;		/* 0 until the first vector, unless declared */
	CvLatticeLabelType type;
	MemoryContext build_context;
	MemoryContext tuple_context;
	CvLatticeGroups *groups;	/* NULL until the first indexed row */
	Spool		spool;
	Tuplesortstate *sort;		/* NULL while the rows fit the spool */
	Relation	toast;			/* the heap's TOAST table, or NULL */
	TupleTableSlot *slot;
	TupleTableSlot *sorted_slot;
	double		heap_tuples;
	int64		rows;
	/* after the scan */
	int			lists;
	int		   *group_of_list;
	const float *centroids;		/* the means, while the lists are written */
	CvIvfDistanceSums *baseline;	/* cvivf_health's build-time distances */
} LatticeBuild;

/* The metric of a vector operator class's support function, or 0 for another. */
static int
metric_of_support(Relation index, int attno)
{
	FmgrInfo   *support = index_getprocinfo(index, attno, 1);

	if (support->fn_addr == cvec_l2_distance)
		return CV_METRIC_L2;
	if (support->fn_addr == cvec_negative_inner_product)
		return CV_METRIC_INNER_PRODUCT;
	if (support->fn_addr == cvec_cosine_distance)
		return CV_METRIC_COSINE;
	return 0;
}

/*
 * Which key column (0 or 1) holds the vectors: the one with a vector
 * operator class.  Either order works; (label, vector) lets PostgreSQL 15's
 * planner use "label = ANY(...)" as an index condition of an ordered scan,
 * which it only does on the first column.
 */
int
cvlattice_vector_column(Relation index)
{
	if (metric_of_support(index, 1) != 0)
		return 0;
	if (metric_of_support(index, 2) != 0)
		return 1;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cvlattice index \"%s\" has no cvec key column",
					RelationGetRelationName(index)),
			 errhint("Create it as USING cvlattice (embedding cvec_l2_ops, cluster_label), with cvec_l2_ops, cvec_ip_ops or cvec_cosine_ops.")));
	return 0;					/* keep the compiler quiet */
}

static CvMetric
lattice_metric(Relation index)
{
	return metric_of_support(index, cvlattice_vector_column(index) + 1);
}

/* The dimensions the vector column's type modifier promises, or 0. */
static int
declared_dimensions(Relation index)
{
	int32		typmod = TupleDescAttr(RelationGetDescr(index),
									   cvlattice_vector_column(index))->atttypmod;

	return typmod > 0 ? typmod : 0;
}

static void
check_dimensions_limit(Relation index, int dimensions)
{
	if (dimensions > CV_LATTICE_MAX_DIMENSIONS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvlattice index \"%s\" cannot hold vectors of %d dimensions",
						RelationGetRelationName(index), dimensions),
				 errdetail("A cvlattice centroid must fit one page: at most %d dimensions.",
						   CV_LATTICE_MAX_DIMENSIONS),
				 errhint("Use a cvivf index for wider vectors.")));
}

/* Two key columns, a vector and a label whose type has a btree order: else a clear error. */
static void
cvlattice_check_index(Relation index)
{
	CvLatticeLabelType type;

	if (IndexRelationGetNumberOfKeyAttributes(index) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cvlattice index \"%s\" needs exactly two key columns, not %d",
						RelationGetRelationName(index),
						IndexRelationGetNumberOfKeyAttributes(index)),
				 errdetail("One column holds the vectors; the distinct values of the other are its lists."),
				 errhint("Create it as USING cvlattice (embedding cvec_l2_ops, cluster_label).")));
	lattice_metric(index);
	cvlattice_label_type(index, &type);
	check_dimensions_limit(index, declared_dimensions(index));
}

/* The first vector fixes the dimensions; every other must match. */
static void
check_build_dimensions(LatticeBuild *state, const CVec *v)
{
	if (state->dimensions == 0)
	{
		check_dimensions_limit(state->index, v->dim);
		state->dimensions = v->dim;
	}
	else if (v->dim != state->dimensions)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %d and %d in column indexed by \"%s\"",
						state->dimensions, v->dim, RelationGetRelationName(state->index)),
				 errhint("Declare the column as cvec(n) so every row has n dimensions.")));
}

/* Names of the build's sub-phases for pg_stat_progress_create_index. */
char *
cvlatticebuildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case CV_LATTICE_PHASE_GROUPING:
			return "grouping rows by label";
		case CV_LATTICE_PHASE_SORTING:
			return "sorting rows";
		case CV_LATTICE_PHASE_WRITING:
			return "writing lists";
	}
	return NULL;
}

/* The spool's bytes per row: the row, its group and its place in the write order. */
static Size
spool_bytes_per_row(const Spool *spool)
{
	return spool->row_size + sizeof(int32) + sizeof(uint32);
}

/* An empty spool for vectors of dims dimensions, as large as maintenance_work_mem allows. */
static void
spool_init(Spool *spool, int dims)
{
	memset(spool, 0, sizeof(*spool));
	spool->row_size = MAXALIGN(SPOOL_VECTOR_OFFSET + CVEC_SIZE(dims));
	spool->max_rows = Min((int64) PG_UINT32_MAX,
						  (int64) maintenance_work_mem * 1024 / spool_bytes_per_row(spool));
	spool->rows_per_chunk = Max(1, Min(spool->max_rows,
									   (int64) (SPOOL_CHUNK_BYTES / spool->row_size)));
}

/* Where spooled row number row lives. */
static char *
spool_row(const Spool *spool, int64 row)
{
	return spool->chunks[row / spool->rows_per_chunk] +
		(row % spool->rows_per_chunk) * spool->row_size;
}

/* A spooled row's vector, a cvec value after its TID. */
static CVec *
spool_vector(char *row)
{
	return (CVec *) (row + SPOOL_VECTOR_OFFSET);
}

/*
 * Room for the next row (spool_row(spool, spool->rows)), in context; false
 * when maintenance_work_mem is reached.  Asking again before the row is
 * added changes nothing.
 */
static bool
spool_reserve(Spool *spool, MemoryContext context)
{
	int64		chunk = spool->rows / spool->rows_per_chunk;

	if (spool->rows >= spool->max_rows)
		return false;
	if (spool->rows == spool->groups_capacity)
	{
		spool->groups_capacity = Min(spool->max_rows, Max(1024, spool->groups_capacity * 2));
		spool->groups = spool->groups == NULL ?
			MemoryContextAllocHuge(context, sizeof(int32) * spool->groups_capacity) :
			repalloc_huge(spool->groups, sizeof(int32) * spool->groups_capacity);
	}
	if (chunk < spool->chunk_count)
		return true;
	if (chunk == spool->chunk_capacity)
	{
		spool->chunk_capacity = Max(16, spool->chunk_capacity * 2);
		spool->chunks = spool->chunks == NULL ?
			MemoryContextAlloc(context, sizeof(char *) * spool->chunk_capacity) :
			repalloc(spool->chunks, sizeof(char *) * spool->chunk_capacity);
	}
	spool->chunks[spool->chunk_count++] =
		MemoryContextAllocHuge(context, spool->row_size * spool->rows_per_chunk);
	return true;
}

/*
 * Adds a row to the spool, copying its vector unless read_vector already
 * put it in place; false when the spool is full.
 */
static bool
spool_put(LatticeBuild *state, ItemPointer tid, int group, const CVec *v, bool in_place)
{
	Spool	   *spool = &state->spool;
	char	   *row;

	if (!in_place && !spool_reserve(spool, state->build_context))
		return false;
	row = spool_row(spool, spool->rows);
	memcpy(row, tid, sizeof(ItemPointerData));
	if (!in_place)
		memcpy(spool_vector(row), v, CVEC_SIZE(state->dimensions));
	spool->groups[spool->rows++] = group;
	return true;
}

/* Frees the spool's memory; it is empty after. */
static void
spool_free(Spool *spool)
{
	for (int64 chunk = 0; chunk < spool->chunk_count; chunk++)
		if (spool->chunks[chunk] != NULL)
			pfree(spool->chunks[chunk]);
	if (spool->chunks != NULL)
		pfree(spool->chunks);
	if (spool->groups != NULL)
		pfree(spool->groups);
	spool->chunks = NULL;
	spool->groups = NULL;
	spool->rows = 0;
	spool->chunk_count = 0;
}

/* A sort of (label, tid, vector) by label (NULL last), then heap order. */
static void
begin_sort(LatticeBuild *state)
{
	TupleDesc	desc = CreateTemplateTupleDesc(3);
	TypeCacheEntry *label = lookup_type_cache(state->type.type, TYPECACHE_LT_OPR);
	AttrNumber	columns[2] = {1, 2};
	Oid			operators[2] = {label->lt_opr, TIDLessOperator};
	Oid			collations[2] = {state->type.collation, InvalidOid};
	bool		nulls_first[2] = {false, false};

	TupleDescInitEntry(desc, 1, "label", state->type.type, -1, 0);
	TupleDescInitEntry(desc, 2, "tid", TIDOID, -1, 0);
	TupleDescInitEntry(desc, 3, "vector",
					   TupleDescAttr(RelationGetDescr(state->index), state->vector_column)->atttypid,
					   -1, 0);
	state->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	state->sorted_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	state->sort = tuplesort_begin_heap(desc, 2, columns, operators, collations, nulls_first,
									   maintenance_work_mem, NULL, TUPLESORT_NONE);
}

/* Hands one row to the sort; the label is its group's. */
static void
sort_put(LatticeBuild *state, int group, ItemPointer tid, const CVec *v)
{
	CvLatticeGroup *g = cvlattice_groups_get(state->groups, group);
	TupleTableSlot *slot = state->slot;

	ExecClearTuple(slot);
	slot->tts_values[0] = g->datum;
	slot->tts_isnull[0] = g->label == NULL;
	slot->tts_values[1] = PointerGetDatum(tid);
	slot->tts_values[2] = PointerGetDatum(v);
	slot->tts_isnull[1] = slot->tts_isnull[2] = false;
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(state->sort, slot);
}

/* The spool is full: its rows, and from now on every row, go to a tuplesort. */
static void
spill_to_sort(LatticeBuild *state)
{
	Spool	   *spool = &state->spool;
	MemoryContext old = MemoryContextSwitchTo(state->build_context);

	elog(DEBUG1, "cvlattice build of \"%s\": rows beyond the %lld that fit maintenance_work_mem, sorting instead",
		 RelationGetRelationName(state->index), (long long) spool->rows);
	begin_sort(state);
	MemoryContextSwitchTo(old);
	for (int64 i = 0; i < spool->rows; i++)
	{
		char	   *row = spool_row(spool, i);
		int64		chunk = i / spool->rows_per_chunk;

		sort_put(state, spool->groups[i], (ItemPointer) row, spool_vector(row));
		/* a chunk goes as soon as the sort has its rows: memory stays near one budget */
		if ((i + 1) % spool->rows_per_chunk == 0 || i + 1 == spool->rows)
		{
			pfree(spool->chunks[chunk]);
			spool->chunks[chunk] = NULL;
		}
		CHECK_FOR_INTERRUPTS();
	}
	spool_free(spool);
}

/* Groups, counts and sums a row to index, and keeps it in the spool or the sort. */
static void
add_row(LatticeBuild *state, ItemPointer tid, Datum label, bool label_null, const CVec *v,
		bool in_spool)
{
	int			group;

	if (state->groups == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(state->build_context);

		state->groups = cvlattice_groups_create(state->index, &state->type, state->dimensions,
												state->metric == CV_METRIC_COSINE);
		spool_init(&state->spool, state->dimensions);
		MemoryContextSwitchTo(old);
	}
	group = cvlattice_groups_find(state->groups, label, label_null);
	cvlattice_groups_add(state->groups, group, tid, v->x);
	if (state->sort == NULL && !spool_put(state, tid, group, v, in_spool))
		spill_to_sort(state);
	if (state->sort != NULL)
		sort_put(state, group, tid, v);
	if ((++state->rows % PROGRESS_EVERY) == 0)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, state->rows);
}

/*
 * A row's vector.  One stored out of line and uncompressed (cvec's storage
 * is external), of the build's dimensions, is read from its TOAST chunks
 * straight into the spool's next row (*in_spool), not detoasted into a
 * copy first; any other is detoasted.
 */
static CVec *
read_vector(LatticeBuild *state, Datum value, bool *in_spool)
{
	struct varlena *stored = (struct varlena *) DatumGetPointer(value);
	struct varatt_external pointer;
	int32		size;
	CVec	   *v;

	*in_spool = false;
	if (state->toast == NULL || state->groups == NULL || state->sort != NULL ||
		!VARATT_IS_EXTERNAL_ONDISK(stored))
		return DatumGetCVec(value);
	VARATT_EXTERNAL_GET_POINTER(pointer, stored);
	size = VARATT_EXTERNAL_GET_EXTSIZE(pointer);
	if (VARATT_EXTERNAL_IS_COMPRESSED(pointer) ||
		pointer.va_toastrelid != RelationGetRelid(state->toast) ||
		(Size) size + VARHDRSZ != CVEC_SIZE(state->dimensions) ||
		!spool_reserve(&state->spool, state->build_context))
		return DatumGetCVec(value);
	v = spool_vector(spool_row(&state->spool, state->spool.rows));
	SET_VARSIZE(v, size + VARHDRSZ);
	table_relation_fetch_toast_slice(state->toast, pointer.va_valueid, size, 0, size,
									 (struct varlena *) v);
	*in_spool = true;
	return v;
}

/* Rows with a vector (a nonzero one under cosine) are indexed. */
static void
build_callback(Relation index pg_attribute_unused(), ItemPointer tid, Datum *values,
			   bool *isnull, bool alive pg_attribute_unused(), void *arg)
{
	LatticeBuild *state = (LatticeBuild *) arg;
	MemoryContext old = MemoryContextSwitchTo(state->tuple_context);
	int			vc = state->vector_column;

	if (!isnull[vc])
	{
		bool		in_spool;
		CVec	   *v = read_vector(state, values[vc], &in_spool);

		check_build_dimensions(state, v);
		if (cvivf_vector_is_indexable(state->metric, v->x, v->dim))
			add_row(state, tid, values[1 - vc], isnull[1 - vc], v, in_spool);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->tuple_context);
}

/*
 * The scan, in block order (no synchronised scan, which could start
 * mid-table), so each group's rows arrive in heap order except where a HOT
 * chain's root TID stands for a later tuple of its page.
 */
static void
scan_heap(LatticeBuild *state, Relation heap, IndexInfo *info)
{
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CV_LATTICE_PHASE_GROUPING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL,
								 (int64) Max(cvivf_estimate_heap_rows(heap), 0));
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
	state->heap_tuples = table_index_build_scan(heap, state->index, info, false, true,
												build_callback, state, NULL);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, state->rows);
}
/* The metapage of a cvlattice index with lists lists laid out as cvivf lays them out. */
static void
init_lattice_meta(CvIvfMetaPageData *meta, CvMetric metric, int dims, int lists)
{
	cvivf_init_meta(meta, metric, dims, lists, true);
	meta->kind = CV_INDEX_KIND_LATTICE;
	meta->directory_entry_size = sizeof(CvLatticeListEntry);
	meta->entries_per_directory_page = CV_LATTICE_ENTRIES_PER_PAGE;
	meta->directory_pages = (lists + CV_LATTICE_ENTRIES_PER_PAGE - 1) / CV_LATTICE_ENTRIES_PER_PAGE;
	for (uint32 i = 0; i < meta->directory_pages; i++)
		meta->directory_blocks[i] = meta->first_directory_block + i;
	meta->last_centroid_block = lists > 0 ? meta->first_directory_block - 1 : InvalidBlockNumber;
	meta->last_label_block = InvalidBlockNumber;
}

/* Each list's centroid place in the build's contiguous centroid pages. */
static void
place_centroids(CvIvfBuildWriter *writer, const CvIvfMetaPageData *meta)
{
	for (uint32 list = 0; list < meta->lists; list++)
	{
		CvLatticeListEntry *entry = (CvLatticeListEntry *) cvivf_writer_entry(writer, list);

		entry->centroid_block = meta->first_centroid_block + list / meta->centroids_per_page;
		entry->centroid_offset = CVIVF_PAGE_DATA_START +
			(list % meta->centroids_per_page) * sizeof(float) * meta->dimensions;
		entry->label_block = InvalidBlockNumber;
	}
}


/* The means, as float4 centroids and their norms, in list order. */
static void
finish_means(LatticeBuild *state, float **centroids, double **norms)
{
	Size		dim = state->dimensions;

	*centroids = palloc_extended(sizeof(float) * dim * Max(state->lists, 1), MCXT_ALLOC_HUGE);
	*norms = palloc(sizeof(double) * Max(state->lists, 1));
	for (int list = 0; list < state->lists; list++)
	{
		int			group = state->group_of_list[list];

		(*norms)[list] = cv_mean_finish(cvlattice_groups_sum(state->groups, group),
										cvlattice_groups_get(state->groups, group)->members,
										dim, *centroids + list * dim);
	}
}

/* How many rows a list gets. */
static uint64
list_members(LatticeBuild *state, int list)
{
	return cvlattice_groups_get(state->groups, state->group_of_list[list])->members;
}

/* Orders two spooled rows (given by their numbers) by heap TID. */
static int
compare_spooled_tids(const void *a, const void *b, void *arg)
{
	const Spool *spool = (const Spool *) arg;

	return ItemPointerCompare((ItemPointer) spool_row(spool, *(const uint32 *) a),
							  (ItemPointer) spool_row(spool, *(const uint32 *) b));
}

/*
 * The spooled rows' numbers in write order: list after list (a counting
 * placement by each row's list), heap order within a list.  *starts gets
 * where each list begins, lists + 1 entries.
 */
static uint32 *
place_spooled_rows(LatticeBuild *state, int64 **starts)
{
	Spool	   *spool = &state->spool;
	uint32	   *order = MemoryContextAllocHuge(CurrentMemoryContext,
											   sizeof(uint32) * Max(spool->rows, 1));
	int64	   *next = palloc(sizeof(int64) * (state->lists + 1));

	*starts = palloc(sizeof(int64) * (state->lists + 1));
	(*starts)[0] = 0;
	for (int list = 0; list < state->lists; list++)
		(*starts)[list + 1] = (*starts)[list] + list_members(state, list);
	memcpy(next, *starts, sizeof(int64) * (state->lists + 1));
	for (int64 i = 0; i < spool->rows; i++)
		order[next[cvlattice_groups_get(state->groups, spool->groups[i])->list]++] = (uint32) i;
	for (int list = 0; list < state->lists; list++)
		if (cvlattice_groups_get(state->groups, state->group_of_list[list])->out_of_order)
			qsort_arg(order + (*starts)[list], (*starts)[list + 1] - (*starts)[list],
					  sizeof(uint32), compare_spooled_tids, spool);
	pfree(next);
	return order;
}

/* Writes one row of a list, summing its distance to the list's mean for the baseline. */
static void
write_row(LatticeBuild *state, CvIvfBuildWriter *writer, int list, ItemPointer tid,
		  const float *vector)
{
	cvivf_writer_add(writer, tid, vector);
	cvivf_distance_sums_add(state->baseline, state->metric, list, vector,
							state->centroids + (Size) list * state->dimensions,
							state->dimensions);
}

/* Counts a written row for the progress view, and lets a cancel in. */
static void
count_written(int64 written)
{
	if (written % PROGRESS_EVERY == 0)
	{
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, written);
		CHECK_FOR_INTERRUPTS();
	}
}

/* The lists from the spool, list after list onto pages. */
static void
write_spooled_lists(LatticeBuild *state, CvIvfBuildWriter *writer)
{
	int64	   *starts;
	uint32	   *order = place_spooled_rows(state, &starts);
	int64		written = 0;

	for (int list = 0; list < state->lists; list++)
	{
		cvivf_writer_start_list(writer, list);
		for (int64 i = starts[list]; i < starts[list + 1]; i++)
		{
			char	   *row = spool_row(&state->spool, order[i]);

			write_row(state, writer, list, (ItemPointer) row, spool_vector(row)->x);
			count_written(++written);
		}
	}
	pfree(order);
	pfree(starts);
	spool_free(&state->spool);
}

/* The lists from the sort, which returns them in list order. */
static void
write_sorted_lists(LatticeBuild *state, CvIvfBuildWriter *writer)
{
	int64		written = 0;
	bool		isnull;

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CV_LATTICE_PHASE_SORTING);
	tuplesort_performsort(state->sort);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CV_LATTICE_PHASE_WRITING);
	for (int list = 0; list < state->lists; list++)
	{
		cvivf_writer_start_list(writer, list);
		for (uint64 i = 0; i < list_members(state, list); i++)
		{
			CVec	   *v;

			if (!tuplesort_gettupleslot(state->sort, true, false, state->sorted_slot, NULL))
				elog(ERROR, "cvlattice build lost rows in its sort");
			v = DatumGetCVec(slot_getattr(state->sorted_slot, 3, &isnull));
			write_row(state, writer, list,
					  (ItemPointer) DatumGetPointer(slot_getattr(state->sorted_slot, 2, &isnull)),
					  v->x);
			count_written(++written);
		}
	}
	tuplesort_end(state->sort);
}

/* Each list's label, in list order (NULL: the NULL label), for the label pages. */
static const bytea *const *
list_labels(LatticeBuild *state)
{
	const bytea **labels = palloc(sizeof(bytea *) * Max(state->lists, 1));

	for (int list = 0; list < state->lists; list++)
		labels[list] = cvlattice_groups_get(state->groups, state->group_of_list[list])->label;
	return labels;
}

/* Writes the whole index: metapage, centroids, directory, lists, labels. */
static void
write_index(LatticeBuild *state, ForkNumber fork)
{
	CvIvfMetaPageData meta;
	CvIvfBuildWriter *writer;
	float	   *centroids;
	double	   *norms;

	init_lattice_meta(&meta, state->metric, state->dimensions, state->lists);
	writer = cvivf_writer_begin(state->index, fork, &meta);
	place_centroids(writer, &meta);
	finish_means(state, &centroids, &norms);
	cvivf_writer_centroids(writer, centroids, norms);
	state->centroids = centroids;
	state->baseline = cvivf_distance_sums_new(Max(state->lists, 1));
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CV_LATTICE_PHASE_WRITING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, state->rows);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, 0);
	if (state->sort != NULL)
		write_sorted_lists(state, writer);
	else if (state->groups != NULL)
		write_spooled_lists(state, writer);
	cvlattice_write_label_pages(writer, list_labels(state), state->lists);
	cvivf_writer_finish(writer);
	cvivf_record_baseline(state->index, state->baseline);
}

/* The lists, numbered in label order, once the scan has made the groups. */
static void
number_lists(LatticeBuild *state)
{
	if (state->groups != NULL)
		state->lists = cvlattice_groups_number(state->groups, &state->group_of_list);
}

IndexBuildResult *
cvlatticebuild(Relation heap, Relation index, IndexInfo *info)
{
	IndexBuildResult *result = palloc0(sizeof(IndexBuildResult));
	LatticeBuild state = {0};

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data", RelationGetRelationName(index));
	cvlattice_check_index(index);
	state.index = index;
	state.vector_column = cvlattice_vector_column(index);
	state.metric = lattice_metric(index);
	state.dimensions = declared_dimensions(index);
	cvlattice_label_type(index, &state.type);
	state.build_context = CurrentMemoryContext;
	state.tuple_context = AllocSetContextCreate(CurrentMemoryContext, "cvlattice build tuple",
												ALLOCSET_DEFAULT_SIZES);
	if (OidIsValid(heap->rd_rel->reltoastrelid))
		state.toast = table_open(heap->rd_rel->reltoastrelid, AccessShareLock);
	scan_heap(&state, heap, info);
	if (state.toast != NULL)
		table_close(state.toast, AccessShareLock);
	number_lists(&state);
	write_index(&state, MAIN_FORKNUM);
	/* PostgreSQL stores heap_tuples as the table's reltuples: every row */
	result->heap_tuples = state.heap_tuples;
	result->index_tuples = state.rows;
	return result;
}

/* The init fork of an unlogged index: no lists, logged. */
void
cvlatticebuildempty(Relation index)
{
	LatticeBuild state = {0};

	cvlattice_check_index(index);
	state.index = index;
	state.vector_column = cvlattice_vector_column(index);
	state.metric = lattice_metric(index);
	state.dimensions = declared_dimensions(index);
	write_index(&state, INIT_FORKNUM);
}
