/*
 * clustervec_cuda.h: the C boundary of the clustervec GPU library.
 *
 * Two libraries implement it: clustervec_cuda.so (CUDA, built where nvcc
 * exists) and clustervec_cuda_cpu.so (the same operations on the CPU with
 * src/math, built everywhere; a stand-in device for tests and for machines
 * without a GPU).  Only the GPU worker opens either (dlopen), so backends
 * never create a CUDA context.
 *
 * Every entry point returns a status and fills the error record (err may be
 * NULL); none aborts, throws or keeps a pointer it was handed.  No
 * PostgreSQL types cross it.  The library keeps one current device and one
 * stream per process and is not thread-safe: one thread (the worker) calls
 * it.
 */
#ifndef CLUSTERVEC_CUDA_H
#define CLUSTERVEC_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* CvClusterStats and CvHealthParams: plain C, shared with the CPU reference. */
#include "math/health.h"
/* CvMetric: the one name of a distance, shared with the access methods. */
#include "clustervec_metric.h"

#define CVCUDA_ABI_VERSION 5
#define CVCUDA_ERROR_LEN 256

/* Largest k cvcuda_knn_exact accepts. */
#define CVCUDA_KNN_MAX_K 1024

/* Largest number of dimensions cvcuda_knn_exact accepts. */
#define CVCUDA_KNN_MAX_DIMS (1 << 20)

typedef enum CvCudaStatus
{
	CVCUDA_OK = 0,
	CVCUDA_NO_DEVICE = 1,		/* no driver or no device: stay on the CPU */
	CVCUDA_INVALID_ARGUMENT = 2,	/* the request was wrong, the device is fine */
	CVCUDA_OUT_OF_MEMORY = 3,
	CVCUDA_STICKY_ERROR = 4,	/* the context is lost: the worker must exit */
	CVCUDA_INTERNAL = 5,
	CVCUDA_STOPPED = 6			/* the stop check asked the operation to stop */
} CvCudaStatus;

typedef struct CvCudaError
{
	int			status;			/* CvCudaStatus */
	int			cuda_code;		/* cudaError_t, 0 when none */
	char		message[CVCUDA_ERROR_LEN];
} CvCudaError;

/*
 * A long operation calls the stop check between its bounded steps (the
 * CUDA library: between the kernel launches of one chunk, batches of
 * queries, Lloyd iterations; the CPU library: between clusters, queries)
 * and returns CVCUDA_STOPPED at once when it answers nonzero, leaving its
 * outputs unspecified.  The worker points it at "the request's owner gave
 * up, or the worker must exit", so a cancelled request stops in the worker
 * too.  NULL (the default): never stop.
 */
typedef int (*CvCudaStopCheck) (void *arg);
void		cvcuda_set_stop_check(CvCudaStopCheck check, void *arg);

typedef struct CvCudaDeviceInfo
{
	int			device_count;
	int			compute_major;	/* 0.0 for the CPU shim */
	int			compute_minor;
	int			multiprocessors;	/* the CPU shim: online CPUs */
	unsigned long long total_memory;
	char		name[256];		/* the CPU shim: "CPU shim" */
} CvCudaDeviceInfo;

/* The ABI version the library was built with; the worker refuses a mismatch. */
int			cvcuda_abi_version(void);

/* "cuda" or "cpu-shim": which implementation this library is. */
const char *cvcuda_backend_name(void);

/* Describes a device without leaving a context behind an error. */
CvCudaStatus cvcuda_device_info(int device, CvCudaDeviceInfo *info, CvCudaError *err);

/*
 * Selects the device and creates its context and the library's stream; fills
 * info when it is not NULL.  CVCUDA_NO_DEVICE when there is no driver or no
 * such device.  Call it first, and again only to change device (which
 * releases what the library held on the old one).  Without it the other
 * entry points use device 0.
 */
CvCudaStatus cvcuda_init(int device, CvCudaDeviceInfo *info, CvCudaError *err);

/* Free and total memory of the current device, in bytes. */
CvCudaStatus cvcuda_memory_info(unsigned long long *free_bytes,
								unsigned long long *total_bytes, CvCudaError *err);

/*
 * Page-locks host memory for fast copies (cudaHostRegister), once for the
 * staging area; undo with cvcuda_host_unregister.  The CPU shim checks the
 * arguments and does nothing else.
 */
CvCudaStatus cvcuda_host_register(void *ptr, size_t bytes, CvCudaError *err);
CvCudaStatus cvcuda_host_unregister(void *ptr, CvCudaError *err);

/*
 * Copies bytes from buffer to the device and back into buffer (the CPU shim:
 * memmove onto itself), then waits: the round trip of latency benchmarks.
 * bytes may be 0 (buffer may then be NULL): a bare synchronisation.  The
 * device buffer is kept between calls, so repeated echoes measure copies,
 * not allocation.
 */
