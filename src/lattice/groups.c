/*
 * groups.c: the cvlattice build's map from label to group, and each group's
 * count and float64 sum, filled during the heap scan (see groups.h).
 *
 * Labels are equal when the type's default btree comparison says so, as
 * everywhere in cvlattice; the groups are kept sorted by it, so a label not
 * seen before is placed by binary search and the lists come out numbered
 * in label order.  In front of that sits a hash table on the label's bytes
 * (the Datum of a by-value type, the data of a by-reference one): a row
 * whose label has the bytes of one seen before costs a hash and a memcmp,
 * not a call of the comparison per level.  Bytes equal means labels equal;
 * two labels with different bytes that compare equal (numeric 1.0 and
 * 1.00) each get a hash entry pointing at the one group the comparison
 * found, so the hash table never decides equality.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "lattice/groups.h"
#include "math/mean.h"

/* One label byte pattern seen, and its group (-1: an empty slot). */
typedef struct LabelKey
{
	uint32		hash;
	int32		group;
	Size		length;
	char	   *bytes;
} LabelKey;

struct CvLatticeGroups
{
	Relation	index;			/* for error messages */
	const CvLatticeLabelType *type;
	MemoryContext context;
	int			dimensions;
	bool		directions;		/* sum unit vectors (cosine) */
	int			count;
	int			capacity;
	CvLatticeGroup *groups;
	double	   *sums;			/* capacity x dimensions */
	int		   *sorted;			/* the non-NULL groups in label order */
	int			sorted_count;
	int			null_group;		/* -1 until a NULL label */
	LabelKey   *keys;			/* open addressing, linear probing */
	uint32		key_mask;		/* slots - 1, a power of two minus one */
	uint32		key_count;
	LabelKey	last;			/* the last row's label, a copy of its key */
};

#define INITIAL_KEY_SLOTS 1024

/* No groups yet, in a memory context of their own under the current one. */
CvLatticeGroups *
cvlattice_groups_create(Relation index, const CvLatticeLabelType *type, int dimensions,
						bool directions)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "cvlattice build groups",
												  ALLOCSET_DEFAULT_SIZES);
	CvLatticeGroups *groups = MemoryContextAllocZero(context, sizeof(CvLatticeGroups));

	groups->index = index;
	groups->type = type;
	groups->context = context;
	groups->dimensions = dimensions;
	groups->directions = directions;
	groups->null_group = -1;
	groups->keys = MemoryContextAlloc(context, sizeof(LabelKey) * INITIAL_KEY_SLOTS);
	for (int i = 0; i < INITIAL_KEY_SLOTS; i++)
		groups->keys[i].group = -1;
	groups->key_mask = INITIAL_KEY_SLOTS - 1;
	groups->last.group = -1;
	return groups;
}

/* The bytes that identify a label exactly; *scratch holds a by-value label's. */
static void
label_image(const CvLatticeLabelType *type, Datum label, Datum *scratch, const char **bytes,
			Size *length)
{
	if (type->typbyval)
	{
		*scratch = label;
		*bytes = (const char *) scratch;
		*length = sizeof(Datum);
	}
	else if (type->typlen > 0)
	{
		*bytes = DatumGetPointer(label);
		*length = type->typlen;
	}
	else if (type->typlen == -1)
	{
		struct varlena *value = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(label));

		*bytes = VARDATA_ANY(value);
		*length = VARSIZE_ANY_EXHDR(value);
	}
	else
	{
		*bytes = DatumGetCString(label);
		*length = strlen(*bytes) + 1;
	}
}

/* Whether a used slot holds exactly these label bytes. */
static bool
key_matches(const LabelKey *key, uint32 hash, const char *bytes, Size length)
{
	return key->group >= 0 && key->hash == hash && key->length == length &&
		memcmp(key->bytes, bytes, length) == 0;
}

/* Doubles the hash table and places every key again. */
static void
grow_keys(CvLatticeGroups *groups)
{
	uint32		slots = (groups->key_mask + 1) * 2;
	LabelKey   *keys = MemoryContextAllocHuge(groups->context, sizeof(LabelKey) * slots);

	for (uint32 i = 0; i < slots; i++)
		keys[i].group = -1;
	for (uint32 i = 0; i <= groups->key_mask; i++)
	{
		uint32		at = groups->keys[i].hash & (slots - 1);

		if (groups->keys[i].group < 0)
			continue;
		while (keys[at].group >= 0)
			at = (at + 1) & (slots - 1);
		keys[at] = groups->keys[i];
	}
	pfree(groups->keys);
	groups->keys = keys;
	groups->key_mask = slots - 1;
}

/* Remembers that a label's bytes belong to a group; returns its slot. */
static LabelKey *
add_key(CvLatticeGroups *groups, uint32 hash, const char *bytes, Size length, int group)
{
	LabelKey   *key;
	uint32		at;

	if ((groups->key_count + 1) * 2 > groups->key_mask + 1)
		grow_keys(groups);
	at = hash & groups->key_mask;
	while (groups->keys[at].group >= 0)
		at = (at + 1) & groups->key_mask;
	key = &groups->keys[at];
	key->hash = hash;
	key->group = group;
	key->length = length;
	key->bytes = MemoryContextAlloc(groups->context, Max(length, 1));
	memcpy(key->bytes, bytes, length);
	groups->key_count++;
	return key;
}

/* The slot of a label's bytes seen before, or NULL. */
static LabelKey *
find_key(const CvLatticeGroups *groups, uint32 hash, const char *bytes, Size length)
{
	uint32		at = hash & groups->key_mask;

	while (groups->keys[at].group >= 0)
	{
		if (key_matches(&groups->keys[at], hash, bytes, length))
			return &groups->keys[at];
		at = (at + 1) & groups->key_mask;
	}
	return NULL;
}

