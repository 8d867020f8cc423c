/*
 * health_gpu_linear: device timings of the linear statistics families
 * (centroid, two-means, neighbour table and members, potential) through
 * cvcuda_health_timings, on clustered random data.  Each call runs twice;
 * the second is reported.  Effective bandwidth = member bytes / centroid time.
 *
 * Build: gcc -O2 -I cuda/include -I src bench/health_gpu_linear.c -o health_gpu_linear -ldl
 * Usage: health_gpu_linear path/to/clustervec_cuda.so
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

static AllocFn b_alloc;
static WriteFn b_write;
static ReadFn b_read;
static FreeFn b_free;

static void
die(const char *what, const CvCudaError *err)
{
	printf("%s failed: %s\n", what, err ? err->message : "");
	exit(1);
}

static CvCudaBuffer *
alloc_write(const void *src, size_t bytes)
{
	CvCudaBuffer *b;
	CvCudaError err;

	if (b_alloc(bytes, &b, &err) != CVCUDA_OK)
		die("alloc", &err);
	if (src && b_write(b, 0, src, bytes, &err) != CVCUDA_OK)
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

int
main(int argc, char **argv)
{
	void	   *h;
	InitFn		init;
	CentroidFn	centroid;
	TableFn		table;
	MembersFn	members;
	TimingsFn	timings;
	CvCudaError err;
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, 2};	/* rank refused: not timed here */
	struct
	{
		const char *name;
		long long	k;
		long long	big;		/* members of cluster 0 */
		long long	small;		/* members of the others */
	}			cases[] = {
		{"1,000 x 1,000", 1000, 1000, 1000},
		{"1 x 1,000 (+63 x 10)", 64, 1000, 10},
		{"1 x 10,000 (+63 x 10)", 64, 10000, 10},
		{"1 x 100,000 (+63 x 10)", 64, 100000, 10},
	};
	int			d = 1024;

	if (argc < 2 || (h = dlopen(argv[1], RTLD_NOW)) == NULL)
	{
		printf("cannot open library\n");
		return 1;
	}
	init = (InitFn) dlsym(h, "cvcuda_init");
	b_alloc = (AllocFn) dlsym(h, "cvcuda_buffer_alloc");
	b_free = (FreeFn) dlsym(h, "cvcuda_buffer_free");
	b_write = (WriteFn) dlsym(h, "cvcuda_buffer_write");
	b_read = (ReadFn) dlsym(h, "cvcuda_buffer_read");
	centroid = (CentroidFn) dlsym(h, "cvcuda_health_centroid");
	table = (TableFn) dlsym(h, "cvcuda_health_neighbour_table");
	members = (MembersFn) dlsym(h, "cvcuda_health_members");
	timings = (TimingsFn) dlsym(h, "cvcuda_health_timings");
	if (init(0, NULL, &err) != CVCUDA_OK)
		die("init", &err);
	printf("| case (x %d d) | rows | centroid ms | GB/s | table ms | neighbour members ms | two-means ms | potential ms | pairwise ms |\n", d);
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
	{
		long long	k = cases[ci].k;
		long long  *off = malloc(sizeof(long long) * (k + 1));
		long long	total;
		float	   *x;
		uint64_t	state = 42;
		CvCudaBuffer *bx,
				   *bo,
				   *bs,
				   *bc,
				   *bmd,
				   *bmn,
				   *bn,
				   *bnd,
				   *bdb;
		CvClusterStats *stats;
		double	   *md,
				   *mn;
		double		ms[CVCUDA_HEALTH_FAMILIES],
					cms,
					tms;
		CvCudaCentroidSet set;
		int			m = k - 1 < params.neighbours ? (int) k - 1 : params.neighbours;

		off[0] = 0;
		for (long long c = 0; c < k; c++)
			off[c + 1] = off[c] + (c == 0 ? cases[ci].big : cases[ci].small);
		total = off[k];
		x = malloc(sizeof(float) * total * d);
		for (long long c = 0; c < k; c++)
		{
			float		centre[1024];

			for (int j = 0; j < d; j++)
				centre[j] = (float) ((next_random(&state) >> 40) * 0x1.0p-24 * 4.0);
			for (long long i = off[c]; i < off[c + 1]; i++)
				for (int j = 0; j < d; j++)
					x[i * d + j] = centre[j] + (float) ((next_random(&state) >> 40) * 0x1.0p-24);
		}
		bx = alloc_write(x, sizeof(float) * total * d);
		bo = alloc_write(off, sizeof(long long) * (k + 1));
		bs = alloc_write(NULL, sizeof(CvClusterStats) * k);
		bc = alloc_write(NULL, sizeof(double) * k * d);
		for (int rep = 0; rep < 2; rep++)
			if (centroid(bx, bo, k, d, &params, bc, bs, &err) != CVCUDA_OK)
				die("health_centroid", &err);
		timings(ms);
		cms = ms[0];
		stats = malloc(sizeof(CvClusterStats) * k);
		md = malloc(sizeof(double) * k);
		mn = malloc(sizeof(double) * k);
		if (b_read(bs, 0, stats, sizeof(CvClusterStats) * k, &err) != CVCUDA_OK)
			die("read", &err);
		for (long long c = 0; c < k; c++)
		{
			md[c] = stats[c].value[CV_STAT_MEAN_DIST];
			mn[c] = stats[c].value[CV_STAT_MEAN_NORM];
		}
		bmd = alloc_write(md, sizeof(double) * k);
		bmn = alloc_write(mn, sizeof(double) * k);
		bn = alloc_write(NULL, sizeof(long long) * k * m);
		bnd = alloc_write(NULL, sizeof(double) * k * m);
		bdb = alloc_write(NULL, sizeof(double) * k);
		set.k = k;
		set.d = d;
		set.m = m;
		set.centroids = bc;
		set.mean_dist = bmd;
		set.mean_norm = bmn;
		set.nearest = bn;
		set.nearest_dist = bnd;
		set.db_ratio = bdb;
		for (int rep = 0; rep < 2; rep++)
			if (table(&set, &err) != CVCUDA_OK)
				die("health_neighbour_table", &err);
		timings(ms);
		tms = ms[3];
		printf("| %s | %lld | %.4f | %.0f | %.4f | (members next) |\n", cases[ci].name, total, cms,
			   (double) total * d * 4 / (cms * 1e-3) / 1e9, tms);
		fflush(stdout);
		for (int rep = 0; rep < 2; rep++)
			if (members(bx, bo, k, 0, &set, &params, bs, &err) != CVCUDA_OK)
				die("health_members", &err);
		timings(ms);
		printf("| %s | %lld | %.4f | %.0f | %.4f | %.4f | %.4f | %.4f | %.3f |\n", cases[ci].name,
			   total, cms, (double) total * d * 4 / (cms * 1e-3) / 1e9, tms, ms[3] - tms, ms[1],
			   ms[4], ms[2]);
		fflush(stdout);
		b_free(bx);
		b_free(bo);
		b_free(bs);
		b_free(bc);
		b_free(bmd);
		b_free(bmn);
		b_free(bn);
		b_free(bnd);
		b_free(bdb);
		free(x);
		free(off);
		free(stats);
		free(md);
		free(mn);
	}
	return 0;
}
