/*
 * vacuum.c: ambulkdelete of cvlattice: cvivf's bulk delete (every tuple
 * judged, dead ones flagged), and then, for every list it changed, the
 * centroid recomputed as the exact float64 mean of the list's live members.
 */
#include "postgres.h"

#include "commands/vacuum.h"
#include "utils/rel.h"

#include "lattice/lattice.h"
#include "math/mean.h"

typedef struct MeanState
{
	double	   *sum;
	uint64		members;
	int			dimensions;
	bool		directions;
} MeanState;

static void
add_member(const CvIvfTupleHeader *header pg_attribute_unused(), const float *vector,
		   BlockNumber block pg_attribute_unused(), Size offset pg_attribute_unused(), void *arg)
{
	MeanState  *state = (MeanState *) arg;

	if (cv_mean_add(state->sum, vector, state->dimensions, state->directions))
		state->members++;
}

/* The mean of the list's live members (cosine: of their directions); returns its norm. */
double
cvlattice_exact_mean(Relation index, const CvIvfMetaPageData *meta,
					 const CvLatticeListEntry *entry, BufferAccessStrategy strategy,
					 float *centroid)
{
	MeanState	state = {0};
	double		norm;

	state.dimensions = meta->dimensions;
	state.directions = meta->metric == CV_METRIC_COSINE;
	state.sum = palloc0(sizeof(double) * Max(meta->dimensions, 1));
	if (BlockNumberIsValid(entry->base.first_block))
		cvivf_scan_list(index, meta, entry->base.first_block, false, strategy, add_member, &state);
	norm = cv_mean_finish(state.sum, state.members, meta->dimensions, centroid);
	pfree(state.sum);
	return norm;
}

static void
recompute_mean(Relation index, const CvIvfMetaPageData *meta, int list,
			   BufferAccessStrategy strategy, void *arg pg_attribute_unused())
{
	cvlattice_replace_centroid(index, meta, list, strategy, cvlattice_exact_mean);
}

IndexBulkDeleteResult *
cvlatticebulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
					IndexBulkDeleteCallback callback, void *callback_state)
{
	return cvivf_bulkdelete_lists(info, stats, callback, callback_state, recompute_mean, NULL);
}
