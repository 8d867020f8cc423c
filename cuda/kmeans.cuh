// kmeans.cuh: what kmeans_assign.cu offers kmeans_lloyd.cu: the fused
// nearest-centroid assignment on device pointers, with its scratch memory.
#ifndef CVCUDA_KMEANS_CUH
#define CVCUDA_KMEANS_CUH

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common.cuh"

// Dimensions of the bf16 copies are padded with zeros to a multiple of this.
#define CVCUDA_KMEANS_BF16_PAD 32

// The padded width of a bf16 row of d elements.
static inline int
cvcuda_kmeans_bf16_width(int d)
{
	return (d + CVCUDA_KMEANS_BF16_PAD - 1) / CVCUDA_KMEANS_BF16_PAD * CVCUDA_KMEANS_BF16_PAD;
}

// Writes the bf16 copy (rows x width, zero padded) of a rows x d float matrix.
cudaError_t cvcuda_kmeans_to_bf16(const float *src, long long rows, int d,
								  __nv_bfloat16 *dst, cudaStream_t stream);

// Scratch of an assignment, grown on demand and kept by the caller (Lloyd
// reuses it across iterations; the points' bf16 copy is made once).
struct KmeansAssignScratch
{
	DeviceArray<float> norms;			// k: |c|^2 (L2) or 0
	DeviceArray<__nv_bfloat16> centroids_bf16;	// k x width
	DeviceArray<__nv_bfloat16> points_bf16;	// n x width (BF16 mode)
	bool		points_ready = false;	// points_bf16 holds the current points
};

// assign[i], score[i] (score may be NULL) for n points against k centroids.
cudaError_t cvcuda_kmeans_assign_device(const float *points, long long n, int d,
										const float *centroids, int k, int metric, int mode,
										KmeansAssignScratch *scratch, int32_t *assign,
										float *score, cudaStream_t stream);

#endif
