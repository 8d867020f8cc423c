// health_pairwise.cu: section 3 of STATISTICS.md on the device, the tiled
// pairwise class (columns 20-29), every cluster of a chunk in one launch
// per pass.
//
// Layout.  Each cluster with n >= 2 is cut into blocks of TILE members; the
// tiles (bi, bj), bi <= bj, of its upper triangle are numbered row by row,
// and the clusters' tiles one cluster after another (a prefix sum computed
// on the host from chunk->host_offsets), so one flat grid covers every
// pair of every cluster exactly once, in a fixed order.  A thread block
// decodes its tile to (cluster, bi, bj), multiplies the two 128-member
// blocks of centred members in an FP32 SIMT GEMM (shared-memory slabs of
// 8 dimensions, double-buffered, 8 x 8 register blocking) and turns the
// 128 x 128 Gram block into pair statistics in its epilogue, keeping its
// accumulators in registers and shared memory until the tile ends: one
// atomic per tile and accumulator (histogram bins and per-member sums
// included).
//
// Distances: the centred expansion d2 = |u_i|^2 + |u_j|^2 - 2 u_i.u_j,
// u = fl32(x - c) (c the float64 centroid), |u|^2 in float64 from the
// float32 u, u_i.u_j one FP32 fma chain.  A pair whose d2 falls below
// (1e-2 mean_dist)^2 (STATISTICS.md's rule) or below 1e-2 (|u_i|^2 +
// |u_j|^2) (where the FP32 dot product's rounding could show) is
// recomputed from the difference of the raw members in float64.  Pairs
// near the thresholds (cos near dup_cos, distance near sigma / 2) are also
// recomputed exactly, so threshold counts match the float64 reference
// except inside STATISTICS.md's band.  cos(x_i, x_j) uses x_i.x_j = u_i.u_j
// + c.u_i + c.u_j + |c|^2 (c.u in float64).
//
// Pass 1: distance sum, min, max, the sigma histogram (sigma_bins bins on
// [0, 2 radius]), cos >= dup_cos pairs and members, and each member's
// distance sums to the two two-means sides.  Pass 2 (sigma and the pass-1
// extremes known): local_density, the dist_entropy histogram and
// entanglement.  mean_pairwise_cos is O(nd): the sum of unit vectors.
// Sums are float64 (float32 only for per-tile partial sums of at most
// 128 terms, STATISTICS.md's "float32 trees of <= 256 leaves").
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "health_kernels.cuh"

namespace
{

constexpr int TILE = 128;		// members per tile side
constexpr int BK = 8;			// dimensions per shared slab
constexpr int THREADS = 256;	// 16 x 16 threads, 8 x 8 pairs each
constexpr double CLOSE_MEAN_REL = 1e-2;	// recompute below this fraction of mean_dist
constexpr double CLOSE_SCALE_REL = 1e-2;	// ... or below this fraction of |u_i|^2 + |u_j|^2
constexpr double DUP_BAND = 1e-5;	// cos recomputed within this * |u_i||u_j| / (|x_i||x_j|)
constexpr double HALF_BAND = 2e-5;	// distance recomputed within this relative of sigma / 2
constexpr int SHARED_HIST_MAX = 4096;	// larger histograms go to global atomics

// Per cluster, what the tile kernels need.
struct ClusterInfo
{
	long long	off;			// first member (chunk row)
	long long	n;
	double		close2;			// (1e-2 mean_dist)^2
	int			collapsed;
	int			want_hist;		// sigma histogram (not collapsed, radius > 0)
	int			silhouette;		// side sums wanted
	double		sigma_inv_width;	// sigma_bins / (2 radius)
	// pass 2, filled after pass 1
	double		sigma;
	double		half_sigma;
	int			entropy_on;		// max > min
	double		entropy_min;
	double		entropy_inv_width;
	int			entangle_on;	// sigma > 0
	double		minus_inv_two_sigma_sq;
};

// Per cluster accumulators (atomics target).
struct ClusterAcc
{
	double		sum;
	unsigned long long min_bits;
	unsigned long long max_bits;
	unsigned long long dup_pairs;
	unsigned long long local_pairs;
	double		entangle;
};

struct TileArgs
{
	const float *u;				// total x ldu, centred, zero padded
	int			ldu;
	const float *x;				// total x d raw members
	int			d;
	const long long *tile_start;	// nclusters + 1
	long long	nclusters;
	long long	total_tiles;
	const ClusterInfo *info;
	ClusterAcc *acc;
	const double *nu;			// |u_i|^2
	const double *nx;			// ||x_i||
	const double *cdot;			// c.u_i
	const double *csq;			// per cluster |c|^2
	const uint8_t *side;		// may be NULL
	uint8_t    *dup_flag;		// total
	double	   *side_sum;		// 2 x total: [s * total + i]
	long long	total;
	unsigned long long *hist;	// nclusters x bins
	int			bins;
	int			shared_hist;
	double		dup_cos;
};

// ||x_i - x_j||^2 from the difference, float64.
__device__ double
exact_d2(const float *xi, const float *xj, int d)
{
	double		s = 0.0;

	for (int k = 0; k < d; k++)
	{
		double		t = (double) xi[k] - (double) xj[k];

		s += t * t;
	}
	return s;
}

// x_i . x_j in float64.
__device__ double
exact_dot(const float *xi, const float *xj, int d)
{
	double		s = 0.0;

	for (int k = 0; k < d; k++)
		s += (double) xi[k] * (double) xj[k];
	return s;
}

// Histogram bin min(floor(v * inv_width), last), as src/math's bin_of.
__device__ __forceinline__ int
bin_of(double v, double inv_width, int last)
{
	double		q = v * inv_width;

	if (!(q > 0.0))
		return 0;
	return q < (double) last ? (int) q : last;
}

__device__ __forceinline__ double
warp_sum(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ unsigned long long
warp_min_u64(unsigned long long v)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		unsigned long long t = __shfl_xor_sync(0xffffffffu, v, o);

		v = t < v ? t : v;
	}
	return v;
}

