/*
 * buffers.c: the device buffers the GPU worker holds for
 * backends, and the operations that run over them.
 *
 * A backend allocates buffers, fills them chunk by chunk through its
 * staging buffer, runs operations that name them by id, reads results back
 * and frees them.  Each buffer records its owner (pgprocno, pid) and the
 * owner's transaction epoch: when the owner ends that transaction (commit
 * or abort) or exits, the next sweep frees whatever it left, so an ERROR
 * mid-way never leaks device memory.  clustervec.gpu_memory_limit bounds
 * the bytes all buffers hold.
 */
#include "postgres.h"

#include "storage/proc.h"

#include "worker/protocol.h"
#include "worker/worker.h"
#include "worker/library.h"

typedef struct WorkerBuffer
{
	uint64		id;				/* 0: the entry is free */
	CvCudaBuffer *buffer;
	Size		bytes;
	int			owner_procno;
	int			owner_pid;
	uint64		owner_epoch;
} WorkerBuffer;

static WorkerBuffer buffers[CV_GPU_MAX_BUFFERS];
static uint64 next_buffer_id = 1;
Size		cv_worker_held_bytes = 0;

/* Publishes what the buffers hold, for clustervec_gpu_info(). */
static void
publish_usage(void)
{
	int			count = 0;
	uint64		bytes = 0;

	/* the buffers alone: mirrors publish their own bytes in the mirror table */
	for (int i = 0; i < CV_GPU_MAX_BUFFERS; i++)
	{
		count += buffers[i].id != 0;
		bytes += buffers[i].id != 0 ? buffers[i].bytes : 0;
	}
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_gpu_shared->buffers_bytes = bytes;
	cv_gpu_shared->buffers_count = count;
	SpinLockRelease(&cv_gpu_shared->mutex);
}

/* The byte limit: clustervec.gpu_memory_limit, or 90% of the device. */
Size
cv_worker_memory_limit(void)
{
	if (cv_gpu_memory_limit_mb > 0)
		return (Size) cv_gpu_memory_limit_mb * 1024 * 1024;
	return (Size) (cv_gpu_shared->memory_total / 10 * 9);
}

static void
release(WorkerBuffer *held)
{
	cv_cuda.buffer_free(held->buffer);
	cv_worker_held_bytes -= held->bytes;
	memset(held, 0, sizeof(*held));
}

static WorkerBuffer *
find_buffer(uint64 id)
{
	if (id == 0)
		return NULL;
	for (int i = 0; i < CV_GPU_MAX_BUFFERS; i++)
		if (buffers[i].id == id)
			return &buffers[i];
	return NULL;
}

/* A buffer of the slot's owner, or NULL (another backend's ids are not visible). */
static CvCudaBuffer *
owned_buffer(const CvGpuSlot *slot, uint64 id)
{
	WorkerBuffer *held = find_buffer(id);

	if (held == NULL || held->owner_procno != slot->owner_procno)
		return NULL;
	return held->buffer;
}

/* Whether a backend has ended the transaction of the given epoch, or exited. */
bool
cv_worker_owner_done(int procno, int pid, uint64 epoch)
{
	if (procno < 0 || procno >= cv_gpu_owner_epochs->count)
		return true;
	if (ProcGlobal->allProcs[procno].pid != pid)
		return true;
	return pg_atomic_read_u64(&cv_gpu_owner_epochs->epoch[procno]) != epoch;
}

static bool
owner_done(const WorkerBuffer *held)
{
	return cv_worker_owner_done(held->owner_procno, held->owner_pid, held->owner_epoch);
}

void
cv_worker_sweep_buffers(void)
{
	bool		freed = false;

	for (int i = 0; i < CV_GPU_MAX_BUFFERS; i++)
		if (buffers[i].id != 0 && owner_done(&buffers[i]))
		{
			release(&buffers[i]);
			freed = true;
		}
	if (freed)
		publish_usage();
	cv_worker_sweep_mirrors();
}

void
cv_worker_free_all_buffers(void)
{
	for (int i = 0; i < CV_GPU_MAX_BUFFERS; i++)
		if (buffers[i].id != 0)
			release(&buffers[i]);
}

