// knn_distance.cuh: the launcher of the L2 tile kernel of cvcuda_knn_exact.
#ifndef CVCUDA_KNN_DISTANCE_CUH
#define CVCUDA_KNN_DISTANCE_CUH

#include <cstdint>

#include <cuda_runtime.h>

// Computes, for every query q < nq and row r < nrows (both row-major, dims
// float4 each), the Euclidean distance bit for bit as src/math does
// (sqrt(l2_squared)), and writes its sort key (cvcuda_distance_key) to
// keys[q * stride + offset + r] and row_base + r to rows_out at the same place.
cudaError_t cvcuda_launch_knn_distance(const float *d_queries, int nq,
									   const float *d_rows, int nrows, int dims,
									   uint64_t *keys, long long *rows_out,
									   long long stride, long long offset,
									   long long row_base, cudaStream_t stream);

#endif
