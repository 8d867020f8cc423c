/*
 * mirror.c: uploading a cvivf index's mirror to the GPU worker, and
 * searching it.
 *
 * The upload reads the directory (each list's live tuple count), then each
 * list's chain, and sends the centroids, the vectors packed list after
 * list, their heap TIDs and, per list, the position of the last tuple it
 * took.  Inserts that land meanwhile are past those positions: scans read
 * them from the pages.  The key carries the index's generation, which
 * every vacuum and rebuild bumps, so a mirror is never used on changed
 * lists.
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/snapmgr.h"
#include "postmaster/bgworker.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "clustervec_cuda.h"
#include "ivf/mirror.h"
#include "worker/remote.h"
#include "worker/worker.h"

void
cvivf_mirror_key(Relation index, const CvIvfMetaPageData *meta, CvGpuMirrorKey *key)
{
	memset(key, 0, sizeof(*key));
	key->database = MyDatabaseId;
	key->index = RelationGetRelid(index);
	key->relfilenode = index->rd_node.relNode;
	key->generation = meta->generation;
	key->metric = meta->metric == CVIVF_METRIC_L2 ? CVCUDA_METRIC_L2 :
		meta->metric == CVIVF_METRIC_INNER_PRODUCT ? CVCUDA_METRIC_IP : CVCUDA_METRIC_COSINE;
	key->dimensions = meta->dimensions;
	key->lists = meta->lists;
}

int
cvivf_mirror_find(const CvGpuMirrorKey *key)
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
			found = m;
	}
	SpinLockRelease(&cv_gpu_shared->mutex);
	return found;
}

/* One upload request: bytes of one part at a byte offset. */
static bool
put_part(int mirror, int part, Size offset, const void *data, Size bytes, CvGpuError *error)
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

/* A request about one mirror (args: its number, and a relfilenode or 0). */
static bool
mirror_request(int opcode, int mirror, Oid relfilenode, CvGpuError *error)
{
	int64		args[2] = {mirror, relfilenode};

	return cv_gpu_request(opcode, false, args, 2, 0, NULL, NULL, 0, NULL, error);
}

/* Starts a mirror; *mirror is -1 when one with this key exists or is being made. */
static bool
begin_mirror(const CvGpuMirrorKey *key, int *mirror, CvGpuError *error)
{
	int64		args[1];
	int64		result[2];

	/* the worker frees an unfinished mirror once this transaction ends */
	args[0] = (int64) pg_atomic_read_u64(&cv_gpu_owner_epochs->epoch[MyProc->pgprocno]);
	cv_gpu_note_allocation();
	if (!cv_gpu_request(CV_OP_MIRROR_BEGIN, true, args, 1, sizeof(*key), key, NULL, 0, result,
						error))
		return false;
	*mirror = (int) result[0];
	return true;
}

/* Collects one list's first `wanted` live tuples into the upload buffers. */
typedef struct ListUpload
{
	int			mirror;
	int			d;
	int64		wanted;			/* this list's live tuples per the directory */
	int64		taken;			/* of this list */
	int64		row;			/* rows of the mirror so far */
	int64	   *tids;			/* all rows */
	float	   *batch;			/* vectors not yet sent */
	int64		batch_rows;
	int64		batch_capacity;
	int64		batch_first_row;
	int64		end;			/* the last taken tuple's position, or -1 */
	bool		failed;			/* the worker failed a request */
	bool		moved;			/* a list held fewer live tuples than the directory said */
	CvGpuError *error;
} ListUpload;

static void
flush_vectors(ListUpload *u)
{
	if (u->batch_rows == 0 || u->failed)
		return;
	if (!put_part(u->mirror, CV_MIRROR_PART_VECTORS,
				  sizeof(float) * (Size) u->batch_first_row * u->d, u->batch,
				  sizeof(float) * (Size) u->batch_rows * u->d, u->error))
		u->failed = true;
	u->batch_first_row += u->batch_rows;
	u->batch_rows = 0;
}

