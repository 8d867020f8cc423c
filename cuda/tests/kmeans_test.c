/*
 * kmeans_test: opens a clustervec GPU library with dlopen, as the worker does
 * (clustervec_cuda.so or the CPU shim clustervec_cuda_cpu.so), and checks
 * the k-means entry points against src/math on fresh random data (the seed
 * is printed; --seed N replays a run), outputs poisoned before every call:
 *
 *   refresh: bit for bit the min of dist and src/math's l2_squared;
 *   seeding: cv_kmeans_seed_with driven by cvcuda_kmeans_refresh draws the
 *            seeds of cv_kmeans_seed;
 *   assign:  both modes, all metrics, the float64 brute-force argmin on
 *            points whose best and second-best centroids are not near-ties
 *            (the near-ties, counted, are left out), scores close;
 *   Lloyd:   one iteration's centroids are the float64 means of the
 *            assignment it returns (1e-5 relative), and Lloyd from
 *            cv_kmeans_seed's seeds ends within 1% of cv_kmeans_lloyd's
 *            inertia;
 *   bad arguments give CVCUDA_INVALID_ARGUMENT.
 *
 * Usage: kmeans_test path/to/library.so [--require-device] [--seed N]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clustervec_cuda.h"
#include "harness.h"
#include "math/distance.h"
#include "math/kmeans.h"

typedef CvCudaStatus (*RefreshFn) (const CvCudaBuffer *, long long, int, const float *, int,
								   CvCudaBuffer *, CvCudaError *);
typedef CvCudaStatus (*AssignFn) (const CvCudaBuffer *, long long, int, const CvCudaBuffer *,
								  int, int, int, CvCudaBuffer *, CvCudaBuffer *, CvCudaError *);
typedef CvCudaStatus (*LloydFn) (const CvCudaBuffer *, long long, int, CvCudaBuffer *, int, int,
								 int, int, CvCudaBuffer *, double *, int *, double *,
								 CvCudaError *);

typedef struct Library
{
	AbiFn		abi_version;
	NameFn		backend_name;
	InitFn		init;
	AllocFn		alloc;
	FreeFn		free;
	WriteFn		write;
	ReadFn		read;
	RefreshFn	refresh;
	AssignFn	assign;
	LloydFn		lloyd;
} Library;

static Library lib;
static uint64_t state;

static const char *const metric_names[] = {"L2", "spherical", "inner product"};
static const char *const mode_names[] = {"FP32", "BF16"};

/* Normalises rows to unit length. */
static void
normalise(float *x, long long n, int d)
{
	for (long long i = 0; i < n; i++)
	{
		double		s = 0.0;

		for (int j = 0; j < d; j++)
			s += (double) x[i * d + j] * x[i * d + j];
		s = sqrt(s);
		if (s > 0)
			for (int j = 0; j < d; j++)
				x[i * d + j] = (float) (x[i * d + j] / s);
	}
}

/* k random centres and n points near them (noise relative to spread). */
static void
clustered(float *x, long long n, float *c, int k, int d, float noise)
{
	for (long long j = 0; j < (long long) k * d; j++)
		c[j] = uniformf(&state);
	for (long long i = 0; i < n; i++)
	{
		int			g = (int) (next_random(&state) % (uint64_t) k);

		for (int j = 0; j < d; j++)
			x[i * d + j] = c[(long long) g * d + j] + noise * uniformf(&state);
	}
}

/* A device buffer holding bytes copied from host (or poisoned with 0xff). */
static CvCudaBuffer *
upload(const void *host, size_t bytes)
{
	CvCudaBuffer *b = NULL;
	CvCudaError err;

	if (lib.alloc(bytes, &b, &err) != CVCUDA_OK)
	{
		printf("buffer_alloc of %zu bytes: %s\n", bytes, err.message);
		exit(1);
	}
	if (host)
		lib.write(b, 0, host, bytes, &err);
	else
	{
		void	   *p = malloc(bytes);

		memset(p, 0xff, bytes);
		lib.write(b, 0, p, bytes, &err);
		free(p);
	}
	return b;
}

static void
download(const CvCudaBuffer *b, void *host, size_t bytes)
{
	CvCudaError err;

	if (lib.read(b, 0, host, bytes, &err) != CVCUDA_OK)
		printf("buffer_read: %s\n", err.message);
}

/* ---------------------------------------------------------------- refresh */