/* Makes room for one more group (sums included). */
static void
reserve_group(CvLatticeGroups *groups)
{
	Size		dims = groups->dimensions;

	if (groups->count == CVIVF_MAX_LISTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cvlattice index \"%s\" would have more than %d labels",
						RelationGetRelationName(groups->index), CVIVF_MAX_LISTS),
				 errhint("Use fewer distinct labels, or a cvivf index.")));
	if (groups->count < groups->capacity)
		return;
	groups->capacity = Max(64, groups->capacity * 2);
	if (groups->groups == NULL)
	{
		groups->groups = MemoryContextAlloc(groups->context,
											sizeof(CvLatticeGroup) * groups->capacity);
		groups->sorted = MemoryContextAlloc(groups->context, sizeof(int) * groups->capacity);
		groups->sums = MemoryContextAllocHuge(groups->context,
											  sizeof(double) * dims * groups->capacity);
		return;
	}
	groups->groups = repalloc(groups->groups, sizeof(CvLatticeGroup) * groups->capacity);
	groups->sorted = repalloc(groups->sorted, sizeof(int) * groups->capacity);
	groups->sums = repalloc_huge(groups->sums, sizeof(double) * dims * groups->capacity);
}

/* A new empty group for a label (NULL: the NULL label). */
static int
new_group(CvLatticeGroups *groups, Datum label, bool isnull)
{
	MemoryContext old = MemoryContextSwitchTo(groups->context);
	int			group = groups->count;
	CvLatticeGroup *g;

	reserve_group(groups);
	g = &groups->groups[group];
	memset(g, 0, sizeof(*g));
	g->list = -1;
	if (!isnull)
	{
		g->label = cvlattice_label_bytes(groups->type, label);
		g->datum = cvlattice_label_datum(groups->type, VARDATA(g->label),
										 VARSIZE(g->label) - VARHDRSZ);
	}
	memset(groups->sums + (Size) group * groups->dimensions, 0,
		   sizeof(double) * groups->dimensions);
	groups->count++;
	MemoryContextSwitchTo(old);
	return group;
}

/*
 * The group of a non-NULL label by the btree comparison, creating it in its
 * place in label order when there is none.
 */
static int
find_sorted(CvLatticeGroups *groups, Datum label)
{
	int			low = 0;
	int			high = groups->sorted_count;
	int			group;

	while (low < high)
	{
		int			mid = low + (high - low) / 2;
		int			cmp = cvlattice_compare(groups->type, label,
											groups->groups[groups->sorted[mid]].datum);

		if (cmp == 0)
			return groups->sorted[mid];
		if (cmp < 0)
			high = mid;
		else
			low = mid + 1;
	}
	group = new_group(groups, label, false);
	memmove(groups->sorted + low + 1, groups->sorted + low,
			sizeof(int) * (groups->sorted_count - low));
	groups->sorted[low] = group;
	groups->sorted_count++;
	return group;
}

/* The group of a row's label, created on its first row. */
int
cvlattice_groups_find(CvLatticeGroups *groups, Datum label, bool isnull)
{
	Datum		scratch;
	const char *bytes;
	Size		length;
	uint32		hash;
	LabelKey   *key;

	if (isnull)
	{
		if (groups->null_group < 0)
			groups->null_group = new_group(groups, (Datum) 0, true);
		return groups->null_group;
	}
	label_image(groups->type, label, &scratch, &bytes, &length);
	if (groups->last.group >= 0 && groups->last.length == length &&
		memcmp(groups->last.bytes, bytes, length) == 0)
		return groups->last.group;
	hash = hash_bytes((const unsigned char *) bytes, (int) length);
	key = find_key(groups, hash, bytes, length);
	if (key == NULL)
		key = add_key(groups, hash, bytes, length, find_sorted(groups, label));
	groups->last = *key;
	return key->group;
}

/* Adds a member: its count, its sum, and whether it came in heap order. */
void
cvlattice_groups_add(CvLatticeGroups *groups, int group, ItemPointer tid, const float *x)
{
	CvLatticeGroup *g = &groups->groups[group];

	cv_mean_add(groups->sums + (Size) group * groups->dimensions, x, groups->dimensions,
				groups->directions);
	if (g->members > 0 && ItemPointerCompare(tid, &g->last_tid) < 0)
		g->out_of_order = true;
	g->last_tid = *tid;
	g->members++;
}

/* A group's label, count and list number. */
CvLatticeGroup *
cvlattice_groups_get(CvLatticeGroups *groups, int group)
{
	return &groups->groups[group];
}

/* A group's float64 sum of its members (cosine: of their directions). */
const double *
cvlattice_groups_sum(const CvLatticeGroups *groups, int group)
{
	return groups->sums + (Size) group * groups->dimensions;
}

/*
 * Numbers the lists in label order, the NULL label last, and returns how
 * many there are; *group_of_list (palloc'd) gives each list's group.
 */
int
cvlattice_groups_number(CvLatticeGroups *groups, int **group_of_list)
{
	int		   *of_list = palloc(sizeof(int) * Max(groups->count, 1));
	int			lists = 0;

	for (int i = 0; i < groups->sorted_count; i++)
		of_list[lists++] = groups->sorted[i];
	if (groups->null_group >= 0)
		of_list[lists++] = groups->null_group;
	Assert(lists == groups->count);
	for (int list = 0; list < lists; list++)
		groups->groups[of_list[list]].list = list;
	*group_of_list = of_list;
	return lists;
}
