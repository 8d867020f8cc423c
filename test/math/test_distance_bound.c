/*
 * test_distance_bound: cv_l2_squared_lower_bound never exceeds the exact
 * squared L2 distance (the float64 kernels) and stays within its margin of
 * it, for every SIMD variant, on random vectors of mixed magnitudes, equal
 * vectors, tiny differences and values whose squares overflow float32.
 * Seed from CV_TEST_SEED or the clock, printed.  Ends "N passed, N failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "distance.h"
#include "distance_bound.h"

static unsigned long long state;

static double
uniform(void)
{
	state = state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double) (state >> 11) / 9007199254740992.0;
}

static void
fill(float *x, int n, int kind)
{
	for (int j = 0; j < n; j++)
	{
		double		v = uniform() * 2 - 1;

		if (kind == 1)
			v *= pow(10, uniform() * 6 - 3);
		else if (kind == 2)
			v *= 1e-30;
		else if (kind == 3)
			v *= 1e30;
		x[j] = (float) v;
	}
}

/* One case: the bound is below the exact value and within the margin. */
static int
check(const float *a, const float *b, int n, const char *what)
{
	double		exact = cv_distance->l2_squared(a, b, n);
	double		bound = cv_l2_squared_lower_bound(a, b, n);
	double		margin = 2 * (n + 6) * ldexp(1.0, -24) * exact + (n + 2) * 1.2e-38;

	if (bound < 0)
		return isfinite((float) exact) && exact < 1e38 ? (printf("FAIL %s n=%d: no bound for a finite sum %g\n", what, n, exact), 1) : 0;
	if (bound > exact || exact - bound > margin)
	{
		printf("FAIL %s %s n=%d: bound %.17g exact %.17g\n", cv_distance->name, what, n, bound, exact);
		return 1;
	}
	return 0;
}

int
main(void)
{
	const int	lengths[] = {1, 3, 15, 16, 17, 31, 32, 33, 128, 1023, 1024, 16000};
	const char *env = getenv("CV_TEST_SEED");
	unsigned long long seed = env ? strtoull(env, NULL, 10) : (unsigned long long) time(NULL);
	int			passed = 0,
				failed = 0;
	float	   *a = malloc(sizeof(float) * 16000);
	float	   *b = malloc(sizeof(float) * 16000);

	printf("seed %llu\n", seed);
	state = seed;
	for (int level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
	{
		int			bad = 0;

		if (!cv_simd_use((CvSimdLevel) level))
		{
			printf("skip level %d: not supported here\n", level);
			continue;
		}
		for (unsigned i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
			for (int kind = 0; kind < 4; kind++)
				for (int rep = 0; rep < 20; rep++)
				{
					int			n = lengths[i];

					fill(a, n, kind);
					fill(b, n, kind);
					if (rep == 0)
						for (int j = 0; j < n; j++)
							b[j] = a[j];	/* equal vectors: bound 0 */
					if (rep == 1)
						for (int j = 0; j < n; j++)
							b[j] = nextafterf(a[j], 2.0f);	/* one ulp apart */
					bad += check(a, b, n, kind == 3 ? "huge" : kind == 2 ? "tiny" : "random");
				}
		printf("%s %s: bound below and near the exact distance\n", bad ? "FAIL" : "ok  ", cv_distance->name);
		if (bad)
			failed++;
		else
			passed++;
	}
	free(a);
	free(b);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
