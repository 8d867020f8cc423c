// kmeans_assign.cu: cvcuda_kmeans_assign, the nearest centroid of every
// point, fused: tiles of points x centroids are scored and only a running
// best per point survives, so the n x k matrix never exists.
//
// Scores: L2 ranks by |c|^2 - 2 x.c (|x|^2 is common to a point's
// centroids) and reports |x|^2 + |c|^2 - 2 x.c, clamped at 0; inner
// product and spherical rank and report -x.c.  Ties go to the lower
// centroid index.
//
// FP32 mode (CVCUDA_ASSIGN_FP32): SIMT register-blocked tiles, 128 points x
// 128 centroids per block, 8 x 8 per thread, FMA products and FP32 sums.
// src/math decides in float64 with an error certificate, so the two agree
// except where two centroids are within FP32 rounding of each other (the
// expansion loses about 2^-24 (|x| + |c|)^2 absolute): k-means only needs a
// ranking, and a near-tie moves a point between two nearly equal choices.
//
// BF16 mode (CVCUDA_ASSIGN_BF16): points and centroids are rounded to bf16
// (zero padded to a multiple of 32 dimensions) and multiplied on the tensor
// cores (mma.sync m16n8k16, FP32 accumulation), 128 x 128 tiles, double
// buffered with cp.async.  Each thread keeps its 4 best columns per row;
// the union (32 per point) holds the point's 4 best by the bf16 score, and
// those 4 are rescored in FP32 from the original floats (direct |x - c|^2 or
// -x.c, a warp per point), the best of them winning.  So the answer equals
// the FP32 ranking unless the true winner is not among the 4 best bf16
// scores, which needs bf16 rounding (about 2^-9 relative per product) to
// push it past 3 others: it never happens on data whose distances are not
// near-ties.
#include <cfloat>
#include <climits>

#include "kmeans.cuh"
#include "kmeans_args.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

// (score, index) a before b: lower score, then lower index.
__device__ __forceinline__ static bool
better(float sa, int ia, float sb, int ib)
{
	return sa < sb || (sa == sb && (unsigned) ia < (unsigned) ib);
}

__global__ static void
norms_kernel(const float *__restrict__ c, int k, int d, int l2, float *__restrict__ norms)
{
	int			row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int			lane = threadIdx.x % 32;
	float		s = 0.0f;

	if (row >= k)
		return;
	if (l2)
		for (int j = lane; j < d; j += 32)
		{
			float		v = c[(size_t) row * d + j];

			s += v * v;
		}
	for (int o = 16; o > 0; o /= 2)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0)
		norms[row] = s;
}

__global__ static void
to_bf16_kernel(const float *__restrict__ src, long long rows, int d, int width,
			   __nv_bfloat162 *__restrict__ dst)
{
	long long	pairs = rows * (width / 2);

	for (long long e = blockIdx.x * (long long) blockDim.x + threadIdx.x; e < pairs;
		 e += (long long) gridDim.x * blockDim.x)
	{
		long long	row = e / (width / 2);
		int			j = (int) (e % (width / 2)) * 2;
		const float *r = src + row * d;
		float		a = j < d ? r[j] : 0.0f;
		float		b = j + 1 < d ? r[j + 1] : 0.0f;

		dst[e] = __floats2bfloat162_rn(a, b);
	}
}

cudaError_t
cvcuda_kmeans_to_bf16(const float *src, long long rows, int d, __nv_bfloat16 *dst,
					  cudaStream_t stream)
{
	int			width = cvcuda_kmeans_bf16_width(d);
	long long	pairs = rows * (width / 2);
	long long	blocks = (pairs + 255) / 256;

	if (rows == 0)
		return cudaSuccess;
	if (blocks > 132 * 64)
		blocks = 132 * 64;
	to_bf16_kernel<<<(unsigned) blocks, 256, 0, stream>>>(src, rows, d, width,
														 reinterpret_cast<__nv_bfloat162 *>(dst));
	return cvcuda_check_launch(stream);
}

/* ------------------------------------------------------------------ */
/* FP32 SIMT kernel                                                    */
/* ------------------------------------------------------------------ */

#define F_BM 128
#define F_BN 128
#define F_BK 16
#define F_THREADS 256

