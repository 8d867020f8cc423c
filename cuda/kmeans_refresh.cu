// kmeans_refresh.cu: cvcuda_kmeans_refresh, k-means++ seeding's refresh:
// dist[i] = min(dist[i], l2_squared(point i, centre j)) over the pending
// centres, with l2_squared bit for bit src/math's (distance_lanes.h):
//
//   sixteen float64 lanes; element j goes to lane j % 16, in index order;
//   each term d = (double) a - (double) b, then d * d, then lane += d * d,
//   three separate roundings; then the fold lane i += lane i + 8, + 4, + 2,
//   + 1.
//
// The device code is knn_distance.cu's (same tile, same lanes, same
// butterfly fold, same zero padding argument; see there), with the sqrt
// and key dropped: the intrinsics pin every rounding and cuda.mk compiles
// this file with -fmad=false too.  A block owns 16 points and walks all the
// centres 16 at a time, keeping each pair-thread's running minimum; the 16
// minima of a point are then combined in shared memory (a minimum is exact,
// so the order does not matter) and folded into dist.  Seeds drawn from
// these values therefore equal the CPU path's.
#include <cmath>

#include "common.cuh"
#include "kmeans_args.h"

#define TILE 16					// points and centres per block step
#define MICRO 4					// points and centres per thread group
#define LANES 16				// CV_DISTANCE_LANES
#define STAGE 64				// dimensions staged per step (a multiple of LANES)
#define THREADS (TILE / MICRO * TILE / MICRO * LANES)

// Widens a TILE x STAGE slab of a row-major float matrix into shared doubles.
__device__ static void
stage_slab(double (*slab)[STAGE], const float *__restrict__ matrix, long long count,
		   long long first, int dims, int d0)
{
	for (int e = threadIdx.x; e < TILE * STAGE; e += THREADS)
	{
		int			i = e / STAGE;
		int			j = e % STAGE;
		long long	item = first + i;
		int			d = d0 + j;

		slab[i][j] = (item < count && d < dims) ?
			(double) matrix[(size_t) item * dims + d] : 0.0;
	}
}

__global__ static void __launch_bounds__(THREADS)
kmeans_refresh_kernel(const float *__restrict__ points, long long n,
					  const float *__restrict__ centres, int count, int dims,
					  double *__restrict__ dist)
{
	__shared__ double sp[TILE][STAGE];
	__shared__ double sc[TILE][STAGE];
	__shared__ double smin[TILE][TILE];
	const int	lane = threadIdx.x % LANES;
	const int	group = threadIdx.x / LANES;
	const int	gp = group / (TILE / MICRO) * MICRO;	// first point of the micro-tile
	const int	gc = group % (TILE / MICRO) * MICRO;	// first centre of the micro-tile
	const long long p0 = (long long) blockIdx.x * TILE;
	double		best = INFINITY;

	for (int c0 = 0; c0 < count; c0 += TILE)
	{
		double		acc[MICRO][MICRO];

#pragma unroll
		for (int i = 0; i < MICRO; i++)
#pragma unroll
			for (int m = 0; m < MICRO; m++)
				acc[i][m] = 0.0;
		for (int d0 = 0; d0 < dims; d0 += STAGE)
		{
			stage_slab(sp, points, n, p0, dims, d0);
			stage_slab(sc, centres, count, c0, dims, d0);
			__syncthreads();
#pragma unroll
			for (int t = 0; t < STAGE / LANES; t++)
			{
				const int	j = t * LANES + lane;	// element d0 + j, lane j % 16
				double		a[MICRO],
							b[MICRO];

#pragma unroll
				for (int i = 0; i < MICRO; i++)
				{
					a[i] = sp[gp + i][j];
					b[i] = sc[gc + i][j];
				}
#pragma unroll
				for (int i = 0; i < MICRO; i++)
#pragma unroll
					for (int m = 0; m < MICRO; m++)
					{
						double		d = __dsub_rn(a[i], b[m]);

						acc[i][m] = __dadd_rn(acc[i][m], __dmul_rn(d, d));
					}
			}
			__syncthreads();
		}
#pragma unroll
		for (int step = LANES / 2; step >= 1; step /= 2)
#pragma unroll
			for (int i = 0; i < MICRO; i++)
#pragma unroll
				for (int m = 0; m < MICRO; m++)
					acc[i][m] = __dadd_rn(acc[i][m],
										  __shfl_xor_sync(0xffffffffu, acc[i][m], step, LANES));

		// thread 'lane' of the group keeps pair 'lane': point gp + lane / 4, centre gc + lane % 4
		double		mine = INFINITY;

#pragma unroll
		for (int p = 0; p < MICRO * MICRO; p++)
			if (p == lane)
				mine = acc[p / MICRO][p % MICRO];
		if (c0 + gc + lane % MICRO < count && mine < best)
			best = mine;
	}

	// point gp + lane / 4 has 16 minima: 4 lanes x 4 centre groups
	smin[gp + lane / MICRO][(gc / MICRO) * MICRO + lane % MICRO] = best;
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
		kmeans_refresh_kernel<<<(unsigned) ((n + TILE - 1) / TILE), THREADS, 0, stream>>>(
			static_cast<const float *>(points->data), n, d_centres.get(), count, d,
			static_cast<double *>(dist->data));
		CVCUDA_TRY(cvcuda_check_launch(stream), "kmeans_refresh: launch", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "kmeans_refresh", err);
		return cvcuda_set_ok(err);
	});
}
