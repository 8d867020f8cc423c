/*
 * buffers.c: a backend's device buffers in the GPU worker, and operations
 * over them.  Data larger than a staging buffer travels in chunks.  Every
 * function returns false (or 0) with *error filled when the worker failed
 * or went away: the caller then frees what it can and falls back to the
 * CPU path, or raises under clustervec.gpu = require.
 *
 * Buffers live until freed or until this backend's transaction ends: the
 * transaction callback bumps the backend's epoch and the worker frees
 * what the older epoch left behind.
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"

#include "gpu/request.h"

static bool callback_registered = false;
static bool allocated_in_transaction = false;

/* At every transaction end after an allocation: let the worker free what is left. */
static void
end_of_transaction(XactEvent event, void *arg pg_attribute_unused())
{
	int			worker;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	if (!allocated_in_transaction || cv_gpu_owner_epochs == NULL)
		return;
	allocated_in_transaction = false;
	pg_atomic_fetch_add_u64(&cv_gpu_owner_epochs->epoch[MyProc->pgprocno], 1);
	worker = cv_gpu_shared->worker_procno;
	if (worker >= 0)
		SetLatch(&ProcGlobal->allProcs[worker].procLatch);
}

/* Sends a borrowed request (in copied into its buffer), waits, reads the answer, returns it. */
static bool
exchange(CvGpuRequest *request, const int64 *args, int nargs, Size payload_bytes,
		 const void *in, void *out, Size out_bytes, int64 *result, CvGpuError *error)
{
	volatile bool ok = false;

	PG_TRY();
	{
		if (in != NULL && payload_bytes > 0)
			memcpy(request->payload, in, payload_bytes);
		ok = cv_gpu_run(request, args, nargs, payload_bytes, error, NULL);
		if (ok && out != NULL && out_bytes > 0)
			memcpy(out, request->payload, out_bytes);
		if (ok && result != NULL)
			cv_gpu_results(request, result);
	}
	PG_CATCH();
	{
		cv_gpu_end(request);
		PG_RE_THROW();
	}
	PG_END_TRY();
	cv_gpu_end(request);
	return ok;
}

bool
cv_gpu_request(int opcode, bool with_payload, const int64 *args, int nargs,
			   Size payload_bytes, const void *in, void *out, Size out_bytes,
			   int64 *result, CvGpuError *error)
{
	CvGpuRequest request;

	if (!cv_gpu_begin(&request, opcode, with_payload, error))
		return false;
	return exchange(&request, args, nargs, payload_bytes, in, out, out_bytes, result, error);
}

bool
cv_gpu_search_request(int opcode, const int64 *args, int nargs, Size payload_bytes,
					  const void *in, void *out, Size out_bytes, CvGpuError *error)
{
	CvGpuRequest request;

	if (!cv_gpu_begin_search(&request, opcode, Max(payload_bytes, out_bytes), error))
		return false;
	return exchange(&request, args, nargs, payload_bytes, in, out, out_bytes, NULL, error);
}

void
cv_gpu_note_allocation(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(end_of_transaction, NULL);
		callback_registered = true;
	}
	allocated_in_transaction = true;
}

uint64
cv_gpu_owner_epoch(void)
{
	return pg_atomic_read_u64(&cv_gpu_owner_epochs->epoch[MyProc->pgprocno]);
}

uint64
cv_gpu_alloc(Size bytes, CvGpuError *error)
{
	int64		args[2];
	int64		result[2] = {0, 0};

	cv_gpu_note_allocation();
	args[0] = (int64) bytes;
	args[1] = (int64) cv_gpu_owner_epoch();
	if (!cv_gpu_request(CV_OP_BUFFER_ALLOC, false, args, 2, 0, NULL, NULL, 0, result, error))
		return 0;
	return (uint64) result[0];
}

bool
cv_gpu_write(uint64 id, Size offset, const void *data, Size bytes, CvGpuError *error)
{
	for (Size done = 0; done < bytes;)
	{
		Size		chunk = Min(bytes - done, CV_GPU_STAGING_BYTES);
		int64		args[3] = {(int64) id, (int64) (offset + done), (int64) chunk};

		if (!cv_gpu_request(CV_OP_BUFFER_WRITE, true, args, 3, chunk,
							(const char *) data + done, NULL, 0, NULL, error))
			return false;
		done += chunk;
	}
	return true;
}

bool
cv_gpu_read(uint64 id, Size offset, void *data, Size bytes, CvGpuError *error)
{
	for (Size done = 0; done < bytes;)
	{
		Size		chunk = Min(bytes - done, CV_GPU_STAGING_BYTES);
		int64		args[3] = {(int64) id, (int64) (offset + done), (int64) chunk};

		if (!cv_gpu_request(CV_OP_BUFFER_READ, true, args, 3, chunk,
							NULL, (char *) data + done, chunk, NULL, error))
			return false;
		done += chunk;
	}
	return true;
}

uint64
cv_gpu_upload(const void *data, Size bytes, CvGpuError *error)
{
	uint64		id = cv_gpu_alloc(Max(bytes, 1), error);

	if (id != 0 && bytes > 0 && !cv_gpu_write(id, 0, data, bytes, error))
	{
		cv_gpu_free(id);
		return 0;
	}
	return id;
}

void
cv_gpu_free(uint64 id)
{
	CvGpuError	ignored;
	int64		args[1] = {(int64) id};

	/* a failure leaves it to the sweep at transaction end */
	if (id != 0)
		(void) cv_gpu_request(CV_OP_BUFFER_FREE, false, args, 1, 0, NULL, NULL, 0, NULL,
							  &ignored);
}

bool
cv_gpu_call(int opcode, void *args, Size args_bytes, const void *extra, Size extra_bytes,
			void *out_extra, Size out_bytes, CvGpuError *error)
{
	Size		head = MAXALIGN(args_bytes);
	CvGpuRequest request;
	volatile bool ok = false;

	if (Max(head + extra_bytes, head + out_bytes) > CV_GPU_STAGING_BYTES)
	{
		cv_gpu_set_error(error, CV_GPU_ERR_BAD_REQUEST, "GPU request larger than a staging buffer");
		return false;
	}
	if (!cv_gpu_begin(&request, opcode, true, error))
		return false;
	PG_TRY();
	{
		memcpy(request.payload, args, args_bytes);
		if (extra_bytes > 0)
			memcpy(request.payload + head, extra, extra_bytes);
		ok = cv_gpu_run(&request, NULL, 0, head + extra_bytes, error, NULL);
		if (ok)
		{
			memcpy(args, request.payload, args_bytes);
			if (out_bytes > 0)
				memcpy(out_extra, request.payload + head, out_bytes);
		}
	}
	PG_FINALLY();
	{
		cv_gpu_end(&request);
	}
	PG_END_TRY();
	return ok;
}
