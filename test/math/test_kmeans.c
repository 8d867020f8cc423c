/*
 * test_kmeans.c: standalone unit test of prng.h, nearest.h and kmeans.h.
 *
 * Data come from a splitmix64 stream seeded by CV_TEST_SEED (else the
 * clock); the seed is printed first so any run can be replayed.  Outputs
 * are poisoned (NaN, -1) before each call so an unwritten entry fails.
 * SIMD variants this CPU cannot run are reported as skipped.
 *
 * The blocked assignment is compared with a brute-force float64 argmin
 * (cv_distance, lowest index on ties) with no tolerance at all: nearest.c
 * certifies its float32 winners with a rounding-error bound and rescans
 * genuine near-ties in float64, so even near-ties must agree exactly.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "kmeans.h"
#include "nearest.h"
#include "nearest_variants.h"
#include "prng.h"

#define MAX_REPORTED 5

static const char *const level_names[] = {"scalar", "avx2", "avx512"};

/* Pass/fail state of one check group (one output line). */
typedef struct Group
{
	const char *name;
	const char *variant;
	int			checks;
	int			failures;
} Group;

/* An allocator that fails its fail_at-th call and counts live blocks. */
typedef struct FailingAllocator
{
	int			fail_at;		/* -1: never */
	int			calls;
	int			live;
} FailingAllocator;

static uint64_t rng_state;
static int	groups_passed;
static int	groups_failed;
static int	groups_skipped;

/* ------------------------------------------------------------------ */
/* Harness                                                             */
/* ------------------------------------------------------------------ */

/* splitmix64: test data independent of the PRNG under test. */
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

/* Uniform integer in [0, n) (the tiny modulo bias does not matter here). */
static int
rng_below(int n)
{
	return (int) (rng_next() % (uint64_t) n);
}

/* Standard normal deviate (Box-Muller). */
static double
rng_gauss(void)
{
	double		u = rng_uniform(1e-300, 1.0);

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * rng_uniform(0.0, 1.0));
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

/* malloc or exit: a test machine out of memory is not a test failure. */
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

/* A fresh group. */
static Group
new_group(const char *variant, const char *name)
{
	Group		g = {name, variant, 0, 0};

	return g;
}

