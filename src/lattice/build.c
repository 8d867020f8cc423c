/*
 * build.c: ambuild and ambuildempty of cvlattice.  One pass over the heap
 * feeds (label, tid, vector) to a tuplesort by label (the type's btree
 * order, NULL last) then heap order; a first read of the sorted rows groups
 * them by label (one list each, numbered in label order) and sums each
 * group in float64; a second read writes the lists, after the metapage and
 * the centroids (the means), through src/ivf/page.c's build writer; the
 * label pages come last.  No k-means and no sample: the user's labels are
 * the partition.
 */
#include "postgres.h"

#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type_d.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "lattice/lattice.h"
#include "math/mean.h"
#include "type/cvec.h"

typedef struct LatticeBuild
{
	Relation	index;
	CvMetric metric;
	int			vector_column;	/* 0 or 1; the label is the other */
	int			dimensions;		/* 0 until the first vector, unless declared */
	CvLatticeLabelType type;
	MemoryContext tuple_context;
	Tuplesortstate *sort;
	TupleTableSlot *slot;
	TupleTableSlot *sorted_slot;
	double		heap_tuples;
	int64		rows;
	/* the groups, one per list */
	int			lists;
	int			capacity;
	bytea	  **labels;			/* NULL: the NULL label */
	Datum		current;		/* the last group's label */
	double	   *sums;			/* lists x dimensions */
	uint64	   *members;
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

/* Rows with a vector (a nonzero one under cosine) go to the sort. */
static void
sort_callback(Relation index pg_attribute_unused(), ItemPointer tid, Datum *values,
			  bool *isnull, bool alive pg_attribute_unused(), void *arg)
{
	LatticeBuild *state = (LatticeBuild *) arg;
	MemoryContext old = MemoryContextSwitchTo(state->tuple_context);
	TupleTableSlot *slot = state->slot;
	int			vc = state->vector_column;
	CVec	   *v;

	if (!isnull[vc])
	{
		v = DatumGetCVec(values[vc]);
		check_build_dimensions(state, v);
		if (cvivf_vector_is_indexable(state->metric, v->x, v->dim))
		{
			ExecClearTuple(slot);
			slot->tts_values[0] = values[1 - vc];
			slot->tts_isnull[0] = isnull[1 - vc];
			slot->tts_values[1] = PointerGetDatum(tid);
			slot->tts_values[2] = PointerGetDatum(v);
			slot->tts_isnull[1] = slot->tts_isnull[2] = false;
			ExecStoreVirtualTuple(slot);
			tuplesort_puttupleslot(state->sort, slot);
			state->rows++;
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->tuple_context);
}

/* A sort of (label, tid, vector) by label (NULL last), then heap order; read twice. */
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
									   maintenance_work_mem, NULL, TUPLESORT_RANDOMACCESS);
}

/* Opens the next group (list) for a label. */
static void
start_group(LatticeBuild *state, Datum label, bool isnull)
{
	if (state->lists == CVIVF_MAX_LISTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvlattice index \"%s\" would have more than %d labels",
						RelationGetRelationName(state->index), CVIVF_MAX_LISTS),
				 errhint("Use fewer distinct labels, or a cvivf index.")));
	if (state->lists == state->capacity)
	{
		state->capacity = Max(64, state->capacity * 2);
		state->labels = repalloc_huge(state->labels, sizeof(bytea *) * state->capacity);
		state->members = repalloc_huge(state->members, sizeof(uint64) * state->capacity);
		state->sums = repalloc_huge(state->sums,
									sizeof(double) * state->dimensions * state->capacity);
	}
	state->labels[state->lists] = isnull ? NULL : cvlattice_label_bytes(&state->type, label);
	if (!isnull)
		state->current = cvlattice_label_datum(&state->type, VARDATA(state->labels[state->lists]),
											   VARSIZE(state->labels[state->lists]) - VARHDRSZ);
	state->members[state->lists] = 0;
	memset(state->sums + (Size) state->lists * state->dimensions, 0,
		   sizeof(double) * state->dimensions);
	state->lists++;
}

