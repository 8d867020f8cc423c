/*
 * health_pairwise.c: section 3 of STATISTICS.md, the tiled pairwise class
 * (mean_pairwise_dist, sigma, mean_pairwise_cos, redundancy,
 * redundant_members, breadth, local_density, dist_entropy, entanglement,
 * split_silhouette): every unordered pair i < j once per pass, the n x n
 * matrix never stored.
 *
 * How a pair's distance is found.  The members are centred on c (the mean,
 * in float64: u_i = (double) x_i - c) and the Gram entries G_ij = u_i.u_j
 * are computed a tile at a time by a register-blocked fma micro-kernel
 * (health_pairwise_variants.h; scalar, AVX2 and AVX-512 variants, bitwise
 * equal), then
 *     ||x_i - x_j||^2 = (|u_i|^2 + |u_j|^2) - 2 G_ij,
 * with |u_i|^2 the same fma chain as G_ii, so identical members give an
 * exact 0.  This is the norm expansion on centred members that
 * STATISTICS.md allows, carried out entirely in float64 (no float32
 * products anywhere: this is the reference the GPU is held to).  A pair
 * whose expansion comes out below 1e-2 * mean_dist (the contract's rule),
 * or below 1e-2 of its own scale sqrt(|u_i|^2 + |u_j|^2) (where float64
 * cancellation could start to show), is recomputed from the difference
 * with cv_distance->l2_squared.  What is left has a relative error in d2
 * of at most about d 2^-53 / 1e-4 (2e-9 at d = 1024), typically 1e-13.
 * cos(x_i, x_j) comes from the same G: x_i.x_j = G_ij + (c.u_i + (c.u_j +
 * |c|^2)) (a recomputed pair takes cv_distance->inner_product instead, and
 * identical members have cos exactly 1).
 *
 * Order and memory.  Members are taken in blocks of up to TILE_I rows (the
 * I block, packed once per block) against blocks of TILE_J rows (J, packed
 * per tile); the tile's Gram block lives in a TILE_I x TILE_J buffer and is
 * consumed at once, column j by column, rows i < j ascending.  Memory is
 * O(n + TILE_I d + TILE_I TILE_J): per-member arrays (norms, flags,
 * silhouette sums), the two packed blocks and one Gram tile.  All sums
 * accumulate in float64 in this fixed order, so results do not depend on
 * the kernel variant.
 *
 * Pass 1: sum, min and max of the distances, the sigma histogram,
 * cos >= dup_cos pairs and members, and per-member distance sums to each
 * two-means side (silhouette).  Pass 2 (after sigma and the extremes are
 * known): local_density, the dist_entropy histogram and entanglement.
 * mean_pairwise_cos needs no pass: the O(nd) identity of STATISTICS.md.
 * Each pass costs one Gram product, 2 d flops per pair as FMAs; at
 * n = 20,000, d = 1024 that is 4e11 flops, a few seconds per pass on one
 * AVX-512 core (bench/health_pairwise_bench.c).
 *
 * With sigma_override (not NaN) the histogram is skipped and the sigma
 * column reports the override, so that the potential family downstream
 * is evaluated at the same sigma as pass 2; a collapsed cluster keeps
 * sigma = 0 regardless (STATISTICS.md "Degenerate quantities").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "distance_variants.h"
#include "health.h"
#include "health_pairwise_variants.h"

/*
 * Tile shape: TILE_I rows packed once per I block, TILE_J rows per tile.
 * Re-reading the I block from L3 costs the kernel about 15%, so it is
 * sized to stay in L2 (2 MB here) beside the J rows and the Gram tile:
 * PACK_I_BUDGET bytes, 192 rows at d = 1024.  Packing the J block costs
 * about 16 / TILE_I of the kernel time, hence the floor of 96 rows (large
 * d: the block then lives in L3).  Both are multiples of 48, so of every
 * variant's mr and nr.  Measured at n = 8,000, d = 1024: 192 rows beat
 * 128 and 384 by 3-5%.
 */
#define TILE_I_MAX 384
#define TILE_I_MIN 96
#define TILE_J 48
#define TILE_STEP 48
#define PACK_I_BUDGET (1536 * 1024)

/* Recompute from the difference below this fraction of mean_dist. */
#define CLOSE_MEAN_REL 1e-2

/* Everything one call needs, computed once before the passes. */
typedef struct Pairwise
{
	const float *x;
	int64_t		n;
	int			d;
	const CvPairwiseKernels *kern;
	double	   *centre;			/* d: c */
	double	   *norm_u;			/* n: |u_i|^2, the fma chain of G_ii */
	double	   *norm_x;			/* n: ||x_i|| */
	double	   *centre_dot;		/* n: c.u_i (-infinity for a zero member) */
	double		centre_sq;		/* |c|^2 */
	double		close2;			/* (1e-2 mean_dist)^2 */
	int			tile_i;			/* rows per I block */
	double	   *pack_i;			/* tile_i x d */
	int			ld_j;			/* row stride of pack_j (see pairwise_setup) */
	double	   *pack_j;			/* TILE_J rows of ld_j, centred, row-major */
	double	   *gram;			/* TILE_J x tile_i: gram[jj * tile_i + ii] */
	double	   *col_d2;			/* tile_i: one column's squared distances */
	double	   *col_dist;		/* tile_i: its distances (-1: recompute) */
	int64_t		recomputed;
	bool		stopped;		/* cv_health_stop_requested said so: results void */
} Pairwise;


