/*
 * health_pairwise_avx2.c: the AVX2 + FMA Gram micro-kernel of
 * health_pairwise.c.
 *
 * 8 rows of the I panel (two __m256d of four rows) against 6 rows of the J
 * block: 12 accumulators, which with the two I loads and a broadcast fill
 * fifteen of the sixteen ymm registers.  Each lane runs exactly the scalar
 * kernel's fma() chain.  target("avx2,fma") instead of per-file flags;
 * dispatch checks both features (cv_pairwise_kernels_for).
 */
#include "health_pairwise_variants.h"

#ifdef CV_HAVE_X86_SIMD

#include <immintrin.h>

#define CV_AVX2_FMA __attribute__((target("avx2,fma")))

#define MR 8
#define NR 6

/* Applies X(col) for the six J columns. */
#define EACH_COL(X) X(0) X(1) X(2) X(3) X(4) X(5)

/* Declares and loads the two accumulators of column col. */
#define LOAD_COL(col) \
	__m256d		c##col##_0 = _mm256_loadu_pd(c + (col) * ldc); \
	__m256d		c##col##_1 = _mm256_loadu_pd(c + (col) * ldc + 4);

/* One dimension step of column col: broadcast b, two FMAs. */
#define STEP_COL(col) \
	{ \
		__m256d		bc = _mm256_broadcast_sd(bk + (size_t) (col) * ldb); \
		c##col##_0 = _mm256_fmadd_pd(a0, bc, c##col##_0); \
		c##col##_1 = _mm256_fmadd_pd(a1, bc, c##col##_1); \
	}

/* Stores the two accumulators of column col. */
#define STORE_COL(col) \
	_mm256_storeu_pd(c + (col) * ldc, c##col##_0); \
	_mm256_storeu_pd(c + (col) * ldc + 4, c##col##_1);

/* The kernel contract of health_pairwise_variants.h for mr = 8, nr = 6. */
static CV_AVX2_FMA void
kernel_avx2(int kc, const double *a, const double *b, int ldb, double *c,
			int ldc)
{
	int			k;

	EACH_COL(LOAD_COL)
	for (k = 0; k < kc; k++)
	{
		const double *ak = a + (size_t) k * MR;
		const double *bk = b + k;
		__m256d		a0 = _mm256_loadu_pd(ak);
		__m256d		a1 = _mm256_loadu_pd(ak + 4);

		EACH_COL(STEP_COL)
	}
	EACH_COL(STORE_COL)
}

/* Centres one row into float64, 4 elements per step. */
static CV_AVX2_FMA void
centre_avx2(const float *x, const double *c, double *out, int d)
{
	int			k;

	for (k = 0; k + 4 <= d; k += 4)
		_mm256_storeu_pd(out + k, _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), _mm256_loadu_pd(c + k)));
	for (; k < d; k++)
		out[k] = (double) x[k] - c[k];
}

/*
 * Distances of one column, four rows per step and the rest one by one:
 * the lanes run cv_pairwise_column_one's operations, and a blend leaves
 * -1 where the pair is to be recomputed.
 */
static CV_AVX2_FMA void
column_avx2(const double *g, const double *nu, double nu_j, double close2,
			int count, double *d2, double *dist)
{
	__m256d		vnu_j = _mm256_set1_pd(nu_j);
	__m256d		vclose = _mm256_set1_pd(close2);
	__m256d		vrel = _mm256_set1_pd(CV_PAIRWISE_CLOSE_REL2);
	__m256d		two = _mm256_set1_pd(2.0);
	__m256d		minus_one = _mm256_set1_pd(-1.0);
	int			r;

	for (r = 0; r + 4 <= count; r += 4)
	{
		__m256d		scale = _mm256_add_pd(_mm256_loadu_pd(nu + r), vnu_j);
		__m256d		v = _mm256_sub_pd(scale, _mm256_mul_pd(two, _mm256_loadu_pd(g + r)));
		__m256d		exact = _mm256_or_pd(_mm256_cmp_pd(v, vclose, _CMP_LT_OQ),
										 _mm256_cmp_pd(v, _mm256_mul_pd(vrel, scale),
													   _CMP_LT_OQ));

		_mm256_storeu_pd(d2 + r, v);
		_mm256_storeu_pd(dist + r, _mm256_blendv_pd(_mm256_sqrt_pd(v), minus_one, exact));
	}
	for (; r < count; r++)
		cv_pairwise_column_one(g[r], nu[r], nu_j, close2, &d2[r], &dist[r]);
}

const CvPairwiseKernels cv_pairwise_kernels_avx2 = {
	.name = "avx2",
	.mr = MR,
	.nr = NR,
	.kernel = kernel_avx2,
	.centre = centre_avx2,
	.column = column_avx2,
};

#endif							/* CV_HAVE_X86_SIMD */
