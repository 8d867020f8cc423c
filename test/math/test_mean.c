/*
 * test_mean: the centroid arithmetic of cvlattice lists (src/math/mean.c)
 * against a long double reference: the mean of a set (and of its members'
 * directions) rounded once to float4, the incremental move of an insert
 * staying within one float4 rounding per move of the exact mean, and zero
 * directions left out.  Seed from CV_TEST_SEED or the clock, printed.
 * Ends "N passed, N failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mean.h"

#define DIM 37
#define MEMBERS 500

static unsigned long long state;
static int	passed;
static int	failed;

static double
uniform(void)
{
	state = state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double) (state >> 11) / 9007199254740992.0;
}

static void
result(int ok, const char *what)
{
	if (ok)
		passed++;
	else
	{
		failed++;
		printf("FAILED: %s\n", what);
	}
}

/* The exact mean of n members (of their directions), in long double. */
static void
reference(float (*x)[DIM], int n, int directions, long double *mean)
{
	int			counted = 0;

	for (int j = 0; j < DIM; j++)
		mean[j] = 0;
	for (int i = 0; i < n; i++)
	{
		long double norm = 0;

		for (int j = 0; j < DIM; j++)
			norm += (long double) x[i][j] * x[i][j];
		if (directions && norm == 0)
			continue;
		norm = directions ? sqrtl(norm) : 1;
		for (int j = 0; j < DIM; j++)
			mean[j] += x[i][j] / norm;
		counted++;
	}
	for (int j = 0; j < DIM; j++)
		mean[j] /= counted;
}

/* The largest |element| of the members (1 for directions). */
static double
largest(float (*x)[DIM], int n, int directions)
{
	double		m = 0;

	if (directions)
		return 1;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < DIM; j++)
			m = fmax(m, fabs(x[i][j]));
	return m;
}

static int
within(const float *c, const long double *mean, double tolerance)
{
	for (int j = 0; j < DIM; j++)
		if (!(fabsl((long double) c[j] - mean[j]) <= tolerance))
			return 0;
	return 1;
}

static void
check_set(float (*x)[DIM], int n, int directions, const char *what)
{
	double		sum[DIM] = {0};
	float		exact[DIM];
	float		moved[DIM] = {0};
	long double mean[DIM];
	int			members = 0;
	double		scale = largest(x, n, directions);
	char		label[128];

	for (int i = 0; i < n; i++)
		if (cv_mean_add(sum, x[i], DIM, directions))
			cv_mean_move(moved, x[i], DIM, ++members, directions);
	cv_mean_finish(sum, members, DIM, exact);
	reference(x, n, directions, mean);
	snprintf(label, sizeof(label), "%s: the float64 mean is the exact mean rounded once", what);
	result(within(exact, mean, 1e-6 * scale), label);
	snprintf(label, sizeof(label), "%s: %d moves stay within one rounding each", what, members);
	result(within(moved, mean, (2.0 + 2.0 * members) * ldexp(1.0, -23) * scale), label);
}

int
main(void)
{
	static float x[MEMBERS][DIM];
	const char *seed = getenv("CV_TEST_SEED");
	double		sum[DIM] = {0};
	float		c[DIM];
	float		zero[DIM] = {0};

	state = seed ? strtoull(seed, NULL, 10) : (unsigned long long) time(NULL);
	printf("test_mean: seed %llu\n", state);
	for (int i = 0; i < MEMBERS; i++)
		for (int j = 0; j < DIM; j++)
			x[i][j] = (float) ((uniform() * 2 - 1) * (j % 3 == 0 ? 1000 : 1) + 5);
	check_set(x, MEMBERS, 0, "vectors");
	check_set(x, MEMBERS, 1, "directions");
	check_set(x, 1, 0, "one member");
	for (int j = 0; j < DIM; j++)
		x[3][j] = 0;
	check_set(x, 10, 1, "directions with a zero vector");
	result(!cv_mean_add(sum, zero, DIM, 1), "a zero direction is not added");
	result(cv_mean_finish(sum, 0, DIM, c) == 0 && c[0] == 0, "the mean of nothing is zero");
	printf("%d passed, %d failed\n", passed, failed);
	return failed > 0;
}
