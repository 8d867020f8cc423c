/*
 * page.c (lattice): the sibling of src/ivf/page.c for the pages only
 * cvlattice has or changes: new lists, exact centroids, label pages.  Every
 * change goes through GenericXLog; the lock order is the one appends use
 * (metapage, directory, data pages, centroid, label page), so no two
 * writers wait on each other in a cycle.
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "lattice/lattice.h"

/* The label bytes a label page holds for one list: length, bytes, padding. */
static Size
label_record_size(const bytea *label)
{
	return MAXALIGN(sizeof(uint32) + VARSIZE(label) - VARHDRSZ);
}

static void
append_label(Page page, const bytea *label)
{
	uint32		length = VARSIZE(label) - VARHDRSZ;
	char		padding[MAXIMUM_ALIGNOF] = {0};
	Size		size = label_record_size(label);

	cvivf_page_append(page, &length, sizeof(length));
	cvivf_page_append(page, VARDATA(label), length);
	cvivf_page_append(page, padding, size - sizeof(length) - length);
}

/* The label page a build is filling, and the first list on it. */
typedef struct LabelPage
{
	PGAlignedBlock image;
	int			first;
	bool		used;
} LabelPage;

/* Writes the label page being filled and points its lists' entries at it. */
static void
flush_label_page(CvIvfBuildWriter *writer, LabelPage *page, const bytea *const *labels, int end)
{
	BlockNumber block = cvivf_writer_page(writer, page->image.data);

	for (int list = page->first; list < end; list++)
		if (labels[list] != NULL)
			((CvLatticeListEntry *) cvivf_writer_entry(writer, list))->label_block = block;
	cvivf_writer_meta(writer)->last_label_block = block;
	page->used = false;
}

/*
 * Build: the labels on pages after the lists, recording in each list's
 * directory entry where its label is (the NULL label has none).
 */
void
cvlattice_write_label_pages(CvIvfBuildWriter *writer, const bytea *const *labels, int lists)
{
	LabelPage	page = {0};

	for (int list = 0; list < lists; list++)
	{
		if (labels[list] == NULL)
			continue;
		if (page.used &&
			cvivf_page_free_bytes(page.image.data) < label_record_size(labels[list]))
			flush_label_page(writer, &page, labels, list);
		if (!page.used)
		{
			cvivf_page_init(page.image.data, CV_LATTICE_PAGE_LABEL);
			page.used = true;
			page.first = list;
		}
		((CvLatticeListEntry *) cvivf_writer_entry(writer, list))->label_offset =
			((PageHeader) page.image.data)->pd_lower;
		append_label(page.image.data, labels[list]);
	}
	if (page.used)
		flush_label_page(writer, &page, labels, lists);
}

/* The page a new list's part goes on: the last one when room is left, else a fresh one. */
static Buffer
page_with_room(Relation index, BlockNumber last, uint16 kind, Size needed, bool *fresh)
{
	Buffer		buf;

	if (BlockNumberIsValid(last))
	{
		buf = ReadBuffer(index, last);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		cvivf_check_page(index, BufferGetPage(buf), last, kind);
		if (cvivf_page_free_bytes(BufferGetPage(buf)) >= needed)
		{
			*fresh = false;
			return buf;
		}
		UnlockReleaseBuffer(buf);
	}
	*fresh = true;
	return cvivf_extend(index, MAIN_FORKNUM, true);
}

/* Registers a buffer in the record, formatting it when it is a fresh page. */
static Page
register_page(GenericXLogState *state, Buffer buf, bool fresh, uint16 kind)
{
	Page		page = GenericXLogRegisterBuffer(state, buf, fresh ? GENERIC_XLOG_FULL_IMAGE : 0);

	if (fresh)
		cvivf_page_init(page, kind);
	return page;
}

/* What a new list's record changes: pages, and whether each is fresh. */
typedef struct NewList
{
	Buffer		directory;
	Buffer		centroid;
	Buffer		label;			/* InvalidBuffer for the NULL label */
	bool		fresh_directory;
	bool		fresh_centroid;
	bool		fresh_label;
} NewList;

/* Locks (or makes) the directory, centroid and label pages the new list takes room on. */
static void
lock_new_list_pages(Relation index, const CvIvfMetaPageData *meta, const bytea *label,
					NewList *pages)
{
	Size		centroid_bytes = sizeof(float) * meta->dimensions;

	if (meta->lists % meta->entries_per_directory_page == 0)
	{
		pages->directory = cvivf_extend(index, MAIN_FORKNUM, true);
		pages->fresh_directory = true;
	}
	else
		pages->directory = page_with_room(index, meta->directory_blocks[meta->directory_pages - 1],
										  CVIVF_PAGE_DIRECTORY, sizeof(CvLatticeListEntry),
										  &pages->fresh_directory);
	pages->centroid = page_with_room(index, meta->last_centroid_block, CVIVF_PAGE_CENTROID,
									 centroid_bytes, &pages->fresh_centroid);
	pages->label = InvalidBuffer;
	if (label != NULL)
		pages->label = page_with_room(index, meta->last_label_block, CV_LATTICE_PAGE_LABEL,
									  label_record_size(label), &pages->fresh_label);
}

