/*
 * ivf_search_gpu_bench: cvcuda_ivf_search on synthetic clustered data, at
 * the library's API (host queries in, host results out).
 *
 * For each shape (1M x 128 with 1024 lists, 1M x 1024 with 4096 lists):
 * rows are drawn around random centres (centre + noise), packed per list
 * (the generating cluster), centroids the per-list float64 means; the
 * mirror is uploaded to device buffers.  Then for probes 1, 2, 4, ...:
 * recall@10 against cvcuda_knn_exact over a few hundred queries, and
 * queries per second for batches of 10,000 queries (best of a few runs),
 * with the bandwidth fraction: bytes of the probed lists per second
 * (estimated with the mean list size) over the H200's 4.27 TB/s.  Then
 * the latency of one query per call (p50 / p99 of 300 calls) with each
 * query's probed rows split over blocks as the library chooses, and with
 * one block per query (CLUSTERVEC_CUDA_SEARCH_SEGMENTS=1), side by side.
 *
 * Build: gcc -O2 -fopenmp -I cuda/include -I src bench/ivf_search_gpu_bench.c -lm -ldl -o /tmp/sb
 * Usage: /tmp/sb path/to/clustervec_cuda.so [max_seconds]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clustervec_cuda.h"

typedef CvCudaStatus (*InitFn) (int, CvCudaDeviceInfo *, CvCudaError *);
typedef CvCudaStatus (*AllocFn) (size_t, CvCudaBuffer **, CvCudaError *);
typedef void (*FreeFn) (CvCudaBuffer *);
typedef CvCudaStatus (*WriteFn) (CvCudaBuffer *, size_t, const void *, size_t, CvCudaError *);
typedef CvCudaStatus (*SearchFn) (const CvCudaBuffer *, int, int, const CvCudaBuffer *,
								  const CvCudaBuffer *, int, const float *, int, int, int,
								  const int *, long long *, double *, int *, CvCudaError *);
typedef CvCudaStatus (*KnnFn) (const float *, long long, int, const float *, int, int,
							   long long *, double *, CvCudaError *);

static InitFn init_fn;
static SearchFn search_fn;

static double now(void);

static int
compare_doubles(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* p50 and p99 in microseconds of calls of one query each. */
static void
time_single(const CvCudaBuffer *bc, const CvCudaBuffer *bv, const CvCudaBuffer *bo, int lists,
			int d, const float *queries, int probes, double *p50, double *p99)
{
	enum
	{
		CALLS = 300
	};
	double		t[CALLS];
	long long	pos[10];
	double		dist[10];
	int			probed[256];
	CvCudaError err;

	for (int i = 0; i < CALLS; i++)
	{
		double		t0 = now();

		search_fn(bc, lists, d, bv, bo, CV_METRIC_L2, queries + (size_t) (i % 100) * d, 1, 10,
				  probes, NULL, pos, dist, probed, &err);
		t[i] = (now() - t0) * 1e6;
	}
	qsort(t, CALLS, sizeof(double), compare_doubles);
	*p50 = t[CALLS / 2];
	*p99 = t[CALLS * 99 / 100];
}

static void
single_query_latency(const CvCudaBuffer *bc, const CvCudaBuffer *bv, const CvCudaBuffer *bo,
					 int lists, int d, const float *queries)
{
	printf("one query per call: %7s %14s %14s %16s %16s\n", "probes", "split p50 us",
		   "split p99 us", "1 block p50 us", "1 block p99 us");
	for (int probes = 1; probes <= 32 && probes <= lists; probes *= 4)
	{
		double		a50,
					a99,
					b50,
					b99;

		unsetenv("CLUSTERVEC_CUDA_SEARCH_SEGMENTS");
		time_single(bc, bv, bo, lists, d, queries, probes, &a50, &a99);
		setenv("CLUSTERVEC_CUDA_SEARCH_SEGMENTS", "1", 1);
		time_single(bc, bv, bo, lists, d, queries, probes, &b50, &b99);
		unsetenv("CLUSTERVEC_CUDA_SEARCH_SEGMENTS");
		printf("one query per call: %7d %14.1f %14.1f %16.1f %16.1f\n", probes, a50, a99, b50,
			   b99);
	}
}
static AllocFn alloc_fn;
static FreeFn free_fn;
static WriteFn write_fn;
static KnnFn knn_fn;

