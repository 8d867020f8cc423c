/*
 * aggregate.c: cluster_stats(cvec) (and cluster_stats(vector) of
 * clustervec_pgvector), the part of the centroid family one pass can
 * compute, as an aggregate any GROUP BY can use.
 *
 * The state is a plain float8[] (so parallel query ships it between
 * processes and Citus merges it across shards) laid out as
 *   {d, n, M2, m, norm_mean, norm_M2, mean_1..mean_d, unit_1..unit_d}
 * with Welford updates per row and Chan's formulas to combine: M2 is the
 * sum over dimensions of squared deviations from the mean (the inertia),
 * m counts nonzero members and unit_* sums their unit vectors.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"

#include "math/distance.h"
#include "math/health.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cluster_stats_accum);
PG_FUNCTION_INFO_V1(cluster_stats_combine);
PG_FUNCTION_INFO_V1(cluster_stats_final);

#define ST_D 0
#define ST_N 1
#define ST_M2 2
#define ST_NONZERO 3
#define ST_NORM_MEAN 4
#define ST_NORM_M2 5
#define ST_HEADER 6
#define STATE_LENGTH(d) (ST_HEADER + 2 * (d))

static void
invalid_state(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("invalid cluster_stats state"),
			 errdetail("%s.", why)));
}

/* The counts and moments of a non-empty state hold together (every value finite, checked first). */
static void
check_moments(const float8 *s)
{
	if (!cvec_is_row_count(s[ST_N]) || s[ST_N] < 1)
		invalid_state("The member count is not a whole number between 1 and 2^53");
	if (!cvec_is_row_count(s[ST_NONZERO]) || s[ST_NONZERO] > s[ST_N])
		invalid_state("The count of nonzero members is not a whole number between 0 and the member count");
	if (s[ST_NORM_MEAN] < 0)
		invalid_state("The mean norm is negative");
}

/*
 * The state's elements after checking them; empty states have d = 0.  The
 * support functions are callable directly, so a state may come from anyone:
 * its dimension count must be a whole number matching its length before
 * anything indexes by it, and every value finite, or a result would hold
 * NaN or infinity.
 */
static float8 *
state_values(ArrayType *state, int *d)
{
	int			length;
	float8	   *values;
	double		dims;

	if (ARR_NDIM(state) != 1 || ARR_HASNULL(state) || ARR_ELEMTYPE(state) != FLOAT8OID)
		invalid_state("Expected a one-dimensional float8[] without NULLs");
	length = ARR_DIMS(state)[0];
	values = (float8 *) ARR_DATA_PTR(state);
	if (length < 1)
		invalid_state("The state is empty");
	dims = values[ST_D];
	if (!cvec_is_row_count(dims) || dims > CVEC_MAX_DIM)
		invalid_state("The dimension count is not a whole number between 0 and " CppAsString2(CVEC_MAX_DIM));
	*d = (int) dims;
	if (*d == 0)
		return values;			/* no member yet: nothing else is read */
	if (length != STATE_LENGTH(*d))
		invalid_state("The length does not match the dimension count");
	for (int i = 0; i < length; i++)
		if (!isfinite(values[i]))
			invalid_state("A value is not finite");
	check_moments(values);
	return values;
}

static ArrayType *
new_state(int d)
{
	int			length = STATE_LENGTH(d);
	Datum	   *zeros = palloc(sizeof(Datum) * length);

	for (int i = 0; i < length; i++)
		zeros[i] = Float8GetDatum(0.0);
	zeros[ST_D] = Float8GetDatum((double) d);
	return construct_array(zeros, length, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL,
						   TYPALIGN_DOUBLE);
}

/* A state we may change: our own inside an aggregate, else a copy. */
static ArrayType *
writable_state(FunctionCallInfo fcinfo, int argno)
{
	if (AggCheckCallContext(fcinfo, NULL))
		return PG_GETARG_ARRAYTYPE_P(argno);
	return PG_GETARG_ARRAYTYPE_P_COPY(argno);
}

/* Welford update of the vector mean, M2, norm moments and unit sum. */
static void
add_member(float8 *s, const float *x, int d)
{
	double		n = s[ST_N] + 1;
	double		m2 = 0;
	double		norm = sqrt(cv_distance->norm_squared(x, d));
	double		norm_delta = norm - s[ST_NORM_MEAN];

	for (int j = 0; j < d; j++)
	{
		double		delta = x[j] - s[ST_HEADER + j];

		s[ST_HEADER + j] += delta / n;
		m2 += delta * (x[j] - s[ST_HEADER + j]);
	}
	s[ST_M2] += m2;
	s[ST_N] = n;
	s[ST_NORM_MEAN] += norm_delta / n;
	s[ST_NORM_M2] += norm_delta * (norm - s[ST_NORM_MEAN]);
	if (norm > 0)
	{
		s[ST_NONZERO] += 1;
		for (int j = 0; j < d; j++)
			s[ST_HEADER + d + j] += x[j] / norm;
	}
}

/*
 * Whether the member needs cvec's checks: cluster_stats(vector) of
 * clustervec_pgvector shares this function.  Decided once per call site.
 */
static bool
member_needs_check(FunctionCallInfo fcinfo)
{
	FmgrInfo   *flinfo = fcinfo->flinfo;

	if (flinfo->fn_extra == NULL)
	{
		Oid			type = get_fn_expr_argtype(flinfo, 1);
		CVecLayout *layout = MemoryContextAlloc(flinfo->fn_mcxt, sizeof(CVecLayout));

		*layout = OidIsValid(type) ? cvec_layout_of_type(type) : CVEC_LAYOUT_CHECKED;
		flinfo->fn_extra = layout;
	}
	return *(CVecLayout *) flinfo->fn_extra != CVEC_LAYOUT_CVEC;
}

