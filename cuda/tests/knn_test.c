/*
 * knn_test: opens a clustervec GPU library with dlopen, as the worker does
 * (clustervec_cuda.so or the CPU shim clustervec_cuda_cpu.so), and checks
 * cvcuda_knn_exact against a brute-force reference built on src/math's
 * scalar l2_squared: indexes equal and distances bitwise equal, ties
 * (duplicate rows, small integers) included, on fresh random data whose seed
 * is printed.  Outputs are poisoned before every call, and a guard zone
 * after them must stay untouched.  Also: echo round trips, host
 * registration, memory info, and an error status (never a crash) for every
 * malformed call.
 *
 * Every case runs with the library's default device memory budget, then
 * again with CLUSTERVEC_CUDA_KNN_BUDGET set to 2 MB, 100 kB and 1 byte
 * (the smaller ones for the smaller cases only), which force the CUDA
 * library through many row chunks and query batches, down to one row and
 * one query at a time (the CPU shim ignores the setting).
 *
 * Usage: knn_test path/to/library.so [--require-device] [--seed N]
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

typedef CvCudaStatus (*MemoryFn) (unsigned long long *, unsigned long long *, CvCudaError *);
typedef CvCudaStatus (*RegisterFn) (void *, size_t, CvCudaError *);
typedef CvCudaStatus (*UnregisterFn) (void *, CvCudaError *);
typedef CvCudaStatus (*EchoFn) (void *, size_t, CvCudaError *);
typedef CvCudaStatus (*KnnFn) (const float *, long long, int, const float *, int, int,
							   long long *, double *, CvCudaError *);

typedef struct Library
{
	AbiFn		abi_version;
	NameFn		backend_name;
	InitFn		init;
	MemoryFn	memory_info;
	RegisterFn	host_register;
	UnregisterFn host_unregister;
	EchoFn		echo;
	KnnFn		knn_exact;
} Library;

/* How a case fills its vectors. */
typedef enum DataKind
{
	DATA_UNIFORM,				/* floats in [-1, 1) */
	DATA_SMALL_INTS,			/* integers 0..3: many equal distances */
	DATA_DUPLICATES,			/* a few distinct rows, each repeated, shuffled; queries among them */
	DATA_NON_FINITE,			/* uniform with some +inf, -inf and NaN elements */
	DATA_EXTREME				/* magnitudes up to 3e38, and -0 */
} DataKind;

typedef struct KnnCase
{
	const char *name;
	long long	rows;
	int			dims;
	int			nq;
	int			k;
	DataKind	kind;
} KnnCase;

static const KnnCase cases[] = {
	{"uniform, one query", 1000, 128, 1, 10, DATA_UNIFORM},
	{"uniform, 300 queries", 1000, 128, 300, 10, DATA_UNIFORM},
	{"dims 1, small integers", 500, 1, 300, 20, DATA_SMALL_INTS},
	{"dims 1, one query", 3000, 1, 1, 1024, DATA_SMALL_INTS},
	{"dims 3, one query", 700, 3, 1, 50, DATA_UNIFORM},
	{"dims 3, small integers, k 1024", 5000, 3, 300, 1024, DATA_SMALL_INTS},
	{"dims 1024, 300 queries", 300, 1024, 300, 16, DATA_UNIFORM},
	{"dims 1024, one query, k 1", 2500, 1024, 1, 1, DATA_UNIFORM},
	{"rows < k", 5, 3, 4, 10, DATA_UNIFORM},
	{"rows = k - 1", 1023, 7, 3, 1024, DATA_UNIFORM},
	{"rows = k + 1: a sort group of one", 1025, 7, 3, 1024, DATA_UNIFORM},
	{"no rows", 0, 8, 3, 4, DATA_UNIFORM},
	{"duplicate rows, k 1024", 3000, 16, 300, 1024, DATA_DUPLICATES},
	{"duplicate rows, dims 130", 2100, 130, 7, 33, DATA_DUPLICATES},
	{"non-finite elements", 40, 5, 4, 40, DATA_NON_FINITE},
	{"extreme magnitudes", 600, 20, 5, 25, DATA_EXTREME},
	{"many rows, 300 queries", 200000, 3, 300, 100, DATA_UNIFORM},
	{"no queries", 10, 4, 0, 5, DATA_UNIFORM},
};

