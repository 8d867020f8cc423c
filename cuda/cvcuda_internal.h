/*
 * cvcuda_internal.h: what both implementations of clustervec_cuda.h share,
 * so that they cannot drift apart: the error record helpers, the argument
 * checks (same statuses, same messages) and the sort key of a distance.
 *
 * Plain C99 that also compiles as CUDA C++ (the key functions are then
 * __host__ __device__).  Internal: include from cuda/ only.
 */
#ifndef CVCUDA_INTERNAL_H
#define CVCUDA_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clustervec_cuda.h"

#ifdef __CUDACC__
#define CVCUDA_HD __host__ __device__ __forceinline__
#else
#define CVCUDA_HD static inline
#endif

/*
 * A buffer of either library: data is device memory in clustervec_cuda.so
 * and host memory in the CPU shim.
 */
struct CvCudaBuffer
{
	void	   *data;
	size_t		bytes;
	unsigned long long version; /* CUDA: new at every cvcuda_buffer_write (and
								 * alloc), never reused, so a host copy of the
								 * contents can be kept for a version */
};

/* The key of an empty result slot: after every real distance, NaN included. */
#define CVCUDA_KEY_NONE UINT64_MAX

/* The quiet NaN every NaN distance is reported as. */
#define CVCUDA_KEY_NAN UINT64_C(0x7ff8000000000000)

/*
 * The sort key of a distance: its bit pattern, which orders non-negative
 * doubles as numbers (and +inf after them), with every NaN made the one quiet
 * NaN (above +inf) and -0 made +0.  Distances are sqrt of sums of squares, so
 * nothing else occurs.  Sorting keys as unsigned integers is then a total
 * order that both libraries and their tests share.
 */
CVCUDA_HD uint64_t
cvcuda_distance_key(double distance)
{
	uint64_t	bits;

	if (distance != distance)
		return CVCUDA_KEY_NAN;
	if (distance == 0.0)
		return 0;
	memcpy(&bits, &distance, sizeof(bits));
	return bits;
}

/* The distance of a key; CVCUDA_KEY_NONE (an empty slot) gives +inf. */
CVCUDA_HD double
cvcuda_key_distance(uint64_t key)
{
	double		distance;

	if (key == CVCUDA_KEY_NONE)
		key = UINT64_C(0x7ff0000000000000);
	memcpy(&distance, &key, sizeof(distance));
	return distance;
}

/* Fills the error record (when there is one) and returns the status. */
static inline CvCudaStatus
cvcuda_set_error(CvCudaError *err, CvCudaStatus status, int cuda_code,
				 const char *format,...)
#ifdef __GNUC__
			__attribute__((format(printf, 4, 5)))
#endif
			;

static inline CvCudaStatus
cvcuda_set_error(CvCudaError *err, CvCudaStatus status, int cuda_code,
				 const char *format,...)
{
	va_list		args;

	if (err == NULL)
		return status;
	err->status = (int) status;
	err->cuda_code = cuda_code;
	va_start(args, format);
	vsnprintf(err->message, sizeof(err->message), format, args);
	va_end(args);
	return status;
}

/* The stop check of cvcuda_set_stop_check (defined by each library). */
extern CvCudaStopCheck cvcuda_stop_check;
extern void *cvcuda_stop_arg;

/* Whether the caller asked the running operation to stop. */
static inline int
cvcuda_stopping(void)
{
	return cvcuda_stop_check != NULL && cvcuda_stop_check(cvcuda_stop_arg);
}

/* An operation that stopped for the stop check. */
static inline CvCudaStatus
cvcuda_stopped(CvCudaError *err, const char *what)
{
	return cvcuda_set_error(err, CVCUDA_STOPPED, 0, "%s: stopped at the caller's request", what);
}

/* Clears the error record: the call succeeded. */
static inline CvCudaStatus
cvcuda_set_ok(CvCudaError *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
	return CVCUDA_OK;
}

