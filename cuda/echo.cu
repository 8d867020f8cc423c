// echo.cu: a host -> device -> host round trip of a buffer, for latency and
// bandwidth benchmarks of the worker's request path.  No kernel: copies only.
#include "common.cuh"

extern "C" CvCudaStatus
cvcuda_echo(void *buffer, size_t bytes, CvCudaError *err)
{
	return cvcuda_guard("echo", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_echo_args(buffer, bytes, err);
		cudaStream_t stream;
		void	   *device_buffer = nullptr;

		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(cvcuda_stream(&stream), "cudaStreamCreate", err);
		if (bytes > 0)
		{
			CVCUDA_TRY(cvcuda_echo_buffer(bytes, &device_buffer), "cudaMalloc", err);
			CVCUDA_TRY(cudaMemcpyAsync(device_buffer, buffer, bytes, cudaMemcpyHostToDevice,
									   stream), "echo to device", err);
			CVCUDA_TRY(cudaMemcpyAsync(buffer, device_buffer, bytes, cudaMemcpyDeviceToHost,
									   stream), "echo to host", err);
		}
		CVCUDA_TRY(cudaStreamSynchronize(stream), "echo", err);
		return cvcuda_set_ok(err);
	});
}