/* Fills count vectors of dims elements of one kind. */
static void
fill_vectors(float *v, long long count, int dims, DataKind kind, uint64_t *state)
{
	for (long long i = 0; i < count * dims; i++)
	{
		uint64_t	r = next_random(state);

		switch (kind)
		{
			case DATA_SMALL_INTS:
				v[i] = (float) (r % 4);
				break;
			case DATA_NON_FINITE:
				v[i] = r % 53 == 0 ? INFINITY : r % 53 == 1 ? -INFINITY :
					r % 53 == 2 ? NAN : uniformf(state);
				break;
			case DATA_EXTREME:
				v[i] = r % 7 == 0 ? -0.0f : (float) ldexp(uniformf(state), (int) (r % 254) - 126);
				break;
			default:
				v[i] = uniformf(state);
				break;
		}
	}
}

/* Duplicates: rows copy one of a few distinct vectors, queries too (distance 0 ties). */
static void
fill_duplicates(float *base, long long rows, float *queries, int nq, int dims, uint64_t *state)
{
	long long	distinct = rows / 10 > 0 ? rows / 10 : 1;
	float	   *pool = malloc(sizeof(float) * (size_t) (distinct * dims));

	fill_vectors(pool, distinct, dims, DATA_UNIFORM, state);
	for (long long r = 0; r < rows; r++)
		memcpy(base + r * dims, pool + (long long) (next_random(state) % distinct) * dims,
			   sizeof(float) * dims);
	for (int q = 0; q < nq; q++)
		if (q % 2 == 0)
			memcpy(queries + (long long) q * dims,
				   pool + (long long) (next_random(state) % distinct) * dims, sizeof(float) * dims);
		else
			fill_vectors(queries + (long long) q * dims, 1, dims, DATA_UNIFORM, state);
	free(pool);
}

/*
 * Brute force with the scalar kernel (the definition): a sorted list of the
 * k best, each row inserted after everything that does not come after it.
 */