/* Whether a sorted row's label differs from the current group's. */
static bool
new_label(LatticeBuild *state, Datum label, bool isnull)
{
	const bytea *current;

	if (state->lists == 0)
		return true;
	current = state->labels[state->lists - 1];
	if (isnull || current == NULL)
		return isnull != (current == NULL);
	return cvlattice_compare(&state->type, label, state->current) != 0;
}

/* First read of the sorted rows: the groups, their sizes and float64 sums. */
static void
group_rows(LatticeBuild *state)
{
	bool		directions = state->metric == CV_METRIC_COSINE;
	bool		isnull;

	state->labels = palloc(sizeof(bytea *));
	state->members = palloc(sizeof(uint64));
	state->sums = palloc(sizeof(double));
	while (tuplesort_gettupleslot(state->sort, true, false, state->sorted_slot, NULL))
	{
		Datum		label = slot_getattr(state->sorted_slot, 1, &isnull);
		MemoryContext old;
		CVec	   *v;

		if (new_label(state, label, isnull))
			start_group(state, label, isnull);
		old = MemoryContextSwitchTo(state->tuple_context);
		v = DatumGetCVec(slot_getattr(state->sorted_slot, 3, &isnull));
		cv_mean_add(state->sums + (Size) (state->lists - 1) * state->dimensions, v->x,
					state->dimensions, directions);
		MemoryContextSwitchTo(old);
		MemoryContextReset(state->tuple_context);
		state->members[state->lists - 1]++;
		CHECK_FOR_INTERRUPTS();
	}
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

/* The means, as float4 centroids and their norms. */
static void
finish_means(LatticeBuild *state, float **centroids, double **norms)
{
	Size		dim = state->dimensions;

	*centroids = palloc_extended(sizeof(float) * dim * Max(state->lists, 1), MCXT_ALLOC_HUGE);
	*norms = palloc(sizeof(double) * Max(state->lists, 1));
	for (int list = 0; list < state->lists; list++)
		(*norms)[list] = cv_mean_finish(state->sums + list * dim, state->members[list], dim,
										*centroids + list * dim);
}

/* Second read of the sorted rows: list after list onto pages. */
static void
write_lists(LatticeBuild *state, CvIvfBuildWriter *writer)
{
	bool		isnull;

	tuplesort_rescan(state->sort);
	for (int list = 0; list < state->lists; list++)
	{
		cvivf_writer_start_list(writer, list);
		for (uint64 i = 0; i < state->members[list]; i++)
		{
			MemoryContext old;
			CVec	   *v;

			if (!tuplesort_gettupleslot(state->sort, true, false, state->sorted_slot, NULL))
				elog(ERROR, "cvlattice build lost rows between its two reads");
			old = MemoryContextSwitchTo(state->tuple_context);
			v = DatumGetCVec(slot_getattr(state->sorted_slot, 3, &isnull));
			cvivf_writer_add(writer, (ItemPointer) DatumGetPointer(
								 slot_getattr(state->sorted_slot, 2, &isnull)), v->x);
			MemoryContextSwitchTo(old);
			MemoryContextReset(state->tuple_context);
			CHECK_FOR_INTERRUPTS();
		}
	}
	tuplesort_end(state->sort);
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
	if (state->sort != NULL)
		write_lists(state, writer);
	cvlattice_write_label_pages(writer, (const bytea *const *) state->labels, state->lists);
	cvivf_writer_finish(writer);
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
	state.tuple_context = AllocSetContextCreate(CurrentMemoryContext, "cvlattice build tuple",
												ALLOCSET_DEFAULT_SIZES);
	begin_sort(&state);
	state.heap_tuples = table_index_build_scan(heap, index, info, true, true,
											   sort_callback, &state, NULL);
	tuplesort_performsort(state.sort);
	group_rows(&state);
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
