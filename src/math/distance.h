/*
 * distance.h: CPU distance kernels over float4 vectors (pure C, no postgres.h).
 *
 * Every variant (scalar, AVX2, AVX-512) computes the same function bit for
 * bit: sixteen float64 lanes, element j added to lane j % 16 in index order,
 * each term rounded separately (no fused multiply-add), then the lanes folded
 * by one fixed tree (lane i += lane i+8, then i+4, i+2, i+1).  Results
 * therefore never depend on which variant ran, and float64 accumulation keeps
 * them within 1e-6 of an exact reference even at 16,000 dimensions.
 */
#ifndef CV_MATH_DISTANCE_H
#define CV_MATH_DISTANCE_H

#include <stdbool.h>

#define CV_DISTANCE_LANES 16

typedef enum CvSimdLevel
{
	CV_SIMD_SCALAR = 0,
	CV_SIMD_AVX2 = 1,
	CV_SIMD_AVX512 = 2
} CvSimdLevel;

/* Parts of a cosine distance, summed in one pass over both vectors. */
typedef struct CvCosineParts
{
	double		dot;
	double		norm_a_sq;
	double		norm_b_sq;
} CvCosineParts;

typedef struct CvDistanceKernels
{
	const char *name;			/* "scalar", "avx2", "avx512" */
	double		(*l2_squared) (const float *a, const float *b, int n);
	double		(*inner_product) (const float *a, const float *b, int n);
	double		(*l1) (const float *a, const float *b, int n);
	CvCosineParts (*cosine_parts) (const float *a, const float *b, int n);
	double		(*norm_squared) (const float *a, int n);
} CvDistanceKernels;

/* True when this CPU and its operating system can run the level. */
extern bool cv_simd_supported(CvSimdLevel level);

/* The fastest supported level. */
extern CvSimdLevel cv_simd_best(void);

/* The kernels of one level, or NULL when the CPU cannot run it. */
extern const CvDistanceKernels *cv_distance_kernels_for(CvSimdLevel level);

/* The kernels in use: the scalar ones until cv_simd_use() picks another. */
extern const CvDistanceKernels *cv_distance;

/* Switch cv_distance to a level; returns false (and changes nothing) if unsupported. */
extern bool cv_simd_use(CvSimdLevel level);

/*
 * Cosine distance from its parts: 1 - dot / sqrt(|a|^2 |b|^2), clamped to
 * [0, 2]; NaN when either vector is zero (as pgvector).
 */
extern double cv_cosine_distance_from_parts(CvCosineParts parts);

#endif
