/*
 * test_sq8: 8-bit residual codes (src/math/sq8.c).  cv_sq8_encode's codes
 * round-trip within half a step and its factors bound what they claim;
 * cv_sq8_lower_bound never exceeds the exact distance of the float64
 * kernels (scalar level, as the scan's cvivf_distance computes it) for any
 * metric, SIMD level, dimension or magnitude, and stays close to it on
 * ordinary data.  A deliberately wrong bound (no error term) must fail
 * somewhere, to show the checks can; vectors exactly on the code grid
 * test the rounding allowances where they are all that is left.  Seed
 * from CV_TEST_SEED or the clock, printed.  Ends "N passed, N failed".
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "sq8.h"

#define MAX_N 16000
#define MAX_VECTORS 400
#define N_KINDS 6
#define N_LEVELS 3

static const char *const kind_names[N_KINDS] = {"gaussian", "uniform", "huge", "tiny", "mixed", "extreme"};
static unsigned long long state;

/* Counts of one named check: the program passes a check with no failures. */
typedef struct Tally
{
	const char *name;
	long		cases;
	long		failures;
} Tally;

static Tally encode_tally = {"encode round trip and factors", 0, 0};
static Tally failure_tally = {"non-finite input fails cleanly", 0, 0};
static Tally bound_tally = {"bound <= exact distance", 0, 0};
static Tally tight_tally = {"bound within 3 errors of exact (ordinary data)", 0, 0};
static Tally dispatch_tally = {"cv_sq8_lower_bound follows cv_simd_use", 0, 0};
static long teeth_violations;

/* Ratios bound / exact for L2, gaussian, n = 128 and 1024, per level. */
static double ratios[2][N_LEVELS][4 * MAX_VECTORS];
static int	n_ratios[2][N_LEVELS];

/* Uniform in [0, 1), from the seeded LCG. */
static double
uniform(void)
{
	state = state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double) (state >> 11) / 9007199254740992.0;
}

/* Standard normal (Box-Muller). */
static double
gaussian(void)
{
	double		a = uniform();
	double		b = uniform();

	return sqrt(-2 * log(a + 1e-300)) * cos(6.283185307179586 * b);
}

/* One random element of a kind. */
static double
element(int kind)
{
	switch (kind)
	{
		case 1:
			return uniform() * 2 - 1;
		case 2:
			return gaussian() * 1e30;
		case 3:
			return gaussian() * 1e-30;
		case 4:
			return gaussian() * pow(10, uniform() * 6 - 3);
		case 5:
			/* norms past FLT_MAX, elements (and sums of two) still finite */
			return fmax(-1e38, fmin(1e38, gaussian() * 3e37));
	}
	return gaussian();
}

/* base + one random vector of a kind (base may be NULL). */
static void
fill(float *x, const float *base, int n, int kind, double spread)
{
	for (int j = 0; j < n; j++)
		x[j] = (float) ((base ? base[j] : 0) + spread * element(kind));
}

/* Counts one case of a check. */
static void
tally(Tally *t, int failed)
{
	t->cases++;
	t->failures += failed ? 1 : 0;
}

/* The scan's distance (src/ivf/metric.c) with the scalar float64 kernels. */
static double
exact_distance(int metric, const float *q, const float *x, int n)
{
	const CvDistanceKernels *k = cv_distance_kernels_for(CV_SIMD_SCALAR);

	if (metric == 1)
		return sqrt(k->l2_squared(q, x, n));
	if (metric == 2)
		return -k->inner_product(q, x, n);
	return cv_cosine_distance_from_parts(k->cosine_parts(q, x, n));
}

/* Encodes x and checks codes and factors against long double arithmetic. */
static void
encode_checked(const float *x, const float *c, int n, int8_t *codes, CvSq8Factors *f)
{
	long double e2 = 0,
				k2 = 0,
				x2 = 0;
	int			bad = 0;

	memset(codes, 0x55, sizeof(int8_t) * (unsigned) n);
	if (!cv_sq8_encode(x, c, n, codes, f))
		bad = 1;
	for (int j = 0; j < n && !bad; j++)
	{
		long double r = (long double) x[j] - c[j];
		long double e = r - (long double) f->scale * codes[j];

		if (codes[j] < -127 || fabsl(e) > 0.5L * f->scale * (1 + 1e-6L))
			bad = 1;
		e2 += e * e;
		k2 += (long double) codes[j] * codes[j];
		x2 += (long double) x[j] * x[j];
	}
	if (!bad && (f->error < sqrtl(e2) || f->code_norm < sqrtl(k2) ||
				 f->vector_norm > sqrtl(x2) || (e2 == 0 && f->scale == 0 && f->error != 0)))
		bad = 1;
	if (bad)
		printf("FAIL encode n=%d: scale %g error %g (recomputed %Lg)\n",
			   n, f->scale, f->error, sqrtl(e2));
	tally(&encode_tally, bad);
}

