/*
 * scan.c (lattice): which lists a cvlattice scan reads.  The scan itself is
 * cvivf's (src/ivf/scan.c); this file only plans it.
 *
 * With label conditions (label = x, label = ANY(array), label IS [NOT] NULL; the
 * planner hands them over as index conditions), the scan reads exactly the
 * lists of those labels, all at once, so its rows come in exact distance
 * order within them and no row of another label is ever read.  Without,
 * the published centroids are ranked as cvivf ranks its own
 * (cvivf_centroid_distance over cvivf_read_ranking_centroids: cosine
 * centroids, means of directions, normalised first), the nearest
 * clustervec.probes lists are read first and the iterative scan goes on as
 * cvivf's does; the GPU mirror ranks the same values, so it probes the
 * same lists.  Centroids move with every insert, so they are read from
 * their pages at each scan, not cached.
 */
#include "postgres.h"

#include <math.h>

#include "access/relscan.h"
#include "access/skey.h"
#include "catalog/pg_type_d.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "utils/rel.h"

#include "lattice/lattice.h"

/* An integer of type int2, int4 or int8 as an int64. */
static int64
integer_value(Oid type, Datum value)
{
	switch (type)
	{
		case INT2OID:
			return DatumGetInt16(value);
		case INT4OID:
			return DatumGetInt32(value);
		case INT8OID:
			return DatumGetInt64(value);
	}
	elog(ERROR, "cvlattice has no label comparison with type %u", type);
	return 0;					/* keep the compiler quiet */
}

/*
 * A key as a label of the column's type.  The label operator family holds
 * "=" between int2, int4 and int8 (so "bigint_label = 7" is an index
 * condition): such a key is converted, and one out of the label type's
 * range matches no label (false).
 */
static bool
key_as_label(Oid label_type, Oid key_type, Datum key, Datum *label)
{
	Oid			base = getBaseType(label_type);
	int64		value;

	*label = key;
	if (!OidIsValid(key_type) || key_type == label_type || key_type == base)
		return true;
	value = integer_value(key_type, key);
	switch (base)
	{
		case INT2OID:
			*label = Int16GetDatum((int16) value);
			return value >= PG_INT16_MIN && value <= PG_INT16_MAX;
		case INT4OID:
			*label = Int32GetDatum((int32) value);
			return value >= PG_INT32_MIN && value <= PG_INT32_MAX;
		case INT8OID:
			*label = Int64GetDatum(value);
			return true;
	}
	elog(ERROR, "cvlattice has no label comparison between types %u and %u", label_type, key_type);
	return false;				/* keep the compiler quiet */
}

/* Marks the list of one key value as wanted (a label no list has: none). */
static void
want_label(Relation index, const CvIvfMetaPageData *meta, Oid key_type, Datum key,
		   bool isnull, bool *wanted)
{
	Oid			label_type = TupleDescAttr(RelationGetDescr(index),
										   1 - cvlattice_vector_column(index))->atttypid;
	Datum		label;
	int			list;

	if (!isnull && !key_as_label(label_type, key_type, key, &label))
		return;
	list = cvlattice_find_list(index, meta, isnull ? (Datum) 0 : label, isnull);
	if (list >= 0)
		wanted[list] = true;
}

/* The lists one scan key on the label column asks for. */
static void
lists_of_key(Relation index, const CvIvfMetaPageData *meta, ScanKey key, bool *wanted)
{
	if (key->sk_flags & SK_SEARCHNOTNULL)
	{
		/* label IS NOT NULL: every list but the NULL label's */
		int			null_list = cvlattice_find_list(index, meta, (Datum) 0, true);

		memset(wanted, true, sizeof(bool) * meta->lists);
		if (null_list >= 0)
			wanted[null_list] = false;
		return;
	}
	if (key->sk_flags & SK_ISNULL)
	{
		/* label IS NULL; "label = NULL" matches nothing */
		if (key->sk_flags & SK_SEARCHNULL)
			want_label(index, meta, InvalidOid, (Datum) 0, true, wanted);
		return;
	}
	if (key->sk_flags & SK_SEARCHARRAY)
	{
		ArrayType  *array = DatumGetArrayTypeP(key->sk_argument);
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elements;
		bool	   *nulls;
		int			count;

		get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
		deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign,
						  &elements, &nulls, &count);
		for (int i = 0; i < count; i++)
			if (!nulls[i])
				want_label(index, meta, ARR_ELEMTYPE(array), elements[i], false, wanted);
		return;
	}
	want_label(index, meta, key->sk_subtype, key->sk_argument, false, wanted);
}

