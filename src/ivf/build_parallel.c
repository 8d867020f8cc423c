/*
 * build_parallel.c: pass 2 of a cvivf build (the heap scan that assigns
 * every row to its nearest centroid) shared with parallel workers.
 *
 * The leader samples and trains k-means alone, before any worker starts:
 * the sample is a reservoir drawn in heap order from one seeded PRNG
 * stream, which is what makes the centroids reproducible.  It then puts
 * the centroids, a parallel heap scan and a shared tuplesort in a DSM
 * segment (nbtsort.c's pattern) and launches max_parallel_maintenance_workers
 * workers, as plan_create_index_workers grants them.  Every participant,
 * the leader included, takes blocks from the scan, assigns their rows on
 * the CPU (src/math's exact float64 argmin, the same answer in any process)
 * and sorts them into a run of its own; the leader merges the runs by
 * (list, heap TID), the serial sort's total order, and writes the lists
 * from the merge as the serial build does from its sort.  So the index is
 * the serial build's, page for page.
 *
 * Progress: the participants add the rows they assign to a shared counter
 * that the leader reports, while it scans and while it waits.  Cancel: the
 * leader's interrupts are checked in its scan and its wait, and aborting
 * the transaction stops the workers; a worker's error reaches the leader
 * through its error queue and is raised there.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "commands/progress.h"
#include "executor/instrument.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "ivf/build.h"

/* shm_toc keys of the build's DSM segment */
#define CVIVF_KEY_SHARED UINT64CONST(0xC71F000000000001)
#define CVIVF_KEY_TUPLESORT UINT64CONST(0xC71F000000000002)
#define CVIVF_KEY_CENTROIDS UINT64CONST(0xC71F000000000003)
#define CVIVF_KEY_QUERY_TEXT UINT64CONST(0xC71F000000000004)
#define CVIVF_KEY_BUFFER_USAGE UINT64CONST(0xC71F000000000005)
#define CVIVF_KEY_WAL_USAGE UINT64CONST(0xC71F000000000006)

/*
 * Centroids larger than this build serially: every worker holds two more
 * copies of them (src/math's prepared blocks), and the DSM segment lives
 * in /dev/shm, often small in containers.
 */
#define MAX_SHARED_CENTROID_BYTES ((Size) 256 * 1024 * 1024)

/* How often the waiting leader wakes to report progress, in ms. */
#define PROGRESS_POLL_MS 100

/* The state the leader shares; the parallel heap scan follows it. */
typedef struct CvIvfParallelShared
{
	/* set by the leader before the workers start */
	Oid			heap_relid;
	Oid			index_relid;
	bool		concurrent;
	CvMetric	metric;
	int			dimensions;
	int			lists;
	int			sort_states;	/* runs planned: workers planned, plus the leader */
	/* updated by the participants */
	pg_atomic_uint64 assigned;
	ConditionVariable done_cv;
	slock_t		mutex;			/* protects the fields below */
	int			participants_done;
	bool		broken_hot_chain;
} CvIvfParallelShared;

#define SHARED_SCAN(shared) \
	((ParallelTableScanDesc) ((char *) (shared) + BUFFERALIGN(sizeof(CvIvfParallelShared))))

/* The leader's handle on the workers, until the lists are written. */
struct CvIvfParallelBuild
{
	ParallelContext *pcxt;
	int			participants;	/* workers launched, plus the leader */
	CvIvfParallelShared *shared;
	Sharedsort *sharedsort;
	const float *centroids;		/* in the segment */
	Snapshot	snapshot;
	BufferUsage *buffer_usage;	/* per worker, for pg_stat_statements */
	WalUsage   *wal_usage;
};

/*
 * Tells the leader a participant's run is sorted, and whether its scan met
 * a broken HOT chain (index_build then marks the index for later snapshots).
 */
static void
mark_done(CvIvfParallelShared *shared, bool broken_hot_chain)
{
	SpinLockAcquire(&shared->mutex);
	shared->participants_done++;
	shared->broken_hot_chain |= broken_hot_chain;
	SpinLockRelease(&shared->mutex);
	ConditionVariableSignal(&shared->done_cv);
}

/*
 * One participant's share: blocks of the parallel scan, assigned on the
 * CPU, sorted into a run of the shared sort.  The leader passes progress
 * true: its scan reports blocks and the counter reports rows.
 */
