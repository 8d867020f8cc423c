/*
 * ivf.h: the on-disk format of a cvivf index, and the interfaces between its
 * files.  The format lives here alone; bump CVIVF_VERSION when it changes.
 *
 * Block 0 is the metapage.  Then come the centroid pages (float4 centroids in
 * list order; several to a page, or one centroid over several pages when it
 * is wider than a page), then the directory pages (one CvIvfListEntry per
 * list), all contiguous so a block number is arithmetic.  Each list's data
 * is a chain of pages holding a dense byte stream of tuples: an 8-byte
 * header (heap TID, flags) and the vector's float4 elements.  A tuple's
 * elements may continue at the start of the next page of its list, so a
 * 1024-d vector does not waste half a page and 16,000 dimensions fit.  A
 * tuple's header never straddles pages: it carries the dead flag VACUUM sets.
 *
 * The same format holds cvlattice indexes (src/lattice/lattice.h): the
 * metapage's kind tells them apart.  The kind and the fields after it were
 * added without a version bump: a cvivf metapage written before them ends
 * earlier, and the bytes past its end are zero (PageInit zeroes the page),
 * which reads as kind CV_INDEX_KIND_IVF with the default directory entry.
 * The reuse pages were added the same way: none until a VACUUM makes them,
 * and so were the drift pages: none in an index built before them, and the
 * recall calibration: no points in an index built before it.
 *
 * Space reuse.  Every tuple of an index has the same size, so a dead tuple
 * is a slot a new tuple fits exactly: an insert fills the first dead slot
 * of its list (in chain order) before it appends, and the byte stream's
 * tuple boundaries never move, so a scan walking the chain meanwhile parses
 * it as before.  Pages never leave their chain (a scan may hold a pointer
 * to any of them), so a list's pages emptied by VACUUM are reused by that
 * list's inserts.  The reuse pages (CVIVF_PAGE_REUSE, listed in the
 * metapage, made by the first VACUUM that finds dead tuples) hold a
 * CvIvfReuseEntry per list: the first slot that may be dead, and the start
 * of the list's dead tail.  Only pages no chain reaches (continuation pages
 * a crash left unlinked) go to the free space map, as CVIVF_PAGE_FREE.
 *
 * Retraining (cvivf only, src/ivf/retrain.c).  cvivf_retrain writes a
 * whole new generation (centroid and directory pages, lists, codes, drift
 * pages) into pages nothing lists yet, then switches the metapage to it in
 * one record, which also counts the retrain (retrains) and records in
 * retired_xid the next transaction ID: the old generation's pages are then
 * on no chain the metapage reaches, but scans that read the old metapage
 * may still walk them, so they are freed only once every snapshot is newer
 * than retired_xid (VACUUM) or every transaction that held the index at the
 * switch has ended (the retrain itself), never at once.  A standby cannot
 * delay the primary's reuse, so a standby scan that sees retrains move
 * while it runs stops with an error instead of reading reused pages.
 */
#ifndef CV_IVF_H
#define CV_IVF_H

#include "postgres.h"

#include "access/amapi.h"
#include "access/generic_xlog.h"
#include "access/itup.h"
#include "nodes/execnodes.h"
#include "storage/bufmgr.h"
#include "utils/relcache.h"

#include "clustervec_metric.h"

#define CVIVF_MAGIC 0x43564946	/* "CVIF" */
#define CVIVF_VERSION 1
#define CVIVF_PAGE_ID 0xCF01	/* in every page's special space */

#define CVIVF_METAPAGE_BLKNO 0
#define CVIVF_MAX_LISTS 32768

/* index kinds (CvIvfMetaPageData.kind) */
#define CV_INDEX_KIND_IVF 0
#define CV_INDEX_KIND_LATTICE 1

/*
 * A cvlattice index adds directory pages as it gains lists and never moves
 * one, so the metapage lists their blocks: enough for CVIVF_MAX_LISTS lists
 * of the lattice's directory entry (src/lattice/lattice.h checks it).
 */
#define CV_LATTICE_MAX_DIRECTORY_PAGES 256

