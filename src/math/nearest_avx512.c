/*
 * nearest_avx512.c: the AVX-512F scoring kernel of nearest.c.
 *
 * Eight points against two blocks (32 centroids) at a time: sixteen
 * accumulators, each one point's dot products with sixteen centroids,
 * advanced one dimension per step by a broadcast point element times one
 * row of the transposed block: a separate multiply and add per lane, in
 * dimension order, exactly the scalar kernel's sequence (the scalar
 * kernel's lanes are the same sixteen centroids).  Per-lane best/second
 * states are kept across blocks and merged by the shared helper.
 * target("avx512f") instead of per-file flags; dispatch checks the CPU.
 */
#include "nearest_variants.h"

#ifdef CV_HAVE_X86_SIMD

#include <immintrin.h>

#define CV_AVX512 __attribute__((target("avx512f")))

#define ROWS 8
#define WIDTH (2 * CV_NEAREST_BLOCK)

/* Per-lane states of ROWS points, WIDTH lanes each, row-major. */
typedef struct LaneState
{
	float		best[ROWS * WIDTH] __attribute__((aligned(64)));
	float		second[ROWS * WIDTH] __attribute__((aligned(64)));
	int32_t		index[ROWS * WIDTH] __attribute__((aligned(64)));
} LaneState;

/* Every lane: no score seen. */
static inline CV_AVX512 void
state_reset(LaneState *st)
{
	__m512		inf = _mm512_set1_ps((float) INFINITY);
	__m512i		none = _mm512_set1_epi32(-1);
	int			i;

	for (i = 0; i < ROWS * WIDTH; i += 16)
	{
		_mm512_store_ps(st->best + i, inf);
		_mm512_store_ps(st->second + i, inf);
		_mm512_store_si512((void *) (st->index + i), none);
	}
}

/*
 * One score per lane into the lanes' states, the scalar rule vectorised:
 * s < best moves best to second; else second = min(s, second).  MINPS
 * returns its first operand only when strictly less, like the scalar '<'.
 */
static inline CV_AVX512 void
update16(float *best, float *second, int32_t *index, __m512 s, __m512i idx)
{
	__m512		b = _mm512_load_ps(best);
	__m512		sc = _mm512_load_ps(second);
	__m512i		ix = _mm512_load_si512((const void *) index);
	__mmask16	lt = _mm512_cmp_ps_mask(s, b, _CMP_LT_OQ);

	sc = _mm512_mask_blend_ps(lt, _mm512_min_ps(s, sc), b);
	b = _mm512_mask_blend_ps(lt, b, s);
	ix = _mm512_mask_blend_epi32(lt, ix, idx);
	_mm512_store_ps(best, b);
	_mm512_store_ps(second, sc);
	_mm512_store_si512((void *) index, ix);
}

