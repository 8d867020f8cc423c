/*
 * protocol.h: what backends and the GPU worker share.  The ring of request
 * slots lives in the main shared memory, pointer-free (processes map it at
 * different addresses): offsets and pgprocno numbers, never pointers.  The
 * payload of a request lives in one of the staging buffers of a DSM segment
 * the worker creates at start and registers with the CUDA driver once.
 */
#ifndef CV_WORKER_PROTOCOL_H
#define CV_WORKER_PROTOCOL_H

#include "postgres.h"

#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "gpu/types.h"
#include "math/health.h"

#define CV_GPU_MAGIC 0x43564750	/* "CVGP" */
#define CV_GPU_PROTOCOL_VERSION 2

#define CV_GPU_SLOTS 64
/*
 * The staging area: CV_GPU_STAGING_BUFFERS buffers of CV_GPU_STAGING_BYTES,
 * then CV_GPU_SMALL_BUFFERS of CV_GPU_SMALL_BYTES that only searches and
 * layout requests use, so many sessions' searches can wait for one launch
 * together without holding the large buffers uploads and statistics need.
 */
#define CV_GPU_STAGING_BUFFERS 8
#define CV_GPU_STAGING_BYTES ((Size) 16 * 1024 * 1024)
#define CV_GPU_SMALL_BUFFERS 48
#define CV_GPU_SMALL_BYTES ((Size) 64 * 1024)
#define CV_GPU_ALL_BUFFERS (CV_GPU_STAGING_BUFFERS + CV_GPU_SMALL_BUFFERS)
#define CV_GPU_PING_MAX_BYTES ((Size) 1024 * 1024 * 1024)

/* Slot states; a slot moves FREE -> CLAIMED -> SUBMITTED -> RUNNING -> DONE -> FREE. */
typedef enum CvGpuSlotState
{
	CV_SLOT_FREE = 0,
	CV_SLOT_CLAIMED,			/* borrowed by a backend, being filled */
	CV_SLOT_SUBMITTED,			/* filled by a backend, waiting for the worker */
	CV_SLOT_RUNNING,			/* taken by the worker */
	CV_SLOT_DONE,				/* answered (result or error), owner not yet back */
	CV_SLOT_ABANDONED			/* the owner gave up while the worker ran it */
} CvGpuSlotState;

typedef enum CvGpuOpcode
{
	CV_OP_PING = 1,				/* payload bytes travel to the device and back */
	CV_OP_KNN_EXACT = 2,		/* one chunk of rows against a batch of queries */
	/* device buffers a backend holds during one transaction */
	CV_OP_BUFFER_ALLOC = 3,		/* args: bytes, owner epoch -> result[0]: id */
	CV_OP_BUFFER_WRITE = 4,		/* args: id, offset, bytes; payload in */
	CV_OP_BUFFER_READ = 5,		/* args: id, offset, bytes; payload out */
	CV_OP_BUFFER_FREE = 6,		/* args: id */
	/* operations over buffers; their arguments are a struct in the payload */
	CV_OP_HEALTH_CENTROID = 7,	/* CvGpuHealthArgs */
	CV_OP_HEALTH_TABLE = 8,		/* CvGpuHealthArgs */
	CV_OP_HEALTH_MEMBERS = 9,	/* CvGpuHealthArgs */
	CV_OP_KMEANS_REFRESH = 10,	/* CvGpuKmeansArgs, then count x d centres */
	CV_OP_KMEANS_ASSIGN = 11,	/* CvGpuKmeansArgs */
	CV_OP_KMEANS_LLOYD = 12,	/* CvGpuKmeansArgs; out: iterations float8 inertia history */
	/* mirrors of cvivf indexes, kept across transactions */
	CV_OP_MIRROR_BEGIN = 13,	/* CvGpuMirrorKey in the payload; args: owner epoch, refresh
								 * -> result[0]: mirror number */
	CV_OP_MIRROR_PUT = 14,		/* args: mirror, part, byte offset, bytes; payload in */
	CV_OP_MIRROR_COMMIT = 15,	/* args: mirror */
	CV_OP_MIRROR_DROP = 16,		/* args: mirror */
	CV_OP_MIRROR_SEARCH = 17,	/* CvGpuSearchArgs, queries; out: hits, probed lists */
	CV_OP_MIRROR_LAYOUT = 18,	/* CvGpuMirrorKey; out: list ends, list offsets */
	CV_OP_MIRROR_OBSERVED = 19, /* args: mirror; CvGpuMirrorKey; out: lists x CvGpuObservedList */
	CV_OP_MIRROR_OBSERVED_RESET = 20	/* args: mirror; CvGpuMirrorKey */
} CvGpuOpcode;