/* page kinds (CvIvfPageOpaqueData.kind) */
#define CVIVF_PAGE_META 1
#define CVIVF_PAGE_CENTROID 2
#define CVIVF_PAGE_DIRECTORY 3
#define CVIVF_PAGE_DATA 4
/* 5 is cvlattice's label page (src/lattice/lattice.h) */
#define CVIVF_PAGE_REUSE 6		/* per list, where its dead slots are */
#define CVIVF_PAGE_FREE 7		/* a reclaimed page, recorded in the FSM */
#define CVIVF_PAGE_DRIFT 8		/* per list, its build-time baseline */
#define CVIVF_PAGE_CODE 9		/* a quantized list's codes (see "Quantized lists") */

/* metapage flags */
#define CVIVF_META_NO_CENTROIDS 0x0001	/* built on an empty table: one list */

/* tuple flags */
#define CVIVF_TUPLE_DEAD 0x0001

typedef struct CvIvfPageOpaqueData
{
	BlockNumber next;			/* next page of this chain, or InvalidBlockNumber */
	uint16		kind;
	uint16		page_id;		/* CVIVF_PAGE_ID */
} CvIvfPageOpaqueData;

typedef CvIvfPageOpaqueData *CvIvfPageOpaque;

/* Reuse pages: one CvIvfReuseEntry (16 bytes) per list. */
#define CVIVF_REUSE_ENTRIES_PER_PAGE \
	((uint32) ((BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - \
				MAXALIGN(sizeof(CvIvfPageOpaqueData))) / 16))
#define CVIVF_MAX_REUSE_PAGES \
	((CVIVF_MAX_LISTS + CVIVF_REUSE_ENTRIES_PER_PAGE - 1) / CVIVF_REUSE_ENTRIES_PER_PAGE)

/*
 * Drift pages: one CvIvfDriftEntry (24 bytes) per list the build made, the
 * baseline cvivf_health compares the index with.  Written once, after the
 * build's lists (src/ivf/drift.c measures, page.c writes), and listed in
 * the metapage; afterwards only VACUUM changes them, counting the tuples it
 * flags dead in the record that flags them.  Every build records one (with
 * build_blocks, never 0 then, even for a build without lists); an index
 * built before them has build_blocks 0: its figures since the build are
 * unknown until a REINDEX.  A cvlattice list made after the build has no
 * entry.
 */
#define CVIVF_DRIFT_ENTRIES_PER_PAGE \
	((uint32) ((BLCKSZ - MAXALIGN(SizeOfPageHeaderData) - \
				MAXALIGN(sizeof(CvIvfPageOpaqueData))) / 24))
#define CVIVF_MAX_DRIFT_PAGES \
	((CVIVF_MAX_LISTS + CVIVF_DRIFT_ENTRIES_PER_PAGE - 1) / CVIVF_DRIFT_ENTRIES_PER_PAGE)

/*
 * The recall calibration clustervec.target_recall reads (src/ivf/calibrate.c
 * measures it, page.c writes it into the metapage): recall@k at probes,
 * probes ascending, only where the recall rises, so the first point at or
 * above a target is the smallest probes reaching it (thinned to evenly
 * spaced recall levels when the curve rises more often than it has points).
 */
#define CVIVF_CALIBRATION_POINTS 128
#define CVIVF_CALIBRATED_BY_BUILD 1 /* the build's k-means sample */
#define CVIVF_CALIBRATED_BY_ROWS 2	/* cvivf_calibrate, over the index's rows */

typedef struct CvIvfCalibration
{
	uint32		points;			/* 0: not calibrated */
	uint16		k;				/* recall@k */
	uint16		source;			/* CVIVF_CALIBRATED_BY_* */
	uint32		queries;		/* sampled queries it averages */
	uint32		probes[CVIVF_CALIBRATION_POINTS];
	float4		recall[CVIVF_CALIBRATION_POINTS];
} CvIvfCalibration;

