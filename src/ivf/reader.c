/*
 * reader.c: reads cvivf pages (metapage, centroids, directory, list chains).
 * Every read checks the page's identity, so a damaged or foreign page is an
 * index_corrupted error, never a wrong answer.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"

#include "storage/bufmgr.h"
#include "utils/float.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "ivf/ivf.h"
#include "lattice/lattice.h"

/* Raises index_corrupted unless the page is a cvivf page of the expected kind. */
void
cvivf_check_page(Relation index, Page page, BlockNumber block, uint16 kind)
{
	CvIvfPageOpaque opaque;

	if (PageIsNew(page) || PageGetSpecialSize(page) != MAXALIGN(sizeof(CvIvfPageOpaqueData)))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" contains an unexpected page at block %u",
						RelationGetRelationName(index), block),
				 errhint("Please REINDEX it.")));
	opaque = CvIvfPageGetOpaque(page);
	if (opaque->page_id != CVIVF_PAGE_ID || opaque->kind != kind)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has a page of kind %u at block %u where kind %u was expected",
						RelationGetRelationName(index), opaque->kind, block, kind),
				 errhint("Please REINDEX it.")));
}

/* Copies the metapage, checking magic and version. */
void
cvivf_read_meta(Relation index, CvIvfMetaPageData *meta)
{
	Buffer		buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	cvivf_check_page(index, page, CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	memcpy(meta, CvIvfPageGetMeta(page), sizeof(CvIvfMetaPageData));
	UnlockReleaseBuffer(buf);
	if (meta->magic != CVIVF_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" is not a cvivf index", RelationGetRelationName(index))));
	if (meta->version != CVIVF_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("index \"%s\" has cvivf format version %u, this build reads version %u",
						RelationGetRelationName(index), meta->version, CVIVF_VERSION),
				 errhint("REINDEX it with this version of clustervec.")));
}

/*
 * On a standby, stops a scan whose index a replayed cvivf_retrain switched
 * to a new generation since the scan read meta: the primary frees the old
 * generation's pages once its own scans are done, and nothing holds that
 * back for this one (ivf.h, "Retraining").  Called before a scan reads
 * more lists, and after it read pages (lists, or the vector of a row it
 * ranked by a bound), before it trusts what they held: if the count has
 * not moved, no page it read was freed before it read it.
 */
void
cvivf_check_generation_kept(Relation index, const CvIvfMetaPageData *meta)
{
	CvIvfMetaPageData now;

	if (!RecoveryInProgress())
		return;
	cvivf_read_meta(index, &now);
	if (now.retrains != meta->retrains)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("canceling statement due to conflict with recovery"),
				 errdetail("Index \"%s\" was retrained on the primary while the scan read it.",
						   RelationGetRelationName(index)),
				 errhint("Run the statement again: it will read the new lists.")));
}

/* The run after a cvivf metapage: its centroid pages, then its directory pages. */
BlockNumber
cvivf_layout_pages(const CvIvfMetaPageData *meta)
{
	return meta->first_directory_block - meta->first_centroid_block +
		(meta->lists + meta->entries_per_directory_page - 1) / meta->entries_per_directory_page;
}

/* The code pages of a quantized list with coded slots. */
BlockNumber
cvivf_code_pages(const CvIvfMetaPageData *meta, uint32 coded)
{
	return (coded + CVIVF_CODES_PER_PAGE(meta) - 1) / CVIVF_CODES_PER_PAGE(meta);
}

/*
 * Every page a cvivf metapage reaches but itself: the centroid and
 * directory run, the reuse and drift pages, each quantized list's codes,
 * and with chains every list's data pages (VACUUM walks those itself).
 */
void
cvivf_visit_pages(Relation index, const CvIvfMetaPageData *meta, bool chains,
				  CvIvfPageVisitor visitor, void *arg)
{
	BlockNumber run = cvivf_layout_pages(meta);

	for (BlockNumber i = 0; i < run; i++)
		visitor(meta->first_centroid_block + i, arg);
	for (uint32 i = 0; i < meta->reuse_pages; i++)
		visitor(meta->reuse_blocks[i], arg);
	for (uint32 i = 0; i < meta->drift_pages; i++)
		visitor(meta->drift_blocks[i], arg);
	if (!chains && !cvivf_is_quantized(meta))
		return;
	for (uint32 list = 0; list < meta->lists; list++)
	{
		CvIvfCodedListEntry entry = {0};
		BlockNumber codes;

		cvivf_read_list_entry_bytes(index, meta, list, &entry);
		if (chains)
			cvivf_walk_chain(index, entry.base.first_block, NULL, visitor, arg);
		codes = cvivf_is_quantized(meta) && entry.coded > 0 ?
			cvivf_code_pages(meta, entry.coded) : 0;
		for (BlockNumber i = 0; i < codes; i++)
			visitor(entry.code_first_block + i, arg);
		CHECK_FOR_INTERRUPTS();
	}
}

