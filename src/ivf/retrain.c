/*
 * retrain.c: cvivf_retrain(index), new centroids and lists in place (ivf.h,
 * "Retraining").  The index's own rows are its input: no table access.
 *
 * 1. Under ShareUpdateExclusiveLock on the table and the index (VACUUM,
 *    REINDEX and another retrain wait; scans and inserts go on): the
 *    build's reservoir sample of the live rows, k-means with the build's
 *    seed and settings (on the GPU when the worker serves), every live row
 *    through the build's assignment and sort, and the new generation
 *    written by the relocated writer into blocks past the fork's end; then
 *    one pass copies the rows inserted meanwhile.
 * 2. Under ShareLock on the index (inserts wait, scans go on): the lists
 *    that changed since are copied too, the metapage switches in one
 *    record, and the lock goes at once.
 * 3. The old generation's pages are freed when every transaction that held
 *    the index at the switch has ended, if that happens within
 *    RECLAIM_WAIT_MS; else the first VACUUM whose snapshots are all newer
 *    frees them.
 *
 * A row is copied once: each pass remembers, per old list, the count of
 * live tuples its directory entry showed before the list was walked.
 * Nothing flags a tuple dead while VACUUM waits, so the count only grows,
 * and a list whose count has not moved has no row the walk missed; in a
 * list that moved, rows already copied are known by their heap TIDs.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "commands/progress.h"
#include "commands/tablecmds.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "access.h"
#include "citus.h"
#include "ivf/build.h"
#include "lattice/lattice.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvivf_retrain);

/* How long the retrain waits for old scans before leaving the old pages to VACUUM. */
#define RECLAIM_WAIT_MS 10000

typedef struct Retrain
{
	Relation	index;
	CvIvfMetaPageData old;		/* the generation being replaced */
	CvIvfBuildState build;
	CVec	   *row;			/* one row as a datum for the build's callbacks */
	uint64	   *seen;			/* per old list, its count when last walked */
	/* rows copied: sorted after pass 2, and those the catch-up passes added */
	ItemPointerData *copied;
	int64		copied_count;
	int64		copied_capacity;
	HTAB	   *added;
	/* the catch-up passes */
	CvIvfBuildWriter *writer;
	CvIvfMetaPageData *pending;
	float	   *centroids;
	int			lists;
	int64		caught_up;
} Retrain;

typedef void (*RowSink) (Retrain *r, ItemPointer tid, const float *vector);

typedef struct ListWalk
{
	Retrain    *r;
	RowSink		sink;
} ListWalk;

static void
visit_row(const CvIvfTupleHeader *header, const float *vector,
		  BlockNumber block pg_attribute_unused(), Size offset pg_attribute_unused(), void *arg)
{
	ListWalk   *walk = (ListWalk *) arg;

	walk->sink(walk->r, (ItemPointer) &header->heap_tid, vector);
}

/* Walks one old list's live rows into sink, noting the count it started from. */
static void
walk_list(Retrain *r, int list, RowSink sink)
{
	CvIvfListEntry entry;
	ListWalk	walk = {r, sink};

	cvivf_read_list_entry(r->index, &r->old, list, &entry);
	r->seen[list] = entry.tuples;
	if (BlockNumberIsValid(entry.first_block))
		cvivf_scan_list(r->index, &r->old, entry.first_block, false, NULL, visit_row, &walk);
	CHECK_FOR_INTERRUPTS();
}

static void
walk_all_lists(Retrain *r, RowSink sink)
{
	for (uint32 list = 0; list < r->old.lists; list++)
		walk_list(r, list, sink);
}

static Datum
row_datum(Retrain *r, const float *vector)
{
	memcpy(r->row->x, vector, sizeof(float) * r->old.dimensions);
	return PointerGetDatum(r->row);
}

/* Pass 1's sink: the build's reservoir. */
static void
sample_row(Retrain *r, ItemPointer tid, const float *vector)
{
	Datum		value = row_datum(r, vector);
	bool		isnull = false;

	cvivf_build_sample_callback(r->index, tid, &value, &isnull, true, &r->build);
}

/* Pass 2's sink: the build's assignment and sort, and the TID remembered. */
static void
assign_row(Retrain *r, ItemPointer tid, const float *vector)
{
	Datum		value = row_datum(r, vector);
	bool		isnull = false;

	if (r->copied_count == r->copied_capacity)
	{
		r->copied_capacity *= 2;
		r->copied = repalloc_huge(r->copied, sizeof(ItemPointerData) * r->copied_capacity);
	}
	r->copied[r->copied_count++] = *tid;
	cvivf_build_assign_callback(r->index, tid, &value, &isnull, true, &r->build);
}

