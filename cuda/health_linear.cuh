// health_linear.cuh: what the linear statistics families (centroid,
// two-means, neighbour, potential) share inside clustervec_cuda.so: the
// tile plan that maps a chunk's variable-size clusters onto one launch,
// the launchers health.cu calls, and small device helpers (warp and block
// sums in a fixed order, row visits).
//
// The plan: every cluster is cut into tiles of at most tile_rows members;
// one block works on one tile, so thousands of clusters of any size go in
// one launch and a large cluster spans many blocks.  A cluster of one tile
// is finished by its block; the tiles of larger clusters write float64
// partials into a slot, merged per cluster in a fixed order (no atomics).
#ifndef CVCUDA_HEALTH_LINEAR_CUH
#define CVCUDA_HEALTH_LINEAR_CUH

#include "health_kernels.cuh"

struct HealthPlan
{
	int			tile_rows;		// members per tile (a multiple of 32)
	long long	ntiles;
	const long long *tile_cluster;	// device, ntiles: the tile's cluster (chunk index)
	const long long *tile_first;	// device, ntiles: its first member row
	const long long *tile_slot;	// device, ntiles: partial slot, -1 for one-tile clusters
	const long long *cluster_tiles;	// device, nclusters + 1: first tile of each cluster
	long long	nslots;			// tiles of multi-tile clusters
	const long long *multi;		// device, nmulti: the clusters of several tiles
	long long	nmulti;
};

// The neighbour table on the device (CvCudaCentroidSet's buffers).
struct HealthSet
{
	long long	k;
	int			d;
	int			m;
	const double *centroids;	// k x d
	const double *mean_dist;	// k
	const double *mean_norm;	// k
	long long  *nearest;		// k x m
	double	   *nearest_dist;	// k x m
	double	   *db_ratio;		// k
};

// Every launcher allocates its scratch first, then records timer.start,
// enqueues its kernels, records timer.stop and waits: the events time the
// kernels only (cvcuda_health_timings).
struct HealthTimer
{
	cudaEvent_t start;
	cudaEvent_t stop;
};

// 1. Section 1 but novelty and between_ss: writes centroids (nclusters x d)
// and every column of stats (the others NULL).
CvCudaStatus health_centroid_launch(const HealthChunk *chunk, const HealthPlan *plan,
									double *centroids, const HealthTimer *timer,
									CvCudaError *err);

// 2. Two-means: split_* and side (total bytes).
CvCudaStatus health_twomeans_launch(const HealthChunk *chunk, const HealthPlan *plan,
									uint8_t *side, const HealthTimer *timer,
									CvCudaError *err);

// 5. The neighbour table of every centroid of set.
CvCudaStatus health_table_launch(const HealthSet *set, cudaStream_t stream,
								 const HealthTimer *timer, CvCudaError *err);

// 5. The neighbour family's columns of the chunk's clusters.
CvCudaStatus health_neighbour_launch(const HealthChunk *chunk, const HealthPlan *plan,
									 const HealthSet *set, const HealthTimer *timer,
									 CvCudaError *err);

// 4. The potential's columns (needs sigma and nearest_dist in stats).
CvCudaStatus health_potential_launch(const HealthChunk *chunk, const HealthPlan *plan,
									 long long k, const HealthTimer *timer,
									 CvCudaError *err);

// A launch's error as the entry point's status.
static inline CvCudaStatus
health_launched(cudaStream_t stream, const char *what, CvCudaError *err)
{
	cudaError_t code = cvcuda_check_launch(stream);

	if (code != cudaSuccess)
		return cvcuda_record_cuda_error(code, what, err);
	return CVCUDA_OK;
}

#ifdef __CUDACC__

#define HEALTH_EPS CV_HEALTH_EPS

// Sum of a double over the warp (every lane gets it), a fixed tree.
static __device__ __forceinline__ double
warp_sum(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// Sum over a block of up to 1024 threads (a fixed tree); every thread gets it.
// scratch: 32 doubles of shared memory; the block must call it together.
static __device__ __forceinline__ double
block_sum(double v, double *scratch)
{
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = (blockDim.x + 31) >> 5;

	v = warp_sum(v);
	__syncthreads();
	if (lane == 0)
		scratch[warp] = v;
	__syncthreads();
	v = lane < warps ? scratch[lane] : 0.0;
	if (warp == 0)
		v = warp_sum(v);
	if (threadIdx.x == 0)
		scratch[0] = v;
	__syncthreads();
	v = scratch[0];
	__syncthreads();
	return v;
}

// Ordered sum of part[t * stride + j] over tiles t of [t0, t1) by one block.
static __device__ __forceinline__ double
block_sum_tiles(const double *part, long long t0, long long t1, long long stride,
				long long j, double *scratch)
{
	double		s = 0;

	for (long long t = t0 + threadIdx.x; t < t1; t += blockDim.x)
		s += part[t * stride + j];
	return block_sum(s, scratch);
}

// Calls f(j, value) for the elements of row (d floats) that lane owns; float4
// loads when d is a multiple of 4 (rows are then 16-byte aligned).
template <typename F>
static __device__ __forceinline__ void
visit_row(const float *__restrict__ row, int d, int lane, F f)
{
	if ((d & 3) == 0)
	{
		const float4 *r4 = reinterpret_cast<const float4 *>(row);

		for (int q = lane; q < (d >> 2); q += 32)
		{
			float4		v = __ldg(r4 + q);

			f(4 * q, v.x);
			f(4 * q + 1, v.y);
			f(4 * q + 2, v.z);
			f(4 * q + 3, v.w);
		}
	}
	else
		for (int j = lane; j < d; j += 32)
			f(j, __ldg(row + j));
}

// Sets a column's value (not NULL).
static __device__ __forceinline__ void
stat_set(CvClusterStats *s, int col, double v)
{
	s->value[col] = v;
	s->is_null[col] = false;
}

// Marks a column NULL.
static __device__ __forceinline__ void
stat_null(CvClusterStats *s, int col)
{
	s->value[col] = 0;
	s->is_null[col] = true;
}

#endif

#endif