static void
take_tuple(const CvIvfTupleHeader *header, const float *vector, BlockNumber block, Size offset,
		   void *arg)
{
	ListUpload *u = (ListUpload *) arg;

	if (u->taken >= u->wanted || u->failed)
		return;
	u->tids[u->row] = ((int64) ItemPointerGetBlockNumber(&header->heap_tid) << 16) |
		ItemPointerGetOffsetNumber(&header->heap_tid);
	memcpy(u->batch + u->batch_rows * u->d, vector, sizeof(float) * u->d);
	u->batch_rows++;
	u->row++;
	u->taken++;
	u->end = ((int64) block << 32) | (int64) offset;
	if (u->batch_rows == u->batch_capacity)
		flush_vectors(u);
}

/*
 * A list held fewer live tuples than the directory read before it.  A
 * VACUUM between the two reads does that (it changes a list's dead flags
 * and its directory count together, after our directory read): then the
 * metapage or the directory differs now, and the upload starts again.
 * Only a difference that is still there in a still picture is corruption.
 */
static void
check_list_shortfall(Relation index, const CvIvfMetaPageData *meta,
					 const CvIvfListEntry *entries, uint32 list, const ListUpload *u)
{
	CvIvfMetaPageData now;
	CvIvfListEntry *current;
	bool		still;

	cvivf_read_meta(index, &now);
	still = now.generation == meta->generation && now.lists == meta->lists;
	if (still)
	{
		current = palloc(sizeof(CvIvfListEntry) * now.lists);
		cvivf_read_directory(index, &now, current);
		still = memcmp(current, entries, sizeof(CvIvfListEntry) * now.lists) == 0;
		pfree(current);
	}
	if (still)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("list %u of index \"%s\" has %lld live tuples, its directory says %lld",
						list, RelationGetRelationName(index), (long long) u->taken,
						(long long) u->wanted),
				 errhint("Please REINDEX it.")));
}

/* Reads every list into the mirror; false when the worker failed or the lists moved. */
static bool
upload_lists(Relation index, const CvIvfMetaPageData *meta, const CvIvfListEntry *entries,
			 ListUpload *u, int64 *offsets, int64 *ends)
{
	offsets[0] = 0;
	for (uint32 list = 0; list < meta->lists && !u->failed; list++)
	{
		u->wanted = (int64) entries[list].tuples;
		u->taken = 0;
		u->end = -1;
		if (BlockNumberIsValid(entries[list].first_block) && u->wanted > 0)
			cvivf_scan_list(index, meta, entries[list].first_block, false, NULL, take_tuple, u);
		if (u->taken != u->wanted)
		{
			check_list_shortfall(index, meta, entries, list, u);
			u->moved = true;
			return false;
		}
		offsets[list + 1] = u->row;
		ends[list] = u->end;
		CHECK_FOR_INTERRUPTS();
	}
	flush_vectors(u);
	return !u->failed;
}

/* How one attempt at an upload ended. */
typedef enum UploadOutcome
{
	UPLOAD_DONE,				/* a mirror is ready, or being made by someone else */
	UPLOAD_FAILED,				/* the worker failed: *error says why */
	UPLOAD_MOVED				/* the index changed under the reads: try again */
} UploadOutcome;

