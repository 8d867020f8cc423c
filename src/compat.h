/*
 * compat.h: every PG_VERSION_NUM shim, and nowhere else.
 */
#ifndef CV_COMPAT_H
#define CV_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/*
 * Parallel index builds.  PostgreSQL 17 plans the workers of every access
 * method that sets amcanbuildparallel and hands their number to ambuild in
 * ii_ParallelWorkers; before it, index_build planned them for btree only,
 * so another access method plans its own (as pgvector does).
 */
#if PG_VERSION_NUM >= 170000
#define CV_SET_CAN_BUILD_PARALLEL(am) ((am)->amcanbuildparallel = true)
#define cv_index_build_workers(heap, index, info) ((info)->ii_ParallelWorkers)
#else
#define CV_SET_CAN_BUILD_PARALLEL(am) ((void) (am))
#define cv_index_build_workers(heap, index, info) \
	(IsNormalProcessingMode() ? \
	 plan_create_index_workers(RelationGetRelid(heap), RelationGetRelid(index)) : 0)
#endif

#endif
