/*
 * ivf_search_test: opens a clustervec GPU library with dlopen, as the
 * worker does, builds IVF mirrors in its device buffers and checks
 * cvcuda_ivf_search against a brute-force reference over the probed lists
 * built here on src/math's scalar kernels: lists ranked by the exact
 * centroid distance (ties to the lower list), every row of the first probes
 * lists measured with the operator's exact distance, the k best kept by
 * (distance, position).  Positions must be equal and distances bitwise
 * equal, for the three metrics, probes from 1 to past lists, k past the
 * rows of the probed lists (tail -1 / +inf), empty lists, duplicate rows
 * and centroids (ties), zero vectors (cosine NaN), and d from 1 to 2000;
 * on fresh clustered random data whose seed is printed, outputs poisoned
 * before every call with a guard zone after them.  Also: every malformed
 * call answers CVCUDA_INVALID_ARGUMENT.  Two cases run again with
 * CLUSTERVEC_CUDA_SEARCH_BUDGET at 60 kB, which forces the CUDA library
 * through many query batches (the CPU shim ignores it), and several with
 * CLUSTERVEC_CUDA_SEARCH_SEGMENTS at 7 and 64, which splits each query's
 * probed rows over that many blocks merged afterwards (segments without
 * rows, ties across segments, k 1024).
 *
 * Usage: ivf_search_test path/to/library.so [--require-device] [--seed N]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clustervec_cuda.h"
#include "distance.h"
#include "harness.h"

typedef CvCudaStatus (*SearchFn) (const CvCudaBuffer *, int, int, const CvCudaBuffer *,
								  const CvCudaBuffer *, int, const float *, int, int, int,
								  const int *, long long *, double *, int *, CvCudaError *);

typedef void (*StopFn) (CvCudaStopCheck, void *);

typedef struct Library
{
	StopFn		set_stop_check;
	InitFn		init;
	AllocFn		alloc;
	FreeFn		free;
	WriteFn		write;
	SearchFn	search;
} Library;

typedef enum DataKind
{
	DATA_CLUSTERED,				/* gaussian-ish blobs around the centroids */
	DATA_DUPLICATES,			/* few distinct rows, repeated; duplicate centroids */
	DATA_SMALL_INTS,			/* integers 0..3: many ties */
	DATA_ZEROS					/* clustered, with zero rows and a zero query */
} DataKind;

typedef struct SearchCase
{
	const char *name;
	int			lists;
	long long	rows;
	int			d;
	int			nq;
	int			k;
	DataKind	kind;
} SearchCase;

static const SearchCase cases[] = {
	{"d 1, small integers", 8, 400, 1, 50, 10, DATA_SMALL_INTS},
	{"d 3", 16, 3000, 3, 200, 10, DATA_CLUSTERED},
	{"d 3, k 1024", 10, 1500, 3, 20, 1024, DATA_CLUSTERED},
	{"d 128", 32, 8000, 128, 300, 10, DATA_CLUSTERED},
	{"d 128, 1000 queries, k 100", 64, 10000, 128, 1000, 100, DATA_CLUSTERED},
	{"d 128, one query", 32, 8000, 128, 1, 10, DATA_CLUSTERED},
	{"d 128, duplicates", 16, 4000, 128, 100, 50, DATA_DUPLICATES},
	{"d 17, duplicates, k 1024", 12, 3000, 17, 30, 1024, DATA_DUPLICATES},
	{"d 40, zero vectors", 12, 2000, 40, 60, 20, DATA_ZEROS},
	{"d 1024", 16, 3000, 1024, 60, 10, DATA_CLUSTERED},
	{"d 2000", 8, 1200, 2000, 20, 25, DATA_CLUSTERED},
	{"one list", 1, 500, 24, 10, 7, DATA_CLUSTERED},
	{"rows < k", 6, 20, 5, 10, 30, DATA_CLUSTERED},
	{"no rows", 4, 0, 8, 5, 3, DATA_CLUSTERED},
};

static const char *metric_names[] = {"", "l2", "ip", "cosine"};