typedef struct CvIvfMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		dimensions;
	uint32		metric;			/* CvMetric */
	uint32		lists;
	uint32		flags;
	uint64		generation;		/* bumped by every vacuum and rebuild */
	BlockNumber first_centroid_block;
	BlockNumber first_directory_block;
	uint32		centroids_per_page; /* 0 when a centroid spans pages */
	uint32		pages_per_centroid; /* 1 unless a centroid spans pages */
	uint32		entries_per_directory_page;
	uint32		iterations;		/* build parameters, as used */
	uint64		seed;
	uint64		sample_rows;
	uint64		build_rows;
	/* zero in cvivf metapages written before cvlattice (see the header) */
	uint32		kind;			/* CV_INDEX_KIND_* */
	uint32		directory_entry_size;	/* 0: sizeof(CvIvfListEntry) */
	BlockNumber last_centroid_block;	/* lattice: where a new list's centroid goes */
	BlockNumber last_label_block;	/* lattice: where a new list's label goes */
	uint32		directory_pages;	/* lattice: entries used in directory_blocks */
	BlockNumber directory_blocks[CV_LATTICE_MAX_DIRECTORY_PAGES];	/* lattice */
	/* zero in metapages written before space reuse (see the header) */
	uint32		reuse_pages;	/* entries used in reuse_blocks */
	BlockNumber reuse_blocks[CVIVF_MAX_REUSE_PAGES];
	/* zero in metapages written before drift pages (see the header) */
	uint32		drift_pages;	/* entries used in drift_blocks */
	uint32		drift_lists;	/* lists the drift pages cover: the build's */
	BlockNumber build_blocks;	/* the index's size right after its build */
	BlockNumber drift_blocks[CVIVF_MAX_DRIFT_PAGES];
	/* zero in metapages written before calibration (see the header) */
	CvIvfCalibration calibration;
	/* zero in metapages written before quantized lists: none */
	uint32		quantization;	/* CVIVF_QUANTIZATION_* */
	uint32		code_entry_size;	/* bytes of one CvIvfCodeEntry with its codes */
	/* zero in metapages written before retraining (see "Retraining") */
	uint64		retrains;		/* generations cvivf_retrain switched to */
	uint64		retired_xid;	/* FullTransactionId; 0: no retired pages wait */
} CvIvfMetaPageData;

typedef CvIvfMetaPageData *CvIvfMetaPage;

/* Where a tuple's header is: block InvalidBlockNumber for none. */
typedef struct CvIvfSlot
{
	BlockNumber block;
	uint32		offset;
} CvIvfSlot;

/*
 * A list's reuse entry.  first_dead: no slot before it (in chain order) is
 * dead.  dead_tail: the start of the list's dead tail, the slots after its
 * last live tuple when VACUUM looked; invalid when unknown or none.  Inserts
 * fill the first dead slot, so the tail fills in chain order: its live slots
 * are always a prefix of it, before every dead one.  first_dead is moved on
 * lazily (when a fill's search crossed a page); when it moves into the
 * tail, dead_tail moves with it.  Both change only under the list's
 * directory page lock, and with the fill that moves them.
 */
typedef struct CvIvfReuseEntry
{
	CvIvfSlot	first_dead;
	CvIvfSlot	dead_tail;
} CvIvfReuseEntry;

typedef struct CvIvfListEntry
{
	BlockNumber first_block;	/* InvalidBlockNumber while the list is empty */
	BlockNumber last_block;
	uint64		tuples;			/* live tuples (appended minus removed) */
	float8		centroid_norm;
} CvIvfListEntry;

/*
 * A list's build-time baseline.  build_mean_distance: the mean of its
 * members' distances to its centroid at the build, by the index's own
 * order-by distance (NaN for a list the build left empty).  Inserts since
 * the build are not counted here (an insert's record has no page to
 * spare): live = build_tuples + inserted - deleted_since_build gives them
 * for cvivf, and cvlattice's directory entry counts them.
 */
typedef struct CvIvfDriftEntry
{
	uint64		build_tuples;
	uint64		deleted_since_build;	/* flagged dead by VACUUM */
	float8		build_mean_distance;
} CvIvfDriftEntry;

typedef struct CvIvfTupleHeader
{
	ItemPointerData heap_tid;
	uint16		flags;
} CvIvfTupleHeader;

