/*
 * distributed.c: cluster_health of a Citus table distributed by its
 * cluster column, computed on the shards.
 *
 * Each cluster then lives on one shard, so everything but what needs other
 * clusters can run where the rows are; what needs them (g for novelty and
 * between_ss, the neighbour family, escape_probability) needs only every
 * cluster's centroid, n, mean_dist and mean_norm, except neighbour_relevance
 * and centroid_silhouette, which need each member against the neighbours'
 * centroids.  So there are two rounds, each run on every shard in parallel
 * through Citus' run_command_on_shards (shard.c holds the shard side):
 *
 *   1. each shard: pass 1 of its clusters (n, centroid, mean_dist, mean_norm);
 *   2. the coordinator puts them in label order, the set one node would
 *      build, and sends the set to every shard, which runs both passes of
 *      its clusters against it.
 *
 * The coordinator reads no rows and only orders and copies the answers.
 * Rows move from the shards only as statistics, never as vectors.  Each
 * round runs in its own transactions on the workers (as Citus runs
 * run_command_on_shards): a shard whose rows changed between the rounds
 * refuses to answer (its centroids must match round 1's bit for bit), and
 * rows written but not committed by the calling transaction are not seen.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "access.h"
#include "citus.h"
#include "health/health_sql.h"

/* What both rounds send: the table and the call's columns. */
typedef struct Target
{
	Oid			relid;
	const char *schema;			/* clustervec's schema, the same on every node */
	const char *label;
	const char *vector;
	const char *order;			/* NULL: none */
	MemoryContext outer;		/* where the run's results live (SPI's go with it) */
} Target;

/* Appends s to a command for run_command_on_shards, whose format() reads '%'. */
static void
append_escaped(StringInfo command, const char *s)
{
	for (; *s; s++)
	{
		if (*s == '%')
			appendStringInfoChar(command, '%');
		appendStringInfoChar(command, *s);
	}
}

/* "SELECT schema.function(<the shard>, label, vector, order": the start of both commands. */
static void
begin_command(StringInfo command, const Target *target, const char *function)
{
	StringInfoData columns;

	initStringInfo(&columns);
	appendStringInfo(&columns, "%s, %s, %s", quote_literal_cstr(target->label),
					 quote_literal_cstr(target->vector),
					 target->order ? quote_literal_cstr(target->order) : "NULL");
	initStringInfo(command);
	appendStringInfoString(command, "SELECT ");
	append_escaped(command, quote_identifier(target->schema));
	appendStringInfo(command, ".%s(%%L::regclass, ", function);
	append_escaped(command, columns.data);
}

/* Runs command on every shard of the table; the answers are SPI_tuptable. */
static void
run_on_shards(const Target *target, const char *query, const char *command)
{
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(target->relid);
	values[1] = CStringGetTextDatum(command);
	if (SPI_execute_with_args(query, 2, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "cluster_health could not run on the shards: %s",
			 SPI_result_code_string(SPI_result));
}

/* Raises a shard's failure (column 2 false) with what it answered (column 3). */
static void
check_shard_answer(const Target *target, HeapTuple row, TupleDesc desc)
{
	bool		isnull;

	if (DatumGetBool(SPI_getbinval(row, desc, 2, &isnull)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 errmsg("cluster_health failed on shard %s of \"%s\"", SPI_getvalue(row, desc, 1),
					get_rel_name(target->relid)),
			 errdetail("The shard answered: %s", SPI_getvalue(row, desc, 3))));
}

/* Round 1's query: one row per cluster, in label order, and each shard's skipped rows once. */
static const char *
round1_query(bool text_labels)
{
	return psprintf("SELECT s.shardid, s.success, s.result, c.label, c.n, c.mean_dist, "
					"c.mean_norm, c.centroid, CASE WHEN row_number() OVER (PARTITION BY s.shardid) = 1 "
					"THEN (x.j ->> 'skipped')::int8 ELSE 0 END "
					"FROM pg_catalog.run_command_on_shards($1, $2) s "
					"CROSS JOIN LATERAL (SELECT CASE WHEN s.success THEN s.result::json END AS j) x "
					"LEFT JOIN LATERAL json_to_recordset(x.j -> 'clusters') AS c(label text, n int8, "
					"mean_dist float8, mean_norm float8, centroid float8[]) ON true "
					"ORDER BY c.label IS NULL, %s",
					text_labels ? "c.label COLLATE \"C\"" : "c.label::int8");
}

/* The float8[] column of a row as a palloc'd copy in context, with its length. */
static double *
copy_doubles(Datum array, MemoryContext context, int *count)
{
	ArrayType  *a = DatumGetArrayTypeP(array);
	double	   *copy;

	*count = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	if (ARR_HASNULL(a))
		elog(ERROR, "cluster_health: a shard sent a NULL float");
	copy = MemoryContextAllocHuge(context, sizeof(double) * Max(*count, 1));
	memcpy(copy, ARR_DATA_PTR(a), sizeof(double) * *count);
	return copy;
}

/* The label of a round-1 row as the sort would hold it, in the run's context. */
static Datum
row_label(const HealthRun *run, Datum shown, MemoryContext context)
{
	MemoryContext old;
	Datum		label;

	if (!run->input.text_labels)
		return Int64GetDatum(pg_strtoint64(TextDatumGetCString(shown)));
	old = MemoryContextSwitchTo(context);
	label = PointerGetDatum(PG_DETOAST_DATUM_COPY(shown));
	MemoryContextSwitchTo(old);
	return label;
}

/* One round-1 cluster row (prev: the one before, or NULL) into run->clusters[run->k]. */
static void
take_cluster(HealthRun *run, const Target *target, HeapTuple row, HeapTuple prev, TupleDesc desc)
{
	HealthCluster *c = &run->clusters[run->k];
	bool		isnull;
	int			d;

	/* one cluster, one shard: the table is distributed by it */
	if (prev && strcmp(SPI_getvalue(row, desc, 4), SPI_getvalue(prev, desc, 4)) == 0)
		elog(ERROR, "cluster_health: cluster %s is on two shards", SPI_getvalue(row, desc, 4));
	memset(c, 0, sizeof(*c));
	c->label = row_label(run, SPI_getbinval(row, desc, 4, &isnull), target->outer);
	c->n = DatumGetInt64(SPI_getbinval(row, desc, 5, &isnull));
	c->stats.value[CV_STAT_MEAN_DIST] = DatumGetFloat8(SPI_getbinval(row, desc, 6, &isnull));
	c->stats.value[CV_STAT_MEAN_NORM] = DatumGetFloat8(SPI_getbinval(row, desc, 7, &isnull));
	c->centroid = copy_doubles(SPI_getbinval(row, desc, 8, &isnull), target->outer, &d);
	if (run->input.dimensions == 0)
		run->input.dimensions = d;
	else if (d != run->input.dimensions)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors have different dimensions: cluster %s has %d, other clusters have %d",
						SPI_getvalue(row, desc, 4), d, run->input.dimensions)));
	run->input.rows += c->n;
	run->k++;
}