static void
participate(CvIvfParallelShared *shared, Sharedsort *sharedsort, Relation heap,
			Relation index, const float *centroids, int sort_mem, bool leader)
{
	SortCoordinate coordinate = palloc0(sizeof(SortCoordinateData));
	IndexInfo  *info = BuildIndexInfo(index);
	CvIvfBuildState state;
	TableScanDesc scan;

	coordinate->isWorker = true;
	coordinate->nParticipants = -1;
	coordinate->sharedsort = sharedsort;
	info->ii_Concurrent = shared->concurrent;
	cvivf_build_participant_init(&state, heap, index, shared->metric, shared->dimensions,
								 centroids, shared->lists);
	state.shared_assigned = &shared->assigned;
	state.report_progress = leader;
	state.sort = cvivf_build_sort_begin(cvivf_build_sort_desc(index), sort_mem, coordinate);
	scan = table_beginscan_parallel(heap, SHARED_SCAN(shared));
	table_index_build_scan(heap, index, info, true, leader, cvivf_build_assign_callback,
						   &state, scan);
	cvivf_build_assign_end(&state);
	tuplesort_performsort(state.sort);

	mark_done(shared, info->ii_BrokenHotChain);
	/* the run stays in the shared fileset for the leader's merge */
	tuplesort_end(state.sort);
	ereport(DEBUG1,
			(errmsg_internal("cvivf build of \"%s\": %s assigned %lld rows",
							 RelationGetRelationName(index),
							 leader ? "the leader" : "a parallel worker",
							 (long long) state.assigned)));
}

/* Waits for every participant's run, reporting the rows assigned meanwhile. */
static void
wait_for_participants(CvIvfParallelBuild *build)
{
	CvIvfParallelShared *shared = build->shared;

	for (;;)
	{
		int			done;

		SpinLockAcquire(&shared->mutex);
		done = shared->participants_done;
		SpinLockRelease(&shared->mutex);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE,
									 (int64) pg_atomic_read_u64(&shared->assigned));
		if (done == build->participants)
			break;
		/* a timed sleep: progress moves while the workers run */
		ConditionVariableTimedSleep(&shared->done_cv, PROGRESS_POLL_MS,
									WAIT_EVENT_PARALLEL_CREATE_INDEX_SCAN);
	}
	ConditionVariableCancelSleep();
}

/* The shared state's bytes: the struct, then the parallel scan's. */
static Size
shared_bytes(Relation heap, Snapshot snapshot)
{
	return add_size(BUFFERALIGN(sizeof(CvIvfParallelShared)),
					table_parallelscan_estimate(heap, snapshot));
}

static Size
centroid_bytes(const CvIvfBuildState *state)
{
	return mul_size(mul_size(sizeof(float), state->dimensions), state->lists);
}

/* Reserves the segment's chunks; the order matches store_shared's. */
static void
estimate_segment(ParallelContext *pcxt, CvIvfBuildState *state, Snapshot snapshot,
				 int sort_states)
{
	shm_toc_estimate_chunk(&pcxt->estimator, shared_bytes(state->heap, snapshot));
	shm_toc_estimate_chunk(&pcxt->estimator, tuplesort_estimate_shared(sort_states));
	shm_toc_estimate_chunk(&pcxt->estimator, centroid_bytes(state));
	shm_toc_estimate_chunk(&pcxt->estimator, mul_size(sizeof(BufferUsage), pcxt->nworkers));
	shm_toc_estimate_chunk(&pcxt->estimator, mul_size(sizeof(WalUsage), pcxt->nworkers));
	shm_toc_estimate_keys(&pcxt->estimator, 5);
	if (debug_query_string != NULL)
	{
		shm_toc_estimate_chunk(&pcxt->estimator, strlen(debug_query_string) + 1);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}
}

