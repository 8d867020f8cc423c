/*
 * client.c: a backend's side of the protocol.  A request borrows a slot and
 * (for a payload) a staging buffer, is submitted, and waited for on the
 * backend's latch with interrupts handled and the worker's liveness checked
 * on every wake-up, so no wait can hang.  An interrupted request is
 * abandoned: whichever side finishes last returns its slot and buffer.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/timestamp.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "gpu/request.h"

#define WAIT_POLL_MS 100

static dsm_segment *staging = NULL;
static dsm_handle staging_handle = DSM_HANDLE_INVALID;
static bool exit_hook_installed = false;

bool
cv_gpu_worker_ready(void)
{
	return cv_gpu_shared != NULL && cv_gpu_shared->worker_state == CV_WORKER_READY;
}

/* Routing: off never, auto when the worker is ready, require always (or ERROR). */
bool
cv_gpu_should_use(void)
{
	if (cv_gpu_mode == CV_GPU_OFF)
		return false;
	if (cv_gpu_worker_ready())
		return true;
	if (cv_gpu_mode == CV_GPU_REQUIRE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("clustervec.gpu is \"require\" but the GPU worker is not ready"),
				 errdetail("%s", cv_gpu_shared == NULL ?
						   "clustervec is not in shared_preload_libraries." :
						   cv_gpu_shared->reason),
				 errhint("Set clustervec.gpu to \"auto\" to run on the CPU instead.")));
	return false;
}

void
cv_gpu_count_served(CvGpuServed what)
{
	if (cv_gpu_shared == NULL)
		return;
	switch (what)
	{
		case CV_GPU_SERVED_SEARCH:
			pg_atomic_fetch_add_u64(&cv_gpu_shared->search_gpu_calls, 1);
			break;
		case CV_GPU_SERVED_BUILD:
			pg_atomic_fetch_add_u64(&cv_gpu_shared->build_gpu_calls, 1);
			break;
		case CV_GPU_SERVED_HEALTH:
			pg_atomic_fetch_add_u64(&cv_gpu_shared->health_gpu_calls, 1);
			break;
	}
}

uint64
cv_gpu_device_free_bytes(void)
{
	uint64		free_bytes;

	if (cv_gpu_shared == NULL)
		return 0;
	SpinLockAcquire(&cv_gpu_shared->mutex);
	free_bytes = cv_gpu_shared->memory_free;
	SpinLockRelease(&cv_gpu_shared->mutex);
	return free_bytes;
}

void
cv_gpu_set_error(CvGpuError *error, int code, const char *message)
{
	error->code = code;
	strlcpy(error->message, message, CV_GPU_ERROR_LEN);
}

void
cv_gpu_count_fallback(void)
{
	if (cv_gpu_shared != NULL)
		pg_atomic_fetch_add_u64(&cv_gpu_shared->cpu_fallbacks, 1);
}

void
cv_gpu_fall_back(const char *what, const CvGpuError *error)
{
	if (cv_gpu_mode == CV_GPU_REQUIRE)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("the GPU worker failed %s: %s", what, error->message)));
	cv_gpu_count_fallback();
}

/* Returns every slot this backend holds when it exits mid-request (FATAL, terminate). */
static void
abandon_all_on_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	SpinLockAcquire(&cv_gpu_shared->mutex);
	for (int i = 0; i < CV_GPU_SLOTS; i++)
	{
		CvGpuSlot  *slot = &cv_gpu_shared->slots[i];

		if (slot->owner_procno != MyProc->pgprocno || slot->state == CV_SLOT_FREE)
			continue;
		if (slot->state == CV_SLOT_RUNNING)
		{
			slot->state = CV_SLOT_ABANDONED;
			slot->abandoned_at = GetCurrentTimestamp();
		}
		else if (slot->state != CV_SLOT_ABANDONED)
		{
			if (slot->staging >= 0)
				cv_gpu_shared->staging_in_use &= ~(1U << slot->staging);
			slot->state = CV_SLOT_FREE;
		}
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
}

/* Maps the worker's current staging segment (once per worker generation). */
static char *
staging_base(dsm_handle handle)
{
	if (staging != NULL && staging_handle != handle)
	{
		dsm_detach(staging);
		staging = NULL;
	}
	if (staging == NULL)
	{
		staging = dsm_attach(handle);
		if (staging == NULL)
			return NULL;
		dsm_pin_mapping(staging);
		staging_handle = handle;
	}
	return dsm_segment_address(staging);
}

