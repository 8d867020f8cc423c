/*
 * health_twomeans.c: section 2 of STATISTICS.md, the two-means sub-structure.
 *
 * Seeds a = x_1 and b = x_n, exactly three Lloyd iterations (the count is
 * part of the definition, so there is no convergence test), then one more
 * sweep for inertia2 with the final centres.  Each iteration is one sweep:
 * it assigns every member to the nearer centre (float64 squared distances
 * from differences; tie: a) and sums the members of each side for the
 * update.  Centres are x_1 + mean(x - x_1), so a side of identical members
 * gets a centre equal to them bit for bit.  Scratch: 4 d doubles.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"

#define TWO_MEANS_ITERATIONS 3

/* The two centres, the sums of their sides (offset by x_1) and the side sizes. */
typedef struct TwoMeans
{
	int			d;
	double	   *a;
	double	   *b;
	double	   *sum_a;
	double	   *sum_b;
	int64_t		count_a;
	int64_t		count_b;
} TwoMeans;

/*
 * The row helpers keep LANES partial sums and index with size_t: the adds do
 * not wait on each other, and GCC turns the fixed inner loops into SSE2
 * operations at -O2 without reassociating anything (an int index under
 * PostgreSQL's -fwrapv defeats its address analysis).
 */
#define LANES 4

/* ||x - a||^2 and ||x - b||^2 from float64 differences, in one read of x. */
static void
two_dist_sq(const float *x, const double *a, const double *b, int d,
			double *da, double *db)
{
	double		sa[LANES] = {0},
				sb[LANES] = {0};
	size_t		n = (size_t) d,
				j = 0,
				l;

	for (; j + LANES <= n; j += LANES)
		for (l = 0; l < LANES; l++)
		{
			double		ea = (double) x[j + l] - a[j + l];
			double		eb = (double) x[j + l] - b[j + l];

			sa[l] += ea * ea;
			sb[l] += eb * eb;
		}
	for (; j < n; j++)
	{
		double		ea = (double) x[j] - a[j];
		double		eb = (double) x[j] - b[j];

		sa[0] += ea * ea;
		sb[0] += eb * eb;
	}
	*da = (sa[0] + sa[1]) + (sa[2] + sa[3]);
	*db = (sb[0] + sb[1]) + (sb[2] + sb[3]);
}

