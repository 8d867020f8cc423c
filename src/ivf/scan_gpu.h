/*
 * scan_gpu.h: an ordered cvivf index scan served by the index's mirror in
 * the GPU worker (scan_gpu.c).
 */
#ifndef CV_IVF_SCAN_GPU_H
#define CV_IVF_SCAN_GPU_H

#include "postgres.h"

#include "ivf/ivf.h"
#include "utils/rel.h"

typedef struct CvIvfGpuScan CvIvfGpuScan;

typedef enum CvIvfGpuScanResult
{
	CVIVF_GPU_ROW,				/* *tid, *distance: the next row */
	CVIVF_GPU_LISTS_DONE,		/* every row of the probed lists was returned */
	CVIVF_GPU_GIVE_UP			/* more rows than the GPU serves, or it failed */
} CvIvfGpuScanResult;

/*
 * A GPU scan of the probes nearest lists, or of the probes lists in
 * `lists` (ascending; NULL: the nearest), when the worker serves and the
 * index's current generation is mirrored; NULL otherwise (a missing mirror
 * is then made in the background).
 */
extern CvIvfGpuScan *cvivf_gpu_scan_begin(Relation index, const CvIvfMetaPageData *meta,
										  const float *query, int probes, const int32 *lists);

extern CvIvfGpuScanResult cvivf_gpu_scan_next(CvIvfGpuScan *scan, ItemPointer tid,
											  double *distance);

/*
 * After CVIVF_GPU_GIVE_UP: whether the CPU scan of the same lists must skip
 * this row because the GPU scan returned it already (rows come in distance
 * order, so only ties with the last distance need the list kept).
 */
extern bool cvivf_gpu_scan_returned(const CvIvfGpuScan *scan, ItemPointer tid,
									double distance);

#endif