/* Claims a free slot and, if wanted, a staging buffer; false when none is free now. */
static bool
claim(CvGpuRequest *request, int opcode, bool with_payload, dsm_handle *handle)
{
	bool		claimed = false;

	SpinLockAcquire(&cv_gpu_shared->mutex);
	for (int i = 0; i < CV_GPU_SLOTS && !claimed; i++)
	{
		CvGpuSlot  *slot = &cv_gpu_shared->slots[i];
		int			buffer = -1;

		if (slot->state != CV_SLOT_FREE)
			continue;
		if (with_payload)
		{
			for (int b = 0; b < CV_GPU_STAGING_BUFFERS && buffer < 0; b++)
				if (!(cv_gpu_shared->staging_in_use & (1U << b)))
					buffer = b;
			if (buffer < 0)
				break;
			cv_gpu_shared->staging_in_use |= 1U << buffer;
		}
		memset(slot, 0, sizeof(CvGpuSlot));
		slot->state = CV_SLOT_CLAIMED;
		slot->owner_procno = MyProc->pgprocno;
		slot->owner_pid = MyProcPid;
		slot->opcode = opcode;
		slot->staging = buffer;
		slot->request_id = ++cv_gpu_shared->next_request_id;
		slot->generation = cv_gpu_shared->worker_generation;
		request->slot = i;
		request->staging = buffer;
		claimed = true;
	}
	*handle = cv_gpu_shared->staging_handle;
	SpinLockRelease(&cv_gpu_shared->mutex);
	return claimed;
}

/* Whether a bounded request has waited past its bound. */
static bool
waited_too_long(const CvGpuRequest *request)
{
	return request->max_wait_ms > 0 &&
		TimestampDifferenceExceeds(request->since, GetCurrentTimestamp(), request->max_wait_ms);
}

static bool
give_up_busy(CvGpuRequest *request, CvGpuError *error)
{
	request->slot = -1;
	pg_atomic_fetch_add_u64(&cv_gpu_shared->busy_fallbacks, 1);
	cv_gpu_set_error(error, CV_GPU_ERR_BUSY,
					 "the GPU worker stayed busy longer than clustervec.gpu_max_wait");
	return false;
}

static bool begin(CvGpuRequest *request, int opcode, bool with_payload, int max_wait_ms,
				  CvGpuError *error);

bool
cv_gpu_begin_search(CvGpuRequest *request, int opcode, bool with_payload, CvGpuError *error)
{
	return begin(request, opcode, with_payload,
				 cv_gpu_mode == CV_GPU_AUTO ? cv_gpu_max_wait_ms : 0, error);
}

bool
cv_gpu_begin(CvGpuRequest *request, int opcode, bool with_payload, CvGpuError *error)
{
	return begin(request, opcode, with_payload, 0, error);
}

/*
 * Borrows a slot (and a staging buffer when with_payload), waiting while
 * all are busy; request->payload points at the buffer.  False when the
 * worker went away meanwhile (the caller falls back or raises), or a
 * bounded request waited too long.
 */
