/*
 * topk.c: a bounded max-heap of the k best rows by (distance, TID), shared
 * by cvsearch_exact and cvivf_recall (see topk.h).
 */
#include "postgres.h"

#include "search/topk.h"

/* Result order: ascending distance, then ascending TID. */
static inline bool
hit_before(const CvHit *a, const CvHit *b)
{
	if (a->distance != b->distance)
		return a->distance < b->distance;
	return ItemPointerCompare((ItemPointer) &a->tid, (ItemPointer) &b->tid) < 0;
}

static void
swap_hits(CvTopK *top, int i, int j)
{
	CvHit		swap = top->hits[i];

	top->hits[i] = top->hits[j];
	top->hits[j] = swap;
}

/* Restores the heap below i after its hit got better. */
static void
sift_down(CvTopK *top, int i)
{
	for (;;)
	{
		int			worst = i,
					l = 2 * i + 1,
					r = 2 * i + 2;

		if (l < top->count && hit_before(&top->hits[worst], &top->hits[l]))
			worst = l;
		if (r < top->count && hit_before(&top->hits[worst], &top->hits[r]))
			worst = r;
		if (worst == i)
			return;
		swap_hits(top, i, worst);
		i = worst;
	}
}

/* An empty heap for k hits, in the current memory context. */
void
cv_topk_init(CvTopK *top, int k)
{
	top->k = k;
	top->count = 0;
	top->hits = palloc(sizeof(CvHit) * Max(k, 1));
}

/* Keeps the row when it is among the k best so far. */
void
cv_topk_offer(CvTopK *top, double distance, ItemPointer tid)
{
	CvHit		hit = {distance, *tid};

	if (top->count < top->k)
	{
		int			i = top->count++;

		top->hits[i] = hit;
		while (i > 0 && hit_before(&top->hits[(i - 1) / 2], &top->hits[i]))
		{
			swap_hits(top, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
	}
	else if (top->count > 0 && hit_before(&hit, &top->hits[0]))
	{
		top->hits[0] = hit;
		sift_down(top, 0);
	}
}

static int
compare_hits(const void *a, const void *b)
{
	return hit_before(a, b) ? -1 : (hit_before(b, a) ? 1 : 0);
}

/* Puts the hits in result order; the heap is no longer one afterwards. */
void
cv_topk_sort(CvTopK *top)
{
	qsort(top->hits, top->count, sizeof(CvHit), compare_hits);
}
