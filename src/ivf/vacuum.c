/*
 * vacuum.c: ambulkdelete asks the callback about every index tuple (CREATE
 * INDEX CONCURRENTLY and REINDEX CONCURRENTLY depend on that) and flags the
 * dead ones; then it records where each list's dead slots are, for inserts
 * to fill (ivf.h, "Space reuse"), and reclaims the pages no chain reaches;
 * amvacuumcleanup reports statistics.
 *
 * Reclaiming pages.  A multi-record insert writes its continuation pages
 * before the record that links them: a crash (or an error) in between
 * leaves them on no chain.  Pages never leave a chain, so a page no chain
 * reaches was never reachable, and no scan can hold a pointer to it; it
 * can go to the free space map at once, with no wait for old snapshots
 * (and no recovery conflict on a standby).  What must be told apart is an
 * insert still running, whose pages are not linked yet: it holds them
 * locked until its linking record, so VACUUM waits for each candidate's
 * lock and then walks the lists' tails again (inserts link new pages only
 * after a list's last page) before it reclaims what is still unreached.
 *
 * After cvivf_retrain switched generations (ivf.h, "Retraining"), the old
 * generation's pages are unreached but were reachable, so nothing is
 * reclaimed until every snapshot is newer than the switch (retired_xid);
 * then every unreached page of a cvivf index goes, whatever its kind, and
 * so do the pages a crashed retrain wrote before its switch.
 */
#include "postgres.h"

#include "access/transam.h"
#include "commands/vacuum.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "ivf/ivf.h"
#include "lattice/lattice.h"

typedef struct DeadTuple
{
	BlockNumber block;
	Size		offset;
	uint32		ordinal;		/* the slot's place in its list, in chain order */
	ItemPointerData tid;
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
	CvIvfReuseEntry reuse;		/* the walked list's entry, as its slots go by */
	bool	   *reached;		/* blocks below nblocks some chain reached */
	BlockNumber nblocks;
	BlockNumber last_page;		/* the walked list's last page */
	uint32		slots;			/* slots of the walked list so far, dead or live */
} BulkDeleteState;

static const CvIvfSlot no_slot = {InvalidBlockNumber, 0};

/* Follows the slots of a list in chain order: its first dead one, the start of its dead tail. */
static void
note_slot(BulkDeleteState *state, BlockNumber block, Size offset, bool dead)
{
	CvIvfSlot	slot = {block, (uint32) offset};

	if (!dead)
	{
		state->reuse.dead_tail = no_slot;
		return;
	}
	if (!BlockNumberIsValid(state->reuse.first_dead.block))
		state->reuse.first_dead = slot;
	if (!BlockNumberIsValid(state->reuse.dead_tail.block))
		state->reuse.dead_tail = slot;
}

static void
note_page(BlockNumber block, void *arg)
{
	BulkDeleteState *state = (BulkDeleteState *) arg;

	if (block < state->nblocks)
		state->reached[block] = true;
	state->last_page = block;
}

/* Each slot of a list: dead ones are only noted, live ones judged by the callback. */
static void
judge_tuple(const CvIvfTupleHeader *header, const float *vector pg_attribute_unused(),
			BlockNumber block, Size offset, void *arg)
{
	BulkDeleteState *state = (BulkDeleteState *) arg;
	uint32		ordinal = state->slots++;

	if (header->flags & CVIVF_TUPLE_DEAD)
	{
		note_slot(state, block, offset, true);
		return;
	}
	if (!state->callback((ItemPointer) &header->heap_tid, state->callback_state))
	{
		state->stats->num_index_tuples++;
		note_slot(state, block, offset, false);
		return;
	}
	note_slot(state, block, offset, true);
	if (state->dead_count == state->dead_capacity)
	{
		state->dead_capacity *= 2;
		state->dead = repalloc_huge(state->dead, sizeof(DeadTuple) * state->dead_capacity);
	}
	state->dead[state->dead_count].block = block;
	state->dead[state->dead_count].offset = offset;
	state->dead[state->dead_count].ordinal = ordinal;
	state->dead[state->dead_count].tid = header->heap_tid;
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

/*
 * A quantized list's dead tuples among its coded slots have their codes
 * flagged first (cvivf_mark_codes_dead says why).  Their ordinals come in
 * chain order, ascending, as the walk found them.
 */
static void
flag_codes_dead(Relation index, const CvIvfMetaPageData *meta, int list, BulkDeleteState *state,
				BufferAccessStrategy strategy)
{
	CvIvfCodedListEntry entry;
	uint32	   *ordinals;
	ItemPointerData *tids;
	int			count = 0;

	cvivf_read_list_entry_bytes(index, meta, list, &entry);
	if (entry.coded == 0 || state->dead_count == 0)
		return;
	ordinals = palloc(sizeof(uint32) * state->dead_count);
	tids = palloc(sizeof(ItemPointerData) * state->dead_count);
	for (int i = 0; i < state->dead_count && state->dead[i].ordinal < entry.coded; i++)
	{
		ordinals[count] = state->dead[i].ordinal;
		tids[count++] = state->dead[i].tid;
	}
	if (count > 0)
		cvivf_mark_codes_dead(index, meta, &entry, ordinals, tids, count, strategy);
	pfree(ordinals);
	pfree(tids);
}

IndexBulkDeleteResult *
cvivfbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				IndexBulkDeleteCallback callback, void *callback_state)
{
	return cvivf_bulkdelete_lists(info, stats, callback, callback_state, NULL, NULL);
}

