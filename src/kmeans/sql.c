/*
 * sql.c: kmeans(source, vector_column, k, iterations, seed, metric) and
 * kmeans_centroids(...) with the same arguments.  kmeans returns every
 * clustered row (tid, cluster, distance to its centroid), in TID order;
 * kmeans_centroids every cluster (its centroid, members and inertia).
 * Clusters are numbered from 0, as cvivf_lists numbers lists.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "kmeans/kmeans.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(kmeans);
PG_FUNCTION_INFO_V1(kmeans_centroids);

/* The metric by its SQL name, as the operator classes name them. */
static CvMetric
parse_metric(const char *name)
{
	if (strcmp(name, "l2") == 0)
		return CV_METRIC_L2;
	if (strcmp(name, "ip") == 0)
		return CV_METRIC_INNER_PRODUCT;
	if (strcmp(name, "cosine") == 0)
		return CV_METRIC_COSINE;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown k-means metric \"%s\"", name),
			 errhint("Use 'l2' (k-means on Euclidean distance), 'ip' (inner product) or 'cosine'.")));
	return CV_METRIC_L2;		/* keep the compiler quiet */
}

/* An argument that must not be NULL. */
static void
check_not_null(FunctionCallInfo fcinfo, int arg, const char *name, const char *function)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s of %s must not be NULL", name, function)));
}

/* The arguments, checked before any table is read. */
static void
read_arguments(FunctionCallInfo fcinfo, const char *function, KmeansRequest *request)
{
	static const char *const names[] = {"source", "vector_column", "k", "iterations", "seed",
	"metric"};

	for (int arg = 0; arg < (int) lengthof(names); arg++)
		check_not_null(fcinfo, arg, names[arg], function);
	request->function = function;
	request->relid = PG_GETARG_OID(0);
	request->column = NameStr(*PG_GETARG_NAME(1));
	request->k = PG_GETARG_INT32(2);
	request->iterations = PG_GETARG_INT32(3);
	request->seed = (uint64) PG_GETARG_INT64(4);
	request->metric = parse_metric(text_to_cstring(PG_GETARG_TEXT_PP(5)));
	if (request->k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1, not %d", request->k),
				 errhint("Pass the number of clusters wanted.")));
	if (request->iterations < 0 || request->iterations > 10000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("iterations must be between 0 and 10000, not %d", request->iterations),
				 errhint("0 returns the k-means++ seeds with the rows nearest each.")));
}

/* The rows, with the NOTICE of those skipped and the errors of too few. */
static void
read_rows(const KmeansRequest *request, KmeansRows *rows)
{
	kmeans_read_rows(request, rows);
	if (rows->nulls > 0)
		ereport(NOTICE,
				(errmsg("%s skipped " INT64_FORMAT " rows whose vector is NULL",
						request->function, rows->nulls)));
	if (rows->zeros > 0)
		ereport(NOTICE,
				(errmsg("%s skipped " INT64_FORMAT " rows whose vector is zero",
						request->function, rows->zeros),
				 errdetail("A zero vector has no cosine distance to anything.")));
	if (rows->n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s found no rows to cluster in relation \"%s\"",
						request->function, get_rel_name(request->relid)),
				 errhint("The table is empty, or every row's vector is NULL%s.",
						 request->metric == CV_METRIC_COSINE ? " or zero" : "")));
	if (request->k > rows->n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k (%d) is larger than the " INT64_FORMAT " rows to cluster",
						request->k, rows->n),
				 errhint("Ask for at most " INT64_FORMAT " clusters.", rows->n)));
}

/* Reads and clusters, in the function's memory; the caller emits. */
static void
cluster(FunctionCallInfo fcinfo, const char *function, KmeansRows *rows, KmeansResult *result)
{
	KmeansRequest request = {0};

	read_arguments(fcinfo, function, &request);
	read_rows(&request, rows);
	kmeans_run(&request, rows, result);
}

Datum
kmeans(PG_FUNCTION_ARGS)
{
	KmeansRows	rows;
	KmeansResult result;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	cluster(fcinfo, "kmeans", &rows, &result);
	InitMaterializedSRF(fcinfo, 0);
	for (int64 i = 0; i < rows.n; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {0};

		values[0] = PointerGetDatum(&rows.tids[i]);
		values[1] = Int32GetDatum(result.cluster[i]);
		values[2] = Float8GetDatum(result.distance[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
kmeans_centroids(PG_FUNCTION_ARGS)
{
	KmeansRows	rows;
	KmeansResult result;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	cluster(fcinfo, "kmeans_centroids", &rows, &result);
	InitMaterializedSRF(fcinfo, 0);
	for (int c = 0; c < result.k; c++)
	{
		CVec	   *centroid = cvec_alloc(rows.d);
		Datum		values[4];
		bool		nulls[4] = {0};

		memcpy(centroid->x, result.centroids + (Size) c * rows.d, sizeof(float) * rows.d);
		values[0] = Int32GetDatum(c);
		values[1] = PointerGetDatum(centroid);
		values[2] = Int64GetDatum(result.members[c]);
		values[3] = Float8GetDatum(result.inertia[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		pfree(centroid);
	}
	return (Datum) 0;
}
