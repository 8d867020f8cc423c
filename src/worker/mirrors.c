/*
 * mirrors.c: the GPU worker's mirrors of cvivf indexes.
 *
 * A mirror is an index's centroids and its list vectors packed list after
 * list on the device, with each row's heap TID and where each list ended
 * (so scans read later inserts from the pages), keyed by database, index
 * relfilenode and the index's generation: a vacuum, REINDEX or rebuild
 * bumps the generation, and backends stop using the old mirror at once.
 * Backends upload a mirror (BEGIN, PUT..., COMMIT); it then stays until
 * evicted, least recently used first, when clustervec.gpu_memory_limit
 * needs room, or dropped.  A mirror whose uploader ended its transaction
 * or exited before COMMIT is freed by the sweep.  The shared table
 * (cv_gpu_shared->mirrors) tells backends what exists without asking.
 */
#include "postgres.h"

#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "worker/library.h"
#include "worker/protocol.h"
#include "worker/worker.h"

typedef struct WorkerMirror
{
	CvCudaBuffer *centroids;
	CvCudaBuffer *vectors;
	CvCudaBuffer *offsets;
	int64	   *tids;			/* rows */
	int64	   *ends;			/* lists */
	int64	   *host_offsets;	/* lists + 1 */
} WorkerMirror;

static WorkerMirror mirrors[CV_GPU_MAX_MIRRORS];

static Size
mirror_bytes(const CvGpuMirrorKey *key)
{
	return sizeof(float) * (Size) key->dimensions * (key->lists + key->rows) +
		sizeof(int64) * (key->lists + 1);
}

static void
free_mirror(int m)
{
	WorkerMirror *w = &mirrors[m];

	cv_cuda.buffer_free(w->centroids);
	cv_cuda.buffer_free(w->vectors);
	cv_cuda.buffer_free(w->offsets);
	if (w->tids)
		pfree(w->tids);
	if (w->ends)
		pfree(w->ends);
	if (w->host_offsets)
		pfree(w->host_offsets);
	memset(w, 0, sizeof(*w));
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_worker_held_bytes -= cv_gpu_shared->mirrors[m].bytes;
	memset(&cv_gpu_shared->mirrors[m], 0, sizeof(CvGpuMirrorInfo));
	SpinLockRelease(&cv_gpu_shared->mutex);
}

void
cv_worker_free_all_mirrors(void)
{
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (cv_gpu_shared->mirrors[m].state != CV_MIRROR_FREE)
			free_mirror(m);
}

/* Frees mirrors whose uploader gave up (ERROR, FATAL) before COMMIT. */
void
cv_worker_sweep_mirrors(void)
{
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
	{
		CvGpuMirrorInfo *info = &cv_gpu_shared->mirrors[m];

		if (info->state == CV_MIRROR_BUILDING &&
			cv_worker_owner_done(info->owner_procno, info->owner_pid, info->owner_epoch))
			free_mirror(m);
	}
}

/* Evicts ready mirrors, least recently used first, until bytes more fit; false if they cannot. */
bool
cv_worker_make_room(Size bytes)
{
	while (cv_worker_held_bytes + bytes > cv_worker_memory_limit())
	{
		int			victim = -1;

		for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
			if (cv_gpu_shared->mirrors[m].state == CV_MIRROR_READY &&
				(victim < 0 ||
				 cv_gpu_shared->mirrors[m].last_used < cv_gpu_shared->mirrors[victim].last_used))
				victim = m;
		if (victim < 0)
			return false;
		ereport(LOG,
				(errmsg("clustervec GPU worker evicts the mirror of index %u (%zu bytes) for room",
						cv_gpu_shared->mirrors[victim].key.index,
						(Size) cv_gpu_shared->mirrors[victim].bytes)));
		free_mirror(victim);
	}
	return true;
}

static bool
same_key(const CvGpuMirrorKey *a, const CvGpuMirrorKey *b)
{
	return a->database == b->database && a->relfilenode == b->relfilenode &&
		a->generation == b->generation;
}