/* One dimension step of point p against both blocks. */
#define DOT_STEP2(p) \
	do { \
		__m512		xv = _mm512_set1_ps(x##p[j]); \
		a##p = _mm512_add_ps(a##p, _mm512_mul_ps(xv, c0)); \
		b##p = _mm512_add_ps(b##p, _mm512_mul_ps(xv, c1)); \
	} while (0)

/* One dimension step of point p against one block. */
#define DOT_STEP1(p) \
	do { \
		__m512		xv = _mm512_set1_ps(x##p[j]); \
		a##p = _mm512_add_ps(a##p, _mm512_mul_ps(xv, c0)); \
	} while (0)

/*
 * Dot products of 8 points with 32 centroids; out[2p + h] holds point p
 * against block h.  Named accumulators keep all sixteen in registers.
 */
static CV_AVX512 void
dots_8x32(const float *const *rows, int d, const float *blk0,
		  const float *blk1, __m512 *out)
{
	const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3];
	const float *x4 = rows[4], *x5 = rows[5], *x6 = rows[6], *x7 = rows[7];
	__m512		a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	__m512		a4 = a0, a5 = a0, a6 = a0, a7 = a0;
	__m512		b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	__m512		b4 = a0, b5 = a0, b6 = a0, b7 = a0;
	int			j;

	for (j = 0; j < d; j++)
	{
		__m512		c0 = _mm512_loadu_ps(blk0 + (size_t) j * CV_NEAREST_BLOCK);
		__m512		c1 = _mm512_loadu_ps(blk1 + (size_t) j * CV_NEAREST_BLOCK);

		DOT_STEP2(0);
		DOT_STEP2(1);
		DOT_STEP2(2);
		DOT_STEP2(3);
		DOT_STEP2(4);
		DOT_STEP2(5);
		DOT_STEP2(6);
		DOT_STEP2(7);
	}
	out[0] = a0; out[1] = b0; out[2] = a1; out[3] = b1;
	out[4] = a2; out[5] = b2; out[6] = a3; out[7] = b3;
	out[8] = a4; out[9] = b4; out[10] = a5; out[11] = b5;
	out[12] = a6; out[13] = b6; out[14] = a7; out[15] = b7;
}

/* Dot products of 8 points with the 16 centroids of a lone last block. */
static CV_AVX512 void
dots_8x16(const float *const *rows, int d, const float *blk0, __m512 *out)
{
	const float *x0 = rows[0], *x1 = rows[1], *x2 = rows[2], *x3 = rows[3];
	const float *x4 = rows[4], *x5 = rows[5], *x6 = rows[6], *x7 = rows[7];
	__m512		a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	__m512		a4 = a0, a5 = a0, a6 = a0, a7 = a0;
	int			j;

	for (j = 0; j < d; j++)
	{
		__m512		c0 = _mm512_loadu_ps(blk0 + (size_t) j * CV_NEAREST_BLOCK);

		DOT_STEP1(0);
		DOT_STEP1(1);
		DOT_STEP1(2);
		DOT_STEP1(3);
		DOT_STEP1(4);
		DOT_STEP1(5);
		DOT_STEP1(6);
		DOT_STEP1(7);
	}
	out[0] = a0; out[1] = a1; out[2] = a2; out[3] = a3;
	out[4] = a4; out[5] = a5; out[6] = a6; out[7] = a7;
}

/*
 * Turns dot products into scores (bias - scale * dot: a multiply, then a
 * subtraction) and feeds them to the lane states; 'blocks' is 1 or 2 and
 * base the index of the first centroid.
 */
static inline CV_AVX512 void
score_rows(LaneState *st, const __m512 *acc, int blocks, const float *bias,
		   int32_t base, __m512 scale)
{
	const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8,
										  7, 6, 5, 4, 3, 2, 1, 0);
	int			p;
	int			h;

	for (h = 0; h < blocks; h++)
	{
		__m512		bh = _mm512_loadu_ps(bias + h * CV_NEAREST_BLOCK);
		__m512i		idx = _mm512_add_epi32(_mm512_set1_epi32(base + h * CV_NEAREST_BLOCK), iota);

		for (p = 0; p < ROWS; p++)
		{
			__m512		s = _mm512_sub_ps(bh, _mm512_mul_ps(scale, acc[p * blocks + h]));
			int			lane = p * WIDTH + h * CV_NEAREST_BLOCK;

			update16(st->best + lane, st->second + lane, st->index + lane, s, idx);
		}
	}
}

/* The kernel: pairs of blocks, then a lone last block, then the lane merge. */
static CV_AVX512 void
scan_avx512(const float *const *rows, int d, const float *blocks,
			const float *bias, int first_block, int n_blocks, float scale,
			CvNearestBest *best)
{
	LaneState	st;
	__m512		acc[2 * ROWS];
	__m512		sc = _mm512_set1_ps(scale);
	size_t		stride = (size_t) d * CV_NEAREST_BLOCK;
	int			end = first_block + n_blocks;
	int			b;

	state_reset(&st);
	for (b = first_block; end - b >= 2; b += 2)
	{
		dots_8x32(rows, d, blocks + b * stride, blocks + (b + 1) * stride, acc);
		score_rows(&st, acc, 2, bias + (size_t) b * CV_NEAREST_BLOCK,
				   b * CV_NEAREST_BLOCK, sc);
	}
	if (b < end)
	{
		dots_8x16(rows, d, blocks + b * stride, acc);
		score_rows(&st, acc, 1, bias + (size_t) b * CV_NEAREST_BLOCK,
				   b * CV_NEAREST_BLOCK, sc);
	}
	cv_nearest_merge_lanes(best, ROWS, WIDTH, st.best, st.second, st.index);
}

/* Squares of eight floats, widened to double. */
static inline CV_AVX512 __m512d
square8(__m256 v)
{
	__m512d		w = _mm512_cvtps_pd(v);

	return _mm512_mul_pd(w, w);
}

/*
 * dst = x - m sixteen floats at a time; |dst|^2 in two float64
 * accumulators (elements 0-7 and 8-15 of each block), the tail added after.
 */
static CV_AVX512 double
center_avx512(const float *x, const float *m, float *dst, int d)
{
	__m512d		lo = _mm512_setzero_pd();
	__m512d		hi = _mm512_setzero_pd();
	double		sum;
	int			j;

	for (j = 0; j + 16 <= d; j += 16)
	{
		__m512		v = _mm512_sub_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(m + j));
		__m256		upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));

		_mm512_storeu_ps(dst + j, v);
		lo = _mm512_add_pd(lo, square8(_mm512_castps512_ps256(v)));
		hi = _mm512_add_pd(hi, square8(upper));
	}
	sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
	for (; j < d; j++)
	{
		dst[j] = x[j] - m[j];
		sum += (double) dst[j] * (double) dst[j];
	}
	return sqrt(sum);
}

const CvNearestKernels cv_nearest_kernels_avx512 = {
	.name = "avx512",
	.rows = ROWS,
	.scan = scan_avx512,
	.center = center_avx512,
};

#endif							/* CV_HAVE_X86_SIMD */
