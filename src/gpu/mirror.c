/*
 * mirror.c: index mirrors, from a backend: finding the ready mirror of an
 * index's current generation, the upload requests, batch searches, and
 * dropping an index's mirrors with the index.
 *
 * A search's request is written straight into a staging buffer and its
 * answer read from there once.  The answer does not carry the mirror's
 * layout (where each list ended when mirrored, and its row range): that
 * is the same for every search of one mirror, so a backend asks for it
 * once per mirror key and keeps it.
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "gpu/request.h"

int
cv_gpu_mirror_find(CvGpuMirrorKey *key)
{
	int			found = -1;

	if (cv_gpu_shared == NULL)
		return -1;
	SpinLockAcquire(&cv_gpu_shared->mutex);
	for (int m = 0; m < CV_GPU_MAX_MIRRORS && found < 0; m++)
	{
		const CvGpuMirrorInfo *info = &cv_gpu_shared->mirrors[m];

		if (info->state == CV_MIRROR_READY && info->key.database == key->database &&
			info->key.relfilenode == key->relfilenode &&
			info->key.generation == key->generation)
		{
			found = m;
			key->rows = info->key.rows;
		}
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	return found;
}

int
cv_gpu_mirror_list(CvGpuMirrorInfo *out)
{
	CvGpuMirrorInfo copy[CV_GPU_MAX_MIRRORS];
	int			count = 0;

	if (cv_gpu_shared == NULL)
		return 0;
	SpinLockAcquire(&cv_gpu_shared->mutex);
	memcpy(copy, cv_gpu_shared->mirrors, sizeof(copy));
	SpinLockRelease(&cv_gpu_shared->mutex);
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (copy[m].state == CV_MIRROR_READY && copy[m].key.database == MyDatabaseId)
			out[count++] = copy[m];
	return count;
}

/* A request about one mirror (args: its number, and a relfilenode or 0). */
static bool
mirror_request(int opcode, int mirror, Oid relfilenode, CvGpuError *error)
{
	int64		args[2] = {mirror, relfilenode};

	return cv_gpu_request(opcode, false, args, 2, 0, NULL, NULL, 0, NULL, error);
}

bool
cv_gpu_mirror_begin(const CvGpuMirrorKey *key, bool refresh, int *mirror, CvGpuError *error)
{
	int64		args[2];
	int64		result[2];

	/* the worker frees an unfinished mirror once this transaction ends */
	args[0] = (int64) cv_gpu_owner_epoch();
	args[1] = refresh;
	cv_gpu_note_allocation();
	if (!cv_gpu_request(CV_OP_MIRROR_BEGIN, true, args, 2, sizeof(*key), key, NULL, 0, result,
						error))
		return false;
	*mirror = (int) result[0];
	return true;
}

bool
cv_gpu_mirror_put(int mirror, CvGpuMirrorPart part, Size offset, const void *data, Size bytes,
				  CvGpuError *error)
{
	for (Size done = 0; done < bytes;)
	{
		Size		chunk = Min(bytes - done, CV_GPU_STAGING_BYTES);
		int64		args[4] = {mirror, part, (int64) (offset + done), (int64) chunk};

		if (!cv_gpu_request(CV_OP_MIRROR_PUT, true, args, 4, chunk, (const char *) data + done,
							NULL, 0, NULL, error))
			return false;
		done += chunk;
	}
	return true;
}

bool
cv_gpu_mirror_commit(int mirror, CvGpuError *error)
{
	return mirror_request(CV_OP_MIRROR_COMMIT, mirror, InvalidOid, error);
}

void
cv_gpu_mirror_drop(int mirror)
{
	CvGpuError	ignored;

	/* a failed drop leaves the mirror to the LRU eviction */
	(void) mirror_request(CV_OP_MIRROR_DROP, mirror, InvalidOid, &ignored);
}

int64
cv_gpu_mirror_batch_rows(int d)
{
	return Max(1, (int64) (CV_GPU_STAGING_BYTES / (sizeof(float) * (Size) d)));
}