static void
test_refresh(long long n, int d, int count)
{
	const CvDistanceKernels *scalar = cv_distance_kernels_for(CV_SIMD_SCALAR);
	float	   *x = malloc(sizeof(float) * n * d);
	float	   *c = malloc(sizeof(float) * (size_t) count * d + 4);
	double	   *dist = malloc(sizeof(double) * n);
	double	   *ref = malloc(sizeof(double) * n);
	CvCudaBuffer *bx,
			   *bd;
	CvCudaError err;
	CvCudaStatus st;
	char		what[200];
	long long	bad = -1;

	for (long long j = 0; j < n * d; j++)
		x[j] = uniformf(&state) * (j % 3 == 0 ? 100.0f : 1.0f);
	for (long long j = 0; j < (long long) count * d; j++)
		c[j] = uniformf(&state);
	for (long long i = 0; i < n; i++)
	{
		dist[i] = i % 3 == 0 ? INFINITY : (double) (next_random(&state) % 1000) * 0.01 * d;
		ref[i] = dist[i];
		for (int m = 0; m < count; m++)
		{
			double		v = scalar->l2_squared(x + i * d, c + (long long) m * d, d);

			if (v < ref[i])
				ref[i] = v;
		}
	}
	bx = upload(x, sizeof(float) * n * d);
	bd = upload(dist, sizeof(double) * n);
	st = lib.refresh(bx, n, d, c, count, bd, &err);
	memset(dist, 0xff, sizeof(double) * n);
	download(bd, dist, sizeof(double) * n);
	for (long long i = 0; i < n && bad < 0; i++)
		if (memcmp(&dist[i], &ref[i], sizeof(double)) != 0)
			bad = i;
	if (bad >= 0)
		printf("  point %lld: %.17g, expected %.17g\n", bad, dist[bad], ref[bad]);
	snprintf(what, sizeof(what), "refresh bit for bit (n %lld, d %d, count %d)", n, d, count);
	if (st != CVCUDA_OK)
		printf("  status %d: %s\n", st, err.message);
	check(st == CVCUDA_OK && bad < 0, "%s", what);
	lib.free(bx);
	lib.free(bd);
	free(x);
	free(c);
	free(dist);
	free(ref);
}

/* ---------------------------------------------------------------- seeding */

typedef struct SeedArg
{
	CvCudaBuffer *points;
	CvCudaBuffer *dist;
	long long	n;
	int			d;
	int			calls;
} SeedArg;

static CvMathStatus
library_refresh(void *arg, const float *centres, int count, double *dist)
{
	SeedArg    *a = arg;
	CvCudaError err;

	a->calls++;
	if (lib.write(a->dist, 0, dist, sizeof(double) * a->n, &err) != CVCUDA_OK
		|| lib.refresh(a->points, a->n, a->d, centres, count, a->dist, &err) != CVCUDA_OK
		|| lib.read(a->dist, 0, dist, sizeof(double) * a->n, &err) != CVCUDA_OK)
	{
		printf("  refresh callback: %s\n", err.message);
		return CV_MATH_OUT_OF_MEMORY;
	}
	return CV_MATH_OK;
}

static void
test_seeding(long long n, int d, int k, int groups)
{
	float	   *x = malloc(sizeof(float) * n * d);
	float	   *g = malloc(sizeof(float) * (size_t) groups * d);
	float	   *a = malloc(sizeof(float) * (size_t) k * d);
	float	   *b = malloc(sizeof(float) * (size_t) k * d);
	CvKmeansParams params;
	SeedArg		arg;
	int			na = -1,
				nb = -2;
	CvMathStatus sa,
				sb;
	char		what[200];

	clustered(x, n, g, groups, d, 0.3f);
	memset(&params, 0, sizeof(params));
	params.k = k;
	params.seed = next_random(&state);
	memset(&arg, 0, sizeof(arg));
	arg.points = upload(x, sizeof(float) * n * d);
	arg.dist = upload(NULL, sizeof(double) * n);
	arg.n = n;
	arg.d = d;
	memset(a, 0xff, sizeof(float) * (size_t) k * d);
	memset(b, 0xff, sizeof(float) * (size_t) k * d);
	sa = cv_kmeans_seed(x, n, d, &params, a, &na);
	sb = cv_kmeans_seed_with(x, n, d, &params, library_refresh, &arg, b, &nb);
	snprintf(what, sizeof(what),
			 "seeds through the library's refresh equal cv_kmeans_seed's "
			 "(n %lld, d %d, k %d: %d seeds, %d refreshes)", n, d, k, na, arg.calls);
	check(sa == CV_MATH_OK && sb == CV_MATH_OK && na == nb && na == k && arg.calls > 0
		  && memcmp(a, b, sizeof(float) * (size_t) k * d) == 0, "%s", what);
	lib.free(arg.points);
	lib.free(arg.dist);
	free(x);
	free(g);
	free(a);
	free(b);
}

