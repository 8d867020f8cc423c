/*
 * observed.c: cluster_health_observed and cluster_health_observed_reset,
 * the health of a cvlattice index's clusters as the GPU searches it serves
 * saw them (STATISTICS.md, "Observed health").
 *
 * The worker keeps, beside each cvlattice mirror, every member's distance
 * r to its list's published centroid, written once the first time a
 * search with clustervec.observe probes the list, and how many searches
 * probed each list (src/worker/mirror_observe.c).  Here those sums become
 * STATISTICS.md's inertia (sum of r^2), mean_dist (mean r) and cohesion
 * (mean cos(member, centroid)) over the members seen.  The observation
 * belongs to the mirror of the index's current generation: a VACUUM,
 * REINDEX or new label starts a new one, with nothing seen.  Under cosine
 * the members are taken normalised, as the index's centroids are means of
 * directions.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "access.h"
#include "citus.h"
#include "gpu/gpu.h"
#include "ivf/mirror.h"
#include "lattice/lattice.h"

PG_FUNCTION_INFO_V1(cluster_health_observed);
PG_FUNCTION_INFO_V1(cluster_health_observed_reset);

#define OBSERVED_COLUMNS 9

/* The ready mirror of the index's current generation, -1 when none; ERROR without a worker. */
static int
current_mirror(Relation index, const CvIvfMetaPageData *meta, const char *function,
			   CvGpuMirrorKey *key)
{
	if (!cv_gpu_worker_ready())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s needs the clustervec GPU worker, which is not running", function),
				 errhint("Add clustervec to shared_preload_libraries and set clustervec.gpu to "
						 "\"auto\"; without a GPU the worker serves searches with its CPU "
						 "library (clustervec.gpu_library).")));
	cvivf_mirror_key(index, meta, key);
	return cv_gpu_mirror_find(key);
}

/* Integer labels are their own cluster number, as cluster_health numbers them. */
static bool
integer_labels(const CvLatticeLabelType *type)
{
	Oid			base = getBaseType(type->type);

	return base == INT2OID || base == INT4OID || base == INT8OID;
}

static int64
integer_label(const CvLatticeLabelType *type, Datum label)
{
	switch (getBaseType(type->type))
	{
		case INT2OID:
			return DatumGetInt16(label);
		case INT4OID:
			return DatumGetInt32(label);
	}
	return DatumGetInt64(label);
}

/* Sorting labels (non-NULL ones) into cluster_health's numbering of other types. */
typedef struct RankedLabel
{
	Datum		label;
	int			list;
} RankedLabel;

static const CvLatticeLabelType *sorting_type;

static int
compare_labels(const void *a, const void *b)
{
	return cvlattice_compare(sorting_type, ((const RankedLabel *) a)->label,
							 ((const RankedLabel *) b)->label);
}

/*
 * Each list's label (NULL list: label_null) and cluster number: the
 * integer label itself, or for other types its rank (from 1) among the
 * labels in the type's order, as cluster_health numbers text labels.
 */
static void
number_lists(Relation index, const CvIvfMetaPageData *meta, const CvLatticeLabelType *type,
			 const CvLatticeListEntry *entries, Datum *labels, bool *label_null, int64 *cluster)
{
	RankedLabel *ranked = palloc(sizeof(RankedLabel) * Max(meta->lists, 1));
	int			count = 0;

	for (uint32 l = 0; l < meta->lists; l++)
	{
		label_null[l] = !BlockNumberIsValid(entries[l].label_block);
		if (label_null[l])
			continue;
		labels[l] = cvlattice_read_label(index, type, &entries[l]);
		cluster[l] = integer_labels(type) ? integer_label(type, labels[l]) : 0;
		ranked[count].label = labels[l];
		ranked[count++].list = l;
	}
	if (!integer_labels(type))
	{
		sorting_type = type;
		qsort(ranked, count, sizeof(RankedLabel), compare_labels);
		for (int i = 0; i < count; i++)
			cluster[ranked[i].list] = i + 1;
	}
	pfree(ranked);
}

