/*
 * codes.c: the code side of quantized cvivf lists (ivf.h, "Quantized
 * lists"): the metapage fields, a code entry's bytes, where entry i of a
 * list is, which coded slot a tuple is, and reading a list's codes.  The
 * pages themselves change only in page.c.
 */
#include "postgres.h"

#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "ivf/ivf.h"
#include "math/sq8.h"

StaticAssertDecl(offsetof(CvIvfCodeEntry, error) - offsetof(CvIvfCodeEntry, scale) ==
				 offsetof(CvSq8Factors, error), "code entry factors are CvSq8Factors");
StaticAssertDecl(sizeof(CvSq8Factors) == 16, "CvSq8Factors is four floats");

/* The widest vector whose code entry fits a page (codes never straddle). */
int
cvivf_max_quantized_dimensions(void)
{
	return (int) (CVIVF_PAGE_CAPACITY - sizeof(CvIvfCodeEntry)) & ~(MAXIMUM_ALIGNOF - 1);
}

/* Records the storage in a new index's metapage; its directory entries grow. */
void
cvivf_meta_set_quantization(CvIvfMetaPageData *meta, int quantization)
{
	meta->quantization = quantization;
	if (quantization == CVIVF_QUANTIZATION_NONE)
		return;
	meta->code_entry_size = CVIVF_CODE_ENTRY_SIZE(meta->dimensions);
	meta->directory_entry_size = sizeof(CvIvfCodedListEntry);
	meta->entries_per_directory_page = CVIVF_PAGE_CAPACITY / sizeof(CvIvfCodedListEntry);
}

bool
cvivf_is_quantized(const CvIvfMetaPageData *meta)
{
	return meta->quantization != CVIVF_QUANTIZATION_NONE;
}

/*
 * A code entry for vector in the list of centroid (the stored float4
 * centroid, the one scans prepare queries against).  A vector the code
 * cannot bound (sq8 refused it) gets an infinite error: its bound is
 * -infinity and scans always compute its distance.
 */
void
cvivf_encode_entry(const CvIvfMetaPageData *meta, const float *vector, const float *centroid,
				   ItemPointer tid, CvIvfCodeEntry *entry)
{
	CvSq8Factors factors;

	memset(entry, 0, meta->code_entry_size);
	entry->header.heap_tid = *tid;
	entry->data_block = InvalidBlockNumber;
	(void) cv_sq8_encode(vector, centroid, (int) meta->dimensions,
						 (int8_t *) CvIvfCodeEntryCodes(entry), &factors);
	entry->scale = factors.scale;
	entry->error = factors.error;
	entry->code_norm = factors.code_norm;
	entry->vector_norm = factors.vector_norm;
}

/* Where a list's code entry number ordinal is. */
void
cvivf_code_location(const CvIvfMetaPageData *meta, const CvIvfCodedListEntry *entry,
					uint32 ordinal, BlockNumber *block, Size *offset)
{
	uint32		per_page = CVIVF_CODES_PER_PAGE(meta);

	*block = entry->code_first_block + ordinal / per_page;
	*offset = CVIVF_PAGE_DATA_START + (Size) (ordinal % per_page) * meta->code_entry_size;
}

/*
 * Which coded slot the tuple header at (block, offset) is, replaying how
 * the build's writer laid the list's tuples out (page.c: a header never
 * straddles pages, the elements run on) over the contiguous pages it
 * wrote from the list's first block.  False for a slot after the coded ones.
 */
bool
cvivf_coded_slot_ordinal(const CvIvfMetaPageData *meta, const CvIvfCodedListEntry *entry,
						 BlockNumber block, Size offset, uint32 *ordinal)
{
	Size		tuple_size = CVIVF_TUPLE_SIZE(meta->dimensions);
	Size		capacity = CVIVF_PAGE_CAPACITY;
	BlockNumber page = entry->base.first_block;
	Size		pos = 0;

	if (entry->coded == 0 || block < page || offset < CVIVF_PAGE_DATA_START)
		return false;
	for (uint32 i = 0; i < entry->coded && page <= block; i++)
	{
		Size		rest;

		if (capacity - pos < sizeof(CvIvfTupleHeader))
		{
			page++;
			pos = 0;
		}
		if (page == block && CVIVF_PAGE_DATA_START + pos == offset)
		{
			*ordinal = i;
			return true;
		}
		if (tuple_size <= capacity - pos)
		{
			pos += tuple_size;
			continue;
		}
		rest = tuple_size - (capacity - pos);
		page += (rest + capacity - 1) / capacity;
		pos = rest - ((rest + capacity - 1) / capacity - 1) * capacity;
	}
	return false;
}

/* Calls visitor for each code entry of a list, live or dead, holding one page at a time. */
void
cvivf_scan_codes(Relation index, const CvIvfMetaPageData *meta,
				 const CvIvfCodedListEntry *entry, BufferAccessStrategy strategy,
				 CvIvfCodeVisitor visitor, void *arg)
{
	uint32		per_page = CVIVF_CODES_PER_PAGE(meta);

	for (uint32 first = 0; first < entry->coded; first += per_page)
	{
		BlockNumber block = entry->code_first_block + first / per_page;
		Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
		Page		page;
		const char *codes;
		uint32		count = Min(per_page, entry->coded - first);

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		cvivf_check_page(index, page, block, CVIVF_PAGE_CODE);
		if (((PageHeader) page)->pd_lower < CVIVF_PAGE_DATA_START + count * meta->code_entry_size)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("index \"%s\" has a short code page at block %u",
							RelationGetRelationName(index), block),
					 errhint("Please REINDEX it.")));
		codes = (const char *) page + CVIVF_PAGE_DATA_START;
		for (uint32 i = 0; i < count; i++)
			visitor((const CvIvfCodeEntry *) (codes + (Size) i * meta->code_entry_size), arg);
		UnlockReleaseBuffer(buf);
	}
}
