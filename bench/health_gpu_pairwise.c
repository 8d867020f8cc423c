/*
 * health_gpu_pairwise: times the pairwise family (STATISTICS.md section 3,
 * both passes) and the rank family of the CUDA library, through the public
 * API: cvcuda_health_centroid, cvcuda_health_neighbour_table,
 * cvcuda_health_members, then cvcuda_health_timings.  Shapes: one cluster
 * of 100,000 x 1024 and 1,000 clusters of 1,000 x 1024 (uniform data).
 *
 * FLOP count: 3 flops per element pair (difference, square, add), so one
 * sweep over all pairs is 3 d n (n - 1) / 2 per cluster; the family makes
 * two sweeps (pass 1 and pass 2).  The last columns compare with 51 TFLOP/s
 * (H200 FP32 SIMT).
 *
 * Build: gcc -O2 -I cuda/include -I src bench/health_gpu_pairwise.c -ldl -o /tmp/hp
 * Usage: /tmp/hp [path/to/clustervec_cuda.so] [repeats]
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clustervec_cuda.h"

typedef CvCudaStatus (*InitFn) (int, CvCudaDeviceInfo *, CvCudaError *);
typedef CvCudaStatus (*AllocFn) (size_t, CvCudaBuffer **, CvCudaError *);
typedef void (*FreeFn) (CvCudaBuffer *);
typedef CvCudaStatus (*WriteFn) (CvCudaBuffer *, size_t, const void *, size_t, CvCudaError *);
typedef CvCudaStatus (*ReadFn) (const CvCudaBuffer *, size_t, void *, size_t, CvCudaError *);
typedef CvCudaStatus (*CentroidFn) (const CvCudaBuffer *, const CvCudaBuffer *, long long, int,
									const CvHealthParams *, CvCudaBuffer *, CvCudaBuffer *,
									CvCudaError *);
typedef CvCudaStatus (*TableFn) (CvCudaCentroidSet *, CvCudaError *);
typedef CvCudaStatus (*MembersFn) (const CvCudaBuffer *, const CvCudaBuffer *, long long,
								   long long, const CvCudaCentroidSet *, const CvHealthParams *,
								   CvCudaBuffer *, CvCudaError *);
typedef void (*TimingsFn) (double *);

static InitFn f_init;
static AllocFn f_alloc;
static FreeFn f_free;
static WriteFn f_write;
static ReadFn f_read;
static CentroidFn f_centroid;
static TableFn f_table;
static MembersFn f_members;
static TimingsFn f_timings;

static void
die(const char *what, const CvCudaError *err)
{
	fprintf(stderr, "%s: %s\n", what, err ? err->message : "");
	exit(1);
}

static CvCudaBuffer *
buffer(const void *src, size_t bytes)
{
	CvCudaBuffer *b = NULL;
	CvCudaError err;

	if (f_alloc(bytes > 0 ? bytes : 8, &b, &err) != CVCUDA_OK)
		die("alloc", &err);
	if (src != NULL && f_write(b, 0, src, bytes, &err) != CVCUDA_OK)
		die("write", &err);
	return b;
}

static uint64_t
next_random(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Runs one shape `repeats` times; prints the last run's pairwise and rank times. */
static void
run_shape(long long k, long long n, int d, int repeats)
{
	long long	total = k * n;
	float	   *x = malloc(sizeof(float) * total * d);
	long long  *off = malloc(sizeof(long long) * (k + 1));
	CvClusterStats *stats = malloc(sizeof(CvClusterStats) * k);
	double	   *md = malloc(sizeof(double) * k);
	double	   *mn = malloc(sizeof(double) * k);
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, 2000};
	int			m = k >= 2 ? (int) (k - 1 < 5 ? k - 1 : 5) : 0;
	uint64_t	state = 12345;
	double		ms[CVCUDA_HEALTH_FAMILIES] = {0};
	double		pairs = (double) k * n * (n - 1) / 2;
	double		sweep = 3.0 * pairs * d;
	CvCudaError err;
	CvCudaCentroidSet set;
	CvCudaBuffer *bx,
			   *bo,
			   *bs,
			   *bc,
			   *bmd,
			   *bmn,
			   *bn = NULL,
			   *bnd = NULL,
			   *bdb = NULL;

	for (long long i = 0; i < total * d; i++)
		x[i] = (float) ((double) (next_random(&state) >> 40) * 0x1.0p-24 * 2.0 - 1.0);
	for (long long c = 0; c <= k; c++)
		off[c] = c * n;
	bx = buffer(x, sizeof(float) * total * d);
	bo = buffer(off, sizeof(long long) * (k + 1));
	bs = buffer(NULL, sizeof(CvClusterStats) * k);
	bc = buffer(NULL, sizeof(double) * k * d);
	if (f_centroid(bx, bo, k, d, &params, bc, bs, &err) != CVCUDA_OK)
		die("health_centroid", &err);
	if (f_read(bs, 0, stats, sizeof(CvClusterStats) * k, &err) != CVCUDA_OK)
		die("read", &err);
	for (long long c = 0; c < k; c++)
	{
		md[c] = stats[c].value[CV_STAT_MEAN_DIST];
		mn[c] = stats[c].value[CV_STAT_MEAN_NORM];
	}
	bmd = buffer(md, sizeof(double) * k);
	bmn = buffer(mn, sizeof(double) * k);
	if (m > 0)
	{
		bn = buffer(NULL, sizeof(long long) * k * m);
		bnd = buffer(NULL, sizeof(double) * k * m);
		bdb = buffer(NULL, sizeof(double) * k);
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
	if (f_table(&set, &err) != CVCUDA_OK)
		die("health_neighbour_table", &err);
	for (int r = 0; r < repeats; r++)
	{
		if (f_write(bs, 0, stats, sizeof(CvClusterStats) * k, &err) != CVCUDA_OK)
			die("write", &err);
		if (f_members(bx, bo, k, 0, &set, &params, bs, &err) != CVCUDA_OK)
			die("health_members", &err);
		f_timings(ms);
	}
	if (f_read(bs, 0, stats, sizeof(CvClusterStats) * k, &err) != CVCUDA_OK)
		die("read", &err);
	printf("%6lld x %7lld x %5d | %10.1f | %8.2f | %8.2f | %6.1f%% | %10.1f | sigma %.4g mpd %.4g erank %s%.4g\n",
		   k, n, d, ms[2], sweep / (ms[2] * 1e-3) / 1e12, 2 * sweep / (ms[2] * 1e-3) / 1e12,
		   100.0 * 2 * sweep / (ms[2] * 1e-3) / 51e12, ms[5],
		   stats[0].value[CV_STAT_SIGMA], stats[0].value[CV_STAT_MEAN_PAIRWISE_DIST],
		   stats[0].is_null[CV_STAT_EFFECTIVE_RANK] ? "NULL " : "",
		   stats[0].value[CV_STAT_EFFECTIVE_RANK]);
	fflush(stdout);
	f_free(bx);
	f_free(bo);
	f_free(bs);
	f_free(bc);
	f_free(bmd);
	f_free(bmn);
	f_free(bn);
	f_free(bnd);
	f_free(bdb);
	free(x);
	free(off);
	free(stats);
	free(md);
	free(mn);
}

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "cuda/clustervec_cuda.so";
	int			repeats = argc > 2 ? atoi(argv[2]) : 2;
	void	   *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CvCudaError err;

	if (h == NULL)
	{
		fprintf(stderr, "cannot open %s: %s\n", path, dlerror());
		return 1;
	}
	f_init = (InitFn) dlsym(h, "cvcuda_init");
	f_alloc = (AllocFn) dlsym(h, "cvcuda_buffer_alloc");
	f_free = (FreeFn) dlsym(h, "cvcuda_buffer_free");
	f_write = (WriteFn) dlsym(h, "cvcuda_buffer_write");
	f_read = (ReadFn) dlsym(h, "cvcuda_buffer_read");
	f_centroid = (CentroidFn) dlsym(h, "cvcuda_health_centroid");
	f_table = (TableFn) dlsym(h, "cvcuda_health_neighbour_table");
	f_members = (MembersFn) dlsym(h, "cvcuda_health_members");
	f_timings = (TimingsFn) dlsym(h, "cvcuda_health_timings");
	if (!f_init || !f_alloc || !f_free || !f_write || !f_read || !f_centroid || !f_table ||
		!f_members || !f_timings)
	{
		fprintf(stderr, "%s lacks a health entry point\n", path);
		return 1;
	}
	if (f_init(0, NULL, &err) != CVCUDA_OK)
		die("init", &err);
	if (repeats < 1)
		repeats = 1;
	printf("pairwise family (both passes), last of %d runs; TF/s at 3 flops per element pair\n",
		   repeats);
	printf("%-24s | %10s | %8s | %8s | %7s | %10s |\n", "clusters x n x d", "pair ms",
		   "TF/s 1sw", "TF/s 2sw", "of 51TF", "rank ms");
	run_shape(1, 100000, 1024, repeats);
	run_shape(1000, 1000, 1024, repeats);
	return 0;
}
