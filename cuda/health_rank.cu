// health_rank.cu: section 6 of STATISTICS.md on the device, effective_rank
// (column 38) = exp(H(p)), p_k = sv_k / sum sv, sv the singular values of
// the centred members, for clusters with 2 <= n <= rank_max_members; larger
// ones are refused (NULL, rank_refused set), as src/math/health_rank.c.
//
// As the reference: the squared singular values are the eigenvalues of a
// Gram matrix of side s = min(n, d) of the centred members (member x member
// when n <= d, else dimension x dimension), accumulated in float64 from
// float64 products of (double) x - c.  Then, per cluster, one thread block:
// a Householder reduction to tridiagonal form (the reference's fused
// sweep: each step applies the previous rank-2 update to a row and
// accumulates the next reflector's product in the same pass, full
// symmetric storage in global memory), and the eigenvalues of the
// tridiagonal matrix by Sturm-sequence bisection (one thread per
// eigenvalue).  sv = sqrt(max(lambda, 0)); singular values at most
// 1e-6 * max sv are dropped, as the reference does (eigensolver noise).
//
// Clusters are processed in batches whose Gram matrices fit a memory
// budget (1 GiB, or half the free memory); collapsed clusters are skipped
// on the device (the host never reads the stats).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "health_kernels.cuh"

namespace
{

constexpr int GT = 64;			// Gram tile side
constexpr int GK = 16;			// contraction slab
constexpr int TRI_THREADS = 1024;
constexpr int EIG_THREADS = 256;

// One cluster of a batch.
struct RankItem
{
	long long	cluster;		// index in the chunk
	long long	off;			// first member
	long long	n;
	int			s;				// Gram side
	int			by_member;		// n <= d
	long long	goff;			// offset of its Gram matrix (s x s) in the batch
	long long	voff;			// offset of its vectors (s each) in the batch
	long long	tile_start;		// first Gram tile
};

__device__ __forceinline__ double
warp_sum(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// Sum over the block (every thread gets it); scratch: 32 doubles.
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
	__syncthreads();
	return s;
}

__device__ double
block_max(double v, double *scratch)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		scratch[threadIdx.x >> 5] = v;
	__syncthreads();
	double		m = scratch[0];

	for (int w = 1; w < (int) (blockDim.x >> 5); w++)
		m = fmax(m, scratch[w]);
	__syncthreads();
	return m;
}

__device__ double
block_min(double v, double *scratch)
{
	return -block_max(-v, scratch);
}

// Marks every cluster's column 38 NULL and sets rank_refused.
__global__ void
rank_init(const long long *offsets, long long nclusters, int rank_max, CvClusterStats *stats)
{
	long long	cl = (long long) blockIdx.x * blockDim.x + threadIdx.x;

	if (cl >= nclusters)
		return;
	stats[cl].value[CV_STAT_EFFECTIVE_RANK] = 0;
	stats[cl].is_null[CV_STAT_EFFECTIVE_RANK] = true;
	stats[cl].rank_refused = offsets[cl + 1] - offsets[cl] > rank_max;
}

// Decodes tile t of an nb x nb upper triangle, row-major, to (bi, bj).
__device__ void
decode_tile(long long t, long long nb, long long *bi, long long *bj)
{
	long long	r = 0;

	while (r + 1 < nb && (r + 1) * nb - (r + 1) * r / 2 <= t)
		r++;
	*bi = r;
	*bj = r + (t - (r * nb - r * (r - 1) / 2));
}

// Element (a, t) of P: row a of the things dotted, t along the contraction.
__device__ __forceinline__ double
p_elem(const float *x, const double *c, int d, const RankItem &it, long long a, long long t)
{
	if (it.by_member)
		return (double) x[(size_t) (it.off + a) * d + t] - c[t];
	return (double) x[(size_t) (it.off + t) * d + a] - c[a];
}

