/*
 * recall.c: cvivf_recall, recall@k of a cvivf or cvlattice index measured
 * against exact search, for users choosing probes or deciding to rebuild.
 *
 * The queries are rows of the indexed table: the `queries` visible rows
 * (with an indexable vector) whose rank
 *     hashint8extended(block * 65536 + offset, seed)
 * of their ctid is lowest, ties by ctid, so SQL can pick the same rows.
 * Each is answered through the index exactly as `ORDER BY v <op> q LIMIT k`
 * would (the index scan, clustervec.probes set to probes for it), and
 * exactly by one more pass over the table keeping k rows per query
 * (search/topk.c), by the index's own distance.  A returned row is a hit
 * when its distance is at most the k-th exact distance, so ties at the
 * boundary cost nothing; the query row is a neighbour like any other.
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_am.h"
#include "commands/defrem.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "access.h"
#include "citus.h"
#include "ivf/ivf.h"
#include "lattice/lattice.h"
#include "search/topk.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvivf_recall);

#define RECALL_MAX_QUERIES 100000
#define RECALL_MAX_K 1000
#define RECALL_COLUMNS 12

/* A sampled row: its rank, its ctid, where its vector is kept. */
typedef struct SampledRow
{
	int64		rank;
	ItemPointerData tid;
	int			slot;
} SampledRow;

typedef struct Recall
{
	Relation	heap;
	Relation	index;
	bool		lattice;		/* a cvlattice index */
	CvIvfMetaPageData meta;
	AttrNumber	heap_attno;		/* the vector's column in the table */
	AttrNumber	index_attno;	/* the vector's key column in the index */
	int			dims;
	int			k;
	int			probes;
	int			wanted;
	int64		seed;
	/* the sample: a max-heap by (rank, ctid) of at most wanted rows */
	SampledRow *sample;
	int			nq;
	float	   *queries;		/* wanted x dims, by slot */
	int64		rows;			/* rows searched: visible, with an indexable vector */
	CvTopK	   *exact;			/* nq */
	double	   *recall;			/* nq */
	int64		returned;		/* rows the index returned, all queries */
	double		index_ms;
} Recall;

/* Sample order: ascending rank, then ascending ctid. */
static bool
sampled_before(const SampledRow *a, const SampledRow *b)
{
	if (a->rank != b->rank)
		return a->rank < b->rank;
	return ItemPointerCompare((ItemPointer) &a->tid, (ItemPointer) &b->tid) < 0;
}

static void
swap_sampled(Recall *r, int i, int j)
{
	SampledRow	swap = r->sample[i];

	r->sample[i] = r->sample[j];
	r->sample[j] = swap;
}

/* Restores the sample's heap below i after its row got a lower rank. */
static void
sample_sift_down(Recall *r, int i)
{
	for (;;)
	{
		int			worst = i,
					left = 2 * i + 1,
					right = 2 * i + 2;

		if (left < r->nq && sampled_before(&r->sample[worst], &r->sample[left]))
			worst = left;
		if (right < r->nq && sampled_before(&r->sample[worst], &r->sample[right]))
			worst = right;
		if (worst == i)
			return;
		swap_sampled(r, i, worst);
		i = worst;
	}
}

/* The rank SQL computes as hashint8extended(block * 65536 + offset, seed). */
static int64
row_rank(ItemPointer tid, int64 seed)
{
	int64		key = (int64) ItemPointerGetBlockNumber(tid) * 65536 +
		ItemPointerGetOffsetNumber(tid);

	return DatumGetInt64(DirectFunctionCall2(hashint8extended, Int64GetDatum(key),
											 Int64GetDatum(seed)));
}

/* Keeps the row in the sample when it ranks among the lowest so far. */
static void
sample_offer(Recall *r, ItemPointer tid, const float *x)
{
	SampledRow	row = {row_rank(tid, r->seed), *tid, r->nq};
	int			i;

	if (r->nq < r->wanted)
	{
		i = r->nq++;
		r->sample[i] = row;
		memcpy(r->queries + (Size) row.slot * r->dims, x, sizeof(float) * r->dims);
		while (i > 0 && sampled_before(&r->sample[(i - 1) / 2], &r->sample[i]))
		{
			swap_sampled(r, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
	}
	else if (sampled_before(&row, &r->sample[0]))
	{
		row.slot = r->sample[0].slot;
		r->sample[0] = row;
		memcpy(r->queries + (Size) row.slot * r->dims, x, sizeof(float) * r->dims);
		sample_sift_down(r, 0);
	}
}

/* A visible row's vector, or NULL when the index does not hold it (NULL, zero for cosine). */
static const float *
row_vector(Recall *r, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		value = slot_getattr(slot, r->heap_attno, &isnull);
	CVec	   *v;

	if (isnull)
		return NULL;
	v = DatumGetCVec(value);
	if (r->dims == 0)
		r->dims = v->dim;		/* an index built empty */
	if (v->dim != r->dims)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("row (%u,%u) of table \"%s\" has %d dimensions, index \"%s\" has %d",
						ItemPointerGetBlockNumber(&slot->tts_tid),
						ItemPointerGetOffsetNumber(&slot->tts_tid),
						RelationGetRelationName(r->heap), v->dim,
						RelationGetRelationName(r->index), r->dims)));
	if (!cvivf_vector_is_indexable(r->meta.metric, v->x, r->dims))
		return NULL;
	return v->x;
}

