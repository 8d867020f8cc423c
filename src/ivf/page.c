/*
 * page.c: the only file that changes cvivf pages, always through GenericXLog,
 * so an index survives a crash and streams to replicas.
 *
 * A tuple that needs more pages than one GenericXLog record holds (4: the
 * directory page, the list's last page and the new pages) is written in
 * several records: first its continuation pages, chained to each other but
 * not yet reachable, then one record that links them and updates the
 * directory.  Readers follow only linked pages, so they never see half a tuple.
 *
 * An insert fills the first dead slot of its list before it appends (see
 * "Reuse" below and ivf.h); VACUUM formats the pages no chain reaches as
 * free and records them in the free space map, where appends find them.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/transam.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "ivf/ivf.h"

/* Formats a fresh page of the given kind. */
void
cvivf_page_init(Page page, uint16 kind)
{
	CvIvfPageOpaque opaque;

	PageInit(page, BLCKSZ, MAXALIGN(sizeof(CvIvfPageOpaqueData)));
	opaque = CvIvfPageGetOpaque(page);
	opaque->next = InvalidBlockNumber;
	opaque->kind = kind;
	opaque->page_id = CVIVF_PAGE_ID;
}

/* Appends bytes at pd_lower; the caller has checked they fit. */
void
cvivf_page_append(Page page, const void *bytes, Size count)
{
	PageHeader	header = (PageHeader) page;

	memcpy((char *) page + header->pd_lower, bytes, count);
	header->pd_lower += count;
}

Size
cvivf_page_free_bytes(Page page)
{
	return ((PageHeader) page)->pd_upper - ((PageHeader) page)->pd_lower;
}

/*
 * Extends the fork by one page, returned locked exclusively.  The page is
 * locked before the extension lock goes (as GIN and GiST do), so VACUUM,
 * which counts the blocks under the extension lock, can never lock a new
 * page before its extender and take it for one nobody writes.
 */
Buffer
cvivf_extend(Relation index, ForkNumber fork, bool lock_extension)
{
	Buffer		buf;

	if (lock_extension)
		LockRelationForExtension(index, ExclusiveLock);
	buf = ReadBufferExtended(index, fork, P_NEW, RBM_NORMAL, NULL);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	if (lock_extension)
		UnlockRelationForExtension(index, ExclusiveLock);
	return buf;
}

/* A cvivf page VACUUM reclaimed: formatted free, in the free space map. */
static bool
page_is_free(Page page)
{
	return !PageIsNew(page) &&
		PageGetSpecialSize(page) == MAXALIGN(sizeof(CvIvfPageOpaqueData)) &&
		CvIvfPageGetOpaque(page)->page_id == CVIVF_PAGE_ID &&
		CvIvfPageGetOpaque(page)->kind == CVIVF_PAGE_FREE;
}

/*
 * A page for new list data, locked exclusively: one VACUUM reclaimed (the
 * free space map's), else a new one.  The map may hand the same page out
 * twice, or one already taken and written, so a page counts only when a
 * conditional lock finds it still free (no wait, so no deadlock with the
 * locks the caller holds).  The caller formats it in a full-image record.
 */
Buffer
cvivf_new_page(Relation index)
{
	for (;;)
	{
		BlockNumber block = GetFreeIndexPage(index);
		Buffer		buf;

		if (!BlockNumberIsValid(block))
			return cvivf_extend(index, MAIN_FORKNUM, true);
		buf = ReadBuffer(index, block);
		if (ConditionalLockBuffer(buf))
		{
			if (page_is_free(BufferGetPage(buf)))
				return buf;
			LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		}
		ReleaseBuffer(buf);
	}
}

/* Writes a whole page image to a locked buffer in one record, then releases it. */
static void
write_page_image(Relation index, Buffer buf, Page image)
{
	GenericXLogState *state = GenericXLogStart(index);
	Page		page = GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE);

	memcpy(page, image, BLCKSZ);
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

/* ---------------------------------------------------------------------
 * Build: pages are composed in local memory and written once, in block
 * order, each as a full-page image.
 * --------------------------------------------------------------------- */

struct CvIvfBuildWriter
{
	Relation	index;
	ForkNumber	fork;
	CvIvfMetaPageData meta;
	char	   *entries;		/* lists directory entries of entry_size bytes */
	Size		entry_size;
	PGAlignedBlock image;		/* the data page being filled */
	bool		have_page;
	BlockNumber page_block;
	BlockNumber next_block;		/* the block the next extension returns */
	int			list;
	Size		tuple_size;
	const float *centroids;		/* the caller's, alive until finish; codes need them */
	PGAlignedBlock code_image;	/* the code page being filled (quantized lists) */
	BlockNumber code_block;		/* where it goes */
	/* relocated (a retrain's new generation): blocks come from reserved runs */
	bool		relocated;
	BlockNumber run_next;		/* the reserved run's next unused block */
	BlockNumber run_end;
	BlockNumber reserved;		/* blocks reserved in all */
	CvIvfFreeRuns *free_runs;	/* taken before reserving */
};

/* Pages a relocated writer reserves at a time for its data pages. */
#define CVIVF_RELOCATED_RUN 32

/*
 * Writes a page of the index being built at the block the layout expects:
 * a build extends the fork, which must return that block; a relocated
 * writer fills a block it reserved.
 */
static void
write_next_block(CvIvfBuildWriter *writer, Page image, BlockNumber expected)
{
	Buffer		buf;

	if (writer->relocated)
	{
		buf = ReadBufferExtended(writer->index, writer->fork, expected, RBM_NORMAL, NULL);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		write_page_image(writer->index, buf, image);
		return;
	}
	buf = cvivf_extend(writer->index, writer->fork, false);
	if (BufferGetBlockNumber(buf) != expected)
		elog(ERROR, "cvivf build expected block %u, got %u",
			 expected, BufferGetBlockNumber(buf));
	write_page_image(writer->index, buf, image);
}

/*
 * Reserves count contiguous new blocks at the end of the fork; returns the
 * first.  Inserts into the old generation extend the fork meanwhile, so
 * the run is taken under the extension lock.  The reserved pages stay
 * zero until written: nothing lists them, no insert takes a zero page,
 * and a VACUUM after a crash reclaims those never written.
 */
static BlockNumber
reserve_run(CvIvfBuildWriter *writer, BlockNumber count)
{
	BlockNumber first = InvalidBlockNumber;

	LockRelationForExtension(writer->index, ExclusiveLock);
	for (BlockNumber i = 0; i < count; i++)
	{
		Buffer		buf = ReadBufferExtended(writer->index, writer->fork, P_NEW, RBM_NORMAL,
											 NULL);

		if (i == 0)
			first = BufferGetBlockNumber(buf);
		else if (BufferGetBlockNumber(buf) != first + i)
			elog(ERROR, "cvivf retrain expected block %u, got %u", first + i,
				 BufferGetBlockNumber(buf));
		ReleaseBuffer(buf);
	}
	UnlockRelationForExtension(writer->index, ExclusiveLock);
	writer->reserved += count;
	return first;
}

