/*
 * candidates.h: the rows an ordered cvivf scan has read and not returned
 * yet, handed out in non-decreasing distance (src/ivf/candidates.c).
 */
#ifndef CV_IVF_CANDIDATES_H
#define CV_IVF_CANDIDATES_H

#include "postgres.h"

#include "storage/block.h"
#include "storage/itemptr.h"

/*
 * A candidate row.  Its distance may start as a lower bound (exact =
 * false: a float32 pass, or an sq8 code) and becomes the operator's exact
 * value only when it reaches the top, so only the rows returned (and a few
 * near them) pay for the float64 kernel.
 */
typedef struct CvIvfCandidate
{
	double		distance;
	ItemPointerData tid;
	bool		exact;
	uint16		offset;			/* where the tuple's header is, to re-read it */
	BlockNumber block;
} CvIvfCandidate;

/*
 * items[0, heap_size) is a binary heap; after cvivf_candidates_order, the
 * reserve items[reserve_start, + reserve_size) holds the rest, none of
 * them before pivot (its least), unordered until the heap's top reaches
 * pivot.
 */
typedef struct CvIvfCandidates
{
	MemoryContext context;
	CvIvfCandidate *items;
	Size		capacity;
	Size		heap_size;
	Size		reserve_start;
	Size		reserve_size;
	CvIvfCandidate pivot;
} CvIvfCandidates;

extern void cvivf_candidates_push(CvIvfCandidates *c, double distance, ItemPointer tid,
								  bool exact, BlockNumber block, Size offset);
extern void cvivf_candidates_order(CvIvfCandidates *c);
extern CvIvfCandidate *cvivf_candidates_top(CvIvfCandidates *c);
extern void cvivf_candidates_top_changed(CvIvfCandidates *c);
extern void cvivf_candidates_pop(CvIvfCandidates *c);

#endif
