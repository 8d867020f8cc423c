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
 * STATISTICS.md allows, carried out entirely in float64.  A pair whose
 * expansion comes out below 1e-2 * mean_dist (the contract's rule), or
 * below 1e-2 of its own scale sqrt(|u_i|^2 + |u_j|^2) (where float64
 * cancellation could start to show), is recomputed from the difference
 * with cv_distance->l2_squared; what is left has a relative error of about
 * d 2^-53 / 1e-4, below 1e-9 even at d = 16,000.
 * cos(x_i, x_j) comes from the same G: x_i.x_j = G_ij + (c.u_i + c.u_j) +
 * |c|^2 (a recomputed pair takes cv_distance->inner_product instead, and
 * a pair at distance 0 has cos exactly 1).
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
 * Tile shape: TILE_I rows packed once per I block (at d = 1024 the chunk
 * of them the kernels sweep, 384 x 256 doubles = 768 kB, sits in L2),
 * TILE_J rows per tile.  Packing the J block costs about 16 / TILE_I of the
 * kernel time, so TILE_I is large; both are multiples of 48, so of every
 * variant's mr and nr.
 */
#define TILE_I_MAX 384
#define TILE_I_MIN 48
#define TILE_J 48
#define TILE_STEP 48

/* The packed I block is capped near this many bytes (large d: fewer rows). */
#define PACK_I_BUDGET (8 * 1024 * 1024)

/* Recompute from the difference below this fraction of mean_dist. */
#define CLOSE_MEAN_REL 1e-2

/* ... and below this fraction of the pair's own scale (squared: 1e-2^2). */
#define CLOSE_PAIR_REL2 1e-4

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
	double	   *centre_dot;		/* n: c.u_i */
	double		centre_sq;		/* |c|^2 */
	double		close2;			/* (1e-2 mean_dist)^2 */
	int			tile_i;			/* rows per I block */
	double	   *pack_i;			/* tile_i x d */
	double	   *pack_j;			/* TILE_J x d */
	double	   *gram;			/* TILE_J x tile_i: gram[jj * tile_i + ii] */
	int64_t		recomputed;
} Pairwise;

/* Pass-1 accumulators. */
typedef struct Pass1
{
	double		sum;			/* of distances */
	double		min;
	double		max;
	int64_t		dup_pairs;		/* cos >= dup_cos */
	double		dup_cos;
	int64_t    *sigma_hist;		/* sigma_bins counts, or NULL: not needed */
	int			sigma_bins;
	double		sigma_width;
	uint8_t    *dup_member;		/* n flags */
	const uint8_t *side;		/* n sides, or NULL: no silhouette */
	double	   *side_sum;		/* 2n: sum of distances to side 0 and 1 */
} Pass1;

/* Pass-2 accumulators. */
typedef struct Pass2
{
	int64_t		local_pairs;	/* distance <= sigma / 2 */
	double		half_sigma;
	int64_t    *entropy_hist;	/* entropy_bins counts, or NULL: max = min */
	int			entropy_bins;
	double		entropy_min;
	double		entropy_width;
	bool		entangle;		/* sigma > 0 */
	double		two_sigma_sq;
	double		entangle_sum;
} Pass2;

/* ---------------------------------------------------------------------
 * Scalar reference kernel and dispatch
 * --------------------------------------------------------------------- */

#define SCALAR_MR 4
#define SCALAR_NR 4

/* The kernel contract spelt out: one fma() chain per (row, col). */
static void
kernel_scalar(int kc, const double *a, const double *b, double *c, int ldc)
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
				acc[col][r] = fma(a[k * SCALAR_MR + r], b[k * SCALAR_NR + col],
								  acc[col][r]);
	for (col = 0; col < SCALAR_NR; col++)
		for (r = 0; r < SCALAR_MR; r++)
			c[col * ldc + r] = acc[col][r];
}