/*
 * The lists the scan keys allow (they are ANDed); false when no key is on
 * the label column.  On the vector column only IS NULL / IS NOT NULL can be
 * a key: every indexed vector is not NULL.
 */
static bool
keyed_lists(IndexScanDesc scan, const CvIvfMetaPageData *meta, bool *allowed)
{
	AttrNumber	vector_attno = cvlattice_vector_column(scan->indexRelation) + 1;
	bool	   *wanted = palloc(sizeof(bool) * Max(meta->lists, 1));
	bool		keyed = false;

	memset(allowed, true, sizeof(bool) * meta->lists);
	for (int k = 0; k < scan->numberOfKeys; k++)
	{
		ScanKey		key = &scan->keyData[k];

		if (key->sk_attno == vector_attno)
		{
			if (!(key->sk_flags & SK_SEARCHNOTNULL))
				memset(allowed, false, sizeof(bool) * meta->lists);
			continue;
		}
		keyed = true;
		memset(wanted, false, sizeof(bool) * meta->lists);
		lists_of_key(scan->indexRelation, meta, key, wanted);
		for (uint32 list = 0; list < meta->lists; list++)
			allowed[list] &= wanted[list];
	}
	pfree(wanted);
	return keyed;
}

static int
compare_ranked(const void *a, const void *b)
{
	const CvIvfRankedList *x = a;
	const CvIvfRankedList *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return x->list - y->list;
}

/* The allowed lists, nearest centroid first (list order without a query); returns how many. */
static int
rank_lists(Relation index, const CvIvfMetaPageData *meta, const float *query,
		   const bool *allowed, CvIvfRankedList *ranked)
{
	float	   *centroids = query != NULL && meta->lists > 0 ?
		cvivf_read_ranking_centroids(index, meta) : NULL;
	int			count = 0;

	for (uint32 list = 0; list < meta->lists; list++)
	{
		if (!allowed[list])
			continue;
		ranked[count].list = list;
		ranked[count].distance = centroids == NULL ? 0 :
			cvivf_centroid_distance(meta->metric, query,
									centroids + (Size) list * meta->dimensions,
									meta->dimensions);
		if (isnan(ranked[count].distance))
			ranked[count].distance = INFINITY;
		count++;
	}
	qsort(ranked, count, sizeof(CvIvfRankedList), compare_ranked);
	if (centroids != NULL)
		pfree(centroids);
	return count;
}

/*
 * Plans a scan: *ranked the lists in reading order, *max_lists how many it
 * may read, *batch how many it opens at once.
 */
bool
cvlattice_plan_scan(IndexScanDesc scan, const CvIvfMetaPageData *meta, const float *query,
					CvIvfRankedList **ranked, int *max_lists, int *batch)
{
	bool	   *allowed = palloc(sizeof(bool) * Max(meta->lists, 1));
	bool		keyed = keyed_lists(scan, meta, allowed);
	int			count;

	*ranked = palloc(sizeof(CvIvfRankedList) * Max(meta->lists, 1));
	/* the lists of label keys are all read at once: their order does not matter */
	count = rank_lists(scan->indexRelation, meta, keyed ? NULL : query, allowed, *ranked);
	pfree(allowed);
	if (keyed)
	{
		/* exact within the labels asked for: every list of theirs at once */
		*max_lists = count;
		*batch = Max(count, 1);
		return true;
	}
	*max_lists = cvivf_scan_limit(count);
	*batch = cvivf_probes;
	return false;
}
