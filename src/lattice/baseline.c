/*
 * baseline.c: a cvlattice build that also records the baseline
 * cvivf_health compares with (src/ivf/drift.c): the build, then its lists
 * read back to measure each member's distance to its list's mean.  The
 * read costs one more pass over the index's pages; once the build sums the
 * distances while it writes its lists (cvivf_distance_sums_add, as cvivf's
 * build does, then cvivf_record_baseline), this wrapper goes.
 */
#include "postgres.h"

#include "lattice/lattice.h"

IndexBuildResult *
cvlatticebuild_baseline(Relation heap, Relation index, IndexInfo *info)
{
	IndexBuildResult *result = cvlatticebuild(heap, index, info);

	cvivf_measure_baseline(index);
	return result;
}
