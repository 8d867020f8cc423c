/*
 * cvec_aggregate.c: sum(cvec) and avg(cvec).
 *
 * The state is a real SQL type, float8[] = {n, s_1, ..., s_d}, with a
 * combine function and no serialize/deserialize: parallel workers and a
 * distributed engine (Citus) can ship and merge it as an ordinary value.
 * Sums are float8, so avg and sum round once, at the end.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvec_accum);
PG_FUNCTION_INFO_V1(cvec_combine);
PG_FUNCTION_INFO_V1(cvec_avg);
PG_FUNCTION_INFO_V1(cvec_sum);

static void
invalid_state(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("invalid cvec aggregate state"),
			 errdetail("Expected a float8[] of the form {count, sum_1, ..., sum_d}: %s.", why),
			 errhint("Pass a state made by cvec_accum or cvec_combine; '{0}' is the state of no rows.")));
}

/*
 * Checks a state array and returns its elements; *dim is 0 for the empty
 * state.  The support functions are callable directly, so a state may come
 * from anyone: a count that is no row count, or a non-finite sum, would
 * make a vector that no dump can restore.
 */
static float8 *
state_elements(ArrayType *state, int *dim)
{
	int			length;
	float8	   *values;

	if (ARR_NDIM(state) == 0)
		invalid_state("the array is empty, without even the count");
	if (ARR_NDIM(state) != 1 || ARR_HASNULL(state) || ARR_ELEMTYPE(state) != FLOAT8OID)
		invalid_state("not a one-dimensional float8[] without NULLs");
	length = ARR_DIMS(state)[0];
	if (length < 1 || length - 1 > CVEC_MAX_DIM)
		invalid_state("wrong length");
	values = (float8 *) ARR_DATA_PTR(state);
	if (!cvec_is_row_count(values[0]))
		invalid_state("the count is not a whole number between 0 and 2^53");
	if ((values[0] == 0) != (length == 1))
		invalid_state("the count does not match the sums");
	for (int i = 1; i < length; i++)
		if (!isfinite(values[i]))
			invalid_state("a sum is not finite");
	*dim = length - 1;
	return values;
}

static ArrayType *
new_state(int dim)
{
	Datum	   *zeros = palloc(sizeof(Datum) * (dim + 1));

	for (int i = 0; i <= dim; i++)
		zeros[i] = Float8GetDatum(0.0);
	return construct_array(zeros, dim + 1, FLOAT8OID, sizeof(float8),
						   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

static void
check_state_dims(int state_dim, int value_dim)
{
	if (state_dim != value_dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %d and %d", state_dim, value_dim)));
}

/*
 * Adds one vector.  Inside an aggregate the state belongs to us, so it is
 * updated in place (as float8_accum does) instead of copied per row.
 */
Datum
cvec_accum(PG_FUNCTION_ARGS)
{
	ArrayType  *state = PG_GETARG_ARRAYTYPE_P(0);
	CVec	   *v = PG_GETARG_CVEC_P(1);
	int			dim;
	float8	   *sums = state_elements(state, &dim);

	if (dim == 0 || !AggCheckCallContext(fcinfo, NULL))
	{
		double		count = sums[0];

		if (dim != 0)
			check_state_dims(dim, v->dim);
		state = dim == 0 ? new_state(v->dim) : (ArrayType *) PG_DETOAST_DATUM_COPY(PG_GETARG_DATUM(0));
		/* ours, and checked already: a new state's zero count is about to become 1 */
		sums = (float8 *) ARR_DATA_PTR(state);
		dim = ARR_DIMS(state)[0] - 1;
		sums[0] = count;
	}
	check_state_dims(dim, v->dim);
	sums[0] += 1;
	for (int i = 0; i < dim; i++)
		sums[i + 1] += v->x[i];
	PG_RETURN_ARRAYTYPE_P(state);
}

/* Merges two partial states (parallel workers, Citus shards). */
Datum
cvec_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *left = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *right = PG_GETARG_ARRAYTYPE_P(1);
	int			left_dim,
				right_dim;
	float8	   *left_sums = state_elements(left, &left_dim);
	float8	   *right_sums = state_elements(right, &right_dim);

	if (right_sums[0] == 0)
		PG_RETURN_ARRAYTYPE_P(left);
	if (left_sums[0] == 0)
		PG_RETURN_ARRAYTYPE_P(right);
	check_state_dims(left_dim, right_dim);
	if (!AggCheckCallContext(fcinfo, NULL))
	{
		left = (ArrayType *) PG_DETOAST_DATUM_COPY(PG_GETARG_DATUM(0));
		left_sums = state_elements(left, &left_dim);
	}
	for (int i = 0; i <= left_dim; i++)
		left_sums[i] += right_sums[i];
	PG_RETURN_ARRAYTYPE_P(left);
}

/* The sums, divided by the count for avg, narrowed to float4; NULL for no rows. */
static Datum
finish(FunctionCallInfo fcinfo, bool average)
{
	ArrayType  *state = PG_GETARG_ARRAYTYPE_P(0);
	int			dim;
	float8	   *sums = state_elements(state, &dim);
	CVec	   *result;

	if (sums[0] == 0)
		PG_RETURN_NULL();
	result = cvec_alloc(dim);
	for (int i = 0; i < dim; i++)
		result->x[i] = cvec_float_or_overflow(average ? sums[i + 1] / sums[0] : sums[i + 1]);
	PG_RETURN_CVEC_P(result);
}

Datum
cvec_avg(PG_FUNCTION_ARGS)
{
	return finish(fcinfo, true);
}

Datum
cvec_sum(PG_FUNCTION_ARGS)
{
	return finish(fcinfo, false);
}
