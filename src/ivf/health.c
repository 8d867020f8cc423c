/*
 * health.c: cvivf_health, how far a cvivf or cvlattice index has drifted
 * from its build and whether to rebuild it.
 *
 * By default it reads the metapage, the directory and the drift pages
 * (the build's baseline, src/ivf/drift.c): never the lists, so it is cheap
 * enough for a nightly job over every index.  exact => true also reads
 * every live member to measure its distance to its list's centroid now.
 *
 * Dead space is the share of the index's pages a rebuild now would give
 * back (see dead_space()).  The recommendation, with every rule that fired
 * in the reason:
 *   rebuild  dead space >= 30% of the index, or an index built on a table
 *            without vectors (one list, no centroid) that now has rows;
 *   retrain  (cvivf only) inserts plus deletes since the build >= 25% of
 *            the rows it was built with; or the list sizes' coefficient of
 *            variation >= 1 and at least twice the build's; or (exact) the
 *            members' mean distance to their centroids >= 1.2 times the
 *            build's (L2 and cosine; not inner product, whose distances
 *            are signed);
 *   ok       otherwise.
 * A cvlattice index's lists are its labels and its centroids their exact
 * means, so only the rebuild rules apply to it; the other figures describe
 * the clusters.  "The build" is the index's last build or cvivf_retrain:
 * a retrain records a new baseline, and its old pages, free after it, are
 * not dead space (build_blocks is the size at its switch).
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/rel.h"

#include "access.h"
#include "citus.h"
#include "ivf/ivf.h"
#include "lattice/lattice.h"

#define REBUILD_DEAD_SPACE 0.30
#define RETRAIN_CHANGED 0.25
#define RETRAIN_CV_FLOOR 1.0
#define RETRAIN_CV_GROWTH 2.0
#define RETRAIN_DISTANCE_RATIO 1.20

PG_FUNCTION_INFO_V1(cvivf_health);

/* List-size imbalance: max / mean and the coefficient of variation. */
typedef struct SizeSpread
{
	double		max_mean;
	double		cv;
} SizeSpread;

/* Everything cvivf_health returns, NaN or -1 for what it does not know. */
typedef struct Health
{
	bool		lattice;
	bool		baseline;
	bool		exact;
	uint32		lists;
	uint64		rows;
	uint64		build_rows;
	uint64		inserted;
	uint64		deleted;
	SizeSpread	now;
	SizeSpread	build;
	double		distance_build;
	double		distance_now;
	double		dead_space;
	BlockNumber blocks;
	BlockNumber build_blocks;
	uint64		retrains;		/* generations cvivf_retrain made */
	bool		no_centroids;
	CvMetric	metric;
} Health;

/* The spread of count values (NaN for none, or when all are zero). */
static SizeSpread
size_spread(const uint64 *sizes, uint32 count)
{
	SizeSpread	spread = {get_float8_nan(), get_float8_nan()};
	double		sum = 0;
	double		squares = 0;
	double		max = 0;
	double		mean;

	for (uint32 i = 0; i < count; i++)
	{
		sum += (double) sizes[i];
		max = Max(max, (double) sizes[i]);
	}
	if (count == 0 || sum <= 0)
		return spread;
	mean = sum / count;
	for (uint32 i = 0; i < count; i++)
		squares += ((double) sizes[i] - mean) * ((double) sizes[i] - mean);
	spread.max_mean = max / mean;
	spread.cv = sqrt(squares / count) / mean;
	return spread;
}

/* The members-weighted mean of the lists' build-time mean distances. */
static double
build_distance(const CvIvfListDrift *lists, uint32 count)
{
	double		sum = 0;
	uint64		members = 0;

	for (uint32 i = 0; i < count; i++)
		if (lists[i].in_baseline && lists[i].build_tuples > 0 &&
			!isnan(lists[i].build_mean_distance))
		{
			sum += lists[i].build_mean_distance * (double) lists[i].build_tuples;
			members += lists[i].build_tuples;
		}
	return members > 0 ? sum / (double) members : get_float8_nan();
}

/* The data pages a build writes for a list of tuples tuples (about: headers never straddle). */
static double
list_pages(uint64 tuples, Size tuple_size)
{
	return ceil((double) tuples * (double) tuple_size / (double) CVIVF_PAGE_CAPACITY);
}

/*
 * The share of the index's pages a rebuild now would give back: 1 - the
 * pages a build of the current rows would take / the pages there are.  A
 * build's pages are its fixed ones (the build's size less the data pages
 * of its lists: metapage, centroids, directory, drift and label pages),
 * the reuse pages VACUUM added, and per list the pages of its tuples.
 */
