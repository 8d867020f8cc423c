/*
 * nearest.c: blocked nearest-centroid assignment, its scalar reference
 * kernel, and the dispatch to the SIMD kernels.
 *
 * Why float32 scores plus a certificate, rather than float64 throughout:
 * with separate multiply and add (the bitwise contract forbids FMA), a
 * float64 dot product runs at half the float32 rate, and the IVF build
 * (1M x 128 against 1,000 lists, plus k-means) would not fit in 10 s on one
 * core.  The expansion |x - c|^2 = |x|^2 - 2 x.c + |c|^2 is what makes the
 * work a matrix product, but in float32 it cancels badly when the points
 * sit far from the origin; two measures keep it exact anyway:
 *
 * 1. Centring (L2): points and centroids are shifted by m, the centroids'
 *    mean, before scoring (x' = fl(x - m), c' = fl(c - m)), so the norms in
 *    the expansion are those of the spread, not of the offset.  The score of
 *    c is s = fl(|c'|^2) - 2 fl(x'.c') (|x'|^2 is common to all centroids).
 * 2. Certificate: |s - T| <= E(x) for T the exact value of the same
 *    expression, and both the centring and cv_distance's own float64
 *    rounding are bounded too (bound() below: E grows like
 *    2 d 2^-24 |x'| max|c'|).  If the two best float32 scores of a point
 *    differ by more than 2 E(x), the float32 winner is provably the argmin
 *    of the float64 distances; otherwise (a near-tie, a duplicate centroid,
 *    or magnitudes that could overflow float32) the point is rescanned with
 *    cv_distance and the float64 values decide.
 *
 * So the result is always the float64 argmin (lowest index on ties), and
 * the float32 kernels only decide how fast it is found.  On random data
 * well under 1% of points need the rescan.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nearest.h"
#include "nearest_variants.h"

/* Bytes of centred points kept per tile (they are re-read once per chunk). */
#define TILE_BYTES (128 * 1024)
#define TILE_MAX_POINTS 240

/* Bytes of transposed centroids per chunk: a chunk plus a tile fit in L2. */
#define CHUNK_BYTES (1024 * 1024)

/* Above this |x'|, |c'| products float32 sums could overflow: rescan. */
#define FAST_MAGNITUDE_LIMIT 1e36

/* Unit roundoffs of float32 and float64, and the smallest float32 subnormal. */
#define U32 (FLT_EPSILON / 2.0)
#define U64 (DBL_EPSILON / 2.0)
#define TINY32 ((double) FLT_TRUE_MIN)

struct CvNearest
{
	int			k;
	int			d;
	int			n_blocks;
	CvNearestMetric metric;
	CvAllocator allocator;
	bool		fast;			/* float32 pass usable for these centroids */
	float		scale;			/* 2 (L2: bias - 2 x.c) or 1 (IP: -x.c) */
	double		cmax;			/* max |c'| over centroids */
	float	   *rows;			/* k x d original centroids, for float64 */
	float	   *blocks;			/* n_blocks x d x 16 centred, transposed */
	float	   *bias;			/* n_blocks x 16: |c'|^2, 0, or +inf padding */
	float	   *center;			/* d: m for L2, zeros for IP */
	int			tile_points;
	int			chunk_blocks;
	float	   *tile;			/* tile_points x d centred points */
	double	   *tile_norm;		/* |x'| per tile point */
	CvNearestBest *tile_best;
	size_t		rescans;
};

/* English text of a status. */
const char *
cv_math_status_string(CvMathStatus status)
{
	switch (status)
	{
		case CV_MATH_OK:
			return "success";
		case CV_MATH_BAD_ARGUMENT:
			return "invalid argument";
		case CV_MATH_OUT_OF_MEMORY:
			return "out of memory";
	}
	return "unknown status";
}