/* Checks that [offset, offset + bytes) lies inside the buffer and host is given. */
static inline CvCudaStatus
cvcuda_check_buffer_range(const CvCudaBuffer *buffer, size_t offset, size_t bytes,
						  const void *host, const char *what, CvCudaError *err)
{
	if (buffer == NULL || (bytes > 0 && host == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: buffer and host pointer must not be NULL", what);
	if (offset > buffer->bytes || bytes > buffer->bytes - offset)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: %zu bytes at offset %zu exceed the buffer's %zu bytes",
								what, bytes, offset, buffer->bytes);
	return CVCUDA_OK;
}

/* Checks cvcuda_knn_exact's arguments; CVCUDA_OK when they are well formed. */
static inline CvCudaStatus
cvcuda_check_knn_args(const float *base, long long rows, int dims,
					  const float *queries, int nq, int k,
					  const long long *out_index, const double *out_distance,
					  CvCudaError *err)
{
	if (rows < 0 || nq < 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: rows (%lld) and nq (%d) must not be negative",
								rows, nq);
	if (dims < 1 || dims > CVCUDA_KNN_MAX_DIMS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: dims (%d) must be between 1 and %d",
								dims, CVCUDA_KNN_MAX_DIMS);
	if (k < 1 || k > CVCUDA_KNN_MAX_K)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: k (%d) must be between 1 and %d",
								k, CVCUDA_KNN_MAX_K);
	if ((unsigned long long) rows > (unsigned long long) (SIZE_MAX / sizeof(float)) / (unsigned) dims)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: %lld rows of %d dimensions overflow the address space",
								rows, dims);
	if (rows > 0 && base == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: base must not be NULL");
	if (nq > 0 && (queries == NULL || out_index == NULL || out_distance == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"knn_exact: queries, out_index and out_distance must not be NULL");
	return CVCUDA_OK;
}

/* Fills every result slot of nq queries with the empty result (-1, +inf). */
static inline void
cvcuda_fill_empty(int nq, int k, long long *out_index, double *out_distance)
{
	for (long long i = 0; i < (long long) nq * k; i++)
	{
		out_index[i] = -1;
		out_distance[i] = cvcuda_key_distance(CVCUDA_KEY_NONE);
	}
}

/* Checks cvcuda_echo's arguments. */
static inline CvCudaStatus
cvcuda_check_echo_args(const void *buffer, size_t bytes, CvCudaError *err)
{
	if (bytes > 0 && buffer == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"echo: buffer must not be NULL when bytes > 0");
	return CVCUDA_OK;
}

/* Checks cvcuda_host_register's (bytes > 0) and cvcuda_host_unregister's arguments. */
static inline CvCudaStatus
cvcuda_check_host_args(const void *ptr, size_t bytes, int registering, CvCudaError *err)
{
	if (ptr == NULL || (registering && bytes == 0))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"host_%s: %s", registering ? "register" : "unregister",
								registering ? "needs a pointer and bytes > 0" : "needs a pointer");
	return CVCUDA_OK;
}

/* Checks cvcuda_memory_info's arguments. */
static inline CvCudaStatus
cvcuda_check_memory_args(const unsigned long long *free_bytes,
						 const unsigned long long *total_bytes, CvCudaError *err)
{
	if (free_bytes == NULL || total_bytes == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"memory_info: free_bytes and total_bytes must not be NULL");
	return CVCUDA_OK;
}

/* Checks cvcuda_ping's arguments. */
static inline CvCudaStatus
cvcuda_check_ping_args(int n, const float *out, CvCudaError *err)
{
	if (n <= 0 || out == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ping needs n > 0 and an output buffer");
	return CVCUDA_OK;
}

/* ---------------------------------------------------------------------
 * Cluster statistics: the argument checks of cvcuda_health_* (both
 * libraries), so both answer the same status and message.
 * --------------------------------------------------------------------- */

/* Checks the parameters against STATISTICS.md's valid ranges. */
static inline CvCudaStatus
cvcuda_check_health_params(const CvHealthParams *p, const char *what, CvCudaError *err)
{
	if (p == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "%s: params must not be NULL",
								what);
	if (!(p->outlier_z >= 0) || !(p->dup_cos > 0 && p->dup_cos <= 1) || p->neighbours < 1 ||
		p->sigma_bins < 2 || p->entropy_bins < 2 || p->rank_max_members < 2)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: parameters out of range (outlier_z >= 0, 0 < dup_cos <= 1, "
								"neighbours >= 1, sigma_bins >= 2, entropy_bins >= 2, "
								"rank_max_members >= 2)", what);
	return CVCUDA_OK;
}

/* Checks that buffer holds at least count elements of size bytes each. */
static inline CvCudaStatus
cvcuda_check_health_buffer(const CvCudaBuffer *buffer, long long count, size_t size,
						   const char *what, const char *name, CvCudaError *err)
{
	if (buffer == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "%s: %s must not be NULL",
								what, name);
	if (count < 0 || (unsigned long long) count > buffer->bytes / size)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: %s holds %zu bytes, %lld elements of %zu bytes do not fit",
								what, name, buffer->bytes, count, size);
	return CVCUDA_OK;
}

/*
 * Checks a chunk's shape before its offsets are read: d in range,
 * nclusters >= 0, offsets and stats large enough.
 */