/* A cvivf directory is contiguous; a cvlattice one is listed in its metapage. */
BlockNumber
cvivf_directory_block(const CvIvfMetaPageData *meta, int list)
{
	if (cvlattice_is(meta))
		return meta->directory_blocks[list / meta->entries_per_directory_page];
	return meta->first_directory_block + list / meta->entries_per_directory_page;
}

int
cvivf_directory_slot(const CvIvfMetaPageData *meta, int list)
{
	return list % meta->entries_per_directory_page;
}

/* Where a list's directory entry starts on its directory page. */
char *
cvivf_directory_entry(Page page, const CvIvfMetaPageData *meta, int list)
{
	return PageGetContents(page) +
		cvivf_directory_slot(meta, list) * cvivf_directory_entry_size(meta);
}

/* Copies the first bytes of one list's directory entry. */
static void
read_entry_prefix(Relation index, const CvIvfMetaPageData *meta, int list, void *entry,
				  Size bytes)
{
	BlockNumber block = cvivf_directory_block(meta, list);
	Buffer		buf = ReadBuffer(index, block);
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	cvivf_check_page(index, page, block, CVIVF_PAGE_DIRECTORY);
	memcpy(entry, cvivf_directory_entry(page, meta, list), bytes);
	UnlockReleaseBuffer(buf);
}

/* Copies one list's whole directory entry (cvivf_directory_entry_size bytes). */
void
cvivf_read_list_entry_bytes(Relation index, const CvIvfMetaPageData *meta, int list,
							void *entry)
{
	read_entry_prefix(index, meta, list, entry, cvivf_directory_entry_size(meta));
}

/* Copies one list's directory entry: cvivf's part of it, for either kind. */
void
cvivf_read_list_entry(Relation index, const CvIvfMetaPageData *meta, int list,
					  CvIvfListEntry *entry)
{
	read_entry_prefix(index, meta, list, entry, sizeof(CvIvfListEntry));
}

/*
 * Copies every list's directory entry, whole (entry_size bytes each, into
 * out) or cvivf's part (into entries), one page at a time.
 */
static void
read_directory(Relation index, const CvIvfMetaPageData *meta, CvIvfListEntry *entries,
			   char *out)
{
	uint32		per_page = meta->entries_per_directory_page;
	Size		size = cvivf_directory_entry_size(meta);

	for (uint32 first = 0; first < meta->lists; first += per_page)
	{
		BlockNumber block = cvivf_directory_block(meta, first);
		Buffer		buf = ReadBuffer(index, block);
		Page		page;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		cvivf_check_page(index, page, block, CVIVF_PAGE_DIRECTORY);
		for (uint32 list = first; list < Min(first + per_page, meta->lists); list++)
		{
			if (out != NULL)
				memcpy(out + list * size, cvivf_directory_entry(page, meta, list), size);
			else
				memcpy(entries + list, cvivf_directory_entry(page, meta, list),
					   sizeof(CvIvfListEntry));
		}
		UnlockReleaseBuffer(buf);
	}
}

/* Copies every list's directory entry (cvivf's part of it: lists entries). */
void
cvivf_read_directory(Relation index, const CvIvfMetaPageData *meta, CvIvfListEntry *entries)
{
	read_directory(index, meta, entries, NULL);
}

/* Copies every list's whole directory entry (lists x entry size bytes). */
void
cvivf_read_directory_bytes(Relation index, const CvIvfMetaPageData *meta, char *out)
{
	read_directory(index, meta, NULL, out);
}

/* Copies the floats of one centroid page (or one page of a wide centroid). */
static void
read_centroid_page(Relation index, BlockNumber block, float *out, Size floats)
{
	Buffer		buf = ReadBuffer(index, block);
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	cvivf_check_page(index, page, block, CVIVF_PAGE_CENTROID);
	memcpy(out, PageGetContents(page), floats * sizeof(float));
	UnlockReleaseBuffer(buf);
}

