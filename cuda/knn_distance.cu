// knn_distance.cu: L2 distances of a tile of queries against a tile of rows,
// bit for bit the CPU path's (src/math/distance_lanes.h):
//
//   sixteen float64 lanes; element j goes to lane j % 16, in index order;
//   each term d = (double) a - (double) b, then d * d, then lane += d * d,
//   three separate roundings; then the fold lane i += lane i + 8, + 4, + 2,
//   + 1; then a correctly rounded sqrt.
//
// The intrinsics (__dsub_rn, __dmul_rn, __dadd_rn, __dsqrt_rn) pin every
// rounding, and cuda.mk compiles this file with -fmad=false as well, so no
// multiply-add is ever contracted.
//
// Mapping: a block of 256 threads computes a 16 x 16 tile of (query, row)
// pairs.  Thread t owns accumulation lane t % 16 of a 4 x 4 micro-tile of
// pairs (group t / 16), so the sixteen lanes of a pair live in sixteen
// consecutive threads of one warp, each summing its own elements in index
// order exactly as the CPU lane does.  The fold is then a butterfly of
// shuffles: after xor-steps 8, 4, 2, 1 every thread of the group holds the
// fold's result, because each step adds the same two partial sums as the
// CPU's tree (IEEE addition is commutative, so a + b and b + a agree).
// Dimensions are staged through shared memory 64 at a time, widened to
// double once per element; past the last dimension, row and query are padded
// with zeros, whose term 0 * 0 added to a lane leaves it bit for bit
// unchanged (lanes are never -0), so padding cannot change a result.
#include "common.cuh"
#include "knn_distance.cuh"

#define TILE 16					// queries and rows per block
#define MICRO 4					// queries and rows per thread group
#define LANES 16				// CV_DISTANCE_LANES
#define STAGE 64				// dimensions staged per step (a multiple of LANES)
#define THREADS (TILE / MICRO * TILE / MICRO * LANES)

// Widens a TILE x STAGE slab of a row-major float matrix into shared doubles.
__device__ static void
stage_slab(double (*slab)[STAGE], const float *__restrict__ matrix, int count,
		   int first, int dims, int d0)
{
	for (int e = threadIdx.x; e < TILE * STAGE; e += THREADS)
	{
		int			i = e / STAGE;
		int			j = e % STAGE;
		int			item = first + i;
		int			d = d0 + j;

		slab[i][j] = (item < count && d < dims) ?
			(double) matrix[(size_t) item * dims + d] : 0.0;
	}
}

__global__ static void __launch_bounds__(THREADS)
knn_distance_kernel(const float *__restrict__ queries, int nq,
					const float *__restrict__ rows, int nrows, int dims,
					uint64_t *__restrict__ keys, long long *__restrict__ rows_out,
					long long stride, long long offset, long long row_base)
{
	__shared__ double sq[TILE][STAGE];
	__shared__ double sr[TILE][STAGE];
	const int	lane = threadIdx.x % LANES;
	const int	group = threadIdx.x / LANES;
	const int	gq = group / (TILE / MICRO) * MICRO;	// first query of the micro-tile
	const int	gr = group % (TILE / MICRO) * MICRO;	// first row of the micro-tile
	const int	q0 = blockIdx.y * TILE;
	const int	r0 = blockIdx.x * TILE;
	double		acc[MICRO][MICRO];

#pragma unroll
	for (int i = 0; i < MICRO; i++)
#pragma unroll
		for (int m = 0; m < MICRO; m++)
			acc[i][m] = 0.0;

	for (int d0 = 0; d0 < dims; d0 += STAGE)
	{
		stage_slab(sq, queries, nq, q0, dims, d0);
		stage_slab(sr, rows, nrows, r0, dims, d0);
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
				a[i] = sq[gq + i][j];
				b[i] = sr[gr + i][j];
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

	// The fold, as a butterfly within the 16 threads of the group.
#pragma unroll
	for (int step = LANES / 2; step >= 1; step /= 2)
#pragma unroll
		for (int i = 0; i < MICRO; i++)
#pragma unroll
			for (int m = 0; m < MICRO; m++)
				acc[i][m] = __dadd_rn(acc[i][m],
									  __shfl_xor_sync(0xffffffffu, acc[i][m], step, LANES));

	// Every thread of the group holds all sixteen sums: thread 'lane' writes pair 'lane'.
	double		mine = 0.0;

#pragma unroll
	for (int p = 0; p < MICRO * MICRO; p++)
		if (p == lane)
			mine = acc[p / MICRO][p % MICRO];

	const int	q = q0 + gq + lane / MICRO;
	const int	r = r0 + gr + lane % MICRO;

	if (q < nq && r < nrows)
	{
		long long	at = (long long) q * stride + offset + r;

		keys[at] = cvcuda_distance_key(__dsqrt_rn(mine));
		rows_out[at] = row_base + r;
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
	knn_distance_kernel<<<grid, THREADS, 0, stream>>>(d_queries, nq, d_rows, nrows, dims,
													  keys, rows_out, stride, offset, row_base);
	return cvcuda_check_launch(stream);
}