/* Allocation through the caller's allocator, refusing size overflow. */
void *
cv_math_alloc(const CvAllocator *allocator, size_t nmemb, size_t size)
{
	size_t		bytes;

	if (size != 0 && nmemb > SIZE_MAX / size)
		return NULL;
	bytes = nmemb * size;
	if (bytes == 0)
		bytes = 1;
	if (allocator == NULL || allocator->alloc == NULL)
		return malloc(bytes);
	return allocator->alloc(bytes, allocator->arg);
}

/* Frees through the allocator that gave the memory. */
void
cv_math_free(const CvAllocator *allocator, void *ptr)
{
	if (ptr == NULL)
		return;
	if (allocator == NULL || allocator->free == NULL)
		free(ptr);
	else
		allocator->free(ptr, allocator->arg);
}

/* ---------------------------------------------------------------------
 * Scalar reference kernel: one point against one 16-centroid block.
 * --------------------------------------------------------------------- */

/*
 * Dot products of x with the block's 16 centroids, each accumulated in
 * dimension order.  The lanes are independent, so a compiler that
 * vectorises the inner loop keeps every lane's rounding sequence.
 */
static void
block_dots_scalar(const float *x, int d, const float *block, float *acc)
{
	int			j;
	int			l;

	for (l = 0; l < CV_NEAREST_BLOCK; l++)
		acc[l] = 0.0f;
	for (j = 0; j < d; j++)
	{
		const float *c = block + (size_t) j * CV_NEAREST_BLOCK;
		float		xj = x[j];

		for (l = 0; l < CV_NEAREST_BLOCK; l++)
			acc[l] += xj * c[l];
	}
}

/* Scores each point against each block, merging in centroid order. */
static void
scan_scalar(const float *const *rows, int d, const float *blocks,
			const float *bias, int first_block, int n_blocks, float scale,
			CvNearestBest *best)
{
	float		acc[CV_NEAREST_BLOCK];
	int			b;
	int			l;

	for (b = first_block; b < first_block + n_blocks; b++)
	{
		const float *block = blocks + (size_t) b * d * CV_NEAREST_BLOCK;
		const float *bb = bias + (size_t) b * CV_NEAREST_BLOCK;

		block_dots_scalar(rows[0], d, block, acc);
		for (l = 0; l < CV_NEAREST_BLOCK; l++)
			cv_nearest_best_merge(best, bb[l] - scale * acc[l], INFINITY,
								  b * CV_NEAREST_BLOCK + l);
	}
}

/*
 * Euclidean norm in float64, over four interleaved partial sums: one
 * serial chain of d additions cost as much as the scoring for small k.
 */
static double
norm64(const float *v, int d)
{
	double		s0 = 0.0,
				s1 = 0.0,
				s2 = 0.0,
				s3 = 0.0;
	int			j;

	for (j = 0; j + 4 <= d; j += 4)
	{
		s0 += (double) v[j] * (double) v[j];
		s1 += (double) v[j + 1] * (double) v[j + 1];
		s2 += (double) v[j + 2] * (double) v[j + 2];
		s3 += (double) v[j + 3] * (double) v[j + 3];
	}
	for (; j < d; j++)
		s0 += (double) v[j] * (double) v[j];
	return sqrt((s0 + s1) + (s2 + s3));
}

/* Centres one point; returns the norm of the result. */
static double
center_scalar(const float *x, const float *m, float *dst, int d)
{
	int			j;

	for (j = 0; j < d; j++)
		dst[j] = x[j] - m[j];
	return norm64(dst, d);
}

const CvNearestKernels cv_nearest_kernels_scalar = {
	.name = "scalar",
	.rows = 1,
	.scan = scan_scalar,
	.center = center_scalar,
};

/* ---------------------------------------------------------------------
 * Dispatch
 * --------------------------------------------------------------------- */

/* The kernels of a level, mirroring cv_distance_kernels_for. */
const CvNearestKernels *
cv_nearest_kernels_for(CvSimdLevel level)
{
	if (!cv_simd_supported(level))
		return NULL;
	switch (level)
	{
#ifdef CV_HAVE_X86_SIMD
		case CV_SIMD_AVX2:
			return &cv_nearest_kernels_avx2;
		case CV_SIMD_AVX512:
			return &cv_nearest_kernels_avx512;
#endif
		default:
			return &cv_nearest_kernels_scalar;
	}
}