/*
 * Quantized lists (reloption quantization = sq8, cvivf only).  The build
 * writes each list's tuples as usual and, right after the list's data
 * pages, its code pages: one CvIvfCodeEntry per tuple, in the order of the
 * tuples (the list's "coded" slots), code_entry_size bytes each, never
 * straddling a page, so entry i is at block code_first_block + i / per
 * page.  An entry holds the heap TID, the dead flag, where its tuple is,
 * and the 8-bit code of the vector's residual to the list's centroid
 * (src/math/sq8.h), from which a scan bounds the exact distance from
 * below and reads the vector only when the bound could still be among the
 * results (src/ivf/scan.c).  Tuples appended after the build (from
 * tail_block, tail_offset on) have no code and are read whole.  A tuple
 * and its code change together: VACUUM flags the code dead before the
 * tuple, and an insert that fills a dead coded slot rewrites its code in
 * the record that makes the tuple live (page.c).  Code pages are on no
 * chain; VACUUM never reclaims them.
 */
#define CVIVF_QUANTIZATION_NONE 0
#define CVIVF_QUANTIZATION_SQ8 1

typedef struct CvIvfCodedListEntry
{
	CvIvfListEntry base;
	BlockNumber code_first_block;	/* InvalidBlockNumber: no coded slots */
	uint32		coded;			/* slots with a code: the build's tuples */
	BlockNumber tail_block;		/* where the slot after the coded ones starts */
	uint32		tail_offset;
} CvIvfCodedListEntry;

typedef struct CvIvfCodeEntry
{
	CvIvfTupleHeader header;	/* as the tuple's: heap TID, dead flag */
	BlockNumber data_block;		/* the tuple's header */
	uint16		data_offset;
	uint16		unused;
	float4		scale;			/* CvSq8Factors, field for field */
	float4		error;
	float4		code_norm;
	float4		vector_norm;
	/* then int8 codes[dimensions], padded to MAXALIGN */
} CvIvfCodeEntry;

#define CVIVF_CODE_ENTRY_SIZE(dim) MAXALIGN(sizeof(CvIvfCodeEntry) + (Size) (dim))
#define CVIVF_CODES_PER_PAGE(meta) ((uint32) (CVIVF_PAGE_CAPACITY / (meta)->code_entry_size))
#define CvIvfCodeEntryCodes(entry) ((const int8 *) ((const char *) (entry) + sizeof(CvIvfCodeEntry)))

StaticAssertDecl(sizeof(CvIvfTupleHeader) == 8, "tuple header must be 8 bytes");
StaticAssertDecl(sizeof(CvIvfReuseEntry) == 16, "reuse entry must be 16 bytes");
StaticAssertDecl(sizeof(CvIvfDriftEntry) == 24, "drift entry must be 24 bytes");
StaticAssertDecl(sizeof(CvIvfCodedListEntry) == 40, "coded list entry must be 40 bytes");
StaticAssertDecl(sizeof(CvIvfCodeEntry) == 32, "code entry header must be 32 bytes");
StaticAssertDecl(sizeof(CvIvfMetaPageData) <= BLCKSZ / 2, "the metapage fits its page");

#define CvIvfPageGetOpaque(page) ((CvIvfPageOpaque) PageGetSpecialPointer(page))
#define CvIvfPageGetMeta(page) ((CvIvfMetaPage) PageGetContents(page))
#define CVIVF_PAGE_DATA_START ((Size) MAXALIGN(SizeOfPageHeaderData))
#define CVIVF_PAGE_CAPACITY \
	((Size) (BLCKSZ - CVIVF_PAGE_DATA_START - MAXALIGN(sizeof(CvIvfPageOpaqueData))))
#define CVIVF_TUPLE_SIZE(dim) (sizeof(CvIvfTupleHeader) + sizeof(float) * (Size) (dim))

/* A list and its centroid's distance to a query, as scans rank them. */
typedef struct CvIvfRankedList
{
	double		distance;
	int			list;
} CvIvfRankedList;