// G = P P^T, one 64 x 64 tile (upper triangle, mirrored) per block iteration.
__global__ void __launch_bounds__(256)
gram_tiles(const float *x, const double *centroids, int d, const RankItem *items, int nitems,
		   long long total_tiles, const CvClusterStats *stats, double *g)
{
	__shared__ double as[GK][GT + 1];
	__shared__ double bs[GK][GT + 1];
	const int	tid = threadIdx.x;
	const int	tx = tid & 15;
	const int	ty = tid >> 4;

	for (long long t = blockIdx.x; t < total_tiles; t += gridDim.x)
	{
		int			lo = 0,
					hi = nitems;

		while (hi - lo > 1)
		{
			int			mid = (lo + hi) / 2;

			if (items[mid].tile_start <= t)
				lo = mid;
			else
				hi = mid;
		}
		const RankItem it = items[lo];

		if (stats[it.cluster].collapsed)
			continue;

		const long long nb = (it.s + GT - 1) / GT;
		long long	bi,
					bj;

		decode_tile(t - it.tile_start, nb, &bi, &bj);

		const long long a0 = bi * GT;
		const long long b0 = bj * GT;
		const long long extent = it.by_member ? d : it.n;
		const double *c = centroids + (size_t) it.cluster * d;
		double		acc[4][4] = {};

		for (long long k0 = 0; k0 < extent; k0 += GK)
		{
			for (int q = 0; q < (GK * GT) / 256; q++)
			{
				int			idx = tid + 256 * q;
				int			al,
							tl;

				if (it.by_member)
				{
					tl = idx % GK;
					al = idx / GK;
				}
				else
				{
					al = idx % GT;
					tl = idx / GT;
				}
				long long	tk = k0 + tl;

				as[tl][al] = (a0 + al < it.s && tk < extent) ? p_elem(x, c, d, it, a0 + al, tk) : 0.0;
				bs[tl][al] = (b0 + al < it.s && tk < extent) ? p_elem(x, c, d, it, b0 + al, tk) : 0.0;
			}
			__syncthreads();
#pragma unroll
			for (int k = 0; k < GK; k++)
			{
				double		ar[4],
							br[4];

#pragma unroll
				for (int q = 0; q < 4; q++)
				{
					ar[q] = as[k][ty + 16 * q];
					br[q] = bs[k][tx + 16 * q];
				}
#pragma unroll
				for (int r = 0; r < 4; r++)
#pragma unroll
					for (int cc = 0; cc < 4; cc++)
						acc[r][cc] = fma(ar[r], br[cc], acc[r][cc]);
			}
			__syncthreads();
		}
		double	   *gm = g + it.goff;

#pragma unroll
		for (int r = 0; r < 4; r++)
#pragma unroll
			for (int cc = 0; cc < 4; cc++)
			{
				long long	a = a0 + ty + 16 * r;
				long long	b = b0 + tx + 16 * cc;

				if (a < it.s && b < it.s)
				{
					gm[a * it.s + b] = acc[r][cc];
					if (bi != bj)
						gm[b * it.s + a] = acc[r][cc];
				}
			}
	}
}

