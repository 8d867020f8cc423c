/*
 * labels.c: the label column of a cvlattice index.  Labels are compared
 * with the type's default btree comparison (the same for every label
 * operator class), stored as their bytes on label pages, and found at
 * insert and scan time through a map from label to list cached in
 * rd_amcache.  List numbers never change for the life of a relfilenode and
 * lists are only ever added, so the cache holds the lists it has read and
 * reads only the lists the metapage counts beyond them (a new label: one
 * directory entry and one label), growing its block by doubling.  It is
 * one block, so the relcache frees it whole.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "lattice/lattice.h"

/* One label of the cache: its bytes at offset in the cache's block. */
typedef struct LabelSlot
{
	int			list;
	uint32		offset;
	uint32		length;
} LabelSlot;

/* rd_amcache of a cvlattice index: this header, slots sorted by label, label bytes. */
typedef struct LabelCache
{
	Oid			relfilenode;
	uint32		lists;			/* lists 0 .. lists - 1 are in the map */
	int			null_list;		/* -1: no row with a NULL label was indexed */
	int			count;			/* slots in use */
	int			slot_capacity;
	Size		bytes_used;
	Size		bytes_capacity;
	LabelSlot  *slots;
	char	   *bytes;
	CvLatticeLabelType type;
} LabelCache;

/* Sorted insertion below this many new labels, a sort of all above. */
#define INSERTION_LIMIT 8

/* The label column's type and its default btree comparison; an error when it has none. */
void
cvlattice_label_type(Relation index, CvLatticeLabelType *type)
{
	int			column = 1 - cvlattice_vector_column(index);
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(index), column);
	TypeCacheEntry *cache = lookup_type_cache(att->atttypid, TYPECACHE_CMP_PROC_FINFO);

	if (!OidIsValid(cache->cmp_proc))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("cvlattice cannot group rows by labels of type %s",
						format_type_be(att->atttypid)),
				 errdetail("The type has no default btree operator class, so equal labels cannot be recognised."),
				 errhint("Use a label column of a type with a default btree operator class, such as integer, bigint, text or uuid.")));
	type->type = att->atttypid;
	type->collation = index->rd_indcollation[column];
	type->typlen = att->attlen;
	type->typbyval = att->attbyval;
	type->cmp = &cache->cmp_proc_finfo;
}

int
cvlattice_compare(const CvLatticeLabelType *type, Datum a, Datum b)
{
	return DatumGetInt32(FunctionCall2Coll(type->cmp, type->collation, a, b));
}

/* A label's bytes as the label pages store them, in a bytea. */
bytea *
cvlattice_label_bytes(const CvLatticeLabelType *type, Datum label)
{
	Size		length = type->typlen;
	bytea	   *out;

	if (!type->typbyval && type->typlen == -1)
		label = PointerGetDatum(pg_detoast_datum((struct varlena *) DatumGetPointer(label)));
	if (!type->typbyval)
		length = datumGetSize(label, false, type->typlen);
	if (length > CV_LATTICE_MAX_LABEL_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvlattice label of %zu bytes exceeds the maximum of %d bytes",
						length, CV_LATTICE_MAX_LABEL_BYTES),
				 errhint("Use shorter labels, or map them to integers.")));
	out = palloc(VARHDRSZ + length);
	SET_VARSIZE(out, VARHDRSZ + length);
	if (type->typbyval)
	{
		/* VARDATA is only 4-byte aligned: store into a Datum, then copy the bytes */
		Datum		aligned = 0;

		store_att_byval(&aligned, label, type->typlen);
		memcpy(VARDATA(out), &aligned, length);
	}
	else
		memcpy(VARDATA(out), DatumGetPointer(label), length);
	return out;
}

/* The label stored as bytes; by-reference labels are copied (aligned) first. */
Datum
cvlattice_label_datum(const CvLatticeLabelType *type, const char *bytes, Size length)
{
	char	   *copy = palloc(Max(length, sizeof(Datum)));

	memcpy(copy, bytes, length);
	if (type->typbyval)
		return fetch_att(copy, true, type->typlen);
	return PointerGetDatum(copy);
}