/*
 * Walks one list, flags its dead tuples and records its reuse entry.  The
 * entry is exact only if no insert came since the list's count was read
 * (cvivf_set_reuse_entry); it is written between the generation's two
 * bumps, so no mirror made before it serves afterwards.
 */
static int64
vacuum_list(IndexVacuumInfo *info, const CvIvfMetaPageData *meta, int list,
			BulkDeleteState *state, CvIvfListChanged changed, void *arg)
{
	Relation	index = info->index;
	CvIvfListEntry entry;
	int64		removed;

	cvivf_read_list_entry(index, meta, list, &entry);
	state->reuse.first_dead = no_slot;
	state->reuse.dead_tail = no_slot;
	state->last_page = InvalidBlockNumber;
	state->slots = 0;
	if (BlockNumberIsValid(entry.first_block))
		cvivf_scan_list_pages(index, meta, entry.first_block, true, info->strategy,
							  judge_tuple, note_page, state);
	if (cvivf_is_quantized(meta))
		flag_codes_dead(index, meta, list, state, info->strategy);
	removed = flag_dead(index, meta, list, state, info->strategy);
	if (removed > 0 && changed != NULL)
		changed(index, meta, list, info->strategy, arg);
	cvivf_set_reuse_entry(index, meta, list, entry.tuples - (uint64) removed, &state->reuse,
						  info->strategy);
	return removed;
}

/* The bookkeeping of the page reclaim: what each list's walk ended on. */
typedef struct ReclaimState
{
	BulkDeleteState *walk;
	BlockNumber *last_pages;	/* per list, InvalidBlockNumber: empty then */
	BlockNumber *candidates;
	int			count;
	int			capacity;
	BlockNumber free_pages;		/* reclaimed before, or now */
	BlockNumber reclaimed;
	bool		any_kind;		/* unreached pages of every kind go, not only data pages */
} ReclaimState;

/*
 * The pages below nblocks no chain reached: data pages and never-written
 * ones are candidates; free pages go (back) to the free space map, which
 * a crash or a failover may have lost.
 */
static void
find_candidates(Relation index, ReclaimState *r, BufferAccessStrategy strategy)
{
	BulkDeleteState *walk = r->walk;

	r->capacity = 64;
	r->candidates = palloc(sizeof(BlockNumber) * r->capacity);
	for (BlockNumber block = CVIVF_METAPAGE_BLKNO + 1; block < walk->nblocks; block++)
	{
		uint16		kind;

		if (walk->reached[block])
			continue;
		kind = cvivf_page_kind(index, block, strategy);
		if (kind == CVIVF_PAGE_FREE)
		{
			RecordFreeIndexPage(index, block);
			r->free_pages++;
		}
		else if (kind == CVIVF_PAGE_DATA || kind == 0 ||
				 (r->any_kind && kind != CVIVF_PAGE_META))
		{
			if (r->count == r->capacity)
			{
				r->capacity *= 2;
				r->candidates = repalloc_huge(r->candidates, sizeof(BlockNumber) * r->capacity);
			}
			r->candidates[r->count++] = block;
		}
		vacuum_delay_point();
	}
}

/*
 * Walks again what inserts may have linked since each list was walked:
 * the pages after the list's last walked page, or a list that was empty,
 * or made since (cvlattice).
 */
static void
walk_tails_again(Relation index, const CvIvfMetaPageData *walked, ReclaimState *r,
				 BufferAccessStrategy strategy)
{
	CvIvfMetaPageData meta;

	cvivf_read_meta(index, &meta);
	for (uint32 list = 0; list < meta.lists; list++)
	{
		BlockNumber from = list < walked->lists ? r->last_pages[list] : InvalidBlockNumber;

		if (!BlockNumberIsValid(from))
		{
			CvIvfListEntry entry;

			cvivf_read_list_entry(index, &meta, list, &entry);
			from = entry.first_block;
		}
		cvivf_walk_chain(index, from, strategy, note_page, r->walk);
	}
}

