/*
 * introspect.c: cvlattice_lists and cvlattice_verify, for users and for
 * tests that check the structure rather than only the answers.  The same
 * rights as cvivf's (src/access.c): SELECT on the table and no row-level
 * security; cvlattice_verify also keeps writers out (SHARE on the table).
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/genam.h"
#include "access/table.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "access.h"
#include "lattice/lattice.h"
#include "math/mean.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvlattice_lists);
PG_FUNCTION_INFO_V1(cvlattice_verify);

/* A list's label as text (NULL for the NULL label), by the type's output function. */
static Datum
label_text(Relation index, const CvLatticeLabelType *type, const CvLatticeListEntry *entry,
		   bool *isnull)
{
	Oid			output;
	bool		varlena;

	*isnull = !BlockNumberIsValid(entry->label_block);
	if (*isnull)
		return (Datum) 0;
	getTypeOutputInfo(type->type, &output, &varlena);
	return CStringGetTextDatum(OidOutputFunctionCall(output,
													 cvlattice_read_label(index, type, entry)));
}

static Datum
centroid_datum(const float *centroid, int dimensions)
{
	CVec	   *v = cvec_alloc(dimensions);

	memcpy(v->x, centroid, sizeof(float) * dimensions);
	return PointerGetDatum(v);
}

/* One row per list: (list, label, members, centroid, inserted_since_build). */
Datum
cvlattice_lists(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index = cv_open_cvlattice(PG_GETARG_OID(0), CV_INDEX_READ, "cvlattice_lists", &heap);
	CvIvfMetaPageData meta;
	CvLatticeLabelType type;
	CvLatticeListEntry *entries;
	float	   *centroids;

	InitMaterializedSRF(fcinfo, 0);
	cvivf_read_meta(index, &meta);
	cvlattice_label_type(index, &type);
	entries = palloc(sizeof(CvLatticeListEntry) * Max(meta.lists, 1));
	cvivf_read_directory_bytes(index, &meta, (char *) entries);
	centroids = cvivf_read_centroids(index, &meta);
	for (uint32 list = 0; list < meta.lists; list++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = Int32GetDatum(list);
		values[1] = label_text(index, &type, &entries[list], &nulls[1]);
		values[2] = Int64GetDatum(entries[list].base.tuples);
		nulls[3] = entries[list].base.tuples == 0;	/* no members: no mean */
		if (!nulls[3])
			values[3] = centroid_datum(centroids + (Size) list * meta.dimensions,
									   meta.dimensions);
		values[4] = Int64GetDatum(entries[list].inserted_since_build);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

static void
report_violation(Relation index, int list, const char *invariant)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("index \"%s\" is corrupted at list %d", RelationGetRelationName(index), list),
			 errdetail("Invariant violated: %s.", invariant),
			 errhint("Please REINDEX it.")));
}

/* What verify gathers over one list's live members. */
typedef struct ListFacts
{
	double	   *sum;
	uint64		live;
	double		largest;		/* the largest |element| of a member (cosine: of its direction) */
	int			dimensions;
	bool		directions;
} ListFacts;

static void
gather(const CvIvfTupleHeader *header pg_attribute_unused(), const float *vector,
	   BlockNumber block pg_attribute_unused(), Size offset pg_attribute_unused(), void *arg)
{
	ListFacts  *facts = (ListFacts *) arg;

	cv_mean_add(facts->sum, vector, facts->dimensions, facts->directions);
	facts->live++;
	for (int j = 0; j < facts->dimensions; j++)
		facts->largest = Max(facts->largest, fabs(vector[j]));
}

/*
 * The centroid equals the float64 mean of the live members, rounded to
 * float4: within one float4 rounding per insert since the last exact mean
 * (an insert moves it incrementally), relative to the largest element.
 */
static void
verify_centroid(Relation index, int list, const ListFacts *facts, const float *centroid,
				const CvLatticeListEntry *entry)
{
	float	   *mean = palloc(sizeof(float) * Max(facts->dimensions, 1));
	double		scale = facts->directions ? 1.0 : facts->largest;
	double		tolerance = (2.0 + 2.0 * entry->moves_since_mean) * FLT_EPSILON * scale;

	if (facts->live == 0)
		return;
	cv_mean_finish(facts->sum, facts->live, facts->dimensions, mean);
	for (int j = 0; j < facts->dimensions; j++)
		if (!(fabs((double) centroid[j] - mean[j]) <= tolerance))
			report_violation(index, list, "every centroid is the mean of its list's live members");
	pfree(mean);
}

/* Each list: its label finds it, its chain is sound, its count and centroid agree with its members. */
static void
verify_list(Relation index, const CvIvfMetaPageData *meta, const CvLatticeLabelType *type,
			int list, const CvLatticeListEntry *entry, const float *centroid)
{
	ListFacts	facts = {0};
	bool		isnull = !BlockNumberIsValid(entry->label_block);
	Datum		label = isnull ? (Datum) 0 : cvlattice_read_label(index, type, entry);

	if (cvlattice_find_list(index, meta, label, isnull) != list)
		report_violation(index, list, "each label has exactly one list");
	cvivf_verify_chain(index, &entry->base, RelationGetNumberOfBlocks(index));
	facts.dimensions = meta->dimensions;
	facts.directions = meta->metric == CV_METRIC_COSINE;
	facts.sum = palloc0(sizeof(double) * Max(meta->dimensions, 1));
	if (BlockNumberIsValid(entry->base.first_block))
		cvivf_scan_list(index, meta, entry->base.first_block, false, NULL, gather, &facts);
	if (facts.live != entry->base.tuples)
		report_violation(index, list, "the directory counts the live tuples of each list");
	cvivf_verify_reuse(index, meta, list, &entry->base);
	verify_centroid(index, list, &facts, centroid, entry);
	pfree(facts.sum);
}

Datum
cvlattice_verify(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index = cv_open_cvlattice(PG_GETARG_OID(0), CV_INDEX_EXCLUDE_WRITERS,
										  "cvlattice_verify", &heap);
	CvIvfMetaPageData meta;
	CvLatticeLabelType type;
	CvLatticeListEntry *entries;
	float	   *centroids;

	cvivf_read_meta(index, &meta);
	if (!cvlattice_is(&meta) || meta.lists > CVIVF_MAX_LISTS ||
		meta.directory_entry_size != sizeof(CvLatticeListEntry) ||
		meta.entries_per_directory_page != CV_LATTICE_ENTRIES_PER_PAGE ||
		meta.directory_pages != (meta.lists + CV_LATTICE_ENTRIES_PER_PAGE - 1) /
		CV_LATTICE_ENTRIES_PER_PAGE)
		report_violation(index, -1, "the metapage describes a cvlattice index and its directory");
	cvlattice_label_type(index, &type);
	entries = palloc(sizeof(CvLatticeListEntry) * Max(meta.lists, 1));
	cvivf_read_directory_bytes(index, &meta, (char *) entries);
	centroids = cvivf_read_centroids(index, &meta);
	for (uint32 list = 0; list < meta.lists; list++)
	{
		CHECK_FOR_INTERRUPTS();
		verify_list(index, &meta, &type, list, &entries[list],
					centroids + (Size) list * meta.dimensions);
	}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_VOID();
}