static UploadOutcome
upload_once(Relation index, CvGpuError *error)
{
	CvIvfMetaPageData meta;
	CvGpuMirrorKey key;
	CvIvfListEntry *entries;
	ListUpload	u = {0};
	float	   *centroids;
	int64	   *offsets,
			   *ends;
	int			mirror;
	bool		ok;

	cvivf_read_meta(index, &meta);
	cvivf_mirror_key(index, &meta, &key);
	entries = palloc(sizeof(CvIvfListEntry) * meta.lists);
	cvivf_read_directory(index, &meta, entries);
	for (uint32 list = 0; list < meta.lists; list++)
		key.rows += (int64) entries[list].tuples;
	if (!begin_mirror(&key, &mirror, error))
		return UPLOAD_FAILED;
	if (mirror < 0)
		return UPLOAD_DONE;
	centroids = cvivf_read_centroids(index, &meta);
	if (centroids == NULL)
		centroids = palloc0(sizeof(float) * meta.dimensions * meta.lists);
	u.mirror = mirror;
	u.d = meta.dimensions;
	u.error = error;
	u.tids = palloc_extended(sizeof(int64) * Max(key.rows, 1), MCXT_ALLOC_HUGE);
	u.batch_capacity = Max(1, (int64) (CV_GPU_STAGING_BYTES / (sizeof(float) * u.d)));
	u.batch = palloc_extended(sizeof(float) * u.d * u.batch_capacity, MCXT_ALLOC_HUGE);
	offsets = palloc_extended(sizeof(int64) * (meta.lists + 1), MCXT_ALLOC_HUGE);
	ends = palloc_extended(sizeof(int64) * meta.lists, MCXT_ALLOC_HUGE);
	ok = put_part(mirror, CV_MIRROR_PART_CENTROIDS, 0, centroids,
				  sizeof(float) * (Size) meta.dimensions * meta.lists, error) &&
		upload_lists(index, &meta, entries, &u, offsets, ends) &&
		put_part(mirror, CV_MIRROR_PART_TIDS, 0, u.tids, sizeof(int64) * key.rows, error) &&
		put_part(mirror, CV_MIRROR_PART_OFFSETS, 0, offsets,
				 sizeof(int64) * (meta.lists + 1), error) &&
		put_part(mirror, CV_MIRROR_PART_ENDS, 0, ends, sizeof(int64) * meta.lists, error) &&
		mirror_request(CV_OP_MIRROR_COMMIT, mirror, InvalidOid, error);
	if (!ok)
	{
		CvGpuError	ignored;

		(void) mirror_request(CV_OP_MIRROR_DROP, mirror, InvalidOid, &ignored);
	}
	pfree(u.tids);
	pfree(u.batch);
	pfree(offsets);
	pfree(ends);
	pfree(entries);
	return ok ? UPLOAD_DONE : u.moved ? UPLOAD_MOVED : UPLOAD_FAILED;
}

/*
 * Under concurrent VACUUMs an attempt can find its directory outdated; a few
 * more attempts usually see a still index.  Past them the index stays
 * unmirrored for now (scans run on the CPU and ask again), which is no error.
 */
#define UPLOAD_ATTEMPTS 4

bool
cvivf_mirror_upload(Relation index, CvGpuError *error)
{
	for (int attempt = 1; attempt <= UPLOAD_ATTEMPTS; attempt++)
	{
		UploadOutcome outcome = upload_once(index, error);

		if (outcome != UPLOAD_MOVED)
			return outcome == UPLOAD_DONE;
		CHECK_FOR_INTERRUPTS();
	}
	ereport(DEBUG1,
			(errmsg("index \"%s\" kept changing while its mirror was uploaded; not mirrored now",
					RelationGetRelationName(index))));
	return true;
}

int
cvivf_mirror_batch_queries(int lists, int d, int k)
{
	Size		fixed = cv_search_hits_offset(lists);
	Size		per_query = Max(sizeof(float) * (Size) d, sizeof(CvGpuSearchHit) * (Size) k) +
		sizeof(float) * (Size) d + sizeof(CvGpuSearchHit) * (Size) k;

	if (fixed >= CV_GPU_STAGING_BYTES)
		return 0;
	return (int) Min((CV_GPU_STAGING_BYTES - fixed) / per_query, 65536);
}

