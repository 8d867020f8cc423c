/*
 * input.c: the rows kmeans() clusters, read once by a heap scan under the
 * statement's snapshot, in TID order (no synchronized scan, so the same
 * table and seed give the same clusters).  The caller needs SELECT on the
 * table, checked before the lock; a role that row-level security applies
 * to is refused rather than given clusters of a subset it cannot name.
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "access.h"
#include "citus.h"
#include "kmeans/kmeans.h"
#include "math/distance.h"
#include "type/cvec.h"

#define FIRST_CAPACITY 1024

typedef struct Reader
{
	KmeansRows *rows;
	const KmeansRequest *request;
	Relation	rel;
	AttrNumber	attnum;
	bool		check_rows;		/* a column type laid out as cvec: check each value */
	int64		capacity;
} Reader;

/* Opens the table for reading, privileges and row security checked before the lock. */
static Relation
open_source(const KmeansRequest *request)
{
	Relation	rel;

	cv_check_select(request->relid);
	cv_check_row_security(request->relid, request->function);
	rel = table_open(request->relid, AccessShareLock);
	cv_citus_refuse_shell(request->relid, request->function,
						  "k-means over a distributed table needs its rows in one place: CREATE TABLE AS SELECT them first.");
	if (rel->rd_rel->relkind != RELKIND_RELATION && rel->rd_rel->relkind != RELKIND_MATVIEW)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table or materialized view", RelationGetRelationName(rel)),
				 errhint("%s reads a table's rows and returns their TIDs; for a query's rows, CREATE TEMP TABLE from it first.",
						 request->function)));
	return rel;
}

/* The vector column's number; it must exist and hold cvec or a type laid out as it. */
static void
find_column(Reader *reader)
{
	CVecLayout	layout;

	reader->attnum = cvec_column_of(reader->rel, reader->request->column, &layout);
	reader->check_rows = layout == CVEC_LAYOUT_CHECKED;
}

/* Room for one more row: the arrays double, so reading n rows copies O(n) values. */
static void
reserve_row(Reader *reader)
{
	KmeansRows *rows = reader->rows;

	if (rows->n < reader->capacity)
		return;
	reader->capacity = reader->capacity == 0 ? FIRST_CAPACITY : reader->capacity * 2;
	if (rows->points == NULL)
	{
		rows->points = palloc_extended(sizeof(float) * rows->d * reader->capacity, MCXT_ALLOC_HUGE);
		rows->tids = palloc_extended(sizeof(ItemPointerData) * reader->capacity, MCXT_ALLOC_HUGE);
		return;
	}
	rows->points = repalloc_huge(rows->points, sizeof(float) * rows->d * reader->capacity);
	rows->tids = repalloc_huge(rows->tids, sizeof(ItemPointerData) * reader->capacity);
}

/* The first vector fixes the dimensions; every other must match. */
static void
check_dimensions(Reader *reader, const CVec *v, ItemPointer tid)
{
	if (reader->rows->d == 0)
		reader->rows->d = v->dim;
	else if (v->dim != reader->rows->d)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors have different dimensions: row (%u,%u) has %d, earlier rows have %d",
						ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
						v->dim, reader->rows->d),
				 errhint("Declare the column as cvec(n) so every row has n dimensions.")));
}

/* One row into the arrays, or counted as skipped. */
static void
take_row(Reader *reader, Datum value, bool isnull, ItemPointer tid)
{
	KmeansRows *rows = reader->rows;
	CVec	   *v;

	if (isnull)
	{
		rows->nulls++;
		return;
	}
	v = DatumGetCVec(value);
	if (reader->check_rows)
		cvec_check_stored(v);
	cvec_check_finite(v->x, v->dim);
	check_dimensions(reader, v, tid);
	if (reader->request->metric == CV_METRIC_COSINE &&
		cv_distance->norm_squared(v->x, v->dim) == 0)
		rows->zeros++;			/* no direction: the cosine opclass leaves it out too */
	else
	{
		reserve_row(reader);
		memcpy(rows->points + rows->n * rows->d, v->x, sizeof(float) * rows->d);
		rows->tids[rows->n++] = *tid;
	}
	if ((Pointer) v != DatumGetPointer(value))
		pfree(v);				/* a detoasted copy */
}

/* Scans the visible rows in TID order. */
static void
scan_rows(Reader *reader)
{
	TableScanDesc scan = table_beginscan_strat(reader->rel, GetActiveSnapshot(), 0, NULL,
											   true, false);
	TupleTableSlot *slot = table_slot_create(reader->rel, NULL);
	int64		seen = 0;

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		value = slot_getattr(slot, reader->attnum, &isnull);

		take_row(reader, value, isnull, &slot->tts_tid);
		if (++seen % 4096 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

/* 'ip' and 'cosine' train on directions: rows to unit length ('ip' keeps the lengths). */
static void
to_directions(KmeansRows *rows, CvMetric metric)
{
	if (metric == CV_METRIC_L2)
		return;
	if (metric == CV_METRIC_INNER_PRODUCT)
		rows->norms = palloc_extended(sizeof(double) * Max(rows->n, 1), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < rows->n; i++)
	{
		float	   *x = rows->points + i * rows->d;
		double		norm = sqrt(cv_distance->norm_squared(x, rows->d));

		if (rows->norms != NULL)
			rows->norms[i] = norm;
		if (norm > 0)
			for (int j = 0; j < rows->d; j++)
				x[j] = (float) (x[j] / norm);
	}
}

void
kmeans_read_rows(const KmeansRequest *request, KmeansRows *rows)
{
	Reader		reader = {0};

	memset(rows, 0, sizeof(*rows));
	reader.rows = rows;
	reader.request = request;
	reader.rel = open_source(request);
	find_column(&reader);
	scan_rows(&reader);
	table_close(reader.rel, AccessShareLock);
	to_directions(rows, request->metric);
}