static int
compare_tids(const void *a, const void *b)
{
	return ItemPointerCompare((ItemPointer) a, (ItemPointer) b);
}

/* Whether a row is in the new generation already; if not, it will be now. */
static bool
copied_before(Retrain *r, ItemPointer tid)
{
	bool		found;

	if (bsearch(tid, r->copied, r->copied_count, sizeof(ItemPointerData), compare_tids))
		return true;
	hash_search(r->added, tid, HASH_ENTER, &found);
	return found;
}

/* The new list of a row inserted meanwhile: as an insert chooses it. */
static int
nearest_new_list(Retrain *r, const float *vector)
{
	int			best = 0;
	double		best_distance = 0;

	for (int list = 0; list < r->lists; list++)
	{
		double		d = cvivf_centroid_distance(r->old.metric, vector,
												r->centroids + (Size) list * r->old.dimensions,
												r->old.dimensions);

		if (list == 0 || d < best_distance)
		{
			best = list;
			best_distance = d;
		}
	}
	return best;
}

/* The catch-up passes' sink: a row not copied yet is appended to the new generation. */
static void
catch_up_row(Retrain *r, ItemPointer tid, const float *vector)
{
	if (!cvivf_vector_is_indexable(r->old.metric, vector, r->old.dimensions) ||
		copied_before(r, tid))
		return;
	cvivf_append_tuple(r->index, r->pending, nearest_new_list(r, vector), tid, vector);
	r->caught_up++;
}

/* Copies the rows of every old list whose count moved since it was walked. */
static void
catch_up(Retrain *r)
{
	for (uint32 list = 0; list < r->old.lists; list++)
	{
		CvIvfListEntry entry;

		cvivf_read_list_entry(r->index, &r->old, list, &entry);
		if (entry.tuples != r->seen[list])
			walk_list(r, list, catch_up_row);
	}
}

/* The live rows the old directory counts: pass 1's estimate. */
static double
live_rows(Retrain *r)
{
	double		rows = 0;

	for (uint32 list = 0; list < r->old.lists; list++)
	{
		CvIvfListEntry entry;

		cvivf_read_list_entry(r->index, &r->old, list, &entry);
		rows += (double) entry.tuples;
	}
	return rows;
}

static void
init_build(Retrain *r, Relation heap)
{
	CvIvfBuildState *b = &r->build;

	b->heap = heap;
	b->index = r->index;
	b->metric = (CvMetric) r->old.metric;
	b->dimensions = (int) r->old.dimensions;
	b->options = cvivf_build_options(r->index);
	b->tuple_context = AllocSetContextCreate(CurrentMemoryContext, "cvivf retrain tuple",
											 ALLOCSET_DEFAULT_SIZES);
	b->use_gpu = cv_gpu_should_use();
	b->report_progress = true;
	b->estimated_rows = live_rows(r);
	b->heap_tuples = b->estimated_rows;
	b->estimated_lists = cvivf_build_choose_lists(b->options, b->estimated_rows);
	cv_prng_seed(&b->prng, (uint64) b->options->seed);
}

/* The new generation's metapage as the build makes one, before its pages are placed. */
static void
init_pending(Retrain *r, CvIvfMetaPageData *meta)
{
	const CvIvfOptions *options = r->build.options;

	cvivf_init_meta(meta, (CvMetric) r->old.metric, (int) r->old.dimensions, r->lists, true);
	/* the reloptions as they are now: ALTER INDEX ... SET takes effect here, as at a REINDEX */
	cvivf_meta_set_quantization(meta, options->quantization);
	meta->iterations = options->iterations;
	meta->seed = (uint64) options->seed;
	meta->sample_rows = r->build.sample_count;
}

/* The drift baseline of the lists just written, on the new generation's pages. */
static void
write_baseline(Retrain *r)
{
	const CvIvfDistanceSums *sums = r->build.baseline;
	CvIvfDriftEntry *entries = palloc0(sizeof(CvIvfDriftEntry) * Max(sums->lists, 1));

	for (uint32 list = 0; list < sums->lists; list++)
	{
		entries[list].build_tuples = sums->counts[list];
		entries[list].build_mean_distance = sums->counts[list] > 0 ?
			sums->sums[list] / (double) sums->counts[list] : get_float8_nan();
	}
	cvivf_writer_drift(r->writer, entries, sums->lists);
	pfree(entries);
}

