/*
 * distance_dispatch.c: picks the kernel variant for this CPU.
 *
 * cv_distance starts at the scalar kernels so that it is valid before any
 * detection has run; callers switch it once with cv_simd_use().
 */
#include <math.h>
#include <stddef.h>

#include "distance.h"
#include "distance_variants.h"

const CvDistanceKernels *cv_distance = &cv_distance_kernels_scalar;

/*
 * __builtin_cpu_supports also requires the OS to save the wide registers
 * (XGETBV), so a level it reports is safe to run, not merely present.
 */
bool
cv_simd_supported(CvSimdLevel level)
{
	switch (level)
	{
		case CV_SIMD_SCALAR:
			return true;
#ifdef CV_HAVE_X86_SIMD
		case CV_SIMD_AVX2:
			__builtin_cpu_init();
			return __builtin_cpu_supports("avx2");
		case CV_SIMD_AVX512:
			__builtin_cpu_init();
			return __builtin_cpu_supports("avx512f");
#endif
		default:
			return false;
	}
}

/* The widest supported level. */
CvSimdLevel
cv_simd_best(void)
{
	if (cv_simd_supported(CV_SIMD_AVX512))
		return CV_SIMD_AVX512;
	if (cv_simd_supported(CV_SIMD_AVX2))
		return CV_SIMD_AVX2;
	return CV_SIMD_SCALAR;
}

/* The kernel table of a level, or NULL when this CPU cannot run it. */
const CvDistanceKernels *
cv_distance_kernels_for(CvSimdLevel level)
{
	if (!cv_simd_supported(level))
		return NULL;
	switch (level)
	{
#ifdef CV_HAVE_X86_SIMD
		case CV_SIMD_AVX2:
			return &cv_distance_kernels_avx2;
		case CV_SIMD_AVX512:
			return &cv_distance_kernels_avx512;
#endif
		default:
			return &cv_distance_kernels_scalar;
	}
}

/* Points cv_distance at a level's kernels if this CPU can run them. */
bool
cv_simd_use(CvSimdLevel level)
{
	const CvDistanceKernels *kernels = cv_distance_kernels_for(level);

	if (kernels == NULL)
		return false;
	cv_distance = kernels;
	return true;
}

/*
 * Same formula and order as pgvector's cosine_distance: the product under one
 * sqrt cannot overflow double for float inputs, and a zero vector gives
 * 0/0 = NaN, which must not be clamped away.
 */
double
cv_cosine_distance_from_parts(CvCosineParts parts)
{
	double		similarity;

	similarity = parts.dot / sqrt(parts.norm_a_sq * parts.norm_b_sq);
	if (isnan(similarity))
		return NAN;
	if (similarity > 1.0)
		similarity = 1.0;
	else if (similarity < -1.0)
		similarity = -1.0;
	return 1.0 - similarity;
}
