/*
 * cvsearch.c: batch search over a cvivf index, and the mirror functions.
 *
 * cvsearch(index, queries, k, probes) answers each query as the index scan
 * `ORDER BY v <op> q LIMIT k` would with cvivf.probes = probes: the k
 * nearest visible rows among the probed lists.  With a ready mirror in
 * the GPU worker, one request answers a batch of queries; rows inserted
 * after the mirror was made are read from the pages of the probed lists
 * and merged; candidates the snapshot cannot see are replaced by asking
 * for more.  Without a mirror (one is then made in the background), or
 * without a GPU, each query runs the CPU index scan.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "access.h"
#include "citus.h"
#include "gpu/gpu.h"
#include "ivf/ivf.h"
#include "ivf/mirror.h"
#include "lattice/lattice.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvsearch);
PG_FUNCTION_INFO_V1(clustervec_gpu_warm);
PG_FUNCTION_INFO_V1(clustervec_gpu_mirrors);

/* The way to search a Citus distributed table, for the error on its empty shell. */
#define SHARDS_HINT \
	"ORDER BY ... LIMIT k on the table searches every shard and merges; for a batch, " \
	"call cvsearch on each shard's index through run_command_on_shards (README, \"Citus\")."

typedef struct BatchSearch
{
	Relation	heap;
	Relation	index;
	CvIvfMetaPageData meta;
	int			k;
	int			probes;
	int			nq;
	float	   *queries;
	bool		lattice;		/* a cvlattice index */
	int			vector_attno;	/* the index column ordered by */
	/* results: k per query */
	ItemPointerData *tids;
	double	   *distances;
	int		   *found;
	/* GPU path */
	int			mirror;
	CvGpuMirrorKey key;
	CvIvfListEntry *directory;	/* each list's entry now */
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
} BatchSearch;

/* The queries as nq x d floats; every one must match the index's dimensions. */
static void
read_queries(BatchSearch *s, ArrayType *array)
{
	Datum	   *values;
	bool	   *nulls;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			d = s->meta.dimensions;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("queries must be a one-dimensional array")));
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  &values, &nulls, &s->nq);
	s->queries = palloc_extended(sizeof(float) * Max(d, 1) * Max(s->nq, 1), MCXT_ALLOC_HUGE);
	for (int q = 0; q < s->nq; q++)
	{
		CVec	   *v;

		if (nulls[q])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("query %d is NULL", q + 1)));
		v = DatumGetCVec(values[q]);
		if (d == 0)
			s->meta.dimensions = d = v->dim;	/* an index built empty */
		if (v->dim != d)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("query %d has %d dimensions, index \"%s\" has %d",
							q + 1, v->dim, RelationGetRelationName(s->index), d)));
		memcpy(s->queries + (Size) q * d, v->x, sizeof(float) * d);
	}
}

/* Whether the snapshot sees the row; *tid becomes the visible version's. */
static bool
row_visible(BatchSearch *s, ItemPointer tid)
{
	bool		call_again = false;
	bool		all_dead = false;
	bool		found;

	found = table_index_fetch_tuple(s->fetch, tid, GetActiveSnapshot(), s->slot,
									&call_again, &all_dead);
	if (found)
		*tid = s->slot->tts_tid;
	ExecClearTuple(s->slot);
	return found;
}

/* Query q through the CPU index scan, as ORDER BY ... LIMIT k would run it. */
static void
search_on_cpu(BatchSearch *s, int q)
{
	int			saved_probes = cvivf_probes;
	double		saved_target = cvivf_target_recall;
	CVec	   *query = cvec_alloc(s->meta.dimensions);
	ScanKeyData orderby;
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(s->heap, NULL);

	memcpy(query->x, s->queries + (Size) q * s->meta.dimensions,
		   sizeof(float) * s->meta.dimensions);
	ScanKeyEntryInitialize(&orderby, SK_ORDER_BY, s->vector_attno, InvalidStrategy, InvalidOid,
						   InvalidOid, InvalidOid, PointerGetDatum(query));
	s->found[q] = 0;
	cvivf_probes = s->probes;
	cvivf_target_recall = 0;	/* s->probes already is the target's */
	PG_TRY();
	{
		scan = index_beginscan(s->heap, s->index, GetActiveSnapshot(), 0, 1);
		index_rescan(scan, NULL, 0, &orderby, 1);
		while (s->found[q] < s->k && index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			int64		at = (int64) q * s->k + s->found[q]++;

			s->tids[at] = slot->tts_tid;
			s->distances[at] = DatumGetFloat8(scan->xs_orderbyvals[0]);
		}
		index_endscan(scan);
	}
	PG_FINALLY();
	{
		cvivf_probes = saved_probes;
		cvivf_target_recall = saved_target;
	}
	PG_END_TRY();
	ExecDropSingleTupleTableSlot(slot);
	pfree(query);
}

/* What a query needs after an answer. */
typedef enum QueryState
{
	QUERY_DONE = 0,
	QUERY_WIDER,				/* hidden rows used up the hits: ask for more */
	QUERY_ON_CPU				/* the probed lists ran short: the iterative scan goes on */
} QueryState;

