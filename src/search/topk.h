/*
 * topk.h: the k best rows by distance, kept as a bounded max-heap (the
 * worst kept row at the root), for exact searches that stream a table once
 * and hold k rows per query, never the table.
 */
#ifndef CV_TOPK_H
#define CV_TOPK_H

#include "postgres.h"

#include "storage/itemptr.h"

typedef struct CvHit
{
	double		distance;
	ItemPointerData tid;
} CvHit;

/* A query's best k so far; ties go to the smaller TID. */
typedef struct CvTopK
{
	CvHit	   *hits;
	int			count;
	int			k;
} CvTopK;

extern void cv_topk_init(CvTopK *top, int k);
extern void cv_topk_offer(CvTopK *top, double distance, ItemPointer tid);
extern void cv_topk_sort(CvTopK *top);

/* The k-th best distance so far (the worst kept); count must be > 0. */
static inline double
cv_topk_worst(const CvTopK *top)
{
	return top->hits[0].distance;
}

#endif							/* CV_TOPK_H */
