// ivf_search.cu: cvcuda_ivf_search, IVF search over a mirror held in
// device buffers, with answers bit for bit those of the CPU shim (and so of
// the index scan over the same lists).
//
// For each batch of queries:
//
// 1. centroid_keys_kernel: every (query, list) centroid distance, exactly
//    as src/ivf/metric.c ranks lists (l2_squared for L2, the negated
//    inner_product otherwise; NaN as +inf), computed bit for bit as
//    src/math does by lane_tile.cuh's tile, stored as order keys.  Skipped
//    when every list is probed.
// 2. probe_select_kernel: one block per query selects the set of its
//    probes nearest lists by (key, list) with a radix selection (ties to the
//    lower list).  Only the set matters: the answer is the best k rows of
//    the union of the probed lists, whatever order they are read in.
//    Queries are then ordered by the lowest list they probe, so that
//    neighbouring blocks share lists and read them from L2.
// 3. ivf_scan_kernel: one block per query scans its probed lists.  A float32
//    pass computes for every row a proven lower bound of its exact distance
//    and keeps the K1 = cap / 2 rows of smallest bound in the block's top-k
//    engine (topk_engine.cuh, shared memory).  Those get their exact float64
//    distance (bit for bit src/math's) and are sorted by (distance,
//    position).  If every row was kept, or the k-th exact distance is below
//    the K1-th bound (so no row left out can reach the top k, ties
//    included), that is the answer; otherwise (many equal rows, say) the
//    block scans its lists again with exact distances only.
//    A small batch (a single query, say) would leave most of the GPU idle
//    with one block per query: then each query's probed rows (the probed
//    lists end to end) are split into segments, one block each, every
//    segment finds its own exact top k as above, and merge_kernel keeps
//    the best k of the segments' answers per query.  The order (distance,
//    position) is total, so the merge of each segment's exact best k is the
//    exact best k of the whole.
//
// Lower bounds (u = 2^-24, n = d), all computed in float32 without
// contraction (cuda.mk compiles this file with -fmad=false):
//   L2: s32 (1 - (n + 4) u) - (n + 1) FLT_MIN, as src/math/distance_bound.c,
//       whose argument does not depend on the summation order; then sqrt.
//   inner product: -dot32 - ((2n + 8) u abs32 + (n + 2) FLT_MIN), where
//       abs32 = sum |q_j v_j| bounds the dot product's rounding error
//       (n u sum |q_j v_j|, plus underflow).
//   cosine: 1 - min(1, c + (2n + 10) u + 1e-12), c = dot32 /
//       sqrt(qq32 vv32); by Cauchy-Schwarz the dot product's error is at
//       most n u sqrt(qq vv), and each norm's relative error (n + 2) u.
//       Norms below 2^-40 (zero vectors: NaN distances) give no bound.
// A non-finite float32 sum gives no bound (-inf): such rows are always
// kept, and measured exactly.
#include <cfloat>
#include <climits>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include <cub/cub.cuh>

#include "common.cuh"
#include "lane_tile.cuh"
#include "topk_engine.cuh"

#define SCAN_THREADS 256
#define GROUP LANES				// threads per row: the sixteen float64 lanes
#define GROUPS (SCAN_THREADS / GROUP)
#define ROWS_PER_GROUP 4		// rows a group measures per round of the float32 pass
#define SELECT_THREADS 256

// Largest query batch of the tile kernel's grid (65535 tiles in y).
#define MAX_QUERY_BATCH (65535 * TILE)

// ---------------------------------------------------------------------
// 1. Centroid keys
// ---------------------------------------------------------------------

// The lane term of a metric's list ranking: L2's, or the inner product's
// for the others (src/ivf/metric.c).
template <int METRIC>
using CentroidTerm =
	typename std::conditional<METRIC == CV_METRIC_L2, LaneL2, LaneIp>::type;

// keys[q * lists + l] = order key of the centroid distance of query q to list l.
template <int METRIC>
__global__ static void __launch_bounds__(TILE_THREADS)
centroid_keys_kernel(const float *__restrict__ queries, int nq,
					 const float *__restrict__ centroids, int lists, int dims,
					 uint64_t *__restrict__ keys)
{
	__shared__ double sa[TILE][STAGE];
	__shared__ double sb[TILE][STAGE];
	const LaneTilePlace at = lane_tile_place();
	const int	q0 = blockIdx.y * TILE;
	const int	r0 = blockIdx.x * TILE;
	const double sum = lane_tile_sum<CentroidTerm<METRIC>>(sa, sb, at, queries, nq, q0, centroids,
															lists, r0, dims);
	const int	q = lane_pair_a(at, q0);
	const int	r = lane_pair_b(at, r0);

	if (q < nq && r < lists)
	{
		double		v = METRIC == CV_METRIC_L2 ? sum : -sum;

		if (v != v)
			v = __longlong_as_double(0x7ff0000000000000LL);
		if (v == 0.0)
			v = 0.0;			// -0 and +0 rank as equals
		keys[(size_t) q * lists + r] = cvcuda_order_key(v);
	}
}

