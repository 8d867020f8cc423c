/*
 * test_health_pairwise.c: standalone unit test of cv_health_pairwise, the
 * tiled pairwise class of STATISTICS.md (section 3, ten columns).
 *
 * Every column is checked against a naive O(n^2 d) long double
 * implementation written straight from STATISTICS.md: every pair, its
 * difference, its cosine, histograms as defined.  Real values must agree
 * to 1e-9 relative (plus 1e-12 of the column's scale); threshold counts
 * (redundancy, redundant_members, local_density) and histogram bins
 * (sigma, dist_entropy) may differ only by items lying within 1e-9 of
 * their threshold or bin edge, a band far inside STATISTICS.md's 1e-5 (the
 * float64 reference should match the naive one exactly; any band use is
 * reported).  Every SIMD variant this CPU runs must equal the scalar one
 * bit for bit, on all 38 columns, and columns outside section 3 must come
 * back untouched.  Outputs are poisoned (NaN, NULL) before each call.
 *
 * Data: seeded random clusters (CV_TEST_SEED replays a run; the seed is
 * printed first), n in {1, 2, 3, 17, 300, 1000} x d in {1, 3, 64, 1024},
 * plus edge cases: identical members (collapsed), a zero member, all-zero
 * members, duplicates (the recompute path and cos = 1), a large shared
 * offset (centring), a collapsed cluster with noise, sigma overrides,
 * degenerate sides, extreme parameters.  Ends with "N passed, N failed".
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "health.h"
#include "health_pairwise_variants.h"

#define FIRST_COL CV_STAT_MEAN_PAIRWISE_DIST
#define N_COLS 10
#define REL_TOL 1e-9
#define ABS_TOL 1e-12
#define BAND 1e-9

static const int64_t sizes[] = {1, 2, 3, 17, 300, 1000};
static const int dims[] = {1, 3, 64, 1024};

static const char *const col_names[N_COLS] = {
	"mean_pairwise_dist", "sigma", "mean_pairwise_cos", "redundancy",
	"redundant_members", "breadth", "local_density", "dist_entropy",
	"entanglement", "split_silhouette"
};

typedef enum DataKind
{
	DATA_CLUSTERED,				/* offset + two blobs + noise */
	DATA_IDENTICAL,				/* every member equal: collapsed */
	DATA_ZERO_MEMBER,			/* clustered, member 1 zero */
	DATA_ALL_ZERO,				/* every member the zero vector */
	DATA_DUPLICATES,			/* clustered, about a third repeated */
	DATA_OFFSET,				/* 1000 + 1e-3 noise: centring matters */
	DATA_TINY_NOISE,			/* offset + 1e-9 relative noise: collapsed */
	DATA_PARALLEL				/* members 2^k x_0 and a few others */
} DataKind;

static const char *const kind_names[] = {
	"clustered", "identical", "zero-member", "all-zero", "duplicates",
	"offset", "tiny-noise", "parallel"
};

typedef enum SideKind
{
	SIDE_NEARER,				/* nearer of the first and last member */
	SIDE_ONE,					/* all on side 0: silhouette NULL */
	SIDE_ALONE,					/* member 0 alone on side 1 */
	SIDE_NULL					/* no side array */
} SideKind;

/* One test case. */
typedef struct Case
{
	int64_t		n;
	int			d;
	DataKind	kind;
	SideKind	side_kind;
	CvHealthParams params;
	double		sigma_override;	/* NaN: none */
	float	   *x;
	uint8_t    *side;
	CvClusterStats given;		/* what the centroid family would have set */
} Case;

/* The naive answers and what the band checks need. */
typedef struct Naive
{
	double		value[N_COLS];
	bool		is_null[N_COLS];
	int64_t		pairs;
	long double *dist;			/* pairs, i < j, row-major order */
	long double *dist2;
	long double *cosv;
	long double *norm;			/* n: ||x_i|| */
	long double min;
	long double max;
	double		len_scale;		/* mean pairwise distance, or 1 */
} Naive;

static uint64_t rng_state;
static int	n_passed;
static int	n_failed;
static int	n_band;				/* checks that needed the band */
static int	n_reported;
static bool verbose;			/* CV_TEST_VERBOSE: print values and band uses */

/* ---------------------------------------------------------------------
 * Random data
 * --------------------------------------------------------------------- */

