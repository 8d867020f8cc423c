/*
 * cvec.h: the cvec type, laid out exactly like pgvector's vector (varlena
 * header, int16 dimensions, int16 unused, float4 elements) so a later
 * companion can read pgvector columns unchanged.
 */
#ifndef CV_TYPE_CVEC_H
#define CV_TYPE_CVEC_H

#include "postgres.h"

#include "fmgr.h"

#define CVEC_MAX_DIM 16000

typedef struct CVec
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	int16		dim;
	int16		unused;			/* always 0, as pgvector */
	float		x[FLEXIBLE_ARRAY_MEMBER];
} CVec;

#define CVEC_SIZE(dim) (offsetof(CVec, x) + sizeof(float) * (dim))
#define DatumGetCVec(d) ((CVec *) PG_DETOAST_DATUM(d))
#define PG_GETARG_CVEC_P(n) DatumGetCVec(PG_GETARG_DATUM(n))
#define PG_RETURN_CVEC_P(v) PG_RETURN_POINTER(v)

/* the distance functions, which the index AM recognises as opclass support */
extern PGDLLEXPORT Datum cvec_in(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_l2_distance(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_negative_inner_product(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_cosine_distance(PG_FUNCTION_ARGS);

extern CVec *cvec_alloc(int dim);
extern void cvec_check_dim_count(int dim);
extern void cvec_check_same_dims(const CVec *a, const CVec *b);
extern void cvec_check_typmod(int dim, int32 typmod);
extern void cvec_check_finite_element(float value);
extern float cvec_float_or_overflow(double value);
extern bool cvec_is_row_count(double count);
extern void cvec_check_result_finite(const CVec *result);
extern bool cvec_is_cvec_type(Oid type);

#endif
