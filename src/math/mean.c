/*
 * mean.c: list centroids as float64 means (see mean.h).  Plain loops: a mean
 * is computed once per build, VACUUM of a list or insert, never per query.
 */
#include "mean.h"

#include <math.h>

/* The factor that scales x to unit length, or 1 when not scaling; 0 for a zero direction. */
static double
unit_scale(const float *x, int dim, bool directions)
{
	double		norm_sq = 0;

	if (!directions)
		return 1.0;
	for (int j = 0; j < dim; j++)
		norm_sq += (double) x[j] * x[j];
	return norm_sq > 0 ? 1.0 / sqrt(norm_sq) : 0.0;
}

bool
cv_mean_add(double *sum, const float *x, int dim, bool directions)
{
	double		scale = unit_scale(x, dim, directions);

	if (scale == 0)
		return false;
	for (int j = 0; j < dim; j++)
		sum[j] += x[j] * scale;
	return true;
}

double
cv_mean_finish(const double *sum, uint64_t n, int dim, float *out)
{
	double		norm_sq = 0;

	for (int j = 0; j < dim; j++)
	{
		out[j] = n > 0 ? (float) (sum[j] / (double) n) : 0.0f;
		norm_sq += (double) out[j] * out[j];
	}
	return sqrt(norm_sq);
}

double
cv_mean_move(float *centroid, const float *x, int dim, uint64_t n, bool directions)
{
	double		scale = unit_scale(x, dim, directions);
	double		norm_sq = 0;

	for (int j = 0; j < dim; j++)
	{
		double		c = centroid[j];

		/* the first member is the mean: no rounding through an old value */
		if (n <= 1)
			c = x[j] * scale;
		else if (scale != 0)
			c += (x[j] * scale - c) / (double) n;
		centroid[j] = (float) c;
		norm_sq += (double) centroid[j] * centroid[j];
	}
	return sqrt(norm_sq);
}