/*
 * The kernels of the level cv_distance names, so cv_simd_use (and the
 * clustervec.simd setting behind it) switches both families together.
 */
static const CvNearestKernels *
current_kernels(void)
{
#ifdef CV_HAVE_X86_SIMD
	if (strcmp(cv_distance->name, cv_nearest_kernels_avx512.name) == 0)
		return &cv_nearest_kernels_avx512;
	if (strcmp(cv_distance->name, cv_nearest_kernels_avx2.name) == 0)
		return &cv_nearest_kernels_avx2;
#endif
	return &cv_nearest_kernels_scalar;
}

/* ---------------------------------------------------------------------
 * Preparation
 * --------------------------------------------------------------------- */

/* False when any of count floats is NaN or infinite. */
static bool
all_finite(const float *v, size_t count)
{
	size_t		i;

	for (i = 0; i < count; i++)
		if (!isfinite(v[i]))
			return false;
	return true;
}

/* m = mean of the centroids (L2), zero for IP (a shift would not cancel). */
static void
compute_center(CvNearest *nn)
{
	int			j;
	int			c;

	for (j = 0; j < nn->d; j++)
	{
		double		sum = 0.0;

		if (nn->metric == CV_NEAREST_L2)
			for (c = 0; c < nn->k; c++)
				sum += nn->rows[(size_t) c * nn->d + j];
		nn->center[j] = (float) (sum / nn->k);
	}
}

/* Writes centroid c, centred, into its block lane; returns |c'|^2 in float64. */
static double
place_centroid(CvNearest *nn, int c)
{
	const float *src = nn->rows + (size_t) c * nn->d;
	float	   *dst = nn->blocks + (size_t) (c / CV_NEAREST_BLOCK) * nn->d * CV_NEAREST_BLOCK
		+ c % CV_NEAREST_BLOCK;
	double		sq = 0.0;
	int			j;

	for (j = 0; j < nn->d; j++)
	{
		float		v = src[j] - nn->center[j];

		dst[(size_t) j * CV_NEAREST_BLOCK] = v;
		sq += (double) v * (double) v;
	}
	return sq;
}

/* Fills blocks, bias and cmax; padding lanes stay zero with bias +inf. */
static void
build_blocks(CvNearest *nn)
{
	int			padded = nn->n_blocks * CV_NEAREST_BLOCK;
	int			c;

	memset(nn->blocks, 0, sizeof(float) * (size_t) padded * nn->d);
	nn->cmax = 0.0;
	for (c = 0; c < padded; c++)
	{
		double		sq;

		if (c >= nn->k)
		{
			nn->bias[c] = INFINITY;
			continue;
		}
		sq = place_centroid(nn, c);
		nn->bias[c] = nn->metric == CV_NEAREST_L2 ? (float) sq : 0.0f;
		if (!(sqrt(sq) <= nn->cmax))
			nn->cmax = sqrt(sq);	/* also propagates an infinite norm */
	}
	nn->scale = nn->metric == CV_NEAREST_L2 ? 2.0f : 1.0f;
	nn->fast = isfinite(nn->cmax) && nn->cmax * nn->cmax <= FAST_MAGNITUDE_LIMIT;
}

/* Tile height (multiple of 24 = lcm of the kernels' rows when it can) and chunk width. */
static void
choose_tiling(CvNearest *nn)
{
	int			points = TILE_BYTES / (int) (sizeof(float) * nn->d);
	int			chunk = CHUNK_BYTES / (int) (sizeof(float) * CV_NEAREST_BLOCK * nn->d);

	if (points > TILE_MAX_POINTS)
		points = TILE_MAX_POINTS;
	if (points >= 24)
		points -= points % 24;
	if (points < CV_NEAREST_MAX_ROWS)
		points = CV_NEAREST_MAX_ROWS;
	nn->tile_points = points;
	nn->chunk_blocks = chunk < 1 ? 1 : chunk;
}

