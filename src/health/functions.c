/*
 * functions.c: the SQL entry points cluster_health, cluster_health_query and
 * cluster_health_summary, their parameter checks, and the rows they return.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "health/health_sql.h"

PG_FUNCTION_INFO_V1(cluster_health);
PG_FUNCTION_INFO_V1(cluster_health_query);
PG_FUNCTION_INFO_V1(cluster_health_summary);

int			cv_health_memory_kb = 256 * 1024;

/* Output columns: cluster, the 38 statistics, cluster_text, nearest_cluster_text. */
#define HEALTH_RESULT_COLUMNS (1 + CV_STAT_COUNT + 2)

void		cv_health_define_settings(void);

void
cv_health_define_settings(void)
{
	DefineCustomIntVariable("clustervec.health_memory",
							"Memory cluster_health uses for sorting rows and for each chunk of clusters.",
							"Beyond it rows spill to disk and clusters are processed in chunks.",
							&cv_health_memory_kb, 256 * 1024, 1024, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
}

static void
require_argument(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

static void
check_range(bool ok, const char *name, const char *range)
{
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is out of range", name),
				 errdetail("%s must be %s.", name, range)));
}

/* Reads outlier_z .. progress starting at argument first, checking STATISTICS.md's ranges. */
void
health_read_parameters(FunctionCallInfo fcinfo, int first, HealthRun *run)
{
	CvHealthParams *p = &run->params;
	static const char *const names[] = {"outlier_z", "dup_cos", "neighbours", "sigma_bins",
	"entropy_bins", "rank_max_members", "progress"};

	for (int i = 0; i < 7; i++)
		require_argument(fcinfo, first + i, names[i]);
	p->outlier_z = PG_GETARG_FLOAT8(first);
	p->dup_cos = PG_GETARG_FLOAT8(first + 1);
	p->neighbours = PG_GETARG_INT32(first + 2);
	p->sigma_bins = PG_GETARG_INT32(first + 3);
	p->entropy_bins = PG_GETARG_INT32(first + 4);
	p->rank_max_members = PG_GETARG_INT32(first + 5);
	run->progress = PG_GETARG_BOOL(first + 6);
	check_range(p->outlier_z >= 0 && isfinite(p->outlier_z), "outlier_z", "a finite number >= 0");
	check_range(p->dup_cos > 0 && p->dup_cos <= 1, "dup_cos", "in (0, 1]");
	check_range(p->neighbours >= 1, "neighbours", ">= 1");
	check_range(p->sigma_bins >= 2 && p->sigma_bins <= CV_HEALTH_MAX_BINS, "sigma_bins",
				"between 2 and " CppAsString2(CV_HEALTH_MAX_BINS));
	check_range(p->entropy_bins >= 2 && p->entropy_bins <= CV_HEALTH_MAX_BINS, "entropy_bins",
				"between 2 and " CppAsString2(CV_HEALTH_MAX_BINS));
	check_range(p->rank_max_members >= 2, "rank_max_members", ">= 2");
}

/*
 * The table form (arguments 0..3): on the shards of a Citus table
 * distributed by the cluster column (distributed.c), else here.
 */
static void
run_table(FunctionCallInfo fcinfo, HealthRun *run)
{
	Oid			relid;
	const char *label;
	const char *vector;
	const char *order;

	require_argument(fcinfo, 0, "source");
	require_argument(fcinfo, 1, "cluster_column");
	require_argument(fcinfo, 2, "vector_column");
	relid = PG_GETARG_OID(0);
	label = NameStr(*PG_GETARG_NAME(1));
	vector = NameStr(*PG_GETARG_NAME(2));
	order = PG_ARGISNULL(3) ? NULL : NameStr(*PG_GETARG_NAME(3));
	if (health_run_distributed(run, get_func_namespace(fcinfo->flinfo->fn_oid), relid,
							   label, vector, order))
		return;
	health_read_table(&run->input, relid, label, vector, order);
	health_run(run);
}

/* NOTICEs about skipped rows and refused clusters. */
void
health_report_notices(const HealthRun *run)
{
	if (run->input.skipped > 0)
		ereport(NOTICE,
				(errmsg("cluster_health skipped %lld rows with a NULL label or vector",
						(long long) run->input.skipped)));
	if (run->refused > 0)
		ereport(NOTICE,
				(errmsg("effective_rank is NULL for %lld clusters of more than %d members",
						(long long) run->refused, run->params.rank_max_members),
				 errhint("Raise rank_max_members to compute it; its cost grows with the cube of the members.")));
}

/* The label as cluster_health shows it: the integer, or the rank for text labels. */
static int64
label_number(const HealthRun *run, int64 index)
{
	return run->input.text_labels ? index + 1 : DatumGetInt64(run->clusters[index].label);
}

static Datum
label_text(const HealthRun *run, int64 index)
{
	if (run->input.text_labels)
		return run->clusters[index].label;
	return CStringGetTextDatum(psprintf(INT64_FORMAT, DatumGetInt64(run->clusters[index].label)));
}