static double
dead_space(const Health *h, const CvIvfMetaPageData *meta, const CvIvfListDrift *lists)
{
	Size		tuple_size = CVIVF_TUPLE_SIZE(meta->dimensions);
	double		fixed = (double) h->build_blocks;
	double		wanted;

	for (uint32 i = 0; i < meta->lists; i++)
		fixed -= list_pages(lists[i].build_tuples, tuple_size);
	wanted = Max(fixed, 1.0) + meta->reuse_pages;
	for (uint32 i = 0; i < meta->lists; i++)
		wanted += list_pages(lists[i].tuples, tuple_size);
	if (h->blocks == 0)
		return 0;
	return Min(1.0, Max(0.0, 1.0 - wanted / (double) h->blocks));
}

/* The cheap figures: metapage, directory and drift pages. */
static void
measure_cheap(Relation index, const CvIvfMetaPageData *meta, Health *h)
{
	CvIvfListDrift *lists = cvivf_read_list_drift(index, meta, &h->baseline);
	uint64	   *sizes = palloc0(sizeof(uint64) * Max(meta->lists, 1));
	uint32		covered = Min(meta->drift_lists, meta->lists);

	for (uint32 i = 0; i < meta->lists; i++)
	{
		sizes[i] = lists[i].tuples;
		h->rows += lists[i].tuples;
		h->inserted += lists[i].inserted;
		h->deleted += lists[i].deleted;
		h->build_rows += lists[i].build_tuples;
	}
	h->now = size_spread(sizes, meta->lists);
	for (uint32 i = 0; i < covered; i++)
		sizes[i] = lists[i].build_tuples;
	h->build = size_spread(sizes, covered);
	h->distance_build = build_distance(lists, meta->lists);
	h->blocks = RelationGetNumberOfBlocks(index);
	h->build_blocks = meta->build_blocks;
	h->retrains = meta->retrains;
	h->dead_space = h->baseline ? dead_space(h, meta, lists) : get_float8_nan();
}

/* exact: every live member's distance to its list's centroid now. */
static double
measure_exact(Relation index, const CvIvfMetaPageData *meta)
{
	CvIvfDistanceSums *sums = cvivf_distance_sums_new(meta->lists);
	double		total = 0;
	uint64		members = 0;

	cvivf_measure_lists(index, meta, sums);
	cvivf_check_generation_kept(index, meta);	/* a standby's pages may have moved on */
	for (uint32 i = 0; i < meta->lists; i++)
	{
		total += sums->sums[i];
		members += sums->counts[i];
	}
	return members > 0 ? total / (double) members : get_float8_nan();
}

/* The ratio of now to build, when both are positive distances (not inner product). */
static double
distance_ratio(const Health *h)
{
	if (h->metric == CV_METRIC_INNER_PRODUCT || isnan(h->distance_now) ||
		isnan(h->distance_build) || h->distance_build <= 0)
		return get_float8_nan();
	return h->distance_now / h->distance_build;
}

static double
changed_fraction(const Health *h)
{
	if (!h->baseline || h->build_rows == 0)
		return get_float8_nan();
	return (double) (h->inserted + h->deleted) / (double) h->build_rows;
}

/* Appends one fired rule (or note) to the reason. */
static void
add_reason(StringInfo reason, const char *text)
{
	if (reason->len > 0)
		appendStringInfoString(reason, "; ");
	appendStringInfoString(reason, text);
}

/* The rules that call for a rebuild; true when one fired. */
static bool
rebuild_rules(const Health *h, StringInfo reason)
{
	bool		fired = false;

	if (h->no_centroids && h->rows > 0)
	{
		add_reason(reason, "built on a table without vectors: one list and no centroid");
		fired = true;
	}
	if (!isnan(h->dead_space) && h->dead_space >= REBUILD_DEAD_SPACE)
	{
		add_reason(reason, psprintf("dead space is %.0f%% of the index (rebuild at %.0f%%)",
									100 * h->dead_space, 100 * REBUILD_DEAD_SPACE));
		fired = true;
	}
	return fired;
}

