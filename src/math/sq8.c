/*
 * sq8.c: 8-bit residual codes and a proven lower bound on the exact
 * distance from a query to the encoded vector.
 *
 * Notation.  x the vector, c its list centroid, q the query (all float32,
 * finite), n <= CV_SQ8_MAX_DIM = 2^20 the dimension; r = x - c, s the
 * float32 scale, k the codes, x^ = c + s k and e = x - x^ (exact reals).
 * u = 2^-24 and ud = 2^-53 are the float32 and float64 unit roundoffs,
 * g_m = m u / (1 - m u) (float32) and gd_m = (n + 8) 2^-52 >= m ud / (1 - m
 * ud) for m <= n + 2 (float64).  Every float32 is an integer multiple of
 * 2^-149 (the smallest subnormal), so a sum or difference of floats whose
 * magnitude is below 2^-126 is exact; a product of a float and an integer
 * code likewise; only a product of two floats (a square) can lose up to
 * 2^-150 to underflow.  Float64 never under- or overflows below: floats
 * and their squares and products lie in [2^-298, 2^256], and n <= 2^20.
 *
 * The distance kernels (distance.h) sum n float64 terms in some order; a
 * sum of n terms t_j with one rounding each is within gd_n sum |t_j| of
 * the exact sum, whatever the order.  So, with D the kernels' value:
 *   L2:     D >= ||q - x|| (1 - (n + 3) ud): (q_j - x_j) in float64 (one
 *           rounding), squared (one), summed (n - 1), sqrt (one).
 *   IP:     D = -dot_c, dot_c <= <q, x> + gd_n ||q|| ||x|| (the products
 *           of two floats are exact in float64).
 *   cosine: the kernel divides dot_c by D_c = fl(sqrt(fl(|q|^2_c |x|^2_c)))
 *           = ||q|| ||x|| (1 + eps), |eps| <= (n + 2) ud (first order), so
 *           with t = <q, x> / (||q|| ||x||), |t| <= 1, the similarity
 *           sim_c = fl(dot_c / D_c) <= t + E, E = (n + 4) 2^-51; then
 *           D = fl(1 - clamp(sim_c, -1, 1)) >= 1 - min(1, sim_c) - 2^-52.
 *
 * Encoding (cv_sq8_encode).  r_j is computed in float64 (one rounding),
 * s = float32(max |r_j| / 127), raised until max|r_j| / s <= 127.25, and
 * k_j = clamp(rint(r_j / s), -127, 127); the clamp only ever trims a
 * quotient that rounding pushed past 127, and the error below is computed
 * from the codes actually stored, so it holds regardless.  With r~_j =
 * r_j (1 + d1) and e~_j = fl(r~_j - s k_j) (s k_j is exact in float64):
 * |e_j| <= |e~_j| / (1 - ud) + ud |r_j|, hence
 *   ||e|| <= (sqrt(sum e~^2) + ud sqrt(sum r~^2)) (1 + (n/2 + 4) ud),
 * and error stores that float64 value times 1 + (n + 8) 2^-52 (covering
 * the sums, the square roots and these few operations) rounded up to
 * float32.  code_norm = float32 up of sqrt(sum k^2) (1 + 2^-50) (the sum
 * is exact).  vector_norm = float32 down of sqrt(sum x^2) (1 - (n + 8)
 * 2^-52), so vector_norm <= ||x|| and, the float32 step being at most
 * 2^-23 of the value or 2^-149, ||x|| <= x_hi = vector_norm (1 + 2^-21) +
 * 2^-148 unless vector_norm saturated at FLT_MAX; then the triangle
 * ||x|| <= ||c|| + s code_norm + error serves.
 *
 * Scaling.  cv_sq8_prepare picks P = 2^p so that the float32 vector it
 * stores (P (q - c) for L2, P q otherwise) has its largest element in
 * [2^16, 2^17), or below when q is within 2^-24 of c (then 2^-24 of the
 * largest element of q and c is scaled to 2^16 instead).  Huge and tiny
 * data keep their relative precision, and the float32 sums below cannot
 * overflow unless a vector's residual is some 2^40 times the query's; L2
 * then sums again in float64, whose roundings are all smaller than the
 * float32 ones the allowances cover (inner product cannot overflow: |P q_j|
 * < 2^17, |k_j| <= 127, n <= 2^20).  Multiplying by P is exact in float64;
 * rounding to float32 costs u relative plus 2^-150 absolute.
 *
 * L2.  Stored w_j = fl32(P fl64(q_j - c_j)): |w_j - P (q_j - c_j)| <=
 * u1 P |q_j - c_j| + 2^-150 with u1 = u + 2 ud.  Per call s' = fl32(s P),
 * |s' - s P| <= u s P + 2^-150.  The kernels form t_j = fl(a_j), a_j = w_j
 * - fl(s' k_j) (separate roundings) or a_j = w_j - s' k_j (fused); a
 * difference of floats below 2^-126 is exact, so t_j = a_j (1 + d), |d| <=
 * u, ||a|| >= ||t|| / (1 + u) >= ||t|| (1 - u), and
 *   ||a - P (q - x^)|| <= ||w - P (q - c)|| + ||fl(s' k) - s' k||
 *                         + |s' - s P| ||k||
 *                      <= u1 P ||q - c|| + 2^-150 sqrt(n)
 *                         + (2.0001 u s P + 2^-149) code_norm  =: G.
 * The float32 sum S of the t_j^2 (squares and adds, fused or not, any
 * order, at most n + 2 roundings per term) satisfies S >= sum t^2 (1 -
 * g_{n+2}) - n 2^-148 and S <= sum t^2 (1 + g_{n+2}) + n 2^-148 (underflow
 * of at most 2n operations, 2^-150 each), so ||t|| >= A = sqrt(max(0, (S -
 * n 2^-148) (1 - g_{n+2}))), as 1 / (1 + g) >= 1 - g.  Then
 *   ||q - x|| >= ||q - x^|| - error >= (A (1 - u) - G) / P - error =: L,
 * and the returned L (1 - (n + 8) 2^-52) is below the kernel's D.  Our own
 * float64 evaluation of L (A (1 - u) / P as one sqrt of S's product with
 * precomputed (1 - g)(1 - u)^2 / P^2, and G / P from precomputed parts;
 * s' is one float32 product when P is a normal float32, which rounds as
 * fl32(s P) does) takes fewer than 16 roundings, each at most ud of a
 * partial result no larger than M = (A + G) / P + error, so L is first
 * lowered by 2^-48 M: we return A (1 - u) / P (1 - 2^-48) k - (G / P +
 * error) (1 + 2^-48) k, k = 1 - (n + 8) 2^-52, or 0 if that is not
 * positive (D >= 0).
 *
 * Inner product.  <q, x> = <q, c> + s <q, k> + <q, e>, and |<q, e>| <=
 * ||q|| error.  <q, c> is computed in float64 at prepare (base), within
 * gd_n ||q|| ||c|| (slack).  Stored z_j = fl32(P q_j) = P q_j + dz_j,
 * |dz_j| <= u P |q_j| + 2^-150.  The float32 f = fl(sum z_j k_j) has no
 * underflow loss (products of a float and an integer, and sums, are exact
 * below 2^-126) and |f - <z, k>| <= g_{n+2} ||z|| code_norm with ||z|| <=
 * Z = P ||q|| (1 + u) + 2^-150 sqrt(n); |<dz, k>| <= (u P ||q|| + 2^-150
 * sqrt(n)) code_norm.  So
 *   <q, x> <= base + slack + s f / P + s code_norm per_code + ||q|| error,
 *   per_code = (g_{n+2} Z + u P ||q|| + 2^-150 sqrt(n)) / P,
 * (s f / P is exact in float64) and the kernel's dot_c is at most that
 * plus gd_n ||q|| x_hi.  Our evaluation is lowered by 2^-48 times the sum
 * of the magnitudes of the terms, as for L2.  The bound is minus this.
 *
 * Cosine.  With Dot the upper bound on <q, x> just derived (before the
 * kernel's gd_n term), T = Dot / (q_lo vector_norm) when Dot >= 0 and Dot
 * / (q_hi x_hi) when Dot < 0 is >= t, so D >= 1 - min(1, T + E) - 2^-52;
 * we return 1 - T - E - 2^-47 clamped to [0, 2] (the 2^-47 covers 2^-52
 * and our few roundings while |T| <= 4; if T > 4 the value is clamped to
 * 0, if T < -4 then sim_c < -1, D = 2 exactly, and the value is clamped to
 * 2).  A zero query makes every exact distance NaN, which every value
 * precedes, so we return NaN; a vector_norm of zero (a zero or subnormal
 * vector) gives -INFINITY.
 *
 * Failed encodings (error = +INFINITY) and unusable queries give
 * -INFINITY.  test/math/test_sq8.c checks all of this against the kernels.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "distance.h"
#include "distance_variants.h"
#include "sq8.h"

#ifdef CV_HAVE_X86_SIMD
#include <immintrin.h>
#endif

/* CvMetric values (cuda/include/clustervec_metric.h). */
#define SQ8_L2 1
#define SQ8_INNER_PRODUCT 2
#define SQ8_COSINE 3

