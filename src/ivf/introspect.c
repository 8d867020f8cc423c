/*
 * introspect.c: cvivf_lists, cvivf_list_of and cvivf_verify, for users and
 * for tests that check the structure rather than only the answers.  Each
 * needs SELECT on the index's table and refuses roles subject to its
 * row-level security (list counts and centroids describe every row);
 * cvivf_verify also keeps writers out, so it needs the rights LOCK TABLE
 * ... IN SHARE MODE needs (access.c).
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/table.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "access.h"
#include "ivf/ivf.h"
#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvivf_lists);
PG_FUNCTION_INFO_V1(cvivf_list_of);
PG_FUNCTION_INFO_V1(cvivf_verify);

/*
 * One row per list: its live tuples and centroid norm, then the figures
 * since the build (drift.c; NULL for an index built before it recorded
 * them) and the centroid.
 */
Datum
cvivf_lists(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index = cv_open_cvivf(PG_GETARG_OID(0), CV_INDEX_READ, "cvivf_lists", &heap);
	CvIvfMetaPageData meta;
	CvIvfListDrift *drift;
	bool		baseline;
	float	   *centroids;

	InitMaterializedSRF(fcinfo, 0);
	cvivf_read_meta(index, &meta);
	drift = cvivf_read_list_drift(index, &meta, &baseline);
	centroids = cvivf_read_centroids(index, &meta);
	for (uint32 list = 0; list < meta.lists; list++)
	{
		CvIvfListEntry entry;
		Datum		values[8];
		bool		nulls[8] = {0};

		cvivf_read_list_entry(index, &meta, list, &entry);
		values[0] = Int32GetDatum(list);
		values[1] = Int64GetDatum(entry.tuples);
		values[2] = Float8GetDatum(entry.centroid_norm);
		nulls[2] = nulls[7] = centroids == NULL;
		values[3] = Int64GetDatum(drift[list].build_tuples);
		values[4] = Int64GetDatum(drift[list].inserted);
		values[5] = Int64GetDatum(drift[list].deleted);
		nulls[3] = nulls[4] = nulls[5] = !baseline;
		values[6] = Float8GetDatum(drift[list].build_mean_distance);
		nulls[6] = isnan(drift[list].build_mean_distance);
		if (centroids != NULL)
		{
			CVec	   *centroid = cvec_alloc(meta.dimensions);

			memcpy(centroid->x, centroids + (Size) list * meta.dimensions,
				   sizeof(float) * meta.dimensions);
			values[7] = PointerGetDatum(centroid);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return (Datum) 0;
}

Datum
cvivf_list_of(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index = cv_open_cvivf(PG_GETARG_OID(0), CV_INDEX_READ, "cvivf_list_of", &heap);
	CVec	   *v = PG_GETARG_CVEC_P(1);
	CvIvfMetaPageData meta;
	int			list;

	cvivf_read_meta(index, &meta);
	if (meta.dimensions != 0 && (int) meta.dimensions != v->dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("different cvec dimensions %u and %d", meta.dimensions, v->dim)));
	list = cvivf_nearest_list(index, &meta, v->x);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_INT32(list);
}

/* What cvivf_verify tracks while it walks one list. */
typedef struct VerifyState
{
	Relation	index;
	const CvIvfMetaPageData *meta;
	const float *centroids;
	int			list;
	uint64		live;
	uint32		slot;			/* the list's slots visited so far */
	char	   *codes;			/* quantized: the list's code entries, in slot order */
	uint32		coded;
} VerifyState;

static void report_violation(Relation index, BlockNumber block, Size offset,
							 const char *invariant);

/* Copies one code entry of the list being verified. */
static void
copy_code(const CvIvfCodeEntry *entry, void *arg)
{
	VerifyState *state = (VerifyState *) arg;

	memcpy(state->codes + (Size) state->slot++ * state->meta->code_entry_size, entry,
		   state->meta->code_entry_size);
}

/* A quantized list's code entries, in memory for the walk of its tuples. */
static void
load_codes(VerifyState *state)
{
	CvIvfCodedListEntry entry;

	state->coded = 0;
	if (!cvivf_is_quantized(state->meta))
		return;
	cvivf_read_list_entry_bytes(state->index, state->meta, state->list, &entry);
	if (state->codes != NULL)
		pfree(state->codes);
	state->coded = entry.coded;
	state->codes = MemoryContextAllocHuge(CurrentMemoryContext,
										  Max((Size) entry.coded, 1) * state->meta->code_entry_size);
	state->slot = 0;
	if (entry.coded > 0)
		cvivf_scan_codes(state->index, state->meta, &entry, NULL, copy_code, state);
}

/*
 * A coded slot's entry names the tuple (location, TID), is live only when
 * the tuple is, and bounds it as the scan's bound assumes: the vector lies
 * within error of its decoded code, code_norm and vector_norm bound the
 * code's and the vector's norms from above and below.
 */
static void
verify_code(VerifyState *state, const CvIvfTupleHeader *header, const float *vector,
			BlockNumber block, Size offset)
{
	const CvIvfMetaPageData *meta = state->meta;
	const CvIvfCodeEntry *code = (const CvIvfCodeEntry *)
		(state->codes + (Size) state->slot * meta->code_entry_size);
	const int8 *k = CvIvfCodeEntryCodes(code);
	const float *c = state->centroids + (Size) state->list * meta->dimensions;
	double		residual = 0,
				code_norm = 0,
				norm = 0;

	if (code->data_block != block || code->data_offset != offset ||
		!ItemPointerEquals((ItemPointer) &code->header.heap_tid, (ItemPointer) &header->heap_tid))
		report_violation(state->index, block, offset, "a coded slot's code names its tuple");
	if (!(code->header.flags & CVIVF_TUPLE_DEAD) && (header->flags & CVIVF_TUPLE_DEAD))
		report_violation(state->index, block, offset, "a live code's tuple is live");
	if (code->header.flags & CVIVF_TUPLE_DEAD)
		return;
	for (int j = 0; j < (int) meta->dimensions; j++)
	{
		double		r = (double) vector[j] - ((double) c[j] + (double) code->scale * k[j]);

		residual += r * r;
		code_norm += (double) k[j] * k[j];
		norm += (double) vector[j] * vector[j];
	}
	/* float64 recomputation: allow its own rounding, far below a float4 ulp */
	if (sqrt(residual) > code->error * (1 + 1e-12) ||
		sqrt(code_norm) > code->code_norm * (1 + 1e-12) ||
		code->vector_norm > sqrt(norm) * (1 + 1e-12))
		report_violation(state->index, block, offset, "a code bounds its vector");
}

static void
report_violation(Relation index, BlockNumber block, Size offset, const char *invariant)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("index \"%s\" is corrupted at block %u, offset %zu",
					RelationGetRelationName(index), block, offset),
			 errdetail("Invariant violated: %s.", invariant)));
}