/* The layouts this backend has fetched, a few mirrors' worth. */
#define CACHED_LAYOUTS 8

typedef struct MirrorLayout
{
	CvGpuMirrorKey key;			/* lists 0: an empty entry */
	int64	   *ends;
	int64	   *offsets;
} MirrorLayout;

static MirrorLayout layouts[CACHED_LAYOUTS];
static int	next_layout = 0;

static bool
same_mirror(const CvGpuMirrorKey *a, const CvGpuMirrorKey *b)
{
	return a->database == b->database && a->relfilenode == b->relfilenode &&
		a->generation == b->generation && a->lists == b->lists && a->rows == b->rows;
}

/* Fetches a mirror's layout into a cache entry (replacing the oldest). */
static MirrorLayout *
fetch_layout(int mirror, const CvGpuMirrorKey *key, CvGpuError *error)
{
	MirrorLayout *entry = &layouts[next_layout];
	Size		offsets_at = MAXALIGN(sizeof(int64) * key->lists);
	Size		bytes = offsets_at + sizeof(int64) * (key->lists + 1);
	char	   *block = MemoryContextAlloc(TopMemoryContext, bytes);
	int64		args[1] = {mirror};

	/* within the searches' wait bound: a search's first step */
	if (!cv_gpu_search_request(CV_OP_MIRROR_LAYOUT, args, 1, sizeof(*key), key, block, bytes,
							   error))
	{
		pfree(block);
		return NULL;
	}
	if (entry->ends != NULL)
		pfree(entry->ends);
	entry->key = *key;
	entry->ends = (int64 *) block;
	entry->offsets = (int64 *) (block + offsets_at);
	next_layout = (next_layout + 1) % CACHED_LAYOUTS;
	return entry;
}

static const MirrorLayout *
layout_of(int mirror, const CvGpuMirrorKey *key, CvGpuError *error)
{
	for (int i = 0; i < CACHED_LAYOUTS; i++)
		if (layouts[i].ends != NULL && same_mirror(&layouts[i].key, key))
			return &layouts[i];
	return fetch_layout(mirror, key, error);
}

int
cv_gpu_search_batch_queries(int d, int k, int probes)
{
	CvGpuSearchLayout one;
	Size		per_query;

	cv_search_layout(1, d, k, probes, &one);
	per_query = one.total - one.queries;
	if (one.total > CV_GPU_STAGING_BYTES)
		return 0;
	/* 16: the two MAXALIGN paddings of the whole batch */
	return (int) Min((CV_GPU_STAGING_BYTES - one.queries - 16) / per_query, 65536);
}

/* Copies the answer out of the staging buffer, once. */
static void
take_answer(const char *payload, const CvGpuSearchLayout *at, int nq, int k, int probes,
			CvGpuSearchAnswer *answer)
{
	char	   *block = palloc_extended(at->total - at->tids, MCXT_ALLOC_HUGE);

	memcpy(block, payload + at->tids, at->total - at->tids);
	answer->nq = nq;
	answer->k = k;
	answer->probes = probes;
	answer->tids = (int64 *) block;
	answer->distances = (double *) (block + (at->distances - at->tids));
	answer->probed = (int32 *) (block + (at->probed - at->tids));
}

/* One search request, written into a staging buffer and answered there. */
static bool
send_search(const CvGpuSearchArgs *args, const CvGpuSearchLayout *at, const float *queries,
			const int32 *given, CvGpuSearchAnswer *answer, CvGpuError *error)
{
	Size		query_bytes = sizeof(float) * (Size) args->nq * args->key.dimensions;
	Size		payload_bytes = given ? at->total : at->queries + query_bytes;
	CvGpuRequest request;
	volatile bool ok = false;

	if (!cv_gpu_begin_search(&request, CV_OP_MIRROR_SEARCH, at->total, error))
		return false;
	PG_TRY();
	{
		memcpy(request.payload, args, sizeof(*args));
		memcpy(request.payload + at->queries, queries, query_bytes);
		if (given != NULL)
			memcpy(request.payload + at->probed, given,
				   sizeof(int32) * (Size) args->nq * args->probes);
		ok = cv_gpu_run(&request, NULL, 0, payload_bytes, error, NULL);
		if (ok)
			take_answer(request.payload, at, args->nq, args->k, args->probes, answer);
	}
	PG_FINALLY();
	{
		cv_gpu_end(&request);
	}
	PG_END_TRY();
	return ok;
}

