/*
 * mirror_store.c: the mirrors of indexes the GPU worker holds.
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
		sizeof(int64) * (key->lists + 1) + cv_worker_observation_bytes(key);
}

static void
free_mirror(int m)
{
	WorkerMirror *w = &mirrors[m];

	cv_cuda.buffer_free(w->centroids);
	cv_cuda.buffer_free(w->vectors);
	cv_cuda.buffer_free(w->offsets);
	cv_worker_observation_free(m);
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

/*
 * Whether a mirror of this key exists or is being made; with refresh, a
 * ready one counts only when it holds the key's rows (a refresh replaces
 * one made before rows were inserted).
 */
static bool
mirror_exists(const CvGpuMirrorKey *key, bool refresh)
{
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
	{
		const CvGpuMirrorInfo *info = &cv_gpu_shared->mirrors[m];

		if (info->state == CV_MIRROR_FREE || !same_key(&info->key, key))
			continue;
		if (info->state == CV_MIRROR_BUILDING || !refresh || info->key.rows == key->rows)
			return true;
	}
	return false;
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
	if (mirror_exists(&key, slot->args[1] != 0))
		return CVCUDA_OK;		/* made, or being made, already: result -1 */
	for (int m = 0; m < CV_GPU_MAX_MIRRORS && free_slot < 0; m++)
		if (cv_gpu_shared->mirrors[m].state == CV_MIRROR_FREE)
			free_slot = m;
	/* older generations of the same index are useless now */
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (cv_gpu_shared->mirrors[m].state == CV_MIRROR_READY &&
			cv_gpu_shared->mirrors[m].key.database == key.database &&
			cv_gpu_shared->mirrors[m].key.index == key.index &&
			cv_gpu_shared->mirrors[m].key.generation != key.generation)
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
	if (status == CVCUDA_OK)
		status = cv_worker_observation_begin(free_slot, &key, err);
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
		case CV_MIRROR_PART_MEANS:
			if (cv_worker_observation_means((int) slot->args[0]) == NULL)
			{
				*bad = "means sent for a mirror of no cvlattice index";
				return CVCUDA_INVALID_ARGUMENT;
			}
			return cv_cuda.buffer_write(cv_worker_observation_means((int) slot->args[0]), offset,
										payload, bytes, err);
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
	/* a refreshed mirror replaces the one it was made beside */
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (m != slot->args[0] && cv_gpu_shared->mirrors[m].state == CV_MIRROR_READY &&
			cv_gpu_shared->mirrors[m].key.database == info->key.database &&
			cv_gpu_shared->mirrors[m].key.index == info->key.index)
			free_mirror(m);
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

/* A ready mirror named by a request, with the key the backend knows it by. */
static CvGpuMirrorInfo *
keyed_mirror(const CvGpuSlot *slot, int64 m, const CvGpuMirrorKey *key, const char **bad)
{
	CvGpuMirrorInfo *info = named_mirror(slot, m, CV_MIRROR_READY, bad);

	if (info != NULL && !same_key(&info->key, key))
	{
		*bad = "the mirror was evicted, dropped or replaced";
		return NULL;
	}
	return info;
}

/* A submitted slot's search arguments; false when it is no well-formed search. */
static bool
search_args_of(const CvGpuSlot *slot, CvGpuSearchArgs *args)
{
	const char *payload = cv_worker_payload(slot);

	if (slot->opcode != CV_OP_MIRROR_SEARCH || payload == NULL ||
		slot->payload_bytes < sizeof(*args))
		return false;
	memcpy(args, payload, sizeof(*args));
	return true;
}

/*
 * The mirror a search request names, with its arguments and where its
 * queries and answer lie in its staging buffer; NULL (*bad set) when the
 * request is malformed or the mirror is gone.
 */
static CvGpuMirrorInfo *
checked_search(const CvGpuSlot *slot, CvGpuSearchArgs *args, CvGpuSearchLayout *layout,
			   const char **bad)
{
	CvGpuMirrorInfo *info;

	if (!search_args_of(slot, args))
	{
		*bad = "search request without its arguments";
		return NULL;
	}
	if ((info = keyed_mirror(slot, args->mirror, &args->key, bad)) == NULL)
		return NULL;
	cv_search_layout(Max(args->nq, 0), info->key.dimensions, Max(args->k, 0),
					 Max(args->probes, 0), layout);
	if (args->nq < 1 || args->k < 1 || args->probes < 1 || args->probes > info->key.lists ||
		slot->payload_bytes != (args->given ? layout->total : layout->queries +
								sizeof(float) * (Size) args->nq * info->key.dimensions) ||
		layout->total > cv_worker_payload_capacity(slot))
	{
		*bad = "search request of an invalid size";
		return NULL;
	}
	return info;
}

/* The heap TID of a row position the library returned (-1: none). */
static inline int64
tid_at(const WorkerMirror *w, int64 rows, long long position)
{
	return position >= 0 && position < rows ? w->tids[position] : -1;
}

static void
touch_mirror(CvGpuMirrorInfo *info)
{
	SpinLockAcquire(&cv_gpu_shared->mutex);
	info->last_used = GetCurrentTimestamp();
	SpinLockRelease(&cv_gpu_shared->mutex);
}

/*
 * A search answered in place (cv_search_layout): the library writes row
 * positions and distances straight into the staging buffer, and the
 * positions become heap TIDs there.
 */
static CvCudaStatus
mirror_search(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvGpuSearchArgs args;
	CvGpuMirrorInfo *info;
	CvGpuSearchLayout layout;
	WorkerMirror *w;
	int64	   *tids;
	CvCudaStatus status;

	if ((info = checked_search(slot, &args, &layout, bad)) == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	w = &mirrors[args.mirror];
	tids = (int64 *) (payload + layout.tids);
	status = cv_cuda.ivf_search(w->centroids, info->key.lists, info->key.dimensions, w->vectors,
								w->offsets, info->key.metric,
								(const float *) (payload + layout.queries), args.nq, args.k,
								args.probes,
								args.given ? (const int *) (payload + layout.probed) : NULL,
								(long long *) tids,
								(double *) (payload + layout.distances),
								(int *) (payload + layout.probed), err);
	if (status != CVCUDA_OK)
		return status;
	for (int64 i = 0; i < (int64) args.nq * args.k; i++)
		tids[i] = tid_at(w, info->key.rows, tids[i]);
	if (args.observe)
		cv_worker_observe_search(args.mirror, &info->key, w->vectors, w->offsets,
								 (const int32 *) (payload + layout.probed), args.nq, args.probes);
	touch_mirror(info);
	return CVCUDA_OK;
}

/*
 * A mirror's layout, which backends cache per key instead of receiving it
 * with every answer: where each list ended, then (MAXALIGNed) its offsets.
 */
static CvCudaStatus
mirror_layout(CvGpuSlot *slot, char *payload, const char **bad)
{
	CvGpuMirrorKey key;
	CvGpuMirrorInfo *info;
	Size		offsets_at;

	if (payload == NULL || slot->payload_bytes != sizeof(key))
	{
		*bad = "layout request without its key";
		return CVCUDA_INVALID_ARGUMENT;
	}
	memcpy(&key, payload, sizeof(key));
	if ((info = keyed_mirror(slot, slot->args[0], &key, bad)) == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	offsets_at = MAXALIGN(sizeof(int64) * info->key.lists);
	if (offsets_at + sizeof(int64) * (info->key.lists + 1) > cv_worker_payload_capacity(slot))
	{
		*bad = "mirror layout larger than a staging buffer";
		return CVCUDA_INVALID_ARGUMENT;
	}
	memcpy(payload, mirrors[slot->args[0]].ends, sizeof(int64) * info->key.lists);
	memcpy(payload + offsets_at, mirrors[slot->args[0]].host_offsets,
		   sizeof(int64) * (info->key.lists + 1));
	return CVCUDA_OK;
}

/* Observed health of a cvlattice mirror: read (reduced per list), or reset. */
static CvCudaStatus
mirror_observed(CvGpuSlot *slot, char *payload, CvCudaError *err, const char **bad)
{
	CvGpuMirrorKey key;
	CvGpuMirrorInfo *info;
	int			m = (int) slot->args[0];

	if (payload == NULL || slot->payload_bytes != sizeof(key))
	{
		*bad = "observed health request without its key";
		return CVCUDA_INVALID_ARGUMENT;
	}
	memcpy(&key, payload, sizeof(key));
	if ((info = keyed_mirror(slot, slot->args[0], &key, bad)) == NULL)
		return CVCUDA_INVALID_ARGUMENT;
	if (slot->opcode == CV_OP_MIRROR_OBSERVED_RESET)
		return cv_worker_observed_reset(m, &info->key, err);
	return cv_worker_observed(m, &info->key, mirrors[m].offsets, mirrors[m].host_offsets,
							  payload, cv_worker_payload_capacity(slot), err, bad);
}

/* The most queries one batched launch carries. */
#define BATCH_MAX_QUERIES 65536

int
cv_worker_join_searches(int lead, int *joined, int max)
{
	CvGpuSearchArgs lead_args,
				args;
	int64		queries;
	int			count = 0;

	/* a search within given lists runs alone */
	if (!search_args_of(&cv_gpu_shared->slots[lead], &lead_args) || lead_args.nq < 1 ||
		lead_args.given)
		return 0;
	queries = lead_args.nq;
	SpinLockAcquire(&cv_gpu_shared->mutex);
	for (int i = 0; i < CV_GPU_SLOTS && count < max; i++)
	{
		CvGpuSlot  *slot = &cv_gpu_shared->slots[i];

		if (i == lead || slot->state != CV_SLOT_SUBMITTED ||
			slot->generation != cv_gpu_shared->worker_generation ||
			!search_args_of(slot, &args) || args.given || args.mirror != lead_args.mirror ||
			args.probes != lead_args.probes || !same_key(&args.key, &lead_args.key) ||
			args.nq < 1 || queries + args.nq > BATCH_MAX_QUERIES)
			continue;
		slot->state = CV_SLOT_RUNNING;
		joined[count++] = i;
		queries += args.nq;
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	return count;
}

/* One slot's share of a batched launch. */
typedef struct BatchPart
{
	CvGpuSlot  *slot;
	CvGpuSearchArgs args;
	CvGpuSearchLayout layout;
	int64		first;			/* its first query in the batch */
	bool		valid;
} BatchPart;

static void
fail_slot(CvGpuSlot *slot, int code, const char *message)
{
	slot->error.code = code;
	strlcpy(slot->error.message, message, CV_GPU_ERROR_LEN);
}

/* Checks a joined slot as mirror_search checks one; false (its error set) when it is bad. */
static bool
check_part(BatchPart *part)
{
	const char *bad = NULL;

	if (checked_search(part->slot, &part->args, &part->layout, &bad) != NULL)
		return true;
	fail_slot(part->slot, CV_GPU_ERR_BAD_REQUEST, bad);
	return false;
}

/* Writes one slot's share of the batch's answer into its staging buffer. */
static void
scatter(const BatchPart *part, const WorkerMirror *w, int64 rows, int k_max,
		const long long *positions, const double *distances, const int *probed)
{
	char	   *payload = cv_worker_payload(part->slot);
	int64	   *tids = (int64 *) (payload + part->layout.tids);
	double	   *dist = (double *) (payload + part->layout.distances);
	int32	   *lists = (int32 *) (payload + part->layout.probed);
	int			k = part->args.k;

	for (int64 q = 0; q < part->args.nq; q++)
	{
		const long long *pos = positions + (part->first + q) * k_max;

		/* the first k of the best k_max, in the same order: the best k */
		for (int r = 0; r < k; r++)
		{
			tids[q * k + r] = tid_at(w, rows, pos[r]);
			dist[q * k + r] = distances[(part->first + q) * k_max + r];
		}
	}
	memcpy(lists, probed + part->first * part->args.probes,
		   sizeof(int32) * (Size) part->args.nq * part->args.probes);
	fail_slot(part->slot, 0, "");
}

/* The counters of clustervec_gpu_info: one launch, its requests and their queue time. */
static void
count_launch(const int *slots, int count)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		waited = 0;

	for (int i = 0; i < count; i++)
		waited += (uint64) Max(0, now - cv_gpu_shared->slots[slots[i]].submitted_at);
	pg_atomic_fetch_add_u64(&cv_gpu_shared->search_launches, 1);
	pg_atomic_fetch_add_u64(&cv_gpu_shared->search_requests, count);
	pg_atomic_fetch_add_u64(&cv_gpu_shared->queue_wait_us, waited);
}

/* Runs a checked batch in one launch (over the mirror of parts[valid]); each valid slot gets the status. */
static CvCudaStatus
launch_batch(BatchPart *parts, int count, int valid, int64 total, int k_max)
{
	const CvGpuMirrorInfo *info = &cv_gpu_shared->mirrors[parts[valid].args.mirror];
	const WorkerMirror *w = &mirrors[parts[valid].args.mirror];
	int			d = info->key.dimensions;
	int			probes = parts[valid].args.probes;
	float	   *queries = palloc_extended(sizeof(float) * total * d, MCXT_ALLOC_HUGE);
	long long  *positions = palloc_extended(sizeof(long long) * total * k_max, MCXT_ALLOC_HUGE);
	double	   *distances = palloc_extended(sizeof(double) * total * k_max, MCXT_ALLOC_HUGE);
	int		   *probed = palloc_extended(sizeof(int) * total * probes, MCXT_ALLOC_HUGE);
	CvCudaError err = {0};
	CvCudaStatus status;

	for (int i = 0; i < count; i++)
		if (parts[i].valid)
			memcpy(queries + parts[i].first * d, cv_worker_payload(parts[i].slot) +
				   parts[i].layout.queries, sizeof(float) * parts[i].args.nq * d);
	status = cv_cuda.ivf_search(w->centroids, info->key.lists, d, w->vectors, w->offsets,
								info->key.metric, queries, (int) total, k_max, probes, NULL,
								positions, distances, probed, &err);
	for (int i = 0; i < count; i++)
		if (parts[i].valid && status == CVCUDA_OK)
		{
			scatter(&parts[i], w, info->key.rows, k_max, positions, distances, probed);
			if (parts[i].args.observe)
				cv_worker_observe_search(parts[valid].args.mirror, &info->key, w->vectors,
										 w->offsets, probed + parts[i].first * probes,
										 parts[i].args.nq, probes);
		}
		else if (parts[i].valid)
			fail_slot(parts[i].slot, status, err.message);
	pfree(queries);
	pfree(positions);
	pfree(distances);
	pfree(probed);
	return status;
}

CvCudaStatus
cv_worker_search_batch(const int *slots, int count)
{
	BatchPart  *parts;
	int64		total = 0;
	int			k_max = 0;
	int			valid = -1;
	CvCudaStatus status = CVCUDA_OK;

	count_launch(slots, count);
	if (count == 1)
		return cv_worker_execute(&cv_gpu_shared->slots[slots[0]]);	/* answered in place */
	parts = palloc0(sizeof(BatchPart) * count);
	for (int i = 0; i < count; i++)
	{
		parts[i].slot = &cv_gpu_shared->slots[slots[i]];
		parts[i].valid = check_part(&parts[i]);
		if (!parts[i].valid)
			continue;
		if (valid < 0)
			valid = i;
		parts[i].first = total;
		total += parts[i].args.nq;
		k_max = Max(k_max, parts[i].args.k);
	}
	if (valid >= 0)
		status = launch_batch(parts, count, valid, total, k_max);
	if (valid >= 0 && status == CVCUDA_OK)
		touch_mirror(&cv_gpu_shared->mirrors[parts[valid].args.mirror]);
	pfree(parts);
	return status;
}

bool
cv_worker_handles_mirror(int opcode)
{
	return opcode >= CV_OP_MIRROR_BEGIN && opcode <= CV_OP_MIRROR_OBSERVED_RESET;
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
		case CV_OP_MIRROR_LAYOUT:
			return mirror_layout(slot, payload, bad);
		case CV_OP_MIRROR_OBSERVED:
		case CV_OP_MIRROR_OBSERVED_RESET:
			return mirror_observed(slot, payload, err, bad);
		default:
			return mirror_search(slot, payload, err, bad);
	}
}
