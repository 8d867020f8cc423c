/*
 * health_rank.c: section 6 of STATISTICS.md, the Gram-bounded class:
 * effective_rank = exp(H(p)), p_k = sv_k / sum sv (Roy and Vetterli), sv
 * the singular values of the centred members X - c (n x d).
 *
 * The squared singular values are the eigenvalues of a Gram matrix of side
 * s = min(n, d), accumulated in float64: (X - c)(X - c)^T when n <= d, else
 * (X - c)^T (X - c).  Either is G = P P^T for P the s rows of "things to
 * dot" (members, or dimensions), built in chunks of CHUNK float64 columns so
 * the centred copy never exceeds s x CHUNK.  The eigenvalues come from a
 * Householder reduction to tridiagonal form (4/3 s^3 flops, no vectors)
 * and the implicit QL iteration with Wilkinson-style shifts (O(s^2)).
 *
 * What counts as a zero singular value: sv_k <= eps * max sv (eps = 1e-6,
 * the contract's degeneracy tolerance).  A float64 eigensolver leaves
 * absolute errors near 1e-16 * lambda_max in the eigenvalues, i.e. about
 * 1e-8 * sv_max in the singular values of a rank-deficient cluster; counted
 * as tiny positive p_k, hundreds of them would lift exp(H) by ~1e-4
 * relative.  The threshold removes that noise; a real singular value below
 * it changes H by at most ~1.5e-5 each.  So effective_rank is NULL exactly
 * when max sv = 0 (besides n < 2, a collapsed cluster and a refusal).
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"
#include "health_lanes.h"

/* Float64 columns of P per chunk (a multiple of LANES). */
#define CHUNK 256

/* Bytes of P rows kept resident while the Gram sweep passes over them. */
#define TILE_BYTES (256 * 1024)

/* QL sweeps allowed per eigenvalue before accepting what it has. */
#define QL_MAX_SWEEPS 60

/* The kernel computing four dot products: rows a0, a1 against b0, b1. */
typedef void (*DotKernel) (const double *a0, const double *a1,
						   const double *b0, const double *b1,
						   int len, double *out);


/* Four dot products over len (a multiple of LANES); every variant's body. */
static inline __attribute__((always_inline)) void
dot_2x2_body(const double *a0, const double *a1, const double *b0,
			 const double *b1, int len, double *out)
{
	Half		s00l = {0},
				s00h = {0},
				s01l = {0},
				s01h = {0},
				s10l = {0},
				s10h = {0},
				s11l = {0},
				s11h = {0};
	int			t;

	for (t = 0; t < len; t += LANES)
	{
		Half		x0l,
					x0h,
					x1l,
					x1h,
					y0l,
					y0h,
					y1l,
					y1h;

		LOAD_HALF(x0l, a0 + t);
		LOAD_HALF(x0h, a0 + t + 4);
		LOAD_HALF(x1l, a1 + t);
		LOAD_HALF(x1h, a1 + t + 4);
		LOAD_HALF(y0l, b0 + t);
		LOAD_HALF(y0h, b0 + t + 4);
		LOAD_HALF(y1l, b1 + t);
		LOAD_HALF(y1h, b1 + t + 4);
		s00l += x0l * y0l;
		s00h += x0h * y0h;
		s01l += x0l * y1l;
		s01h += x0h * y1h;
		s10l += x1l * y0l;
		s10h += x1h * y0h;
		s11l += x1l * y1l;
		s11h += x1h * y1h;
	}
	out[0] = finish_lanes(&s00l, &s00h, NULL, 0);
	out[1] = finish_lanes(&s01l, &s01h, NULL, 0);
	out[2] = finish_lanes(&s10l, &s10h, NULL, 0);
	out[3] = finish_lanes(&s11l, &s11h, NULL, 0);
}

/*
 * The vectors of one fused pass over a trailing block (all indexed from the
 * block's first row): the previous column's reflector v and w = p - K v for
 * the update A -= v w^T + w v^T, and this column's reflector u with the
 * accumulator p of A' u.  A missing half points at zeros.
 */
typedef struct PassVectors
{
	const double *v;
	const double *w;
	const double *u;
	double	   *p;
} PassVectors;