/* A cvlattice index's centroids, each where its directory entry says. */
static void
read_lattice_centroids(Relation index, const CvIvfMetaPageData *meta, float *centroids)
{
	Size		dim = meta->dimensions;
	CvLatticeListEntry *entries = palloc(sizeof(CvLatticeListEntry) * Max(meta->lists, 1));
	Buffer		buf = InvalidBuffer;

	cvivf_read_directory_bytes(index, meta, (char *) entries);
	for (uint32 list = 0; list < meta->lists; list++)
	{
		BlockNumber block = entries[list].centroid_block;
		Page		page;

		if (!BufferIsValid(buf) || BufferGetBlockNumber(buf) != block)
		{
			if (BufferIsValid(buf))
				UnlockReleaseBuffer(buf);
			buf = ReadBuffer(index, block);
			LockBuffer(buf, BUFFER_LOCK_SHARE);
			cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_CENTROID);
		}
		page = BufferGetPage(buf);
		if (entries[list].centroid_offset + sizeof(float) * dim > ((PageHeader) page)->pd_lower)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" has no centroid of list %u at block %u",
							RelationGetRelationName(index), list, block)));
		memcpy(centroids + list * dim, (char *) page + entries[list].centroid_offset,
			   sizeof(float) * dim);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
	pfree(entries);
}

/* All centroids, lists x dimensions floats in list order (NULL without centroids). */
float *
cvivf_read_centroids(Relation index, const CvIvfMetaPageData *meta)
{
	Size		dim = meta->dimensions;
	Size		floats_per_page = CVIVF_PAGE_CAPACITY / sizeof(float);
	float	   *centroids;
	BlockNumber block = meta->first_centroid_block;

	if (meta->flags & CVIVF_META_NO_CENTROIDS)
		return NULL;
	centroids = MemoryContextAllocHuge(CurrentMemoryContext,
									   sizeof(float) * Max(dim * meta->lists, 1));
	if (cvlattice_is(meta))
	{
		read_lattice_centroids(index, meta, centroids);
		return centroids;
	}
	if (meta->centroids_per_page > 0)
	{
		for (Size first = 0; first < meta->lists; first += meta->centroids_per_page)
			read_centroid_page(index, block++, centroids + first * dim,
							   Min(meta->centroids_per_page, meta->lists - first) * dim);
		return centroids;
	}
	for (Size list = 0; list < meta->lists; list++)
		for (Size done = 0; done < dim; done += floats_per_page)
			read_centroid_page(index, block++, centroids + list * dim + done,
							   Min(floats_per_page, dim - done));
	return centroids;
}

/* Where a list walk stands: a tuple may be split over two or more pages. */
typedef struct ListWalk
{
	Size		tuple_size;
	char	   *assembly;		/* a straddling tuple, put back together */
	Size		assembled;		/* bytes of it copied so far (0: none pending) */
	BlockNumber header_block;
	Size		header_offset;
	bool		include_dead;
	bool		stopped;		/* the visitor has what it wanted */
	uint64		visited;
	CvIvfTupleVisitor visitor;
	CvIvfPageVisitor page_visitor;	/* NULL, or told each page of the chain */
	void	   *arg;
} ListWalk;

static void
visit(ListWalk *walk, const char *tuple, BlockNumber block, Size offset)
{
	const CvIvfTupleHeader *header = (const CvIvfTupleHeader *) tuple;

	if (!walk->include_dead && (header->flags & CVIVF_TUPLE_DEAD))
		return;
	walk->visited++;
	walk->visitor(header, (const float *) (tuple + sizeof(CvIvfTupleHeader)),
				  block, offset, walk->arg);
}

/* Walks the bytes [start, end) of one data page. */
static void
walk_page_bytes(ListWalk *walk, const char *page, Size start, Size end, BlockNumber block)
{
	Size		pos = start;

	if (walk->assembled > 0)
	{
		Size		take = Min(walk->tuple_size - walk->assembled, end - pos);

		memcpy(walk->assembly + walk->assembled, page + pos, take);
		walk->assembled += take;
		pos += take;
		if (walk->assembled < walk->tuple_size)
			return;
		walk->assembled = 0;
		visit(walk, walk->assembly, walk->header_block, walk->header_offset);
	}
	while (pos + sizeof(CvIvfTupleHeader) <= end && !walk->stopped)
	{
		if (pos + walk->tuple_size <= end)
			visit(walk, page + pos, block, pos);
		else
		{
			walk->assembled = end - pos;
			memcpy(walk->assembly, page + pos, walk->assembled);
			walk->header_block = block;
			walk->header_offset = pos;
		}
		pos += Min(walk->tuple_size, end - pos);
	}
}