/*
 * Where a list's label lies on its label page (already share-locked): its
 * bytes and their length.  A damaged entry raises index_corrupted.
 */
static const char *
label_on_page(Relation index, Page page, const CvLatticeListEntry *entry, uint32 *length)
{
	memcpy(length, (char *) page + entry->label_offset, sizeof(*length));
	if (*length > CV_LATTICE_MAX_LABEL_BYTES ||
		entry->label_offset + sizeof(*length) + *length > ((PageHeader) page)->pd_lower)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has a damaged label at block %u, offset %u",
						RelationGetRelationName(index), entry->label_block,
						entry->label_offset),
				 errhint("Please REINDEX it.")));
	return (char *) page + entry->label_offset + sizeof(*length);
}

/* A list's label, read from its label page (the entry must not be the NULL label's). */
Datum
cvlattice_read_label(Relation index, const CvLatticeLabelType *type,
					 const CvLatticeListEntry *entry)
{
	Buffer		buf = ReadBuffer(index, entry->label_block);
	Page		page;
	uint32		length;
	const char *bytes;
	Datum		label;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	cvivf_check_page(index, page, entry->label_block, CV_LATTICE_PAGE_LABEL);
	bytes = label_on_page(index, page, entry, &length);
	label = cvlattice_label_datum(type, bytes, length);
	UnlockReleaseBuffer(buf);
	return label;
}

/* A by-value datum from bytes the cache packs without alignment. */
static Datum
read_unaligned_byval(const char *bytes, int16 typlen)
{
	switch (typlen)
	{
		case sizeof(int64):
			{
				int64		value;

				memcpy(&value, bytes, sizeof(value));
				return Int64GetDatum(value);
			}
		case sizeof(int32):
			{
				int32		value;

				memcpy(&value, bytes, sizeof(value));
				return Int32GetDatum(value);
			}
		case sizeof(int16):
			{
				int16		value;

				memcpy(&value, bytes, sizeof(value));
				return Int16GetDatum(value);
			}
		case 1:
			return CharGetDatum(bytes[0]);
	}
	elog(ERROR, "unsupported by-value label length %d", typlen);
	return (Datum) 0;
}

static Datum
slot_label(const LabelCache *cache, const LabelSlot *slot)
{
	const char *bytes = cache->bytes + slot->offset;

	if (cache->type.typbyval)
		return read_unaligned_byval(bytes, cache->type.typlen);
	return PointerGetDatum(bytes);
}

static int
compare_slots(const void *a, const void *b, void *arg)
{
	const LabelCache *cache = arg;

	return cvlattice_compare(&cache->type, slot_label(cache, a), slot_label(cache, b));
}

/* A block with room for the given slots and bytes, holding old's map. */
static LabelCache *
allocate_cache(Relation index, const LabelCache *old, int slot_capacity, Size bytes_capacity)
{
	Size		head = MAXALIGN(sizeof(LabelCache)) + MAXALIGN(sizeof(LabelSlot) * slot_capacity);
	LabelCache *cache = MemoryContextAllocHuge(index->rd_indexcxt, head + bytes_capacity);

	*cache = *old;
	cache->slot_capacity = slot_capacity;
	cache->bytes_capacity = bytes_capacity;
	cache->slots = (LabelSlot *) ((char *) cache + MAXALIGN(sizeof(LabelCache)));
	cache->bytes = (char *) cache + head;
	if (old->count > 0)
		memcpy(cache->slots, old->slots, sizeof(LabelSlot) * old->count);
	if (old->bytes_used > 0)
		memcpy(cache->bytes, old->bytes, old->bytes_used);
	return cache;
}