CvCudaStatus cvcuda_echo(void *buffer, size_t bytes, CvCudaError *err);

/*
 * Exact k nearest neighbours in L2 distance.  base: rows x dims float4,
 * row-major; queries: nq x dims.  For each query q, writes the k nearest
 * rows to out_index[q * k + r] and their Euclidean distance to
 * out_distance[q * k + r], r = 0..k-1, ascending by distance, equal
 * distances by ascending row index; when rows < k the tail gets index -1
 * and distance +inf.
 *
 * The distance is bit for bit sqrt() of src/math's l2_squared (16 float64
 * lanes, element j in lane j % 16, each term (double) a - (double) b
 * squared and added as separate roundings, the fixed fold), so both
 * libraries and the CPU scan agree exactly.  Non-finite inputs give +inf or
 * NaN distances; NaN sorts after +inf and is reported as the quiet NaN
 * 0x7ff8000000000000.
 *
 * Needs rows >= 0, 1 <= dims <= CVCUDA_KNN_MAX_DIMS, nq >= 0,
 * 1 <= k <= CVCUDA_KNN_MAX_K, and non-NULL pointers (base may be NULL when
 * rows = 0; queries and the outputs when nq = 0).  After a failure the
 * outputs' contents are unspecified.  Host pointers need their types'
 * alignment and may lie in memory registered by cvcuda_host_register.
 */
CvCudaStatus cvcuda_knn_exact(const float *base, long long rows, int dims,
							  const float *queries, int nq, int k,
							  long long *out_index, double *out_distance,
							  CvCudaError *err);

/*
 * Writes out[i] = i * scale for i < n: on the device a trivial kernel whose
 * result is copied back, proving the library, the driver and the device work
 * end to end; the CPU shim computes it on the CPU.
 */
CvCudaStatus cvcuda_ping(int device, int n, float scale, float *out, CvCudaError *err);


/* ---------------------------------------------------------------------
 * Device buffers (ABI 3)
 *
 * Memory the library owns on the device (the CPU shim: host memory), held
 * by the caller between calls through an opaque handle: the worker uploads
 * a request's data into buffers chunk by chunk (the staging pool is
 * smaller than the data), runs operations over them and reads results
 * back.  Offsets and sizes are in bytes.
 * --------------------------------------------------------------------- */
typedef struct CvCudaBuffer CvCudaBuffer;

/* Allocates bytes (> 0) of device memory; CVCUDA_OUT_OF_MEMORY when it does not fit. */
CvCudaStatus cvcuda_buffer_alloc(size_t bytes, CvCudaBuffer **buffer, CvCudaError *err);

/* Frees a buffer; NULL is allowed. */
void		cvcuda_buffer_free(CvCudaBuffer *buffer);

/* The buffer's size in bytes. */
size_t		cvcuda_buffer_size(const CvCudaBuffer *buffer);

/* Copies bytes from host memory into the buffer at offset, and waits. */
CvCudaStatus cvcuda_buffer_write(CvCudaBuffer *buffer, size_t offset, const void *src,
								 size_t bytes, CvCudaError *err);

/* Copies bytes of the buffer at offset into host memory, and waits. */
CvCudaStatus cvcuda_buffer_read(const CvCudaBuffer *buffer, size_t offset, void *dst,
								size_t bytes, CvCudaError *err);

/* ---------------------------------------------------------------------
 * Cluster statistics (ABI 3): STATISTICS.md on the device, every cluster
 * of a chunk in one launch per family.
 *
 * A chunk is CSR: members holds total x d float4 rows, the clusters one
 * after another, each in member order; offsets holds nclusters + 1 int64
 * with offsets[0] = 0 and offsets[nclusters] = total.  stats holds
 * nclusters CvClusterStats (src/math/health.h), the same record the CPU
 * reference fills.  Results agree with src/math within STATISTICS.md's
 * GPU tolerances (exact FP32 products, float64 sums and moments).
 * --------------------------------------------------------------------- */

/* Largest d the statistics accept. */
#define CVCUDA_HEALTH_MAX_DIMS 16000

/*
 * Pass 1, section 1 without novelty and between_ss (which need g; the
 * caller computes them from the centroids): fills each cluster's section-1
 * columns and collapsed flag in stats, every other column NULL, and writes
 * its centroid to centroids (nclusters x d float64), computed so identical
 * members give their value bit for bit.
 */
CvCudaStatus cvcuda_health_centroid(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
									long long nclusters, int d, const CvHealthParams *params,
									CvCudaBuffer *centroids, CvCudaBuffer *stats,
									CvCudaError *err);