/* Each tuple: a valid heap TID, and no centroid nearer than its own list's. */
static void
verify_tuple(const CvIvfTupleHeader *header, const float *vector,
			 BlockNumber block, Size offset, void *arg)
{
	VerifyState *state = (VerifyState *) arg;
	const CvIvfMetaPageData *meta = state->meta;
	double		mine;

	if (!ItemPointerIsValid(&header->heap_tid))
		report_violation(state->index, block, offset, "every tuple has a valid heap TID");
	if (header->flags & ~CVIVF_TUPLE_DEAD)
		report_violation(state->index, block, offset, "tuple flags are known");
	if (!(header->flags & CVIVF_TUPLE_DEAD))
		state->live++;
	if (state->slot < state->coded && state->centroids != NULL)
		verify_code(state, header, vector, block, offset);
	state->slot++;
	for (int j = 0; j < (int) meta->dimensions; j++)
		if (!isfinite(vector[j]))
			report_violation(state->index, block, offset, "every element is finite");
	if (state->centroids == NULL)
		return;
	mine = cvivf_centroid_distance(meta->metric, vector,
								   state->centroids + (Size) state->list * meta->dimensions,
								   meta->dimensions);
	for (uint32 other = 0; other < meta->lists; other++)
	{
		double		theirs = cvivf_centroid_distance(meta->metric, vector,
													 state->centroids + (Size) other * meta->dimensions,
													 meta->dimensions);

		if (theirs < mine || (theirs == mine && (int) other < state->list))
			report_violation(state->index, block, offset,
							 "every tuple is in the list of its nearest centroid");
	}
}

/*
 * Walks one list's chain: page kinds, no cycle, the recorded last page
 * (cvlattice_verify checks its lists with it too).
 */
void
cvivf_verify_chain(Relation index, const CvIvfListEntry *entry, BlockNumber nblocks)
{
	BlockNumber block = entry->first_block;
	BlockNumber last = InvalidBlockNumber;
	BlockNumber steps = 0;

	while (BlockNumberIsValid(block))
	{
		Buffer		buf;
		Page		page;

		if (block >= nblocks || ++steps > nblocks)
			report_violation(index, block, 0, "list chains stay inside the index and end");
		buf = ReadBuffer(index, block);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		cvivf_check_page(index, page, block, CVIVF_PAGE_DATA);
		last = block;
		block = CvIvfPageGetOpaque(page)->next;
		UnlockReleaseBuffer(buf);
	}
	if (last != entry->last_block)
		report_violation(index, last, 0, "the directory records the last page of each list");
}