bool
cvivf_mirror_search(int mirror, const CvGpuMirrorKey *key, const float *queries, int nq,
					int k, int probes, CvIvfMirrorAnswer *answer, CvGpuError *error)
{
	CvGpuSearchArgs args = {0};
	Size		head = MAXALIGN(sizeof(CvGpuSearchArgs));
	Size		offsets_at = MAXALIGN(sizeof(int64) * key->lists);
	Size		hits_at = cv_search_hits_offset(key->lists) - head;
	Size		answer_bytes = hits_at + sizeof(CvGpuSearchHit) * (Size) nq * k;

	args.key = *key;
	args.mirror = mirror;
	args.nq = nq;
	args.k = k;
	args.probes = probes;
	answer->block = palloc_extended(answer_bytes, MCXT_ALLOC_HUGE);
	if (!cv_gpu_call(CV_OP_MIRROR_SEARCH, &args, sizeof(args), queries,
					 sizeof(float) * (Size) nq * key->dimensions, answer->block, answer_bytes,
					 error))
	{
		pfree(answer->block);
		return false;
	}
	answer->ends = (int64 *) answer->block;
	answer->offsets = (int64 *) (answer->block + offsets_at);
	answer->hits = (CvGpuSearchHit *) (answer->block + hits_at);
	return true;
}

/* The background upload: a worker connected to the index's database. */
PGDLLEXPORT void cvivf_mirror_worker_main(Datum arg);