/*
 * Row i >= 1 of a trailing block, r at its diagonal, count = len - i
 * entries: applies the update, then, from the updated values, adds the
 * row's share of A' u (row i is row i - 1 of the next block A'; by
 * symmetry it serves p[i] as a dot and p[i + j] as an axpy).  One read and
 * one write of the row instead of three passes.  Every variant's body.
 */
static inline __attribute__((always_inline)) void
fused_row_body(double *r, int i, int count, const PassVectors *pv)
{
	const double *v = pv->v + i;
	const double *w = pv->w + i;
	const double *u = pv->u + i;
	double	   *p = pv->p + i;
	Half		vi = {v[0], v[0], v[0], v[0]};
	Half		wi = {w[0], w[0], w[0], w[0]};
	Half		ui = {u[0], u[0], u[0], u[0]};
	Half		dl = {0},
				dh = {0};
	double		tail[LANES];
	double		diag = r[0] - (v[0] * w[0] + w[0] * v[0]);
	int			end = 1 + (count - 1) / LANES * LANES;
	int			j;

	r[0] = diag;
	for (j = 1; j < end; j += LANES)
	{
		Half		rl,
					rh,
					xl,
					xh,
					yl,
					yh;

		LOAD_HALF(rl, r + j);
		LOAD_HALF(rh, r + j + 4);
		LOAD_HALF(xl, w + j);
		LOAD_HALF(xh, w + j + 4);
		LOAD_HALF(yl, v + j);
		LOAD_HALF(yh, v + j + 4);
		rl -= vi * xl + wi * yl;
		rh -= vi * xh + wi * yh;
		STORE_HALF(r + j, rl);
		STORE_HALF(r + j + 4, rh);
		LOAD_HALF(xl, u + j);
		LOAD_HALF(xh, u + j + 4);
		dl += rl * xl;
		dh += rh * xh;
		LOAD_HALF(yl, p + j);
		LOAD_HALF(yh, p + j + 4);
		yl += rl * ui;
		yh += rh * ui;
		STORE_HALF(p + j, yl);
		STORE_HALF(p + j + 4, yh);
	}
	for (; j < count; j++)
	{
		r[j] -= v[0] * w[j] + w[0] * v[j];
		tail[j - end] = r[j] * u[j];
		p[j] += r[j] * u[0];
	}
	p[0] += diag * u[0] + finish_lanes(&dl, &dh, tail, count - end);
}

/* The fused row kernel of one target. */
typedef void (*RowKernel) (double *r, int i, int count, const PassVectors *pv);

/* Portable variant of the dot kernel. */
static void
dot_2x2_portable(const double *a0, const double *a1, const double *b0,
				 const double *b1, int len, double *out)
{
	dot_2x2_body(a0, a1, b0, b1, len, out);
}

