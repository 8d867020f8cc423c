/*
 * worker.c: the clustervec GPU worker, the one process that touches CUDA.
 *
 * It attaches to shared catalogs only, opens clustervec.gpu_library with
 * dlopen (all signals blocked around dlopen and context creation, so CUDA's
 * threads never run PostgreSQL's handlers), creates the staging DSM segment
 * and registers it with the driver once, then serves the request ring.  A
 * missing library, driver or device leaves it up and "unavailable".  A bad
 * request fails that request only; a sticky CUDA error fails the requests in
 * flight and exits with proc_exit(1), and the postmaster restarts it.
 */
#include "postgres.h"

#include <dlfcn.h>
#include <signal.h>

#include "clustervec_cuda.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "worker/protocol.h"
#include "worker/worker.h"
#include "worker/library.h"

CudaLibrary cv_cuda;
static dsm_segment *staging_segment = NULL;

/* Publishes the worker's state and why, under the mutex. */
static void
set_state(CvGpuWorkerState state, const char *backend, const char *reason)
{
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_gpu_shared->worker_state = state;
	if (backend)
		strlcpy(cv_gpu_shared->backend, backend, sizeof(cv_gpu_shared->backend));
	if (reason)
		strlcpy(cv_gpu_shared->reason, reason, sizeof(cv_gpu_shared->reason));
	SpinLockRelease(&cv_gpu_shared->mutex);
}

