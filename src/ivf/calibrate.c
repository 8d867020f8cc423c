/*
 * calibrate.c: the recall calibration clustervec.target_recall reads:
 * recall@10 against probes, measured on sampled queries and stored in the
 * metapage.  The build measures it on its k-means sample; cvivf_calibrate
 * measures it again over the index's current rows.
 *
 * Each query is left out of its own neighbours, so it stands for a query
 * that is not in the table (a row always finds itself in its own list).
 * The curve itself comes from src/math/calibration.c: for each query, the
 * rank of each exact neighbour's list among the query's centroid ranking.
 * The build's sample holds a fraction f of the rows, and its k nearest
 * sample rows lie about as far as the table's k / f nearest, so the build
 * counts the sample's round(10 f) nearest (at least 1) as the table's 10.
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "access.h"
#include "ivf/ivf.h"
#include "lattice/lattice.h"
#include "math/calibration.h"
#include "math/prng.h"

PG_FUNCTION_INFO_V1(cvivf_calibrate);
PG_FUNCTION_INFO_V1(cvivf_calibration);

#define CALIBRATION_K 10
#define CALIBRATION_QUERIES 500
#define CALIBRATION_MAX_QUERIES 100000
/* products a build's calibration may spend per step (about a second) */
#define CALIBRATION_BUILD_BUDGET 2e9

/* The queries and what has been gathered about them. */
typedef struct Calibrator
{
	CvMetric	metric;
	int			dims;
	int			lists;
	const float *centroids;
	int			nq;
	float	   *queries;		/* nq x dims */
	int64	   *query_ids;		/* who each query is, to leave it out */
	CvNeighbours *neighbours;	/* nq */
	uint64	   *found_at;		/* lists */
} Calibrator;

static void
calibrator_init(Calibrator *c, CvMetric metric, int dims, const float *centroids, int lists,
				int nq, int k)
{
	c->metric = metric;
	c->dims = dims;
	c->lists = lists;
	c->centroids = centroids;
	c->nq = nq;
	c->queries = palloc_extended(sizeof(float) * dims * (Size) Max(nq, 1), MCXT_ALLOC_HUGE);
	c->query_ids = palloc(sizeof(int64) * Max(nq, 1));
	c->neighbours = palloc(sizeof(CvNeighbours) * Max(nq, 1));
	for (int q = 0; q < nq; q++)
	{
		c->neighbours[q].k = k;
		c->neighbours[q].count = 0;
		c->neighbours[q].distance = palloc(sizeof(double) * k);
		c->neighbours[q].list = palloc(sizeof(int) * k);
	}
	c->found_at = palloc0(sizeof(uint64) * lists);
}

/* A row of the given list offered to every query but itself. */
static void
calibrator_offer(Calibrator *c, int64 id, const float *x, int list)
{
	for (int q = 0; q < c->nq; q++)
		if (c->query_ids[q] != id)
			cv_neighbours_offer(&c->neighbours[q],
								cvivf_distance(c->metric, c->queries + (Size) q * c->dims,
											   x, c->dims),
								list);
}

/* The nearest list of a vector, as the scans rank lists. */
static int
nearest_list(const Calibrator *c, const float *x)
{
	int			best = 0;
	double		best_distance = INFINITY;

	for (int l = 0; l < c->lists; l++)
	{
		double		d = cvivf_centroid_distance(c->metric, x,
												c->centroids + (Size) l * c->dims, c->dims);

		if (d < best_distance)
		{
			best_distance = d;
			best = l;
		}
	}
	return best;
}

/* Ranks the lists for every query, then the curve, into *out. */
static void
calibrator_finish(Calibrator *c, uint16 source, CvIvfCalibration *out)
{
	double	   *distance = palloc(sizeof(double) * c->lists);
	uint64		total = 0;

	memset(out, 0, sizeof(*out));
	for (int q = 0; q < c->nq; q++)
	{
		for (int l = 0; l < c->lists; l++)
			distance[l] = cvivf_centroid_distance(c->metric, c->queries + (Size) q * c->dims,
												  c->centroids + (Size) l * c->dims, c->dims);
		cv_calibration_add_query(distance, c->lists, &c->neighbours[q], c->found_at);
		total += c->neighbours[q].count;
		CHECK_FOR_INTERRUPTS();
	}
	out->points = cv_calibration_curve(c->found_at, c->lists, total, CVIVF_CALIBRATION_POINTS,
									   out->probes, out->recall);
	out->k = c->neighbours[0].k;
	out->source = source;
	out->queries = c->nq;
	pfree(distance);
}

