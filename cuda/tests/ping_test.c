/*
 * ping_test: opens a clustervec GPU library with dlopen, as the worker does
 * (clustervec_cuda.so or the CPU shim clustervec_cuda_cpu.so), and checks the
 * ping's output element by element.  Without a device it checks that the
 * library says so with CVCUDA_NO_DEVICE instead of failing.
 * Usage: ping_test path/to/library.so [--require-device]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "clustervec_cuda.h"
#include "harness.h"

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

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	AbiFn		abi_version;
	NameFn		backend_name;
	InfoFn		device_info;
	PingFn		ping;
	HarnessSymbol symbols[] = {
		{"cvcuda_abi_version", &abi_version},
		{"cvcuda_backend_name", &backend_name},
		{"cvcuda_device_info", &device_info},
		{"cvcuda_ping", &ping},
	};
	CvCudaDeviceInfo info;
	CvCudaError err;
	CvCudaStatus status;
	const int	n = 100003;
	float	   *out;

	harness_open(&args, symbols, lengthof(symbols));
	check(abi_version() == CVCUDA_ABI_VERSION, "ABI version %d, expected %d", abi_version(),
		  CVCUDA_ABI_VERSION);
	printf("backend: %s\n", backend_name());

	/*
	 * cvcuda_device_info, not the harness's cvcuda_init: describing a device
	 * is what this test checks, and "no device" is a right answer, counted.
	 */
	status = device_info(0, &info, &err);
	if (status == CVCUDA_NO_DEVICE && !args.require_device)
	{
		printf("no device (%s): ping skipped\n", err.message);
		printf("%d passed, %d failed, 1 skipped\n", passed + 1, failed);
		return failed ? 1 : 0;
	}
	if (!check(status == CVCUDA_OK, "device_info failed: %s", err.message))
		return harness_finish();
	printf("device: %s, compute %d.%d, %d SMs, %.1f GiB\n", info.name,
		   info.compute_major, info.compute_minor, info.multiprocessors,
		   info.total_memory / 1073741824.0);
	out = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
		out[i] = NAN;
	status = ping(0, n, 0.5f, out, &err);
	check(status == CVCUDA_OK && count_wrong(out, n, 0.5f) == 0, "ping failed: status %d, %s",
		  status, err.message);
	status = ping(0, 0, 1.0f, out, &err);
	check(status == CVCUDA_INVALID_ARGUMENT && err.status == CVCUDA_INVALID_ARGUMENT,
		  "ping with n = 0: status %d, expected %d", status, CVCUDA_INVALID_ARGUMENT);
	free(out);
	return harness_finish();
}
