// knn_distance.cu: L2 distances of a tile of queries against a tile of rows,
// bit for bit the CPU path's (sqrt of src/math's l2_squared): the lane
// arithmetic and its tiling are lane_tile.cuh's; what is this file's own is
// which pairs a block takes (a TILE x TILE tile of queries x rows) and what
// becomes of a distance (a correctly rounded sqrt, turned into a sort key).
#include "common.cuh"
#include "knn_distance.cuh"
#include "lane_tile.cuh"

__global__ static void __launch_bounds__(TILE_THREADS)
knn_distance_kernel(const float *__restrict__ queries, int nq,
					const float *__restrict__ rows, int nrows, int dims,
					uint64_t *__restrict__ keys, long long *__restrict__ rows_out,
					long long stride, long long offset, long long row_base)
{
	__shared__ double sa[TILE][STAGE];
	__shared__ double sb[TILE][STAGE];
	const LaneTilePlace at = lane_tile_place();
	const int	q0 = blockIdx.y * TILE;
	const int	r0 = blockIdx.x * TILE;
	const double sum = lane_tile_sum<LaneL2>(sa, sb, at, queries, nq, q0, rows, nrows, r0, dims);
	const int	q = lane_pair_a(at, q0);
	const int	r = lane_pair_b(at, r0);

	if (q < nq && r < nrows)
	{
		long long	where = (long long) q * stride + offset + r;

		keys[where] = cvcuda_distance_key(__dsqrt_rn(sum));
		rows_out[where] = row_base + r;
	}
}

cudaError_t
cvcuda_launch_knn_distance(const float *d_queries, int nq, const float *d_rows, int nrows,
						   int dims, uint64_t *keys, long long *rows_out, long long stride,
						   long long offset, long long row_base, cudaStream_t stream)
{
	dim3		grid((nrows + TILE - 1) / TILE, (nq + TILE - 1) / TILE);

	if (nq <= 0 || nrows <= 0)
		return cudaSuccess;
	if (grid.y > 65535)
		return cudaErrorInvalidConfiguration;
	knn_distance_kernel<<<grid, TILE_THREADS, 0, stream>>>(d_queries, nq, d_rows, nrows, dims,
														   keys, rows_out, stride, offset,
														   row_base);
	return cvcuda_check_launch(stream);
}
