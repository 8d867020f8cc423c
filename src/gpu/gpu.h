/*
 * gpu.h: the one door from a backend to the GPU worker.
 *
 * Everything the access methods, cluster_health and the search functions
 * ask of the GPU goes through these functions.  They take plain arrays and
 * either answer (true) or say why the worker did not serve (false, with a
 * CvGpuError: no worker, it failed, it ran out of memory, the mirror went
 * away); the caller then calls cv_gpu_fall_back and runs its CPU path
 * (clustervec.gpu = auto) or gets the ERROR (require).  Only src/gpu/ and
 * src/worker/ see the worker's protocol, its shared memory and the GPU
 * library's header; the files here are the backend's side of that seam:
 *
 *   client.c   routing, one request through a slot and a staging buffer
 *   buffers.c  device buffers a backend holds during a transaction
 *   knn.c      exact k-NN of cvsearch_exact
 *   kmeans.c   k-means and the assignment of index builds and of kmeans()
 *   health.c   cluster_health's passes
 *   mirror.c   index mirrors: find, upload, search, drop
 *   sql.c      the settings and clustervec_gpu_info / _ping / _mirrors
 */
#ifndef CV_GPU_GPU_H
#define CV_GPU_GPU_H

#include "postgres.h"

#include "gpu/types.h"
#include "math/health.h"
#include "math/kmeans.h"

/* clustervec.gpu */
#define CV_GPU_OFF 0
#define CV_GPU_AUTO 1
#define CV_GPU_REQUIRE 2

extern int	cv_gpu_mode;
extern int	cv_gpu_max_wait_ms;	/* clustervec.gpu_max_wait */

/* From _PG_init: the settings (sql.c), the worker and its shared memory (worker/shmem.c). */
extern void cv_gpu_define_settings(void);
extern void cv_gpu_preload(void);

/* client.c: routing */

/* Whether work should go to the worker; raises the ERROR of "require" when it cannot. */
extern bool cv_gpu_should_use(void);
extern bool cv_gpu_worker_ready(void);

/*
 * The worker did not serve `what` ("cvsearch", ...): an ERROR under
 * clustervec.gpu = require; otherwise counted, and the caller goes on on
 * the CPU.
 */
extern void cv_gpu_fall_back(const char *what, const CvGpuError *error);
extern void cv_gpu_count_fallback(void);

/* What the GPU served, for clustervec_gpu_info(). */
typedef enum CvGpuServed
{
	CV_GPU_SERVED_SEARCH,		/* an index scan or a cvsearch call */
	CV_GPU_SERVED_BUILD,		/* an index build's k-means */
	CV_GPU_SERVED_HEALTH		/* a cluster_health call */
} CvGpuServed;

extern void cv_gpu_count_served(CvGpuServed what);

/* Free device memory as the worker last saw it (0 when unknown). */
extern uint64 cv_gpu_device_free_bytes(void);

/* knn.c: exact k-NN (cvsearch_exact) */

/*
 * How a search of nq queries of d dimensions with k hits each is cut to
 * fit the worker: *group queries per request with *chunk_rows rows.  False
 * when not even one query fits.
 */
extern bool cv_gpu_knn_plan(int nq, int d, int k, int *group, int64 *chunk_rows);

/*
 * The k nearest of nrows rows (row-major, d floats) to each of nq queries
 * by L2: index (into rows, -1: none) and distance, nq x k each, ascending.
 */
extern bool cv_gpu_knn_exact(const float *queries, int nq, const float *rows, int64 nrows,
							 int d, int k, int64 *index, double *distance, CvGpuError *error);

/* kmeans.c: the k-means of index builds */

/* clustervec.gpu_assign (an access-method setting; the values are the library's) */
#define CV_GPU_ASSIGN_FP32 0	/* exact FP32 products */
#define CV_GPU_ASSIGN_BF16 1	/* bf16 tensor-core products, best candidates re-checked in FP32 */

/*
 * k-means++ seeding (host draws, device distances) and Lloyd on the
 * device: writes *lists centroids (fewer than params->k when the sample
 * has fewer distinct rows).
 */
extern bool cv_gpu_kmeans_train(const float *sample, int64 n, int d,
								const CvKmeansParams *params, int mode, float *centroids,
								int *lists, CvGpuError *error);

/*
 * The same for kmeans(): then every point's nearest final centroid
 * (assignment: n; squared L2, or largest inner product for the spherical
 * objective, exact FP32 ranking) and history, params->iterations entries:
 * each assignment's inertia, NaN after Lloyd converged.
 */
extern bool cv_gpu_kmeans_cluster(const float *points, int64 n, int d,
								  const CvKmeansParams *params, int mode, float *centroids,
								  int *clusters, double *history, int32 *assignment,
								  CvGpuError *error);

/* Rows per assignment batch: one staging buffer's worth. */
extern int	cv_gpu_assign_batch_rows(int d);

typedef struct CvGpuAssigner CvGpuAssigner;

/* The centroids on the device for a build's pass 2 (NULL: not served). */
extern CvGpuAssigner *cv_gpu_assigner_begin(const float *centroids, int lists, int d,
											CvKmeansMetric objective, int mode,
											CvGpuError *error);

/* Each row's nearest list. */
extern bool cv_gpu_assign(CvGpuAssigner *assigner, const float *rows, int count, int32 *lists,
						  CvGpuError *error);
