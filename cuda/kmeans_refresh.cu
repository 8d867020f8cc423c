// kmeans_refresh.cu: cvcuda_kmeans_refresh, k-means++ seeding's refresh:
// dist[i] = min(dist[i], l2_squared(point i, centre j)) over the pending
// centres, with l2_squared bit for bit src/math's.  The lane arithmetic and
// its tiling are lane_tile.cuh's (as knn_distance.cu's, without the sqrt);
// what is this file's own is the minimum: a block owns TILE points and
// walks all the centres TILE at a time, each pair-thread keeping its
// running minimum; the TILE minima of a point are then combined in shared
// memory (a minimum is exact, so the order does not matter) and folded
// into dist.  Seeds drawn from these values therefore equal the CPU path's.
#include <cmath>

#include "common.cuh"
#include "kmeans_args.h"
#include "lane_tile.cuh"

__global__ static void __launch_bounds__(TILE_THREADS)
kmeans_refresh_kernel(const float *__restrict__ points, long long n,
					  const float *__restrict__ centres, int count, int dims,
					  double *__restrict__ dist)
{
	__shared__ double sa[TILE][STAGE];
	__shared__ double sb[TILE][STAGE];
	__shared__ double smin[TILE][TILE];
	const LaneTilePlace at = lane_tile_place();
	const long long p0 = (long long) blockIdx.x * TILE;
	double		best = INFINITY;

	for (int c0 = 0; c0 < count; c0 += TILE)
	{
		double		sum = lane_tile_sum<LaneL2, long long>(sa, sb, at, points, n, p0, centres,
														   count, c0, dims);

		if (lane_pair_b(at, c0) < count && sum < best)
			best = sum;
	}

	// each point has TILE minima, one per centre column of the tile
	smin[lane_pair_a(at, 0)][lane_pair_b(at, 0)] = best;
	__syncthreads();
	if (threadIdx.x < TILE && p0 + threadIdx.x < n)
	{
		long long	i = p0 + threadIdx.x;
		double		v = dist[i];

		for (int m = 0; m < TILE; m++)
			if (smin[threadIdx.x][m] < v)
				v = smin[threadIdx.x][m];
		dist[i] = v;
	}
}

extern "C" CvCudaStatus
cvcuda_kmeans_refresh(const CvCudaBuffer *points, long long n, int d, const float *centres,
					  int count, CvCudaBuffer *dist, CvCudaError *err)
{
	return cvcuda_guard("kmeans_refresh", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_kmeans_check_refresh(points, n, d, centres, count, dist,
														  err);
		cudaStream_t stream;
		DeviceArray<float> d_centres;

		if (status != CVCUDA_OK)
			return status;
		if (n == 0 || count == 0)
			return cvcuda_set_ok(err);
		CVCUDA_TRY(cvcuda_stream(&stream), "kmeans_refresh: stream", err);
		CVCUDA_TRY(d_centres.allocate((size_t) count * d), "kmeans_refresh: cudaMalloc", err);
		CVCUDA_TRY(cudaMemcpyAsync(d_centres.get(), centres, sizeof(float) * (size_t) count * d,
								   cudaMemcpyHostToDevice, stream),
				   "kmeans_refresh: copy centres", err);
		kmeans_refresh_kernel<<<(unsigned) ((n + TILE - 1) / TILE), TILE_THREADS, 0, stream>>>(
			static_cast<const float *>(points->data), n, d_centres.get(), count, d,
			static_cast<double *>(dist->data));
		CVCUDA_TRY(cvcuda_check_launch(stream), "kmeans_refresh: launch", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "kmeans_refresh", err);
		return cvcuda_set_ok(err);
	});
}
