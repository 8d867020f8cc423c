/*
 * types.h: the plain records that cross the seam between a backend and the
 * GPU worker: why a request was not served, and what names a mirror.  Both
 * gpu.h (what the rest of the backend calls) and worker/protocol.h (what
 * travels through shared memory) use them, so they hold no pointers.
 */
#ifndef CV_GPU_TYPES_H
#define CV_GPU_TYPES_H

#include "postgres.h"

#include "utils/timestamp.h"

#include "clustervec_metric.h"

#define CV_GPU_ERROR_LEN 256

/* Why the worker did not serve a request: code 0 means it did. */
typedef struct CvGpuError
{
	int			code;			/* a CvCudaStatus, or CV_GPU_ERR_* */
	char		message[CV_GPU_ERROR_LEN];
} CvGpuError;

#define CV_GPU_ERR_WORKER_EXITED 100
#define CV_GPU_ERR_BAD_REQUEST 101
#define CV_GPU_ERR_NO_BUFFER 102	/* a buffer id the worker does not hold */
#define CV_GPU_ERR_MEMORY_LIMIT 103 /* clustervec.gpu_memory_limit reached */
#define CV_GPU_ERR_BUSY 104			/* queued past clustervec.gpu_max_wait */

/* What identifies an index's mirror, and its shape. */
typedef struct CvGpuMirrorKey
{
	Oid			database;
	Oid			index;
	Oid			relfilenode;
	uint64		generation;
	int32		metric;			/* CvMetric */
	int32		dimensions;
	int32		lists;
	int64		rows;
	int32		lattice;		/* a cvlattice index: means and observed health too */
} CvGpuMirrorKey;

typedef enum CvGpuMirrorState
{
	CV_MIRROR_FREE = 0,
	CV_MIRROR_BUILDING,			/* a backend is uploading it */
	CV_MIRROR_READY
} CvGpuMirrorState;

/* A mirror as backends see it (clustervec_gpu_mirrors()). */
typedef struct CvGpuMirrorInfo
{
	CvGpuMirrorState state;
	CvGpuMirrorKey key;
	uint64		bytes;
	TimestampTz last_used;
	int			owner_procno;	/* while building */
	int			owner_pid;
	uint64		owner_epoch;
} CvGpuMirrorInfo;

#define CV_GPU_MAX_MIRRORS 32

/*
 * Observed health of one list of a cvlattice mirror (STATISTICS.md,
 * "Observed health"): over the members the searches scored, r being a
 * member's distance to its list's centroid.
 */
typedef struct CvGpuObservedList
{
	int64		rows;			/* the list's members in the mirror */
	int64		seen;			/* of them, scored by a search */
	double		sum_r2;
	double		sum_r;
	double		sum_cos;		/* cos(member, centroid) */
	uint64		queries;		/* searches that probed the list */
} CvGpuObservedList;

/* The parts of a mirror a backend uploads. */
typedef enum CvGpuMirrorPart
{
	CV_MIRROR_PART_CENTROIDS = 0,	/* lists x d float4 */
	CV_MIRROR_PART_VECTORS = 1, /* rows x d float4, list after list */
	CV_MIRROR_PART_TIDS = 2,	/* rows int8: block << 16 | offset */
	CV_MIRROR_PART_OFFSETS = 3, /* lists + 1 int8: list l is rows [o[l], o[l+1]) */
	CV_MIRROR_PART_ENDS = 4,	/* lists int8: where each list ended (block << 32 | byte) */
	CV_MIRROR_PART_MEANS = 5	/* cvlattice: lists x d float4, each list's published centroid */
} CvGpuMirrorPart;

#endif