/* A batch search over a ready mirror. */
typedef struct CvGpuSearchArgs
{
	CvGpuMirrorKey key;			/* must match the mirror's */
	int32		mirror;
	int32		nq;
	int32		k;
	int32		probes;
	int32		observe;		/* cvlattice mirror: observe the probed lists */
	int32		given;			/* 1: probe the lists written in the answer's probed area */
} CvGpuSearchArgs;

/*
 * Where a search's request and answer lie in its staging buffer: the
 * arguments, the queries (nq x d float4), then the answer: nq x k heap
 * TIDs (int8, -1: none), nq x k distances (float8), nq x probes probed
 * lists (int4).  The answer never overlaps the queries the library reads.
 * A search with given lists (CvGpuSearchArgs.given) carries them in the
 * probed area, where the answer returns them unchanged.
 */
typedef struct CvGpuSearchLayout
{
	Size		queries;
	Size		tids;
	Size		distances;
	Size		probed;
	Size		total;
} CvGpuSearchLayout;

static inline void
cv_search_layout(int64 nq, int64 d, int64 k, int64 probes, CvGpuSearchLayout *layout)
{
	layout->queries = MAXALIGN(sizeof(CvGpuSearchArgs));
	layout->tids = layout->queries + MAXALIGN(sizeof(float) * (Size) nq * d);
	layout->distances = layout->tids + sizeof(int64) * (Size) nq * k;
	layout->probed = layout->distances + sizeof(double) * (Size) nq * k;
	layout->total = layout->probed + MAXALIGN(sizeof(int32) * (Size) nq * probes);
}

/* Where the worker stands. */
typedef enum CvGpuWorkerState
{
	CV_WORKER_NONE = 0,			/* never started (not preloaded, or starting) */
	CV_WORKER_STARTING,
	CV_WORKER_READY,			/* library open, device context created */
	CV_WORKER_UNAVAILABLE,		/* up, but no library, driver or device */
	CV_WORKER_EXITED			/* gone; the postmaster restarts it */
} CvGpuWorkerState;

/* Most buffers the worker holds at once, over all backends. */
#define CV_GPU_MAX_BUFFERS 1024

/*
 * The arguments of the statistics operations (clustervec_cuda.h's
 * cvcuda_health_*): buffer ids, 0 for none.
 */
typedef struct CvGpuHealthArgs
{
	uint64		members;
	uint64		offsets;
	int64		nclusters;
	int64		first_cluster;
	int32		d;
	int32		m;
	uint64		centroids;		/* HEALTH_CENTROID: out, nclusters x d float8 */
	uint64		stats;			/* nclusters CvClusterStats */
	int64		set_k;			/* the whole input's centroid set */
	uint64		set_centroids;
	uint64		set_mean_dist;
	uint64		set_mean_norm;
	uint64		set_nearest;
	uint64		set_nearest_dist;
	uint64		set_db_ratio;
	CvHealthParams params;
} CvGpuHealthArgs;

/* The arguments of the k-means operations (cvcuda_kmeans_*). */
typedef struct CvGpuKmeansArgs
{
	uint64		points;			/* n x d float4 */
	int64		n;
	int32		d;
	int32		k;				/* REFRESH: centres in the payload */
	int32		metric;
	int32		mode;
	int32		iterations;
	int32		iterations_run; /* LLOYD: out */
	double		inertia;		/* LLOYD: out */
	uint64		centroids;		/* k x d float4 */
	uint64		assign;			/* n int4 */
	uint64		score;			/* n float4 (ASSIGN) */
	uint64		dist;			/* n float8 (REFRESH) */
} CvGpuKmeansArgs;

typedef struct CvGpuSlot
{
	CvGpuSlotState state;		/* under the shared mutex */
	uint64		request_id;
	uint64		generation;		/* the worker generation the slot was claimed under */
	int			owner_procno;	/* the backend's pgprocno, for its latch */
	int			opcode;
	int			staging;		/* staging buffer index, -1 for none */
	int64		args[6];		/* opcode-specific (sizes, counts) */
	int64		result[2];		/* opcode-specific answers */
	int			owner_pid;		/* the owner's pid, for the buffers it allocates */
	Size		payload_bytes;
	double		elapsed_us;		/* the worker's time on the request */
	TimestampTz submitted_at;	/* when the owner submitted it */
	TimestampTz abandoned_at;	/* when the owner gave up on it while it ran */
	CvGpuError	error;
} CvGpuSlot;