/*
 * Takes a page VACUUM or a retrain freed for a relocated writer: formatted
 * as an empty data page at once (a small record) and out of the free space
 * map, so no insert takes it too; false when it is no longer free.  Until
 * the writer writes it, it is a data page no chain reaches, as an insert's
 * continuation page before its linking record.
 */
bool
cvivf_claim_free_page(Relation index, BlockNumber block)
{
	Buffer		buf = ReadBuffer(index, block);
	bool		claimed = false;

	if (ConditionalLockBuffer(buf))
	{
		if (page_is_free(BufferGetPage(buf)))
		{
			GenericXLogState *state = GenericXLogStart(index);

			CvIvfPageGetOpaque(GenericXLogRegisterBuffer(state, buf, 0))->kind =
				CVIVF_PAGE_DATA;
			GenericXLogFinish(state);
			RecordUsedIndexPage(index, block);
			claimed = true;
		}
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	}
	ReleaseBuffer(buf);
	return claimed;
}

/* The block of the next page written on its own (a data page). */
static BlockNumber
writer_block(CvIvfBuildWriter *writer)
{
	BlockNumber block;

	if (!writer->relocated)
		return writer->next_block++;
	block = cvivf_free_runs_take(writer->free_runs, writer->index, 1);
	if (BlockNumberIsValid(block))
	{
		writer->reserved++;
		return block;
	}
	if (writer->run_next == writer->run_end)
	{
		writer->run_next = reserve_run(writer, CVIVF_RELOCATED_RUN);
		writer->run_end = writer->run_next + CVIVF_RELOCATED_RUN;
	}
	return writer->run_next++;
}

/* The first of count contiguous blocks (centroids and directory, a list's codes). */
static BlockNumber
writer_run(CvIvfBuildWriter *writer, BlockNumber count)
{
	BlockNumber first = writer->next_block;

	if (writer->relocated)
	{
		first = cvivf_free_runs_take(writer->free_runs, writer->index, count);
		if (!BlockNumberIsValid(first))
			return reserve_run(writer, count);
		writer->reserved += count;
		return first;
	}
	writer->next_block += count;
	return first;
}

static void flush_data_page(CvIvfBuildWriter *writer, BlockNumber next);
static void finish_list(CvIvfBuildWriter *writer);

/* cvivf's part of a list's directory entry in the writer. */
static CvIvfListEntry *
writer_list_entry(CvIvfBuildWriter *writer, int list)
{
	return (CvIvfListEntry *) (writer->entries + list * writer->entry_size);
}

/* A list's whole directory entry, for a kind whose entry says more (cvlattice). */
char *
cvivf_writer_entry(CvIvfBuildWriter *writer, int list)
{
	return writer->entries + list * writer->entry_size;
}

/* The metapage the writer will write, for fields only the caller knows. */
CvIvfMetaPageData *
cvivf_writer_meta(CvIvfBuildWriter *writer)
{
	return &writer->meta;
}

/* Writes a page composed by the caller after the lists (cvlattice labels); returns its block. */
BlockNumber
cvivf_writer_page(CvIvfBuildWriter *writer, Page image)
{
	BlockNumber block;

	Assert(!writer->relocated);
	finish_list(writer);
	writer->list = writer->meta.lists;	/* no list after the caller's pages */
	block = writer->next_block++;
	write_next_block(writer, image, block);
	return block;
}

CvIvfBuildWriter *
cvivf_writer_begin(Relation index, ForkNumber fork, const CvIvfMetaPageData *meta)
{
	CvIvfBuildWriter *writer = palloc0(sizeof(CvIvfBuildWriter));

	writer->index = index;
	writer->fork = fork;
	writer->meta = *meta;
	writer->entry_size = cvivf_directory_entry_size(meta);
	writer->entries = palloc0(writer->entry_size * Max(meta->lists, 1));
	for (uint32 i = 0; i < meta->lists; i++)
	{
		CvIvfListEntry *entry = writer_list_entry(writer, i);

		entry->first_block = InvalidBlockNumber;
		entry->last_block = InvalidBlockNumber;
	}
	writer->tuple_size = CVIVF_TUPLE_SIZE(meta->dimensions);
	writer->list = -1;
	return writer;
}

/*
 * A writer of a new generation of an existing index (cvivf_retrain): the
 * same pages as a build's, at blocks it reserves past the fork's end; it
 * never writes the metapage, whose final contents cvivf_writer_meta gives
 * for the switch.
 */
CvIvfBuildWriter *
cvivf_writer_begin_relocated(Relation index, const CvIvfMetaPageData *meta)
{
	CvIvfBuildWriter *writer = cvivf_writer_begin(index, MAIN_FORKNUM, meta);

	writer->relocated = true;
	writer->free_runs = cvivf_free_runs_find(index);
	return writer;
}

/* Blocks a relocated writer reserved: its generation's pages, a few spare. */
BlockNumber
cvivf_writer_reserved(CvIvfBuildWriter *writer)
{
	return writer->reserved;
}

/* Writes the metapage (provisional), the centroid pages and empty directory pages. */
void
cvivf_writer_centroids(CvIvfBuildWriter *writer, const float *centroids, const double *norms)
{
	PGAlignedBlock image;
	CvIvfMetaPageData *meta = &writer->meta;
	Size		dim = meta->dimensions;
	Size		floats_per_page = CVIVF_PAGE_CAPACITY / sizeof(float);
	BlockNumber block = 0;

	if (writer->relocated)
	{
		/* the layout's run after block 0, moved to where it was reserved */
		BlockNumber shift = writer_run(writer, cvivf_layout_pages(meta)) - meta->first_centroid_block;

		meta->first_centroid_block += shift;
		meta->first_directory_block += shift;
		block = meta->first_centroid_block;
	}
	else
	{
		cvivf_page_init(image.data, CVIVF_PAGE_META);
		cvivf_page_append(image.data, meta, sizeof(CvIvfMetaPageData));
		write_next_block(writer, image.data, block++);
	}
	Assert(meta->first_centroid_block == block);
	if (!(meta->flags & CVIVF_META_NO_CENTROIDS))
	{
		Size		total = dim * meta->lists;
		Size		per_page = meta->centroids_per_page > 0 ?
			meta->centroids_per_page * dim : floats_per_page;

		/* a wide centroid starts on its own page, so pages hold whole runs */
		for (Size list = 0; list < meta->lists; list++)
			writer_list_entry(writer, list)->centroid_norm = norms[list];
		if (meta->centroids_per_page > 0)
			for (Size done = 0; done < total; done += per_page)
			{
				cvivf_page_init(image.data, CVIVF_PAGE_CENTROID);
				cvivf_page_append(image.data, centroids + done, sizeof(float) * Min(per_page, total - done));
				write_next_block(writer, image.data, block++);
			}
		else
			for (Size list = 0; list < meta->lists; list++)
				for (Size done = 0; done < dim; done += per_page)
				{
					cvivf_page_init(image.data, CVIVF_PAGE_CENTROID);
					cvivf_page_append(image.data, centroids + list * dim + done,
								sizeof(float) * Min(per_page, dim - done));
					write_next_block(writer, image.data, block++);
				}
	}
	Assert(meta->first_directory_block == block);
	for (Size list = 0; list < meta->lists; list += meta->entries_per_directory_page)
	{
		cvivf_page_init(image.data, CVIVF_PAGE_DIRECTORY);
		write_next_block(writer, image.data, block++);
	}
	if (!writer->relocated)
		writer->next_block = block;
	writer->centroids = centroids;
}