/* Walks a chain from the tuple header at (block, offset) on; see cvivf_scan_list_from. */
static uint64
walk_list(Relation index, ListWalk *walk, BlockNumber block, Size offset,
		  BufferAccessStrategy strategy)
{
	while (BlockNumberIsValid(block) && !walk->stopped)
	{
		Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
		Page		page;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		cvivf_check_page(index, page, block, CVIVF_PAGE_DATA);
		if (offset < CVIVF_PAGE_DATA_START || offset > ((PageHeader) page)->pd_lower)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" has no tuple at block %u, offset %zu",
							RelationGetRelationName(index), block, offset)));
		if (walk->page_visitor != NULL)
			walk->page_visitor(block, walk->arg);
		walk_page_bytes(walk, (const char *) page, offset, ((PageHeader) page)->pd_lower, block);
		block = CvIvfPageGetOpaque(page)->next;
		offset = CVIVF_PAGE_DATA_START;
		UnlockReleaseBuffer(buf);
	}
	if (walk->assembled > 0 && !walk->stopped)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has a truncated tuple at block %u, offset %zu",
						RelationGetRelationName(index), walk->header_block, walk->header_offset),
				 errdetail("Invariant violated: a linked tuple is complete."),
				 errhint("Please REINDEX it.")));
	pfree(walk->assembly);
	return walk->visited;
}

static void
init_walk(ListWalk *walk, const CvIvfMetaPageData *meta, bool include_dead,
		  CvIvfTupleVisitor visitor, CvIvfPageVisitor page_visitor, void *arg)
{
	memset(walk, 0, sizeof(*walk));
	walk->tuple_size = CVIVF_TUPLE_SIZE(meta->dimensions);
	walk->assembly = palloc(walk->tuple_size);
	walk->include_dead = include_dead;
	walk->visitor = visitor;
	walk->page_visitor = page_visitor;
	walk->arg = arg;
}

/*
 * Calls visitor for each tuple of a list chain from the tuple header at
 * (block, offset) on, holding a share lock on one page at a time; returns
 * the number visited.
 */
uint64
cvivf_scan_list_from(Relation index, const CvIvfMetaPageData *meta, BlockNumber block,
					 Size offset, bool include_dead, BufferAccessStrategy strategy,
					 CvIvfTupleVisitor visitor, void *arg)
{
	ListWalk	walk;

	init_walk(&walk, meta, include_dead, visitor, NULL, arg);
	return walk_list(index, &walk, block, offset, strategy);
}

/* The same from a list's first page, telling page_visitor each page's block too. */
uint64
cvivf_scan_list_pages(Relation index, const CvIvfMetaPageData *meta, BlockNumber first_block,
					  bool include_dead, BufferAccessStrategy strategy,
					  CvIvfTupleVisitor visitor, CvIvfPageVisitor page_visitor, void *arg)
{
	ListWalk	walk;

	init_walk(&walk, meta, include_dead, visitor, page_visitor, arg);
	return walk_list(index, &walk, first_block, CVIVF_PAGE_DATA_START, strategy);
}

/* Calls visitor for each tuple of the list starting at first_block. */
uint64
cvivf_scan_list(Relation index, const CvIvfMetaPageData *meta, BlockNumber first_block,
				bool include_dead, BufferAccessStrategy strategy,
				CvIvfTupleVisitor visitor, void *arg)
{
	return cvivf_scan_list_from(index, meta, first_block, CVIVF_PAGE_DATA_START, include_dead,
								strategy, visitor, arg);
}

/*
 * Tells visitor the block of every page of a chain from block on, reading
 * only the links (VACUUM's check of which pages the chains reach).
 */
void
cvivf_walk_chain(Relation index, BlockNumber block, BufferAccessStrategy strategy,
				 CvIvfPageVisitor visitor, void *arg)
{
	while (BlockNumberIsValid(block))
	{
		Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_DATA);
		visitor(block, arg);
		block = CvIvfPageGetOpaque(BufferGetPage(buf))->next;
		UnlockReleaseBuffer(buf);
	}
}

