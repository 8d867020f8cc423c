// device.cu: the entry points about the library and the device: version,
// backend, device description, context creation, memory, host registration.
#include <cstdio>
#include <cstring>

#include "common.cuh"

// The device cvcuda_init selected last; -1 before (or after a failed) init.
static int	current_device = -1;

// Fills info for one device; the count first, so a caller sees it on failure.
static CvCudaStatus
describe_device(int device, CvCudaDeviceInfo *info, CvCudaError *err)
{
	cudaDeviceProp prop;
	int			count = 0;

	memset(info, 0, sizeof(*info));
	CVCUDA_TRY(cudaGetDeviceCount(&count), "cudaGetDeviceCount", err);
	info->device_count = count;
	if (device < 0 || device >= count)
		return cvcuda_set_error(err, CVCUDA_NO_DEVICE, (int) cudaErrorInvalidDevice,
								"device %d requested, %d present", device, count);
	CVCUDA_TRY(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", err);
	info->compute_major = prop.major;
	info->compute_minor = prop.minor;
	info->multiprocessors = prop.multiProcessorCount;
	info->total_memory = prop.totalGlobalMem;
	snprintf(info->name, sizeof(info->name), "%s", prop.name);
	return cvcuda_set_ok(err);
}

extern "C" int
cvcuda_abi_version(void)
{
	return CVCUDA_ABI_VERSION;
}

extern "C" const char *
cvcuda_backend_name(void)
{
	return "cuda";
}

extern "C" CvCudaStatus
cvcuda_device_info(int device, CvCudaDeviceInfo *info, CvCudaError *err)
{
	return cvcuda_guard("device_info", err, [&]() -> CvCudaStatus {
		if (info == NULL)
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "info must not be NULL");
		return describe_device(device, info, err);
	});
}

extern "C" CvCudaStatus
cvcuda_init(int device, CvCudaDeviceInfo *info, CvCudaError *err)
{
	return cvcuda_guard("init", err, [&]() -> CvCudaStatus {
		CvCudaDeviceInfo local;
		CvCudaDeviceInfo *out = info ? info : &local;
		CvCudaStatus status = describe_device(device, out, err);
		cudaStream_t stream;

		if (status != CVCUDA_OK)
			return status;
		// The stream and echo buffer may belong to another device (or to
		// device 0, used implicitly before the first init).
		if (current_device != device)
			cvcuda_release_device_state();
		current_device = -1;
		CVCUDA_TRY(cudaSetDevice(device), "cudaSetDevice", err);
		// cudaSetDevice creates the primary context; a free of nothing proves it.
		CVCUDA_TRY(cudaFree(nullptr), "context creation", err);
		CVCUDA_TRY(cvcuda_stream(&stream), "cudaStreamCreate", err);
		current_device = device;
		return cvcuda_set_ok(err);
	});
}

extern "C" CvCudaStatus
cvcuda_memory_info(unsigned long long *free_bytes, unsigned long long *total_bytes,
				   CvCudaError *err)
{
	return cvcuda_guard("memory_info", err, [&]() -> CvCudaStatus {
		size_t		free_now = 0,
					total = 0;
		CvCudaStatus status = cvcuda_check_memory_args(free_bytes, total_bytes, err);

		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(cudaMemGetInfo(&free_now, &total), "cudaMemGetInfo", err);
		*free_bytes = free_now;
		*total_bytes = total;
		return cvcuda_set_ok(err);
	});
}

extern "C" CvCudaStatus
cvcuda_host_register(void *ptr, size_t bytes, CvCudaError *err)
{
	return cvcuda_guard("host_register", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_host_args(ptr, bytes, 1, err);

		if (status != CVCUDA_OK)
			return status;
		// Portable: pinned for every context, should the worker ever use two.
		CVCUDA_TRY(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable),
				   "cudaHostRegister", err);
		return cvcuda_set_ok(err);
	});
}

extern "C" CvCudaStatus
cvcuda_host_unregister(void *ptr, CvCudaError *err)
{
	return cvcuda_guard("host_unregister", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_host_args(ptr, 0, 0, err);

		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(cudaHostUnregister(ptr), "cudaHostUnregister", err);
		return cvcuda_set_ok(err);
	});
}
