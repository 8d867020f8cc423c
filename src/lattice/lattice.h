/*
 * lattice.h: the cvlattice access method, an index over the user's own
 * clusters.  Its pages are cvivf's (src/ivf/ivf.h), with kind
 * CV_INDEX_KIND_LATTICE in the metapage; what differs:
 *
 * - Two key columns, a vector and a label, in either order (the vector is
 *   the one with a vector operator class).  Each distinct label is one list;
 *   rows with a NULL label form one more list, rows with a NULL vector are
 *   not indexed.  List numbers are given in order of first appearance (the
 *   build: label order) and never change until a rebuild.
 * - A list's centroid is the float64 mean of its members (cosine: of the
 *   normalised members), stored as float4.  Build and VACUUM compute it
 *   exactly; an insert moves it to the new mean incrementally, in the same
 *   WAL record that links the tuple, so a crash never separates the two.
 * - The directory entry is a CvLatticeListEntry: cvivf's entry first (so
 *   cvivf's readers and the GPU mirror read it unchanged), then where the
 *   list's centroid and label live.  Centroids and labels are found through
 *   the entry, not by arithmetic, so a new list takes a slot on the last
 *   centroid, label and directory pages, or a fresh page, and nothing is
 *   ever moved: the metapage lists the directory pages.  Creating a list is
 *   one WAL record (metapage, directory, centroid and label page: the four
 *   GenericXLog allows), under an exclusive metapage lock, so the same label
 *   maps to the same list after a crash and on a standby.
 * - Labels are compared with their type's default btree comparison (from
 *   the type cache), whatever the label column's operator class.  A label
 *   operator class is per type in PostgreSQL, and the planner makes
 *   "label = x" an index condition only when that "=" is in the column's
 *   operator family, so the family cvlattice_label_ops holds one class for
 *   anyelement (the default of every type, so any type with a btree order
 *   can be a label) and classes with "=" for common label types, plus "="
 *   between int2, int4 and int8 (scan.c converts such keys).
 * - Locks are taken in one order: metapage, directory page, data pages,
 *   centroid page, label page.  Appends to a list serialise on its
 *   directory page, which also orders the moves of its centroid; VACUUM
 *   holds it while it recomputes a mean, so no insert falls in between.
 * - The label -> list map is cached in rd_amcache, valid while the
 *   metapage counts as many lists as it holds (labels.c).  Centroids move
 *   with inserts, so scans read them from their pages.
 * - Scans, cost and vacuum cleanup are cvivf's.  The GPU worker mirrors a
 *   cvlattice index as a cvivf one (plus its means, for observed health,
 *   observed.c) and serves its scans without label conditions; creating a
 *   list bumps the generation, since a mirror holds the lists it was made
 *   of.
 * - A centroid lives on one page: at most CV_LATTICE_MAX_DIMENSIONS.
 */
#ifndef CV_LATTICE_H
#define CV_LATTICE_H

#include "postgres.h"

#include "access/amapi.h"
#include "access/relscan.h"
#include "fmgr.h"

#include "ivf/ivf.h"

/* A centroid's floats fit one page, so an insert's centroid move fits its record. */
#define CV_LATTICE_MAX_DIMENSIONS ((int) (CVIVF_PAGE_CAPACITY / sizeof(float)))
/* Labels longer than this (serialised) are refused. */
#define CV_LATTICE_MAX_LABEL_BYTES 2000

/* page kind of the pages holding labels */
#define CV_LATTICE_PAGE_LABEL 5

typedef struct CvLatticeListEntry
{
	CvIvfListEntry base;		/* as cvivf's: chain, live tuples, centroid norm */
	uint64		inserted_since_build;
	uint64		moves_since_mean;	/* incremental centroid moves since an exact mean */
	BlockNumber centroid_block;
	uint32		centroid_offset;	/* from the start of the page */
	BlockNumber label_block;	/* InvalidBlockNumber: the NULL label */
	uint32		label_offset;	/* a uint32 length, then the label's bytes */
} CvLatticeListEntry;

