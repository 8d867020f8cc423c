/*
 * clustervec_cuda.h: the C boundary of the clustervec GPU library.
 *
 * Two libraries implement it: clustervec_cuda.so (CUDA, built where nvcc
 * exists) and clustervec_cuda_cpu.so (the same operations on the CPU with
 * src/math, built everywhere; a stand-in device for tests and for machines
 * without a GPU).  Only the GPU worker opens either (dlopen), so backends
 * never create a CUDA context.
 *
 * Every entry point returns a status and fills the error record (err may be
 * NULL); none aborts, throws or keeps a pointer it was handed.  No
 * PostgreSQL types cross it.  The library keeps one current device and one
 * stream per process and is not thread-safe: one thread (the worker) calls
 * it.
 */
#ifndef CLUSTERVEC_CUDA_H
#define CLUSTERVEC_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C"
{
#endif

#define CVCUDA_ABI_VERSION 2
#define CVCUDA_ERROR_LEN 256

/* Largest k cvcuda_knn_exact accepts. */
#define CVCUDA_KNN_MAX_K 1024

/* Largest number of dimensions cvcuda_knn_exact accepts. */
#define CVCUDA_KNN_MAX_DIMS (1 << 20)

typedef enum CvCudaStatus
{
	CVCUDA_OK = 0,
	CVCUDA_NO_DEVICE = 1,		/* no driver or no device: stay on the CPU */
	CVCUDA_INVALID_ARGUMENT = 2,	/* the request was wrong, the device is fine */
	CVCUDA_OUT_OF_MEMORY = 3,
	CVCUDA_STICKY_ERROR = 4,	/* the context is lost: the worker must exit */
	CVCUDA_INTERNAL = 5
} CvCudaStatus;

typedef struct CvCudaError
{
	int			status;			/* CvCudaStatus */
	int			cuda_code;		/* cudaError_t, 0 when none */
	char		message[CVCUDA_ERROR_LEN];
} CvCudaError;

typedef struct CvCudaDeviceInfo
{
	int			device_count;
	int			compute_major;	/* 0.0 for the CPU shim */
	int			compute_minor;
	int			multiprocessors;	/* the CPU shim: online CPUs */
	unsigned long long total_memory;
	char		name[256];		/* the CPU shim: "CPU shim" */
} CvCudaDeviceInfo;

/* The ABI version the library was built with; the worker refuses a mismatch. */
int			cvcuda_abi_version(void);

/* "cuda" or "cpu-shim": which implementation this library is. */
const char *cvcuda_backend_name(void);

/* Describes a device without leaving a context behind an error. */
CvCudaStatus cvcuda_device_info(int device, CvCudaDeviceInfo *info, CvCudaError *err);

/*
 * Selects the device and creates its context and the library's stream; fills
 * info when it is not NULL.  CVCUDA_NO_DEVICE when there is no driver or no
 * such device.  Call it first, and again only to change device (which
 * releases what the library held on the old one).  Without it the other
 * entry points use device 0.
 */
CvCudaStatus cvcuda_init(int device, CvCudaDeviceInfo *info, CvCudaError *err);

/* Free and total memory of the current device, in bytes. */
CvCudaStatus cvcuda_memory_info(unsigned long long *free_bytes,
								unsigned long long *total_bytes, CvCudaError *err);

/*
 * Page-locks host memory for fast copies (cudaHostRegister), once for the
 * staging area; undo with cvcuda_host_unregister.  The CPU shim checks the
 * arguments and does nothing else.
 */
CvCudaStatus cvcuda_host_register(void *ptr, size_t bytes, CvCudaError *err);
CvCudaStatus cvcuda_host_unregister(void *ptr, CvCudaError *err);

/*
 * Copies bytes from buffer to the device and back into buffer (the CPU shim:
 * memmove onto itself), then waits: the round trip of latency benchmarks.
 * bytes may be 0 (buffer may then be NULL): a bare synchronisation.  The
 * device buffer is kept between calls, so repeated echoes measure copies,
 * not allocation.
 */
CvCudaStatus cvcuda_echo(void *buffer, size_t bytes, CvCudaError *err);

/*
 * Exact k nearest neighbours in L2 distance.  base: rows x dims float4,
 * row-major; queries: nq x dims.  For each query q, writes the k nearest
 * rows to out_index[q * k + r] and their Euclidean distance to
 * out_distance[q * k + r], r = 0..k-1, ascending by distance, equal
 * distances by ascending row index; when rows < k the tail gets index -1
 * and distance +inf.
 *
 * The distance is bit for bit sqrt() of src/math's l2_squared (16 float64
 * lanes, element j in lane j % 16, each term (double) a - (double) b
 * squared and added as separate roundings, the fixed fold), so both
 * libraries and the CPU scan agree exactly.  Non-finite inputs give +inf or
 * NaN distances; NaN sorts after +inf and is reported as the quiet NaN
 * 0x7ff8000000000000.
 *
 * Needs rows >= 0, 1 <= dims <= CVCUDA_KNN_MAX_DIMS, nq >= 0,
 * 1 <= k <= CVCUDA_KNN_MAX_K, and non-NULL pointers (base may be NULL when
 * rows = 0; queries and the outputs when nq = 0).  After a failure the
 * outputs' contents are unspecified.  Host pointers need their types'
 * alignment and may lie in memory registered by cvcuda_host_register.
 */
CvCudaStatus cvcuda_knn_exact(const float *base, long long rows, int dims,
							  const float *queries, int nq, int k,
							  long long *out_index, double *out_distance,
							  CvCudaError *err);

/*
 * Writes out[i] = i * scale for i < n: on the device a trivial kernel whose
 * result is copied back, proving the library, the driver and the device work
 * end to end; the CPU shim computes it on the CPU.
 */
CvCudaStatus cvcuda_ping(int device, int n, float scale, float *out, CvCudaError *err);

#ifdef __cplusplus
}
#endif

#endif
