/*
 * build_gpu.h: the GPU worker's part of a cvivf build (build_gpu.c).
 */
#ifndef CV_IVF_BUILD_GPU_H
#define CV_IVF_BUILD_GPU_H

#include "postgres.h"

#include "clustervec_cuda.h"
#include "math/kmeans.h"

/* clustervec.gpu_assign: CVCUDA_ASSIGN_FP32 or CVCUDA_ASSIGN_BF16 */
extern int	cv_gpu_assign_mode;

/*
 * k-means++ seeding (host draws, device distances) and Lloyd on the
 * device: writes *lists centroids (fewer than params->k when the sample
 * has fewer distinct rows).  False when the worker failed.
 */
extern bool cvivf_gpu_train(const float *sample, int64 n, int d, const CvKmeansParams *params,
							float *centroids, int *lists);

/* Rows per assignment batch: one staging buffer's worth. */
extern int	cvivf_gpu_batch_rows(int d);

typedef struct CvIvfGpuAssigner CvIvfGpuAssigner;

/* The centroids on the device for pass 2; NULL when the worker failed. */
extern CvIvfGpuAssigner *cvivf_gpu_assigner_begin(const float *centroids, int lists, int d,
												  int metric);

/* Each row's nearest list (metric: CVCUDA_KMEANS_*); false when the worker failed. */
extern bool cvivf_gpu_assign(CvIvfGpuAssigner *assigner, const float *rows, int count,
							 int32 *lists);

extern void cvivf_gpu_assigner_end(CvIvfGpuAssigner *assigner);

#endif