/* Round 1: every cluster's centroid family, in label order, into run. */
static void
round1(HealthRun *run, const Target *target)
{
	StringInfoData command;
	TupleDesc	desc;
	bool		isnull;

	begin_command(&command, target, "cluster_health_shard_centroids");
	appendStringInfoString(&command, ")");
	run_on_shards(target, round1_query(run->input.text_labels), command.data);
	desc = SPI_tuptable->tupdesc;
	run->clusters = MemoryContextAllocHuge(target->outer,
										   sizeof(HealthCluster) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];

		check_shard_answer(target, row, desc);
		run->input.skipped += DatumGetInt64(SPI_getbinval(row, desc, 9, &isnull));
		(void) SPI_getbinval(row, desc, 4, &isnull);
		if (!isnull)
			take_cluster(run, target, row, i > 0 ? SPI_tuptable->vals[i - 1] : NULL, desc);
	}
}

/* A float8[] literal of count doubles, exact to the bit. */
static void
append_double_array(StringInfo out, const double *x, int64 count)
{
	appendStringInfoChar(out, '\'');
	health_append_double_list(out, x, count, '{', '}');
	appendStringInfoString(out, "'::float8[], ");
}

/* The labels as a text[] literal, in the run's order. */
static void
append_labels(StringInfo out, const HealthRun *run)
{
	Datum	   *texts = palloc(sizeof(Datum) * run->k);
	ArrayType  *array;

	for (int64 i = 0; i < run->k; i++)
		texts[i] = run->input.text_labels ? run->clusters[i].label :
			CStringGetTextDatum(psprintf(INT64_FORMAT, DatumGetInt64(run->clusters[i].label)));
	array = construct_array(texts, (int) run->k, TEXTOID, -1, false, TYPALIGN_INT);
	appendStringInfo(out, ", %s::text[], ",
					 quote_literal_cstr(OidOutputFunctionCall(F_ARRAY_OUT,
															  PointerGetDatum(array))));
}

/* The set: labels, n, mean_dist, mean_norm and the centroids, in label order. */
static void
append_set(StringInfo out, const HealthRun *run)
{
	int			d = run->input.dimensions;
	double	   *mean_dist = palloc(sizeof(double) * run->k);
	double	   *mean_norm = palloc(sizeof(double) * run->k);
	double	   *flat = palloc_extended(sizeof(double) * d * run->k, MCXT_ALLOC_HUGE);

	append_labels(out, run);
	appendStringInfoString(out, "'{");
	for (int64 i = 0; i < run->k; i++)
	{
		appendStringInfo(out, i > 0 ? "," INT64_FORMAT : INT64_FORMAT, run->clusters[i].n);
		mean_dist[i] = run->clusters[i].stats.value[CV_STAT_MEAN_DIST];
		mean_norm[i] = run->clusters[i].stats.value[CV_STAT_MEAN_NORM];
		memcpy(flat + i * d, run->clusters[i].centroid, sizeof(double) * d);
	}
	appendStringInfoString(out, "}'::int8[], ");
	append_double_array(out, mean_dist, run->k);
	append_double_array(out, mean_norm, run->k);
	append_double_array(out, flat, run->k * d);
	pfree(flat);
}