// Householder tridiagonalisation of each Gram matrix, one block each.
// vec: 4 vectors of s per item (v, w, u, p); diag, off: s each.
__global__ void __launch_bounds__(TRI_THREADS)
tridiagonalise(const RankItem *items, const CvClusterStats *stats, double *g, double *vec,
			   double *diag, double *off)
{
	__shared__ double scratch[32];
	const RankItem it = items[blockIdx.x];

	if (stats[it.cluster].collapsed)
		return;

	const int	s = it.s;
	double	   *a = g + it.goff;
	double	   *v = vec + 4 * it.voff;
	double	   *w = v + s;
	double	   *u = w + s;
	double	   *p = u + s;
	double	   *dg = diag + it.voff;
	double	   *of = off + it.voff;
	const int	tid = threadIdx.x;
	const int	lane = tid & 31;
	const int	warp = tid >> 5;
	const int	nwarps = blockDim.x >> 5;
	bool		pending = false;

	for (int o = 0; o + 1 < s; o++)
	{
		double	   *row = a + (size_t) o * s;

		// 1. the pending update on row o
		if (pending)
			for (int j = o + tid; j < s; j += blockDim.x)
				row[j] -= v[o] * w[j] + w[o] * v[j];
		__syncthreads();

		// 2. the reflector of row o's entries o+1 .. s-1
		double		tau = 0.0;

		if (o + 2 < s)
		{
			double		alpha = row[o + 1];
			double		part = 0.0;

			for (int j = o + 2 + tid; j < s; j += blockDim.x)
				part += row[j] * row[j];
			double		xnorm2 = block_sum(part, scratch);

			if (xnorm2 == 0.0)
			{
				if (tid == 0)
					of[o] = alpha;
			}
			else
			{
				double		beta = -copysign(sqrt(alpha * alpha + xnorm2), alpha);
				double		scal = 1.0 / (alpha - beta);

				tau = (beta - alpha) / beta;
				for (int j = o + 1 + tid; j < s; j += blockDim.x)
					u[j] = j == o + 1 ? 1.0 : row[j] * scal;
				if (tid == 0)
					of[o] = beta;
			}
		}
		__syncthreads();

		// 3. rows o+1 .. s-1: apply the pending update, accumulate tau A' u
		if (pending || tau != 0.0)
		{
			for (int i = o + 1 + warp; i < s; i += nwarps)
			{
				double	   *ri = a + (size_t) i * s;
				double		vi = pending ? v[i] : 0.0;
				double		wi = pending ? w[i] : 0.0;
				double		acc = 0.0;

				for (int j = o + 1 + lane; j < s; j += 32)
				{
					double		val = ri[j];

					if (pending)
					{
						val -= vi * w[j] + wi * v[j];
						ri[j] = val;
					}
					if (tau != 0.0)
						acc += val * u[j];
				}
				acc = warp_sum(acc);
				if (lane == 0)
					p[i] = tau * acc;
			}
		}
		__syncthreads();

		// 4. w = p - (tau / 2)(u.p) u, v = u for the next step
		if (tau != 0.0)
		{
			double		part = 0.0;

			for (int i = o + 1 + tid; i < s; i += blockDim.x)
				part += u[i] * p[i];
			double		k = 0.5 * tau * block_sum(part, scratch);

			for (int i = o + 1 + tid; i < s; i += blockDim.x)
			{
				w[i] = p[i] - k * u[i];
				v[i] = u[i];
			}
			pending = true;
		}
		else
			pending = false;
		__syncthreads();
	}
	for (int k = tid; k < s; k += blockDim.x)
		dg[k] = a[(size_t) k * s + k];
	if (tid == 0 && s >= 2)
		of[s - 2] = a[(size_t) (s - 2) * s + s - 1];
}

// Eigenvalues below x of the tridiagonal (dg, e2 = off^2): the Sturm count.
__device__ int
sturm_count(const double *dg, const double *e2, int s, double x, double pivmin)
{
	int			count = 0;
	double		q = dg[0] - x;

	if (fabs(q) < pivmin)
		q = -pivmin;
	count += q < 0.0;
	for (int i = 1; i < s; i++)
	{
		q = dg[i] - x - e2[i - 1] / q;
		if (fabs(q) < pivmin)
			q = -pivmin;
		count += q < 0.0;
	}
	return count;
}