/*
 * The kind of a page (CVIVF_PAGE_*), or 0 for a page never written or not
 * cvivf's.  VACUUM asks about pages no chain reached.
 */
uint16
cvivf_page_kind(Relation index, BlockNumber block, BufferAccessStrategy strategy)
{
	Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
	Page		page;
	uint16		kind = 0;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page) && PageGetSpecialSize(page) == MAXALIGN(sizeof(CvIvfPageOpaqueData)) &&
		CvIvfPageGetOpaque(page)->page_id == CVIVF_PAGE_ID)
		kind = CvIvfPageGetOpaque(page)->kind;
	UnlockReleaseBuffer(buf);
	return kind;
}

/* Stops a walk at the first dead tuple, noting whether it met the watched slot. */
typedef struct DeadSearch
{
	ListWalk   *walk;
	CvIvfSlot	watch;
	bool		passed;
	CvIvfSlot	found;
} DeadSearch;

static void
stop_at_dead(const CvIvfTupleHeader *header, const float *vector pg_attribute_unused(),
			 BlockNumber block, Size offset, void *arg)
{
	DeadSearch *search = (DeadSearch *) arg;

	if (block == search->watch.block && offset == search->watch.offset)
		search->passed = true;
	if (!(header->flags & CVIVF_TUPLE_DEAD))
		return;
	search->found.block = block;
	search->found.offset = (uint32) offset;
	search->walk->stopped = true;
}

/*
 * The first dead slot of a chain at or after the slot from; false when
 * there is none.  *passed: the walk met the slot watch on the way (or
 * found it).  The caller holds the list's directory page lock, so no slot
 * of the list changes state meanwhile.
 */
bool
cvivf_find_dead_slot(Relation index, const CvIvfMetaPageData *meta, CvIvfSlot from,
					 CvIvfSlot watch, CvIvfSlot *found, bool *passed)
{
	ListWalk	walk;
	DeadSearch	search = {0};

	search.walk = &walk;
	search.watch = watch;
	search.found.block = InvalidBlockNumber;
	init_walk(&walk, meta, true, stop_at_dead, NULL, &search);
	walk_list(index, &walk, from.block, from.offset, NULL);
	*found = search.found;
	*passed = search.passed;
	return BlockNumberIsValid(found->block);
}

/*
 * The pages the tuple whose header is at slot lies on (its header's page
 * first; palloc'd, *count of them) and where the next tuple's header is or
 * would be (block invalid: past the end of the chain).  The caller holds
 * the list's directory page lock: appends and fills wait, so the chain and
 * the bytes it reads do not move.
 */
BlockNumber *
cvivf_slot_pages(Relation index, const CvIvfMetaPageData *meta, CvIvfSlot slot, int *count,
				 CvIvfSlot *next)
{
	Size		remaining = CVIVF_TUPLE_SIZE(meta->dimensions);
	int			capacity = (int) (remaining / CVIVF_PAGE_CAPACITY) + 2;
	BlockNumber *pages = palloc(sizeof(BlockNumber) * capacity);
	BlockNumber block = slot.block;
	Size		pos = slot.offset;

	*count = 0;
	next->block = InvalidBlockNumber;
	next->offset = 0;
	while (remaining > 0)
	{
		Buffer		buf;
		Page		page;
		Size		end;
		Size		take;

		if (!BlockNumberIsValid(block) || *count == capacity)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" has a truncated tuple at block %u, offset %u",
							RelationGetRelationName(index), slot.block, slot.offset),
					 errhint("Please REINDEX it.")));
		buf = ReadBuffer(index, block);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		cvivf_check_page(index, page, block, CVIVF_PAGE_DATA);
		end = ((PageHeader) page)->pd_lower;
		take = pos < end ? Min(remaining, end - pos) : 0;
		pages[(*count)++] = block;
		remaining -= take;
		pos += take;
		if (remaining == 0 && pos + sizeof(CvIvfTupleHeader) <= end)
		{
			next->block = block;
			next->offset = (uint32) pos;
		}
		else if (remaining == 0 && BlockNumberIsValid(CvIvfPageGetOpaque(page)->next))
		{
			/* a header never straddles: the next one starts the next page */
			next->block = CvIvfPageGetOpaque(page)->next;
			next->offset = (uint32) CVIVF_PAGE_DATA_START;
		}
		block = CvIvfPageGetOpaque(page)->next;
		pos = CVIVF_PAGE_DATA_START;
		UnlockReleaseBuffer(buf);
	}
	return pages;
}