#define SQ8_U 0x1p-24			/* float32 unit roundoff */
#define SQ8_U1 (0x1p-24 + 0x1p-52)	/* one float32 and two float64 roundings */
#define SQ8_HALF_SUBNORMAL 0x1p-150
#define SQ8_TARGET_EXPONENT 16	/* stored vectors peak in [2^16, 2^17) */
#define SQ8_OWN_ROUNDING 0x1p-48	/* our float64 evaluation, see above */

typedef float (*Sq8L2Kernel) (const float *w, const int8_t *k, float s, int n);
typedef float (*Sq8DotKernel) (const float *z, const int8_t *k, int n);

typedef struct Sq8Kernels
{
	Sq8L2Kernel l2;
	Sq8DotKernel dot;
} Sq8Kernels;

/* float32 g_m = m u / (1 - m u). */
static double
gamma32(int m)
{
	double		mu = m * SQ8_U;

	return mu / (1 - mu);
}

/* Inflation covering a float64 sum of n terms, a sqrt and a few operations. */
static double
up64(int n)
{
	return 1 + (n + 8) * 0x1p-52;
}

/* The deflation matching up64. */
static double
down64(int n)
{
	return 1 - (n + 8) * 0x1p-52;
}

/* The smallest float32 >= v (+INFINITY past FLT_MAX). */
static float
float_up(double v)
{
	float		f = (float) v;

	if ((double) f < v)
		f = nextafterf(f, INFINITY);
	return f;
}