/* What the check of a list's reuse entry has seen so far of its slots. */
typedef struct ReuseCheck
{
	Relation	index;
	CvIvfReuseEntry entry;
	bool		seen_first_dead;
	bool		seen_dead_tail;
	bool		dead_in_tail;	/* a dead slot after dead_tail */
} ReuseCheck;

static void
check_reuse_slot(const CvIvfTupleHeader *header, const float *vector pg_attribute_unused(),
				 BlockNumber block, Size offset, void *arg)
{
	ReuseCheck *check = (ReuseCheck *) arg;
	bool		dead = (header->flags & CVIVF_TUPLE_DEAD) != 0;

	if (block == check->entry.first_dead.block && offset == check->entry.first_dead.offset)
		check->seen_first_dead = true;
	if (block == check->entry.dead_tail.block && offset == check->entry.dead_tail.offset)
	{
		if (BlockNumberIsValid(check->entry.first_dead.block) && !check->seen_first_dead)
			report_violation(check->index, block, offset,
							 "a list's first possibly dead slot is not after its dead tail");
		check->seen_dead_tail = true;
	}
	if (dead && BlockNumberIsValid(check->entry.first_dead.block) && !check->seen_first_dead)
		report_violation(check->index, block, offset,
						 "no dead slot lies before a list's first possibly dead slot");
	if (!dead && check->dead_in_tail)
		report_violation(check->index, block, offset,
						 "the live slots of a list's dead tail come before its dead ones");
	if (dead && check->seen_dead_tail)
		check->dead_in_tail = true;
}

/*
 * A list's reuse entry against its slots (cvlattice_verify checks its
 * lists with it too): the slots it names are in the chain, no dead slot
 * before first_dead, and inserts filled the dead tail in chain order.
 */
void
cvivf_verify_reuse(Relation index, const CvIvfMetaPageData *meta, int list,
				   const CvIvfListEntry *entry)
{
	ReuseCheck	check = {0};

	check.index = index;
	if (!cvivf_read_reuse_entry(index, meta, list, &check.entry))
		return;
	if (BlockNumberIsValid(entry->first_block))
		cvivf_scan_list(index, meta, entry->first_block, true, NULL, check_reuse_slot, &check);
	if ((BlockNumberIsValid(check.entry.first_dead.block) && !check.seen_first_dead) ||
		(BlockNumberIsValid(check.entry.dead_tail.block) && !check.seen_dead_tail))
		report_violation(index, check.entry.first_dead.block, check.entry.first_dead.offset,
						 "a list's reuse entry names slots of the list");
}

Datum
cvivf_verify(PG_FUNCTION_ARGS)
{
	Relation	heap;
	Relation	index;
	CvIvfMetaPageData meta;
	VerifyState state = {0};
	bool		owned;
	BlockNumber nblocks;

	/*
	 * Inserts append while a list is walked, so the walk and the directory's
	 * count can only be compared with writers kept out: SHARE on the table.
	 */
	index = cv_open_cvivf(PG_GETARG_OID(0), CV_INDEX_EXCLUDE_WRITERS, "cvivf_verify", &heap);
	nblocks = RelationGetNumberOfBlocks(index);
	cvivf_read_meta(index, &meta);
	if (meta.lists < 1 || meta.lists > CVIVF_MAX_LISTS ||
		((meta.flags & CVIVF_META_NO_CENTROIDS) && meta.lists != 1))
		report_violation(index, CVIVF_METAPAGE_BLKNO, 0, "1 <= lists <= 32768, one list without centroids");
	state.index = index;
	state.meta = &meta;
	state.centroids = cvivf_get_centroids(index, &meta, &owned);
	for (uint32 list = 0; list < meta.lists; list++)
	{
		CvIvfListEntry entry;

		CHECK_FOR_INTERRUPTS();
		/* on a standby, a retrain replayed meanwhile is no violation */
		cvivf_check_generation_kept(index, &meta);
		cvivf_read_list_entry(index, &meta, list, &entry);
		cvivf_verify_chain(index, &entry, nblocks);
		state.list = list;
		state.live = 0;
		load_codes(&state);
		state.slot = 0;
		if (BlockNumberIsValid(entry.first_block))
			cvivf_scan_list(index, &meta, entry.first_block, true, NULL, verify_tuple, &state);
		if (state.slot < state.coded)
			report_violation(index, cvivf_directory_block(&meta, list), 0,
							 "a list has as many slots as codes, or more");
		if (state.live != entry.tuples)
			report_violation(index, cvivf_directory_block(&meta, list),
							 CVIVF_PAGE_DATA_START + cvivf_directory_slot(&meta, list) * sizeof(CvIvfListEntry),
							 "the directory counts the live tuples of each list");
		cvivf_verify_reuse(index, &meta, list, &entry);
	}
	index_close(index, NoLock);
	table_close(heap, NoLock);
	PG_RETURN_VOID();
}
