/*
 * health_test: opens a clustervec GPU library with dlopen, as the worker
 * does, and checks the cluster statistics (cvcuda_health_*) against
 * src/math computed here, under STATISTICS.md's GPU tolerances: real values
 * within 1e-4 relative plus 1e-6 of their scale, threshold counts within
 * the members near their threshold, the two-means columns exempt where the
 * float64 reference has a near-tie, labels equal up to near-ties, NULL flags
 * equal.  Sections 3 and 6 (pairwise, effective_rank) are only checked to
 * be written with the reference's NULL flags; their values have their own
 * test.  Every output is poisoned (0xFF bytes) before each call.
 *
 * Data: fresh random clusters (seed printed) sharing a large offset, with
 * degenerate ones (n = 1, n = 2, identical members, zero vectors, two
 * clusters with the same members: coinciding centroids), sizes 1, 2, 17
 * and 1,000 at d = 1024 in one chunk and again in two chunks; one cluster
 * of 100,000 at d = 16 (K = 1); a small K = 1 case; malformed calls.
 *
 * Usage: health_test path/to/library.so [--require-device] [--seed N]
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clustervec_cuda.h"
#include "harness.h"
#include "health_library.h"

/* A chunk of clusters in CSR form, on the host. */
typedef struct Data
{
	long long	k;
	int			d;
	long long  *off;			/* k + 1 */
	float	   *x;				/* off[k] x d */
} Data;

/* What a pipeline run produced (GPU) or the reference computed. */
typedef struct Result
{
	CvClusterStats *stats;		/* k */
	double	   *centroids;		/* k x d */
	int			m;
	long long  *nearest;		/* k x m */
	double	   *nearest_dist;	/* k x m */
	double	   *db_ratio;		/* k */
} Result;

static int	exempt_split = 0;

/* Cluster kinds of the generator. */
typedef enum Kind
{
	KIND_BLOB,					/* shared offset + cluster centre + noise */
	KIND_IDENTICAL,				/* every member the same vector */
	KIND_ZERO,					/* zero vectors */
	KIND_COPY					/* the previous cluster's members again */
} Kind;

/* Builds k clusters of the given sizes and kinds at d dimensions. */
static Data
make_data(long long k, const long long *sizes, const Kind *kinds, int d, double offset,
		  double noise, uint64_t *state)
{
	Data		data;
	float	   *shared = malloc(sizeof(float) * d);
	double	   *centre = malloc(sizeof(double) * d);

	data.k = k;
	data.d = d;
	data.off = malloc(sizeof(long long) * (k + 1));
	data.off[0] = 0;
	for (long long c = 0; c < k; c++)
		data.off[c + 1] = data.off[c] + sizes[c];
	data.x = malloc(sizeof(float) * (size_t) (data.off[k] > 0 ? data.off[k] : 1) * d);
	for (int j = 0; j < d; j++)
		shared[j] = (float) (offset * (1.0 + 0.2 * uniform(state)));
	for (long long c = 0; c < k; c++)
	{
		float	   *xc = data.x + data.off[c] * d;
		double		spread = noise * (0.5 + fabs(uniform(state)));

		for (int j = 0; j < d; j++)
			centre[j] = shared[j] + uniform(state);
		for (long long i = 0; i < sizes[c]; i++)
			for (int j = 0; j < d; j++)
			{
				float	   *v = xc + i * d + j;

				switch (kinds[c])
				{
					case KIND_BLOB:
						*v = (float) (centre[j] + spread * uniform(state));
						break;
					case KIND_IDENTICAL:
						*v = (float) centre[j];
						break;
					case KIND_ZERO:
						*v = 0;
						break;
					case KIND_COPY:
						*v = c > 0 && sizes[c - 1] > 0 ?
							xc[-sizes[c - 1] * d + (i % sizes[c - 1]) * d + j] : 0;
						break;
				}
			}
	}
	free(shared);
	free(centre);
	return data;
}

static void
free_data(Data *data)
{
	free(data->off);
	free(data->x);
}

static void
alloc_result(Result *r, long long k, int d, int m)
{
	r->stats = calloc(k > 0 ? k : 1, sizeof(CvClusterStats));
	r->centroids = calloc((size_t) (k > 0 ? k : 1) * d, sizeof(double));
	r->m = m;
	r->nearest = calloc((size_t) (k > 0 ? k : 1) * (m > 0 ? m : 1), sizeof(long long));
	r->nearest_dist = calloc((size_t) (k > 0 ? k : 1) * (m > 0 ? m : 1), sizeof(double));
	r->db_ratio = calloc(k > 0 ? k : 1, sizeof(double));
}

static void
free_result(Result *r)
{
	free(r->stats);
	free(r->centroids);
	free(r->nearest);
	free(r->nearest_dist);
	free(r->db_ratio);
}

/* A record's NULL flag as a byte (poison shows as neither 0 nor 1). */
static unsigned
null_byte(const CvClusterStats *s, int col)
{
	unsigned char b;

	memcpy(&b, (const char *) s + offsetof(CvClusterStats, is_null) + col, 1);
	return b;
}

/* The record's collapsed or rank_refused flag as a byte. */
static unsigned
flag_byte(const CvClusterStats *s, size_t offset)
{
	unsigned char b;

	memcpy(&b, (const char *) s + offset, 1);
	return b;
}

/* The m of a k-cluster set for the given neighbours. */
static int
table_m(long long k, int neighbours)
{
	return k - 1 < neighbours ? (int) (k > 0 ? k - 1 : 0) : neighbours;
}

