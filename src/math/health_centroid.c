/*
 * health_centroid.c: section 1 of STATISTICS.md, the centroid family.
 *
 * Two sweeps over the members plus one over their distances:
 *   1. the centroid (as x_1 + mean(x_i - x_1), so identical members give a
 *      centroid equal to them bit for bit), the norm moments and the sum of
 *      unit vectors;
 *   2. r_i = ||x_i - c|| from float64 differences, with Welford moments of
 *      r_i (population convention), the inertia, the radius and cohesion;
 *   3. the threshold counts over the stored r_i, which need mu and s.
 * Scratch is n + d doubles from cv_health_alloc; should that fail, the unit vectors
 * get a sweep of their own in the centroid buffer and sweep 3 recomputes
 * r_i from the members, which gives the same values, only slower.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"

/* Running moments of the member norms (Welford). */
typedef struct NormMoments
{
	int64_t		count;
	double		mean;
	double		m2;
	int64_t		nonzero;
} NormMoments;

/* Running central moments of r_i up to the fourth (Welford/Terriberry). */
typedef struct DistMoments
{
	int64_t		count;
	double		mean;
	double		m2;
	double		m3;
	double		m4;
	double		sum_sq;			/* inertia: the squared distances themselves */
	double		max;
	double		cos_sum;		/* cohesion numerator */
} DistMoments;

/* One member against the centroid: what sweep 2 needs of it. */
typedef struct MemberParts
{
	double		dist_sq;		/* ||x - c||^2 */
	double		dot;			/* x . c */
	double		norm_sq;		/* ||x||^2 */
} MemberParts;

/*
 * The row helpers below keep LANES partial sums and index with size_t: the
 * adds do not wait on each other, and GCC turns the fixed inner loops into
 * SSE2 operations at -O2 without reassociating anything (an int index under
 * PostgreSQL's -fwrapv defeats its address analysis).
 */
#define LANES 4