Datum
cluster_stats_accum(PG_FUNCTION_ARGS)
{
	ArrayType  *state;
	CVec	   *v;
	int			d;

	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	v = PG_GETARG_CVEC_P(1);
	if (member_needs_check(fcinfo))
		cvec_check_stored(v);
	if (PG_ARGISNULL(0))
		state = new_state(d = v->dim);
	else
	{
		state = writable_state(fcinfo, 0);
		state_values(state, &d);
		if (d == 0)
			state = new_state(d = v->dim);
	}
	if (d != v->dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %d and %d", d, v->dim)));
	add_member((float8 *) ARR_DATA_PTR(state), v->x, d);
	PG_RETURN_ARRAYTYPE_P(state);
}

/* Chan's merge of b into a (both non-empty, same d). */
static void
merge_states(float8 *a, const float8 *b, int d)
{
	double		na = a[ST_N],
				nb = b[ST_N],
				n = na + nb;
	double		shift = 0;
	double		norm_delta = b[ST_NORM_MEAN] - a[ST_NORM_MEAN];

	for (int j = 0; j < d; j++)
	{
		double		delta = b[ST_HEADER + j] - a[ST_HEADER + j];

		shift += delta * delta;
		a[ST_HEADER + j] += delta * nb / n;
		a[ST_HEADER + d + j] += b[ST_HEADER + d + j];
	}
	a[ST_M2] += b[ST_M2] + shift * na * nb / n;
	a[ST_NORM_M2] += b[ST_NORM_M2] + norm_delta * norm_delta * na * nb / n;
	a[ST_NORM_MEAN] += norm_delta * nb / n;
	a[ST_NONZERO] += b[ST_NONZERO];
	a[ST_N] = n;
}

Datum
cluster_stats_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *left;
	ArrayType  *right;
	int			dl,
				dr;

	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	if (PG_ARGISNULL(0))
		PG_RETURN_ARRAYTYPE_P(PG_GETARG_ARRAYTYPE_P_COPY(1));
	right = PG_GETARG_ARRAYTYPE_P(1);
	state_values(right, &dr);
	left = writable_state(fcinfo, 0);
	state_values(left, &dl);
	if (dr == 0)
		PG_RETURN_ARRAYTYPE_P(left);
	if (dl == 0)
		PG_RETURN_ARRAYTYPE_P(PG_GETARG_ARRAYTYPE_P_COPY(1));
	if (dl != dr)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %d and %d", dl, dr)));
	merge_states((float8 *) ARR_DATA_PTR(left), (float8 *) ARR_DATA_PTR(right), dl);
	PG_RETURN_ARRAYTYPE_P(left);
}

/* cohesion = mean cos(x_i, c) = (sum of unit vectors) . c / (n ||c||). */
static double
state_cohesion(const float8 *s, int d, double centroid_norm)
{
	double		dot = 0;

	for (int j = 0; j < d; j++)
		dot += s[ST_HEADER + d + j] * s[ST_HEADER + j];
	return dot / (s[ST_N] * centroid_norm);
}

static double
unit_sum_norm(const float8 *s, int d)
{
	double		sum = 0;

	for (int j = 0; j < d; j++)
		sum += s[ST_HEADER + d + j] * s[ST_HEADER + d + j];
	return sqrt(sum);
}

Datum
cluster_stats_final(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[8];
	bool		nulls[8] = {0};
	ArrayType  *state;
	float8	   *s;
	int			d;
	CVec	   *centroid;
	double		norm_sq = 0;
	double		centroid_norm;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	state = PG_GETARG_ARRAYTYPE_P(0);
	s = state_values(state, &d);
	if (d == 0 || s[ST_N] == 0)
		PG_RETURN_NULL();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "cluster_stats must return a composite type");
	centroid = cvec_alloc(d);
	for (int j = 0; j < d; j++)
	{
		centroid->x[j] = cvec_float_or_overflow(s[ST_HEADER + j]);
		norm_sq += s[ST_HEADER + j] * s[ST_HEADER + j];
	}
	centroid_norm = sqrt(norm_sq);
	values[0] = Int64GetDatum((int64) s[ST_N]);
	values[1] = PointerGetDatum(centroid);
	values[2] = Float8GetDatum(centroid_norm);
	values[3] = Float8GetDatum(Max(s[ST_M2], 0));
	nulls[4] = centroid_norm <= CV_HEALTH_EPS * s[ST_NORM_MEAN];
	values[4] = Float8GetDatum(nulls[4] ? 0 : state_cohesion(s, d, centroid_norm));
	values[5] = Float8GetDatum(s[ST_NORM_MEAN]);
	nulls[6] = s[ST_NORM_MEAN] == 0;
	values[6] = Float8GetDatum(nulls[6] ? 0 :
							   sqrt(Max(s[ST_NORM_M2], 0) / s[ST_N]) / s[ST_NORM_MEAN]);
	nulls[7] = s[ST_NONZERO] == 0;
	values[7] = Float8GetDatum(nulls[7] ? 0 : unit_sum_norm(s, d) / s[ST_NONZERO]);
	/* finite moments can still overflow in the products above */
	for (int i = 2; i < 8; i++)
		if (!nulls[i] && !isfinite(DatumGetFloat8(values[i])))
			invalid_state("Its statistics overflow float8");
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