/* One result row; a NaN that is not NULL is a defect, never returned. */
static void
put_cluster_row(const HealthRun *run, int64 index, Tuplestorestate *store, TupleDesc desc)
{
	const CvClusterStats *stats = &run->clusters[index].stats;
	Datum		values[HEALTH_RESULT_COLUMNS];
	bool		nulls[HEALTH_RESULT_COLUMNS] = {0};
	int64		nearest;

	values[0] = Int64GetDatum(label_number(run, index));
	for (int c = 0; c < CV_STAT_COUNT; c++)
	{
		nulls[1 + c] = stats->is_null[c];
		if (!stats->is_null[c] && isnan(stats->value[c]))
			elog(ERROR, "cluster_health computed NaN for %s of cluster " INT64_FORMAT,
				 cv_stat_names[c], label_number(run, index));
		values[1 + c] = Float8GetDatum(stats->value[c]);
	}
	values[1 + CV_STAT_N] = Int64GetDatum(run->clusters[index].n);
	nulls[1 + CV_STAT_N] = false;
	values[1 + CV_STAT_COUNT] = label_text(run, index);
	nulls[2 + CV_STAT_COUNT] = stats->is_null[CV_STAT_NEAREST_CLUSTER];
	if (!nulls[2 + CV_STAT_COUNT])
	{
		nearest = (int64) stats->value[CV_STAT_NEAREST_CLUSTER];
		values[1 + CV_STAT_NEAREST_CLUSTER] = Int64GetDatum(label_number(run, nearest));
		values[2 + CV_STAT_COUNT] = label_text(run, nearest);
	}
	tuplestore_putvalues(store, desc, values, nulls);
}

static void
return_rows(FunctionCallInfo fcinfo, HealthRun *run)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != HEALTH_RESULT_COLUMNS)
		elog(ERROR, "cluster_health returns %d columns, its SQL declaration %d",
			 HEALTH_RESULT_COLUMNS, rsinfo->setDesc->natts);
	for (int64 i = 0; i < run->k; i++)
		put_cluster_row(run, i, rsinfo->setResult, rsinfo->setDesc);
}

Datum
cluster_health(PG_FUNCTION_ARGS)
{
	HealthRun	run = {0};

	health_read_parameters(fcinfo, 4, &run);
	run_table(fcinfo, &run);
	health_report_notices(&run);
	return_rows(fcinfo, &run);
	return (Datum) 0;
}

Datum
cluster_health_query(PG_FUNCTION_ARGS)
{
	HealthRun	run = {0};

	require_argument(fcinfo, 0, "query");
	health_read_parameters(fcinfo, 1, &run);
	health_read_query(&run.input, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	health_run(&run);
	health_report_notices(&run);
	return_rows(fcinfo, &run);
	return (Datum) 0;
}

/* Member-weighted mean of a column over the clusters where it is not NULL. */
static Datum
weighted_mean(const HealthRun *run, CvStat column, bool *isnull)
{
	double		sum = 0;
	double		weight = 0;

	for (int64 i = 0; i < run->k; i++)
		if (!run->clusters[i].stats.is_null[column])
		{
			sum += run->clusters[i].n * run->clusters[i].stats.value[column];
			weight += run->clusters[i].n;
		}
	*isnull = weight == 0;
	return Float8GetDatum(weight > 0 ? sum / weight : 0);
}

/* Davies-Bouldin and Calinski-Harabasz as scikit-learn computes them. */
static void
global_indexes(const HealthRun *run, Datum *values, bool *nulls)
{
	double		db = 0,
				between = 0,
				within = 0;
	int64		rows = run->input.rows;

	for (int64 i = 0; i < run->k; i++)
	{
		db += run->clusters[i].stats.value[CV_STAT_DB_RATIO];
		between += run->clusters[i].stats.value[CV_STAT_BETWEEN_SS];
		within += run->clusters[i].stats.value[CV_STAT_INERTIA];
	}
	nulls[2] = run->k < 2;
	values[2] = Float8GetDatum(run->k > 0 ? db / run->k : 0);
	nulls[3] = run->k < 2 || run->k >= rows;
	if (within == 0)
		values[3] = Float8GetDatum(1.0);
	else
		values[3] = Float8GetDatum((between / (run->k - 1)) / (within / (rows - run->k)));
}

Datum
cluster_health_summary(PG_FUNCTION_ARGS)
{
	HealthRun	run = {0};
	TupleDesc	desc;
	Datum		values[6];
	bool		nulls[6] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "cluster_health_summary must return a composite type");
	health_read_parameters(fcinfo, 4, &run);
	run.families = HEALTH_FAMILY_SUMMARY;
	run_table(fcinfo, &run);
	health_report_notices(&run);
	values[0] = Int64GetDatum(run.k);
	values[1] = Int64GetDatum(run.input.rows);
	global_indexes(&run, values, nulls);
	values[4] = weighted_mean(&run, CV_STAT_COHESION, &nulls[4]);
	values[5] = weighted_mean(&run, CV_STAT_CENTROID_SILHOUETTE, &nulls[5]);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
