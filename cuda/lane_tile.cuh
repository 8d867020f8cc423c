// lane_tile.cuh: the float64 lane arithmetic of the GPU distances, in one
// place: knn_distance.cu, kmeans_refresh.cu and ivf_search.cu must all agree
// bit for bit with the CPU path (src/math/distance_lanes.h), so the order of
// every operation is part of the contract and lives only here:
//
//   sixteen float64 lanes; element j goes to lane j % 16, in index order;
//   each term is rounded on its own (L2: d = (double) a - (double) b, then
//   d * d, then lane += d * d; inner product: lane += (double) a * (double) b);
//   then the fold lane i += lane i + 8, + 4, + 2, + 1.
//
// Why the code looks as it does:
// - The intrinsics (__dsub_rn, __dmul_rn, __dadd_rn) pin every rounding, so
//   no multiply-add can be contracted whatever the flags (cuda.mk also
//   builds the three files with -fmad=false): a fused d * d + lane rounds
//   once where the CPU rounds twice.
// - The sixteen lanes of a pair live in sixteen consecutive threads of one
//   warp, lane t summing elements t, t + 16, ... in index order exactly as
//   CPU lane t does.  The fold is a butterfly of shuffles: xor-step s adds
//   lane i and lane i ^ s, the same two partial sums the CPU's tree adds at
//   that step (IEEE addition is commutative), so after steps 8, 4, 2, 1
//   every thread holds the CPU's fold.
// - Past the last dimension both slabs hold zeros, whose term (+0 for
//   either family) added to a lane leaves it bit for bit unchanged, because
//   a lane is never -0 (it starts at +0, and x + y is -0 only when both
//   are): staging whole slabs changes no sum.  Rows past the end of a
//   matrix are zeros too; their pairs are never used.
//
// The tile: a block of TILE_THREADS threads computes a TILE x TILE tile of
// (a, b) pairs, a and b rows of two row-major float matrices.  Each group of
// sixteen threads owns a MICRO x MICRO micro-tile, thread t of the group
// accumulating lane t of its sixteen pairs; dimensions are staged through
// shared memory STAGE at a time, widened to double once per element.
#ifndef CVCUDA_LANE_TILE_CUH
#define CVCUDA_LANE_TILE_CUH

#include <cuda_runtime.h>

constexpr int LANES = 16;		// CV_DISTANCE_LANES of src/math/distance.h
constexpr int TILE = 16;		// rows of each matrix per block
constexpr int MICRO = 4;		// rows of each matrix per thread group
constexpr int STAGE = 64;		// dimensions staged per step
constexpr int TILE_THREADS = TILE / MICRO * (TILE / MICRO) * LANES;

// A group hands pair p of its micro-tile to its thread p, so the pairs must
// exactly cover the lanes; a stage must end on a lane boundary.
static_assert(MICRO * MICRO == LANES, "one pair per lane thread");
static_assert(STAGE % LANES == 0, "element j of a stage is in lane j % LANES");

// The L2 term: the subtraction in double, then three separate roundings.
struct LaneL2
{
	__device__ static __forceinline__ double add(double lane, double a, double b)
	{
		double		d = __dsub_rn(a, b);

		return __dadd_rn(lane, __dmul_rn(d, d));
	}
};

// The inner-product term: the product of two widened floats is exact in
// double, so only the addition rounds, as on the CPU.
struct LaneIp
{
	__device__ static __forceinline__ double add(double lane, double a, double b)
	{
		return __dadd_rn(lane, __dmul_rn(a, b));
	}
};

// One step of the fold across the sixteen threads of a lane group; every
// thread of the warp must call it.
__device__ __forceinline__ double
lane_fold_step(double v, int step)
{
	return __dadd_rn(v, __shfl_xor_sync(0xffffffffu, v, step, LANES));
}

// The CPU's fold of one pair's lanes: every thread of the group gets it.
__device__ __forceinline__ double
lane_fold(double v)
{
#pragma unroll
	for (int step = LANES / 2; step >= 1; step /= 2)
		v = lane_fold_step(v, step);
	return v;
}

// Where this thread sits in the tile: its lane, and the first a and b rows
// of its group's micro-tile.
struct LaneTilePlace
{
	int			lane;
	int			ga;
	int			gb;
};

__device__ __forceinline__ LaneTilePlace
lane_tile_place()
{
	const int	lane = threadIdx.x % LANES;
	const int	group = threadIdx.x / LANES;

	return {lane, group / (TILE / MICRO) * MICRO, group % (TILE / MICRO) * MICRO};
}

