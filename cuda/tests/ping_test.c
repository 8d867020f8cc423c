/*
 * ping_test: opens a clustervec GPU library with dlopen, as the worker does
 * (clustervec_cuda.so or the CPU shim clustervec_cuda_cpu.so), and checks the
 * ping's output element by element.  Without a device it checks that the
 * library says so with CVCUDA_NO_DEVICE instead of failing.
 * Usage: ping_test path/to/library.so [--require-device]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clustervec_cuda.h"

typedef int (*AbiFn) (void);
typedef const char *(*NameFn) (void);
typedef CvCudaStatus (*InfoFn) (int, CvCudaDeviceInfo *, CvCudaError *);
typedef CvCudaStatus (*PingFn) (int, int, float, float *, CvCudaError *);

/* Counts output elements that differ from i * scale; poison catches unwritten ones. */
static int
count_wrong(const float *out, int n, float scale)
{
	int			wrong = 0;

	for (int i = 0; i < n; i++)
		if (out[i] != (float) i * scale)
			wrong++;
	return wrong;
}

/* A symbol of the library, or NULL (reported). */
static void *
resolve(void *lib, const char *name)
{
	void	   *symbol = dlsym(lib, name);

	if (symbol == NULL)
		printf("missing symbol %s\n", name);
	return symbol;
}

int
main(int argc, char **argv)
{
	void	   *lib;
	AbiFn		abi_version;
	NameFn		backend_name;
	InfoFn		device_info;
	PingFn		ping;
	CvCudaDeviceInfo info;
	CvCudaError err;
	CvCudaStatus status;
	int			require = argc > 2 && strcmp(argv[2], "--require-device") == 0;
	int			passed = 0,
				failed = 0;
	const int	n = 100003;
	float	   *out;

	if (argc < 2 || (lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL)
	{
		fprintf(stderr, "cannot open library: %s\n", argc < 2 ? "no path" : dlerror());
		printf("0 passed, 1 failed\n");
		return 1;
	}
	abi_version = (AbiFn) resolve(lib, "cvcuda_abi_version");
	backend_name = (NameFn) resolve(lib, "cvcuda_backend_name");
	device_info = (InfoFn) resolve(lib, "cvcuda_device_info");
	ping = (PingFn) resolve(lib, "cvcuda_ping");
	if (!abi_version || !backend_name || !device_info || !ping)
	{
		printf("0 passed, 1 failed\n");
		return 1;
	}
	if (abi_version() == CVCUDA_ABI_VERSION)
		passed++;
	else
	{
		printf("ABI version %d, expected %d\n", abi_version(), CVCUDA_ABI_VERSION);
		failed++;
	}
	printf("backend: %s\n", backend_name());
	status = device_info(0, &info, &err);
	if (status == CVCUDA_NO_DEVICE && !require)
	{
		printf("no device (%s): ping skipped\n", err.message);
		printf("%d passed, %d failed, 1 skipped\n", passed + 1, failed);
		return failed ? 1 : 0;
	}
	if (status != CVCUDA_OK)
	{
		printf("device_info failed: %s\n", err.message);
		printf("%d passed, %d failed\n", passed, failed + 1);
		return 1;
	}
	printf("device: %s, compute %d.%d, %d SMs, %.1f GiB\n", info.name,
		   info.compute_major, info.compute_minor, info.multiprocessors,
		   info.total_memory / 1073741824.0);
	passed++;
	out = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
		out[i] = NAN;
	status = ping(0, n, 0.5f, out, &err);
	if (status == CVCUDA_OK && count_wrong(out, n, 0.5f) == 0)
		passed++;
	else
	{
		printf("ping failed: status %d, %s\n", status, err.message);
		failed++;
	}
	status = ping(0, 0, 1.0f, out, &err);
	if (status == CVCUDA_INVALID_ARGUMENT && err.status == CVCUDA_INVALID_ARGUMENT)
		passed++;
	else
	{
		printf("ping with n = 0: status %d, expected %d\n", status, CVCUDA_INVALID_ARGUMENT);
		failed++;
	}
	free(out);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