/* A NaN or infinite element: false, zero codes, error +inf, bounds -inf. */
static void
check_failure(float *x, const float *c, const float *q, int n, int8_t *codes, float *work)
{
	CvSq8Factors f;
	CvSq8Query	p;
	int			bad;
	float		saved = x[n / 2];

	x[n / 2] = (n % 2) ? NAN : INFINITY;
	memset(codes, 0x55, n);
	bad = cv_sq8_encode(x, c, n, codes, &f) || f.error != INFINITY;
	for (int j = 0; j < n; j++)
		bad |= codes[j] != 0;
	for (int metric = 1; metric <= 3; metric++)
	{
		cv_sq8_prepare(&p, metric, q, c, n, work);
		bad |= cv_sq8_lower_bound(&p, codes, &f) != -INFINITY;
	}
	x[n / 2] = saved;
	if (bad)
		printf("FAIL non-finite input n=%d\n", n);
	tally(&failure_tally, bad);
}

/* || a - c || + || x - c || in float64. */
static double
residual_norms(const float *a, const float *x, const float *c, int n)
{
	const CvDistanceKernels *k = cv_distance_kernels_for(CV_SIMD_SCALAR);

	return sqrt(k->l2_squared(a, c, n)) + sqrt(k->l2_squared(x, c, n));
}

/* The bound is at most exact, and near it on ordinary data (tight). */
static void
check_bound(int metric, int level, const CvSq8Query *p, const float *q, const float *x,
			const float *c, const int8_t *codes, const CvSq8Factors *f, int tight, const char *what)
{
	int			n = p->n;
	double		exact = exact_distance(metric, q, x, n);
	double		bound = cv_sq8_lower_bound_at((CvSimdLevel) level, p, codes, f);
	double		qn = sqrt(cv_distance_kernels_for(CV_SIMD_SCALAR)->norm_squared(q, n));
	double		xn = sqrt(cv_distance_kernels_for(CV_SIMD_SCALAR)->norm_squared(x, n));
	double		floor;
	int			bad = !(bound <= exact) && !isnan(exact);

	if (bad)
		printf("FAIL %s metric %d level %d n=%d: bound %.17g > exact %.17g\n",
			   what, metric, level, n, bound, exact);
	tally(&bound_tally, bad);
	if (!tight || isnan(exact))
		return;
	/* 3 errors, plus 1e-5 of the magnitudes float32 rounding acts on */
	if (metric == 1)
		floor = exact - 3 * f->error - 1e-5 * (exact + residual_norms(q, x, c, n));
	else if (metric == 2)
		floor = exact - 3 * qn * f->error - 1e-5 * qn * (xn + residual_norms(c, x, c, n));
	else
		floor = exact - 3 * f->error / xn - 1e-5 * (1 + residual_norms(c, x, c, n) / xn);
	if (!(bound >= floor))
		printf("FAIL loose %s metric %d level %d n=%d: bound %.17g exact %.17g error %g\n",
			   what, metric, level, n, bound, exact, f->error);
	tally(&tight_tally, !(bound >= floor));
}

/* || q - x^ || without the error term: not a bound, and must fail somewhere. */
static void
check_teeth(const float *q, const float *c, const float *x, const int8_t *codes,
			const CvSq8Factors *f, int n)
{
	long double s = 0;

	for (int j = 0; j < n; j++)
	{
		long double d = (long double) q[j] - c[j] - (long double) f->scale * codes[j];

		s += d * d;
	}
	if ((double) sqrtl(s) > exact_distance(1, q, x, n))
		teeth_violations++;
}

