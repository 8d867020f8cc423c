/*
 * scan.c: ordered index scans.  The query is ranked against every centroid;
 * the nearest clustervec.probes lists (or the calibrated number that reaches
 * clustervec.target_recall, settings.c) are read and their tuples returned in
 * non-decreasing distance from a binary heap (only the tuples the executor
 * asks for are ever ordered).  With clustervec.iterative_scan the scan then
 * opens the next-nearest lists while the executor keeps asking (a filtered
 * query still gets its k rows); tuples of lists opened later may be closer
 * than some already returned.
 *
 * cvlattice indexes use these same callbacks: src/lattice/scan.c decides
 * which lists to read (those of the scan's label keys, or the nearest
 * centroids) and how many at once, and the GPU worker never serves them.
 */
#include "postgres.h"

#include <math.h>

#include "access/relscan.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "gpu/gpu.h"
#include "ivf/candidates.h"
#include "ivf/ivf.h"
#include "ivf/scan_gpu.h"
#include "ivf/scan_report.h"
#include "lattice/lattice.h"
#include "math/distance.h"
#include "math/distance_bound.h"
#include "math/sq8.h"
#include "type/cvec.h"

typedef CvIvfRankedList RankedList;

typedef struct CvIvfScanState
{
	MemoryContext context;		/* everything of one rescan */
	CvIvfMetaPageData meta;
	int			probes;			/* lists read first (cvivf_scan_probes) */
	bool		started;
	bool		query_is_null;
	float	   *query;
	int			query_dim;
	RankedList *ranked;			/* lists, nearest first */
	int			lists_opened;
	int			max_lists;
	int			batch;			/* lists opened at once */
	CvIvfCandidates candidates;
	float	   *vector;			/* a re-read candidate */
	CvIvfGpuScan *gpu;			/* the mirror serves the scan while set */
	CvIvfGpuScan *returned;		/* rows a GPU scan returned, for the CPU to skip */
	bool		planned;		/* ranked, max_lists and batch are set */
	bool		keyed;			/* cvlattice label conditions chose the lists */
	int32	   *keyed_lists;	/* those lists, ascending, for the GPU */
	int			ranked_sorted;	/* ranked[0, ranked_sorted) is in order */
	const float *centroids;		/* quantized: the stored centroids codes are against */
	CvSq8Query	sq8;			/* the query prepared for the list being read */
	float	   *sq8_workspace;
} CvIvfScanState;

static inline void
push_candidate(CvIvfScanState *state, double distance, ItemPointer tid, bool exact,
			   BlockNumber block, Size offset)
{
	cvivf_candidates_push(&state->candidates, distance, tid, exact, block, offset);
}

static void
collect_tuple(const CvIvfTupleHeader *header, const float *vector,
			  BlockNumber block, Size offset, void *arg)
{
	CvIvfScanState *state = (CvIvfScanState *) arg;
	double		distance = 0;
	bool		exact = true;

	if (!state->query_is_null && state->meta.metric == CV_METRIC_L2)
	{
		double		bound = cv_l2_squared_lower_bound(state->query, vector,
													  state->meta.dimensions);

		exact = bound < 0;
		distance = exact ? sqrt(cv_distance->l2_squared(state->query, vector,
														state->meta.dimensions)) : sqrt(bound);
	}
	else if (!state->query_is_null)
		distance = cvivf_distance(state->meta.metric, state->query, vector,
								  state->meta.dimensions);
	push_candidate(state, distance, (ItemPointer) &header->heap_tid, exact, block, offset);
}

/* A coded slot of a quantized list: its bound from the code alone. */
static void
collect_code(const CvIvfCodeEntry *entry, void *arg)
{
	CvIvfScanState *state = (CvIvfScanState *) arg;
	double		bound = 0;

	if (entry->header.flags & CVIVF_TUPLE_DEAD)
		return;
	if (!state->query_is_null)
		bound = cv_sq8_lower_bound(&state->sq8, (const int8_t *) CvIvfCodeEntryCodes(entry),
								   (const CvSq8Factors *) &entry->scale);
	push_candidate(state, bound, (ItemPointer) &entry->header.heap_tid, state->query_is_null,
				   entry->data_block, entry->data_offset);
}

/*
 * A quantized list: its coded slots ranked by their codes' bounds, then
 * the tuples appended since the build, read whole.
 */
