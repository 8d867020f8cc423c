/*
 * scan_gpu.c: ordered index scans over the index's mirror in the GPU worker.
 *
 * The access method is not told the LIMIT, so the scan asks the worker for
 * the best 16 rows of the probed lists (enough for the usual LIMIT 10;
 * 64 cost a single query 0.06 ms more on the H200), returns them (merged with rows
 * inserted after the mirror), and asks again for four times as many when
 * the executor wants more, skipping what it returned by distance and
 * identity (rows inserted into the lists meanwhile may come before them in
 * the larger answer, so a count of rows returned would repeat some).  Past the
 * worker's largest answer, or when the worker fails, the CPU scan takes
 * over and skips the rows returned already; when the probed lists run out,
 * an iterative scan continues with the next lists on the CPU.
 */
#include "postgres.h"

#include <math.h>

#include "gpu/gpu.h"
#include "ivf/mirror.h"
#include "ivf/scan_gpu.h"
#include "ivf/scan_report.h"

#define FIRST_WIDTH 16

/*
 * Rows asked for first: FIRST_WIDTH, or CLUSTERVEC_GPU_FIRST_WIDTH from the
 * server's environment (1 to CV_GPU_SEARCH_MAX_K), for benchmarks that
 * weigh a smaller first answer against a second round trip.
 */
static int
first_width(void)
{
	static int	width = 0;

	if (width == 0)
	{
		const char *env = getenv("CLUSTERVEC_GPU_FIRST_WIDTH");
		int			wanted = env != NULL ? atoi(env) : 0;

		width = wanted >= 1 && wanted <= CV_GPU_SEARCH_MAX_K ? wanted : FIRST_WIDTH;
	}
	return width;
}

struct CvIvfGpuScan
{
	Relation	index;
	const CvIvfMetaPageData *meta;
	const float *query;
	int			probes;
	const int32 *lists;			/* the lists to probe, or NULL: the nearest */
	int			mirror;
	CvGpuMirrorKey key;
	CvIvfListEntry *directory;
	int			width;			/* hits asked for last */
	CvIvfMirrorCandidate *candidates;
	int			trusted;
	bool		exhausted;
	int			next;			/* candidates returned so far */
	double		last_distance;
	ItemPointerData *ties;		/* returned rows at last_distance */
	int			tie_count;
	int			tie_capacity;
};

CvIvfGpuScan *
cvivf_gpu_scan_begin(Relation index, const CvIvfMetaPageData *meta, const float *query,
					 int probes, const int32 *lists)
{
	CvIvfGpuScan *scan;
	CvGpuMirrorKey key;
	int			mirror;

	if (meta->flags & CVIVF_META_NO_CENTROIDS)
	{
		cv_scan_report(CV_SCAN_CPU_EMPTY);
		return NULL;
	}
	if (!cv_gpu_should_use())
	{
		cv_scan_report(cv_gpu_mode == CV_GPU_OFF ? CV_SCAN_CPU_OFF : CV_SCAN_CPU_NO_WORKER);
		return NULL;
	}
	cvivf_mirror_key(index, meta, &key);
	mirror = cv_gpu_mirror_find(&key);
	if (mirror < 0)
	{
		cv_scan_report(CV_SCAN_CPU_NO_MIRROR);
		cvivf_mirror_request(index, &key);
		return NULL;
	}
	scan = palloc0(sizeof(CvIvfGpuScan));
	scan->index = index;
	scan->meta = meta;
	scan->query = query;
	scan->probes = Min(probes, (int) meta->lists);
	scan->lists = lists;
	scan->mirror = mirror;
	scan->key = key;
	scan->directory = palloc(sizeof(CvIvfListEntry) * meta->lists);
	cvivf_read_directory(index, meta, scan->directory);
	scan->last_distance = -INFINITY;
	scan->tie_capacity = 16;
	scan->ties = palloc(sizeof(ItemPointerData) * scan->tie_capacity);
	return scan;
}

