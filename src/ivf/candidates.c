/*
 * candidates.c: the rows an ordered scan has read, in non-decreasing
 * distance, ties by heap TID.  A scan reads every row of its probed lists
 * (tens of thousands) but the executor usually wants ten, so only the
 * nearest CANDIDATES_HEAPED go into a heap; the rest wait unordered in a
 * reserve behind the least of them (a linear-time selection puts it
 * there), and join the heap only if the heap's top ever reaches it.
 */
#include "postgres.h"

#include <math.h>

#include "utils/memutils.h"

#include "ivf/candidates.h"

#define CANDIDATES_HEAPED 256

/* NaN (a zero vector under cosine) orders last, as float8 ordering does. */
static inline bool
candidate_less(const CvIvfCandidate *a, const CvIvfCandidate *b)
{
	if (a->distance != b->distance)
	{
		if (isnan(a->distance))
			return false;
		if (isnan(b->distance))
			return true;
		return a->distance < b->distance;
	}
	return ItemPointerCompare((ItemPointer) &a->tid, (ItemPointer) &b->tid) < 0;
}

static inline void
swap_items(CvIvfCandidate *items, Size i, Size j)
{
	CvIvfCandidate t = items[i];

	items[i] = items[j];
	items[j] = t;
}

static void
sift_down(CvIvfCandidate *heap, Size size, Size i)
{
	for (;;)
	{
		Size		smallest = i,
					left = 2 * i + 1,
					right = 2 * i + 2;

		if (left < size && candidate_less(&heap[left], &heap[smallest]))
			smallest = left;
		if (right < size && candidate_less(&heap[right], &heap[smallest]))
			smallest = right;
		if (smallest == i)
			return;
		swap_items(heap, i, smallest);
		i = smallest;
	}
}

static void
heapify(CvIvfCandidate *heap, Size size)
{
	for (Size i = size / 2; i-- > 0;)
		sift_down(heap, size, i);
}

/* Lomuto partition of items[lo, hi] around a median of three; returns the pivot's place. */
static Size
partition(CvIvfCandidate *items, Size lo, Size hi)
{
	Size		mid = lo + (hi - lo) / 2;
	Size		store = lo;

	if (candidate_less(&items[mid], &items[lo]))
		swap_items(items, mid, lo);
	if (candidate_less(&items[hi], &items[lo]))
		swap_items(items, hi, lo);
	if (candidate_less(&items[mid], &items[hi]))
		swap_items(items, mid, hi);
	/* items[hi] is now the median of the three */
	for (Size i = lo; i < hi; i++)
		if (candidate_less(&items[i], &items[hi]))
			swap_items(items, i, store++);
	swap_items(items, store, hi);
	return store;
}

/* Puts the k-th least item at items[k], lesser ones before it, the others after. */
static void
select_kth(CvIvfCandidate *items, Size n, Size k)
{
	Size		lo = 0,
				hi = n - 1;

	while (lo < hi)
	{
		Size		p = partition(items, lo, hi);

		if (p == k)
			return;
		if (p < k)
			lo = p + 1;
		else
			hi = p - 1;
	}
}

/* Moves the reserve into the heap (unordered: the caller orders). */
static void
merge_reserve(CvIvfCandidates *c)
{
	if (c->reserve_size == 0)
		return;
	memmove(&c->items[c->heap_size], &c->items[c->reserve_start],
			sizeof(CvIvfCandidate) * c->reserve_size);
	c->heap_size += c->reserve_size;
	c->reserve_size = 0;
}

/* Adds a candidate; cvivf_candidates_order must follow before the next top. */
void
cvivf_candidates_push(CvIvfCandidates *c, double distance, ItemPointer tid, bool exact,
					  BlockNumber block, Size offset)
{
	CvIvfCandidate *item;

	merge_reserve(c);			/* cvivf_candidates_order orders all again */
	if (c->heap_size == c->capacity)
	{
		c->capacity = Max(1024, c->capacity * 2);
		c->items = c->items == NULL ?
			MemoryContextAllocHuge(c->context, sizeof(CvIvfCandidate) * c->capacity) :
			repalloc_huge(c->items, sizeof(CvIvfCandidate) * c->capacity);
	}
	item = &c->items[c->heap_size++];
	item->distance = distance;
	item->tid = *tid;
	item->exact = exact;
	item->block = block;
	item->offset = (uint16) offset;
}

/* Orders what was pushed since the last call (all of it, with the old heap). */
void
cvivf_candidates_order(CvIvfCandidates *c)
{
	Size		n = c->heap_size;

	if (n <= 2 * CANDIDATES_HEAPED)
	{
		heapify(c->items, n);
		return;
	}
	select_kth(c->items, n, CANDIDATES_HEAPED);
	c->pivot = c->items[CANDIDATES_HEAPED];
	c->reserve_start = CANDIDATES_HEAPED;
	c->reserve_size = n - CANDIDATES_HEAPED;
	c->heap_size = CANDIDATES_HEAPED;
	heapify(c->items, c->heap_size);
}

/*
 * The least candidate, or NULL when none is left.  Once the heap's top is
 * no longer before the reserve's least, the reserve joins the heap.
 */
CvIvfCandidate *
cvivf_candidates_top(CvIvfCandidates *c)
{
	if (c->reserve_size > 0 &&
		(c->heap_size == 0 || !candidate_less(&c->items[0], &c->pivot)))
	{
		merge_reserve(c);
		heapify(c->items, c->heap_size);
	}
	return c->heap_size > 0 ? &c->items[0] : NULL;
}

/* The top's distance grew (its bound became exact): restore the order. */
void
cvivf_candidates_top_changed(CvIvfCandidates *c)
{
	sift_down(c->items, c->heap_size, 0);
}

void
cvivf_candidates_pop(CvIvfCandidates *c)
{
	c->items[0] = c->items[--c->heap_size];
	sift_down(c->items, c->heap_size, 0);
}
