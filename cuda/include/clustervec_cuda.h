/*
 * clustervec_cuda.h: the C boundary of clustervec_cuda.so.
 *
 * Only the GPU worker opens this library (dlopen), so backends never create
 * a CUDA context.  Every entry point returns a status and fills a fixed-size
 * error record; none aborts, throws or keeps a pointer it was handed.  No
 * PostgreSQL types cross it.
 */
#ifndef CLUSTERVEC_CUDA_H
#define CLUSTERVEC_CUDA_H

#ifdef __cplusplus
extern "C"
{
#endif

#define CVCUDA_ABI_VERSION 1
#define CVCUDA_ERROR_LEN 256

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
	int			compute_major;
	int			compute_minor;
	int			multiprocessors;
	unsigned long long total_memory;
	char		name[256];
} CvCudaDeviceInfo;

/* The ABI version the library was built with; the worker refuses a mismatch. */
int			cvcuda_abi_version(void);

/* Describes a device without leaving a context behind an error. */
CvCudaStatus cvcuda_device_info(int device, CvCudaDeviceInfo *info, CvCudaError *err);

/*
 * Runs a trivial kernel that writes out[i] = i * scale for i < n, copying the
 * result back: proves the library, the driver and the device work end to end.
 */
CvCudaStatus cvcuda_ping(int device, int n, float scale, float *out, CvCudaError *err);

#ifdef __cplusplus
}
#endif

#endif