/* The largest float32 <= v, for v >= 0, saturating at FLT_MAX. */
static float
float_down(double v)
{
	float		f = (float) v;

	if ((double) f > v)
		f = nextafterf(f, 0.0f);
	return isinf(f) ? FLT_MAX : f;
}

/* True when every element is finite. */
static bool
all_finite(const float *a, int n)
{
	for (int j = 0; j < n; j++)
		if (!isfinite(a[j]))
			return false;
	return true;
}

/* Sum of squares in float64. */
static double
sum_squares(const float *a, int n)
{
	double		s = 0;

	for (int j = 0; j < n; j++)
		s += (double) a[j] * a[j];
	return s;
}

/* Largest |a_j - b_j| in float64 (b may be NULL for zero). */
static double
max_abs_difference(const float *a, const float *b, int n)
{
	double		m = 0;

	for (int j = 0; j < n; j++)
		m = fmax(m, fabs((double) a[j] - (b ? (double) b[j] : 0.0)));
	return m;
}

/* The factors and codes of a vector that cannot be encoded. */
static bool
encode_failed(int8_t *codes, int n, CvSq8Factors *factors)
{
	if (n > 0)
		memset(codes, 0, n);
	factors->scale = 0;
	factors->error = INFINITY;
	factors->code_norm = 0;
	factors->vector_norm = 0;
	return false;
}

/* float32 scale with every |r_j / scale| <= 127.25, so codes round into range. */
static float
choose_scale(double max_residual)
{
	float		s;

	if (max_residual == 0)
		return 0;
	s = fmaxf((float) (max_residual / 127), 0x1p-149f);
	while (max_residual / s > 127.25)
		s = nextafterf(s, INFINITY);
	return s;
}

/* codes_j = round((x_j - c_j) / s), clamped to [-127, 127]. */
static void
quantize(const float *x, const float *c, int n, float s, int8_t *codes)
{
	for (int j = 0; j < n; j++)
	{
		double		v = s > 0 ? rint(((double) x[j] - c[j]) / s) : 0;

		codes[j] = (int8_t) fmin(127, fmax(-127, v));
	}
}