/* Largest cluster whose pairwise reference the test computes (sections 3 checked). */
#define PAIRWISE_REF_MAX 20000

/*
 * The reference: section 1 for every cluster, the neighbour table, then
 * sections 2-6 for every cluster; potential with gpu's sigma (when gpu is
 * not NULL).
 */
static void
reference(const Data *data, const CvHealthParams *params, const Result *gpu, Result *ref)
{
	int			d = data->d;
	long long	k = data->k;
	int64_t    *n = malloc(sizeof(int64_t) * (k > 0 ? k : 1));
	double	   *mean_dist = malloc(sizeof(double) * (k > 0 ? k : 1));
	double	   *mean_norm = malloc(sizeof(double) * (k > 0 ? k : 1));
	CvCentroidSet set;
	CvNeighbourTable table;

	alloc_result(ref, k, d, table_m(k, params->neighbours));
	for (long long c = 0; c < k; c++)
	{
		CvClusterStats *s = &ref->stats[c];

		memset(s, 0, sizeof(*s));
		for (int col = 0; col < CV_STAT_COUNT; col++)
			s->is_null[col] = true;
		cv_health_centroid(data->x + data->off[c] * d, data->off[c + 1] - data->off[c], d,
						   params, ref->centroids + c * d, s);
		n[c] = data->off[c + 1] - data->off[c];
		mean_dist[c] = s->value[CV_STAT_MEAN_DIST];
		mean_norm[c] = s->value[CV_STAT_MEAN_NORM];
	}
	set.k = k;
	set.d = d;
	set.centroids = ref->centroids;
	set.n = n;
	set.mean_dist = mean_dist;
	set.mean_norm = mean_norm;
	if (cv_health_neighbour_prepare(&set, params->neighbours, &table) != 0)
	{
		printf("reference: out of memory\n");
		exit(1);
	}
	if (table.m > 0)
	{
		memcpy(ref->nearest, table.nearest, sizeof(long long) * k * table.m);
		memcpy(ref->nearest_dist, table.nearest_dist, sizeof(double) * k * table.m);
		memcpy(ref->db_ratio, table.db_ratio, sizeof(double) * k);
	}
	for (long long c = 0; c < k; c++)
	{
		const float *x = data->x + data->off[c] * d;
		int64_t		nc = n[c];
		uint8_t    *side = malloc(nc > 0 ? nc : 1);
		CvClusterStats *s = &ref->stats[c];

		cv_health_two_means(x, nc, d, side, s);
		if (nc <= PAIRWISE_REF_MAX)
			cv_health_pairwise(x, nc, d, nc >= 2 ? side : NULL, params, NAN, s);
		cv_health_neighbour(x, nc, d, c, &set, &table, s);
		if (gpu != NULL)
		{
			s->value[CV_STAT_SIGMA] = gpu->stats[c].value[CV_STAT_SIGMA];
			s->is_null[CV_STAT_SIGMA] = null_byte(&gpu->stats[c], CV_STAT_SIGMA) != 0;
		}
		cv_health_potential(x, nc, d, ref->centroids + c * d, k, s);
		cv_health_effective_rank(x, nc, d, ref->centroids + c * d, params, s);
		free(side);
	}
	cv_health_neighbour_free(&table);
	free(n);
	free(mean_dist);
	free(mean_norm);
}

/* ---------------------------------------------------------------------
 * The library side: uploads, poisons, calls, reads back.
 * --------------------------------------------------------------------- */

/* Allocates a buffer and writes bytes of src into it (src NULL: poison). */
static CvCudaBuffer *
upload(const Library *lib, const void *src, size_t bytes)
{
	CvCudaBuffer *b = NULL;
	CvCudaError err;
	void	   *poison = NULL;

	if (bytes == 0)
		bytes = 8;
	if (lib->alloc(bytes, &b, &err) != CVCUDA_OK)
	{
		printf("buffer_alloc of %zu bytes: %s\n", bytes, err.message);
		exit(1);
	}
	if (src == NULL)
	{
		poison = malloc(bytes);
		memset(poison, 0xFF, bytes);
		src = poison;
	}
	if (lib->write(b, 0, src, bytes, &err) != CVCUDA_OK)
	{
		printf("buffer_write: %s\n", err.message);
		exit(1);
	}
	free(poison);
	return b;
}

static void
download(const Library *lib, const CvCudaBuffer *b, void *dst, size_t bytes)
{
	CvCudaError err;

	if (bytes > 0 && lib->read(b, 0, dst, bytes, &err) != CVCUDA_OK)
	{
		printf("buffer_read: %s\n", err.message);
		exit(1);
	}
}

/* Poisons the columns of sections 2-6 and rank_refused of a record. */
static void
poison_members_columns(CvClusterStats *s)
{
	for (int col = CV_STAT_SPLIT_GAIN; col < CV_STAT_COUNT; col++)
	{
		memset(&s->value[col], 0xFF, sizeof(double));
		memset((char *) s + offsetof(CvClusterStats, is_null) + col, 0xFF, 1);
	}
	memset((char *) s + offsetof(CvClusterStats, rank_refused), 0xFF, 1);
}

/*
 * The GPU pipeline over data in the given chunks (cut[0] = 0 < ... <
 * cut[nchunks] = k): centroid per chunk, the table once, members per chunk.
 * Returns 0, or -1 after a failed call (counted).
 */
