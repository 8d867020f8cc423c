// topk_select.cu: per-query top-k by repeated segmented stable sorts.
//
// Why sorting, and in groups: the k nearest must be exact, ties broken by
// row index, for k up to 1024, and for any number of queries from 1 up.
// cub::DeviceSegmentedSort::StableSortPairs gives the tie rule for free:
// items enter in ascending row order among equal keys, and a stable sort by
// key keeps that order, so the result is ordered by (key, row).  But CUB
// sorts each segment with one thread block, so one segment per query would
// leave a single-query search on one SM, sorting a whole chunk in many
// global-memory passes.  Instead each query's items are cut into groups of
// CVCUDA_TOPK_GROUP (2048) consecutive items, every group is sorted in
// shared memory by its own block (nq * n / 2048 groups: the whole GPU even
// for one query), and only the first k of each group survive, compacted in
// order; the round repeats on the survivors until one group is left.  Since
// a group holds at least 2k items, each round keeps at most half (for
// k = 10, a 200th), so the total work stays within two sorts of the input.
// Ties stay correct across rounds: groups are consecutive and survivors
// keep their order, so equal keys always stand in row order.
//
// A per-query block-wide radix select would move fewer bytes; this needs no
// hand-written sort, and the distance kernel (3 float64 operations per
// query, row and dimension) dominates for the dimensions clustervec serves.
#include <cub/device/device_segmented_sort.cuh>

#include "common.cuh"
#include "topk_select.cuh"

#define THREADS 256

// Blocks for a grid-stride loop over count items.
static unsigned
blocks_for(long long count)
{
	long long	blocks = (count + THREADS - 1) / THREADS;

	return (unsigned) (blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// Marks the first k slots of each query empty (after every real distance).
__global__ static void
fill_empty_kernel(uint64_t *keys, long long *rows, int nq, int k, long long stride)
{
	long long	total = (long long) nq * k;

	for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < total;
		 i += (long long) gridDim.x * blockDim.x)
	{
		long long	at = i / k * stride + i % k;

		keys[at] = CVCUDA_KEY_NONE;
		rows[at] = -1;
	}
}

// Copies the first k slots of each query between two strides.
__global__ static void
copy_prefix_kernel(const uint64_t *src_keys, const long long *src_rows, long long src_stride,
				   uint64_t *dst_keys, long long *dst_rows, long long dst_stride, int nq, int k)
{
	long long	total = (long long) nq * k;

	for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < total;
		 i += (long long) gridDim.x * blockDim.x)
	{
		long long	q = i / k,
					j = i % k;

		dst_keys[q * dst_stride + j] = src_keys[q * src_stride + j];
		dst_rows[q * dst_stride + j] = src_rows[q * src_stride + j];
	}
}

// Turns the first k slots of each query into packed results.
__global__ static void
emit_kernel(const uint64_t *keys, const long long *rows, long long stride, int nq, int k,
			long long *out_index, double *out_distance)
{
	long long	total = (long long) nq * k;

	for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < total;
		 i += (long long) gridDim.x * blockDim.x)
	{
		long long	at = i / k * stride + i % k;

		out_index[i] = rows[at];
		out_distance[i] = cvcuda_key_distance(keys[at]);
	}
}

// Segment (q, g) covers items [g * GROUP, min((g + 1) * GROUP, n)) of query q.
__global__ static void
group_offsets_kernel(long long *begin, long long *end, long long segments, long long groups,
					 long long n)
{
	for (long long s = blockIdx.x * (long long) blockDim.x + threadIdx.x; s < segments;
		 s += (long long) gridDim.x * blockDim.x)
	{
		long long	q = s / groups,
					g = s % groups;
		long long	last = (g + 1) * CVCUDA_TOPK_GROUP;

		begin[s] = q * n + g * CVCUDA_TOPK_GROUP;
		end[s] = q * n + (last < n ? last : n);
	}
}

// Keeps the first k items of every sorted group, in order: query q's
// survivors are packed at q * kept, group after group.
__global__ static void
compact_kernel(const uint64_t *src_keys, const long long *src_rows, long long n,
			   uint64_t *dst_keys, long long *dst_rows, long long kept, int nq, int k)
{
	long long	total = (long long) nq * kept;

	for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < total;
		 i += (long long) gridDim.x * blockDim.x)
	{
		long long	q = i / kept,
					s = i % kept;
		long long	from = q * n + s / k * CVCUDA_TOPK_GROUP + s % k;

		dst_keys[i] = src_keys[from];
		dst_rows[i] = src_rows[from];
	}
}

long long
cvcuda_topk_segments(int nq, long long n)
{
	return (long long) nq * ((n + CVCUDA_TOPK_GROUP - 1) / CVCUDA_TOPK_GROUP);
}