/* Upper bound on || x - (c + s k) || over the reals (see the proof). */
static double
residual_error(const float *x, const float *c, int n, float s, const int8_t *codes)
{
	double		e2 = 0;
	double		r2 = 0;

	for (int j = 0; j < n; j++)
	{
		double		r = (double) x[j] - c[j];
		double		e = r - (double) s * codes[j];

		e2 += e * e;
		r2 += r * r;
	}
	return (sqrt(e2) + 0x1p-52 * sqrt(r2)) * up64(n);
}

/* Upper bound on || k ||. */
static double
code_norm(const int8_t *codes, int n)
{
	double		k2 = 0;

	for (int j = 0; j < n; j++)
		k2 += codes[j] * codes[j];
	return sqrt(k2) * (1 + 0x1p-50);
}

bool
cv_sq8_encode(const float *x, const float *c, int n, int8_t *codes,
			  CvSq8Factors *factors)
{
	if (n < 1 || n > CV_SQ8_MAX_DIM || !all_finite(x, n) || !all_finite(c, n))
		return encode_failed(codes, n, factors);
	factors->scale = choose_scale(max_abs_difference(x, c, n));
	quantize(x, c, n, factors->scale, codes);
	factors->error = float_up(residual_error(x, c, n, factors->scale, codes));
	factors->code_norm = float_up(code_norm(codes, n));
	factors->vector_norm = float_down(sqrt(sum_squares(x, n)) * down64(n));
	if (isinf(factors->error))
		return encode_failed(codes, n, factors);
	return true;
}

/* The power of two that brings ref's magnitude into [2^16, 2^17). */
static double
scaling_for(double ref)
{
	return ldexp(1.0, SQ8_TARGET_EXPONENT - ilogb(ref));
}

/* L2: the scaled float32 residual and the per-query allowance G0. */
static void
prepare_l2(CvSq8Query *p, const float *q, const float *c, int n, float *workspace)
{
	double		ref = max_abs_difference(q, c, n);
	double		r2 = 0;

	/* a query at (or a few ulps from) the centroid: scale by the data */
	ref = fmax(ref, 0x1p-24 * fmax(max_abs_difference(c, NULL, n),
									 max_abs_difference(q, NULL, n)));
	p->pow2 = scaling_for(ref > 0 ? ref : 1.0);
	p->inv_pow2 = 1 / p->pow2;
	for (int j = 0; j < n; j++)
	{
		double		r = (double) q[j] - c[j];

		workspace[j] = (float) (r * p->pow2);
		r2 += r * r;
	}
	p->residual = workspace;
	p->residual_norm = sqrt(r2) * up64(n);
	p->fixed = SQ8_U1 * p->pow2 * p->residual_norm + SQ8_HALF_SUBNORMAL * sqrt(n);
	p->per_code = 2.0001 * SQ8_U;
	/* the folded constants of l2_bound; inv_pow2^2 >= 2^-330 stays normal */
	p->l2_underflow = n * 0x1p-148;
	p->l2_square = (1 - p->gamma) * (1 - SQ8_U) * (1 - SQ8_U) * p->inv_pow2 * p->inv_pow2;
	p->l2_fixed = p->fixed * p->inv_pow2;
	p->l2_subnormal = 0x1p-149 * p->inv_pow2;
	p->keep_low = (1 - SQ8_OWN_ROUNDING) * p->kernel_down;
	p->keep_high = (1 + SQ8_OWN_ROUNDING) * p->kernel_down;
	if (p->pow2 >= 0x1p-126 && p->pow2 <= 0x1p127)
		p->pow2_f32 = (float) p->pow2;
}

/* Inner product and cosine: the scaled float32 query, <q, c> and allowances. */
static void
prepare_dot(CvSq8Query *p, const float *q, const float *c, int n, float *workspace)
{
	double		ref = max_abs_difference(q, NULL, n);
	double		base = 0;
	double		z_norm;

	p->pow2 = scaling_for(ref > 0 ? ref : 1.0);
	p->inv_pow2 = 1 / p->pow2;
	for (int j = 0; j < n; j++)
	{
		workspace[j] = (float) ((double) q[j] * p->pow2);
		base += (double) q[j] * c[j];
	}
	p->scaled = workspace;
	p->base = base;
	p->slack = (n + 8) * 0x1p-52 * p->query_norm * p->centroid_norm;
	z_norm = p->pow2 * p->query_norm * (1 + SQ8_U) + SQ8_HALF_SUBNORMAL * sqrt(n);
	p->per_code = (gamma32(n + 2) * z_norm + SQ8_U * p->pow2 * p->query_norm
				   + SQ8_HALF_SUBNORMAL * sqrt(n)) / p->pow2;
}

