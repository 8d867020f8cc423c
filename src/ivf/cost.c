/*
 * cost.c: amcostestimate.  A scan reads every tuple of the probed lists
 * before returning its first row, so nearly all cost is startup cost, in
 * proportion to probes / lists.  Without an ORDER BY on the opclass's
 * operator the index is useless, so the cost is infinite.  cvlattice uses
 * it too: with a label condition a scan reads the lists of its labels.
 */
#include "postgres.h"

#include <float.h>

#include "access/heaptoast.h"
#include "access/relation.h"
#include "optimizer/optimizer.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/spccache.h"

#include "ivf/ivf.h"

/*
 * The share of a quantized index's bytes a scan reads: the code pages,
 * and a vector only now and then (the candidates whose bound could still
 * be a result; few, so not charged).  1 for full-precision lists.
 */
static double
read_share(const CvIvfMetaPageData *meta)
{
	double		codes = meta->code_entry_size;

	if (!cvivf_is_quantized(meta))
		return 1.0;
	return codes / (codes + CVIVF_TUPLE_SIZE(meta->dimensions));
}

/* The fraction of the index a scan reads with the current settings, and the dimensions. */
static double
probed_fraction(Oid index_oid, int *dimensions)
{
	Relation	index = index_open(index_oid, NoLock);
	CvIvfMetaPageData meta;
	int			probes;

	cvivf_read_meta(index, &meta);
	probes = cvivf_scan_probes(index, &meta);
	index_close(index, NoLock);
	*dimensions = meta.dimensions;
	if ((meta.flags & CVIVF_META_NO_CENTROIDS) || meta.lists <= 1)
		return 1.0;
	return read_share(&meta) * Min((uint32) probes, meta.lists) / meta.lists;
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
	int			dimensions;

	if (path->indexorderbys == NIL)
	{
		*startup = DBL_MAX;
		*total = DBL_MAX;
		*selectivity = 0;
		*correlation = 0;
		*pages = 0;
		return;
	}
	fraction = probed_fraction(index->indexoid, &dimensions);
	/* cvlattice's label conditions: the rows of their lists, as the selectivity says */
	costs.numIndexTuples = path->indexclauses != NIL ? 0 : Max(1.0, index->tuples * fraction);
	genericcostestimate(root, path, loop_count, &costs);
	get_tablespace_page_costs(index->reltablespace, &random_page_cost, &seq_page_cost);
	/* lists are chains of mostly consecutive pages: read sequentially */
	if (loop_count <= 1)
		costs.indexTotalCost -= costs.numIndexPages * (random_page_cost - seq_page_cost);
	/*
	 * Vectors wider than the TOAST threshold live out of line in the heap,
	 * and the planner charges a sequential scan nothing for reading them
	 * back; the index's pages hold those same bytes, so to compare like with
	 * like they are not charged here either.
	 */
	if ((Size) dimensions * sizeof(float) > TOAST_TUPLE_THRESHOLD && loop_count <= 1)
		costs.indexTotalCost -= costs.numIndexPages * seq_page_cost;
	*startup = costs.indexTotalCost;
	*total = costs.indexTotalCost;
	*selectivity = costs.indexSelectivity;
	*correlation = 0;
	*pages = costs.numIndexPages;
}