static CvCudaStatus
buffer_alloc_op(CvGpuSlot *slot, CvCudaError *err, const char **bad)
{
	Size		bytes = (Size) slot->args[0];
	WorkerBuffer *entry = NULL;
	CvCudaStatus status;

	if (slot->args[0] <= 0)
	{
		*bad = "device buffer of no bytes";
		return CVCUDA_INVALID_ARGUMENT;
	}
	cv_worker_sweep_buffers();
	for (int i = 0; i < CV_GPU_MAX_BUFFERS && entry == NULL; i++)
		if (buffers[i].id == 0)
			entry = &buffers[i];
	if (entry == NULL)
	{
		*bad = "the GPU worker holds its maximum number of device buffers";
		return CVCUDA_INVALID_ARGUMENT;
	}
	if (!cv_worker_make_room(bytes))
	{
		static char message[CV_GPU_ERROR_LEN];

		snprintf(message, sizeof(message),
				 "%zu more bytes of device memory would exceed clustervec.gpu_memory_limit (%zu of %zu held)",
				 bytes, cv_worker_held_bytes, cv_worker_memory_limit());
		*bad = message;
		return CVCUDA_OUT_OF_MEMORY;
	}
	status = cv_cuda.buffer_alloc(bytes, &entry->buffer, err);
	if (status != CVCUDA_OK)
		return status;
	entry->id = next_buffer_id++;
	entry->bytes = bytes;
	entry->owner_procno = slot->owner_procno;
	entry->owner_pid = slot->owner_pid;
	entry->owner_epoch = (uint64) slot->args[1];
	cv_worker_held_bytes += bytes;
	slot->result[0] = (int64) entry->id;
	publish_usage();
	return CVCUDA_OK;
}

/* Checks a transfer's range against the buffer and the staging buffer. */
static CvCudaBuffer *
transfer_target(CvGpuSlot *slot, char *payload, const char **bad)
{
	CvCudaBuffer *buffer = owned_buffer(slot, (uint64) slot->args[0]);

	if (buffer == NULL)
		*bad = "no such device buffer (it was freed, or the GPU worker restarted)";
	else if (payload == NULL || slot->args[1] < 0 || slot->args[2] < 0 ||
			 (Size) slot->args[2] > CV_GPU_STAGING_BYTES)
		*bad = "device buffer transfer larger than its staging buffer";
	return *bad ? NULL : buffer;
}

