/*
 * kmeans_gpu_bench.c: times the k-means entry points of clustervec_cuda.so
 * (dlopen) on N = 1,000,000 clustered random points: assign in FP32 and
 * BF16 modes and one full Lloyd iteration (assign + update), median of
 * several runs after a warm-up, each a synchronous API call timed with
 * clock_gettime.  The floor of a row is the larger of reading the points
 * once (N D 4 bytes at 4.27 TB/s) and the products (2 N K D flops at 51
 * TFLOP/s FP32, 806 TFLOP/s bf16).
 *
 * Build: gcc -O2 -I cuda/include -I src bench/kmeans_gpu_bench.c -ldl -o /tmp/kb
 * Usage: /tmp/kb cuda/clustervec_cuda.so [N]
 */
#include <dlfcn.h>
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
typedef CvCudaStatus (*AssignFn) (const CvCudaBuffer *, long long, int, const CvCudaBuffer *,
								  int, int, int, CvCudaBuffer *, CvCudaBuffer *, CvCudaError *);
typedef CvCudaStatus (*LloydFn) (const CvCudaBuffer *, long long, int, CvCudaBuffer *, int, int,
								 int, int, CvCudaBuffer *, double *, int *, double *,
								 CvCudaError *);

static AllocFn b_alloc;
static FreeFn b_free;
static WriteFn b_write;
static AssignFn k_assign;
static LloydFn k_lloyd;
static uint64_t state = 12345;

static uint64_t
next_random(void)
{
	uint64_t	z = (state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static float
uniform(void)
{
	return (float) ((double) (next_random() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static CvCudaBuffer *
buffer(size_t bytes, const void *src)
{
	CvCudaBuffer *b;
	CvCudaError err;

	if (b_alloc(bytes, &b, &err) != CVCUDA_OK)
	{
		fprintf(stderr, "alloc: %s\n", err.message);
		exit(1);
	}
	if (src && b_write(b, 0, src, bytes, &err) != CVCUDA_OK)
	{
		fprintf(stderr, "write: %s\n", err.message);
		exit(1);
	}
	return b;
}

/* What one timed row does. */
typedef struct Row
{
	const char *name;
	int			lloyd;
	int			mode;
} Row;

static void
run_shape(long long n, int d, int k, int runs)
{
	float	   *x = malloc(sizeof(float) * (size_t) n * d);
	float	   *g = malloc(sizeof(float) * (size_t) k * d);
	float	   *c = malloc(sizeof(float) * (size_t) k * d);
	const Row	rows[] = {
		{"assign FP32", 0, CVCUDA_ASSIGN_FP32},
		{"assign BF16", 0, CVCUDA_ASSIGN_BF16},
		{"Lloyd iteration FP32", 1, CVCUDA_ASSIGN_FP32},
		{"Lloyd iteration BF16", 1, CVCUDA_ASSIGN_BF16},
	};
	CvCudaBuffer *bx,
			   *bc,
			   *ba,
			   *bs;
	double		bytes_ms = (double) n * d * 4 / 4.27e12 * 1e3;
	double		flops = 2.0 * n * k * d;

	for (long long j = 0; j < (long long) k * d; j++)
		g[j] = uniform();
	for (long long i = 0; i < n; i++)
	{
		const float *src = g + (long long) (next_random() % (uint64_t) k) * d;

		for (int j = 0; j < d; j++)
			x[i * d + j] = src[j] + 0.3f * uniform();
	}
	for (int m = 0; m < k; m++)
		memcpy(c + (long long) m * d, x + (long long) (next_random() % (uint64_t) n) * d,
			   sizeof(float) * d);
	bx = buffer(sizeof(float) * (size_t) n * d, x);
	bc = buffer(sizeof(float) * (size_t) k * d, c);
	ba = buffer(sizeof(int32_t) * (size_t) n, NULL);
	bs = buffer(sizeof(float) * (size_t) n, NULL);
	printf("\nN %lld, D %d, K %d (median of %d after a warm-up)\n", n, d, k, runs);
	printf("%-24s %10s %10s %9s\n", "operation", "ms", "floor ms", "of floor");
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
	{
		double		t[16];
		double		floor_ms = flops / (rows[r].mode ? 806e12 : 51e12) * 1e3;
		CvCudaError err;
		CvCudaStatus st = CVCUDA_OK;

		if (floor_ms < bytes_ms)
			floor_ms = bytes_ms;
		for (int i = 0; i <= runs && st == CVCUDA_OK; i++)
		{
			double		t0 = now_ms();

			if (rows[r].lloyd)
			{
				int			it;
				double		inertia;

				st = k_lloyd(bx, n, d, bc, k, 1, CVCUDA_KMEANS_L2, rows[r].mode, ba, NULL, &it,
							 &inertia, &err);
			}
			else
				st = k_assign(bx, n, d, bc, k, CVCUDA_KMEANS_L2, rows[r].mode, ba, bs, &err);
			if (i > 0)
				t[i - 1] = now_ms() - t0;
		}
		if (st != CVCUDA_OK)
		{
			printf("%-24s failed: %s\n", rows[r].name, err.message);
			continue;
		}
		qsort(t, runs, sizeof(double), cmp_double);
		printf("%-24s %10.3f %10.3f %8.1f%%\n", rows[r].name, t[runs / 2], floor_ms,
			   100.0 * floor_ms / t[runs / 2]);
	}
	b_free(bx);
	b_free(bc);
	b_free(ba);
	b_free(bs);
	free(x);
	free(g);
	free(c);
}

int
main(int argc, char **argv)
{
	void	   *h;
	InitFn		init;
	CvCudaDeviceInfo info;
	CvCudaError err;
	long long	n = argc > 2 ? atoll(argv[2]) : 1000000;

	if (argc < 2 || (h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL)
	{
		fprintf(stderr, "usage: %s library.so [N]\n", argv[0]);
		return 1;
	}
	init = (InitFn) dlsym(h, "cvcuda_init");
	b_alloc = (AllocFn) dlsym(h, "cvcuda_buffer_alloc");
	b_free = (FreeFn) dlsym(h, "cvcuda_buffer_free");
	b_write = (WriteFn) dlsym(h, "cvcuda_buffer_write");
	k_assign = (AssignFn) dlsym(h, "cvcuda_kmeans_assign");
	k_lloyd = (LloydFn) dlsym(h, "cvcuda_kmeans_lloyd");
	if (!init || !b_alloc || !b_free || !b_write || !k_assign || !k_lloyd
		|| init(0, &info, &err) != CVCUDA_OK)
	{
		fprintf(stderr, "library or device unusable\n");
		return 1;
	}
	printf("device: %s\n", info.name);
	run_shape(n, 128, 1024, 7);
	run_shape(n, 1024, 4096, 3);
	return 0;
}