static int
run_pipeline(const Library *lib, const Data *data, const CvHealthParams *params,
			 const long long *cut, int nchunks, const char *name, Result *gpu)
{
	int			d = data->d;
	long long	k = data->k;
	int			m = table_m(k, params->neighbours);
	CvCudaError err;
	CvCudaCentroidSet set;
	double	   *mean_dist = malloc(sizeof(double) * (k > 0 ? k : 1));
	double	   *mean_norm = malloc(sizeof(double) * (k > 0 ? k : 1));
	CvCudaBuffer *bc,
			   *bmd,
			   *bmn,
			   *bn = NULL,
			   *bnd = NULL,
			   *bdb = NULL;
	int			rc = 0;

	alloc_result(gpu, k, d, m);
	for (int ch = 0; ch < nchunks && rc == 0; ch++)
	{
		long long	c0 = cut[ch],
					nc = cut[ch + 1] - cut[ch];
		long long  *off = malloc(sizeof(long long) * (nc + 1));
		long long	rows = data->off[cut[ch + 1]] - data->off[c0];
		CvCudaBuffer *bx,
				   *bo,
				   *bs,
				   *bcen;

		for (long long c = 0; c <= nc; c++)
			off[c] = data->off[c0 + c] - data->off[c0];
		bx = upload(lib, data->x + data->off[c0] * d, sizeof(float) * rows * d);
		bo = upload(lib, off, sizeof(long long) * (nc + 1));
		bs = upload(lib, NULL, sizeof(CvClusterStats) * nc);
		bcen = upload(lib, NULL, sizeof(double) * nc * d);
		if (!check(lib->centroid(bx, bo, nc, d, params, bcen, bs, &err) == CVCUDA_OK,
				   "%s: health_centroid chunk %d: %s", name, ch, err.message))
			rc = -1;
		download(lib, bs, gpu->stats + c0, sizeof(CvClusterStats) * nc);
		download(lib, bcen, gpu->centroids + c0 * d, sizeof(double) * nc * d);
		for (long long c = c0; c < c0 + nc; c++)
		{
			int			ok = flag_byte(&gpu->stats[c], offsetof(CvClusterStats, rank_refused)) == 0;

			for (int col = CV_STAT_NOVELTY; col < CV_STAT_COUNT; col++)
				ok &= null_byte(&gpu->stats[c], col) == 1;
			check(ok, "%s: cluster %lld: every column past section 1 NULL after health_centroid",
				  name, c);
		}
		lib->free(bx);
		lib->free(bo);
		lib->free(bs);
		lib->free(bcen);
		free(off);
	}
	if (rc != 0)
		goto done;
	for (long long c = 0; c < k; c++)
	{
		mean_dist[c] = gpu->stats[c].value[CV_STAT_MEAN_DIST];
		mean_norm[c] = gpu->stats[c].value[CV_STAT_MEAN_NORM];
	}
	bc = upload(lib, gpu->centroids, sizeof(double) * k * d);
	bmd = upload(lib, mean_dist, sizeof(double) * k);
	bmn = upload(lib, mean_norm, sizeof(double) * k);
	if (m > 0)
	{
		bn = upload(lib, NULL, sizeof(long long) * k * m);
		bnd = upload(lib, NULL, sizeof(double) * k * m);
		bdb = upload(lib, NULL, sizeof(double) * k);
	}
	set.k = k;
	set.d = d;
	set.m = m;
	set.centroids = bc;
	set.mean_dist = bmd;
	set.mean_norm = bmn;
	set.nearest = bn;
	set.nearest_dist = bnd;
	set.db_ratio = bdb;
	if (!check(lib->table(&set, &err) == CVCUDA_OK, "%s: health_neighbour_table: %s", name,
			   err.message))
		rc = -1;
	if (m > 0)
	{
		download(lib, bn, gpu->nearest, sizeof(long long) * k * m);
		download(lib, bnd, gpu->nearest_dist, sizeof(double) * k * m);
		download(lib, bdb, gpu->db_ratio, sizeof(double) * k);
	}
	for (int ch = 0; ch < nchunks && rc == 0; ch++)
	{
		long long	c0 = cut[ch],
					nc = cut[ch + 1] - cut[ch];
		long long  *off = malloc(sizeof(long long) * (nc + 1));
		long long	rows = data->off[cut[ch + 1]] - data->off[c0];
		CvClusterStats *before = malloc(sizeof(CvClusterStats) * (nc > 0 ? nc : 1));
		CvCudaBuffer *bx,
				   *bo,
				   *bs;

		for (long long c = 0; c <= nc; c++)
			off[c] = data->off[c0 + c] - data->off[c0];
		memcpy(before, gpu->stats + c0, sizeof(CvClusterStats) * nc);
		for (long long c = 0; c < nc; c++)
			poison_members_columns(&before[c]);
		bx = upload(lib, data->x + data->off[c0] * d, sizeof(float) * rows * d);
		bo = upload(lib, off, sizeof(long long) * (nc + 1));
		bs = upload(lib, before, sizeof(CvClusterStats) * nc);
		if (!check(lib->members(bx, bo, nc, c0, &set, params, bs, &err) == CVCUDA_OK,
				   "%s: health_members chunk %d: %s", name, ch, err.message))
			rc = -1;
		download(lib, bs, gpu->stats + c0, sizeof(CvClusterStats) * nc);
		for (long long c = 0; c < nc; c++)
			check(memcmp(&before[c].value, &gpu->stats[c0 + c].value,
						 sizeof(double) * CV_STAT_SPLIT_GAIN) == 0 &&
				  memcmp(&before[c].is_null, &gpu->stats[c0 + c].is_null, CV_STAT_SPLIT_GAIN) == 0,
				  "%s: cluster %lld: health_members left section 1 as it was", name, c0 + c);
		lib->free(bx);
		lib->free(bo);
		lib->free(bs);
		free(off);
		free(before);
	}
	lib->free(bc);
	lib->free(bmd);
	lib->free(bmn);
	lib->free(bn);
	lib->free(bnd);
	lib->free(bdb);
done:
	free(mean_dist);
	free(mean_norm);
	return rc;
}

