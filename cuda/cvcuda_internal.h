/*
 * cvcuda_internal.h: what both implementations of clustervec_cuda.h share,
 * so that they cannot drift apart: the error record helpers, the argument
 * checks (same statuses, same messages) and the sort key of a distance.
 *
 * Plain C99 that also compiles as CUDA C++ (the key functions are then
 * __host__ __device__).  Internal: include from cuda/ only.
 */
#ifndef CVCUDA_INTERNAL_H
#define CVCUDA_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clustervec_cuda.h"

#ifdef __CUDACC__
#define CVCUDA_HD __host__ __device__ __forceinline__
#else
#define CVCUDA_HD static inline
#endif

/*
 * A buffer of either library: data is device memory in clustervec_cuda.so
 * and host memory in the CPU shim.
 */
struct CvCudaBuffer
{
	void	   *data;
	size_t		bytes;
};

/* The key of an empty result slot: after every real distance, NaN included. */
#define CVCUDA_KEY_NONE UINT64_MAX

/* The quiet NaN every NaN distance is reported as. */
#define CVCUDA_KEY_NAN UINT64_C(0x7ff8000000000000)

/*
 * The sort key of a distance: its bit pattern, which orders non-negative
 * doubles as numbers (and +inf after them), with every NaN made the one quiet
 * NaN (above +inf) and -0 made +0.  Distances are sqrt of sums of squares, so
 * nothing else occurs.  Sorting keys as unsigned integers is then a total
 * order that both libraries and their tests share.
 */
CVCUDA_HD uint64_t
cvcuda_distance_key(double distance)
{
	uint64_t	bits;

	if (distance != distance)
		return CVCUDA_KEY_NAN;
	if (distance == 0.0)
		return 0;
	memcpy(&bits, &distance, sizeof(bits));
	return bits;
}

/* The distance of a key; CVCUDA_KEY_NONE (an empty slot) gives +inf. */
CVCUDA_HD double
cvcuda_key_distance(uint64_t key)
{
	double		distance;

	if (key == CVCUDA_KEY_NONE)
		key = UINT64_C(0x7ff0000000000000);
	memcpy(&distance, &key, sizeof(distance));
	return distance;
}

/* Fills the error record (when there is one) and returns the status. */
static inline CvCudaStatus
cvcuda_set_error(CvCudaError *err, CvCudaStatus status, int cuda_code,
				 const char *format,...)
#ifdef __GNUC__
			__attribute__((format(printf, 4, 5)))
#endif
			;

static inline CvCudaStatus
cvcuda_set_error(CvCudaError *err, CvCudaStatus status, int cuda_code,
				 const char *format,...)
{
	va_list		args;

	if (err == NULL)
		return status;
	err->status = (int) status;
	err->cuda_code = cuda_code;
	va_start(args, format);
	vsnprintf(err->message, sizeof(err->message), format, args);
	va_end(args);
	return status;
}

/* Clears the error record: the call succeeded. */
static inline CvCudaStatus
cvcuda_set_ok(CvCudaError *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
	return CVCUDA_OK;
}

/* Checks that [offset, offset + bytes) lies inside the buffer and host is given. */
static inline CvCudaStatus
cvcuda_check_buffer_range(const CvCudaBuffer *buffer, size_t offset, size_t bytes,
						  const void *host, const char *what, CvCudaError *err)
{
	if (buffer == NULL || (bytes > 0 && host == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: buffer and host pointer must not be NULL", what);
	if (offset > buffer->bytes || bytes > buffer->bytes - offset)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: %zu bytes at offset %zu exceed the buffer's %zu bytes",
								what, bytes, offset, buffer->bytes);
	return CVCUDA_OK;
}

/* Checks cvcuda_knn_exact's arguments; CVCUDA_OK when they are well formed. */
static inline CvCudaStatus
cvcuda_check_knn_args(const float *base, long long rows, int dims,
					  const float *queries, int nq, int k,
					  const long long *out_index, const double *out_distance,
					  CvCudaError *err)
{
	if (rows < 0 || nq < 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: rows (%lld) and nq (%d) must not be negative",
								rows, nq);
	if (dims < 1 || dims > CVCUDA_KNN_MAX_DIMS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: dims (%d) must be between 1 and %d",
								dims, CVCUDA_KNN_MAX_DIMS);
	if (k < 1 || k > CVCUDA_KNN_MAX_K)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: k (%d) must be between 1 and %d",
								k, CVCUDA_KNN_MAX_K);
	if ((unsigned long long) rows > (unsigned long long) (SIZE_MAX / sizeof(float)) / (unsigned) dims)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: %lld rows of %d dimensions overflow the address space",
								rows, dims);
	if (rows > 0 && base == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: base must not be NULL");
	if (nq > 0 && (queries == NULL || out_index == NULL || out_distance == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: queries, out_index and out_distance must not be NULL");
	return CVCUDA_OK;
}

/* Fills every result slot of nq queries with the empty result (-1, +inf). */
static inline void
cvcuda_fill_empty(int nq, int k, long long *out_index, double *out_distance)
{
	for (long long i = 0; i < (long long) nq * k; i++)
	{
		out_index[i] = -1;
		out_distance[i] = cvcuda_key_distance(CVCUDA_KEY_NONE);
	}
}

/* Checks cvcuda_echo's arguments. */
static inline CvCudaStatus
cvcuda_check_echo_args(const void *buffer, size_t bytes, CvCudaError *err)
{
	if (bytes > 0 && buffer == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"echo: buffer must not be NULL when bytes > 0");
	return CVCUDA_OK;
}

/* Checks cvcuda_host_register's (bytes > 0) and cvcuda_host_unregister's arguments. */
static inline CvCudaStatus
cvcuda_check_host_args(const void *ptr, size_t bytes, int registering, CvCudaError *err)
{
	if (ptr == NULL || (registering && bytes == 0))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"host_%s: %s", registering ? "register" : "unregister",
								registering ? "needs a pointer and bytes > 0" : "needs a pointer");
	return CVCUDA_OK;
}

/* Checks cvcuda_memory_info's arguments. */
static inline CvCudaStatus
cvcuda_check_memory_args(const unsigned long long *free_bytes,
						 const unsigned long long *total_bytes, CvCudaError *err)
{
	if (free_bytes == NULL || total_bytes == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"memory_info: free_bytes and total_bytes must not be NULL");
	return CVCUDA_OK;
}

/* Checks cvcuda_ping's arguments. */
static inline CvCudaStatus
cvcuda_check_ping_args(int n, const float *out, CvCudaError *err)
{
	if (n <= 0 || out == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ping needs n > 0 and an output buffer");
	return CVCUDA_OK;
}

#endif