/* Phase 1: sample, k-means, assignment, the new generation's pages. */
static void
write_new_generation(Retrain *r)
{
	CvIvfBuildState *b = &r->build;
	CvIvfMetaPageData meta;
	double	   *norms;

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CVIVF_PHASE_SAMPLING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, (int64) b->estimated_rows);
	walk_all_lists(r, sample_row);
	cvivf_build_report_capped_sample(b);
	r->lists = cvivf_build_centroids(b, &r->centroids, &norms);
	b->centroids = r->centroids;
	b->lists = r->lists;
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, CVIVF_PHASE_ASSIGNING);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, b->rows);
	cvivf_build_assign_begin(b);
	r->copied_capacity = Max(1024, b->rows + 16);
	r->copied = MemoryContextAllocHuge(CurrentMemoryContext,
									   sizeof(ItemPointerData) * r->copied_capacity);
	walk_all_lists(r, assign_row);
	cvivf_build_assign_end(b);
	tuplesort_performsort(b->sort);
	qsort(r->copied, r->copied_count, sizeof(ItemPointerData), compare_tids);
	init_pending(r, &meta);
	r->writer = cvivf_writer_begin_relocated(r->index, &meta);
	cvivf_writer_centroids(r->writer, r->centroids, norms);
	b->baseline = cvivf_distance_sums_new(r->lists);
	cvivf_build_write_lists(b, r->writer);
	cvivf_writer_finish(r->writer);
	write_baseline(r);
	r->pending = cvivf_writer_meta(r->writer);
	if (!cvivf_calibration_of_sample((CvMetric) r->old.metric, b->sample, b->sample_count,
									 b->dimensions, r->centroids, r->lists, b->rows,
									 (uint64) b->options->seed, &r->pending->calibration))
		memset(&r->pending->calibration, 0, sizeof(CvIvfCalibration));
}

/* ---- the old generation's pages ---- */

typedef struct PageSet
{
	BlockNumber *blocks;
	int64		count;
	int64		capacity;
} PageSet;

static void
add_page(BlockNumber block, void *arg)
{
	PageSet    *set = (PageSet *) arg;

	if (set->count == set->capacity)
	{
		set->capacity = Max(64, set->capacity * 2);
		set->blocks = set->blocks == NULL ?
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(BlockNumber) * set->capacity) :
			repalloc_huge(set->blocks, sizeof(BlockNumber) * set->capacity);
	}
	set->blocks[set->count++] = block;
}

/* Every page the old metapage reaches, but the metapage. */
static PageSet *
old_generation_pages(Retrain *r)
{
	PageSet    *set = palloc0(sizeof(PageSet));

	cvivf_visit_pages(r->index, &r->old, true, add_page, set);
	return set;
}

/*
 * Waits, at most RECLAIM_WAIT_MS, for every other transaction that holds a
 * lock on the index (any scan that may have read the old metapage is one
 * of them); true when all have ended.
 */
static bool
old_scans_ended(Relation index)
{
	LOCKTAG		tag;
	VirtualTransactionId *holders;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RECLAIM_WAIT_MS);

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, RelationGetRelid(index));
	holders = GetLockConflicts(&tag, AccessExclusiveLock, NULL);
	for (; VirtualTransactionIdIsValid(*holders); holders++)
		while (!VirtualXactLock(*holders, false))
		{
			if (GetCurrentTimestamp() >= deadline)
				return false;
			CHECK_FOR_INTERRUPTS();
			pg_usleep(10000L);
		}
	return true;
}

/* Phase 3: frees the old generation's pages, or leaves them to VACUUM; returns how many it freed. */
static int64
free_old_generation(Retrain *r, PageSet *old, uint64 retired_xid)
{
	int64		freed = 0;

	if (!old_scans_ended(r->index))
	{
		ereport(NOTICE,
				(errmsg("the old pages of index \"%s\" are left for VACUUM",
						RelationGetRelationName(r->index)),
				 errdetail("Transactions that held the index when it switched to its new lists were still open after %d seconds.",
						   RECLAIM_WAIT_MS / 1000),
				 errhint("VACUUM the table once they have ended to reuse the %lld pages.",
						 (long long) old->count)));
		return 0;
	}
	for (int64 i = 0; i < old->count; i++)
	{
		if (cvivf_reclaim_retired_page(r->index, old->blocks[i], NULL))
			freed++;
		CHECK_FOR_INTERRUPTS();
	}
	IndexFreeSpaceMapVacuum(r->index);
	cvivf_clear_retired(r->index, retired_xid);
	return freed;
}