/* Query q's answer from the GPU's hits and the rows inserted after the mirror. */
static QueryState
finish_query(BatchSearch *s, int q, int in_batch, const CvGpuSearchAnswer *answer)
{
	CvIvfMirrorCandidate *candidates;
	int			trusted;
	bool		exhausted,
				stale;

	cvivf_mirror_merge(s->index, &s->meta, s->directory,
					   s->queries + (Size) q * s->meta.dimensions, answer, in_batch,
					   &candidates, &trusted, &exhausted, &stale);
	if (stale)
	{
		pfree(candidates);
		return QUERY_ON_CPU;	/* a probed list has rows the mirror lacks */
	}
	s->found[q] = 0;
	for (int i = 0; i < trusted && s->found[q] < s->k; i++)
		if (row_visible(s, &candidates[i].tid))
		{
			int64		at = (int64) q * s->k + s->found[q]++;

			s->tids[at] = candidates[i].tid;
			s->distances[at] = candidates[i].distance;
		}
	pfree(candidates);
	if (s->found[q] == s->k)
		return QUERY_DONE;
	if (!exhausted)
		return QUERY_WIDER;
	/* as the index scan: more lists while rows are wanted, when iterative */
	return cvivf_iterative_scan == CVIVF_ITERATIVE_OFF || s->probes >= (int) s->meta.lists ?
		QUERY_DONE : QUERY_ON_CPU;
}

/*
 * Answers queries [first, first + nq) with width hits each; false: the
 * worker failed.  A query's first request observes (cvlattice, with
 * clustervec.observe), a wider one again does not, so each counts once.
 */
static bool
search_batch(BatchSearch *s, int first, int nq, int width, bool first_ask, QueryState *states)
{
	CvGpuSearchAnswer answer;
	CvGpuError	error = {0};

	if (!cv_gpu_mirror_search(s->mirror, &s->key, s->queries + (Size) first * s->meta.dimensions,
							  nq, width, s->probes, NULL, first_ask && cvlattice_observe, &answer,
							  &error))
	{
		cv_gpu_fall_back("cvsearch", &error);
		return false;
	}
	for (int q = 0; q < nq; q++)
	{
		states[first + q] = finish_query(s, first + q, q, &answer);
		CHECK_FOR_INTERRUPTS();
	}
	cv_gpu_search_answer_free(&answer);
	return true;
}

/*
 * The GPU path: batches, then the queries whose hidden rows used up their
 * hits asked again with four times as many; false: the worker failed and
 * the CPU answers everything.
 */
static bool
search_on_gpu(BatchSearch *s)
{
	int			width = Min(CV_GPU_SEARCH_MAX_K, Max(2 * s->k, s->k + 16));
	int			probes = Min(s->probes, (int) s->meta.lists);
	int			batch = cv_gpu_search_batch_queries(s->meta.dimensions, width, probes);
	QueryState *states = palloc0(sizeof(QueryState) * s->nq);

	if (batch < 1)
		return false;
	s->directory = palloc(sizeof(CvIvfListEntry) * s->meta.lists);
	cvivf_read_directory(s->index, &s->meta, s->directory);
	for (int first = 0; first < s->nq; first += batch)
		if (!search_batch(s, first, Min(batch, s->nq - first), width, true, states))
			return false;
	for (int q = 0; q < s->nq; q++)
	{
		int			more = width;

		while (states[q] == QUERY_WIDER && more < CV_GPU_SEARCH_MAX_K &&
			   cv_gpu_search_batch_queries(s->meta.dimensions,
										   Min(CV_GPU_SEARCH_MAX_K, more * 4), probes) >= 1)
		{
			more = Min(CV_GPU_SEARCH_MAX_K, more * 4);
			if (!search_batch(s, q, 1, more, false, states))
				return false;
		}
		if (states[q] != QUERY_DONE)
			search_on_cpu(s, q);
	}
	cv_gpu_count_served(CV_GPU_SERVED_SEARCH);
	return true;
}

