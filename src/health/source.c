/*
 * source.c: reads the rows of cluster_health's input exactly once, under
 * one snapshot, into a sort by (label, order key, tiebreak).  Labels become
 * int8 (any integer type) or text compared bytewise (collation "C"); the
 * tiebreak is the ctid for a table, the output position for a query.  The
 * sort spills to disk beyond clustervec.health_memory and is read twice.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation_d.h"
#include "catalog/pg_operator_d.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "access.h"
#include "health/health_sql.h"
#include "type/cvec.h"

#define FETCH_BATCH 1000

typedef struct Reader
{
	HealthInput *input;
	MemoryContext outer;
	bool		has_order;
	bool		ctid_tiebreak;	/* table form: column 4 of the query is the ctid */
	Oid			label_type;
	CVecLayout	vector_layout;	/* CVEC_LAYOUT_CHECKED: each vector checked */
	int64		seq;
	int			first_dims_row_desc;
} Reader;

/* Checks the label, vector and order key types of the input. */
static void
check_types(Reader *reader, TupleDesc desc, const char *what)
{
	Oid			label = TupleDescAttr(desc, 0)->atttypid;
	Oid			vector = TupleDescAttr(desc, 1)->atttypid;

	if (!cv_label_is_integer(label) && !cv_label_is_text(label))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cluster labels of %s must be an integer type or text, not %s",
						what, format_type_be(label))));
	reader->vector_layout = cvec_layout_of_type(vector);
	if (reader->vector_layout == CVEC_LAYOUT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("vectors of %s must be of type cvec, not %s", what, format_type_be(vector)),
				 errhint("Cast the column, for example embedding::cvec.")));
	if (reader->has_order &&
		!OidIsValid(lookup_type_cache(TupleDescAttr(desc, 2)->atttypid, TYPECACHE_LT_OPR)->lt_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("order key of %s has type %s, which has no ordering",
						what, format_type_be(TupleDescAttr(desc, 2)->atttypid))));
	reader->label_type = label;
	reader->input->text_labels = cv_label_is_text(label);
}

/* The sort: label, vector, order key (if any), tiebreak; keys in that order. */
static void
begin_sort(Reader *reader, TupleDesc source)
{
	HealthInput *input = reader->input;
	TupleDesc	desc = CreateTemplateTupleDesc(4);
	Oid			order_type = reader->has_order ? TupleDescAttr(source, 2)->atttypid : INT8OID;
	AttrNumber	columns[3];
	Oid			operators[3];
	Oid			collations[3];
	bool		nulls_first[3] = {false, false, false};
	int			keys = 0;
	MemoryContext old = MemoryContextSwitchTo(reader->outer);

	TupleDescInitEntry(desc, 1, "label", input->text_labels ? TEXTOID : INT8OID, -1, 0);
	TupleDescInitEntry(desc, 2, "vector", TupleDescAttr(source, 1)->atttypid, -1, 0);
	TupleDescInitEntry(desc, 3, "order_key", order_type, -1, 0);
	TupleDescInitEntry(desc, 4, "tiebreak", reader->ctid_tiebreak ? TIDOID : INT8OID, -1, 0);
	columns[keys] = HEALTH_COL_LABEL;
	operators[keys] = input->text_labels ? TextLessOperator : Int8LessOperator;
	collations[keys++] = input->text_labels ? C_COLLATION_OID : InvalidOid;
	if (reader->has_order)
	{
		columns[keys] = HEALTH_COL_ORDER;
		operators[keys] = lookup_type_cache(order_type, TYPECACHE_LT_OPR)->lt_opr;
		collations[keys++] = TupleDescAttr(source, 2)->attcollation;
	}
	columns[keys] = HEALTH_COL_TIEBREAK;
	operators[keys] = reader->ctid_tiebreak ? TIDLessOperator : Int8LessOperator;
	collations[keys++] = InvalidOid;
	input->slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	input->sort = tuplesort_begin_heap(desc, keys, columns, operators, collations, nulls_first,
									   cv_health_memory_kb, NULL, TUPLESORT_RANDOMACCESS);
	MemoryContextSwitchTo(old);
}

/* Names a row in an error: its ctid for a table, its position for a query. */
static char *
describe_row(Reader *reader, HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;

	if (reader->ctid_tiebreak)
		return psprintf("row %s",
						DatumGetCString(DirectFunctionCall1(tidout,
															SPI_getbinval(tuple, desc, desc->natts,
																		  &isnull))));
	return psprintf("row %lld of the query", (long long) reader->seq);
}

/* Converts an integer label to int8, a text label to text. */
static Datum
normalise_label(Reader *reader, Datum label)
{
	switch (reader->label_type)
	{
		case INT2OID:
			return Int64GetDatum(DatumGetInt16(label));
		case INT4OID:
			return Int64GetDatum(DatumGetInt32(label));
		case INT8OID:
			return label;
		case BPCHAROID:
			return DirectFunctionCall1(rtrim1, label);
	}
	return label;
}