bool
cv_gpu_mirror_search(int mirror, const CvGpuMirrorKey *key, const float *queries, int nq, int k,
					 int probes, const int32 *given, bool observe, CvGpuSearchAnswer *answer,
					 CvGpuError *error)
{
	const MirrorLayout *layout = layout_of(mirror, key, error);
	CvGpuSearchArgs args = {0};
	CvGpuSearchLayout at;

	if (layout == NULL)
		return false;
	args.key = *key;
	args.mirror = mirror;
	args.nq = nq;
	args.k = k;
	args.probes = Min(probes, key->lists);
	args.observe = observe && key->lattice;
	args.given = given != NULL;
	cv_search_layout(nq, key->dimensions, k, args.probes, &at);
	if (at.total > CV_GPU_STAGING_BYTES)
	{
		cv_gpu_set_error(error, CV_GPU_ERR_BAD_REQUEST, "search larger than a staging buffer");
		return false;
	}
	if (!send_search(&args, &at, queries, given, answer, error))
		return false;
	answer->ends = layout->ends;
	answer->offsets = layout->offsets;
	return true;
}

void
cv_gpu_search_answer_free(CvGpuSearchAnswer *answer)
{
	pfree(answer->tids);
}

bool
cv_gpu_mirror_observed(int mirror, const CvGpuMirrorKey *key, CvGpuObservedList *out,
					   CvGpuError *error)
{
	int64		args[1] = {mirror};
	Size		bytes = sizeof(CvGpuObservedList) * (Size) key->lists;

	if (bytes > CV_GPU_STAGING_BYTES)
	{
		cv_gpu_set_error(error, CV_GPU_ERR_BAD_REQUEST,
						 "observed health of more lists than a staging buffer holds");
		return false;
	}
	return cv_gpu_request(CV_OP_MIRROR_OBSERVED, true, args, 1, sizeof(*key), key, out, bytes,
						  NULL, error);
}

bool
cv_gpu_mirror_observed_reset(int mirror, const CvGpuMirrorKey *key, CvGpuError *error)
{
	int64		args[1] = {mirror};

	return cv_gpu_request(CV_OP_MIRROR_OBSERVED_RESET, true, args, 1, sizeof(*key), key, NULL, 0,
						  NULL, error);
}

/* DROP INDEX (and DROP TABLE, DROP SCHEMA ...): the index's mirrors go too. */
static object_access_hook_type previous_object_access = NULL;

static void
drop_mirrors_of(Oid indexid)
{
	CvGpuMirrorInfo copy[CV_GPU_MAX_MIRRORS];

	SpinLockAcquire(&cv_gpu_shared->mutex);
	memcpy(copy, cv_gpu_shared->mirrors, sizeof(copy));
	SpinLockRelease(&cv_gpu_shared->mutex);
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (copy[m].state == CV_MIRROR_READY && copy[m].key.database == MyDatabaseId &&
			copy[m].key.index == indexid)
		{
			CvGpuError	ignored;

			/* a failed drop leaves the mirror to the LRU eviction */
			(void) mirror_request(CV_OP_MIRROR_DROP, m, copy[m].key.relfilenode, &ignored);
		}
}

static void
mirror_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id,
					 void *arg)
{
	if (previous_object_access)
		previous_object_access(access, class_id, object_id, sub_id, arg);
	if (access == OAT_DROP && class_id == RelationRelationId && sub_id == 0 &&
		cv_gpu_worker_ready())
		drop_mirrors_of(object_id);
}

void
cv_gpu_install_hooks(void)
{
	previous_object_access = object_access_hook;
	object_access_hook = mirror_object_access;
}
