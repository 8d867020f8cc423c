/*
 * lane_tile_bench: times the three entry points whose kernels use
 * lane_tile.cuh (cvcuda_knn_exact, cvcuda_kmeans_refresh, cvcuda_ivf_search
 * with L2 and inner-product list ranking) on sizes where the float64 tile
 * is a large part of the work, and prints a hash of every output, so that
 * two builds of the library (before and after a change to the tile) can be
 * compared for speed and for bit-identical answers on large inputs the
 * tests do not reach.  Not a test: the *_test programs check against
 * src/math.
 *
 * Usage: lane_tile_bench path/to/clustervec_cuda.so [--seed N] [--small]
 * (--small: sizes a hundredth as large, to try the program on the CPU shim)
 * Prints one line a case: name, median and fastest ms of REPS calls after
 * WARMUP, and the FNV-1a hash of the outputs of the last call.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clustervec_cuda.h"
#include "harness.h"

#define WARMUP 2
#define REPS 15

typedef CvCudaStatus (*KnnFn) (const float *, long long, int, const float *, int, int,
							   long long *, double *, CvCudaError *);
typedef CvCudaStatus (*RegisterFn) (void *, size_t, CvCudaError *);
typedef CvCudaStatus (*UnregisterFn) (void *, CvCudaError *);
typedef CvCudaStatus (*RefreshFn) (const CvCudaBuffer *, long long, int, const float *, int,
								   CvCudaBuffer *, CvCudaError *);
typedef CvCudaStatus (*SearchFn) (const CvCudaBuffer *, int, int, const CvCudaBuffer *,
								  const CvCudaBuffer *, int, const float *, int, int, int,
								  long long *, double *, CvCudaError *);

static struct
{
	InitFn		init;
	AllocFn		alloc;
	FreeFn		free;
	WriteFn		write;
	ReadFn		read;
	RegisterFn	host_register;
	UnregisterFn host_unregister;
	KnnFn		knn;
	RefreshFn	refresh;
	SearchFn	search;
}			lib;

/* FNV-1a over bytes, folded into *h. */
static void
hash_bytes(uint64_t *h, const void *data, size_t bytes)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < bytes; i++)
		*h = (*h ^ p[i]) * UINT64_C(0x100000001b3);
}

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int
by_value(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Aligned host memory, filled with uniform floats (registered when asked). */
static float *
random_floats(size_t count, uint64_t *state, int registered)
{
	size_t		bytes = (sizeof(float) * count + 4095) / 4096 * 4096;
	float	   *v;
	CvCudaError err;

	if (posix_memalign((void **) &v, 4096, bytes) != 0)
		exit(1);
	for (size_t i = 0; i < count; i++)
		v[i] = uniformf(state);
	if (registered && lib.host_register(v, bytes, &err) != CVCUDA_OK)
		printf("  host_register: %s\n", err.message);
	return v;
}

static CvCudaBuffer *
upload(const void *data, size_t bytes)
{
	CvCudaBuffer *b = NULL;
	CvCudaError err;

	if (lib.alloc(bytes, &b, &err) != CVCUDA_OK || lib.write(b, 0, data, bytes, &err) != CVCUDA_OK)
	{
		printf("  upload: %s\n", err.message);
		exit(1);
	}
	return b;
}

/* Prints a case's line; times[] holds REPS call times. */
static void
report(const char *name, double *times, uint64_t hash, int ok)
{
	qsort(times, REPS, sizeof(double), by_value);
	printf("%-44s %10.3f %10.3f  %016llx%s\n", name, times[REPS / 2], times[0],
		   (unsigned long long) hash, ok ? "" : "  FAILED");
}

static void
bench_knn(long long rows, int dims, int nq, int k, uint64_t *state)
{
	float	   *base = random_floats((size_t) rows * dims, state, 1);
	float	   *queries = random_floats((size_t) nq * dims, state, 1);
	size_t		out = (size_t) nq * k;
	long long  *index = malloc(sizeof(long long) * out);
	double	   *distance = malloc(sizeof(double) * out);
	double		times[REPS];
	uint64_t	hash = UINT64_C(0xcbf29ce484222325);
	int			ok = 1;
	char		name[100];
	CvCudaError err;

	lib.host_register(index, sizeof(long long) * out, &err);
	lib.host_register(distance, sizeof(double) * out, &err);
	for (int r = -WARMUP; r < REPS; r++)
	{
		double		t0 = now_ms();

		ok &= lib.knn(base, rows, dims, queries, nq, k, index, distance, &err) == CVCUDA_OK;
		if (r >= 0)
			times[r] = now_ms() - t0;
	}
	hash_bytes(&hash, index, sizeof(long long) * out);
	hash_bytes(&hash, distance, sizeof(double) * out);
	snprintf(name, sizeof(name), "knn_exact %lld x %d, nq %d, k %d", rows, dims, nq, k);
	report(name, times, hash, ok);
	lib.host_unregister(index, &err);
	lib.host_unregister(distance, &err);
	lib.host_unregister(base, &err);
	lib.host_unregister(queries, &err);
	free(base);
	free(queries);
	free(index);
	free(distance);
}

static void
bench_refresh(long long n, int d, int count, uint64_t *state)
{
	float	   *points = random_floats((size_t) n * d, state, 0);
	float	   *centres = random_floats((size_t) count * d, state, 0);
	double	   *dist = malloc(sizeof(double) * n);
	CvCudaBuffer *bp = upload(points, sizeof(float) * (size_t) n * d);
	CvCudaBuffer *bd;
	double		times[REPS];
	uint64_t	hash = UINT64_C(0xcbf29ce484222325);
	int			ok = 1;
	char		name[100];
	CvCudaError err;

	for (long long i = 0; i < n; i++)
		dist[i] = 1e300;
	bd = upload(dist, sizeof(double) * n);
	for (int r = -WARMUP; r < REPS; r++)
	{
		double		t0;

		/* the same input every call: dist starts from the same values */
		ok &= lib.write(bd, 0, dist, sizeof(double) * n, &err) == CVCUDA_OK;
		t0 = now_ms();
		ok &= lib.refresh(bp, n, d, centres, count, bd, &err) == CVCUDA_OK;
		if (r >= 0)
			times[r] = now_ms() - t0;
	}
	ok &= lib.read(bd, 0, dist, sizeof(double) * n, &err) == CVCUDA_OK;
	hash_bytes(&hash, dist, sizeof(double) * n);
	snprintf(name, sizeof(name), "kmeans_refresh %lld x %d, %d centres", n, d, count);
	report(name, times, hash, ok);
	lib.free(bp);
	lib.free(bd);
	free(points);
	free(centres);
	free(dist);
}

static void
bench_search(int lists, int per_list, int d, int nq, int k, int probes, int metric,
			 uint64_t *state)
{
	long long	rows = (long long) lists * per_list;
	float	   *centroids = random_floats((size_t) lists * d, state, 0);
	float	   *vectors = random_floats((size_t) rows * d, state, 0);
	float	   *queries = random_floats((size_t) nq * d, state, 0);
	long long  *offsets = malloc(sizeof(long long) * (lists + 1));
	size_t		out = (size_t) nq * k;
	long long  *pos = malloc(sizeof(long long) * out);
	double	   *dist = malloc(sizeof(double) * out);
	CvCudaBuffer *bc,
			   *bv,
			   *bo;
	double		times[REPS];
	uint64_t	hash = UINT64_C(0xcbf29ce484222325);
	int			ok = 1;
	char		name[100];
	CvCudaError err;

	for (int l = 0; l <= lists; l++)
		offsets[l] = (long long) l * per_list;
	bc = upload(centroids, sizeof(float) * (size_t) lists * d);
	bv = upload(vectors, sizeof(float) * (size_t) rows * d);
	bo = upload(offsets, sizeof(long long) * (lists + 1));
	for (int r = -WARMUP; r < REPS; r++)
	{
		double		t0 = now_ms();

		ok &= lib.search(bc, lists, d, bv, bo, metric, queries, nq, k, probes, pos, dist,
						 &err) == CVCUDA_OK;
		if (r >= 0)
			times[r] = now_ms() - t0;
	}
	hash_bytes(&hash, pos, sizeof(long long) * out);
	hash_bytes(&hash, dist, sizeof(double) * out);
	snprintf(name, sizeof(name), "ivf_search %s, %d lists x %d, d %d, nq %d",
			 metric == CVCUDA_METRIC_L2 ? "l2" : "ip", lists, per_list, d, nq);
	report(name, times, hash, ok);
	lib.free(bc);
	lib.free(bv);
	lib.free(bo);
	free(centroids);
	free(vectors);
	free(queries);
	free(offsets);
	free(pos);
	free(dist);
}

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	HarnessSymbol symbols[] = {
		{"cvcuda_init", &lib.init},
		{"cvcuda_buffer_alloc", &lib.alloc},
		{"cvcuda_buffer_free", &lib.free},
		{"cvcuda_buffer_write", &lib.write},
		{"cvcuda_buffer_read", &lib.read},
		{"cvcuda_host_register", &lib.host_register},
		{"cvcuda_host_unregister", &lib.host_unregister},
		{"cvcuda_knn_exact", &lib.knn},
		{"cvcuda_kmeans_refresh", &lib.refresh},
		{"cvcuda_ivf_search", &lib.search},
	};
	CvCudaDeviceInfo info;
	uint64_t	state;
	int			scale = 1;

	args.seed = 19;				/* the same data for every build compared */
	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			args.seed = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--small") == 0)
			scale = 100;
	state = args.seed;
	args.require_device = 1;
	harness_open(&args, symbols, lengthof(symbols));
	harness_init_device(&args, lib.init, &info, "bench");
	printf("lane_tile_bench seed %llu, device %s, median / fastest of %d calls\n",
		   (unsigned long long) args.seed, info.name, REPS);
	printf("%-44s %10s %10s  %s\n", "case", "median ms", "min ms", "output hash");
	bench_knn(200000 / scale, 128, 4096 / scale, 10, &state);
	bench_knn(50000 / scale, 1000, 1024 / scale, 10, &state);
	bench_refresh(1000000 / scale, 128, 256, &state);
	bench_refresh(200000 / scale, 1000, 64, &state);
	bench_search(4096 / scale, 100, 128, 8192 / scale, 10, 8, CVCUDA_METRIC_L2, &state);
	bench_search(4096 / scale, 100, 128, 8192 / scale, 10, 8, CVCUDA_METRIC_IP, &state);
	return 0;
}