typedef struct CvGpuShared
{
	uint32		magic;
	uint32		version;
	slock_t		mutex;			/* slots, staging map, worker fields */
	CvGpuWorkerState worker_state;
	int			worker_procno;	/* -1 when there is no worker */
	pid_t		worker_pid;
	uint64		worker_generation;	/* bumped at each worker start */
	char		backend[16];	/* "cuda", "cpu-shim", "unavailable" */
	char		reason[CV_GPU_ERROR_LEN];
	char		device_name[128];
	char		compute_capability[16];
	uint64		memory_total;
	uint64		memory_free;	/* refreshed by the worker while idle */
	dsm_handle	staging_handle;
	uint64		staging_in_use; /* bitmap over CV_GPU_ALL_BUFFERS */
	uint64		next_request_id;
	pg_atomic_uint64 gpu_requests;
	pg_atomic_uint64 cpu_fallbacks;
	pg_atomic_uint64 health_gpu_calls;	/* cluster_health calls the GPU served */
	pg_atomic_uint64 build_gpu_calls;	/* index builds whose k-means ran on the GPU */
	pg_atomic_uint64 search_gpu_calls;	/* index scans and cvsearch calls the GPU served */
	pg_atomic_uint64 search_launches;	/* library searches the worker ran */
	pg_atomic_uint64 search_requests;	/* search requests those launches answered */
	pg_atomic_uint64 queue_wait_us; /* search requests' time from submission to launch */
	pg_atomic_uint64 busy_fallbacks;	/* searches sent to the CPU by clustervec.gpu_max_wait */
	pg_atomic_uint64 stopped_requests;	/* requests stopped because their owner gave up */
	pg_atomic_uint64 last_stop_us;	/* the last one's time from giving up to stopping */
	uint64		buffers_bytes;	/* device bytes the worker's buffers (not mirrors) hold */
	int			buffers_count;
	CvGpuMirrorInfo mirrors[CV_GPU_MAX_MIRRORS];
	CvGpuSlot	slots[CV_GPU_SLOTS];
} CvGpuShared;

/*
 * One counter per PGPROC: a backend bumps its own at every transaction end;
 * the worker frees the buffers a backend allocated under an older value, or
 * whose backend is gone, so an ERROR or a FATAL never leaks device memory.
 */
typedef struct CvGpuOwnerEpochs
{
	int			count;
	pg_atomic_uint64 epoch[FLEXIBLE_ARRAY_MEMBER];
} CvGpuOwnerEpochs;

/*
 * Layout of a k-NN request's staging buffer: the nq queries, then the rows,
 * then (8-byte aligned) nq x k int64 indexes and nq x k float8 distances.
 */
static inline Size
cv_knn_results_offset(int64 nq, int64 rows, int64 dims)
{
	return TYPEALIGN(8, sizeof(float) * (Size) (nq + rows) * dims);
}

static inline Size
cv_knn_request_bytes(int64 nq, int64 rows, int64 dims, int64 k)
{
	return cv_knn_results_offset(nq, rows, dims) + 16 * (Size) nq * k;
}

StaticAssertDecl(CV_GPU_ALL_BUFFERS <= 64, "the staging bitmap has 64 bits");

/* Staging buffer b: where it starts in the area, and how many bytes it holds. */
static inline Size
cv_staging_offset(int b)
{
	return b < CV_GPU_STAGING_BUFFERS ? (Size) b * CV_GPU_STAGING_BYTES :
		CV_GPU_STAGING_BUFFERS * CV_GPU_STAGING_BYTES +
		(Size) (b - CV_GPU_STAGING_BUFFERS) * CV_GPU_SMALL_BYTES;
}

static inline Size
cv_staging_capacity(int b)
{
	return b < CV_GPU_STAGING_BUFFERS ? CV_GPU_STAGING_BYTES : CV_GPU_SMALL_BYTES;
}

#define CV_GPU_STAGING_AREA_BYTES \
	(CV_GPU_STAGING_BUFFERS * CV_GPU_STAGING_BYTES + CV_GPU_SMALL_BUFFERS * CV_GPU_SMALL_BYTES)

/* shmem.c */
extern CvGpuShared *cv_gpu_shared;
extern CvGpuOwnerEpochs *cv_gpu_owner_epochs;
extern void cv_gpu_request_shmem(void);
extern void cv_gpu_init_shmem(void);
extern void cv_gpu_register_worker(void);

#endif