__device__ __forceinline__ unsigned long long
warp_max_u64(unsigned long long v)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		unsigned long long t = __shfl_xor_sync(0xffffffffu, v, o);

		v = t > v ? t : v;
	}
	return v;
}

__device__ __forceinline__ unsigned long long
bits_of(double v)
{
	return (unsigned long long) __double_as_longlong(v);
}

// Decodes local tile t of a cluster with nb blocks to (bi, bj), bi <= bj, row-major.
__device__ void
decode_tile(long long t, long long nb, long long *bi, long long *bj)
{
	double		b = (double) (2 * nb + 1);
	long long	r = (long long) floor((b - sqrt(fmax(b * b - 8.0 * (double) t, 0.0))) / 2.0);

	if (r < 0)
		r = 0;
	if (r > nb - 1)
		r = nb - 1;
	// row r starts at r nb - r (r - 1) / 2
	while (r > 0 && r * nb - r * (r - 1) / 2 > t)
		r--;
	while (r + 1 < nb && (r + 1) * nb - (r + 1) * r / 2 <= t)
		r++;
	*bi = r;
	*bj = r + (t - (r * nb - r * (r - 1) / 2));
}

// Loads one slab (BK dims of TILE rows) of a block into registers.
__device__ __forceinline__ float4
load_slab(const float *u, int ldu, long long row0, long long rows, int k0, int tid)
{
	int			r = tid >> 1;
	int			kq = (tid & 1) * 4;

	if (r < rows)
		return *reinterpret_cast<const float4 *>(u + (size_t) (row0 + r) * ldu + k0 + kq);
	return make_float4(0.f, 0.f, 0.f, 0.f);
}

__device__ __forceinline__ void
store_slab(float (*s)[TILE], float4 v, int tid)
{
	int			r = tid >> 1;
	int			kq = (tid & 1) * 4;

	s[kq + 0][r] = v.x;
	s[kq + 1][r] = v.y;
	s[kq + 2][r] = v.z;
	s[kq + 3][r] = v.w;
}

// Row (or column) index within the tile of a thread's element q (0..7).
__device__ __forceinline__ int
lane_index(int t, int q)
{
	return (q < 4 ? 0 : 64) + t * 4 + (q & 3);
}