// The pair this thread is handed after the fold (lane_tile_pick): rows
// a0 + lane_pair_a and b0 + lane_pair_b of a tile whose first rows are a0, b0.
template <typename Index>
__device__ __forceinline__ Index
lane_pair_a(LaneTilePlace at, Index a0)
{
	return a0 + at.ga + at.lane / MICRO;
}

template <typename Index>
__device__ __forceinline__ Index
lane_pair_b(LaneTilePlace at, Index b0)
{
	return b0 + at.gb + at.lane % MICRO;
}

// Widens rows first.. of a row-major matrix, dimensions d0.., into a slab;
// zeros past either end (see the padding argument above).
template <typename Index>
__device__ __forceinline__ void
lane_tile_stage(double (*slab)[STAGE], const float *__restrict__ matrix, Index count,
				Index first, int dims, int d0)
{
	for (int e = threadIdx.x; e < TILE * STAGE; e += TILE_THREADS)
	{
		int			i = e / STAGE;
		int			j = e % STAGE;
		Index		item = first + i;
		int			d = d0 + j;

		slab[i][j] = (item < count && d < dims) ?
			(double) matrix[(size_t) item * dims + d] : 0.0;
	}
}

// Element j of the staged rows of this thread's micro-tile.
__device__ __forceinline__ void
lane_tile_load(double (&a)[MICRO], double (&b)[MICRO], const double (*sa)[STAGE],
			   const double (*sb)[STAGE], LaneTilePlace at, int j)
{
#pragma unroll
	for (int i = 0; i < MICRO; i++)
	{
		a[i] = sa[at.ga + i][j];
		b[i] = sb[at.gb + i][j];
	}
}

// The fold of all sixteen pairs, step by step across the pairs so that the
// shuffles of one step are independent of each other.
__device__ __forceinline__ void
lane_tile_fold(double (&acc)[MICRO][MICRO])
{
#pragma unroll
	for (int step = LANES / 2; step >= 1; step /= 2)
#pragma unroll
		for (int i = 0; i < MICRO; i++)
#pragma unroll
			for (int m = 0; m < MICRO; m++)
				acc[i][m] = lane_fold_step(acc[i][m], step);
}

// After the fold every thread holds all sixteen sums; it keeps pair
// 'lane'.  A run of selects, since a register array indexed by a
// thread-dependent value would go to local memory.
__device__ __forceinline__ double
lane_tile_pick(const double (&acc)[MICRO][MICRO], int lane)
{
	double		mine = 0.0;

#pragma unroll
	for (int p = 0; p < MICRO * MICRO; p++)
		if (p == lane)
			mine = acc[p / MICRO][p % MICRO];
	return mine;
}

// The folded sum of pair (lane_pair_a, lane_pair_b) of the tile whose first
// rows are a0 of A (na rows) and b0 of B (nb rows), each dims floats; sa and
// sb are the block's two TILE x STAGE shared slabs.  Every thread of the
// block must call it (it synchronises the block).
//
// Why two arrays and the accumulation loop written out here (measured with
// nvcc 13.0 for sm_90): one struct for both slabs cost 8 to 16 more
// instructions a kernel, and handing acc by reference to a helper changed
// the register allocation and the schedule of the hot loop.
template <class Term, typename Index>
__device__ __forceinline__ double
lane_tile_sum(double (*sa)[STAGE], double (*sb)[STAGE], LaneTilePlace at,
			  const float *__restrict__ A, Index na, Index a0,
			  const float *__restrict__ B, Index nb, Index b0, int dims)
{
	double		acc[MICRO][MICRO];

#pragma unroll
	for (int i = 0; i < MICRO; i++)
#pragma unroll
		for (int m = 0; m < MICRO; m++)
			acc[i][m] = 0.0;
	for (int d0 = 0; d0 < dims; d0 += STAGE)
	{
		lane_tile_stage(sa, A, na, a0, dims, d0);
		lane_tile_stage(sb, B, nb, b0, dims, d0);
		__syncthreads();
		// element j of the slab is lane j % LANES, taken in index order
#pragma unroll
		for (int t = 0; t < STAGE / LANES; t++)
		{
			double		a[MICRO],
						b[MICRO];

			lane_tile_load(a, b, sa, sb, at, t * LANES + at.lane);
#pragma unroll
			for (int i = 0; i < MICRO; i++)
#pragma unroll
				for (int m = 0; m < MICRO; m++)
					acc[i][m] = Term::add(acc[i][m], a[i], b[m]);
		}
		__syncthreads();
	}
	lane_tile_fold(acc);
	return lane_tile_pick(acc, at.lane);
}

#endif