/* Writes the data page being filled, pointing at next. */
static void
flush_data_page(CvIvfBuildWriter *writer, BlockNumber next)
{
	CvIvfPageGetOpaque(writer->image.data)->next = next;
	write_next_block(writer, writer->image.data, writer->page_block);
	writer->have_page = false;
}

/* Starts a new data page for the current list, linking the previous one. */
static void
start_data_page(CvIvfBuildWriter *writer)
{
	CvIvfListEntry *entry = writer_list_entry(writer, writer->list);
	BlockNumber block = writer_block(writer);

	if (writer->have_page)
		flush_data_page(writer, block);
	cvivf_page_init(writer->image.data, CVIVF_PAGE_DATA);
	writer->have_page = true;
	writer->page_block = block;
	if (!BlockNumberIsValid(entry->first_block))
		entry->first_block = block;
	entry->last_block = block;
}

/* Encodes one tuple of the list just written onto the code page being filled. */
static void
encode_written_tuple(const CvIvfTupleHeader *header, const float *vector,
					 BlockNumber block, Size offset, void *arg)
{
	CvIvfBuildWriter *writer = (CvIvfBuildWriter *) arg;
	CvIvfCodeEntry *entry;
	Page		page = writer->code_image.data;

	if (cvivf_page_free_bytes(page) < writer->meta.code_entry_size)
	{
		write_next_block(writer, page, writer->code_block++);
		cvivf_page_init(page, CVIVF_PAGE_CODE);
	}
	entry = (CvIvfCodeEntry *) ((char *) page + ((PageHeader) page)->pd_lower);
	cvivf_encode_entry(&writer->meta, vector,
					   writer->centroids + (Size) writer->list * writer->meta.dimensions,
					   (ItemPointer) &header->heap_tid, entry);
	entry->data_block = block;
	entry->data_offset = (uint16) offset;
	((PageHeader) page)->pd_lower += writer->meta.code_entry_size;
}

/*
 * The code pages of a quantized list, right after its data pages, encoded
 * from the pages just written (so no list is held in memory), and where
 * the slot after its last tuple starts.
 */
static void
write_list_codes(CvIvfBuildWriter *writer)
{
	CvIvfCodedListEntry *entry = (CvIvfCodedListEntry *) writer_list_entry(writer, writer->list);

	entry->code_first_block = InvalidBlockNumber;
	entry->tail_block = InvalidBlockNumber;
	if (entry->base.tuples == 0)
		return;
	entry->tail_block = writer->page_block;
	entry->tail_offset = ((PageHeader) writer->image.data)->pd_lower;
	flush_data_page(writer, InvalidBlockNumber);
	entry->coded = (uint32) entry->base.tuples;
	entry->code_first_block = writer_run(writer, cvivf_code_pages(&writer->meta, entry->coded));
	writer->code_block = entry->code_first_block;
	cvivf_page_init(writer->code_image.data, CVIVF_PAGE_CODE);
	cvivf_scan_list(writer->index, &writer->meta, entry->base.first_block, true, NULL,
					encode_written_tuple, writer);
	write_next_block(writer, writer->code_image.data, writer->code_block++);
	Assert(writer->code_block == entry->code_first_block +
		   cvivf_code_pages(&writer->meta, entry->coded));
}

/* Ends the list being written: its last data page, and its codes when quantized. */
static void
finish_list(CvIvfBuildWriter *writer)
{
	if (writer->list >= 0 && writer->list < (int) writer->meta.lists &&
		cvivf_is_quantized(&writer->meta) && writer->fork == MAIN_FORKNUM)
		write_list_codes(writer);
	if (writer->have_page)
		flush_data_page(writer, InvalidBlockNumber);
}

/* Lists are written in order, each on pages of its own. */
void
cvivf_writer_start_list(CvIvfBuildWriter *writer, int list)
{
	Assert(list > writer->list && list < (int) writer->meta.lists);
	finish_list(writer);
	writer->list = list;
}

/* Appends one tuple to the current list, continuing on new pages as needed. */
void
cvivf_writer_add(CvIvfBuildWriter *writer, ItemPointer tid, const float *vector)
{
	CvIvfTupleHeader header = {0};
	const char *rest = (const char *) vector;
	Size		remaining = writer->tuple_size - sizeof(header);

	header.heap_tid = *tid;
	if (!writer->have_page || cvivf_page_free_bytes(writer->image.data) < sizeof(header))
		start_data_page(writer);
	cvivf_page_append(writer->image.data, &header, sizeof(header));
	while (remaining > 0)
	{
		Size		take;

		if (cvivf_page_free_bytes(writer->image.data) == 0)
			start_data_page(writer);
		take = Min(remaining, cvivf_page_free_bytes(writer->image.data));
		cvivf_page_append(writer->image.data, rest, take);
		rest += take;
		remaining -= take;
	}
	writer_list_entry(writer, writer->list)->tuples++;
	writer->meta.build_rows++;
}

/* Rewrites a directory or meta page in place as a full image. */
static void
rewrite_page(CvIvfBuildWriter *writer, BlockNumber block, Page image)
{
	Buffer		buf = ReadBufferExtended(writer->index, writer->fork, block, RBM_NORMAL, NULL);

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	write_page_image(writer->index, buf, image);
}

/* Flushes the last data page, then fills in the directory and the metapage. */
void
cvivf_writer_finish(CvIvfBuildWriter *writer)
{
	PGAlignedBlock image;
	CvIvfMetaPageData *meta = &writer->meta;
	uint32		per_page = meta->entries_per_directory_page;

	finish_list(writer);
	for (uint32 first = 0; first < meta->lists; first += per_page)
	{
		cvivf_page_init(image.data, CVIVF_PAGE_DIRECTORY);
		cvivf_page_append(image.data, writer->entries + first * writer->entry_size,
						  writer->entry_size * Min(per_page, meta->lists - first));
		rewrite_page(writer, meta->first_directory_block + first / per_page, image.data);
	}
	if (writer->relocated)
		return;
	cvivf_page_init(image.data, CVIVF_PAGE_META);
	cvivf_page_append(image.data, meta, sizeof(CvIvfMetaPageData));
	rewrite_page(writer, CVIVF_METAPAGE_BLKNO, image.data);
	if (writer->fork == INIT_FORKNUM)
		log_newpage_range(writer->index, INIT_FORKNUM, 0,
						  RelationGetNumberOfBlocksInFork(writer->index, INIT_FORKNUM), true);
}

/* ---------------------------------------------------------------------
 * Insert: one tuple into its list, in a dead slot or at the end.
 * --------------------------------------------------------------------- */

