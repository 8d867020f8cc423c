/*
 * cvec.h: the cvec type, laid out exactly like pgvector's vector (varlena
 * header, int16 dimensions, int16 unused, float4 elements), so the
 * companion extension clustervec_pgvector reads pgvector columns unchanged.
 */
#ifndef CV_TYPE_CVEC_H
#define CV_TYPE_CVEC_H

#include "postgres.h"

#include "fmgr.h"
#include "access/attnum.h"
#include "utils/relcache.h"

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
/* the cast into cvec from another type laid out as cvec (pgvector's vector) */
extern PGDLLEXPORT Datum cvec_from_layout(PG_FUNCTION_ARGS);

/*
 * How a column's type reads as cvec: not at all, as cvec itself, or as a
 * type with cvec's layout whose values may break cvec's invariants (each
 * value then goes through cvec_check_stored).
 */
typedef enum CVecLayout
{
	CVEC_LAYOUT_NONE,
	CVEC_LAYOUT_CVEC,
	CVEC_LAYOUT_CHECKED
} CVecLayout;

extern CVec *cvec_alloc(int dim);
extern void cvec_check_dim_count(int dim);
extern void cvec_check_same_dims(const CVec *a, const CVec *b);
extern void cvec_check_typmod(int dim, int32 typmod);
extern void cvec_check_finite_element(float value);
extern float cvec_float_or_overflow(double value);
extern bool cvec_is_row_count(double count);
extern void cvec_check_result_finite(const CVec *result);
extern bool cvec_is_cvec_type(Oid type);
extern CVecLayout cvec_layout_of_type(Oid type);
extern AttrNumber cvec_column_of(Relation rel, const char *column, CVecLayout *layout);
extern void cvec_check_stored(const CVec *v);
extern void cvec_check_finite(const float *x, int dim);

#endif
