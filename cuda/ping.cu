// ping.cu: a trivial kernel and its entry point, which prove the library,
// driver and device work end to end; the worker's first call.
#include "common.cuh"
#include "ping.cuh"

__global__ static void
ping_kernel(float *out, int n, float scale)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = (float) i * scale;
}

cudaError_t
cvcuda_launch_ping(float *d_out, int n, float scale, cudaStream_t stream)
{
	const int	threads = 256;

	ping_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(d_out, n, scale);
	return cvcuda_check_launch(stream);
}

// Runs the kernel on device (the current one stays current) and copies back.
static CvCudaStatus
ping_on(int device, int n, float scale, float *out, CvCudaError *err)
{
	DeviceArray<float> d_out;
	cudaStream_t stream;

	CVCUDA_TRY(cudaSetDevice(device), "cudaSetDevice", err);
	CVCUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", err);
	cudaError_t code = d_out.allocate((size_t) n);

	if (code == cudaSuccess)
		code = cvcuda_launch_ping(d_out.get(), n, scale, stream);
	if (code == cudaSuccess)
		code = cudaMemcpyAsync(out, d_out.get(), sizeof(float) * (size_t) n,
							   cudaMemcpyDeviceToHost, stream);
	if (code == cudaSuccess)
		code = cudaStreamSynchronize(stream);
	(void) cudaStreamDestroy(stream);
	if (code != cudaSuccess)
		return cvcuda_record_cuda_error(code, "ping kernel", err);
	return cvcuda_set_ok(err);
}

extern "C" CvCudaStatus
cvcuda_ping(int device, int n, float scale, float *out, CvCudaError *err)
{
	return cvcuda_guard("ping", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_ping_args(n, out, err);
		int			previous = 0;

		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(cudaGetDevice(&previous), "cudaGetDevice", err);
		status = ping_on(device, n, scale, out, err);
		(void) cudaSetDevice(previous);
		return status;
	});
}
