/*
 * cvec_cast.c: casts between cvec and one-dimensional arrays of real, double
 * precision, integer and numeric, and the checked cast into cvec from a
 * type with its layout (pgvector's vector, in clustervec_pgvector).
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvec_from_array);
PG_FUNCTION_INFO_V1(cvec_to_real_array);
PG_FUNCTION_INFO_V1(cvec_from_layout);

/*
 * A numeric, rounded once to float4 (numeric -> float8 -> float4 could round
 * twice); beyond float4's range it is an overflow, not an input error.
 */
static double
numeric_as_double(Datum value)
{
	Numeric		num = DatumGetNumeric(value);
	double		approx;

	if (numeric_is_nan(num))
		return NAN;
	if (numeric_is_inf(num))
		return INFINITY;		/* either sign is refused the same way */
	approx = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, value));
	if (isinf((float) approx))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value out of range: overflow"),
				 errdetail("The result does not fit in a float4 element of cvec.")));
	return DatumGetFloat4(DirectFunctionCall1(numeric_float4, value));
}

/* One array element as float8, so NaN, infinity and overflow are caught once. */
static double
element_as_double(Datum value, Oid element_type)
{
	switch (element_type)
	{
		case INT4OID:
			return (double) DatumGetInt32(value);
		case FLOAT4OID:
			return (double) DatumGetFloat4(value);
		case FLOAT8OID:
			return DatumGetFloat8(value);
		case NUMERICOID:
			return numeric_as_double(value);
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("unsupported array element type %s for cvec",
							format_type_be(element_type)),
					 errhint("Cast from real[], double precision[], integer[] or numeric[].")));
	}
	return 0;					/* keep the compiler quiet */
}

/* Rejects arrays a cvec cannot represent: NULL elements or several dimensions. */
static void
check_array_shape(ArrayType *array)
{
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("array must be 1-D"),
				 errdetail("The array has %d dimensions.", ARR_NDIM(array))));
	if (array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("array must not contain nulls")));
}

/* array_to_cvec(anyarray, typmod int, explicit bool) behind every array cast. */
Datum
cvec_from_array(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	int32		typmod = PG_GETARG_INT32(1);
	Oid			element_type = ARR_ELEMTYPE(array);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *values;
	int			count;
	CVec	   *result;

	check_array_shape(array);
	get_typlenbyvalalign(element_type, &typlen, &typbyval, &typalign);
	deconstruct_array(array, element_type, typlen, typbyval, typalign,
					  &values, NULL, &count);
	cvec_check_dim_count(count);
	cvec_check_typmod(count, typmod);
	result = cvec_alloc(count);
	for (int i = 0; i < count; i++)
	{
		double		value = element_as_double(values[i], element_type);

		if (isnan(value) || isinf(value))
			cvec_check_finite_element((float) value);
		result->x[i] = cvec_float_or_overflow(value);
	}
	PG_RETURN_CVEC_P(result);
}

Datum
cvec_to_real_array(PG_FUNCTION_ARGS)
{
	CVec	   *v = PG_GETARG_CVEC_P(0);
	Datum	   *values = palloc(sizeof(Datum) * v->dim);

	for (int i = 0; i < v->dim; i++)
		values[i] = Float4GetDatum(v->x[i]);
	PG_RETURN_POINTER(construct_array(values, v->dim, FLOAT4OID,
									  sizeof(float4), true, TYPALIGN_INT));
}

/*
 * cvec(vector, typmod, explicit): the bytes stay, each value is checked
 * (cvec_check_stored says why a cast without a function would not do).
 */
Datum
cvec_from_layout(PG_FUNCTION_ARGS)
{
	CVec	   *v = PG_GETARG_CVEC_P(0);

	cvec_check_stored(v);
	cvec_check_typmod(v->dim, PG_GETARG_INT32(1));
	PG_RETURN_CVEC_P(v);
}