/* reloptions */
typedef struct CvIvfOptions
{
	int32		vl_len_;
	int			lists;			/* 0: automatic, about rows / 1000 */
	int			iterations;
	int			seed;
	int			sample_rows;	/* 0: automatic */
	int			quantization;	/* CVIVF_QUANTIZATION_* */
} CvIvfOptions;

/* build phases, as pg_stat_progress_create_index reports them */
#define CVIVF_PHASE_SAMPLING 2
#define CVIVF_PHASE_KMEANS 3
#define CVIVF_PHASE_ASSIGNING 4
#define CVIVF_PHASE_WRITING 5

/* settings (src/ivf/settings.c) */
extern int	cvivf_probes;
extern int	cvivf_iterative_scan;
extern int	cvivf_max_probes;
extern double cvivf_target_recall;	/* clustervec.target_recall, 0: off */
extern bool cvlattice_observe;	/* clustervec.observe */
extern int	cv_gpu_assign_mode;	/* clustervec.gpu_assign: CV_GPU_ASSIGN_* */

#define CVIVF_ITERATIVE_OFF 0
#define CVIVF_ITERATIVE_RELAXED 1

extern void cvivf_define_settings(void);
extern int	cvivf_scan_limit(int lists);
extern int	cvivf_scan_limit_for(int lists, int probes);
extern int	cvivf_scan_probes(Relation index, const CvIvfMetaPageData *meta);

/* handler.c */
extern bytea *cvivfoptions(Datum reloptions, bool validate);
extern char *cvivfbuildphasename(int64 phasenum);

/* metric.c: the opclass's metric and distances the same as its operator */
extern CvMetric cvivf_metric_of_index(Relation index);
extern double cvivf_distance(CvMetric metric, const float *a, const float *b, int dim);
extern bool cvivf_vector_is_indexable(CvMetric metric, const float *x, int dim);
extern void cvivf_normalise_rows(float *rows, int count, int dim);
extern float *cvivf_read_ranking_centroids(Relation index, const CvIvfMetaPageData *meta);
extern double cvivf_centroid_distance(CvMetric metric, const float *query,
									  const float *centroid, int dim);

/* layout.c: the metapage of a new index, shared by both kinds' builds */
extern void cvivf_init_meta(CvIvfMetaPageData *meta, CvMetric metric, int dims, int lists,
							bool centroids);
extern int	cvivf_declared_dimensions(Relation index);
extern Size cvivf_directory_entry_size(const CvIvfMetaPageData *meta);

/* reader.c: everything that reads pages */
extern void cvivf_read_meta(Relation index, CvIvfMetaPageData *meta);
extern void cvivf_check_generation_kept(Relation index, const CvIvfMetaPageData *meta);
extern float *cvivf_read_centroids(Relation index, const CvIvfMetaPageData *meta);
extern void cvivf_read_list_entry(Relation index, const CvIvfMetaPageData *meta,
								  int list, CvIvfListEntry *entry);
extern void cvivf_read_directory(Relation index, const CvIvfMetaPageData *meta,
								 CvIvfListEntry *entries);
extern BlockNumber cvivf_directory_block(const CvIvfMetaPageData *meta, int list);
extern int	cvivf_directory_slot(const CvIvfMetaPageData *meta, int list);
extern char *cvivf_directory_entry(Page page, const CvIvfMetaPageData *meta, int list);
extern void cvivf_read_directory_bytes(Relation index, const CvIvfMetaPageData *meta,
									   char *out);
extern void cvivf_read_list_entry_bytes(Relation index, const CvIvfMetaPageData *meta,
										int list, void *entry);

/* Called for every tuple of a list; the vector is only valid during the call. */
typedef void (*CvIvfTupleVisitor) (const CvIvfTupleHeader *header, const float *vector,
								   BlockNumber block, Size offset, void *arg);
extern uint64 cvivf_scan_list(Relation index, const CvIvfMetaPageData *meta,
							  BlockNumber first_block, bool include_dead,
							  BufferAccessStrategy strategy,
							  CvIvfTupleVisitor visitor, void *arg);
