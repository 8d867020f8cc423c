/*
 * cvec_util.c: allocation and the checks every cvec function shares, so each
 * error has one errcode and one wording everywhere.
 */
#include "postgres.h"

#include <math.h>

#include "type/cvec.h"

/* A zeroed cvec of dim elements; the caller has checked dim. */
CVec *
cvec_alloc(int dim)
{
	CVec	   *result = (CVec *) palloc0(CVEC_SIZE(dim));

	SET_VARSIZE(result, CVEC_SIZE(dim));
	result->dim = dim;
	return result;
}

/* Rejects an element count outside 1..CVEC_MAX_DIM. */
void
cvec_check_dim_count(int dim)
{
	if (dim < 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("cvec must have at least 1 dimension")));
	if (dim > CVEC_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvec cannot have more than %d dimensions", CVEC_MAX_DIM)));
}

/* Binary operators need operands of one dimension count. */
void
cvec_check_same_dims(const CVec *a, const CVec *b)
{
	if (a->dim != b->dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %d and %d", a->dim, b->dim)));
}

/* A column declared cvec(n) accepts exactly n dimensions. */
void
cvec_check_typmod(int dim, int32 typmod)
{
	if (typmod != -1 && typmod != dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("expected %d dimensions, not %d", typmod, dim)));
}

/* NaN and infinity would poison every distance and statistic downstream. */
void
cvec_check_finite_element(float value)
{
	if (isnan(value))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("NaN not allowed in cvec")));
	if (isinf(value))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("infinite value not allowed in cvec")));
}

/*
 * Narrows a float8 to a float4 element, raising an error where it would
 * overflow, and for NaN: a result computed from a state someone made by
 * hand must not become an element no dump can restore.
 */
float
cvec_float_or_overflow(double value)
{
	float		narrowed = (float) value;

	if (isnan(narrowed))
		cvec_check_finite_element(narrowed);
	if (isinf(narrowed))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value out of range: overflow"),
				 errdetail("The result does not fit in a float4 element of cvec.")));
	return narrowed;
}

/*
 * Whether an aggregate state's count is one: a whole number from 0 to 2^53,
 * where float8 still counts every row and int8 holds it (found by fuzzing:
 * 1e19 became a negative bigint).
 */
bool
cvec_is_row_count(double count)
{
	return isfinite(count) && count >= 0 && count <= 9007199254740992.0 &&
		count == floor(count);
}

/* Arithmetic on finite elements may still overflow to infinity. */
void
cvec_check_result_finite(const CVec *result)
{
	for (int i = 0; i < result->dim; i++)
		if (isinf(result->x[i]))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("value out of range: overflow"),
					 errdetail("Element %d of the result overflows float4.", i + 1)));
}

/* A NaN or infinite element where cvec's input did not check it: which one, and where from. */
static void
report_stored_non_finite(int element, int dim, float value)
{
	if (isnan(value))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("NaN not allowed in cvec"),
				 errdetail("Element %d of a %d-dimensional vector is NaN.", element, dim),
				 errhint("pgvector before 0.4.4 stored NaN and infinity from binary input; update or delete those rows.")));
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("infinite value not allowed in cvec"),
			 errdetail("Element %d of a %d-dimensional vector is infinite.", element, dim),
			 errhint("pgvector before 0.4.4 stored NaN and infinity from binary input; update or delete those rows.")));
}

/*
 * Every element of a value that did not come through cvec's own input
 * finite (NaN and infinity poison every distance and mean).
 */
void
cvec_check_finite(const float *x, int dim)
{
	for (int i = 0; i < dim; i++)
		if (!isfinite(x[i]))
			report_stored_non_finite(i + 1, dim, x[i]);
}

/*
 * A value of another type laid out as cvec, checked as cvec's input checks
 * its own: as many bytes as its dimensions need, 1 to CVEC_MAX_DIM of them,
 * the unused field 0, every element finite.  pgvector before 0.4.4 took NaN
 * and infinity in binary input, and tables keep them across upgrades.
 */
void
cvec_check_stored(const CVec *v)
{
	if (VARSIZE(v) < offsetof(CVec, x))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("value is not laid out as a cvec"),
				 errdetail("It holds %zu bytes, fewer than a header.", (size_t) VARSIZE(v))));
	cvec_check_dim_count(v->dim);
	if (VARSIZE(v) != CVEC_SIZE(v->dim) || v->unused != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("value is not laid out as a cvec"),
				 errdetail("It holds %zu bytes for %d dimensions and %d in its unused field.",
						   (size_t) VARSIZE(v), v->dim, v->unused)));
	cvec_check_finite(v->x, v->dim);
}