/* splitmix64. */
static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double
rng_uniform(void)
{
	return ((double) (rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

/* Standard normal (Box-Muller). */
static double
rng_normal(void)
{
	return sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform());
}

/* The seed from CV_TEST_SEED, else from the clock. */
static uint64_t
choose_seed(void)
{
	const char *env = getenv("CV_TEST_SEED");
	struct timespec ts;

	if (env != NULL && *env != '\0')
		return strtoull(env, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000007ULL ^ (uint64_t) ts.tv_nsec;
}

/* malloc or exit. */
static void *
xmalloc(size_t bytes)
{
	void	   *p = malloc(bytes == 0 ? 1 : bytes);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* Offset of norm about offset_scale, two blobs 0.5 from it, noise of norm `noise`. */
static void
fill_clustered(float *x, int64_t n, int d, double offset_scale, double noise)
{
	double	   *blob = xmalloc(sizeof(double) * 2 * (size_t) d);
	double		s = 1.0 / sqrt((double) d);
	int64_t		i;
	int			k;

	for (k = 0; k < d; k++)
	{
		double		o = offset_scale * rng_normal() * s;

		blob[k] = o + 0.5 * rng_normal() * s;
		blob[d + k] = o + 0.5 * rng_normal() * s;
	}
	for (i = 0; i < n; i++)
	{
		const double *b = blob + (size_t) (rng_next() & 1) * d;

		for (k = 0; k < d; k++)
			x[(size_t) i * d + k] = (float) (b[k] + noise * rng_normal() * s);
	}
	free(blob);
}

/* Fills c->x for its kind. */
static void
make_data(Case *c)
{
	int64_t		n = c->n;
	int			d = c->d;
	float	   *x = xmalloc(sizeof(float) * (size_t) (n > 0 ? n : 1) * d);
	int64_t		i;
	int			k;

	c->x = x;
	switch (c->kind)
	{
		case DATA_CLUSTERED:
		case DATA_ZERO_MEMBER:
		case DATA_DUPLICATES:
			fill_clustered(x, n, d, 1.0, 0.5);
			if (c->kind == DATA_ZERO_MEMBER && n > 1)
				memset(x + d, 0, sizeof(float) * d);
			if (c->kind == DATA_DUPLICATES)
				for (i = 1; i < n; i++)
					if (rng_next() % 3 == 0)
						memcpy(x + (size_t) i * d,
							   x + (size_t) (rng_next() % i) * d, sizeof(float) * d);
			break;
		case DATA_IDENTICAL:
			fill_clustered(x, 1, d, 1.0, 0.4);
			for (i = 1; i < n; i++)
				memcpy(x + (size_t) i * d, x, sizeof(float) * d);
			break;
		case DATA_ALL_ZERO:
			memset(x, 0, sizeof(float) * (size_t) n * d);
			break;
		case DATA_OFFSET:
			for (i = 0; i < n; i++)
				for (k = 0; k < d; k++)
					x[(size_t) i * d + k] = (float) (1000.0 + (k % 7) + 1e-3 * rng_normal());
			break;
		case DATA_TINY_NOISE:
			for (i = 0; i < n; i++)
				for (k = 0; k < d; k++)
					x[(size_t) i * d + k] = (float) ((1.0 + 0.1 * (k % 5))
													 * (1.0 + 1e-9 * (double) (rng_next() % 3)));
			break;
		case DATA_PARALLEL:
			fill_clustered(x, n, d, 1.0, 0.4);
			for (i = 1; i < n; i += 2)
				for (k = 0; k < d; k++)
					x[(size_t) i * d + k] = x[k] * (float) (1 << (i % 5));
			break;
	}
}

/* ---------------------------------------------------------------------
 * What the earlier families would have set, and the sides
 * --------------------------------------------------------------------- */

/*
 * radius, mean_dist, mean_norm and collapsed as the centroid family
 * defines them (long double here), into c->given; everything else poisoned.
 */
static void
make_given(Case *c)
{
	CvClusterStats *g = &c->given;
	long double *centre = xmalloc(sizeof(long double) * (size_t) c->d);
	long double radius = 0;
	long double rsum = 0;
	long double nsum = 0;
	int64_t		i;
	int			k;
	int			col;

	for (col = 0; col < CV_STAT_COUNT; col++)
	{
		g->value[col] = NAN;
		g->is_null[col] = true;
	}
	g->collapsed = false;
	g->rank_refused = false;
	if (c->n < 1)
	{
		free(centre);
		return;
	}
	for (k = 0; k < c->d; k++)
	{
		long double s = 0;

		for (i = 0; i < c->n; i++)
			s += c->x[(size_t) i * c->d + k];
		centre[k] = s / c->n;
	}
	for (i = 0; i < c->n; i++)
	{
		long double r2 = 0;
		long double n2 = 0;

		for (k = 0; k < c->d; k++)
		{
			long double v = c->x[(size_t) i * c->d + k];

			r2 += (v - centre[k]) * (v - centre[k]);
			n2 += v * v;
		}
		if (sqrtl(r2) > radius)
			radius = sqrtl(r2);
		rsum += sqrtl(r2);
		nsum += sqrtl(n2);
	}
	cv_stat_set(g, CV_STAT_N, (double) c->n);
	cv_stat_set(g, CV_STAT_RADIUS, (double) radius);
	cv_stat_set(g, CV_STAT_MEAN_DIST, (double) (rsum / c->n));
	cv_stat_set(g, CV_STAT_MEAN_NORM, (double) (nsum / c->n));
	g->collapsed = radius <= CV_HEALTH_EPS * (nsum / c->n);
	free(centre);
}

/* The sides for c->side_kind (NULL for SIDE_NULL and n < 2). */
static void
make_side(Case *c)
{
	int64_t		i;

	c->side = NULL;
	if (c->side_kind == SIDE_NULL || c->n < 2)
		return;
	c->side = xmalloc((size_t) c->n);
	for (i = 0; i < c->n; i++)
	{
		const float *row = c->x + (size_t) i * c->d;
		const float *last = c->x + (size_t) (c->n - 1) * c->d;
		long double da = 0;
		long double db = 0;
		int			k;

		for (k = 0; k < c->d; k++)
		{
			da += ((long double) row[k] - c->x[k]) * ((long double) row[k] - c->x[k]);
			db += ((long double) row[k] - last[k]) * ((long double) row[k] - last[k]);
		}
		switch (c->side_kind)
		{
			case SIDE_ONE:
				c->side[i] = 0;
				break;
			case SIDE_ALONE:
				c->side[i] = i == 0;
				break;
			default:
				c->side[i] = db < da;
				break;
		}
	}
}

/* ---------------------------------------------------------------------
 * The naive reference, straight from STATISTICS.md
 * --------------------------------------------------------------------- */

/* Sets a naive column. */
static void
naive_set(Naive *nv, CvStat col, long double v)
{
	nv->value[col - FIRST_COL] = (double) v;
	nv->is_null[col - FIRST_COL] = false;
}

/* Marks a naive column NULL. */
static void
naive_null(Naive *nv, CvStat col)
{
	nv->value[col - FIRST_COL] = 0;
	nv->is_null[col - FIRST_COL] = true;
}

/* Every pair's distance and cosine (long double), in i < j order. */
static void
naive_pairs(const Case *c, Naive *nv)
{
	int			d = c->d;
	int64_t		p = 0;
	int64_t		i;
	int64_t		j;
	int			k;

	nv->norm = xmalloc(sizeof(long double) * (size_t) c->n);
	for (i = 0; i < c->n; i++)
	{
		long double s = 0;

		for (k = 0; k < d; k++)
			s += (long double) c->x[(size_t) i * d + k] * c->x[(size_t) i * d + k];
		nv->norm[i] = sqrtl(s);
	}
	nv->dist = xmalloc(sizeof(long double) * (size_t) nv->pairs);
	nv->dist2 = xmalloc(sizeof(long double) * (size_t) nv->pairs);
	nv->cosv = xmalloc(sizeof(long double) * (size_t) nv->pairs);
	for (i = 0; i < c->n; i++)
		for (j = i + 1; j < c->n; j++, p++)
		{
			const float *a = c->x + (size_t) i * d;
			const float *b = c->x + (size_t) j * d;
			long double s2 = 0;
			long double dot = 0;

			for (k = 0; k < d; k++)
			{
				long double diff = (long double) a[k] - (long double) b[k];

				s2 += diff * diff;
				dot += (long double) a[k] * (long double) b[k];
			}
			nv->dist2[p] = s2;
			nv->dist[p] = sqrtl(s2);
			nv->cosv[p] = (nv->norm[i] == 0 || nv->norm[j] == 0) ? 0
				: dot / (nv->norm[i] * nv->norm[j]);
		}
}

/* Bin min(floor(v / w), bins - 1). */
static int
naive_bin(long double v, long double w, int bins)
{
	long double q = floorl(v / w);

	return q >= bins - 1 ? bins - 1 : (int) q;
}

/* sigma from the histogram, as defined; 0 when radius = 0. */
static double
naive_sigma(const Case *c, const Naive *nv)
{
	int			bins = c->params.sigma_bins;
	long double w = 2.0L * c->given.value[CV_STAT_RADIUS] / bins;
	int64_t    *hist;
	int64_t		cum = 0;
	int64_t		p;
	int			b;
	double		sigma = 0;

	if (!(c->given.value[CV_STAT_RADIUS] > 0))
		return 0;
	hist = calloc((size_t) bins, sizeof(int64_t));
	for (p = 0; p < nv->pairs; p++)
		hist[naive_bin(nv->dist[p], w, bins)]++;
	for (b = 0; b < bins; b++)
	{
		cum += hist[b];
		if (2 * cum >= nv->pairs)
		{
			sigma = (double) ((b + 0.5L) * w);
			break;
		}
	}
	free(hist);
	return sigma;
}

/* Pass-1 columns other than sigma. */
static void
naive_pass1(const Case *c, Naive *nv)
{
	long double sum = 0;
	long double cos_sum = 0;
	int64_t		dup = 0;
	int64_t		flagged = 0;
	uint8_t    *flag = calloc((size_t) c->n, 1);
	int64_t		p = 0;
	int64_t		i;
	int64_t		j;

	nv->min = INFINITY;
	nv->max = -INFINITY;
	for (i = 0; i < c->n; i++)
		for (j = i + 1; j < c->n; j++, p++)
		{
			sum += nv->dist[p];
			cos_sum += nv->cosv[p];
			if (nv->dist[p] < nv->min)
				nv->min = nv->dist[p];
			if (nv->dist[p] > nv->max)
				nv->max = nv->dist[p];
			if (nv->cosv[p] >= c->params.dup_cos)
			{
				dup++;
				flag[i] = flag[j] = 1;
			}
		}
	for (i = 0; i < c->n; i++)
		flagged += flag[i];
	free(flag);
	naive_set(nv, CV_STAT_MEAN_PAIRWISE_DIST, sum / nv->pairs);
	naive_set(nv, CV_STAT_MEAN_PAIRWISE_COS, cos_sum / nv->pairs);
	naive_set(nv, CV_STAT_REDUNDANCY, (long double) dup / nv->pairs);
	naive_set(nv, CV_STAT_REDUNDANT_MEMBERS, (long double) flagged / c->n);
	naive_set(nv, CV_STAT_BREADTH, nv->max);
	nv->len_scale = sum / nv->pairs > 0 ? (double) (sum / nv->pairs) : 1.0;
}

/* Distance between members i and j from the pair arrays. */
static long double
naive_dist_of(const Naive *nv, int64_t n, int64_t i, int64_t j)
{
	int64_t		a = i < j ? i : j;
	int64_t		b = i < j ? j : i;

	return nv->dist[a * n - a * (a + 1) / 2 + (b - a - 1)];
}

/* split_silhouette with scikit-learn's convention. */
static void
naive_silhouette(const Case *c, Naive *nv)
{
	int64_t		count[2] = {0, 0};
	long double total = 0;
	int64_t		i;
	int64_t		j;

	if (c->side == NULL || c->given.collapsed)
	{
		naive_null(nv, CV_STAT_SPLIT_SILHOUETTE);
		return;
	}
	for (i = 0; i < c->n; i++)
		count[c->side[i] != 0]++;
	if (count[0] == 0 || count[1] == 0)
	{
		naive_null(nv, CV_STAT_SPLIT_SILHOUETTE);
		return;
	}
	for (i = 0; i < c->n; i++)
	{
		int			own = c->side[i] != 0;
		long double s[2] = {0, 0};
		long double a;
		long double b;
		long double m;

		if (count[own] == 1)
			continue;
		for (j = 0; j < c->n; j++)
			if (j != i)
				s[c->side[j] != 0] += naive_dist_of(nv, c->n, i, j);
		a = s[own] / (count[own] - 1);
		b = s[1 - own] / count[1 - own];
		m = a > b ? a : b;
		if (m > 0)
			total += (b - a) / m;
	}
	naive_set(nv, CV_STAT_SPLIT_SILHOUETTE, total / c->n);
}

/* Pass-2 columns at a given sigma. */
static void
naive_pass2(const Case *c, Naive *nv, double sigma)
{
	int			bins = c->params.entropy_bins;
	long double we = (nv->max - nv->min) / bins;
	int64_t    *hist = calloc((size_t) bins, sizeof(int64_t));
	int64_t		local = 0;
	long double ent = 0;
	long double h = 0;
	int64_t		p;
	int			b;

	if (c->given.collapsed)
	{
		naive_set(nv, CV_STAT_LOCAL_DENSITY, 1);
		naive_set(nv, CV_STAT_DIST_ENTROPY, 0);
		naive_null(nv, CV_STAT_ENTANGLEMENT);
		free(hist);
		return;
	}
	for (p = 0; p < nv->pairs; p++)
	{
		if (nv->dist[p] <= sigma / 2.0L)
			local++;
		if (nv->max > nv->min)
			hist[naive_bin(nv->dist[p] - nv->min, we, bins)]++;
		if (sigma > 0)
			ent += expl(-nv->dist2[p] / (2.0L * sigma * sigma));
	}
	for (b = 0; b < bins && nv->max > nv->min; b++)
		if (hist[b] > 0)
		{
			long double q = (long double) hist[b] / nv->pairs;

			h -= q * logl(q);
		}
	free(hist);
	naive_set(nv, CV_STAT_LOCAL_DENSITY, (long double) local / nv->pairs);
	naive_set(nv, CV_STAT_DIST_ENTROPY, nv->max > nv->min ? h / logl(bins) : 0);
	if (sigma > 0)
		naive_set(nv, CV_STAT_ENTANGLEMENT, ent / nv->pairs);
	else
		naive_null(nv, CV_STAT_ENTANGLEMENT);
}

/* Frees the naive arrays. */
static void
naive_free(Naive *nv)
{
	free(nv->dist);
	free(nv->dist2);
	free(nv->cosv);
	free(nv->norm);
}

/* ---------------------------------------------------------------------
 * Checks
 * --------------------------------------------------------------------- */

/* Records one check; prints the first failures in detail. */
static void
record(bool ok, const Case *c, const char *variant, const char *what,
	   double got, double want)
{
	if (ok)
	{
		n_passed++;
		return;
	}
	n_failed++;
	if (n_reported++ < 40)
		printf("FAIL n=%lld d=%d %s side=%d %s: %s got %.17g want %.17g\n",
			   (long long) c->n, c->d, kind_names[c->kind], (int) c->side_kind,
			   variant, what, got, want);
}

/* Real value within REL_TOL relative plus ABS_TOL of scale, NULL flags equal. */
static bool
close_enough(double got, bool got_null, double want, bool want_null,
			 double scale)
{
	if (got_null || want_null)
		return got_null == want_null;
	return isfinite(got) && fabs(got - want) <= REL_TOL * fabs(want) + ABS_TOL * scale;
}

/*
 * A count threshold check: items v (count when v >= thr, or v <= thr when
 * at_most) may be miscounted only inside the band around thr.
 */
static bool
count_within_band(int64_t got, const long double *v, int64_t items,
				  long double thr, bool at_most, double scale, bool *used_band)
{
	long double band = BAND * fmaxl(fabsl(thr), scale);
	int64_t		want = 0;
	int64_t		in_band_counted = 0;
	int64_t		in_band_not = 0;
	int64_t		p;

	for (p = 0; p < items; p++)
	{
		bool		counted = at_most ? v[p] <= thr : v[p] >= thr;
		bool		near = fabsl(v[p] - thr) <= band;

		want += counted;
		if (near && counted)
			in_band_counted++;
		else if (near)
			in_band_not++;
	}
	*used_band = got != want;
	if (verbose && got != want)
		printf("  band: got %lld want %lld (%lld counted and %lld not within the band)\n",
			   (long long) got, (long long) want, (long long) in_band_counted,
			   (long long) in_band_not);
	return got >= want - in_band_counted && got <= want + in_band_not;
}

/* Pairs lying within the band of any edge b * w + origin, b = 1 .. bins - 1. */
static int64_t
pairs_near_edges(const Naive *nv, long double origin, long double w, int bins)
{
	int64_t		near = 0;
	int64_t		p;

	for (p = 0; p < nv->pairs; p++)
	{
		long double q = (nv->dist[p] - origin) / w;
		long double edge = roundl(q);

		if (edge >= 1 && edge <= bins - 1
			&& fabsl(nv->dist[p] - origin - edge * w) <= BAND * fmaxl(w * bins, nv->len_scale))
			near++;
	}
	return near;
}

/* Fraction times denominator, as the count it must be. */
static int64_t
count_of(double fraction, int64_t denominator)
{
	return (int64_t) llround(fraction * (double) denominator);
}

/* redundant_members: per member, the largest cos with any partner. */
static long double *
member_max_cos(const Case *c, const Naive *nv)
{
	long double *m = xmalloc(sizeof(long double) * (size_t) c->n);
	int64_t		p = 0;
	int64_t		i;
	int64_t		j;

	for (i = 0; i < c->n; i++)
		m[i] = -INFINITY;
	for (i = 0; i < c->n; i++)
		for (j = i + 1; j < c->n; j++, p++)
		{
			if (nv->cosv[p] > m[i])
				m[i] = nv->cosv[p];
			if (nv->cosv[p] > m[j])
				m[j] = nv->cosv[p];
		}
	return m;
}

/*
 * sigma: equal to the naive one, or one bin off when some pair sits on a
 * bin edge (then the pass-2 checks run at ours, as STATISTICS.md's
 * tolerances do for the GPU).
 */
static void
check_sigma(const Case *c, const Naive *nv, const CvClusterStats *got,
			const char *variant, double *sigma_used)
{
	int			col = CV_STAT_SIGMA - FIRST_COL;
	double		want = nv->value[col];
	double		w = 2.0 * c->given.value[CV_STAT_RADIUS] / c->params.sigma_bins;
	bool		ok = close_enough(got->value[CV_STAT_SIGMA], got->is_null[CV_STAT_SIGMA],
								  want, nv->is_null[col], nv->len_scale);

	*sigma_used = want;
	if (!ok && !got->is_null[CV_STAT_SIGMA] && !nv->is_null[col]
		&& isnan(c->sigma_override) && !c->given.collapsed
		&& fabs(got->value[CV_STAT_SIGMA] - want) <= 1.001 * w
		&& pairs_near_edges(nv, 0, w, c->params.sigma_bins) > 0)
	{
		ok = true;
		n_band++;
		*sigma_used = got->value[CV_STAT_SIGMA];
	}
	record(ok, c, variant, "sigma", got->value[CV_STAT_SIGMA], want);
}

/* The three threshold counts. */
static void
check_counts(const Case *c, const Naive *nv, const CvClusterStats *got,
			 const char *variant, double sigma)
{
	long double *mc = member_max_cos(c, nv);
	bool		band;
	bool		ok;

	ok = !got->is_null[CV_STAT_REDUNDANCY]
		&& count_within_band(count_of(got->value[CV_STAT_REDUNDANCY], nv->pairs),
							 nv->cosv, nv->pairs, c->params.dup_cos, false, 1.0, &band);
	n_band += ok && band;
	record(ok, c, variant, "redundancy", got->value[CV_STAT_REDUNDANCY],
		   nv->value[CV_STAT_REDUNDANCY - FIRST_COL]);
	ok = !got->is_null[CV_STAT_REDUNDANT_MEMBERS]
		&& count_within_band(count_of(got->value[CV_STAT_REDUNDANT_MEMBERS], c->n),
							 mc, c->n, c->params.dup_cos, false, 1.0, &band);
	n_band += ok && band;
	record(ok, c, variant, "redundant_members", got->value[CV_STAT_REDUNDANT_MEMBERS],
		   nv->value[CV_STAT_REDUNDANT_MEMBERS - FIRST_COL]);
	if (c->given.collapsed)
		ok = got->value[CV_STAT_LOCAL_DENSITY] == 1.0 && !got->is_null[CV_STAT_LOCAL_DENSITY];
	else
	{
		ok = !got->is_null[CV_STAT_LOCAL_DENSITY]
			&& count_within_band(count_of(got->value[CV_STAT_LOCAL_DENSITY], nv->pairs),
								 nv->dist, nv->pairs, sigma / 2.0L, true,
								 nv->len_scale, &band);
		n_band += ok && band;
	}
	record(ok, c, variant, "local_density", got->value[CV_STAT_LOCAL_DENSITY],
		   nv->value[CV_STAT_LOCAL_DENSITY - FIRST_COL]);
	free(mc);
}

/*
 * dist_entropy: equal, or within what moving the pairs that sit on a bin
 * edge could change (each move changes sum c ln c by at most
 * 2 (ln P + 1)).
 */
static void
check_entropy(const Case *c, const Naive *nv, const CvClusterStats *got,
			  const char *variant)
{
	int			col = CV_STAT_DIST_ENTROPY - FIRST_COL;
	bool		ok = close_enough(got->value[CV_STAT_DIST_ENTROPY],
								  got->is_null[CV_STAT_DIST_ENTROPY],
								  nv->value[col], nv->is_null[col], 1.0);

	if (!ok && !got->is_null[CV_STAT_DIST_ENTROPY] && nv->max > nv->min)
	{
		int			bins = c->params.entropy_bins;
		int64_t		near = pairs_near_edges(nv, nv->min, (nv->max - nv->min) / bins, bins);
		double		slack = near * 2.0 * (log((double) nv->pairs) + 1.0)
			/ ((double) nv->pairs * log((double) bins));

		ok = near > 0 && fabs(got->value[CV_STAT_DIST_ENTROPY] - nv->value[col]) <= slack;
		n_band += ok;
	}
	record(ok, c, variant, "dist_entropy", got->value[CV_STAT_DIST_ENTROPY],
		   nv->value[col]);
}

/* The real-valued columns. */
static void
check_reals(const Naive *nv, const Case *c, const CvClusterStats *got,
			const char *variant)
{
	static const CvStat cols[] = {
		CV_STAT_MEAN_PAIRWISE_DIST, CV_STAT_BREADTH, CV_STAT_MEAN_PAIRWISE_COS,
		CV_STAT_ENTANGLEMENT, CV_STAT_SPLIT_SILHOUETTE
	};
	int			i;

	for (i = 0; i < (int) (sizeof(cols) / sizeof(cols[0])); i++)
	{
		int			k = cols[i] - FIRST_COL;
		double		scale = (cols[i] == CV_STAT_MEAN_PAIRWISE_DIST
							 || cols[i] == CV_STAT_BREADTH) ? nv->len_scale : 1.0;

		record(close_enough(got->value[cols[i]], got->is_null[cols[i]],
							nv->value[k], nv->is_null[k], scale),
			   c, variant, col_names[k], got->value[cols[i]], nv->value[k]);
	}
}

/* Columns outside section 3 must be exactly as given (poison included). */
static void
check_untouched(const Case *c, const CvClusterStats *got, const char *variant)
{
	bool		ok = got->collapsed == c->given.collapsed;
	int			col;

	for (col = 0; col < CV_STAT_COUNT; col++)
	{
		if (col >= FIRST_COL && col < FIRST_COL + N_COLS)
			continue;
		if (memcmp(&got->value[col], &c->given.value[col], sizeof(double)) != 0
			|| got->is_null[col] != c->given.is_null[col])
			ok = false;
	}
	record(ok, c, variant, "other columns untouched", 0, 0);
}

/* No NaN returned, no column left poisoned. */
static void
check_no_nan(const Case *c, const CvClusterStats *got, const char *variant)
{
	bool		ok = true;
	int			col;

	for (col = FIRST_COL; col < FIRST_COL + N_COLS; col++)
		if (!got->is_null[col] && !isfinite(got->value[col]))
			ok = false;
	record(ok, c, variant, "no NaN or infinity returned", 0, 0);
}

/* Every column bit for bit equal to the scalar variant's. */
static void
check_bitwise(const Case *c, const CvClusterStats *got, const CvClusterStats *ref,
			  const char *variant)
{
	bool		ok = got->collapsed == ref->collapsed;
	int			col;

	for (col = 0; col < CV_STAT_COUNT; col++)
		if (memcmp(&got->value[col], &ref->value[col], sizeof(double)) != 0
			|| got->is_null[col] != ref->is_null[col])
			ok = false;
	record(ok, c, variant, "bitwise equal to scalar", 0, 0);
}

/* ---------------------------------------------------------------------
 * Running a case
 * --------------------------------------------------------------------- */

/* Every check of one variant's output against the naive answers. */
static void
check_against_naive(const Case *c, Naive *nv, const CvClusterStats *got,
					const char *variant)
{
	double		sigma;
	int			col;

	check_untouched(c, got, variant);
	check_no_nan(c, got, variant);
	if (c->n < 2)
	{
		bool		ok = true;

		for (col = FIRST_COL; col < FIRST_COL + N_COLS; col++)
			ok = ok && got->is_null[col];
		record(ok, c, variant, "n < 2: all ten NULL", 0, 0);
		return;
	}
	if (!isnan(c->sigma_override) && !c->given.collapsed)
	{
		nv->value[CV_STAT_SIGMA - FIRST_COL] = c->sigma_override;
		nv->is_null[CV_STAT_SIGMA - FIRST_COL] = false;
	}
	check_sigma(c, nv, got, variant, &sigma);
	naive_pass2(c, nv, sigma);
	check_reals(nv, c, got, variant);
	check_counts(c, nv, got, variant, sigma);
	check_entropy(c, nv, got, variant);
}

/* Prints one run's ten columns beside the naive ones. */
static void
print_values(const CvClusterStats *got, const Naive *nv, const CvPairwiseProfile *prof)
{
	int			k;

	for (k = 0; k < N_COLS; k++)
		printf("    %-20s %-24.17g %.17g%s\n", col_names[k],
			   got->is_null[FIRST_COL + k] ? NAN : got->value[FIRST_COL + k],
			   nv->is_null[k] ? NAN : nv->value[k],
			   got->is_null[FIRST_COL + k] ? " (NULL)" : "");
	printf("    %lld distances recomputed\n", (long long) prof->recomputed);
}

/* Runs one variant on a poisoned copy of the given statistics. */
static CvClusterStats
run_variant(const Case *c, const CvPairwiseKernels *kern, CvPairwiseProfile *prof)
{
	CvClusterStats out = c->given;
	int			col;

	for (col = FIRST_COL; col < FIRST_COL + N_COLS; col++)
	{
		out.value[col] = NAN;
		out.is_null[col] = true;
	}
	if (!cv_health_pairwise_with(kern, c->x, c->n, c->d, c->side, &c->params,
								 c->sigma_override, &out, prof))
		record(false, c, kern->name, "ran out of memory", 0, 0);
	return out;
}

/* Builds the case's data, the naive answers, and checks every variant. */
static void
run_case(Case *c)
{
	static const CvSimdLevel levels[] = {CV_SIMD_SCALAR, CV_SIMD_AVX2, CV_SIMD_AVX512};
	CvClusterStats ref;
	Naive		nv;
	int			v;

	memset(&nv, 0, sizeof(nv));
	make_data(c);
	make_given(c);
	make_side(c);
	nv.pairs = c->n * (c->n - 1) / 2;
	nv.len_scale = 1.0;
	for (v = 0; v < N_COLS; v++)
		nv.is_null[v] = true;
	if (c->n >= 2)
	{
		naive_pairs(c, &nv);
		naive_pass1(c, &nv);
		naive_set(&nv, CV_STAT_SIGMA, c->given.collapsed ? 0 : naive_sigma(c, &nv));
		naive_silhouette(c, &nv);
	}
	for (v = 0; v < 3; v++)
	{
		const CvPairwiseKernels *kern = cv_pairwise_kernels_for(levels[v]);
		CvPairwiseProfile prof;
		CvClusterStats got;

		if (kern == NULL)
			continue;
		got = run_variant(c, kern, &prof);
		check_against_naive(c, &nv, &got, kern->name);
		if (verbose && v == 0)
			print_values(&got, &nv, &prof);
		if (v == 0)
			ref = got;
		else
			check_bitwise(c, &got, &ref, kern->name);
		if (c->kind == DATA_DUPLICATES && c->n > 2)
			record(prof.recomputed > 0, c, kern->name, "recompute path taken", 0, 0);
		if (c->kind == DATA_IDENTICAL && c->n >= 2)
			record(got.value[CV_STAT_REDUNDANCY] == 1.0
				   && got.value[CV_STAT_REDUNDANT_MEMBERS] == 1.0,
				   c, kern->name, "identical members: cos exactly 1",
				   got.value[CV_STAT_REDUNDANCY], 1.0);
	}
	/* the public entry point too (cv_distance's level) */
	{
		CvClusterStats got = c->given;

		cv_health_pairwise(c->x, c->n, c->d, c->side, &c->params, c->sigma_override, &got);
		check_bitwise(c, &got, &ref, "cv_health_pairwise");
	}
	naive_free(&nv);
	free(c->x);
	free(c->side);
}

/* A case with the default parameters. */
static Case
new_case(int64_t n, int d, DataKind kind)
{
	Case		c;

	memset(&c, 0, sizeof(c));
	c.n = n;
	c.d = d;
	c.kind = kind;
	c.side_kind = SIDE_NEARER;
	c.params.outlier_z = 2.0;
	c.params.dup_cos = 0.95;
	c.params.neighbours = 5;
	c.params.sigma_bins = 256;
	c.params.entropy_bins = 20;
	c.params.rank_max_members = 2000;
	c.sigma_override = NAN;
	return c;
}

/* Prints a group's outcome line. */
static void
group_done(const char *name, int passed_before, int failed_before)
{
	printf("%-58s %5d checks, %d failed\n", name,
		   n_passed - passed_before + n_failed - failed_before,
		   n_failed - failed_before);
	fflush(stdout);
}

/* The size grid on clustered data, with a mid dup_cos so counts are not 0. */
static void
run_grid(void)
{
	size_t		s;
	size_t		k;

	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (k = 0; k < sizeof(dims) / sizeof(dims[0]); k++)
		{
			Case		c = new_case(sizes[s], dims[k], DATA_CLUSTERED);
			int			p = n_passed;
			int			f = n_failed;
			char		name[80];

			c.params.dup_cos = 0.8;
			run_case(&c);
			snprintf(name, sizeof(name), "grid n=%lld d=%d", (long long) sizes[s], dims[k]);
			group_done(name, p, f);
		}
}

/* Runs one named edge case. */
static void
run_edge(const char *name, Case c)
{
	int			p = n_passed;
	int			f = n_failed;

	run_case(&c);
	group_done(name, p, f);
}

/* The edge cases. */
static void
run_edges(void)
{
	Case		c;

	run_edge("n = 0", new_case(0, 8, DATA_CLUSTERED));
	run_edge("identical members n=5 d=3 (collapsed)", new_case(5, 3, DATA_IDENTICAL));
	run_edge("identical members n=300 d=64 (collapsed)", new_case(300, 64, DATA_IDENTICAL));
	run_edge("zero member n=17 d=64", new_case(17, 64, DATA_ZERO_MEMBER));
	run_edge("zero member n=300 d=3", new_case(300, 3, DATA_ZERO_MEMBER));
	run_edge("all members zero n=4 d=8 (collapsed)", new_case(4, 8, DATA_ALL_ZERO));
	run_edge("n = 2, d = 1024", new_case(2, 1024, DATA_CLUSTERED));
	c = new_case(2, 5, DATA_IDENTICAL);
	run_edge("n = 2 identical", c);
	c = new_case(300, 64, DATA_DUPLICATES);
	run_edge("duplicates n=300 d=64", c);
	c = new_case(300, 64, DATA_DUPLICATES);
	c.params.dup_cos = 1.0;
	run_edge("duplicates n=300 d=64, dup_cos = 1", c);
	c = new_case(200, 1024, DATA_DUPLICATES);
	run_edge("duplicates n=200 d=1024", c);
	c = new_case(101, 16, DATA_PARALLEL);
	c.params.dup_cos = 1.0;
	run_edge("parallel members n=101 d=16, dup_cos = 1", c);
	run_edge("large shared offset n=300 d=64", new_case(300, 64, DATA_OFFSET));
	run_edge("large shared offset n=120 d=1024", new_case(120, 1024, DATA_OFFSET));
	run_edge("tiny noise n=50 d=32 (collapsed)", new_case(50, 32, DATA_TINY_NOISE));
	c = new_case(300, 64, DATA_CLUSTERED);
	c.sigma_override = 0.37;
	run_edge("sigma_override = 0.37", c);
	c = new_case(300, 64, DATA_CLUSTERED);
	c.sigma_override = 0.0;
	run_edge("sigma_override = 0", c);
	c = new_case(300, 64, DATA_IDENTICAL);
	c.params.dup_cos = 1.0;
	run_edge("identical members, dup_cos = 1 (redundancy exactly 1)", c);
	c = new_case(40, 64, DATA_IDENTICAL);
	c.sigma_override = 0.5;
	run_edge("sigma_override on a collapsed cluster", c);
	c = new_case(300, 64, DATA_CLUSTERED);
	c.side_kind = SIDE_ONE;
	run_edge("every member on one side (silhouette NULL)", c);
	c = new_case(300, 64, DATA_CLUSTERED);
	c.side_kind = SIDE_ALONE;
	run_edge("a member alone on its side", c);
	c = new_case(300, 64, DATA_CLUSTERED);
	c.side_kind = SIDE_NULL;
	run_edge("side = NULL with n >= 2 (silhouette NULL)", c);
	c = new_case(300, 64, DATA_CLUSTERED);
	c.params.sigma_bins = 2;
	c.params.entropy_bins = 2;
	c.params.dup_cos = 0.1;
	run_edge("sigma_bins = entropy_bins = 2, dup_cos = 0.1", c);
	c = new_case(500, 7, DATA_CLUSTERED);
	c.params.sigma_bins = 100000;
	c.params.entropy_bins = 1000;
	run_edge("sigma_bins = 100000, entropy_bins = 1000", c);
	c = new_case(777, 129, DATA_CLUSTERED);
	run_edge("n=777 d=129 (ragged tiles and chunks)", c);
}

/* Runs everything; exit status 1 on any failure. */
int
main(void)
{
	uint64_t	seed = choose_seed();
	CvSimdLevel level;

	printf("seed %llu (CV_TEST_SEED=%llu replays)\n", (unsigned long long) seed,
		   (unsigned long long) seed);
	rng_state = seed;
	verbose = getenv("CV_TEST_VERBOSE") != NULL;
	for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
		printf("variant %s: %s\n", level == CV_SIMD_SCALAR ? "scalar"
			   : level == CV_SIMD_AVX2 ? "avx2" : "avx512",
			   cv_pairwise_kernels_for(level) != NULL ? "tested" : "skipped (CPU)");
	cv_simd_use(cv_simd_best());
	run_grid();
	run_edges();
	printf("%d checks needed the 1e-9 band (bin edges, thresholds)\n", n_band);
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