/*
 * Every centroid of the whole input, for the neighbour family: k rows of d
 * float64, and each cluster's mean_dist and mean_norm (k float64 each),
 * clusters numbered in label order.  nearest (k x m int64), nearest_dist
 * (k x m float64) and db_ratio (k float64) form the neighbour table of
 * cv_health_neighbour_prepare, m = min(neighbours, k - 1); the table
 * buffers may be NULL when m = 0.
 */
typedef struct CvCudaCentroidSet
{
	long long	k;
	int			d;
	int			m;
	const CvCudaBuffer *centroids;
	const CvCudaBuffer *mean_dist;
	const CvCudaBuffer *mean_norm;
	CvCudaBuffer *nearest;
	CvCudaBuffer *nearest_dist;
	CvCudaBuffer *db_ratio;
} CvCudaCentroidSet;

/*
 * Fills the neighbour table of set (nearest, nearest_dist, db_ratio) from
 * its centroids, mean_dist and mean_norm exactly as
 * cv_health_neighbour_prepare defines it (float64 distances computed from
 * differences; ties to the smaller index).
 */
CvCudaStatus cvcuda_health_neighbour_table(CvCudaCentroidSet *set, CvCudaError *err);

/*
 * Pass 2, sections 2 to 6 for the chunk's clusters, which are clusters
 * first_cluster .. first_cluster + nclusters - 1 of set: reads the pass-1
 * columns of stats (and the centroids from set) and fills the columns of
 * sections 2-6 (and rank_refused); section 1 columns are left as they are.
 */
CvCudaStatus cvcuda_health_members(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
								   long long nclusters, long long first_cluster,
								   const CvCudaCentroidSet *set, const CvHealthParams *params,
								   CvCudaBuffer *stats, CvCudaError *err);

/*
 * Milliseconds each family took on the device in the last
 * cvcuda_health_centroid and cvcuda_health_members calls, for benchmarks:
 * [0] centroid, [1] two-means, [2] pairwise, [3] neighbour (table and
 * members), [4] potential, [5] rank.  The CPU shim measures its loops.
 */
#define CVCUDA_HEALTH_FAMILIES 6
void		cvcuda_health_timings(double ms[CVCUDA_HEALTH_FAMILIES]);

/* ---------------------------------------------------------------------
 * k-means for index builds (ABI 3)
 * --------------------------------------------------------------------- */

/* Metrics, as src/math/kmeans.h's CvKmeansMetric. */
#define CVCUDA_KMEANS_L2 0
#define CVCUDA_KMEANS_SPHERICAL 1
#define CVCUDA_KMEANS_INNER_PRODUCT 2

/* Assignment modes. */
#define CVCUDA_ASSIGN_FP32 0	/* exact FP32 products and sums */
#define CVCUDA_ASSIGN_BF16 1	/* bf16 tensor-core products, best candidates re-checked in FP32 */

/*
 * k-means++ seeding's refresh: dist[i] = min(dist[i], l2_squared(point i,
 * centre j)) over the count centres (host, count x d float4), with
 * l2_squared bit for bit src/math's cv_distance->l2_squared (float64, the
 * fixed 16-lane tree), so seeds drawn from dist equal the CPU path's.
 * points: n x d float4; dist: n float64, in and out.
 */
CvCudaStatus cvcuda_kmeans_refresh(const CvCudaBuffer *points, long long n, int d,
								   const float *centres, int count, CvCudaBuffer *dist,
								   CvCudaError *err);

/*
 * Nearest centroid of every point, fused (the n x k matrix never exists):
 * assign[i] (int32) and score[i] (float4: squared L2 for L2, minus the
 * inner product otherwise), ties to the lower centroid.  centroids: k x d
 * float4.  CVCUDA_ASSIGN_BF16 ranks with bf16 products and re-checks the
 * best candidates in FP32, so the result equals CVCUDA_ASSIGN_FP32's up to
 * exact ties.
 */
CvCudaStatus cvcuda_kmeans_assign(const CvCudaBuffer *points, long long n, int d,
								  const CvCudaBuffer *centroids, int k, int metric, int mode,
								  CvCudaBuffer *assign, CvCudaBuffer *score, CvCudaError *err);

/*
 * Lloyd iterations from the k centroids in centroids (k x d float4, refined
 * in place), as cv_kmeans_lloyd: assign, stop when nothing changed, refill
 * empty clusters by its rule, update to float64 means (spherical:
 * re-normalised) by sorting points by cluster and reducing segments.
 * assign: n int32 out (the assignment the final centroids average);
 * inertia_history: host, iterations float64 (may be NULL); *iterations_run
 * and *inertia (of the last assignment) out.
 */