void
cv_sq8_prepare(CvSq8Query *prepared, int metric, const float *query,
			   const float *centroid, int n, float *workspace)
{
	double		q2;

	memset(prepared, 0, sizeof(*prepared));
	prepared->metric = metric;
	prepared->n = n;
	prepared->query = query;
	if (n < 1 || n > CV_SQ8_MAX_DIM || !all_finite(query, n) || !all_finite(centroid, n))
		return;
	q2 = sqrt(sum_squares(query, n));
	prepared->query_norm = q2 * up64(n);
	prepared->query_norm_low = q2 * down64(n);
	prepared->centroid_norm = sqrt(sum_squares(centroid, n)) * up64(n);
	prepared->gamma = gamma32(n + 2);
	prepared->kernel_down = down64(n);
	if (metric == SQ8_L2)
		prepare_l2(prepared, query, centroid, n, workspace);
	else if (metric == SQ8_INNER_PRODUCT || metric == SQ8_COSINE)
		prepare_dot(prepared, query, centroid, n, workspace);
	else
		return;
	prepared->usable = true;
}

/* One term (w - s k)^2 of the L2 sum. */
static inline float
l2_term(float w, int8_t k, float s)
{
	float		d = w - s * (float) k;

	return d * d;
}

/*
 * float32 sum of (w_j - s k_j)^2, four chains to hide the add latency.
 * always_inline: the SIMD variants use it for their tails, and a call to
 * non-VEX code with the upper halves of the vector registers dirty costs
 * more than the whole sum on some CPUs (GCC then also omits vzeroupper).
 */
static inline __attribute__((always_inline)) float
l2_sum(const float *w, const int8_t *k, float s, int n)
{
	float		a0 = 0,
				a1 = 0,
				a2 = 0,
				a3 = 0;
	int			j = 0;

	for (; j + 4 <= n; j += 4)
	{
		a0 += l2_term(w[j], k[j], s);
		a1 += l2_term(w[j + 1], k[j + 1], s);
		a2 += l2_term(w[j + 2], k[j + 2], s);
		a3 += l2_term(w[j + 3], k[j + 3], s);
	}
	for (; j < n; j++)
		a0 += l2_term(w[j], k[j], s);
	return (a0 + a1) + (a2 + a3);
}

/* float32 sum of z_j k_j, four chains; always_inline as l2_sum. */
static inline __attribute__((always_inline)) float
dot_sum(const float *z, const int8_t *k, int n)
{
	float		a0 = 0,
				a1 = 0,
				a2 = 0,
				a3 = 0;
	int			j = 0;

	for (; j + 4 <= n; j += 4)
	{
		a0 += z[j] * (float) k[j];
		a1 += z[j + 1] * (float) k[j + 1];
		a2 += z[j + 2] * (float) k[j + 2];
		a3 += z[j + 3] * (float) k[j + 3];
	}
	for (; j < n; j++)
		a0 += z[j] * (float) k[j];
	return (a0 + a1) + (a2 + a3);
}

/* The scalar variant of the L2 sum. */
static float
l2_f32_scalar(const float *w, const int8_t *k, float s, int n)
{
	return l2_sum(w, k, s, n);
}

/* The scalar variant of the code dot product. */
static float
dot_f32_scalar(const float *z, const int8_t *k, int n)
{
	return dot_sum(z, k, n);
}

#ifdef CV_HAVE_X86_SIMD
/* Sixteen codes widened to float32. */
static inline __attribute__((always_inline, target("avx512f"))) __m512
codes16(const int8_t *k)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) k)));
}

/* One AVX-512 L2 step: acc + (w - s k)^2 for 16 codes, both fused. */
static inline __attribute__((always_inline, target("avx512f"))) __m512
l2_step16(__m512 acc, __m512 sv, const float *w, const int8_t *k)
{
	__m512		d = _mm512_fnmadd_ps(sv, codes16(k), _mm512_loadu_ps(w));

	return _mm512_fmadd_ps(d, d, acc);
}

