/*
 * remote.h: device buffers a backend holds in the GPU worker, and the
 * operations over them (remote.c).  Ids are the worker's; 0 is none.
 */
#ifndef CV_WORKER_REMOTE_H
#define CV_WORKER_REMOTE_H

#include "worker/protocol.h"

/*
 * One request: nargs args, payload_bytes of `in` (NULL: none) copied into
 * the staging buffer (with_payload borrows one), out_bytes of it copied to
 * `out` afterwards, the slot's two results to result (may be NULL).  False
 * with *error when the worker failed or is gone.
 */
extern bool cv_gpu_request(int opcode, bool with_payload, const int64 *args, int nargs,
						   Size payload_bytes, const void *in, void *out, Size out_bytes,
						   int64 *result, CvGpuError *error);

/* Allocates bytes of device memory until freed or the transaction ends; 0 on failure. */
extern uint64 cv_gpu_alloc(Size bytes, CvGpuError *error);

/* Marks that this transaction owns worker memory, freed when it ends unless kept. */
extern void cv_gpu_note_allocation(void);

/* Copies host data into (out of) a buffer, in staging-sized chunks. */
extern bool cv_gpu_write(uint64 id, Size offset, const void *data, Size bytes,
						 CvGpuError *error);
extern bool cv_gpu_read(uint64 id, Size offset, void *data, Size bytes, CvGpuError *error);

/* A new buffer holding a copy of data (bytes may be 0); 0 on failure. */
extern uint64 cv_gpu_upload(const void *data, Size bytes, CvGpuError *error);

/* Frees a buffer now (0 allowed); failures leave it to the end of the transaction. */
extern void cv_gpu_free(uint64 id);

/*
 * Runs an operation whose arguments are the struct args (copied back
 * afterwards, for its outputs), followed in the payload by extra_bytes of
 * extra input; out_bytes of output are read from the same place.
 */
extern bool cv_gpu_call(int opcode, void *args, Size args_bytes, const void *extra,
						Size extra_bytes, void *out_extra, Size out_bytes, CvGpuError *error);

#endif
