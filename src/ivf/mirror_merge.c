/*
 * mirror_merge.c: one query's answer from an index's mirror, merged with
 * the rows inserted into its probed lists after the mirror was made (read
 * from the pages past each list's mirrored end), in distance order.  The
 * lists are the ones the worker probed: the backend does not rank the
 * centroids again, and reads the tails of exactly the lists whose mirrored
 * rows the answer covers.
 *
 * An insert may also fill a freed slot inside a list, before the mirror's
 * end (src/ivf/page.c), where no tail read finds it.  So each grown list's
 * count is read again, under its directory page's share lock, with its
 * tail: inserts change both under that lock, so a count above the mirrored
 * rows plus the tail means slots inside the list were filled, and the
 * answer is marked stale (the caller reads on the CPU).
 */
#include "postgres.h"

#include <math.h>

#include "storage/bufmgr.h"

#include "gpu/gpu.h"
#include "ivf/mirror.h"

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
	c->distance = cvivf_distance((CvMetric) t->meta->metric, t->query, vector,
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

/*
 * One list's rows past the mirror's end, read with its directory entry
 * under the directory page's share lock; false when the entry counts more
 * live rows than the mirror and the tail hold (slots inside were filled).
 */
static bool
collect_tail(Relation index, const CvIvfMetaPageData *meta, int32 list, int64 mirrored,
			 int64 end, TailCollect *t)
{
	BlockNumber block = cvivf_directory_block(meta, list);
	Buffer		buf = ReadBuffer(index, block);
	CvIvfListEntry entry;
	int			before = t->count;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_DIRECTORY);
	memcpy(&entry, cvivf_directory_entry(BufferGetPage(buf), meta, list), sizeof(entry));
	t->skip_first = end >= 0;
	if (end >= 0)
		cvivf_scan_list_from(index, meta, (BlockNumber) (end >> 32), (Size) (end & 0xffffffff),
							 false, NULL, collect_tail_tuple, t);
	else if (BlockNumberIsValid(entry.first_block))
		cvivf_scan_list(index, meta, entry.first_block, false, NULL, collect_tail_tuple, t);
	UnlockReleaseBuffer(buf);
	return (int64) entry.tuples <= mirrored + (t->count - before);
}

/*
 * The rows inserted after the mirror into the lists the worker probed for
 * this query; false when one of those lists had slots inside it filled.
 */
static bool
collect_tails(Relation index, const CvIvfMetaPageData *meta, const CvIvfListEntry *directory,
			  const CvGpuSearchAnswer *answer, int in_batch, TailCollect *t)
{
	const int32 *probed = answer->probed + (Size) in_batch * answer->probes;
	bool		complete = true;

	for (int p = 0; p < answer->probes; p++)
	{
		int32		l = probed[p];
		int64		mirrored;

		if (l < 0 || l >= (int32) meta->lists)
			elog(ERROR, "the GPU worker probed list %d of %u", l, meta->lists);
		mirrored = answer->offsets[l + 1] - answer->offsets[l];
		/* a row this scan can see was in the directory when the scan began */
		if ((int64) directory[l].tuples <= mirrored)
			continue;
		complete &= collect_tail(index, meta, l, mirrored, answer->ends[l], t);
	}
	return complete;
}

void
cvivf_mirror_merge(Relation index, const CvIvfMetaPageData *meta,
				   const CvIvfListEntry *directory, const float *query,
				   const CvGpuSearchAnswer *answer, int in_batch,
				   CvIvfMirrorCandidate **candidates, int *trusted, bool *exhausted,
				   bool *stale)
{
	int			width = answer->k;
	const int64 *tids = answer->tids + (Size) in_batch * width;
	const double *distances = answer->distances + (Size) in_batch * width;
	TailCollect t = {0};

	t.meta = meta;
	t.query = query;
	t.capacity = width + 16;
	t.out = palloc(sizeof(CvIvfMirrorCandidate) * t.capacity);
	*exhausted = false;
	for (int r = 0; r < width; r++)
	{
		if (tids[r] < 0)
		{
			*exhausted = true;	/* the probed lists hold no more mirrored rows */
			break;
		}
		ItemPointerSet(&t.out[t.count].tid, (BlockNumber) (tids[r] >> 16),
					   (OffsetNumber) (tids[r] & 0xffff));
		t.out[t.count].distance = isnan(distances[r]) ? INFINITY : distances[r];
		t.out[t.count].order = r;
		t.count++;
	}
	*stale = !collect_tails(index, meta, directory, answer, in_batch, &t);
	qsort(t.out, t.count, sizeof(CvIvfMirrorCandidate), compare_candidates);
	*trusted = t.count;
	if (!*exhausted)
	{
		/* the farthest hit: mirrored rows past the hits are no nearer */
		double		last = isnan(distances[width - 1]) ? INFINITY : distances[width - 1];

		for (int i = 0; i < t.count; i++)
			if (t.out[i].distance > last)
			{
				*trusted = i;
				break;
			}
	}
	*candidates = t.out;
}
