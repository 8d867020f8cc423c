// topk_select.cuh: per-query top-k selection over (key, row) pairs already on
// the device, without ever sending them to the host.  Used by cvcuda_knn_exact.
#ifndef CVCUDA_TOPK_SELECT_CUH
#define CVCUDA_TOPK_SELECT_CUH

#include <cstdint>

#include <cuda_runtime.h>

// Items per sort group.  At least 2 * CVCUDA_KNN_MAX_K, so every reduction
// round keeps at most half of its input (a 200th for k = 10); and within one
// tile of CUB's segmented sort for 8-byte keys and values (256 threads x 11
// items = 2816 on sm_80 and later), so each group is sorted in shared memory
// in one pass instead of eleven 6-bit passes through global memory.
#define CVCUDA_TOPK_GROUP 2048

// The buffers of a selection: two (key, row) arrays (ping-pong) of capacity
// items each, the segment offsets, and CUB's scratch space (grown on demand).
struct TopkWork
{
	uint64_t   *keys[2];
	long long  *rows[2];
	size_t		capacity;		// items in each of the four arrays
	long long  *begin;			// segment offsets, max_segments each
	long long  *end;
	long long	max_segments;
	void	   *scratch;		// owned by the caller, freed with cudaFree
	size_t		scratch_bytes;
};

// Segments a reduction of nq queries of n items each needs at most.
long long	cvcuda_topk_segments(int nq, long long n);

// Sets the first k (key, row) slots of each query (stride apart) empty.
cudaError_t cvcuda_launch_topk_fill_empty(uint64_t *keys, long long *rows, int nq, int k,
										  long long stride, cudaStream_t stream);

// Copies the first k slots of each query from one layout (src_stride) to
// another (dst_stride); the buffers must not overlap.
cudaError_t cvcuda_launch_topk_copy_prefix(const uint64_t *src_keys, const long long *src_rows,
										   long long src_stride, uint64_t *dst_keys,
										   long long *dst_rows, long long dst_stride,
										   int nq, int k, cudaStream_t stream);

// Writes the first k slots of each query as results: row index and distance
// (+inf and -1 for empty slots).
cudaError_t cvcuda_launch_topk_emit(const uint64_t *keys, const long long *rows,
									long long stride, int nq, int k, long long *out_index,
									double *out_distance, cudaStream_t stream);

// Reduces nq queries of n (key, row) items each (n >= k), laid out
// query-major in work->keys[which] and work->rows[which], to each query's k
// smallest by (key, row).  Requires that, among equal keys, items already
// stand in ascending row order (true of rows appended in index order after
// an earlier result).  On return *which names the buffer holding the sorted
// result and *stride its per-query stride; the first k of each query are the
// answer, in order.
cudaError_t cvcuda_topk_reduce(TopkWork *work, int *which, int nq, long long n, int k,
							   long long *stride, cudaStream_t stream);

#endif