/* The rules that call for new centroids (cvivf); true when one fired. */
static bool
retrain_rules(const Health *h, StringInfo reason)
{
	double		changed = changed_fraction(h);
	double		ratio = distance_ratio(h);
	bool		fired = false;

	if (!isnan(changed) && changed >= RETRAIN_CHANGED)
	{
		add_reason(reason, psprintf("inserts and deletes since the build are %.0f%% of its rows (retrain at %.0f%%)",
									100 * changed, 100 * RETRAIN_CHANGED));
		fired = true;
	}
	if (!isnan(h->now.cv) && !isnan(h->build.cv) &&
		h->now.cv >= Max(RETRAIN_CV_FLOOR, RETRAIN_CV_GROWTH * h->build.cv))
	{
		add_reason(reason, psprintf("list sizes vary %.2f (coefficient of variation) against %.2f at the build (retrain at twice the build's, at least %.1f)",
									h->now.cv, h->build.cv, RETRAIN_CV_FLOOR));
		fired = true;
	}
	if (!isnan(ratio) && ratio >= RETRAIN_DISTANCE_RATIO)
	{
		add_reason(reason, psprintf("members are %.2f times as far from their centroids as at the build (retrain at %.2f)",
									ratio, RETRAIN_DISTANCE_RATIO));
		fired = true;
	}
	return fired;
}

/* ok, retrain or rebuild, and why. */
static const char *
recommend(const Health *h, StringInfo reason)
{
	bool		rebuild = rebuild_rules(h, reason);
	bool		retrain = !h->lattice && retrain_rules(h, reason);
	const char *verdict = rebuild ? "rebuild" : retrain ? "retrain" : "ok";

	if (!rebuild && !retrain)
		add_reason(reason, "no threshold reached");
	if (!h->baseline)
		add_reason(reason, "no build baseline (the index was built before clustervec recorded one): REINDEX records it");
	if (h->lattice)
		add_reason(reason, "cvlattice lists are labels: only the rebuild rules apply");
	return verdict;
}

static Datum
float_or_null(double value, bool *isnull)
{
	*isnull = isnan(value);
	return Float8GetDatum(value);
}

/* One row of cvivf_health's columns (clustervec--*.sql). */
static HeapTuple
health_tuple(TupleDesc desc, const Health *h)
{
	StringInfoData reason;
	Datum		values[20];
	bool		nulls[20] = {0};
	const char *verdict;

	initStringInfo(&reason);
	verdict = recommend(h, &reason);
	values[0] = CStringGetTextDatum(h->lattice ? "cvlattice" : "cvivf");
	values[1] = Int32GetDatum(h->lists);
	values[2] = Int64GetDatum(h->rows);
	values[3] = Int64GetDatum(h->build_rows);
	values[4] = Int64GetDatum(h->inserted);
	values[5] = Int64GetDatum(h->deleted);
	nulls[3] = nulls[4] = nulls[5] = !h->baseline;
	values[6] = float_or_null(changed_fraction(h), &nulls[6]);
	values[7] = float_or_null(h->now.max_mean, &nulls[7]);
	values[8] = float_or_null(h->now.cv, &nulls[8]);
	values[9] = float_or_null(h->build.max_mean, &nulls[9]);
	values[10] = float_or_null(h->build.cv, &nulls[10]);
	values[11] = float_or_null(h->distance_build, &nulls[11]);
	values[12] = float_or_null(h->distance_now, &nulls[12]);
	values[13] = float_or_null(distance_ratio(h), &nulls[13]);
	values[14] = float_or_null(h->dead_space, &nulls[14]);
	values[15] = Int64GetDatum(h->blocks);
	values[16] = Int64GetDatum(h->build_blocks);
	nulls[16] = !h->baseline;
	values[17] = CStringGetTextDatum(verdict);
	values[18] = CStringGetTextDatum(reason.data);
	values[19] = Int64GetDatum(h->retrains);
	return heap_form_tuple(desc, values, nulls);
}

Datum
cvivf_health(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Relation	heap;
	Relation	index;
	CvIvfMetaPageData meta;
	Health		h = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "cvivf_health must return a row");
	index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_READ, "cvivf_health", &heap,
								 &h.lattice);
	cv_citus_refuse_shell(RelationGetRelid(heap), "cvivf_health",
						  "Call it on each shard through run_command_on_shards, which runs it where the rows are (README, \"Citus\").");
	cvivf_read_meta(index, &meta);
	h.exact = PG_GETARG_BOOL(1);
	h.lists = meta.lists;
	h.metric = (CvMetric) meta.metric;
	h.no_centroids = (meta.flags & CVIVF_META_NO_CENTROIDS) != 0;
	measure_cheap(index, &meta, &h);
	h.distance_now = h.exact ? measure_exact(index, &meta) : get_float8_nan();
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_DATUM(HeapTupleGetDatum(health_tuple(BlessTupleDesc(desc), &h)));
}
