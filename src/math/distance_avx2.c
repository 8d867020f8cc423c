/*
 * distance_avx2.c: the AVX2 variant.
 *
 * The sixteen lanes live in four __m256d accumulators (lanes 0-3, 4-7, 8-11,
 * 12-15); each full block adds exactly one widened term per lane, in the same
 * order as the scalar variant, and the tail and fold are the shared helpers.
 * Functions carry target("avx2") instead of per-file flags, so the file
 * builds with the project's common flags; dispatch only calls them after
 * checking the CPU.  No fused multiply-add: it would change the rounding.
 */
#include "distance_lanes.h"
#include "distance_variants.h"

#ifdef CV_HAVE_X86_SIMD

#include <immintrin.h>

#define CV_AVX2 __attribute__((target("avx2")))

/* Four floats widened to double (unaligned load). */
static inline CV_AVX2 __m256d
load4(const float *p)
{
	return _mm256_cvtps_pd(_mm_loadu_ps(p));
}

/* Four differences a - b, computed in double. */
static inline CV_AVX2 __m256d
diff4(const float *a, const float *b)
{
	return _mm256_sub_pd(load4(a), load4(b));
}

/* Squared differences of four elements. */
static inline CV_AVX2 __m256d
l2_term4(const float *a, const float *b)
{
	__m256d		d = diff4(a, b);

	return _mm256_mul_pd(d, d);
}

/* Absolute differences of four elements (clears the sign bit, like fabs). */
static inline CV_AVX2 __m256d
l1_term4(const float *a, const float *b)
{
	return _mm256_andnot_pd(_mm256_set1_pd(-0.0), diff4(a, b));
}

/* Products of four elements. */
static inline CV_AVX2 __m256d
ip_term4(const float *a, const float *b)
{
	return _mm256_mul_pd(load4(a), load4(b));
}

/* Spills the four accumulators into lanes 0..15 in lane order. */
static inline CV_AVX2 void
store_lanes(double *lanes, __m256d acc0, __m256d acc1, __m256d acc2,
			__m256d acc3)
{
	_mm256_storeu_pd(lanes + 0, acc0);
	_mm256_storeu_pd(lanes + 4, acc1);
	_mm256_storeu_pd(lanes + 8, acc2);
	_mm256_storeu_pd(lanes + 12, acc3);
}

/*
 * The three two-vector kernels share one loop shape; a macro keeps them
 * identical without relying on the compiler to inline a term function
 * pointer.  TERM4 is one of the *_term4 helpers above.
 */
#define CV_AVX2_PAIR_LOOP(TERM4, lanes, a, b, n, j) \
	do { \
		__m256d		acc0 = _mm256_setzero_pd(); \
		__m256d		acc1 = _mm256_setzero_pd(); \
		__m256d		acc2 = _mm256_setzero_pd(); \
		__m256d		acc3 = _mm256_setzero_pd(); \
		for ((j) = 0; (n) - (j) >= CV_DISTANCE_LANES; (j) += CV_DISTANCE_LANES) \
		{ \
			cv_prefetch_ahead((a), (j), (n)); \
			cv_prefetch_ahead((b), (j), (n)); \
			acc0 = _mm256_add_pd(acc0, TERM4((a) + (j), (b) + (j))); \
			acc1 = _mm256_add_pd(acc1, TERM4((a) + (j) + 4, (b) + (j) + 4)); \
			acc2 = _mm256_add_pd(acc2, TERM4((a) + (j) + 8, (b) + (j) + 8)); \
			acc3 = _mm256_add_pd(acc3, TERM4((a) + (j) + 12, (b) + (j) + 12)); \
		} \
		store_lanes((lanes), acc0, acc1, acc2, acc3); \
	} while (0)

/* Squared Euclidean distance. */
static CV_AVX2 double
l2_squared_avx2(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			j;

	CV_AVX2_PAIR_LOOP(l2_term4, lanes, a, b, n, j);
	return cv_finish_l2(lanes, a, b, j, n);
}

/* Inner product. */
static CV_AVX2 double
inner_product_avx2(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			j;

	CV_AVX2_PAIR_LOOP(ip_term4, lanes, a, b, n, j);
	return cv_finish_ip(lanes, a, b, j, n);
}