/* The one record that creates list meta->lists: all four pages, or three for the NULL label. */
static void
write_new_list(Relation index, Buffer meta_buf, const bytea *label, const NewList *pages)
{
	GenericXLogState *state = GenericXLogStart(index);
	CvIvfMetaPage meta = CvIvfPageGetMeta(GenericXLogRegisterBuffer(state, meta_buf, 0));
	Page		directory = register_page(state, pages->directory, pages->fresh_directory,
										  CVIVF_PAGE_DIRECTORY);
	Page		centroid = register_page(state, pages->centroid, pages->fresh_centroid,
										 CVIVF_PAGE_CENTROID);
	CvLatticeListEntry entry = {0};
	float	   *zeros = palloc0(sizeof(float) * Max(meta->dimensions, 1));

	entry.base.first_block = InvalidBlockNumber;
	entry.base.last_block = InvalidBlockNumber;
	entry.centroid_block = BufferGetBlockNumber(pages->centroid);
	entry.centroid_offset = ((PageHeader) centroid)->pd_lower;
	cvivf_page_append(centroid, zeros, sizeof(float) * meta->dimensions);
	entry.label_block = InvalidBlockNumber;
	if (BufferIsValid(pages->label))
	{
		Page		label_page = register_page(state, pages->label, pages->fresh_label,
											   CV_LATTICE_PAGE_LABEL);

		entry.label_block = BufferGetBlockNumber(pages->label);
		entry.label_offset = ((PageHeader) label_page)->pd_lower;
		append_label(label_page, label);
		meta->last_label_block = entry.label_block;
	}
	Assert(cvivf_directory_entry(directory, meta, meta->lists) ==
		   (char *) directory + ((PageHeader) directory)->pd_lower);
	cvivf_page_append(directory, &entry, sizeof(entry));
	if (pages->fresh_directory)
		meta->directory_blocks[meta->directory_pages++] = BufferGetBlockNumber(pages->directory);
	meta->last_centroid_block = entry.centroid_block;
	meta->lists++;
	/* a GPU mirror holds the lists it was made of: a new one makes it stale */
	meta->generation++;
	GenericXLogFinish(state);
	pfree(zeros);
}

static void
release_new_list_pages(const NewList *pages)
{
	if (BufferIsValid(pages->label))
		UnlockReleaseBuffer(pages->label);
	UnlockReleaseBuffer(pages->centroid);
	UnlockReleaseBuffer(pages->directory);
}

/*
 * The list of a label, creating it (empty, centroid zero: its first member
 * sets it) when no list has the label.  The metapage is locked exclusively
 * from the lookup to the record, so two backends never both create a list
 * for one label, and the record that numbers the list also stores its label.
 */
int
cvlattice_add_list(Relation index, const CvLatticeLabelType *type, Datum label, bool isnull)
{
	Buffer		meta_buf = ReadBuffer(index, CVIVF_METAPAGE_BLKNO);
	CvIvfMetaPageData meta;
	bytea	   *bytes = isnull ? NULL : cvlattice_label_bytes(type, label);
	NewList		pages = {0};
	int			list;

	LockBuffer(meta_buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(meta_buf), CVIVF_METAPAGE_BLKNO, CVIVF_PAGE_META);
	memcpy(&meta, CvIvfPageGetMeta(BufferGetPage(meta_buf)), sizeof(meta));
	Assert(cvlattice_is(&meta) && meta.dimensions > 0);
	list = cvlattice_find_list(index, &meta, label, isnull);
	if (list < 0)
	{
		if (meta.lists >= CVIVF_MAX_LISTS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("cvlattice index \"%s\" already has the maximum of %d labels",
							RelationGetRelationName(index), CVIVF_MAX_LISTS),
					 errhint("Use fewer distinct labels, or a cvivf index.")));
		lock_new_list_pages(index, &meta, bytes, &pages);
		write_new_list(index, meta_buf, bytes, &pages);
		release_new_list_pages(&pages);
		list = meta.lists;
	}
	UnlockReleaseBuffer(meta_buf);
	return list;
}

/*
 * Replaces a list's centroid by what compute makes of the list, holding the
 * list's directory page exclusively from before compute reads the list to
 * the record, so no insert into the list falls between the two.
 */
void
cvlattice_replace_centroid(Relation index, const CvIvfMetaPageData *meta, int list,
						   BufferAccessStrategy strategy, CvLatticeComputeCentroid compute)
{
	BlockNumber dir_block = cvivf_directory_block(meta, list);
	Buffer		dir_buf = ReadBufferExtended(index, MAIN_FORKNUM, dir_block, RBM_NORMAL, strategy);
	CvLatticeListEntry entry;
	float	   *centroid = palloc(sizeof(float) * Max(meta->dimensions, 1));
	double		norm;
	Buffer		buf;
	GenericXLogState *state;
	CvLatticeListEntry *target;

	LockBuffer(dir_buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(dir_buf), dir_block, CVIVF_PAGE_DIRECTORY);
	memcpy(&entry, cvivf_directory_entry(BufferGetPage(dir_buf), meta, list), sizeof(entry));
	norm = compute(index, meta, &entry, strategy, centroid);
	buf = ReadBufferExtended(index, MAIN_FORKNUM, entry.centroid_block, RBM_NORMAL, strategy);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	cvivf_check_page(index, BufferGetPage(buf), entry.centroid_block, CVIVF_PAGE_CENTROID);
	state = GenericXLogStart(index);
	target = (CvLatticeListEntry *)
		cvivf_directory_entry(GenericXLogRegisterBuffer(state, dir_buf, 0), meta, list);
	memcpy((char *) GenericXLogRegisterBuffer(state, buf, 0) + entry.centroid_offset, centroid,
		   sizeof(float) * meta->dimensions);
	target->base.centroid_norm = norm;
	target->moves_since_mean = 0;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(buf);
	UnlockReleaseBuffer(dir_buf);
	pfree(centroid);
}
