/*
 * exact.c: cvsearch_exact, exact batch k-nearest-neighbour search (L2) over
 * the rows of a table visible to the caller.  The backend scans the heap
 * under its snapshot; each chunk of rows goes to the GPU worker (or the CPU
 * path) with a group of queries, and the per-chunk best k are merged per
 * query (search/topk.c).  Both paths compute the same float64 distance bit
 * for bit, and ties go to the smaller TID, so their answers are identical.
 */
#include "postgres.h"

#include <math.h>

#include "access/heapam.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
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
#include "math/distance.h"
#include "gpu/gpu.h"
#include "search/topk.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvsearch_exact);

#define EXACT_MAX_K 10000
#define CPU_CHUNK_ROWS 4096

typedef struct Search
{
	int			dims;
	int			nq;
	int			k;
	float	   *queries;		/* nq x dims */
	CvTopK	   *best;			/* nq */
	bool		use_gpu;
	bool		check_rows;		/* a column laid out as cvec but not cvec: check each row */
	/* the chunk being filled */
	float	   *rows;
	ItemPointerData *tids;
	int64		chunk_rows;
	int64		count;
	int			group;			/* queries per GPU request */
	int64	   *gpu_index;		/* group x k: a request's answer */
	double	   *gpu_distance;
} Search;

/* The CPU path for the chunk: queries [first, nq) against every row. */
static void
chunk_on_cpu(Search *s, int first)
{
	for (int q = first; q < s->nq; q++)
	{
		/* a chunk of rows times thousands of queries is minutes of work */
		CHECK_FOR_INTERRUPTS();
		for (int64 r = 0; r < s->count; r++)
		{
			double		d2 = cv_distance->l2_squared(s->queries + (Size) q * s->dims,
													 s->rows + r * s->dims, s->dims);

			cv_topk_offer(&s->best[q], sqrt(d2), &s->tids[r]);
		}
	}
}

/* Sends the chunk with queries [first, first + n) to the worker; false on failure. */
static bool
group_on_gpu(Search *s, int first, int n, CvGpuError *error)
{
	if (!cv_gpu_knn_exact(s->queries + (Size) first * s->dims, n, s->rows, s->count, s->dims,
						  s->k, s->gpu_index, s->gpu_distance, error))
		return false;
	for (int q = 0; q < n; q++)
		for (int r = 0; r < s->k; r++)
		{
			int64		i = s->gpu_index[(Size) q * s->k + r];

			if (i >= 0 && i < s->count)
				cv_topk_offer(&s->best[first + q], s->gpu_distance[(Size) q * s->k + r], &s->tids[i]);
		}
	return true;
}

/* One chunk through the worker, falling back to the CPU under "auto". */
static void
process_chunk(Search *s)
{
	CvGpuError	error;
	int			first = 0;

	if (s->count == 0)
		return;
	for (; s->use_gpu && first < s->nq; first += s->group)
		if (!group_on_gpu(s, first, Min(s->group, s->nq - first), &error))
		{
			cv_gpu_fall_back("cvsearch_exact", &error);
			s->use_gpu = false;	/* the rest of this search stays on the CPU */
			break;
		}
	if (!s->use_gpu)
		chunk_on_cpu(s, first);	/* queries the worker has not answered for this chunk */
	s->count = 0;
}

/* Sizes the chunk: on the GPU it and a group of queries fill one staging buffer. */
static void
plan_chunks(Search *s)
{
	int64		gpu_rows = 0;

	if (s->use_gpu)
		s->use_gpu = cv_gpu_knn_plan(s->nq, s->dims, s->k, &s->group, &gpu_rows);
	s->chunk_rows = s->use_gpu ? gpu_rows : CPU_CHUNK_ROWS;
	if (s->use_gpu)
	{
		s->gpu_index = palloc(sizeof(int64) * (Size) s->group * s->k);
		s->gpu_distance = palloc(sizeof(double) * (Size) s->group * s->k);
	}
	s->rows = palloc_extended(sizeof(float) * s->dims * s->chunk_rows, MCXT_ALLOC_HUGE);
	s->tids = palloc_extended(sizeof(ItemPointerData) * s->chunk_rows, MCXT_ALLOC_HUGE);
}