extern uint64 cvivf_scan_list_from(Relation index, const CvIvfMetaPageData *meta,
								   BlockNumber block, Size offset, bool include_dead,
								   BufferAccessStrategy strategy,
								   CvIvfTupleVisitor visitor, void *arg);
/* Called for every page of a chain a walk reads, before its tuples. */
typedef void (*CvIvfPageVisitor) (BlockNumber block, void *arg);
extern uint64 cvivf_scan_list_pages(Relation index, const CvIvfMetaPageData *meta,
									BlockNumber first_block, bool include_dead,
									BufferAccessStrategy strategy, CvIvfTupleVisitor visitor,
									CvIvfPageVisitor page_visitor, void *arg);
extern void cvivf_walk_chain(Relation index, BlockNumber block, BufferAccessStrategy strategy,
							 CvIvfPageVisitor visitor, void *arg);
extern BlockNumber cvivf_layout_pages(const CvIvfMetaPageData *meta);
extern BlockNumber cvivf_code_pages(const CvIvfMetaPageData *meta, uint32 coded);
extern void cvivf_visit_pages(Relation index, const CvIvfMetaPageData *meta, bool chains,
							  CvIvfPageVisitor visitor, void *arg);
extern uint16 cvivf_page_kind(Relation index, BlockNumber block, BufferAccessStrategy strategy);
extern bool cvivf_find_dead_slot(Relation index, const CvIvfMetaPageData *meta, CvIvfSlot from,
								 CvIvfSlot watch, CvIvfSlot *found, bool *passed);
extern BlockNumber *cvivf_slot_pages(Relation index, const CvIvfMetaPageData *meta,
									 CvIvfSlot slot, int *count, CvIvfSlot *next);
extern bool cvivf_read_reuse_entry(Relation index, const CvIvfMetaPageData *meta, int list,
								   CvIvfReuseEntry *entry);
extern CvIvfReuseEntry *cvivf_reuse_entry(Page page, int list);
extern void cvivf_check_page(Relation index, Page page, BlockNumber block, uint16 kind);
extern bool cvivf_read_drift(Relation index, const CvIvfMetaPageData *meta,
							 CvIvfDriftEntry *entries);
extern void cvivf_read_vector_at(Relation index, const CvIvfMetaPageData *meta,
								 BlockNumber block, Size offset, float *out);

/* centroids.c */
extern const float *cvivf_get_centroids(Relation index, const CvIvfMetaPageData *meta,
										bool *owned);
extern int	cvivf_nearest_list(Relation index, const CvIvfMetaPageData *meta,
							   const float *vector);

/* page.c: the only file that changes pages (always through GenericXLog) */
typedef struct CvIvfBuildWriter CvIvfBuildWriter;

extern CvIvfBuildWriter *cvivf_writer_begin(Relation index, ForkNumber fork,
											const CvIvfMetaPageData *meta);
extern char *cvivf_writer_entry(CvIvfBuildWriter *writer, int list);
extern CvIvfMetaPageData *cvivf_writer_meta(CvIvfBuildWriter *writer);
extern BlockNumber cvivf_writer_page(CvIvfBuildWriter *writer, Page image);
extern void cvivf_writer_centroids(CvIvfBuildWriter *writer, const float *centroids,
								   const double *norms);
extern void cvivf_writer_start_list(CvIvfBuildWriter *writer, int list);
extern void cvivf_writer_add(CvIvfBuildWriter *writer, ItemPointer tid, const float *vector);
extern void cvivf_writer_finish(CvIvfBuildWriter *writer);
extern CvIvfBuildWriter *cvivf_writer_begin_relocated(Relation index,
													  const CvIvfMetaPageData *meta);
extern BlockNumber cvivf_writer_reserved(CvIvfBuildWriter *writer);
extern void cvivf_writer_drift(CvIvfBuildWriter *writer, const CvIvfDriftEntry *entries,
							   uint32 lists);
extern uint64 cvivf_switch_generation(Relation index, CvIvfMetaPageData *pending);
extern void cvivf_clear_retired(Relation index, uint64 retired_xid);
extern bool cvivf_reclaim_retired_page(Relation index, BlockNumber block,
									   BufferAccessStrategy strategy);