/* One insertion's pages: the directory, the list's last page, new pages. */
typedef struct TupleAppend
{
	Relation	index;
	Buffer		directory;
	Buffer		last;			/* InvalidBuffer for an empty list */
	Size		head_bytes;		/* bytes of the tuple that go on the last page */
	int			new_pages;
	Buffer	   *fresh;
	const char *tuple;
	Size		tuple_size;
	const CvIvfAppendExtra *extra;	/* NULL, or one more page for the linking record */
	Buffer		extra_buf;
	const CvIvfCodeEntry *code;	/* quantized: the tuple's code, for a coded slot */
	Size		code_size;
	CvIvfAppendExtra code_extra;	/* the extra page that writes it */
	Size		code_offset;
	CvIvfSlot	code_slot;
} TupleAppend;

/* Writes the part of the tuple that goes on fresh page i (already initialised). */
static void
fill_fresh_page(const TupleAppend *append, Page page, int i, BlockNumber next)
{
	Size		offset = append->head_bytes + (Size) i * CVIVF_PAGE_CAPACITY;

	cvivf_page_init(page, CVIVF_PAGE_DATA);
	cvivf_page_append(page, append->tuple + offset,
				Min(CVIVF_PAGE_CAPACITY, append->tuple_size - offset));
	CvIvfPageGetOpaque(page)->next = next;
}

static BlockNumber
fresh_block(const TupleAppend *append, int i)
{
	return i < append->new_pages ? BufferGetBlockNumber(append->fresh[i]) : InvalidBlockNumber;
}

/* Updates the directory entry and the last page so the tuple becomes reachable. */
static void
link_tuple(const TupleAppend *append, CvIvfListEntry *entry, Page last_page)
{
	BlockNumber first_new = fresh_block(append, 0);

	if (last_page != NULL)
	{
		cvivf_page_append(last_page, append->tuple, append->head_bytes);
		if (BlockNumberIsValid(first_new))
			CvIvfPageGetOpaque(last_page)->next = first_new;
	}
	else
		entry->first_block = first_new;
	if (append->new_pages > 0)
		entry->last_block = fresh_block(append, append->new_pages - 1);
	entry->tuples++;
}

/* Writes fresh pages [from, to) in one record; they are not reachable yet. */
static void
write_unlinked_pages(const TupleAppend *append, int from, int to)
{
	GenericXLogState *state = GenericXLogStart(append->index);

	for (int i = from; i < to; i++)
		fill_fresh_page(append, GenericXLogRegisterBuffer(state, append->fresh[i],
														  GENERIC_XLOG_FULL_IMAGE),
						i, fresh_block(append, i + 1));
	GenericXLogFinish(state);
}

/*
 * The record that makes the tuple visible: directory, last page, fresh
 * pages [0, in_link), and the extra page when there is one.
 */
static void
write_linking_record(const TupleAppend *append, const CvIvfMetaPageData *meta, int list,
					 int in_link)
{
	GenericXLogState *state = GenericXLogStart(append->index);
	Page		directory = GenericXLogRegisterBuffer(state, append->directory, 0);
	Page		last = BufferIsValid(append->last) ?
		GenericXLogRegisterBuffer(state, append->last, 0) : NULL;
	char	   *entry = cvivf_directory_entry(directory, meta, list);

	for (int i = 0; i < in_link; i++)
		fill_fresh_page(append, GenericXLogRegisterBuffer(state, append->fresh[i],
														  GENERIC_XLOG_FULL_IMAGE),
						i, fresh_block(append, i + 1));
	link_tuple(append, (CvIvfListEntry *) entry, last);
	if (append->extra != NULL)
		append->extra->apply(GenericXLogRegisterBuffer(state, append->extra_buf, 0), entry,
							 append->extra->arg);
	GenericXLogFinish(state);
}

/* Decides how much of the tuple fits on the list's last page. */
static void
plan_append(TupleAppend *append, const CvIvfListEntry *entry)
{
	Size		free_bytes = 0;

	append->last = InvalidBuffer;
	if (BlockNumberIsValid(entry->last_block))
	{
		append->last = ReadBuffer(append->index, entry->last_block);
		LockBuffer(append->last, BUFFER_LOCK_EXCLUSIVE);
		cvivf_check_page(append->index, BufferGetPage(append->last), entry->last_block,
						 CVIVF_PAGE_DATA);
		free_bytes = cvivf_page_free_bytes(BufferGetPage(append->last));
	}
	/* a header never straddles pages: it holds the flag VACUUM sets */
	append->head_bytes = free_bytes >= sizeof(CvIvfTupleHeader) ?
		Min(free_bytes, append->tuple_size) : 0;
	append->new_pages = (append->tuple_size - append->head_bytes + CVIVF_PAGE_CAPACITY - 1) /
		CVIVF_PAGE_CAPACITY;
}

/*
 * Appends (tid, vector) to a list.  The directory page lock serialises
 * appends to the lists it describes; scans take one share lock at a time.
 */
void
cvivf_append_tuple(Relation index, const CvIvfMetaPageData *meta, int list,
				   ItemPointer tid, const float *vector)
{
	cvivf_append_tuple_extra(index, meta, list, tid, vector, NULL);
}

/* ---------------------------------------------------------------------
 * Reuse: an insert fills the first dead slot of its list (see ivf.h).
 * --------------------------------------------------------------------- */

/* One dead slot being filled: its pages, locked, and where the tuple's bytes go. */
typedef struct SlotFill
{
	CvIvfSlot	slot;
	CvIvfSlot	next;			/* the slot after it, or none */
	int			count;			/* pages the slot lies on, its header's first */
	BlockNumber *blocks;
	Buffer	   *bufs;
	Size	   *page_pos;		/* where on page i the slot's bytes start */
	Size	   *tuple_pos;		/* which of the tuple's bytes go there */
	Size	   *bytes;
	Buffer		reuse;			/* InvalidBuffer: the reuse entry stays */
	CvIvfReuseEntry entry;		/* else the list's reuse entry once the slot is filled */
} SlotFill;

/* Locks the reuse page holding the list's entry. */
static Buffer
lock_reuse_page(Relation index, const CvIvfMetaPageData *meta, int list)
{
	BlockNumber block = meta->reuse_blocks[(uint32) list / CVIVF_REUSE_ENTRIES_PER_PAGE];
	Buffer		buf = ReadBuffer(index, block);

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_REUSE);
	return buf;
}