/* Portable variant of the fused row kernel. */
static void
fused_row_portable(double *r, int i, int count, const PassVectors *pv)
{
	fused_row_body(r, i, count, pv);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define HAVE_X86_VARIANTS 1

/*
 * The eight lanes as one vector, for the AVX-512 variant only (one zmm;
 * other targets lower it through the stack).  Same lanes, same bits.
 */
typedef double Wide __attribute__((vector_size(LANES * sizeof(double))));

/* dot_2x2_body with one Wide per lane set (the AVX-512 variant's body). */
static inline __attribute__((always_inline)) void
dot_2x2_wide_body(const double *a0, const double *a1, const double *b0,
				  const double *b1, int len, double *out)
{
	Wide		s00 = {0},
				s01 = {0},
				s10 = {0},
				s11 = {0};
	double		l[LANES];
	int			t;

	for (t = 0; t < len; t += LANES)
	{
		Wide		x0,
					x1,
					y0,
					y1;

		memcpy(&x0, a0 + t, sizeof(Wide));
		memcpy(&x1, a1 + t, sizeof(Wide));
		memcpy(&y0, b0 + t, sizeof(Wide));
		memcpy(&y1, b1 + t, sizeof(Wide));
		s00 += x0 * y0;
		s01 += x0 * y1;
		s10 += x1 * y0;
		s11 += x1 * y1;
	}
	memcpy(l, &s00, sizeof(l));
	out[0] = fold_lanes(l);
	memcpy(l, &s01, sizeof(l));
	out[1] = fold_lanes(l);
	memcpy(l, &s10, sizeof(l));
	out[2] = fold_lanes(l);
	memcpy(l, &s11, sizeof(l));
	out[3] = fold_lanes(l);
}

/* AVX2 variant of the dot kernel (same lanes, so the same bits). */
static __attribute__((target("avx2"))) void
dot_2x2_avx2(const double *a0, const double *a1, const double *b0,
			 const double *b1, int len, double *out)
{
	dot_2x2_body(a0, a1, b0, b1, len, out);
}

/* AVX-512 variant of the dot kernel (same lanes, so the same bits). */
static __attribute__((target("avx512f"))) void
dot_2x2_avx512(const double *a0, const double *a1, const double *b0,
			   const double *b1, int len, double *out)
{
	dot_2x2_wide_body(a0, a1, b0, b1, len, out);
}

/* AVX2 variant of the fused row kernel. */
static __attribute__((target("avx2"))) void
fused_row_avx2(double *r, int i, int count, const PassVectors *pv)
{
	fused_row_body(r, i, count, pv);
}

/* AVX-512 variant of the fused row kernel. */
static __attribute__((target("avx512f"))) void
fused_row_avx512(double *r, int i, int count, const PassVectors *pv)
{
	fused_row_body(r, i, count, pv);
}
#endif

/*
 * The widest dot kernel this CPU runs.  __builtin_cpu_supports also checks
 * that the OS saves the wide registers, so a reported level is safe to run.
 */
static DotKernel
choose_dot_kernel(void)
{
#ifdef HAVE_X86_VARIANTS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return dot_2x2_avx512;
	if (__builtin_cpu_supports("avx2"))
		return dot_2x2_avx2;
#endif
	return dot_2x2_portable;
}

/* The widest fused row kernel this CPU runs. */
static RowKernel
choose_row_kernel(void)
{
#ifdef HAVE_X86_VARIANTS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return fused_row_avx512;
	if (__builtin_cpu_supports("avx2"))
		return fused_row_avx2;
#endif
	return fused_row_portable;
}

/* The Gram problem: G (ld x ld, upper triangle) = P P^T summed over chunks. */
typedef struct Gram
{
	const float *x;
	int64_t		n;
	int			d;
	const double *centroid;
	int			side;			/* min(n, d) */
	int			ld;				/* side rounded up to even: P's rows, G's side */
	bool		by_member;		/* n <= d: P's rows are members */
	double	   *g;
	double	   *p;				/* ld x CHUNK */
} Gram;

/* Fills P with members' centred coordinates t0 .. t0 + width - 1 (rows = members). */
static void
fill_member_chunk(const Gram *gm, int t0, int width, int padded)
{
	int			i;
	int			b;

	for (i = 0; i < gm->side; i++)
	{
		const float *xi = gm->x + (int64_t) i * gm->d + t0;
		double	   *row = gm->p + (int64_t) i * padded;

		for (b = 0; b < width; b++)
			row[b] = (double) xi[b] - gm->centroid[t0 + b];
		for (; b < padded; b++)
			row[b] = 0;
	}
}

/* Fills P with members i0 .. i0 + width - 1, centred and transposed (rows = dimensions). */
static void
fill_dimension_chunk(const Gram *gm, int64_t i0, int width, int padded)
{
	int			a;
	int			b;

	for (b = 0; b < width; b++)
	{
		const float *xb = gm->x + (i0 + b) * gm->d;

		for (a = 0; a < gm->side; a++)
			gm->p[(int64_t) a * padded + b] = (double) xb[a] - gm->centroid[a];
	}
	for (a = 0; a < gm->side; a++)
		for (b = width; b < padded; b++)
			gm->p[(int64_t) a * padded + b] = 0;
}

/* Adds one 2 x 2 block of P P^T (rows i, i+1 by j, j+1, j >= i) to G's upper triangle. */
static void
add_block(const Gram *gm, DotKernel kernel, int padded, int i, int j)
{
	const double *a0 = gm->p + (int64_t) i * padded;
	const double *b0 = gm->p + (int64_t) j * padded;
	double	   *g0 = gm->g + (int64_t) i * gm->ld + j;
	double	   *g1 = g0 + gm->ld;
	double		dots[4];

	kernel(a0, a0 + padded, b0, b0 + padded, padded, dots);
	g0[0] += dots[0];
	g0[1] += dots[1];
	if (j > i)
		g1[0] += dots[2];
	g1[1] += dots[3];
}

/*
 * G += P P^T over the upper triangle, P being ld rows of `padded` columns.
 * A tile of P's rows (TILE_BYTES) stays in L2 while every earlier pair of
 * rows passes over it.
 */
static void
add_chunk(const Gram *gm, DotKernel kernel, int padded)
{
	int			tile = (int) (TILE_BYTES / ((size_t) padded * sizeof(double)));
	int			j0;
	int			i;
	int			j;

	tile -= tile % 2;
	if (tile < 2)
		tile = 2;
	for (j0 = 0; j0 < gm->ld; j0 += tile)
	{
		int			j1 = j0 + tile < gm->ld ? j0 + tile : gm->ld;

		for (i = 0; i < j1; i += 2)
			for (j = i > j0 ? i : j0; j < j1; j += 2)
				add_block(gm, kernel, padded, i, j);
	}
}

/* Rounds up to a multiple of LANES. */
static int
round_lanes(int width)
{
	return (width + LANES - 1) / LANES * LANES;
}

/*
 * Accumulates the whole Gram matrix, chunk by chunk (P's padding rows stay
 * 0); false when the host asked to stop.
 */
static bool
build_gram(Gram *gm)
{
	DotKernel	kernel = choose_dot_kernel();
	int64_t		extent = gm->by_member ? gm->d : gm->n;
	int64_t		start;

	for (start = 0; start < extent; start += CHUNK)
	{
		int			width = (int) (extent - start < CHUNK ? extent - start : CHUNK);
		int			padded = round_lanes(width);

		if (gm->by_member)
			fill_member_chunk(gm, (int) start, width, padded);
		else
			fill_dimension_chunk(gm, start, width, padded);
		if (gm->ld > gm->side)
			memset(gm->p + (int64_t) gm->side * padded, 0, sizeof(double) * padded);
		add_chunk(gm, kernel, padded);
		if (cv_health_should_stop())
			return false;
	}
	return true;
}

/*
 * Householder reflector H = I - tau v v^T with H x = beta e_1 for x (len
 * >= 2), LAPACK's normalisation: v[0] = 1 and tau in [1, 2], so neither
 * can overflow whatever the scale of G.  Stores v over x, *off = beta, and
 * returns tau; returns 0 (no reflection, *off = x[0]) when x[1..] is 0.
 */
static double
make_reflector(double *x, int len, double *off)
{
	double		big = 0;
	double		sum = 0;
	double		x0 = x[0];
	double		beta;
	int			j;

	for (j = 1; j < len; j++)
		big = fmax(big, fabs(x[j]));
	if (big == 0)
	{
		*off = x0;
		return 0;
	}
	big = fmax(big, fabs(x0));
	for (j = 0; j < len; j++)
		sum += (x[j] / big) * (x[j] / big);
	beta = big * sqrt(sum);
	if (x0 > 0)
		beta = -beta;			/* x0 - beta without cancellation */
	*off = beta;
	for (j = 1; j < len; j++)
		x[j] /= x0 - beta;
	x[0] = 1;
	return (beta - x0) / beta;
}

/* Turns p = tau A v into w = p - (tau / 2)(v.p) v, in place. */
static void
make_w(double *p, const double *v, int len, double tau)
{
	double		half = 0;
	int			j;

	for (j = 0; j < len; j++)
		half += v[j] * p[j];
	half *= 0.5 * tau;
	for (j = 0; j < len; j++)
		p[j] -= half * v[j];
}

/* State of the reduction between passes. */
typedef struct Reduction
{
	double	   *a;				/* upper triangle, destroyed */
	int			s;
	int			ld;
	double	   *off;
	const double *zeros;		/* ld zeros: the missing half of a pass */
	double	   *p;				/* tau A v of the pending column, or NULL */
	double		tau;			/* that column's tau */
	double	   *held;			/* the buffer p lives in (p = held + 1) */
	double	   *spare;			/* the other buffer, for the next p */
	RowKernel	kernel;
} Reduction;

/*
 * Pass over the trailing block from row o: applies the pending update of
 * column o - 1, builds the reflector of column o from the updated row o,
 * and accumulates tau A' u for the block from row o + 1, all in one sweep.
 */
static void
reduction_pass(Reduction *rd, int o)
{
	int			len = rd->s - o;
	double	   *t = rd->a + (int64_t) o * rd->ld + o;
	double	   *next = rd->spare;
	PassVectors pv;
	double		tau = 0;
	int			i;

	pv.v = pv.w = rd->zeros;
	if (rd->p != NULL)
	{
		pv.v = rd->a + (int64_t) (o - 1) * rd->ld + o;
		make_w(rd->p, pv.v, len, rd->tau);
		pv.w = rd->p;
		for (i = 0; i < len; i++)
			t[i] -= pv.v[0] * pv.w[i] + pv.w[0] * pv.v[i];
	}
	if (o + 2 < rd->s)
		tau = make_reflector(t + 1, len - 1, rd->off + o);
	pv.u = tau != 0 ? t : rd->zeros;
	pv.p = next;
	memset(next, 0, sizeof(double) * len);
	if (rd->p != NULL || tau != 0)
		for (i = 1; i < len; i++)
			rd->kernel(t + (int64_t) i * rd->ld + i, i, len - i, &pv);
	if (tau == 0)
	{
		rd->p = NULL;
		return;
	}
	for (i = 1; i < len; i++)
		next[i] *= tau;
	rd->spare = rd->held;
	rd->held = next;
	rd->p = next + 1;
	rd->tau = tau;
}

/*
 * Householder reduction of G (upper triangle, s x s, leading dimension ld)
 * to the tridiagonal diag and off; destroys G.  work: 3 ld doubles.
 * False when the host asked to stop (polled every few columns: at d =
 * 16,000 the reduction is minutes of work).
 */
static bool
tridiagonalise(double *a, int s, int ld, double *diag, double *off,
			   double *work)
{
	Reduction	rd;
	int			o;
	int			k;

	memset(work, 0, sizeof(double) * ld);
	rd.a = a;
	rd.s = s;
	rd.ld = ld;
	rd.off = off;
	rd.zeros = work;
	rd.p = NULL;
	rd.tau = 0;
	rd.held = work + ld;
	rd.spare = work + 2 * ld;
	rd.kernel = choose_row_kernel();
	for (o = 0; o + 1 < s; o++)
	{
		if (o % 16 == 0 && cv_health_should_stop())
			return false;
		reduction_pass(&rd, o);
	}
	for (k = 0; k < s; k++)
		diag[k] = a[(int64_t) k * ld + k];
	if (s >= 2)
		off[s - 2] = a[(int64_t) (s - 2) * ld + s - 1];
	return true;
}

/* First m >= l whose off-diagonal off[m] is negligible (m = s - 1 at the end). */
static int
split_point(const double *diag, const double *off, int s, int l)
{
	int			m;

	for (m = l; m < s - 1; m++)
		if (fabs(off[m]) <= DBL_EPSILON * (fabs(diag[m]) + fabs(diag[m + 1])))
			break;
	return m;
}

/*
 * One implicit QL sweep on the unreduced block l..m, shifted by the
 * eigenvalue of the leading 2 x 2 closer to diag[l].  Plane rotations chase
 * the bulge from the bottom up; off[m] is left 0 when a rotation underflows.
 */
static void
ql_sweep(double *diag, double *off, int l, int m)
{
	double		g = (diag[l + 1] - diag[l]) / (2.0 * off[l]);
	double		r = hypot(g, 1.0);
	double		sine = 1;
	double		cosine = 1;
	double		shift = 0;
	int			i;

	g = diag[m] - diag[l] + off[l] / (g + copysign(r, g));
	for (i = m - 1; i >= l; i--)
	{
		double		f = sine * off[i];
		double		b = cosine * off[i];

		r = hypot(f, g);
		off[i + 1] = r;
		if (r == 0)
		{
			diag[i + 1] -= shift;
			off[m] = 0;
			return;
		}
		sine = f / r;
		cosine = g / r;
		g = diag[i + 1] - shift;
		r = (diag[i] - g) * sine + 2.0 * cosine * b;
		shift = sine * r;
		diag[i + 1] = g + shift;
		g = cosine * r - b;
	}
	diag[l] -= shift;
	off[l] = g;
	off[m] = 0;
}

/* Eigenvalues of the symmetric tridiagonal (diag, off) into diag; off is destroyed. */
static void
tridiagonal_eigenvalues(double *diag, double *off, int s)
{
	int			l;

	if (s > 0)
		off[s - 1] = 0;
	for (l = 0; l < s; l++)
	{
		int			sweeps;

		for (sweeps = 0; sweeps < QL_MAX_SWEEPS; sweeps++)
		{
			int			m = split_point(diag, off, s, l);

			if (m == l)
				break;
			ql_sweep(diag, off, l, m);
		}
	}
}

/* Orders doubles ascending (qsort). */
static int
compare_doubles(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/*
 * exp(H(p)) from the Gram eigenvalues (overwritten with the singular
 * values, ascending); -1 when every singular value is 0.
 */
static double
effective_rank_of(double *lambda, int s)
{
	double		top;
	double		sum = 0;
	double		entropy = 0;
	int			first;
	int			i;

	for (i = 0; i < s; i++)
		lambda[i] = sqrt(fmax(lambda[i], 0.0));
	qsort(lambda, (size_t) s, sizeof(double), compare_doubles);
	top = lambda[s - 1];
	if (!(top > 0))
		return -1;
	for (first = 0; lambda[first] <= CV_HEALTH_EPS * top; first++)
		;
	for (i = first; i < s; i++)
		sum += lambda[i];
	for (i = first; i < s; i++)
	{
		double		p = lambda[i] / sum;

		entropy -= p * log(p);
	}
	return exp(entropy);
}

/* Frees the buffers of one call. */
static void
free_buffers(Gram *gm, double *diag)
{
	cv_health_free(gm->g);
	cv_health_free(gm->p);
	cv_health_free(diag);
}

/*
 * 6. effective_rank of one cluster.  NULL when n > rank_max_members (then
 * rank_refused is set: the answer needs a Gram matrix the caller did not
 * allow), when n < 2, when the cluster is collapsed, and when every
 * singular value is 0.  Returns 0, -1 when out of memory, or
 * CV_HEALTH_STOPPED (column NULL).
 */
int
cv_health_effective_rank(const float *x, int64_t n, int d, const double *centroid,
						 const CvHealthParams *params, CvClusterStats *out)
{
	Gram		gm;
	double	   *diag;
	double		rank;

	cv_stat_null(out, CV_STAT_EFFECTIVE_RANK);
	out->rank_refused = n > params->rank_max_members;
	if (out->rank_refused || n < 2 || d < 1 || out->collapsed)
		return 0;
	memset(&gm, 0, sizeof(gm));
	gm.x = x;
	gm.n = n;
	gm.d = d;
	gm.centroid = centroid;
	gm.by_member = n <= d;
	gm.side = (int) (gm.by_member ? n : d);
	gm.ld = gm.side + gm.side % 2;
	gm.g = cv_health_alloc((size_t) gm.ld * (size_t) gm.ld, sizeof(double));
	gm.p = cv_health_alloc((size_t) gm.ld * CHUNK, sizeof(double));
	diag = cv_health_alloc((size_t) gm.side * 2, sizeof(double));
	if (gm.g == NULL || gm.p == NULL || diag == NULL)
	{
		free_buffers(&gm, diag);
		return -1;
	}
	/* the reduction needs 3 ld doubles of work; P (ld x CHUNK) is free again */
	if (!build_gram(&gm) ||
		!tridiagonalise(gm.g, gm.side, gm.ld, diag, diag + gm.side, gm.p))
	{
		free_buffers(&gm, diag);
		return CV_HEALTH_STOPPED;
	}
	tridiagonal_eigenvalues(diag, diag + gm.side, gm.side);
	rank = effective_rank_of(diag, gm.side);
	if (rank >= 0)
		cv_stat_set(out, CV_STAT_EFFECTIVE_RANK, rank);
	free_buffers(&gm, diag);
	return 0;
}