/* ---------------------------------------------------------------------
 * Comparison under STATISTICS.md's tolerances.
 * --------------------------------------------------------------------- */

/* True when |gpu - ref| <= 1e-4 |ref| + 1e-6 scale. */
static int
close_to(double gpu, double ref, double scale)
{
	return fabs(gpu - ref) <= 1e-4 * fabs(ref) + 1e-6 * scale;
}

/* The tolerance scale of a column. */
static double
column_scale(const CvClusterStats *ref, int col)
{
	double		mn = ref->value[CV_STAT_MEAN_NORM];

	switch (col)
	{
		case CV_STAT_CENTROID_NORM:
		case CV_STAT_MEAN_DIST:
		case CV_STAT_SPREAD:
		case CV_STAT_RADIUS:
		case CV_STAT_MEAN_NORM:
		case CV_STAT_MEAN_PAIRWISE_DIST:
		case CV_STAT_BREADTH:
		case CV_STAT_NEAREST_DIST:
			return mn;
		case CV_STAT_INERTIA:
		case CV_STAT_BETWEEN_SS:
			return 1e-3 * ref->value[CV_STAT_N] * mn * mn;
		case CV_STAT_SKEW:
		case CV_STAT_KURTOSIS:
			return 10;
		default:
			return 1;
	}
}

/* r_i = ||x_i - c|| in float64. */
static double
dist_to(const float *x, const double *c, int d)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
	{
		double		e = (double) x[j] - c[j];

		s += e * e;
	}
	return sqrt(s);
}

/* Float64 squared distance of two centroids. */
static double
centroid_dist(const double *a, const double *b, int d)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
		s += (a[j] - b[j]) * (a[j] - b[j]);
	return sqrt(s);
}

/* Members of a cluster whose value v lies within 1e-5 max(|t|, scale) of t. */
static long long
band_count(const double *v, long long n, double t, double scale)
{
	long long	count = 0;

	for (long long i = 0; i < n; i++)
		count += fabs(v[i] - t) <= 1e-5 * fmax(fabs(t), scale);
	return count;
}

/* True when the two-means reference has a near-tie in any iteration. */
static int
two_means_near_tie(const float *x, long long n, int d)
{
	double	   *a = malloc(sizeof(double) * d * 4);
	double	   *b = a + d,
			   *sa = a + 2 * d,
			   *sb = a + 3 * d;
	int			tie = 0;

	for (int j = 0; j < d; j++)
	{
		a[j] = x[j];
		b[j] = x[(n - 1) * d + j];
	}
	for (int it = 0; it < 3; it++)
	{
		long long	na = 0,
					nb = 0;

		memset(sa, 0, sizeof(double) * 2 * d);
		for (long long i = 0; i < n; i++)
		{
			double		da = 0,
						db = 0;
			const float *xi = x + i * d;

			for (int j = 0; j < d; j++)
			{
				da += ((double) xi[j] - a[j]) * ((double) xi[j] - a[j]);
				db += ((double) xi[j] - b[j]) * ((double) xi[j] - b[j]);
			}
			if (fabs(da - db) <= 1e-5 * fmax(da, db))
				tie = 1;
			for (int j = 0; j < d; j++)
				(db < da ? sb : sa)[j] += (double) xi[j] - (double) x[j];
			if (db < da)
				nb++;
			else
				na++;
		}
		for (int j = 0; j < d; j++)
		{
			if (na > 0)
				a[j] = (double) x[j] + sa[j] / (double) na;
			if (nb > 0)
				b[j] = (double) x[j] + sb[j] / (double) nb;
		}
	}
	free(a);
	return tie;
}

/* core_periphery_ratio: gpu (value or NULL) reachable by moving band members. */
static int
core_periphery_ok(const CvClusterStats *g, long long core, long long bc, long long per,
				  long long bp)
{
	int			null = null_byte(g, CV_STAT_CORE_PERIPHERY_RATIO) != 0;
	double		v = g->value[CV_STAT_CORE_PERIPHERY_RATIO];

	for (long long p = per - bp; p <= per + bp; p++)
	{
		if (p < 0)
			continue;
		if (p == 0)
		{
			if (null)
				return 1;
			continue;
		}
		if (null)
			continue;
		for (long long c = core - bc; c <= core + bc; c++)
			if (c >= 0 && fabs(v - (double) c / (double) p) <= 1e-12 * fmax(1, v))
				return 1;
	}
	return 0;
}

/* True when column col of a cluster is exempt from the comparison. */
typedef struct Exempt
{
	int			split;			/* two-means near-tie */
	int			band;			/* a degenerate quantity in its band: NULL-ness free */
	int			neighbours;		/* neighbour set ambiguous */
} Exempt;