/* Writes a list's reuse entry in a record of its own (the caller holds its directory page). */
static void
write_reuse_entry(Relation index, const CvIvfMetaPageData *meta, int list,
				  const CvIvfReuseEntry *entry)
{
	Buffer		buf = lock_reuse_page(index, meta, list);
	GenericXLogState *state;

	if (memcmp(cvivf_reuse_entry(BufferGetPage(buf), list), entry, sizeof(*entry)) != 0)
	{
		state = GenericXLogStart(index);
		memcpy(cvivf_reuse_entry(GenericXLogRegisterBuffer(state, buf, 0), list), entry,
			   sizeof(*entry));
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(buf);
}

/* Locks the slot's pages in chain order and works out where the tuple's bytes go. */
static void
lock_slot_pages(const TupleAppend *append, SlotFill *fill)
{
	Size		pos = fill->slot.offset;
	Size		done = 0;

	fill->bufs = palloc(sizeof(Buffer) * fill->count);
	fill->page_pos = palloc(sizeof(Size) * fill->count);
	fill->tuple_pos = palloc(sizeof(Size) * fill->count);
	fill->bytes = palloc(sizeof(Size) * fill->count);
	for (int i = 0; i < fill->count; i++)
	{
		Page		page;
		Size		end;

		fill->bufs[i] = ReadBuffer(append->index, fill->blocks[i]);
		LockBuffer(fill->bufs[i], BUFFER_LOCK_EXCLUSIVE);
		page = BufferGetPage(fill->bufs[i]);
		cvivf_check_page(append->index, page, fill->blocks[i], CVIVF_PAGE_DATA);
		end = ((PageHeader) page)->pd_lower;
		fill->page_pos[i] = pos;
		fill->tuple_pos[i] = done;
		fill->bytes[i] = pos < end ? Min(append->tuple_size - done, end - pos) : 0;
		done += fill->bytes[i];
		pos = CVIVF_PAGE_DATA_START;
	}
	if (done != append->tuple_size ||
		!(((CvIvfTupleHeader *) ((char *) BufferGetPage(fill->bufs[0]) +
								 fill->slot.offset))->flags & CVIVF_TUPLE_DEAD))
		elog(ERROR, "slot at block %u, offset %u of index \"%s\" changed under its directory lock",
			 fill->slot.block, fill->slot.offset, RelationGetRelationName(append->index));
}

/* Copies the tuple's bytes that go on the slot's page i. */
static void
write_slot_part(const TupleAppend *append, const SlotFill *fill, Page page, int i)
{
	memcpy((char *) page + fill->page_pos[i], append->tuple + fill->tuple_pos[i], fill->bytes[i]);
}

/*
 * Writes the tuple into the slot.  The header page goes last, in the record
 * that also counts the tuple in the directory (and moves the reuse entry
 * on, when it moves): until then the header still says dead, so scans skip
 * the slot whatever its continuation pages hold, and a crash leaves it dead.
 */
static void
write_fill(const TupleAppend *append, const CvIvfMetaPageData *meta, int list, SlotFill *fill)
{
	int			in_link = Min(fill->count - 1,
							  MAX_GENERIC_XLOG_PAGES - 2 - (BufferIsValid(fill->reuse) ? 1 : 0) -
							  (append->extra != NULL ? 1 : 0));
	GenericXLogState *state;
	char	   *entry;

	for (int from = 1 + in_link; from < fill->count; from += MAX_GENERIC_XLOG_PAGES)
	{
		state = GenericXLogStart(append->index);
		for (int i = from; i < Min(from + MAX_GENERIC_XLOG_PAGES, fill->count); i++)
			write_slot_part(append, fill, GenericXLogRegisterBuffer(state, fill->bufs[i], 0), i);
		GenericXLogFinish(state);
	}
	state = GenericXLogStart(append->index);
	entry = cvivf_directory_entry(GenericXLogRegisterBuffer(state, append->directory, 0),
								  meta, list);
	for (int i = 0; i <= in_link; i++)
		write_slot_part(append, fill, GenericXLogRegisterBuffer(state, fill->bufs[i], 0), i);
	if (BufferIsValid(fill->reuse))
		memcpy(cvivf_reuse_entry(GenericXLogRegisterBuffer(state, fill->reuse, 0), list),
			   &fill->entry, sizeof(fill->entry));
	((CvIvfListEntry *) entry)->tuples++;
	if (append->extra != NULL)
		append->extra->apply(GenericXLogRegisterBuffer(state, append->extra_buf, 0), entry,
							 append->extra->arg);
	GenericXLogFinish(state);
}

/* Writes the filled slot's code entry: live, the new tuple's code, the slot's location. */
static void
apply_code_rewrite(Page page, char *entry pg_attribute_unused(), void *arg)
{
	TupleAppend *append = (TupleAppend *) arg;
	CvIvfCodeEntry *code = (CvIvfCodeEntry *) ((char *) page + append->code_offset);

	if (code->data_block != append->code_slot.block ||
		code->data_offset != append->code_slot.offset)
		elog(ERROR, "code entry at block %u, offset %zu of index \"%s\" is not the slot's",
			 append->code_extra.block, append->code_offset,
			 RelationGetRelationName(append->index));
	memcpy(code, append->code, append->code_size);
	code->data_block = append->code_slot.block;
	code->data_offset = (uint16) append->code_slot.offset;
}

/*
 * A dead slot among a quantized list's coded ones has a code entry that
 * must describe the tuple that fills it, in the record that makes the
 * tuple live: the code page becomes the fill's extra page.
 */
static void
plan_code_rewrite(TupleAppend *append, const CvIvfMetaPageData *meta, int list, CvIvfSlot slot)
{
	CvIvfCodedListEntry entry;
	uint32		ordinal;

	if (append->code == NULL)
		return;
	Assert(append->extra == NULL);
	memcpy(&entry, cvivf_directory_entry(BufferGetPage(append->directory), meta, list),
		   sizeof(entry));
	if (!cvivf_coded_slot_ordinal(meta, &entry, slot.block, slot.offset, &ordinal))
		return;
	cvivf_code_location(meta, &entry, ordinal, &append->code_extra.block, &append->code_offset);
	append->code_slot = slot;
	append->code_size = meta->code_entry_size;
	append->code_extra.apply = apply_code_rewrite;
	append->code_extra.arg = append;
	append->extra = &append->code_extra;
}

/*
 * Fills the list's first dead slot with the tuple; false when the list has
 * none (the caller appends).  Whether the slot lies in the list's dead
 * tail, the search from first_dead tells, since first_dead never passes
 * dead_tail without moving it along.  The reuse entry is rewritten only when the
 * search crossed a page or the chain ends after the slot, so most fills
 * change two pages, as appends do.  Runs under the list's directory page
 * lock, like every change of the list.
 */
static bool
fill_dead_slot(TupleAppend *append, const CvIvfMetaPageData *meta, int list)
{
	Relation	index = append->index;
	CvIvfReuseEntry entry;
	SlotFill	fill = {0};
	bool		in_tail;

	if (!cvivf_read_reuse_entry(index, meta, list, &entry) ||
		!BlockNumberIsValid(entry.first_dead.block))
		return false;
	if (!cvivf_find_dead_slot(index, meta, entry.first_dead, entry.dead_tail, &fill.slot,
							  &in_tail))
	{
		CvIvfReuseEntry none = {{InvalidBlockNumber, 0}, {InvalidBlockNumber, 0}};

		write_reuse_entry(index, meta, list, &none);
		return false;
	}
	fill.blocks = cvivf_slot_pages(index, meta, fill.slot, &fill.count, &fill.next);
	plan_code_rewrite(append, meta, list, fill.slot);
	fill.reuse = InvalidBuffer;
	if (fill.slot.block != entry.first_dead.block || !BlockNumberIsValid(fill.next.block))
	{
		/* the next dead slot is after this one; in the tail, all after it are dead */
		fill.entry.first_dead = fill.next;
		fill.entry.dead_tail = in_tail ? fill.next : entry.dead_tail;
	}
	lock_slot_pages(append, &fill);
	if (append->extra != NULL)
	{
		append->extra_buf = ReadBuffer(index, append->extra->block);
		LockBuffer(append->extra_buf, BUFFER_LOCK_EXCLUSIVE);
	}
	if (fill.slot.block != entry.first_dead.block || !BlockNumberIsValid(fill.next.block))
		fill.reuse = lock_reuse_page(index, meta, list);
	write_fill(append, meta, list, &fill);
	if (BufferIsValid(fill.reuse))
		UnlockReleaseBuffer(fill.reuse);
	if (append->extra != NULL)
		UnlockReleaseBuffer(append->extra_buf);
	for (int i = 0; i < fill.count; i++)
		UnlockReleaseBuffer(fill.bufs[i]);
	return true;
}

/* Appends the tuple at the end of its list; the caller holds the directory page. */
static void
append_at_end(TupleAppend *append, const CvIvfMetaPageData *meta, int list)
{
	const CvIvfAppendExtra *extra = append->extra;
	int			in_link;

	plan_append(append, (CvIvfListEntry *) cvivf_directory_entry(BufferGetPage(append->directory),
																   meta, list));
	append->fresh = palloc(sizeof(Buffer) * Max(append->new_pages, 1));
	for (int i = 0; i < append->new_pages; i++)
		append->fresh[i] = cvivf_new_page(append->index);
	if (extra != NULL)
	{
		append->extra_buf = ReadBuffer(append->index, extra->block);
		LockBuffer(append->extra_buf, BUFFER_LOCK_EXCLUSIVE);
	}

	/* continuation pages first, unlinked, until the rest fits one record */
	in_link = Min(append->new_pages,
				  MAX_GENERIC_XLOG_PAGES - 1 - (BufferIsValid(append->last) ? 1 : 0) -
				  (extra != NULL ? 1 : 0));
	for (int from = in_link; from < append->new_pages; from += MAX_GENERIC_XLOG_PAGES)
		write_unlinked_pages(append, from, Min(from + MAX_GENERIC_XLOG_PAGES, append->new_pages));
	write_linking_record(append, meta, list, in_link);

	if (extra != NULL)
		UnlockReleaseBuffer(append->extra_buf);
	for (int i = 0; i < append->new_pages; i++)
		UnlockReleaseBuffer(append->fresh[i]);
	if (BufferIsValid(append->last))
		UnlockReleaseBuffer(append->last);
	pfree(append->fresh);
}

/*
 * The same, changing one more page (extra, when not NULL) in the record
 * that links the tuple.  The extra page is locked after the list's pages,
 * so every appender takes its locks in one order: directory, the list's
 * data pages (last page and fresh pages, or a dead slot's pages), extra
 * page, reuse page.
 *
 * The tuple fills the list's first dead slot when it has one (fill_dead_slot),
 * else goes at the end.  A slot in the list's dead tail lies after every
 * live tuple, so after every GPU mirror's recorded end of the list: filling
 * it is an append, which mirror_merge.c reads from the pages.  A slot
 * inside the list may lie before a mirror's end, where mirror_merge.c does
 * not read; the list's count then exceeds the mirrored rows plus its tail,
 * which mirror_merge.c checks under the directory page's lock (this fill
 * changes the count under that lock too), and the scan reads that list on
 * the CPU.  No generation goes up: a table whose rows are deleted and
 * inserted again keeps its mirror until the next VACUUM.
 */
static void
append_tuple(Relation index, const CvIvfMetaPageData *meta, int list, ItemPointer tid,
			 const float *vector, const CvIvfAppendExtra *extra, const CvIvfCodeEntry *code)
{
	TupleAppend append = {0};
	CvIvfTupleHeader *header;
	BlockNumber dir_block = cvivf_directory_block(meta, list);

	append.index = index;
	append.extra = extra;
	append.code = code;
	append.tuple_size = CVIVF_TUPLE_SIZE(meta->dimensions);
	append.tuple = palloc(append.tuple_size);
	header = (CvIvfTupleHeader *) append.tuple;
	header->heap_tid = *tid;
	header->flags = 0;
	memcpy((char *) append.tuple + sizeof(CvIvfTupleHeader), vector,
		   sizeof(float) * meta->dimensions);

	append.directory = ReadBuffer(index, dir_block);
	LockBuffer(append.directory, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(append.directory), dir_block, CVIVF_PAGE_DIRECTORY);
	if (!fill_dead_slot(&append, meta, list))
		append_at_end(&append, meta, list);
	UnlockReleaseBuffer(append.directory);
	pfree((char *) append.tuple);
}

void
cvivf_append_tuple_extra(Relation index, const CvIvfMetaPageData *meta, int list,
						 ItemPointer tid, const float *vector, const CvIvfAppendExtra *extra)
{
	append_tuple(index, meta, list, tid, vector, extra, NULL);
}

/*
 * The same for a quantized list, whose tuple has code (encoded against the
 * list's centroid): a fill of a coded slot rewrites the slot's code entry
 * in the record that makes the tuple live.  An append at the end needs no
 * code: the slots after the build's are read whole.
 */
void
cvivf_append_tuple_coded(Relation index, const CvIvfMetaPageData *meta, int list,
						 ItemPointer tid, const float *vector, const CvIvfCodeEntry *code)
{
	append_tuple(index, meta, list, tid, vector, NULL, code);
}

/* ---------------------------------------------------------------------
 * Vacuum: flag dead tuples in place (slots never move, so offsets and a
 * mirror's recorded list ends stay valid), fix the counts, record where
 * each list's dead slots are, and reclaim pages no chain reaches.
 * --------------------------------------------------------------------- */

/*
 * Registers the metapage in a record, its pd_lower covering the whole
 * CvIvfMetaPageData: a metapage written before the reuse fields ends
 * earlier, and GenericXLog keeps only the bytes below pd_lower (and above
 * pd_upper), so fields written past it would be lost.  Those bytes are
 * zero (PageInit), as the reader assumes.
 */
static CvIvfMetaPage
register_whole_meta(GenericXLogState *state, Buffer meta_buf)
{
	Page		page = GenericXLogRegisterBuffer(state, meta_buf, 0);
	Size		lower = (Size) ((char *) CvIvfPageGetMeta(page) - (char *) page) +
		sizeof(CvIvfMetaPageData);

	if (((PageHeader) page)->pd_lower < lower)
		((PageHeader) page)->pd_lower = lower;
	return CvIvfPageGetMeta(page);
}

/*
 * Makes reuse pages until they cover lists lists, each in one record with
 * the metapage (locked first, as everywhere).  A new page's entries say
 * "no dead slot".
 */
void
cvivf_reuse_prepare(Relation index, uint32 lists)
{
	uint32		needed = (lists + CVIVF_REUSE_ENTRIES_PER_PAGE - 1) / CVIVF_REUSE_ENTRIES_PER_PAGE;
	Buffer		meta_buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);

	LockBuffer(meta_buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(meta_buf), CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	while (CvIvfPageGetMeta(BufferGetPage(meta_buf))->reuse_pages < needed)
	{
		Buffer		buf = cvivf_extend(index, MAIN_FORKNUM, true);
		GenericXLogState *state = GenericXLogStart(index);
		CvIvfMetaPage meta = register_whole_meta(state, meta_buf);
		Page		page = GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE);
		CvIvfReuseEntry none = {{InvalidBlockNumber, 0}, {InvalidBlockNumber, 0}};

		cvivf_page_init(page, CVIVF_PAGE_REUSE);
		for (uint32 i = 0; i < CVIVF_REUSE_ENTRIES_PER_PAGE; i++)
			cvivf_page_append(page, &none, sizeof(none));
		meta->reuse_blocks[meta->reuse_pages++] = BufferGetBlockNumber(buf);
		GenericXLogFinish(state);
		UnlockReleaseBuffer(buf);
	}
	UnlockReleaseBuffer(meta_buf);
}

