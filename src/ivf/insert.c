/*
 * insert.c: aminsert.  A vector goes to the end of its nearest list; NULL
 * vectors (and zero vectors under cosine) are not indexed.
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#include "ivf/ivf.h"
#include "type/cvec.h"

/* An index built on an empty, untyped column learns its dimensions here. */
static void
check_dimensions(Relation index, CvIvfMetaPageData *meta, const CVec *v)
{
	if (meta->dimensions == 0)
	{
		cvivf_set_dimensions(index, v->dim);
		cvivf_read_meta(index, meta);
	}
	if ((int) meta->dimensions != v->dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("index \"%s\" holds vectors of %u dimensions, not %d",
						RelationGetRelationName(index), meta->dimensions, v->dim),
				 errhint("An index on a cvec column without a dimension count takes the dimensions of its first vector; declare the column as cvec(n).")));
}

/* Into the nearest list; a quantized index's tuple carries its code for a coded slot. */
static void
insert_vector(Relation index, const CvIvfMetaPageData *meta, ItemPointer tid, const float *x)
{
	int			list = cvivf_nearest_list(index, meta, x);
	bool		owned;
	const float *centroids;
	CvIvfCodeEntry *code;

	if (!cvivf_is_quantized(meta) || (meta->flags & CVIVF_META_NO_CENTROIDS))
	{
		cvivf_append_tuple(index, meta, list, tid, x);
		return;
	}
	centroids = cvivf_get_centroids(index, meta, &owned);
	code = palloc(meta->code_entry_size);
	cvivf_encode_entry(meta, x, centroids + (Size) list * meta->dimensions, tid, code);
	cvivf_append_tuple_coded(index, meta, list, tid, x, code);
}

bool
cvivfinsert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
			Relation heap pg_attribute_unused(), IndexUniqueCheck checkUnique pg_attribute_unused(), bool indexUnchanged pg_attribute_unused(),
			IndexInfo *indexInfo pg_attribute_unused())
{
	MemoryContext context;
	MemoryContext old;
	CvIvfMetaPageData meta;
	CVec	   *v;

	if (isnull[0])
		return false;
	context = AllocSetContextCreate(CurrentMemoryContext, "cvivf insert",
									ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(context);
	v = DatumGetCVec(values[0]);
	cvivf_read_meta(index, &meta);
	check_dimensions(index, &meta, v);
	if (cvivf_vector_is_indexable(meta.metric, v->x, v->dim))
		insert_vector(index, &meta, heap_tid, v->x);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return false;
}
