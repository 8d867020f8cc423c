// ping.cu: a trivial kernel and the status-returning entry points that prove
// the library, driver and device work; the worker's first call.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#include "clustervec_cuda.h"

// Fills the error record from a CUDA error; sticky errors poison the context.
static CvCudaStatus
record_cuda_error(cudaError_t code, const char *what, CvCudaError *err)
{
	CvCudaStatus status;

	switch (code)
	{
		case cudaErrorNoDevice:
		case cudaErrorInsufficientDriver:
		case cudaErrorInvalidDevice:
			status = CVCUDA_NO_DEVICE;
			break;
		case cudaErrorMemoryAllocation:
			status = CVCUDA_OUT_OF_MEMORY;
			break;
		case cudaErrorIllegalAddress:
		case cudaErrorLaunchFailure:
		case cudaErrorHardwareStackError:
		case cudaErrorIllegalInstruction:
		case cudaErrorMisalignedAddress:
		case cudaErrorInvalidPc:
		case cudaErrorECCUncorrectable:
			status = CVCUDA_STICKY_ERROR;
			break;
		default:
			status = CVCUDA_INTERNAL;
			break;
	}
	if (err)
	{
		err->status = status;
		err->cuda_code = (int) code;
		snprintf(err->message, sizeof(err->message), "%s: %s", what,
				 cudaGetErrorString(code));
	}
	return status;
}

static CvCudaStatus
record_ok(CvCudaError *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
	return CVCUDA_OK;
}

__global__ static void
ping_kernel(float *out, int n, float scale)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = (float) i * scale;
}

extern "C" int
cvcuda_abi_version(void)
{
	return CVCUDA_ABI_VERSION;
}

extern "C" CvCudaStatus
cvcuda_device_info(int device, CvCudaDeviceInfo *info, CvCudaError *err)
{
	cudaDeviceProp prop;
	cudaError_t code;
	int			count = 0;

	if (info == NULL)
	{
		if (err)
		{
			err->status = CVCUDA_INVALID_ARGUMENT;
			err->cuda_code = 0;
			snprintf(err->message, sizeof(err->message), "info must not be NULL");
		}
		return CVCUDA_INVALID_ARGUMENT;
	}
	memset(info, 0, sizeof(*info));
	code = cudaGetDeviceCount(&count);
	if (code != cudaSuccess)
		return record_cuda_error(code, "cudaGetDeviceCount", err);
	info->device_count = count;
	if (device < 0 || device >= count)
		return record_cuda_error(cudaErrorInvalidDevice, "device index", err);
	code = cudaGetDeviceProperties(&prop, device);
	if (code != cudaSuccess)
		return record_cuda_error(code, "cudaGetDeviceProperties", err);
	info->compute_major = prop.major;
	info->compute_minor = prop.minor;
	info->multiprocessors = prop.multiProcessorCount;
	info->total_memory = prop.totalGlobalMem;
	snprintf(info->name, sizeof(info->name), "%s", prop.name);
	return record_ok(err);
}

extern "C" CvCudaStatus
cvcuda_ping(int device, int n, float scale, float *out, CvCudaError *err)
{
	float	   *d_out = NULL;
	cudaError_t code;
	const int	threads = 256;

	if (n <= 0 || out == NULL)
	{
		if (err)
		{
			err->status = CVCUDA_INVALID_ARGUMENT;
			err->cuda_code = 0;
			snprintf(err->message, sizeof(err->message),
					 "ping needs n > 0 and an output buffer");
		}
		return CVCUDA_INVALID_ARGUMENT;
	}
	if ((code = cudaSetDevice(device)) != cudaSuccess)
		return record_cuda_error(code, "cudaSetDevice", err);
	if ((code = cudaMalloc(&d_out, sizeof(float) * (size_t) n)) != cudaSuccess)
		return record_cuda_error(code, "cudaMalloc", err);
	ping_kernel<<<(n + threads - 1) / threads, threads>>>(d_out, n, scale);
	code = cudaGetLastError();
	if (code == cudaSuccess)
		code = cudaMemcpy(out, d_out, sizeof(float) * (size_t) n,
						  cudaMemcpyDeviceToHost);
	cudaFree(d_out);
	if (code != cudaSuccess)
		return record_cuda_error(code, "ping kernel", err);
	return record_ok(err);
}
