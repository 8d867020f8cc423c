/*
 * shmem.c: the GPU worker's shared memory and its registration.  PG 15
 * accepts shared-memory requests only in shmem_request_hook, so both hooks
 * are installed from _PG_init while shared_preload_libraries loads us.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "access/twophase.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "worker/protocol.h"
#include "worker/worker.h"

CvGpuShared *cv_gpu_shared = NULL;
CvGpuOwnerEpochs *cv_gpu_owner_epochs = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* One epoch per PGPROC (backends, auxiliary processes, prepared transactions). */
static int
owner_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size
owner_epochs_size(void)
{
	return offsetof(CvGpuOwnerEpochs, epoch) + sizeof(pg_atomic_uint64) * owner_count();
}

static void
request_shmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(CvGpuShared)));
	RequestAddinShmemSpace(MAXALIGN(owner_epochs_size()));
}

/* Formats the ring the first time; a crash-restart formats it anew. */
static void
startup_shmem(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	cv_gpu_shared = ShmemInitStruct("clustervec gpu worker", sizeof(CvGpuShared), &found);
	if (!found)
	{
		memset(cv_gpu_shared, 0, sizeof(CvGpuShared));
		cv_gpu_shared->magic = CV_GPU_MAGIC;
		cv_gpu_shared->version = CV_GPU_PROTOCOL_VERSION;
		SpinLockInit(&cv_gpu_shared->mutex);
		cv_gpu_shared->worker_state = CV_WORKER_NONE;
		cv_gpu_shared->worker_procno = -1;
		cv_gpu_shared->staging_handle = DSM_HANDLE_INVALID;
		strlcpy(cv_gpu_shared->reason, "the GPU worker has not started yet",
				sizeof(cv_gpu_shared->reason));
		pg_atomic_init_u64(&cv_gpu_shared->gpu_requests, 0);
		pg_atomic_init_u64(&cv_gpu_shared->cpu_fallbacks, 0);
		pg_atomic_init_u64(&cv_gpu_shared->health_gpu_calls, 0);
		pg_atomic_init_u64(&cv_gpu_shared->build_gpu_calls, 0);
		pg_atomic_init_u64(&cv_gpu_shared->search_gpu_calls, 0);
		pg_atomic_init_u64(&cv_gpu_shared->search_launches, 0);
		pg_atomic_init_u64(&cv_gpu_shared->search_requests, 0);
		pg_atomic_init_u64(&cv_gpu_shared->queue_wait_us, 0);
		pg_atomic_init_u64(&cv_gpu_shared->busy_fallbacks, 0);
		pg_atomic_init_u64(&cv_gpu_shared->stopped_requests, 0);
		pg_atomic_init_u64(&cv_gpu_shared->last_stop_us, 0);
	}
	cv_gpu_owner_epochs = ShmemInitStruct("clustervec gpu owner epochs", owner_epochs_size(), &found);
	if (!found)
	{
		cv_gpu_owner_epochs->count = owner_count();
		for (int i = 0; i < cv_gpu_owner_epochs->count; i++)
			pg_atomic_init_u64(&cv_gpu_owner_epochs->epoch[i], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Registers the worker; it starts once the server is consistent (standbys too). */
static void
register_worker(void)
{
	BackgroundWorker worker = {0};

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = CV_GPU_RESTART_SECONDS;
	strlcpy(worker.bgw_library_name, "clustervec", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "cv_gpu_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "clustervec gpu worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "clustervec gpu worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/* Called from _PG_init when preloaded. */
void
cv_gpu_preload(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = request_shmem;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = startup_shmem;
	register_worker();
}