typedef void (*RowVisitor) (Recall *r, ItemPointer tid, const float *x);

/* One pass over the visible rows the index holds, in ctid order, under a per-row context. */
static void
scan_rows(Recall *r, RowVisitor visit)
{
	TableScanDesc scan = table_beginscan_strat(r->heap, GetActiveSnapshot(), 0, NULL,
											   true, false);
	TupleTableSlot *slot = table_slot_create(r->heap, NULL);
	MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext, "cvivf_recall row",
													  ALLOCSET_SMALL_SIZES);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		MemoryContext saved = MemoryContextSwitchTo(row_context);
		const float *x;

		CHECK_FOR_INTERRUPTS();
		x = row_vector(r, slot);
		MemoryContextSwitchTo(saved);
		if (x != NULL)
			visit(r, &slot->tts_tid, x);
		MemoryContextReset(row_context);
	}
	MemoryContextDelete(row_context);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

/* The first pass: count the rows and keep the sample. */
static void
visit_for_sample(Recall *r, ItemPointer tid, const float *x)
{
	if (r->queries == NULL)
		r->queries = palloc_extended(sizeof(float) * r->dims * (Size) r->wanted,
									 MCXT_ALLOC_HUGE);
	r->rows++;
	sample_offer(r, tid, x);
}

/* The second pass: every row against every query, k kept per query. */
static void
visit_for_exact(Recall *r, ItemPointer tid, const float *x)
{
	for (int q = 0; q < r->nq; q++)
		cv_topk_offer(&r->exact[q],
					  cvivf_distance(r->meta.metric, r->queries + (Size) q * r->dims, x, r->dims),
					  tid);
}

/*
 * Query q through the index, as ORDER BY ... LIMIT k runs it: its recall,
 * the returned rows at most the k-th exact distance over the exact count.
 */
static double
recall_through_index(Recall *r, int q)
{
	int			saved_probes = cvivf_probes;
	double		saved_target = cvivf_target_recall;
	CVec	   *query = cvec_alloc(r->dims);
	double		bound = cv_topk_worst(&r->exact[q]);
	int			found = 0,
				hits = 0;
	ScanKeyData orderby;
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(r->heap, NULL);

	memcpy(query->x, r->queries + (Size) q * r->dims, sizeof(float) * r->dims);
	ScanKeyEntryInitialize(&orderby, SK_ORDER_BY, r->index_attno, InvalidStrategy, InvalidOid,
						   InvalidOid, InvalidOid, PointerGetDatum(query));
	cvivf_probes = r->probes;
	cvivf_target_recall = 0;	/* r->probes already is the target's */
	PG_TRY();
	{
		scan = index_beginscan(r->heap, r->index, GetActiveSnapshot(), 0, 1);
		index_rescan(scan, NULL, 0, &orderby, 1);
		while (found < r->k && index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			found++;
			if (DatumGetFloat8(scan->xs_orderbyvals[0]) <= bound)
				hits++;
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
	r->returned += found;
	return (double) hits / r->exact[q].count;
}

/* Every sampled query through the index, timed, in a context reset per query. */
static void
answer_through_index(Recall *r)
{
	MemoryContext query_context = AllocSetContextCreate(CurrentMemoryContext,
														"cvivf_recall query",
														ALLOCSET_DEFAULT_SIZES);
	instr_time	start,
				duration;

	INSTR_TIME_SET_CURRENT(start);
	for (int q = 0; q < r->nq; q++)
	{
		MemoryContext saved = MemoryContextSwitchTo(query_context);

		r->recall[q] = recall_through_index(r, q);
		MemoryContextSwitchTo(saved);
		MemoryContextReset(query_context);
		CHECK_FOR_INTERRUPTS();
	}
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	r->index_ms = INSTR_TIME_GET_MILLISEC(duration);
	MemoryContextDelete(query_context);
}

/* The vector's columns in the index and the table; refuses what exact search cannot mirror. */
static void
find_vector_column(Recall *r)
{
	int			column = r->lattice ? cvlattice_vector_column(r->index) : 0;

	if (RelationGetIndexPredicate(r->index) != NIL ||
		r->index->rd_index->indkey.values[column] == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cvivf_recall does not support partial or expression indexes"),
				 errdetail("Index \"%s\" does not hold exactly the vector column of every row of table \"%s\".",
						   RelationGetRelationName(r->index), RelationGetRelationName(r->heap)),
				 errhint("Measure recall on an index of the plain vector column without a WHERE clause.")));
	r->index_attno = column + 1;
	r->heap_attno = r->index->rd_index->indkey.values[column];
}

/* Checks the arguments' ranges before anything is opened. */
static void
check_arguments(const Recall *r)
{
	if (r->wanted < 1 || r->wanted > RECALL_MAX_QUERIES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queries must be between 1 and %d", RECALL_MAX_QUERIES),
				 errhint("For a tighter estimate, average the results of several seeds.")));
	if (r->k < 1 || r->k > RECALL_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", RECALL_MAX_K),
				 errhint("Use the LIMIT of the queries whose recall matters.")));
	if (r->probes < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("probes must be at least 1"),
				 errhint("Pass NULL to use clustervec.probes.")));
}