/* Allocates every array of nn; false on failure (the caller frees). */
static bool
allocate_arrays(CvNearest *nn)
{
	const CvAllocator *a = &nn->allocator;
	size_t		padded = (size_t) nn->n_blocks * CV_NEAREST_BLOCK;

	nn->rows = cv_math_alloc(a, (size_t) nn->k * nn->d, sizeof(float));
	nn->blocks = cv_math_alloc(a, padded * nn->d, sizeof(float));
	nn->bias = cv_math_alloc(a, padded, sizeof(float));
	nn->center = cv_math_alloc(a, nn->d, sizeof(float));
	nn->tile = cv_math_alloc(a, (size_t) nn->tile_points * nn->d, sizeof(float));
	nn->tile_norm = cv_math_alloc(a, nn->tile_points, sizeof(double));
	nn->tile_best = cv_math_alloc(a, nn->tile_points, sizeof(CvNearestBest));
	return nn->rows && nn->blocks && nn->bias && nn->center && nn->tile
		&& nn->tile_norm && nn->tile_best;
}

/* Checks the arguments of cv_nearest_create. */
static bool
create_arguments_ok(const float *centroids, int k, int d,
					CvNearestMetric metric, CvNearest **out)
{
	if (centroids == NULL || out == NULL || k < 1 || d < 1
		|| d > CV_NEAREST_MAX_DIM)
		return false;
	if (metric != CV_NEAREST_L2 && metric != CV_NEAREST_INNER_PRODUCT)
		return false;
	return all_finite(centroids, (size_t) k * d);
}

/* Copies and prepares the centroids. */
CvMathStatus
cv_nearest_create(const float *centroids, int k, int d, CvNearestMetric metric,
				  const CvAllocator *allocator, CvNearest **out)
{
	CvNearest  *nn;

	if (!create_arguments_ok(centroids, k, d, metric, out))
		return CV_MATH_BAD_ARGUMENT;
	*out = NULL;
	nn = cv_math_alloc(allocator, 1, sizeof(CvNearest));
	if (nn == NULL)
		return CV_MATH_OUT_OF_MEMORY;
	memset(nn, 0, sizeof(CvNearest));
	if (allocator != NULL)
		nn->allocator = *allocator;
	nn->k = k;
	nn->d = d;
	nn->metric = metric;
	nn->n_blocks = (k + CV_NEAREST_BLOCK - 1) / CV_NEAREST_BLOCK;
	choose_tiling(nn);
	if (!allocate_arrays(nn))
	{
		cv_nearest_free(nn);
		return CV_MATH_OUT_OF_MEMORY;
	}
	memcpy(nn->rows, centroids, sizeof(float) * (size_t) k * d);
	compute_center(nn);
	build_blocks(nn);
	*out = nn;
	return CV_MATH_OK;
}

/* Releases nn and its arrays. */
void
cv_nearest_free(CvNearest *nn)
{
	CvAllocator a;

	if (nn == NULL)
		return;
	a = nn->allocator;
	cv_math_free(&a, nn->rows);
	cv_math_free(&a, nn->blocks);
	cv_math_free(&a, nn->bias);
	cv_math_free(&a, nn->center);
	cv_math_free(&a, nn->tile);
	cv_math_free(&a, nn->tile_norm);
	cv_math_free(&a, nn->tile_best);
	cv_math_free(&a, nn);
}

/* Number of points resolved by the float64 rescan. */
size_t
cv_nearest_rescans(const CvNearest *nn)
{
	return nn == NULL ? 0 : nn->rescans;
}

/* ---------------------------------------------------------------------
 * The float32 pass over one tile
 * --------------------------------------------------------------------- */

/* Centres count points into the tile, records |x'| and resets their state. */
static void
load_tile(CvNearest *nn, const CvNearestKernels *kern, const float *points,
		  int count)
{
	size_t		d = nn->d;
	int			i;

	for (i = 0; i < count; i++)
	{
		nn->tile_norm[i] = kern->center(points + i * d, nn->center,
										nn->tile + i * d, nn->d);
		cv_nearest_best_reset(&nn->tile_best[i]);
	}
}