void
cvivf_mirror_worker_main(Datum arg)
{
	Oid			database;
	Oid			indexid = DatumGetObjectId(arg);
	CvGpuError	error = {0};
	Relation	index;

	memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	index = try_relation_open(indexid, AccessShareLock);
	if (index != NULL && cv_gpu_worker_ready() && !cvivf_mirror_upload(index, &error))
		ereport(LOG,
				(errmsg("clustervec could not mirror index \"%s\": %s",
						RelationGetRelationName(index), error.message)));
	if (index != NULL)
		relation_close(index, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

void
cvivf_mirror_request(Relation index, const CvGpuMirrorKey *key)
{
	static Oid	last_relfilenode = InvalidOid;
	static uint64 last_generation = 0;
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;

	if (key->relfilenode == last_relfilenode && key->generation == last_generation)
		return;
	last_relfilenode = key->relfilenode;
	last_generation = key->generation;
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "clustervec", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "cvivf_mirror_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "clustervec mirror of index %u", RelationGetRelid(index));
	strlcpy(worker.bgw_type, "clustervec mirror upload", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(RelationGetRelid(index));
	memcpy(worker.bgw_extra, &MyDatabaseId, sizeof(Oid));
	worker.bgw_notify_pid = 0;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		ereport(DEBUG1,
				(errmsg("no background worker slot to mirror index \"%s\"",
						RelationGetRelationName(index))));
}

void
cvivf_mirror_answer_free(CvIvfMirrorAnswer *answer)
{
	pfree(answer->block);
}

/* Rows of one list past the mirror's end, as candidates. */
typedef struct TailCollect
{
	const CvIvfMetaPageData *meta;
	const float *query;
	CvIvfMirrorCandidate *out;
	int			count;
	int			capacity;
	bool		skip_first;		/* the mirror's last tuple of the list */
} TailCollect;

static void
collect_tail_tuple(const CvIvfTupleHeader *header, const float *vector,
				   BlockNumber block pg_attribute_unused(), Size offset pg_attribute_unused(),
				   void *arg)
{
	TailCollect *t = (TailCollect *) arg;
	CvIvfMirrorCandidate *c;

	if (t->skip_first)
	{
		t->skip_first = false;
		return;
	}
	if (t->count == t->capacity)
	{
		t->capacity *= 2;
		t->out = repalloc_huge(t->out, sizeof(CvIvfMirrorCandidate) * t->capacity);
	}
	c = &t->out[t->count];
	c->tid = header->heap_tid;
	c->distance = cvivf_distance((CvIvfMetric) t->meta->metric, t->query, vector,
								 t->meta->dimensions);
	if (isnan(c->distance))
		c->distance = INFINITY;
	c->order = INT64_MAX / 2 + t->count;
	t->count++;
}

static int
compare_candidates(const void *a, const void *b)
{
	const CvIvfMirrorCandidate *x = a;
	const CvIvfMirrorCandidate *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return x->order < y->order ? -1 : (x->order > y->order ? 1 : 0);
}

/* Whether any list has rows the mirror lacks. */
static bool
lists_grew(const CvIvfMetaPageData *meta, const CvIvfListEntry *directory,
		   const CvIvfMirrorAnswer *answer)
{
	for (uint32 l = 0; l < meta->lists; l++)
		if ((int64) directory[l].tuples > answer->offsets[l + 1] - answer->offsets[l])
			return true;
	return false;
}

/* The rows inserted after the mirror into the query's probes nearest lists. */
static void
collect_tails(Relation index, const CvIvfMetaPageData *meta, const CvIvfListEntry *directory,
			  const float *centroids, int probes, const CvIvfMirrorAnswer *answer,
			  TailCollect *t)
{
	int			lists = meta->lists;
	int			d = meta->dimensions;
	CvIvfMirrorCandidate *ranked = palloc(sizeof(CvIvfMirrorCandidate) * lists);

	for (int l = 0; l < lists; l++)
	{
		ranked[l].order = l;
		ranked[l].distance = centroids == NULL ? 0 :
			cvivf_centroid_distance((CvIvfMetric) meta->metric, t->query,
									centroids + (Size) l * d, d);
		if (isnan(ranked[l].distance))
			ranked[l].distance = INFINITY;
	}
	qsort(ranked, lists, sizeof(CvIvfMirrorCandidate), compare_candidates);
	for (int r = 0; r < Min(probes, lists); r++)
	{
		int			l = (int) ranked[r].order;
		int64		end = answer->ends[l];

		if ((int64) directory[l].tuples <= answer->offsets[l + 1] - answer->offsets[l])
			continue;
		t->skip_first = end >= 0;
		if (end >= 0)
			cvivf_scan_list_from(index, meta, (BlockNumber) (end >> 32), (Size) (end & 0xffffffff),
								 false, NULL, collect_tail_tuple, t);
		else if (BlockNumberIsValid(directory[l].first_block))
			cvivf_scan_list(index, meta, directory[l].first_block, false, NULL,
							collect_tail_tuple, t);
	}
	pfree(ranked);
}

void
cvivf_mirror_merge(Relation index, const CvIvfMetaPageData *meta,
				   const CvIvfListEntry *directory, const float *centroids, const float *query,
				   int probes, const CvIvfMirrorAnswer *answer, int in_batch, int width,
				   CvIvfMirrorCandidate **candidates, int *trusted, bool *exhausted)
{
	const CvGpuSearchHit *hits = answer->hits + (Size) in_batch * width;
	TailCollect t = {0};

	t.meta = meta;
	t.query = query;
	t.capacity = width + 16;
	t.out = palloc(sizeof(CvIvfMirrorCandidate) * t.capacity);
	*exhausted = false;
	for (int r = 0; r < width; r++)
	{
		if (hits[r].tid < 0)
		{
			*exhausted = true;	/* the probed lists hold no more mirrored rows */
			break;
		}
		ItemPointerSet(&t.out[t.count].tid, (BlockNumber) (hits[r].tid >> 16),
					   (OffsetNumber) (hits[r].tid & 0xffff));
		t.out[t.count].distance = isnan(hits[r].distance) ? INFINITY : hits[r].distance;
		t.out[t.count].order = r;
		t.count++;
	}
	if (lists_grew(meta, directory, answer))
		collect_tails(index, meta, directory, centroids, probes, answer, &t);
	qsort(t.out, t.count, sizeof(CvIvfMirrorCandidate), compare_candidates);
	*trusted = t.count;
	if (!*exhausted)
	{
		/* the farthest hit: mirrored rows past the hits are no nearer */
		double		last = isnan(hits[width - 1].distance) ? INFINITY : hits[width - 1].distance;

		for (int i = 0; i < t.count; i++)
			if (t.out[i].distance > last)
			{
				*trusted = i;
				break;
			}
	}
	*candidates = t.out;
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
cvivf_mirror_install_hooks(void)
{
	previous_object_access = object_access_hook;
	object_access_hook = mirror_object_access;
}
