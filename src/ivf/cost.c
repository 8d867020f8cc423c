/*
 * cost.c: amcostestimate.  A scan reads every tuple of the probed lists
 * before returning its first row, so nearly all cost is startup cost, in
 * proportion to probes / lists.  Without an ORDER BY on the opclass's
 * operator the index is useless, so the cost is infinite.
 */
#include "postgres.h"

#include <float.h>

#include "access/relation.h"
#include "optimizer/optimizer.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/spccache.h"

#include "ivf/ivf.h"

/* The fraction of the index a scan reads with the current settings. */
static double
probed_fraction(Oid index_oid)
{
	Relation	index = index_open(index_oid, NoLock);
	CvIvfMetaPageData meta;
	double		fraction;

	cvivf_read_meta(index, &meta);
	index_close(index, NoLock);
	if ((meta.flags & CVIVF_META_NO_CENTROIDS) || meta.lists <= 1)
		return 1.0;
	fraction = (double) Min((uint32) cvivf_probes, meta.lists) / meta.lists;
	return fraction;
}

void
cvivfcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				  Cost *startup, Cost *total, Selectivity *selectivity,
				  double *correlation, double *pages)
{
	GenericCosts costs = {0};
	IndexOptInfo *index = path->indexinfo;
	double		fraction;
	double		random_page_cost;
	double		seq_page_cost;

	if (path->indexorderbys == NIL)
	{
		*startup = DBL_MAX;
		*total = DBL_MAX;
		*selectivity = 0;
		*correlation = 0;
		*pages = 0;
		return;
	}
	fraction = probed_fraction(index->indexoid);
	costs.numIndexTuples = Max(1.0, index->tuples * fraction);
	genericcostestimate(root, path, loop_count, &costs);
	get_tablespace_page_costs(index->reltablespace, &random_page_cost, &seq_page_cost);
	/* lists are chains of mostly consecutive pages: read sequentially */
	if (loop_count <= 1)
		costs.indexTotalCost -= costs.numIndexPages * (random_page_cost - seq_page_cost);
	*startup = costs.indexTotalCost;
	*total = costs.indexTotalCost;
	*selectivity = costs.indexSelectivity;
	*correlation = 0;
	*pages = costs.numIndexPages;
}