static void
reference_knn(const float *base, long long rows, int dims, const float *queries, int nq, int k,
			  long long *index, double *distance)
{
	const CvDistanceKernels *scalar = cv_distance_kernels_for(CV_SIMD_SCALAR);

	for (int q = 0; q < nq; q++)
	{
		long long  *ix = index + (long long) q * k;
		double	   *dx = distance + (long long) q * k;
		int			size = 0;

		for (long long r = 0; r < rows; r++)
		{
			double		d = sqrt(scalar->l2_squared(queries + (long long) q * dims,
													base + r * dims, dims));
			int			at = size;

			while (at > 0 && ref_before(d, r, dx[at - 1], ix[at - 1]))
				at--;
			if (at >= k)
				continue;
			if (size < k)
				size++;
			memmove(ix + at + 1, ix + at, sizeof(long long) * (size - 1 - at));
			memmove(dx + at + 1, dx + at, sizeof(double) * (size - 1 - at));
			ix[at] = r;
			dx[at] = d;
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
}

#define GUARD 16

/* Poison: index -2, a NaN with a payload no computation produces. */
static void
poison(long long *index, double *distance, long long count)
{
	uint64_t	bits = UINT64_C(0x7ff4dead0000beef);

	for (long long i = 0; i < count; i++)
	{
		index[i] = -2;
		memcpy(&distance[i], &bits, sizeof(double));
	}
}

/* Compares results bitwise; prints the first difference. */
static int
same_results(const long long *index, const double *distance, const long long *ref_index,
			 const double *ref_distance, int nq, int k)
{
	for (long long i = 0; i < (long long) nq * k; i++)
		if (index[i] != ref_index[i] || memcmp(&distance[i], &ref_distance[i], sizeof(double)) != 0)
		{
			printf("  query %lld rank %lld: got row %lld distance %.17g, expected row %lld distance %.17g\n",
				   i / k, i % k, index[i], distance[i], ref_index[i], ref_distance[i]);
			return 0;
		}
	return 1;
}

/* True when the guard zone after nq * k results is still poisoned. */
static int
guard_intact(const long long *index, const double *distance, long long count)
{
	uint64_t	bits = UINT64_C(0x7ff4dead0000beef);

	for (long long i = count; i < count + GUARD; i++)
		if (index[i] != -2 || memcmp(&distance[i], &bits, sizeof(double)) != 0)
			return 0;
	return 1;
}

/* Runs one case; base/queries/outputs in the caller's buffers (maybe registered). */
static void
run_case(const Library *lib, const KnnCase *c, uint64_t seed, const char *pass_name,
		 float *base, float *queries, long long *index, double *distance)
{
	long long	results = (long long) c->nq * c->k;
	long long  *ref_index = malloc(sizeof(long long) * (size_t) (results + 1));
	double	   *ref_distance = malloc(sizeof(double) * (size_t) (results + 1));
	uint64_t	state = seed;
	CvCudaError err;
	CvCudaStatus status;
	char		what[256];
	struct timespec t0,
				t1;

	if (c->kind == DATA_DUPLICATES)
		fill_duplicates(base, c->rows, queries, c->nq, c->dims, &state);
	else
	{
		fill_vectors(base, c->rows, c->dims, c->kind, &state);
		fill_vectors(queries, c->nq, c->dims, c->kind == DATA_NON_FINITE && c->nq > 1 ?
					 DATA_UNIFORM : c->kind, &state);
		if (c->kind == DATA_NON_FINITE && c->nq > 1)
			queries[c->dims] = INFINITY;	/* query 1 meets +inf rows: NaN distances */
	}
	reference_knn(base, c->rows, c->dims, queries, c->nq, c->k, ref_index, ref_distance);
	poison(index, distance, results + GUARD);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	status = lib->knn_exact(c->rows > 0 ? base : NULL, c->rows, c->dims, queries, c->nq, c->k,
							index, distance, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	snprintf(what, sizeof(what), "%s: %s (rows %lld, dims %d, nq %d, k %d, seed %llu)",
			 pass_name, c->name, c->rows, c->dims, c->nq, c->k, (unsigned long long) seed);
	if (status != CVCUDA_OK)
	{
		printf("  status %d: %s\n", status, err.message);
		check(0, "%s", what);
	}
	else
		check(same_results(index, distance, ref_index, ref_distance, c->nq, c->k) &&
			  guard_intact(index, distance, results), "%s", what);
	printf("  %s: %.1f ms\n", what,
		   (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	free(ref_index);
	free(ref_distance);
}

/*
 * Runs every case once, each with its own seed, buffers from malloc; with
 * max_work > 0 only the cases of at most max_work rows x queries (small
 * budgets make the others slow).
 */
static void
run_cases(const Library *lib, uint64_t seed, const char *pass_name, long long max_work)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const KnnCase *c = &cases[i];
		long long	results = (long long) c->nq * c->k + GUARD;
		float	   *base = malloc(sizeof(float) * (size_t) (c->rows * c->dims + 1));
		float	   *queries = malloc(sizeof(float) * (size_t) ((long long) c->nq * c->dims + 1));
		long long  *index = malloc(sizeof(long long) * (size_t) results);
		double	   *distance = malloc(sizeof(double) * (size_t) results);

		if (max_work == 0 || c->rows * c->nq <= max_work)
			run_case(lib, c, seed + i, pass_name, base, queries, index, distance);
		free(base);
		free(queries);
		free(index);
		free(distance);
	}
}

/*
 * One case with everything in a registered buffer, as the worker's staging
 * area: queries, base, indexes and distances packed one after the other.
 */
static void
run_registered_case(const Library *lib, uint64_t seed)
{
	const KnnCase c = {"registered staging buffer", 4000, 96, 64, 32, DATA_UNIFORM};
	size_t		bytes = sizeof(float) * (size_t) ((c.nq + c.rows) * c.dims) +
		(sizeof(long long) + sizeof(double)) * (size_t) (c.nq * c.k + GUARD);
	char	   *buffer;
	CvCudaError err;

	if (posix_memalign((void **) &buffer, 4096, bytes) != 0)
	{
		check(0, "posix_memalign");
		return;
	}
	check(lib->host_register(buffer, bytes, &err) == CVCUDA_OK, "host_register staging buffer");
	{
		float	   *queries = (float *) buffer;
		float	   *base = queries + c.nq * c.dims;
		long long  *index = (long long *) (base + c.rows * c.dims);
		double	   *distance = (double *) (index + c.nq * c.k + GUARD);

		run_case(lib, &c, seed, "registered", base, queries, index, distance);
	}
	check(lib->host_unregister(buffer, &err) == CVCUDA_OK, "host_unregister staging buffer");
	free(buffer);
}

/* Calls that must fail with CVCUDA_INVALID_ARGUMENT, and fill err when given. */
static void
check_invalid(CvCudaStatus status, const CvCudaError *err, const char *what)
{
	char		line[300];

	snprintf(line, sizeof(line), "invalid argument rejected: %s (status %d)", what, status);
	check(status == CVCUDA_INVALID_ARGUMENT &&
		  (err == NULL || (err->status == CVCUDA_INVALID_ARGUMENT && err->message[0] != '\0')),
		  "%s", line);
}

/* Every malformed call returns an error status (none needs a device). */
static void
run_argument_checks(const Library *lib)
{
	float		v[8] = {0};
	long long	ix[8];
	double		dx[8];
	unsigned long long total = 0;
	CvCudaError err;

	check_invalid(lib->knn_exact(NULL, 2, 4, v, 1, 1, ix, dx, &err), &err, "base NULL");
	check_invalid(lib->knn_exact(v, 2, 4, NULL, 1, 1, ix, dx, &err), &err, "queries NULL");
	check_invalid(lib->knn_exact(v, 2, 4, v, 1, 1, NULL, dx, &err), &err, "out_index NULL");
	check_invalid(lib->knn_exact(v, 2, 4, v, 1, 1, ix, NULL, &err), &err, "out_distance NULL");
	check_invalid(lib->knn_exact(v, 2, 4, v, 1, 0, ix, dx, &err), &err, "k = 0");
	check_invalid(lib->knn_exact(v, 2, 4, v, 1, -5, ix, dx, &err), &err, "k < 0");
	check_invalid(lib->knn_exact(v, 2, 4, v, 1, CVCUDA_KNN_MAX_K + 1, ix, dx, &err), &err,
				  "k > CVCUDA_KNN_MAX_K");
	check_invalid(lib->knn_exact(v, 2, 0, v, 1, 1, ix, dx, &err), &err, "dims = 0");
	check_invalid(lib->knn_exact(v, 2, -3, v, 1, 1, ix, dx, &err), &err, "dims < 0");
	check_invalid(lib->knn_exact(v, 2, CVCUDA_KNN_MAX_DIMS + 1, v, 1, 1, ix, dx, &err), &err,
				  "dims > CVCUDA_KNN_MAX_DIMS");
	check_invalid(lib->knn_exact(v, -1, 4, v, 1, 1, ix, dx, &err), &err, "rows < 0");
	check_invalid(lib->knn_exact(v, 2, 4, v, -1, 1, ix, dx, &err), &err, "nq < 0");
	check_invalid(lib->knn_exact(v, 1LL << 62, 1024, v, 1, 1, ix, dx, &err), &err,
				  "rows x dims overflow");
	check_invalid(lib->knn_exact(NULL, 2, 4, v, 1, 1, ix, dx, NULL), NULL, "base NULL, err NULL");
	check_invalid(lib->echo(NULL, 16, &err), &err, "echo of 16 bytes from NULL");
	check_invalid(lib->host_register(NULL, 4096, &err), &err, "host_register NULL");
	check_invalid(lib->host_register(v, 0, &err), &err, "host_register 0 bytes");
	check_invalid(lib->host_unregister(NULL, &err), &err, "host_unregister NULL");
	check_invalid(lib->memory_info(NULL, &total, &err), &err, "memory_info free NULL");
	check_invalid(lib->memory_info(&total, NULL, &err), &err, "memory_info total NULL");
}

/* Echo round trips of 0 bytes and 1 MiB, plain and registered. */
static void
run_echo_checks(const Library *lib, uint64_t seed)
{
	size_t		bytes = 1 << 20;
	unsigned char *buffer = malloc(bytes);
	unsigned char *copy = malloc(bytes);
	uint64_t	state = seed;
	CvCudaError err;

	for (size_t i = 0; i < bytes; i++)
		buffer[i] = (unsigned char) next_random(&state);
	memcpy(copy, buffer, bytes);
	check(lib->echo(NULL, 0, &err) == CVCUDA_OK, "echo of 0 bytes (NULL buffer)");
	check(lib->echo(buffer, 0, &err) == CVCUDA_OK, "echo of 0 bytes");
	check(lib->echo(buffer, bytes, &err) == CVCUDA_OK && memcmp(buffer, copy, bytes) == 0,
		  "echo of 1 MiB");
	check(lib->host_register(buffer, bytes, &err) == CVCUDA_OK, "host_register 1 MiB");
	check(lib->echo(buffer, bytes, &err) == CVCUDA_OK && memcmp(buffer, copy, bytes) == 0,
		  "echo of 1 MiB, registered");
	check(lib->host_unregister(buffer, &err) == CVCUDA_OK, "host_unregister 1 MiB");
	free(buffer);
	free(copy);
}

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	Library		lib;
	CvCudaDeviceInfo info;
	CvCudaError err;
	unsigned long long free_bytes = 0,
				total_bytes = 0;
	uint64_t	seed = args.seed;
	const char *name;
	HarnessSymbol symbols[] = {
		{"cvcuda_abi_version", &lib.abi_version},
		{"cvcuda_backend_name", &lib.backend_name},
		{"cvcuda_init", &lib.init},
		{"cvcuda_memory_info", &lib.memory_info},
		{"cvcuda_host_register", &lib.host_register},
		{"cvcuda_host_unregister", &lib.host_unregister},
		{"cvcuda_echo", &lib.echo},
		{"cvcuda_knn_exact", &lib.knn_exact},
	};

	printf("knn_test seed %llu\n", (unsigned long long) seed);
	harness_open(&args, symbols, lengthof(symbols));
	check(lib.abi_version() == CVCUDA_ABI_VERSION, "ABI version");
	name = lib.backend_name();
	printf("backend: %s\n", name ? name : "(null)");
	check(name && (strcmp(name, "cuda") == 0 || strcmp(name, "cpu-shim") == 0), "backend name");
	/* before init: they need no device, so they run where there is none */
	run_argument_checks(&lib);
	harness_init_device(&args, lib.init, &info, "device tests");
	printf("device: %s, compute %d.%d, %d multiprocessors, %.1f GiB\n", info.name,
		   info.compute_major, info.compute_minor, info.multiprocessors,
		   info.total_memory / 1073741824.0);
	check(lib.init(1 << 20, NULL, &err) == CVCUDA_NO_DEVICE, "init of a missing device");
	check(lib.init(0, NULL, &err) == CVCUDA_OK, "init again, info NULL");
	check(lib.memory_info(&free_bytes, &total_bytes, &err) == CVCUDA_OK &&
		  total_bytes > 0 && free_bytes <= total_bytes, "memory_info");
	run_echo_checks(&lib, seed);
	unsetenv("CLUSTERVEC_CUDA_KNN_BUDGET");
	run_cases(&lib, seed, "default budget", 0);
	run_registered_case(&lib, seed + 1000);
	setenv("CLUSTERVEC_CUDA_KNN_BUDGET", "2000000", 1);
	run_cases(&lib, seed + 2000, "2 MB budget", 0);
	setenv("CLUSTERVEC_CUDA_KNN_BUDGET", "100000", 1);
	run_cases(&lib, seed + 3000, "100 kB budget", 2000000);
	setenv("CLUSTERVEC_CUDA_KNN_BUDGET", "1", 1);
	run_cases(&lib, seed + 4000, "1-byte budget", 20000);
	unsetenv("CLUSTERVEC_CUDA_KNN_BUDGET");
	check(lib.knn_exact(NULL, 0, 4, NULL, 0, 1, NULL, NULL, NULL) == CVCUDA_OK,
		  "nothing to do, err NULL");
	return harness_finish();
}