static void
collect_quantized_list(IndexScanDesc scan, CvIvfScanState *state, int list)
{
	Relation	index = scan->indexRelation;
	CvIvfCodedListEntry entry;
	bool		owned;

	cvivf_read_list_entry_bytes(index, &state->meta, list, &entry);
	if (entry.coded == 0)
	{
		if (BlockNumberIsValid(entry.base.first_block))
			cvivf_scan_list(index, &state->meta, entry.base.first_block, false, NULL,
							collect_tuple, state);
		return;
	}
	if (!state->query_is_null)
	{
		if (state->centroids == NULL)
			state->centroids = cvivf_get_centroids(index, &state->meta, &owned);
		if (state->sq8_workspace == NULL)
			state->sq8_workspace = palloc(sizeof(float) * state->meta.dimensions);
		cv_sq8_prepare(&state->sq8, state->meta.metric, state->query,
					   state->centroids + (Size) list * state->meta.dimensions,
					   state->meta.dimensions, state->sq8_workspace);
	}
	cvivf_scan_codes(index, &state->meta, &entry, NULL, collect_code, state);
	cvivf_scan_list_from(index, &state->meta, entry.tail_block, entry.tail_offset, false, NULL,
						 collect_tuple, state);
}

/* Replaces the top candidate's lower bound by its exact distance. */
static void
refine_top(IndexScanDesc scan, CvIvfScanState *state)
{
	CvIvfCandidate *top = &state->candidates.items[0];

	if (state->vector == NULL)
		state->vector = MemoryContextAlloc(state->context,
										   sizeof(float) * state->meta.dimensions);
	/* on a standby, its page may have been freed since the scan read its list */
	cvivf_check_generation_kept(scan->indexRelation, &state->meta);
	cvivf_read_vector_at(scan->indexRelation, &state->meta, top->block, top->offset,
						 state->vector);
	cvivf_check_generation_kept(scan->indexRelation, &state->meta);
	top->distance = cvivf_distance(state->meta.metric, state->query, state->vector,
								   state->meta.dimensions);
	top->exact = true;
	cvivf_candidates_top_changed(&state->candidates);
}

static int
compare_ranked(const void *a, const void *b)
{
	const RankedList *x = a;
	const RankedList *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return x->list - y->list;
}

/*
 * Puts the wanted nearest lists first, in order, and leaves the others
 * unordered after them: a scan reads probes lists, and sorting thousands
 * of lists for a few was most of the time of a short query.
 */
static void
sort_nearest(RankedList *ranked, int lists, int wanted)
{
	int			lo = 0,
				hi = lists - 1;

	while (wanted < lists && lo < hi)
	{
		RankedList pivot = ranked[hi];
		int			store = lo;

		for (int i = lo; i < hi; i++)
			if (compare_ranked(&ranked[i], &pivot) < 0)
			{
				RankedList t = ranked[i];

				ranked[i] = ranked[store];
				ranked[store++] = t;
			}
		ranked[hi] = ranked[store];
		ranked[store] = pivot;
		if (store == wanted)
			break;
		if (store < wanted)
			lo = store + 1;
		else
			hi = store - 1;
	}
	qsort(ranked, wanted, sizeof(RankedList), compare_ranked);
}

/* Orders the lists by their centroid's distance to the query. */
static void
rank_lists(Relation index, CvIvfScanState *state)
{
	bool		owned = false;
	const float *centroids = NULL;
	uint32		lists = state->meta.lists;

	if (!state->query_is_null)
		centroids = cvivf_get_centroids(index, &state->meta, &owned);
	state->ranked = palloc(sizeof(RankedList) * lists);
	for (uint32 list = 0; list < lists; list++)
	{
		state->ranked[list].list = list;
		state->ranked[list].distance = centroids == NULL ? 0 :
			cvivf_centroid_distance(state->meta.metric, state->query,
									centroids + (Size) list * state->meta.dimensions,
									state->meta.dimensions);
		if (isnan(state->ranked[list].distance))
			state->ranked[list].distance = INFINITY;
	}
	sort_nearest(state->ranked, lists, Min((int) lists, state->probes));
	state->ranked_sorted = Min((int) lists, state->probes);
	/* quantized lists prepare queries against them (scan memory, freed with it) */
	state->centroids = centroids;
}

/* How many lists this scan may open in all. */
static int
scan_list_limit(const CvIvfScanState *state)
{
	int			lists = state->meta.lists;

	if (state->meta.flags & CVIVF_META_NO_CENTROIDS)
		return lists;
	return cvivf_scan_limit_for(lists, state->probes);
}

/* The lists the CPU scan reads, in order, and how many it may read (once per scan). */
static void
plan_cpu_scan(IndexScanDesc scan, CvIvfScanState *state)
{
	if (state->planned)
		return;
	state->planned = true;
	if (cvlattice_is(&state->meta))
	{
		state->keyed = cvlattice_plan_scan(scan, &state->meta,
										   state->query_is_null ? NULL : state->query,
										   &state->ranked, &state->max_lists, &state->batch);
		state->ranked_sorted = INT_MAX;	/* cvlattice orders its own */
		/* probes from clustervec.target_recall's calibration, as the GPU path reads */
		if (!state->keyed && state->probes != cvivf_probes)
		{
			state->batch = state->probes;
			state->max_lists = cvivf_scan_limit_for((int) state->meta.lists, state->probes);
		}
		return;
	}
	rank_lists(scan->indexRelation, state);
	state->max_lists = scan_list_limit(state);
}