// Bisection for every eigenvalue, then effective_rank; one block per item.
// off is turned into off^2 in place; ev receives the eigenvalues.
__global__ void __launch_bounds__(EIG_THREADS)
eigen_rank(const RankItem *items, CvClusterStats *stats, const double *diag, double *off,
		   double *ev)
{
	__shared__ double scratch[32];
	const RankItem it = items[blockIdx.x];

	if (stats[it.cluster].collapsed)
		return;

	const int	s = it.s;
	const double *dg = diag + it.voff;
	double	   *of = off + it.voff;
	double	   *e2 = of;		// off^2 replaces off once the bounds are known
	double	   *lam = ev + it.voff;
	const int	tid = threadIdx.x;
	double		lo_part = INFINITY,
				hi_part = -INFINITY,
				e2max = 0.0;

	// Gershgorin bounds (off[i] couples i and i + 1; off[s - 1] unused)
	for (int i = tid; i < s; i += blockDim.x)
	{
		double		r = (i > 0 ? fabs(of[i - 1]) : 0.0) + (i + 1 < s ? fabs(of[i]) : 0.0);

		lo_part = fmin(lo_part, dg[i] - r);
		hi_part = fmax(hi_part, dg[i] + r);
		if (i + 1 < s)
			e2max = fmax(e2max, of[i] * of[i]);
	}
	double		glo = block_min(lo_part, scratch);
	double		ghi = block_max(hi_part, scratch);

	e2max = block_max(e2max, scratch);
	for (int i = tid; i + 1 < s; i += blockDim.x)
		e2[i] = of[i] * of[i];
	__syncthreads();

	double		norm = fmax(fabs(glo), fabs(ghi));
	double		pivmin = DBL_MIN * fmax(1.0, e2max);
	double		abstol = 4.0 * DBL_EPSILON * norm;

	glo -= abstol + 2.0 * pivmin;
	ghi += abstol + 2.0 * pivmin;
	for (int k = tid; k < s; k += blockDim.x)
	{
		double		lo = glo,
					hi = ghi;

		for (int iter = 0; iter < 200; iter++)
		{
			double		mid = 0.5 * (lo + hi);

			if (hi - lo <= fmax(abstol, 2.0 * DBL_EPSILON * fmax(fabs(lo), fabs(hi))) ||
				mid <= lo || mid >= hi)
				break;
			if (sturm_count(dg, e2, s, mid, pivmin) > k)
				hi = mid;
			else
				lo = mid;
		}
		lam[k] = sqrt(fmax(0.5 * (lo + hi), 0.0));
	}
	__syncthreads();

	double		top = -INFINITY;

	for (int k = tid; k < s; k += blockDim.x)
		top = fmax(top, lam[k]);
	top = block_max(top, scratch);
	if (!(top > 0.0))
		return;					// NULL: every singular value is 0

	double		part = 0.0;

	for (int k = tid; k < s; k += blockDim.x)
		if (lam[k] > CV_HEALTH_EPS * top)
			part += lam[k];
	double		sum = block_sum(part, scratch);

	part = 0.0;
	for (int k = tid; k < s; k += blockDim.x)
		if (lam[k] > CV_HEALTH_EPS * top)
		{
			double		pk = lam[k] / sum;

			part -= pk * log(pk);
		}
	double		entropy = block_sum(part, scratch);

	if (tid == 0)
	{
		stats[it.cluster].value[CV_STAT_EFFECTIVE_RANK] = exp(entropy);
		stats[it.cluster].is_null[CV_STAT_EFFECTIVE_RANK] = false;
	}
}

// Stream-ordered scratch memory, freed (stream-ordered) on every path.
template <typename T>
class StreamArray
{
public:
	explicit StreamArray(cudaStream_t s) : stream_(s) {}
	StreamArray(const StreamArray &) = delete;
	StreamArray &operator=(const StreamArray &) = delete;
	~StreamArray() { reset(); }
	void reset()
	{
		if (ptr_)
			(void) cudaFreeAsync(ptr_, stream_);
		ptr_ = nullptr;
	}
	cudaError_t allocate(size_t count)
	{
		reset();
		if (count == 0)
			count = 1;
		return cudaMallocAsync(reinterpret_cast<void **>(&ptr_), count * sizeof(T), stream_);
	}
	T		   *get() const { return ptr_; }

private:
	cudaStream_t stream_;
	T		   *ptr_ = nullptr;
};

// Bytes of Gram matrices one batch may hold.
double
gram_budget()
{
	size_t		free_bytes = 0,
				total_bytes = 0;
	double		budget = 1073741824.0;

	if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess &&
		(double) free_bytes / 2 < budget)
		budget = (double) free_bytes / 2;
	return budget;
}

}								// namespace

