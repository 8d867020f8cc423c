/*
 * distance_kernels.c: throughput of the CPU distance kernels against memcpy.
 *
 * For each dimension, one query is compared with every vector of a database
 * far larger than the caches, so the kernels are measured as they run in a
 * sequential scan: streaming from DRAM.  A kernel's GB/s counts database
 * bytes read; memcpy's counts bytes copied, over a buffer of the same size.
 * Every figure is the best of several passes (first-touch page faults and
 * frequency ramp-up land in the discarded ones).  CV_BENCH_MIB overrides the
 * database size (default 512).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"

#define PASSES 7
#define DEFAULT_MIB 512
#define MIN_MIB 16

static const int dims[] = {128, 768, 1024};

static const char *const kernel_names[] = {
	"l2_squared", "inner_product", "cosine_parts", "l1"
};

#define N_KERNELS ((int) (sizeof(kernel_names) / sizeof(kernel_names[0])))

/* Keeps every kernel result observable so no pass is optimised away. */
static volatile double sink;

/* A database of nvec vectors of dimension d, plus the memcpy target. */
typedef struct Database
{
	int			d;
	size_t		nvec;
	size_t		bytes;
	float	   *vectors;
	float	   *copy;
	float	   *query;
} Database;

/* Monotonic time in seconds. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* xorshift32: cheap fill data; the values do not affect timing. */
static float
next_value(uint32_t *state)
{
	uint32_t	x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return (float) ((double) x / 4294967296.0 - 0.5);
}

/* Frees whatever part of a database was allocated. */
static void
free_database(Database *db)
{
	free(db->vectors);
	free(db->copy);
	free(db->query);
	memset(db, 0, sizeof(*db));
}

/* Allocates a database of about mib MiB, halving it until malloc succeeds. */
static int
alloc_database(Database *db, int d, size_t mib)
{
	for (; mib >= MIN_MIB; mib /= 2)
	{
		db->d = d;
		db->nvec = mib * 1024 * 1024 / (sizeof(float) * (size_t) d);
		db->bytes = db->nvec * (size_t) d * sizeof(float);
		db->vectors = malloc(db->bytes);
		db->copy = malloc(db->bytes);
		db->query = malloc(sizeof(float) * (size_t) d);
		if (db->vectors && db->copy && db->query)
			return 1;
		free_database(db);
		fprintf(stderr, "allocation of %zu MiB failed, halving\n", mib);
	}
	return 0;
}

/* Fills every page (so no pass pays first-touch faults on reads) and the query. */
static void
fill_database(Database *db)
{
	uint32_t	state = 2463534242u;
	size_t		total = db->nvec * (size_t) db->d;
	size_t		i;

	for (i = 0; i < total; i++)
		db->vectors[i] = next_value(&state);
	memset(db->copy, 0, db->bytes);
	for (i = 0; i < (size_t) db->d; i++)
		db->query[i] = next_value(&state);
}

/* Best time of PASSES full-buffer memcpys. */
static double
time_memcpy(const Database *db)
{
	double		best = 1e30;
	int			p;

	for (p = 0; p < PASSES; p++)
	{
		double		t0 = now();
		double		t;

		memcpy(db->copy, db->vectors, db->bytes);
		t = now() - t0;
		sink = db->copy[(size_t) p % db->nvec];
		if (t < best)
			best = t;
	}
	return best;
}

/* One pass: query against every vector with one kernel. */
static void
scan_once(const Database *db, const CvDistanceKernels *k, int kernel)
{
	const float *q = db->query;
	int			d = db->d;
	size_t		i;

	for (i = 0; i < db->nvec; i++)
	{
		const float *v = db->vectors + i * (size_t) d;

		switch (kernel)
		{
			case 0:
				sink = k->l2_squared(q, v, d);
				break;
			case 1:
				sink = k->inner_product(q, v, d);
				break;
			case 2:
				sink = k->cosine_parts(q, v, d).dot;
				break;
			default:
				sink = k->l1(q, v, d);
				break;
		}
	}
}