/* Pass-1 accumulators. */
typedef struct Pass1
{
	double		sum;			/* of distances */
	double		min;
	double		max;
	int64_t		dup_pairs;		/* cos >= dup_cos */
	double		dup_cos;
	int64_t    *sigma_hist;		/* HIST_WAYS x sigma_bins, or NULL: not needed */
	int			sigma_bins;
	double		sigma_width;
	double		sigma_inv_width;	/* sigma_bins / (2 radius) */
	uint8_t    *dup_member;		/* n flags */
	const uint8_t *side;		/* n sides, or NULL: no silhouette */
	double	   *side_sum;		/* 2 x n: member i's distance sums to side 0 at [i], side 1 at [n + i] */
} Pass1;

/* Pass-2 accumulators. */
typedef struct Pass2
{
	int64_t		local_pairs;	/* distance <= sigma / 2 */
	double		half_sigma;
	int64_t    *entropy_hist;	/* HIST_WAYS x entropy_bins, or NULL: max = min */
	int			entropy_bins;
	double		entropy_min;
	double		entropy_inv_width;	/* entropy_bins / (max - min) */
	bool		entangle;		/* sigma > 0 */
	double		minus_inv_two_sigma_sq;	/* -1 / (2 sigma^2) */
	double		entangle_sum;
} Pass2;

/* ---------------------------------------------------------------------
 * Scalar reference kernel and dispatch
 * --------------------------------------------------------------------- */

#define SCALAR_MR 4
#define SCALAR_NR 4

/* The kernel contract spelt out: one fma() chain per (row, col). */
static void
kernel_scalar(int kc, const double *a, const double *b, int ldb, double *c,
			  int ldc)
{
	double		acc[SCALAR_NR][SCALAR_MR];
	int			k;
	int			r;
	int			col;

	for (col = 0; col < SCALAR_NR; col++)
		for (r = 0; r < SCALAR_MR; r++)
			acc[col][r] = c[col * ldc + r];
	for (k = 0; k < kc; k++)
		for (col = 0; col < SCALAR_NR; col++)
			for (r = 0; r < SCALAR_MR; r++)
				acc[col][r] = fma(a[k * SCALAR_MR + r], b[col * ldb + k],
								  acc[col][r]);
	for (col = 0; col < SCALAR_NR; col++)
		for (r = 0; r < SCALAR_MR; r++)
			c[col * ldc + r] = acc[col][r];
}

/* Centres one row into float64. */
static void
centre_scalar(const float *x, const double *c, double *out, int d)
{
	int			k;

	for (k = 0; k < d; k++)
		out[k] = (double) x[k] - c[k];
}

/* Distances of one column, row by row. */
static void
column_scalar(const double *g, const double *nu, double nu_j, double close2,
			  int count, double *d2, double *dist)
{
	int			r;

	for (r = 0; r < count; r++)
		cv_pairwise_column_one(g[r], nu[r], nu_j, close2, &d2[r], &dist[r]);
}

const CvPairwiseKernels cv_pairwise_kernels_scalar = {
	.name = "scalar",
	.mr = SCALAR_MR,
	.nr = SCALAR_NR,
	.kernel = kernel_scalar,
	.centre = centre_scalar,
	.column = column_scalar,
};

/* The kernels of a level; the AVX2 ones also need FMA. */
const CvPairwiseKernels *
cv_pairwise_kernels_for(CvSimdLevel level)
{
	if (!cv_simd_supported(level))
		return NULL;
	switch (level)
	{
#ifdef CV_HAVE_X86_SIMD
		case CV_SIMD_AVX2:
			__builtin_cpu_init();
			if (!__builtin_cpu_supports("fma"))
				return NULL;
			return &cv_pairwise_kernels_avx2;
		case CV_SIMD_AVX512:
			return &cv_pairwise_kernels_avx512;
#endif
		default:
			return &cv_pairwise_kernels_scalar;
	}
}

/*
 * The kernels of the level cv_distance names, so clustervec.simd switches
 * these too; scalar when that level has none here.
 */
static const CvPairwiseKernels *
current_kernels(void)
{
	const CvPairwiseKernels *kern = NULL;

	if (strcmp(cv_distance->name, "avx512") == 0)
		kern = cv_pairwise_kernels_for(CV_SIMD_AVX512);
	else if (strcmp(cv_distance->name, "avx2") == 0)
		kern = cv_pairwise_kernels_for(CV_SIMD_AVX2);
	return kern != NULL ? kern : &cv_pairwise_kernels_scalar;
}

/* ---------------------------------------------------------------------
 * Setup: centre, per-member norms, buffers
 * --------------------------------------------------------------------- */

