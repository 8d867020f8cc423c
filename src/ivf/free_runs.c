/*
 * free_runs.c: the pages VACUUM or a retrain freed, as runs of contiguous
 * blocks, for the writer of a retrain's new generation (page.c's relocated
 * writer).  Its centroid and directory pages and each quantized list's
 * codes must be contiguous (their blocks are arithmetic), so without runs
 * they would always extend the index, and the pages they leave free at the
 * next retrain would never serve them again: nightly retrains would grow
 * the index by those pages each night.
 *
 * The runs are read once from the free space map; a page is taken only
 * when page.c's claim finds it still free (an insert may have taken it
 * since), so a run that lost a page is cut there.
 */
#include "postgres.h"

#include "storage/freespace.h"
#include "storage/indexfsm.h"
#include "utils/rel.h"

#include "ivf/ivf.h"

struct CvIvfFreeRuns
{
	BlockNumber *start;
	BlockNumber *length;
	int			count;
	int			capacity;
};

static void
add_run(CvIvfFreeRuns *runs, BlockNumber start, BlockNumber length)
{
	if (length == 0)
		return;
	if (runs->count == runs->capacity)
	{
		runs->capacity = Max(64, runs->capacity * 2);
		runs->start = repalloc_huge(runs->start, sizeof(BlockNumber) * runs->capacity);
		runs->length = repalloc_huge(runs->length, sizeof(BlockNumber) * runs->capacity);
	}
	runs->start[runs->count] = start;
	runs->length[runs->count++] = length;
}

/* Every run of blocks the free space map records as free. */
CvIvfFreeRuns *
cvivf_free_runs_find(Relation index)
{
	CvIvfFreeRuns *runs = palloc0(sizeof(CvIvfFreeRuns));
	BlockNumber nblocks = RelationGetNumberOfBlocks(index);
	BlockNumber first = InvalidBlockNumber;

	runs->start = palloc(sizeof(BlockNumber));
	runs->length = palloc(sizeof(BlockNumber));
	for (BlockNumber block = CVIVF_METAPAGE_BLKNO + 1; block <= nblocks; block++)
	{
		bool		free_page = block < nblocks && GetRecordedFreeSpace(index, block) > 0;

		if (free_page && !BlockNumberIsValid(first))
			first = block;
		else if (!free_page && BlockNumberIsValid(first))
		{
			add_run(runs, first, block - first);
			first = InvalidBlockNumber;
		}
	}
	return runs;
}

/* The shortest run of at least count blocks; -1 for none. */
static int
best_fit(const CvIvfFreeRuns *runs, BlockNumber count)
{
	int			best = -1;

	for (int i = 0; i < runs->count; i++)
		if (runs->length[i] >= count && (best < 0 || runs->length[i] < runs->length[best]))
			best = i;
	return best;
}

/* Gives back the pages claimed before a claim failed. */
static void
give_back(Relation index, BlockNumber start, BlockNumber count)
{
	for (BlockNumber i = 0; i < count; i++)
		cvivf_reclaim_page(index, start + i, NULL);
	if (count > 0)
		IndexFreeSpaceMapVacuum(index);
}

/*
 * Takes count contiguous free pages, each claimed (page.c); returns the
 * first, or InvalidBlockNumber when no run has them.
 */
BlockNumber
cvivf_free_runs_take(CvIvfFreeRuns *runs, Relation index, BlockNumber count)
{
	int			i;

	while ((i = best_fit(runs, count)) >= 0)
	{
		BlockNumber start = runs->start[i];
		BlockNumber claimed = 0;

		while (claimed < count && cvivf_claim_free_page(index, start + claimed))
			claimed++;
		if (claimed == count)
		{
			runs->start[i] += count;
			runs->length[i] -= count;
			return start;
		}
		/* start + claimed was taken meanwhile: the run goes on after it */
		give_back(index, start, claimed);
		add_run(runs, start, claimed);
		runs->start[i] = start + claimed + 1;
		runs->length[i] -= claimed + 1;
	}
	return InvalidBlockNumber;
}