/* ---- the function ---- */

/* Phase 2: the last rows, the switch; returns the retired_xid the switch recorded. */
static uint64
switch_generation(Retrain *r, PageSet **old)
{
	uint64		retired_xid;

	LockRelation(r->index, ShareLock);
	catch_up(r);
	*old = old_generation_pages(r);
	/* the size a later cvivf_health compares with: the old pages will be free space */
	r->pending->build_blocks = RelationGetNumberOfBlocks(r->index);
	retired_xid = cvivf_switch_generation(r->index, r->pending);
	UnlockRelation(r->index, ShareLock);
	return retired_xid;
}

static HTAB *
new_tid_set(void)
{
	HASHCTL		ctl = {0};

	ctl.keysize = sizeof(ItemPointerData);
	ctl.entrysize = sizeof(ItemPointerData);
	ctl.hcxt = CurrentMemoryContext;
	return hash_create("cvivf retrain rows", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static void
check_retrainable(Retrain *r)
{
	if (cvlattice_is(&r->old))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a cvlattice index", RelationGetRelationName(r->index)),
				 errdetail("Its lists are its labels and its centroids follow their members: there is nothing to retrain.")));
	CheckTableNotInUse(r->index, "cvivf_retrain");
	/* what a failed CREATE INDEX CONCURRENTLY left: it may miss rows the table has */
	if (!r->index->rd_index->indisvalid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot retrain invalid index \"%s\"", RelationGetRelationName(r->index)),
				 errhint("REINDEX it, or drop it.")));
	if (r->old.dimensions == 0 || live_rows(r) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" has no rows to retrain on", RelationGetRelationName(r->index)),
				 errhint("Load data first, then REINDEX or retrain it.")));
}

static Datum
result_row(FunctionCallInfo fcinfo, Retrain *r, int64 freed, int64 old_pages)
{
	TupleDesc	desc;
	Datum		values[7];
	bool		nulls[7] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int32GetDatum(r->old.lists);
	values[1] = Int32GetDatum(r->lists);
	values[2] = Int64GetDatum(r->build.rows + r->caught_up);
	values[3] = Int64GetDatum(r->caught_up);
	values[4] = Int64GetDatum(cvivf_writer_reserved(r->writer));
	values[5] = Int64GetDatum(old_pages);
	values[6] = Int64GetDatum(freed);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

/*
 * cvivf_retrain(index) -> (old_lists, lists, rows, rows_caught_up,
 * new_pages, old_pages, pages_freed).
 */
Datum
cvivf_retrain(PG_FUNCTION_ARGS)
{
	Retrain		r = {0};
	Relation	heap;
	PageSet    *old;
	uint64		retired_xid;
	int64		freed;
	bool		lattice;

	PreventCommandDuringRecovery("cvivf_retrain()");
	r.index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_MAINTAIN, "cvivf_retrain", &heap,
								   &lattice);
	cv_citus_refuse_shell(RelationGetRelid(heap), "cvivf_retrain",
						  "Retrain each shard's index where it is, through run_command_on_placements (README, \"Citus\").");
	cvivf_read_meta(r.index, &r.old);
	check_retrainable(&r);
	/* pg_stat_progress_create_index shows it as a concurrent rebuild of the index */
	pgstat_progress_start_command(PROGRESS_COMMAND_CREATE_INDEX, RelationGetRelid(heap));
	pgstat_progress_update_param(PROGRESS_CREATEIDX_INDEX_OID, RelationGetRelid(r.index));
	pgstat_progress_update_param(PROGRESS_CREATEIDX_COMMAND,
								 PROGRESS_CREATEIDX_COMMAND_REINDEX_CONCURRENTLY);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_PHASE, PROGRESS_CREATEIDX_PHASE_BUILD);
	r.row = cvec_alloc(Max((int) r.old.dimensions, 1));
	r.seen = palloc0(sizeof(uint64) * Max(r.old.lists, 1));
	init_build(&r, heap);
	cvivf_check_quantized_dimensions(r.index, r.build.options, (int) r.old.dimensions);
	r.added = new_tid_set();
	write_new_generation(&r);
	catch_up(&r);
	retired_xid = switch_generation(&r, &old);
	if (r.build.gpu_served)
		cv_gpu_count_served(CV_GPU_SERVED_BUILD);
	freed = free_old_generation(&r, old, retired_xid);
	pgstat_progress_end_command();
	index_close(r.index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_DATUM(result_row(fcinfo, &r, freed, old->count));
}