/* Records one check, printing the first few failures with a message. */
static void
check(Group *g, int ok, const char *fmt,...)
{
	va_list		ap;

	g->checks++;
	if (ok)
		return;
	if (g->failures++ >= MAX_REPORTED)
		return;
	printf("  FAIL %s %s: ", g->variant, g->name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* Prints a group's line and counts it. */
static void
finish_group(const Group *g)
{
	if (g->failures == 0)
		groups_passed++;
	else
		groups_failed++;
	printf("%-4s %-7s %-58s %d checks, %d failed\n",
		   g->failures == 0 ? "ok" : "FAIL", g->variant, g->name,
		   g->checks, g->failures);
}

/* Reports a group that could not run on this CPU. */
static void
skip_group(const char *variant, const char *name)
{
	groups_skipped++;
	printf("skip %-7s %-58s not supported by this CPU\n", variant, name);
}

/* Allocation hook of FailingAllocator. */
static void *
failing_alloc(size_t size, void *arg)
{
	FailingAllocator *f = arg;

	if (f->calls++ == f->fail_at)
		return NULL;
	f->live++;
	return malloc(size);
}

/* Free hook of FailingAllocator. */
static void
failing_free(void *ptr, void *arg)
{
	FailingAllocator *f = arg;

	f->live--;
	free(ptr);
}

/* ------------------------------------------------------------------ */
/* Data                                                                */
/* ------------------------------------------------------------------ */

/* n x d floats, uniform in [lo, hi). */
static float *
uniform_points(size_t n, int d, double lo, double hi)
{
	float	   *x = xmalloc(sizeof(float) * n * d);
	size_t		i;

	for (i = 0; i < n * (size_t) d; i++)
		x[i] = (float) rng_uniform(lo, hi);
	return x;
}

/* n points around 'clusters' uniform centres in [-1,1)^d, plus offset. */
static float *
clustered_points(size_t n, int d, int clusters, double spread, double offset)
{
	float	   *centres = uniform_points(clusters, d, -1.0, 1.0);
	float	   *x = xmalloc(sizeof(float) * n * d);
	size_t		i;
	int			j;

	for (i = 0; i < n; i++)
	{
		int			c = rng_below(clusters);

		for (j = 0; j < d; j++)
			x[i * d + j] = (float) (offset + centres[c * d + j] + spread * rng_gauss());
	}
	free(centres);
	return x;
}

/* Scales each row to unit length in float64 (rows are never zero here). */
static void
normalize_rows(float *x, size_t n, int d)
{
	size_t		i;
	int			j;

	for (i = 0; i < n; i++)
	{
		double		s = 0.0;

		for (j = 0; j < d; j++)
			s += (double) x[i * d + j] * x[i * d + j];
		s = sqrt(s);
		for (j = 0; j < d; j++)
			x[i * d + j] = (float) (x[i * d + j] / s);
	}
}

/* Copies m random rows of x (distinct indices when m <= n). */
static float *
sample_rows(const float *x, size_t n, int d, int m)
{
	float	   *out = xmalloc(sizeof(float) * (size_t) m * d);
	int		   *perm = xmalloc(sizeof(int) * n);
	size_t		i;

	for (i = 0; i < n; i++)
		perm[i] = (int) i;
	for (i = 0; i < (size_t) m && i < n; i++)
	{
		size_t		j = i + (size_t) rng_below((int) (n - i));
		int			t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (i = 0; i < (size_t) m; i++)
		memcpy(out + i * d, x + (size_t) perm[i % n] * d, sizeof(float) * d);
	free(perm);
	return out;
}

/* Fills n floats with NaN and n ints with -1 (either may be NULL). */
static void
poison(float *f, size_t nf, int32_t *idx, size_t ni, double *dd, size_t nd)
{
	size_t		i;

	for (i = 0; f != NULL && i < nf; i++)
		f[i] = NAN;
	for (i = 0; idx != NULL && i < ni; i++)
		idx[i] = -1;
	for (i = 0; dd != NULL && i < nd; i++)
		dd[i] = NAN;
}

/* The float64 distance nearest.h defines. */
static double
metric_distance(CvNearestMetric metric, const float *a, const float *b, int d)
{
	if (metric == CV_NEAREST_L2)
		return cv_distance->l2_squared(a, b, d);
	return -cv_distance->inner_product(a, b, d);
}

/* Brute-force argmin of the float64 distance, lowest index on ties. */
static int32_t
brute_nearest(CvNearestMetric metric, const float *x, const float *c, int k,
			  int d, double *dist)
{
	double		best = metric_distance(metric, x, c, d);
	int32_t		index = 0;
	int			j;

	for (j = 1; j < k; j++)
	{
		double		v = metric_distance(metric, x, c + (size_t) j * d, d);

		if (v < best)
		{
			best = v;
			index = j;
		}
	}
	*dist = best;
	return index;
}

/* Member counts of an assignment. */
static int *
cluster_counts(const int32_t *assign, size_t n, int k)
{
	int		   *counts = calloc((size_t) k, sizeof(int));
	size_t		i;

	if (counts == NULL)
		exit(2);
	for (i = 0; i < n; i++)
		if (assign[i] >= 0 && assign[i] < k)
			counts[assign[i]]++;
	return counts;
}

/* Parameters with the common defaults. */
static CvKmeansParams
params_of(int k, int iterations, uint64_t seed, CvKmeansMetric metric)
{
	CvKmeansParams p;

	memset(&p, 0, sizeof(p));
	p.k = k;
	p.iterations = iterations;
	p.seed = seed;
	p.metric = metric;
	return p;
}

/* The nearest.h metric a k-means metric assigns with. */
static CvNearestMetric
nearest_metric(CvKmeansMetric m)
{
	return m == CV_KMEANS_L2 ? CV_NEAREST_L2 : CV_NEAREST_INNER_PRODUCT;
}

/* ------------------------------------------------------------------ */
/* prng                                                                */
/* ------------------------------------------------------------------ */

/* Same seed, same stream; other seeds, other streams; a fixed golden value. */
static void
test_prng_streams(void)
{
	Group		g = new_group("-", "prng: reproducible, seed-dependent, golden");
	CvPrng		a,
				b,
				c;
	int			i;
	int			same_ab = 1;
	int			same_ac = 1;

	cv_prng_seed(&a, 12345);
	cv_prng_seed(&b, 12345);
	cv_prng_seed(&c, 12346);
	for (i = 0; i < 1000; i++)
	{
		uint64_t	x = cv_prng_next(&a);

		same_ab &= x == cv_prng_next(&b);
		same_ac &= x == cv_prng_next(&c);
	}
	check(&g, same_ab, "same seed gave different streams");
	check(&g, !same_ac, "seeds 12345 and 12346 gave the same stream");
	cv_prng_seed(&a, 0);
	/* the first output for seed 0: guards against accidental changes */
	check(&g, cv_prng_next(&a) == UINT64_C(0x99ec5f36cb75f2b4),
		  "seed 0 first output changed");
	finish_group(&g);
}

/* uniform() in [0,1) with the right mean; below(n) in range and unbiased. */
static void
test_prng_ranges(void)
{
	Group		g = new_group("-", "prng: uniform in [0,1), below(n) in range");
	CvPrng		r;
	long		counts[7] = {0};
	double		mean = 0.0;
	int			i;

	cv_prng_seed(&r, rng_next());
	for (i = 0; i < 200000; i++)
	{
		double		u = cv_prng_uniform(&r);
		uint64_t	b = cv_prng_below(&r, 7);

		check(&g, u >= 0.0 && u < 1.0, "uniform %g out of [0,1)", u);
		check(&g, b < 7, "below(7) gave %llu", (unsigned long long) b);
		mean += u;
		counts[b < 7 ? b : 0]++;
	}
	check(&g, fabs(mean / 200000 - 0.5) < 0.005, "uniform mean %g", mean / 200000);
	for (i = 0; i < 7; i++)
		check(&g, labs(counts[i] - 200000 / 7) < 1500, "below(7) value %d seen %ld times",
			  i, counts[i]);
	check(&g, cv_prng_below(&r, 0) == 0, "below(0) is not 0");
	check(&g, cv_prng_below(&r, 1) == 0, "below(1) is not 0");
	finish_group(&g);
}

/* ------------------------------------------------------------------ */
/* nearest                                                             */
/* ------------------------------------------------------------------ */

/* Kinds of data for the assignment comparison. */
typedef enum DataKind
{
	DATA_UNIFORM,				/* points and centroids U(-1, 1) */
	DATA_CLUSTERED,				/* points near the centroids */
	DATA_OFFSET,				/* clustered, all shifted by 1000 */
	DATA_DUPLICATES,			/* repeated centroids; points equal to centroids */
	DATA_HUGE,					/* elements ~1e19: float32 scores would overflow */
	DATA_KINDS
} DataKind;

static const char *const data_names[DATA_KINDS] = {
	"uniform", "clustered", "offset", "duplicates", "huge"
};

/* One assignment problem. */
typedef struct Problem
{
	size_t		n;
	int			k;
	int			d;
	DataKind	kind;
	float	   *points;
	float	   *centroids;
} Problem;

/* Makes centroids repeat and points sit exactly on centroids. */
static void
add_duplicates(Problem *p)
{
	size_t		i;
	int			c;

	for (c = 1; c < p->k; c += 3)
		memcpy(p->centroids + (size_t) c * p->d,
			   p->centroids + (size_t) rng_below(c) * p->d, sizeof(float) * p->d);
	for (i = 0; i < p->n; i += 2)
		memcpy(p->points + i * p->d,
			   p->centroids + (size_t) rng_below(p->k) * p->d, sizeof(float) * p->d);
}

/* Builds one problem of the given kind. */
static Problem
make_problem(size_t n, int k, int d, DataKind kind)
{
	Problem		p = {n, k, d, kind, NULL, NULL};
	double		offset = kind == DATA_OFFSET ? 1000.0 : 0.0;
	size_t		i;

	if (kind == DATA_UNIFORM || kind == DATA_HUGE)
	{
		p.points = uniform_points(n, d, -1.0, 1.0);
		p.centroids = uniform_points(k, d, -1.0, 1.0);
	}
	else
	{
		p.points = clustered_points(n, d, k, 0.3, offset);
		p.centroids = sample_rows(p.points, n, d, k);
	}
	if (kind == DATA_DUPLICATES)
		add_duplicates(&p);
	if (kind == DATA_HUGE)
	{
		for (i = 0; i < n * (size_t) d; i++)
			p.points[i] *= 1e19f;
		for (i = 0; i < (size_t) k * d; i++)
			p.centroids[i] *= 1e19f;
	}
	return p;
}

/* Releases a problem. */
static void
free_problem(Problem *p)
{
	free(p->points);
	free(p->centroids);
}

/* Checks one problem's assignment against brute force, bit for bit. */
static void
check_assignment(Group *g, const Problem *p, CvNearestMetric metric,
				 size_t *rescans)
{
	CvNearest  *nn = NULL;
	int32_t    *index = xmalloc(sizeof(int32_t) * p->n);
	double	   *dist = xmalloc(sizeof(double) * p->n);
	CvMathStatus st;
	size_t		i;

	poison(NULL, 0, index, p->n, dist, p->n);
	st = cv_nearest_create(p->centroids, p->k, p->d, metric, NULL, &nn);
	if (st == CV_MATH_OK)
		st = cv_nearest_assign(nn, p->points, p->n, index, dist);
	check(g, st == CV_MATH_OK, "status %d", (int) st);
	for (i = 0; st == CV_MATH_OK && i < p->n; i++)
	{
		double		want_dist;
		int32_t		want = brute_nearest(metric, p->points + i * p->d,
										 p->centroids, p->k, p->d, &want_dist);

		check(g, index[i] == want && memcmp(&dist[i], &want_dist, sizeof(double)) == 0,
			  "%s n=%zu k=%d d=%d metric=%d point %zu: got %d (%.17g) want %d (%.17g)",
			  data_names[p->kind], p->n, p->k, p->d, (int) metric, i,
			  index[i], dist[i], want, want_dist);
	}
	*rescans += cv_nearest_rescans(nn);
	cv_nearest_free(nn);
	free(index);
	free(dist);
}

/* Shapes: k around block and pair boundaries, d around 16, tiles' tails. */
static const int shapes[][3] = {
	/* n, k, d */
	{1, 1, 1}, {7, 1, 5}, {50, 2, 3}, {300, 15, 16}, {301, 16, 17},
	{257, 17, 31}, {513, 33, 8}, {1000, 48, 33}, {999, 100, 64},
	{2000, 257, 128}, {100, 40, 700}, {50, 70, 1030}
};

#define N_SHAPES ((int) (sizeof(shapes) / sizeof(shapes[0])))

/* The blocked assignment equals the float64 brute force, every kind and shape. */
static void
test_nearest_exact(const char *variant)
{
	Group		g = new_group(variant, "nearest == brute-force float64 argmin, distances");
	size_t		rescans = 0;
	size_t		points = 0;
	int			s;
	int			kind;
	int			m;

	for (s = 0; s < N_SHAPES; s++)
		for (kind = 0; kind < DATA_KINDS; kind++)
			for (m = 0; m < 2; m++)
			{
				Problem		p = make_problem(shapes[s][0], shapes[s][1],
											 shapes[s][2], (DataKind) kind);

				check_assignment(&g, &p, (CvNearestMetric) m, &rescans);
				points += p.n;
				free_problem(&p);
			}
	printf("     %-7s (%zu of %zu points needed the float64 rescan)\n",
		   variant, rescans, points);
	finish_group(&g);
}

/* Exactly equidistant centroids: symmetric pairs around each point. */
static void
test_nearest_ties(const char *variant)
{
	Group		g = new_group(variant, "nearest: exact ties go to the lowest index");
	int			d = 20;
	int			k = 64;
	size_t		n = 200;
	float	   *c = xmalloc(sizeof(float) * k * d);
	float	   *x = xmalloc(sizeof(float) * n * d);
	Problem		p = {n, k, d, DATA_DUPLICATES, x, c};
	size_t		rescans = 0;
	size_t		i;
	int			j;
	int			pair;

	/* centroid pairs e and -e (small integers: exact); points at 0 or on axes */
	memset(c, 0, sizeof(float) * k * d);
	for (pair = 0; pair < k / 2; pair++)
	{
		c[(2 * pair) * d + pair % d] = (float) (1 + pair / d);
		c[(2 * pair + 1) * d + pair % d] = -(float) (1 + pair / d);
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < d; j++)
			x[i * d + j] = (i % 3 == 0) ? 0.0f : (float) (rng_below(3) - 1);
	check_assignment(&g, &p, CV_NEAREST_L2, &rescans);
	check_assignment(&g, &p, CV_NEAREST_INNER_PRODUCT, &rescans);
	check(&g, rescans > 0, "no tie was sent to the float64 rescan");
	free(c);
	free(x);
	finish_group(&g);
}

/* Points near float32 overflow: nearest must still be exact (all rescanned). */
static void
test_nearest_huge(const char *variant)
{
	Group		g = new_group(variant, "nearest: magnitudes past float32 range");
	Problem		p = make_problem(300, 20, 24, DATA_HUGE);
	size_t		rescans = 0;

	check_assignment(&g, &p, CV_NEAREST_L2, &rescans);
	check(&g, rescans == p.n, "%zu of %zu points rescanned", rescans, p.n);
	free_problem(&p);
	finish_group(&g);
}

/* The float32 score of the kernels' contract, computed the obvious way. */
static float
reference_score(const float *x, const float *c, const float *m, int d,
				CvNearestMetric metric)
{
	float		acc = 0.0f;
	double		sq = 0.0;
	int			j;

	for (j = 0; j < d; j++)
	{
		float		xj = x[j] - m[j];
		float		cj = c[j] - m[j];

		acc += xj * cj;
		sq += (double) cj * cj;
	}
	if (metric == CV_NEAREST_L2)
		return (float) sq - 2.0f * acc;
	return 0.0f - acc;
}

/* The mean of the centroids in float64, rounded (nearest.c's centre). */
static float *
centroid_mean(const float *c, int k, int d, CvNearestMetric metric)
{
	float	   *m = xmalloc(sizeof(float) * d);
	int			j;
	int			i;

	for (j = 0; j < d; j++)
	{
		double		s = 0.0;

		for (i = 0; metric == CV_NEAREST_L2 && i < k; i++)
			s += c[(size_t) i * d + j];
		m[j] = (float) (s / k);
	}
	return m;
}

/* Best/second/index of one point by the definition, in centroid order. */
static CvNearestBest
reference_best(const Problem *p, const float *m, size_t i, CvNearestMetric metric)
{
	CvNearestBest b;
	int			c;

	cv_nearest_best_reset(&b);
	for (c = 0; c < p->k; c++)
		cv_nearest_best_merge(&b, reference_score(p->points + i * p->d,
												  p->centroids + (size_t) c * p->d,
												  m, p->d, metric),
							  INFINITY, c);
	return b;
}

/* Raw float32 pass of one variant: bitwise equal to the scalar kernel and to the definition. */
static void
check_raw(Group *g, const CvNearestKernels *kern, const Problem *p,
		  CvNearestMetric metric, int against_definition)
{
	const CvNearestKernels *scalar = cv_nearest_kernels_for(CV_SIMD_SCALAR);
	CvNearestBest *got = xmalloc(sizeof(CvNearestBest) * p->n);
	CvNearestBest *want = xmalloc(sizeof(CvNearestBest) * p->n);
	float	   *m = centroid_mean(p->centroids, p->k, p->d, metric);
	CvNearest  *nn = NULL;
	size_t		i;

	memset(got, 0xff, sizeof(CvNearestBest) * p->n);
	cv_nearest_create(p->centroids, p->k, p->d, metric, NULL, &nn);
	check(g, cv_nearest_scan_points(nn, kern, p->points, p->n, got) == CV_MATH_OK, "scan failed");
	cv_nearest_scan_points(nn, scalar, p->points, p->n, want);
	for (i = 0; i < p->n; i++)
	{
		if (against_definition)
			want[i] = reference_best(p, m, i, metric);
		check(g, memcmp(&got[i], &want[i], sizeof(CvNearestBest)) == 0,
			  "n=%zu k=%d d=%d point %zu: (%.9g %.9g %d) vs (%.9g %.9g %d)",
			  p->n, p->k, p->d, i, got[i].best, got[i].second, got[i].index,
			  want[i].best, want[i].second, want[i].index);
	}
	cv_nearest_free(nn);
	free(m);
	free(got);
	free(want);
}

/* Every shape and finite kind through check_raw. */
static void
test_nearest_raw(const char *variant, const CvNearestKernels *kern, int against_definition)
{
	Group		g = new_group(variant, against_definition
							  ? "scalar kernel == float32 score definition"
							  : "float32 kernel bitwise == scalar kernel");
	int			s;
	int			kind;
	int			m;

	for (s = 0; s < N_SHAPES; s++)
		for (kind = 0; kind < DATA_HUGE; kind++)
			for (m = 0; m < 2; m++)
			{
				Problem		p = make_problem(shapes[s][0], shapes[s][1],
											 shapes[s][2], (DataKind) kind);

				check_raw(&g, kern, &p, (CvNearestMetric) m, against_definition);
				free_problem(&p);
			}
	finish_group(&g);
}

/* cv_nearest_distances is cv_distance in a loop. */
static void
test_nearest_distances(void)
{
	Group		g = new_group("-", "cv_nearest_distances == cv_distance per centroid");
	Problem		p = make_problem(1, 37, 45, DATA_UNIFORM);
	double		out[37];
	int			m;
	int			c;

	for (m = 0; m < 2; m++)
	{
		poison(NULL, 0, NULL, 0, out, 37);
		check(&g, cv_nearest_distances(p.centroids, 37, 45, (CvNearestMetric) m,
									   p.points, out) == CV_MATH_OK, "status");
		for (c = 0; c < 37; c++)
		{
			double		want = metric_distance((CvNearestMetric) m, p.points,
											   p.centroids + c * 45, 45);

			check(&g, memcmp(&out[c], &want, sizeof(double)) == 0,
				  "metric %d centroid %d: %.17g vs %.17g", m, c, out[c], want);
		}
	}
	free_problem(&p);
	finish_group(&g);
}

/* Bad arguments are refused; every allocation failure is reported, nothing leaks. */
static void
test_nearest_errors(void)
{
	Group		g = new_group("-", "nearest: bad arguments, allocation failures");
	float		c[6] = {1, 2, 3, 4, 5, 6};
	float		bad[6] = {1, 2, NAN, 4, 5, 6};
	int32_t		idx[2];
	CvNearest  *nn = NULL;
	FailingAllocator f = {-1, 0, 0};
	CvAllocator a = {failing_alloc, failing_free, &f};
	int			at;

	check(&g, cv_nearest_create(NULL, 2, 3, CV_NEAREST_L2, NULL, &nn) == CV_MATH_BAD_ARGUMENT, "NULL");
	check(&g, cv_nearest_create(c, 0, 3, CV_NEAREST_L2, NULL, &nn) == CV_MATH_BAD_ARGUMENT, "k=0");
	check(&g, cv_nearest_create(c, 2, 0, CV_NEAREST_L2, NULL, &nn) == CV_MATH_BAD_ARGUMENT, "d=0");
	check(&g, cv_nearest_create(c, 2, 3, (CvNearestMetric) 7, NULL, &nn) == CV_MATH_BAD_ARGUMENT, "metric");
	check(&g, cv_nearest_create(bad, 2, 3, CV_NEAREST_L2, NULL, &nn) == CV_MATH_BAD_ARGUMENT, "NaN");
	check(&g, cv_nearest_assign(NULL, c, 2, idx, NULL) == CV_MATH_BAD_ARGUMENT, "NULL nearest");
	check(&g, cv_nearest_distances(c, 2, 3, CV_NEAREST_L2, NULL, NULL) == CV_MATH_BAD_ARGUMENT, "NULL query");
	for (at = 0; at < 20; at++)
	{
		CvMathStatus st;

		f.fail_at = at;
		f.calls = 0;
		st = cv_nearest_create(c, 2, 3, CV_NEAREST_L2, &a, &nn);
		if (st == CV_MATH_OK)
		{
			check(&g, cv_nearest_assign(nn, c, 2, idx, NULL) == CV_MATH_OK
				  && idx[0] == 0 && idx[1] == 1, "assign after create");
			cv_nearest_free(nn);
			check(&g, f.live == 0, "%d blocks leaked", f.live);
			break;
		}
		check(&g, st == CV_MATH_OUT_OF_MEMORY, "allocation %d: status %d", at, (int) st);
		check(&g, f.live == 0, "allocation %d failed: %d blocks leaked", at, f.live);
	}
	finish_group(&g);
}

/* ------------------------------------------------------------------ */
/* k-means                                                             */
/* ------------------------------------------------------------------ */

/* One full k-means run's outputs. */
typedef struct Run
{
	CvMathStatus status;
	CvKmeansResult result;
	float	   *centroids;
	int32_t    *assignment;
	double	   *history;
} Run;

/* Runs cv_kmeans with poisoned outputs. */
static Run
run_kmeans(const float *x, size_t n, int d, const CvKmeansParams *p)
{
	Run			r;

	r.centroids = xmalloc(sizeof(float) * (size_t) p->k * d);
	r.assignment = xmalloc(sizeof(int32_t) * n);
	r.history = xmalloc(sizeof(double) * (p->iterations + 1));
	poison(r.centroids, (size_t) p->k * d, r.assignment, n, r.history, p->iterations + 1);
	memset(&r.result, 0xff, sizeof(r.result));
	r.status = cv_kmeans(x, n, d, p, r.centroids, r.assignment, r.history, &r.result);
	return r;
}

/* Releases a run. */
static void
free_run(Run *r)
{
	free(r->centroids);
	free(r->assignment);
	free(r->history);
}

/* Status OK, written rows finite, rows past n_centroids untouched, assignment in range. */
static void
check_run_shape(Group *g, const Run *r, size_t n, int d, int k)
{
	size_t		i;
	int			nc = r->result.n_centroids;

	check(g, r->status == CV_MATH_OK, "status %d", (int) r->status);
	if (r->status != CV_MATH_OK)
		return;
	check(g, nc >= 1 && nc <= k, "n_centroids %d", nc);
	for (i = 0; i < (size_t) nc * d; i++)
		check(g, isfinite(r->centroids[i]), "centroid element %zu not written", i);
	for (i = (size_t) nc * d; i < (size_t) k * d; i++)
		check(g, isnan(r->centroids[i]), "row past n_centroids written");
	for (i = 0; i < n; i++)
		check(g, r->assignment[i] >= 0 && r->assignment[i] < nc,
			  "assignment[%zu] = %d", i, r->assignment[i]);
	for (i = 0; i < (size_t) r->result.iterations_run; i++)
		check(g, !isnan(r->history[i]), "history[%zu] not written", i);
}

/* True when two runs produced the same bits everywhere. */
static int
same_run(const Run *a, const Run *b, size_t n, int d)
{
	return a->status == b->status
		&& a->result.n_centroids == b->result.n_centroids
		&& a->result.iterations_run == b->result.iterations_run
		&& a->result.refilled == b->result.refilled
		&& memcmp(&a->result.inertia, &b->result.inertia, sizeof(double)) == 0
		&& memcmp(a->centroids, b->centroids,
				  sizeof(float) * (size_t) a->result.n_centroids * d) == 0
		&& memcmp(a->assignment, b->assignment, sizeof(int32_t) * n) == 0
		&& memcmp(a->history, b->history,
				  sizeof(double) * a->result.iterations_run) == 0;
}

/* Same seed: identical bits on every SIMD level and on a rerun; another seed differs. */
static void
test_kmeans_determinism(void)
{
	Group		g = new_group("all", "k-means: same seed => same bits on every level");
	size_t		n = 4000;
	int			d = 40;
	int			metric;

	for (metric = 0; metric < 3; metric++)
	{
		float	   *x = clustered_points(n, d, 60, 0.25, 0.0);
		CvKmeansParams p = params_of(50, 8, rng_next(), (CvKmeansMetric) metric);
		Run			ref;
		Run			other;
		int			level;

		if (metric == CV_KMEANS_SPHERICAL)
			normalize_rows(x, n, d);
		cv_simd_use(CV_SIMD_SCALAR);
		ref = run_kmeans(x, n, d, &p);
		check_run_shape(&g, &ref, n, d, p.k);
		for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
		{
			Run			r;

			if (!cv_simd_use((CvSimdLevel) level))
				continue;
			r = run_kmeans(x, n, d, &p);
			check(&g, same_run(&r, &ref, n, d), "metric %d: level %s differs from scalar",
				  metric, level_names[level]);
			free_run(&r);
		}
		p.seed ^= 1;
		other = run_kmeans(x, n, d, &p);
		check(&g, memcmp(other.centroids, ref.centroids, sizeof(float) * p.k * d) != 0,
			  "metric %d: another seed gave the same centroids", metric);
		free_run(&ref);
		free_run(&other);
		free(x);
	}
	cv_simd_use(cv_simd_best());
	finish_group(&g);
}

/* Expected centroid c: float64 mean of its members in point order (normalised if spherical). */
static void
expected_mean(const float *x, size_t n, int d, const int32_t *assign, int c,
			  int spherical, const float *old, float *out)
{
	double	   *s = calloc((size_t) d, sizeof(double));
	double		count = 0.0;
	double		norm = 0.0;
	size_t		i;
	int			j;

	for (i = 0; i < n; i++)
		if (assign[i] == c)
		{
			for (j = 0; j < d; j++)
				s[j] += x[i * d + j];
			count++;
		}
	for (j = 0; j < d; j++)
	{
		s[j] /= count;
		norm += s[j] * s[j];
	}
	norm = spherical ? sqrt(norm) : 1.0;
	for (j = 0; j < d; j++)
		out[j] = count == 0.0 ? old[j] : (float) (s[j] / norm);
	free(s);
}

/* Brute-force assignment of n points to k centroids under a k-means metric. */
static int32_t *
brute_assignment(const float *x, size_t n, int d, const float *c, int k,
				 CvKmeansMetric metric)
{
	int32_t    *out = xmalloc(sizeof(int32_t) * n);
	size_t		i;

	for (i = 0; i < n; i++)
	{
		double		dist;

		out[i] = brute_nearest(nearest_metric(metric), x + i * d, c, k, d, &dist);
	}
	return out;
}

/* One update case: n points, k centroids drawn from them, one iteration. */
static void
check_update_case(Group *g, CvKmeansMetric metric, size_t n, int d, int k)
{
	float	   *x = clustered_points(n, d, k, 0.4, metric == CV_KMEANS_L2 ? 5.0 : 0.0);
	float	   *c;
	float	   *old = xmalloc(sizeof(float) * k * d);
	float	   *want = xmalloc(sizeof(float) * d);
	int32_t    *assign = xmalloc(sizeof(int32_t) * n);
	int32_t    *brute;
	CvKmeansParams p = params_of(k, 1, 0, metric);
	CvKmeansResult res;
	int			j;

	if (metric != CV_KMEANS_L2)
		normalize_rows(x, n, d);	/* unit data: every centroid keeps its own point */
	c = sample_rows(x, n, d, k);
	memcpy(old, c, sizeof(float) * k * d);
	brute = brute_assignment(x, n, d, old, k, metric);
	poison(NULL, 0, assign, n, NULL, 0);
	check(g, cv_kmeans_lloyd(x, n, d, &p, c, assign, NULL, &res) == CV_MATH_OK, "status");
	check(g, res.refilled == 0 && res.iterations_run == 1, "refilled %d run %d",
		  res.refilled, res.iterations_run);
	check(g, memcmp(assign, brute, sizeof(int32_t) * n) == 0,
		  "metric %d: assignment differs from brute force", (int) metric);
	for (j = 0; j < k; j++)
	{
		expected_mean(x, n, d, brute, j, metric == CV_KMEANS_SPHERICAL,
					  old + (size_t) j * d, want);
		check(g, memcmp(want, c + (size_t) j * d, sizeof(float) * d) == 0,
			  "metric %d d=%d: centroid %d is not the float64 mean", (int) metric, d, j);
	}
	free(x);
	free(c);
	free(old);
	free(want);
	free(assign);
	free(brute);
}

/* One Lloyd iteration from given centroids equals brute-force assignment + float64 means. */
static void
test_kmeans_update(void)
{
	Group		g = new_group("-", "k-means: one update == float64 means of argmin");
	int			metric;
	int			rep;

	for (metric = 0; metric < 3; metric++)
		for (rep = 0; rep < 3; rep++)
			check_update_case(&g, (CvKmeansMetric) metric, 1500, 7 + 9 * rep, 13 + 20 * rep);
	finish_group(&g);
}

/* The member of cluster c farthest from centre (squared L2, lowest index on ties). */
static size_t
farthest_of(const float *x, size_t n, int d, const int32_t *assign, int c,
			const float *centre)
{
	size_t		best = 0;
	double		best_dist = -1.0;
	size_t		i;

	for (i = 0; i < n; i++)
		if (assign[i] == c)
		{
			double		v = cv_distance->l2_squared(x + i * d, centre, d);

			if (v > best_dist)
			{
				best_dist = v;
				best = i;
			}
		}
	return best;
}

/* How check_refill_case shapes group A. */
typedef enum RefillCase
{
	REFILL_SPREAD,				/* A random around its centroid */
	REFILL_ZERO_SPREAD,			/* A sits on its centroid: no donor there */
	REFILL_TIED					/* A's four farthest members equidistant */
} RefillCase;

/* Point i of group A (10 points around the origin) for a refill case. */
static void
group_a_point(RefillCase kind, size_t i, float *xy)
{
	static const float tied[4][2] = {{0, 1}, {1, 0}, {-1, 0}, {0, -1}};

	if (kind == REFILL_ZERO_SPREAD)
		xy[0] = xy[1] = 0.0f;
	else if (kind == REFILL_TIED && i < 4)
	{
		xy[0] = tied[i][0];
		xy[1] = tied[i][1];
	}
	else
	{
		xy[0] = (float) rng_uniform(-0.7, 0.7) * (kind == REFILL_TIED ? 0.5f : 1.0f);
		xy[1] = (float) rng_uniform(-0.7, 0.7) * (kind == REFILL_TIED ? 0.5f : 1.0f);
	}
}

/*
 * Two groups A (10 points near 0) and B (4 points near 10) and a third
 * centroid far from both: cluster 2 starts empty.  With zero spread A's
 * points all sit on their centroid, so the donor must be B; with tied
 * farthest members the lowest point index must win.
 */
static void
check_refill_case(Group *g, RefillCase kind)
{
	int			d = 2;
	size_t		n = 14;
	float		x[28];
	float		c[6] = {0, 0, 10, 0, 100, 100};
	float		c0[6];
	int32_t		assign[14];
	int32_t		brute[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
	CvKmeansParams p = params_of(3, 1, 0, CV_KMEANS_L2);
	CvKmeansResult res;
	int			donor = kind == REFILL_ZERO_SPREAD ? 1 : 0;
	size_t		far;
	size_t		i;

	for (i = 0; i < n; i++)
	{
		if (i < 10)
			group_a_point(kind, i, x + 2 * i);
		else
		{
			x[2 * i] = (float) (10.0 + rng_uniform(-1, 1));
			x[2 * i + 1] = (float) rng_uniform(-1, 1);
		}
	}
	memcpy(c0, c, sizeof(c));
	far = farthest_of(x, n, d, brute, donor, c0 + 2 * donor);
	if (kind == REFILL_TIED)
		check(g, far == 0, "test data: tied farthest member is %zu", far);
	check(g, cv_kmeans_lloyd(x, n, d, &p, c, assign, NULL, &res) == CV_MATH_OK, "status");
	check(g, res.refilled == 1, "refilled %d, want 1", res.refilled);
	check(g, assign[far] == 2, "farthest member %zu of cluster %d went to %d", far, donor, assign[far]);
	check(g, c[4] == x[2 * far] && c[5] == x[2 * far + 1], "new centre is not the farthest member");
	brute[far] = 2;
	check(g, memcmp(assign, brute, sizeof(assign)) == 0, "other members moved");
}

/* Empty cluster refilled as documented, and no empty cluster at the end. */
static void
test_kmeans_refill(void)
{
	Group		g = new_group("-", "k-means: empty cluster refilled from largest");
	int			rep;

	check_refill_case(&g, REFILL_SPREAD);
	check_refill_case(&g, REFILL_ZERO_SPREAD);
	check_refill_case(&g, REFILL_TIED);
	for (rep = 0; rep < 6; rep++)
	{
		/* distinct points, many far-away initial centroids: several empties */
		size_t		n = 400;
		int			d = 3;
		int			k = 40 + 60 * rep;
		float	   *x = uniform_points(n, d, -1, 1);
		float	   *c = uniform_points(k, d, 50, 60);
		int32_t    *assign = xmalloc(sizeof(int32_t) * n);
		CvKmeansParams p = params_of(k, 1 + rep, 0, CV_KMEANS_L2);
		CvKmeansResult res;
		int		   *counts;
		int			j;

		memcpy(c, x, sizeof(float) * d * 3);	/* three real centres, the rest far */
		check(&g, cv_kmeans_lloyd(x, n, d, &p, c, assign, NULL, &res) == CV_MATH_OK, "status");
		check(&g, res.refilled >= k - 3, "k=%d: refilled only %d", k, res.refilled);
		counts = cluster_counts(assign, n, k);
		for (j = 0; j < k; j++)
			check(&g, counts[j] > 0, "k=%d iterations=%d: cluster %d empty", k, 1 + rep, j);
		free(counts);
		free(x);
		free(c);
		free(assign);
	}
	finish_group(&g);
}

/* Full runs with k close to n: every cluster of the final assignment is non-empty. */
static void
test_kmeans_no_empty(void)
{
	Group		g = new_group("-", "k-means: no empty cluster when distinct >= k");
	int			rep;

	for (rep = 0; rep < 8; rep++)
	{
		size_t		n = 300 + 100 * rep;
		int			d = 2 + rep;
		int			k = (int) n - 10 * rep - 1;
		float	   *x = clustered_points(n, d, 5, 0.05, 0.0);
		CvKmeansParams p = params_of(k, 12, rng_next(), (CvKmeansMetric) (rep % 3));
		Run			r;
		int		   *counts;
		int			j;

		if (p.metric != CV_KMEANS_L2)
			normalize_rows(x, n, d);
		r = run_kmeans(x, n, d, &p);
		check_run_shape(&g, &r, n, d, k);
		check(&g, r.result.n_centroids == k, "n_centroids %d of %d", r.result.n_centroids, k);
		counts = cluster_counts(r.assignment, n, k);
		for (j = 0; j < k; j++)
			check(&g, counts[j] > 0, "n=%zu k=%d metric=%d: cluster %d empty",
				  n, k, (int) p.metric, j);
		free(counts);
		free_run(&r);
		free(x);
	}
	finish_group(&g);
}

/* Fewer distinct points than k: exactly those points come back. */
static void
test_kmeans_few_distinct(void)
{
	Group		g = new_group("-", "k-means: n_distinct < k gives n_distinct centroids");
	int			rep;

	for (rep = 0; rep < 6; rep++)
	{
		int			distinct = 1 + 7 * rep;
		int			d = 5;
		size_t		n = (size_t) distinct * 9 + (rep == 5 ? 0 : 3);
		float	   *base = uniform_points(distinct, d, -1, 1);
		float	   *x = sample_rows(base, distinct, d, (int) n);	/* every point repeated */
		CvKmeansParams p = params_of(rep == 4 ? (int) n + 5 : distinct + 3 + rep, 5, rng_next(),
									 (CvKmeansMetric) (rep % 3));
		Run			r;
		int			j;
		int			i;

		if (p.metric != CV_KMEANS_L2)
		{
			normalize_rows(base, distinct, d);
			free(x);
			x = sample_rows(base, distinct, d, (int) n);
		}
		r = run_kmeans(x, n, d, &p);
		check_run_shape(&g, &r, n, d, p.k);
		check(&g, r.result.n_centroids == distinct, "distinct %d: got %d centroids",
			  distinct, r.result.n_centroids);
		for (j = 0; j < r.result.n_centroids && j < distinct; j++)
		{
			int			found = 0;

			for (i = 0; i < distinct; i++)
				found |= memcmp(r.centroids + j * d, base + i * d, sizeof(float) * d) == 0;
			check(&g, found || p.metric == CV_KMEANS_SPHERICAL,
				  "centroid %d is not one of the distinct points", j);
		}
		if (p.metric == CV_KMEANS_L2)
			check(&g, r.result.inertia == 0.0, "inertia %g, want 0", r.result.inertia);
		free_run(&r);
		free(base);
		free(x);
	}
	finish_group(&g);
}

/* k = 32,768 on 50,000 points: runs, fills every list, and assigns exactly. */
static void
test_kmeans_large_k(void)
{
	Group		g = new_group("-", "k-means: k = 32,768 (n = 50,000, d = 16)");
	size_t		n = 50000;
	int			d = 16;
	int			k = 32768;
	float	   *x = uniform_points(n, d, -1, 1);
	CvKmeansParams p = params_of(k, 2, rng_next(), CV_KMEANS_L2);
	Run			r = run_kmeans(x, n, d, &p);
	int		   *counts;
	size_t		rescans = 0;
	int			j;

	check_run_shape(&g, &r, n, d, k);
	check(&g, r.result.n_centroids == k, "n_centroids %d", r.result.n_centroids);
	counts = cluster_counts(r.assignment, n, k);
	for (j = 0; j < k; j++)
		check(&g, counts[j] > 0, "cluster %d empty", j);
	if (r.status == CV_MATH_OK)
	{
		Problem		q = {300, k, d, DATA_UNIFORM, x, r.centroids};

		check_assignment(&g, &q, CV_NEAREST_L2, &rescans);
	}
	free(counts);
	free_run(&r);
	free(x);
	finish_group(&g);
}

/* Spherical centroids are unit vectors (float4 rounding aside). */
static void
test_kmeans_spherical(void)
{
	Group		g = new_group("-", "k-means: spherical centroids have unit norm");
	size_t		n = 3000;
	int			d = 24;
	float	   *x = clustered_points(n, d, 30, 0.3, 0.0);
	CvKmeansParams p = params_of(25, 10, rng_next(), CV_KMEANS_SPHERICAL);
	Run			r;
	int			j;

	normalize_rows(x, n, d);
	r = run_kmeans(x, n, d, &p);
	check_run_shape(&g, &r, n, d, p.k);
	for (j = 0; j < r.result.n_centroids; j++)
	{
		double		s = 0.0;
		int			i;

		for (i = 0; i < d; i++)
			s += (double) r.centroids[j * d + i] * r.centroids[j * d + i];
		check(&g, fabs(sqrt(s) - 1.0) <= 1e-6, "centroid %d has norm %.9f", j, sqrt(s));
	}
	free_run(&r);
	free(x);
	finish_group(&g);
}

/*
 * L2 inertia never rises: the assignment and the exact mean each lower it.
 * The stored mean is rounded to float4, which can raise a cluster's sum by
 * about n_c |c| 2^-24 |x - c|; a relative 1e-6 covers that.
 */
static void
test_kmeans_inertia(void)
{
	Group		g = new_group("-", "k-means: L2 inertia non-increasing");
	int			rep;

	for (rep = 0; rep < 6; rep++)
	{
		size_t		n = 2000 + 500 * rep;
		int			d = 3 + 10 * rep;
		float	   *x = rep % 2 ? uniform_points(n, d, -1, 1)
			: clustered_points(n, d, 40, 0.5, 3.0);
		CvKmeansParams p = params_of(20 + 15 * rep, 15, rng_next(), CV_KMEANS_L2);
		Run			r = run_kmeans(x, n, d, &p);
		int			t;

		check_run_shape(&g, &r, n, d, p.k);
		for (t = 1; t < r.result.iterations_run; t++)
			check(&g, r.history[t] <= r.history[t - 1] * (1.0 + 1e-6),
				  "rep %d: inertia rose from %.17g to %.17g at %d",
				  rep, r.history[t - 1], r.history[t], t);
		check(&g, r.result.iterations_run < 2 || r.history[r.result.iterations_run - 1] < r.history[0],
			  "rep %d: no progress", rep);
		free_run(&r);
		free(x);
	}
	finish_group(&g);
}

/* Seeds are distinct data points, one per far-apart cluster (D^2 weighting). */
static void
test_seed_properties(void)
{
	Group		g = new_group("-", "seeding: distinct data points, D^2 weighting");
	size_t		n = 2000;
	int			d = 6;
	int			k = 8;
	float	   *x = xmalloc(sizeof(float) * n * d);
	float		seeds[8 * 6];
	int			rep;
	size_t		i;
	int			j;

	/* k tight groups 1000 apart: k-means++ picks one point in each */
	for (i = 0; i < n; i++)
		for (j = 0; j < d; j++)
			x[i * d + j] = (float) ((j == 0 ? 1000.0 * (i % k) : 0.0) + rng_uniform(-1, 1));
	for (rep = 0; rep < 20; rep++)
	{
		CvKmeansParams p = params_of(k, 0, rng_next(), CV_KMEANS_L2);
		int			n_seeds = -1;
		int			seen = 0;

		poison(seeds, 8 * 6, NULL, 0, NULL, 0);
		check(&g, cv_kmeans_seed(x, n, d, &p, seeds, &n_seeds) == CV_MATH_OK && n_seeds == k,
			  "seeding failed or short: %d", n_seeds);
		for (j = 0; j < k; j++)
		{
			int			group = (int) lround(seeds[j * d] / 1000.0);
			int			member = 0;

			for (i = 0; i < n; i++)
				member |= memcmp(x + i * d, seeds + j * d, sizeof(float) * d) == 0;
			check(&g, member, "seed %d is not a data point", j);
			if (group >= 0 && group < k)
				seen |= 1 << group;
		}
		check(&g, seen == (1 << k) - 1, "seed %llu: groups hit 0x%x",
			  (unsigned long long) p.seed, seen);
	}
	free(x);
	finish_group(&g);
}

/* Seeds counted as "recent" by the calibration's second statistic. */
#define RECENT_SEEDS 8

/* Running sums of the per-draw calibration statistics. */
typedef struct Calibration
{
	double		sum_y;			/* sum of D(chosen) - E[D(chosen)] */
	double		var_y;
	double		sum_a;			/* sum of [chosen near a recent seed] - P(...) */
	double		var_a;
	long		draws;
	long		zero_draws;		/* chosen points already on a centre */
} Calibration;

/* Index of the nearest of the first t seeds (lowest on ties) and its distance. */
static int
nearest_seed(const float *c, const float *seeds, int t, int d, double *dist)
{
	*dist = INFINITY;
	return t == 0 ? -1 : brute_nearest(CV_NEAREST_L2, c, seeds, t, d, dist);
}

/*
 * Adds draw t's two statistics.  Under exact k-means++ the t-th seed is x
 * with probability D(x) / sum D (D to seeds 0 .. t-1), so D(chosen) has
 * mean sum D^2 / sum D and variance sum D^3 / sum D - mean^2, and the
 * chance that the chosen point's nearest seed is one of the last
 * RECENT_SEEDS is the D-mass of those points.
 */
static void
calibrate_draw(Calibration *cal, const double *dist, const int *near, int n,
			   int t, double dc, int near_c)
{
	double		s1 = 0.0, s2 = 0.0, s3 = 0.0, recent = 0.0;
	double		mean;
	double		p;
	int			i;

	for (i = 0; i < n; i++)
	{
		s1 += dist[i];
		s2 += dist[i] * dist[i];
		s3 += dist[i] * dist[i] * dist[i];
		if (near[i] >= t - RECENT_SEEDS)
			recent += dist[i];
	}
	mean = s2 / s1;
	p = recent / s1;
	cal->sum_y += dc - mean;
	cal->var_y += s3 / s1 - mean * mean;
	cal->sum_a += (near_c >= t - RECENT_SEEDS) - p;
	cal->var_a += p * (1.0 - p);
	cal->draws++;
	cal->zero_draws += dc == 0.0;
}

/* Replays one seeding in order, adding every draw's statistics. */
static void
calibrate_seeding(Calibration *cal, const float *x, int n, int d,
				  const float *seeds, int k, double *dist, int *near)
{
	int			t;
	int			i;

	for (i = 0; i < n; i++)
		dist[i] = INFINITY;
	for (t = 0; t < k; t++)
	{
		const float *c = seeds + (size_t) t * d;
		double		dc;
		int			near_c = nearest_seed(c, seeds, t, d, &dc);

		if (t > 0)
			calibrate_draw(cal, dist, near, n, t, dc, near_c);
		for (i = 0; i < n; i++)
		{
			double		v = cv_distance->l2_squared(x + (size_t) i * d, c, d);

			if (v < dist[i])
			{
				dist[i] = v;
				near[i] = t;
			}
		}
	}
}

/*
 * Every draw of the lazy (rejection) seeding follows the k-means++ law
 * given the seeds before it: two standardised sums over all draws of many
 * runs must satisfy |z| < 5 (a correct sampler fails about once in a
 * million runs).  In 2-D with k = 64, draws from the 9th on have pending
 * centres (up to 16) that lower D near themselves; a wrong acceptance
 * ratio moves probability into or out of exactly the points near recent
 * seeds, which the second statistic counts.  A chosen point with D = 0
 * fails outright.
 */
static void
test_seed_calibration(void)
{
	Group		g = new_group("-", "seeding: every lazy draw follows the k-means++ law");
	int			n = 400;
	int			d = 2;
	int			k = 64;
	int			runs = 600;
	float	   *x = uniform_points(n, d, -1, 1);
	float	   *seeds = xmalloc(sizeof(float) * k * d);
	double	   *dist = xmalloc(sizeof(double) * n);
	int		   *near = xmalloc(sizeof(int) * n);
	Calibration cal;
	double		zy;
	double		za;
	int			r;

	memset(&cal, 0, sizeof(cal));
	for (r = 0; r < runs; r++)
	{
		CvKmeansParams p = params_of(k, 0, rng_next(), CV_KMEANS_L2);
		int			n_seeds = 0;

		check(&g, cv_kmeans_seed(x, n, d, &p, seeds, &n_seeds) == CV_MATH_OK
			  && n_seeds == k, "seeding failed");
		calibrate_seeding(&cal, x, n, d, seeds, k, dist, near);
	}
	zy = cal.sum_y / sqrt(cal.var_y);
	za = cal.sum_a / sqrt(cal.var_a);
	check(&g, fabs(zy) < 5.0, "D(chosen): z = %.2f over %ld draws", zy, cal.draws);
	check(&g, fabs(za) < 5.0, "near a recent seed: z = %.2f over %ld draws", za, cal.draws);
	check(&g, cal.zero_draws == 0, "%ld draws chose a point on a centre", cal.zero_draws);
	printf("     -       (calibration over %ld draws: z = %.2f and %.2f)\n",
		   cal.draws, zy, za);
	free(x);
	free(seeds);
	free(dist);
	free(near);
	finish_group(&g);
}

/* Progress calls recorded by the callback. */
typedef struct ProgressLog
{
	int			calls;
	int			seeding_calls;
	int			last;
	int			total;
	int			in_order;
} ProgressLog;

/* The progress callback under test. */
static void
record_progress(void *arg, int iteration, int total)
{
	ProgressLog *log = arg;

	log->calls++;
	if (iteration == 0)
	{
		log->seeding_calls++;
		return;
	}
	log->in_order &= iteration >= log->last && total == log->total;
	log->last = iteration;
}

/* Progress: (0, total) during seeding, then (1 .. total, total), ending at total. */
static void
test_kmeans_progress(void)
{
	Group		g = new_group("-", "k-means: progress callback");
	size_t		n = 3000;
	int			d = 5;
	float	   *x = uniform_points(n, d, -1, 1);
	ProgressLog log = {0, 0, 0, 7, 1};
	CvKmeansParams p = params_of(600, 7, rng_next(), CV_KMEANS_L2);
	Run			r;

	p.progress = record_progress;
	p.progress_arg = &log;
	r = run_kmeans(x, n, d, &p);
	check(&g, r.status == CV_MATH_OK, "status");
	check(&g, log.in_order && log.last == 7, "iterations reported out of order or not to the end (%d)",
		  log.last);
	check(&g, log.seeding_calls == 600 / 256, "%d seeding calls", log.seeding_calls);
	/* one call per assignment; an early stop's call says (7, 7) */
	check(&g, log.calls - log.seeding_calls == r.result.iterations_run,
		  "%d iteration calls for %d iterations",
		  log.calls - log.seeding_calls, r.result.iterations_run);
	free_run(&r);
	free(x);
	finish_group(&g);
}

/*
 * A pass longer than one step (2^27 multiply-adds) also reports inside it,
 * with the iterations done so far: a caller can stop a large run within a
 * fraction of a second, not only between iterations.
 */
static void
test_kmeans_progress_within_pass(void)
{
	Group		g = new_group("-", "k-means: progress inside a long assignment pass");
	size_t		n = 20000;
	int			d = 64;
	float	   *x = uniform_points(n, d, -1, 1);
	ProgressLog log = {0, 0, 0, 2, 1};
	CvKmeansParams p = params_of(256, 2, rng_next(), CV_KMEANS_L2);
	Run			r;

	p.progress = record_progress;
	p.progress_arg = &log;
	r = run_kmeans(x, n, d, &p);
	check(&g, r.status == CV_MATH_OK, "status");
	check(&g, log.in_order && log.last == 2, "reports out of order or not to the end (%d)", log.last);
	/* 256 x 64 per point: steps of 8,192 points, 2 reports inside each of 2 passes */
	check(&g, log.calls - log.seeding_calls >= r.result.iterations_run + 2,
		  "%d calls after seeding for %d iterations", log.calls - log.seeding_calls,
		  r.result.iterations_run);
	free_run(&r);
	free(x);
	finish_group(&g);
}

/* Bad arguments refused; every allocation failure reported without leaks. */
static void
test_kmeans_errors(void)
{
	Group		g = new_group("-", "k-means: bad arguments, allocation failures");
	size_t		n = 500;
	int			d = 4;
	float	   *x = uniform_points(n, d, -1, 1);
	float		c[40 * 4];
	CvKmeansParams p = params_of(40, 3, 1, CV_KMEANS_L2);
	CvKmeansParams bad;
	CvKmeansResult res;
	FailingAllocator f = {-1, 0, 0};
	CvAllocator a = {failing_alloc, failing_free, &f};
	int			at;

	check(&g, cv_kmeans(NULL, n, d, &p, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "NULL points");
	check(&g, cv_kmeans(x, 0, d, &p, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "n = 0");
	check(&g, cv_kmeans(x, n, 0, &p, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "d = 0");
	check(&g, cv_kmeans(x, n, d, &p, NULL, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "NULL centroids");
	check(&g, cv_kmeans(x, n, d, &p, c, NULL, NULL, NULL) == CV_MATH_BAD_ARGUMENT, "NULL result");
	bad = p;
	bad.k = 0;
	check(&g, cv_kmeans(x, n, d, &bad, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "k = 0");
	bad = p;
	bad.iterations = -1;
	check(&g, cv_kmeans(x, n, d, &bad, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "iterations < 0");
	bad = p;
	bad.metric = (CvKmeansMetric) 9;
	check(&g, cv_kmeans(x, n, d, &bad, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "metric");
	x[17] = INFINITY;
	check(&g, cv_kmeans(x, n, d, &p, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "infinite point");
	check(&g, cv_kmeans_lloyd(x, n, d, &p, c, NULL, NULL, &res) == CV_MATH_BAD_ARGUMENT, "lloyd: infinite");
	x[17] = 0.5f;
	p.allocator = &a;
	for (at = 0; at < 10000; at++)
	{
		CvMathStatus st;
		int32_t		assign[500];

		f.fail_at = at;
		f.calls = 0;
		st = cv_kmeans(x, n, d, &p, c, assign, NULL, &res);
		check(&g, f.live == 0, "allocation %d failed: %d blocks leaked", at, f.live);
		if (st == CV_MATH_OK)
			break;
		check(&g, st == CV_MATH_OUT_OF_MEMORY, "allocation %d: status %d", at, (int) st);
	}
	check(&g, at > 10 && at < 10000, "%d allocations", at);
	free(x);
	finish_group(&g);
}

/* Every supported level: nearest exactness and kernel bitwise checks. */
static void
test_nearest_variants(void)
{
	int			level;

	for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
	{
		const CvNearestKernels *k = cv_nearest_kernels_for((CvSimdLevel) level);

		if (k == NULL || !cv_simd_use((CvSimdLevel) level))
		{
			skip_group(level_names[level], "nearest exactness, ties, huge; kernel bitwise");
			continue;
		}
		test_nearest_exact(k->name);
		test_nearest_ties(k->name);
		test_nearest_huge(k->name);
		test_nearest_raw(k->name, k, level == CV_SIMD_SCALAR);
	}
	cv_simd_use(cv_simd_best());
}

int
main(void)
{
	uint64_t	seed = choose_seed();

	rng_state = seed;
	printf("seed %llu (set CV_TEST_SEED=%llu to replay)\n",
		   (unsigned long long) seed, (unsigned long long) seed);
	printf("best SIMD level: %s\n", level_names[cv_simd_best()]);
	test_prng_streams();
	test_prng_ranges();
	test_nearest_variants();
	test_nearest_distances();
	test_nearest_errors();
	test_kmeans_determinism();
	test_kmeans_update();
	test_kmeans_refill();
	test_kmeans_no_empty();
	test_kmeans_few_distinct();
	test_kmeans_spherical();
	test_kmeans_inertia();
	test_seed_properties();
	test_seed_calibration();
	test_kmeans_progress();
	test_kmeans_progress_within_pass();
	test_kmeans_errors();
	test_kmeans_large_k();
	if (groups_skipped > 0)
		printf("%d skipped\n", groups_skipped);
	printf("%d passed, %d failed\n", groups_passed, groups_failed);
	return groups_failed == 0 ? 0 : 1;
}