CvCudaStatus cvcuda_kmeans_lloyd(const CvCudaBuffer *points, long long n, int d,
								 CvCudaBuffer *centroids, int k, int iterations, int metric,
								 int mode, CvCudaBuffer *assign, double *inertia_history,
								 int *iterations_run, double *inertia, CvCudaError *err);

/* ---------------------------------------------------------------------
 * IVF search over a mirror (ABI 3)
 *
 * A mirror: centroids (lists x d float4), the list vectors packed per list
 * (total x d float4; list l is rows list_offsets[l] .. list_offsets[l+1]-1,
 * list_offsets holding lists + 1 int64).  Positions are row numbers in the
 * packed array; the caller maps them to TIDs.
 * --------------------------------------------------------------------- */

/* Distances: the access methods' CvMetric (clustervec_metric.h). */

/* Largest k and probes cvcuda_ivf_search accepts. */
#define CVCUDA_SEARCH_MAX_K 1024

/*
 * For each of nq queries (host, nq x d float4): ranks the lists by the
 * distance of their centroid to the query (src/math's exact float64
 * values, ties to the lower list), scans the first probes lists and writes
 * the k best rows to out_position[q * k + r] and their distance to
 * out_distance[q * k + r], ascending, equal distances by ascending
 * position; the distances are bit for bit src/math's exact float64 values
 * (the CPU index scan's), so GPU and CPU answers over the same lists are
 * equal.  Fewer than k rows in the probed lists: the tail is -1 / +inf.
 * out_probed (may be NULL): nq x min(probes, lists) list numbers, each
 * query's probed set in ascending list order, so the caller reads rows
 * added to exactly those lists without ranking the centroids again.
 * given (may be NULL; ABI 5): nq x probes list numbers, each query's row
 * strictly ascending, probed instead of the nearest lists (no ranking):
 * a search within chosen lists, as cvlattice's label conditions ask; it
 * may be the same memory as out_probed.
 */
CvCudaStatus cvcuda_ivf_search(const CvCudaBuffer *centroids, int lists, int d,
							   const CvCudaBuffer *vectors, const CvCudaBuffer *list_offsets,
							   int metric, const float *queries, int nq, int k, int probes,
							   const int *given, long long *out_position, double *out_distance,
							   int *out_probed, CvCudaError *err);

/* ---------------------------------------------------------------------
 * Observed health over a cvlattice mirror (ABI 5)
 *
 * A search over a cvlattice mirror scores every member of the lists it
 * probes; the worker then has each of those members' distance to its own
 * list's centroid written once into a side buffer, pre-filled with NaN so
 * that unwritten members are told apart, and reduces it per list when
 * asked (STATISTICS.md, "Observed health").
 * --------------------------------------------------------------------- */

/* float8 values per row of an observation buffer: r, then cos. */
#define CVCUDA_OBSERVE_VALUES 2

/*
 * For every row of the count lists named in observe (host, list numbers),
 * writes member_stats[2 * row] = r, the float64 Euclidean distance of the
 * member to its list's centroid in means (lists x d float4), and
 * member_stats[2 * row + 1] = cos(member, centroid) (0 for a zero member
 * or a zero centroid).  Under CV_METRIC_COSINE the member is taken
 * normalised (a zero member as the zero vector), as cvlattice's cosine
 * centroids are means of normalised members.  Rows of other lists are not
 * touched.  member_stats holds rows x CVCUDA_OBSERVE_VALUES float8, rows
 * being list_offsets[lists].
 */
CvCudaStatus cvcuda_list_observe(const CvCudaBuffer *means, int lists, int d,
								 const CvCudaBuffer *vectors, const CvCudaBuffer *list_offsets,
								 int metric, const int *observe, int count,
								 CvCudaBuffer *member_stats, CvCudaError *err);

/* Per list, what cvcuda_observed_reduce writes (float8 each). */
#define CVCUDA_OBSERVED_SEEN 0		/* rows whose r is not NaN */
#define CVCUDA_OBSERVED_SUM_R2 1	/* sum of r^2 over them */
#define CVCUDA_OBSERVED_SUM_R 2		/* sum of r */
#define CVCUDA_OBSERVED_SUM_COS 3	/* sum of cos */
#define CVCUDA_OBSERVED_FIELDS 4

/*
 * out (host, lists x CVCUDA_OBSERVED_FIELDS float8): each list's sums over
 * its written rows, accumulated in float64.
 */
CvCudaStatus cvcuda_observed_reduce(const CvCudaBuffer *member_stats,
									const CvCudaBuffer *list_offsets, int lists, double *out,
									CvCudaError *err);

#ifdef __cplusplus
}
#endif

#endif