/* One AVX-512 dot step: acc + z k for 16 codes, fused. */
static inline __attribute__((always_inline, target("avx512f"))) __m512
dot_step16(__m512 acc, const float *z, const int8_t *k)
{
	return _mm512_fmadd_ps(_mm512_loadu_ps(z), codes16(k), acc);
}

/*
 * AVX-512: 64 codes a step in four chains (a fused multiply-add's latency
 * is four cycles, so fewer chains would leave the units idle at n = 1024),
 * then 16 at a time, then the scalar tail.
 */
static __attribute__((target("avx512f"))) float
l2_f32_avx512(const float *w, const int8_t *k, float s, int n)
{
	__m512		sv = _mm512_set1_ps(s);
	__m512		a0 = _mm512_setzero_ps();
	__m512		a1 = _mm512_setzero_ps();
	__m512		a2 = _mm512_setzero_ps();
	__m512		a3 = _mm512_setzero_ps();
	int			j = 0;

	for (; j + 64 <= n; j += 64)
	{
		a0 = l2_step16(a0, sv, w + j, k + j);
		a1 = l2_step16(a1, sv, w + j + 16, k + j + 16);
		a2 = l2_step16(a2, sv, w + j + 32, k + j + 32);
		a3 = l2_step16(a3, sv, w + j + 48, k + j + 48);
	}
	for (; j + 16 <= n; j += 16)
		a0 = l2_step16(a0, sv, w + j, k + j);
	a0 = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
	return _mm512_reduce_add_ps(a0) + l2_sum(w + j, k + j, s, n - j);
}

/* AVX-512: the code dot product in the same four chains. */
static __attribute__((target("avx512f"))) float
dot_f32_avx512(const float *z, const int8_t *k, int n)
{
	__m512		a0 = _mm512_setzero_ps();
	__m512		a1 = _mm512_setzero_ps();
	__m512		a2 = _mm512_setzero_ps();
	__m512		a3 = _mm512_setzero_ps();
	int			j = 0;

	for (; j + 64 <= n; j += 64)
	{
		a0 = dot_step16(a0, z + j, k + j);
		a1 = dot_step16(a1, z + j + 16, k + j + 16);
		a2 = dot_step16(a2, z + j + 32, k + j + 32);
		a3 = dot_step16(a3, z + j + 48, k + j + 48);
	}
	for (; j + 16 <= n; j += 16)
		a0 = dot_step16(a0, z + j, k + j);
	a0 = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
	return _mm512_reduce_add_ps(a0) + dot_sum(z + j, k + j, n - j);
}

/* Eight codes widened to float32. */
static inline __attribute__((always_inline, target("avx2"))) __m256
codes8(const int8_t *k)
{
	return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *) k)));
}

/* Sum of the eight lanes. */
static inline __attribute__((always_inline, target("avx2"))) float
sum8(__m256 v)
{
	__m128		h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
	return _mm_cvtss_f32(h);
}

/* One AVX2 L2 step: acc + (w - s k)^2 for 8 codes, both fused. */
static inline __attribute__((always_inline, target("avx2,fma"))) __m256
l2_step8(__m256 acc, __m256 sv, const float *w, const int8_t *k)
{
	__m256		d = _mm256_fnmadd_ps(sv, codes8(k), _mm256_loadu_ps(w));

	return _mm256_fmadd_ps(d, d, acc);
}

/* One AVX2 dot step: acc + z k for 8 codes, fused. */
static inline __attribute__((always_inline, target("avx2,fma"))) __m256
dot_step8(__m256 acc, const float *z, const int8_t *k)
{
	return _mm256_fmadd_ps(_mm256_loadu_ps(z), codes8(k), acc);
}

/* AVX2 with FMA: 32 codes a step in four chains, then 8, then the tail. */
static __attribute__((target("avx2,fma"))) float
l2_f32_avx2(const float *w, const int8_t *k, float s, int n)
{
	__m256		sv = _mm256_set1_ps(s);
	__m256		a0 = _mm256_setzero_ps();
	__m256		a1 = _mm256_setzero_ps();
	__m256		a2 = _mm256_setzero_ps();
	__m256		a3 = _mm256_setzero_ps();
	int			j = 0;

	for (; j + 32 <= n; j += 32)
	{
		a0 = l2_step8(a0, sv, w + j, k + j);
		a1 = l2_step8(a1, sv, w + j + 8, k + j + 8);
		a2 = l2_step8(a2, sv, w + j + 16, k + j + 16);
		a3 = l2_step8(a3, sv, w + j + 24, k + j + 24);
	}
	for (; j + 8 <= n; j += 8)
		a0 = l2_step8(a0, sv, w + j, k + j);
	a0 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
	return sum8(a0) + l2_sum(w + j, k + j, s, n - j);
}