/*
 * One kernel call on tile points [g, g + used); a short last group repeats
 * its last point so the kernel always sees full rows.
 */
static void
scan_group(CvNearest *nn, const CvNearestKernels *kern, int g, int used,
		   int first_block, int n_blocks)
{
	const float *rows[CV_NEAREST_MAX_ROWS];
	CvNearestBest best[CV_NEAREST_MAX_ROWS];
	int			p;

	for (p = 0; p < kern->rows; p++)
	{
		int			src = g + (p < used ? p : used - 1);

		rows[p] = nn->tile + (size_t) src * nn->d;
		best[p] = nn->tile_best[src];
	}
	kern->scan(rows, nn->d, nn->blocks, nn->bias, first_block, n_blocks,
			   nn->scale, best);
	for (p = 0; p < used; p++)
		nn->tile_best[g + p] = best[p];
}

/*
 * Chunks outside, point groups inside: one chunk of transposed centroids
 * stays in L2 while every group of the tile streams past it.
 */
static void
scan_tile(CvNearest *nn, const CvNearestKernels *kern, int count)
{
	int			first;
	int			g;

	for (first = 0; first < nn->n_blocks; first += nn->chunk_blocks)
	{
		int			nb = nn->n_blocks - first;

		if (nb > nn->chunk_blocks)
			nb = nn->chunk_blocks;
		for (g = 0; g < count; g += kern->rows)
			scan_group(nn, kern, g,
					   count - g < kern->rows ? count - g : kern->rows,
					   first, nb);
	}
}

/* ---------------------------------------------------------------------
 * Certification and the float64 path
 * --------------------------------------------------------------------- */

/*
 * E(x): bound on |float32 score - exact score| plus the centring and
 * float64 (cv_distance) errors, for a point with |x'| = xn.  With
 * g = d u/(1 - d u), u = 2^-24, s = |x'| + max|c'|:
 *   L2: dot product g |x'||c'| (doubled), fl(|c'|^2) and the final
 *       subtraction 2u(|x'||c'| + |c'|^2), centring 2u s^2 (x' and c' each
 *       carry a relative error u), cv_distance (d + 2) 2^-53 s^2;
 *   IP: g |x'||c'| and (d + 2) 2^-53 |x'||c'| (no centring, exact negation);
 * all times 1.01 for the float64 arithmetic of the bound itself, plus
 * float32 underflow (half a subnormal per operation).
 */
static double
error_bound(const CvNearest *nn, double xn)
{
	double		d = nn->d;
	double		g = d * U32 / (1.0 - d * U32);
	double		cm = nn->cmax;
	double		s = xn + cm;
	double		e;

	if (nn->metric == CV_NEAREST_L2)
		e = (2.0 * g + 2.0 * U32) * xn * cm + 2.0 * U32 * cm * cm
			+ 2.0 * U32 * s * s + (d + 2.0) * U64 * s * s;
	else
		e = g * xn * cm + (d + 2.0) * U64 * xn * cm;
	return 1.01 * e + (2.0 * d + 8.0) * TINY32;
}

/* True when the float32 pass ran for this point and its winner is certain. */
static bool
certified(const CvNearest *nn, const CvNearestBest *best, double xn)
{
	double		gap;

	if (!nn->fast || best->index < 0)
		return false;
	gap = (double) best->second - (double) best->best;
	return gap > 2.0 * error_bound(nn, xn);
}

/* False when the point's magnitude could overflow float32 sums. */
static bool
fast_point(const CvNearest *nn, double xn)
{
	double		s = xn + nn->cmax;
	double		magnitude = nn->metric == CV_NEAREST_L2 ? s * s : xn * nn->cmax;

	return nn->fast && isfinite(xn) && magnitude <= FAST_MAGNITUDE_LIMIT;
}

