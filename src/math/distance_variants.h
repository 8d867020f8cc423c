/*
 * distance_variants.h: the per-variant kernel tables, for the dispatcher and
 * the unit test only.  Callers outside src/math go through distance.h.
 */
#ifndef CV_MATH_DISTANCE_VARIANTS_H
#define CV_MATH_DISTANCE_VARIANTS_H

#include "distance.h"

/*
 * The SIMD variants need GCC-style target attributes and x86 intrinsics;
 * elsewhere only the scalar table exists and the SIMD levels are unsupported.
 */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define CV_HAVE_X86_SIMD 1
#endif

extern const CvDistanceKernels cv_distance_kernels_scalar;

#ifdef CV_HAVE_X86_SIMD
extern const CvDistanceKernels cv_distance_kernels_avx2;
extern const CvDistanceKernels cv_distance_kernels_avx512;
#endif

#endif