static void
emit_results(FunctionCallInfo fcinfo, const BatchSearch *s)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	for (int q = 0; q < s->nq; q++)
		for (int r = 0; r < s->found[q]; r++)
		{
			Datum		values[4];
			bool		nulls[4] = {0};
			int64		at = (int64) q * s->k + r;

			values[0] = Int32GetDatum(q + 1);
			values[1] = Int32GetDatum(r + 1);
			values[2] = PointerGetDatum(&s->tids[at]);
			values[3] = Float8GetDatum(s->distances[at]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
}

/* Uses the index's ready mirror when the GPU serves; asks for one in the background otherwise. */
static bool
choose_mirror(BatchSearch *s)
{
	if (!cv_gpu_should_use() || (s->meta.flags & CVIVF_META_NO_CENTROIDS))
		return false;
	cvivf_mirror_key(s->index, &s->meta, &s->key);
	s->mirror = cv_gpu_mirror_find(&s->key);
	if (s->mirror < 0)
	{
		cv_gpu_count_fallback();
		cvivf_mirror_request(s->index, &s->key);
	}
	return s->mirror >= 0;
}

Datum
cvsearch(PG_FUNCTION_ARGS)
{
	BatchSearch s = {0};

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		return (Datum) 0;
	s.k = PG_GETARG_INT32(2);
	if (s.k < 1 || s.k > CV_GPU_SEARCH_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", CV_GPU_SEARCH_MAX_K)));
	s.probes = PG_ARGISNULL(3) ? cvivf_probes : PG_GETARG_INT32(3);
	if (s.probes < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("probes must be at least 1")));
	s.index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_READ, "cvsearch", &s.heap,
								   &s.lattice);
	cv_citus_refuse_shell(RelationGetRelid(s.heap), "cvsearch", SHARDS_HINT);
	s.vector_attno = s.lattice ? cvlattice_vector_column(s.index) + 1 : 1;
	cvivf_read_meta(s.index, &s.meta);
	if (PG_ARGISNULL(3))
		s.probes = cvivf_scan_probes(s.index, &s.meta);
	s.probes = Min(s.probes, (int) s.meta.lists);
	read_queries(&s, PG_GETARG_ARRAYTYPE_P(1));
	s.tids = palloc_extended(sizeof(ItemPointerData) * (Size) Max(s.nq, 1) * s.k, MCXT_ALLOC_HUGE);
	s.distances = palloc_extended(sizeof(double) * (Size) Max(s.nq, 1) * s.k, MCXT_ALLOC_HUGE);
	s.found = palloc0(sizeof(int) * Max(s.nq, 1));
	s.fetch = table_index_fetch_begin(s.heap);
	s.slot = table_slot_create(s.heap, NULL);
	if (s.nq > 0 && !(choose_mirror(&s) && search_on_gpu(&s)))
		for (int q = 0; q < s.nq; q++)
		{
			search_on_cpu(&s, q);
			CHECK_FOR_INTERRUPTS();
		}
	table_index_fetch_end(s.fetch);
	ExecDropSingleTupleTableSlot(s.slot);
	emit_results(fcinfo, &s);
	index_close(s.index, NoLock);
	table_close(s.heap, NoLock);
	return (Datum) 0;
}

/* Uploads the index's mirror now; true when one is ready afterwards. */
Datum
clustervec_gpu_warm(PG_FUNCTION_ARGS)
{
	Relation	heap;
	bool		lattice;
	Relation	index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_READ, "clustervec_gpu_warm",
											 &heap, &lattice);
	CvIvfMetaPageData meta;
	CvGpuMirrorKey key;
	CvGpuError	error = {0};
	bool		ready;

	cv_citus_refuse_shell(RelationGetRelid(heap), "clustervec_gpu_warm",
						  "Warm each shard's index on its node, through run_command_on_shards (README, \"Citus\").");
	if (!cv_gpu_should_use())
	{
		ereport(NOTICE,
				(errmsg("the GPU worker is not ready, so index \"%s\" is not mirrored",
						RelationGetRelationName(index))));
		index_close(index, NoLock);
		table_close(heap, NoLock);
		PG_RETURN_BOOL(false);
	}
	if (!cvivf_mirror_upload(index, true, &error))
		ereport(cv_gpu_mode == CV_GPU_REQUIRE ? ERROR : WARNING,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not mirror index \"%s\": %s",
						RelationGetRelationName(index), error.message)));
	cvivf_read_meta(index, &meta);
	cvivf_mirror_key(index, &meta, &key);
	ready = cv_gpu_mirror_find(&key) >= 0;
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_BOOL(ready);
}

/*
 * A mirror the caller may know of: one of its database's, of an index whose
 * table it may read unfiltered (a mirror's size tells the index's row count).
 */
static bool
mirror_visible(const CvGpuMirrorInfo *mirror)
{
	Oid			heap;

	/* cv_gpu_mirror_list gives ready mirrors of this database only */
	heap = IndexGetRelation(mirror->key.index, true);
	return OidIsValid(heap) && cv_may_inspect(heap);
}

/* One row per ready mirror the caller may know of. */
Datum
clustervec_gpu_mirrors(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CvGpuMirrorInfo mirrors[CV_GPU_MAX_MIRRORS];
	int			count;

	InitMaterializedSRF(fcinfo, 0);
	count = cv_gpu_mirror_list(mirrors);
	for (int m = 0; m < count; m++)
	{
		Datum		values[6];
		bool		nulls[6] = {0};

		if (!mirror_visible(&mirrors[m]))
			continue;
		values[0] = ObjectIdGetDatum(mirrors[m].key.database);
		values[1] = ObjectIdGetDatum(mirrors[m].key.index);
		values[2] = ObjectIdGetDatum(mirrors[m].key.relfilenode);
		values[3] = Int64GetDatum((int64) mirrors[m].key.generation);
		values[4] = Int64GetDatum((int64) mirrors[m].bytes);
		values[5] = TimestampTzGetDatum(mirrors[m].last_used);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