const CvPairwiseKernels cv_pairwise_kernels_scalar = {
	.name = "scalar",
	.mr = SCALAR_MR,
	.nr = SCALAR_NR,
	.kernel = kernel_scalar,
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

/* Frees what setup allocated (NULL members are fine). */
static void
pairwise_free(Pairwise *pw)
{
	free(pw->centre);
	free(pw->norm_u);
	free(pw->norm_x);
	free(pw->centre_dot);
	free(pw->pack_i);
	free(pw->pack_j);
	free(pw->gram);
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
		pw->centre_dot[i] = cu;
		pw->norm_x[i] = sqrt(cv_distance->norm_squared(row, pw->d));
		dist_sum += sqrt(nu);
	}
	mean_dist = dist_sum / (double) pw->n;
	pw->close2 = (CLOSE_MEAN_REL * mean_dist) * (CLOSE_MEAN_REL * mean_dist);
}

/* Rows per I block: TILE_I_MAX unless d makes the packed block too big. */
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
	pw->centre = malloc(sizeof(double) * dd);
	pw->norm_u = malloc(sizeof(double) * (size_t) n);
	pw->norm_x = malloc(sizeof(double) * (size_t) n);
	pw->centre_dot = malloc(sizeof(double) * (size_t) n);
	pw->pack_i = malloc(sizeof(double) * (size_t) pw->tile_i * dd);
	pw->pack_j = malloc(sizeof(double) * (size_t) TILE_J * dd);
	pw->gram = malloc(sizeof(double) * (size_t) TILE_J * (size_t) pw->tile_i);
	if (pw->centre == NULL || pw->norm_u == NULL || pw->norm_x == NULL
		|| pw->centre_dot == NULL || pw->pack_i == NULL || pw->pack_j == NULL
		|| pw->gram == NULL)
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
 * Packs members row0 .. row0 + rows - 1, centred, into panels of `width`
 * rows (padded to `padded` rows with zeros), chunk by chunk of
 * CV_PAIRWISE_KC dimensions: chunk at k0 starts at padded * k0, its panel
 * p at p * width * klen, element (k, r) at k * width + r.
 */
static void
pack_rows(const Pairwise *pw, int64_t row0, int rows, int width, int padded,
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
			{
				for (k = 0; k < klen; k++)
					out[(size_t) k * width] = 0.0;
				continue;
			}
			for (k = 0; k < klen; k++)
			{
				const float *src = pw->x + (size_t) (row0 + idx) * d + k0;

				out[(size_t) k * width] = (double) src[k] - c[k];
			}
		}
	}
}

/*
 * The Gram block of I rows [i0, i0 + rows_i) and J rows [j0, j0 + rows_j):
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
		const double *b = pw->pack_j + (size_t) pad_j * k0;
		int			s;

		for (s = 0; s < pad_j / nr; s++)
		{
			int64_t		last_j = j0 + (int64_t) s * nr + nr - 1;
			int			p;

			if (last_j > j0 + rows_j - 1)
				last_j = j0 + rows_j - 1;
			for (p = 0; p < pad_i / mr && i0 + (int64_t) p * mr < last_j; p++)
				kern->kernel(klen, a + (size_t) p * mr * klen,
							 b + (size_t) s * nr * klen,
							 pw->gram + (size_t) s * nr * ldc + (size_t) p * mr,
							 ldc);
		}
	}
}

/* ---------------------------------------------------------------------
 * Per pair
 * --------------------------------------------------------------------- */

/*
 * Squared distance of pair (i, j) from its Gram entry g; recomputed from
 * the difference (and *exact set) when the expansion is close to the
 * cancellation zone.
 */
static inline double
pair_dist2(Pairwise *pw, int64_t i, int64_t j, double g, bool *exact)
{
	double		scale = pw->norm_u[i] + pw->norm_u[j];
	double		d2 = scale - 2.0 * g;

	*exact = d2 < pw->close2 || d2 < CLOSE_PAIR_REL2 * scale;
	if (*exact)
	{
		pw->recomputed++;
		d2 = cv_distance->l2_squared(pw->x + (size_t) i * pw->d,
									 pw->x + (size_t) j * pw->d, pw->d);
	}
	return d2;
}

