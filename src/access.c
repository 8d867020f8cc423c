/*
 * access.c: who may read a relation through clustervec's SQL functions (see
 * access.h).  Every check here reads the catalogs only, so it runs before
 * the function takes its first lock on the table or the index; the index is
 * opened after its table, in the order the executor uses.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "access.h"
#include "ivf/ivf.h"
#include "lattice/lattice.h"

/* Raises PostgreSQL's own "permission denied" unless the user may SELECT from relid. */
void
cv_check_select(Oid relid)
{
	AclResult	result = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

	if (result != ACLCHECK_OK)
		aclcheck_error(result, get_relkind_objtype(get_rel_relkind(relid)), get_rel_name(relid));
}

/*
 * Refuses a role that row-level security applies to on relid: the function
 * would read or count rows the policies hide from it.
 */
void
cv_check_row_security(Oid relid, const char *function)
{
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s is not available to roles subject to row-level security on table \"%s\"",
						function, get_rel_name(relid)),
				 errdetail("It would read or count rows that the table's policies hide from the current role."),
				 errhint("Call it as a role that the table's policies do not apply to: one with BYPASSRLS, or the table's owner unless row-level security is forced.")));
}

/*
 * The rights LOCK TABLE ... IN SHARE MODE asks for: a function that keeps
 * writers out gives its caller no power that statement would not.
 */
static void
check_share_lock_rights(Oid relid, const char *function)
{
	if (pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for %s %s",
						get_rel_relkind(relid) == RELKIND_MATVIEW ? "materialized view" : "table",
						get_rel_name(relid)),
				 errdetail("%s locks the table in SHARE mode, which needs the UPDATE, DELETE or TRUNCATE privilege, as LOCK TABLE does.",
						   function)));
}

/* Whether the user may read relid's rows unfiltered; false, not an error, when it is gone. */
bool
cv_may_inspect(Oid relid)
{
	bool		missing = false;

	if (pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &missing) != ACLCHECK_OK || missing)
		return false;
	return check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED;
}

/* The table of an index of access method am, from the catalogs, without locking anything. */
static Oid
table_of(Oid indexid, const char *am)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(indexid));
	Form_pg_class form;
	bool		is_am;
	bool		partitioned;
	char	   *name;

	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", indexid)));
	form = (Form_pg_class) GETSTRUCT(tuple);
	is_am = form->relkind == RELKIND_INDEX && form->relam == get_index_am_oid(am, false);
	partitioned = form->relkind == RELKIND_PARTITIONED_INDEX &&
		form->relam == get_index_am_oid(am, false);
	name = pstrdup(NameStr(form->relname));
	ReleaseSysCache(tuple);
	if (partitioned)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a partitioned index, whose partitions hold the %s indexes",
						name, am),
				 errhint("Call the function on each partition's index, for example over pg_partition_tree('%s').",
						 name)));
	if (!is_am)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a %s index", name, am)));
	return IndexGetRelation(indexid, false);
}

/*
 * Opens an index of access method am (whose build callback is ambuild) and
 * its table for a function, after checking that the user may use it so:
 * the table first (AccessShareLock, or ShareLock to keep writers out), then
 * the index (AccessShareLock).  Both locks last until the end of the
 * transaction, as a query's do; close with NoLock.
 */
static Relation
open_index(Oid indexid, const char *am, ambuild_function ambuild, CvIndexUse use,
		   const char *function, Relation *heap)
{
	Oid			heapid = table_of(indexid, am);
	LOCKMODE	lockmode = AccessShareLock;
	Relation	index;

	cv_check_select(heapid);
	if (use == CV_INDEX_MAINTAIN)
	{
		if (!pg_class_ownercheck(heapid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_INDEX, get_rel_name(indexid));
		lockmode = ShareUpdateExclusiveLock;
	}
	if (use == CV_INDEX_EXCLUDE_WRITERS)
	{
		check_share_lock_rights(heapid, function);
		/* a standby has no writers, and takes no SHARE lock during recovery */
		if (!RecoveryInProgress())
			lockmode = ShareLock;
	}
	cv_check_row_security(heapid, function);
	*heap = table_open(heapid, lockmode);
	/* REINDEX CONCURRENTLY may drop it while we wait for its lock */
	index = try_relation_open(indexid, use == CV_INDEX_MAINTAIN ? lockmode : AccessShareLock);
	if (index == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("index with OID %u does not exist", indexid),
				 errdetail("It was dropped while %s waited for it, for example when REINDEX CONCURRENTLY replaced it.",
						   function),
				 errhint("Name the index again: its name now refers to the new one.")));
	/* dropped and its OID reused while we waited for the lock */
	if (index->rd_rel->relkind != RELKIND_INDEX || index->rd_indam->ambuild != ambuild ||
		IndexGetRelation(indexid, true) != heapid)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("could not open parent table of index \"%s\"",
						RelationGetRelationName(index))));
	return index;
}

Relation
cv_open_cvivf(Oid indexid, CvIndexUse use, const char *function, Relation *heap)
{
	return open_index(indexid, "cvivf", cvivfbuild, use, function, heap);
}

Relation
cv_open_cvlattice(Oid indexid, CvIndexUse use, const char *function, Relation *heap)
{
	return open_index(indexid, "cvlattice", cvlatticebuild, use, function, heap);
}

/* Whether the relation is an index of access method am (no lock taken). */
static bool
index_of_am(Oid indexid, const char *am)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(indexid));
	bool		is_am = false;

	if (HeapTupleIsValid(tuple))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);

		is_am = form->relkind == RELKIND_INDEX && form->relam == get_index_am_oid(am, false);
		ReleaseSysCache(tuple);
	}
	return is_am;
}

Relation
cv_open_vector_index(Oid indexid, CvIndexUse use, const char *function, Relation *heap,
					 bool *is_lattice)
{
	*is_lattice = index_of_am(indexid, "cvlattice");
	if (*is_lattice)
		return cv_open_cvlattice(indexid, use, function, heap);
	return cv_open_cvivf(indexid, use, function, heap);
}
