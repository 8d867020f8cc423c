/*
 * insert.c: aminsert of cvlattice.  A row goes to the end of its label's
 * list (a new label makes a new list first) and, in the same WAL record,
 * the list's centroid moves to the mean with the new member.  The list's
 * directory page lock, taken before the centroid's, serialises the moves
 * of one centroid.  NULL vectors (and zero vectors under cosine) are not
 * indexed.
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#include "lattice/lattice.h"
#include "math/mean.h"
#include "type/cvec.h"

typedef struct CentroidMove
{
	const float *vector;
	int			dimensions;
	bool		directions;		/* cosine: the mean of unit vectors */
} CentroidMove;

/* Runs inside the linking record: the entry already counts the new member. */
static void
move_centroid(Page page, char *entry_bytes, void *arg)
{
	CentroidMove *move = (CentroidMove *) arg;
	CvLatticeListEntry *entry = (CvLatticeListEntry *) entry_bytes;

	entry->base.centroid_norm = cv_mean_move((float *) ((char *) page + entry->centroid_offset),
											 move->vector, move->dimensions,
											 entry->base.tuples, move->directions);
	entry->inserted_since_build++;
	entry->moves_since_mean++;
}

/* An index built without knowing its dimensions learns them from its first vector. */
static void
check_dimensions(Relation index, CvIvfMetaPageData *meta, const CVec *v)
{
	if (meta->dimensions == 0)
	{
		if (v->dim > CV_LATTICE_MAX_DIMENSIONS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("cvlattice indexes hold vectors of at most %d dimensions, not %d",
							CV_LATTICE_MAX_DIMENSIONS, v->dim),
					 errhint("Use a cvivf index for wider vectors.")));
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

/* The row's list, made when its label is new; meta is re-read when a list was added. */
static int
list_of_row(Relation index, CvIvfMetaPageData *meta, Datum label, bool isnull)
{
	int			list = cvlattice_find_list(index, meta, label, isnull);
	CvLatticeLabelType type;

	if (list >= 0)
		return list;
	cvlattice_label_type(index, &type);
	list = cvlattice_add_list(index, &type, label, isnull);
	cvivf_read_meta(index, meta);
	return list;
}

/* Appends the vector to its list, moving the centroid in the same record. */
static void
insert_row(Relation index, CvIvfMetaPageData *meta, const CVec *v, Datum label, bool isnull,
		   ItemPointer heap_tid)
{
	int			list = list_of_row(index, meta, label, isnull);
	CvLatticeListEntry entry;
	CentroidMove move = {v->x, v->dim, meta->metric == CV_METRIC_COSINE};
	CvIvfAppendExtra extra;

	cvivf_read_list_entry_bytes(index, meta, list, &entry);
	extra.block = entry.centroid_block;	/* fixed for the life of the list */
	extra.apply = move_centroid;
	extra.arg = &move;
	cvivf_append_tuple_extra(index, meta, list, heap_tid, v->x, &extra);
}

bool
cvlatticeinsert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
				Relation heap pg_attribute_unused(),
				IndexUniqueCheck checkUnique pg_attribute_unused(),
				bool indexUnchanged pg_attribute_unused(),
				IndexInfo *indexInfo pg_attribute_unused())
{
	MemoryContext context;
	MemoryContext old;
	CvIvfMetaPageData meta;
	int			vc = cvlattice_vector_column(index);
	CVec	   *v;

	if (isnull[vc])
		return false;
	context = AllocSetContextCreate(CurrentMemoryContext, "cvlattice insert",
									ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(context);
	v = DatumGetCVec(values[vc]);
	cvivf_read_meta(index, &meta);
	check_dimensions(index, &meta, v);
	if (cvivf_vector_is_indexable(meta.metric, v->x, v->dim))
		insert_row(index, &meta, v, values[1 - vc], isnull[1 - vc], heap_tid);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(context);
	return false;
}