/* The first n of a seeded shuffle of 0 .. count - 1. */
static int64 *
shuffled_prefix(int64 count, int64 n, uint64 seed)
{
	int64	   *order = palloc_extended(sizeof(int64) * count, MCXT_ALLOC_HUGE);
	CvPrng		prng;

	cv_prng_seed(&prng, seed);
	for (int64 i = 0; i < count; i++)
		order[i] = i;
	for (int64 i = 0; i < n; i++)
	{
		int64		j = i + (int64) cv_prng_below(&prng, (uint64) (count - i));
		int64		swap = order[i];

		order[i] = order[j];
		order[j] = swap;
	}
	return order;
}

/*
 * The build's calibration from its k-means sample (count rows of the
 * index's rows; unit length under cosine and inner product, as k-means
 * trained on them).  Within a budget of products, it uses a seeded subset
 * of the sample as candidates and its first rows as queries.
 */
void
cvivf_calibrate_sample(Relation index, CvMetric metric, const float *sample, int64 count,
					   int dims, const float *centroids, int lists, int64 rows, uint64 seed)
{
	CvIvfCalibration result;

	if (cvivf_calibration_of_sample(metric, sample, count, dims, centroids, lists, rows, seed,
									&result))
		cvivf_write_calibration(index, &result);
}

