/*
 * worker.h: the GPU worker, its settings, and the backend-side client.
 */
#ifndef CV_WORKER_WORKER_H
#define CV_WORKER_WORKER_H

#include "postgres.h"

#include "worker/protocol.h"

#define CV_GPU_RESTART_SECONDS 2

/* clustervec.gpu */
#define CV_GPU_OFF 0
#define CV_GPU_AUTO 1
#define CV_GPU_REQUIRE 2

extern int	cv_gpu_mode;
extern int	cv_gpu_device;
extern int	cv_gpu_memory_limit_mb;
extern char *cv_gpu_library;

extern void cv_gpu_define_settings(void);
extern void cv_gpu_preload(void);

/* The worker's entry point (a bgworker function). */
extern PGDLLEXPORT void cv_gpu_worker_main(Datum arg);

/* client.c: one request from a backend */
typedef struct CvGpuRequest
{
	int			slot;
	int			staging;		/* -1 without payload */
	char	   *payload;		/* the staging buffer, mapped here */
	Size		capacity;
} CvGpuRequest;

/* Whether requests should go to the worker; raises the ERROR of "require" otherwise. */
extern bool cv_gpu_should_use(void);
extern bool cv_gpu_worker_ready(void);
extern bool cv_gpu_begin(CvGpuRequest *request, int opcode, bool with_payload);
extern bool cv_gpu_run(CvGpuRequest *request, const int64 *args, int nargs,
					   Size payload_bytes, CvGpuError *error, double *elapsed_us);
extern void cv_gpu_end(CvGpuRequest *request);
extern void cv_gpu_count_fallback(void);

/*
 * The worker failed a request for `what` ("cvsearch", ...): an ERROR under
 * clustervec.gpu = require, otherwise counted, and the caller goes on on
 * the CPU.
 */
extern void cv_gpu_fall_back(const char *what, const CvGpuError *error);

#endif