// ---------------------------------------------------------------------
// 2. Probe selection
// ---------------------------------------------------------------------

// probe[q * probes ..] = the probes lists of smallest (key, list), in list order.
__global__ static void __launch_bounds__(SELECT_THREADS)
probe_select_kernel(const uint64_t *__restrict__ keys, int lists, int probes,
					int *__restrict__ probe)
{
	__shared__ SelectShared sh;
	__shared__ int scratch[SELECT_THREADS / 32 + 1];
	const uint64_t *row = keys + (size_t) blockIdx.x * lists;
	int		   *out = probe + (size_t) blockIdx.x * probes;
	uint64_t	threshold;
	int			equal_taken;
	int			equal_seen = 0;
	int			taken = 0;

	cvcuda_block_select_threshold<SELECT_THREADS>(row, lists, probes, &sh, &threshold,
												  &equal_taken);
	for (int base = 0; base < lists; base += SELECT_THREADS)
	{
		const int	l = base + threadIdx.x;
		const uint64_t key = l < lists ? row[l] : CVCUDA_KEY_NONE;
		const bool	equal = l < lists && key == threshold;
		int			equal_total,
					take_total;
		int			rank = equal_seen + block_exclusive_count<SELECT_THREADS>(equal, scratch,
																			   &equal_total);
		const bool	take = l < lists && (key < threshold || (equal && rank < equal_taken));
		int			slot = taken + block_exclusive_count<SELECT_THREADS>(take, scratch,
																		  &take_total);

		if (take)
			out[slot] = l;
		equal_seen += equal_total;
		taken += take_total;
	}
}

// ---------------------------------------------------------------------
// 3. The scan
// ---------------------------------------------------------------------

// first[q] = the lowest list query q probes (its probe row is in list
// order), order[q] = q: sorted by first, queries that probe the same lists
// run in neighbouring blocks, so the lists they share are read from L2.
__global__ static void
first_probe_kernel(const int *__restrict__ probe, int probes, int nqb,
				   unsigned *__restrict__ first, int *__restrict__ order)
{
	int			q = blockIdx.x * blockDim.x + threadIdx.x;

	if (q < nqb)
	{
		first[q] = (unsigned) probe[(size_t) q * probes];
		order[q] = q;
	}
}

__device__ __forceinline__ float
fold_float(float s)
{
#pragma unroll
	for (int step = GROUP / 2; step >= 1; step /= 2)
		s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, step, GROUP));
	return s;
}

// The operator's exact distance of query q and row v, bit for bit
// src/math's; t is the thread's lane (0..15) in its group.  When live is
// false the thread still takes part in the shuffles (the result is unused).
template <int METRIC>
__device__ double
exact_distance(const float *__restrict__ q, const float *__restrict__ v, int d, int t, bool live)
{
	double		a0 = 0.0,
				a1 = 0.0,
				a2 = 0.0;

	if (live)
		for (int j = t; j < d; j += GROUP)
		{
			double		x = (double) __ldg(q + j);
			double		y = (double) __ldg(v + j);

			if (METRIC == CV_METRIC_L2)
				a0 = LaneL2::add(a0, x, y);
			else
			{
				a0 = LaneIp::add(a0, x, y);
				if (METRIC == CV_METRIC_COSINE)
				{
					a1 = LaneIp::add(a1, x, x);
					a2 = LaneIp::add(a2, y, y);
				}
			}
		}
	a0 = lane_fold(a0);
	if (METRIC == CV_METRIC_L2)
		return __dsqrt_rn(a0);
	if (METRIC == CV_METRIC_INNER_PRODUCT)
		return -a0;
	a1 = lane_fold(a1);
	a2 = lane_fold(a2);
	{
		double		sim = __ddiv_rn(a0, __dsqrt_rn(__dmul_rn(a1, a2)));

		if (sim != sim)
			return __longlong_as_double(0x7ff8000000000000LL);
		if (sim > 1.0)
			sim = 1.0;
		else if (sim < -1.0)
			sim = -1.0;
		return __dsub_rn(1.0, sim);
	}
}

