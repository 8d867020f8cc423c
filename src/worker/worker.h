/*
 * worker.h: the GPU worker process and its settings.  Backends reach it
 * through src/gpu/ (gpu.h), never through this header.
 */
#ifndef CV_WORKER_WORKER_H
#define CV_WORKER_WORKER_H

#include "postgres.h"

#include "gpu/gpu.h"
#include "worker/protocol.h"

#define CV_GPU_RESTART_SECONDS 2

/* settings the worker reads (defined in src/gpu/sql.c, in every process) */
extern int	cv_gpu_device;
extern int	cv_gpu_memory_limit_mb;
extern char *cv_gpu_library;

/* The worker's entry point (a bgworker function). */
extern PGDLLEXPORT void cv_gpu_worker_main(Datum arg);

#endif