static inline CvCudaStatus
cvcuda_check_health_chunk(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
						  long long nclusters, int d, const CvCudaBuffer *stats,
						  const char *what, CvCudaError *err)
{
	CvCudaStatus status;

	if (d < 1 || d > CVCUDA_HEALTH_MAX_DIMS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: d (%d) must be between 1 and %d", what, d,
								CVCUDA_HEALTH_MAX_DIMS);
	if (nclusters < 0 || nclusters > (long long) (SIZE_MAX / sizeof(CvClusterStats)) - 1)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: nclusters (%lld) out of range", what, nclusters);
	if (members == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "%s: members must not be NULL",
								what);
	status = cvcuda_check_health_buffer(offsets, nclusters + 1, sizeof(long long), what,
										"offsets", err);
	if (status != CVCUDA_OK)
		return status;
	return cvcuda_check_health_buffer(stats, nclusters, sizeof(CvClusterStats), what,
									  "stats", err);
}

/*
 * Checks the offsets' values (a host copy): offsets[0] = 0, non-decreasing,
 * and members holding offsets[nclusters] rows of d float4.
 */
static inline CvCudaStatus
cvcuda_check_health_offsets(const long long *offsets, long long nclusters, int d,
							const CvCudaBuffer *members, const char *what, CvCudaError *err)
{
	long long	total;

	if (offsets[0] != 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: offsets[0] is %lld, not 0", what, offsets[0]);
	for (long long c = 0; c < nclusters; c++)
		if (offsets[c + 1] < offsets[c])
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"%s: offsets decrease at cluster %lld (%lld after %lld)",
									what, c, offsets[c + 1], offsets[c]);
	total = offsets[nclusters];
	if ((unsigned long long) total > (unsigned long long) (SIZE_MAX / sizeof(float)) / (unsigned) d ||
		(size_t) total * (size_t) d > members->bytes / sizeof(float))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: members holds %zu bytes, %lld rows of %d float4 do not fit",
								what, members->bytes, total, d);
	return CVCUDA_OK;
}

/*
 * Checks a centroid set: k >= 0, d in range, m = 0 when k < 2 and
 * 1 <= m <= k - 1 otherwise (min(neighbours, k - 1)), buffer sizes; the
 * table buffers only when m > 0.  neighbours (> 0) also requires
 * m = min(neighbours, k - 1), for cvcuda_health_members.
 */