// Float32 sums of one row for the bounds: L2 s1 = sum (q - v)^2; inner
// product s1 = sum q v, s2 = sum |q v|; cosine s1 = sum q v, s2 = sum q q,
// s3 = sum v v.  Folded across the group (every thread gets them).
template <int METRIC, bool VEC4>
__device__ void
float_sums(const float *__restrict__ q, const float *__restrict__ v, int d, int t, bool live,
		   float *s1, float *s2, float *s3)
{
	float		a = 0.0f,
				b = 0.0f,
				c = 0.0f;

	if (live)
	{
		if (VEC4)
		{
			const float4 *q4 = reinterpret_cast<const float4 *>(q);
			const float4 *v4 = reinterpret_cast<const float4 *>(v);

			for (int j = t; j < d / 4; j += GROUP)
			{
				float4		x = __ldg(q4 + j);
				float4		y = __ldg(v4 + j);
				float		xs[4] = {x.x, x.y, x.z, x.w};
				float		ys[4] = {y.x, y.y, y.z, y.w};

#pragma unroll
				for (int i = 0; i < 4; i++)
				{
					if (METRIC == CV_METRIC_L2)
					{
						float		e = __fsub_rn(xs[i], ys[i]);

						a = __fadd_rn(a, __fmul_rn(e, e));
					}
					else
					{
						float		p = __fmul_rn(xs[i], ys[i]);

						a = __fadd_rn(a, p);
						if (METRIC == CV_METRIC_INNER_PRODUCT)
							b = __fadd_rn(b, fabsf(p));
						else
						{
							b = __fadd_rn(b, __fmul_rn(xs[i], xs[i]));
							c = __fadd_rn(c, __fmul_rn(ys[i], ys[i]));
						}
					}
				}
			}
		}
		else
			for (int j = t; j < d; j += GROUP)
			{
				float		x = __ldg(q + j);
				float		y = __ldg(v + j);

				if (METRIC == CV_METRIC_L2)
				{
					float		e = __fsub_rn(x, y);

					a = __fadd_rn(a, __fmul_rn(e, e));
				}
				else
				{
					float		p = __fmul_rn(x, y);

					a = __fadd_rn(a, p);
					if (METRIC == CV_METRIC_INNER_PRODUCT)
						b = __fadd_rn(b, fabsf(p));
					else
					{
						b = __fadd_rn(b, __fmul_rn(x, x));
						c = __fadd_rn(c, __fmul_rn(y, y));
					}
				}
			}
	}
	*s1 = fold_float(a);
	if (METRIC != CV_METRIC_L2)
		*s2 = fold_float(b);
	if (METRIC == CV_METRIC_COSINE)
		*s3 = fold_float(c);
}

// A lower bound of the exact distance from the float32 sums (-inf: none).
template <int METRIC>
__device__ __forceinline__ double
distance_lower_bound(float s1, float s2, float s3, int d)
{
	const double u = 0x1p-24;
	const double n = (double) d;

	if (METRIC == CV_METRIC_L2)
	{
		if (!isfinite(s1))
			return -INFINITY;
		double		lb = (double) s1 * (1.0 - (n + 4) * u) - (n + 1) * (double) FLT_MIN;

		return lb > 0 ? __dsqrt_rn(lb) : 0.0;
	}
	if (METRIC == CV_METRIC_INNER_PRODUCT)
	{
		if (!isfinite(s1) || !isfinite(s2))
			return -INFINITY;
		return -(double) s1 - ((2 * n + 8) * u * (double) s2 + (n + 2) * (double) FLT_MIN);
	}
	if (!isfinite(s1) || !isfinite(s2) || !isfinite(s3) ||
		!(s2 >= 0x1p-40f) || !(s3 >= 0x1p-40f))
		return -INFINITY;
	{
		double		c = (double) s1 / sqrt((double) s2 * (double) s3);
		double		hi = c + ((2 * n + 10) * u + 1e-12);

		return 1.0 - (hi < 1.0 ? hi : 1.0);
	}
}

// The scan's shared state besides the engine's buffer.
struct ScanShared
{
	TopkShared	topk;
	double		bound_k1;		// the K1-th smallest lower bound
};

// Where probe p of this query starts and ends.
__device__ __forceinline__ void
probe_range(const long long *__restrict__ offsets, const int *__restrict__ probe, int p,
			long long *begin, long long *end)
{
	int			l = probe ? probe[p] : p;

	*begin = offsets[l];
	*end = offsets[l + 1];
}

// The rows of this block's segment: [first, last) of the query's probed
// rows counted end to end over its probes, in probe order.
struct Segment
{
	long long	first;
	long long	last;
};

// Probe p's rows inside the segment; *before counts the probed rows of the
// probes before p (the caller adds this probe's after the call).
__device__ __forceinline__ void
segment_range(const long long *__restrict__ offsets, const int *__restrict__ probe, int p,
			  Segment seg, long long before, long long *begin, long long *end)
{
	long long	b,
				e;

	probe_range(offsets, probe, p, &b, &e);
	*begin = b + (seg.first > before ? seg.first - before : 0);
	*end = e;
	if (before + (e - b) > seg.last)
		*end = b + (seg.last - before);
	if (*end < *begin)
		*end = *begin;
}