/* Fills the shared struct and the parallel scan's state. */
static CvIvfParallelShared *
store_shared(ParallelContext *pcxt, CvIvfBuildState *state, Snapshot snapshot, bool concurrent,
			 int sort_states)
{
	CvIvfParallelShared *shared = shm_toc_allocate(pcxt->toc,
												   shared_bytes(state->heap, snapshot));

	shared->heap_relid = RelationGetRelid(state->heap);
	shared->index_relid = RelationGetRelid(state->index);
	shared->concurrent = concurrent;
	shared->metric = state->metric;
	shared->dimensions = state->dimensions;
	shared->lists = state->lists;
	shared->sort_states = sort_states;
	pg_atomic_init_u64(&shared->assigned, 0);
	ConditionVariableInit(&shared->done_cv);
	SpinLockInit(&shared->mutex);
	shared->participants_done = 0;
	shared->broken_hot_chain = false;
	table_parallelscan_initialize(state->heap, SHARED_SCAN(shared), snapshot);
	shm_toc_insert(pcxt->toc, CVIVF_KEY_SHARED, shared);
	return shared;
}

/* Everything else the workers read: the sort, the centroids, the query, usage slots. */
static void
store_segment(CvIvfParallelBuild *build, CvIvfBuildState *state, int sort_states)
{
	ParallelContext *pcxt = build->pcxt;
	float	   *centroids;

	build->sharedsort = shm_toc_allocate(pcxt->toc, tuplesort_estimate_shared(sort_states));
	tuplesort_initialize_shared(build->sharedsort, sort_states, pcxt->seg);
	shm_toc_insert(pcxt->toc, CVIVF_KEY_TUPLESORT, build->sharedsort);
	centroids = shm_toc_allocate(pcxt->toc, centroid_bytes(state));
	memcpy(centroids, state->centroids, centroid_bytes(state));
	shm_toc_insert(pcxt->toc, CVIVF_KEY_CENTROIDS, centroids);
	build->centroids = centroids;
	build->buffer_usage = shm_toc_allocate(pcxt->toc,
										   mul_size(sizeof(BufferUsage), pcxt->nworkers));
	shm_toc_insert(pcxt->toc, CVIVF_KEY_BUFFER_USAGE, build->buffer_usage);
	build->wal_usage = shm_toc_allocate(pcxt->toc, mul_size(sizeof(WalUsage), pcxt->nworkers));
	shm_toc_insert(pcxt->toc, CVIVF_KEY_WAL_USAGE, build->wal_usage);
	if (debug_query_string != NULL)
	{
		Size		length = strlen(debug_query_string) + 1;
		char	   *query = shm_toc_allocate(pcxt->toc, length);

		memcpy(query, debug_query_string, length);
		shm_toc_insert(pcxt->toc, CVIVF_KEY_QUERY_TEXT, query);
	}
}

/*
 * Enters parallel mode, sets up the segment and launches up to request
 * workers.  NULL when the build should stay serial: no segment could be
 * made, or no worker started (the serial pass is then the cheaper one).
 */
static CvIvfParallelBuild *
begin_parallel(CvIvfBuildState *state, bool concurrent, int request)
{
	CvIvfParallelBuild *build = palloc0(sizeof(CvIvfParallelBuild));
	int			sort_states = request + 1;	/* the leader sorts a run too */

	EnterParallelMode();
	build->pcxt = CreateParallelContext("clustervec", "cvivf_parallel_build_main", request);
	/* a concurrent build sees what its snapshot sees; a plain one every tuple, as serially */
	build->snapshot = concurrent ? RegisterSnapshot(GetTransactionSnapshot()) : SnapshotAny;
	estimate_segment(build->pcxt, state, build->snapshot, sort_states);
	InitializeParallelDSM(build->pcxt);
	if (build->pcxt->seg == NULL)
	{
		cvivf_parallel_end(build);
		return NULL;
	}
	build->shared = store_shared(build->pcxt, state, build->snapshot, concurrent, sort_states);
	store_segment(build, state, sort_states);
	LaunchParallelWorkers(build->pcxt);
	build->participants = build->pcxt->nworkers_launched + 1;
	ereport(DEBUG1,
			(errmsg_internal("cvivf build of \"%s\": %d parallel workers launched of %d planned",
							 RelationGetRelationName(state->index),
							 build->pcxt->nworkers_launched, request)));
	if (build->pcxt->nworkers_launched == 0)
	{
		cvivf_parallel_end(build);
		return NULL;
	}
	return build;
}

/* The leader's merge of every participant's run, in the serial sort's order. */
static void
merge_runs(CvIvfBuildState *state, CvIvfParallelBuild *build)
{
	SortCoordinate coordinate = palloc0(sizeof(SortCoordinateData));
	TupleDesc	desc = cvivf_build_sort_desc(state->index);

	coordinate->isWorker = false;
	coordinate->nParticipants = build->participants;
	coordinate->sharedsort = build->sharedsort;
	state->sorted_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	state->sort = cvivf_build_sort_begin(desc, maintenance_work_mem, coordinate);
	tuplesort_performsort(state->sort);
}

