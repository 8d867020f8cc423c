/*
 * shard.c: the two rounds of a distributed cluster_health as each shard
 * runs them (distributed.c sends them through Citus).
 *
 * cluster_health_shard_centroids runs pass 1 on one shard: every cluster's
 * n, centroid, mean_dist and mean_norm, which are all the neighbour family
 * and g need of a cluster.  cluster_health_shard runs both passes on the
 * shard with the set of every cluster of the table in place of the shard's
 * own: the same engine, the same float64 code on the same members in the
 * same order, and the same centroid set as on one node, so a shard's rows
 * are the single-node rows bit for bit.  Both answer one JSON text (one
 * value, what Citus' run_command_on_shards returns), floats in the shortest
 * form that reads back to the same double.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"

#include "health/health_sql.h"

PG_FUNCTION_INFO_V1(cluster_health_shard_centroids);
PG_FUNCTION_INFO_V1(cluster_health_shard);

/*
 * A double that reads back bit for bit; JSON has no infinity, so it is
 * quoted as float8in spells it.
 */
void
health_append_double(StringInfo out, double x)
{
	char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];

	if (isinf(x))
		appendStringInfoString(out, x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	else
	{
		double_to_shortest_decimal_buf(x, buf);
		appendStringInfoString(out, buf);
	}
}

/* count doubles, exact to the bit, comma-separated between open and close. */
void
health_append_double_list(StringInfo out, const double *x, int64 count, char open, char close)
{
	appendStringInfoChar(out, open);
	for (int64 i = 0; i < count; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		health_append_double(out, x[i]);
	}
	appendStringInfoChar(out, close);
}

/* A label as a JSON string: the integer's digits, or the text escaped. */
static void
append_label(StringInfo out, const HealthRun *run, Datum label)
{
	if (run->input.text_labels)
		escape_json(out, TextDatumGetCString(label));
	else
		appendStringInfo(out, "\"" INT64_FORMAT "\"", DatumGetInt64(label));
}

/* Reads the shard's rows (arguments 0..3) into run. */
static void
read_shard(FunctionCallInfo fcinfo, HealthRun *run)
{
	for (int i = 0; i < 3; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("source and columns of cluster_health_shard must not be null")));
	health_read_table(&run->input, PG_GETARG_OID(0), NameStr(*PG_GETARG_NAME(1)),
					  NameStr(*PG_GETARG_NAME(2)),
					  PG_ARGISNULL(3) ? NULL : NameStr(*PG_GETARG_NAME(3)));
}

/* Round 1: {"skipped": s, "clusters": [{"label", "n", "mean_dist", "mean_norm", "centroid"}]}. */
Datum
cluster_health_shard_centroids(PG_FUNCTION_ARGS)
{
	HealthRun	run = {0};
	StringInfoData out;

	/* pass 1 reads no parameter that its four columns used here depend on */
	run.params.outlier_z = 2.0;
	run.families = HEALTH_FAMILY_CENTROIDS;
	read_shard(fcinfo, &run);
	health_run(&run);
	initStringInfo(&out);
	appendStringInfo(&out, "{\"skipped\":" INT64_FORMAT ",\"clusters\":[", run.input.skipped);
	for (int64 i = 0; i < run.k; i++)
	{
		const HealthCluster *c = &run.clusters[i];

		appendStringInfoString(&out, i > 0 ? ",{\"label\":" : "{\"label\":");
		append_label(&out, &run, c->label);
		appendStringInfo(&out, ",\"n\":" INT64_FORMAT ",\"mean_dist\":", c->n);
		health_append_double(&out, c->stats.value[CV_STAT_MEAN_DIST]);
		appendStringInfoString(&out, ",\"mean_norm\":");
		health_append_double(&out, c->stats.value[CV_STAT_MEAN_NORM]);
		appendStringInfoString(&out, ",\"centroid\":");
		health_append_double_list(&out, c->centroid, run.input.dimensions, '[', ']');
		appendStringInfoChar(&out, '}');
	}
	appendStringInfoString(&out, "]}");
	PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, out.len));
}