/* Best time of PASSES scans with one kernel. */
static double
time_kernel(const Database *db, const CvDistanceKernels *k, int kernel)
{
	double		best = 1e30;
	int			p;

	for (p = 0; p < PASSES; p++)
	{
		double		t0 = now();
		double		t;

		scan_once(db, k, kernel);
		t = now() - t0;
		if (t < best)
			best = t;
	}
	return best;
}

/* Prints the CPU model line of /proc/cpuinfo, or "unknown". */
static void
print_cpu_model(void)
{
	FILE	   *f = fopen("/proc/cpuinfo", "r");
	char		line[512];

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
	{
		if (strncmp(line, "model name", 10) == 0)
		{
			char	   *colon = strchr(line, ':');

			line[strcspn(line, "\n")] = '\0';
			printf("CPU: %s\n", colon ? colon + 2 : line);
			fclose(f);
			return;
		}
	}
	if (f != NULL)
		fclose(f);
	printf("CPU: unknown\n");
}

/* Prints the header: date, CPU, method. */
static void
print_header(size_t mib)
{
	time_t		t = time(NULL);
	char		date[64];

	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
	printf("Date: %s\n", date);
	print_cpu_model();
	printf("Database: ~%zu MiB of float4 vectors per dimension, one query; "
		   "best of %d passes; GB = 1e9 bytes.\n", mib, PASSES);
	printf("Kernel GB/s = database bytes read / time; memcpy GB/s = bytes copied / time "
		   "(same size, buffer to buffer).\n\n");
	printf("| d | vectors | MiB | variant | kernel | ms/pass | GB/s | memcpy GB/s | ratio |\n");
	printf("|---:|---:|---:|---|---|---:|---:|---:|---:|\n");
}

/* Benchmarks every supported variant and kernel on one dimension. */
static void
bench_dimension(int d, size_t mib)
{
	Database	db;
	double		memcpy_gbs;
	int			level;
	int			kernel;

	memset(&db, 0, sizeof(db));
	if (!alloc_database(&db, d, mib))
	{
		printf("| %d | - | - | - | allocation failed | | | | |\n", d);
		return;
	}
	fill_database(&db);
	memcpy_gbs = (double) db.bytes / time_memcpy(&db) / 1e9;
	for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
	{
		const CvDistanceKernels *k = cv_distance_kernels_for((CvSimdLevel) level);

		if (k == NULL)
			continue;
		for (kernel = 0; kernel < N_KERNELS; kernel++)
		{
			double		t = time_kernel(&db, k, kernel);
			double		gbs = (double) db.bytes / t / 1e9;

			printf("| %d | %zu | %.0f | %s | %s | %.1f | %.2f | %.2f | %.2f |\n",
				   d, db.nvec, (double) db.bytes / (1024.0 * 1024.0), k->name,
				   kernel_names[kernel], t * 1e3, gbs, memcpy_gbs, gbs / memcpy_gbs);
			fflush(stdout);
		}
	}
	free_database(&db);
}

/* Lists the levels this CPU cannot run, so their absence is explained. */
static void
print_skipped(void)
{
	static const char *const names[] = {"scalar", "avx2", "avx512"};
	int			level;

	for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
		if (!cv_simd_supported((CvSimdLevel) level))
			printf("\n%s: not supported by this CPU, skipped\n", names[level]);
}

int
main(void)
{
	const char *env = getenv("CV_BENCH_MIB");
	size_t		mib = env ? (size_t) strtoul(env, NULL, 10) : DEFAULT_MIB;
	size_t		i;

	if (mib < MIN_MIB)
		mib = MIN_MIB;
	print_header(mib);
	for (i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
		bench_dimension(dims[i], mib);
	print_skipped();
	return 0;
}