#define TRY_R(call, what) CVCUDA_TRY((call), "health_rank: " what, err)

CvCudaStatus
health_rank_launch(const HealthChunk *chunk, CvCudaError *err)
{
	const long long ncl = chunk->nclusters;
	const int	d = chunk->d;
	const int	rmax = chunk->params.rank_max_members;
	cudaStream_t st = chunk->stream;

	if (ncl <= 0)
		return CVCUDA_OK;
	rank_init<<<(unsigned int) ((ncl + 127) / 128), 128, 0, st>>>(chunk->offsets, ncl, rmax,
																   chunk->stats);
	TRY_R(cvcuda_check_launch(st), "rank_init");

	std::vector<RankItem> all;

	for (long long c = 0; c < ncl; c++)
	{
		long long	n = chunk->host_offsets[c + 1] - chunk->host_offsets[c];
		RankItem	it;

		if (n < 2 || n > rmax || d < 1)
			continue;
		it.cluster = c;
		it.off = chunk->host_offsets[c];
		it.n = n;
		it.by_member = n <= d;
		it.s = (int) (it.by_member ? n : d);
		it.goff = it.voff = it.tile_start = 0;
		all.push_back(it);
	}
	if (all.empty())
		return CVCUDA_OK;

	const double budget = gram_budget();
	StreamArray<RankItem> d_items(st);
	StreamArray<double> d_g(st), d_vec(st), d_diag(st), d_off(st), d_ev(st);
	size_t		first = 0;

	while (first < all.size())
	{
		// a batch: as many clusters as fit the budget (at least one)
		size_t		last = first;
		long long	gsum = 0,
					vsum = 0,
					tsum = 0;

		while (last < all.size())
		{
			RankItem   &it = all[last];
			long long	sq = (long long) it.s * it.s;
			long long	nb = (it.s + GT - 1) / GT;

			if (last > first && (double) (gsum + sq) * 8.0 > budget)
				break;
			it.goff = gsum;
			it.voff = vsum;
			it.tile_start = tsum;
			gsum += sq;
			vsum += it.s;
			tsum += nb * (nb + 1) / 2;
			last++;
		}
		int			count = (int) (last - first);

		TRY_R(d_items.allocate(count), "cudaMallocAsync");
		TRY_R(d_g.allocate(gsum), "cudaMallocAsync");
		TRY_R(d_vec.allocate(4 * vsum), "cudaMallocAsync");
		TRY_R(d_diag.allocate(vsum), "cudaMallocAsync");
		TRY_R(d_off.allocate(vsum), "cudaMallocAsync");
		TRY_R(d_ev.allocate(vsum), "cudaMallocAsync");
		TRY_R(cudaMemcpyAsync(d_items.get(), all.data() + first, sizeof(RankItem) * count,
							  cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
		TRY_R(cudaMemsetAsync(d_off.get(), 0, sizeof(double) * vsum, st), "cudaMemsetAsync");
		{
			long long	grid = tsum < (1LL << 30) ? tsum : (1LL << 30);

			gram_tiles<<<(unsigned int) grid, 256, 0, st>>>(chunk->members, chunk->centroids, d,
															 d_items.get(), count, tsum,
															 chunk->stats, d_g.get());
			TRY_R(cvcuda_check_launch(st), "gram_tiles");
		}
		tridiagonalise<<<(unsigned int) count, TRI_THREADS, 0, st>>>(
			d_items.get(), chunk->stats, d_g.get(), d_vec.get(), d_diag.get(), d_off.get());
		TRY_R(cvcuda_check_launch(st), "tridiagonalise");
		eigen_rank<<<(unsigned int) count, EIG_THREADS, 0, st>>>(
			d_items.get(), chunk->stats, d_diag.get(), d_off.get(), d_ev.get());
		TRY_R(cvcuda_check_launch(st), "eigen_rank");
		first = last;
	}
	return CVCUDA_OK;
}