/*
 * VACUUM's reuse entry for a list, computed from its walk of the list.
 * When the list still counts expected_tuples, no insert came since the
 * walk began (only VACUUM lowers counts), so the entry is exact.  Else it
 * keeps only first_dead, still a lower bound (inserts never make a slot
 * dead): a dead tail computed before an append would lie before a live
 * tuple.
 */
void
cvivf_set_reuse_entry(Relation index, const CvIvfMetaPageData *meta, int list,
					  uint64 expected_tuples, const CvIvfReuseEntry *exact,
					  BufferAccessStrategy strategy)
{
	BlockNumber dir_block = cvivf_directory_block(meta, list);
	Buffer		dir_buf = ReadBufferExtended(index, MAIN_FORKNUM, dir_block, RBM_NORMAL, strategy);
	CvIvfReuseEntry entry = *exact;

	LockBuffer(dir_buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(dir_buf), dir_block, CVIVF_PAGE_DIRECTORY);
	if (((CvIvfListEntry *) cvivf_directory_entry(BufferGetPage(dir_buf), meta, list))->tuples !=
		expected_tuples)
	{
		entry.dead_tail.block = InvalidBlockNumber;
		entry.dead_tail.offset = 0;
	}
	write_reuse_entry(index, meta, list, &entry);
	UnlockReleaseBuffer(dir_buf);
}