static CvCudaStatus
buffer_write_op(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvCudaBuffer *buffer = transfer_target(slot, payload, bad);

	if (buffer == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	return cv_cuda.buffer_write(buffer, (size_t) slot->args[1], payload,
								(size_t) slot->args[2], err);
}

static CvCudaStatus
buffer_read_op(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvCudaBuffer *buffer = transfer_target(slot, payload, bad);

	if (buffer == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	return cv_cuda.buffer_read(buffer, (size_t) slot->args[1], payload,
							   (size_t) slot->args[2], err);
}

static CvCudaStatus
buffer_free_op(CvGpuSlot *slot, const char **bad)
{
	WorkerBuffer *held = find_buffer((uint64) slot->args[0]);

	if (held == NULL || held->owner_procno != slot->owner_procno)
	{
		*bad = "no such device buffer (it was freed, or the GPU worker restarted)";
		return CVCUDA_INVALID_ARGUMENT;
	}
	release(held);
	publish_usage();
	return CVCUDA_OK;
}

/*
 * Looks up the buffers an operation names; an id of 0 gives NULL, an
 * unknown id fails the request.
 */
static bool
lookup_ids(const CvGpuSlot *slot, const uint64 *ids, CvCudaBuffer **buffers, int count,
		   const char **bad)
{
	for (int i = 0; i < count; i++)
	{
		buffers[i] = ids[i] == 0 ? NULL : owned_buffer(slot, ids[i]);
		if (ids[i] != 0 && buffers[i] == NULL)
		{
			*bad = "the operation names a device buffer the GPU worker does not hold";
			return false;
		}
	}
	return true;
}

/* The three statistics operations: arguments in the payload. */
static CvCudaStatus
health_op(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvGpuHealthArgs *args = (CvGpuHealthArgs *) payload;
	CvCudaBuffer *b[10];
	uint64		ids[10];
	CvCudaCentroidSet set;

	if (payload == NULL || slot->payload_bytes < sizeof(CvGpuHealthArgs))
	{
		*bad = "statistics request without its arguments";
		return CVCUDA_INVALID_ARGUMENT;
	}
	ids[0] = args->members;
	ids[1] = args->offsets;
	ids[2] = args->centroids;
	ids[3] = args->stats;
	ids[4] = args->set_centroids;
	ids[5] = args->set_mean_dist;
	ids[6] = args->set_mean_norm;
	ids[7] = args->set_nearest;
	ids[8] = args->set_nearest_dist;
	ids[9] = args->set_db_ratio;
	if (!lookup_ids(slot, ids, b, 10, bad))
		return CVCUDA_INVALID_ARGUMENT;
	memset(&set, 0, sizeof(set));
	set.k = args->set_k;
	set.d = args->d;
	set.m = args->m;
	set.centroids = b[4];
	set.mean_dist = b[5];
	set.mean_norm = b[6];
	set.nearest = b[7];
	set.nearest_dist = b[8];
	set.db_ratio = b[9];
	if (slot->opcode == CV_OP_HEALTH_CENTROID)
		return cv_cuda.health_centroid(b[0], b[1], args->nclusters, args->d, &args->params,
									   b[2], b[3], err);
	if (slot->opcode == CV_OP_HEALTH_TABLE)
		return cv_cuda.health_neighbour_table(&set, err);
	return cv_cuda.health_members(b[0], b[1], args->nclusters, args->first_cluster, &set,
								  &args->params, b[3], err);
}

/* The k-means operations: arguments in the payload (then REFRESH's centres). */
static CvCudaStatus
kmeans_op(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvGpuKmeansArgs *args = (CvGpuKmeansArgs *) payload;
	CvCudaBuffer *b[5];
	uint64		ids[5];
	Size		extra;

	if (payload == NULL || slot->payload_bytes < sizeof(CvGpuKmeansArgs) ||
		args->d < 1 || args->k < 0 || args->iterations < 0)
	{
		*bad = "k-means request without valid arguments";
		return CVCUDA_INVALID_ARGUMENT;
	}
	ids[0] = args->points;
	ids[1] = args->centroids;
	ids[2] = args->assign;
	ids[3] = args->score;
	ids[4] = args->dist;
	if (!lookup_ids(slot, ids, b, 5, bad))
		return CVCUDA_INVALID_ARGUMENT;
	if (slot->opcode == CV_OP_KMEANS_REFRESH)
	{
		extra = (Size) args->k * args->d * sizeof(float);
		if (MAXALIGN(sizeof(CvGpuKmeansArgs)) + extra > CV_GPU_STAGING_BYTES)
		{
			*bad = "k-means refresh with more centres than its staging buffer holds";
			return CVCUDA_INVALID_ARGUMENT;
		}
		return cv_cuda.kmeans_refresh(b[0], args->n, args->d,
									  (const float *) (payload + MAXALIGN(sizeof(CvGpuKmeansArgs))),
									  args->k, b[4], err);
	}
	if (slot->opcode == CV_OP_KMEANS_ASSIGN)
		return cv_cuda.kmeans_assign(b[0], args->n, args->d, b[1], args->k, args->metric,
									 args->mode, b[2], b[3], err);
	extra = (Size) args->iterations * sizeof(double);
	if (MAXALIGN(sizeof(CvGpuKmeansArgs)) + extra > CV_GPU_STAGING_BYTES)
	{
		*bad = "k-means request with too many iterations";
		return CVCUDA_INVALID_ARGUMENT;
	}
	return cv_cuda.kmeans_lloyd(b[0], args->n, args->d, b[1], args->k, args->iterations,
								args->metric, args->mode, b[2],
								(double *) (payload + MAXALIGN(sizeof(CvGpuKmeansArgs))),
								&args->iterations_run, &args->inertia, err);
}

bool
cv_worker_handles(int opcode)
{
	return opcode >= CV_OP_BUFFER_ALLOC && opcode <= CV_OP_KMEANS_LLOYD;
}

CvCudaStatus
cv_worker_execute_buffer_op(CvGpuSlot *slot, char *payload, CvCudaError *err,
							const char **bad)
{
	switch (slot->opcode)
	{
		case CV_OP_BUFFER_ALLOC:
			return buffer_alloc_op(slot, err, bad);
		case CV_OP_BUFFER_WRITE:
			return buffer_write_op(slot, payload, err, bad);
		case CV_OP_BUFFER_READ:
			return buffer_read_op(slot, payload, err, bad);
		case CV_OP_BUFFER_FREE:
			return buffer_free_op(slot, bad);
		case CV_OP_HEALTH_CENTROID:
		case CV_OP_HEALTH_TABLE:
		case CV_OP_HEALTH_MEMBERS:
			return health_op(slot, payload, err, bad);
		default:
			return kmeans_op(slot, payload, err, bad);
	}
}