/* cos(x_i, x_j): 0 with a zero member, 1 for identical members. */
static inline double
pair_cos(const Pairwise *pw, int64_t i, int64_t j, double g, double d2,
		 bool exact)
{
	double		dot;

	if (pw->norm_x[i] == 0.0 || pw->norm_x[j] == 0.0)
		return 0.0;
	if (d2 == 0.0)
		return 1.0;
	if (exact)
		dot = cv_distance->inner_product(pw->x + (size_t) i * pw->d,
										 pw->x + (size_t) j * pw->d, pw->d);
	else
		dot = g + (pw->centre_dot[i] + pw->centre_dot[j]) + pw->centre_sq;
	return dot / (pw->norm_x[i] * pw->norm_x[j]);
}

/* Histogram bin min(floor(v / w), bins - 1) of a value v >= 0. */
static inline int
bin_of(double v, double w, int bins)
{
	double		q = floor(v / w);

	if (!(q < (double) (bins - 1)))
		return bins - 1;
	return q > 0.0 ? (int) q : 0;
}

/* Pass 1 over the pairs (i, j), i in [i_lo, i_hi), of column j; g[i - i_lo]. */
static void
pass1_column(Pairwise *pw, Pass1 *acc, int64_t j, int64_t i_lo, int64_t i_hi,
			 const double *g)
{
	double		sum = 0.0;
	double		own[2] = {0.0, 0.0};	/* j's distances to side 0, 1 */
	int			side_j = acc->side != NULL ? (acc->side[j] != 0) : 0;
	int64_t		i;

	for (i = i_lo; i < i_hi; i++)
	{
		bool		exact;
		double		gij = g[i - i_lo];
		double		d2 = pair_dist2(pw, i, j, gij, &exact);
		double		dist = sqrt(d2);

		sum += dist;
		if (dist < acc->min)
			acc->min = dist;
		if (dist > acc->max)
			acc->max = dist;
		if (acc->sigma_hist != NULL)
			acc->sigma_hist[bin_of(dist, acc->sigma_width, acc->sigma_bins)]++;
		if (pair_cos(pw, i, j, gij, d2, exact) >= acc->dup_cos)
		{
			acc->dup_pairs++;
			acc->dup_member[i] = 1;
			acc->dup_member[j] = 1;
		}
		if (acc->side != NULL)
		{
			own[acc->side[i] != 0] += dist;
			acc->side_sum[2 * i + side_j] += dist;
		}
	}
	acc->sum += sum;
	if (acc->side != NULL)
	{
		acc->side_sum[2 * j] += own[0];
		acc->side_sum[2 * j + 1] += own[1];
	}
}

/* Pass 2 over the pairs (i, j), i in [i_lo, i_hi), of column j; g[i - i_lo]. */
static void
pass2_column(Pairwise *pw, Pass2 *acc, int64_t j, int64_t i_lo, int64_t i_hi,
			 const double *g)
{
	double		entangle = 0.0;
	int64_t		i;

	for (i = i_lo; i < i_hi; i++)
	{
		bool		exact;
		double		d2 = pair_dist2(pw, i, j, g[i - i_lo], &exact);
		double		dist = sqrt(d2);

		if (dist <= acc->half_sigma)
			acc->local_pairs++;
		if (acc->entropy_hist != NULL)
			acc->entropy_hist[bin_of(dist - acc->entropy_min, acc->entropy_width,
									 acc->entropy_bins)]++;
		if (acc->entangle)
			entangle += exp(-d2 / acc->two_sigma_sq);
	}
	acc->entangle_sum += entangle;
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
		if (pass == 1)
			pass1_column(pw, (Pass1 *) acc, j, i0, i_hi, g);
		else
			pass2_column(pw, (Pass2 *) acc, j, i0, i_hi, g);
	}
}

