/*
 * protocol.h: what backends and the GPU worker share.  The ring of request
 * slots lives in the main shared memory, pointer-free (processes map it at
 * different addresses): offsets and pgprocno numbers, never pointers.  The
 * payload of a request lives in one of the staging buffers of a DSM segment
 * the worker creates at start and registers with the CUDA driver once.
 */
#ifndef CV_WORKER_PROTOCOL_H
#define CV_WORKER_PROTOCOL_H

#include "postgres.h"

#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/spin.h"

#define CV_GPU_MAGIC 0x43564750	/* "CVGP" */
#define CV_GPU_PROTOCOL_VERSION 1

#define CV_GPU_SLOTS 64
#define CV_GPU_STAGING_BUFFERS 8
#define CV_GPU_STAGING_BYTES ((Size) 16 * 1024 * 1024)
#define CV_GPU_ERROR_LEN 256
#define CV_GPU_PING_MAX_BYTES ((Size) 1024 * 1024 * 1024)

/* Slot states; a slot moves FREE -> CLAIMED -> SUBMITTED -> RUNNING -> DONE -> FREE. */
typedef enum CvGpuSlotState
{
	CV_SLOT_FREE = 0,
	CV_SLOT_CLAIMED,			/* borrowed by a backend, being filled */
	CV_SLOT_SUBMITTED,			/* filled by a backend, waiting for the worker */
	CV_SLOT_RUNNING,			/* taken by the worker */
	CV_SLOT_DONE,				/* answered (result or error), owner not yet back */
	CV_SLOT_ABANDONED			/* the owner gave up while the worker ran it */
} CvGpuSlotState;

typedef enum CvGpuOpcode
{
	CV_OP_PING = 1,				/* payload bytes travel to the device and back */
	CV_OP_KNN_EXACT = 2			/* one chunk of rows against a batch of queries */
} CvGpuOpcode;

/* Where the worker stands. */
typedef enum CvGpuWorkerState
{
	CV_WORKER_NONE = 0,			/* never started (not preloaded, or starting) */
	CV_WORKER_STARTING,
	CV_WORKER_READY,			/* library open, device context created */
	CV_WORKER_UNAVAILABLE,		/* up, but no library, driver or device */
	CV_WORKER_EXITED			/* gone; the postmaster restarts it */
} CvGpuWorkerState;

/* The fixed-size error record that crosses every boundary. */
typedef struct CvGpuError
{
	int			code;			/* 0: none; else a CvCudaStatus or CV_GPU_ERR_* */
	char		message[CV_GPU_ERROR_LEN];
} CvGpuError;

#define CV_GPU_ERR_WORKER_EXITED 100
#define CV_GPU_ERR_BAD_REQUEST 101

typedef struct CvGpuSlot
{
	CvGpuSlotState state;		/* under the shared mutex */
	uint64		request_id;
	uint64		generation;		/* the worker generation the slot was claimed under */
	int			owner_procno;	/* the backend's pgprocno, for its latch */
	int			opcode;
	int			staging;		/* staging buffer index, -1 for none */
	int64		args[6];		/* opcode-specific (sizes, counts) */
	Size		payload_bytes;
	double		elapsed_us;		/* the worker's time on the request */
	CvGpuError	error;
} CvGpuSlot;

typedef struct CvGpuShared
{
	uint32		magic;
	uint32		version;
	slock_t		mutex;			/* slots, staging map, worker fields */
	CvGpuWorkerState worker_state;
	int			worker_procno;	/* -1 when there is no worker */
	pid_t		worker_pid;
	uint64		worker_generation;	/* bumped at each worker start */
	char		backend[16];	/* "cuda", "cpu-shim", "unavailable" */
	char		reason[CV_GPU_ERROR_LEN];
	char		device_name[128];
	char		compute_capability[16];
	uint64		memory_total;
	uint64		memory_free;	/* refreshed by the worker while idle */
	dsm_handle	staging_handle;
	uint32		staging_in_use; /* bitmap over CV_GPU_STAGING_BUFFERS */
	uint64		next_request_id;
	pg_atomic_uint64 gpu_requests;
	pg_atomic_uint64 cpu_fallbacks;
	CvGpuSlot	slots[CV_GPU_SLOTS];
} CvGpuShared;

/*
 * Layout of a k-NN request's staging buffer: the nq queries, then the rows,
 * then (8-byte aligned) nq x k int64 indexes and nq x k float8 distances.
 */
static inline Size
cv_knn_results_offset(int64 nq, int64 rows, int64 dims)
{
	return TYPEALIGN(8, sizeof(float) * (Size) (nq + rows) * dims);
}

static inline Size
cv_knn_request_bytes(int64 nq, int64 rows, int64 dims, int64 k)
{
	return cv_knn_results_offset(nq, rows, dims) + 16 * (Size) nq * k;
}

/* shmem.c */
extern CvGpuShared *cv_gpu_shared;
extern void cv_gpu_request_shmem(void);
extern void cv_gpu_init_shmem(void);
extern void cv_gpu_register_worker(void);

#endif
