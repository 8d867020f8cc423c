/*
 * test_kmeans_seed.c: cv_kmeans_seed_with, the seeding whose refresh step is
 * the caller's callback (a GPU computing the distances).
 *
 * A callback that folds the centres into dist with cv_distance's float64
 * l2_squared (the definition the built-in refresh computes) must give the
 * seeds of cv_kmeans_seed bit for bit, on fresh random data (the seed is
 * printed; CV_TEST_SEED replays a run): uniform and clustered points,
 * duplicates, k above the number of distinct points, k past the pending
 * limit.  Also: a NULL callback is cv_kmeans_seed, the callback sees +inf
 * before its first call, and a failing callback stops seeding with its
 * status.  Ends with "N passed, N failed".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "kmeans.h"

typedef struct Refresher
{
	const float *points;
	size_t		n;
	int			d;
	int			calls;
	int			centres;		/* total count over the calls */
	int			saw_infinity;	/* dist was all +inf at the first call */
	int			fail_at;		/* call number that fails; 0: none */
} Refresher;

static uint64_t rng_state;
static int	passed;
static int	failed;

/* splitmix64, independent of the PRNG under test. */
static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A double in [lo, hi). */
static double
rng_uniform(double lo, double hi)
{
	return lo + (hi - lo) * ((double) (rng_next() >> 11) * 0x1.0p-53);
}

/* Counts one check, printing a failure. */
static void
check(int ok, const char *what)
{
	if (ok)
		passed++;
	else
		failed++;
	printf("%s: %s\n", ok ? "ok" : "FAILED", what);
}

/* The refresh by definition: min over the centres of the float64 l2_squared. */
static CvMathStatus
cpu_refresh(void *arg, const float *centres, int count, double *dist)
{
	Refresher  *r = arg;
	size_t		i;
	int			c;

	r->calls++;
	r->centres += count;
	if (r->calls == 1)
	{
		r->saw_infinity = 1;
		for (i = 0; i < r->n; i++)
			if (!(isinf(dist[i]) && dist[i] > 0))
				r->saw_infinity = 0;
	}
	if (r->fail_at == r->calls)
		return CV_MATH_OUT_OF_MEMORY;
	for (i = 0; i < r->n; i++)
		for (c = 0; c < count; c++)
		{
			double		v = cv_distance->l2_squared(r->points + i * (size_t) r->d,
													centres + (size_t) c * r->d, r->d);

			if (v < dist[i])
				dist[i] = v;
		}
	return CV_MATH_OK;
}

/* n points of d floats: uniform, clustered, or few distinct values. */
static float *
make_points(size_t n, int d, int kind)
{
	float	   *x = malloc(sizeof(float) * n * (size_t) d);
	int			centres = 20;
	float	   *ctr = malloc(sizeof(float) * (size_t) centres * d);
	size_t		i;
	int			j;

	for (j = 0; j < centres * d; j++)
		ctr[j] = (float) rng_uniform(-10.0, 10.0);
	for (i = 0; i < n; i++)
	{
		int			c = (int) (rng_next() % centres);

		for (j = 0; j < d; j++)
		{
			float	   *v = &x[i * (size_t) d + j];

			if (kind == 0)
				*v = (float) rng_uniform(-1.0, 1.0);
			else if (kind == 1)
				*v = ctr[c * d + j] + (float) rng_uniform(-0.5, 0.5);
			else
				*v = (float) (rng_next() % 3);	/* 3^d distinct points at most */
		}
	}
	free(ctr);
	return x;
}