extern bool cvivf_claim_free_page(Relation index, BlockNumber block);

/* free_runs.c: the free pages a relocated writer takes, as contiguous runs */
typedef struct CvIvfFreeRuns CvIvfFreeRuns;

extern CvIvfFreeRuns *cvivf_free_runs_find(Relation index);
extern BlockNumber cvivf_free_runs_take(CvIvfFreeRuns *runs, Relation index, BlockNumber count);
extern void cvivf_append_tuple(Relation index, const CvIvfMetaPageData *meta, int list,
							   ItemPointer tid, const float *vector);

/*
 * One more page an append changes in the record that links its tuple (a
 * cvlattice centroid): apply runs inside that record with the page and the
 * list's whole directory entry, after the entry counted the new tuple.
 */
typedef struct CvIvfAppendExtra
{
	BlockNumber block;
	void		(*apply) (Page page, char *entry, void *arg);
	void	   *arg;
} CvIvfAppendExtra;

extern void cvivf_append_tuple_extra(Relation index, const CvIvfMetaPageData *meta, int list,
									 ItemPointer tid, const float *vector,
									 const CvIvfAppendExtra *extra);

/* page.c's primitives, for the sibling writer of cvlattice pages (src/lattice/page.c) */
extern void cvivf_page_init(Page page, uint16 kind);
extern void cvivf_page_append(Page page, const void *bytes, Size count);
extern Size cvivf_page_free_bytes(Page page);
extern Buffer cvivf_extend(Relation index, ForkNumber fork, bool lock_extension);
extern Buffer cvivf_new_page(Relation index);
extern void cvivf_reuse_prepare(Relation index, uint32 lists);
extern void cvivf_set_reuse_entry(Relation index, const CvIvfMetaPageData *meta, int list,
								  uint64 expected_tuples, const CvIvfReuseEntry *exact,
								  BufferAccessStrategy strategy);
extern bool cvivf_reclaim_page(Relation index, BlockNumber block,
							   BufferAccessStrategy strategy);
extern int	cvivf_mark_dead(Relation index, const CvIvfMetaPageData *meta, int list,
							BlockNumber block, const Size *offsets, int count,
							BufferAccessStrategy strategy);
extern void cvivf_write_drift(Relation index, const CvIvfDriftEntry *entries, uint32 lists);
extern void cvivf_bump_generation(Relation index);
extern void cvivf_write_calibration(Relation index, const CvIvfCalibration *calibration);
extern void cvivf_set_dimensions(Relation index, int dimensions);

/* build.c, insert.c, scan.c, vacuum.c, cost.c, validate.c */
extern double cvivf_estimate_heap_rows(Relation heap);
extern IndexBuildResult *cvivfbuild(Relation heap, Relation index, IndexInfo *info);
extern void cvivfbuildempty(Relation index);
extern bool cvivfinsert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
						Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
						IndexInfo *indexInfo);
extern IndexScanDesc cvivfbeginscan(Relation index, int nkeys, int norderbys);
extern void cvivfrescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys,
						int norderbys);
extern bool cvivfgettuple(IndexScanDesc scan, ScanDirection dir);
extern void cvivfendscan(IndexScanDesc scan);
/* vacuum.c: called after VACUUM flagged dead tuples of a list */
typedef void (*CvIvfListChanged) (Relation index, const CvIvfMetaPageData *meta, int list,
								  BufferAccessStrategy strategy, void *arg);
extern IndexBulkDeleteResult *cvivf_bulkdelete_lists(IndexVacuumInfo *info,
													 IndexBulkDeleteResult *stats,
													 IndexBulkDeleteCallback callback,
													 void *callback_state,
													 CvIvfListChanged changed, void *arg);
extern IndexBulkDeleteResult *cvivfbulkdelete(IndexVacuumInfo *info,
											  IndexBulkDeleteResult *stats,
											  IndexBulkDeleteCallback callback,
											  void *callback_state);
extern IndexBulkDeleteResult *cvivfvacuumcleanup(IndexVacuumInfo *info,
												 IndexBulkDeleteResult *stats);