/* A mirror on the host: centroids, rows packed per list, offsets. */
typedef struct Mirror
{
	float	   *centroids;
	float	   *vectors;
	long long  *offsets;
	float	   *queries;
} Mirror;

/* Scales a vector to unit length (zero stays zero). */
static void
normalize(float *v, int d)
{
	double		s = 0;

	for (int j = 0; j < d; j++)
		s += (double) v[j] * v[j];
	if (s > 0)
		for (int j = 0; j < d; j++)
			v[j] = (float) (v[j] / sqrt(s));
}

/*
 * Builds the case's mirror: each list gets a centre; every third list (and
 * list 1) stays empty when there are several; rows are centre + noise (or
 * copies of a few distinct rows); queries near random centres.
 */
static void
build_mirror(const SearchCase *c, int metric, uint64_t *state, Mirror *m)
{
	int			d = c->d;
	long long  *count = calloc((size_t) c->lists, sizeof(long long));
	long long  *fill = calloc((size_t) c->lists, sizeof(long long));
	int		   *owner = malloc(sizeof(int) * (size_t) (c->rows + 1));
	float	   *pool = malloc(sizeof(float) * (size_t) 8 * d);

	m->centroids = malloc(sizeof(float) * (size_t) c->lists * d);
	m->vectors = malloc(sizeof(float) * (size_t) (c->rows * d + 1));
	m->offsets = malloc(sizeof(long long) * (size_t) (c->lists + 1));
	m->queries = malloc(sizeof(float) * (size_t) ((long long) c->nq * d + 1));
	for (int l = 0; l < c->lists; l++)
	{
		float	   *ce = m->centroids + (size_t) l * d;

		if (c->kind == DATA_DUPLICATES && l % 4 == 3)
			memcpy(ce, ce - d, sizeof(float) * d);	/* equal centroids: ties by list */
		else
			for (int j = 0; j < d; j++)
				ce[j] = c->kind == DATA_SMALL_INTS ? (float) (next_random(state) % 4) :
					uniformf(state) * 4;
		if (metric != CV_METRIC_L2)
			normalize(ce, d);
	}
	for (int i = 0; i < 8 * d; i++)
		pool[i] = uniformf(state);
	for (long long r = 0; r < c->rows; r++)
	{
		int			l = (int) (next_random(state) % c->lists);

		if (c->lists > 2 && (l % 3 == 2 || l == 1))
			l = 0;
		owner[r] = l;
		count[l]++;
	}
	m->offsets[0] = 0;
	for (int l = 0; l < c->lists; l++)
		m->offsets[l + 1] = m->offsets[l] + count[l];
	for (long long r = 0; r < c->rows; r++)
	{
		int			l = owner[r];
		float	   *v = m->vectors + (m->offsets[l] + fill[l]++) * d;
		const float *ce = m->centroids + (size_t) l * d;
		uint64_t	x = next_random(state);

		for (int j = 0; j < d; j++)
		{
			switch (c->kind)
			{
				case DATA_SMALL_INTS:
					v[j] = (float) (next_random(state) % 4);
					break;
				case DATA_DUPLICATES:
					v[j] = pool[(x % 8) * d + j];
					break;
				default:
					v[j] = ce[j] + uniformf(state) * 0.5f;
					break;
			}
		}
		if (c->kind == DATA_ZEROS && x % 9 == 0)
			memset(v, 0, sizeof(float) * d);
	}
	for (int q = 0; q < c->nq; q++)
	{
		float	   *v = m->queries + (size_t) q * d;
		const float *ce = m->centroids + (size_t) (next_random(state) % c->lists) * d;

		for (int j = 0; j < d; j++)
			v[j] = c->kind == DATA_SMALL_INTS ? (float) (next_random(state) % 4) :
				c->kind == DATA_DUPLICATES && q % 2 == 0 ? pool[j] :
				ce[j] + uniformf(state) * 0.5f;
		if (c->kind == DATA_ZEROS && q == 1)
			memset(v, 0, sizeof(float) * d);
	}
	free(count);
	free(fill);
	free(owner);
	free(pool);
}