/* ||x||^2 in float64. */
static double
norm_sq_of(const float *x, int d)
{
	double		acc[LANES] = {0};
	size_t		n = (size_t) d,
				j = 0,
				l;

	for (; j + LANES <= n; j += LANES)
		for (l = 0; l < LANES; l++)
			acc[l] += (double) x[j + l] * x[j + l];
	for (; j < n; j++)
		acc[0] += (double) x[j] * x[j];
	return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* Distance, dot and norm of one member against c, in one read of the row. */
static MemberParts
member_parts(const float *x, const double *c, int d)
{
	double		dd[LANES] = {0},
				dt[LANES] = {0},
				nn[LANES] = {0};
	size_t		n = (size_t) d,
				j = 0,
				l;
	MemberParts p;

	for (; j + LANES <= n; j += LANES)
		for (l = 0; l < LANES; l++)
		{
			double		xl = x[j + l];
			double		e = xl - c[j + l];

			dd[l] += e * e;
			dt[l] += xl * c[j + l];
			nn[l] += xl * xl;
		}
	for (; j < n; j++)
	{
		double		xl = x[j];
		double		e = xl - c[j];

		dd[0] += e * e;
		dt[0] += xl * c[j];
		nn[0] += xl * xl;
	}
	p.dist_sq = (dd[0] + dd[1]) + (dd[2] + dd[3]);
	p.dot = (dt[0] + dt[1]) + (dt[2] + dt[3]);
	p.norm_sq = (nn[0] + nn[1]) + (nn[2] + nn[3]);
	return p;
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

/* sum += x * scale elementwise, in float64. */
static void
add_scaled(double *restrict sum, const float *restrict x, double scale, int d)
{
	size_t		n = (size_t) d,
				j = 0,
				l;

	for (; j + LANES <= n; j += LANES)
		for (l = 0; l < LANES; l++)
			sum[j + l] += (double) x[j + l] * scale;
	for (; j < n; j++)
		sum[j] += (double) x[j] * scale;
}

/* Welford update of the norm moments. */
static void
norm_moments_add(NormMoments *nm, double norm)
{
	double		delta;

	nm->count++;
	delta = norm - nm->mean;
	nm->mean += delta / (double) nm->count;
	nm->m2 += delta * (norm - nm->mean);
	if (norm > 0)
		nm->nonzero++;
}

/* Terriberry's one-pass update of the central moments up to the fourth. */
static void
dist_moments_add(DistMoments *dm, double r)
{
	double		n1 = (double) dm->count;
	double		n = n1 + 1;
	double		delta = r - dm->mean;
	double		delta_n = delta / n;
	double		delta_n2 = delta_n * delta_n;
	double		term1 = delta * delta_n * n1;

	dm->count++;
	dm->mean += delta_n;
	dm->m4 += term1 * delta_n2 * (n * n - 3 * n + 3)
		+ 6 * delta_n2 * dm->m2 - 4 * delta_n * dm->m3;
	dm->m3 += term1 * delta_n * (n - 2) - 3 * delta_n * dm->m2;
	dm->m2 += term1;
}

/*
 * Sweep 1: accumulates sum(x_i - x_1) into csum and sum(x_i / ||x_i||) into
 * usum (either may be NULL) and the norm moments into nm.
 */
static void
sweep_sums(const float *x, int64_t n, int d, double *csum, double *usum, NormMoments *nm)
{
	const float *x1 = x;
	int64_t		i;

	if (csum != NULL)
		memset(csum, 0, sizeof(double) * d);
	if (usum != NULL)
		memset(usum, 0, sizeof(double) * d);
	memset(nm, 0, sizeof(*nm));
	for (i = 0; i < n; i++)
	{
		const float *xi = x + i * (int64_t) d;
		double		norm = sqrt(norm_sq_of(xi, d));

		norm_moments_add(nm, norm);
		if (csum != NULL)
			add_difference(csum, xi, x1, d);
		/* a zero member has no direction: it stays out of the resultant */
		if (usum != NULL && norm > 0)
			add_scaled(usum, xi, 1.0 / norm, d);
	}
}

/* Turns sum(x_i - x_1) into c = x_1 + that sum / n, in place. */
static void
finish_centroid_vector(const float *x1, int64_t n, int d, double *c)
{
	int			j;

	for (j = 0; j < d; j++)
		c[j] = (double) x1[j] + c[j] / (double) n;
}

/* Euclidean norm of a float64 vector. */
static double
norm_of_double(const double *v, int d)
{
	double		s = 0;
	int			j;

	for (j = 0; j < d; j++)
		s += v[j] * v[j];
	return sqrt(s);
}

/* embedding_quality from the sum of the m nonzero unit vectors. */
static void
set_embedding_quality(const double *usum, int64_t nonzero, int d, CvClusterStats *out)
{
	double		length;

	if (nonzero == 0)
	{
		cv_stat_null(out, CV_STAT_EMBEDDING_QUALITY);
		return;
	}
	length = norm_of_double(usum, d) / (double) nonzero;
	/* a resultant of unit vectors is at most 1; rounding may step past it */
	cv_stat_set(out, CV_STAT_EMBEDDING_QUALITY, fmin(length, 1.0));
}

/* mean_norm and norm_cv from the norm moments. */
static void
set_norm_columns(const NormMoments *nm, CvClusterStats *out)
{
	double		std = sqrt(nm->m2 / (double) nm->count);

	cv_stat_set(out, CV_STAT_MEAN_NORM, nm->mean);
	if (nm->mean > 0)
		cv_stat_set(out, CV_STAT_NORM_CV, std / nm->mean);
	else
		cv_stat_null(out, CV_STAT_NORM_CV);
}

/* cos(x, c) of one member, 0 for a zero member, clamped against rounding. */
static double
member_cos(const MemberParts *p, double c_norm)
{
	double		cosine;

	if (p->norm_sq <= 0 || c_norm <= 0)
		return 0;
	cosine = p->dot / (sqrt(p->norm_sq) * c_norm);
	return fmax(-1.0, fmin(1.0, cosine));
}

/* Sweep 2: r_i (stored in r when not NULL), their moments, inertia, radius, cohesion. */
static void
sweep_distances(const float *x, int64_t n, int d, const double *c, double c_norm,
				double *r, DistMoments *dm)
{
	int64_t		i;

	memset(dm, 0, sizeof(*dm));
	for (i = 0; i < n; i++)
	{
		MemberParts p = member_parts(x + i * (int64_t) d, c, d);
		double		ri = sqrt(p.dist_sq);

		if (r != NULL)
			r[i] = ri;
		dist_moments_add(dm, ri);
		dm->sum_sq += p.dist_sq;
		dm->max = fmax(dm->max, ri);
		dm->cos_sum += member_cos(&p, c_norm);
	}
}

/* r_i of member i: from the stored distances, else recomputed exactly as sweep 2 did. */
static double
distance_of(const float *x, int64_t i, int d, const double *c, const double *r)
{
	if (r != NULL)
		return r[i];
	return sqrt(member_parts(x + i * (int64_t) d, c, d).dist_sq);
}

/* Sweep 3: outlier_ratio and core_periphery_ratio, whose thresholds need mu and s. */
static void
set_threshold_columns(const float *x, int64_t n, int d, const double *c, const double *r,
					  double mu, double s, double outlier_z, CvClusterStats *out)
{
	int64_t		outliers = 0,
				core = 0,
				periphery = 0,
				i;
	bool		flat = s <= CV_HEALTH_EPS * mu;

	if (!flat)
	{
		for (i = 0; i < n; i++)
		{
			double		ri = distance_of(x, i, d, c, r);

			outliers += ri > mu + outlier_z * s;
			core += ri <= mu - s;
			periphery += ri >= mu + s;
		}
	}
	/* s counting as 0: no member stands out, and core and periphery are one */
	cv_stat_set(out, CV_STAT_OUTLIER_RATIO, flat ? 0.0 : (double) outliers / (double) n);
	if (flat || out->collapsed)
		cv_stat_set(out, CV_STAT_CORE_PERIPHERY_RATIO, 1.0);
	else if (periphery == 0)
		cv_stat_null(out, CV_STAT_CORE_PERIPHERY_RATIO);
	else
		cv_stat_set(out, CV_STAT_CORE_PERIPHERY_RATIO, (double) core / (double) periphery);
}

/* skew and kurtosis, NULL where STATISTICS.md makes them degenerate. */
static void
set_shape_columns(const DistMoments *dm, double s, CvClusterStats *out)
{
	double		n = (double) dm->count;
	double		m2 = dm->m2 / n;

	if (m2 <= 0 || s <= CV_HEALTH_EPS * dm->mean || out->collapsed)
	{
		cv_stat_null(out, CV_STAT_SKEW);
		cv_stat_null(out, CV_STAT_KURTOSIS);
		return;
	}
	cv_stat_set(out, CV_STAT_SKEW, (dm->m3 / n) / pow(m2, 1.5));
	cv_stat_set(out, CV_STAT_KURTOSIS, (dm->m4 / n) / (m2 * m2) - 3.0);
}

/* The columns of section 1 for an empty cluster (or d < 1): only n is known. */
static void
set_empty(int64_t n, int d, double *centroid, CvClusterStats *out)
{
	CvStat		col;

	memset(centroid, 0, sizeof(double) * (d > 0 ? d : 0));
	for (col = CV_STAT_N; col <= CV_STAT_EMBEDDING_QUALITY; col++)
		cv_stat_null(out, col);
	cv_stat_set(out, CV_STAT_N, (double) (n > 0 ? n : 0));
	out->collapsed = true;
}

/* Sweep 1 with or without a scratch vector for the unit-vector sum. */
static void
centroid_and_norms(const float *x, int64_t n, int d, double *usum, double *centroid,
				   NormMoments *nm, CvClusterStats *out)
{
	if (usum == NULL)
	{
		/* no scratch: the centroid buffer holds the unit-vector sum first */
		sweep_sums(x, n, d, NULL, centroid, nm);
		set_embedding_quality(centroid, nm->nonzero, d, out);
		sweep_sums(x, n, d, centroid, NULL, nm);
	}
	else
	{
		sweep_sums(x, n, d, centroid, usum, nm);
		set_embedding_quality(usum, nm->nonzero, d, out);
	}
	finish_centroid_vector(x, n, d, centroid);
	set_norm_columns(nm, out);
}

/* Allocates n + d doubles of scratch, or returns NULL (the slower path copes). */
static double *
scratch_alloc(int64_t n, int d)
{
	size_t		count = (size_t) n + (size_t) d;

	if ((uint64_t) n > SIZE_MAX / sizeof(double) - (size_t) d)
		return NULL;
	return cv_health_alloc(count, sizeof(double));
}

/* 1. Centroid family except novelty and between_ss; writes the centroid (d float64). */
void
cv_health_centroid(const float *x, int64_t n, int d, const CvHealthParams *params,
				   double *centroid, CvClusterStats *out)
{
	double	   *scratch;
	double	   *usum = NULL,
			   *r = NULL;
	NormMoments nm;
	DistMoments dm;
	double		c_norm,
				s;

	if (n < 1 || d < 1)
	{
		set_empty(n, d, centroid, out);
		return;
	}
	scratch = scratch_alloc(n, d);
	if (scratch != NULL)
	{
		usum = scratch;
		r = scratch + d;
	}
	centroid_and_norms(x, n, d, usum, centroid, &nm, out);
	c_norm = norm_of_double(centroid, d);
	sweep_distances(x, n, d, centroid, c_norm, r, &dm);
	s = sqrt(dm.m2 / (double) n);
	out->collapsed = dm.max <= CV_HEALTH_EPS * nm.mean;

	cv_stat_set(out, CV_STAT_N, (double) n);
	cv_stat_set(out, CV_STAT_CENTROID_NORM, c_norm);
	cv_stat_set(out, CV_STAT_INERTIA, dm.sum_sq);
	cv_stat_set(out, CV_STAT_MEAN_DIST, dm.mean);
	cv_stat_set(out, CV_STAT_SPREAD, s);
	cv_stat_set(out, CV_STAT_RADIUS, dm.max);
	set_shape_columns(&dm, s, out);
	if (c_norm <= CV_HEALTH_EPS * nm.mean)
		cv_stat_null(out, CV_STAT_COHESION);
	else
		cv_stat_set(out, CV_STAT_COHESION, dm.cos_sum / (double) n);
	set_threshold_columns(x, n, d, centroid, r, dm.mean, s, params->outlier_z, out);
	cv_health_free(scratch);
}

/* g: the mean of all rows = the n-weighted mean of the centroids (float64, d). */
void
cv_health_global_centroid(const CvCentroidSet *set, double *global)
{
	const double *c1 = set->centroids;
	double		total = 0;
	int64_t		k;
	int			j;

	memset(global, 0, sizeof(double) * set->d);
	if (set->k < 1)
		return;
	/* offset by the first centroid, so identical rows give g equal to them */
	for (k = 0; k < set->k; k++)
	{
		const double *ck = set->centroids + k * (int64_t) set->d;
		double		w = (double) set->n[k];

		total += w;
		for (j = 0; j < set->d; j++)
			global[j] += w * (ck[j] - c1[j]);
	}
	if (total <= 0)
		return;
	for (j = 0; j < set->d; j++)
		global[j] = c1[j] + global[j] / total;
}

/* mean ||x|| over all rows: the scale for "g counts as 0". */
double
cv_health_global_mean_norm(const CvCentroidSet *set)
{
	double		total = 0,
				sum = 0;
	int64_t		k;

	for (k = 0; k < set->k; k++)
	{
		total += (double) set->n[k];
		sum += (double) set->n[k] * set->mean_norm[k];
	}
	return total > 0 ? sum / total : 0;
}

/* Dot product and squared distance of two float64 vectors. */
static void
centre_pair(const double *a, const double *b, int d, double *dot, double *dist_sq)
{
	double		dt = 0,
				dd = 0;
	int			j;

	for (j = 0; j < d; j++)
	{
		double		e = a[j] - b[j];

		dt += a[j] * b[j];
		dd += e * e;
	}
	*dot = dt;
	*dist_sq = dd;
}

/* 1. novelty and between_ss, which need g. */
void
cv_health_finish_centroid(const double *centroid, const double *global,
						  double global_mean_norm, int d, CvClusterStats *out)
{
	double		c_norm = out->value[CV_STAT_CENTROID_NORM];
	double		g_norm = norm_of_double(global, d);
	double		dot,
				dist_sq,
				cosine;

	centre_pair(centroid, global, d, &dot, &dist_sq);
	cv_stat_set(out, CV_STAT_BETWEEN_SS, out->value[CV_STAT_N] * dist_sq);
	if (out->is_null[CV_STAT_CENTROID_NORM]
		|| c_norm <= CV_HEALTH_EPS * out->value[CV_STAT_MEAN_NORM]
		|| g_norm <= CV_HEALTH_EPS * global_mean_norm)
	{
		cv_stat_null(out, CV_STAT_NOVELTY);
		return;
	}
	cosine = fmax(-1.0, fmin(1.0, dot / (c_norm * g_norm)));
	cv_stat_set(out, CV_STAT_NOVELTY, 1.0 - cosine);
}