/* AVX2 with FMA: the code dot product in the same four chains. */
static __attribute__((target("avx2,fma"))) float
dot_f32_avx2(const float *z, const int8_t *k, int n)
{
	__m256		a0 = _mm256_setzero_ps();
	__m256		a1 = _mm256_setzero_ps();
	__m256		a2 = _mm256_setzero_ps();
	__m256		a3 = _mm256_setzero_ps();
	int			j = 0;

	for (; j + 32 <= n; j += 32)
	{
		a0 = dot_step8(a0, z + j, k + j);
		a1 = dot_step8(a1, z + j + 8, k + j + 8);
		a2 = dot_step8(a2, z + j + 16, k + j + 16);
		a3 = dot_step8(a3, z + j + 24, k + j + 24);
	}
	for (; j + 8 <= n; j += 8)
		a0 = dot_step8(a0, z + j, k + j);
	a0 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
	return sum8(a0) + dot_sum(z + j, k + j, n - j);
}

static const Sq8Kernels sq8_avx512 = {l2_f32_avx512, dot_f32_avx512};
static const Sq8Kernels sq8_avx2 = {l2_f32_avx2, dot_f32_avx2};
#endif

static const Sq8Kernels sq8_scalar = {l2_f32_scalar, dot_f32_scalar};

/*
 * The kernels of a level this CPU runs.  The AVX2 ones also need FMA,
 * which every AVX2 CPU we know has but cv_simd_supported does not check.
 */
static const Sq8Kernels *
kernels_for(CvSimdLevel level)
{
#ifdef CV_HAVE_X86_SIMD
	static int	fma = -1;

	if (level == CV_SIMD_AVX512)
		return &sq8_avx512;
	if (level == CV_SIMD_AVX2)
	{
		if (fma < 0)
		{
			__builtin_cpu_init();
			fma = __builtin_cpu_supports("fma") ? 1 : 0;
		}
		return fma ? &sq8_avx2 : &sq8_scalar;
	}
#endif
	(void) level;
	return &sq8_scalar;
}

/* Upper bound on || x || (see the proof: vector_norm, or the triangle). */
static double
vector_norm_upper(const CvSq8Query *p, const CvSq8Factors *f)
{
	if (f->vector_norm < FLT_MAX)
		return f->vector_norm * (1 + 0x1p-21) + 0x1p-148;
	return (p->centroid_norm + (double) f->scale * f->code_norm + f->error) * (1 + 0x1p-50);
}

/*
 * The L2 sum in float64, for when float32 overflowed (a vector's residual
 * some 2^40 times the query's): each of its roundings is smaller than the
 * float32 one it replaces, so the proof's allowances still cover it.
 */
static double
l2_f64(const float *w, const int8_t *k, double sp, int n)
{
	double		acc = 0;

	for (int j = 0; j < n; j++)
	{
		double		d = w[j] - sp * k[j];

		acc += d * d;
	}
	return acc;
}

/* float32(s P), by one float32 multiplication when P is a normal float32. */
static inline float
scaled_scale(const CvSq8Query *p, float scale)
{
	if (p->pow2_f32 != 0)
		return scale * p->pow2_f32;
	return (float) ((double) scale * p->pow2);
}

/*
 * L2: the bound L of the proof, lowered by our own rounding and times the
 * kernels', or 0.  Runs some 40,000 times a query, so the per-query parts
 * are folded into constants at prepare: A / P = sqrt((S - n 2^-148) *
 * l2_square), G / P = l2_fixed + (per_code s + l2_subnormal) code_norm.
 */
static double
l2_bound(const CvSq8Query *p, const Sq8Kernels *kernels, const int8_t *codes,
		 const CvSq8Factors *f)
{
	float		s32 = scaled_scale(p, f->scale);
	double		sum;
	double		a;
	double		rest;
	double		bound;

	sum = s32 <= FLT_MAX ? kernels->l2(p->residual, codes, s32, p->n) : INFINITY;
	if (!(sum <= FLT_MAX))
		sum = l2_f64(p->residual, codes, (double) f->scale * p->pow2, p->n);
	sum = (sum - p->l2_underflow) * p->l2_square;
	a = sum > 0 ? sqrt(sum) : 0;
	rest = p->l2_fixed + (p->per_code * f->scale + p->l2_subnormal) * f->code_norm
		+ f->error;
	bound = a * p->keep_low - rest * p->keep_high;
	return bound > 0 ? bound : 0;
}