extern void cvivfcostestimate(struct PlannerInfo *root, struct IndexPath *path,
							  double loop_count, Cost *startup, Cost *total,
							  Selectivity *selectivity, double *correlation,
							  double *pages);
extern bool cvivfvalidate(Oid opclassoid);

/* drift.c: the build-time baseline and what cvivf_health measures now */
typedef struct CvIvfDistanceSums
{
	uint32		lists;
	double	   *sums;			/* per list, distances of its members to its centroid */
	uint64	   *counts;
} CvIvfDistanceSums;

extern CvIvfDistanceSums *cvivf_distance_sums_new(uint32 lists);
extern void cvivf_distance_sums_add(CvIvfDistanceSums *sums, CvMetric metric, int list,
									const float *vector, const float *centroid, int dim);
extern void cvivf_measure_lists(Relation index, const CvIvfMetaPageData *meta,
								CvIvfDistanceSums *sums);
extern void cvivf_record_baseline(Relation index, const CvIvfDistanceSums *sums);
extern void cvivf_measure_baseline(Relation index);

/* calibrate.c: the recall calibration of clustervec.target_recall */
extern void cvivf_calibrate_sample(Relation index, CvMetric metric, const float *sample,
								   int64 count, int dims, const float *centroids, int lists,
								   int64 rows, uint64 seed);
extern bool cvivf_calibration_of_sample(CvMetric metric, const float *sample, int64 count,
										int dims, const float *centroids, int lists,
										int64 rows, uint64 seed, CvIvfCalibration *result);

/* One list's figures since the build, as cvivf_lists and cvivf_health report them. */
typedef struct CvIvfListDrift
{
	uint64		tuples;			/* live now */
	bool		in_baseline;	/* the build's drift entry covers it */
	uint64		build_tuples;
	uint64		inserted;		/* since the build */
	uint64		deleted;		/* since the build */
	double		build_mean_distance;	/* NaN: unknown or an empty list */
} CvIvfListDrift;

extern CvIvfListDrift *cvivf_read_list_drift(Relation index, const CvIvfMetaPageData *meta,
											 bool *have_baseline);

/* codes.c: quantized lists (see "Quantized lists") */
extern int	cvivf_max_quantized_dimensions(void);
extern void cvivf_meta_set_quantization(CvIvfMetaPageData *meta, int quantization);
extern bool cvivf_is_quantized(const CvIvfMetaPageData *meta);
extern void cvivf_encode_entry(const CvIvfMetaPageData *meta, const float *vector,
							   const float *centroid, ItemPointer tid, CvIvfCodeEntry *entry);
extern void cvivf_code_location(const CvIvfMetaPageData *meta, const CvIvfCodedListEntry *entry,
								uint32 ordinal, BlockNumber *block, Size *offset);
extern bool cvivf_coded_slot_ordinal(const CvIvfMetaPageData *meta,
									 const CvIvfCodedListEntry *entry, BlockNumber block,
									 Size offset, uint32 *ordinal);
typedef void (*CvIvfCodeVisitor) (const CvIvfCodeEntry *entry, void *arg);
extern void cvivf_scan_codes(Relation index, const CvIvfMetaPageData *meta,
							 const CvIvfCodedListEntry *entry, BufferAccessStrategy strategy,
							 CvIvfCodeVisitor visitor, void *arg);
extern int	cvivf_mark_codes_dead(Relation index, const CvIvfMetaPageData *meta,
								  const CvIvfCodedListEntry *entry, const uint32 *ordinals,
								  const ItemPointerData *tids, int count,
								  BufferAccessStrategy strategy);
extern void cvivf_append_tuple_coded(Relation index, const CvIvfMetaPageData *meta, int list,
									 ItemPointer tid, const float *vector,
									 const CvIvfCodeEntry *code);

/* introspect.c */
extern void cvivf_verify_chain(Relation index, const CvIvfListEntry *entry, BlockNumber nblocks);
extern void cvivf_verify_reuse(Relation index, const CvIvfMetaPageData *meta, int list,
							   const CvIvfListEntry *entry);

#endif