static void
wake_owner(int procno)
{
	if (procno >= 0)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/* On any exit: fail what is in flight, so no backend waits for an answer. */
static void
fail_requests_on_exit(int code, Datum arg pg_attribute_unused())
{
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_gpu_shared->worker_state = CV_WORKER_EXITED;
	cv_gpu_shared->worker_procno = -1;
	cv_gpu_shared->worker_pid = 0;
	cv_gpu_shared->staging_handle = DSM_HANDLE_INVALID;
	/* the device memory goes with the process */
	memset(cv_gpu_shared->mirrors, 0, sizeof(cv_gpu_shared->mirrors));
	cv_gpu_shared->buffers_bytes = 0;
	cv_gpu_shared->buffers_count = 0;
	strlcpy(cv_gpu_shared->reason, "the GPU worker exited; the postmaster restarts it",
			sizeof(cv_gpu_shared->reason));
	for (int i = 0; i < CV_GPU_SLOTS; i++)
	{
		CvGpuSlot  *slot = &cv_gpu_shared->slots[i];

		if (slot->state == CV_SLOT_SUBMITTED || slot->state == CV_SLOT_RUNNING)
		{
			slot->state = CV_SLOT_DONE;
			slot->error.code = CV_GPU_ERR_WORKER_EXITED;
			snprintf(slot->error.message, CV_GPU_ERROR_LEN,
					 "the clustervec GPU worker exited with code %d during the request", code);
			wake_owner(slot->owner_procno);
		}
		else if (slot->state == CV_SLOT_ABANDONED)
		{
			if (slot->staging >= 0)
				cv_gpu_shared->staging_in_use &= ~(UINT64CONST(1) << slot->staging);
			slot->state = CV_SLOT_FREE;
		}
	}
	/* buffers of claimed and answered slots stay with their owners until they end */
	SpinLockRelease(&cv_gpu_shared->mutex);
}

/* '$libdir/name' -> pkglib_path/name.so, as the dynamic loader would read it. */
static char *
library_path(const char *setting)
{
	const char *rest = setting;
	char	   *path;

	if (strncmp(setting, "$libdir", 7) == 0)
		rest = setting + 7;
	path = rest == setting ? pstrdup(setting) : psprintf("%s%s", pkglib_path, rest);
	if (strchr(last_dir_separator(path) ? last_dir_separator(path) : path, '.') == NULL)
		path = psprintf("%s%s", path, DLSUFFIX);
	return path;
}

/* Fails requests that raced with the worker becoming unavailable. */
static void
fail_unavailable_requests(void)
{
	SpinLockAcquire(&cv_gpu_shared->mutex);
	for (int i = 0; i < CV_GPU_SLOTS; i++)
	{
		CvGpuSlot  *slot = &cv_gpu_shared->slots[i];

		if (slot->state == CV_SLOT_SUBMITTED)
		{
			slot->state = CV_SLOT_DONE;
			slot->error.code = CVCUDA_NO_DEVICE;
			strlcpy(slot->error.message, cv_gpu_shared->reason, CV_GPU_ERROR_LEN);
			wake_owner(slot->owner_procno);
		}
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
}

static void *
resolve(const char *name)
{
	void	   *symbol = dlsym(cv_cuda.handle, name);

	if (symbol == NULL)
		ereport(LOG, (errmsg("clustervec GPU library lacks %s", name)));
	return symbol;
}

/* dlopen and context creation with every signal blocked; returns a reason on failure. */
static char *
open_library(CvCudaDeviceInfo *info)
{
	sigset_t	all,
				old;
	char	   *path = library_path(cv_gpu_library);
	CvCudaError err = {0};
	CvCudaStatus status;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	cv_cuda.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (cv_cuda.handle == NULL)
	{
		sigprocmask(SIG_SETMASK, &old, NULL);
		return psprintf("cannot open %s: %s", path, dlerror());
	}
	cv_cuda.abi_version = resolve("cvcuda_abi_version");
	cv_cuda.backend_name = resolve("cvcuda_backend_name");
	cv_cuda.init = resolve("cvcuda_init");
	cv_cuda.memory_info = resolve("cvcuda_memory_info");
	cv_cuda.host_register = resolve("cvcuda_host_register");
	cv_cuda.echo = resolve("cvcuda_echo");
	cv_cuda.knn_exact = resolve("cvcuda_knn_exact");
	cv_cuda.buffer_alloc = resolve("cvcuda_buffer_alloc");
	cv_cuda.buffer_free = resolve("cvcuda_buffer_free");
	cv_cuda.buffer_write = resolve("cvcuda_buffer_write");
	cv_cuda.buffer_read = resolve("cvcuda_buffer_read");
	cv_cuda.health_centroid = resolve("cvcuda_health_centroid");
	cv_cuda.health_neighbour_table = resolve("cvcuda_health_neighbour_table");
	cv_cuda.health_members = resolve("cvcuda_health_members");
	cv_cuda.kmeans_refresh = resolve("cvcuda_kmeans_refresh");
	cv_cuda.kmeans_assign = resolve("cvcuda_kmeans_assign");
	cv_cuda.kmeans_lloyd = resolve("cvcuda_kmeans_lloyd");
	cv_cuda.ivf_search = resolve("cvcuda_ivf_search");
	cv_cuda.set_stop_check = resolve("cvcuda_set_stop_check");
	cv_cuda.list_observe = resolve("cvcuda_list_observe");
	cv_cuda.observed_reduce = resolve("cvcuda_observed_reduce");
	if (!cv_cuda.abi_version || !cv_cuda.backend_name || !cv_cuda.init ||
		!cv_cuda.memory_info || !cv_cuda.host_register || !cv_cuda.echo || !cv_cuda.knn_exact ||
		!cv_cuda.buffer_alloc || !cv_cuda.buffer_free || !cv_cuda.buffer_write ||
		!cv_cuda.buffer_read || !cv_cuda.health_centroid || !cv_cuda.health_neighbour_table ||
		!cv_cuda.health_members || !cv_cuda.kmeans_refresh || !cv_cuda.kmeans_assign ||
		!cv_cuda.kmeans_lloyd || !cv_cuda.ivf_search || !cv_cuda.set_stop_check ||
		!cv_cuda.list_observe || !cv_cuda.observed_reduce)
	{
		sigprocmask(SIG_SETMASK, &old, NULL);
		return psprintf("%s is not a clustervec GPU library of this version", path);
	}
	if (cv_cuda.abi_version() != CVCUDA_ABI_VERSION)
	{
		sigprocmask(SIG_SETMASK, &old, NULL);
		return psprintf("%s has ABI version %d, this build needs %d",
						path, cv_cuda.abi_version(), CVCUDA_ABI_VERSION);
	}
	status = cv_cuda.init(cv_gpu_device, info, &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (status != CVCUDA_OK)
		return psprintf("%s: %s", path, err.message);
	return NULL;
}

/* The staging area: one DSM segment, registered with the driver once. */
static char *
create_staging(void)
{
	Size		bytes = CV_GPU_STAGING_AREA_BYTES;
	CvCudaError err = {0};

	staging_segment = dsm_create(bytes, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (staging_segment == NULL)
		return pstrdup("no dynamic shared memory segment left for the staging area");
	dsm_pin_mapping(staging_segment);
	if (cv_cuda.host_register(dsm_segment_address(staging_segment), bytes, &err) != CVCUDA_OK)
		return psprintf("cannot register the staging area: %s", err.message);
	return NULL;
}

/* Publishes the device the worker serves. */
static void
publish_device(const CvCudaDeviceInfo *info)
{
	SpinLockAcquire(&cv_gpu_shared->mutex);
	strlcpy(cv_gpu_shared->device_name, info->name, sizeof(cv_gpu_shared->device_name));
	snprintf(cv_gpu_shared->compute_capability, sizeof(cv_gpu_shared->compute_capability),
			 "%d.%d", info->compute_major, info->compute_minor);
	cv_gpu_shared->memory_total = info->total_memory;
	cv_gpu_shared->staging_handle = dsm_segment_handle(staging_segment);
	cv_gpu_shared->staging_in_use = 0;
	SpinLockRelease(&cv_gpu_shared->mutex);
}

/* Publishes the device's free memory, at most once a second. */
static void
publish_free_memory(void)
{
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();
	unsigned long long free_bytes = 0,
				total_bytes = 0;
	CvCudaError err = {0};

	if (!TimestampDifferenceExceeds(last, now, 1000))
		return;
	last = now;
	if (cv_cuda.memory_info(&free_bytes, &total_bytes, &err) != CVCUDA_OK)
		return;
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_gpu_shared->memory_free = free_bytes;
	SpinLockRelease(&cv_gpu_shared->mutex);
}

/* Checks a request's sizes against its staging buffer; NULL when it is well formed. */
static const char *
check_knn_request(const CvGpuSlot *slot)
{
	int64		rows = slot->args[0],
				dims = slot->args[1],
				nq = slot->args[2],
				k = slot->args[3];
	double		bytes;

	if (rows < 0 || dims < 1 || nq < 1 || k < 1 || slot->staging < 0)
		return "k-NN request with invalid sizes";
	bytes = (double) (nq + rows) * dims * 4 + 8 + (double) nq * k * 16;
	if (bytes > CV_GPU_STAGING_BYTES ||
		cv_knn_request_bytes(nq, rows, dims, k) > CV_GPU_STAGING_BYTES)
		return "k-NN request larger than its staging buffer";
	return NULL;
}

char *
cv_worker_payload(const CvGpuSlot *slot)
{
	return slot->staging >= 0 && slot->staging < CV_GPU_ALL_BUFFERS ?
		(char *) dsm_segment_address(staging_segment) + cv_staging_offset(slot->staging) : NULL;
}

Size
cv_worker_payload_capacity(const CvGpuSlot *slot)
{
	return slot->staging >= 0 && slot->staging < CV_GPU_ALL_BUFFERS ?
		cv_staging_capacity(slot->staging) : 0;
}

/*
 * Whether the slot's payload fits its buffer, and a small buffer carries
 * only what may use one (every other handler assumes a large buffer).
 */
static const char *
check_payload(const CvGpuSlot *slot)
{
	if (slot->payload_bytes > cv_worker_payload_capacity(slot) &&
		(slot->payload_bytes > 0 || slot->staging >= 0))
		return "payload larger than its staging buffer";
	if (slot->staging >= CV_GPU_STAGING_BUFFERS && slot->opcode != CV_OP_MIRROR_SEARCH &&
		slot->opcode != CV_OP_MIRROR_LAYOUT)
		return "a small staging buffer for a request that needs a large one";
	return NULL;
}

/* Runs one request; fills the slot's error record. */
CvCudaStatus
cv_worker_execute(CvGpuSlot *slot)
{
	char	   *payload = cv_worker_payload(slot);
	CvCudaError err = {0};
	CvCudaStatus status = CVCUDA_INVALID_ARGUMENT;
	const char *bad = NULL;

	if (slot->generation != cv_gpu_shared->worker_generation)
	{
		/* its payload is in the staging area of a worker that is gone */
		slot->error.code = CV_GPU_ERR_WORKER_EXITED;
		strlcpy(slot->error.message, "the GPU worker restarted during the request",
				CV_GPU_ERROR_LEN);
		return CVCUDA_INVALID_ARGUMENT;
	}
	if ((bad = check_payload(slot)) != NULL)
		;
	else if (slot->opcode == CV_OP_PING)
	{
		if (slot->payload_bytes > 0 && (payload == NULL || slot->payload_bytes > CV_GPU_STAGING_BYTES))
			bad = "ping payload larger than its staging buffer";
		else
			status = cv_cuda.echo(payload, slot->payload_bytes, &err);
	}
	else if (slot->opcode == CV_OP_KNN_EXACT)
	{
		if ((bad = check_knn_request(slot)) == NULL)
		{
			int64		dims = slot->args[1],
						nq = slot->args[2],
						k = slot->args[3];
			float	   *queries = (float *) payload;
			float	   *base = queries + nq * dims;
			long long  *index = (long long *) (payload +
											   cv_knn_results_offset(nq, slot->args[0], dims));
			double	   *distance = (double *) (index + nq * k);

			status = cv_cuda.knn_exact(base, slot->args[0], dims, queries, nq, k,
									   index, distance, &err);
		}
	}
	else if (cv_worker_handles_mirror(slot->opcode))
		status = cv_worker_execute_mirror_op(slot, payload, &err, &bad);
	else if (cv_worker_handles(slot->opcode))
		status = cv_worker_execute_buffer_op(slot, payload, &err, &bad);
	else
		bad = "unknown opcode";
	if (bad)
	{
		slot->error.code = CV_GPU_ERR_BAD_REQUEST;
		strlcpy(slot->error.message, bad, CV_GPU_ERROR_LEN);
		return CVCUDA_INVALID_ARGUMENT;
	}
	slot->error.code = status;
	strlcpy(slot->error.message, status == CVCUDA_OK ? "" : err.message, CV_GPU_ERROR_LEN);
	return status;
}

/* The slots the library is working for now; it stops when all their owners gave up. */
static int	running[CV_GPU_SLOTS];
static int	running_count = 0;

/*
 * The library's stop check: the worker must exit, or every owner of the
 * running request gave up (cancel, statement_timeout, exit).  The slot
 * states are read without the lock: a stale read only delays the stop to
 * the next step.
 */
static int
stop_requested(void *arg pg_attribute_unused())
{
	if (ProcDiePending)
		return 1;
	for (int i = 0; i < running_count; i++)
		if (((volatile CvGpuSlot *) &cv_gpu_shared->slots[running[i]])->state != CV_SLOT_ABANDONED)
			return 0;
	return running_count > 0;
}

/* Requests that take one short step: searches and bookkeeping. */
static bool
is_quick(int opcode)
{
	return opcode == CV_OP_MIRROR_SEARCH || opcode == CV_OP_MIRROR_LAYOUT ||
		opcode == CV_OP_PING || opcode == CV_OP_BUFFER_ALLOC || opcode == CV_OP_BUFFER_FREE ||
		opcode == CV_OP_MIRROR_BEGIN || opcode == CV_OP_MIRROR_COMMIT ||
		opcode == CV_OP_MIRROR_DROP;
}

/* The oldest submitted request of the kind wanted (-1: none), under the mutex. */
static int
oldest_submitted(bool quick)
{
	int			found = -1;

	for (int i = 0; i < CV_GPU_SLOTS; i++)
	{
		const CvGpuSlot *slot = &cv_gpu_shared->slots[i];

		if (slot->state == CV_SLOT_SUBMITTED && is_quick(slot->opcode) == quick &&
			(found < 0 || slot->request_id < cv_gpu_shared->slots[found].request_id))
			found = i;
	}
	return found;
}

/*
 * Takes the next submitted request, or returns -1.  Quick requests go
 * first, but never twice in a row while a long one waits, so a search
 * waits for at most one step of a long operation, and a stream of searches
 * cannot starve one; within a kind, the oldest first.
 */
static int
take_request(void)
{
	static bool last_was_quick = false;
	int			quick,
				slow,
				taken;

	SpinLockAcquire(&cv_gpu_shared->mutex);
	quick = oldest_submitted(true);
	slow = oldest_submitted(false);
	taken = quick >= 0 && (slow < 0 || !last_was_quick) ? quick : slow;
	if (taken >= 0)
	{
		cv_gpu_shared->slots[taken].state = CV_SLOT_RUNNING;
		last_was_quick = taken == quick;
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	return taken;
}

/* Answers a request, or frees it when its owner gave up meanwhile. */
static void
finish_request(int i, double elapsed_us)
{
	CvGpuSlot  *slot = &cv_gpu_shared->slots[i];
	int			owner = -1;
	TimestampTz abandoned_at = 0;

	SpinLockAcquire(&cv_gpu_shared->mutex);
	slot->elapsed_us = elapsed_us;
	if (slot->state == CV_SLOT_ABANDONED)
	{
		if (slot->staging >= 0)
			cv_gpu_shared->staging_in_use &= ~(UINT64CONST(1) << slot->staging);
		slot->state = CV_SLOT_FREE;
		abandoned_at = slot->abandoned_at;
	}
	else
	{
		slot->state = CV_SLOT_DONE;
		owner = slot->owner_procno;
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	if (abandoned_at != 0 && slot->error.code == CVCUDA_STOPPED)
	{
		pg_atomic_fetch_add_u64(&cv_gpu_shared->stopped_requests, 1);
		pg_atomic_write_u64(&cv_gpu_shared->last_stop_us,
							(uint64) Max(0, GetCurrentTimestamp() - abandoned_at));
	}
	wake_owner(owner);
}

/* Runs the request in slot i, with the searches over the same mirror that wait beside it. */
static CvCudaStatus
run_request(int i)
{
	CvGpuSlot  *slot = &cv_gpu_shared->slots[i];
	CvCudaStatus status = CVCUDA_OK;

	running[0] = i;
	running_count = 1;
	if (slot->opcode == CV_OP_MIRROR_SEARCH && slot->generation == cv_gpu_shared->worker_generation)
	{
		running_count = cv_worker_join_searches(i, running + 1, CV_GPU_SLOTS - 1) + 1;
		status = cv_worker_search_batch(running, running_count);
	}
	else
		status = cv_worker_execute(slot);
	return status;
}

static void
serve_requests(void)
{
	int			i;

	while ((i = take_request()) >= 0)
	{
		instr_time	start,
					duration;
		CvCudaStatus status;

		INSTR_TIME_SET_CURRENT(start);
		status = run_request(i);
		INSTR_TIME_SET_CURRENT(duration);
		INSTR_TIME_SUBTRACT(duration, start);
		for (int r = 0; r < running_count; r++)
		{
			CvGpuSlot  *slot = &cv_gpu_shared->slots[running[r]];

			/* stopped for SIGTERM, not for its owner: say the worker is going */
			if (slot->error.code == CVCUDA_STOPPED && ProcDiePending)
			{
				slot->error.code = CV_GPU_ERR_WORKER_EXITED;
				strlcpy(slot->error.message,
						"the clustervec GPU worker exited during the request: it was asked to shut down",
						CV_GPU_ERROR_LEN);
			}
			finish_request(running[r], INSTR_TIME_GET_MICROSEC(duration));
		}
		running_count = 0;
		if (status == CVCUDA_STICKY_ERROR)
		{
			ereport(LOG,
					(errmsg("clustervec GPU worker exits after a sticky CUDA error: %s",
							cv_gpu_shared->slots[i].error.message)));
			proc_exit(1);
		}
		/* a steady stream of requests must not delay SIGTERM or a reload */
		CHECK_FOR_INTERRUPTS();
	}
}

/* Opens the library and the staging area; READY or UNAVAILABLE. */
static void
start_serving(void)
{
	CvCudaDeviceInfo info = {0};
	char	   *reason = open_library(&info);

	if (reason == NULL)
		reason = create_staging();
	if (reason != NULL)
	{
		ereport(LOG, (errmsg("clustervec GPU worker: GPU unavailable: %s", reason)));
		set_state(CV_WORKER_UNAVAILABLE, "unavailable", reason);
		return;
	}
	publish_device(&info);
	cv_cuda.set_stop_check(stop_requested, NULL);
	set_state(CV_WORKER_READY, cv_cuda.backend_name(), "");
	ereport(LOG, (errmsg("clustervec GPU worker ready: %s, %s (compute %d.%d)",
						 cv_cuda.backend_name(), info.name, info.compute_major,
						 info.compute_minor)));
}

void
cv_gpu_worker_main(Datum arg pg_attribute_unused())
{
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_gpu_shared->worker_procno = MyProc->pgprocno;
	cv_gpu_shared->worker_pid = MyProcPid;
	cv_gpu_shared->worker_generation++;
	cv_gpu_shared->worker_state = CV_WORKER_STARTING;
	memset(cv_gpu_shared->mirrors, 0, sizeof(cv_gpu_shared->mirrors));
	SpinLockRelease(&cv_gpu_shared->mutex);
	before_shmem_exit(fail_requests_on_exit, (Datum) 0);
	start_serving();
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (cv_gpu_shared->worker_state == CV_WORKER_READY)
		{
			serve_requests();
			cv_worker_sweep_buffers();
			publish_free_memory();
		}
		else
			fail_unavailable_requests();
	}
}
