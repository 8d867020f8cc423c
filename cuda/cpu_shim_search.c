/*
 * cpu_shim_search.c: cvcuda_ivf_search on the CPU with src/math, the
 * reference the CUDA library's answers must equal bit for bit.
 *
 * For each query the lists are ranked as the index scan ranks them
 * (src/ivf/metric.c: squared L2 for L2, the negated inner product for
 * inner product and cosine; NaN as +inf; ties to the lower list), the first
 * probes are scanned with the operator's exact distance (sqrt of
 * l2_squared, the negated inner_product, or the cosine distance from its
 * parts), and the k best rows are kept by (distance, position).  Which of
 * the probed lists is read first does not matter: the answer depends only
 * on the set of probed lists.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_shim.h"
#include "distance.h"

/* A ranked list. */
typedef struct RankedList
{
	double		distance;
	int			list;
} RankedList;

/* A candidate row: its distance's order key and its position. */
typedef struct SearchCandidate
{
	uint64_t	key;
	long long	position;
} SearchCandidate;

static int
compare_ranked(const void *a, const void *b)
{
	const RankedList *x = a;
	const RankedList *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return x->list - y->list;
}

/* True when a comes after b in the result order (key, then position). */
static int
candidate_after(const SearchCandidate *a, const SearchCandidate *b)
{
	if (a->key != b->key)
		return a->key > b->key;
	return a->position > b->position;
}

static void
candidate_swap(SearchCandidate *a, SearchCandidate *b)
{
	SearchCandidate t = *a;

	*a = *b;
	*b = t;
}

/* Restores the max-heap below position i. */
static void
candidate_sift_down(SearchCandidate *heap, int size, int i)
{
	for (;;)
	{
		int			largest = i;
		int			left = 2 * i + 1;
		int			right = left + 1;

		if (left < size && candidate_after(&heap[left], &heap[largest]))
			largest = left;
		if (right < size && candidate_after(&heap[right], &heap[largest]))
			largest = right;
		if (largest == i)
			return;
		candidate_swap(&heap[i], &heap[largest]);
		i = largest;
	}
}