static int
compare_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/*
 * A cvlattice scan whose label conditions chose its lists: the GPU reads
 * exactly those (all at once, as the CPU does), or the CPU does when the
 * key is not on the labels only.
 */
static void
start_keyed_lattice_scan(IndexScanDesc scan, CvIvfScanState *state)
{
	plan_cpu_scan(scan, state);
	if (!state->keyed || state->query_is_null || state->max_lists == 0 ||
		state->max_lists > CV_GPU_SEARCH_MAX_K)
	{
		cv_scan_report(CV_SCAN_CPU_LATTICE);
		return;
	}
	state->keyed_lists = palloc(sizeof(int32) * state->max_lists);
	for (int i = 0; i < state->max_lists; i++)
		state->keyed_lists[i] = state->ranked[i].list;
	qsort(state->keyed_lists, state->max_lists, sizeof(int32), compare_int32);
	state->gpu = cvivf_gpu_scan_begin(scan->indexRelation, &state->meta, state->query,
									  state->max_lists, state->keyed_lists);
}

/* Reads the next batch of lists into the heap; false when none is left. */
static bool
open_next_lists(IndexScanDesc scan, CvIvfScanState *state)
{
	int			batch = Min(state->batch, state->max_lists - state->lists_opened);

	if (batch <= 0)
		return false;
	cvivf_check_generation_kept(scan->indexRelation, &state->meta);
	for (int i = 0; i < batch; i++)
	{
		CvIvfListEntry entry;
		int			list;

		CHECK_FOR_INTERRUPTS();
		if (state->lists_opened >= state->ranked_sorted)
		{
			/* past the lists sorted first: the rest, in order, once */
			qsort(state->ranked + state->ranked_sorted, state->meta.lists - state->ranked_sorted,
				  sizeof(RankedList), compare_ranked);
			state->ranked_sorted = state->meta.lists;
		}
		list = state->ranked[state->lists_opened++].list;
		if (cvivf_is_quantized(&state->meta))
		{
			collect_quantized_list(scan, state, list);
			continue;
		}
		cvivf_read_list_entry(scan->indexRelation, &state->meta, list, &entry);
		if (BlockNumberIsValid(entry.first_block))
			cvivf_scan_list(scan->indexRelation, &state->meta, entry.first_block, false,
							NULL, collect_tuple, state);
	}
	cvivf_check_generation_kept(scan->indexRelation, &state->meta);
	cvivf_candidates_order(&state->candidates);
	return true;
}

/* First call of a scan: metapage, query checks, list ranking. */
static void
start_scan(IndexScanDesc scan, CvIvfScanState *state)
{
	cvivf_read_meta(scan->indexRelation, &state->meta);
	if (!state->query_is_null && state->meta.dimensions == 0)
		state->query_is_null = true;	/* nothing was ever indexed */
	if (!state->query_is_null && state->query_dim != (int) state->meta.dimensions)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %u and %d",
						state->meta.dimensions, state->query_dim),
				 errdetail("Index \"%s\" holds vectors of %u dimensions.",
						   RelationGetRelationName(scan->indexRelation),
						   state->meta.dimensions)));
	state->started = true;
	pgstat_count_index_scan(scan->indexRelation);
	state->probes = cvivf_scan_probes(scan->indexRelation, &state->meta);
	state->batch = state->probes;
	if (cvlattice_is(&state->meta) && scan->numberOfKeys > 0)
		start_keyed_lattice_scan(scan, state);
	else if (!state->query_is_null)
		state->gpu = cvivf_gpu_scan_begin(scan->indexRelation, &state->meta, state->query,
										  Min(state->probes, (int) state->meta.lists), NULL);
	if (state->gpu == NULL)
		plan_cpu_scan(scan, state);
}

/*
 * The GPU scan ended: the CPU continues.  When it returned every row of the
 * probed lists, an iterative scan goes on with the next lists; otherwise
 * the CPU reads the probed lists again and skips what was returned.
 */
static void
continue_on_cpu(IndexScanDesc scan, CvIvfScanState *state, CvIvfGpuScanResult result)
{
	plan_cpu_scan(scan, state);
	if (result == CVIVF_GPU_LISTS_DONE && state->keyed)
		state->lists_opened = state->max_lists;
	else if (result == CVIVF_GPU_LISTS_DONE)
		state->lists_opened = Min(Min(state->probes, (int) state->meta.lists), state->max_lists);
	else
		state->returned = state->gpu;
	state->gpu = NULL;
}

