/*
 * request.h: how src/gpu/ talks to the worker (client.c, buffers.c); not
 * for the rest of the backend, which calls gpu.h.
 */
#ifndef CV_GPU_REQUEST_H
#define CV_GPU_REQUEST_H

#include "postgres.h"

#include "gpu/gpu.h"
#include "worker/protocol.h"

/* client.c: one request from a backend */
typedef struct CvGpuRequest
{
	int			slot;
	int			staging;		/* -1 without payload */
	char	   *payload;		/* the staging buffer, mapped here */
	Size		capacity;
	int			max_wait_ms;	/* >0: give up when not taken by then (CV_GPU_ERR_BUSY) */
	TimestampTz since;			/* when the wait for a slot began */
} CvGpuRequest;

/*
 * Borrows a slot (and a staging buffer when with_payload), waiting while
 * all are busy; request->payload points at the buffer, where the caller
 * writes the arguments and later reads the answer.  False when the worker
 * went away meanwhile.
 */
extern bool cv_gpu_begin(CvGpuRequest *request, int opcode, bool with_payload,
						 CvGpuError *error);

/*
 * The same for a search or a layout request of payload_bytes (a small
 * staging buffer when they fit one): under clustervec.gpu = auto it gives
 * up with CV_GPU_ERR_BUSY (the caller runs on the CPU) when the worker has
 * not taken the request within clustervec.gpu_max_wait, from now on.
 */
extern bool cv_gpu_begin_search(CvGpuRequest *request, int opcode, Size payload_bytes,
								CvGpuError *error);
extern bool cv_gpu_run(CvGpuRequest *request, const int64 *args, int nargs,
					   Size payload_bytes, CvGpuError *error, double *elapsed_us);

/* The slot's two results after a served request. */
extern void cv_gpu_results(const CvGpuRequest *request, int64 *result);
extern void cv_gpu_end(CvGpuRequest *request);
extern void cv_gpu_set_error(CvGpuError *error, int code, const char *message);

/* buffers.c: device buffers and operations over them (ids are the worker's; 0 is none) */

/*
 * One request: nargs args, payload_bytes of `in` (NULL: none) copied into
 * the staging buffer (with_payload borrows one), out_bytes of it copied to
 * `out` afterwards, the slot's two results to result (may be NULL).
 */
extern bool cv_gpu_request(int opcode, bool with_payload, const int64 *args, int nargs,
						   Size payload_bytes, const void *in, void *out, Size out_bytes,
						   int64 *result, CvGpuError *error);

/* The same within the searches' wait bound (cv_gpu_begin_search), with no results. */
extern bool cv_gpu_search_request(int opcode, const int64 *args, int nargs,
								  Size payload_bytes, const void *in, void *out,
								  Size out_bytes, CvGpuError *error);

/* Marks that this transaction owns worker memory, freed when it ends unless kept. */
extern void cv_gpu_note_allocation(void);

/* This backend's current owner epoch (what the worker frees at transaction end). */
extern uint64 cv_gpu_owner_epoch(void);

extern uint64 cv_gpu_alloc(Size bytes, CvGpuError *error);
extern bool cv_gpu_write(uint64 id, Size offset, const void *data, Size bytes,
						 CvGpuError *error);
extern bool cv_gpu_read(uint64 id, Size offset, void *data, Size bytes, CvGpuError *error);

/* A new buffer holding a copy of data (bytes may be 0); 0 when not served. */
extern uint64 cv_gpu_upload(const void *data, Size bytes, CvGpuError *error);

/* Frees a buffer now (0 allowed); failures leave it to the end of the transaction. */
extern void cv_gpu_free(uint64 id);

/*
 * Runs an operation whose arguments are the struct args followed by
 * extra_bytes of extra input, written straight into the staging buffer;
 * args (for outputs) and out_bytes of output after them are read back.
 */
extern bool cv_gpu_call(int opcode, void *args, Size args_bytes, const void *extra,
						Size extra_bytes, void *out_extra, Size out_bytes, CvGpuError *error);

#endif