/* Seconds on a clock (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID). */
static double
seconds_on(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* Starts timing a pass. */
static void
timer_start(double *start)
{
	start[0] = seconds_on(CLOCK_MONOTONIC);
	start[1] = seconds_on(CLOCK_THREAD_CPUTIME_ID);
}

/* Records a pass's wall and CPU seconds. */
static void
timer_stop(const double *start, CvPairwiseProfile *profile, int pass)
{
	profile->pass_seconds[pass] = seconds_on(CLOCK_MONOTONIC) - start[0];
	profile->pass_cpu_seconds[pass] = seconds_on(CLOCK_THREAD_CPUTIME_ID) - start[1];
}

/*
 * Cache-line-aligned memory (cv_health_alloc's blocks are): the kernels'
 * 64-byte loads of the packed panels and the Gram tile then never straddle
 * two lines, which costs the AVX-512 kernel about 5% otherwise.
 */
static void *
alloc_lines(size_t bytes)
{
	return cv_health_alloc(bytes, 1);
}

/* Frees what setup allocated (NULL members are fine). */
static void
pairwise_free(Pairwise *pw)
{
	cv_health_free(pw->centre);
	cv_health_free(pw->norm_u);
	cv_health_free(pw->norm_x);
	cv_health_free(pw->centre_dot);
	cv_health_free(pw->pack_i);
	cv_health_free(pw->pack_j);
	cv_health_free(pw->gram);
	cv_health_free(pw->col_d2);
	cv_health_free(pw->col_dist);
}

/*
 * c = x_1 + mean(x_i - x_1) in float64: identical members give c equal to
 * them bit for bit (then every u is exactly 0).
 */
static void
compute_centre(Pairwise *pw)
{
	const float *first = pw->x;
	int64_t		i;
	int			k;

	for (k = 0; k < pw->d; k++)
		pw->centre[k] = 0.0;
	for (i = 0; i < pw->n; i++)
	{
		const float *row = pw->x + (size_t) i * pw->d;

		for (k = 0; k < pw->d; k++)
			pw->centre[k] += (double) row[k] - (double) first[k];
	}
	for (k = 0; k < pw->d; k++)
		pw->centre[k] = (double) first[k] + pw->centre[k] / (double) pw->n;
}

/*
 * Per member: |u_i|^2 as the kernels' fma chain (so the expansion of a
 * pair of identical members is exactly 0), c.u_i and ||x_i||; and the
 * recompute threshold from mean_dist = mean |u_i|.
 */
static void
compute_norms(Pairwise *pw)
{
	double		dist_sum = 0.0;
	double		mean_dist;
	int64_t		i;
	int			k;

	pw->centre_sq = 0.0;
	for (k = 0; k < pw->d; k++)
		pw->centre_sq += pw->centre[k] * pw->centre[k];
	for (i = 0; i < pw->n; i++)
	{
		const float *row = pw->x + (size_t) i * pw->d;
		double		nu = 0.0;
		double		cu = 0.0;

		for (k = 0; k < pw->d; k++)
		{
			double		u = (double) row[k] - pw->centre[k];

			nu = fma(u, u, nu);
			cu += pw->centre[k] * u;
		}
		pw->norm_u[i] = nu;
		pw->norm_x[i] = sqrt(cv_distance->norm_squared(row, pw->d));
		/* -infinity: a zero member's x.x_j never reaches dup_cos ||x|| ||x_j|| = 0 */
		pw->centre_dot[i] = pw->norm_x[i] > 0.0 ? cu : -INFINITY;
		dist_sum += sqrt(nu);
	}
	mean_dist = dist_sum / (double) pw->n;
	pw->close2 = (CLOSE_MEAN_REL * mean_dist) * (CLOSE_MEAN_REL * mean_dist);
}

/* Rows per I block: PACK_I_BUDGET bytes of packed rows, within [TILE_I_MIN, TILE_I_MAX]. */
static int
choose_tile_i(int64_t n, int d)
{
	int64_t		rows = PACK_I_BUDGET / ((int64_t) d * (int64_t) sizeof(double));
	int64_t		need = (n + TILE_STEP - 1) / TILE_STEP * TILE_STEP;

	rows = rows / TILE_STEP * TILE_STEP;
	if (rows > TILE_I_MAX)
		rows = TILE_I_MAX;
	if (rows < TILE_I_MIN)
		rows = TILE_I_MIN;
	if (rows > need)
		rows = need;
	return (int) rows;
}

/* Allocates and fills everything the passes share; false when out of memory. */
static bool
pairwise_setup(Pairwise *pw, const CvPairwiseKernels *kern, const float *x,
			   int64_t n, int d)
{
	size_t		dd = (size_t) d;

	memset(pw, 0, sizeof(*pw));
	pw->x = x;
	pw->n = n;
	pw->d = d;
	pw->kern = kern;
	pw->tile_i = choose_tile_i(n, d);
	pw->centre = cv_health_alloc(dd, sizeof(double));
	pw->norm_u = cv_health_alloc((size_t) n, sizeof(double));
	pw->norm_x = cv_health_alloc((size_t) n, sizeof(double));
	pw->centre_dot = cv_health_alloc((size_t) n, sizeof(double));
	pw->pack_i = alloc_lines(sizeof(double) * (size_t) pw->tile_i * dd);
	/* rows 8 doubles apart from a multiple of 8: the nr rows a kernel reads
	 * do not all fall in the same L1 sets when d is a power of two */
	pw->ld_j = (d + 7) / 8 * 8 + 8;
	pw->pack_j = alloc_lines(sizeof(double) * (size_t) TILE_J * pw->ld_j);
	pw->gram = alloc_lines(sizeof(double) * (size_t) TILE_J * (size_t) pw->tile_i);
	pw->col_d2 = alloc_lines(sizeof(double) * (size_t) pw->tile_i);
	pw->col_dist = alloc_lines(sizeof(double) * (size_t) pw->tile_i);
	if (pw->centre == NULL || pw->norm_u == NULL || pw->norm_x == NULL
		|| pw->centre_dot == NULL || pw->pack_i == NULL || pw->pack_j == NULL
		|| pw->gram == NULL || pw->col_d2 == NULL || pw->col_dist == NULL)
	{
		pairwise_free(pw);
		return false;
	}
	compute_centre(pw);
	compute_norms(pw);
	return true;
}

/* ---------------------------------------------------------------------
 * Tiles: packing and the Gram block
 * --------------------------------------------------------------------- */

/*
 * Packs the I block, members row0 .. row0 + rows - 1 centred, into panels
 * of `width` rows (padded to `padded` rows with zeros), chunk by chunk of
 * CV_PAIRWISE_KC dimensions: chunk at k0 starts at padded * k0, its panel
 * p at p * width * klen, element (k, r) at k * width + r.  Once per I
 * block, so its strided stores cost little.
 */
static void
pack_block_i(const Pairwise *pw, int64_t row0, int rows, int width, int padded,
			 double *dst)
{
	int			d = pw->d;
	int			k0;

	for (k0 = 0; k0 < d; k0 += CV_PAIRWISE_KC)
	{
		int			klen = d - k0 < CV_PAIRWISE_KC ? d - k0 : CV_PAIRWISE_KC;
		const double *c = pw->centre + k0;
		int			idx;

		for (idx = 0; idx < padded; idx++)
		{
			double	   *out = dst + (size_t) padded * k0
				+ (size_t) (idx / width) * width * klen + idx % width;
			int			k;

			if (idx >= rows)
				for (k = 0; k < klen; k++)
					out[(size_t) k * width] = 0.0;
			else
			{
				const float *src = pw->x + (size_t) (row0 + idx) * d + k0;

				for (k = 0; k < klen; k++)
					out[(size_t) k * width] = (double) src[k] - c[k];
			}
		}
	}
}

/*
 * The J block, members row0 .. row0 + rows - 1 centred, row-major with
 * stride ld_j, padded with zero rows to `padded`: once per tile, so the
 * variant's vector loop does it.
 */
static void
pack_block_j(const Pairwise *pw, int64_t row0, int rows, int padded, double *dst)
{
	int			r;

	for (r = 0; r < padded; r++)
	{
		double	   *out = dst + (size_t) r * pw->ld_j;

		if (r < rows)
			pw->kern->centre(pw->x + (size_t) (row0 + r) * pw->d, pw->centre,
							 out, pw->d);
		else
			memset(out, 0, sizeof(double) * pw->d);
	}
}

/*
 * The Gram block of I rows [i0, i0 + pad_i) and J rows [j0, j0 + rows_j):
 * gram[jj * tile_i + ii] = u_(i0+ii) . u_(j0+jj), for every (ii, jj) whose
 * micro-tile holds a pair i < j (the others are skipped and stay garbage).
 */
static void
gram_tile(Pairwise *pw, int64_t i0, int pad_i, int64_t j0, int rows_j)
{
	const CvPairwiseKernels *kern = pw->kern;
	int			mr = kern->mr;
	int			nr = kern->nr;
	int			pad_j = (rows_j + nr - 1) / nr * nr;
	int			ldc = pw->tile_i;
	int			k0;

	memset(pw->gram, 0, sizeof(double) * (size_t) pad_j * ldc);
	for (k0 = 0; k0 < pw->d; k0 += CV_PAIRWISE_KC)
	{
		int			klen = pw->d - k0 < CV_PAIRWISE_KC ? pw->d - k0 : CV_PAIRWISE_KC;
		const double *a = pw->pack_i + (size_t) pad_i * k0;
		const double *b = pw->pack_j + k0;
		int			s;

		for (s = 0; s < pad_j / nr; s++)
		{
			int64_t		last_j = j0 + (int64_t) s * nr + nr - 1;
			int			p;

			if (last_j > j0 + rows_j - 1)
				last_j = j0 + rows_j - 1;
			for (p = 0; p < pad_i / mr && i0 + (int64_t) p * mr < last_j; p++)
				kern->kernel(klen, a + (size_t) p * mr * klen,
							 b + (size_t) s * nr * pw->ld_j, pw->ld_j,
							 pw->gram + (size_t) s * nr * ldc + (size_t) p * mr,
							 ldc);
		}
	}
}

/* ---------------------------------------------------------------------
 * Per pair
 *
 * The column loops below are the hot path after the kernel: the variant's
 * column function has turned the Gram column into distances (vector sqrt),
 * and what is left per pair is a handful of float64 operations with no
 * data-dependent branch (side, duplicate and threshold tests become
 * arithmetic), accumulators in locals, and histograms split in HIST_WAYS
 * copies so that runs of pairs in one bin do not serialise on one counter.
 * Sums stay sequential in the fixed pair order, in this shared code, which
 * is what keeps every variant's results bitwise equal.
 * --------------------------------------------------------------------- */

/* Copies of each histogram (pair i uses copy i % HIST_WAYS). */
#define HIST_WAYS 4

/* ||x_i - x_j||^2 from the difference (float64, cv_distance). */
static double
exact_dist2(Pairwise *pw, int64_t i, int64_t j)
{
	pw->recomputed++;
	return cv_distance->l2_squared(pw->x + (size_t) i * pw->d,
								   pw->x + (size_t) j * pw->d, pw->d);
}

/*
 * cos(x_i, x_j) >= dup_cos for a pair recomputed from the difference:
 * cos is 0 with a zero member, 1 for identical members, else from the
 * float64 inner product.
 */
static bool
exact_dup(const Pairwise *pw, int64_t i, int64_t j, double d2, double dup_cos)
{
	double		dot;

	if (pw->norm_x[i] == 0.0 || pw->norm_x[j] == 0.0)
		return 0.0 >= dup_cos;
	if (d2 == 0.0)
		return 1.0 >= dup_cos;
	dot = cv_distance->inner_product(pw->x + (size_t) i * pw->d,
									 pw->x + (size_t) j * pw->d, pw->d);
	return dot / (pw->norm_x[i] * pw->norm_x[j]) >= dup_cos;
}

/*
 * Histogram bin min(floor(v * inv_width), last) of a value v >= 0: the
 * truncating conversion is floor here, and NaN or huge q go to last.
 */
static inline int
bin_of(double v, double inv_width, int last)
{
	double		q = v * inv_width;

	return q < (double) last ? (int) q : last;
}

/*
 * Pass 1 over the pairs (i, j), i in [i_lo, i_hi), of column j: g[r], d2[r]
 * and dist[r] (-1: recompute) for i = i_lo + r.  cos >= dup_cos is tested
 * as x_i.x_j >= dup_cos ||x_i|| ||x_j||, with x_i.x_j = G_ij + (c.u_i +
 * (c.u_j + |c|^2)); a zero member has c.u set to -infinity
 * (compute_norms), so its pairs never count.  d2 = 0 without a recompute
 * means u_i = u_j = 0 (every member equal): cos is 1.
 */
static void
pass1_column(Pairwise *pw, Pass1 *acc, int64_t j, int64_t i_lo, int64_t i_hi,
			 const double *g, const double *d2s, const double *dists)
{
	const double *norm_x = pw->norm_x;
	const double *cdot = pw->centre_dot;
	const uint8_t *side = acc->side;
	uint8_t    *dup_member = acc->dup_member;
	int64_t    *hist = acc->sigma_hist;
	double	   *to_side_j = side != NULL ? acc->side_sum + (side[j] != 0) * pw->n : NULL;
	double		dup_cos = acc->dup_cos;
	double		inv_width = acc->sigma_inv_width;
	int			bins = acc->sigma_bins;
	double		cdot_j = cdot[j] + pw->centre_sq;
	double		dup_j = dup_cos * norm_x[j];
	double		sum = 0.0;
	double		own0 = 0.0;		/* j's distances to side 0 */
	double		own1 = 0.0;
	double		lo = acc->min;
	double		hi = acc->max;
	int64_t		dups = 0;
	uint8_t		dup_of_j = 0;
	int64_t		i;

	for (i = i_lo; i < i_hi; i++)
	{
		int64_t		r = i - i_lo;
		double		dist = dists[r];
		uint8_t		dup;

		if (dist < 0.0)
		{
			double		d2 = exact_dist2(pw, i, j);

			dist = sqrt(d2);
			dup = exact_dup(pw, i, j, d2, dup_cos);
		}
		else if (d2s[r] == 0.0)
			dup = norm_x[i] > 0.0 && 1.0 >= dup_cos;
		else
			dup = g[r] + (cdot[i] + cdot_j) >= norm_x[i] * dup_j;
		sum += dist;
		lo = dist < lo ? dist : lo;
		hi = dist > hi ? dist : hi;
		if (hist != NULL)
			hist[(i & (HIST_WAYS - 1)) * bins + bin_of(dist, inv_width, bins - 1)]++;
		dups += dup;
		dup_member[i] |= dup;
		dup_of_j |= dup;
		if (side != NULL)
		{
			double		s = (double) (side[i] != 0);

			own1 += s * dist;	/* exact: s is 0 or 1 */
			own0 += dist - s * dist;
			to_side_j[i] += dist;
		}
	}
	acc->sum += sum;
	acc->min = lo;
	acc->max = hi;
	acc->dup_pairs += dups;
	dup_member[j] |= dup_of_j;
	if (side != NULL)
	{
		acc->side_sum[j] += own0;
		acc->side_sum[pw->n + j] += own1;
	}
}

/* Pass 2 over the pairs of column j, as pass1_column. */
static void
pass2_column(Pairwise *pw, Pass2 *acc, int64_t j, int64_t i_lo, int64_t i_hi,
			 const double *d2s, const double *dists)
{
	int64_t    *hist = acc->entropy_hist;
	double		half_sigma = acc->half_sigma;
	double		origin = acc->entropy_min;
	double		inv_width = acc->entropy_inv_width;
	int			bins = acc->entropy_bins;
	bool		entangle_on = acc->entangle;
	double		minus_inv = acc->minus_inv_two_sigma_sq;
	double		entangle = 0.0;
	int64_t		local = 0;
	int64_t		i;

	for (i = i_lo; i < i_hi; i++)
	{
		double		d2 = d2s[i - i_lo];
		double		dist = dists[i - i_lo];

		if (dist < 0.0)
		{
			d2 = exact_dist2(pw, i, j);
			dist = sqrt(d2);
		}
		local += dist <= half_sigma;
		if (hist != NULL)
			hist[(i & (HIST_WAYS - 1)) * bins
				 + bin_of(dist - origin, inv_width, bins - 1)]++;
		if (entangle_on)
			entangle += exp(d2 * minus_inv);
	}
	acc->local_pairs += local;
	acc->entangle_sum += entangle;
}

/* Adds the HIST_WAYS copies of a histogram into the first. */
static void
merge_hist(int64_t *hist, int bins)
{
	int			w;
	int			b;

	for (w = 1; w < HIST_WAYS; w++)
		for (b = 0; b < bins; b++)
			hist[b] += hist[(size_t) w * (size_t) bins + (size_t) b];
}

/* ---------------------------------------------------------------------
 * The passes
 * --------------------------------------------------------------------- */

/* Feeds one computed tile's pairs, column by column, to the pass. */
static void
consume_tile(Pairwise *pw, int pass, void *acc, int64_t i0, int rows_i,
			 int64_t j0, int rows_j)
{
	int			jj;

	for (jj = 0; jj < rows_j; jj++)
	{
		int64_t		j = j0 + jj;
		int64_t		i_hi = j < i0 + rows_i ? j : i0 + rows_i;
		const double *g = pw->gram + (size_t) jj * pw->tile_i;

		if (i_hi <= i0)
			continue;
		pw->kern->column(g, pw->norm_u + i0, pw->norm_u[j], pw->close2,
						 (int) (i_hi - i0), pw->col_d2, pw->col_dist);
		if (pass == 1)
			pass1_column(pw, (Pass1 *) acc, j, i0, i_hi, g, pw->col_d2, pw->col_dist);
		else
			pass2_column(pw, (Pass2 *) acc, j, i0, i_hi, pw->col_d2, pw->col_dist);
	}
}

/* One pass over every pair i < j: I blocks, then J blocks from the diagonal. */
static void
run_pass(Pairwise *pw, int pass, void *acc)
{
	int			mr = pw->kern->mr;
	int			nr = pw->kern->nr;
	int64_t		i0;

	for (i0 = 0; i0 < pw->n - 1 && !pw->stopped; i0 += pw->tile_i)
	{
		int			rows_i = (int) (pw->n - i0 < pw->tile_i ? pw->n - i0 : pw->tile_i);
		int			pad_i = (rows_i + mr - 1) / mr * mr;
		int64_t		j0;

		pack_block_i(pw, i0, rows_i, mr, pad_i, pw->pack_i);
		for (j0 = i0 + 1; j0 < pw->n && !pw->stopped; j0 += TILE_J)
		{
			int			rows_j = (int) (pw->n - j0 < TILE_J ? pw->n - j0 : TILE_J);
			int			pad_j = (rows_j + nr - 1) / nr * nr;

			pack_block_j(pw, j0, rows_j, pad_j, pw->pack_j);
			gram_tile(pw, i0, pad_i, j0, rows_j);
			consume_tile(pw, pass, acc, i0, rows_i, j0, rows_j);
			/* every 16 tiles (at most 384 x 768 pairs): a cancel waits a few milliseconds */
			if ((j0 - i0 - 1) / TILE_J % 16 == 15 && cv_health_should_stop())
				pw->stopped = true;
		}
		if (cv_health_should_stop())
			pw->stopped = true;
	}
}

/* ---------------------------------------------------------------------
 * Statistics from the accumulators
 * --------------------------------------------------------------------- */

/* Marks the ten columns of this section NULL. */
static void
null_all(CvClusterStats *out)
{
	int			col;

	for (col = CV_STAT_MEAN_PAIRWISE_DIST; col <= CV_STAT_SPLIT_SILHOUETTE; col++)
		cv_stat_null(out, (CvStat) col);
}

/*
 * mean_pairwise_cos by the identity (||sum of unit vectors||^2 - m) /
 * (n (n - 1)) over the m nonzero members; false when out of memory.
 */
static bool
mean_cos_identity(const Pairwise *pw, double *mean)
{
	double	   *unit = cv_health_alloc((size_t) pw->d, sizeof(double));
	double		sq = 0.0;
	int64_t		m = 0;
	int64_t		i;
	int			k;

	if (unit == NULL)
		return false;
	for (i = 0; i < pw->n; i++)
	{
		const float *row = pw->x + (size_t) i * pw->d;

		if (pw->norm_x[i] == 0.0)
			continue;
		m++;
		for (k = 0; k < pw->d; k++)
			unit[k] += (double) row[k] / pw->norm_x[i];
	}
	for (k = 0; k < pw->d; k++)
		sq += unit[k] * unit[k];
	cv_health_free(unit);
	*mean = (sq - (double) m) / ((double) pw->n * (double) (pw->n - 1));
	return true;
}

/* sigma: centre of the first bin whose cumulative count reaches half the pairs. */
static double
sigma_from_hist(const int64_t *hist, int bins, double width, int64_t pairs)
{
	int64_t		cum = 0;
	int			b;

	for (b = 0; b < bins; b++)
	{
		cum += hist[b];
		if (2 * cum >= pairs)
			return ((double) b + 0.5) * width;
	}
	return ((double) bins - 0.5) * width;	/* not reached: cum = pairs */
}

/* Normalised Shannon entropy of a histogram of `pairs` counts. */
static double
entropy_of(const int64_t *hist, int bins, int64_t pairs)
{
	double		h = 0.0;
	int			b;

	for (b = 0; b < bins; b++)
	{
		double		p;

		if (hist[b] == 0)
			continue;
		p = (double) hist[b] / (double) pairs;
		h -= p * log(p);
	}
	return h / log((double) bins);
}

/*
 * Mean silhouette (scikit-learn's convention) from the per-member sums of
 * distances to each side; NULL when a side is empty.
 */
static void
finish_silhouette(const Pass1 *acc, int64_t n, CvClusterStats *out)
{
	int64_t		count[2] = {0, 0};
	double		total = 0.0;
	int64_t		i;

	for (i = 0; i < n; i++)
		count[acc->side[i] != 0]++;
	if (count[0] == 0 || count[1] == 0)
	{
		cv_stat_null(out, CV_STAT_SPLIT_SILHOUETTE);
		return;
	}
	for (i = 0; i < n; i++)
	{
		int			own = acc->side[i] != 0;
		double		a;
		double		b;
		double		m;

		if (count[own] == 1)
			continue;			/* alone on its side: 0 */
		a = acc->side_sum[own * n + i] / (double) (count[own] - 1);
		b = acc->side_sum[(1 - own) * n + i] / (double) count[1 - own];
		m = a > b ? a : b;
		if (m > 0.0)
			total += (b - a) / m;
	}
	cv_stat_set(out, CV_STAT_SPLIT_SILHOUETTE, total / (double) n);
}

/* Pass 1 and its columns; fills *sigma; false when out of memory. */
static bool
do_pass1(Pairwise *pw, const uint8_t *side, const CvHealthParams *params,
		 double sigma_override, CvClusterStats *out, Pass1 *acc,
		 double *sigma)
{
	int64_t		pairs = pw->n * (pw->n - 1) / 2;
	double		radius = out->value[CV_STAT_RADIUS];
	bool		want_hist = !out->collapsed && isnan(sigma_override) && radius > 0.0;
	int64_t		flagged = 0;
	int64_t		i;

	memset(acc, 0, sizeof(*acc));
	acc->min = INFINITY;
	acc->max = -INFINITY;
	acc->dup_cos = params->dup_cos;
	acc->sigma_bins = params->sigma_bins;
	acc->sigma_width = 2.0 * radius / params->sigma_bins;
	acc->sigma_inv_width = params->sigma_bins / (2.0 * radius);
	acc->side = out->collapsed ? NULL : side;
	acc->dup_member = cv_health_alloc((size_t) pw->n, 1);
	acc->sigma_hist = want_hist
		? cv_health_alloc((size_t) acc->sigma_bins * HIST_WAYS, sizeof(int64_t)) : NULL;
	acc->side_sum = acc->side != NULL ? cv_health_alloc((size_t) pw->n * 2, sizeof(double)) : NULL;
	if (acc->dup_member == NULL || (want_hist && acc->sigma_hist == NULL)
		|| (acc->side != NULL && acc->side_sum == NULL))
		return false;

	run_pass(pw, 1, acc);
	if (pw->stopped)
		return false;

	if (want_hist)
		merge_hist(acc->sigma_hist, acc->sigma_bins);
	for (i = 0; i < pw->n; i++)
		flagged += acc->dup_member[i];
	cv_stat_set(out, CV_STAT_MEAN_PAIRWISE_DIST, acc->sum / (double) pairs);
	cv_stat_set(out, CV_STAT_REDUNDANCY, (double) acc->dup_pairs / (double) pairs);
	cv_stat_set(out, CV_STAT_REDUNDANT_MEMBERS, (double) flagged / (double) pw->n);
	cv_stat_set(out, CV_STAT_BREADTH, acc->max);
	if (out->collapsed)
		*sigma = 0.0;
	else if (!isnan(sigma_override))
		*sigma = sigma_override;
	else if (want_hist)
		*sigma = sigma_from_hist(acc->sigma_hist, acc->sigma_bins,
								 acc->sigma_width, pairs);
	else
		*sigma = 0.0;			/* radius = 0 */
	cv_stat_set(out, CV_STAT_SIGMA, *sigma);
	if (acc->side == NULL)
		cv_stat_null(out, CV_STAT_SPLIT_SILHOUETTE);
	else
		finish_silhouette(acc, pw->n, out);
	return true;
}

/* Pass 2 and its columns; false when out of memory. */
static bool
do_pass2(Pairwise *pw, const CvHealthParams *params, const Pass1 *p1,
		 double sigma, CvClusterStats *out)
{
	int64_t		pairs = pw->n * (pw->n - 1) / 2;
	Pass2		acc;

	memset(&acc, 0, sizeof(acc));
	acc.half_sigma = sigma / 2.0;
	acc.entropy_bins = params->entropy_bins;
	acc.entropy_min = p1->min;
	acc.entropy_inv_width = params->entropy_bins / (p1->max - p1->min);
	acc.entangle = sigma > 0.0;
	acc.minus_inv_two_sigma_sq = -1.0 / (2.0 * sigma * sigma);
	if (p1->max > p1->min)
	{
		acc.entropy_hist = cv_health_alloc((size_t) acc.entropy_bins * HIST_WAYS, sizeof(int64_t));
		if (acc.entropy_hist == NULL)
			return false;
	}

	run_pass(pw, 2, &acc);
	if (pw->stopped)
	{
		cv_health_free(acc.entropy_hist);
		return false;
	}
	if (acc.entropy_hist != NULL)
		merge_hist(acc.entropy_hist, acc.entropy_bins);

	cv_stat_set(out, CV_STAT_LOCAL_DENSITY, (double) acc.local_pairs / (double) pairs);
	cv_stat_set(out, CV_STAT_DIST_ENTROPY, acc.entropy_hist == NULL ? 0.0
				: entropy_of(acc.entropy_hist, acc.entropy_bins, pairs));
	if (acc.entangle)
		cv_stat_set(out, CV_STAT_ENTANGLEMENT, acc.entangle_sum / (double) pairs);
	else
		cv_stat_null(out, CV_STAT_ENTANGLEMENT);
	cv_health_free(acc.entropy_hist);
	return true;
}

/* Frees pass 1's arrays. */
static void
pass1_free(Pass1 *acc)
{
	cv_health_free(acc->dup_member);
	cv_health_free(acc->sigma_hist);
	cv_health_free(acc->side_sum);
}

/* Both passes once setup has succeeded; false when out of memory. */
static bool
pairwise_passes(Pairwise *pw, const uint8_t *side, const CvHealthParams *params,
				double sigma_override, CvClusterStats *out,
				CvPairwiseProfile *profile)
{
	Pass1		p1;
	double		sigma;
	double		mean_cos;
	double		start[2];
	bool		ok;

	if (!mean_cos_identity(pw, &mean_cos))
		return false;
	timer_start(start);
	ok = do_pass1(pw, side, params, sigma_override, out, &p1, &sigma);
	timer_stop(start, profile, 0);
	profile->passes = ok ? 1 : 0;
	if (ok && out->collapsed)
	{
		/* STATISTICS.md "Degenerate quantities": no pass 2 */
		cv_stat_set(out, CV_STAT_LOCAL_DENSITY, 1.0);
		cv_stat_set(out, CV_STAT_DIST_ENTROPY, 0.0);
		cv_stat_null(out, CV_STAT_ENTANGLEMENT);
	}
	else if (ok)
	{
		timer_start(start);
		ok = do_pass2(pw, params, &p1, sigma, out);
		timer_stop(start, profile, 1);
		profile->passes = 2;
	}
	pass1_free(&p1);
	if (ok)
		cv_stat_set(out, CV_STAT_MEAN_PAIRWISE_COS, mean_cos);
	return ok;
}

/* ---------------------------------------------------------------------
 * Entry points
 * --------------------------------------------------------------------- */

/* cv_health_pairwise with chosen kernels (test and benchmark hook). */
bool
cv_health_pairwise_with(const CvPairwiseKernels *kernels, const float *x,
						int64_t n, int d, const uint8_t *side,
						const CvHealthParams *params, double sigma_override,
						CvClusterStats *out, CvPairwiseProfile *profile)
{
	CvPairwiseProfile scratch;
	Pairwise	pw;
	bool		ok;

	if (profile == NULL)
		profile = &scratch;
	memset(profile, 0, sizeof(*profile));
	null_all(out);
	if (n < 2 || d < 1 || x == NULL)
		return true;
	profile->pairs = n * (n - 1) / 2;
	if (!pairwise_setup(&pw, kernels, x, n, d))
		return false;
	pw.stopped = false;
	ok = pairwise_passes(&pw, side, params, sigma_override, out, profile);
	profile->recomputed = pw.recomputed;
	profile->stopped = pw.stopped;
	pairwise_free(&pw);
	if (!ok)
		null_all(out);
	return ok;
}

/* Section 3 of STATISTICS.md with the kernels clustervec.simd selects. */
int
cv_health_pairwise(const float *x, int64_t n, int d, const uint8_t *side,
				   const CvHealthParams *params, double sigma_override,
				   CvClusterStats *out)
{
	CvPairwiseProfile profile;

	if (cv_health_pairwise_with(current_kernels(), x, n, d, side, params, sigma_override, out,
								&profile))
		return 0;
	return profile.stopped ? CV_HEALTH_STOPPED : -1;
}
