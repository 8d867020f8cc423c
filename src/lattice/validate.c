/*
 * validate.c: amvalidate of cvlattice, and the comparison function of the
 * label operator class for any type.  A cvlattice operator class is either
 * a vector one (support function 1 is its distance, ordering operators
 * only, as cvivf's) or a label one (support function 1 compares labels,
 * operator 1 is equality, used for index conditions).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "lattice/lattice.h"

PG_FUNCTION_INFO_V1(cvlattice_label_cmp);

/* Operators of one purpose only: ordering (vector) or equality search (label). */
static bool
operators_valid(CatCList *operators)
{
	int			ordering = 0;

	for (int i = 0; i < operators->n_members; i++)
	{
		Form_pg_amop op = (Form_pg_amop) GETSTRUCT(&operators->members[i]->tuple);

		if (op->amoppurpose == AMOP_ORDER)
			ordering++;
		else if (op->amopstrategy != 1)
			return false;
	}
	return ordering == 0 || ordering == operators->n_members;
}

bool
cvlatticevalidate(Oid opclassoid)
{
	HeapTuple	tuple = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	Form_pg_opclass opclass;
	CatCList   *procs;
	CatCList   *operators;
	bool		valid = true;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	opclass = (Form_pg_opclass) GETSTRUCT(tuple);
	procs = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opclass->opcfamily));
	operators = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opclass->opcfamily));
	for (int i = 0; i < procs->n_members; i++)
	{
		Form_pg_amproc proc = (Form_pg_amproc) GETSTRUCT(&procs->members[i]->tuple);

		valid &= proc->amprocnum == 1;
	}
	valid &= procs->n_members >= 1 && operators_valid(operators);
	ReleaseCatCacheList(operators);
	ReleaseCatCacheList(procs);
	ReleaseSysCache(tuple);
	return valid;
}

/*
 * Support function 1 of the label operator class for any type: the type's
 * default btree comparison.  The index itself always compares labels with
 * it (through the type cache), whichever label operator class it has.
 */
Datum
cvlattice_label_cmp(PG_FUNCTION_ARGS)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 0);
	TypeCacheEntry *cache = lookup_type_cache(type, TYPECACHE_CMP_PROC_FINFO);

	if (!OidIsValid(cache->cmp_proc))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("could not identify a comparison function for type %s",
						format_type_be(type))));
	PG_RETURN_INT32(DatumGetInt32(FunctionCall2Coll(&cache->cmp_proc_finfo,
													PG_GET_COLLATION(),
													PG_GETARG_DATUM(0),
													PG_GETARG_DATUM(1))));
}