template <int PASS, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
pair_tiles(TileArgs a)
{
	__shared__ __align__(16) float as[2][BK][TILE];
	__shared__ __align__(16) float bs[2][BK][TILE];
	__shared__ double m_nu[2][TILE];
	__shared__ double m_nx[2][TILE];
	__shared__ double m_cd[2][TILE];
	__shared__ uint8_t m_side[2][TILE];
	__shared__ float row_side[TILE][2];
	__shared__ float col_side[TILE][2];
	__shared__ double red_sum[THREADS / 32];
	__shared__ unsigned long long red_min[THREADS / 32];
	__shared__ unsigned long long red_max[THREADS / 32];
	__shared__ unsigned long long red_cnt[THREADS / 32];
	extern __shared__ unsigned int s_hist[];

	const int	tid = threadIdx.x;
	const int	tx = tid & 15;
	const int	ty = tid >> 4;
	const int	lane = tid & 31;
	const int	warp = tid >> 5;

	for (long long t = blockIdx.x; t < a.total_tiles; t += gridDim.x)
	{
		// cluster: the last one whose tile_start <= t
		long long	lo = 0,
					hi = a.nclusters;

		while (hi - lo > 1)
		{
			long long	mid = (lo + hi) / 2;

			if (a.tile_start[mid] <= t)
				lo = mid;
			else
				hi = mid;
		}
		const long long cl = lo;
		const ClusterInfo info = a.info[cl];

		if (PASS == 2 && info.collapsed)
			continue;			// uniform over the block

		const long long n = info.n;
		const long long nb = (n + TILE - 1) / TILE;
		long long	bi,
					bj;

		decode_tile(t - a.tile_start[cl], nb, &bi, &bj);

		const long long i0 = bi * TILE;
		const long long j0 = bj * TILE;
		const long long rows_i = n - i0 < TILE ? n - i0 : TILE;
		const long long rows_j = n - j0 < TILE ? n - j0 : TILE;
		const long long gi0 = info.off + i0;
		const long long gj0 = info.off + j0;
		const bool	diagonal = bi == bj;
		const bool	use_hist = PASS == 1 ? info.want_hist : info.entropy_on;
		const bool	use_side = PASS == 1 && info.silhouette && a.side != nullptr;

		// tile metadata and accumulators
		for (int q = tid; q < 2 * TILE; q += THREADS)
		{
			int			w = q / TILE;
			int			r = q % TILE;
			long long	rows = w == 0 ? rows_i : rows_j;
			long long	g = (w == 0 ? gi0 : gj0) + r;

			if (r < rows)
			{
				m_nu[w][r] = a.nu[g];
				m_nx[w][r] = a.nx[g];
				m_cd[w][r] = a.cdot[g];
				m_side[w][r] = use_side ? (a.side[g] != 0) : 0;
			}
			else
			{
				m_nu[w][r] = 0;
				m_nx[w][r] = 0;
				m_cd[w][r] = 0;
				m_side[w][r] = 0;
			}
			if (w == 0)
			{
				row_side[r][0] = 0.f;
				row_side[r][1] = 0.f;
			}
			else
			{
				col_side[r][0] = 0.f;
				col_side[r][1] = 0.f;
			}
		}
		if (use_hist && a.shared_hist)
			for (int b = tid; b < a.bins; b += THREADS)
				s_hist[b] = 0;

		// GEMM: acc[r][c] = u_(i0 + row r) . u_(j0 + col c)
		float		acc[8][8];

#pragma unroll
		for (int r = 0; r < 8; r++)
#pragma unroll
			for (int c = 0; c < 8; c++)
				acc[r][c] = 0.f;

		{
			float4		pa = load_slab(a.u, a.ldu, gi0, rows_i, 0, tid);
			float4		pb = load_slab(a.u, a.ldu, gj0, rows_j, 0, tid);
			int			buf = 0;

			store_slab(as[0], pa, tid);
			store_slab(bs[0], pb, tid);
			__syncthreads();
			for (int k0 = 0; k0 < a.ldu; k0 += BK)
			{
				bool		more = k0 + BK < a.ldu;

				if (more)
				{
					pa = load_slab(a.u, a.ldu, gi0, rows_i, k0 + BK, tid);
					pb = load_slab(a.u, a.ldu, gj0, rows_j, k0 + BK, tid);
				}
#pragma unroll
				for (int k = 0; k < BK; k++)
				{
					float4		a0 = *reinterpret_cast<const float4 *>(&as[buf][k][ty * 4]);
					float4		a1 = *reinterpret_cast<const float4 *>(&as[buf][k][64 + ty * 4]);
					float4		b0 = *reinterpret_cast<const float4 *>(&bs[buf][k][tx * 4]);
					float4		b1 = *reinterpret_cast<const float4 *>(&bs[buf][k][64 + tx * 4]);
					float		ar[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
					float		br[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};

#pragma unroll
					for (int r = 0; r < 8; r++)
#pragma unroll
						for (int c = 0; c < 8; c++)
							acc[r][c] = fmaf(ar[r], br[c], acc[r][c]);
				}
				if (more)
				{
					store_slab(as[buf ^ 1], pa, tid);
					store_slab(bs[buf ^ 1], pb, tid);
				}
				__syncthreads();
				buf ^= 1;
			}
		}

		// epilogue: every pair i < j of the tile
		const double csq = a.csq[cl];
		double		sum = 0.0;
		double		lo_d = INFINITY;
		double		hi_d = 0.0;
		unsigned int count = 0;
		float		col0[8],
					col1[8];

#pragma unroll
		for (int c = 0; c < 8; c++)
		{
			col0[c] = 0.f;
			col1[c] = 0.f;
		}

#pragma unroll
		for (int r = 0; r < 8; r++)
		{
			const int	ri = lane_index(ty, r);
			const long long li = i0 + ri;
			float		rs0 = 0.f,
						rs1 = 0.f;

#pragma unroll
			for (int c = 0; c < 8; c++)
			{
				const int	cj = lane_index(tx, c);
				const long long lj = j0 + cj;

				if (ri >= rows_i || cj >= rows_j || (diagonal && li >= lj))
					continue;

				const double nui = m_nu[0][ri];
				const double nuj = m_nu[1][cj];
				const double scale = nui + nuj;
				double		d2 = scale - 2.0 * (double) acc[r][c];
				const bool	recompute = d2 < info.close2 || d2 < CLOSE_SCALE_REL * scale;
				const float *xi = a.x + (size_t) (gi0 + ri) * a.d;
				const float *xj = a.x + (size_t) (gj0 + cj) * a.d;

				if (recompute)
					d2 = exact_d2(xi, xj, a.d);
				double		dist = sqrt(d2);

				if (PASS == 1)
				{
					const double nxi = m_nx[0][ri];
					const double nxj = m_nx[1][cj];
					bool		dup;

					if (nxi == 0.0 || nxj == 0.0)
						dup = false;
					else if (d2 == 0.0)
						dup = 1.0 >= a.dup_cos;
					else
					{
						double		thr = a.dup_cos * nxi * nxj;
						double		dot;

						if (recompute)
							dot = exact_dot(xi, xj, a.d);
						else
						{
							dot = (double) acc[r][c] + (m_cd[0][ri] + (m_cd[1][cj] + csq));
							if (fabs(dot - thr) <= DUP_BAND * sqrt(nui * nuj) + 1e-12 * thr)
								dot = exact_dot(xi, xj, a.d);
						}
						dup = dot >= thr;
					}
					sum += dist;
					lo_d = fmin(lo_d, dist);
					hi_d = fmax(hi_d, dist);
					if (use_hist)
					{
						int			b = bin_of(dist, info.sigma_inv_width, a.bins - 1);

						if (a.shared_hist)
							atomicAdd(&s_hist[b], 1u);
						else
							atomicAdd(&a.hist[cl * a.bins + b], 1ull);
					}
					if (dup)
					{
						count++;
						a.dup_flag[gi0 + ri] = 1;
						a.dup_flag[gj0 + cj] = 1;
					}
					if (use_side)
					{
						float		fd = (float) dist;

						if (m_side[1][cj])
							rs1 += fd;
						else
							rs0 += fd;
						if (m_side[0][ri])
							col1[c] += fd;
						else
							col0[c] += fd;
					}
				}
				else
				{
					if (!recompute && fabs(dist - info.half_sigma) <= HALF_BAND * info.half_sigma)
					{
						d2 = exact_d2(xi, xj, a.d);
						dist = sqrt(d2);
					}
					count += dist <= info.half_sigma;
					if (use_hist)
					{
						int			b = bin_of(dist - info.entropy_min, info.entropy_inv_width,
											   a.bins - 1);

						if (a.shared_hist)
							atomicAdd(&s_hist[b], 1u);
						else
							atomicAdd(&a.hist[cl * a.bins + b], 1ull);
					}
					if (info.entangle_on)
						sum += exp(d2 * info.minus_inv_two_sigma_sq);
				}
			}
			if (use_side)
			{
				for (int o = 8; o > 0; o >>= 1)
				{
					rs0 += __shfl_xor_sync(0xffffffffu, rs0, o);
					rs1 += __shfl_xor_sync(0xffffffffu, rs1, o);
				}
				if (tx == 0)
				{
					row_side[ri][0] = rs0;
					row_side[ri][1] = rs1;
				}
			}
		}
		if (use_side)
		{
#pragma unroll
			for (int c = 0; c < 8; c++)
			{
				float		v0 = col0[c] + __shfl_xor_sync(0xffffffffu, col0[c], 16);
				float		v1 = col1[c] + __shfl_xor_sync(0xffffffffu, col1[c], 16);

				if (lane < 16)
				{
					atomicAdd(&col_side[lane_index(tx, c)][0], v0);
					atomicAdd(&col_side[lane_index(tx, c)][1], v1);
				}
			}
		}

		// block reduction: one atomic per tile and accumulator
		{
			double		s = warp_sum(sum);
			unsigned long long mn = warp_min_u64(bits_of(lo_d));
			unsigned long long mx = warp_max_u64(bits_of(hi_d));
			unsigned long long cn = (unsigned long long) warp_sum((double) count);

			if (lane == 0)
			{
				red_sum[warp] = s;
				red_min[warp] = mn;
				red_max[warp] = mx;
				red_cnt[warp] = cn;
			}
		}
		__syncthreads();
		if (tid == 0)
		{
			double		s = 0.0;
			unsigned long long mn = ~0ull,
						mx = 0,
						cn = 0;

			for (int w = 0; w < THREADS / 32; w++)
			{
				s += red_sum[w];
				mn = red_min[w] < mn ? red_min[w] : mn;
				mx = red_max[w] > mx ? red_max[w] : mx;
				cn += red_cnt[w];
			}
			ClusterAcc *ca = &a.acc[cl];

			if (PASS == 1)
			{
				atomicAdd(&ca->sum, s);
				atomicMin(&ca->min_bits, mn);
				atomicMax(&ca->max_bits, mx);
				if (cn)
					atomicAdd(&ca->dup_pairs, cn);
			}
			else
			{
				if (info.entangle_on)
					atomicAdd(&ca->entangle, s);
				if (cn)
					atomicAdd(&ca->local_pairs, cn);
			}
		}
		if (use_hist && a.shared_hist)
			for (int b = tid; b < a.bins; b += THREADS)
				if (s_hist[b])
					atomicAdd(&a.hist[cl * a.bins + b], (unsigned long long) s_hist[b]);
		if (use_side)
			for (int q = tid; q < 2 * TILE; q += THREADS)
			{
				int			w = q / TILE;
				int			r = q % TILE;
				long long	rows = w == 0 ? rows_i : rows_j;
				long long	g = (w == 0 ? gi0 : gj0) + r;
				float	   *v = w == 0 ? row_side[r] : col_side[r];

				if (r < rows)
				{
					if (v[0] != 0.f)
						atomicAdd(&a.side_sum[g], (double) v[0]);
					if (v[1] != 0.f)
						atomicAdd(&a.side_sum[a.total + g], (double) v[1]);
				}
			}
		__syncthreads();		// shared state reused by the next tile
	}
}

// Cluster of chunk row i (offsets: nclusters + 1).
__device__ long long
cluster_of(const long long *offsets, long long nclusters, long long i)
{
	long long	lo = 0,
				hi = nclusters;

	while (hi - lo > 1)
	{
		long long	mid = (lo + hi) / 2;

		if (offsets[mid] <= i)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

// One warp per member: u (float32, zero padded), |u|^2, ||x||, c.u.
__global__ void
prep_members(const float *x, const long long *offsets, long long nclusters,
			 long long total, int d, int ldu, const double *centroids,
			 float *u, double *nu, double *nx, double *cdot)
{
	long long	i = ((long long) blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int			lane = threadIdx.x & 31;

	if (i >= total)
		return;

	long long	cl = cluster_of(offsets, nclusters, i);
	const double *c = centroids + (size_t) cl * d;
	const float *xi = x + (size_t) i * d;
	float	   *ui = u + (size_t) i * ldu;
	double		s_nu = 0,
				s_nx = 0,
				s_cd = 0;

	for (int k = lane; k < ldu; k += 32)
	{
		if (k < d)
		{
			double		xv = (double) xi[k];
			double		dv = xv - c[k];
			float		uf = (float) dv;

			ui[k] = uf;
			s_nu += (double) uf * (double) uf;
			s_nx += xv * xv;
			s_cd += c[k] * dv;
		}
		else
			ui[k] = 0.f;
	}
	s_nu = warp_sum(s_nu);
	s_nx = warp_sum(s_nx);
	s_cd = warp_sum(s_cd);
	if (lane == 0)
	{
		nu[i] = s_nu;
		nx[i] = sqrt(s_nx);
		cdot[i] = s_cd;
	}
}

// Sum of unit vectors per cluster: block (segment of SEG members, 128 dims).
constexpr int UNIT_SEG = 512;

__global__ void
unit_sums(const float *x, const long long *offsets, long long nclusters, long long total,
		  int d, const double *nx, double *unit)
{
	long long	first = (long long) blockIdx.x * UNIT_SEG;
	int			k = blockIdx.y * blockDim.x + threadIdx.x;

	if (first >= total || k >= d)
		return;

	long long	last = first + UNIT_SEG < total ? first + UNIT_SEG : total;
	long long	cl = cluster_of(offsets, nclusters, first);
	long long	end = offsets[cl + 1];
	double		s = 0.0;

	for (long long i = first; i < last; i++)
	{
		while (i >= end)
		{
			if (s != 0.0)
				atomicAdd(&unit[(size_t) cl * d + k], s);
			s = 0.0;
			cl++;
			end = offsets[cl + 1];
		}
		if (nx[i] > 0.0)
			s += (double) x[(size_t) i * d + k] / nx[i];
	}
	if (s != 0.0)
		atomicAdd(&unit[(size_t) cl * d + k], s);
}

// Per cluster, before pass 1: the ClusterInfo from the stats; also |c|^2.
__global__ void
setup_clusters(const long long *offsets, long long nclusters, const CvClusterStats *stats,
			   const double *centroids, int d, int sigma_bins, int have_side,
			   ClusterInfo *info, ClusterAcc *acc, double *csq)
{
	long long	cl = (long long) blockIdx.x * blockDim.x + threadIdx.x;

	if (cl >= nclusters)
		return;

	const CvClusterStats *st = &stats[cl];
	ClusterInfo in;
	double		radius = st->value[CV_STAT_RADIUS];
	double		mean_dist = st->value[CV_STAT_MEAN_DIST];
	double		s = 0.0;

	memset(&in, 0, sizeof(in));
	in.off = offsets[cl];
	in.n = offsets[cl + 1] - offsets[cl];
	in.close2 = (CLOSE_MEAN_REL * mean_dist) * (CLOSE_MEAN_REL * mean_dist);
	in.collapsed = st->collapsed;
	in.want_hist = !st->collapsed && radius > 0.0;
	in.silhouette = !st->collapsed && have_side;
	in.sigma_inv_width = sigma_bins / (2.0 * radius);
	info[cl] = in;
	acc[cl].sum = 0;
	acc[cl].min_bits = bits_of(INFINITY);
	acc[cl].max_bits = 0;
	acc[cl].dup_pairs = 0;
	acc[cl].local_pairs = 0;
	acc[cl].entangle = 0;
	for (int k = 0; k < d; k++)
	{
		double		c = centroids[(size_t) cl * d + k];

		s += c * c;
	}
	csq[cl] = s;
}

// Between the passes: sigma from the histogram, the entropy bins.
__global__ void
middle_clusters(long long nclusters, const unsigned long long *hist, int sigma_bins,
				int entropy_bins, const CvClusterStats *stats, const ClusterAcc *acc,
				ClusterInfo *info)
{
	long long	cl = (long long) blockIdx.x * blockDim.x + threadIdx.x;

	if (cl >= nclusters)
		return;

	ClusterInfo in = info[cl];

	if (in.n < 2)
		return;

	long long	pairs = in.n * (in.n - 1) / 2;
	double		sigma = 0.0;

	if (in.want_hist)
	{
		double		width = 2.0 * stats[cl].value[CV_STAT_RADIUS] / sigma_bins;
		unsigned long long cum = 0;
		int			b;

		for (b = 0; b < sigma_bins; b++)
		{
			cum += hist[cl * sigma_bins + b];
			if (2 * cum >= (unsigned long long) pairs)
				break;
		}
		if (b == sigma_bins)
			b = sigma_bins - 1;
		sigma = ((double) b + 0.5) * width;
	}
	double		mn = __longlong_as_double((long long) acc[cl].min_bits);
	double		mx = __longlong_as_double((long long) acc[cl].max_bits);

	in.sigma = sigma;
	in.half_sigma = sigma / 2.0;
	in.entropy_on = mx > mn;
	in.entropy_min = mn;
	in.entropy_inv_width = entropy_bins / (mx - mn);
	in.entangle_on = sigma > 0.0;
	in.minus_inv_two_sigma_sq = -1.0 / (2.0 * sigma * sigma);
	info[cl] = in;
}

__device__ void
set_col(CvClusterStats *st, int col, double v)
{
	st->value[col] = v;
	st->is_null[col] = false;
}

__device__ void
null_col(CvClusterStats *st, int col)
{
	st->value[col] = 0;
	st->is_null[col] = true;
}

__device__ double
block_sum(double v, double *scratch)
{
	v = warp_sum(v);
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		scratch[threadIdx.x >> 5] = v;
	__syncthreads();
	double		s = 0.0;

	for (int w = 0; w < (int) (blockDim.x >> 5); w++)
		s += scratch[w];
	return s;
}

// After pass 2, one block per cluster: every column.
__global__ void
finish_clusters(long long nclusters, long long total, int d, const ClusterInfo *info,
				const ClusterAcc *acc, const unsigned long long *ehist, int entropy_bins,
				const double *unit, const double *nx, const uint8_t *dup_flag,
				const uint8_t *side, const double *side_sum, CvClusterStats *stats)
{
	__shared__ double scratch[32];
	long long	cl = blockIdx.x;
	const ClusterInfo in = info[cl];
	CvClusterStats *st = &stats[cl];

	if (in.n < 2)
	{
		if (threadIdx.x == 0)
			for (int col = CV_STAT_MEAN_PAIRWISE_DIST; col <= CV_STAT_SPLIT_SILHOUETTE; col++)
				null_col(st, col);
		return;
	}

	const long long n = in.n;
	double		pairs = (double) (n * (n - 1) / 2);
	double		flagged = 0,
				nonzero = 0,
				count1 = 0,
				sq = 0;

	for (long long i = threadIdx.x; i < n; i += blockDim.x)
	{
		flagged += dup_flag[in.off + i];
		nonzero += nx[in.off + i] > 0.0;
		if (in.silhouette && side != nullptr)
			count1 += side[in.off + i] != 0;
	}
	for (int k = threadIdx.x; k < d; k += blockDim.x)
		sq += unit[(size_t) cl * d + k] * unit[(size_t) cl * d + k];
	flagged = block_sum(flagged, scratch);
	nonzero = block_sum(nonzero, scratch);
	count1 = block_sum(count1, scratch);
	sq = block_sum(sq, scratch);

	double		silhouette = 0.0;
	bool		sil_null = !(in.silhouette && side != nullptr);
	long long	count[2] = {n - (long long) count1, (long long) count1};

	if (!sil_null && (count[0] == 0 || count[1] == 0))
		sil_null = true;
	if (!sil_null)
	{
		double		total_s = 0.0;

		for (long long i = threadIdx.x; i < n; i += blockDim.x)
		{
			int			own = side[in.off + i] != 0;

			if (count[own] == 1)
				continue;
			double		av = side_sum[(size_t) own * total + in.off + i] / (double) (count[own] - 1);
			double		bv = side_sum[(size_t) (1 - own) * total + in.off + i] / (double) count[1 - own];
			double		m = av > bv ? av : bv;

			if (m > 0.0)
				total_s += (bv - av) / m;
		}
		silhouette = block_sum(total_s, scratch) / (double) n;
	}
	if (threadIdx.x != 0)
		return;

	const ClusterAcc ca = acc[cl];

	set_col(st, CV_STAT_MEAN_PAIRWISE_DIST, ca.sum / pairs);
	set_col(st, CV_STAT_SIGMA, in.sigma);
	set_col(st, CV_STAT_MEAN_PAIRWISE_COS, (sq - nonzero) / ((double) n * (double) (n - 1)));
	set_col(st, CV_STAT_REDUNDANCY, (double) ca.dup_pairs / pairs);
	set_col(st, CV_STAT_REDUNDANT_MEMBERS, flagged / (double) n);
	set_col(st, CV_STAT_BREADTH, __longlong_as_double((long long) ca.max_bits));
	if (in.collapsed)
	{
		set_col(st, CV_STAT_LOCAL_DENSITY, 1.0);
		set_col(st, CV_STAT_DIST_ENTROPY, 0.0);
		null_col(st, CV_STAT_ENTANGLEMENT);
	}
	else
	{
		set_col(st, CV_STAT_LOCAL_DENSITY, (double) ca.local_pairs / pairs);
		if (in.entropy_on)
		{
			double		h = 0.0;

			for (int b = 0; b < entropy_bins; b++)
			{
				unsigned long long c = ehist[cl * entropy_bins + b];

				if (c == 0)
					continue;
				double		p = (double) c / pairs;

				h -= p * log(p);
			}
			set_col(st, CV_STAT_DIST_ENTROPY, h / log((double) entropy_bins));
		}
		else
			set_col(st, CV_STAT_DIST_ENTROPY, 0.0);
		if (in.entangle_on)
			set_col(st, CV_STAT_ENTANGLEMENT, ca.entangle / pairs);
		else
			null_col(st, CV_STAT_ENTANGLEMENT);
	}
	if (sil_null)
		null_col(st, CV_STAT_SPLIT_SILHOUETTE);
	else
		set_col(st, CV_STAT_SPLIT_SILHOUETTE, silhouette);
}

// Stream-ordered scratch memory, freed (stream-ordered) on every path.
template <typename T>
class StreamArray
{
public:
	explicit StreamArray(cudaStream_t s) : stream_(s) {}
	StreamArray(const StreamArray &) = delete;
	StreamArray &operator=(const StreamArray &) = delete;
	~StreamArray()
	{
		if (ptr_)
			(void) cudaFreeAsync(ptr_, stream_);
	}
	cudaError_t allocate(size_t count)
	{
		if (count == 0)
			count = 1;
		return cudaMallocAsync(reinterpret_cast<void **>(&ptr_), count * sizeof(T), stream_);
	}
	T		   *get() const { return ptr_; }

private:
	cudaStream_t stream_;
	T		   *ptr_ = nullptr;
};

// Grid of a tile launch: enough blocks, the rest by the grid-stride loop.
unsigned int
tile_grid(long long tiles)
{
	long long	g = tiles < (1LL << 30) ? tiles : (1LL << 30);

	return (unsigned int) (g < 1 ? 1 : g);
}

}								// namespace

#define TRY_P(call, what) CVCUDA_TRY((call), "health_pairwise: " what, err)

CvCudaStatus
health_pairwise_launch(const HealthChunk *chunk, const uint8_t *side, CvCudaError *err)
{
	const long long ncl = chunk->nclusters;
	const long long total = chunk->total;
	const int	d = chunk->d;
	const int	ldu = (d + BK - 1) / BK * BK;
	const int	sbins = chunk->params.sigma_bins;
	const int	ebins = chunk->params.entropy_bins;
	cudaStream_t st = chunk->stream;

	if (ncl <= 0)
		return CVCUDA_OK;

	// Default: the 128-register variant, two blocks per SM (some spills in
	// the epilogue; 1.5x faster than one block of 185 registers on an
	// H200).  CLUSTERVEC_CUDA_PAIRWISE_BLOCKS=1 selects the other.
	const char *blocks_env = getenv("CLUSTERVEC_CUDA_PAIRWISE_BLOCKS");
	const bool	two_blocks = blocks_env == nullptr || atoi(blocks_env) != 1;

	// tiles per cluster, prefix sum on the host
	std::vector<long long> tile_start((size_t) ncl + 1);

	tile_start[0] = 0;
	for (long long c = 0; c < ncl; c++)
	{
		long long	n = chunk->host_offsets[c + 1] - chunk->host_offsets[c];
		long long	nb = (n + TILE - 1) / TILE;

		tile_start[c + 1] = tile_start[c] + (n >= 2 ? nb * (nb + 1) / 2 : 0);
	}
	const long long tiles = tile_start[ncl];
	const long long tsafe = total > 0 ? total : 1;

	StreamArray<long long> d_tiles(st);
	StreamArray<float> d_u(st);
	StreamArray<double> d_nu(st), d_nx(st), d_cd(st), d_side_sum(st), d_unit(st), d_csq(st);
	StreamArray<uint8_t> d_dup(st);
	StreamArray<ClusterInfo> d_info(st);
	StreamArray<ClusterAcc> d_acc(st);
	StreamArray<unsigned long long> d_shist(st), d_ehist(st);

	TRY_P(d_tiles.allocate(ncl + 1), "cudaMallocAsync");
	TRY_P(d_u.allocate((size_t) tsafe * ldu), "cudaMallocAsync");
	TRY_P(d_nu.allocate(tsafe), "cudaMallocAsync");
	TRY_P(d_nx.allocate(tsafe), "cudaMallocAsync");
	TRY_P(d_cd.allocate(tsafe), "cudaMallocAsync");
	TRY_P(d_side_sum.allocate(2 * (size_t) tsafe), "cudaMallocAsync");
	TRY_P(d_unit.allocate((size_t) ncl * d), "cudaMallocAsync");
	TRY_P(d_csq.allocate(ncl), "cudaMallocAsync");
	TRY_P(d_dup.allocate(tsafe), "cudaMallocAsync");
	TRY_P(d_info.allocate(ncl), "cudaMallocAsync");
	TRY_P(d_acc.allocate(ncl), "cudaMallocAsync");
	TRY_P(d_shist.allocate((size_t) ncl * sbins), "cudaMallocAsync");
	TRY_P(d_ehist.allocate((size_t) ncl * ebins), "cudaMallocAsync");

	TRY_P(cudaMemcpyAsync(d_tiles.get(), tile_start.data(), sizeof(long long) * (ncl + 1),
						  cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
	TRY_P(cudaMemsetAsync(d_side_sum.get(), 0, sizeof(double) * 2 * tsafe, st), "cudaMemsetAsync");
	TRY_P(cudaMemsetAsync(d_unit.get(), 0, sizeof(double) * ncl * d, st), "cudaMemsetAsync");
	TRY_P(cudaMemsetAsync(d_dup.get(), 0, tsafe, st), "cudaMemsetAsync");
	TRY_P(cudaMemsetAsync(d_shist.get(), 0, sizeof(unsigned long long) * ncl * sbins, st),
		  "cudaMemsetAsync");
	TRY_P(cudaMemsetAsync(d_ehist.get(), 0, sizeof(unsigned long long) * ncl * ebins, st),
		  "cudaMemsetAsync");

	if (total > 0)
	{
		long long	threads = total * 32;

		prep_members<<<(unsigned int) ((threads + 255) / 256), 256, 0, st>>>(
			chunk->members, chunk->offsets, ncl, total, d, ldu, chunk->centroids,
			d_u.get(), d_nu.get(), d_nx.get(), d_cd.get());
		TRY_P(cvcuda_check_launch(st), "prep_members");
		dim3		ug((unsigned int) ((total + UNIT_SEG - 1) / UNIT_SEG), (d + 127) / 128);

		unit_sums<<<ug, 128, 0, st>>>(chunk->members, chunk->offsets, ncl, total, d,
									  d_nx.get(), d_unit.get());
		TRY_P(cvcuda_check_launch(st), "unit_sums");
	}
	setup_clusters<<<(unsigned int) ((ncl + 127) / 128), 128, 0, st>>>(
		chunk->offsets, ncl, chunk->stats, chunk->centroids, d, sbins, side != nullptr,
		d_info.get(), d_acc.get(), d_csq.get());
	TRY_P(cvcuda_check_launch(st), "setup_clusters");

	TileArgs	ta;

	memset(&ta, 0, sizeof(ta));
	ta.u = d_u.get();
	ta.ldu = ldu;
	ta.x = chunk->members;
	ta.d = d;
	ta.tile_start = d_tiles.get();
	ta.nclusters = ncl;
	ta.total_tiles = tiles;
	ta.info = d_info.get();
	ta.acc = d_acc.get();
	ta.nu = d_nu.get();
	ta.nx = d_nx.get();
	ta.cdot = d_cd.get();
	ta.csq = d_csq.get();
	ta.side = side;
	ta.dup_flag = d_dup.get();
	ta.side_sum = d_side_sum.get();
	ta.total = total;
	ta.dup_cos = chunk->params.dup_cos;

	if (tiles > 0)
	{
		ta.hist = d_shist.get();
		ta.bins = sbins;
		ta.shared_hist = sbins <= SHARED_HIST_MAX;
		size_t		shm = ta.shared_hist ? sizeof(unsigned int) * sbins : 0;

		if (two_blocks)
			pair_tiles<1, 2><<<tile_grid(tiles), THREADS, shm, st>>>(ta);
		else
			pair_tiles<1, 1><<<tile_grid(tiles), THREADS, shm, st>>>(ta);
		TRY_P(cvcuda_check_launch(st), "pair_tiles pass 1");
	}
	middle_clusters<<<(unsigned int) ((ncl + 127) / 128), 128, 0, st>>>(
		ncl, d_shist.get(), sbins, ebins, chunk->stats, d_acc.get(), d_info.get());
	TRY_P(cvcuda_check_launch(st), "middle_clusters");
	if (tiles > 0)
	{
		ta.hist = d_ehist.get();
		ta.bins = ebins;
		ta.shared_hist = ebins <= SHARED_HIST_MAX;
		size_t		shm = ta.shared_hist ? sizeof(unsigned int) * ebins : 0;

		if (two_blocks)
			pair_tiles<2, 2><<<tile_grid(tiles), THREADS, shm, st>>>(ta);
		else
			pair_tiles<2, 1><<<tile_grid(tiles), THREADS, shm, st>>>(ta);
		TRY_P(cvcuda_check_launch(st), "pair_tiles pass 2");
	}
	finish_clusters<<<(unsigned int) ncl, 256, 0, st>>>(
		ncl, total, d, d_info.get(), d_acc.get(), d_ehist.get(), ebins, d_unit.get(),
		d_nx.get(), d_dup.get(), side, d_side_sum.get(), chunk->stats);
	TRY_P(cvcuda_check_launch(st), "finish_clusters");
	return CVCUDA_OK;
}