/* Hands a row to the executor. */
static void
return_row(IndexScanDesc scan, CvIvfScanState *state, ItemPointer tid, double distance)
{
	scan->xs_heaptid = *tid;
	scan->xs_orderbyvals[0] = Float8GetDatum(distance);
	scan->xs_orderbynulls[0] = state->query_is_null;
	scan->xs_recheck = false;
	scan->xs_recheckorderby = false;
}

/* The GPU scan's next row; false when the CPU takes over. */
static bool
next_from_gpu(IndexScanDesc scan, CvIvfScanState *state)
{
	ItemPointerData tid;
	double		distance;
	CvIvfGpuScanResult result = cvivf_gpu_scan_next(state->gpu, &tid, &distance);

	if (result == CVIVF_GPU_ROW)
	{
		return_row(scan, state, &tid, distance);
		return true;
	}
	continue_on_cpu(scan, state, result);
	return false;
}

IndexScanDesc
cvivfbeginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
	CvIvfScanState *state = palloc0(sizeof(CvIvfScanState));

	state->context = AllocSetContextCreate(CurrentMemoryContext, "cvivf scan",
										   ALLOCSET_DEFAULT_SIZES);
	scan->opaque = state;
	/* the AM owns the order-by value arrays */
	scan->xs_orderbyvals = palloc0(sizeof(Datum) * Max(norderbys, 1));
	scan->xs_orderbynulls = palloc(sizeof(bool) * Max(norderbys, 1));
	memset(scan->xs_orderbynulls, true, sizeof(bool) * Max(norderbys, 1));
	return scan;
}

/* Takes the query vector from the ORDER BY key; a NULL query orders nothing. */
void
cvivfrescan(IndexScanDesc scan, ScanKey keys, int nkeys pg_attribute_unused(), ScanKey orderbys, int norderbys pg_attribute_unused())
{
	CvIvfScanState *state = (CvIvfScanState *) scan->opaque;
	MemoryContext old;

	MemoryContextReset(state->context);
	memset((char *) state + offsetof(CvIvfScanState, meta), 0,
		   sizeof(CvIvfScanState) - offsetof(CvIvfScanState, meta));
	state->candidates.context = state->context;
	/* cvlattice's label conditions; cvivf has none */
	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
	if (orderbys && scan->numberOfOrderBys > 0)
		memmove(scan->orderByData, orderbys, scan->numberOfOrderBys * sizeof(ScanKeyData));
	old = MemoryContextSwitchTo(state->context);
	state->query_is_null = scan->numberOfOrderBys == 0 ||
		(scan->orderByData[0].sk_flags & SK_ISNULL);
	if (!state->query_is_null)
	{
		CVec	   *q = DatumGetCVec(scan->orderByData[0].sk_argument);

		cvec_check_finite(q->x, q->dim);	/* a pgvector value may predate its checks */
		state->query = palloc(sizeof(float) * q->dim);
		memcpy(state->query, q->x, sizeof(float) * q->dim);
		state->query_dim = q->dim;	/* checked against the index when the scan starts */
	}
	MemoryContextSwitchTo(old);
}

bool
cvivfgettuple(IndexScanDesc scan, ScanDirection dir pg_attribute_unused())
{
	CvIvfScanState *state = (CvIvfScanState *) scan->opaque;
	MemoryContext old = MemoryContextSwitchTo(state->context);
	CvIvfCandidate *top;

	if (!state->started)
		start_scan(scan, state);
	if (state->gpu != NULL && next_from_gpu(scan, state))
	{
		MemoryContextSwitchTo(old);
		return true;
	}
	for (;;)
	{
		while ((top = cvivf_candidates_top(&state->candidates)) == NULL)
		{
			/* the GPU returned rows of the first batch of lists only */
			if (state->lists_opened > 0)
				state->returned = NULL;
			if (!open_next_lists(scan, state))
			{
				MemoryContextSwitchTo(old);
				return false;
			}
		}
		/* an exact top is no farther than any bound below it: return it */
		if (!top->exact)
		{
			refine_top(scan, state);
			continue;
		}
		if (state->returned == NULL ||
			!cvivf_gpu_scan_returned(state->returned, &top->tid, top->distance))
			break;
		cvivf_candidates_pop(&state->candidates);	/* the GPU returned it */
	}
	return_row(scan, state, &top->tid, top->distance);
	cvivf_candidates_pop(&state->candidates);
	MemoryContextSwitchTo(old);
	return true;
}

void
cvivfendscan(IndexScanDesc scan)
{
	CvIvfScanState *state = (CvIvfScanState *) scan->opaque;

	MemoryContextDelete(state->context);
	pfree(state);
	scan->opaque = NULL;
}