/*
 * Inner product and cosine: upper bound on <q, x> (before the kernel's
 * rounding), or NaN when the float32 sum overflowed.
 */
static double
dot_upper(const CvSq8Query *p, const Sq8Kernels *kernels, const int8_t *codes,
		  const CvSq8Factors *f)
{
	float		dot = kernels->dot(p->scaled, codes, p->n);
	double		main;
	double		allowance;

	if (!(fabsf(dot) <= FLT_MAX))
		return NAN;
	main = (double) f->scale * dot * p->inv_pow2;
	allowance = (double) f->scale * f->code_norm * p->per_code
		+ p->query_norm * f->error + p->slack;
	return p->base + main + allowance
		+ SQ8_OWN_ROUNDING * (fabs(p->base) + fabs(main) + allowance);
}

/* Inner product: minus the upper bound on the kernel's dot product. */
static double
ip_bound(const CvSq8Query *p, const Sq8Kernels *kernels, const int8_t *codes,
		 const CvSq8Factors *f)
{
	double		dot = dot_upper(p, kernels, codes, f);
	double		kernel = (p->n + 8) * 0x1p-52 * p->query_norm * vector_norm_upper(p, f);

	if (isnan(dot))
		return -INFINITY;
	return -(dot + kernel) - SQ8_OWN_ROUNDING * (fabs(dot) + kernel);
}

/* Cosine: 1 - T - E - 2^-47 clamped to [0, 2] (see the proof). */
static double
cosine_bound(const CvSq8Query *p, const Sq8Kernels *kernels, const int8_t *codes,
			 const CvSq8Factors *f)
{
	double		dot;
	double		t;
	double		bound;

	if (p->query_norm == 0)
		return NAN;
	if (!(f->vector_norm > 0))
		return -INFINITY;
	dot = dot_upper(p, kernels, codes, f);
	if (isnan(dot))
		return -INFINITY;
	if (dot >= 0)
		t = dot / (p->query_norm_low * f->vector_norm);
	else
		t = dot / (p->query_norm * vector_norm_upper(p, f));
	bound = 1 - t - ((p->n + 4) * 0x1p-51 + 0x1p-47);
	return bound < 0 ? 0 : bound > 2 ? 2 : bound;
}

/* The bound of any metric with the given kernels. */
static double
bound_with(const CvSq8Query *p, const Sq8Kernels *kernels, const int8_t *codes,
		   const CvSq8Factors *f)
{
	if (!p->usable || !(f->error <= FLT_MAX))
		return -INFINITY;
	switch (p->metric)
	{
		case SQ8_L2:
			return l2_bound(p, kernels, codes, f);
		case SQ8_INNER_PRODUCT:
			return ip_bound(p, kernels, codes, f);
		case SQ8_COSINE:
			return cosine_bound(p, kernels, codes, f);
	}
	return -INFINITY;
}

/*
 * The level cv_distance runs at, by its table's address: cv_simd_use only
 * selects levels this CPU supports, so no detection is needed per call.
 */
static CvSimdLevel
current_level(void)
{
#ifdef CV_HAVE_X86_SIMD
	if (cv_distance == &cv_distance_kernels_avx512)
		return CV_SIMD_AVX512;
	if (cv_distance == &cv_distance_kernels_avx2)
		return CV_SIMD_AVX2;
#endif
	return CV_SIMD_SCALAR;
}

double
cv_sq8_lower_bound(const CvSq8Query *prepared, const int8_t *codes,
				   const CvSq8Factors *factors)
{
	return bound_with(prepared, kernels_for(current_level()), codes, factors);
}

double
cv_sq8_lower_bound_at(CvSimdLevel level, const CvSq8Query *prepared,
					  const int8_t *codes, const CvSq8Factors *factors)
{
	if (!cv_simd_supported(level))
		level = CV_SIMD_SCALAR;
	return bound_with(prepared, kernels_for(level), codes, factors);
}