// Stages a 128 x 16 slab of a row-major rows x d matrix, transposed, into s.
template <bool VEC>
__device__ __forceinline__ static void
stage_fp32(float (*s)[F_BM + 4], const float *__restrict__ m, long long rows, int d,
		   long long first, int k0)
{
	const int	tid = threadIdx.x;

	if (VEC)
	{
#pragma unroll
		for (int r = 0; r < 2; r++)
		{
			int			e = tid + F_THREADS * r;
			int			row = e / 4;
			int			kq = (e % 4) * 4;
			float4		v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

			if (first + row < rows && k0 + kq < d)
				v = *reinterpret_cast<const float4 *>(m + (size_t) (first + row) * d + k0 + kq);
			s[kq][row] = v.x;
			s[kq + 1][row] = v.y;
			s[kq + 2][row] = v.z;
			s[kq + 3][row] = v.w;
		}
	}
	else
	{
#pragma unroll
		for (int r = 0; r < 8; r++)
		{
			int			e = tid + F_THREADS * r;
			int			row = e / F_BK;
			int			kk = e % F_BK;

			s[kk][row] = (first + row < rows && k0 + kk < d) ?
				m[(size_t) (first + row) * d + k0 + kk] : 0.0f;
		}
	}
}

template <bool VEC>
__global__ static void __launch_bounds__(F_THREADS)
assign_fp32_kernel(const float *__restrict__ x, long long n, int d,
				   const float *__restrict__ c, int k, const float *__restrict__ norms,
				   int l2, int32_t *__restrict__ assign, float *__restrict__ score)
{
	__shared__ float as[F_BK][F_BM + 4];
	__shared__ float bs[F_BK][F_BN + 4];
	const int	tr = threadIdx.x / 16;
	const int	tc = threadIdx.x % 16;
	const long long row0 = (long long) blockIdx.x * F_BM;
	float		best[8],
				xn[8];
	int			bidx[8];

#pragma unroll
	for (int i = 0; i < 8; i++)
	{
		best[i] = INFINITY;
		xn[i] = 0.0f;
		bidx[i] = INT_MAX;
	}
	for (int c0 = 0; c0 < k; c0 += F_BN)
	{
		float		acc[8][8];

#pragma unroll
		for (int i = 0; i < 8; i++)
#pragma unroll
			for (int j = 0; j < 8; j++)
				acc[i][j] = 0.0f;
		for (int k0 = 0; k0 < d; k0 += F_BK)
		{
			stage_fp32<VEC>(as, x, n, d, row0, k0);
			stage_fp32<VEC>(bs, c, k, d, c0, k0);
			__syncthreads();
#pragma unroll
			for (int kk = 0; kk < F_BK; kk++)
			{
				float		a[8],
							b[8];

#pragma unroll
				for (int i = 0; i < 8; i++)
				{
					a[i] = as[kk][tr + 16 * i];
					b[i] = bs[kk][tc + 16 * i];
				}
#pragma unroll
				for (int i = 0; i < 8; i++)
#pragma unroll
					for (int j = 0; j < 8; j++)
						acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
				if (c0 == 0 && tc == 0)
#pragma unroll
					for (int i = 0; i < 8; i++)
						xn[i] = fmaf(a[i], a[i], xn[i]);
			}
			__syncthreads();
		}
#pragma unroll
		for (int j = 0; j < 8; j++)
		{
			int			col = c0 + tc + 16 * j;

			if (col < k)
			{
				float		cn = l2 ? norms[col] : 0.0f;

#pragma unroll
				for (int i = 0; i < 8; i++)
				{
					float		s = l2 ? fmaf(-2.0f, acc[i][j], cn) : -acc[i][j];

					if (s < best[i])
					{
						best[i] = s;
						bidx[i] = col;
					}
				}
			}
		}
	}
	// the 16 threads of a row group (one half-warp) hold disjoint columns
#pragma unroll
	for (int i = 0; i < 8; i++)
	{
#pragma unroll
		for (int o = 8; o > 0; o /= 2)
		{
			float		s = __shfl_xor_sync(0xffffffffu, best[i], o);
			int			ix = __shfl_xor_sync(0xffffffffu, bidx[i], o);

			if (better(s, ix, best[i], bidx[i]))
			{
				best[i] = s;
				bidx[i] = ix;
			}
		}
		long long	row = row0 + tr + 16 * i;

		if (tc == 0 && row < n)
		{
			assign[row] = bidx[i];
			if (score)
				score[row] = l2 ? fmaxf(xn[i] + best[i], 0.0f) : best[i];
		}
	}
}