/* ---------------------------------------------------------------- assign */

/* Float64 score of point x against centroid c: squared L2 or -x.c. */
static double
score64(const float *x, const float *c, int d, int metric)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
	{
		if (metric == CVCUDA_KMEANS_L2)
		{
			double		v = (double) x[j] - c[j];

			s += v * v;
		}
		else
			s += (double) x[j] * c[j];
	}
	return metric == CVCUDA_KMEANS_L2 ? s : -s;
}

static double
norm64(const float *v, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
		s += (double) v[j] * v[j];
	return sqrt(s);
}

static void
test_assign(long long n, int d, int k, int metric, int mode, float noise)
{
	float	   *x = malloc(sizeof(float) * n * d);
	float	   *c = malloc(sizeof(float) * (size_t) k * d);
	int32_t    *as = malloc(sizeof(int32_t) * n);
	float	   *sc = malloc(sizeof(float) * n);
	CvCudaBuffer *bx,
			   *bc,
			   *ba,
			   *bs;
	CvCudaError err;
	CvCudaStatus st;
	long long	skipped = 0,
				wrong = 0,
				far = 0;
	double		cmax = 0.0;
	char		what[256];

	clustered(x, n, c, k, d, noise);
	if (metric == CVCUDA_KMEANS_SPHERICAL)
	{
		normalise(x, n, d);
		normalise(c, k, d);
	}
	for (int m = 0; m < k; m++)
		if (norm64(c + (long long) m * d, d) > cmax)
			cmax = norm64(c + (long long) m * d, d);
	bx = upload(x, sizeof(float) * n * d);
	bc = upload(c, sizeof(float) * (size_t) k * d);
	ba = upload(NULL, sizeof(int32_t) * n);
	bs = upload(NULL, sizeof(float) * n);
	st = lib.assign(bx, n, d, bc, k, metric, mode, ba, bs, &err);
	download(ba, as, sizeof(int32_t) * n);
	download(bs, sc, sizeof(float) * n);
	for (long long i = 0; i < n; i++)
	{
		const float *xi = x + i * d;
		double		best = INFINITY,
					second = INFINITY,
					xn = norm64(xi, d),
					scale;
		int			bi = -1;

		for (int m = 0; m < k; m++)
		{
			double		v = score64(xi, c + (long long) m * d, d, metric);

			if (v < best)
			{
				second = best;
				best = v;
				bi = m;
			}
			else if (v < second)
				second = v;
		}
		scale = metric == CVCUDA_KMEANS_L2 ? (xn + cmax) * (xn + cmax) : xn * cmax;
		if (second - best < 2e-2 * scale)
		{
			skipped++;			/* a near-tie: either answer is right */
			continue;
		}
		if (as[i] != bi)
		{
			if (wrong++ < 3)
				printf("  point %lld: centroid %d, expected %d\n", i, as[i], bi);
		}
		else if (!(fabs(sc[i] - best) <= 1e-4 * scale + 1e-6))
		{
			if (far++ < 3)
				printf("  point %lld: score %.9g, expected %.9g\n", i, sc[i], best);
		}
	}
	snprintf(what, sizeof(what),
			 "assign %s %s (n %lld, d %d, k %d): float64 argmin, %lld near-ties left out",
			 mode_names[mode], metric_names[metric], n, d, k, skipped);
	if (st != CVCUDA_OK)
		printf("  status %d: %s\n", st, err.message);
	/* at d = 3 random centres can crowd: at least a tenth of the points must be compared */
	check(st == CVCUDA_OK && wrong == 0 && far == 0 && skipped <= n * 9 / 10, "%s", what);
	lib.free(bx);
	lib.free(bc);
	lib.free(ba);
	lib.free(bs);
	free(x);
	free(c);
	free(as);
	free(sc);
}

/* ---------------------------------------------------------------- Lloyd */

