/*
 * citus.c: whether a relation is the local shell of a Citus distributed
 * table, without linking against Citus.
 *
 * Citus keeps a distributed table's rows in its shards, other relations
 * (mostly on other nodes); the relation that carries the table's name on
 * the coordinator, and on workers that hold its metadata, has no rows, and
 * neither have its indexes.  The executor knows and sends queries to the
 * shards; a function that reads a heap or an index's pages itself would see
 * an empty table and answer as if it were one.  Citus lists every such
 * table (distributed, reference, or local in its metadata) in
 * pg_dist_partition, one row each, keyed by its first column; shards are
 * not listed, so the same function called on a shard reads its rows.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/htup_details.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus.h"

/* pg_dist_partition.logicalrelid, the table (regclass, an oid) */
#define CV_DIST_PARTITION_RELID 1
/* pg_dist_partition.partmethod: 'h' for a table hash-distributed by a column */
#define CV_DIST_PARTITION_METHOD 2
/* pg_dist_partition.partkey: that column, as the text of a Var node */
#define CV_DIST_PARTITION_KEY 3

/* The column a pg_dist_partition row hash-distributes by, or NULL. */
static char *
hash_column(HeapTuple row, TupleDesc desc, Oid relid)
{
	bool		isnull;
	Datum		method = heap_getattr(row, CV_DIST_PARTITION_METHOD, desc, &isnull);
	Datum		key;
	Node	   *node;

	if (isnull || DatumGetChar(method) != 'h')
		return NULL;
	key = heap_getattr(row, CV_DIST_PARTITION_KEY, desc, &isnull);
	if (isnull)
		return NULL;
	node = stringToNode(TextDatumGetCString(key));
	if (!IsA(node, Var))
		return NULL;
	return get_attname(relid, ((Var *) node)->varattno, true);
}

/*
 * The column by which Citus hash-distributes relid, or NULL when relid is
 * not such a table (a local, reference or single-shard table, or no Citus).
 */
char *
cv_citus_distribution_column(Oid relid)
{
	Oid			catalog;
	Relation	partitions;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	row;
	char	   *column = NULL;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return NULL;
	catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	if (!OidIsValid(catalog))
		return NULL;
	partitions = table_open(catalog, AccessShareLock);
	ScanKeyInit(&key, CV_DIST_PARTITION_RELID, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(partitions, InvalidOid, false, NULL, 1, &key);
	row = systable_getnext(scan);
	if (HeapTupleIsValid(row))
		column = hash_column(row, RelationGetDescr(partitions), relid);
	systable_endscan(scan);
	table_close(partitions, AccessShareLock);
	return column;
}

/*
 * Whether Citus has relid in its metadata.  Without the citus extension in
 * this database that is one lookup in pg_extension's name index; with it,
 * a scan of pg_dist_partition, a table of one row per distributed table.
 */
bool
cv_citus_is_distributed(Oid relid)
{
	Oid			catalog;
	Relation	partitions;
	ScanKeyData key;
	SysScanDesc scan;
	bool		found;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	if (!OidIsValid(catalog))
		return false;
	partitions = table_open(catalog, AccessShareLock);
	ScanKeyInit(&key, CV_DIST_PARTITION_RELID, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(partitions, InvalidOid, false, NULL, 1, &key);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(partitions, AccessShareLock);
	return found;
}

/*
 * Raises an error when relid is a Citus shell: the function would read no
 * rows and return an empty or wrong answer, silently.
 */
void
cv_citus_refuse_shell(Oid relid, const char *function, const char *hint)
{
	if (!cv_citus_is_distributed(relid))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s cannot read Citus distributed table \"%s\"", function, get_rel_name(relid)),
			 errdetail("Its rows are in its shards; the relation on this node is an empty shell."),
			 errhint("%s", hint)));
}