/* True when v/scale lies between 0.1 eps and 10 eps (a degenerate band). */
static int
in_band(double v, double scale)
{
	return v >= 0.1 * CV_HEALTH_EPS * scale && v <= 10 * CV_HEALTH_EPS * scale;
}

/* Compares section 1 and the centroids after health_centroid (not novelty, between_ss). */
static void
compare_section1(const Data *data, const Result *gpu, const Result *ref, const char *name,
				 const Exempt *ex, const double *r_ref, const CvHealthParams *params)
{
	int			d = data->d;

	for (long long c = 0; c < data->k; c++)
	{
		const CvClusterStats *g = &gpu->stats[c],
				   *s = &ref->stats[c];
		long long	n = data->off[c + 1] - data->off[c];
		const double *r = r_ref + data->off[c];
		int			ok = 1;
		double		mu = s->value[CV_STAT_MEAN_DIST],
					sd = s->value[CV_STAT_SPREAD],
					mn = s->value[CV_STAT_MEAN_NORM];

		for (int col = 0; col <= CV_STAT_EMBEDDING_QUALITY; col++)
		{
			unsigned	nb = null_byte(g, col);

			if (!check(nb <= 1, "%s: cluster %lld column %s: NULL flag written", name, c,
					   cv_stat_names[col]))
				continue;
			if (col == CV_STAT_OUTLIER_RATIO || col == CV_STAT_CORE_PERIPHERY_RATIO)
				continue;
			if (ex[c].band && col != CV_STAT_N)
				continue;
			if (!check(nb == s->is_null[col], "%s: cluster %lld column %s: NULL %u, reference %d",
					   name, c, cv_stat_names[col], nb, s->is_null[col]))
				continue;
			if (nb)
				continue;
			if (col == CV_STAT_N)
				ok = g->value[col] == s->value[col];
			else
				ok = isfinite(g->value[col]) &&
					close_to(g->value[col], s->value[col], column_scale(s, col));
			check(ok, "%s: cluster %lld column %s: %.17g, reference %.17g", name, c,
				  cv_stat_names[col], g->value[col], s->value[col]);
		}
		check(flag_byte(g, offsetof(CvClusterStats, collapsed)) == s->collapsed || ex[c].band,
			  "%s: cluster %lld: collapsed %u, reference %d", name, c,
			  flag_byte(g, offsetof(CvClusterStats, collapsed)), s->collapsed);
		if (ex[c].band)
			continue;
		/* threshold counts over their bands */
		if (n > 0 && sd > CV_HEALTH_EPS * mu && !s->collapsed)
		{
			double		t = mu + params->outlier_z * sd;
			long long	out = 0,
						core = 0,
						per = 0;

			for (long long i = 0; i < n; i++)
			{
				out += r[i] > t;
				core += r[i] <= mu - sd;
				per += r[i] >= mu + sd;
			}
			check(null_byte(g, CV_STAT_OUTLIER_RATIO) == 0 &&
				  fabs(g->value[CV_STAT_OUTLIER_RATIO] * n - out) <= band_count(r, n, t, mn) + 1e-6,
				  "%s: cluster %lld outlier_ratio %.17g, reference %.17g", name, c,
				  g->value[CV_STAT_OUTLIER_RATIO], s->value[CV_STAT_OUTLIER_RATIO]);
			check(core_periphery_ok(g, core, band_count(r, n, mu - sd, mn), per,
									band_count(r, n, mu + sd, mn)),
				  "%s: cluster %lld core_periphery_ratio %.17g (NULL %u), reference %.17g (NULL %d)",
				  name, c, g->value[CV_STAT_CORE_PERIPHERY_RATIO],
				  null_byte(g, CV_STAT_CORE_PERIPHERY_RATIO),
				  s->value[CV_STAT_CORE_PERIPHERY_RATIO], s->is_null[CV_STAT_CORE_PERIPHERY_RATIO]);
		}
		else
		{
			for (int col = CV_STAT_OUTLIER_RATIO; col <= CV_STAT_CORE_PERIPHERY_RATIO; col++)
				check(null_byte(g, col) == s->is_null[col] &&
					  (s->is_null[col] || g->value[col] == s->value[col]),
					  "%s: cluster %lld column %s: %.17g, reference %.17g", name, c,
					  cv_stat_names[col], g->value[col], s->value[col]);
		}
		/* the centroid: bit for bit for identical members, else a length */
		ok = 1;
		for (int j = 0; j < d; j++)
		{
			double		gv = gpu->centroids[c * d + j],
						rv = ref->centroids[c * d + j];

			if (s->value[CV_STAT_RADIUS] == 0 && n > 0 ? gv != rv : !close_to(gv, rv, mn))
				ok = 0;
		}
		check(ok, "%s: cluster %lld: centroid", name, c);
	}
}