/* One iteration: the new centroids are the float64 means of the returned assignment. */
static void
test_one_iteration(long long n, int d, int k, int metric, int mode)
{
	float	   *x = malloc(sizeof(float) * n * d);
	float	   *c = malloc(sizeof(float) * (size_t) k * d);
	float	   *c1 = malloc(sizeof(float) * (size_t) k * d);
	int32_t    *as = malloc(sizeof(int32_t) * n);
	double	   *sum = calloc((size_t) k * d, sizeof(double));
	long long  *count = calloc((size_t) k, sizeof(long long));
	CvCudaBuffer *bx,
			   *bc,
			   *ba;
	CvCudaError err;
	CvCudaStatus st;
	double		history[1] = {NAN},
				inertia = NAN,
				worst = 0.0;
	int			run = -1,
				bad = 0;
	char		what[256];

	clustered(x, n, c, k, d, 0.5f);
	if (metric == CVCUDA_KMEANS_SPHERICAL)
	{
		normalise(x, n, d);
		normalise(c, k, d);
	}
	/* start from perturbed centroids so the update moves them */
	for (long long j = 0; j < (long long) k * d; j++)
		c[j] += 0.05f * uniformf(&state);
	bx = upload(x, sizeof(float) * n * d);
	bc = upload(c, sizeof(float) * (size_t) k * d);
	ba = upload(NULL, sizeof(int32_t) * n);
	st = lib.lloyd(bx, n, d, bc, k, 1, metric, mode, ba, history, &run, &inertia, &err);
	download(bc, c1, sizeof(float) * (size_t) k * d);
	download(ba, as, sizeof(int32_t) * n);
	for (long long i = 0; i < n; i++)
	{
		if (as[i] < 0 || as[i] >= k)
		{
			bad = 1;
			break;
		}
		count[as[i]]++;
		for (int j = 0; j < d; j++)
			sum[(long long) as[i] * d + j] += x[i * d + j];
	}
	for (int m = 0; m < k && !bad; m++)
	{
		double		scale = 1.0;

		if (count[m] == 0)
		{
			/* an empty cluster keeps its centroid */
			if (memcmp(c1 + (long long) m * d, c + (long long) m * d, sizeof(float) * d) != 0)
				bad = 1;
			continue;
		}
		for (int j = 0; j < d; j++)
			sum[(long long) m * d + j] /= count[m];
		if (metric == CVCUDA_KMEANS_SPHERICAL)
		{
			double		s = 0.0;

			for (int j = 0; j < d; j++)
				s += sum[(long long) m * d + j] * sum[(long long) m * d + j];
			scale = sqrt(s);
		}
		for (int j = 0; j < d; j++)
		{
			double		ref = sum[(long long) m * d + j] / scale;
			double		e = fabs(c1[(long long) m * d + j] - ref) / fmax(fabs(ref), 1e-3);

			if (e > worst)
				worst = e;
		}
	}
	snprintf(what, sizeof(what),
			 "one Lloyd iteration %s %s (n %lld, d %d, k %d): centroids are the float64 "
			 "means of the assignment (worst relative error %.2g)",
			 mode_names[mode], metric_names[metric], n, d, k, worst);
	if (st != CVCUDA_OK)
		printf("  status %d: %s\n", st, err.message);
	check(st == CVCUDA_OK && !bad && worst <= 1e-5 && run == 1 && isfinite(inertia)
		  && inertia == history[0], "%s", what);
	lib.free(bx);
	lib.free(bc);
	lib.free(ba);
	free(x);
	free(c);
	free(c1);
	free(as);
	free(sum);
	free(count);
}