static void
free_mirror(Mirror *m)
{
	free(m->centroids);
	free(m->vectors);
	free(m->offsets);
	free(m->queries);
}

typedef struct Ranked
{
	double		distance;
	int			list;
} Ranked;

static int
compare_ranked(const void *a, const void *b)
{
	const Ranked *x = a;
	const Ranked *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return x->list - y->list;
}

/* The definition, on the scalar kernels. */
static int
compare_int(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	return (x > y) - (x < y);
}

/*
 * The definition, on the scalar kernels; probed: each query's probed set in
 * list order.  given (or NULL): each query's probes lists, instead of the
 * nearest.
 */
static void
reference_search(const SearchCase *c, const Mirror *m, int metric, int probes, const int *given,
				 long long *pos, double *dist, int *probed)
{
	const CvDistanceKernels *s = cv_distance_kernels_for(CV_SIMD_SCALAR);
	int			d = c->d;
	int			k = c->k;
	Ranked	   *ranked = malloc(sizeof(Ranked) * (size_t) c->lists);

	if (probes > c->lists)
		probes = c->lists;
	for (int q = 0; q < c->nq; q++)
	{
		const float *query = m->queries + (size_t) q * d;
		long long  *ix = pos + (long long) q * k;
		double	   *dx = dist + (long long) q * k;
		int			size = 0;

		for (int l = 0; l < c->lists; l++)
		{
			const float *ce = m->centroids + (size_t) l * d;
			double		v = metric == CV_METRIC_L2 ? s->l2_squared(query, ce, d) :
				-s->inner_product(query, ce, d);

			ranked[l].distance = isnan(v) ? INFINITY : v;
			ranked[l].list = l;
		}
		qsort(ranked, c->lists, sizeof(Ranked), compare_ranked);
		for (int p = 0; p < probes && given != NULL; p++)
			ranked[p].list = given[(size_t) q * probes + p];
		for (int p = 0; p < probes; p++)
			probed[(size_t) q * probes + p] = ranked[p].list;
		qsort(probed + (size_t) q * probes, probes, sizeof(int), compare_int);
		for (int p = 0; p < probes; p++)
		{
			int			l = ranked[p].list;

			for (long long r = m->offsets[l]; r < m->offsets[l + 1]; r++)
			{
				const float *v = m->vectors + r * d;
				double		dv;
				int			at = size;

				if (metric == CV_METRIC_L2)
					dv = sqrt(s->l2_squared(query, v, d));
				else if (metric == CV_METRIC_INNER_PRODUCT)
					dv = -s->inner_product(query, v, d);
				else
					dv = cv_cosine_distance_from_parts(s->cosine_parts(query, v, d));
				while (at > 0 && ref_before(dv, r, dx[at - 1], ix[at - 1]))
					at--;
				if (at >= k)
					continue;
				if (size < k)
					size++;
				memmove(ix + at + 1, ix + at, sizeof(long long) * (size - 1 - at));
				memmove(dx + at + 1, dx + at, sizeof(double) * (size - 1 - at));
				ix[at] = r;
				dx[at] = dv;
			}
		}
		for (int i = 0; i < k; i++)
		{
			if (i >= size)
			{
				ix[i] = -1;
				dx[i] = INFINITY;
			}
			dx[i] = reported(dx[i]);
		}
	}
	free(ranked);
}

#define GUARD 16

static void
poison(long long *pos, double *dist, long long count)
{
	uint64_t	bits = UINT64_C(0x7ff4dead0000beef);

	for (long long i = 0; i < count; i++)
	{
		pos[i] = -2;
		memcpy(&dist[i], &bits, sizeof(double));
	}
}

static void
poison_probed(int *probed, long long count)
{
	for (long long i = 0; i < count; i++)
		probed[i] = -7;
}

/* The probed sets equal, and the guard after them untouched. */
static int
same_probed(const int *probed, const int *rprobed, long long count)
{
	for (long long i = 0; i < count; i++)
		if (probed[i] != rprobed[i])
		{
			printf("  probed list %lld: got %d, expected %d\n", i, probed[i], rprobed[i]);
			return 0;
		}
	for (long long i = count; i < count + GUARD; i++)
		if (probed[i] != -7)
		{
			printf("  probed guard zone overwritten at %lld\n", i - count);
			return 0;
		}
	return 1;
}

