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
 * register blocking and the vector width cannot change a bit of it.  The
 * two other per-variant loops (centring the J rows, turning a Gram column
 * into distances) are elementwise IEEE operations; every sum over pairs
 * stays in the shared code, in one fixed order.
 */
#ifndef CV_MATH_HEALTH_PAIRWISE_VARIANTS_H
#define CV_MATH_HEALTH_PAIRWISE_VARIANTS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "distance.h"
#include "distance_variants.h"
#include "health.h"

/* Dimensions per chunk: the nr J rows of a chunk stay in L1. */
#define CV_PAIRWISE_KC 256

/*
 * c[col * ldc + r] = fma chain over k < kc of a[k * mr + r] * b[col * ldb + k],
 * continuing from c's value, for r < mr and col < nr.
 */
typedef void (*CvPairwiseKernelFn) (int kc, const double *a, const double *b,
									int ldb, double *c, int ldc);

/*
 * A pair is recomputed from the difference when its expansion d2 is below
 * (1e-2 mean_dist)^2 (STATISTICS.md's rule) or below this fraction of
 * |u_i|^2 + |u_j|^2 (where float64 cancellation could start to show).
 */
#define CV_PAIRWISE_CLOSE_REL2 1e-4

/*
 * For count pairs (i, j) of one column j (row r of the column is pair
 * i = i_lo + r): d2[r] = (nu[r] + nu_j) - 2 g[r], the squared distance by
 * the expansion, and dist[r] = sqrt(d2[r]), or -1 where the pair must be
 * recomputed (cv_pairwise_column_one).  Elementwise IEEE operations only,
 * so every variant writes the same bits.
 */
typedef void (*CvPairwiseColumnFn) (const double *g, const double *nu,
									double nu_j, double close2, int count,
									double *d2, double *dist);

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
	CvPairwiseColumnFn column;	/* distances of one column of a Gram tile */
} CvPairwiseKernels;

/* One row of CvPairwiseColumnFn: the reference every variant follows. */
static inline void
cv_pairwise_column_one(double g, double nu, double nu_j, double close2,
					   double *d2, double *dist)
{
	double		scale = nu + nu_j;
	double		v = scale - 2.0 * g;

	*d2 = v;
	*dist = (v < close2 || v < CV_PAIRWISE_CLOSE_REL2 * scale) ? -1.0 : sqrt(v);
}

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
	bool		stopped;		/* cv_health_stop_requested ended it early */
} CvPairwiseProfile;

/*
 * cv_health_pairwise with chosen kernels; profile may be NULL.  Returns
 * false when memory ran out or a stop was requested (profile->stopped; the
 * ten columns are then NULL).
 */
extern bool cv_health_pairwise_with(const CvPairwiseKernels *kernels,
									const float *x, int64_t n, int d,
									const uint8_t *side,
									const CvHealthParams *params,
									double sigma_override,
									CvClusterStats *out,
									CvPairwiseProfile *profile);

#endif
