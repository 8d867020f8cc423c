/*
 * cvec_arith.c: elementwise arithmetic and the functions that build a new
 * cvec from one (dims, normalisation, subvector).
 */
#include "postgres.h"

#include <math.h>

#include "math/distance.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvec_add);
PG_FUNCTION_INFO_V1(cvec_sub);
PG_FUNCTION_INFO_V1(cvec_mul);
PG_FUNCTION_INFO_V1(cvec_concat);
PG_FUNCTION_INFO_V1(cvec_dims);
PG_FUNCTION_INFO_V1(cvec_l2_normalize);
PG_FUNCTION_INFO_V1(cvec_subvector);

typedef enum ElementwiseOp
{
	OP_ADD,
	OP_SUB,
	OP_MUL
} ElementwiseOp;

/*
 * A product of two nonzero elements that rounds to 0 is an error, as
 * float4 * is in PostgreSQL (and pgvector's *), never a stored 0.
 */
static void
check_no_underflow(const CVec *a, const CVec *b, const CVec *product)
{
	for (int i = 0; i < product->dim; i++)
		if (product->x[i] == 0 && a->x[i] != 0 && b->x[i] != 0)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("value out of range: underflow"),
					 errdetail("Element %d of the result underflows float4.", i + 1)));
}

/* Applies op to each pair of elements; float4 arithmetic, as pgvector. */
static CVec *
elementwise(const CVec *a, const CVec *b, ElementwiseOp op)
{
	CVec	   *result;

	cvec_check_same_dims(a, b);
	result = cvec_alloc(a->dim);
	for (int i = 0; i < a->dim; i++)
	{
		if (op == OP_ADD)
			result->x[i] = a->x[i] + b->x[i];
		else if (op == OP_SUB)
			result->x[i] = a->x[i] - b->x[i];
		else
			result->x[i] = a->x[i] * b->x[i];
	}
	cvec_check_result_finite(result);
	if (op == OP_MUL)
		check_no_underflow(a, b, result);
	return result;
}

Datum
cvec_add(PG_FUNCTION_ARGS)
{
	PG_RETURN_CVEC_P(elementwise(PG_GETARG_CVEC_P(0), PG_GETARG_CVEC_P(1), OP_ADD));
}

Datum
cvec_sub(PG_FUNCTION_ARGS)
{
	PG_RETURN_CVEC_P(elementwise(PG_GETARG_CVEC_P(0), PG_GETARG_CVEC_P(1), OP_SUB));
}

Datum
cvec_mul(PG_FUNCTION_ARGS)
{
	PG_RETURN_CVEC_P(elementwise(PG_GETARG_CVEC_P(0), PG_GETARG_CVEC_P(1), OP_MUL));
}

/*
 * a || b: the elements of a, then those of b, as pgvector's vector_concat;
 * the result carries no typmod, as any function result.
 */
Datum
cvec_concat(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);
	int			dim = a->dim + b->dim;
	CVec	   *result;

	if (dim > CVEC_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvec cannot have more than %d dimensions", CVEC_MAX_DIM),
				 errdetail("Concatenating cvecs of %d and %d dimensions would give %d.",
						   a->dim, b->dim, dim)));
	result = cvec_alloc(dim);
	memcpy(result->x, a->x, sizeof(float) * a->dim);
	memcpy(result->x + a->dim, b->x, sizeof(float) * b->dim);
	PG_RETURN_CVEC_P(result);
}

Datum
cvec_dims(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);

	PG_RETURN_INT32(a->dim);
}

/* Unit length in float8, rounded once per element; a zero vector stays zero. */
Datum
cvec_l2_normalize(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *result = cvec_alloc(a->dim);
	double		norm = sqrt(cv_distance->norm_squared(a->x, a->dim));

	if (norm > 0)
		for (int i = 0; i < a->dim; i++)
			result->x[i] = (float) (a->x[i] / norm);
	PG_RETURN_CVEC_P(result);
}

/*
 * Elements start..start+count-1 (1-based), clipped to the vector like SQL
 * substring(); an empty result is an error because a cvec has >= 1 element.
 */
Datum
cvec_subvector(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	int32		count = PG_GETARG_INT32(2);

	/* in 64 bits: start + count and end - start overflow int32 at its ends */
	int64		start = PG_GETARG_INT32(1);
	int64		end = start + count;
	CVec	   *result;

	if (count < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("negative subvector length not allowed")));
	start = Max(start, 1);
	end = Min(end, (int64) a->dim + 1);
	if (end - start < 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("cvec must have at least 1 dimension"),
				 errdetail("subvector(%d, %d) selects no element of a cvec of %d dimensions.",
						   PG_GETARG_INT32(1), count, a->dim)));
	result = cvec_alloc((int) (end - start));
	memcpy(result->x, a->x + (start - 1), sizeof(float) * (size_t) (end - start));
	PG_RETURN_CVEC_P(result);
}