template <int METRIC, bool VEC4>
__global__ static void __launch_bounds__(SCAN_THREADS)
ivf_scan_kernel(const float *__restrict__ vectors, const long long *__restrict__ offsets,
				const float *__restrict__ queries, int d, const int *__restrict__ probes_of,
				const int *__restrict__ order, int probes, int k, int cap,
				long long *__restrict__ out_pos, double *__restrict__ out_dist,
				uint64_t *__restrict__ part_key, long long *__restrict__ part_pos)
{
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ ScanShared sh;
	BlockTopk<SCAN_THREADS> engine;
	const int	t = threadIdx.x % GROUP;
	const int	g = threadIdx.x / GROUP;
	const int	query = order ? order[blockIdx.x] : blockIdx.x;
	const float *q = queries + (size_t) query * d;
	const int  *probe = probes_of ? probes_of + (size_t) query * probes : nullptr;
	const int	k1 = cap / 2;
	const int	segments = gridDim.y;
	long long	all = 0,
				total,
				before;
	Segment		seg;
	bool		exact_only;

	engine.keys = reinterpret_cast<uint64_t *>(smem);
	engine.pos = reinterpret_cast<long long *>(smem + sizeof(uint64_t) * cap);
	engine.cap = cap;
	engine.st = &sh.topk;

	for (int p = 0; p < probes; p++)
	{
		long long	b,
					e;

		probe_range(offsets, probe, p, &b, &e);
		all += e - b;
	}
	seg.first = all * blockIdx.y / segments;
	seg.last = all * (blockIdx.y + 1) / segments;
	total = seg.last - seg.first;

	// Float32 pass: the K1 rows of smallest lower bound.
	engine.init(k1);
	before = 0;
	for (int p = 0; p < probes && before < seg.last; p++)
	{
		long long	begin,
					end,
					b,
					e;

		segment_range(offsets, probe, p, seg, before, &begin, &end);
		probe_range(offsets, probe, p, &b, &e);
		before += e - b;
		for (long long base = begin; base < end; base += GROUPS * ROWS_PER_GROUP)
		{
			engine.make_room(GROUPS * ROWS_PER_GROUP);
#pragma unroll
			for (int i = 0; i < ROWS_PER_GROUP; i++)
			{
				long long	r = base + (long long) i * GROUPS + g;
				bool		live = r < end;
				float		s1,
							s2 = 0,
							s3 = 0;

				float_sums<METRIC, VEC4>(q, vectors + (size_t) r * d, d, t, live, &s1, &s2, &s3);
				if (live && t == 0)
				{
					uint64_t	key = cvcuda_order_key(distance_lower_bound<METRIC>(s1, s2, s3, d));

					if (engine.accepts(key, r))
						engine.push(key, r);
				}
			}
		}
	}
	engine.finish();

	// Exact distances of the kept rows, then their order.
	if (threadIdx.x == 0)
		sh.bound_k1 = cvcuda_order_distance(engine.keys[k1 - 1]);
	__syncthreads();
	{
		const int	kept = engine.count();

		for (int base = 0; base < kept; base += GROUPS)
		{
			int			at = base + g;
			bool		live = at < kept;
			long long	r = live ? engine.pos[at] : 0;
			double		dist = exact_distance<METRIC>(q, vectors + (size_t) r * d, d, t, live);

			if (live && t == 0)
				engine.keys[at] = cvcuda_order_key(dist);
		}
		engine.sort();
		// Proven when nothing was left out, or the k-th exact distance is
		// strictly below every bound left out (all >= the K1-th bound).
		exact_only = !(total <= k1 ||
					   cvcuda_order_distance(engine.keys[k - 1]) < sh.bound_k1);
	}

	if (exact_only)
	{
		engine.init(k);
		before = 0;
		for (int p = 0; p < probes && before < seg.last; p++)
		{
			long long	begin,
						end,
						b,
						e;

			segment_range(offsets, probe, p, seg, before, &begin, &end);
			probe_range(offsets, probe, p, &b, &e);
			before += e - b;
			for (long long base = begin; base < end; base += GROUPS)
			{
				engine.make_room(GROUPS);

				long long	r = base + g;
				bool		live = r < end;
				double		dist = exact_distance<METRIC>(q, vectors + (size_t) (live ? r : 0) * d,
														  d, t, live);

				if (live && t == 0)
				{
					uint64_t	key = cvcuda_order_key(dist);

					if (engine.accepts(key, r))
						engine.push(key, r);
				}
			}
		}
		engine.finish();
	}

	for (int i = threadIdx.x; i < k; i += SCAN_THREADS)
	{
		bool		real = i < engine.count();
		size_t		at = (size_t) query * k + i;

		if (segments == 1)
		{
			out_pos[at] = real ? engine.pos[i] : -1;
			out_dist[at] = cvcuda_order_distance(real ? engine.keys[i] : CVCUDA_KEY_NONE);
		}
		else
		{
			at = ((size_t) query * segments + blockIdx.y) * k + i;
			part_key[at] = real ? engine.keys[i] : CVCUDA_KEY_NONE;
			part_pos[at] = real ? engine.pos[i] : LLONG_MAX;
		}
	}
}