/*
 * Copies the directory entries of lists [first, first + count), holding
 * each directory page once: a cache filled one entry at a time read a
 * directory page per label, thousands of buffer lookups for the first
 * scan of every session.
 */
static void
read_entries(Relation index, const CvIvfMetaPageData *meta, uint32 first, int count,
			 CvLatticeListEntry *entries)
{
	Buffer		buf = InvalidBuffer;
	BlockNumber block = InvalidBlockNumber;

	for (int i = 0; i < count; i++)
	{
		if (cvivf_directory_block(meta, first + i) != block)
		{
			if (BufferIsValid(buf))
				UnlockReleaseBuffer(buf);
			block = cvivf_directory_block(meta, first + i);
			buf = ReadBuffer(index, block);
			LockBuffer(buf, BUFFER_LOCK_SHARE);
			cvivf_check_page(index, BufferGetPage(buf), block, CVIVF_PAGE_DIRECTORY);
		}
		memcpy(&entries[i], cvivf_directory_entry(BufferGetPage(buf), meta, first + i),
			   sizeof(CvLatticeListEntry));
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
}

/* A label's stored bytes in a bytea; buf is kept while labels share its page. */
static bytea *
read_label_bytes(Relation index, const CvLatticeListEntry *entry, Buffer *buf)
{
	uint32		length;
	const char *bytes;
	bytea	   *label;

	if (!BufferIsValid(*buf) || BufferGetBlockNumber(*buf) != entry->label_block)
	{
		if (BufferIsValid(*buf))
			UnlockReleaseBuffer(*buf);
		*buf = ReadBuffer(index, entry->label_block);
		LockBuffer(*buf, BUFFER_LOCK_SHARE);
		cvivf_check_page(index, BufferGetPage(*buf), entry->label_block,
						 CV_LATTICE_PAGE_LABEL);
	}
	bytes = label_on_page(index, BufferGetPage(*buf), entry, &length);
	/* the page holds what cvlattice_label_bytes made of the label */
	label = palloc(VARHDRSZ + length);
	SET_VARSIZE(label, VARHDRSZ + length);
	memcpy(VARDATA(label), bytes, length);
	return label;
}

/* Each new list's label bytes (NULL for the NULL label); returns their aligned total. */
static Size
read_new_labels(Relation index, const LabelCache *cache, const CvIvfMetaPageData *meta,
				bytea **labels, int *null_list)
{
	int			fresh = meta->lists - cache->lists;
	CvLatticeListEntry *entries = palloc(sizeof(CvLatticeListEntry) * Max(fresh, 1));
	Buffer		buf = InvalidBuffer;
	Size		bytes = 0;

	read_entries(index, meta, cache->lists, fresh, entries);
	for (int i = 0; i < fresh; i++)
	{
		if (!BlockNumberIsValid(entries[i].label_block))
		{
			*null_list = cache->lists + i;
			continue;
		}
		labels[i] = read_label_bytes(index, &entries[i], &buf);
		bytes += MAXALIGN(Max(VARSIZE(labels[i]) - VARHDRSZ, sizeof(Datum)));
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
	pfree(entries);
	return bytes;
}

/* Moves the last slot to its place among the sorted slots before it. */
static void
insert_sorted(LabelCache *cache)
{
	LabelSlot	slot = cache->slots[cache->count - 1];
	Datum		label = slot_label(cache, &slot);
	int			low = 0;
	int			high = cache->count - 1;

	while (low < high)
	{
		int			middle = low + (high - low) / 2;

		if (cvlattice_compare(&cache->type, slot_label(cache, &cache->slots[middle]), label) < 0)
			low = middle + 1;
		else
			high = middle;
	}
	memmove(&cache->slots[low + 1], &cache->slots[low],
			sizeof(LabelSlot) * (cache->count - 1 - low));
	cache->slots[low] = slot;
}

/* Appends one list's label to the map (the block has room), sorted when few are new. */
static void
append_label(LabelCache *cache, int list, const bytea *label, bool sort_now)
{
	LabelSlot  *slot = &cache->slots[cache->count++];

	slot->list = list;
	slot->offset = cache->bytes_used;
	slot->length = VARSIZE(label) - VARHDRSZ;
	memcpy(cache->bytes + slot->offset, VARDATA(label), slot->length);
	cache->bytes_used += MAXALIGN(Max(slot->length, sizeof(Datum)));
	if (sort_now)
		insert_sorted(cache);
}

/*
 * Adds the lists the metapage counts beyond the map's to it; returns the
 * map, in a new block (the old one freed) when it had to grow.
 */
static LabelCache *
add_new_lists(Relation index, LabelCache *cache, const CvIvfMetaPageData *meta)
{
	int			fresh = meta->lists - cache->lists;
	bytea	  **labels = palloc0(sizeof(bytea *) * Max(fresh, 1));
	int			null_list = cache->null_list;
	Size		bytes = read_new_labels(index, cache, meta, labels, &null_list);

	if (cache->count + fresh > cache->slot_capacity ||
		cache->bytes_used + bytes > cache->bytes_capacity)
	{
		LabelCache *grown = allocate_cache(index, cache,
										   Max(cache->slot_capacity * 2, cache->count + fresh),
										   Max(cache->bytes_capacity * 2,
											   cache->bytes_used + bytes));

		pfree(cache);
		cache = grown;
	}
	for (int i = 0; i < fresh; i++)
		if (labels[i] != NULL)
			append_label(cache, cache->lists + i, labels[i], fresh <= INSERTION_LIMIT);
	if (fresh > INSERTION_LIMIT)
		qsort_arg(cache->slots, cache->count, sizeof(LabelSlot), compare_slots, cache);
	cache->null_list = null_list;
	cache->lists = meta->lists;
	return cache;
}

/* An empty map of the index's current relfilenode. */
static LabelCache *
empty_cache(Relation index)
{
	LabelCache	empty = {0};

	empty.relfilenode = index->rd_node.relNode;
	empty.null_list = -1;
	cvlattice_label_type(index, &empty.type);
	return allocate_cache(index, &empty, 16, 16 * MAXALIGN(sizeof(Datum)));
}

/* The cached map, brought up to at least this metapage's lists. */
static LabelCache *
label_cache(Relation index, const CvIvfMetaPageData *meta)
{
	LabelCache *cache = (LabelCache *) index->rd_amcache;

	if (cache == NULL || cache->relfilenode != index->rd_node.relNode)
	{
		if (cache != NULL)
			pfree(cache);
		index->rd_amcache = cache = empty_cache(index);
	}
	if (cache->lists < meta->lists)
		index->rd_amcache = cache = add_new_lists(index, cache, meta);
	return cache;
}

/* The list of a label in the sorted slots, or -1. */
static int
search_slots(const LabelCache *cache, Datum label)
{
	int			low = 0;
	int			high = cache->count - 1;

	while (low <= high)
	{
		int			middle = low + (high - low) / 2;
		int			c = cvlattice_compare(&cache->type, label,
										  slot_label(cache, &cache->slots[middle]));

		if (c == 0)
			return cache->slots[middle].list;
		if (c < 0)
			high = middle - 1;
		else
			low = middle + 1;
	}
	return -1;
}

/*
 * The list of a label (isnull: the NULL label's list), or -1 when it has
 * none among this metapage's lists (the cache may know later ones).
 */
int
cvlattice_find_list(Relation index, const CvIvfMetaPageData *meta, Datum label, bool isnull)
{
	LabelCache *cache = label_cache(index, meta);
	int			list;

	if (isnull)
		list = cache->null_list;
	else
	{
		if (cache->type.typlen == -1)
			label = PointerGetDatum(pg_detoast_datum((struct varlena *) DatumGetPointer(label)));
		list = search_slots(cache, label);
	}
	return list >= 0 && (uint32) list < meta->lists ? list : -1;
}
