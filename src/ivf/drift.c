/*
 * drift.c: the baseline a build records (each list's members and their
 * mean distance to its centroid) and the same figures measured now, for
 * cvivf_health and cvivf_lists.
 *
 * The distance is the index's own order-by distance (l2_distance,
 * negative_inner_product or cosine_distance) between a member and its
 * list's centroid as stored, so SQL can compute the same mean with the
 * operator.  The build and an exact health check measure it the same way,
 * so their means compare.  cvivf's build sums while it writes its lists;
 * cvlattice's build is measured after it wrote them (a read of its lists),
 * until its build calls cvivf_distance_sums_add itself.
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/float.h"
#include "utils/rel.h"

#include "ivf/ivf.h"
#include "lattice/lattice.h"

/* Zeroed per-list sums for lists lists. */
CvIvfDistanceSums *
cvivf_distance_sums_new(uint32 lists)
{
	CvIvfDistanceSums *sums = palloc0(sizeof(CvIvfDistanceSums));

	sums->lists = lists;
	sums->sums = palloc0(sizeof(double) * Max(lists, 1));
	sums->counts = palloc0(sizeof(uint64) * Max(lists, 1));
	return sums;
}

/* Counts one member of list and its distance to the list's centroid. */
void
cvivf_distance_sums_add(CvIvfDistanceSums *sums, CvMetric metric, int list,
						const float *vector, const float *centroid, int dim)
{
	sums->sums[list] += cvivf_distance(metric, vector, centroid, dim);
	sums->counts[list]++;
}

/* What a walk of one list adds to. */
typedef struct MeasureWalk
{
	CvIvfDistanceSums *sums;
	CvMetric	metric;
	int			list;
	const float *centroid;
	int			dimensions;
} MeasureWalk;

static void
measure_tuple(const CvIvfTupleHeader *header pg_attribute_unused(), const float *vector,
			  BlockNumber block pg_attribute_unused(), Size offset pg_attribute_unused(),
			  void *arg)
{
	MeasureWalk *walk = (MeasureWalk *) arg;

	cvivf_distance_sums_add(walk->sums, walk->metric, walk->list, vector, walk->centroid,
							walk->dimensions);
}

/*
 * Reads every live member of every list (sums covers meta->lists) and sums
 * its distance to the list's centroid as the pages hold it now.  Nothing
 * for an index without centroids.
 */
void
cvivf_measure_lists(Relation index, const CvIvfMetaPageData *meta, CvIvfDistanceSums *sums)
{
	float	   *centroids = cvivf_read_centroids(index, meta);
	BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
	MeasureWalk walk = {0};

	if (centroids == NULL)
		return;
	walk.sums = sums;
	walk.metric = (CvMetric) meta->metric;
	walk.dimensions = meta->dimensions;
	for (uint32 list = 0; list < meta->lists && list < sums->lists; list++)
	{
		CvIvfListEntry entry;

		CHECK_FOR_INTERRUPTS();
		cvivf_read_list_entry(index, meta, list, &entry);
		if (!BlockNumberIsValid(entry.first_block))
			continue;
		walk.list = list;
		walk.centroid = centroids + (Size) list * meta->dimensions;
		cvivf_scan_list(index, meta, entry.first_block, false, strategy, measure_tuple, &walk);
	}
	FreeAccessStrategy(strategy);
	pfree(centroids);
}

/* Writes the drift pages of a just-built index from its lists' sums. */
void
cvivf_record_baseline(Relation index, const CvIvfDistanceSums *sums)
{
	CvIvfDriftEntry *entries = palloc0(sizeof(CvIvfDriftEntry) * Max(sums->lists, 1));

	for (uint32 list = 0; list < sums->lists; list++)
	{
		entries[list].build_tuples = sums->counts[list];
		entries[list].build_mean_distance = sums->counts[list] > 0 ?
			sums->sums[list] / (double) sums->counts[list] : get_float8_nan();
	}
	cvivf_write_drift(index, entries, sums->lists);
	pfree(entries);
}

/*
 * The baseline of an index just built by a build that did not sum as it
 * wrote (cvlattice's): its lists read back.
 */
void
cvivf_measure_baseline(Relation index)
{
	CvIvfMetaPageData meta;
	CvIvfDistanceSums *sums;

	cvivf_read_meta(index, &meta);
	sums = cvivf_distance_sums_new(meta.lists);
	cvivf_measure_lists(index, &meta, sums);
	cvivf_record_baseline(index, sums);
}

/* One list's changes since the build, from its directory entry and drift entry. */
static void
list_changes(const CvIvfMetaPageData *meta, const char *entry_bytes,
			 const CvIvfDriftEntry *drift, uint32 list, CvIvfListDrift *out)
{
	const CvIvfListEntry *entry = (const CvIvfListEntry *) entry_bytes;
	int64		inserted;

	out->tuples = entry->tuples;
	out->in_baseline = list < meta->drift_lists;
	out->build_tuples = drift->build_tuples;
	out->build_mean_distance = drift->build_mean_distance;
	if (cvlattice_is(meta))
	{
		/* the lattice's directory counts inserts; deletes outside the baseline follow */
		out->inserted = ((const CvLatticeListEntry *) entry_bytes)->inserted_since_build;
		out->deleted = out->in_baseline ? drift->deleted_since_build :
			(out->inserted > out->tuples ? out->inserted - out->tuples : 0);
		return;
	}
	/* live = built + inserted - deleted, every term counted in the record that changed it */
	inserted = (int64) entry->tuples + (int64) drift->deleted_since_build -
		(int64) drift->build_tuples;
	out->inserted = inserted > 0 ? (uint64) inserted : 0;
	out->deleted = drift->deleted_since_build;
}

/*
 * Every list's figures since the build (meta->lists of them); with no
 * baseline (*have_baseline false) only tuples is known.
 */
CvIvfListDrift *
cvivf_read_list_drift(Relation index, const CvIvfMetaPageData *meta, bool *have_baseline)
{
	Size		entry_size = cvivf_directory_entry_size(meta);
	uint32		lists = Max(meta->lists, 1);
	char	   *bytes = palloc(entry_size * lists);
	CvIvfDriftEntry *drift = palloc0(sizeof(CvIvfDriftEntry) * lists);
	CvIvfListDrift *out = palloc0(sizeof(CvIvfListDrift) * lists);

	cvivf_read_directory_bytes(index, meta, bytes);
	*have_baseline = cvivf_read_drift(index, meta, drift);
	for (uint32 list = 0; list < meta->lists; list++)
	{
		if (*have_baseline)
			list_changes(meta, bytes + list * entry_size, &drift[list], list, &out[list]);
		else
		{
			out[list].tuples = ((const CvIvfListEntry *) (bytes + list * entry_size))->tuples;
			out[list].build_mean_distance = get_float8_nan();
		}
	}
	pfree(bytes);
	pfree(drift);
	return out;
}