static CvCudaStatus
mirror_begin(CvGpuSlot *slot, const char *payload, CvCudaError *err, const char **bad)
{
	CvGpuMirrorKey key;
	Size		bytes;
	int			free_slot = -1;
	WorkerMirror *w;
	CvCudaStatus status;

	if (payload == NULL || slot->payload_bytes < sizeof(key))
	{
		*bad = "mirror request without its key";
		return CVCUDA_INVALID_ARGUMENT;
	}
	memcpy(&key, payload, sizeof(key));
	if (key.dimensions < 1 || key.lists < 1 || key.rows < 0)
	{
		*bad = "mirror with an invalid shape";
		return CVCUDA_INVALID_ARGUMENT;
	}
	slot->result[0] = -1;
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
	{
		if (cv_gpu_shared->mirrors[m].state != CV_MIRROR_FREE &&
			same_key(&cv_gpu_shared->mirrors[m].key, &key))
			return CVCUDA_OK;	/* made, or being made, already: result -1 */
		if (cv_gpu_shared->mirrors[m].state == CV_MIRROR_FREE && free_slot < 0)
			free_slot = m;
	}
	/* older generations of the same index are useless now */
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (cv_gpu_shared->mirrors[m].state == CV_MIRROR_READY &&
			cv_gpu_shared->mirrors[m].key.database == key.database &&
			cv_gpu_shared->mirrors[m].key.index == key.index)
		{
			free_mirror(m);
			if (free_slot < 0)
				free_slot = m;
		}
	bytes = mirror_bytes(&key);
	if (free_slot < 0 || !cv_worker_make_room(bytes))
	{
		*bad = free_slot < 0 ? "the GPU worker holds its maximum number of mirrors" :
			"the mirror does not fit in clustervec.gpu_memory_limit";
		return CVCUDA_OUT_OF_MEMORY;
	}
	w = &mirrors[free_slot];
	status = cv_cuda.buffer_alloc(sizeof(float) * (Size) key.lists * key.dimensions,
								  &w->centroids, err);
	if (status == CVCUDA_OK)
		status = cv_cuda.buffer_alloc(sizeof(float) * (Size) Max(key.rows, 1) * key.dimensions,
									  &w->vectors, err);
	if (status == CVCUDA_OK)
		status = cv_cuda.buffer_alloc(sizeof(int64) * (key.lists + 1), &w->offsets, err);
	if (status == CVCUDA_OK)
	{
		w->tids = MemoryContextAllocExtended(TopMemoryContext, sizeof(int64) * Max(key.rows, 1),
											 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		w->ends = MemoryContextAllocExtended(TopMemoryContext, sizeof(int64) * key.lists,
											 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		w->host_offsets = MemoryContextAllocExtended(TopMemoryContext,
													 sizeof(int64) * (key.lists + 1),
													 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		if (!w->tids || !w->ends || !w->host_offsets)
		{
			status = CVCUDA_OUT_OF_MEMORY;
			strlcpy(err->message, "out of host memory for a mirror's TIDs", sizeof(err->message));
		}
	}
	SpinLockAcquire(&cv_gpu_shared->mutex);
	cv_gpu_shared->mirrors[free_slot].state = CV_MIRROR_BUILDING;
	cv_gpu_shared->mirrors[free_slot].key = key;
	cv_gpu_shared->mirrors[free_slot].bytes = bytes;
	cv_gpu_shared->mirrors[free_slot].last_used = GetCurrentTimestamp();
	cv_gpu_shared->mirrors[free_slot].owner_procno = slot->owner_procno;
	cv_gpu_shared->mirrors[free_slot].owner_pid = slot->owner_pid;
	cv_gpu_shared->mirrors[free_slot].owner_epoch = (uint64) slot->args[0];
	SpinLockRelease(&cv_gpu_shared->mutex);
	cv_worker_held_bytes += bytes;
	if (status != CVCUDA_OK)
	{
		free_mirror(free_slot);
		return status;
	}
	slot->result[0] = free_slot;
	return CVCUDA_OK;
}

/* The mirror a request names, in the state it needs; NULL (and *bad) otherwise. */
static CvGpuMirrorInfo *
named_mirror(const CvGpuSlot *slot, int64 m, CvGpuMirrorState state, const char **bad)
{
	CvGpuMirrorInfo *info;

	if (m < 0 || m >= CV_GPU_MAX_MIRRORS)
	{
		*bad = "no such mirror";
		return NULL;
	}
	info = &cv_gpu_shared->mirrors[m];
	if (info->state != state ||
		(state == CV_MIRROR_BUILDING && info->owner_procno != slot->owner_procno))
	{
		*bad = "the mirror was evicted, dropped or replaced";
		return NULL;
	}
	return info;
}

static CvCudaStatus
mirror_put(CvGpuSlot *slot, const char *payload, CvCudaError *err, const char **bad)
{
	CvGpuMirrorInfo *info = named_mirror(slot, slot->args[0], CV_MIRROR_BUILDING, bad);
	WorkerMirror *w;
	Size		offset = (Size) slot->args[2],
				bytes = (Size) slot->args[3],
				limit = 0;
	char	   *host = NULL;

	if (info == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	w = &mirrors[slot->args[0]];
	if (payload == NULL || bytes > CV_GPU_STAGING_BYTES)
	{
		*bad = "mirror upload larger than its staging buffer";
		return CVCUDA_INVALID_ARGUMENT;
	}
	switch (slot->args[1])
	{
		case CV_MIRROR_PART_CENTROIDS:
			return cv_cuda.buffer_write(w->centroids, offset, payload, bytes, err);
		case CV_MIRROR_PART_VECTORS:
			return cv_cuda.buffer_write(w->vectors, offset, payload, bytes, err);
		case CV_MIRROR_PART_OFFSETS:
			host = (char *) w->host_offsets;
			limit = sizeof(int64) * (info->key.lists + 1);
			break;
		case CV_MIRROR_PART_TIDS:
			host = (char *) w->tids;
			limit = sizeof(int64) * info->key.rows;
			break;
		case CV_MIRROR_PART_ENDS:
			host = (char *) w->ends;
			limit = sizeof(int64) * info->key.lists;
			break;
	}
	if (host == NULL || offset > limit || bytes > limit - offset)
	{
		*bad = "mirror upload outside its part";
		return CVCUDA_INVALID_ARGUMENT;
	}
	memcpy(host + offset, payload, bytes);
	return CVCUDA_OK;
}

static CvCudaStatus
mirror_commit(CvGpuSlot *slot, CvCudaError *err, const char **bad)
{
	CvGpuMirrorInfo *info = named_mirror(slot, slot->args[0], CV_MIRROR_BUILDING, bad);
	WorkerMirror *w;
	CvCudaStatus status;

	if (info == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	w = &mirrors[slot->args[0]];
	if (w->host_offsets[0] != 0 || w->host_offsets[info->key.lists] != info->key.rows)
	{
		*bad = "mirror list offsets do not cover its rows";
		return CVCUDA_INVALID_ARGUMENT;
	}
	status = cv_cuda.buffer_write(w->offsets, 0, w->host_offsets,
								  sizeof(int64) * (info->key.lists + 1), err);
	if (status != CVCUDA_OK)
		return status;
	SpinLockAcquire(&cv_gpu_shared->mutex);
	info->state = CV_MIRROR_READY;
	info->last_used = GetCurrentTimestamp();
	SpinLockRelease(&cv_gpu_shared->mutex);
	return CVCUDA_OK;
}

/* args: mirror, and its relfilenode (0: any), so a reused number is left alone. */
static CvCudaStatus
mirror_drop(CvGpuSlot *slot, const char **bad)
{
	int64		m = slot->args[0];

	if (m < 0 || m >= CV_GPU_MAX_MIRRORS || cv_gpu_shared->mirrors[m].state == CV_MIRROR_FREE)
	{
		*bad = "no such mirror";
		return CVCUDA_INVALID_ARGUMENT;
	}
	if (slot->args[1] == 0 || cv_gpu_shared->mirrors[m].key.relfilenode == (Oid) slot->args[1])
		free_mirror((int) m);
	return CVCUDA_OK;
}

/*
 * A batch search: the output is the mirror's list ends (lists int8), its
 * list offsets (lists + 1 int8), then nq x k hits (cv_search_hits_offset).
 */
static CvCudaStatus
mirror_search(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvGpuSearchArgs args;
	CvGpuMirrorInfo *info;
	WorkerMirror *w;
	Size		head = MAXALIGN(sizeof(CvGpuSearchArgs));
	Size		ends_bytes,
				hits_bytes;
	long long  *positions;
	double	   *distances;
	CvGpuSearchHit *hits;
	CvCudaStatus status;

	if (payload == NULL || slot->payload_bytes < head)
	{
		*bad = "search request without its arguments";
		return CVCUDA_INVALID_ARGUMENT;
	}
	memcpy(&args, payload, sizeof(args));
	if ((info = named_mirror(slot, args.mirror, CV_MIRROR_READY, bad)) == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	if (!same_key(&info->key, &args.key))
	{
		*bad = "the mirror was evicted, dropped or replaced";
		return CVCUDA_INVALID_ARGUMENT;
	}
	ends_bytes = cv_search_hits_offset(info->key.lists) - head;
	hits_bytes = sizeof(CvGpuSearchHit) * (Size) Max(args.nq, 0) * Max(args.k, 0);
	if (args.nq < 1 || args.k < 1 || args.probes < 1 ||
		slot->payload_bytes != head + sizeof(float) * (Size) args.nq * info->key.dimensions ||
		head + ends_bytes + hits_bytes > CV_GPU_STAGING_BYTES)
	{
		*bad = "search request of an invalid size";
		return CVCUDA_INVALID_ARGUMENT;
	}
	w = &mirrors[args.mirror];
	positions = palloc(sizeof(long long) * args.nq * args.k);
	distances = palloc(sizeof(double) * args.nq * args.k);
	status = cv_cuda.ivf_search(w->centroids, info->key.lists, info->key.dimensions, w->vectors,
								w->offsets, info->key.metric, (const float *) (payload + head),
								args.nq, args.k, args.probes, positions, distances, err);
	if (status == CVCUDA_OK)
	{
		memcpy(payload + head, w->ends, sizeof(int64) * info->key.lists);
		memcpy(payload + head + MAXALIGN(sizeof(int64) * info->key.lists), w->host_offsets,
			   sizeof(int64) * (info->key.lists + 1));
		hits = (CvGpuSearchHit *) (payload + head + ends_bytes);
		for (int64 i = 0; i < (int64) args.nq * args.k; i++)
		{
			hits[i].tid = positions[i] >= 0 && positions[i] < info->key.rows ?
				w->tids[positions[i]] : -1;
			hits[i].distance = distances[i];
		}
		SpinLockAcquire(&cv_gpu_shared->mutex);
		info->last_used = GetCurrentTimestamp();
		SpinLockRelease(&cv_gpu_shared->mutex);
	}
	pfree(positions);
	pfree(distances);
	return status;
}

bool
cv_worker_handles_mirror(int opcode)
{
	return opcode >= CV_OP_MIRROR_BEGIN && opcode <= CV_OP_MIRROR_SEARCH;
}

CvCudaStatus
cv_worker_execute_mirror_op(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	switch (slot->opcode)
	{
		case CV_OP_MIRROR_BEGIN:
			return mirror_begin(slot, payload, err, bad);
		case CV_OP_MIRROR_PUT:
			return mirror_put(slot, payload, err, bad);
		case CV_OP_MIRROR_COMMIT:
			return mirror_commit(slot, err, bad);
		case CV_OP_MIRROR_DROP:
			return mirror_drop(slot, bad);
		default:
			return mirror_search(slot, payload, err, bad);
	}
}
