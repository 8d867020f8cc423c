/*
 * health_potential.c: section 4 of STATISTICS.md, the Gaussian potential.
 *
 * Members are potentials of width sigma; potential_depth and curvature are
 * one sweep over r_i^2 = ||x_i - c||^2 (float64 differences), and
 * escape_probability needs only nearest_dist.  sigma is read from the
 * stats, so a test can evaluate these at another sigma (the GPU's) by
 * setting that column first.
 */
#include <math.h>

#include "health.h"

/*
 * LANES partial sums indexed with size_t: the adds do not wait on each
 * other, and GCC turns the fixed inner loop into SSE2 operations at -O2
 * without reassociating anything (an int index under PostgreSQL's -fwrapv
 * defeats its address analysis).
 */
#define LANES 4

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

/* Phi(c) and the scaled Laplacian at c, in one sweep over the members. */
static void
set_basin_columns(const float *x, int64_t n, int d, const double *centroid,
				  double sigma, CvClusterStats *out)
{
	double		two_sigma_sq = 2.0 * sigma * sigma;
	double		d_sigma_sq = (double) d * sigma * sigma;
	double		depth = 0,
				curvature = 0;
	int64_t		i;

	for (i = 0; i < n; i++)
	{
		double		r_sq = dist_sq_of(x + i * (int64_t) d, centroid, d);
		double		e = exp(-r_sq / two_sigma_sq);

		depth += e;
		curvature += e * (r_sq / d_sigma_sq - 1.0);
	}
	cv_stat_set(out, CV_STAT_POTENTIAL_DEPTH, depth / (double) n);
	cv_stat_set(out, CV_STAT_CURVATURE, curvature / (double) n);
}

/* 4. Gaussian potential at the centroid (needs sigma and nearest_dist). */
void
cv_health_potential(const float *x, int64_t n, int d, const double *centroid,
					int64_t k, CvClusterStats *out)
{
	double		sigma = out->value[CV_STAT_SIGMA];
	double		dist = out->value[CV_STAT_NEAREST_DIST];

	/* collapsed: sigma is 0 by contract, whatever rounding left in it */
	if (out->is_null[CV_STAT_SIGMA] || !(sigma > 0) || out->collapsed || n < 1 || d < 1)
	{
		cv_stat_null(out, CV_STAT_POTENTIAL_DEPTH);
		cv_stat_null(out, CV_STAT_CURVATURE);
		cv_stat_null(out, CV_STAT_ESCAPE_PROBABILITY);
		return;
	}
	set_basin_columns(x, n, d, centroid, sigma, out);
	if (k <= 1 || out->is_null[CV_STAT_NEAREST_DIST])
		cv_stat_null(out, CV_STAT_ESCAPE_PROBABILITY);
	else
		cv_stat_set(out, CV_STAT_ESCAPE_PROBABILITY,
					exp(-(dist * dist) / (8.0 * sigma * sigma)));
}