/*
 * The result row: the mean recall, its standard error (with the finite
 * population correction: a sample of every row knows the recall exactly),
 * a normal 95% interval clipped to [0, 1], the worst query, the mean rows
 * returned and the index's time per query.
 */
static Datum
result_row(FunctionCallInfo fcinfo, const Recall *r, double elapsed_ms)
{
	TupleDesc	desc;
	Datum		values[RECALL_COLUMNS];
	bool		nulls[RECALL_COLUMNS];
	double		sum = 0,
				mean,
				squares = 0,
				worst = 1;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = BlessTupleDesc(desc);
	memset(nulls, r->nq == 0, sizeof(nulls));
	for (int q = 0; q < r->nq; q++)
	{
		sum += r->recall[q];
		worst = Min(worst, r->recall[q]);
	}
	/* a sum then one division: all ones give exactly 1 */
	mean = r->nq ? sum / r->nq : 0;
	for (int q = 0; q < r->nq; q++)
		squares += (r->recall[q] - mean) * (r->recall[q] - mean);
	values[0] = Int32GetDatum(r->nq);
	values[1] = Int32GetDatum(r->k);
	values[2] = Int32GetDatum(r->probes);
	values[3] = Float8GetDatum(mean);
	if (r->nq == r->rows || r->nq >= 2)
	{
		double		se = r->nq == r->rows ? 0 :
			sqrt(squares / (r->nq - 1) / r->nq * (r->rows - r->nq) / (r->rows - 1));

		values[4] = Float8GetDatum(se);
		values[5] = Float8GetDatum(Max(0, mean - 1.96 * se));
		values[6] = Float8GetDatum(Min(1, mean + 1.96 * se));
	}
	else
		nulls[4] = nulls[5] = nulls[6] = true;
	values[7] = Float8GetDatum(worst);
	values[8] = Float8GetDatum(r->nq ? (double) r->returned / r->nq : 0);
	values[9] = Int64GetDatum(r->rows);
	values[10] = Float8GetDatum(r->nq ? r->index_ms / r->nq : 0);
	values[11] = Float8GetDatum(elapsed_ms);
	nulls[0] = nulls[1] = nulls[2] = nulls[9] = nulls[11] = false;
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/* Samples, searches exactly, asks the index; one row of figures. */
Datum
cvivf_recall(PG_FUNCTION_ARGS)
{
	Recall		r = {0};
	instr_time	start,
				elapsed;
	Datum		result;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(4))
		PG_RETURN_NULL();
	INSTR_TIME_SET_CURRENT(start);
	r.wanted = PG_GETARG_INT32(1);
	r.k = PG_GETARG_INT32(2);
	r.probes = PG_ARGISNULL(3) ? 1 : PG_GETARG_INT32(3);
	r.seed = PG_GETARG_INT32(4);
	check_arguments(&r);
	r.index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_READ, "cvivf_recall", &r.heap,
								   &r.lattice);
	cv_citus_refuse_shell(RelationGetRelid(r.heap), "cvivf_recall",
						  "Call it on each shard through run_command_on_shards, which runs it where the rows are (README, \"Citus\").");
	find_vector_column(&r);
	cvivf_read_meta(r.index, &r.meta);
	r.dims = r.meta.dimensions;
	if (PG_ARGISNULL(3))
		r.probes = cvivf_scan_probes(r.index, &r.meta);
	r.probes = Min(r.probes, (int) Max(r.meta.lists, 1));
	r.sample = palloc(sizeof(SampledRow) * r.wanted);
	scan_rows(&r, visit_for_sample);
	if (r.nq == 0)
		ereport(NOTICE,
				(errmsg("table \"%s\" has no rows in index \"%s\", so recall is not measured",
						RelationGetRelationName(r.heap), RelationGetRelationName(r.index))));
	else
	{
		r.exact = palloc(sizeof(CvTopK) * r.nq);
		for (int q = 0; q < r.nq; q++)
			cv_topk_init(&r.exact[q], r.k);
		scan_rows(&r, visit_for_exact);
		r.recall = palloc(sizeof(double) * r.nq);
		answer_through_index(&r);
	}
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	result = result_row(fcinfo, &r, INSTR_TIME_GET_MILLISEC(elapsed));
	index_close(r.index, NoLock);
	table_close(r.heap, NoLock);
	PG_RETURN_DATUM(result);
}