static int
same_results(const long long *pos, const double *dist, const long long *rpos,
			 const double *rdist, long long count, int k)
{
	uint64_t	bits = UINT64_C(0x7ff4dead0000beef);

	for (long long i = 0; i < count; i++)
		if (pos[i] != rpos[i] || memcmp(&dist[i], &rdist[i], sizeof(double)) != 0)
		{
			printf("  query %lld rank %lld: got position %lld distance %.17g, expected %lld %.17g\n",
				   i / k, i % k, pos[i], dist[i], rpos[i], rdist[i]);
			return 0;
		}
	for (long long i = count; i < count + GUARD; i++)
		if (pos[i] != -2 || memcmp(&dist[i], &bits, sizeof(double)) != 0)
		{
			printf("  guard zone overwritten at %lld\n", i - count);
			return 0;
		}
	return 1;
}

/* A device buffer holding bytes of host data (at least 1 byte). */
static CvCudaBuffer *
upload(const Library *lib, const void *data, size_t bytes)
{
	CvCudaBuffer *b = NULL;
	CvCudaError err;

	if (lib->alloc(bytes > 0 ? bytes : 1, &b, &err) != CVCUDA_OK)
	{
		printf("  buffer_alloc: %s\n", err.message);
		return NULL;
	}
	if (bytes > 0 && lib->write(b, 0, data, bytes, &err) != CVCUDA_OK)
	{
		printf("  buffer_write: %s\n", err.message);
		lib->free(b);
		return NULL;
	}
	return b;
}

/*
 * Given lists (cvlattice's label conditions): each query probes up to 3
 * random lists in ascending order instead of the nearest; the answer is
 * the reference's over exactly those, and out_probed returns them.
 */
static void
run_given(const Library *lib, const SearchCase *c, const Mirror *m, int metric, uint64_t *state,
		  const CvCudaBuffer *bc, const CvCudaBuffer *bv, const CvCudaBuffer *bo, long long *pos,
		  double *dist, long long *rpos, double *rdist, int *probed, int *rprobed,
		  uint64_t seed)
{
	int			g = c->lists < 3 ? c->lists : 3;
	int		   *given = malloc(sizeof(int) * (size_t) c->nq * g);
	long long	results = (long long) c->nq * c->k;
	CvCudaError err;
	CvCudaStatus status;

	for (int q = 0; q < c->nq; q++)
	{
		int		   *row = given + (size_t) q * g;
		int			n = 0;

		/* g distinct lists, ascending: a random start, then random steps */
		row[n++] = (int) (next_random(state) % (uint64_t) (c->lists - g + 1));
		while (n < g)
		{
			int			room = c->lists - (g - n) - row[n - 1];

			row[n] = row[n - 1] + 1 + (int) (next_random(state) % (uint64_t) room);
			n++;
		}
	}
	reference_search(c, m, metric, g, given, rpos, rdist, rprobed);
	poison(pos, dist, results + GUARD);
	poison_probed(probed, (long long) c->nq * g + GUARD);
	status = lib->search(bc, c->lists, c->d, bv, bo, metric, m->queries, c->nq, c->k, g, given,
						 pos, dist, probed, &err);
	if (status != CVCUDA_OK)
		printf("  status %d: %s\n", status, err.message);
	check(status == CVCUDA_OK && same_results(pos, dist, rpos, rdist, results, c->k) &&
		  same_probed(probed, given, (long long) c->nq * g),
		  "%s, %s, %d given lists (seed %llu)", c->name, metric_names[metric], g,
		  (unsigned long long) seed);
	/* the given lists may be the probed output's own memory */
	if (c->nq > 0)
	{
		memcpy(probed, given, sizeof(int) * (size_t) c->nq * g);
		status = lib->search(bc, c->lists, c->d, bv, bo, metric, m->queries, c->nq, c->k, g,
							 probed, pos, dist, probed, &err);
		check(status == CVCUDA_OK && same_results(pos, dist, rpos, rdist, results, c->k) &&
			  same_probed(probed, given, (long long) c->nq * g),
			  "%s, %s, given lists in the probed output (seed %llu)", c->name,
			  metric_names[metric], (unsigned long long) seed);
	}
	free(given);
}

