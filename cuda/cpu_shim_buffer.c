/*
 * cpu_shim_buffer.c: the CPU shim's device buffers, which are host memory.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_shim.h"

CVCUDA_API CvCudaStatus
cvcuda_buffer_alloc(size_t bytes, CvCudaBuffer **buffer, CvCudaError *err)
{
	CvCudaBuffer *made;

	if (buffer == NULL || bytes == 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"buffer_alloc: needs bytes > 0 and an output handle");
	made = malloc(sizeof(CvCudaBuffer));
	if (made == NULL)
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "buffer_alloc: out of host memory");
	/* 64-byte alignment, like cudaMalloc's 256, for any element type */
	made->data = aligned_alloc(64, (bytes + 63) & ~(size_t) 63);
	if (made->data == NULL)
	{
		free(made);
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0,
								"buffer_alloc: %zu bytes of host memory are not available", bytes);
	}
	made->bytes = bytes;
	made->version = 0;		/* the CPU library reads contents directly */
	*buffer = made;
	return cvcuda_set_ok(err);
}

CVCUDA_API void
cvcuda_buffer_free(CvCudaBuffer *buffer)
{
	if (buffer == NULL)
		return;
	free(buffer->data);
	free(buffer);
}

CVCUDA_API size_t
cvcuda_buffer_size(const CvCudaBuffer *buffer)
{
	return buffer ? buffer->bytes : 0;
}

CVCUDA_API CvCudaStatus
cvcuda_buffer_write(CvCudaBuffer *buffer, size_t offset, const void *src, size_t bytes,
					CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_buffer_range(buffer, offset, bytes, src,
													"buffer_write", err);

	if (status != CVCUDA_OK)
		return status;
	if (bytes > 0)
		memmove((char *) buffer->data + offset, src, bytes);
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_buffer_read(const CvCudaBuffer *buffer, size_t offset, void *dst, size_t bytes,
				   CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_buffer_range(buffer, offset, bytes, dst,
													"buffer_read", err);

	if (status != CVCUDA_OK)
		return status;
	if (bytes > 0)
		memmove(dst, (const char *) buffer->data + offset, bytes);
	return cvcuda_set_ok(err);
}