#define CV_LATTICE_ENTRIES_PER_PAGE ((uint32) (CVIVF_PAGE_CAPACITY / sizeof(CvLatticeListEntry)))

StaticAssertDecl(sizeof(CvLatticeListEntry) == 56, "lattice directory entry must be 56 bytes");
StaticAssertDecl((CVIVF_MAX_LISTS + CVIVF_PAGE_CAPACITY / 56 - 1) / (CVIVF_PAGE_CAPACITY / 56)
				 <= CV_LATTICE_MAX_DIRECTORY_PAGES, "the metapage lists every directory page");

static inline bool
cvlattice_is(const CvIvfMetaPageData *meta)
{
	return meta->kind == CV_INDEX_KIND_LATTICE;
}

/* labels.c: a label's bytes, and the label -> list map cached in rd_amcache */
typedef struct CvLatticeLabelType
{
	Oid			type;
	Oid			collation;
	int16		typlen;
	bool		typbyval;
	FmgrInfo   *cmp;			/* the type's default btree comparison */
} CvLatticeLabelType;

extern void cvlattice_label_type(Relation index, CvLatticeLabelType *type);
extern bytea *cvlattice_label_bytes(const CvLatticeLabelType *type, Datum label);
extern Datum cvlattice_label_datum(const CvLatticeLabelType *type, const char *bytes,
								   Size length);
extern int	cvlattice_compare(const CvLatticeLabelType *type, Datum a, Datum b);
extern int	cvlattice_find_list(Relation index, const CvIvfMetaPageData *meta, Datum label,
								bool isnull);
extern Datum cvlattice_read_label(Relation index, const CvLatticeLabelType *type,
								  const CvLatticeListEntry *entry);

/* page.c (lattice): the sibling writer of cvlattice pages, always through GenericXLog */
extern int	cvlattice_add_list(Relation index, const CvLatticeLabelType *type, Datum label,
							   bool isnull);
/* Computes a list's centroid into centroid, returning its norm. */
typedef double (*CvLatticeComputeCentroid) (Relation index, const CvIvfMetaPageData *meta,
											const CvLatticeListEntry *entry,
											BufferAccessStrategy strategy, float *centroid);
extern void cvlattice_replace_centroid(Relation index, const CvIvfMetaPageData *meta, int list,
									   BufferAccessStrategy strategy,
									   CvLatticeComputeCentroid compute);
extern void cvlattice_write_label_pages(CvIvfBuildWriter *writer, const bytea *const *labels,
										int lists);

/* build.c, insert.c, vacuum.c, validate.c (cost: cvivf's, see src/ivf/cost.c) */
extern IndexBuildResult *cvlatticebuild(Relation heap, Relation index, IndexInfo *info);
/* baseline.c: the build, then the baseline of cvivf_health (src/ivf/drift.c) */
extern IndexBuildResult *cvlatticebuild_baseline(Relation heap, Relation index,
												 IndexInfo *info);
extern void cvlatticebuildempty(Relation index);
extern int	cvlattice_vector_column(Relation index);
extern bool cvlatticeinsert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
							Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
							IndexInfo *indexInfo);
extern IndexBulkDeleteResult *cvlatticebulkdelete(IndexVacuumInfo *info,
												  IndexBulkDeleteResult *stats,
												  IndexBulkDeleteCallback callback,
												  void *callback_state);
extern double cvlattice_exact_mean(Relation index, const CvIvfMetaPageData *meta,
								   const CvLatticeListEntry *entry, BufferAccessStrategy strategy,
								   float *centroid);
extern bool cvlatticevalidate(Oid opclassoid);

/* scan.c (lattice): which lists a scan reads, and in what order */
/* true when label conditions chose the lists (all read at once) */
extern bool cvlattice_plan_scan(IndexScanDesc scan, const CvIvfMetaPageData *meta,
								const float *query, CvIvfRankedList **ranked, int *max_lists,
								int *batch);

#endif