/* cv_sq8_lower_bound at the level cv_simd_use picked equals the _at variant. */
static void
check_dispatch(const CvSq8Query *p, const int8_t *codes, const CvSq8Factors *f)
{
	for (int level = 0; level < N_LEVELS; level++)
	{
		double		a,
					b;

		if (!cv_simd_use((CvSimdLevel) level))
			continue;
		a = cv_sq8_lower_bound(p, codes, f);
		b = cv_sq8_lower_bound_at((CvSimdLevel) level, p, codes, f);
		tally(&dispatch_tally, !(a == b || (isnan(a) && isnan(b))));
	}
	cv_simd_use(CV_SIMD_SCALAR);
}

/* The query of repetition rep: random, random, the centroid, zero, ulps from c. */
static void
make_query(float *q, const float *c, int n, int kind, int rep)
{
	if (rep < 2)
		fill(q, NULL, n, kind, 1.5);
	else if (rep == 2)
		memcpy(q, c, sizeof(float) * n);
	else if (rep == 3)
		memset(q, 0, sizeof(float) * n);
	else
		for (int j = 0; j < n; j++)
			q[j] = nextafterf(c[j], (j % 3) ? INFINITY : -INFINITY);
}

/*
 * Vector i: the centroid, a near-duplicate of q, zero, q itself, one 1e16
 * times farther from c than the others (float32 sums overflow; not for the
 * huge and extreme kinds, where it would overflow float32 itself), or
 * random.
 */
static void
make_vector(float *x, const float *c, const float *q, int n, int kind, int i)
{
	if (i == 0)
		memcpy(x, c, sizeof(float) * n);
	else if (i == 1)
		for (int j = 0; j < n; j++)
			x[j] = q[j] + (float) (1e-3 * fabs(q[j]) * gaussian());
	else if (i == 2)
		memset(x, 0, sizeof(float) * n);
	else if (i == 3)
		memcpy(x, q, sizeof(float) * n);
	else if (i == 4 && kind != 2 && kind != 5)
		fill(x, c, n, kind, 1e16);
	else
		fill(x, c, n, kind, 1.0);
}

/* Records bound / exact for the tightness summary. */
static void
record_ratio(int n, int level, const CvSq8Query *p, const float *q, const float *x,
			 const int8_t *codes, const CvSq8Factors *f)
{
	int			slot = n == 128 ? 0 : n == 1024 ? 1 : -1;
	double		exact = exact_distance(1, q, x, n);

	if (slot < 0 || exact <= 0)
		return;
	ratios[slot][level][n_ratios[slot][level]++] =
		cv_sq8_lower_bound_at((CvSimdLevel) level, p, codes, f) / exact;
}

/* One dimension, one kind: every query, vector, metric and level. */
static void
run_case(int n, int kind, float *c, float *q, float *x, int8_t *codes, float *work)
{
	int			vectors = 400000 / n;
	CvSq8Factors f;
	CvSq8Query	p;

	vectors = vectors < 8 ? 8 : vectors > MAX_VECTORS ? MAX_VECTORS : vectors;
	fill(c, NULL, n, kind, 1.0);
	for (int rep = 0; rep < 5; rep++)
	{
		make_query(q, c, n, kind, rep);
		for (int i = 0; i < vectors; i++)
		{
			int			ordinary = kind < 2 && rep < 2 && i >= 4;

			make_vector(x, c, q, n, kind, i);
			encode_checked(x, c, n, codes, &f);
			if (kind == 0 && rep < 2 && i >= 5)
				check_teeth(q, c, x, codes, &f, n);
			for (int metric = 1; metric <= 3; metric++)
			{
				cv_sq8_prepare(&p, metric, q, c, n, work);
				if (i == 5)
					check_dispatch(&p, codes, &f);
				for (int level = 0; level < N_LEVELS; level++)
				{
					if (!cv_simd_supported((CvSimdLevel) level))
						continue;
					check_bound(metric, level, &p, q, x, c, codes, &f, ordinary, kind_names[kind]);
					if (metric == 1 && kind == 0 && ordinary && i >= 5)
						record_ratio(n, level, &p, q, x, codes, &f);
				}
			}
		}
	}
	check_failure(x, c, q, n, codes, work);
}

/*
 * Vectors exactly on the code grid (c coarse, x = c + 2^(e-10) k with max
 * |k| = 127, so error is only the float64 allowance): the bound is then
 * as tight as its rounding allowances, which these cases exercise.  The
 * query is a ulp from x, x itself, random, or x times 1 + 1e-6 noise.
 */