cudaError_t
cvcuda_launch_topk_fill_empty(uint64_t *keys, long long *rows, int nq, int k, long long stride,
							  cudaStream_t stream)
{
	fill_empty_kernel<<<blocks_for((long long) nq * k), THREADS, 0, stream>>>(keys, rows, nq, k,
																			   stride);
	return cvcuda_check_launch(stream);
}

cudaError_t
cvcuda_launch_topk_copy_prefix(const uint64_t *src_keys, const long long *src_rows,
							   long long src_stride, uint64_t *dst_keys, long long *dst_rows,
							   long long dst_stride, int nq, int k, cudaStream_t stream)
{
	copy_prefix_kernel<<<blocks_for((long long) nq * k), THREADS, 0, stream>>>(
		src_keys, src_rows, src_stride, dst_keys, dst_rows, dst_stride, nq, k);
	return cvcuda_check_launch(stream);
}

cudaError_t
cvcuda_launch_topk_emit(const uint64_t *keys, const long long *rows, long long stride, int nq,
						int k, long long *out_index, double *out_distance, cudaStream_t stream)
{
	emit_kernel<<<blocks_for((long long) nq * k), THREADS, 0, stream>>>(keys, rows, stride, nq, k,
																		out_index, out_distance);
	return cvcuda_check_launch(stream);
}

// Makes the scratch space at least bytes (cudaFree waits for the device first).
static cudaError_t
ensure_scratch(TopkWork *work, size_t bytes)
{
	if (bytes <= work->scratch_bytes)
		return cudaSuccess;
	if (work->scratch)
		(void) cudaFree(work->scratch);
	work->scratch = nullptr;
	work->scratch_bytes = 0;
	cudaError_t code = cudaMalloc(&work->scratch, bytes);

	if (code != cudaSuccess)
	{
		work->scratch = nullptr;
		return code;
	}
	work->scratch_bytes = bytes;
	return cudaSuccess;
}

// Stable-sorts every group of nq queries x n items in buffer *which; on
// return *which names the buffer holding the sorted items.
static cudaError_t
sort_groups(TopkWork *work, int *which, int nq, long long n, cudaStream_t stream)
{
	long long	groups = (n + CVCUDA_TOPK_GROUP - 1) / CVCUDA_TOPK_GROUP;
	long long	segments = (long long) nq * groups;
	int			cur = *which;
	cub::DoubleBuffer<uint64_t> keys(work->keys[cur], work->keys[1 - cur]);
	cub::DoubleBuffer<long long> rows(work->rows[cur], work->rows[1 - cur]);
	size_t		bytes = 0;
	cudaError_t code;

	if (segments > work->max_segments || (size_t) ((long long) nq * n) > work->capacity)
		return cudaErrorInvalidValue;
	group_offsets_kernel<<<blocks_for(segments), THREADS, 0, stream>>>(work->begin, work->end,
																		segments, groups, n);
	if ((code = cvcuda_check_launch(stream)) != cudaSuccess)
		return code;
	code = cub::DeviceSegmentedSort::StableSortPairs(nullptr, bytes, keys, rows,
													 (long long) nq * n, segments,
													 work->begin, work->end, stream);
	if (code == cudaSuccess)
		code = ensure_scratch(work, bytes);
	if (code == cudaSuccess)
		code = cub::DeviceSegmentedSort::StableSortPairs(work->scratch, bytes, keys, rows,
														 (long long) nq * n, segments,
														 work->begin, work->end, stream);
	if (code == cudaSuccess)
		code = cvcuda_check_launch(stream);
	if (code != cudaSuccess)
		return code;
	*which = keys.Current() == work->keys[cur] ? cur : 1 - cur;
	// CUB moves keys and values together; anything else would be a CUB bug.
	if (rows.Current() != work->rows[*which])
		return cudaErrorUnknown;
	return cudaSuccess;
}

cudaError_t
cvcuda_topk_reduce(TopkWork *work, int *which, int nq, long long n, int k, long long *stride,
				   cudaStream_t stream)
{
	for (;;)
	{
		long long	groups = (n + CVCUDA_TOPK_GROUP - 1) / CVCUDA_TOPK_GROUP;
		long long	last = n - (groups - 1) * CVCUDA_TOPK_GROUP;
		long long	kept = (groups - 1) * k + (last < k ? last : k);
		cudaError_t code = sort_groups(work, which, nq, n, stream);
		int			from = *which;

		if (code != cudaSuccess || groups == 1)
		{
			*stride = n;
			return code;
		}
		compact_kernel<<<blocks_for((long long) nq * kept), THREADS, 0, stream>>>(
			work->keys[from], work->rows[from], n, work->keys[1 - from], work->rows[1 - from],
			kept, nq, k);
		if ((code = cvcuda_check_launch(stream)) != cudaSuccess)
			return code;
		*which = 1 - from;
		n = kept;
	}
}