/* A page the metapage reaches other than by a chain (cvivf_visit_pages). */
static void
mark_fixed_page(BlockNumber block, void *arg)
{
	BulkDeleteState *walk = (BulkDeleteState *) arg;

	if (block < walk->nblocks)
		walk->reached[block] = true;
}

/*
 * Whether pages may be reclaimed now, and of which kinds: none while a
 * retired generation may still be read; of a cvivf index, every kind once
 * none may (a cvlattice index's label pages are on no list, so it keeps
 * to data pages).
 */
static bool
may_reclaim(Relation index, const CvIvfMetaPageData *meta, ReclaimState *r)
{
	if (cvlattice_is(meta))
		return true;
	if (meta->retired_xid != 0 &&
		!GlobalVisCheckRemovableFullXid(NULL, FullTransactionIdFromU64(meta->retired_xid)))
		return false;
	r->any_kind = true;
	cvivf_visit_pages(index, meta, false, mark_fixed_page, r->walk);
	return true;
}

/*
 * Reclaims the data pages no chain reaches (see the header): waits for
 * each candidate's lock, so inserts that held one have linked it, walks
 * the tails again, and frees the candidates still unreached.  Nothing
 * writes an unreached data page, so the answer cannot change after that.
 */
static void
reclaim_pages(IndexVacuumInfo *info, const CvIvfMetaPageData *meta, ReclaimState *r)
{
	Relation	index = info->index;
	Buffer		buf;

	if (!may_reclaim(index, meta, r))
		return;
	find_candidates(index, r, info->strategy);
	if (r->count == 0)
		return;
	for (int i = 0; i < r->count; i++)
	{
		buf = ReadBufferExtended(index, MAIN_FORKNUM, r->candidates[i], RBM_NORMAL,
								 info->strategy);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		UnlockReleaseBuffer(buf);
	}
	walk_tails_again(index, meta, r, info->strategy);
	for (int i = 0; i < r->count; i++)
	{
		if (r->walk->reached[r->candidates[i]])
			continue;
		if (!(r->any_kind ?
			  cvivf_reclaim_retired_page(index, r->candidates[i], info->strategy) :
			  cvivf_reclaim_page(index, r->candidates[i], info->strategy)))
			continue;
		r->reclaimed++;
		r->free_pages++;
		vacuum_delay_point();
	}
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
	ReclaimState reclaim = {0};
	int64		removed_total = 0;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));
	cvivf_read_meta(index, &meta);
	cvivf_reuse_prepare(index, meta.lists);
	cvivf_read_meta(index, &meta);
	state.callback = callback;
	state.callback_state = callback_state;
	state.stats = stats;
	state.dead_capacity = 1024;
	state.dead = palloc(sizeof(DeadTuple) * state.dead_capacity);
	/* every page below nblocks is locked by its extender or written (cvivf_extend) */
	LockRelationForExtension(index, ExclusiveLock);
	state.nblocks = RelationGetNumberOfBlocks(index);
	UnlockRelationForExtension(index, ExclusiveLock);
	state.reached = MemoryContextAllocHuge(CurrentMemoryContext, Max(state.nblocks, 1));
	memset(state.reached, 0, Max(state.nblocks, 1));
	reclaim.walk = &state;
	reclaim.last_pages = palloc(sizeof(BlockNumber) * Max(meta.lists, 1));
	for (uint32 list = 0; list < meta.lists; list++)
	{
		removed_total += vacuum_list(info, &meta, list, &state, changed, arg);
		reclaim.last_pages[list] = state.last_page;
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
	reclaim_pages(info, &meta, &reclaim);
	if (reclaim.free_pages > 0)
		IndexFreeSpaceMapVacuum(index);
	if (reclaim.any_kind && meta.retired_xid != 0)
		cvivf_clear_retired(index, meta.retired_xid);
	pfree(state.dead);
	pfree(state.reached);
	pfree(reclaim.last_pages);
	if (reclaim.candidates != NULL)
		pfree(reclaim.candidates);
	stats->tuples_removed += removed_total;
	stats->num_pages = RelationGetNumberOfBlocks(index);
	stats->pages_newly_deleted += reclaim.reclaimed;
	stats->pages_deleted = reclaim.free_pages;
	stats->pages_free = reclaim.free_pages;
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