/* Seeds both ways and compares. */
static void
compare_case(const char *name, size_t n, int d, int k, int kind, uint64_t seed)
{
	float	   *x = make_points(n, d, kind);
	float	   *a = malloc(sizeof(float) * (size_t) k * d);
	float	   *b = malloc(sizeof(float) * (size_t) k * d);
	CvKmeansParams params;
	Refresher	r;
	int			na = -1,
				nb = -2;
	CvMathStatus sa,
				sb;
	char		what[256];

	memset(&params, 0, sizeof(params));
	params.k = k;
	params.iterations = 0;
	params.seed = seed;
	params.metric = CV_KMEANS_L2;
	memset(&r, 0, sizeof(r));
	r.points = x;
	r.n = n;
	r.d = d;
	memset(a, 0xff, sizeof(float) * (size_t) k * d);
	memset(b, 0xff, sizeof(float) * (size_t) k * d);
	sa = cv_kmeans_seed(x, n, d, &params, a, &na);
	sb = cv_kmeans_seed_with(x, n, d, &params, cpu_refresh, &r, b, &nb);
	snprintf(what, sizeof(what),
			 "%s (n %zu, d %d, k %d): same %d seeds, %d refreshes of %d centres",
			 name, n, d, k, na, r.calls, r.centres);
	check(sa == CV_MATH_OK && sb == CV_MATH_OK && na == nb && na >= 1 && na <= k
		  && memcmp(a, b, sizeof(float) * (size_t) na * d) == 0
		  && (na == 1 || (r.calls >= 1 && r.saw_infinity)), what);
	/* a NULL callback is the built-in refresh */
	memset(b, 0xff, sizeof(float) * (size_t) k * d);
	sb = cv_kmeans_seed_with(x, n, d, &params, NULL, NULL, b, &nb);
	snprintf(what, sizeof(what), "%s: NULL callback equals cv_kmeans_seed", name);
	check(sb == CV_MATH_OK && na == nb
		  && memcmp(a, b, sizeof(float) * (size_t) na * d) == 0, what);
	free(x);
	free(a);
	free(b);
}

/* A failing callback stops seeding with its status; bad arguments are refused. */
static void
failure_cases(void)
{
	size_t		n = 500;
	int			d = 4;
	int			k = 50;
	float	   *x = make_points(n, d, 0);
	float	   *c = malloc(sizeof(float) * (size_t) k * d);
	CvKmeansParams params;
	Refresher	r;
	int			ns;

	memset(&params, 0, sizeof(params));
	params.k = k;
	params.seed = 7;
	memset(&r, 0, sizeof(r));
	r.points = x;
	r.n = n;
	r.d = d;
	r.fail_at = 2;
	check(cv_kmeans_seed_with(x, n, d, &params, cpu_refresh, &r, c, &ns)
		  == CV_MATH_OUT_OF_MEMORY && r.calls == 2,
		  "a failing callback's status is returned, no call after it");
	check(cv_kmeans_seed_with(NULL, n, d, &params, cpu_refresh, &r, c, &ns)
		  == CV_MATH_BAD_ARGUMENT, "NULL points refused");
	check(cv_kmeans_seed_with(x, n, d, &params, cpu_refresh, &r, c, NULL)
		  == CV_MATH_BAD_ARGUMENT, "NULL n_seeds refused");
	x[3] = NAN;
	check(cv_kmeans_seed_with(x, n, d, &params, cpu_refresh, &r, c, &ns)
		  == CV_MATH_BAD_ARGUMENT, "non-finite point refused");
	free(x);
	free(c);
}

int
main(void)
{
	const char *env = getenv("CV_TEST_SEED");
	uint64_t	seed = env ? strtoull(env, NULL, 10) : (uint64_t) time(NULL);

	printf("test_kmeans_seed seed %llu\n", (unsigned long long) seed);
	rng_state = seed;
	compare_case("uniform", 3000, 16, 100, 0, seed);
	compare_case("uniform, k past the pending limit", 6000, 8, 1500, 0, seed + 1);
	compare_case("clustered", 5000, 32, 300, 1, seed + 2);
	compare_case("d 1, few distinct points, k above them", 400, 1, 10, 2, seed + 3);
	compare_case("d 3, k above 27 distinct points", 2000, 3, 40, 2, seed + 4);
	compare_case("one point", 1, 5, 3, 0, seed + 5);
	compare_case("d 130, k = n", 257, 130, 257, 0, seed + 6);
	failure_cases();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
