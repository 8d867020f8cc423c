/*
 * validate.c: amvalidate.  A cvivf opclass needs support function 1 (its
 * distance function, which tells the metric) and ordering operators only.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "utils/catcache.h"
#include "utils/syscache.h"

#include "ivf/ivf.h"

bool
cvivfvalidate(Oid opclassoid)
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
	for (int i = 0; i < operators->n_members; i++)
	{
		Form_pg_amop op = (Form_pg_amop) GETSTRUCT(&operators->members[i]->tuple);

		valid &= op->amoppurpose == AMOP_ORDER;
	}
	valid &= procs->n_members >= 1 && operators->n_members >= 1;
	ReleaseCatCacheList(operators);
	ReleaseCatCacheList(procs);
	ReleaseSysCache(tuple);
	return valid;
}
