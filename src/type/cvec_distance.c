/*
 * cvec_distance.c: the SQL distance functions, thin wrappers over the SIMD
 * kernels of src/math (which run the same reduction tree on every CPU, so
 * results never depend on the variant).
 */
#include "postgres.h"

#include <math.h>

#include "math/distance.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvec_l2_distance);
PG_FUNCTION_INFO_V1(cvec_l2_squared_distance);
PG_FUNCTION_INFO_V1(cvec_inner_product);
PG_FUNCTION_INFO_V1(cvec_negative_inner_product);
PG_FUNCTION_INFO_V1(cvec_cosine_distance);
PG_FUNCTION_INFO_V1(cvec_l1_distance);
PG_FUNCTION_INFO_V1(cvec_norm);

Datum
cvec_l2_distance(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);

	cvec_check_same_dims(a, b);
	PG_RETURN_FLOAT8(sqrt(cv_distance->l2_squared(a->x, b->x, a->dim)));
}

Datum
cvec_l2_squared_distance(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);

	cvec_check_same_dims(a, b);
	PG_RETURN_FLOAT8(cv_distance->l2_squared(a->x, b->x, a->dim));
}

Datum
cvec_inner_product(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);

	cvec_check_same_dims(a, b);
	PG_RETURN_FLOAT8(cv_distance->inner_product(a->x, b->x, a->dim));
}

/* <#> orders by ascending distance, so the largest product comes first. */
Datum
cvec_negative_inner_product(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);

	cvec_check_same_dims(a, b);
	PG_RETURN_FLOAT8(-cv_distance->inner_product(a->x, b->x, a->dim));
}

Datum
cvec_cosine_distance(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);

	cvec_check_same_dims(a, b);
	PG_RETURN_FLOAT8(cv_cosine_distance_from_parts(
						 cv_distance->cosine_parts(a->x, b->x, a->dim)));
}

Datum
cvec_l1_distance(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);
	CVec	   *b = PG_GETARG_CVEC_P(1);

	cvec_check_same_dims(a, b);
	PG_RETURN_FLOAT8(cv_distance->l1(a->x, b->x, a->dim));
}

Datum
cvec_norm(PG_FUNCTION_ARGS)
{
	CVec	   *a = PG_GETARG_CVEC_P(0);

	PG_RETURN_FLOAT8(sqrt(cv_distance->norm_squared(a->x, a->dim)));
}