/* Reads the queries: non-empty, no NULL, one dimension count. */
static void
read_queries(Search *s, ArrayType *array)
{
	Datum	   *values;
	bool	   *nulls;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("queries must be a one-dimensional array")));
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
					  &values, &nulls, &s->nq);
	s->queries = NULL;
	for (int q = 0; q < s->nq; q++)
	{
		CVec	   *v;

		if (nulls[q])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("query %d is NULL", q + 1)));
		v = DatumGetCVec(values[q]);
		if (q == 0)
		{
			s->dims = v->dim;
			s->queries = palloc_extended(sizeof(float) * s->dims * s->nq, MCXT_ALLOC_HUGE);
		}
		else if (v->dim != s->dims)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("different cvec dimensions %d and %d in queries", s->dims, v->dim)));
		memcpy(s->queries + (Size) q * s->dims, v->x, sizeof(float) * s->dims);
	}
}

/* The vector column's number, checking it exists and holds cvec or a type laid out as it. */
static AttrNumber
vector_attribute(Search *s, Relation rel, const char *column)
{
	CVecLayout	layout;
	AttrNumber	attnum = cvec_column_of(rel, column, &layout);

	s->check_rows = layout == CVEC_LAYOUT_CHECKED;
	return attnum;
}

/*
 * Only rows the caller may see: privileges checked before the lock, row
 * security not bypassed.
 */
static Relation
open_source(Oid relid)
{
	Relation	rel;

	cv_check_select(relid);
	cv_check_row_security(relid, "cvsearch_exact");
	rel = table_open(relid, AccessShareLock);
	cv_citus_refuse_shell(relid, "cvsearch_exact",
						  "ORDER BY vector_column <-> query LIMIT k on the table, without an index scan, "
						  "searches every shard exactly and merges; or call cvsearch_exact on each shard "
						  "through run_command_on_shards (README, \"Citus\").");
	if (rel->rd_rel->relkind != RELKIND_RELATION && rel->rd_rel->relkind != RELKIND_MATVIEW)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table or materialized view", RelationGetRelationName(rel))));
	return rel;
}

/* Scans the visible rows in TID order (no synchronized scan) through the chunks. */
static void
scan_rows(Search *s, Relation rel, AttrNumber attnum)
{
	TableScanDesc scan = table_beginscan_strat(rel, GetActiveSnapshot(), 0, NULL, true, false);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	bool		isnull;

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		Datum		value = slot_getattr(slot, attnum, &isnull);
		CVec	   *v;

		if (isnull)
			continue;
		v = DatumGetCVec(value);
		if (s->check_rows)
			cvec_check_stored(v);
		if (v->dim != s->dims)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("different cvec dimensions: the queries have %d, row (%u,%u) has %d",
							s->dims, ItemPointerGetBlockNumber(&slot->tts_tid),
							ItemPointerGetOffsetNumber(&slot->tts_tid), v->dim)));
		memcpy(s->rows + s->count * s->dims, v->x, sizeof(float) * s->dims);
		s->tids[s->count++] = slot->tts_tid;
		if ((Pointer) v != DatumGetPointer(value))
			pfree(v);
		if (s->count == s->chunk_rows)
		{
			process_chunk(s);
			CHECK_FOR_INTERRUPTS();
		}
	}
	process_chunk(s);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

static void
emit_results(FunctionCallInfo fcinfo, Search *s)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int q = 0; q < s->nq; q++)
	{
		CvTopK	   *top = &s->best[q];

		cv_topk_sort(top);
		for (int r = 0; r < top->count; r++)
		{
			Datum		values[4];
			bool		nulls[4] = {0};

			values[0] = Int32GetDatum(q + 1);
			values[1] = Int32GetDatum(r + 1);
			values[2] = PointerGetDatum(&top->hits[r].tid);
			values[3] = Float8GetDatum(top->hits[r].distance);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
}

Datum
cvsearch_exact(PG_FUNCTION_ARGS)
{
	Search		s = {0};
	Relation	rel;
	AttrNumber	attnum;

	s.k = PG_GETARG_INT32(3);
	if (s.k < 1 || s.k > EXACT_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", EXACT_MAX_K)));
	read_queries(&s, PG_GETARG_ARRAYTYPE_P(2));
	if (s.nq == 0)
	{
		InitMaterializedSRF(fcinfo, 0);
		return (Datum) 0;
	}
	rel = open_source(PG_GETARG_OID(0));
	attnum = vector_attribute(&s, rel, NameStr(*PG_GETARG_NAME(1)));
	s.best = palloc(sizeof(CvTopK) * s.nq);
	for (int q = 0; q < s.nq; q++)
		cv_topk_init(&s.best[q], s.k);
	s.use_gpu = cv_gpu_should_use();
	plan_chunks(&s);
	scan_rows(&s, rel, attnum);
	table_close(rel, AccessShareLock);
	emit_results(fcinfo, &s);
	return (Datum) 0;
}