/*
 * Formats a page no list chain reaches as free (one full-image record) and
 * records it in the free space map; false when it is not a data page or a
 * never-written one any more.  vacuum.c decides which pages no chain
 * reaches; no scan can hold a pointer to such a page, since only linked
 * pages are ever followed.
 */
static bool
reclaim_page(Relation index, BlockNumber block, BufferAccessStrategy strategy, bool retired)
{
	Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
	Page		page;
	GenericXLogState *state;
	bool		ours;
	bool		reclaim;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	ours = !PageIsNew(page) &&
		PageGetSpecialSize(page) == MAXALIGN(sizeof(CvIvfPageOpaqueData)) &&
		CvIvfPageGetOpaque(page)->page_id == CVIVF_PAGE_ID;
	reclaim = PageIsNew(page) ||
		(ours && CvIvfPageGetOpaque(page)->kind == CVIVF_PAGE_DATA) ||
		(ours && retired && CvIvfPageGetOpaque(page)->kind != CVIVF_PAGE_META &&
		 CvIvfPageGetOpaque(page)->kind != CVIVF_PAGE_FREE);
	if (reclaim)
	{
		state = GenericXLogStart(index);
		cvivf_page_init(GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE),
						CVIVF_PAGE_FREE);
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(buf);
	if (reclaim)
		RecordFreeIndexPage(index, block);
	return reclaim;
}

bool
cvivf_reclaim_page(Relation index, BlockNumber block, BufferAccessStrategy strategy)
{
	return reclaim_page(index, block, strategy, false);
}

/*
 * The same for a page of a retired generation (any kind but the metapage),
 * once no scan can still be reading it (ivf.h, "Retraining").
 */
bool
cvivf_reclaim_retired_page(Relation index, BlockNumber block, BufferAccessStrategy strategy)
{
	return reclaim_page(index, block, strategy, true);
}

/*
 * Writes the drift pages of a just-built index (the baseline of lists
 * lists), each as a full image, then one record that lists them in the
 * metapage.  Nobody else sees an index under construction, and a crash
 * before the last record leaves only pages nothing lists.
 */
static uint32
write_drift_pages(Relation index, const CvIvfDriftEntry *entries, uint32 lists,
				  BlockNumber *blocks)
{
	uint32		pages = 0;

	Assert(lists <= CVIVF_MAX_LISTS);
	for (uint32 first = 0; first < lists; first += CVIVF_DRIFT_ENTRIES_PER_PAGE)
	{
		Buffer		buf = cvivf_extend(index, MAIN_FORKNUM, true);
		PGAlignedBlock image;

		cvivf_page_init(image.data, CVIVF_PAGE_DRIFT);
		cvivf_page_append(image.data, entries + first,
						  sizeof(CvIvfDriftEntry) * Min(CVIVF_DRIFT_ENTRIES_PER_PAGE, lists - first));
		blocks[pages++] = BufferGetBlockNumber(buf);
		write_page_image(index, buf, image.data);
	}
	return pages;
}

void
cvivf_write_drift(Relation index, const CvIvfDriftEntry *entries, uint32 lists)
{
	BlockNumber blocks[CVIVF_MAX_DRIFT_PAGES];
	uint32		pages = write_drift_pages(index, entries, lists, blocks);
	Buffer		meta_buf;
	GenericXLogState *state;
	CvIvfMetaPage meta;

	meta_buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	LockBuffer(meta_buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(meta_buf), CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	state = GenericXLogStart(index);
	meta = register_whole_meta(state, meta_buf);
	memcpy(meta->drift_blocks, blocks, sizeof(BlockNumber) * pages);
	meta->drift_pages = pages;
	meta->drift_lists = lists;
	meta->build_blocks = RelationGetNumberOfBlocks(index);
	GenericXLogFinish(state);
	UnlockReleaseBuffer(meta_buf);
}

/*
 * The drift pages of a relocated writer's generation, listed in the
 * metapage it will switch to.
 */
void
cvivf_writer_drift(CvIvfBuildWriter *writer, const CvIvfDriftEntry *entries, uint32 lists)
{
	CvIvfMetaPageData *meta = &writer->meta;

	Assert(writer->relocated);
	meta->drift_pages = write_drift_pages(writer->index, entries, lists, meta->drift_blocks);
	meta->drift_lists = lists;
	writer->reserved += meta->drift_pages;
}

/* The drift page holding a list's entry, locked exclusively; InvalidBuffer for none. */
static Buffer
lock_drift_page(Relation index, const CvIvfMetaPageData *meta, int list,
				BufferAccessStrategy strategy)
{
	uint32		page_index = (uint32) list / CVIVF_DRIFT_ENTRIES_PER_PAGE;
	Buffer		buf;

	if ((uint32) list >= meta->drift_lists || page_index >= meta->drift_pages)
		return InvalidBuffer;
	buf = ReadBufferExtended(index, MAIN_FORKNUM, meta->drift_blocks[page_index], RBM_NORMAL,
							 strategy);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), meta->drift_blocks[page_index], CVIVF_PAGE_DRIFT);
	return buf;
}