static bool
begin(CvGpuRequest *request, int opcode, bool with_payload, int max_wait_ms,
	  CvGpuError *error)
{
	dsm_handle	handle;

	if (!exit_hook_installed)
	{
		before_shmem_exit(abandon_all_on_exit, (Datum) 0);
		exit_hook_installed = true;
	}
	request->max_wait_ms = max_wait_ms;
	request->since = GetCurrentTimestamp();
	while (!claim(request, opcode, with_payload, &handle))
	{
		if (waited_too_long(request))
			return give_up_busy(request, error);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	request->payload = NULL;
	request->capacity = 0;
	if (request->staging >= 0)
	{
		/* the worker may have exited since it was seen ready: no staging area then */
		char	   *base = handle == DSM_HANDLE_INVALID ? NULL : staging_base(handle);

		if (base == NULL)
		{
			cv_gpu_end(request);
			cv_gpu_set_error(error, CV_GPU_ERR_WORKER_EXITED, "the clustervec GPU worker exited");
			return false;
		}
		request->payload = base + (Size) request->staging * CV_GPU_STAGING_BYTES;
		request->capacity = CV_GPU_STAGING_BYTES;
	}
	return true;
}

void
cv_gpu_results(const CvGpuRequest *request, int64 *result)
{
	memcpy(result, cv_gpu_shared->slots[request->slot].result, sizeof(int64) * 2);
}

/* Returns the slot and buffer, or leaves them to the worker if it still runs the request. */
void
cv_gpu_end(CvGpuRequest *request)
{
	CvGpuSlot  *slot;

	if (request->slot < 0)
		return;
	slot = &cv_gpu_shared->slots[request->slot];
	SpinLockAcquire(&cv_gpu_shared->mutex);
	if (slot->state == CV_SLOT_RUNNING)
	{
		/* the worker stops it at its next step (cvcuda_set_stop_check) */
		slot->state = CV_SLOT_ABANDONED;
		slot->abandoned_at = GetCurrentTimestamp();
	}
	else if (slot->state != CV_SLOT_FREE && slot->state != CV_SLOT_ABANDONED)
	{
		if (slot->staging >= 0)
			cv_gpu_shared->staging_in_use &= ~(1U << slot->staging);
		slot->state = CV_SLOT_FREE;
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	request->slot = -1;
}

/* The slot's state, and whether the worker serving it is gone. */
static CvGpuSlotState
poll_slot(const CvGpuSlot *slot, uint64 generation, bool *worker_gone)
{
	CvGpuSlotState state;

	SpinLockAcquire(&cv_gpu_shared->mutex);
	state = slot->state;
	*worker_gone = cv_gpu_shared->worker_generation != generation ||
		cv_gpu_shared->worker_state != CV_WORKER_READY;
	SpinLockRelease(&cv_gpu_shared->mutex);
	return state;
}

/* Takes back a request the worker has not started; false when it has. */
static bool
withdraw(CvGpuRequest *request)
{
	CvGpuSlot  *slot = &cv_gpu_shared->slots[request->slot];
	bool		withdrawn = false;

	SpinLockAcquire(&cv_gpu_shared->mutex);
	if (slot->state == CV_SLOT_SUBMITTED)
	{
		if (slot->staging >= 0)
			cv_gpu_shared->staging_in_use &= ~(1U << slot->staging);
		slot->state = CV_SLOT_FREE;
		withdrawn = true;
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	return withdrawn;
}

/*
 * Waits for the answer; an ERROR (cancel, timeout) abandons the request on
 * the way out.  A bounded request still queued past its bound is taken
 * back (*error: CV_GPU_ERR_BUSY, request->slot -1).
 */
static void
wait_for_answer(CvGpuRequest *request, uint64 generation, CvGpuError *error)
{
	CvGpuSlot  *slot = &cv_gpu_shared->slots[request->slot];

	PG_TRY();
	{
		for (;;)
		{
			bool		gone;
			CvGpuSlotState state = poll_slot(slot, generation, &gone);

			if (state == CV_SLOT_DONE)
			{
				*error = slot->error;
				break;
			}
			if (state == CV_SLOT_SUBMITTED && waited_too_long(request) && withdraw(request))
			{
				(void) give_up_busy(request, error);
				break;
			}
			if (gone && poll_slot(slot, generation, &gone) != CV_SLOT_DONE)
			{
				cv_gpu_set_error(error, CV_GPU_ERR_WORKER_EXITED,
								 "the clustervec GPU worker is gone");
				break;
			}
			/* a bounded request in the queue looks again every millisecond */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 request->max_wait_ms > 0 && state == CV_SLOT_SUBMITTED ?
							 1 : WAIT_POLL_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		cv_gpu_end(request);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * Submits the borrowed request and waits.  Returns true when the worker
 * answered without error; otherwise *error says why (the caller falls back
 * to the CPU under "auto" or raises it under "require").
 */
bool
cv_gpu_run(CvGpuRequest *request, const int64 *args, int nargs, Size payload_bytes,
		   CvGpuError *error, double *elapsed_us)
{
	CvGpuSlot  *slot = &cv_gpu_shared->slots[request->slot];
	uint64		generation;
	int			worker;

	memset(error, 0, sizeof(*error));
	SpinLockAcquire(&cv_gpu_shared->mutex);
	for (int i = 0; i < nargs; i++)
		slot->args[i] = args[i];
	slot->payload_bytes = payload_bytes;
	slot->submitted_at = GetCurrentTimestamp();
	slot->state = CV_SLOT_SUBMITTED;
	generation = cv_gpu_shared->worker_generation;
	worker = cv_gpu_shared->worker_procno;
	SpinLockRelease(&cv_gpu_shared->mutex);
	if (worker >= 0)
		SetLatch(&ProcGlobal->allProcs[worker].procLatch);
	wait_for_answer(request, generation, error);
	if (elapsed_us && request->slot >= 0)
		*elapsed_us = slot->elapsed_us;
	if (error->code == 0)
		pg_atomic_fetch_add_u64(&cv_gpu_shared->gpu_requests, 1);
	return error->code == 0;
}