// One block per query: the best k of its segments' best k (each exact and
// sorted), through the same engine.
__global__ static void __launch_bounds__(SCAN_THREADS)
merge_kernel(const uint64_t *__restrict__ part_key, const long long *__restrict__ part_pos,
			 int segments, int k, int cap, long long *__restrict__ out_pos,
			 double *__restrict__ out_dist)
{
	extern __shared__ __align__(16) unsigned char smem[];
	__shared__ TopkShared st;
	BlockTopk<SCAN_THREADS> engine;
	const size_t first = (size_t) blockIdx.x * segments * k;
	const int	n = segments * k;

	engine.keys = reinterpret_cast<uint64_t *>(smem);
	engine.pos = reinterpret_cast<long long *>(smem + sizeof(uint64_t) * cap);
	engine.cap = cap;
	engine.st = &st;
	engine.init(k);
	for (int base = 0; base < n; base += SCAN_THREADS)
	{
		const int	i = base + threadIdx.x;

		engine.make_room(SCAN_THREADS);
		if (i < n && part_pos[first + i] != LLONG_MAX &&
			engine.accepts(part_key[first + i], part_pos[first + i]))
			engine.push(part_key[first + i], part_pos[first + i]);
	}
	engine.finish();
	for (int i = threadIdx.x; i < k; i += SCAN_THREADS)
	{
		bool		real = i < engine.count();
		size_t		at = (size_t) blockIdx.x * k + i;

		out_pos[at] = real ? engine.pos[i] : -1;
		out_dist[at] = cvcuda_order_distance(real ? engine.keys[i] : CVCUDA_KEY_NONE);
	}
}

// ---------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------

// The engine's buffer: a power of two, at least 256 and 4k.
static int
scan_capacity(int k)
{
	int			cap = 256;

	while (cap < 4 * k)
		cap *= 2;
	return cap;
}

// The merge's buffer: a power of two holding k and one round of candidates.
static int
merge_capacity(int k)
{
	int			cap = 256;

	while (cap < k + SCAN_THREADS)
		cap *= 2;
	return cap;
}

// Raises a kernel's dynamic shared memory limit once per size it needs.
template <typename Kernel>
static cudaError_t
allow_shared(Kernel kernel, size_t smem, size_t *allowed)
{
	cudaError_t code = cudaSuccess;

	if (smem > *allowed)
	{
		code = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
									(int) smem);
		if (code == cudaSuccess)
			*allowed = smem;
	}
	return code;
}

// Where the scan writes: the answer, or (segments > 1) each segment's best
// k for merge_kernel.
struct ScanOutput
{
	long long  *pos;
	double	   *dist;
	int			segments;
	uint64_t   *part_key;
	long long  *part_pos;
};

template <int METRIC, bool VEC4>
static cudaError_t
launch_scan_typed(const float *vectors, const long long *offsets, const float *queries, int d,
				  const int *probe, const int *order, int probes, int k, int nqb,
				  const ScanOutput &out, cudaStream_t stream)
{
	static size_t scan_allowed = 48 << 10,
				merge_allowed = 48 << 10;
	int			cap = scan_capacity(k);
	size_t		smem = (size_t) cap * (sizeof(uint64_t) + sizeof(long long));
	cudaError_t code = allow_shared(ivf_scan_kernel<METRIC, VEC4>, smem, &scan_allowed);

	if (code != cudaSuccess)
		return code;
	ivf_scan_kernel<METRIC, VEC4><<<dim3(nqb, out.segments), SCAN_THREADS, smem, stream>>>(
		vectors, offsets, queries, d, probe, order, probes, k, cap, out.pos, out.dist,
		out.part_key, out.part_pos);
	code = cvcuda_check_launch(stream);
	if (code != cudaSuccess || out.segments == 1)
		return code;
	cap = merge_capacity(k);
	smem = (size_t) cap * (sizeof(uint64_t) + sizeof(long long));
	if ((code = allow_shared(merge_kernel, smem, &merge_allowed)) != cudaSuccess)
		return code;
	merge_kernel<<<nqb, SCAN_THREADS, smem, stream>>>(out.part_key, out.part_pos, out.segments, k,
													  cap, out.pos, out.dist);
	return cvcuda_check_launch(stream);
}

template <int METRIC>
static cudaError_t
launch_scan_metric(const float *vectors, const long long *offsets, const float *queries, int d,
				   const int *probe, const int *order, int probes, int k, int nqb,
				   const ScanOutput &out, cudaStream_t stream)
{
	if (d % 4 == 0)
		return launch_scan_typed<METRIC, true>(vectors, offsets, queries, d, probe, order, probes,
											   k, nqb, out, stream);
	return launch_scan_typed<METRIC, false>(vectors, offsets, queries, d, probe, order, probes,
											k, nqb, out, stream);
}