/* One output row from a list's observation (NULL statistics where nothing was seen). */
static void
put_row(Tuplestorestate *store, TupleDesc desc, const CvLatticeLabelType *type, Datum label,
		bool label_null, int64 cluster, const CvGpuObservedList *seen, double centroid_norm)
{
	Datum		values[OBSERVED_COLUMNS];
	bool		nulls[OBSERVED_COLUMNS] = {0};
	Oid			output;
	bool		varlena;

	nulls[0] = nulls[1] = label_null;
	values[0] = Int64GetDatum(cluster);
	if (!label_null)
	{
		getTypeOutputInfo(type->type, &output, &varlena);
		values[1] = CStringGetTextDatum(OidOutputFunctionCall(output, label));
	}
	values[2] = Int64GetDatum(seen->rows);
	values[3] = Int64GetDatum(seen->seen);
	nulls[4] = seen->rows == 0;
	values[4] = Float8GetDatum(seen->rows > 0 ? (double) seen->seen / seen->rows : 0);
	nulls[5] = nulls[6] = nulls[7] = seen->seen == 0;
	values[5] = Float8GetDatum(seen->sum_r2);
	values[6] = Float8GetDatum(seen->seen > 0 ? seen->sum_r / seen->seen : 0);
	values[7] = Float8GetDatum(seen->seen > 0 ? seen->sum_cos / seen->seen : 0);
	nulls[7] |= centroid_norm == 0;	/* STATISTICS.md: cohesion is NULL when c = 0 */
	values[8] = Int64GetDatum((int64) seen->queries);
	tuplestore_putvalues(store, desc, values, nulls);
}

/*
 * One row per list: cluster, cluster_text, n, n_seen, coverage,
 * inertia_seen, mean_dist_seen, cohesion_seen, queries.  n counts the
 * members the mirror holds; without a mirror nothing was seen and n is
 * the directory's count.
 */
Datum
cluster_health_observed(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index = cv_open_cvlattice(PG_GETARG_OID(0), CV_INDEX_READ,
										  "cluster_health_observed", &heap);
	CvIvfMetaPageData meta;
	CvLatticeLabelType type;
	CvLatticeListEntry *entries;
	CvGpuObservedList *seen;
	CvGpuMirrorKey key;
	CvGpuError	error = {0};
	Datum	   *labels;
	bool	   *label_null;
	int64	   *cluster;
	int			mirror;

	cv_citus_refuse_shell(RelationGetRelid(heap), "cluster_health_observed",
						  "Call it on each shard through run_command_on_shards, which runs it where the rows are (README, \"Citus\").");
	InitMaterializedSRF(fcinfo, 0);
	cvivf_read_meta(index, &meta);
	mirror = current_mirror(index, &meta, "cluster_health_observed", &key);
	cvlattice_label_type(index, &type);
	entries = palloc(sizeof(CvLatticeListEntry) * Max(meta.lists, 1));
	cvivf_read_directory_bytes(index, &meta, (char *) entries);
	seen = palloc0(sizeof(CvGpuObservedList) * Max(meta.lists, 1));
	if (mirror < 0)
	{
		ereport(NOTICE,
				(errmsg("the GPU worker holds no mirror of index \"%s\", so nothing was observed",
						RelationGetRelationName(index)),
				 errhint("Searches observe once the index is mirrored: SELECT clustervec_gpu_warm('%s'), then search with clustervec.observe = on.",
						 RelationGetRelationName(index))));
		for (uint32 l = 0; l < meta.lists; l++)
			seen[l].rows = (int64) entries[l].base.tuples;
	}
	else if (!cv_gpu_mirror_observed(mirror, &key, seen, &error))
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not read the observed health of index \"%s\": %s",
						RelationGetRelationName(index), error.message)));
	labels = palloc(sizeof(Datum) * Max(meta.lists, 1));
	label_null = palloc(sizeof(bool) * Max(meta.lists, 1));
	cluster = palloc0(sizeof(int64) * Max(meta.lists, 1));
	number_lists(index, &meta, &type, entries, labels, label_null, cluster);
	for (uint32 l = 0; l < meta.lists; l++)
		put_row(rsinfo->setResult, rsinfo->setDesc, &type, labels[l], label_null[l], cluster[l],
				&seen[l], entries[l].base.centroid_norm);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

/* Forgets what the searches observed over the index's current mirror. */
Datum
cluster_health_observed_reset(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index = cv_open_cvlattice(PG_GETARG_OID(0), CV_INDEX_READ,
										  "cluster_health_observed_reset", &heap);
	CvIvfMetaPageData meta;
	CvGpuMirrorKey key;
	CvGpuError	error = {0};
	int			mirror;

	cv_citus_refuse_shell(RelationGetRelid(heap), "cluster_health_observed_reset",
						  "Call it on each shard through run_command_on_shards, which runs it where the rows are (README, \"Citus\").");
	cvivf_read_meta(index, &meta);
	mirror = current_mirror(index, &meta, "cluster_health_observed_reset", &key);
	if (mirror >= 0 && !cv_gpu_mirror_observed_reset(mirror, &key, &error))
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not reset the observed health of index \"%s\": %s",
						RelationGetRelationName(index), error.message)));
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_VOID();
}
