/*
 * citus.h: whether a relation is the local shell of a Citus distributed
 * table (see citus.c).
 */
#ifndef CV_CITUS_H
#define CV_CITUS_H

#include "postgres.h"

extern bool cv_citus_is_distributed(Oid relid);
extern char *cv_citus_distribution_column(Oid relid);
extern void cv_citus_refuse_shell(Oid relid, const char *function, const char *hint);

#endif							/* CV_CITUS_H */