static cudaError_t
launch_scan(int metric, const float *vectors, const long long *offsets, const float *queries,
			int d, const int *probe, const int *order, int probes, int k, int nqb,
			const ScanOutput &out, cudaStream_t stream)
{
	if (metric == CV_METRIC_L2)
		return launch_scan_metric<CV_METRIC_L2>(vectors, offsets, queries, d, probe, order,
												probes, k, nqb, out, stream);
	if (metric == CV_METRIC_INNER_PRODUCT)
		return launch_scan_metric<CV_METRIC_INNER_PRODUCT>(vectors, offsets, queries, d, probe,
														   order, probes, k, nqb, out, stream);
	return launch_scan_metric<CV_METRIC_COSINE>(vectors, offsets, queries, d, probe, order,
												probes, k, nqb, out, stream);
}

static cudaError_t
launch_centroid_keys(int metric, const float *queries, int nqb, const float *centroids,
					 int lists, int d, uint64_t *keys, cudaStream_t stream)
{
	dim3		grid((lists + TILE - 1) / TILE, (nqb + TILE - 1) / TILE);

	if (metric == CV_METRIC_L2)
		centroid_keys_kernel<CV_METRIC_L2><<<grid, TILE_THREADS, 0, stream>>>(queries, nqb,
																				centroids, lists,
																				d, keys);
	else
		centroid_keys_kernel<CV_METRIC_INNER_PRODUCT><<<grid, TILE_THREADS, 0, stream>>>(queries, nqb,
																				centroids, lists,
																				d, keys);
	return cvcuda_check_launch(stream);
}

// Device memory one batch may use: CLUSTERVEC_CUDA_SEARCH_BUDGET (bytes),
// else the smaller of 512 MiB and a quarter of the free memory.
static double
search_budget(size_t free_bytes)
{
	const char *setting = getenv("CLUSTERVEC_CUDA_SEARCH_BUDGET");
	double		budget = (double) free_bytes / 4;

	if (setting != nullptr && strtod(setting, nullptr) > 0)
		return strtod(setting, nullptr);
	return budget < 536870912.0 ? budget : 536870912.0;
}

// The searches' device workspace, kept between calls (one thread calls the
// library); past KEPT_WORKSPACE bytes it is freed after the call, so a rare
// large batch does not hold memory the mirrors could use.
#define KEPT_WORKSPACE ((size_t) 64 << 20)

struct SearchBuffers
{
	GrowingArray<float> queries;
	GrowingArray<uint64_t> keys;
	GrowingArray<int> probe;
	GrowingArray<unsigned> first[2];
	GrowingArray<int> order[2];
	GrowingArray<unsigned char> scratch;
	GrowingArray<long long> out_pos;
	GrowingArray<double> out_dist;
	GrowingArray<uint64_t> part_key;
	GrowingArray<long long> part_pos;

	size_t bytes() const
	{
		return queries.bytes() + keys.bytes() + probe.bytes() + first[0].bytes() +
			first[1].bytes() + order[0].bytes() + order[1].bytes() + scratch.bytes() +
			out_pos.bytes() + out_dist.bytes() + part_key.bytes() + part_pos.bytes();
	}

	void release()
	{
		queries.release();
		keys.release();
		probe.release();
		for (int i = 0; i < 2; i++)
		{
			first[i].release();
			order[i].release();
		}
		scratch.release();
		out_pos.release();
		out_dist.release();
		part_key.release();
		part_pos.release();
	}
};

static SearchBuffers workspace;

// The checked host copy of the last list offsets searched, kept while the
// buffer holds the same contents (its version), so a stream of searches
// over one mirror does not read them back and synchronise every time.
static struct
{
	const CvCudaBuffer *buffer = nullptr;
	unsigned long long version = 0;
	std::vector<long long> offsets;
}			checked_offsets;

static CvCudaStatus
read_offsets(const CvCudaBuffer *list_offsets, int lists, int d, const CvCudaBuffer *vectors,
			 cudaStream_t stream, CvCudaError *err)
{
	std::vector<long long> &offsets = checked_offsets.offsets;
	CvCudaStatus status;

	if (checked_offsets.buffer == list_offsets &&
		checked_offsets.version == list_offsets->version &&
		offsets.size() == (size_t) lists + 1)
		return cvcuda_check_ivf_offsets(offsets.data(), lists, d, vectors, err);
	checked_offsets.buffer = nullptr;
	offsets.resize((size_t) lists + 1);
	CVCUDA_TRY(cudaMemcpyAsync(offsets.data(), list_offsets->data,
							   sizeof(long long) * ((size_t) lists + 1), cudaMemcpyDeviceToHost,
							   stream), "ivf_search: read list_offsets", err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), "ivf_search: read list_offsets", err);
	status = cvcuda_check_ivf_offsets(offsets.data(), lists, d, vectors, err);
	if (status == CVCUDA_OK)
	{
		checked_offsets.buffer = list_offsets;
		checked_offsets.version = list_offsets->version;
	}
	return status;
}

