/*
 * distance_bound.c: float32 squared L2 with a rounding-error bound.
 *
 * Each term (a - b)^2 carries at most three roundings and the float32 sum
 * of n nonnegative terms at most n - 1 more, whatever the summation order,
 * so the computed sum s32 satisfies s32 <= s * (1 + (n + 3) u) with u =
 * 2^-24 (first order, n u << 1), and s32 * (1 - (n + 4) u) is below the
 * exact sum s.  The float64 value of the distance kernels is within 1e-15
 * of s, far inside the margin.  Underflowed terms are covered by an
 * absolute allowance; an overflow to infinity gives no bound.
 */
#include <float.h>
#include <math.h>

#include "distance.h"
#include "distance_bound.h"
#include "distance_variants.h"

#ifdef CV_HAVE_X86_SIMD
#include <immintrin.h>
#endif

static float
l2_squared_f32_scalar(const float *a, const float *b, int n)
{
	float		s = 0;

	for (int j = 0; j < n; j++)
	{
		float		d = a[j] - b[j];

		s += d * d;
	}
	return s;
}

#ifdef CV_HAVE_X86_SIMD
/* Four independent accumulators hide the add latency. */
static __attribute__((target("avx512f"))) float
l2_squared_f32_avx512(const float *a, const float *b, int n)
{
	__m512		acc0 = _mm512_setzero_ps();
	__m512		acc1 = _mm512_setzero_ps();
	int			j = 0;
	float		s;

	for (; j + 32 <= n; j += 32)
	{
		__m512		d0 = _mm512_sub_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j));
		__m512		d1 = _mm512_sub_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16));

		acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(d0, d0));
		acc1 = _mm512_add_ps(acc1, _mm512_mul_ps(d1, d1));
	}
	for (; j + 16 <= n; j += 16)
	{
		__m512		d = _mm512_sub_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j));

		acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(d, d));
	}
	s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
	return s + l2_squared_f32_scalar(a + j, b + j, n - j);
}

static __attribute__((target("avx2"))) float
l2_squared_f32_avx2(const float *a, const float *b, int n)
{
	__m256		acc0 = _mm256_setzero_ps();
	__m256		acc1 = _mm256_setzero_ps();
	float		lanes[8];
	float		s = 0;
	int			j = 0;

	for (; j + 16 <= n; j += 16)
	{
		__m256		d0 = _mm256_sub_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j));
		__m256		d1 = _mm256_sub_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8));

		acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(d0, d0));
		acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(d1, d1));
	}
	_mm256_storeu_ps(lanes, _mm256_add_ps(acc0, acc1));
	for (int i = 0; i < 8; i++)
		s += lanes[i];
	return s + l2_squared_f32_scalar(a + j, b + j, n - j);
}
#endif

/* The float32 sum with the variant cv_distance names. */
static float
l2_squared_f32(const float *a, const float *b, int n)
{
#ifdef CV_HAVE_X86_SIMD
	if (cv_distance == cv_distance_kernels_for(CV_SIMD_AVX512))
		return l2_squared_f32_avx512(a, b, n);
	if (cv_distance == cv_distance_kernels_for(CV_SIMD_AVX2))
		return l2_squared_f32_avx2(a, b, n);
#endif
	return l2_squared_f32_scalar(a, b, n);
}

double
cv_l2_squared_lower_bound(const float *a, const float *b, int n)
{
	double		s32 = l2_squared_f32(a, b, n);
	double		margin = (double) (n + 4) * ldexp(1.0, -24);

	if (!isfinite(s32))
		return -1;
	/* each term may also have lost up to FLT_MIN to underflow */
	s32 = s32 * (1 - margin) - (double) (n + 1) * FLT_MIN;
	return s32 > 0 ? s32 : 0;
}
