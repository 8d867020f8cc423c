/*
 * access.h: who may read a relation through clustervec's SQL functions.
 *
 * A function that takes a table or an index reads rows the way a query
 * would, so it asks for what the query would: SELECT on the table.  It asks
 * before taking any lock, as PostgreSQL's own commands do, so a role that may
 * not read a table cannot queue behind (or in front of) its owner's locks.
 * Functions that would return or count rows the table's row-level security
 * hides refuse roles subject to it.
 */
#ifndef CV_ACCESS_H
#define CV_ACCESS_H

#include "postgres.h"

#include "utils/relcache.h"

/* What a function does with an index's table: read it, or also keep writers out. */
typedef enum CvIndexUse
{
	CV_INDEX_READ,				/* AccessShareLock: SELECT */
	CV_INDEX_EXCLUDE_WRITERS,	/* ShareLock: SELECT and LOCK TABLE ... IN SHARE MODE's rights */
	CV_INDEX_MAINTAIN			/* ShareUpdateExclusiveLock on both: the table's owner, as REINDEX */
} CvIndexUse;

extern void cv_check_select(Oid relid);
extern void cv_check_row_security(Oid relid, const char *function);
extern bool cv_may_inspect(Oid relid);
extern Relation cv_open_cvivf(Oid indexid, CvIndexUse use, const char *function,
							  Relation *heap);
extern Relation cv_open_cvlattice(Oid indexid, CvIndexUse use, const char *function,
								  Relation *heap);

/* A cvivf or cvlattice index (*is_lattice says which); errors name cvivf otherwise. */
extern Relation cv_open_vector_index(Oid indexid, CvIndexUse use, const char *function,
									 Relation *heap, bool *is_lattice);

#endif							/* CV_ACCESS_H */