static inline CvCudaStatus
cvcuda_check_health_set(const CvCudaCentroidSet *set, int neighbours, const char *what,
						CvCudaError *err)
{
	CvCudaStatus status;

	if (set == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "%s: set must not be NULL",
								what);
	if (set->d < 1 || set->d > CVCUDA_HEALTH_MAX_DIMS || set->k < 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: set has k %lld and d %d (need k >= 0, 1 <= d <= %d)",
								what, set->k, set->d, CVCUDA_HEALTH_MAX_DIMS);
	if (set->m < 0 || (set->k < 2 && set->m != 0) || (set->k >= 2 && (set->m < 1 || set->m > set->k - 1)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: set's m (%d) must be min(neighbours, k - 1) with k %lld",
								what, set->m, set->k);
	if (neighbours > 0 && set->m != (set->k - 1 < neighbours ? (int) (set->k > 0 ? set->k - 1 : 0) : neighbours))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: set's m (%d) is not min(neighbours %d, k - 1) with k %lld",
								what, set->m, neighbours, set->k);
	if ((unsigned long long) set->k > (unsigned long long) (SIZE_MAX / sizeof(double)) / (unsigned) set->d)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: set's k (%lld) out of range", what, set->k);
	status = cvcuda_check_health_buffer(set->centroids, set->k * set->d, sizeof(double), what,
										"set centroids", err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_buffer(set->mean_dist, set->k, sizeof(double), what,
											"set mean_dist", err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_buffer(set->mean_norm, set->k, sizeof(double), what,
											"set mean_norm", err);
	if (status != CVCUDA_OK || set->m == 0)
		return status;
	status = cvcuda_check_health_buffer(set->nearest, set->k * set->m, sizeof(long long), what,
										"set nearest", err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_buffer(set->nearest_dist, set->k * set->m, sizeof(double),
											what, "set nearest_dist", err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_buffer(set->db_ratio, set->k, sizeof(double), what,
											"set db_ratio", err);
	return status;
}

/* Checks that a chunk's clusters lie inside the set and share its d. */
static inline CvCudaStatus
cvcuda_check_health_range(const CvCudaCentroidSet *set, long long nclusters,
						  long long first_cluster, int d, const char *what, CvCudaError *err)
{
	if (set->d != d)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: the set's d (%d) differs from the chunk's (%d)",
								what, set->d, d);
	if (first_cluster < 0 || first_cluster > set->k || nclusters > set->k - first_cluster)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: clusters %lld + %lld exceed the set's k (%lld)",
								what, first_cluster, nclusters, set->k);
	return CVCUDA_OK;
}

/* Marks every column of a record NULL (value 0), collapsed and rank_refused false. */
static inline void
cvcuda_health_clear_record(CvClusterStats *stats)
{
	memset(stats, 0, sizeof(*stats));
	for (int c = 0; c < CV_STAT_COUNT; c++)
		stats->is_null[c] = true;
}

/* ---------------------------------------------------------------------
 * IVF search over a mirror: the argument checks of cvcuda_ivf_search and
 * the total order of its distances (both libraries).
 * --------------------------------------------------------------------- */

/*
 * The sort key of any double (negative distances included, as the inner
 * product's): its bits made to order as unsigned integers the way the
 * numbers order, every NaN made the one quiet NaN (after +inf).  A
 * bijection on everything but NaN, so the distance comes back bit for bit
 * (cvcuda_order_distance).  -0 orders just before +0; a metric's distances
 * never hold both (L2 and cosine give +0 only, the negated inner product
 * -0 only), so that never reorders a tie.  The largest key a real value
 * gets is the quiet NaN's, below CVCUDA_KEY_NONE (an empty slot).
 */
CVCUDA_HD uint64_t
cvcuda_order_key(double value)
{
	uint64_t	bits;

	if (value != value)
		bits = CVCUDA_KEY_NAN;
	else
		memcpy(&bits, &value, sizeof(bits));
	return (bits >> 63) ? ~bits : bits | UINT64_C(0x8000000000000000);
}

/* The value of an order key; CVCUDA_KEY_NONE (an empty slot) gives +inf. */
CVCUDA_HD double
cvcuda_order_distance(uint64_t key)
{
	uint64_t	bits;
	double		value;

	if (key == CVCUDA_KEY_NONE)
		bits = UINT64_C(0x7ff0000000000000);
	else
		bits = (key >> 63) ? key & ~UINT64_C(0x8000000000000000) : ~key;
	memcpy(&value, &bits, sizeof(value));
	return value;
}

/*
 * Checks cvcuda_ivf_search's arguments that need no buffer contents:
 * lists >= 1, 1 <= d <= CVCUDA_KNN_MAX_DIMS, 1 <= k <= CVCUDA_SEARCH_MAX_K,
 * probes >= 1, nq >= 0, a known metric, buffers of the right sizes
 * (centroids exactly lists x d float4, list_offsets exactly lists + 1
 * int64; vectors are checked against the offsets' values by
 * cvcuda_check_ivf_offsets), and the host pointers when nq > 0.
 */
static inline CvCudaStatus
cvcuda_check_ivf_search_args(const CvCudaBuffer *centroids, int lists, int d,
							 const CvCudaBuffer *vectors, const CvCudaBuffer *list_offsets,
							 int metric, const float *queries, int nq, int k, int probes,
							 const long long *out_position, const double *out_distance,
							 CvCudaError *err)
{
	if (lists < 1)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: lists (%d) must be at least 1", lists);
	if (d < 1 || d > CVCUDA_KNN_MAX_DIMS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: d (%d) must be between 1 and %d",
								d, CVCUDA_KNN_MAX_DIMS);
	if (k < 1 || k > CVCUDA_SEARCH_MAX_K)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: k (%d) must be between 1 and %d",
								k, CVCUDA_SEARCH_MAX_K);
	if (probes < 1)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: probes (%d) must be at least 1", probes);
	if (nq < 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: nq (%d) must not be negative", nq);
	if (metric != CV_METRIC_L2 && metric != CV_METRIC_INNER_PRODUCT &&
		metric != CV_METRIC_COSINE)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: unknown metric %d", metric);
	if (centroids == NULL || vectors == NULL || list_offsets == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: centroids, vectors and list_offsets must not be NULL");
	if ((unsigned long long) lists > SIZE_MAX / sizeof(float) / (unsigned) d ||
		centroids->bytes != (size_t) lists * (size_t) d * sizeof(float))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: centroids hold %zu bytes, not %d lists x %d float4",
								centroids->bytes, lists, d);
	if (list_offsets->bytes != ((size_t) lists + 1) * sizeof(long long))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: list_offsets hold %zu bytes, not %d + 1 int64",
								list_offsets->bytes, lists);
	if (nq > 0 && (queries == NULL || out_position == NULL || out_distance == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: queries, out_position and out_distance must not be NULL");
	return CVCUDA_OK;
}

/* Given probe lists: each query's row strictly ascending, within the lists. */
static inline CvCudaStatus
cvcuda_check_given_probes(const int *given, int nq, int probes, int lists, CvCudaError *err)
{
	if (probes > lists)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: %d given probes of %d lists", probes, lists);
	for (int q = 0; q < nq; q++)
		for (int p = 0; p < probes; p++)
		{
			int			l = given[(size_t) q * probes + p];

			if (l < 0 || l >= lists || (p > 0 && l <= given[(size_t) q * probes + p - 1]))
				return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
										"ivf_search: given list %d of query %d is out of range or out of order",
										l, q);
		}
	return CVCUDA_OK;
}

/* Every query probed every list: out[q * lists + l] = l. */
static inline void
cvcuda_probe_all(int *out, int nq, int lists)
{
	for (int q = 0; q < nq; q++)
		for (int l = 0; l < lists; l++)
			out[(size_t) q * lists + l] = l;
}

/*
 * Checks list_offsets' values (a host copy of lists + 1 int64): offsets[0]
 * = 0, non-decreasing, and offsets[lists] rows within vectors (NULL: not
 * checked).
 */
static inline CvCudaStatus
cvcuda_check_ivf_offsets(const long long *offsets, int lists, int d,
						 const CvCudaBuffer *vectors, CvCudaError *err)
{
	if (offsets[0] != 0)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: list_offsets[0] is %lld, not 0", offsets[0]);
	for (int l = 0; l < lists; l++)
		if (offsets[l + 1] < offsets[l])
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"ivf_search: list_offsets decrease at list %d", l);
	if (vectors != NULL &&
		(unsigned long long) offsets[lists] > vectors->bytes / ((size_t) d * sizeof(float)))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"ivf_search: list_offsets end at row %lld, past the %zu rows of vectors",
								offsets[lists], vectors->bytes / ((size_t) d * sizeof(float)));
	return CVCUDA_OK;
}

