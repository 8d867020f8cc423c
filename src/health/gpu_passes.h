/*
 * gpu_passes.h: cluster_health's passes handed to the GPU worker
 * (gpu_passes.c, through src/gpu).  Each returns false when the worker did
 * not serve (after counting the fallback, or raising under clustervec.gpu
 * = require); the engine then runs the CPU path, and run->use_gpu is false
 * for the rest of the run.
 */
#ifndef CV_HEALTH_GPU_PASSES_H
#define CV_HEALTH_GPU_PASSES_H

#include "health/health_sql.h"

/* A chunk of whole clusters as the engine holds it. */
typedef struct HealthChunkView
{
	int64		first_cluster;
	int64		clusters;
	const int64 *offsets;		/* clusters + 1 */
	const float *members;
	int64		member_count;
} HealthChunkView;

/* Pass 1: fills n, centroid and the section-1 columns of the chunk's clusters. */
extern bool health_gpu_centroid_pass(HealthRun *run, const HealthChunkView *chunk);

/* Between the passes: the centroid set and the neighbour table on the device. */
extern bool health_gpu_prepare(HealthRun *run, const CvCentroidSet *set);

/* Pass 2: every column of sections 2-6 for the chunk's clusters. */
extern bool health_gpu_members_pass(HealthRun *run, const HealthChunkView *chunk);

/*
 * Pass 2 over the whole input when pass 1 made one chunk: its members are
 * still on the device, so the sort is not read again.  False when there is
 * no such chunk (the caller reads the chunks again) or the worker failed.
 */
extern bool health_gpu_members_pass_kept(HealthRun *run);

/* Frees what the run holds on the device (the end of the run, or a fallback). */
extern void health_gpu_release(HealthRun *run);

#endif
