/*
 * health_pairwise_variants.h: the dot-product micro-kernels behind
 * cv_health_pairwise (health_pairwise.c), one per SIMD level, and the test
 * and benchmark hooks.  For health_pairwise*.c, the unit test and the
 * benchmark only; everything else goes through health.h.
 *
 * The kernels' contract (what makes every variant bitwise equal):
 * - members are centred in float64 (u = (double) x - c); the I block is
 *   packed in panels of mr rows interleaved, dimension-major
 *   (a[k * mr + r]), in chunks of at most CV_PAIRWISE_KC dimensions; the
 *   J block stays row-major (b[col * ldb + k]);
 * - the kernel adds to c[col * ldc + r], for every row r < mr of panel a and
 *   every row col < nr of b, the chain acc = fma(a_k, b_k, acc) over the
 *   chunk's dimensions k in increasing order, starting from the value in
 *   c: one correctly rounded fused multiply-add per dimension.
 * So every variant computes, for each pair, the same sequential fma chain
 *   acc = fma(u_i[k], u_j[k], acc), k = 0 .. d-1, acc starting at +0,
 * which the scalar kernel spells out with C99 fma(); the chunking, the
 * register blocking and the vector width cannot change a bit of it.
 */
#ifndef CV_MATH_HEALTH_PAIRWISE_VARIANTS_H
#define CV_MATH_HEALTH_PAIRWISE_VARIANTS_H

#include <stdbool.h>
#include <stdint.h>

#include "distance.h"
#include "distance_variants.h"
#include "health.h"

/* Dimensions per chunk: the nr J rows of a chunk stay in L1. */
#define CV_PAIRWISE_KC 256

/* Largest panel heights of any variant (sizes the scalar fallbacks). */
#define CV_PAIRWISE_MAX_MR 24
#define CV_PAIRWISE_MAX_NR 8

/*
 * c[col * ldc + r] = fma chain over k < kc of a[k * mr + r] * b[col * ldb + k],
 * continuing from c's value, for r < mr and col < nr.
 */
typedef void (*CvPairwiseKernelFn) (int kc, const double *a, const double *b,
									int ldb, double *c, int ldc);

/* out[k] = (double) x[k] - c[k] for k < d (exact IEEE operations, so every variant agrees). */
typedef void (*CvPairwiseCentreFn) (const float *x, const double *c, double *out,
									int d);

typedef struct CvPairwiseKernels
{
	const char *name;			/* matches CvDistanceKernels.name */
	int			mr;				/* rows of panel a (a divisor of 48) */
	int			nr;				/* rows of b per call (a divisor of 48) */
	CvPairwiseKernelFn kernel;
	CvPairwiseCentreFn centre;	/* packs the J rows */
} CvPairwiseKernels;

extern const CvPairwiseKernels cv_pairwise_kernels_scalar;

#ifdef CV_HAVE_X86_SIMD
extern const CvPairwiseKernels cv_pairwise_kernels_avx2;
extern const CvPairwiseKernels cv_pairwise_kernels_avx512;
#endif

/*
 * The kernels of a level, or NULL when this CPU cannot run them (AVX2 also
 * needs FMA, which every AVX2 CPU has in practice).
 */
extern const CvPairwiseKernels *cv_pairwise_kernels_for(CvSimdLevel level);

/* What one run did, for the benchmark and the test. */
typedef struct CvPairwiseProfile
{
	double		pass_seconds[2];	/* wall time of pass 1 and pass 2 (0: skipped) */
	double		pass_cpu_seconds[2];	/* the same in this thread's CPU time */
	int64_t		pairs;			/* n (n - 1) / 2 */
	int64_t		recomputed;		/* pair distances recomputed from the difference, both passes */
	int			passes;			/* passes over the pairs that ran: 0, 1 or 2 */
} CvPairwiseProfile;

/*
 * cv_health_pairwise with chosen kernels; profile may be NULL.  Returns
 * false when memory ran out (the ten columns are then NULL).
 */
extern bool cv_health_pairwise_with(const CvPairwiseKernels *kernels,
									const float *x, int64_t n, int d,
									const uint8_t *side,
									const CvHealthParams *params,
									double sigma_override,
									CvClusterStats *out,
									CvPairwiseProfile *profile);

#endif
