/*
 * test_health_linear.c: standalone test of the linear-class statistics
 * modules (health_centroid.c, health_twomeans.c, health_potential.c and the
 * names of health_names.c) against a naive long double implementation
 * written straight from STATISTICS.md.
 *
 * Every call runs on poisoned stats: each column holds NaN and is NULL, so
 * a column the module owns but did not write is caught, and so is a column
 * it wrote but does not own.  Seeded random clusters (plain, sharing a
 * large offset, mixed magnitudes) and the edge cases n = 1, n = 2,
 * identical members, a zero member and all members zero.  Set CV_TEST_SEED
 * to replay a run; the seed is printed first.
 *
 * When health_centroid.c and health_twomeans.c are compiled with
 * -Dmalloc=cv_test_malloc (health_linear.mk does), the scratch-free path of
 * the centroid family is checked bit for bit against the normal one, and
 * two-means is checked to fail safe.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "math/health.h"

#define EPS ((long double) CV_HEALTH_EPS)
#define REL_TOL 1e-9L			/* float64 algorithms against long double */
#define SHAPE_TOL 1e-7L			/* skew, kurtosis: Welford against two-pass */
/*
 * Threshold and tie band: STATISTICS.md allows 1e-5 for float32 kernels; a
 * float64 implementation against long double is held to much less.
 */
#define BAND 1e-10L
#define MAX_REPORTED 8
#define MAX_CLUSTERS 5

/* Which degeneracy outcome a quantity has against its scale. */
typedef enum ZeroClass
{
	IS_ZERO,					/* at most 0.1 eps of its scale */
	NOT_ZERO,					/* above 10 eps of its scale */
	EITHER						/* the band where either outcome is accepted */
} ZeroClass;

/* What one cluster should give: value, NULL flag and an accepted range. */
typedef struct Expected
{
	long double value[CV_STAT_COUNT];
	long double lo[CV_STAT_COUNT];	/* when ranged: accepted interval */
	long double hi[CV_STAT_COUNT];
	long double scale[CV_STAT_COUNT];	/* the tolerance's absolute scale */
	bool		is_null[CV_STAT_COUNT];
	bool		ranged[CV_STAT_COUNT];
	bool		skip[CV_STAT_COUNT];	/* borderline: any written value */
	bool		collapsed;
	bool		collapsed_either;
	bool		split_exempt;	/* a near tie in the reference two-means */
} Expected;

/* A labelled set: clusters stored one after another, d floats per row. */
typedef struct Dataset
{
	const char *name;
	int			d;
	int			k;
	int64_t		n[MAX_CLUSTERS];
	float	   *x[MAX_CLUSTERS];
} Dataset;

/* Pass/fail state of one check group (one output line). */
typedef struct Group
{
	char		name[96];
	int			checks;
	int			failures;
} Group;

static uint64_t rng_state;
static int	groups_passed;
static int	groups_failed;
static int	exempt_splits;
static int	borderline_skips;

static bool malloc_fails;
static int	malloc_hook_calls;

void	   *cv_test_malloc(size_t size);

/* The modules' malloc when built with -Dmalloc=cv_test_malloc. */
void *
cv_test_malloc(size_t size)
{
	malloc_hook_calls++;
	return malloc_fails ? NULL : malloc(size);
}

/* splitmix64: tiny, seedable, good enough for test data. */
static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform double in [lo, hi). */
static double
rng_uniform(double lo, double hi)
{
	return lo + (hi - lo) * ((double) (rng_next() >> 11) / 9007199254740992.0);
}

