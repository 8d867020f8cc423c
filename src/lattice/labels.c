/*
 * labels.c: the label column of a cvlattice index.  Labels are compared
 * with the type's default btree comparison (the same for every label
 * operator class), stored as their bytes on label pages, and found at
 * insert and scan time through a map from label to list cached in
 * rd_amcache.  List numbers never change for the life of a relfilenode and
 * lists are only ever added, so the cache is valid while it holds as many
 * lists as the metapage counts; it is rebuilt from the pages when the index
 * gained a list (rare: once per new label), and freed by the relcache.
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

/* rd_amcache of a cvlattice index: slots sorted by label, then the label bytes. */
typedef struct LabelCache
{
	Oid			relfilenode;
	uint32		lists;			/* lists this map covers: the metapage's count when built */
	int			null_list;		/* -1: no row with a NULL label was indexed */
	int			count;
	LabelSlot  *slots;
	char	   *bytes;
	CvLatticeLabelType type;
} LabelCache;

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
		store_att_byval(VARDATA(out), label, type->typlen);
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

/* A list's label, read from its label page (the entry must not be the NULL label's). */
Datum
cvlattice_read_label(Relation index, const CvLatticeLabelType *type,
					 const CvLatticeListEntry *entry)
{
	Buffer		buf = ReadBuffer(index, entry->label_block);
	Page		page;
	uint32		length;
	Datum		label;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	cvivf_check_page(index, page, entry->label_block, CV_LATTICE_PAGE_LABEL);
	memcpy(&length, (char *) page + entry->label_offset, sizeof(length));
	if (length > CV_LATTICE_MAX_LABEL_BYTES ||
		entry->label_offset + sizeof(length) + length > ((PageHeader) page)->pd_lower)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("index \"%s\" has a damaged label at block %u, offset %u",
						RelationGetRelationName(index), entry->label_block,
						entry->label_offset),
				 errhint("Please REINDEX it.")));
	label = cvlattice_label_datum(type, (char *) page + entry->label_offset + sizeof(length),
								  length);
	UnlockReleaseBuffer(buf);
	return label;
}

static Datum
slot_label(const LabelCache *cache, const LabelSlot *slot)
{
	const char *bytes = cache->bytes + slot->offset;

	if (cache->type.typbyval)
		return fetch_att(bytes, true, cache->type.typlen);
	return PointerGetDatum(bytes);
}

static int
compare_slots(const void *a, const void *b, void *arg)
{
	const LabelCache *cache = arg;

	return cvlattice_compare(&cache->type, slot_label(cache, a), slot_label(cache, b));
}

/* Copies each list's label bytes into the cache's block, MAXALIGNed for by-reference use. */
static void
fill_cache(LabelCache *cache, const CvLatticeListEntry *entries,
		   bytea *const *labels, uint32 lists)
{
	Size		offset = 0;

	for (uint32 list = 0; list < lists; list++)
	{
		LabelSlot  *slot;

		if (!BlockNumberIsValid(entries[list].label_block))
		{
			cache->null_list = list;
			continue;
		}
		slot = &cache->slots[cache->count++];
		slot->list = list;
		slot->offset = offset;
		slot->length = VARSIZE(labels[list]) - VARHDRSZ;
		memcpy(cache->bytes + offset, VARDATA(labels[list]), slot->length);
		offset += MAXALIGN(Max(slot->length, sizeof(Datum)));
	}
	qsort_arg(cache->slots, cache->count, sizeof(LabelSlot), compare_slots, cache);
}

/* Each list's label bytes (NULL for the NULL label); returns their aligned total. */
static Size
read_labels(Relation index, const CvLatticeLabelType *type, const CvLatticeListEntry *entries,
			uint32 lists, bytea **labels)
{
	Size		bytes = 0;

	for (uint32 list = 0; list < lists; list++)
	{
		if (!BlockNumberIsValid(entries[list].label_block))
			continue;
		labels[list] = cvlattice_label_bytes(type,
											 cvlattice_read_label(index, type, &entries[list]));
		bytes += MAXALIGN(Max(VARSIZE(labels[list]) - VARHDRSZ, sizeof(Datum)));
	}
	return bytes;
}

/* Builds the map of a metapage's lists from the directory and label pages, in one block. */
static LabelCache *
build_cache(Relation index, const CvIvfMetaPageData *meta)
{
	uint32		lists = Max(meta->lists, 1);
	CvLatticeListEntry *entries = palloc(sizeof(CvLatticeListEntry) * lists);
	bytea	  **labels = palloc0(sizeof(bytea *) * lists);
	CvLatticeLabelType type;
	Size		head = MAXALIGN(sizeof(LabelCache)) + MAXALIGN(sizeof(LabelSlot) * lists);
	Size		bytes;
	LabelCache *cache;

	cvlattice_label_type(index, &type);
	cvivf_read_directory_bytes(index, meta, (char *) entries);
	bytes = read_labels(index, &type, entries, meta->lists, labels);
	cache = MemoryContextAllocZero(index->rd_indexcxt, head + bytes);
	cache->type = type;
	cache->relfilenode = index->rd_node.relNode;
	cache->lists = meta->lists;
	cache->null_list = -1;
	cache->slots = (LabelSlot *) ((char *) cache + MAXALIGN(sizeof(LabelCache)));
	cache->bytes = (char *) cache + head;
	fill_cache(cache, entries, labels, meta->lists);
	return cache;
}

/* The cached map for this metapage's lists, rebuilt when the index gained lists. */
static LabelCache *
label_cache(Relation index, const CvIvfMetaPageData *meta)
{
	LabelCache *cache = (LabelCache *) index->rd_amcache;

	if (cache != NULL && cache->relfilenode == index->rd_node.relNode &&
		cache->lists == meta->lists)
		return cache;
	cache = build_cache(index, meta);
	if (index->rd_amcache != NULL)
		pfree(index->rd_amcache);
	index->rd_amcache = cache;
	return cache;
}

/* The list of a label (isnull: the NULL label's list), or -1 when it has none yet. */
int
cvlattice_find_list(Relation index, const CvIvfMetaPageData *meta, Datum label, bool isnull)
{
	LabelCache *cache = label_cache(index, meta);
	int			low = 0;
	int			high = cache->count - 1;

	if (isnull)
		return cache->null_list;
	if (cache->type.typlen == -1)
		label = PointerGetDatum(pg_detoast_datum((struct varlena *) DatumGetPointer(label)));
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