// Multiprocessors of the current device (0: unknown).
static int
device_sms()
{
	static int	sms = -1;
	int			device;

	if (sms < 0 && (cudaGetDevice(&device) != cudaSuccess ||
					cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
					cudaSuccess))
		sms = 0;
	return sms;
}

// Blocks per query: enough for two blocks per multiprocessor over the
// batch, each with at least MIN_SEGMENT_BYTES of a query's expected probed
// rows (and MIN_SEGMENT_ROWS rows), and few enough for the merge
// (segments x k at most MAX_MERGED).  CLUSTERVEC_CUDA_SEARCH_SEGMENTS sets
// it (tests).
#define MIN_SEGMENT_BYTES (128 << 10)
#define MIN_SEGMENT_ROWS 32
#define MAX_MERGED 8192
#define MAX_SEGMENTS 64

static int
segments_for(int nqb, int k, int d, long long rows, int lists, int probes)
{
	const char *setting = getenv("CLUSTERVEC_CUDA_SEARCH_SEGMENTS");
	long long	expected = rows / lists * probes;
	long long	min_rows = MIN_SEGMENT_BYTES / ((long long) d * 4);
	int			segments = (2 * device_sms() + nqb - 1) / nqb;

	if (min_rows < MIN_SEGMENT_ROWS)
		min_rows = MIN_SEGMENT_ROWS;
	if (setting != nullptr && atoi(setting) > 0)
		segments = atoi(setting);
	else if (expected / min_rows < segments)
		segments = (int) (expected / min_rows);
	if (segments > MAX_SEGMENTS)
		segments = MAX_SEGMENTS;
	if (segments * k > MAX_MERGED)
		segments = MAX_MERGED / k;
	return segments < 1 ? 1 : segments;
}