extern void cv_gpu_assigner_end(CvGpuAssigner *assigner);

/* health.c: cluster_health's passes, over chunks of whole clusters in CSR form */

typedef struct CvGpuHealth CvGpuHealth;

extern CvGpuHealth *cv_gpu_health_begin(int d, const CvHealthParams *params);

/*
 * Pass 1 over a chunk (offsets: clusters + 1; members: offsets[clusters]
 * x d floats): each cluster's float64 centroid (clusters x d) and the
 * section-1 columns of stats.  The chunk stays on the device until the
 * next chunk, so a run of one chunk need not send it again.
 */
extern bool cv_gpu_health_centroids(CvGpuHealth *health, const float *members,
									const int64 *offsets, int64 clusters, double *centroids,
									CvClusterStats *stats, CvGpuError *error);

/* Between the passes: the whole input's centroid set and its neighbour table. */
extern bool cv_gpu_health_prepare(CvGpuHealth *health, const CvCentroidSet *set,
								  CvGpuError *error);

/*
 * Pass 2: every column of sections 2-6 of clusters [first_cluster,
 * first_cluster + clusters) of the set; stats holds pass 1's and is
 * completed.  members NULL: the chunk pass 1 kept, which must be the whole
 * input (cv_gpu_health_kept_all).
 */
extern bool cv_gpu_health_members(CvGpuHealth *health, const float *members,
								  const int64 *offsets, int64 first_cluster, int64 clusters,
								  CvClusterStats *stats, CvGpuError *error);

/* Whether pass 1 made one chunk of all the set's clusters, still on the device. */
extern bool cv_gpu_health_kept_all(const CvGpuHealth *health);

/* Frees everything the run holds on the device (also after a failure). */
extern void cv_gpu_health_end(CvGpuHealth *health);

/* mirror.c: index mirrors */

/*
 * The ready mirror with this key (database, relfilenode, generation), or
 * -1; sets key->rows to the rows it holds, which tell a refreshed mirror
 * of the same generation from the one it replaced (layouts are cached by it).
 */
extern int	cv_gpu_mirror_find(CvGpuMirrorKey *key);

/*
 * Starts a mirror with this key; *mirror is -1 when one exists or is being
 * made.  refresh: also when a ready one of this key holds another number
 * of rows (inserts since); it serves until the new one is committed.  The
 * worker drops an unfinished mirror when this transaction ends.
 */
extern bool cv_gpu_mirror_begin(const CvGpuMirrorKey *key, bool refresh, int *mirror,
								CvGpuError *error);

/* Bytes of one part at a byte offset of it, in staging-sized requests. */
extern bool cv_gpu_mirror_put(int mirror, CvGpuMirrorPart part, Size offset, const void *data,
							  Size bytes, CvGpuError *error);
extern bool cv_gpu_mirror_commit(int mirror, CvGpuError *error);
extern void cv_gpu_mirror_drop(int mirror);

/* Vectors of d dimensions one upload request carries. */
extern int64 cv_gpu_mirror_batch_rows(int d);

/* Drops every mirror of an index (DROP INDEX); installed by cv_gpu_install_hooks. */
extern void cv_gpu_install_hooks(void);

/*
 * Copies of the mirrors this backend may know of: at most CV_GPU_MAX_MIRRORS
 * ready mirrors of this database, returns how many.
 */
extern int	cv_gpu_mirror_list(CvGpuMirrorInfo *out);

/*
 * One batch search's answer.  Each query's k hits (heap TID as block << 16
 * | offset, -1: none; distance), ascending; the probes lists it scanned, in
 * list order; and the mirror's layout, which this backend caches per
 * mirror key: where each list ended when it was mirrored (block << 32 |
 * byte offset, -1: empty) and its rows' range [offsets[l], offsets[l+1]).
 */
typedef struct CvGpuSearchAnswer
{
	int			nq;
	int			k;
	int			probes;
	int64	   *tids;			/* nq x k */
	double	   *distances;		/* nq x k */
	int32	   *probed;			/* nq x probes */
	const int64 *ends;			/* lists; owned by the layout cache */
	const int64 *offsets;		/* lists + 1; likewise */
} CvGpuSearchAnswer;

/* Most queries of d dimensions with k hits one request carries (0: not one). */
extern int	cv_gpu_search_batch_queries(int d, int k, int probes);

/*
 * given (or NULL): nq x probes list numbers, each query's ascending, to
 * probe instead of the nearest lists (cvlattice's label conditions).
 * observe: a cvlattice mirror observes the lists probed (clustervec.observe).
 */
extern bool cv_gpu_mirror_search(int mirror, const CvGpuMirrorKey *key, const float *queries,
								 int nq, int k, int probes, const int32 *given, bool observe,
								 CvGpuSearchAnswer *answer, CvGpuError *error);
extern void cv_gpu_search_answer_free(CvGpuSearchAnswer *answer);

/*
 * Observed health of a cvlattice mirror: out holds key->lists entries.
 * Reset forgets it (the mirror's members unseen, no queries counted).
 */
extern bool cv_gpu_mirror_observed(int mirror, const CvGpuMirrorKey *key,
								   CvGpuObservedList *out, CvGpuError *error);
extern bool cv_gpu_mirror_observed_reset(int mirror, const CvGpuMirrorKey *key,
										 CvGpuError *error);

/* Largest k and probes a mirror search accepts. */
#define CV_GPU_SEARCH_MAX_K 1024

#endif