/* Compares the neighbour table (labels up to near-ties, distances, db_ratio). */
static void
compare_table(const Data *data, const Result *gpu, const Result *ref, const char *name)
{
	int			m = ref->m,
				d = data->d;

	for (long long c = 0; c < data->k && m > 0; c++)
	{
		double		mn = ref->stats[c].value[CV_STAT_MEAN_NORM];
		int			ok = 1;

		for (int q = 0; q < m; q++)
		{
			long long	gi = gpu->nearest[c * m + q];
			double		rd = ref->nearest_dist[c * m + q];

			if (gi < 0 || gi >= data->k || gi == c)
			{
				ok = 0;
				break;
			}
			/* another label is fine when its distance ties the reference's within 1e-5 */
			if (gi != ref->nearest[c * m + q] &&
				fabs(centroid_dist(ref->centroids + c * d, ref->centroids + gi * d, d) - rd) >
				1e-5 * rd)
				ok = 0;
			if (!close_to(gpu->nearest_dist[c * m + q], rd, fmax(mn, 1e-300)))
				ok = 0;
		}
		check(ok, "%s: cluster %lld: neighbour table (first %lld at %.17g, reference %lld at %.17g)",
			  name, c, gpu->nearest[c * m], gpu->nearest_dist[c * m], ref->nearest[c * m],
			  ref->nearest_dist[c * m]);
		check(close_to(gpu->db_ratio[c], ref->db_ratio[c], 1), "%s: cluster %lld: db_ratio %.17g, reference %.17g",
			  name, c, gpu->db_ratio[c], ref->db_ratio[c]);
	}
}

/* True when the neighbour set of cluster c is ambiguous (a near-tie at its edge). */
static int
neighbours_ambiguous(const Data *data, const Result *ref, long long c)
{
	int			d = data->d,
				m = ref->m;
	double		edge;

	if (m < 1 || m >= data->k - 1)
		return 0;
	edge = ref->nearest_dist[c * m + m - 1];
	for (long long j = 0; j < data->k; j++)
	{
		int			in = j == c;

		for (int q = 0; q < m; q++)
			in |= ref->nearest[c * m + q] == j;
		if (!in && fabs(centroid_dist(ref->centroids + c * d, ref->centroids + j * d, d) - edge) <=
			1e-5 * edge)
			return 1;
	}
	return 0;
}

/* Compares sections 2-6 after health_members. */
static void
compare_members(const Data *data, const Result *gpu, const Result *ref, const char *name,
				const Exempt *ex)
{
	int			d = data->d;
	int			m = ref->m;

	for (long long c = 0; c < data->k; c++)
	{
		const CvClusterStats *g = &gpu->stats[c],
				   *s = &ref->stats[c];
		long long	n = data->off[c + 1] - data->off[c];
		const float *x = data->x + data->off[c] * d;

		for (int col = CV_STAT_SPLIT_GAIN; col < CV_STAT_COUNT; col++)
		{
			unsigned	nb = null_byte(g, col);
			int			section3 = col >= CV_STAT_MEAN_PAIRWISE_DIST && col <= CV_STAT_SPLIT_SILHOUETTE;
			int			ok;

			if (!check(nb <= 1 && (nb || isfinite(g->value[col])),
					   "%s: cluster %lld column %s written (NULL byte %u)", name, c,
					   cv_stat_names[col], nb))
				continue;
			if (section3 && n > PAIRWISE_REF_MAX)
				continue;
			if (ex[c].band)
				continue;
			if (col <= CV_STAT_SPLIT_SEPARATION && ex[c].split)
				continue;
			if (col == CV_STAT_SPLIT_SILHOUETTE && ex[c].split)
				continue;
			if (!check(nb == s->is_null[col], "%s: cluster %lld column %s: NULL %u, reference %d",
					   name, c, cv_stat_names[col], nb, s->is_null[col]))
				continue;
			if (nb || section3 || col == CV_STAT_EFFECTIVE_RANK)
				continue;
			if (col == CV_STAT_NEAREST_CLUSTER)
			{
				long long	gi = (long long) g->value[col];
				double		rd = s->value[CV_STAT_NEAREST_DIST];

				ok = g->value[col] == s->value[col] ||
					(gi >= 0 && gi < data->k && gi != c &&
					 fabs(centroid_dist(ref->centroids + c * d, ref->centroids + gi * d, d) - rd) <=
					 1e-5 * rd);
			}
			else if (col == CV_STAT_NEIGHBOUR_RELEVANCE)
			{
				long long	band = 0,
							home = 0;

				if (neighbours_ambiguous(data, ref, c))
					continue;
				for (long long i = 0; i < n; i++)
				{
					double		r = dist_to(x + i * d, ref->centroids + c * d, d),
								b = INFINITY;

					for (int q = 0; q < m; q++)
						b = fmin(b, dist_to(x + i * d, ref->centroids + ref->nearest[c * m + q] * d, d));
					home += r <= b;
					band += fabs(r - b) <= 1e-5 * fmax(b, s->value[CV_STAT_MEAN_NORM]);
				}
				ok = fabs(g->value[col] * n - home) <= band + 1e-6;
			}
			else if (col == CV_STAT_CENTROID_SILHOUETTE && neighbours_ambiguous(data, ref, c))
				continue;
			else
				ok = close_to(g->value[col], s->value[col], column_scale(s, col));
			check(ok, "%s: cluster %lld column %s: %.17g, reference %.17g", name, c,
				  cv_stat_names[col], g->value[col], s->value[col]);
		}
		check(flag_byte(g, offsetof(CvClusterStats, rank_refused)) == s->rank_refused,
			  "%s: cluster %lld: rank_refused", name, c);
	}
}

