/*
 * layout.c: where the pages of a new index go, for both kinds (cvivf's
 * build and cvlattice's): the metapage fields that fix the layout.
 */
#include "postgres.h"

#include "utils/rel.h"

#include "ivf/ivf.h"

/* Whole centroids per page; 0 when one centroid needs several pages. */
static uint32
centroids_in_page(Size centroid_bytes)
{
	return centroid_bytes == 0 ? 1 : CVIVF_PAGE_CAPACITY / centroid_bytes;
}

static BlockNumber
centroid_pages(const CvIvfMetaPageData *meta)
{
	if (meta->centroids_per_page > 0)
		return (meta->lists + meta->centroids_per_page - 1) / meta->centroids_per_page;
	return meta->lists * meta->pages_per_centroid;
}

/* The metapage fields every build fills in the same way (kind: cvivf). */
void
cvivf_init_meta(CvIvfMetaPageData *meta, CvMetric metric, int dims, int lists,
				bool centroids)
{
	Size		centroid_bytes = sizeof(float) * (Size) dims;

	memset(meta, 0, sizeof(*meta));
	meta->magic = CVIVF_MAGIC;
	meta->version = CVIVF_VERSION;
	meta->dimensions = dims;
	meta->metric = metric;
	meta->lists = lists;
	meta->flags = centroids ? 0 : CVIVF_META_NO_CENTROIDS;
	meta->generation = 1;
	meta->first_centroid_block = 1;
	meta->centroids_per_page = centroids_in_page(centroid_bytes);
	meta->pages_per_centroid = meta->centroids_per_page > 0 ? 1 :
		(centroid_bytes + CVIVF_PAGE_CAPACITY - 1) / CVIVF_PAGE_CAPACITY;
	meta->entries_per_directory_page = CVIVF_PAGE_CAPACITY / sizeof(CvIvfListEntry);
	meta->first_directory_block = 1 + (centroids ? centroid_pages(meta) : 0);
}

/* The dimensions the first column's type modifier promises, or 0. */
int
cvivf_declared_dimensions(Relation index)
{
	int32		typmod = TupleDescAttr(RelationGetDescr(index), 0)->atttypmod;

	return typmod > 0 ? typmod : 0;
}

/* Bytes of one directory entry: cvivf's, or a longer one whose prefix is cvivf's. */
Size
cvivf_directory_entry_size(const CvIvfMetaPageData *meta)
{
	return meta->directory_entry_size > 0 ? meta->directory_entry_size : sizeof(CvIvfListEntry);
}