/* A list's drift entry on its (registered) drift page. */
static CvIvfDriftEntry *
drift_entry(Page page, int list)
{
	return (CvIvfDriftEntry *) ((char *) page + CVIVF_PAGE_DATA_START) +
		(uint32) list % CVIVF_DRIFT_ENTRIES_PER_PAGE;
}

/*
 * Sets the dead flag of the tuples whose headers start at offsets on block,
 * and subtracts them from their list's count in the same WAL record, so a
 * crash between two pages never leaves a count that disagrees with the
 * flags; the list's drift entry (if it has one) counts them as deleted in
 * that record too.  The directory page is locked first, as inserts do, and
 * the drift page last (only VACUUM writes it).
 */
int
cvivf_mark_dead(Relation index, const CvIvfMetaPageData *meta, int list, BlockNumber block,
				const Size *offsets, int count, BufferAccessStrategy strategy)
{
	BlockNumber dir_block = cvivf_directory_block(meta, list);
	Buffer		dir_buf = ReadBufferExtended(index, MAIN_FORKNUM, dir_block, RBM_NORMAL, strategy);
	Buffer		buf;
	Buffer		drift_buf;
	GenericXLogState *state;
	Page		page;
	CvIvfListEntry *entry;
	int			marked = 0;

	LockBuffer(dir_buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(dir_buf), dir_block, CVIVF_PAGE_DIRECTORY);
	buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_DATA);
	drift_buf = lock_drift_page(index, meta, list, strategy);
	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, buf, 0);
	entry = (CvIvfListEntry *) cvivf_directory_entry(GenericXLogRegisterBuffer(state, dir_buf, 0),
													 meta, list);
	for (int i = 0; i < count; i++)
	{
		CvIvfTupleHeader *header = (CvIvfTupleHeader *) ((char *) page + offsets[i]);

		if (!(header->flags & CVIVF_TUPLE_DEAD))
		{
			header->flags |= CVIVF_TUPLE_DEAD;
			marked++;
		}
	}
	entry->tuples -= Min(entry->tuples, (uint64) marked);
	if (marked > 0 && BufferIsValid(drift_buf))
		drift_entry(GenericXLogRegisterBuffer(state, drift_buf, 0), list)->deleted_since_build +=
			marked;
	if (marked > 0)
		GenericXLogFinish(state);
	else
		GenericXLogAbort(state);
	if (BufferIsValid(drift_buf))
		UnlockReleaseBuffer(drift_buf);
	UnlockReleaseBuffer(buf);
	UnlockReleaseBuffer(dir_buf);
	return marked;
}

/* Bumps the generation: a mirror of the old contents must not be used. */
void
cvivf_bump_generation(Relation index)
{
	Buffer		buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	GenericXLogState *state;
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, buf, 0);
	CvIvfPageGetMeta(page)->generation++;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

/* Replaces the metapage's recall calibration (build and cvivf_calibrate). */
void
cvivf_write_calibration(Relation index, const CvIvfCalibration *calibration)
{
	Buffer		buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	GenericXLogState *state;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	state = GenericXLogStart(index);
	/* a metapage written before calibration ends before it */
	register_whole_meta(state, buf)->calibration = *calibration;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
}

/* Records the dimensions of an index that was built without knowing them. */
void
cvivf_set_dimensions(Relation index, int dimensions)
{
	Buffer		buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	GenericXLogState *state;
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(index);
	page = GenericXLogRegisterBuffer(state, buf, 0);
	if (CvIvfPageGetMeta(page)->dimensions == 0)
	{
		CvIvfPageGetMeta(page)->dimensions = dimensions;
		GenericXLogFinish(state);
	}
	else
		GenericXLogAbort(state);
	UnlockReleaseBuffer(buf);
}

/*
 * Flags dead the code entries of a quantized list's coded slots ordinals
 * (ascending) whose entry still holds tids' TID, one record per code page.
 * VACUUM calls it before it flags the tuples themselves: until then a
 * dead code only hides a row no snapshot sees, while a live code over a
 * dead tuple would let a fill (which takes dead tuples' slots) race this
 * flag.  A slot filled meanwhile holds another TID and is left alone.
 */
int
cvivf_mark_codes_dead(Relation index, const CvIvfMetaPageData *meta,
					  const CvIvfCodedListEntry *entry, const uint32 *ordinals,
					  const ItemPointerData *tids, int count, BufferAccessStrategy strategy)
{
	int			flagged = 0;
	int			start = 0;

	while (start < count)
	{
		BlockNumber block;
		BlockNumber other;
		Size		offset;
		Buffer		buf;
		GenericXLogState *state;
		Page		page;
		int			end = start;

		cvivf_code_location(meta, entry, ordinals[start], &block, &offset);
		buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_CODE);
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, buf, 0);
		for (; end < count; end++)
		{
			CvIvfCodeEntry *code;

			cvivf_code_location(meta, entry, ordinals[end], &other, &offset);
			if (other != block)
				break;
			code = (CvIvfCodeEntry *) ((char *) page + offset);
			if (!(code->header.flags & CVIVF_TUPLE_DEAD) &&
				ItemPointerEquals(&code->header.heap_tid, (ItemPointer) &tids[end]))
			{
				code->header.flags |= CVIVF_TUPLE_DEAD;
				flagged++;
			}
		}
		GenericXLogFinish(state);
		UnlockReleaseBuffer(buf);
		start = end;
	}
	return flagged;
}

/* ---------------------------------------------------------------------
 * Retraining: the switch to a new generation, and the old one's pages
 * freed (ivf.h, "Retraining").
 * --------------------------------------------------------------------- */

/*
 * Makes pending (a relocated writer's metapage) the index's metapage, in
 * one record: every later reader sees the new generation, no reader a mix.
 * Returns the retired_xid it recorded.
 */
uint64
cvivf_switch_generation(Relation index, CvIvfMetaPageData *pending)
{
	Buffer		buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	GenericXLogState *state;
	CvIvfMetaPage meta;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	meta = CvIvfPageGetMeta(BufferGetPage(buf));
	pending->generation = meta->generation + 1;
	pending->retrains = meta->retrains + 1;
	pending->retired_xid = U64FromFullTransactionId(ReadNextFullTransactionId());
	state = GenericXLogStart(index);
	meta = register_whole_meta(state, buf);
	memcpy(meta, pending, sizeof(CvIvfMetaPageData));
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
	return pending->retired_xid;
}

/* Clears retired_xid once the pages it guarded are free, unless a later retrain moved it. */
void
cvivf_clear_retired(Relation index, uint64 retired_xid)
{
	Buffer		buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	GenericXLogState *state;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	if (CvIvfPageGetMeta(BufferGetPage(buf))->retired_xid == retired_xid)
	{
		state = GenericXLogStart(index);
		register_whole_meta(state, buf)->retired_xid = 0;
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(buf);
}
