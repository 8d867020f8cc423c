/*
 * cvec_layout.c: which column types read as cvec.  cvec itself (found by
 * its input function, whatever its schema), or a type whose cast to cvec
 * keeps the bytes (pgvector's vector under clustervec_pgvector), whose
 * values are then checked one by one (cvec_check_stored).  Apart from
 * cvec_util.c because it reads the catalogs, which the fuzzing harness's
 * small backend does not have.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_cast.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "type/cvec.h"

/* Whether a type is this library's cvec, whatever its schema: its input function is ours. */
bool
cvec_is_cvec_type(Oid type)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	char		typdelim;
	Oid			typioparam;
	Oid			typinput;
	FmgrInfo	input;

	get_type_io_data(type, IOFunc_input, &typlen, &typbyval, &typalign, &typdelim,
					 &typioparam, &typinput);
	if (!OidIsValid(typinput))
		return false;
	fmgr_info(typinput, &input);
	return input.fn_addr == cvec_in;
}

/* Whether a cast into cvec keeps the bytes: without a function, or through cvec_from_layout. */
static bool
cast_keeps_layout(Form_pg_cast cast)
{
	FmgrInfo	function;

	if (!cvec_is_cvec_type(cast->casttarget))
		return false;
	if (cast->castmethod == COERCION_METHOD_BINARY)
		return true;
	if (cast->castmethod != COERCION_METHOD_FUNCTION)
		return false;
	fmgr_info(cast->castfunc, &function);
	return function.fn_addr == cvec_from_layout;
}

/*
 * How values of a type read as cvec: cvec itself, or a type whose cast to
 * cvec keeps the bytes (pgvector's vector, with clustervec_pgvector), whose
 * values are then checked one by one; recognised by the cast, not by name.
 */
CVecLayout
cvec_layout_of_type(Oid type)
{
	CatCList   *casts;
	CVecLayout	layout = CVEC_LAYOUT_NONE;

	if (cvec_is_cvec_type(type))
		return CVEC_LAYOUT_CVEC;
	casts = SearchSysCacheList1(CASTSOURCETARGET, ObjectIdGetDatum(type));
	for (int i = 0; i < casts->n_members && layout == CVEC_LAYOUT_NONE; i++)
		if (cast_keeps_layout((Form_pg_cast) GETSTRUCT(&casts->members[i]->tuple)))
			layout = CVEC_LAYOUT_CHECKED;
	ReleaseCatCacheList(casts);
	return layout;
}

/*
 * A table's vector column by name: its number, and how its values read as
 * cvec (*layout, never CVEC_LAYOUT_NONE); an error when it is missing or
 * of another type.
 */
AttrNumber
cvec_column_of(Relation rel, const char *column, CVecLayout *layout)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), column);
	Oid			type;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" does not exist in relation \"%s\"",
						column, RelationGetRelationName(rel))));
	type = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
	*layout = cvec_layout_of_type(type);
	if (*layout == CVEC_LAYOUT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" has type %s, not cvec", column, format_type_be(type))));
	return attnum;
}
