// buffer.cu: device buffers the worker holds between calls (uploads in
// chunks through the staging pool, results read back the same way).
#include <cstdlib>

#include "common.cuh"

// Versions of buffer contents: one thread calls the library.
static unsigned long long last_version = 0;

extern "C" CvCudaStatus
cvcuda_buffer_alloc(size_t bytes, CvCudaBuffer **buffer, CvCudaError *err)
{
	return cvcuda_guard("buffer_alloc", err, [&]() -> CvCudaStatus {
		if (buffer == nullptr || bytes == 0)
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"buffer_alloc: needs bytes > 0 and an output handle");
		CvCudaBuffer *made = static_cast<CvCudaBuffer *>(malloc(sizeof(CvCudaBuffer)));

		if (made == nullptr)
			return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "buffer_alloc: out of host memory");
		cudaError_t code = cudaMalloc(&made->data, bytes);

		if (code != cudaSuccess)
		{
			free(made);
			(void) cudaGetLastError();	// an allocation failure is not sticky
			return cvcuda_record_cuda_error(code, "buffer_alloc: cudaMalloc", err);
		}
		made->bytes = bytes;
		made->version = ++last_version;
		*buffer = made;
		return cvcuda_set_ok(err);
	});
}

extern "C" void
cvcuda_buffer_free(CvCudaBuffer *buffer)
{
	if (buffer == nullptr)
		return;
	(void) cudaFree(buffer->data);
	free(buffer);
}

extern "C" size_t
cvcuda_buffer_size(const CvCudaBuffer *buffer)
{
	return buffer ? buffer->bytes : 0;
}

extern "C" CvCudaStatus
cvcuda_buffer_write(CvCudaBuffer *buffer, size_t offset, const void *src, size_t bytes,
					CvCudaError *err)
{
	return cvcuda_guard("buffer_write", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_buffer_range(buffer, offset, bytes, src,
														"buffer_write", err);
		cudaStream_t stream;

		if (status != CVCUDA_OK)
			return status;
		if (bytes == 0)
			return cvcuda_set_ok(err);
		CVCUDA_TRY(cvcuda_stream(&stream), "buffer_write: stream", err);
		buffer->version = ++last_version;
		CVCUDA_TRY(cudaMemcpyAsync(static_cast<char *>(buffer->data) + offset, src, bytes,
								   cudaMemcpyHostToDevice, stream),
				   "buffer_write: copy", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "buffer_write: synchronize", err);
		return cvcuda_set_ok(err);
	});
}

extern "C" CvCudaStatus
cvcuda_buffer_read(const CvCudaBuffer *buffer, size_t offset, void *dst, size_t bytes,
				   CvCudaError *err)
{
	return cvcuda_guard("buffer_read", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_buffer_range(buffer, offset, bytes, dst,
														"buffer_read", err);
		cudaStream_t stream;

		if (status != CVCUDA_OK)
			return status;
		if (bytes == 0)
			return cvcuda_set_ok(err);
		CVCUDA_TRY(cvcuda_stream(&stream), "buffer_read: stream", err);
		CVCUDA_TRY(cudaMemcpyAsync(dst, static_cast<const char *>(buffer->data) + offset, bytes,
								   cudaMemcpyDeviceToHost, stream),
				   "buffer_read: copy", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "buffer_read: synchronize", err);
		return cvcuda_set_ok(err);
	});
}
