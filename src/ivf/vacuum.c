/*
 * vacuum.c: ambulkdelete asks the callback about every index tuple (CREATE
 * INDEX CONCURRENTLY and REINDEX CONCURRENTLY depend on that) and flags the
 * dead ones; amvacuumcleanup reports statistics.
 */
#include "postgres.h"

#include "commands/vacuum.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "ivf/ivf.h"

typedef struct DeadTuple
{
	BlockNumber block;
	Size		offset;
} DeadTuple;

typedef struct BulkDeleteState
{
	IndexBulkDeleteCallback callback;
	void	   *callback_state;
	IndexBulkDeleteResult *stats;
	bool		generation_bumped;
	DeadTuple  *dead;
	int			dead_count;
	int			dead_capacity;
} BulkDeleteState;

static void
judge_tuple(const CvIvfTupleHeader *header, const float *vector pg_attribute_unused(),
			BlockNumber block, Size offset, void *arg)
{
	BulkDeleteState *state = (BulkDeleteState *) arg;

	if (!state->callback((ItemPointer) &header->heap_tid, state->callback_state))
	{
		state->stats->num_index_tuples++;
		return;
	}
	if (state->dead_count == state->dead_capacity)
	{
		state->dead_capacity *= 2;
		state->dead = repalloc_huge(state->dead, sizeof(DeadTuple) * state->dead_capacity);
	}
	state->dead[state->dead_count].block = block;
	state->dead[state->dead_count].offset = offset;
	state->dead_count++;
}

/*
 * Flags the collected dead tuples of one list, one page (one WAL record,
 * with the list's count) at a time.  The generation goes up before the
 * first flag, so no older mirror outlives a change it did not see (and up
 * again after the last one: see cvivfbulkdelete).
 */
static int64
flag_dead(Relation index, const CvIvfMetaPageData *meta, int list, BulkDeleteState *state,
		  BufferAccessStrategy strategy)
{
	int64		removed = 0;
	Size	   *offsets = palloc(sizeof(Size) * Max(state->dead_count, 1));
	int			start = 0;

	if (state->dead_count > 0 && !state->generation_bumped)
	{
		cvivf_bump_generation(index);
		state->generation_bumped = true;
	}
	while (start < state->dead_count)
	{
		int			end = start;

		while (end < state->dead_count && state->dead[end].block == state->dead[start].block)
		{
			offsets[end - start] = state->dead[end].offset;
			end++;
		}
		removed += cvivf_mark_dead(index, meta, list, state->dead[start].block, offsets,
								   end - start, strategy);
		start = end;
		vacuum_delay_point();	/* no page lock is held here */
	}
	pfree(offsets);
	state->dead_count = 0;
	return removed;
}

IndexBulkDeleteResult *
cvivfbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				IndexBulkDeleteCallback callback, void *callback_state)
{
	return cvivf_bulkdelete_lists(info, stats, callback, callback_state, NULL, NULL);
}

/*
 * The bulk delete of both kinds: after the dead tuples of a list are
 * flagged, changed (when not NULL) is told about the list, before the
 * generation goes up the second time (cvlattice recomputes its mean there).
 */
IndexBulkDeleteResult *
cvivf_bulkdelete_lists(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
					   IndexBulkDeleteCallback callback, void *callback_state,
					   CvIvfListChanged changed, void *arg)
{
	Relation	index = info->index;
	CvIvfMetaPageData meta;
	BulkDeleteState state = {0};
	int64		removed_total = 0;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	cvivf_read_meta(index, &meta);
	state.callback = callback;
	state.callback_state = callback_state;
	state.stats = stats;
	state.dead_capacity = 1024;
	state.dead = palloc(sizeof(DeadTuple) * state.dead_capacity);
	for (uint32 list = 0; list < meta.lists; list++)
	{
		CvIvfListEntry entry;
		int64		removed;

		cvivf_read_list_entry(index, &meta, list, &entry);
		if (!BlockNumberIsValid(entry.first_block))
			continue;
		cvivf_scan_list(index, &meta, entry.first_block, false, info->strategy,
						judge_tuple, &state);
		removed = flag_dead(index, &meta, list, &state, info->strategy);
		if (removed > 0 && changed != NULL)
			changed(index, &meta, list, info->strategy, arg);
		removed_total += removed;
		vacuum_delay_point();
	}
	/*
	 * A mirror uploaded while the flags went in holds tuples that are dead
	 * now, whose heap TIDs the heap's vacuum is about to free for reuse, and
	 * directory counts that fell under it (so rows inserted later would not
	 * look like growth): it must not serve, so the generation goes up again.
	 */
	if (state.generation_bumped)
		cvivf_bump_generation(index);
	stats->tuples_removed += removed_total;
	stats->num_pages = RelationGetNumberOfBlocks(index);
	return stats;
}

/* Without a bulk delete, counts the live tuples from the directory. */
IndexBulkDeleteResult *
cvivfvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	CvIvfMetaPageData meta;

	if (info->analyze_only)
		return stats;
	if (stats == NULL)
	{
		stats = palloc0(sizeof(IndexBulkDeleteResult));
		cvivf_read_meta(info->index, &meta);
		for (uint32 list = 0; list < meta.lists; list++)
		{
			CvIvfListEntry entry;

			cvivf_read_list_entry(info->index, &meta, list, &entry);
			stats->num_index_tuples += entry.tuples;
		}
	}
	stats->num_pages = RelationGetNumberOfBlocks(info->index);
	return stats;
}