/* ------------------------------------------------------------------ */
/* BF16 tensor-core kernel                                             */
/* ------------------------------------------------------------------ */

#define H_BM 128
#define H_BN 128
#define H_BK 32
#define H_LD (H_BK + 8)			// padded row: 80 bytes, conflict-free ldmatrix
#define H_THREADS 256
#define H_TOP 4					// best columns kept per thread and row
#define H_CAND 32				// candidates per row: 2 warps x 4 threads x 4

struct HTiles
{
	__nv_bfloat16 a[2][H_BM][H_LD];
	__nv_bfloat16 b[2][H_BN][H_LD];
};

struct HCands
{
	float		s[H_BM][H_CAND];
	int			i[H_BM][H_CAND];
};

union HShared
{
	HTiles		t;
	HCands		c;
};

__device__ __forceinline__ static void
cp_async16(void *smem, const void *gmem, bool valid)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);
	int			bytes = valid ? 16 : 0;

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
				 :: "r"(s), "l"(gmem), "r"(bytes));
}

__device__ __forceinline__ static void
cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ static void
cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

__device__ __forceinline__ static void
ldmatrix_x4(unsigned (&r)[4], const void *smem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
				 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

__device__ __forceinline__ static void
mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
				 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
				 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
				 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Issues the copies of one (centroid tile, k chunk) step into buffer buf.
__device__ __forceinline__ static void
issue_step(HTiles &t, int buf, const __nv_bfloat16 *__restrict__ xh, long long n,
		   const __nv_bfloat16 *__restrict__ ch, int k, int width, long long row0, int c0,
		   int k0)
{
#pragma unroll
	for (int r = 0; r < 2; r++)
	{
		int			e = threadIdx.x + H_THREADS * r;
		int			row = e / 4;
		int			q = (e % 4) * 8;
		bool		va = row0 + row < n;
		bool		vb = c0 + row < k;

		cp_async16(&t.a[buf][row][q],
				   xh + (va ? (size_t) (row0 + row) * width + k0 + q : 0), va);
		cp_async16(&t.b[buf][row][q],
				   ch + (vb ? (size_t) (c0 + row) * width + k0 + q : 0), vb);
	}
}

// Inserts (s, col) into a sorted best-H_TOP list; later columns lose ties.
__device__ __forceinline__ static void
top_insert(float (&ts)[H_TOP], int (&ti)[H_TOP], float s, int col)
{
	if (!(s < ts[H_TOP - 1]))
		return;
	ts[H_TOP - 1] = s;
	ti[H_TOP - 1] = col;
#pragma unroll
	for (int p = H_TOP - 1; p > 0; p--)
		if (ts[p] < ts[p - 1])
		{
			float		fs = ts[p];
			int			fi = ti[p];

			ts[p] = ts[p - 1];
			ti[p] = ti[p - 1];
			ts[p - 1] = fs;
			ti[p - 1] = fi;
		}
}

__global__ static void __launch_bounds__(H_THREADS)
assign_bf16_kernel(const __nv_bfloat16 *__restrict__ xh, long long n, int width,
				   const __nv_bfloat16 *__restrict__ ch, int k,
				   const float *__restrict__ norms, int l2,
				   const float *__restrict__ x, const float *__restrict__ c, int d,
				   int32_t *__restrict__ assign, float *__restrict__ score)
{
	__shared__ __align__(16) HShared sh;
	const int	warp = threadIdx.x / 32;
	const int	lane = threadIdx.x % 32;
	const int	wm = warp / 2;		// rows wm * 32 .. + 32
	const int	wn = warp % 2;		// columns wn * 64 .. + 64
	const int	g = lane / 4;
	const int	t = lane % 4;
	const long long row0 = (long long) blockIdx.x * H_BM;
	const int	nk = width / H_BK;
	const int	tiles = (k + H_BN - 1) / H_BN;
	const int	steps = tiles * nk;
	float		ts[4][H_TOP];
	int			ti[4][H_TOP];
	float		acc[2][8][4];

#pragma unroll
	for (int r = 0; r < 4; r++)
#pragma unroll
		for (int p = 0; p < H_TOP; p++)
		{
			ts[r][p] = INFINITY;
			ti[r][p] = -1;
		}
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 8; nt++)
#pragma unroll
			for (int q = 0; q < 4; q++)
				acc[mt][nt][q] = 0.0f;

	issue_step(sh.t, 0, xh, n, ch, k, width, row0, 0, 0);
	cp_async_commit();
	for (int s = 0; s < steps; s++)
	{
		const int	buf = s & 1;
		const int	c0 = (s / nk) * H_BN;

		if (s + 1 < steps)
		{
			issue_step(sh.t, buf ^ 1, xh, n, ch, k, width, row0, ((s + 1) / nk) * H_BN,
					   ((s + 1) % nk) * H_BK);
			cp_async_commit();
			cp_async_wait<1>();
		}
		else
			cp_async_wait<0>();
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < H_BK; kk += 16)
		{
			unsigned	af[2][4];

#pragma unroll
			for (int mt = 0; mt < 2; mt++)
				ldmatrix_x4(af[mt], &sh.t.a[buf][wm * 32 + mt * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
			for (int np = 0; np < 4; np++)
			{
				unsigned	bf[4];

				ldmatrix_x4(bf, &sh.t.b[buf][wn * 64 + np * 16 + (lane / 16) * 8 + lane % 8]
							[kk + ((lane / 8) % 2) * 8]);
#pragma unroll
				for (int mt = 0; mt < 2; mt++)
				{
					mma_bf16(acc[mt][np * 2], af[mt], bf[0], bf[1]);
					mma_bf16(acc[mt][np * 2 + 1], af[mt], bf[2], bf[3]);
				}
			}
		}
		if (s % nk == nk - 1)
		{
			// epilogue of centroid tile c0: columns in increasing order per thread
#pragma unroll
			for (int nt = 0; nt < 8; nt++)
#pragma unroll
				for (int q = 0; q < 2; q++)
				{
					int			col = c0 + wn * 64 + nt * 8 + 2 * t + q;

					if (col < k)
					{
						float		cn = l2 ? norms[col] : 0.0f;

#pragma unroll
						for (int mt = 0; mt < 2; mt++)
#pragma unroll
							for (int h = 0; h < 2; h++)
							{
								float		v = acc[mt][nt][h * 2 + q];

								top_insert(ts[mt * 2 + h], ti[mt * 2 + h],
										   l2 ? fmaf(-2.0f, v, cn) : -v, col);
							}
					}
				}
#pragma unroll
			for (int mt = 0; mt < 2; mt++)
#pragma unroll
				for (int nt = 0; nt < 8; nt++)
#pragma unroll
					for (int q = 0; q < 4; q++)
						acc[mt][nt][q] = 0.0f;
		}
		__syncthreads();
	}

	// candidates to shared memory (the tiles are dead now)
#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int h = 0; h < 2; h++)
		{
			int			row = wm * 32 + mt * 16 + h * 8 + g;

#pragma unroll
			for (int p = 0; p < H_TOP; p++)
			{
				sh.c.s[row][wn * 16 + t * H_TOP + p] = ts[mt * 2 + h][p];
				sh.c.i[row][wn * 16 + t * H_TOP + p] = ti[mt * 2 + h][p];
			}
		}
	__syncthreads();

	// a warp per point: the 4 best candidates rescored in FP32
	for (int r = warp; r < H_BM; r += H_THREADS / 32)
	{
		long long	row = row0 + r;
		float		cs = sh.c.s[r][lane];
		int			ci = sh.c.i[r][lane];
		float		best = INFINITY;
		int			bidx = INT_MAX;

		if (row >= n)
			continue;
		if (ci < 0)
			cs = INFINITY;
		for (int round = 0; round < H_TOP; round++)
		{
			float		ms = cs;
			int			mi = ci < 0 ? INT_MAX : ci;

#pragma unroll
			for (int o = 16; o > 0; o /= 2)
			{
				float		os = __shfl_xor_sync(0xffffffffu, ms, o);
				int			oi = __shfl_xor_sync(0xffffffffu, mi, o);

				if (better(os, oi, ms, mi))
				{
					ms = os;
					mi = oi;
				}
			}
			if (mi == INT_MAX)
				break;			// fewer than H_TOP candidates (k < 4)
			if (ci == mi)
				ci = -1, cs = INFINITY;	// taken
			// rescore centroid mi in FP32
			const float *xr = x + (size_t) row * d;
			const float *cr = c + (size_t) mi * d;
			float		acc1 = 0.0f;

			for (int j = lane; j < d; j += 32)
			{
				if (l2)
				{
					float		diff = xr[j] - cr[j];

					acc1 = fmaf(diff, diff, acc1);
				}
				else
					acc1 = fmaf(xr[j], cr[j], acc1);
			}
#pragma unroll
			for (int o = 16; o > 0; o /= 2)
				acc1 += __shfl_xor_sync(0xffffffffu, acc1, o);
			float		exact = l2 ? acc1 : -acc1;

			if (better(exact, mi, best, bidx))
			{
				best = exact;
				bidx = mi;
			}
		}
		if (lane == 0)
		{
			assign[row] = bidx;
			if (score)
				score[row] = best;
		}
	}
}

/* ------------------------------------------------------------------ */
/* Launch                                                              */
/* ------------------------------------------------------------------ */

cudaError_t
cvcuda_kmeans_assign_device(const float *points, long long n, int d, const float *centroids,
							int k, int metric, int mode, KmeansAssignScratch *scratch,
							int32_t *assign, float *score, cudaStream_t stream)
{
	int			l2 = metric == CVCUDA_KMEANS_L2;
	cudaError_t code;

	if (n == 0)
		return cudaSuccess;
	if (scratch->norms.get() == nullptr)
	{
		code = scratch->norms.allocate((size_t) k);
		if (code != cudaSuccess)
			return code;
	}
	norms_kernel<<<(k + 7) / 8, 256, 0, stream>>>(centroids, k, d, l2, scratch->norms.get());
	code = cvcuda_check_launch(stream);
	if (code != cudaSuccess)
		return code;
	if (mode == CVCUDA_ASSIGN_FP32)
	{
		unsigned	blocks = (unsigned) ((n + F_BM - 1) / F_BM);

		if (d % 4 == 0)
			assign_fp32_kernel<true><<<blocks, F_THREADS, 0, stream>>>(
				points, n, d, centroids, k, scratch->norms.get(), l2, assign, score);
		else
			assign_fp32_kernel<false><<<blocks, F_THREADS, 0, stream>>>(
				points, n, d, centroids, k, scratch->norms.get(), l2, assign, score);
		return cvcuda_check_launch(stream);
	}

	int			width = cvcuda_kmeans_bf16_width(d);

	if (scratch->centroids_bf16.get() == nullptr)
	{
		code = scratch->centroids_bf16.allocate((size_t) k * width);
		if (code != cudaSuccess)
			return code;
	}
	if (scratch->points_bf16.get() == nullptr)
	{
		code = scratch->points_bf16.allocate((size_t) n * width);
		if (code != cudaSuccess)
			return code;
		scratch->points_ready = false;
	}
	if (!scratch->points_ready)
	{
		code = cvcuda_kmeans_to_bf16(points, n, d, scratch->points_bf16.get(), stream);
		if (code != cudaSuccess)
			return code;
		scratch->points_ready = true;
	}
	code = cvcuda_kmeans_to_bf16(centroids, k, d, scratch->centroids_bf16.get(), stream);
	if (code != cudaSuccess)
		return code;
	assign_bf16_kernel<<<(unsigned) ((n + H_BM - 1) / H_BM), H_THREADS, 0, stream>>>(
		scratch->points_bf16.get(), n, width, scratch->centroids_bf16.get(), k,
		scratch->norms.get(), l2, points, centroids, d, assign, score);
	return cvcuda_check_launch(stream);
}

extern "C" CvCudaStatus
cvcuda_kmeans_assign(const CvCudaBuffer *points, long long n, int d,
					 const CvCudaBuffer *centroids, int k, int metric, int mode,
					 CvCudaBuffer *assign, CvCudaBuffer *score, CvCudaError *err)
{
	return cvcuda_guard("kmeans_assign", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_kmeans_check_assign(points, n, d, centroids, k, metric,
														 mode, assign, score, err);
		KmeansAssignScratch scratch;
		cudaStream_t stream;

		if (status != CVCUDA_OK)
			return status;
		if (n == 0)
			return cvcuda_set_ok(err);
		CVCUDA_TRY(cvcuda_stream(&stream), "kmeans_assign: stream", err);
		CVCUDA_TRY(cvcuda_kmeans_assign_device(static_cast<const float *>(points->data), n, d,
											   static_cast<const float *>(centroids->data), k,
											   metric, mode, &scratch,
											   static_cast<int32_t *>(assign->data),
											   score ? static_cast<float *>(score->data) : nullptr,
											   stream),
				   "kmeans_assign", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "kmeans_assign", err);
		return cvcuda_set_ok(err);
	});
}
