/*
 * health_pairwise_avx512.c: the AVX-512F Gram micro-kernel of
 * health_pairwise.c.
 *
 * 24 rows of the I panel (three __m512d of eight rows) against 8 rows of
 * the J block (row-major): 24 accumulators, one per (column, eight rows),
 * advanced one dimension per step by one fused multiply-add with a
 * broadcast J element.
 * Per step: 3 loads, 8 broadcasts, 24 FMAs, so the two FMA ports, not the
 * loads, set the pace: about 0.85 of this core's FMA peak with the panels
 * 64-byte aligned and in L2.  Each lane runs exactly the scalar kernel's
 * fma() chain (vfmadd231pd rounds once, as fma() does).  target("avx512f")
 * instead of per-file flags; dispatch checks the CPU.
 */
#include "health_pairwise_variants.h"

#ifdef CV_HAVE_X86_SIMD

#include <immintrin.h>

#define CV_AVX512 __attribute__((target("avx512f")))

#define MR 24
#define NR 8

/* Applies X(col) for the eight J columns. */
#define EACH_COL(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* Declares and loads the three accumulators of column col. */
#define LOAD_COL(col) \
	__m512d		c##col##_0 = _mm512_loadu_pd(c + (col) * ldc); \
	__m512d		c##col##_1 = _mm512_loadu_pd(c + (col) * ldc + 8); \
	__m512d		c##col##_2 = _mm512_loadu_pd(c + (col) * ldc + 16);

/* One dimension step of column col: broadcast b, three FMAs. */
#define STEP_COL(col) \
	{ \
		__m512d		bc = _mm512_set1_pd(bk[(col) * ldb]); \
		c##col##_0 = _mm512_fmadd_pd(a0, bc, c##col##_0); \
		c##col##_1 = _mm512_fmadd_pd(a1, bc, c##col##_1); \
		c##col##_2 = _mm512_fmadd_pd(a2, bc, c##col##_2); \
	}

/* One dimension step k of all columns. */
#define STEP(k) \
	{ \
		const double *ak = a + (size_t) (k) * MR; \
		const double *bk = b + (k); \
		__m512d		a0 = _mm512_loadu_pd(ak); \
		__m512d		a1 = _mm512_loadu_pd(ak + 8); \
		__m512d		a2 = _mm512_loadu_pd(ak + 16); \
		EACH_COL(STEP_COL) \
	}

/* Stores the three accumulators of column col. */
#define STORE_COL(col) \
	_mm512_storeu_pd(c + (col) * ldc, c##col##_0); \
	_mm512_storeu_pd(c + (col) * ldc + 8, c##col##_1); \
	_mm512_storeu_pd(c + (col) * ldc + 16, c##col##_2);

/* The kernel contract of health_pairwise_variants.h for mr = 24, nr = 8. */
static CV_AVX512 void
kernel_avx512(int kc, const double *a, const double *b, int ldb, double *c,
			  int ldc)
{
	int			k;

	EACH_COL(LOAD_COL)
	/* two steps per iteration: the loop overhead shows at 24 FMAs a step */
	for (k = 0; k + 2 <= kc; k += 2)
	{
		STEP(k)
		STEP(k + 1)
	}
	if (k < kc)
		STEP(k)
	EACH_COL(STORE_COL)
}

/* Centres one row into float64, 8 elements per step. */
static CV_AVX512 void
centre_avx512(const float *x, const double *c, double *out, int d)
{
	int			k;

	for (k = 0; k + 8 <= d; k += 8)
		_mm512_storeu_pd(out + k, _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + k)), _mm512_loadu_pd(c + k)));
	for (; k < d; k++)
		out[k] = (double) x[k] - c[k];
}

/*
 * Distances of one column, eight rows per step (the last step masked):
 * the lanes run cv_pairwise_column_one's operations, and the masked sqrt
 * leaves -1 where the pair is to be recomputed.
 */
static CV_AVX512 void
column_avx512(const double *g, const double *nu, double nu_j, double close2,
			  int count, double *d2, double *dist)
{
	__m512d		vnu_j = _mm512_set1_pd(nu_j);
	__m512d		vclose = _mm512_set1_pd(close2);
	__m512d		vrel = _mm512_set1_pd(CV_PAIRWISE_CLOSE_REL2);
	__m512d		two = _mm512_set1_pd(2.0);
	__m512d		minus_one = _mm512_set1_pd(-1.0);
	int			r;

	for (r = 0; r < count; r += 8)
	{
		__mmask8	m = count - r >= 8 ? 0xFF : (__mmask8) ((1u << (count - r)) - 1);
		__m512d		scale = _mm512_add_pd(_mm512_maskz_loadu_pd(m, nu + r), vnu_j);
		__m512d		v = _mm512_sub_pd(scale, _mm512_mul_pd(two, _mm512_maskz_loadu_pd(m, g + r)));
		__mmask8	exact = _mm512_cmp_pd_mask(v, vclose, _CMP_LT_OQ)
			| _mm512_cmp_pd_mask(v, _mm512_mul_pd(vrel, scale), _CMP_LT_OQ);

		_mm512_mask_storeu_pd(d2 + r, m, v);
		_mm512_mask_storeu_pd(dist + r, m, _mm512_mask_sqrt_pd(minus_one, (__mmask8) ~exact, v));
	}
}

const CvPairwiseKernels cv_pairwise_kernels_avx512 = {
	.name = "avx512",
	.mr = MR,
	.nr = NR,
	.kernel = kernel_avx512,
	.centre = centre_avx512,
	.column = column_avx512,
};

#endif							/* CV_HAVE_X86_SIMD */
