/*
 * library.h: the GPU library's entry points as the worker resolved them
 * (dlsym), shared by the worker's files.  Only the worker process uses it.
 */
#ifndef CV_WORKER_LIBRARY_H
#define CV_WORKER_LIBRARY_H

#include "clustervec_cuda.h"
#include "worker/protocol.h"

typedef struct CudaLibrary
{
	void	   *handle;
	int			(*abi_version) (void);
	const char *(*backend_name) (void);
	CvCudaStatus (*init) (int, CvCudaDeviceInfo *, CvCudaError *);
	CvCudaStatus (*memory_info) (unsigned long long *, unsigned long long *, CvCudaError *);
	CvCudaStatus (*host_register) (void *, size_t, CvCudaError *);
	CvCudaStatus (*echo) (void *, size_t, CvCudaError *);
	CvCudaStatus (*knn_exact) (const float *, long long, int, const float *, int, int,
							   long long *, double *, CvCudaError *);
	CvCudaStatus (*buffer_alloc) (size_t, CvCudaBuffer **, CvCudaError *);
	void		(*buffer_free) (CvCudaBuffer *);
	CvCudaStatus (*buffer_write) (CvCudaBuffer *, size_t, const void *, size_t, CvCudaError *);
	CvCudaStatus (*buffer_read) (const CvCudaBuffer *, size_t, void *, size_t, CvCudaError *);
	CvCudaStatus (*health_centroid) (const CvCudaBuffer *, const CvCudaBuffer *, long long, int,
									 const CvHealthParams *, CvCudaBuffer *, CvCudaBuffer *,
									 CvCudaError *);
	CvCudaStatus (*health_neighbour_table) (CvCudaCentroidSet *, CvCudaError *);
	CvCudaStatus (*health_members) (const CvCudaBuffer *, const CvCudaBuffer *, long long,
									long long, const CvCudaCentroidSet *,
									const CvHealthParams *, CvCudaBuffer *, CvCudaError *);
	CvCudaStatus (*kmeans_refresh) (const CvCudaBuffer *, long long, int, const float *, int,
									CvCudaBuffer *, CvCudaError *);
	CvCudaStatus (*kmeans_assign) (const CvCudaBuffer *, long long, int, const CvCudaBuffer *,
								   int, int, int, CvCudaBuffer *, CvCudaBuffer *, CvCudaError *);
	CvCudaStatus (*kmeans_lloyd) (const CvCudaBuffer *, long long, int, CvCudaBuffer *, int, int,
								  int, int, CvCudaBuffer *, double *, int *, double *,
								  CvCudaError *);
	CvCudaStatus (*ivf_search) (const CvCudaBuffer *, int, int, const CvCudaBuffer *,
								const CvCudaBuffer *, int, const float *, int, int, int,
								const int *, long long *, double *, int *, CvCudaError *);
	void		(*set_stop_check) (CvCudaStopCheck, void *);
	CvCudaStatus (*list_observe) (const CvCudaBuffer *, int, int, const CvCudaBuffer *,
								  const CvCudaBuffer *, int, const int *, int, CvCudaBuffer *,
								  CvCudaError *);
	CvCudaStatus (*observed_reduce) (const CvCudaBuffer *, const CvCudaBuffer *, int, double *,
									 CvCudaError *);
} CudaLibrary;

extern CudaLibrary cv_cuda;

/* worker.c: a slot's staging buffer (NULL: none), and running one request */
extern char *cv_worker_payload(const CvGpuSlot *slot);
extern Size cv_worker_payload_capacity(const CvGpuSlot *slot);
extern CvCudaStatus cv_worker_execute(CvGpuSlot *slot);

/* buffers.c: the worker's device buffers and the operations over them */
extern bool cv_worker_handles(int opcode);
extern CvCudaStatus cv_worker_execute_buffer_op(CvGpuSlot *slot, char *payload,
												CvCudaError *err, const char **bad);
extern void cv_worker_sweep_buffers(void);
extern void cv_worker_free_all_buffers(void);
extern Size cv_worker_held_bytes;	/* buffers and mirrors */
extern Size cv_worker_memory_limit(void);
extern bool cv_worker_owner_done(int procno, int pid, uint64 epoch);

/* mirror_store.c: the mirrors of indexes */
extern bool cv_worker_handles_mirror(int opcode);
extern CvCudaStatus cv_worker_execute_mirror_op(CvGpuSlot *slot, char *payload,
												CvCudaError *err, const char **bad);
extern bool cv_worker_make_room(Size bytes);

/*
 * mirror_observe.c: observed health of cvlattice mirrors (the side buffer
 * of each member's distance to its own centroid, and per-list counts).
 * Bytes a mirror of this key needs for it (0: not a cvlattice mirror);
 * begin allocates it beside mirror m, NaN-filled; means is the buffer
 * CV_MIRROR_PART_MEANS writes (NULL: none).
 */
extern Size cv_worker_observation_bytes(const CvGpuMirrorKey *key);
extern CvCudaStatus cv_worker_observation_begin(int m, const CvGpuMirrorKey *key,
												CvCudaError *err);
extern void cv_worker_observation_free(int m);
extern CvCudaBuffer *cv_worker_observation_means(int m);

/* After a search of nq queries over mirror m: count and observe their probed lists. */
extern void cv_worker_observe_search(int m, const CvGpuMirrorKey *key,
									 const CvCudaBuffer *vectors, const CvCudaBuffer *offsets,
									 const int32 *probed, int64 nq, int probes);
extern CvCudaStatus cv_worker_observed(int m, const CvGpuMirrorKey *key,
									   const CvCudaBuffer *offsets, const int64 *host_offsets,
									   char *payload, Size capacity, CvCudaError *err,
									   const char **bad);
extern CvCudaStatus cv_worker_observed_reset(int m, const CvGpuMirrorKey *key,
											 CvCudaError *err);

/*
 * Batched searches: marks RUNNING the submitted searches that can share
 * one launch with the one in slot `lead` (same mirror and probes), at most
 * max of them, writing their slot numbers to `joined`; returns how many.
 * Then cv_worker_search_batch answers every slot of the batch (the lead
 * first), each with its own status in its error record.
 */
extern int	cv_worker_join_searches(int lead, int *joined, int max);
extern CvCudaStatus cv_worker_search_batch(const int *slots, int count);
extern void cv_worker_sweep_mirrors(void);
extern void cv_worker_free_all_mirrors(void);

#endif