/* Degenerate bands and two-means near-ties of the reference, per cluster. */
static Exempt *
exemptions(const Data *data, const Result *ref)
{
	Exempt	   *ex = calloc(data->k > 0 ? data->k : 1, sizeof(Exempt));
	int			d = data->d;

	for (long long c = 0; c < data->k; c++)
	{
		const CvClusterStats *s = &ref->stats[c];
		long long	n = data->off[c + 1] - data->off[c];
		double		mn = s->value[CV_STAT_MEAN_NORM];

		ex[c].band = in_band(s->value[CV_STAT_RADIUS], mn) ||
			in_band(s->value[CV_STAT_SPREAD], s->value[CV_STAT_MEAN_DIST]) ||
			in_band(s->value[CV_STAT_CENTROID_NORM], mn);
		for (long long j = 0; j < data->k; j++)
			if (j != c &&
				in_band(centroid_dist(ref->centroids + c * d, ref->centroids + j * d, d),
						fmax(mn, ref->stats[j].value[CV_STAT_MEAN_NORM])))
				ex[c].band = 1;
		if (n >= 2 && !s->collapsed && two_means_near_tie(data->x + data->off[c] * d, n, d))
		{
			ex[c].split = 1;
			exempt_split++;
		}
	}
	return ex;
}

/* One case: the pipeline in the given chunks against the reference. */
static void
run_case(const Library *lib, const Data *data, const CvHealthParams *params,
		 const long long *cut, int nchunks, const char *name)
{
	Result		gpu,
				ref;
	Exempt	   *ex;
	double	   *r_ref = malloc(sizeof(double) * (data->off[data->k] > 0 ? data->off[data->k] : 1));
	int			failed_before = failed;
	double		ms[CVCUDA_HEALTH_FAMILIES];

	if (run_pipeline(lib, data, params, cut, nchunks, name, &gpu) != 0)
	{
		free_result(&gpu);
		free(r_ref);
		return;
	}
	lib->timings(ms);
	reference(data, params, &gpu, &ref);
	for (long long c = 0; c < data->k; c++)
		for (long long i = data->off[c]; i < data->off[c + 1]; i++)
			r_ref[i] = dist_to(data->x + i * data->d, ref.centroids + c * data->d, data->d);
	ex = exemptions(data, &ref);
	compare_section1(data, &gpu, &ref, name, ex, r_ref, params);
	compare_table(data, &gpu, &ref, name);
	compare_members(data, &gpu, &ref, name, ex);
	printf("%s: %s (k %lld, rows %lld, d %d, %d chunk%s; ms centroid %.3f two-means %.3f "
		   "pairwise %.3f neighbour %.3f potential %.3f rank %.3f)\n",
		   failed == failed_before ? "ok" : "FAILED", name, data->k, data->off[data->k],
		   data->d, nchunks, nchunks > 1 ? "s" : "", ms[0], ms[1], ms[2], ms[3], ms[4], ms[5]);
	free(ex);
	free(r_ref);
	free_result(&gpu);
	free_result(&ref);
}

/* Malformed calls: each answers CVCUDA_INVALID_ARGUMENT with a message. */
static void
run_argument_checks(const Library *lib, const CvHealthParams *params)
{
	float		x[4 * 3] = {0};
	long long	off[3] = {0, 2, 4},
				bad_off[3] = {0, 3, 2},
				nonzero_off[3] = {1, 2, 4};
	CvCudaBuffer *bx = upload(lib, x, sizeof(x)),
			   *bo = upload(lib, off, sizeof(off)),
			   *bbad = upload(lib, bad_off, sizeof(bad_off)),
			   *bnz = upload(lib, nonzero_off, sizeof(nonzero_off)),
			   *bs = upload(lib, NULL, 2 * sizeof(CvClusterStats)),
			   *bsmall = upload(lib, NULL, sizeof(CvClusterStats)),
			   *bc = upload(lib, NULL, 2 * 3 * sizeof(double)),
			   *bk = upload(lib, NULL, 2 * sizeof(double)),
			   *bn = upload(lib, NULL, 2 * sizeof(long long));
	CvHealthParams bad = *params;
	CvCudaCentroidSet set = {2, 3, 1, bc, bk, bk, bn, bk, bk};
	CvCudaError err;

#define EXPECT_INVALID(call, what) \
	do { \
		memset(&err, 0, sizeof(err)); \
		check((call) == CVCUDA_INVALID_ARGUMENT && err.message[0] != '\0', "malformed call: %s", what); \
	} while (0)

	check(lib->centroid(bx, bo, 2, 3, params, bc, bs, &err) == CVCUDA_OK,
		  "well-formed small call: %s", err.message);
	EXPECT_INVALID(lib->centroid(bx, bo, 2, 0, params, bc, bs, &err), "d = 0");
	EXPECT_INVALID(lib->centroid(bx, bo, 2, CVCUDA_HEALTH_MAX_DIMS + 1, params, bc, bs, &err),
				   "d too large");
	EXPECT_INVALID(lib->centroid(bx, bbad, 2, 3, params, bc, bs, &err), "offsets decrease");
	EXPECT_INVALID(lib->centroid(bx, bnz, 2, 3, params, bc, bs, &err), "offsets[0] != 0");
	EXPECT_INVALID(lib->centroid(bx, bo, 2, 4, params, bc, bs, &err), "members too small");
	EXPECT_INVALID(lib->centroid(bx, bo, 3, 3, params, bc, bs, &err), "offsets too small");
	EXPECT_INVALID(lib->centroid(bx, bo, 2, 3, params, bc, bsmall, &err), "stats too small");
	EXPECT_INVALID(lib->centroid(bx, bo, 2, 3, params, bk, bs, &err), "centroids too small");
	EXPECT_INVALID(lib->centroid(bx, bo, -1, 3, params, bc, bs, &err), "nclusters < 0");
	EXPECT_INVALID(lib->centroid(NULL, bo, 2, 3, params, bc, bs, &err), "members NULL");
	bad.dup_cos = 0;
	EXPECT_INVALID(lib->centroid(bx, bo, 2, 3, &bad, bc, bs, &err), "dup_cos 0");
	bad = *params;
	bad.sigma_bins = 1;
	EXPECT_INVALID(lib->members(bx, bo, 2, 0, &set, &bad, bs, &err), "sigma_bins 1");
	check(lib->table(&set, &err) == CVCUDA_OK, "well-formed table: %s", err.message);
	check(lib->members(bx, bo, 2, 0, &set, params, bs, &err) == CVCUDA_OK,
		  "well-formed members: %s", err.message);
	EXPECT_INVALID(lib->members(bx, bo, 2, 1, &set, params, bs, &err), "first_cluster past k");
	EXPECT_INVALID(lib->members(bx, bo, 2, -1, &set, params, bs, &err), "first_cluster < 0");
	set.m = 2;
	EXPECT_INVALID(lib->table(&set, &err), "m > k - 1");
	set.m = 1;
	set.d = 4;
	EXPECT_INVALID(lib->members(bx, bo, 2, 0, &set, params, bs, &err), "set d differs");
	set.d = 3;
	set.nearest = NULL;
	EXPECT_INVALID(lib->table(&set, &err), "table buffer NULL");
	EXPECT_INVALID(lib->table(NULL, &err), "set NULL");
	lib->free(bx);
	lib->free(bo);
	lib->free(bbad);
	lib->free(bnz);
	lib->free(bs);
	lib->free(bsmall);
	lib->free(bc);
	lib->free(bk);
	lib->free(bn);
#undef EXPECT_INVALID
}

