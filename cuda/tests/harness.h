/*
 * harness.h: what every standalone test of the GPU library (cuda/tests)
 * shares, so that the tests hold only what they check.
 *
 *   - the pass/fail counters and check(), whose "FAILED: ..." lines and
 *     final "N passed, M failed" line are what make cputest and cudatest
 *     (and scripts/test.sh) read;
 *   - splitmix64 and the uniform draws built on it: a seed printed by one
 *     run reproduces that run anywhere, so these must never change;
 *   - the command line: path/to/library.so [--require-device] [--seed N];
 *   - opening the library with dlopen, as the worker does, and setting up
 *     device 0, where "no device" is a skip unless --require-device.
 *
 * Every test is one translation unit that includes this once: the
 * functions are static inline, so a test need not use all of them.
 */
#ifndef CVCUDA_TESTS_HARNESS_H
#define CVCUDA_TESTS_HARNESS_H

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clustervec_cuda.h"

/* The number of elements of an array (PostgreSQL's c.h has the same). */
#define lengthof(array) (sizeof (array) / sizeof ((array)[0]))

/*
 * The entry points the harness and several tests call, as function pointer
 * types: the tests reach the library only through dlsym, as the worker does.
 */
typedef int (*AbiFn) (void);
typedef const char *(*NameFn) (void);
typedef CvCudaStatus (*InitFn) (int, CvCudaDeviceInfo *, CvCudaError *);
typedef CvCudaStatus (*AllocFn) (size_t, CvCudaBuffer **, CvCudaError *);
typedef void (*FreeFn) (CvCudaBuffer *);
typedef CvCudaStatus (*WriteFn) (CvCudaBuffer *, size_t, const void *, size_t, CvCudaError *);
typedef CvCudaStatus (*ReadFn) (const CvCudaBuffer *, size_t, void *, size_t, CvCudaError *);

/* ---------------------------------------------------------------- checks */

static int	passed = 0;
static int	failed = 0;

/*
 * kmeans_test logs every check ("ok: ..." as well as "FAILED: ..."); the
 * others print only failures, which keeps their thousands of checks quiet.
 */
static int	check_prints_passes = 0;

/* Counts one check, printing it when it failed; returns ok. */
static inline int
check(int ok, const char *format,...)
	__attribute__((format(printf, 2, 3)));

static inline int
check(int ok, const char *format,...)
{
	va_list		args;

	if (ok)
		passed++;
	else
		failed++;
	if (!ok || check_prints_passes)
	{
		printf("%s: ", ok ? "ok" : "FAILED");
		va_start(args, format);
		vprintf(format, args);
		va_end(args);
		printf("\n");
	}
	return ok;
}

/* Prints the line the make targets read; returns the exit status of main. */
static inline int
harness_finish(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* ---------------------------------------------------------------- random */

/* splitmix64: the tests' PRNG, so a printed seed reproduces a run anywhere. */
static inline uint64_t
next_random(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A double in [0, 1): the top 53 bits of a draw. */
static inline double
unit_random(uint64_t *state)
{
	return (double) (next_random(state) >> 11) * 0x1.0p-53;
}

/* A double in [-1, 1). */
static inline double
uniform(uint64_t *state)
{
	return unit_random(state) * 2.0 - 1.0;
}

/*
 * A float in [-1, 1): uniform() rounded once, so that the float tests draw
 * the very values they drew before the harness existed.
 */
static inline float
uniformf(uint64_t *state)
{
	return (float) uniform(state);
}

/* ---------------------------------------------------------------- library */

/* The command line: path/to/library.so [--require-device] [--seed N]. */
typedef struct HarnessArgs
{
	const char *library;		/* argv[1]; NULL when missing */
	int			require_device; /* no device is a failure, not a skip */
	uint64_t	seed;			/* --seed N, else the time: printed by the test */
} HarnessArgs;

static inline HarnessArgs
harness_args(int argc, char **argv)
{
	HarnessArgs args;

	args.library = argc > 1 ? argv[1] : NULL;
	args.require_device = 0;
	args.seed = (uint64_t) time(NULL);
	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], "--require-device") == 0)
			args.require_device = 1;
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			args.seed = strtoull(argv[++i], NULL, 10);
	return args;
}

/*
 * One entry point a test needs: its name and where to store it, the
 * address of a function pointer (&lib.init).
 */
typedef struct HarnessSymbol
{
	const char *name;
	void	   *slot;
} HarnessSymbol;

/*
 * Opens the library and resolves every symbol into its slot; a library
 * that does not open or lacks one ends the run as one failure, naming
 * what is missing.  Returns the handle (never closed: the tests end with
 * it open, as the worker does).
 */
static inline void *
harness_open(const HarnessArgs *args, const HarnessSymbol *symbols, size_t nsymbols)
{
	void	   *handle = NULL;
	int			missing = 0;

	if (args->library == NULL || (handle = dlopen(args->library, RTLD_NOW | RTLD_LOCAL)) == NULL)
	{
		fprintf(stderr, "cannot open library: %s\n",
				args->library == NULL ? "no path" : dlerror());
		printf("0 passed, 1 failed\n");
		exit(1);
	}
	for (size_t i = 0; i < nsymbols; i++)
	{
		void	   *address = dlsym(handle, symbols[i].name);

		/*
		 * memcpy, not a cast: ISO C has no conversion from void * to a
		 * function pointer; POSIX guarantees the representations agree.
		 */
		memcpy(symbols[i].slot, &address, sizeof(address));
		if (address == NULL)
		{
			printf("missing symbol %s\n", symbols[i].name);
			missing++;
		}
	}
	if (missing > 0)
	{
		printf("the library lacks an entry point of ABI %d\n", CVCUDA_ABI_VERSION);
		printf("0 passed, 1 failed\n");
		exit(1);
	}
	return handle;
}

/*
 * Sets up device 0 with the library's cvcuda_init, counted as one check.
 * Without a device the run ends here, passing, with "1 skipped" and what
 * was skipped named, unless --require-device made that a failure (cputest
 * and cudatest always give it); a failed init ends the run too.
 */
static inline void
harness_init_device(const HarnessArgs *args, InitFn init, CvCudaDeviceInfo *info,
					const char *skipped)
{
	CvCudaError err;
	CvCudaStatus status = init(0, info, &err);

	if (status == CVCUDA_NO_DEVICE && !args->require_device)
	{
		printf("no device (%s): %s skipped\n", err.message, skipped);
		printf("%d passed, %d failed, 1 skipped\n", passed, failed);
		exit(failed ? 1 : 0);
	}
	if (status != CVCUDA_OK)
	{
		check(0, "init device 0: %s", err.message);
		exit(harness_finish());
	}
	check(1, "init device 0");
}

/*
 * The order of a k-NN answer (knn_test, ivf_search_test): by distance, NaN
 * last, then by row or position.
 */
static inline int
ref_before(double da, long long ra, double db, long long rb)
{
	int			na = isnan(da),
				nb = isnan(db);

	if (na != nb)
		return nb;
	if (!na && da != db)
		return da < db;
	return ra < rb;
}

/* The distance the API reports: NaN as the one quiet NaN. */
static inline double
reported(double d)
{
	if (isnan(d))
	{
		uint64_t	bits = UINT64_C(0x7ff8000000000000);

		memcpy(&d, &bits, sizeof(d));
	}
	return d;
}

#endif							/* CVCUDA_TESTS_HARNESS_H */