/* The same calibration, computed only (a retrain's, for the metapage it switches to). */
bool
cvivf_calibration_of_sample(CvMetric metric, const float *sample, int64 count, int dims,
							const float *centroids, int lists, int64 rows, uint64 seed,
							CvIvfCalibration *result)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "cvivf calibration",
												  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	int			nq = (int) Min(count, CALIBRATION_QUERIES);
	double		per_row = (double) Max(nq, lists) * Max(dims, 1);
	int64		n = Min(count, Max((int64) (CALIBRATION_BUILD_BUDGET / per_row), 2 * nq));
	int			k = (int) Min(CALIBRATION_K,
							  Max(1, rint(CALIBRATION_K * (double) (n - 1) / Max(rows - 1, 1))));
	int64	   *order;
	Calibrator	c;

	if (count < 2 || lists < 2)
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(context);
		return false;
	}
	order = shuffled_prefix(count, n, seed);
	calibrator_init(&c, metric, dims, centroids, lists, nq, k);
	for (int q = 0; q < nq; q++)
	{
		memcpy(c.queries + (Size) q * dims, sample + order[q] * dims, sizeof(float) * dims);
		c.query_ids[q] = q;
	}
	for (int64 i = 0; i < n; i++)
	{
		const float *x = sample + order[i] * dims;

		calibrator_offer(&c, i, x, nearest_list(&c, x));
		if ((i & 255) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	calibrator_finish(&c, CVIVF_CALIBRATED_BY_BUILD, result);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return true;
}

/* ---- cvivf_calibrate: over the index's rows ---- */

typedef struct RowsPass
{
	Calibrator *c;
	int			list;			/* the list being walked */
	int64		rows;			/* rows seen */
	int			wanted;
	CvPrng		prng;
} RowsPass;

/* A position in the index names a row. */
static int64
row_id(BlockNumber block, Size offset)
{
	return (int64) block * BLCKSZ + (int64) offset;
}

/* Pass 1: a seeded reservoir of the queries. */
static void
sample_query(const CvIvfTupleHeader *header pg_attribute_unused(), const float *vector,
			 BlockNumber block, Size offset, void *arg)
{
	RowsPass   *p = (RowsPass *) arg;
	Calibrator *c = p->c;
	int64		slot = -1;

	if (c->nq < p->wanted)
		slot = c->nq++;
	else
	{
		int64		j = (int64) cv_prng_below(&p->prng, (uint64) p->rows + 1);

		if (j < p->wanted)
			slot = j;
	}
	if (slot >= 0)
	{
		memcpy(c->queries + (Size) slot * c->dims, vector, sizeof(float) * c->dims);
		c->query_ids[slot] = row_id(block, offset);
	}
	p->rows++;
}

/* Pass 2: every row against every query. */
static void
offer_row(const CvIvfTupleHeader *header pg_attribute_unused(), const float *vector,
		  BlockNumber block, Size offset, void *arg)
{
	RowsPass   *p = (RowsPass *) arg;

	calibrator_offer(p->c, row_id(block, offset), vector, p->list);
}

/* Walks every list's live tuples with visit. */
static void
walk_lists(Relation index, const CvIvfMetaPageData *meta, CvIvfTupleVisitor visit, RowsPass *p)
{
	for (uint32 list = 0; list < meta->lists; list++)
	{
		CvIvfListEntry entry;

		CHECK_FOR_INTERRUPTS();
		cvivf_read_list_entry(index, meta, list, &entry);
		p->list = list;
		if (BlockNumberIsValid(entry.first_block))
			cvivf_scan_list(index, meta, entry.first_block, false, NULL, visit, p);
	}
}

/* Measures the calibration over the index's rows; false when there is nothing to measure. */
static bool
calibrate_rows(Relation index, const CvIvfMetaPageData *meta, int queries,
			   CvIvfCalibration *result)
{
	Calibrator	c;
	RowsPass	p = {0};
	const float *centroids;
	bool		owned;

	if ((meta->flags & CVIVF_META_NO_CENTROIDS) || meta->lists < 2)
		return false;
	/* a cvlattice scan ranks its published means as they are now (cosine: normalised) */
	centroids = cvlattice_is(meta) ? cvivf_read_ranking_centroids(index, meta) :
		cvivf_get_centroids(index, meta, &owned);
	calibrator_init(&c, meta->metric, meta->dimensions, centroids, meta->lists, 0,
					CALIBRATION_K);
	c.queries = palloc_extended(sizeof(float) * meta->dimensions * (Size) queries,
								MCXT_ALLOC_HUGE);
	c.query_ids = palloc(sizeof(int64) * queries);
	p.c = &c;
	p.wanted = queries;
	cv_prng_seed(&p.prng, 0);
	walk_lists(index, meta, sample_query, &p);
	if (c.nq < 2)
		return false;
	c.neighbours = palloc(sizeof(CvNeighbours) * c.nq);
	for (int q = 0; q < c.nq; q++)
	{
		c.neighbours[q].k = CALIBRATION_K;
		c.neighbours[q].count = 0;
		c.neighbours[q].distance = palloc(sizeof(double) * CALIBRATION_K);
		c.neighbours[q].list = palloc(sizeof(int) * CALIBRATION_K);
	}
	walk_lists(index, meta, offer_row, &p);
	calibrator_finish(&c, CVIVF_CALIBRATED_BY_ROWS, result);
	return true;
}

/* The calibration's points as rows (probes, recall). */
static void
return_points(FunctionCallInfo fcinfo, const CvIvfCalibration *c)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	for (uint32 i = 0; i < c->points; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {0};

		values[0] = Int32GetDatum((int32) c->probes[i]);
		values[1] = Float8GetDatum((double) c->recall[i]);
		values[2] = Int32GetDatum(c->k);
		values[3] = CStringGetTextDatum(c->source == CVIVF_CALIBRATED_BY_BUILD ?
										"build" : "rows");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* cvivf_calibrate(index, queries): measures over the current rows, stores, returns the points. */
Datum
cvivf_calibrate(PG_FUNCTION_ARGS)
{
	int			queries = PG_GETARG_INT32(1);
	Relation	heap;
	Relation	index;
	CvIvfMetaPageData meta;
	CvIvfCalibration result;
	bool		lattice;

	if (queries < 2 || queries > CALIBRATION_MAX_QUERIES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queries must be between 2 and %d", CALIBRATION_MAX_QUERIES)));
	index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_READ, "cvivf_calibrate", &heap,
								 &lattice);
	InitMaterializedSRF(fcinfo, 0);
	cvivf_read_meta(index, &meta);
	if (!calibrate_rows(index, &meta, queries, &result))
		ereport(NOTICE,
				(errmsg("index \"%s\" has too few rows or lists to calibrate, so its calibration is unchanged",
						RelationGetRelationName(index))));
	else
	{
		cvivf_write_calibration(index, &result);
		return_points(fcinfo, &result);
	}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

/* cvivf_calibration(index): the stored points; none when the index has no calibration. */
Datum
cvivf_calibration(PG_FUNCTION_ARGS)
{
	Relation	heap;
	bool		lattice;
	Relation	index = cv_open_vector_index(PG_GETARG_OID(0), CV_INDEX_READ, "cvivf_calibration",
											 &heap, &lattice);
	CvIvfMetaPageData meta;

	InitMaterializedSRF(fcinfo, 0);
	cvivf_read_meta(index, &meta);
	return_points(fcinfo, &meta.calibration);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}
