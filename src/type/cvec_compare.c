/*
 * cvec_compare.c: total order for btree (element by element, then by
 * length, as pgvector), so cvec works in ORDER BY, DISTINCT and unique keys.
 */
#include "postgres.h"

#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvec_cmp);
PG_FUNCTION_INFO_V1(cvec_lt);
PG_FUNCTION_INFO_V1(cvec_le);
PG_FUNCTION_INFO_V1(cvec_eq);
PG_FUNCTION_INFO_V1(cvec_ne);
PG_FUNCTION_INFO_V1(cvec_ge);
PG_FUNCTION_INFO_V1(cvec_gt);

/* -1, 0 or 1; elements are finite, so float comparison is a total order (-0 == 0). */
static int
cvec_compare(const CVec *a, const CVec *b)
{
	int			shared = Min(a->dim, b->dim);

	for (int i = 0; i < shared; i++)
	{
		if (a->x[i] < b->x[i])
			return -1;
		if (a->x[i] > b->x[i])
			return 1;
	}
	if (a->dim != b->dim)
		return a->dim < b->dim ? -1 : 1;
	return 0;
}

static int
compare_args(FunctionCallInfo fcinfo)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);
	int			result = cvec_compare(a, b);

	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	return result;
}

Datum
cvec_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(compare_args(fcinfo));
}

Datum
cvec_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo) < 0);
}

Datum
cvec_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo) <= 0);
}

Datum
cvec_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo) == 0);
}

Datum
cvec_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo) != 0);
}

Datum
cvec_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo) >= 0);
}

Datum
cvec_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo) > 0);
}