/* The parameters as cluster_health got them (progress off), and summary. */
static void
append_parameters(StringInfo out, const HealthRun *run)
{
	const CvHealthParams *p = &run->params;

	health_append_double(out, p->outlier_z);
	appendStringInfoString(out, "::float8, ");
	health_append_double(out, p->dup_cos);
	appendStringInfo(out, "::float8, %d, %d, %d, %d, false, %s)", p->neighbours, p->sigma_bins,
					 p->entropy_bins, p->rank_max_members,
					 run->families == HEALTH_FAMILY_SUMMARY ? "true" : "false");
}

#define ROUND2_QUERY \
	"SELECT s.shardid, s.success, s.result, r.i, r.r, r.s " \
	"FROM pg_catalog.run_command_on_shards($1, $2) s " \
	"CROSS JOIN LATERAL (SELECT CASE WHEN s.success THEN s.result::json END AS j) x " \
	"LEFT JOIN LATERAL json_to_recordset(x.j -> 'rows') AS r(i int8, r bool, s float8[]) ON true"

/* One round-2 row: the statistics of cluster i (column 4) from column 6. */
static void
take_statistics(HealthRun *run, HeapTuple row, TupleDesc desc, bool *seen)
{
	bool		isnull;
	int64		i = DatumGetInt64(SPI_getbinval(row, desc, 4, &isnull));
	CvClusterStats *stats;
	Datum	   *values;
	bool	   *nulls;
	int			count;

	if (isnull)
		return;					/* a shard without clusters */
	if (i < 0 || i >= run->k || seen[i])
		elog(ERROR, "cluster_health: a shard answered for cluster " INT64_FORMAT " unexpectedly", i);
	seen[i] = true;
	stats = &run->clusters[i].stats;
	stats->rank_refused = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
	deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(row, desc, 6, &isnull)), FLOAT8OID, 8,
					  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &values, &nulls, &count);
	if (count != CV_STAT_COUNT)
		elog(ERROR, "cluster_health: a shard answered %d statistics, not %d", count, CV_STAT_COUNT);
	for (int c = 0; c < CV_STAT_COUNT; c++)
	{
		stats->is_null[c] = nulls[c];
		stats->value[c] = nulls[c] ? 0 : DatumGetFloat8(values[c]);
	}
	if (stats->rank_refused)
		run->refused++;
}

/* Round 2: every statistic of every cluster, against the set round 1 made. */
static void
round2(HealthRun *run, const Target *target)
{
	StringInfoData command;
	StringInfoData tail;
	bool	   *seen = palloc0(sizeof(bool) * run->k);

	begin_command(&command, target, "cluster_health_shard");
	initStringInfo(&tail);
	append_set(&tail, run);
	append_parameters(&tail, run);
	append_escaped(&command, tail.data);
	pfree(tail.data);
	run_on_shards(target, ROUND2_QUERY, command.data);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		check_shard_answer(target, SPI_tuptable->vals[r], SPI_tuptable->tupdesc);
		take_statistics(run, SPI_tuptable->vals[r], SPI_tuptable->tupdesc, seen);
	}
	for (int64 i = 0; i < run->k; i++)
		if (!seen[i])
			elog(ERROR, "cluster_health: no shard answered for cluster " INT64_FORMAT, i);
}

/*
 * When relid is a Citus table hash-distributed by label_column, computes
 * cluster_health on its shards into run (run->clusters, k, input counts)
 * and returns true; otherwise returns false and the caller reads the table
 * here, through Citus' executor: correct for any distribution, but every
 * row comes to this node.
 */
bool
health_run_distributed(HealthRun *run, Oid schema, Oid relid, const char *label_column,
					   const char *vector_column, const char *order_column)
{
	char	   *column = get_rel_name(relid) ? cv_citus_distribution_column(relid) : NULL;
	Oid			label_type;
	Target		target;

	if (column == NULL || strcmp(column, label_column) != 0)
		return false;
	/* other label types: the coordinator path raises the single node's error */
	label_type = get_atttype(relid, get_attnum(relid, label_column));
	if (!cv_label_is_integer(label_type) && !cv_label_is_text(label_type))
		return false;
	cv_check_select(relid);
	health_check_column(relid, vector_column, "vector");
	if (order_column)
		health_check_column(relid, order_column, "order");
	ereport(DEBUG1,
			(errmsg("cluster_health computes on the shards of \"%s\"", get_rel_name(relid))));
	target.relid = relid;
	target.schema = get_namespace_name(schema);
	target.label = label_column;
	target.vector = vector_column;
	target.order = order_column;
	target.outer = CurrentMemoryContext;
	run->input.text_labels = cv_label_is_text(label_type);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	round1(run, &target);
	if (run->k > 0)
		round2(run, &target);
	SPI_finish();
	return true;
}