/*
 * Pass 2 in parallel, when the planner grants workers: on return the
 * leader's merge of every run is sorted and ready in state->sort, as the
 * serial pass leaves its own sort.  false: do the serial pass instead.
 */
bool
cvivf_parallel_assign(CvIvfBuildState *state, IndexInfo *info)
{
	int			request = cv_index_build_workers(state->heap, state->index, info);
	CvIvfParallelBuild *build;

	if (request <= 0)
		return false;
	if (centroid_bytes(state) > MAX_SHARED_CENTROID_BYTES)
	{
		ereport(DEBUG1,
				(errmsg_internal("cvivf build of \"%s\": %zu MB of centroids, built without workers",
								 RelationGetRelationName(state->index),
								 centroid_bytes(state) / (1024 * 1024))));
		return false;
	}
	build = begin_parallel(state, info->ii_Concurrent, request);
	if (build == NULL)
		return false;
	participate(build->shared, build->sharedsort, state->heap, state->index, build->centroids,
				maintenance_work_mem / build->participants, true);
	/* raises if a worker failed to start, which would never report done */
	WaitForParallelWorkersToAttach(build->pcxt);
	wait_for_participants(build);
	state->assigned = (int64) pg_atomic_read_u64(&build->shared->assigned);
	if (build->shared->broken_hot_chain)
		info->ii_BrokenHotChain = true;
	merge_runs(state, build);
	state->parallel = build;
	return true;
}

/*
 * After the leader's merge is read and ended (its runs live in the
 * segment's fileset): waits for the workers to exit, adds their buffer and
 * WAL usage to the statement's, and leaves parallel mode.
 */
void
cvivf_parallel_end(CvIvfParallelBuild *build)
{
	WaitForParallelWorkersToFinish(build->pcxt);
	for (int i = 0; i < build->pcxt->nworkers_launched; i++)
		InstrAccumParallelQuery(&build->buffer_usage[i], &build->wal_usage[i]);
	if (IsMVCCSnapshot(build->snapshot))
		UnregisterSnapshot(build->snapshot);
	DestroyParallelContext(build->pcxt);
	ExitParallelMode();
}

/*
 * A parallel worker's entry point (CreateParallelContext names it, with the
 * library, so the worker loads clustervec to find it).
 */
void
cvivf_parallel_build_main(dsm_segment *seg, shm_toc *toc)
{
	CvIvfParallelShared *shared = shm_toc_lookup(toc, CVIVF_KEY_SHARED, false);
	Sharedsort *sharedsort = shm_toc_lookup(toc, CVIVF_KEY_TUPLESORT, false);
	/* the locks index.c holds in the leader; the lock group shares them */
	LOCKMODE	heap_lock = shared->concurrent ? ShareUpdateExclusiveLock : ShareLock;
	LOCKMODE	index_lock = shared->concurrent ? RowExclusiveLock : AccessExclusiveLock;
	Relation	heap;
	Relation	index;
	BufferUsage *buffer_usage;
	WalUsage   *wal_usage;

	debug_query_string = shm_toc_lookup(toc, CVIVF_KEY_QUERY_TEXT, true);
	pgstat_report_activity(STATE_RUNNING, debug_query_string);
	heap = table_open(shared->heap_relid, heap_lock);
	index = index_open(shared->index_relid, index_lock);
	tuplesort_attach_shared(sharedsort, seg);
	InstrStartParallelQuery();
	participate(shared, sharedsort, heap, index,
				shm_toc_lookup(toc, CVIVF_KEY_CENTROIDS, false),
				maintenance_work_mem / shared->sort_states, false);
	buffer_usage = shm_toc_lookup(toc, CVIVF_KEY_BUFFER_USAGE, false);
	wal_usage = shm_toc_lookup(toc, CVIVF_KEY_WAL_USAGE, false);
	InstrEndParallelQuery(&buffer_usage[ParallelWorkerNumber], &wal_usage[ParallelWorkerNumber]);
	index_close(index, index_lock);
	table_close(heap, heap_lock);
}