/* One input row into the sort, or counted as skipped. */
static void
take_row(Reader *reader, HeapTuple tuple, TupleDesc desc, TupleTableSlot *in)
{
	HealthInput *input = reader->input;
	bool		label_null,
				vector_null,
				order_null = true;
	Datum		label = SPI_getbinval(tuple, desc, 1, &label_null);
	Datum		vector = SPI_getbinval(tuple, desc, 2, &vector_null);
	Datum		order = reader->has_order ? SPI_getbinval(tuple, desc, 3, &order_null) : (Datum) 0;
	CVec	   *v;

	reader->seq++;
	if (label_null || vector_null)
	{
		input->skipped++;
		return;
	}
	v = DatumGetCVec(vector);
	if (reader->vector_layout == CVEC_LAYOUT_CHECKED)
		cvec_check_stored(v);
	if (input->dimensions == 0)
		input->dimensions = v->dim;
	else if (v->dim != input->dimensions)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors have different dimensions: %s has %d, earlier rows have %d",
						describe_row(reader, tuple, desc), v->dim, input->dimensions)));
	ExecClearTuple(in);
	in->tts_values[0] = normalise_label(reader, label);
	in->tts_isnull[0] = false;
	in->tts_values[1] = PointerGetDatum(v);
	in->tts_isnull[1] = false;
	in->tts_values[2] = order;
	in->tts_isnull[2] = !reader->has_order || order_null;
	if (reader->ctid_tiebreak)
	{
		bool		isnull;

		in->tts_values[3] = SPI_getbinval(tuple, desc, desc->natts, &isnull);
	}
	else
		in->tts_values[3] = Int64GetDatum(reader->seq);
	in->tts_isnull[3] = false;
	ExecStoreVirtualTuple(in);
	tuplesort_puttupleslot(input->sort, in);
	if ((Pointer) v != DatumGetPointer(vector))
		pfree(v);				/* a detoasted copy: rows must not pile up in memory */
	input->rows++;
}

/*
 * Only a plain read can be the input: anything else would fail later with
 * "not allowed in a non-volatile function", which names neither the
 * function nor what is wrong.
 */
static void
check_read_only(SPIPlanPtr plan, const char *what)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	ListCell   *lc;
	bool		reads = list_length(sources) == 1;

	foreach(lc, sources)
	{
		CachedPlanSource *source = (CachedPlanSource *) lfirst(lc);
		ListCell   *qc;

		foreach(qc, source->query_list)
		{
			Query	   *q = lfirst_node(Query, qc);

			reads = reads && q->commandType == CMD_SELECT && !q->hasModifyingCTE &&
				q->rowMarks == NIL && q->utilityStmt == NULL;
		}
	}
	if (!reads)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s of cluster_health must be a single read-only SELECT", what),
				 errhint("Pass a SELECT (or VALUES, TABLE, WITH ... SELECT) without FOR UPDATE or data-modifying WITH clauses.")));
}

/* Runs the query once through a cursor, feeding every row to the sort. */
static void
read_rows(Reader *reader, const char *query, const char *what, int min_columns, int max_columns)
{
	Portal		portal;
	SPIPlanPtr	plan;
	TupleDesc	desc;
	TupleTableSlot *in;

	reader->outer = CurrentMemoryContext;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(query, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	check_read_only(plan, what);
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	desc = portal->tupDesc;
	if (desc->natts < min_columns || desc->natts > max_columns)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s returns %d columns, expected a label, a vector and an optional order key",
						what, desc->natts)));
	reader->has_order = reader->ctid_tiebreak ? desc->natts == 4 : desc->natts == 3;
	check_types(reader, desc, what);
	begin_sort(reader, desc);
	in = MakeSingleTupleTableSlot(reader->input->slot->tts_tupleDescriptor, &TTSOpsVirtual);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_BATCH);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
			take_row(reader, SPI_tuptable->vals[i], SPI_tuptable->tupdesc, in);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(in);
	SPI_cursor_close(portal);
	SPI_finish();
	tuplesort_performsort(reader->input->sort);
}

/* Raises a clear error when the column does not exist. */
void
health_check_column(Oid relid, const char *column, const char *role)
{
	if (get_attnum(relid, column) == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" (the %s column) does not exist in relation \"%s\"",
						column, role, get_rel_name(relid))));
}

void
health_read_table(HealthInput *input, Oid relid, const char *label_column,
				  const char *vector_column, const char *order_column)
{
	Reader		reader = {0};
	StringInfoData query;
	char		relkind;
	char	   *what;

	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relkind = get_rel_relkind(relid);
	/* SELECT, before the parser of the query below locks the table (access.c) */
	cv_check_select(relid);

	health_check_column(relid, label_column, "cluster");
	health_check_column(relid, vector_column, "vector");
	if (order_column)
		health_check_column(relid, order_column, "order");
	reader.input = input;
	reader.ctid_tiebreak = relkind == RELKIND_RELATION || relkind == RELKIND_MATVIEW;
	initStringInfo(&query);
	appendStringInfo(&query, "SELECT %s, %s", quote_identifier(label_column),
					 quote_identifier(vector_column));
	if (order_column)
		appendStringInfo(&query, ", %s", quote_identifier(order_column));
	if (reader.ctid_tiebreak)
		appendStringInfoString(&query, ", ctid");
	appendStringInfo(&query, " FROM %s",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												get_rel_name(relid)));
	what = psprintf("relation \"%s\"", get_rel_name(relid));
	read_rows(&reader, query.data, what, reader.ctid_tiebreak ? 3 : 2, reader.ctid_tiebreak ? 4 : 3);
}

void
health_read_query(HealthInput *input, const char *query)
{
	Reader		reader = {0};

	reader.input = input;
	read_rows(&reader, query, "the query", 2, 3);
}