/* One case under one metric, for several probes values. */
static void
run_case(const Library *lib, const SearchCase *c, int metric, uint64_t seed)
{
	uint64_t	state = seed;
	Mirror		m;
	long long	results = (long long) c->nq * c->k;
	long long  *pos = malloc(sizeof(long long) * (size_t) (results + GUARD));
	double	   *dist = malloc(sizeof(double) * (size_t) (results + GUARD));
	long long  *rpos = malloc(sizeof(long long) * (size_t) (results + 1));
	double	   *rdist = malloc(sizeof(double) * (size_t) (results + 1));
	int		   *probed = malloc(sizeof(int) * ((size_t) c->nq * (c->lists + 7) + GUARD));
	int		   *rprobed = malloc(sizeof(int) * ((size_t) c->nq * (c->lists + 7) + 1));
	CvCudaBuffer *bc,
			   *bv,
			   *bo;
	int			probes_set[6] = {1, 2, 3, c->lists / 2, c->lists, c->lists + 7};

	build_mirror(c, metric, &state, &m);
	bc = upload(lib, m.centroids, sizeof(float) * (size_t) c->lists * c->d);
	bv = upload(lib, m.vectors, sizeof(float) * (size_t) (c->rows * c->d));
	bo = upload(lib, m.offsets, sizeof(long long) * (size_t) (c->lists + 1));
	for (int i = 0; i < 6; i++)
	{
		int			probes = probes_set[i];
		char		what[300];
		CvCudaError err;
		CvCudaStatus status;
		long long	probed_count;
		struct timespec t0,
					t1;

		if (probes < 1 || (i > 0 && probes == probes_set[i - 1]))
			continue;
		snprintf(what, sizeof(what), "%s, %s, probes %d (lists %d, rows %lld, d %d, nq %d, k %d, seed %llu)",
				 c->name, metric_names[metric], probes, c->lists, c->rows, c->d, c->nq, c->k,
				 (unsigned long long) seed);
		if (bc == NULL || bv == NULL || bo == NULL)
		{
			check(0, "%s", what);
			continue;
		}
		reference_search(c, &m, metric, probes, NULL, rpos, rdist, rprobed);
		poison(pos, dist, results + GUARD);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		probed_count = (long long) c->nq * (probes < c->lists ? probes : c->lists);
		poison_probed(probed, probed_count + GUARD);
		status = lib->search(bc, c->lists, c->d, bv, bo, metric, m.queries, c->nq, c->k, probes, NULL,
							 pos, dist, probed, &err);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (status != CVCUDA_OK)
		{
			printf("  status %d: %s\n", status, err.message);
			check(0, "%s", what);
		}
		else
		{
			check(same_results(pos, dist, rpos, rdist, results, c->k), "%s", what);
			check(same_probed(probed, rprobed, probed_count),
				  "probed lists: %s", what);
		}
		printf("  %s: %.1f ms\n", what,
			   (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	if (bc != NULL && bv != NULL && bo != NULL)
		run_given(lib, c, &m, metric, &state, bc, bv, bo, pos, dist, rpos, rdist, probed,
				  rprobed, seed);
	lib->free(bc);
	lib->free(bv);
	lib->free(bo);
	free_mirror(&m);
	free(pos);
	free(dist);
	free(rpos);
	free(rdist);
	free(probed);
	free(rprobed);
}

static void
check_invalid(CvCudaStatus status, const CvCudaError *err, const char *what)
{
	char		line[300];

	snprintf(line, sizeof(line), "invalid argument rejected: %s (status %d)", what, status);
	if (status != CVCUDA_INVALID_ARGUMENT)
		printf("  %s\n", err ? err->message : "");
	check(status == CVCUDA_INVALID_ARGUMENT &&
		  (err == NULL || (err->status == CVCUDA_INVALID_ARGUMENT && err->message[0] != '\0')),
		  "%s", line);
}

/* Malformed calls: a mirror of 4 lists x 8 dims, 10 rows. */
static void
run_argument_checks(const Library *lib)
{
	float		cent[4 * 8] = {0};
	float		vec[10 * 8] = {0};
	long long	off[5] = {0, 3, 3, 7, 10};
	long long	bad_start[5] = {1, 3, 3, 7, 10};
	long long	bad_order[5] = {0, 5, 3, 7, 10};
	long long	bad_end[5] = {0, 3, 3, 7, 11};
	float		q[8] = {1};
	long long	ix[8];
	double		dx[8];
	CvCudaError err;
	CvCudaBuffer *bc = upload(lib, cent, sizeof(cent));
	CvCudaBuffer *bv = upload(lib, vec, sizeof(vec));
	CvCudaBuffer *bo = upload(lib, off, sizeof(off));
	CvCudaBuffer *b1 = upload(lib, bad_start, sizeof(off));
	CvCudaBuffer *b2 = upload(lib, bad_order, sizeof(off));
	CvCudaBuffer *b3 = upload(lib, bad_end, sizeof(off));

	check(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err) == CVCUDA_OK,
		  "well-formed call accepted");
	check_invalid(lib->search(bc, 0, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "lists 0");
	check_invalid(lib->search(bc, 4, 0, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "d 0");
	check_invalid(lib->search(bc, 4, CVCUDA_KNN_MAX_DIMS + 1, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err),
				  &err, "d too large");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 0, 2, NULL, ix, dx, NULL, &err), &err, "k 0");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, CVCUDA_SEARCH_MAX_K + 1, 2, NULL, ix, dx, NULL, &err),
				  &err, "k too large");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 0, NULL, ix, dx, NULL, &err), &err, "probes 0");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, -1, 2, 2, NULL, ix, dx, NULL, &err), &err, "nq < 0");
	check_invalid(lib->search(bc, 4, 8, bv, bo, 4, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "metric 4");
	check_invalid(lib->search(bc, 4, 8, bv, bo, -1, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "metric -1");
	check_invalid(lib->search(NULL, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "centroids NULL");
	check_invalid(lib->search(bc, 4, 8, NULL, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "vectors NULL");
	check_invalid(lib->search(bc, 4, 8, bv, NULL, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "offsets NULL");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, NULL, 1, 2, 2, NULL, ix, dx, NULL, &err), &err, "queries NULL");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, NULL, dx, NULL, &err), &err, "positions NULL");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, NULL, NULL, &err), &err, "distances NULL");
	{
		int			backwards[2] = {2, 1},
					outside[2] = {1, 4},
					twice[2] = {1, 1};

		check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, backwards, ix, dx,
								  NULL, &err), &err, "given lists out of order");
		check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, outside, ix, dx,
								  NULL, &err), &err, "a given list past the lists");
		check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, twice, ix, dx,
								  NULL, &err), &err, "a given list twice");
	}
	check_invalid(lib->search(bc, 3, 8, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err,
				  "centroids size mismatch (lists)");
	check_invalid(lib->search(bc, 4, 4, bv, bo, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err,
				  "centroids size mismatch (d)");
	check_invalid(lib->search(bc, 4, 8, bv, bc, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err,
				  "offsets size mismatch");
	check_invalid(lib->search(bc, 4, 8, bv, b1, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err,
				  "offsets[0] != 0");
	check_invalid(lib->search(bc, 4, 8, bv, b2, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err,
				  "offsets decreasing");
	check_invalid(lib->search(bc, 4, 8, bv, b3, CV_METRIC_L2, q, 1, 2, 2, NULL, ix, dx, NULL, &err), &err,
				  "offsets past the vectors");
	check_invalid(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, q, 1, 0, 2, NULL, ix, dx, NULL, NULL), NULL, "k 0, err NULL");
	check(lib->search(bc, 4, 8, bv, bo, CV_METRIC_L2, NULL, 0, 2, 2, NULL, NULL, NULL, NULL, &err) == CVCUDA_OK,
		  "nq 0 with NULL pointers");
	lib->free(bc);
	lib->free(bv);
	lib->free(bo);
	lib->free(b1);
	lib->free(b2);
	lib->free(b3);
}

static int
always_stop(void *arg)
{
	(*(int *) arg)++;
	return 1;
}

/* A stop check that answers "stop" ends a search with CVCUDA_STOPPED; none lets it run. */
static void
run_stop_check(const Library *lib)
{
	float		cent[2 * 4] = {0, 0, 0, 0, 1, 1, 1, 1};
	float		vec[3 * 4] = {0, 0, 0, 1, 1, 1, 1, 0, 2, 2, 2, 2};
	long long	off[3] = {0, 2, 3};
	float		q[4] = {1, 1, 1, 1};
	long long	ix[2];
	double		dx[2];
	int			calls = 0;
	CvCudaError err;
	CvCudaBuffer *bc = upload(lib, cent, sizeof(cent));
	CvCudaBuffer *bv = upload(lib, vec, sizeof(vec));
	CvCudaBuffer *bo = upload(lib, off, sizeof(off));

	lib->set_stop_check(always_stop, &calls);
	check(lib->search(bc, 2, 4, bv, bo, CV_METRIC_L2, q, 1, 2, 1, NULL, ix, dx, NULL, &err) ==
		  CVCUDA_STOPPED && err.status == CVCUDA_STOPPED && calls > 0,
		  "a stop check answering stop stops the search (%d calls)", calls);
	lib->set_stop_check(NULL, NULL);
	check(lib->search(bc, 2, 4, bv, bo, CV_METRIC_L2, q, 1, 2, 1, NULL, ix, dx, NULL, &err) ==
		  CVCUDA_OK && ix[0] == 2, "without a stop check it runs (nearest row %lld)", ix[0]);
	lib->free(bc);
	lib->free(bv);
	lib->free(bo);
}

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	Library		lib;
	CvCudaDeviceInfo info;
	HarnessSymbol symbols[] = {
		{"cvcuda_init", &lib.init},
		{"cvcuda_buffer_alloc", &lib.alloc},
		{"cvcuda_buffer_free", &lib.free},
		{"cvcuda_buffer_write", &lib.write},
		{"cvcuda_ivf_search", &lib.search},
		{"cvcuda_set_stop_check", &lib.set_stop_check},
	};
	uint64_t	seed = args.seed;

	printf("ivf_search_test seed %llu\n", (unsigned long long) seed);
	harness_open(&args, symbols, lengthof(symbols));
	harness_init_device(&args, lib.init, &info, "tests");
	printf("device: %s\n", info.name);
	run_argument_checks(&lib);
	run_stop_check(&lib);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int metric = CV_METRIC_L2; metric <= CV_METRIC_COSINE; metric++)
			run_case(&lib, &cases[i], metric, seed + i * 3 + metric);
	/* a small device budget: the CUDA library then runs many query batches */
	setenv("CLUSTERVEC_CUDA_SEARCH_BUDGET", "60000", 1);
	for (int metric = CV_METRIC_L2; metric <= CV_METRIC_COSINE; metric++)
	{
		run_case(&lib, &cases[1], metric, seed + 1000 + metric);
		run_case(&lib, &cases[3], metric, seed + 1010 + metric);
	}
	unsetenv("CLUSTERVEC_CUDA_SEARCH_BUDGET");
	for (int forced = 0; forced < 2; forced++)
	{
		static const int which[] = {1, 3, 5, 6, 7, 8, 12};

		setenv("CLUSTERVEC_CUDA_SEARCH_SEGMENTS", forced ? "64" : "7", 1);
		for (size_t i = 0; i < lengthof(which); i++)
			for (int metric = CV_METRIC_L2; metric <= CV_METRIC_COSINE; metric++)
				run_case(&lib, &cases[which[i]], metric, seed + 2000 + 10 * i + metric);
	}
	unsetenv("CLUSTERVEC_CUDA_SEARCH_SEGMENTS");
	return harness_finish();
}