/* Standard normal (Box-Muller). */
static double
rng_normal(void)
{
	double		u = rng_uniform(1e-300, 1.0);
	double		v = rng_uniform(0.0, 1.0);

	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
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

/* malloc that exits on failure: the test's own memory. */
static void *
xmalloc(size_t size)
{
	void	   *p = malloc(size > 0 ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* ---------------------------------------------------------------------
 * Checking
 */

/* Starts a group. */
static void
group_begin(Group *g, const char *what, const char *dataset, int cluster)
{
	snprintf(g->name, sizeof(g->name), "%s %s #%d", what, dataset, cluster);
	g->checks = 0;
	g->failures = 0;
}

/* Ends a group and prints its line. */
static void
group_end(Group *g)
{
	if (g->failures == 0)
		groups_passed++;
	else
		groups_failed++;
	printf("%-4s %-52s %d checks, %d failed\n",
		   g->failures == 0 ? "ok" : "FAIL", g->name, g->checks, g->failures);
}

/* Records one check; prints the first failures of a group. */
static void
check(Group *g, bool ok, const char *what, double got, long double want)
{
	g->checks++;
	if (ok)
		return;
	g->failures++;
	if (g->failures <= MAX_REPORTED)
		printf("  FAIL %s: %s got=%.17g want=%.17Lg\n", g->name, what, got, want);
}

/* Classifies v against "counts as 0 when v <= eps * scale". */
static ZeroClass
zero_class(long double v, long double scale)
{
	if (v <= 0.1L * EPS * scale)
		return IS_ZERO;
	if (v > 10.0L * EPS * scale)
		return NOT_ZERO;
	return EITHER;
}

/* Fills every column with NaN and NULL, so unwritten columns stay detectable. */
static void
poison(CvClusterStats *s)
{
	int			c;

	for (c = 0; c < CV_STAT_COUNT; c++)
	{
		s->value[c] = NAN;
		s->is_null[c] = true;
	}
}

/* Re-poisons columns [first, last] only. */
static void
poison_columns(CvClusterStats *s, CvStat first, CvStat last)
{
	int			c;

	for (c = first; c <= (int) last; c++)
	{
		s->value[c] = NAN;
		s->is_null[c] = true;
	}
}

/* Compares one column with its expectation. */
static void
check_column(Group *g, const CvClusterStats *s, const Expected *e, CvStat c, long double tol)
{
	char		what[80];
	double		got = s->value[c];
	long double want = e->value[c];
	bool		ok;

	snprintf(what, sizeof(what), "%s%s", cv_stat_names[c], s->is_null[c] ? " (NULL)" : "");
	if (isnan(got))
		ok = false;				/* unwritten */
	else if (e->skip[c])
	{
		borderline_skips++;
		ok = true;
	}
	else if (e->is_null[c] || s->is_null[c])
		ok = e->is_null[c] == s->is_null[c];
	else if (e->ranged[c])
	{
		ok = got >= e->lo[c] - 1e-12L && got <= e->hi[c] + 1e-12L;
		want = e->value[c];
	}
	else
		ok = fabsl((long double) got - want) <= tol * fabsl(want) + tol * e->scale[c];
	check(g, ok, what, got, e->is_null[c] ? NAN : want);
}

/* Checks that the columns outside [first, last] are still poisoned. */
static void
check_untouched(Group *g, const CvClusterStats *s, const CvClusterStats *before,
				CvStat first, CvStat last)
{
	int			c;
	bool		ok = true;

	for (c = 0; c < CV_STAT_COUNT; c++)
	{
		if (c >= (int) first && c <= (int) last)
			continue;
		if (memcmp(&s->value[c], &before->value[c], sizeof(double)) != 0
			|| s->is_null[c] != before->is_null[c])
			ok = false;
	}
	check(g, ok, "columns of other modules untouched", 0, 0);
}

/* ---------------------------------------------------------------------
 * Reference: section 1, straight from STATISTICS.md in long double
 */

/* c = (1/n) sum x_i. */
static void
ref_centroid(const float *x, int64_t n, int d, long double *c)
{
	int64_t		i;
	int			j;

	for (j = 0; j < d; j++)
		c[j] = 0;
	for (i = 0; i < n; i++)
		for (j = 0; j < d; j++)
			c[j] += x[i * d + j];
	for (j = 0; j < d; j++)
		c[j] /= n;
}

/* ||x - c||. */
static long double
ref_dist(const float *x, const long double *c, int d)
{
	long double s = 0;
	int			j;

	for (j = 0; j < d; j++)
		s += (x[j] - c[j]) * (x[j] - c[j]);
	return sqrtl(s);
}

/* ||v|| of a long double vector. */
static long double
ref_norm(const long double *v, int d)
{
	long double s = 0;
	int			j;

	for (j = 0; j < d; j++)
		s += v[j] * v[j];
	return sqrtl(s);
}

/* ||x|| of a float row. */
static long double
ref_row_norm(const float *x, int d)
{
	long double s = 0;
	int			j;

	for (j = 0; j < d; j++)
		s += (long double) x[j] * x[j];
	return sqrtl(s);
}

/* Counts r_i against a threshold with the contract's band: [clear, clear + band]. */
static void
ref_count(const long double *r, int64_t n, long double thr, long double scale,
		  int direction, long double *lo, long double *hi)
{
	long double band = BAND * fmaxl(fabsl(thr), scale);
	int64_t		i;

	*lo = *hi = 0;
	for (i = 0; i < n; i++)
	{
		/* direction 1: r > thr (or >=); -1: r <= thr */
		long double v = direction > 0 ? r[i] - thr : thr - r[i];

		if (v > band)
			*lo += 1, *hi += 1;
		else if (v >= -band)
			*hi += 1;
	}
}

/* mean_norm, norm_cv, embedding_quality. */
static void
ref_norm_columns(const float *x, int64_t n, int d, Expected *e)
{
	long double mean = 0,
				var = 0,
				m = 0;
	long double *u = xmalloc(sizeof(long double) * d);
	int64_t		i;
	int			j;

	for (j = 0; j < d; j++)
		u[j] = 0;
	for (i = 0; i < n; i++)
	{
		long double norm = ref_row_norm(x + i * d, d);

		mean += norm;
		if (norm > 0)
		{
			m += 1;
			for (j = 0; j < d; j++)
				u[j] += x[i * d + j] / norm;
		}
	}
	mean /= n;
	for (i = 0; i < n; i++)
		var += (ref_row_norm(x + i * d, d) - mean) * (ref_row_norm(x + i * d, d) - mean);
	var /= n;
	e->value[CV_STAT_MEAN_NORM] = mean;
	e->is_null[CV_STAT_NORM_CV] = mean == 0;
	e->value[CV_STAT_NORM_CV] = mean > 0 ? sqrtl(var) / mean : 0;
	e->is_null[CV_STAT_EMBEDDING_QUALITY] = m == 0;
	e->value[CV_STAT_EMBEDDING_QUALITY] = m > 0 ? ref_norm(u, d) / m : 0;
	free(u);
}

/* skew and kurtosis from two-pass central moments of r. */
static void
ref_shape(const long double *r, int64_t n, long double mu, bool degenerate, bool either,
		  Expected *e)
{
	long double m2 = 0,
				m3 = 0,
				m4 = 0;
	int64_t		i;

	for (i = 0; i < n; i++)
	{
		long double t = r[i] - mu;

		m2 += t * t;
		m3 += t * t * t;
		m4 += t * t * t * t;
	}
	m2 /= n;
	m3 /= n;
	m4 /= n;
	e->is_null[CV_STAT_SKEW] = e->is_null[CV_STAT_KURTOSIS] = degenerate || m2 == 0;
	e->skip[CV_STAT_SKEW] = e->skip[CV_STAT_KURTOSIS] = either;
	e->value[CV_STAT_SKEW] = m2 > 0 ? m3 / powl(m2, 1.5L) : 0;
	e->value[CV_STAT_KURTOSIS] = m2 > 0 ? m4 / (m2 * m2) - 3 : 0;
}

/* outlier_ratio and core_periphery_ratio with their bands. */
static void
ref_thresholds(const long double *r, int64_t n, long double mu, long double s, double z,
			   ZeroClass flat, ZeroClass collapsed, long double scale, Expected *e)
{
	long double out_lo,
				out_hi,
				core_lo,
				core_hi,
				per_lo,
				per_hi;

	ref_count(r, n, mu + z * s, scale, 1, &out_lo, &out_hi);
	ref_count(r, n, mu - s, scale, -1, &core_lo, &core_hi);
	ref_count(r, n, mu + s, scale, 1, &per_lo, &per_hi);
	e->ranged[CV_STAT_OUTLIER_RATIO] = e->ranged[CV_STAT_CORE_PERIPHERY_RATIO] = true;
	e->skip[CV_STAT_OUTLIER_RATIO] = flat == EITHER;
	e->skip[CV_STAT_CORE_PERIPHERY_RATIO] = flat == EITHER || collapsed == EITHER
		|| (flat == NOT_ZERO && collapsed == NOT_ZERO && per_lo == 0 && per_hi > 0);
	if (flat == IS_ZERO)
		out_lo = out_hi = 0;
	e->lo[CV_STAT_OUTLIER_RATIO] = out_lo / n;
	e->hi[CV_STAT_OUTLIER_RATIO] = out_hi / n;
	e->value[CV_STAT_OUTLIER_RATIO] = out_lo / n;
	if (flat == IS_ZERO || collapsed == IS_ZERO)
	{
		e->lo[CV_STAT_CORE_PERIPHERY_RATIO] = e->hi[CV_STAT_CORE_PERIPHERY_RATIO] = 1;
		e->value[CV_STAT_CORE_PERIPHERY_RATIO] = 1;
		return;
	}
	e->is_null[CV_STAT_CORE_PERIPHERY_RATIO] = per_hi == 0;
	if (per_lo > 0)
	{
		e->lo[CV_STAT_CORE_PERIPHERY_RATIO] = core_lo / per_hi;
		e->hi[CV_STAT_CORE_PERIPHERY_RATIO] = core_hi / per_lo;
		e->value[CV_STAT_CORE_PERIPHERY_RATIO] = core_lo / per_lo;
	}
}

/* Sets the tolerance scales of section 1, 2 and 4 columns. */
static void
ref_scales(Expected *e, int64_t n)
{
	long double mn = e->value[CV_STAT_MEAN_NORM];
	int			c;

	for (c = 0; c < CV_STAT_COUNT; c++)
		e->scale[c] = 1;
	e->scale[CV_STAT_CENTROID_NORM] = e->scale[CV_STAT_MEAN_DIST] = mn;
	e->scale[CV_STAT_SPREAD] = e->scale[CV_STAT_RADIUS] = mn;
	e->scale[CV_STAT_MEAN_NORM] = mn;
	e->scale[CV_STAT_INERTIA] = e->scale[CV_STAT_BETWEEN_SS] = n * mn * mn;
	e->scale[CV_STAT_SKEW] = e->scale[CV_STAT_KURTOSIS] = 10;
}

/* Every section-1 column but novelty and between_ss; c receives the centroid. */
static void
ref_section1(const float *x, int64_t n, int d, double z, long double *c, Expected *e)
{
	long double *r = xmalloc(sizeof(long double) * n);
	long double mu = 0,
				s = 0,
				radius = 0,
				inertia = 0,
				cos_sum = 0,
				c_norm,
				mn;
	ZeroClass	collapsed,
				flat,
				c_zero;
	int64_t		i;

	memset(e, 0, sizeof(*e));
	ref_centroid(x, n, d, c);
	c_norm = ref_norm(c, d);
	ref_norm_columns(x, n, d, e);
	mn = e->value[CV_STAT_MEAN_NORM];
	for (i = 0; i < n; i++)
	{
		long double xn = ref_row_norm(x + i * d, d);
		long double dot = 0;
		int			j;

		r[i] = ref_dist(x + i * d, c, d);
		mu += r[i];
		inertia += r[i] * r[i];
		radius = fmaxl(radius, r[i]);
		for (j = 0; j < d; j++)
			dot += x[i * d + j] * c[j];
		if (xn > 0 && c_norm > 0)
			cos_sum += dot / (xn * c_norm);
	}
	mu /= n;
	for (i = 0; i < n; i++)
		s += (r[i] - mu) * (r[i] - mu);
	s = sqrtl(s / n);
	collapsed = zero_class(radius, mn);
	flat = zero_class(s, mu);
	c_zero = zero_class(c_norm, mn);
	e->collapsed = collapsed == IS_ZERO;
	e->collapsed_either = collapsed == EITHER;
	e->value[CV_STAT_N] = n;
	e->value[CV_STAT_CENTROID_NORM] = c_norm;
	e->value[CV_STAT_INERTIA] = inertia;
	e->value[CV_STAT_MEAN_DIST] = mu;
	e->value[CV_STAT_SPREAD] = s;
	e->value[CV_STAT_RADIUS] = radius;
	ref_shape(r, n, mu, flat == IS_ZERO || collapsed == IS_ZERO,
			  flat == EITHER || collapsed == EITHER, e);
	e->is_null[CV_STAT_COHESION] = c_zero == IS_ZERO;
	e->skip[CV_STAT_COHESION] = c_zero == EITHER;
	e->value[CV_STAT_COHESION] = cos_sum / n;
	ref_thresholds(r, n, mu, s, z, flat, collapsed, mn, e);
	ref_scales(e, n);
	free(r);
}

/* ---------------------------------------------------------------------
 * Reference: section 2 (three Lloyd iterations in long double)
 */

/* Squared distance of a row to a long double centre. */
static long double
ref_dist_sq(const float *x, const long double *c, int d)
{
	long double s = 0;
	int			j;

	for (j = 0; j < d; j++)
		s += (x[j] - c[j]) * (x[j] - c[j]);
	return s;
}

/* One Lloyd iteration: assign (tie: a), then move non-empty sides; notes near ties. */
static void
ref_lloyd_step(const float *x, int64_t n, int d, long double *a, long double *b,
			   uint8_t *side, int64_t *count_a, bool *near_tie)
{
	long double *sa = calloc(d, sizeof(long double));
	long double *sb = calloc(d, sizeof(long double));
	int64_t		na = 0,
				nb = 0,
				i;
	int			j;
	bool		same = true;

	for (j = 0; j < d; j++)
		same &= a[j] == b[j];
	for (i = 0; i < n; i++)
	{
		long double da = sqrtl(ref_dist_sq(x + i * d, a, d));
		long double db = sqrtl(ref_dist_sq(x + i * d, b, d));

		/* equal centres tie every member exactly, in float64 as here */
		if (fabsl(da - db) <= BAND * fmaxl(da, db) && !same)
			*near_tie = true;
		side[i] = db < da;
		for (j = 0; j < d; j++)
			(side[i] ? sb : sa)[j] += x[i * d + j];
		if (side[i])
			nb++;
		else
			na++;
	}
	for (j = 0; j < d; j++)
	{
		if (na > 0)
			a[j] = sa[j] / na;
		if (nb > 0)
			b[j] = sb[j] / nb;
	}
	*count_a = na;
	free(sa);
	free(sb);
}

/* split_gain, split_balance, split_separation and the sides; e holds section 1. */
static void
ref_section2(const float *x, int64_t n, int d, Expected *e, uint8_t *side)
{
	long double *a = xmalloc(sizeof(long double) * d);
	long double *b = xmalloc(sizeof(long double) * d);
	long double inertia2 = 0,
				sep = 0;
	int64_t		count_a = 0,
				i;
	int			j,
				it;
	bool		near_tie = false;
	bool		none = n < 2 || e->collapsed;

	for (j = 0; j < d; j++)
	{
		a[j] = x[j];
		b[j] = x[(n - 1) * d + j];
	}
	for (it = 0; it < 3; it++)
		ref_lloyd_step(x, n, d, a, b, side, &count_a, &near_tie);
	for (i = 0; i < n; i++)
		inertia2 += ref_dist_sq(x + i * d, side[i] ? b : a, d);
	for (j = 0; j < d; j++)
		sep += (a[j] - b[j]) * (a[j] - b[j]);
	e->split_exempt = near_tie && n >= 2;
	e->is_null[CV_STAT_SPLIT_GAIN] = none || e->value[CV_STAT_INERTIA] == 0;
	e->is_null[CV_STAT_SPLIT_BALANCE] = none;
	e->is_null[CV_STAT_SPLIT_SEPARATION] = none || e->value[CV_STAT_MEAN_DIST] == 0;
	if (!e->is_null[CV_STAT_SPLIT_GAIN])
		e->value[CV_STAT_SPLIT_GAIN] = 1 - inertia2 / e->value[CV_STAT_INERTIA];
	e->value[CV_STAT_SPLIT_BALANCE] = (long double) (count_a < n - count_a ? count_a : n - count_a) / n;
	if (!e->is_null[CV_STAT_SPLIT_SEPARATION])
		e->value[CV_STAT_SPLIT_SEPARATION] = sqrtl(sep) / e->value[CV_STAT_MEAN_DIST];
	free(a);
	free(b);
}

/* ---------------------------------------------------------------------
 * Reference: section 4
 */

/* potential_depth, curvature, escape_probability at the given sigma and D. */
static void
ref_section4(const float *x, int64_t n, int d, const long double *c, long double sigma,
			 bool sigma_null, long double dist, bool dist_null, int k, Expected *e)
{
	long double depth = 0,
				curv = 0;
	bool		none = sigma_null || sigma == 0 || e->collapsed;
	int64_t		i;

	for (i = 0; i < n && !none; i++)
	{
		long double r2 = ref_dist_sq(x + i * d, c, d);
		long double ei = expl(-r2 / (2 * sigma * sigma));

		depth += ei;
		curv += ei * (r2 / (d * sigma * sigma) - 1);
	}
	e->is_null[CV_STAT_POTENTIAL_DEPTH] = e->is_null[CV_STAT_CURVATURE] = none;
	e->is_null[CV_STAT_ESCAPE_PROBABILITY] = none || k == 1 || dist_null;
	e->value[CV_STAT_POTENTIAL_DEPTH] = none ? 0 : depth / n;
	e->value[CV_STAT_CURVATURE] = none ? 0 : curv / n;
	e->value[CV_STAT_ESCAPE_PROBABILITY] =
		e->is_null[CV_STAT_ESCAPE_PROBABILITY] ? 0 : expl(-dist * dist / (8 * sigma * sigma));
}

/* ---------------------------------------------------------------------
 * Data
 */

typedef enum DataKind
{
	DATA_PLAIN,					/* centre U(-1, 1), noise N(0, 0.3) */
	DATA_OFFSET,				/* every cluster near 1000: centroid cancellation */
	DATA_MIXED,					/* elements scaled by 10^U(-3, 3) per dimension */
	DATA_SPLIT,					/* two well separated blobs per cluster */
	DATA_KIND_COUNT
} DataKind;

static const char *const data_names[DATA_KIND_COUNT] = {"plain", "offset", "mixed", "split"};

/* One random cluster of the kind. */
static float *
random_cluster(DataKind kind, int64_t n, int d, const double *dim_scale)
{
	float	   *x = xmalloc(sizeof(float) * n * d);
	double	   *centre = xmalloc(sizeof(double) * d);
	double	   *other = xmalloc(sizeof(double) * d);
	int64_t		i;
	int			j;

	for (j = 0; j < d; j++)
	{
		centre[j] = rng_uniform(-1, 1) + (kind == DATA_OFFSET ? 100.0 : 0.0);
		other[j] = centre[j] + rng_uniform(-3, 3);
	}
	for (i = 0; i < n; i++)
	{
		bool		second = kind == DATA_SPLIT && rng_next() % 3 == 0;

		for (j = 0; j < d; j++)
		{
			double		noise = rng_normal() * (kind == DATA_OFFSET ? 0.01 : 0.3);

			double		v = (second ? other[j] : centre[j]) + noise;

			x[i * d + j] = (float) (v * dim_scale[j]);
		}
	}
	free(centre);
	free(other);
	return x;
}

/* A random dataset of k clusters. */
static Dataset
random_dataset(DataKind kind, int k, int d, int64_t max_n)
{
	Dataset		ds;
	double	   *dim_scale = xmalloc(sizeof(double) * d);
	int			c,
				j;

	ds.name = data_names[kind];
	ds.d = d;
	ds.k = k;
	for (j = 0; j < d; j++)
		dim_scale[j] = kind == DATA_MIXED ? pow(10.0, rng_uniform(-3, 3)) : 1.0;
	for (c = 0; c < k; c++)
	{
		ds.n[c] = 1 + (int64_t) (rng_next() % (uint64_t) max_n);
		ds.x[c] = random_cluster(kind, ds.n[c], d, dim_scale);
	}
	free(dim_scale);
	return ds;
}

/* Frees a dataset's clusters. */
static void
free_dataset(Dataset *ds)
{
	int			c;

	for (c = 0; c < ds->k; c++)
		free(ds->x[c]);
}

/* ---------------------------------------------------------------------
 * Running the modules
 */

/* Everything computed for one cluster. */
typedef struct ClusterRun
{
	CvClusterStats stats;
	Expected	expected;
	double	   *centroid;
	long double *ref_c;
	uint8_t    *side;
	uint8_t    *ref_side;
} ClusterRun;

/* Section 1 first pass on poisoned stats, checked against the reference. */
static void
run_centroid(const Dataset *ds, int c, const CvHealthParams *p, ClusterRun *run)
{
	const float *x = ds->x[c];
	int64_t		n = ds->n[c];
	CvClusterStats before;
	Group		g;
	int			col,
				j;

	group_begin(&g, "centroid", ds->name, c);
	poison(&run->stats);
	run->stats.collapsed = rng_next() % 2;
	before = run->stats;
	for (j = 0; j < ds->d; j++)
		run->centroid[j] = NAN;
	cv_health_centroid(x, n, ds->d, p, run->centroid, &run->stats);
	ref_section1(x, n, ds->d, p->outlier_z, run->ref_c, &run->expected);
	for (col = CV_STAT_N; col <= CV_STAT_EMBEDDING_QUALITY; col++)
		check_column(&g, &run->stats, &run->expected, col,
					 col == CV_STAT_SKEW || col == CV_STAT_KURTOSIS ? SHAPE_TOL : REL_TOL);
	check_untouched(&g, &run->stats, &before, CV_STAT_N, CV_STAT_EMBEDDING_QUALITY);
	if (!run->expected.collapsed_either)
		check(&g, run->stats.collapsed == run->expected.collapsed, "collapsed",
			  run->stats.collapsed, run->expected.collapsed);
	else
	{
		/* inside the band either outcome is right; later sections follow it */
		borderline_skips++;
		run->expected.collapsed = run->stats.collapsed;
	}
	for (j = 0; j < ds->d; j++)
		check(&g, fabsl(run->centroid[j] - run->ref_c[j])
			  <= REL_TOL * (fabsl(run->ref_c[j]) + run->expected.value[CV_STAT_MEAN_NORM]),
			  "centroid element", run->centroid[j], run->ref_c[j]);
	group_end(&g);
}

/* The no-scratch path (malloc failing) must give the same bits as the normal one. */
static void
run_centroid_fallback(const Dataset *ds, int c, const CvHealthParams *p, const ClusterRun *run)
{
	CvClusterStats s;
	double	   *centroid = xmalloc(sizeof(double) * ds->d);
	Group		g;
	int			col;

	group_begin(&g, "centroid without scratch", ds->name, c);
	poison(&s);
	malloc_hook_calls = 0;
	malloc_fails = true;
	cv_health_centroid(ds->x[c], ds->n[c], ds->d, p, centroid, &s);
	malloc_fails = false;
	check(&g, malloc_hook_calls > 0, "malloc hook reached", malloc_hook_calls, 1);
	for (col = CV_STAT_N; col <= CV_STAT_EMBEDDING_QUALITY; col++)
		check(&g, memcmp(&s.value[col], &run->stats.value[col], sizeof(double)) == 0
			  && s.is_null[col] == run->stats.is_null[col],
			  cv_stat_names[col], s.value[col], run->stats.value[col]);
	check(&g, memcmp(centroid, run->centroid, sizeof(double) * ds->d) == 0,
		  "centroid bits", 0, 0);
	check(&g, s.collapsed == run->stats.collapsed, "collapsed", s.collapsed, run->stats.collapsed);
	free(centroid);
	group_end(&g);
}

/* Global centroid and mean norm against the plain mean of all rows. */
static void
run_global(const Dataset *ds, ClusterRun *runs, double *global, double *global_mean_norm)
{
	double	   *cents = xmalloc(sizeof(double) * ds->k * ds->d);
	int64_t		ns[MAX_CLUSTERS];
	double		mus[MAX_CLUSTERS],
				mns[MAX_CLUSTERS];
	long double *ref_g = calloc(ds->d, sizeof(long double));
	long double total = 0,
				norm_sum = 0;
	CvCentroidSet set;
	Group		g;
	int64_t		i;
	int			c,
				j;

	group_begin(&g, "global", ds->name, 0);
	for (c = 0; c < ds->k; c++)
	{
		memcpy(cents + c * ds->d, runs[c].centroid, sizeof(double) * ds->d);
		ns[c] = ds->n[c];
		mus[c] = runs[c].stats.value[CV_STAT_MEAN_DIST];
		mns[c] = runs[c].stats.value[CV_STAT_MEAN_NORM];
		for (i = 0; i < ds->n[c]; i++)
		{
			for (j = 0; j < ds->d; j++)
				ref_g[j] += ds->x[c][i * ds->d + j];
			norm_sum += ref_row_norm(ds->x[c] + i * ds->d, ds->d);
		}
		total += ds->n[c];
	}
	set.k = ds->k;
	set.d = ds->d;
	set.centroids = cents;
	set.n = ns;
	set.mean_dist = mus;
	set.mean_norm = mns;
	for (j = 0; j < ds->d; j++)
		global[j] = NAN;
	cv_health_global_centroid(&set, global);
	*global_mean_norm = cv_health_global_mean_norm(&set);
	check(&g, fabsl(*global_mean_norm - norm_sum / total) <= REL_TOL * norm_sum / total,
		  "global mean norm", *global_mean_norm, norm_sum / total);
	for (j = 0; j < ds->d; j++)
		check(&g, fabsl(global[j] - ref_g[j] / total)
			  <= REL_TOL * (fabsl(ref_g[j] / total) + norm_sum / total),
			  "global element", global[j], ref_g[j] / total);
	free(cents);
	free(ref_g);
	group_end(&g);
}

/* novelty and between_ss of one cluster. */
static void
run_finish(const Dataset *ds, int c, const double *global, double global_mean_norm,
		   ClusterRun *run)
{
	Expected   *e = &run->expected;
	CvClusterStats before;
	long double ref_g_norm = 0,
				dot = 0,
				dist = 0,
				c_norm = e->value[CV_STAT_CENTROID_NORM];
	ZeroClass	cz = zero_class(c_norm, e->value[CV_STAT_MEAN_NORM]);
	ZeroClass	gz;
	Group		g;
	int			j;

	group_begin(&g, "finish", ds->name, c);
	/* the reference g is the implementation's (checked above), read in long double */
	for (j = 0; j < ds->d; j++)
	{
		ref_g_norm += (long double) global[j] * global[j];
		dot += run->ref_c[j] * global[j];
		dist += (run->ref_c[j] - global[j]) * (run->ref_c[j] - global[j]);
	}
	ref_g_norm = sqrtl(ref_g_norm);
	gz = zero_class(ref_g_norm, global_mean_norm);
	e->is_null[CV_STAT_NOVELTY] = cz == IS_ZERO || gz == IS_ZERO;
	e->skip[CV_STAT_NOVELTY] = cz == EITHER || gz == EITHER;
	if (!e->is_null[CV_STAT_NOVELTY])
		e->value[CV_STAT_NOVELTY] = 1 - fminl(1, dot / (c_norm * ref_g_norm));
	e->value[CV_STAT_BETWEEN_SS] = ds->n[c] * dist;
	poison_columns(&run->stats, CV_STAT_NOVELTY, CV_STAT_BETWEEN_SS);
	before = run->stats;
	cv_health_finish_centroid(run->centroid, global, global_mean_norm, ds->d, &run->stats);
	check_column(&g, &run->stats, e, CV_STAT_NOVELTY, REL_TOL);
	check_column(&g, &run->stats, e, CV_STAT_BETWEEN_SS, REL_TOL);
	check_untouched(&g, &run->stats, &before, CV_STAT_NOVELTY, CV_STAT_BETWEEN_SS);
	group_end(&g);
}

/* Two-means of one cluster on poisoned columns and a poisoned side array. */
static void
run_two_means(const Dataset *ds, int c, ClusterRun *run)
{
	int64_t		n = ds->n[c];
	CvClusterStats before;
	Group		g;
	int64_t		i;
	int			col;
	bool		sides_ok = true;

	group_begin(&g, "two-means", ds->name, c);
	ref_section2(ds->x[c], n, ds->d, &run->expected, run->ref_side);
	poison_columns(&run->stats, CV_STAT_SPLIT_GAIN, CV_STAT_SPLIT_SEPARATION);
	before = run->stats;
	memset(run->side, 0xAA, n);
	cv_health_two_means(ds->x[c], n, ds->d, run->side, &run->stats);
	for (i = 0; i < n; i++)
		sides_ok &= run->side[i] <= 1;
	check(&g, sides_ok, "side written, 0 or 1", 0, 0);
	if (run->expected.split_exempt)
	{
		exempt_splits++;
		for (col = CV_STAT_SPLIT_GAIN; col <= CV_STAT_SPLIT_SEPARATION; col++)
			check(&g, !isnan(run->stats.value[col]), "written (exempt)", run->stats.value[col], 0);
	}
	else
	{
		check(&g, memcmp(run->side, run->ref_side, n) == 0, "sides equal the reference", 0, 0);
		for (col = CV_STAT_SPLIT_GAIN; col <= CV_STAT_SPLIT_SEPARATION; col++)
			check_column(&g, &run->stats, &run->expected, col, REL_TOL);
	}
	check_untouched(&g, &run->stats, &before, CV_STAT_SPLIT_GAIN, CV_STAT_SPLIT_SEPARATION);
	group_end(&g);
}

/* Two-means with malloc failing: NULL columns and a defined side array. */
static void
run_two_means_fallback(const Dataset *ds, int c)
{
	CvClusterStats s;
	uint8_t    *side = xmalloc(ds->n[c]);
	Group		g;
	int64_t		i;
	bool		sides_ok = true;

	group_begin(&g, "two-means without scratch", ds->name, c);
	poison(&s);
	s.collapsed = false;
	cv_stat_set(&s, CV_STAT_INERTIA, 1);
	cv_stat_set(&s, CV_STAT_MEAN_DIST, 1);
	memset(side, 0xAA, ds->n[c]);
	malloc_fails = true;
	cv_health_two_means(ds->x[c], ds->n[c], ds->d, side, &s);
	malloc_fails = false;
	for (i = 0; i < ds->n[c]; i++)
		sides_ok &= side[i] <= 1;
	check(&g, sides_ok, "side defined", 0, 0);
	check(&g, s.is_null[CV_STAT_SPLIT_GAIN] && !isnan(s.value[CV_STAT_SPLIT_GAIN]),
		  "split_gain NULL", s.value[CV_STAT_SPLIT_GAIN], 0);
	free(side);
	group_end(&g);
}

/* Gaussian potential at a chosen sigma and nearest_dist. */
static void
run_potential(const Dataset *ds, int c, int sigma_mode, ClusterRun *run)
{
	int64_t		n = ds->n[c];
	long double mu = run->expected.value[CV_STAT_MEAN_DIST];
	long double mn = run->expected.value[CV_STAT_MEAN_NORM];
	double		sigma = sigma_mode == 1 ? 0.0 : (double) (mu + mn) * rng_uniform(0.2, 2.0);
	double		dist = (double) mn * rng_uniform(0.1, 3.0);
	bool		sigma_null = sigma_mode == 2;
	/* k = 1 alone must NULL escape_probability, even beside a stray nearest_dist */
	bool		dist_null = ds->k == 1 && rng_next() % 2 == 0;
	CvClusterStats before;
	Group		g;
	int			col;
	char		what[64];

	snprintf(what, sizeof(what), "potential/%s", sigma_mode == 0 ? "sigma" :
			 sigma_mode == 1 ? "sigma=0" : "sigma NULL");
	group_begin(&g, what, ds->name, c);
	if (sigma_mode == 0 && sigma == 0)
		sigma = 1;
	ref_section4(ds->x[c], n, ds->d, run->ref_c, sigma, sigma_null, dist, dist_null, ds->k,
				 &run->expected);
	if (sigma_null)
		cv_stat_null(&run->stats, CV_STAT_SIGMA);
	else
		cv_stat_set(&run->stats, CV_STAT_SIGMA, sigma);
	if (dist_null)
		cv_stat_null(&run->stats, CV_STAT_NEAREST_DIST);
	else
		cv_stat_set(&run->stats, CV_STAT_NEAREST_DIST, dist);
	poison_columns(&run->stats, CV_STAT_POTENTIAL_DEPTH, CV_STAT_ESCAPE_PROBABILITY);
	before = run->stats;
	cv_health_potential(ds->x[c], n, ds->d, run->centroid, ds->k, &run->stats);
	for (col = CV_STAT_POTENTIAL_DEPTH; col <= CV_STAT_ESCAPE_PROBABILITY; col++)
		check_column(&g, &run->stats, &run->expected, col, REL_TOL);
	check_untouched(&g, &run->stats, &before, CV_STAT_POTENTIAL_DEPTH,
					CV_STAT_ESCAPE_PROBABILITY);
	group_end(&g);
}

/* Runs every module over a dataset, in the call order of health.h. */
static void
run_dataset(const Dataset *ds, const CvHealthParams *p, bool hooked)
{
	ClusterRun	runs[MAX_CLUSTERS];
	double	   *global = xmalloc(sizeof(double) * ds->d);
	double		global_mean_norm;
	int			c;

	for (c = 0; c < ds->k; c++)
	{
		runs[c].centroid = xmalloc(sizeof(double) * ds->d);
		runs[c].ref_c = xmalloc(sizeof(long double) * ds->d);
		runs[c].side = xmalloc(ds->n[c]);
		runs[c].ref_side = xmalloc(ds->n[c]);
		run_centroid(ds, c, p, &runs[c]);
		if (hooked)
			run_centroid_fallback(ds, c, p, &runs[c]);
	}
	run_global(ds, runs, global, &global_mean_norm);
	for (c = 0; c < ds->k; c++)
	{
		run_finish(ds, c, global, global_mean_norm, &runs[c]);
		run_two_means(ds, c, &runs[c]);
		if (hooked && ds->n[c] >= 2)
			run_two_means_fallback(ds, c);
		run_potential(ds, c, (int) (rng_next() % 8 == 0 ? 1 + rng_next() % 2 : 0), &runs[c]);
		free(runs[c].centroid);
		free(runs[c].ref_c);
		free(runs[c].side);
		free(runs[c].ref_side);
	}
	free(global);
}

/* ---------------------------------------------------------------------
 * Edge cases
 */

/* A dataset from explicit rows: k clusters of the given sizes, rows in order. */
static Dataset
explicit_dataset(const char *name, const float *rows, int k, const int64_t *n, int d)
{
	Dataset		ds;
	int			c;

	ds.name = name;
	ds.d = d;
	ds.k = k;
	for (c = 0; c < k; c++)
	{
		ds.n[c] = n[c];
		ds.x[c] = xmalloc(sizeof(float) * n[c] * d);
		memcpy(ds.x[c], rows, sizeof(float) * n[c] * d);
		rows += n[c] * d;
	}
	return ds;
}

/* Identical members: c equal to them bit for bit, and the collapsed special values. */
static void
test_identical(const CvHealthParams *p)
{
	int			d = 37;
	int64_t		n = 101,
				i;
	float	   *rows = xmalloc(sizeof(float) * n * d);
	double	   *c = xmalloc(sizeof(double) * d);
	uint8_t    *side = xmalloc(n);
	CvClusterStats s;
	Group		g;
	int			j;

	group_begin(&g, "identical members", "exact", 0);
	for (j = 0; j < d; j++)
		rows[j] = (float) (rng_uniform(-1, 1) * pow(10.0, rng_uniform(-3, 3)));
	for (i = 1; i < n; i++)
		memcpy(rows + i * d, rows, sizeof(float) * d);
	poison(&s);
	cv_health_centroid(rows, n, d, p, c, &s);
	for (j = 0; j < d; j++)
		check(&g, c[j] == (double) rows[j], "centroid bit for bit", c[j], rows[j]);
	check(&g, s.collapsed, "collapsed", s.collapsed, 1);
	check(&g, s.value[CV_STAT_RADIUS] == 0 && s.value[CV_STAT_INERTIA] == 0,
		  "radius and inertia exactly 0", s.value[CV_STAT_RADIUS], 0);
	check(&g, s.is_null[CV_STAT_SKEW] && s.is_null[CV_STAT_KURTOSIS], "skew, kurtosis NULL", 0, 0);
	check(&g, s.value[CV_STAT_OUTLIER_RATIO] == 0, "outlier_ratio 0",
		  s.value[CV_STAT_OUTLIER_RATIO], 0);
	check(&g, !s.is_null[CV_STAT_CORE_PERIPHERY_RATIO] && s.value[CV_STAT_CORE_PERIPHERY_RATIO] == 1,
		  "core_periphery_ratio 1", s.value[CV_STAT_CORE_PERIPHERY_RATIO], 1);
	check(&g, fabs(s.value[CV_STAT_COHESION] - 1) < 1e-12, "cohesion 1", s.value[CV_STAT_COHESION], 1);
	check(&g, fabs(s.value[CV_STAT_EMBEDDING_QUALITY] - 1) < 1e-12 && s.value[CV_STAT_EMBEDDING_QUALITY] <= 1,
		  "embedding_quality 1", s.value[CV_STAT_EMBEDDING_QUALITY], 1);
	cv_health_two_means(rows, n, d, side, &s);
	for (j = CV_STAT_SPLIT_GAIN; j <= CV_STAT_SPLIT_SEPARATION; j++)
		check(&g, s.is_null[j], "split NULL when collapsed", s.value[j], 0);
	cv_stat_set(&s, CV_STAT_SIGMA, 0.5);	/* even with a sigma: collapsed wins */
	cv_stat_set(&s, CV_STAT_NEAREST_DIST, 1);
	cv_health_potential(rows, n, d, c, 2, &s);
	for (j = CV_STAT_POTENTIAL_DEPTH; j <= CV_STAT_ESCAPE_PROBABILITY; j++)
		check(&g, s.is_null[j], "potential NULL when collapsed", s.value[j], 0);
	group_end(&g);
	free(rows);
	free(c);
	free(side);
}

/* All-identical rows over several clusters: g equal to them bit for bit. */
static void
test_identical_global(void)
{
	int			d = 9,
				j;
	double		cents[3 * 9];
	int64_t		ns[3] = {7, 1, 1000};
	double		zeros[3] = {0, 0, 0};
	double		g[9];
	CvCentroidSet set = {3, 9, cents, ns, zeros, zeros};
	Group		gr;

	group_begin(&gr, "identical global", "exact", 0);
	for (j = 0; j < d; j++)
		cents[j] = cents[d + j] = cents[2 * d + j] = (float) rng_uniform(-5, 5);
	cv_health_global_centroid(&set, g);
	for (j = 0; j < d; j++)
		check(&gr, g[j] == cents[j], "g bit for bit", g[j], cents[j]);
	group_end(&gr);
}

/* n = 2 distinct members: r_1 = r_2, so s counts as 0; the split is exact. */
static void
test_two(const CvHealthParams *p)
{
	float		rows[2 * 5];
	double		c[5];
	uint8_t		side[2];
	CvClusterStats s;
	Group		g;
	int			j;

	group_begin(&g, "n = 2", "exact", 0);
	for (j = 0; j < 10; j++)
		rows[j] = (float) rng_uniform(-1, 1);
	poison(&s);
	cv_health_centroid(rows, 2, 5, p, c, &s);
	check(&g, s.is_null[CV_STAT_SKEW], "skew NULL (s counts as 0)", s.value[CV_STAT_SKEW], 0);
	check(&g, s.value[CV_STAT_OUTLIER_RATIO] == 0, "outlier_ratio 0", s.value[CV_STAT_OUTLIER_RATIO], 0);
	check(&g, s.value[CV_STAT_CORE_PERIPHERY_RATIO] == 1, "core_periphery_ratio 1",
		  s.value[CV_STAT_CORE_PERIPHERY_RATIO], 1);
	poison_columns(&s, CV_STAT_SPLIT_GAIN, CV_STAT_SPLIT_SEPARATION);
	cv_health_two_means(rows, 2, 5, side, &s);
	check(&g, side[0] == 0 && side[1] == 1, "sides 0, 1", side[1], 1);
	check(&g, s.value[CV_STAT_SPLIT_GAIN] == 1, "split_gain 1", s.value[CV_STAT_SPLIT_GAIN], 1);
	check(&g, s.value[CV_STAT_SPLIT_BALANCE] == 0.5, "split_balance 0.5",
		  s.value[CV_STAT_SPLIT_BALANCE], 0.5);
	check(&g, fabs(s.value[CV_STAT_SPLIT_SEPARATION] - 2) < 1e-12, "split_separation 2",
		  s.value[CV_STAT_SPLIT_SEPARATION], 2);
	group_end(&g);
}

/* n = 1: collapsed, split columns NULL, side[0] = 0. */
static void
test_one(const CvHealthParams *p)
{
	float		row[4] = {1, -2, 3, 0.5f};
	double		c[4];
	uint8_t		side = 0xAA;
	CvClusterStats s;
	Group		g;
	int			j;

	group_begin(&g, "n = 1", "exact", 0);
	poison(&s);
	cv_health_centroid(row, 1, 4, p, c, &s);
	for (j = 0; j < 4; j++)
		check(&g, c[j] == row[j], "centroid = x_1", c[j], row[j]);
	check(&g, s.collapsed && s.value[CV_STAT_N] == 1, "collapsed, n = 1", s.value[CV_STAT_N], 1);
	check(&g, s.value[CV_STAT_NORM_CV] == 0 && !s.is_null[CV_STAT_NORM_CV], "norm_cv 0",
		  s.value[CV_STAT_NORM_CV], 0);
	cv_health_two_means(row, 1, 4, &side, &s);
	check(&g, side == 0, "side 0", side, 0);
	for (j = CV_STAT_SPLIT_GAIN; j <= CV_STAT_SPLIT_SEPARATION; j++)
		check(&g, s.is_null[j] && !isnan(s.value[j]), "split NULL", s.value[j], 0);
	group_end(&g);
}

/* All members zero: nothing has a direction or a scale. */
static void
test_all_zero(const CvHealthParams *p)
{
	float		rows[6 * 3] = {0};
	double		c[3];
	double		g0[3] = {0, 0, 0};
	CvClusterStats s;
	Group		g;

	group_begin(&g, "all members zero", "exact", 0);
	poison(&s);
	cv_health_centroid(rows, 6, 3, p, c, &s);
	check(&g, s.collapsed, "collapsed", s.collapsed, 1);
	check(&g, s.value[CV_STAT_MEAN_NORM] == 0, "mean_norm 0", s.value[CV_STAT_MEAN_NORM], 0);
	check(&g, s.is_null[CV_STAT_NORM_CV], "norm_cv NULL", s.value[CV_STAT_NORM_CV], 0);
	check(&g, s.is_null[CV_STAT_EMBEDDING_QUALITY], "embedding_quality NULL", 0, 0);
	check(&g, s.is_null[CV_STAT_COHESION], "cohesion NULL", 0, 0);
	check(&g, s.value[CV_STAT_CORE_PERIPHERY_RATIO] == 1, "core_periphery_ratio 1",
		  s.value[CV_STAT_CORE_PERIPHERY_RATIO], 1);
	cv_health_finish_centroid(c, g0, 0, 3, &s);
	check(&g, s.is_null[CV_STAT_NOVELTY], "novelty NULL", 0, 0);
	check(&g, s.value[CV_STAT_BETWEEN_SS] == 0 && !s.is_null[CV_STAT_BETWEEN_SS], "between_ss 0",
		  s.value[CV_STAT_BETWEEN_SS], 0);
	group_end(&g);
}

/* The names of the columns, as STATISTICS.md spells them, in its order. */
static void
test_names(void)
{
	static const char *const want[CV_STAT_COUNT] = {
		"n", "centroid_norm", "inertia", "mean_dist", "spread", "skew", "kurtosis",
		"radius", "cohesion", "outlier_ratio", "core_periphery_ratio", "mean_norm",
		"norm_cv", "embedding_quality", "novelty", "between_ss", "split_gain",
		"split_balance", "split_separation", "mean_pairwise_dist", "sigma",
		"mean_pairwise_cos", "redundancy", "redundant_members", "breadth",
		"local_density", "dist_entropy", "entanglement", "split_silhouette",
		"potential_depth", "curvature", "escape_probability", "nearest_cluster",
		"nearest_dist", "db_ratio", "neighbour_relevance", "centroid_silhouette",
		"effective_rank"
	};
	Group		g;
	int			c;

	group_begin(&g, "column names", "static", 0);
	for (c = 0; c < CV_STAT_COUNT; c++)
		check(&g, cv_stat_names[c] != NULL && strcmp(cv_stat_names[c], want[c]) == 0,
			  want[c], c, c);
	group_end(&g);
}

/* Explicit small datasets through the full reference comparison. */
static void
test_explicit(const CvHealthParams *p, bool hooked)
{
	/* a zero member among others: cohesion counts it as 0, quality skips it */
	static const float with_zero[5 * 3] = {1, 2, 3, 0, 0, 0, 2, 1, 0, -1, 4, 2, 3, 3, 3};
	static const int64_t with_zero_n[1] = {5};
	/* x_1 = x_n: both seeds equal, every member ties, b stays empty for a round */
	static const float same_ends[4 * 2] = {0, 0, 4, 0, 5, 1, 0, 0};
	static const int64_t same_ends_n[1] = {4};
	/* radius 2/3 ulp of 1000: collapsed, yet s is far from 0 against mu */
	static const float tight[4 * 2] = {1000, 7, 1000, 7, 1000.00006103515625f, 7, 1000, 7};
	static const int64_t tight_n[1] = {4};
	/* two mirrored clusters: g = 0, so novelty is NULL everywhere */
	static const float mirrored[6 * 2] = {1, 2, 1.5f, 2, 1, 2.5f, -1, -2, -1.5f, -2, -1, -2.5f};
	static const int64_t mirrored_n[2] = {3, 3};
	/* c of about 1e-7 against mean_norm 2.2: counts as 0, so no cohesion */
	static const float opposed[2 * 2] = {1, 2, -1, -2.00000024f};
	static const int64_t opposed_n[1] = {2};
	Dataset		ds;

	ds = explicit_dataset("centroid near 0", opposed, 1, opposed_n, 2);
	run_dataset(&ds, p, hooked);
	free_dataset(&ds);
	ds = explicit_dataset("zero member", with_zero, 1, with_zero_n, 3);
	run_dataset(&ds, p, hooked);
	free_dataset(&ds);
	ds = explicit_dataset("equal ends", same_ends, 1, same_ends_n, 2);
	run_dataset(&ds, p, hooked);
	free_dataset(&ds);
	ds = explicit_dataset("collapsed, s not 0", tight, 1, tight_n, 2);
	run_dataset(&ds, p, hooked);
	free_dataset(&ds);
	ds = explicit_dataset("mirrored", mirrored, 2, mirrored_n, 2);
	run_dataset(&ds, p, hooked);
	free_dataset(&ds);
}

/* Seeded random datasets of every kind over a range of shapes. */
static void
test_random(const CvHealthParams *p, bool hooked)
{
	static const int dims[] = {1, 2, 3, 17, 64, 301};
	static const int64_t max_ns[] = {3, 40, 600};
	int			kind,
				di,
				ni;

	for (kind = 0; kind < DATA_KIND_COUNT; kind++)
		for (di = 0; di < (int) (sizeof(dims) / sizeof(dims[0])); di++)
			for (ni = 0; ni < (int) (sizeof(max_ns) / sizeof(max_ns[0])); ni++)
			{
				int			k = 1 + (int) (rng_next() % MAX_CLUSTERS);
				Dataset		ds = random_dataset((DataKind) kind, k, dims[di], max_ns[ni]);

				run_dataset(&ds, p, hooked);
				free_dataset(&ds);
			}
}

/* Whether the modules' malloc goes through cv_test_malloc in this build. */
static bool
malloc_hooked(const CvHealthParams *p)
{
	float		row[2] = {1, 2};
	double		c[2];
	CvClusterStats s;

	malloc_hook_calls = 0;
	cv_health_centroid(row, 1, 2, p, c, &s);
	return malloc_hook_calls > 0;
}

int
main(void)
{
	uint64_t	seed = choose_seed();
	CvHealthParams p = {2.0, 0.95, 5, 256, 20, 2000};
	bool		hooked;

	rng_state = seed;
	printf("seed %llu (set CV_TEST_SEED=%llu to replay)\n",
		   (unsigned long long) seed, (unsigned long long) seed);
	hooked = malloc_hooked(&p);
	if (!hooked)
		printf("skip scratch-free paths: build the modules with -Dmalloc=cv_test_malloc\n");
	test_names();
	test_one(&p);
	test_two(&p);
	test_identical(&p);
	test_identical_global();
	test_all_zero(&p);
	test_explicit(&p, hooked);
	p.outlier_z = 1.0;
	test_random(&p, hooked);
	printf("%d two-means clusters exempt (near tie), %d borderline columns skipped\n",
		   exempt_splits, borderline_skips);
	printf("%d passed, %d failed\n", groups_passed, groups_failed);
	return groups_failed == 0 ? 0 : 1;
}