/*
 * Checks cvcuda_list_observe's and cvcuda_observed_reduce's arguments that
 * need no buffer contents (means NULL: the reduce, which has none).
 */
static inline CvCudaStatus
cvcuda_check_observe_args(const char *what, const CvCudaBuffer *means, int lists, int d,
						  const CvCudaBuffer *list_offsets, int metric,
						  const CvCudaBuffer *member_stats, CvCudaError *err)
{
	if (lists < 1)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: lists (%d) must be at least 1", what, lists);
	if (list_offsets == NULL || member_stats == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: list_offsets and member_stats must not be NULL", what);
	if (list_offsets->bytes != ((size_t) lists + 1) * sizeof(long long))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: list_offsets hold %zu bytes, not %d + 1 int64",
								what, list_offsets->bytes, lists);
	if (means == NULL)
		return CVCUDA_OK;
	if (d < 1 || d > CVCUDA_KNN_MAX_DIMS)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: d (%d) must be between 1 and %d", what, d,
								CVCUDA_KNN_MAX_DIMS);
	if (metric != CV_METRIC_L2 && metric != CV_METRIC_INNER_PRODUCT &&
		metric != CV_METRIC_COSINE)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: unknown metric %d", what, metric);
	if ((unsigned long long) lists > SIZE_MAX / sizeof(float) / (unsigned) d ||
		means->bytes != (size_t) lists * (size_t) d * sizeof(float))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: means hold %zu bytes, not %d lists x %d float4",
								what, means->bytes, lists, d);
	return CVCUDA_OK;
}

/*
 * Checks the observation's sizes against list_offsets' values (a host copy,
 * already checked by cvcuda_check_ivf_offsets): member_stats holds exactly
 * the rows' values, and every list named in observe exists.
 */
static inline CvCudaStatus
cvcuda_check_observe_rows(const char *what, const long long *offsets, int lists,
						  const int *observe, int count, const CvCudaBuffer *member_stats,
						  CvCudaError *err)
{
	if (member_stats->bytes != (size_t) offsets[lists] * CVCUDA_OBSERVE_VALUES * sizeof(double))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: member_stats hold %zu bytes, not %lld rows x %d float8",
								what, member_stats->bytes, offsets[lists], CVCUDA_OBSERVE_VALUES);
	if (count < 0 || (count > 0 && observe == NULL))
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: %d lists to observe, from %s", what, count,
								observe == NULL ? "NULL" : "an array");
	for (int i = 0; i < count; i++)
		if (observe[i] < 0 || observe[i] >= lists)
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"%s: list %d is not one of the %d lists", what, observe[i],
									lists);
	return CVCUDA_OK;
}

#endif