static CvCudaStatus
search_on_device(const CvCudaBuffer *centroids, int lists, int d, const CvCudaBuffer *vectors,
				 const CvCudaBuffer *list_offsets, int metric, const float *queries, int nq,
				 int k, int probes, const int *given, long long *out_position,
				 double *out_distance, int *out_probed, CvCudaError *err)
{
	SearchBuffers &b = workspace;
	cudaStream_t stream;
	size_t		free_bytes = 0,
				total_bytes = 0;
	CvCudaStatus status;
	bool		all = given == nullptr && probes >= lists;
	double		per_query,
				batch;
	int			nqb_max;
	int			list_bits = 32 - __builtin_clz((unsigned) lists);
	size_t		scratch_bytes = 0;
	ScanOutput	out;

	CVCUDA_TRY(cvcuda_stream(&stream), "ivf_search: stream", err);
	status = read_offsets(list_offsets, lists, d, vectors, stream, err);
	if (status != CVCUDA_OK)
		return status;
	if (all)
		probes = lists;
	per_query = d * 4.0 + k * 16.0 + (all ? 0.0 : lists * 8.0 + probes * 4.0);
	/* a batch well inside the smallest budget needs no look at free memory */
	if (nq * per_query > (double) (16 << 20) || getenv("CLUSTERVEC_CUDA_SEARCH_BUDGET"))
		CVCUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes), "ivf_search: cudaMemGetInfo", err);
	else
		free_bytes = (size_t) 4 * (16 << 20);
	batch = search_budget(free_bytes) / per_query;
	if (batch > nq)
		batch = nq;
	if (batch > MAX_QUERY_BATCH)
		batch = MAX_QUERY_BATCH;
	nqb_max = batch < 1 ? 1 : (int) batch;
	CVCUDA_TRY(b.queries.reserve((size_t) nqb_max * d), "ivf_search: buffers", err);
	CVCUDA_TRY(b.out_pos.reserve((size_t) nqb_max * k), "ivf_search: buffers", err);
	CVCUDA_TRY(b.out_dist.reserve((size_t) nqb_max * k), "ivf_search: buffers", err);
	out.segments = segments_for(nqb_max, k, d, checked_offsets.offsets[lists], lists, probes);
	if (out.segments > 1)
	{
		CVCUDA_TRY(b.part_key.reserve((size_t) nqb_max * out.segments * k), "ivf_search: buffers",
				   err);
		CVCUDA_TRY(b.part_pos.reserve((size_t) nqb_max * out.segments * k), "ivf_search: buffers",
				   err);
	}
	out.part_key = b.part_key.get();
	out.part_pos = b.part_pos.get();
	if (!all)
	{
		if (given == nullptr)
			CVCUDA_TRY(b.keys.reserve((size_t) nqb_max * lists), "ivf_search: buffers", err);
		CVCUDA_TRY(b.probe.reserve((size_t) nqb_max * probes), "ivf_search: buffers", err);
		for (int i = 0; i < 2; i++)
		{
			CVCUDA_TRY(b.first[i].reserve((size_t) nqb_max), "ivf_search: buffers", err);
			CVCUDA_TRY(b.order[i].reserve((size_t) nqb_max), "ivf_search: buffers", err);
		}
		CVCUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, b.first[0].get(),
												   b.first[1].get(), b.order[0].get(),
												   b.order[1].get(), nqb_max, 0, list_bits,
												   stream), "ivf_search: sort size", err);
		CVCUDA_TRY(b.scratch.reserve(scratch_bytes), "ivf_search: buffers", err);
	}
	for (int q0 = 0; q0 < nq; q0 += nqb_max)
	{
		int			nqb = nq - q0 < nqb_max ? nq - q0 : nqb_max;

		if (cvcuda_stopping())
			return cvcuda_stopped(err, "ivf_search");

		CVCUDA_TRY(cudaMemcpyAsync(b.queries.get(), queries + (size_t) q0 * d,
								   sizeof(float) * (size_t) nqb * d, cudaMemcpyHostToDevice,
								   stream), "ivf_search: copy queries", err);
		if (given != nullptr)
			CVCUDA_TRY(cudaMemcpyAsync(b.probe.get(), given + (size_t) q0 * probes,
									   sizeof(int) * (size_t) nqb * probes,
									   cudaMemcpyHostToDevice, stream),
					   "ivf_search: copy given lists", err);
		else if (!all)
		{
			CVCUDA_TRY(launch_centroid_keys(metric, b.queries.get(), nqb,
											static_cast<const float *>(centroids->data), lists,
											d, b.keys.get(), stream),
					   "ivf_search: centroid distances", err);
			probe_select_kernel<<<nqb, SELECT_THREADS, 0, stream>>>(b.keys.get(), lists, probes,
																	 b.probe.get());
			CVCUDA_TRY(cvcuda_check_launch(stream), "ivf_search: probe selection", err);
		}
		if (!all)
		{
			/* one query has no order to choose */
			if (nqb > 1)
			{
				first_probe_kernel<<<(nqb + 255) / 256, 256, 0, stream>>>(b.probe.get(), probes,
																		   nqb, b.first[0].get(),
																		   b.order[0].get());
				CVCUDA_TRY(cvcuda_check_launch(stream), "ivf_search: query order", err);
				CVCUDA_TRY(cub::DeviceRadixSort::SortPairs(b.scratch.get(), scratch_bytes,
														   b.first[0].get(), b.first[1].get(),
														   b.order[0].get(), b.order[1].get(),
														   nqb, 0, list_bits, stream),
						   "ivf_search: query order", err);
			}
		}
		out.pos = b.out_pos.get();
		out.dist = b.out_dist.get();
		CVCUDA_TRY(launch_scan(metric, static_cast<const float *>(vectors->data),
							   static_cast<const long long *>(list_offsets->data),
							   b.queries.get(), d, all ? nullptr : b.probe.get(),
							   all || nqb < 2 ? nullptr : b.order[1].get(), probes, k, nqb,
							   out, stream),
				   "ivf_search: scan", err);
		CVCUDA_TRY(cudaMemcpyAsync(out_position + (size_t) q0 * k, b.out_pos.get(),
								   sizeof(long long) * (size_t) nqb * k, cudaMemcpyDeviceToHost,
								   stream), "ivf_search: copy positions", err);
		CVCUDA_TRY(cudaMemcpyAsync(out_distance + (size_t) q0 * k, b.out_dist.get(),
								   sizeof(double) * (size_t) nqb * k, cudaMemcpyDeviceToHost,
								   stream), "ivf_search: copy distances", err);
		if (out_probed != nullptr && !all)
			CVCUDA_TRY(cudaMemcpyAsync(out_probed + (size_t) q0 * probes, b.probe.get(),
									   sizeof(int) * (size_t) nqb * probes,
									   cudaMemcpyDeviceToHost, stream),
					   "ivf_search: copy probed lists", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "ivf_search", err);
	}
	if (out_probed != nullptr && all)
		cvcuda_probe_all(out_probed, nq, lists);
	if (b.bytes() > KEPT_WORKSPACE)
		b.release();
	return cvcuda_set_ok(err);
}

extern "C" CvCudaStatus
cvcuda_ivf_search(const CvCudaBuffer *centroids, int lists, int d, const CvCudaBuffer *vectors,
				  const CvCudaBuffer *list_offsets, int metric, const float *queries, int nq,
				  int k, int probes, const int *given, long long *out_position,
				  double *out_distance, int *out_probed, CvCudaError *err)
{
	return cvcuda_guard("ivf_search", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_ivf_search_args(centroids, lists, d, vectors,
														   list_offsets, metric, queries, nq,
														   k, probes, out_position,
														   out_distance, err);

		if (status != CVCUDA_OK)
			return status;
		if (nq == 0)
			return cvcuda_set_ok(err);
		if (given != nullptr &&
			(status = cvcuda_check_given_probes(given, nq, probes, lists, err)) != CVCUDA_OK)
			return status;
		return search_on_device(centroids, lists, d, vectors, list_offsets, metric, queries, nq,
								k, probes, given, out_position, out_distance, out_probed, err);
	});
}