/* ||x - c||^2 from float64 differences. */
static double
dist_sq_of(const float *x, const double *c, int d)
{
	double		acc[LANES] = {0};
	size_t		n = (size_t) d,
				j = 0,
				l;

	for (; j + LANES <= n; j += LANES)
		for (l = 0; l < LANES; l++)
		{
			double		e = (double) x[j + l] - c[j + l];

			acc[l] += e * e;
		}
	for (; j < n; j++)
	{
		double		e = (double) x[j] - c[j];

		acc[0] += e * e;
	}
	return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* sum += x - x1 elementwise, in float64. */
static void
add_difference(double *restrict sum, const float *restrict x, const float *restrict x1, int d)
{
	size_t		n = (size_t) d,
				j = 0,
				l;

	for (; j + LANES <= n; j += LANES)
		for (l = 0; l < LANES; l++)
			sum[j + l] += (double) x[j + l] - (double) x1[j + l];
	for (; j < n; j++)
		sum[j] += (double) x[j] - (double) x1[j];
}

/* Squared distance of two float64 vectors. */
static double
centre_dist_sq(const double *a, const double *b, int d)
{
	double		s = 0;
	int			j;

	for (j = 0; j < d; j++)
	{
		double		e = a[j] - b[j];

		s += e * e;
	}
	return s;
}

/* One sweep: assigns every member to the nearer centre and sums each side. */
static void
assign_sweep(const float *x, int64_t n, TwoMeans *tm, uint8_t *side)
{
	const float *x1 = x;
	int			d = tm->d;
	int64_t		i;

	memset(tm->sum_a, 0, sizeof(double) * d);
	memset(tm->sum_b, 0, sizeof(double) * d);
	tm->count_a = tm->count_b = 0;
	for (i = 0; i < n; i++)
	{
		const float *xi = x + i * (int64_t) d;
		double		da,
					db;

		two_dist_sq(xi, tm->a, tm->b, d, &da, &db);
		/* tie: a */
		side[i] = db < da;
		if (side[i])
			tm->count_b++;
		else
			tm->count_a++;
		add_difference(side[i] ? tm->sum_b : tm->sum_a, xi, x1, d);
	}
}

/* Moves a centre to x_1 + sum / count; an empty side keeps its centre. */
static void
move_centre(const float *x1, int d, const double *sum, int64_t count, double *centre)
{
	int			j;

	if (count == 0)
		return;
	for (j = 0; j < d; j++)
		centre[j] = (double) x1[j] + sum[j] / (double) count;
}

/* inertia2: every member's squared distance to the centre of its side. */
static double
inertia2_sweep(const float *x, int64_t n, const TwoMeans *tm, const uint8_t *side)
{
	double		total = 0;
	int64_t		i;

	for (i = 0; i < n; i++)
		total += dist_sq_of(x + i * (int64_t) tm->d, side[i] ? tm->b : tm->a, tm->d);
	return total;
}

/* Seeds a = x_1, b = x_n and runs the three Lloyd iterations. */
static void
run_lloyd(const float *x, int64_t n, TwoMeans *tm, uint8_t *side)
{
	int			d = tm->d;
	int			iteration,
				j;

	for (j = 0; j < d; j++)
	{
		tm->a[j] = x[j];
		tm->b[j] = x[(n - 1) * (int64_t) d + j];
	}
	for (iteration = 0; iteration < TWO_MEANS_ITERATIONS; iteration++)
	{
		assign_sweep(x, n, tm, side);
		move_centre(x, d, tm->sum_a, tm->count_a, tm->a);
		move_centre(x, d, tm->sum_b, tm->count_b, tm->b);
	}
}

/* Marks the three split columns NULL. */
static void
set_split_null(CvClusterStats *out)
{
	cv_stat_null(out, CV_STAT_SPLIT_GAIN);
	cv_stat_null(out, CV_STAT_SPLIT_BALANCE);
	cv_stat_null(out, CV_STAT_SPLIT_SEPARATION);
}

/* The three split columns from the final centres and sides. */
static void
set_split_columns(const float *x, int64_t n, const TwoMeans *tm, const uint8_t *side,
				  CvClusterStats *out)
{
	double		inertia = out->value[CV_STAT_INERTIA];
	double		mu = out->value[CV_STAT_MEAN_DIST];
	int64_t		smaller = tm->count_a < tm->count_b ? tm->count_a : tm->count_b;

	if (out->is_null[CV_STAT_INERTIA] || inertia == 0)
		cv_stat_null(out, CV_STAT_SPLIT_GAIN);
	else
		cv_stat_set(out, CV_STAT_SPLIT_GAIN, 1.0 - inertia2_sweep(x, n, tm, side) / inertia);
	cv_stat_set(out, CV_STAT_SPLIT_BALANCE, (double) smaller / (double) n);
	if (out->is_null[CV_STAT_MEAN_DIST] || mu == 0)
		cv_stat_null(out, CV_STAT_SPLIT_SEPARATION);
	else
		cv_stat_set(out, CV_STAT_SPLIT_SEPARATION,
					sqrt(centre_dist_sq(tm->a, tm->b, tm->d)) / mu);
}

/* 2. Two-means; side[i] = 0 (a) or 1 (b) after the third iteration (n bytes). */
int
cv_health_two_means(const float *x, int64_t n, int d, uint8_t *side,
					CvClusterStats *out)
{
	TwoMeans	tm;
	double	   *scratch;

	/* a single member is nearer to neither seed: tie, so a */
	if (n < 2 || d < 1)
	{
		if (side != NULL && n > 0)
			memset(side, 0, (size_t) n);
		set_split_null(out);
		return 0;
	}
	scratch = cv_health_alloc(4 * (size_t) d, sizeof(double));
	if (scratch == NULL)
	{
		/* a defined assignment and no values, and the caller raises the error */
		memset(side, 0, (size_t) n);
		set_split_null(out);
		return -1;
	}
	tm.d = d;
	tm.a = scratch;
	tm.b = scratch + d;
	tm.sum_a = scratch + 2 * (size_t) d;
	tm.sum_b = scratch + 3 * (size_t) d;
	/* the sides are defined even for a collapsed cluster: the pairwise module reads them */
	run_lloyd(x, n, &tm, side);
	if (out->collapsed)
		set_split_null(out);
	else
		set_split_columns(x, n, &tm, side, out);
	cv_health_free(scratch);
	return 0;
}