/*
 * Asks the worker for the best width rows; false when it failed.  A larger
 * answer after the first resumes after the rows returned already: those
 * nearer than the last one returned, and its ties returned so far.  A row
 * that came into the lists since the first answer and is nearer is skipped
 * too, which is right: its transaction began after this scan's snapshot
 * (an insert that the snapshot sees was in the lists before the first
 * answer), so it is invisible to this scan anyway.
 */
static bool
fetch(CvIvfGpuScan *scan, int width)
{
	CvGpuSearchAnswer answer;
	CvGpuError	error = {0};
	bool		ok,
				stale = false;

	ok = cv_gpu_mirror_search(scan->mirror, &scan->key, scan->query, 1, width, scan->probes,
							  scan->lists, scan->width == 0 && cvlattice_observe,
							  &answer, &error);
	if (ok)
	{
		if (scan->candidates)
			pfree(scan->candidates);
		cvivf_mirror_merge(scan->index, scan->meta, scan->directory, scan->query, &answer, 0,
						   &scan->candidates, &scan->trusted, &scan->exhausted, &stale);
		if (stale)
		{
			/* rows filled into freed slots of a probed list: the CPU reads it */
			cv_gpu_search_answer_free(&answer);
			if (scan->width > 0)
				cv_scan_report_takeover();
			else
				cv_scan_report(CV_SCAN_CPU_FILLED);
			return false;
		}
		if (scan->width == 0)
			cv_scan_report(CV_SCAN_GPU);
		cv_scan_report_answer(width);
		scan->width = width;
		cv_gpu_search_answer_free(&answer);
		scan->next = 0;
		while (scan->next < scan->trusted &&
			   cvivf_gpu_scan_returned(scan, &scan->candidates[scan->next].tid,
									   scan->candidates[scan->next].distance))
			scan->next++;
	}
	else
	{
		cv_gpu_fall_back("an index scan", &error);
		if (scan->width > 0)
			cv_scan_report_takeover();
		else
			cv_scan_report(error.code == CV_GPU_ERR_BUSY ? CV_SCAN_CPU_BUSY : CV_SCAN_CPU_FAILED);
	}
	return ok;
}

static void
remember(CvIvfGpuScan *scan, ItemPointer tid, double distance)
{
	if (distance != scan->last_distance)
	{
		scan->last_distance = distance;
		scan->tie_count = 0;
	}
	if (scan->tie_count == scan->tie_capacity)
	{
		scan->tie_capacity *= 2;
		scan->ties = repalloc(scan->ties, sizeof(ItemPointerData) * scan->tie_capacity);
	}
	scan->ties[scan->tie_count++] = *tid;
}

CvIvfGpuScanResult
cvivf_gpu_scan_next(CvIvfGpuScan *scan, ItemPointer tid, double *distance)
{
	if (scan->width == 0)
	{
		if (!fetch(scan, first_width()))
			return CVIVF_GPU_GIVE_UP;
		cv_gpu_count_served(CV_GPU_SERVED_SEARCH);
	}
	while (scan->next >= scan->trusted)
	{
		if (scan->exhausted)
			return CVIVF_GPU_LISTS_DONE;
		if (scan->width >= CV_GPU_SEARCH_MAX_K)
		{
			cv_scan_report_takeover();
			return CVIVF_GPU_GIVE_UP;
		}
		if (!fetch(scan, Min(CV_GPU_SEARCH_MAX_K, scan->width * 4)))
			return CVIVF_GPU_GIVE_UP;
	}
	*tid = scan->candidates[scan->next].tid;
	*distance = scan->candidates[scan->next].distance;
	scan->next++;
	remember(scan, tid, *distance);
	return CVIVF_GPU_ROW;
}

bool
cvivf_gpu_scan_returned(const CvIvfGpuScan *scan, ItemPointer tid, double distance)
{
	if (distance < scan->last_distance)
		return true;
	if (distance > scan->last_distance)
		return false;
	for (int i = 0; i < scan->tie_count; i++)
		if (ItemPointerEquals(&scan->ties[i], tid))
			return true;
	return false;
}
