/*
 * nearest_avx2.c: the AVX2 scoring kernel of nearest.c.
 *
 * Six points against one block (16 centroids, two __m256 halves) at a
 * time: twelve accumulators, which with the two block rows and a broadcast
 * fill the sixteen ymm registers.  Each lane is one (point, centroid) dot
 * product advanced one dimension per step with a separate multiply and
 * add, the scalar kernel's exact sequence.  target("avx2") instead of
 * per-file flags; dispatch checks the CPU.
 */
#include "nearest_variants.h"

#ifdef CV_HAVE_X86_SIMD

#include <immintrin.h>

#define CV_AVX2 __attribute__((target("avx2")))

#define ROWS 6
#define WIDTH CV_NEAREST_BLOCK

/* Per-lane states of ROWS points, WIDTH lanes each, row-major. */
typedef struct LaneState
{
	float		best[ROWS * WIDTH] __attribute__((aligned(32)));
	float		second[ROWS * WIDTH] __attribute__((aligned(32)));
	int32_t		index[ROWS * WIDTH] __attribute__((aligned(32)));
} LaneState;

/* Every lane: no score seen. */
static inline CV_AVX2 void
state_reset(LaneState *st)
{
	__m256		inf = _mm256_set1_ps((float) INFINITY);
	__m256i		none = _mm256_set1_epi32(-1);
	int			i;

	for (i = 0; i < ROWS * WIDTH; i += 8)
	{
		_mm256_store_ps(st->best + i, inf);
		_mm256_store_ps(st->second + i, inf);
		_mm256_store_si256((__m256i *) (st->index + i), none);
	}
}

/*
 * The scalar update rule on eight lanes: s < best moves best to second,
 * else second = min(s, second) (MINPS keeps its second operand on ties).
 */
static inline CV_AVX2 void
update8(float *best, float *second, int32_t *index, __m256 s, __m256i idx)
{
	__m256		b = _mm256_load_ps(best);
	__m256		sc = _mm256_load_ps(second);
	__m256i		ix = _mm256_load_si256((const __m256i *) index);
	__m256		lt = _mm256_cmp_ps(s, b, _CMP_LT_OQ);

	sc = _mm256_blendv_ps(_mm256_min_ps(s, sc), b, lt);
	b = _mm256_blendv_ps(b, s, lt);
	ix = _mm256_blendv_epi8(ix, idx, _mm256_castps_si256(lt));
	_mm256_store_ps(best, b);
	_mm256_store_ps(second, sc);
	_mm256_store_si256((__m256i *) index, ix);
}

/* One dimension step of point p against both halves of the block. */
#define DOT_STEP(p) \
	do { \
		__m256		xv = _mm256_set1_ps(x##p[j]); \
		a##p = _mm256_add_ps(a##p, _mm256_mul_ps(xv, c0)); \
		b##p = _mm256_add_ps(b##p, _mm256_mul_ps(xv, c1)); \
	} while (0)

/* Dot products of 6 points with one block; out[2p + h] is point p, half h. */
static CV_AVX2 void
dots_6x16(const float *const *rows, int d, const float *blk, __m256 *out)
{
	const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2];
	const float *x3 = rows[3], *x4 = rows[4], *x5 = rows[5];
	__m256		a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
	__m256		b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
	int			j;

	for (j = 0; j < d; j++)
	{
		__m256		c0 = _mm256_loadu_ps(blk + (size_t) j * CV_NEAREST_BLOCK);
		__m256		c1 = _mm256_loadu_ps(blk + (size_t) j * CV_NEAREST_BLOCK + 8);

		DOT_STEP(0);
		DOT_STEP(1);
		DOT_STEP(2);
		DOT_STEP(3);
		DOT_STEP(4);
		DOT_STEP(5);
	}
	out[0] = a0; out[1] = b0; out[2] = a1; out[3] = b1;
	out[4] = a2; out[5] = b2; out[6] = a3; out[7] = b3;
	out[8] = a4; out[9] = b4; out[10] = a5; out[11] = b5;
}

/* Scores (bias - scale * dot) of one block into the lane states. */
static inline CV_AVX2 void
score_rows(LaneState *st, const __m256 *acc, const float *bias, int32_t base,
		   __m256 scale)
{
	const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
	int			p;
	int			h;

	for (h = 0; h < 2; h++)
	{
		__m256		bh = _mm256_loadu_ps(bias + h * 8);
		__m256i		idx = _mm256_add_epi32(_mm256_set1_epi32(base + h * 8), iota);

		for (p = 0; p < ROWS; p++)
		{
			__m256		s = _mm256_sub_ps(bh, _mm256_mul_ps(scale, acc[2 * p + h]));
			int			lane = p * WIDTH + h * 8;

			update8(st->best + lane, st->second + lane, st->index + lane, s, idx);
		}
	}
}

/* The kernel: every block of the range, then the lane merge. */
static CV_AVX2 void
scan_avx2(const float *const *rows, int d, const float *blocks,
		  const float *bias, int first_block, int n_blocks, float scale,
		  CvNearestBest *best)
{
	LaneState	st;
	__m256		acc[2 * ROWS];
	__m256		sc = _mm256_set1_ps(scale);
	size_t		stride = (size_t) d * CV_NEAREST_BLOCK;
	int			b;

	state_reset(&st);
	for (b = first_block; b < first_block + n_blocks; b++)
	{
		dots_6x16(rows, d, blocks + b * stride, acc);
		score_rows(&st, acc, bias + (size_t) b * CV_NEAREST_BLOCK,
				   b * CV_NEAREST_BLOCK, sc);
	}
	cv_nearest_merge_lanes(best, ROWS, WIDTH, st.best, st.second, st.index);
}

/* Squares of four floats, widened to double. */
static inline CV_AVX2 __m256d
square4(__m128 v)
{
	__m256d		w = _mm256_cvtps_pd(v);

	return _mm256_mul_pd(w, w);
}

/*
 * dst = x - m eight floats at a time; |dst|^2 in two float64 accumulators
 * (elements 0-3 and 4-7 of each block), the tail added after.
 */
static CV_AVX2 double
center_avx2(const float *x, const float *m, float *dst, int d)
{
	__m256d		lo = _mm256_setzero_pd();
	__m256d		hi = _mm256_setzero_pd();
	double		part[4];
	double		sum;
	int			j;

	for (j = 0; j + 8 <= d; j += 8)
	{
		__m256		v = _mm256_sub_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(m + j));

		_mm256_storeu_ps(dst + j, v);
		lo = _mm256_add_pd(lo, square4(_mm256_castps256_ps128(v)));
		hi = _mm256_add_pd(hi, square4(_mm256_extractf128_ps(v, 1)));
	}
	_mm256_storeu_pd(part, _mm256_add_pd(lo, hi));
	sum = (part[0] + part[1]) + (part[2] + part[3]);
	for (; j < d; j++)
	{
		dst[j] = x[j] - m[j];
		sum += (double) dst[j] * (double) dst[j];
	}
	return sqrt(sum);
}

const CvNearestKernels cv_nearest_kernels_avx2 = {
	.name = "avx2",
	.rows = ROWS,
	.scan = scan_avx2,
	.center = center_avx2,
};

#endif							/* CV_HAVE_X86_SIMD */