/* Manhattan distance. */
static CV_AVX2 double
l1_avx2(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			j;

	CV_AVX2_PAIR_LOOP(l1_term4, lanes, a, b, n, j);
	return cv_finish_l1(lanes, a, b, j, n);
}

/* Squares of four elements of one vector. */
static inline CV_AVX2 __m256d
sq_term4(const float *a)
{
	__m256d		x = load4(a);

	return _mm256_mul_pd(x, x);
}

/* Squared Euclidean norm. */
static CV_AVX2 double
norm_squared_avx2(const float *a, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	__m256d		acc0 = _mm256_setzero_pd();
	__m256d		acc1 = _mm256_setzero_pd();
	__m256d		acc2 = _mm256_setzero_pd();
	__m256d		acc3 = _mm256_setzero_pd();
	int			j;

	for (j = 0; n - j >= CV_DISTANCE_LANES; j += CV_DISTANCE_LANES)
	{
		cv_prefetch_ahead(a, j, n);
		acc0 = _mm256_add_pd(acc0, sq_term4(a + j));
		acc1 = _mm256_add_pd(acc1, sq_term4(a + j + 4));
		acc2 = _mm256_add_pd(acc2, sq_term4(a + j + 8));
		acc3 = _mm256_add_pd(acc3, sq_term4(a + j + 12));
	}
	store_lanes(lanes, acc0, acc1, acc2, acc3);
	return cv_finish_sq(lanes, a, j, n);
}

/*
 * Adds four elements' dot, |a|^2 and |b|^2 terms into one accumulator of
 * each lane set; loads each input once for all three.
 */
static inline CV_AVX2 void
cosine_step4(__m256d *dot, __m256d *aa, __m256d *bb,
			 const float *a, const float *b)
{
	__m256d		x = load4(a);
	__m256d		y = load4(b);

	*dot = _mm256_add_pd(*dot, _mm256_mul_pd(x, y));
	*aa = _mm256_add_pd(*aa, _mm256_mul_pd(x, x));
	*bb = _mm256_add_pd(*bb, _mm256_mul_pd(y, y));
}

/* Dot product and both squared norms in one pass. */
static CV_AVX2 CvCosineParts
cosine_parts_avx2(const float *a, const float *b, int n)
{
	double		dot[CV_DISTANCE_LANES];
	double		aa[CV_DISTANCE_LANES];
	double		bb[CV_DISTANCE_LANES];
	__m256d		d0 = _mm256_setzero_pd(),
				d1 = _mm256_setzero_pd(),
				d2 = _mm256_setzero_pd(),
				d3 = _mm256_setzero_pd();
	__m256d		na0 = _mm256_setzero_pd(),
				na1 = _mm256_setzero_pd(),
				na2 = _mm256_setzero_pd(),
				na3 = _mm256_setzero_pd();
	__m256d		nb0 = _mm256_setzero_pd(),
				nb1 = _mm256_setzero_pd(),
				nb2 = _mm256_setzero_pd(),
				nb3 = _mm256_setzero_pd();
	int			j;

	for (j = 0; n - j >= CV_DISTANCE_LANES; j += CV_DISTANCE_LANES)
	{
		cv_prefetch_ahead(a, j, n);
		cv_prefetch_ahead(b, j, n);
		cosine_step4(&d0, &na0, &nb0, a + j, b + j);
		cosine_step4(&d1, &na1, &nb1, a + j + 4, b + j + 4);
		cosine_step4(&d2, &na2, &nb2, a + j + 8, b + j + 8);
		cosine_step4(&d3, &na3, &nb3, a + j + 12, b + j + 12);
	}
	store_lanes(dot, d0, d1, d2, d3);
	store_lanes(aa, na0, na1, na2, na3);
	store_lanes(bb, nb0, nb1, nb2, nb3);
	return cv_finish_cosine(dot, aa, bb, a, b, j, n);
}

const CvDistanceKernels cv_distance_kernels_avx2 = {
	.name = "avx2",
	.l2_squared = l2_squared_avx2,
	.inner_product = inner_product_avx2,
	.l1 = l1_avx2,
	.cosine_parts = cosine_parts_avx2,
	.norm_squared = norm_squared_avx2,
};

#endif							/* CV_HAVE_X86_SIMD */
