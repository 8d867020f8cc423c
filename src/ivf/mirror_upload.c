/*
 * mirror_upload.c: uploading an index's mirror to the GPU worker, now
 * (clustervec_gpu_warm) or from a background worker a scan asked for.
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
#include "access/xact.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "gpu/gpu.h"
#include "ivf/mirror.h"

void
cvivf_mirror_key(Relation index, const CvIvfMetaPageData *meta, CvGpuMirrorKey *key)
{
	memset(key, 0, sizeof(*key));
	key->database = MyDatabaseId;
	key->index = RelationGetRelid(index);
	key->relfilenode = index->rd_node.relNode;
	key->generation = meta->generation;
	key->metric = (int32) meta->metric;
	key->dimensions = meta->dimensions;
	key->lists = meta->lists;
	key->lattice = meta->kind == CV_INDEX_KIND_LATTICE;
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
	if (!cv_gpu_mirror_put(u->mirror, CV_MIRROR_PART_VECTORS,
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
upload_once(Relation index, bool refresh, CvGpuError *error)
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
	if (!cv_gpu_mirror_begin(&key, refresh, &mirror, error))
		return UPLOAD_FAILED;
	if (mirror < 0)
		return UPLOAD_DONE;
	centroids = cvivf_read_centroids(index, &meta);
	if (centroids == NULL)
		centroids = palloc0(sizeof(float) * meta.dimensions * meta.lists);
	/* cvlattice: the published means for observed health, then what ranks */
	if (key.lattice &&
		!cv_gpu_mirror_put(mirror, CV_MIRROR_PART_MEANS, 0, centroids,
						   sizeof(float) * (Size) meta.dimensions * meta.lists, error))
	{
		cv_gpu_mirror_drop(mirror);
		return UPLOAD_FAILED;
	}
	if (key.lattice && meta.metric == CV_METRIC_COSINE)
		cvivf_normalise_rows(centroids, meta.lists, meta.dimensions);
	u.mirror = mirror;
	u.d = meta.dimensions;
	u.error = error;
	u.tids = palloc_extended(sizeof(int64) * Max(key.rows, 1), MCXT_ALLOC_HUGE);
	u.batch_capacity = cv_gpu_mirror_batch_rows(u.d);
	u.batch = palloc_extended(sizeof(float) * u.d * u.batch_capacity, MCXT_ALLOC_HUGE);
	offsets = palloc_extended(sizeof(int64) * (meta.lists + 1), MCXT_ALLOC_HUGE);
	ends = palloc_extended(sizeof(int64) * meta.lists, MCXT_ALLOC_HUGE);
	ok = cv_gpu_mirror_put(mirror, CV_MIRROR_PART_CENTROIDS, 0, centroids,
						   sizeof(float) * (Size) meta.dimensions * meta.lists, error) &&
		upload_lists(index, &meta, entries, &u, offsets, ends) &&
		cv_gpu_mirror_put(mirror, CV_MIRROR_PART_TIDS, 0, u.tids, sizeof(int64) * key.rows,
						  error) &&
		cv_gpu_mirror_put(mirror, CV_MIRROR_PART_OFFSETS, 0, offsets,
						  sizeof(int64) * (meta.lists + 1), error) &&
		cv_gpu_mirror_put(mirror, CV_MIRROR_PART_ENDS, 0, ends, sizeof(int64) * meta.lists,
						  error) &&
		cv_gpu_mirror_commit(mirror, error);
	if (!ok)
		cv_gpu_mirror_drop(mirror);
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
cvivf_mirror_upload(Relation index, bool refresh, CvGpuError *error)
{
	for (int attempt = 1; attempt <= UPLOAD_ATTEMPTS; attempt++)
	{
		UploadOutcome outcome = upload_once(index, refresh, error);

		if (outcome != UPLOAD_MOVED)
			return outcome == UPLOAD_DONE;
		CHECK_FOR_INTERRUPTS();
	}
	ereport(DEBUG1,
			(errmsg("index \"%s\" kept changing while its mirror was uploaded; not mirrored now",
					RelationGetRelationName(index))));
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
	if (index != NULL && cv_gpu_worker_ready() && !cvivf_mirror_upload(index, false, &error))
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