/* One pass over every pair i < j: I blocks, then J blocks from the diagonal. */
static void
run_pass(Pairwise *pw, int pass, void *acc)
{
	int			mr = pw->kern->mr;
	int			nr = pw->kern->nr;
	int64_t		i0;

	for (i0 = 0; i0 < pw->n - 1; i0 += pw->tile_i)
	{
		int			rows_i = (int) (pw->n - i0 < pw->tile_i ? pw->n - i0 : pw->tile_i);
		int			pad_i = (rows_i + mr - 1) / mr * mr;
		int64_t		j0;

		pack_rows(pw, i0, rows_i, mr, pad_i, pw->pack_i);
		for (j0 = i0 + 1; j0 < pw->n; j0 += TILE_J)
		{
			int			rows_j = (int) (pw->n - j0 < TILE_J ? pw->n - j0 : TILE_J);
			int			pad_j = (rows_j + nr - 1) / nr * nr;

			pack_rows(pw, j0, rows_j, nr, pad_j, pw->pack_j);
			gram_tile(pw, i0, pad_i, j0, rows_j);
			consume_tile(pw, pass, acc, i0, rows_i, j0, rows_j);
		}
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
	double	   *unit = calloc((size_t) pw->d, sizeof(double));
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
	free(unit);
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
		a = acc->side_sum[2 * i + own] / (double) (count[own] - 1);
		b = acc->side_sum[2 * i + 1 - own] / (double) count[1 - own];
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
	acc->side = out->collapsed ? NULL : side;
	acc->dup_member = calloc((size_t) pw->n, 1);
	acc->sigma_hist = want_hist ? calloc((size_t) acc->sigma_bins, sizeof(int64_t)) : NULL;
	acc->side_sum = acc->side != NULL ? calloc((size_t) pw->n * 2, sizeof(double)) : NULL;
	if (acc->dup_member == NULL || (want_hist && acc->sigma_hist == NULL)
		|| (acc->side != NULL && acc->side_sum == NULL))
		return false;

	run_pass(pw, 1, acc);

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
	acc.entropy_width = (p1->max - p1->min) / params->entropy_bins;
	acc.entangle = sigma > 0.0;
	acc.two_sigma_sq = 2.0 * sigma * sigma;
	if (p1->max > p1->min)
	{
		acc.entropy_hist = calloc((size_t) acc.entropy_bins, sizeof(int64_t));
		if (acc.entropy_hist == NULL)
			return false;
	}

	run_pass(pw, 2, &acc);

	cv_stat_set(out, CV_STAT_LOCAL_DENSITY, (double) acc.local_pairs / (double) pairs);
	cv_stat_set(out, CV_STAT_DIST_ENTROPY, acc.entropy_hist == NULL ? 0.0
				: entropy_of(acc.entropy_hist, acc.entropy_bins, pairs));
	if (acc.entangle)
		cv_stat_set(out, CV_STAT_ENTANGLEMENT, acc.entangle_sum / (double) pairs);
	else
		cv_stat_null(out, CV_STAT_ENTANGLEMENT);
	free(acc.entropy_hist);
	return true;
}

/* Frees pass 1's arrays. */
static void
pass1_free(Pass1 *acc)
{
	free(acc->dup_member);
	free(acc->sigma_hist);
	free(acc->side_sum);
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
	ok = pairwise_passes(&pw, side, params, sigma_override, out, profile);
	profile->recomputed = pw.recomputed;
	pairwise_free(&pw);
	if (!ok)
		null_all(out);
	return ok;
}

/* Section 3 of STATISTICS.md with the kernels clustervec.simd selects. */
void
cv_health_pairwise(const float *x, int64_t n, int d, const uint8_t *side,
				   const CvHealthParams *params, double sigma_override,
				   CvClusterStats *out)
{
	(void) cv_health_pairwise_with(current_kernels(), x, n, d, side, params,
								   sigma_override, out, NULL);
}