/* Offers a candidate to a max-heap of the k best so far (worst on top). */
static void
candidate_offer(SearchCandidate *heap, int *size, int k, SearchCandidate c)
{
	int			i;

	if (*size == k)
	{
		if (candidate_after(&heap[0], &c))
		{
			heap[0] = c;
			candidate_sift_down(heap, k, 0);
		}
		return;
	}
	i = (*size)++;
	heap[i] = c;
	while (i > 0 && candidate_after(&heap[i], &heap[(i - 1) / 2]))
	{
		candidate_swap(&heap[i], &heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

/* The operator's exact distance (src/ivf/metric.c's cvivf_distance). */
static double
row_distance(const CvDistanceKernels *kernels, int metric, const float *query,
			 const float *row, int d)
{
	if (metric == CV_METRIC_L2)
		return sqrt(kernels->l2_squared(query, row, d));
	if (metric == CV_METRIC_INNER_PRODUCT)
		return -kernels->inner_product(query, row, d);
	return cv_cosine_distance_from_parts(kernels->cosine_parts(query, row, d));
}

/*
 * Tests make batched launches fail: CLUSTERVEC_CPU_FAIL_SEARCH_ABOVE=n in
 * the worker's environment fails every search of more than n queries.
 */
static bool
injected_fault(int nq)
{
	const char *above = getenv("CLUSTERVEC_CPU_FAIL_SEARCH_ABOVE");

	return above != NULL && *above != '\0' && nq > atoi(above);
}

static int
compare_int(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	return (x > y) - (x < y);
}

/* The probed set in list order, as the CUDA library writes it. */
static void
write_probed(const RankedList *ranked, int probes, int *out)
{
	for (int p = 0; p < probes; p++)
		out[p] = ranked[p].list;
	qsort(out, probes, sizeof(int), compare_int);
}

/* One query: rank, scan the first probes lists, write k results. */
static void
search_one(const CvDistanceKernels *kernels, const float *centroids, int lists, int d,
		   const float *vectors, const long long *offsets, int metric, const float *query,
		   int k, int probes, const int *given, RankedList *ranked, SearchCandidate *heap,
		   long long *out_position, double *out_distance, int *out_probed)
{
	int			size = 0;

	for (int l = 0; l < lists && given == NULL; l++)
	{
		const float *c = centroids + (size_t) l * d;
		double		v = metric == CV_METRIC_L2 ? kernels->l2_squared(query, c, d) :
			-kernels->inner_product(query, c, d);

		ranked[l].distance = isnan(v) ? INFINITY : v;
		ranked[l].list = l;
	}
	if (given != NULL)
		for (int p = 0; p < probes; p++)
			ranked[p].list = given[p];
	else if (probes < lists)
		qsort(ranked, lists, sizeof(RankedList), compare_ranked);
	if (out_probed != NULL)
		write_probed(ranked, probes, out_probed);
	for (int p = 0; p < probes; p++)
	{
		int			l = ranked[p].list;

		for (long long r = offsets[l]; r < offsets[l + 1]; r++)
		{
			SearchCandidate c;

			c.key = cvcuda_order_key(row_distance(kernels, metric, query,
												  vectors + (size_t) r * d, d));
			c.position = r;
			candidate_offer(heap, &size, k, c);
		}
	}
	for (int end = size - 1; end > 0; end--)
	{
		candidate_swap(&heap[0], &heap[end]);
		candidate_sift_down(heap, end, 0);
	}
	for (int i = 0; i < k; i++)
	{
		out_position[i] = i < size ? heap[i].position : -1;
		out_distance[i] = cvcuda_order_distance(i < size ? heap[i].key : CVCUDA_KEY_NONE);
	}
}

CVCUDA_API CvCudaStatus
cvcuda_ivf_search(const CvCudaBuffer *centroids, int lists, int d, const CvCudaBuffer *vectors,
				  const CvCudaBuffer *list_offsets, int metric, const float *queries, int nq,
				  int k, int probes, const int *given, long long *out_position,
				  double *out_distance, int *out_probed, CvCudaError *err)
{
	const CvDistanceKernels *kernels = cv_distance_kernels_for(cv_simd_best());
	const long long *offsets;
	RankedList *ranked;
	SearchCandidate *heap;
	CvCudaStatus status;

	status = cvcuda_check_ivf_search_args(centroids, lists, d, vectors, list_offsets, metric,
										  queries, nq, k, probes, out_position, out_distance,
										  err);
	if (status != CVCUDA_OK)
		return status;
	if (injected_fault(nq))
		return cvcuda_set_error(err, CVCUDA_INTERNAL, 0,
								"ivf_search: injected fault (%d queries)", nq);
	offsets = (const long long *) list_offsets->data;
	status = cvcuda_check_ivf_offsets(offsets, lists, d, vectors, err);
	if (status != CVCUDA_OK)
		return status;
	if (given != NULL &&
		(status = cvcuda_check_given_probes(given, nq, probes, lists, err)) != CVCUDA_OK)
		return status;
	if (probes > lists)
		probes = lists;
	ranked = malloc(sizeof(RankedList) * (size_t) lists);
	heap = malloc(sizeof(SearchCandidate) * (size_t) k);
	if (ranked == NULL || heap == NULL)
	{
		free(ranked);
		free(heap);
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "ivf_search: out of host memory");
	}
	for (int q = 0; q < nq && !cvcuda_stopping(); q++)
		search_one(kernels, (const float *) centroids->data, lists, d,
				   (const float *) vectors->data, offsets, metric, queries + (size_t) q * d,
				   k, probes, given == NULL ? NULL : given + (size_t) q * probes, ranked, heap,
				   out_position + (size_t) q * k,
				   out_distance + (size_t) q * k,
				   out_probed == NULL ? NULL : out_probed + (size_t) q * probes);
	free(ranked);
	free(heap);
	return cvcuda_stopping() ? cvcuda_stopped(err, "ivf_search") : cvcuda_set_ok(err);
}