/* Lloyd from cv_kmeans_seed's seeds: final inertia within 1% of cv_kmeans_lloyd's. */
static void
test_lloyd(long long n, int d, int k, int groups, int metric, int mode, int iterations)
{
	float	   *x = malloc(sizeof(float) * n * d);
	float	   *g = malloc(sizeof(float) * (size_t) groups * d);
	float	   *seeds = malloc(sizeof(float) * (size_t) k * d);
	float	   *cpu = malloc(sizeof(float) * (size_t) k * d);
	double	   *history = malloc(sizeof(double) * iterations);
	CvKmeansParams params;
	CvKmeansResult result;
	CvCudaBuffer *bx,
			   *bc,
			   *ba;
	CvCudaError err;
	CvCudaStatus st;
	double		inertia = NAN;
	int			run = -1,
				ns = 0,
				monotone = 1;
	struct timespec t0,
				t1;
	char		what[300];

	clustered(x, n, g, groups, d, 0.4f);
	if (metric == CVCUDA_KMEANS_SPHERICAL)
		normalise(x, n, d);
	memset(&params, 0, sizeof(params));
	params.k = k;
	params.iterations = iterations;
	params.seed = next_random(&state);
	params.metric = (CvKmeansMetric) metric;
	cv_kmeans_seed(x, n, d, &params, seeds, &ns);
	memcpy(cpu, seeds, sizeof(float) * (size_t) k * d);
	cv_kmeans_lloyd(x, n, d, &params, cpu, NULL, NULL, &result);
	bx = upload(x, sizeof(float) * n * d);
	bc = upload(seeds, sizeof(float) * (size_t) k * d);
	ba = upload(NULL, sizeof(int32_t) * n);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	st = lib.lloyd(bx, n, d, bc, k, iterations, metric, mode, ba, history, &run, &inertia, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* the objective falls for L2 and spherical; plain means do not bound inner product */
	for (int t = 1; t < run && metric != CVCUDA_KMEANS_INNER_PRODUCT; t++)
		if (history[t] > history[t - 1] + 1e-6 * fabs(history[t - 1]))
			monotone = 0;
	snprintf(what, sizeof(what),
			 "Lloyd %s %s (n %lld, d %d, k %d): inertia %.6g in %d iterations, "
			 "cv_kmeans_lloyd %.6g in %d (%.1f ms)",
			 mode_names[mode], metric_names[metric], n, d, k, inertia, run, result.inertia,
			 result.iterations_run,
			 (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	if (st != CVCUDA_OK)
		printf("  status %d: %s\n", st, err.message);
	check(st == CVCUDA_OK && ns == k && run >= 1 && run <= iterations && monotone
		  && fabs(inertia - result.inertia) <= 0.01 * fabs(result.inertia), "%s", what);
	lib.free(bx);
	lib.free(bc);
	lib.free(ba);
	free(x);
	free(g);
	free(seeds);
	free(cpu);
	free(history);
}

/* ---------------------------------------------------------------- arguments */

static void
invalid(CvCudaStatus st, const CvCudaError *err, const char *what)
{
	char		line[256];

	snprintf(line, sizeof(line), "invalid argument rejected: %s (status %d)", what, st);
	check(st == CVCUDA_INVALID_ARGUMENT && err->status == CVCUDA_INVALID_ARGUMENT
		  && err->message[0] != '\0', "%s", line);
}

static void
test_arguments(void)
{
	float		v[64] = {0};
	CvCudaBuffer *bx = upload(v, sizeof(v));
	CvCudaBuffer *bc = upload(v, sizeof(float) * 8);
	CvCudaBuffer *ba = upload(NULL, sizeof(int32_t) * 16);
	CvCudaBuffer *bs = upload(NULL, sizeof(float) * 16);
	CvCudaBuffer *bd = upload(NULL, sizeof(double) * 16);
	CvCudaError err;
	double		inertia;
	int			run;

	/* 16 points of 4 dims, 2 centroids */
	invalid(lib.refresh(NULL, 16, 4, v, 1, bd, &err), &err, "refresh points NULL");
	invalid(lib.refresh(bx, 16, 4, NULL, 1, bd, &err), &err, "refresh centres NULL");
	invalid(lib.refresh(bx, 16, 4, v, -1, bd, &err), &err, "refresh count < 0");
	invalid(lib.refresh(bx, 16, 0, v, 1, bd, &err), &err, "refresh d = 0");
	invalid(lib.refresh(bx, 17, 4, v, 1, bd, &err), &err, "refresh points buffer too small");
	invalid(lib.refresh(bx, 16, 4, v, 1, bs, &err), &err, "refresh dist buffer too small");
	invalid(lib.refresh(bx, -1, 4, v, 1, bd, &err), &err, "refresh n < 0");
	invalid(lib.assign(bx, 16, 4, bc, 0, 0, 0, ba, bs, &err), &err, "assign k = 0");
	invalid(lib.assign(bx, 16, 4, bc, 3, 0, 0, ba, bs, &err), &err, "assign centroids too small");
	invalid(lib.assign(bx, 16, 4, bc, 2, 3, 0, ba, bs, &err), &err, "assign metric 3");
	invalid(lib.assign(bx, 16, 4, bc, 2, 0, 2, ba, bs, &err), &err, "assign mode 2");
	invalid(lib.assign(bx, 16, 4, bc, 2, 0, 0, NULL, bs, &err), &err, "assign NULL assign");
	invalid(lib.assign(bx, 16, 4, bc, 2, 0, 0, ba, bc, &err), &err, "assign score too small");
	invalid(lib.assign(bx, 16, 4, NULL, 2, 0, 0, ba, bs, &err), &err, "assign NULL centroids");
	invalid(lib.assign(bx, 16, CVCUDA_KNN_MAX_DIMS + 1, bc, 2, 0, 0, ba, bs, &err), &err,
			"assign d too large");
	invalid(lib.lloyd(bx, 16, 4, bc, 2, -1, 0, 0, ba, NULL, &run, &inertia, &err), &err,
			"lloyd iterations < 0");
	invalid(lib.lloyd(bx, 16, 4, bc, 2, 3, 0, 0, ba, NULL, NULL, &inertia, &err), &err,
			"lloyd iterations_run NULL");
	invalid(lib.lloyd(bx, 16, 4, bc, 2, 3, 0, 0, ba, NULL, &run, NULL, &err), &err,
			"lloyd inertia NULL");
	invalid(lib.lloyd(bx, 0, 4, bc, 2, 3, 0, 0, ba, NULL, &run, &inertia, &err), &err,
			"lloyd n = 0");
	invalid(lib.lloyd(bx, 16, 4, bc, 2, 3, 0, 5, ba, NULL, &run, &inertia, &err), &err,
			"lloyd mode 5");
	check(lib.assign(bx, 0, 4, bc, 2, 0, 0, ba, bs, &err) == CVCUDA_OK, "assign of no points");
	check(lib.refresh(bx, 16, 4, v, 0, bd, &err) == CVCUDA_OK, "refresh of no centres");
	lib.free(bx);
	lib.free(bc);
	lib.free(ba);
	lib.free(bs);
	lib.free(bd);
}

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	CvCudaDeviceInfo info;
	HarnessSymbol symbols[] = {
		{"cvcuda_abi_version", &lib.abi_version},
		{"cvcuda_backend_name", &lib.backend_name},
		{"cvcuda_init", &lib.init},
		{"cvcuda_buffer_alloc", &lib.alloc},
		{"cvcuda_buffer_free", &lib.free},
		{"cvcuda_buffer_write", &lib.write},
		{"cvcuda_buffer_read", &lib.read},
		{"cvcuda_kmeans_refresh", &lib.refresh},
		{"cvcuda_kmeans_assign", &lib.assign},
		{"cvcuda_kmeans_lloyd", &lib.lloyd},
	};

	check_prints_passes = 1;
	printf("kmeans_test seed %llu\n", (unsigned long long) args.seed);
	state = args.seed;
	harness_open(&args, symbols, lengthof(symbols));
	printf("backend: %s\n", lib.backend_name());
	harness_init_device(&args, lib.init, &info, "tests");
	test_arguments();
	test_refresh(3000, 128, 37);
	test_refresh(1000, 1, 1);
	test_refresh(777, 130, 256);
	test_refresh(5000, 17, 16);
	test_seeding(20000, 32, 300, 50);
	test_seeding(3000, 130, 40, 10);
	for (int mode = 0; mode < 2; mode++)
		for (int metric = 0; metric < 3; metric++)
		{
			test_assign(3000, 128, 300, metric, mode, 0.1f);
			test_assign(2001, 37, 5, metric, mode, 0.2f);
			test_assign(129, 200, 1000, metric, mode, 0.1f);
			test_assign(700, 64, 1, metric, mode, 0.3f);
			test_assign(500, 3, 7, metric, mode, 0.05f);
		}
	for (int mode = 0; mode < 2; mode++)
		for (int metric = 0; metric < 3; metric++)
		{
			test_one_iteration(5000, 48, 40, metric, mode);
			test_one_iteration(3001, 130, 7, metric, mode);
		}
	for (int mode = 0; mode < 2; mode++)
		for (int metric = 0; metric < 3; metric++)
		{
			test_lloyd(20000, 32, 64, 40, metric, mode, 20);
			test_lloyd(5000, 100, 20, 20, metric, mode, 15);
		}
	return harness_finish();
}
