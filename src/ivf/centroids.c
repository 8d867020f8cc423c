/*
 * centroids.c: the centroids of an index, cached per backend in rd_amcache.
 * Centroids change only with a new relfilenode (a rebuild) or a new
 * generation of cvivf_retrain, which counts itself in the metapage, so the
 * cache is keyed by both.
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/rel.h"

#include "ivf/ivf.h"

/* Larger centroid sets are read from the pages on each use instead. */
#define CVIVF_CENTROID_CACHE_LIMIT ((Size) 256 * 1024 * 1024)

typedef struct CentroidCache
{
	Oid			relfilenode;
	uint64		retrains;
	uint32		lists;
	uint32		dimensions;
	float		centroids[FLEXIBLE_ARRAY_MEMBER];
} CentroidCache;

/*
 * The centroids, lists x dimensions floats; *owned says whether the caller
 * must pfree them (true when they were too large to cache).
 */
const float *
cvivf_get_centroids(Relation index, const CvIvfMetaPageData *meta, bool *owned)
{
	CentroidCache *cache = (CentroidCache *) index->rd_amcache;
	Size		floats = (Size) meta->lists * meta->dimensions;
	float	   *fresh;

	*owned = false;
	if (meta->flags & CVIVF_META_NO_CENTROIDS)
		return NULL;
	if (cache != NULL && cache->relfilenode == index->rd_node.relNode &&
		cache->retrains == meta->retrains && cache->lists == meta->lists && cache->dimensions == meta->dimensions)
		return cache->centroids;
	fresh = cvivf_read_centroids(index, meta);
	if (floats * sizeof(float) > CVIVF_CENTROID_CACHE_LIMIT)
	{
		*owned = true;
		return fresh;
	}
	if (index->rd_amcache != NULL)
		pfree(index->rd_amcache);
	index->rd_amcache = NULL;
	cache = MemoryContextAllocHuge(index->rd_indexcxt,
								   offsetof(CentroidCache, centroids) + floats * sizeof(float));
	cache->relfilenode = index->rd_node.relNode;
	cache->retrains = meta->retrains;
	cache->lists = meta->lists;
	cache->dimensions = meta->dimensions;
	memcpy(cache->centroids, fresh, floats * sizeof(float));
	pfree(fresh);
	index->rd_amcache = cache;
	return cache->centroids;
}

/* The list a vector belongs to: the nearest centroid, ties to the lower list. */
int
cvivf_nearest_list(Relation index, const CvIvfMetaPageData *meta, const float *vector)
{
	bool		owned;
	const float *centroids = cvivf_get_centroids(index, meta, &owned);
	int			best = 0;
	double		best_distance = 0;

	if (centroids == NULL)
		return 0;
	for (uint32 list = 0; list < meta->lists; list++)
	{
		double		d = cvivf_centroid_distance(meta->metric, vector,
												centroids + (Size) list * meta->dimensions,
												meta->dimensions);

		if (list == 0 || d < best_distance)
		{
			best = list;
			best_distance = d;
		}
	}
	if (owned)
		pfree((float *) centroids);
	return best;
}
