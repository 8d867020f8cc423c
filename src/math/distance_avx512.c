/*
 * distance_avx512.c: the AVX-512F variant.
 *
 * The sixteen lanes live in two __m512d accumulators (lanes 0-7 and 8-15);
 * each full block adds exactly one widened term per lane, in the same order
 * as the scalar variant, and the tail and fold are the shared helpers.
 * Functions carry target("avx512f") instead of per-file flags, so the file
 * builds with the project's common flags; dispatch only calls them after
 * checking the CPU.  No fused multiply-add: it would change the rounding.
 * Note that target("avx512f") makes FMA instructions available, so GCC's
 * default -ffp-contract=fast would fuse the separate mul and add below; the
 * bit-for-bit contract relies on the build's -ffp-contract=off (the unit
 * test's bitwise group fails without it).
 */
#include "distance_lanes.h"
#include "distance_variants.h"

#ifdef CV_HAVE_X86_SIMD

#include <immintrin.h>

#define CV_AVX512 __attribute__((target("avx512f")))

/* Eight floats widened to double (unaligned load). */
static inline CV_AVX512 __m512d
load8(const float *p)
{
	return _mm512_cvtps_pd(_mm256_loadu_ps(p));
}

/* Eight differences a - b, computed in double. */
static inline CV_AVX512 __m512d
diff8(const float *a, const float *b)
{
	return _mm512_sub_pd(load8(a), load8(b));
}

/* Squared differences of eight elements. */
static inline CV_AVX512 __m512d
l2_term8(const float *a, const float *b)
{
	__m512d		d = diff8(a, b);

	return _mm512_mul_pd(d, d);
}

/* Absolute differences of eight elements (clears the sign bit, like fabs). */
static inline CV_AVX512 __m512d
l1_term8(const float *a, const float *b)
{
	return _mm512_abs_pd(diff8(a, b));
}

/* Products of eight elements. */
static inline CV_AVX512 __m512d
ip_term8(const float *a, const float *b)
{
	return _mm512_mul_pd(load8(a), load8(b));
}

/* Squares of eight elements of one vector. */
static inline CV_AVX512 __m512d
sq_term8(const float *a)
{
	__m512d		x = load8(a);

	return _mm512_mul_pd(x, x);
}

/* Spills the two accumulators into lanes 0..15 in lane order. */
static inline CV_AVX512 void
store_lanes(double *lanes, __m512d lo, __m512d hi)
{
	_mm512_storeu_pd(lanes, lo);
	_mm512_storeu_pd(lanes + 8, hi);
}

/*
 * The three two-vector kernels share one loop shape; a macro keeps them
 * identical without relying on the compiler to inline a term function
 * pointer.  TERM8 is one of the *_term8 helpers above.
 */
#define CV_AVX512_PAIR_LOOP(TERM8, lanes, a, b, n, j) \
	do { \
		__m512d		lo = _mm512_setzero_pd(); \
		__m512d		hi = _mm512_setzero_pd(); \
		for ((j) = 0; (n) - (j) >= CV_DISTANCE_LANES; (j) += CV_DISTANCE_LANES) \
		{ \
			cv_prefetch_ahead((a), (j), (n)); \
			cv_prefetch_ahead((b), (j), (n)); \
			lo = _mm512_add_pd(lo, TERM8((a) + (j), (b) + (j))); \
			hi = _mm512_add_pd(hi, TERM8((a) + (j) + 8, (b) + (j) + 8)); \
		} \
		store_lanes((lanes), lo, hi); \
	} while (0)

/* Squared Euclidean distance. */
static CV_AVX512 double
l2_squared_avx512(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			j;

	CV_AVX512_PAIR_LOOP(l2_term8, lanes, a, b, n, j);
	return cv_finish_l2(lanes, a, b, j, n);
}

/* Inner product. */
static CV_AVX512 double
inner_product_avx512(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			j;

	CV_AVX512_PAIR_LOOP(ip_term8, lanes, a, b, n, j);
	return cv_finish_ip(lanes, a, b, j, n);
}

/* Manhattan distance. */
static CV_AVX512 double
l1_avx512(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			j;

	CV_AVX512_PAIR_LOOP(l1_term8, lanes, a, b, n, j);
	return cv_finish_l1(lanes, a, b, j, n);
}

/* Squared Euclidean norm. */
static CV_AVX512 double
norm_squared_avx512(const float *a, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	__m512d		lo = _mm512_setzero_pd();
	__m512d		hi = _mm512_setzero_pd();
	int			j;

	for (j = 0; n - j >= CV_DISTANCE_LANES; j += CV_DISTANCE_LANES)
	{
		cv_prefetch_ahead(a, j, n);
		lo = _mm512_add_pd(lo, sq_term8(a + j));
		hi = _mm512_add_pd(hi, sq_term8(a + j + 8));
	}
	store_lanes(lanes, lo, hi);
	return cv_finish_sq(lanes, a, j, n);
}

/*
 * Adds eight elements' dot, |a|^2 and |b|^2 terms into one accumulator of
 * each lane set; loads each input once for all three.
 */
static inline CV_AVX512 void
cosine_step8(__m512d *dot, __m512d *aa, __m512d *bb,
			 const float *a, const float *b)
{
	__m512d		x = load8(a);
	__m512d		y = load8(b);

	*dot = _mm512_add_pd(*dot, _mm512_mul_pd(x, y));
	*aa = _mm512_add_pd(*aa, _mm512_mul_pd(x, x));
	*bb = _mm512_add_pd(*bb, _mm512_mul_pd(y, y));
}

/* Dot product and both squared norms in one pass. */
static CV_AVX512 CvCosineParts
cosine_parts_avx512(const float *a, const float *b, int n)
{
	double		dot[CV_DISTANCE_LANES];
	double		aa[CV_DISTANCE_LANES];
	double		bb[CV_DISTANCE_LANES];
	__m512d		dot_lo = _mm512_setzero_pd();
	__m512d		dot_hi = _mm512_setzero_pd();
	__m512d		aa_lo = _mm512_setzero_pd();
	__m512d		aa_hi = _mm512_setzero_pd();
	__m512d		bb_lo = _mm512_setzero_pd();
	__m512d		bb_hi = _mm512_setzero_pd();
	int			j;

	for (j = 0; n - j >= CV_DISTANCE_LANES; j += CV_DISTANCE_LANES)
	{
		cv_prefetch_ahead(a, j, n);
		cv_prefetch_ahead(b, j, n);
		cosine_step8(&dot_lo, &aa_lo, &bb_lo, a + j, b + j);
		cosine_step8(&dot_hi, &aa_hi, &bb_hi, a + j + 8, b + j + 8);
	}
	store_lanes(dot, dot_lo, dot_hi);
	store_lanes(aa, aa_lo, aa_hi);
	store_lanes(bb, bb_lo, bb_hi);
	return cv_finish_cosine(dot, aa, bb, a, b, j, n);
}

const CvDistanceKernels cv_distance_kernels_avx512 = {
	.name = "avx512",
	.l2_squared = l2_squared_avx512,
	.inner_product = inner_product_avx512,
	.l1 = l1_avx512,
	.cosine_parts = cosine_parts_avx512,
	.norm_squared = norm_squared_avx512,
};

#endif							/* CV_HAVE_X86_SIMD */