/* The mixed chunk: sizes 1, 2, 17, 1000 and the degenerate clusters at d = 1024. */
static void
run_mixed(const Library *lib, const CvHealthParams *params, uint64_t *state)
{
	static const long long sizes[] = {1, 2, 17, 1000, 5, 3, 4, 4, 17, 2, 1, 60};
	static const Kind kinds[] = {KIND_BLOB, KIND_BLOB, KIND_BLOB, KIND_BLOB, KIND_IDENTICAL,
	KIND_ZERO, KIND_BLOB, KIND_COPY, KIND_BLOB, KIND_IDENTICAL, KIND_ZERO, KIND_BLOB};
	long long	k = sizeof(sizes) / sizeof(sizes[0]);
	Data		data = make_data(k, sizes, kinds, 1024, 3.0, 0.3, state);
	long long	one[2] = {0, k},
				two[3] = {0, 5, k};

	run_case(lib, &data, params, one, 1, "mixed sizes and degenerate clusters, d 1024");
	run_case(lib, &data, params, two, 2, "the same in two chunks");
	free_data(&data);
}

/* Many small clusters at a small d (many centroids in the table, near neighbours). */
static void
run_many(const Library *lib, const CvHealthParams *params, uint64_t *state)
{
	long long	k = 300;
	long long  *sizes = malloc(sizeof(long long) * k);
	Kind	   *kinds = malloc(sizeof(Kind) * k);
	Data		data;
	long long	cut[4] = {0, 1, 150, k};

	for (long long c = 0; c < k; c++)
	{
		sizes[c] = 1 + (long long) (next_random(state) % 90);
		kinds[c] = KIND_BLOB;
	}
	data = make_data(k, sizes, kinds, 24, 0.5, 0.4, state);
	run_case(lib, &data, params, cut, 3, "300 clusters at d 24, three chunks");
	free_data(&data);
	free(sizes);
	free(kinds);
}

/* One cluster of 100,000 at d = 16 (K = 1), and a small K = 1 case. */
static void
run_single(const Library *lib, const CvHealthParams *params, uint64_t *state)
{
	long long	big = strcmp(lib->backend_name(), "cuda") == 0 ? 100000 : 5000,
				small = 50;
	Kind		kind = KIND_BLOB;
	Data		data = make_data(1, &big, &kind, 16, 5.0, 1.0, state);
	long long	one[2] = {0, 1};
	char		name[64];

	/* the CPU shim's pairwise family needs minutes at 100,000: it gets a smaller one */
	snprintf(name, sizeof(name), "one cluster of %lld at d 16", big);
	run_case(lib, &data, params, one, 1, name);
	free_data(&data);
	data = make_data(1, &small, &kind, 7, 0.0, 1.0, state);
	run_case(lib, &data, params, one, 1, "K = 1, n 50, d 7");
	free_data(&data);
}

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	Library		lib;
	CvCudaDeviceInfo info;
	uint64_t	state;
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, 2000};
	CvHealthParams params3 = {1.0, 0.9, 3, 64, 10, 100};

	printf("health_test seed %llu\n", (unsigned long long) args.seed);
	health_open(&args, &lib);
	check(lib.abi_version() == CVCUDA_ABI_VERSION, "ABI version");
	printf("backend: %s\n", lib.backend_name());
	harness_init_device(&args, lib.init, &info, "device tests");
	run_argument_checks(&lib, &params);
	state = args.seed;
	run_mixed(&lib, &params, &state);
	run_many(&lib, &params3, &state);
	run_single(&lib, &params, &state);
	printf("two-means near-ties exempted: %d clusters\n", exempt_split);
	return harness_finish();
}