static void
run_grid(float *c, float *q, float *x, int8_t *codes, float *work)
{
	for (int t = 0; t < 4000; t++)
	{
		int			n = 1 + (int) (uniform() * uniform() * 4096);
		int			e = (int) (uniform() * 60) - 30;
		CvSq8Factors f;
		CvSq8Query	p;

		for (int j = 0; j < n; j++)
		{
			int			k = j == 0 ? 127 : (int) floor(uniform() * 255) - 127;

			c[j] = (float) ldexp(floor(uniform() * 64 - 32), e - 4);
			x[j] = (float) (c[j] + ldexp(k, e - 10));
		}
		encode_checked(x, c, n, codes, &f);
		for (int j = 0; j < n; j++)
		{
			if (t % 4 == 0)
				q[j] = nextafterf(x[j], uniform() < 0.5 ? INFINITY : -INFINITY);
			else if (t % 4 == 1)
				q[j] = x[j];
			else if (t % 4 == 2)
				q[j] = (float) ldexp(uniform() * 2 - 1, e);
			else
				q[j] = (float) (x[j] * (1 + 1e-6 * (uniform() - 0.5)));
		}
		for (int metric = 1; metric <= 3; metric++)
		{
			cv_sq8_prepare(&p, metric, q, c, n, work);
			for (int level = 0; level < N_LEVELS; level++)
				if (cv_simd_supported((CvSimdLevel) level))
					check_bound(metric, level, &p, q, x, c, codes, &f, 0, "grid");
		}
	}
}

/* qsort order of doubles. */
static int
compare_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Median and worst ratio bound / exact per level, for the record. */
static void
print_tightness(void)
{
	for (int slot = 0; slot < 2; slot++)
		for (int level = 0; level < N_LEVELS; level++)
		{
			int			m = n_ratios[slot][level];

			if (m == 0)
				continue;
			qsort(ratios[slot][level], m, sizeof(double), compare_double);
			printf("L2 gaussian n=%d level %d: bound/exact median %.4f worst %.4f (%d vectors)\n",
				   slot ? 1024 : 128, level, ratios[slot][level][m / 2], ratios[slot][level][0], m);
		}
}

/* Prints one check's line and adds it to the totals. */
static void
report(const Tally *t, int *passed, int *failed)
{
	printf("%s %s: %ld cases, %ld failed\n", t->failures ? "FAIL" : "ok  ", t->name,
		   t->cases, t->failures);
	if (t->failures || t->cases == 0)
		(*failed)++;
	else
		(*passed)++;
}

int
main(void)
{
	const int	lengths[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 100, 128, 784, 1024, 1536, 4096, 16000};
	const char *env = getenv("CV_TEST_SEED");
	unsigned long long seed = env ? strtoull(env, NULL, 10) : (unsigned long long) time(NULL);
	int			passed = 0,
				failed = 0;
	float	   *c = malloc(sizeof(float) * MAX_N);
	float	   *q = malloc(sizeof(float) * MAX_N);
	float	   *x = malloc(sizeof(float) * MAX_N);
	float	   *work = malloc(sizeof(float) * MAX_N);
	int8_t	   *codes = malloc(MAX_N);

	printf("seed %llu (CV_TEST_SEED=%llu replays)\n", seed, seed);
	state = seed;
	for (int level = 0; level < N_LEVELS; level++)
		if (!cv_simd_supported((CvSimdLevel) level))
			printf("skip level %d: not supported here\n", level);
	for (unsigned i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
		for (int kind = 0; kind < N_KINDS; kind++)
			run_case(lengths[i], kind, c, q, x, codes, work);
	run_grid(c, q, x, codes, work);
	print_tightness();
	report(&encode_tally, &passed, &failed);
	report(&failure_tally, &passed, &failed);
	report(&bound_tally, &passed, &failed);
	report(&tight_tally, &passed, &failed);
	report(&dispatch_tally, &passed, &failed);
	printf("%s a bound without the error term exceeds the exact distance %ld times\n",
		   teeth_violations ? "ok  " : "FAIL", teeth_violations);
	if (teeth_violations)
		passed++;
	else
		failed++;
	free(c);
	free(q);
	free(x);
	free(work);
	free(codes);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