/* The float64 distance (cv_distance) of x to centroid c. */
static double
exact_distance(const CvNearest *nn, const float *x, int c)
{
	const float *row = nn->rows + (size_t) c * nn->d;

	if (nn->metric == CV_NEAREST_L2)
		return cv_distance->l2_squared(x, row, nn->d);
	return -cv_distance->inner_product(x, row, nn->d);
}

/* Float64 argmin over all centroids, lowest index on ties. */
static int32_t
exact_argmin(const CvNearest *nn, const float *x, double *distance)
{
	double		best = exact_distance(nn, x, 0);
	int32_t		index = 0;
	int			c;

	for (c = 1; c < nn->k; c++)
	{
		double		v = exact_distance(nn, x, c);

		if (v < best)
		{
			best = v;
			index = c;
		}
	}
	*distance = best;
	return index;
}

/* Writes the tile's answers: certified float32 winners, else the rescan. */
static void
finish_tile(CvNearest *nn, const float *points, int count, bool scanned,
			int32_t *index, double *distance)
{
	int			i;

	for (i = 0; i < count; i++)
	{
		const float *x = points + (size_t) i * nn->d;
		double		dist;

		if (scanned && fast_point(nn, nn->tile_norm[i])
			&& certified(nn, &nn->tile_best[i], nn->tile_norm[i]))
		{
			index[i] = nn->tile_best[i].index;
			if (distance != NULL)
				distance[i] = exact_distance(nn, x, index[i]);
			continue;
		}
		nn->rescans++;
		index[i] = exact_argmin(nn, x, &dist);
		if (distance != NULL)
			distance[i] = dist;
	}
}

/* Assigns every point, one tile at a time. */
CvMathStatus
cv_nearest_assign(CvNearest *nn, const float *points, size_t n,
				  int32_t *index, double *distance)
{
	const CvNearestKernels *kern = current_kernels();
	size_t		start;

	if (nn == NULL || (n > 0 && (points == NULL || index == NULL)))
		return CV_MATH_BAD_ARGUMENT;
	for (start = 0; start < n; start += nn->tile_points)
	{
		const float *tile_points = points + start * nn->d;
		int			count = (int) (n - start < (size_t) nn->tile_points
								   ? n - start : (size_t) nn->tile_points);

		load_tile(nn, kern, tile_points, count);
		if (nn->fast)
			scan_tile(nn, kern, count);
		finish_tile(nn, tile_points, count, nn->fast, index + start,
					distance == NULL ? NULL : distance + start);
	}
	return CV_MATH_OK;
}

/* Test hook: the raw float32 pass with chosen kernels. */
CvMathStatus
cv_nearest_scan_points(CvNearest *nn, const CvNearestKernels *kernels,
					   const float *points, size_t n, CvNearestBest *best)
{
	size_t		start;

	if (nn == NULL || kernels == NULL || best == NULL || !nn->fast
		|| (n > 0 && points == NULL))
		return CV_MATH_BAD_ARGUMENT;
	for (start = 0; start < n; start += nn->tile_points)
	{
		int			count = (int) (n - start < (size_t) nn->tile_points
								   ? n - start : (size_t) nn->tile_points);

		load_tile(nn, kernels, points + start * nn->d, count);
		scan_tile(nn, kernels, count);
		memcpy(best + start, nn->tile_best, sizeof(CvNearestBest) * count);
	}
	return CV_MATH_OK;
}

/* Distances from one query to every centroid, through cv_distance. */
CvMathStatus
cv_nearest_distances(const float *centroids, int k, int d,
					 CvNearestMetric metric, const float *query,
					 double *distance)
{
	int			c;

	if (centroids == NULL || query == NULL || distance == NULL || k < 0
		|| d < 1 || (metric != CV_NEAREST_L2 && metric != CV_NEAREST_INNER_PRODUCT))
		return CV_MATH_BAD_ARGUMENT;
	for (c = 0; c < k; c++)
	{
		const float *row = centroids + (size_t) c * d;

		if (metric == CV_NEAREST_L2)
			distance[c] = cv_distance->l2_squared(query, row, d);
		else
			distance[c] = -cv_distance->inner_product(query, row, d);
	}
	return CV_MATH_OK;
}