/* The elements of a one-dimensional array without NULLs, of count elements when count >= 0. */
static void *
array_values(FunctionCallInfo fcinfo, int argno, Oid type, int64 count, int64 *found)
{
	ArrayType  *a;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the centroid set of cluster_health_shard must not be null")));
	a = PG_GETARG_ARRAYTYPE_P(argno);
	*found = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	if (ARR_ELEMTYPE(a) != type || ARR_HASNULL(a) || ARR_NDIM(a) > 1 ||
		(count >= 0 && *found != count))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the centroid set of cluster_health_shard is malformed")));
	return ARR_DATA_PTR(a);
}

/* The labels (argument 4) as the sort holds them: int8, or text. */
static Datum *
global_labels(FunctionCallInfo fcinfo, const HealthRun *run, int64 *k)
{
	Datum	   *labels;
	bool	   *nulls;
	int			count;

	(void) array_values(fcinfo, 4, TEXTOID, -1, k);
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(4), TEXTOID, -1, false, TYPALIGN_INT,
					  &labels, &nulls, &count);
	if (!run->input.text_labels)
		for (int i = 0; i < count; i++)
			labels[i] = Int64GetDatum(pg_strtoint64(TextDatumGetCString(labels[i])));
	return labels;
}

/* The table's centroid set, arguments 4..8: labels, n, mean_dist, mean_norm, centroids. */
static HealthGlobalSet *
global_set(FunctionCallInfo fcinfo, const HealthRun *run)
{
	HealthGlobalSet *set = palloc0(sizeof(HealthGlobalSet));
	int64		found;

	set->labels = global_labels(fcinfo, run, &set->k);
	set->n = array_values(fcinfo, 5, INT8OID, set->k, &found);
	set->mean_dist = array_values(fcinfo, 6, FLOAT8OID, set->k, &found);
	set->mean_norm = array_values(fcinfo, 7, FLOAT8OID, set->k, &found);
	set->centroids = array_values(fcinfo, 8, FLOAT8OID, -1, &found);
	if (set->k == 0 || found % set->k != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the centroid set of cluster_health_shard is malformed")));
	set->d = (int) (found / set->k);
	return set;
}

/* One cluster's row: {"i": its number in the table, "r": effective_rank refused, "s": [38]}. */
static void
append_row(StringInfo out, const HealthRun *run, int64 i)
{
	const CvClusterStats *stats = &run->clusters[i].stats;

	appendStringInfo(out, "{\"i\":" INT64_FORMAT ",\"r\":%s,\"s\":[", run->global_index[i],
					 stats->rank_refused ? "true" : "false");
	for (int c = 0; c < CV_STAT_COUNT; c++)
	{
		if (c > 0)
			appendStringInfoChar(out, ',');
		if (stats->is_null[c])
			appendStringInfoString(out, "null");
		else if (isnan(stats->value[c]))
			elog(ERROR, "cluster_health computed NaN for %s", cv_stat_names[c]);
		else
			health_append_double(out, stats->value[c]);
	}
	appendStringInfoString(out, "]}");
}

/*
 * Round 2: {"rows": [...]}, every statistic of the shard's clusters against
 * the table's centroid set; nearest_cluster holds a number in that set.
 * Arguments: source, columns (0..3), the set (4..8), the parameters
 * (9..15, as cluster_health's) and summary (16: the families the summary needs).
 */
Datum
cluster_health_shard(PG_FUNCTION_ARGS)
{
	HealthRun	run = {0};
	StringInfoData out;

	health_read_parameters(fcinfo, 9, &run);
	run.families = !PG_ARGISNULL(16) && PG_GETARG_BOOL(16) ? HEALTH_FAMILY_SUMMARY : HEALTH_FAMILY_ALL;
	read_shard(fcinfo, &run);
	run.external = global_set(fcinfo, &run);
	health_run(&run);
	initStringInfo(&out);
	appendStringInfoString(&out, "{\"rows\":[");
	for (int64 i = 0; i < run.k; i++)
	{
		if (i > 0)
			appendStringInfoChar(&out, ',');
		append_row(&out, &run, i);
	}
	appendStringInfoString(&out, "]}");
	PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, out.len));
}