#define K 10
#define RECALL_QUERIES 300
#define BATCH 10000
#define PEAK_BYTES_PER_S 4.27e12

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t
mix(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* An approximately normal float (sum of four uniforms), from a counter. */
static float
noise(uint64_t *s)
{
	uint64_t	a = mix((*s)++),
				b = mix((*s)++);
	double		sum = (double) (a & 0xffffffff) + (double) (a >> 32) +
		(double) (b & 0xffffffff) + (double) (b >> 32);

	return (float) ((sum / 4294967296.0 - 2.0) * 1.7320508);
}

/* Fills n points of d dims around the centres; cluster[i] gets each one's centre. */
static void
draw_points(float *x, int *cluster, long long n, int d, const float *centres, int nc,
			float sigma, uint64_t seed)
{
#pragma omp parallel for schedule(static)
	for (long long i = 0; i < n; i++)
	{
		uint64_t	s = mix(seed ^ (uint64_t) i * 0x100000001b3ULL) ;
		int			c = (int) (mix(s++) % (uint64_t) nc);

		if (cluster)
			cluster[i] = c;
		for (int j = 0; j < d; j++)
			x[i * d + j] = centres[(size_t) c * d + j] + sigma * noise(&s);
	}
}

static void
run_shape(long long n, int d, int lists, float sigma, double deadline)
{
	float	   *centres = malloc(sizeof(float) * (size_t) lists * d);
	float	   *raw = malloc(sizeof(float) * (size_t) n * d);
	int		   *cluster = malloc(sizeof(int) * (size_t) n);
	float	   *packed = malloc(sizeof(float) * (size_t) n * d);
	float	   *centroids = malloc(sizeof(float) * (size_t) lists * d);
	long long  *offsets = calloc((size_t) lists + 1, sizeof(long long));
	long long  *fill = calloc((size_t) lists, sizeof(long long));
	float	   *queries = malloc(sizeof(float) * (size_t) BATCH * d);
	long long  *truth = malloc(sizeof(long long) * RECALL_QUERIES * K);
	double	   *truth_d = malloc(sizeof(double) * RECALL_QUERIES * K);
	long long  *pos = malloc(sizeof(long long) * (size_t) BATCH * K);
	double	   *dist = malloc(sizeof(double) * (size_t) BATCH * K);
	CvCudaBuffer *bc = NULL,
			   *bv = NULL,
			   *bo = NULL;
	CvCudaError err;
	double		t0;
	uint64_t	s = 12345;
	double		best_qps = 0;
	int			best_probes = 0;

	printf("\n== %lld x %d, %d lists, k %d, noise sigma %.2f (centres uniform in [-1, 1]) ==\n",
		   n, d, lists, K, sigma);
	t0 = now();
	for (long long i = 0; i < (long long) lists * d; i++)
	{
		uint64_t	r = mix(s++);

		centres[i] = (float) ((double) (r >> 11) * 0x1.0p-53 * 2.0 - 1.0);
	}
	draw_points(raw, cluster, n, d, centres, lists, sigma, 777);
	draw_points(queries, NULL, BATCH, d, centres, lists, sigma, 999);
	for (long long i = 0; i < n; i++)
		offsets[cluster[i] + 1]++;
	for (int l = 0; l < lists; l++)
		offsets[l + 1] += offsets[l];
	for (long long i = 0; i < n; i++)
	{
		long long	at = offsets[cluster[i]] + fill[cluster[i]]++;

		memcpy(packed + at * d, raw + i * d, sizeof(float) * d);
	}
	free(raw);
#pragma omp parallel for schedule(dynamic)
	for (int l = 0; l < lists; l++)
	{
		double	   *sum = calloc((size_t) d, sizeof(double));
		long long	cnt = offsets[l + 1] - offsets[l];

		for (long long r = offsets[l]; r < offsets[l + 1]; r++)
			for (int j = 0; j < d; j++)
				sum[j] += packed[r * d + j];
		for (int j = 0; j < d; j++)
			centroids[(size_t) l * d + j] = cnt > 0 ? (float) (sum[j] / cnt) :
				centres[(size_t) l * d + j];
		free(sum);
	}
	printf("data generated in %.1f s\n", now() - t0);
	t0 = now();
	if (alloc_fn(sizeof(float) * (size_t) lists * d, &bc, &err) != CVCUDA_OK ||
		alloc_fn(sizeof(float) * (size_t) n * d, &bv, &err) != CVCUDA_OK ||
		alloc_fn(sizeof(long long) * (size_t) (lists + 1), &bo, &err) != CVCUDA_OK ||
		write_fn(bc, 0, centroids, sizeof(float) * (size_t) lists * d, &err) != CVCUDA_OK ||
		write_fn(bv, 0, packed, sizeof(float) * (size_t) n * d, &err) != CVCUDA_OK ||
		write_fn(bo, 0, offsets, sizeof(long long) * (size_t) (lists + 1), &err) != CVCUDA_OK)
	{
		printf("mirror upload failed: %s\n", err.message);
		goto done;
	}
	printf("mirror uploaded in %.1f s\n", now() - t0);
	t0 = now();
	if (knn_fn(packed, n, d, queries, RECALL_QUERIES, K, truth, truth_d, &err) != CVCUDA_OK)
	{
		printf("knn_exact failed: %s\n", err.message);
		goto done;
	}
	printf("ground truth (knn_exact, %d queries) in %.1f s\n", RECALL_QUERIES, now() - t0);
	printf("%7s %10s %12s %10s %12s\n", "probes", "recall@10", "QPS", "ms/batch", "bw fraction");
	for (int probes = 1; probes <= lists && probes <= 256; probes *= 2)
	{
		long long	hits = 0;
		double		best = 1e30;

		if (now() > deadline)
		{
			printf("(time budget spent: stopping)\n");
			break;
		}
		if (search_fn(bc, lists, d, bv, bo, CV_METRIC_L2, queries, RECALL_QUERIES, K, probes,
					  NULL, pos, dist, NULL, &err) != CVCUDA_OK)
		{
			printf("search failed: %s\n", err.message);
			break;
		}
		for (int q = 0; q < RECALL_QUERIES; q++)
			for (int i = 0; i < K; i++)
				for (int j = 0; j < K; j++)
					if (pos[q * K + i] >= 0 && pos[q * K + i] == truth[q * K + j])
					{
						hits++;
						break;
					}
		for (int rep = 0; rep < 3; rep++)
		{
			double		t = now();

			if (search_fn(bc, lists, d, bv, bo, CV_METRIC_L2, queries, BATCH, K, probes,
						  NULL, pos, dist, NULL, &err) != CVCUDA_OK)
			{
				printf("search failed: %s\n", err.message);
				goto done;
			}
			t = now() - t;
			if (t < best)
				best = t;
		}
		{
			double		bytes = (double) BATCH * probes * ((double) n / lists) * d * 4.0;

			if ((double) hits / (RECALL_QUERIES * K) >= 0.95 && BATCH / best > best_qps)
			{
				best_qps = BATCH / best;
				best_probes = probes;
			}
			printf("%7d %10.4f %12.0f %10.2f %12.3f\n", probes,
				   (double) hits / (RECALL_QUERIES * K), BATCH / best, best * 1e3,
				   bytes / best / PEAK_BYTES_PER_S);
		}
		fflush(stdout);
	}
	if (best_probes > 0)
		printf("recall@10 >= 0.95: %.0f QPS (probes %d)\n", best_qps, best_probes);
	single_query_latency(bc, bv, bo, lists, d, queries);
	/* the other metrics, once, for their speed */
	for (int metric = CV_METRIC_INNER_PRODUCT; metric <= CV_METRIC_COSINE; metric++)
	{
		double		t = now();

		if (search_fn(bc, lists, d, bv, bo, metric, queries, BATCH, K, 8, NULL, pos, dist, NULL, &err) !=
			CVCUDA_OK)
			printf("search failed: %s\n", err.message);
		else
			printf("metric %s, probes 8: %.0f QPS\n", metric == CV_METRIC_INNER_PRODUCT ? "ip" : "cosine",
				   BATCH / (now() - t));
	}
done:
	free_fn(bc);
	free_fn(bv);
	free_fn(bo);
	free(centres);
	free(cluster);
	free(packed);
	free(centroids);
	free(offsets);
	free(fill);
	free(queries);
	free(truth);
	free(truth_d);
	free(pos);
	free(dist);
}

int
main(int argc, char **argv)
{
	void	   *h;
	CvCudaDeviceInfo info;
	CvCudaError err;
	double		budget = argc > 2 ? atof(argv[2]) : 140;
	double		start = now();

	if (argc < 2 || (h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL)
	{
		fprintf(stderr, "cannot open library: %s\n", argc < 2 ? "no path" : dlerror());
		return 1;
	}
	init_fn = (InitFn) dlsym(h, "cvcuda_init");
	alloc_fn = (AllocFn) dlsym(h, "cvcuda_buffer_alloc");
	free_fn = (FreeFn) dlsym(h, "cvcuda_buffer_free");
	write_fn = (WriteFn) dlsym(h, "cvcuda_buffer_write");
	search_fn = (SearchFn) dlsym(h, "cvcuda_ivf_search");
	knn_fn = (KnnFn) dlsym(h, "cvcuda_knn_exact");
	if (!init_fn || !alloc_fn || !free_fn || !write_fn || !search_fn || !knn_fn)
	{
		fprintf(stderr, "missing entry points\n");
		return 1;
	}
	if (init_fn(0, &info, &err) != CVCUDA_OK)
	{
		fprintf(stderr, "init: %s\n", err.message);
		return 1;
	}
	printf("device: %s\n", info.name);
	run_shape(1000000, 128, 1024, 0.35f, start + budget * 0.15);
	run_shape(1000000, 128, 1024, 1.0f, start + budget * 0.3);
	run_shape(1000000, 128, 1024, 2.0f, start + budget * 0.5);
	run_shape(1000000, 1024, 4096, 1.5f, start + budget * 0.75);
	run_shape(1000000, 1024, 4096, 2.5f, start + budget);
	printf("total %.1f s\n", now() - start);
	return 0;
}