/*
 * A list's reuse entry; false (and both slots invalid) when the list has
 * none yet: no VACUUM has made reuse pages covering it.
 */
bool
cvivf_read_reuse_entry(Relation index, const CvIvfMetaPageData *meta, int list,
					   CvIvfReuseEntry *entry)
{
	uint32		page_index = (uint32) list / CVIVF_REUSE_ENTRIES_PER_PAGE;
	BlockNumber block;
	Buffer		buf;

	entry->first_dead.block = InvalidBlockNumber;
	entry->dead_tail.block = InvalidBlockNumber;
	if (page_index >= meta->reuse_pages)
		return false;
	block = meta->reuse_blocks[page_index];
	buf = ReadBuffer(index, block);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_REUSE);
	memcpy(entry, cvivf_reuse_entry(BufferGetPage(buf), list), sizeof(CvIvfReuseEntry));
	UnlockReleaseBuffer(buf);
	return true;
}

/*
 * Every list's drift entry (meta->lists of them); false, and nothing read,
 * for an index built before drift pages (build_blocks 0: every build that
 * records a baseline sets it, even one with no list to cover).  A list the baseline does not
 * cover (a cvlattice list made since the build) reads as an empty list with
 * no distance.
 */
bool
cvivf_read_drift(Relation index, const CvIvfMetaPageData *meta, CvIvfDriftEntry *entries)
{
	uint32		covered = Min(meta->drift_lists, meta->lists);

	if (meta->build_blocks == 0)
		return false;
	for (uint32 first = 0; first < covered; first += CVIVF_DRIFT_ENTRIES_PER_PAGE)
	{
		uint32		page_index = first / CVIVF_DRIFT_ENTRIES_PER_PAGE;
		BlockNumber block = meta->drift_blocks[page_index];
		Buffer		buf;

		if (page_index >= meta->drift_pages)
			break;
		buf = ReadBuffer(index, block);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_DRIFT);
		memcpy(entries + first, PageGetContents(BufferGetPage(buf)),
			   sizeof(CvIvfDriftEntry) * Min(CVIVF_DRIFT_ENTRIES_PER_PAGE, covered - first));
		UnlockReleaseBuffer(buf);
	}
	for (uint32 list = covered; list < meta->lists; list++)
	{
		entries[list].build_tuples = 0;
		entries[list].deleted_since_build = 0;
		entries[list].build_mean_distance = get_float8_nan();
	}
	return true;
}

/* Where a list's reuse entry is on its reuse page. */
CvIvfReuseEntry *
cvivf_reuse_entry(Page page, int list)
{
	return (CvIvfReuseEntry *) PageGetContents(page) +
		(uint32) list % CVIVF_REUSE_ENTRIES_PER_PAGE;
}

/*
 * Copies the vector of the tuple whose header is at (block, offset) into
 * out, following the list's chain when the tuple continues on later pages.
 * Tuple boundaries never move, but a slot's bytes change when VACUUM flags
 * its tuple dead and an insert then fills the slot (see ivf.h).  A scan
 * that collected the tuple live and re-reads it here after that may copy
 * the new tuple's vector, or a mix: the tuple it collected was dead to
 * every snapshot (VACUUM flags only such tuples), so its heap TID returns
 * no row to an MVCC scan whatever distance it is given.
 */
void
cvivf_read_vector_at(Relation index, const CvIvfMetaPageData *meta, BlockNumber block,
					 Size offset, float *out)
{
	Size		wanted = sizeof(float) * meta->dimensions;
	Size		copied = 0;
	Size		pos = offset + sizeof(CvIvfTupleHeader);

	while (copied < wanted)
	{
		Buffer		buf;
		Page		page;
		Size		end;
		Size		take;

		if (!BlockNumberIsValid(block))
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" has a tuple that ends before its vector",
							RelationGetRelationName(index))));
		buf = ReadBuffer(index, block);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		cvivf_check_page(index, page, block, CVIVF_PAGE_DATA);
		end = ((PageHeader) page)->pd_lower;
		take = pos < end ? Min(wanted - copied, end - pos) : 0;
		memcpy((char *) out + copied, (char *) page + pos, take);
		copied += take;
		block = CvIvfPageGetOpaque(page)->next;
		UnlockReleaseBuffer(buf);
		pos = CVIVF_PAGE_DATA_START;
	}
}
