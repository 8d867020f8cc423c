/*
 * kmeans.c: k-means++ seeding and Lloyd iterations on plain arrays.
 *
 * Determinism: the PRNG is integer-only, every distance that steers a
 * choice is a float64 cv_distance value (bitwise the same in every SIMD
 * variant), every sum runs in a fixed order, and nearest.h returns the
 * float64 argmin whatever kernel found it.  Nothing here depends on
 * timing, threads or addresses.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "distance.h"
#include "kmeans.h"
#include "prng.h"

/* Points per partial sum of the seeding weights (one dirty flag each). */
#define SEED_BLOCK 256

/* Seeding reports progress every this many centres. */
#define SEED_PROGRESS_EVERY 256

/* Multiply-adds between progress reports inside one assignment pass. */
#define ASSIGN_STEP_WORK ((size_t) 1 << 27)

/* Squared L2 distance of two rows, the float64 kernel every decision uses. */
static inline double
l2(const float *a, const float *b, int d)
{
	return cv_distance->l2_squared(a, b, d);
}

/* The shapes every entry point accepts. */
static bool
shape_ok(const float *points, size_t n, int d, const CvKmeansParams *params,
		 const float *centroids)
{
	if (points == NULL || params == NULL || centroids == NULL)
		return false;
	if (n < 1 || n > INT32_MAX || d < 1 || d > CV_NEAREST_MAX_DIM)
		return false;
	if (params->k < 1 || params->iterations < 0)
		return false;
	return params->metric == CV_KMEANS_L2
		|| params->metric == CV_KMEANS_SPHERICAL
		|| params->metric == CV_KMEANS_INNER_PRODUCT;
}

/* False when any point element is NaN or infinite. */
static bool
points_finite(const float *points, size_t n, int d)
{
	size_t		count = n * (size_t) d;
	size_t		i;

	for (i = 0; i < count; i++)
		if (!isfinite(points[i]))
			return false;
	return true;
}

/* Calls the progress callback if there is one. */
static void
report(const CvKmeansParams *params, int iteration)
{
	if (params->progress != NULL)
		params->progress(params->progress_arg, iteration, params->iterations);
}

/*
 * cv_nearest_assign over n points in steps of about ASSIGN_STEP_WORK
 * multiply-adds, reporting (iteration, total) between steps so a long pass
 * can be watched and interrupted.  Each point's answer is independent of
 * the others', so the steps change nothing in the result.
 */
static CvMathStatus
assign_in_steps(CvNearest *nn, const float *points, size_t n, int d, int k,
				int32_t *index, double *dist, const CvKmeansParams *params,
				int iteration)
{
	size_t		step = ASSIGN_STEP_WORK / ((size_t) d * (size_t) k);
	size_t		first;

	if (step < 64)
		step = 64;
	for (first = 0; first < n; first += step)
	{
		size_t		count = n - first < step ? n - first : step;
		CvMathStatus status = cv_nearest_assign(nn, points + first * (size_t) d, count,
												index + first,
												dist != NULL ? dist + first : NULL);

		if (status != CV_MATH_OK)
			return status;
		if (first + count < n)
			report(params, iteration);
	}
	return CV_MATH_OK;
}

/* ---------------------------------------------------------------------
 * k-means++ seeding, lazily
 *
 * k-means++ draws each next centre with probability D(x) / sum D, D(x) the
 * squared L2 distance from x to its nearest centre so far.  Updating D for
 * every point after every centre costs n d per centre and streams all the
 * points each time: memory-bound, and no triangle-inequality pruning helps
 * on data without structure at the scale of k (58 s for uniform n =
 * 100,000, d = 32, k = 32,768).  Instead dist[] holds D as of the last
 * refresh, and the centres added since then are "pending".  D only
 * decreases, so a draw proposes x with probability dist[x] / sum dist and
 * accepts it with probability D(x) / dist[x], where D(x) = min(dist[x],
 * distance to the pending centres): rejection sampling, whose accepted x
 * follows exactly the k-means++ distribution.  A refresh folds the pending
 * centres into dist[] with one blocked pass (cv_nearest_assign over them:
 * a matrix product, compute-bound, float64 exact).  Refreshes happen when
 * the pending centres reach a quarter of all centres (at most
 * SEED_MAX_PENDING), which keeps acceptance high, or when one draw was
 * rejected SEED_MAX_TRIES times.  With nothing pending a draw is accepted
 * outright, so seeding always ends: at k centres, or when right after a
 * refresh every point sits on a centre (sum dist = 0).  Accepted points
 * have D > 0, so the centres are distinct points.
 *
 * Every D is a cv_distance value and every sum runs in a fixed order, so
 * the centres are a function of the points and the seed alone.
 * --------------------------------------------------------------------- */

/* Most centres waiting for a refresh. */
#define SEED_MAX_PENDING 256

/* Rejections in one draw before a forced refresh. */
#define SEED_MAX_TRIES 16

typedef struct Seeding
{
	const float *points;
	size_t		n;
	int			d;
	const CvAllocator *allocator;
	const CvKmeansParams *params;	/* progress reports */
	CvKmeansRefresh refresh_fn;	/* NULL: the built-in blocked pass */
	void	   *refresh_arg;
	float	   *centroids;		/* output rows */
	int			count;			/* centres chosen so far */
	int			refreshed;		/* centres [0, refreshed) are in dist */
	double	   *dist;			/* n: D as of the last refresh */
	double	   *fresh;			/* n: refresh workspace */
	int32_t    *index;			/* n: refresh workspace */
	size_t		n_blocks;
	double	   *block_sum;		/* n_blocks: sums of dist */
	bool	   *dirty;			/* n_blocks: block_sum out of date */
} Seeding;

/* Releases the seeding arrays. */
static void
seeding_free(Seeding *s)
{
	cv_math_free(s->allocator, s->dist);
	cv_math_free(s->allocator, s->fresh);
	cv_math_free(s->allocator, s->index);
	cv_math_free(s->allocator, s->block_sum);
	cv_math_free(s->allocator, s->dirty);
}

/* Allocates the seeding arrays; false on failure. */
static bool
seeding_alloc(Seeding *s)
{
	const CvAllocator *a = s->allocator;

	s->n_blocks = (s->n + SEED_BLOCK - 1) / SEED_BLOCK;
	s->dist = cv_math_alloc(a, s->n, sizeof(double));
	s->block_sum = cv_math_alloc(a, s->n_blocks, sizeof(double));
	s->dirty = cv_math_alloc(a, s->n_blocks, sizeof(bool));
	if (s->refresh_fn != NULL)	/* the callback needs no workspace */
		return s->dist && s->block_sum && s->dirty;
	s->fresh = cv_math_alloc(a, s->n, sizeof(double));
	s->index = cv_math_alloc(a, s->n, sizeof(int32_t));
	return s->dist && s->fresh && s->index && s->block_sum && s->dirty;
}

/* Row i of the points. */
static inline const float *
point(const Seeding *s, size_t i)
{
	return s->points + i * (size_t) s->d;
}

/* Row c of the centres. */
static inline const float *
centre(const Seeding *s, int c)
{
	return s->centroids + (size_t) c * s->d;
}

/* Copies point i into the next centroid row. */
static void
append_centre(Seeding *s, size_t i)
{
	memcpy(s->centroids + (size_t) s->count * s->d, point(s, i),
		   sizeof(float) * s->d);
	s->count++;
}

/*
 * Folds the pending centres into dist through the caller's callback.  It
 * does not say which entries fell, so every block sum is recomputed: a sum
 * over unchanged entries repeats the same additions, so the totals are
 * bitwise those of the built-in refresh.
 */
static CvMathStatus
refresh_by_callback(Seeding *s)
{
	CvMathStatus status;

	status = s->refresh_fn(s->refresh_arg, centre(s, s->refreshed),
						   s->count - s->refreshed, s->dist);
	if (status != CV_MATH_OK)
		return status;
	memset(s->dirty, 1, sizeof(bool) * s->n_blocks);
	s->refreshed = s->count;
	return CV_MATH_OK;
}

/* Folds the pending centres into dist with one blocked nearest pass. */
static CvMathStatus
refresh(Seeding *s)
{
	CvNearest  *nn;
	CvMathStatus status;
	size_t		i;

	if (s->refreshed == s->count)
		return CV_MATH_OK;
	if (s->refresh_fn != NULL)
		return refresh_by_callback(s);
	status = cv_nearest_create(centre(s, s->refreshed), s->count - s->refreshed,
							   s->d, CV_NEAREST_L2, s->allocator, &nn);
	if (status != CV_MATH_OK)
		return status;
	status = assign_in_steps(nn, s->points, s->n, s->d, s->count - s->refreshed, s->index,
							 s->fresh, s->params, 0);
	cv_nearest_free(nn);
	if (status != CV_MATH_OK)
		return status;
	for (i = 0; i < s->n; i++)
		if (s->fresh[i] < s->dist[i])
		{
			s->dist[i] = s->fresh[i];
			s->dirty[i / SEED_BLOCK] = true;
		}
	s->refreshed = s->count;
	return CV_MATH_OK;
}

/* D(x_i) now: dist[i] lowered by the pending centres. */
static double
current_dist(const Seeding *s, size_t i)
{
	double		v = s->dist[i];
	int			c;

	for (c = s->refreshed; c < s->count; c++)
	{
		double		w = l2(point(s, i), centre(s, c), s->d);

		if (w < v)
			v = w;
	}
	return v;
}

/* Sum of dist over one block, in point order. */
static double
block_total(const Seeding *s, size_t b)
{
	size_t		end = (b + 1) * SEED_BLOCK < s->n ? (b + 1) * SEED_BLOCK : s->n;
	double		sum = 0.0;
	size_t		i;

	for (i = b * SEED_BLOCK; i < end; i++)
		sum += s->dist[i];
	return sum;
}

/* Refreshes changed block sums and returns their sum, in block order. */
static double
weights_total(Seeding *s)
{
	double		total = 0.0;
	size_t		b;

	for (b = 0; b < s->n_blocks; b++)
	{
		if (s->dirty[b])
		{
			s->block_sum[b] = block_total(s, b);
			s->dirty[b] = false;
		}
		total += s->block_sum[b];
	}
	return total;
}

/* The last point of [start, end) with a positive weight, or start. */
static size_t
last_positive(const Seeding *s, size_t start, size_t end)
{
	size_t		i;

	for (i = end; i > start; i--)
		if (s->dist[i - 1] > 0.0)
			return i - 1;
	return start;
}

/*
 * The first point of block b whose running in-block sum exceeds target;
 * rounding can leave none, then the block's last weighted point.
 */
static size_t
pick_in_block(const Seeding *s, size_t b, double target)
{
	size_t		end = (b + 1) * SEED_BLOCK < s->n ? (b + 1) * SEED_BLOCK : s->n;
	double		sum = 0.0;
	size_t		i;

	for (i = b * SEED_BLOCK; i < end; i++)
	{
		sum += s->dist[i];
		if (sum > target)
			return i;
	}
	return last_positive(s, b * SEED_BLOCK, end);
}

/*
 * Draws a point with probability dist[i] / total: the block whose running
 * sum (the same additions as weights_total) first exceeds r, then the point
 * inside it.  A chosen point always has dist > 0.
 */
static size_t
draw_point(const Seeding *s, double r)
{
	double		sum = 0.0;
	size_t		b;

	for (b = 0; b < s->n_blocks; b++)
	{
		double		next = sum + s->block_sum[b];

		if (next > r)
			return pick_in_block(s, b, r - sum);
		sum = next;
	}
	return last_positive(s, 0, s->n);	/* r rounded up to the total */
}

/*
 * One k-means++ draw by rejection (see above): returns the accepted point,
 * or -1 after SEED_MAX_TRIES rejections.  Two uniforms per try.
 */
static int64_t
draw_centre(const Seeding *s, CvPrng *rng, double total)
{
	int			tries;

	for (tries = 0; tries < SEED_MAX_TRIES; tries++)
	{
		size_t		i = draw_point(s, cv_prng_uniform(rng) * total);
		double		u = cv_prng_uniform(rng);

		if (s->refreshed == s->count || u * s->dist[i] < current_dist(s, i))
			return (int64_t) i;
	}
	return -1;
}

/* Pending centres allowed before a refresh: a quarter of those chosen. */
static int
max_pending(int count)
{
	int			limit = count / 4;

	if (limit < 1)
		return 1;
	return limit < SEED_MAX_PENDING ? limit : SEED_MAX_PENDING;
}

/* Chooses up to k centres; stops when every point sits on a centre. */
static CvMathStatus
choose_centres(Seeding *s, const CvKmeansParams *params, int k)
{
	CvPrng		rng;
	CvMathStatus status = CV_MATH_OK;

	cv_prng_seed(&rng, params->seed);
	append_centre(s, (size_t) cv_prng_below(&rng, s->n));
	while (s->count < k && status == CV_MATH_OK)
	{
		double		total;
		int64_t		i;

		if (s->count - s->refreshed >= max_pending(s->count))
			status = refresh(s);
		total = weights_total(s);
		if (status != CV_MATH_OK || !(total > 0.0))
			break;
		i = draw_centre(s, &rng, total);
		if (i < 0)
		{
			status = refresh(s);
			continue;
		}
		append_centre(s, (size_t) i);
		if (s->count % SEED_PROGRESS_EVERY == 0)
			report(params, 0);
	}
	return status;
}

/* Seeding on validated arguments. */
static CvMathStatus
seed_points(const float *points, size_t n, int d, const CvKmeansParams *params,
			CvKmeansRefresh refresh_fn, void *refresh_arg,
			float *centroids, int *n_seeds)
{
	Seeding		s;
	CvMathStatus status;
	size_t		i;

	memset(&s, 0, sizeof(s));
	s.points = points;
	s.n = n;
	s.d = d;
	s.allocator = params->allocator;
	s.params = params;
	s.refresh_fn = refresh_fn;
	s.refresh_arg = refresh_arg;
	s.centroids = centroids;
	if (!seeding_alloc(&s))
	{
		seeding_free(&s);
		return CV_MATH_OUT_OF_MEMORY;
	}
	for (i = 0; i < n; i++)
		s.dist[i] = INFINITY;	/* the first refresh measures centre 0 */
	memset(s.dirty, 1, sizeof(bool) * s.n_blocks);
	status = choose_centres(&s, params,
							(size_t) params->k < n ? params->k : (int) n);
	*n_seeds = s.count;
	seeding_free(&s);
	return status;
}

/* Checks the arguments, then seeds. */
CvMathStatus
cv_kmeans_seed(const float *points, size_t n, int d,
			   const CvKmeansParams *params, float *centroids, int *n_seeds)
{
	if (!shape_ok(points, n, d, params, centroids) || n_seeds == NULL
		|| !points_finite(points, n, d))
		return CV_MATH_BAD_ARGUMENT;
	return seed_points(points, n, d, params, NULL, NULL, centroids, n_seeds);
}

/* Checks the arguments, then seeds with the caller's refresh. */
CvMathStatus
cv_kmeans_seed_with(const float *points, size_t n, int d,
					const CvKmeansParams *params, CvKmeansRefresh refresh,
					void *arg, float *centroids, int *n_seeds)
{
	if (!shape_ok(points, n, d, params, centroids) || n_seeds == NULL
		|| !points_finite(points, n, d))
		return CV_MATH_BAD_ARGUMENT;
	return seed_points(points, n, d, params, refresh, arg, centroids, n_seeds);
}

/* ---------------------------------------------------------------------
 * Lloyd iterations
 * --------------------------------------------------------------------- */

typedef struct Lloyd
{
	const float *points;
	size_t		n;
	int			d;
	int			k;
	CvKmeansMetric metric;
	const CvAllocator *allocator;
	const CvKmeansParams *params;	/* progress reports */
	int			iteration;		/* iterations done */
	float	   *centroids;		/* k x d, in place */
	int32_t    *assign;			/* n: this iteration's clusters */
	int32_t    *previous;		/* n: the clusters the centroids average */
	double	   *dist;			/* n: distance to the assigned centroid */
	int32_t    *order;			/* n: points bucketed by cluster */
	int32_t    *offsets;		/* k + 1: bucket c is order[offsets[c] ..] */
	int32_t    *counts;			/* k: members during refill */
	bool	   *no_donor;		/* k: all members sit on the centroid */
	double	   *sum;			/* d */
} Lloyd;

/* Releases the Lloyd arrays. */
static void
lloyd_free(Lloyd *L)
{
	cv_math_free(L->allocator, L->assign);
	cv_math_free(L->allocator, L->previous);
	cv_math_free(L->allocator, L->dist);
	cv_math_free(L->allocator, L->order);
	cv_math_free(L->allocator, L->offsets);
	cv_math_free(L->allocator, L->counts);
	cv_math_free(L->allocator, L->no_donor);
	cv_math_free(L->allocator, L->sum);
}

/* Allocates the Lloyd arrays; false on failure. */
static bool
lloyd_alloc(Lloyd *L)
{
	const CvAllocator *a = L->allocator;

	L->assign = cv_math_alloc(a, L->n, sizeof(int32_t));
	L->previous = cv_math_alloc(a, L->n, sizeof(int32_t));
	L->dist = cv_math_alloc(a, L->n, sizeof(double));
	L->order = cv_math_alloc(a, L->n, sizeof(int32_t));
	L->offsets = cv_math_alloc(a, (size_t) L->k + 1, sizeof(int32_t));
	L->counts = cv_math_alloc(a, L->k, sizeof(int32_t));
	L->no_donor = cv_math_alloc(a, L->k, sizeof(bool));
	L->sum = cv_math_alloc(a, L->d, sizeof(double));
	return L->assign && L->previous && L->dist && L->order && L->offsets
		&& L->counts && L->no_donor && L->sum;
}

/* Row i of the points, row c of the centroids. */
static inline const float *
lpoint(const Lloyd *L, size_t i)
{
	return L->points + i * (size_t) L->d;
}

static inline float *
centroid(const Lloyd *L, int c)
{
	return L->centroids + (size_t) c * L->d;
}

/* Assigns every point to its nearest centroid (float64 argmin). */
static CvMathStatus
assign_points(Lloyd *L)
{
	CvNearestMetric metric = L->metric == CV_KMEANS_L2
		? CV_NEAREST_L2 : CV_NEAREST_INNER_PRODUCT;
	CvNearest  *nn;
	CvMathStatus status;

	status = cv_nearest_create(L->centroids, L->k, L->d, metric,
							   L->allocator, &nn);
	if (status != CV_MATH_OK)
		return status;
	status = assign_in_steps(nn, L->points, L->n, L->d, L->k, L->assign, L->dist,
							 L->params, L->iteration);
	cv_nearest_free(nn);
	return status;
}

/* The objective of the assignment, summed in point order. */
static double
objective(const Lloyd *L)
{
	double		total = 0.0;
	size_t		i;

	for (i = 0; i < L->n; i++)
		total += L->metric == CV_KMEANS_SPHERICAL ? 1.0 + L->dist[i] : L->dist[i];
	return total;
}

/* True when no point changed cluster since the last update. */
static bool
unchanged(const Lloyd *L)
{
	return memcmp(L->assign, L->previous, sizeof(int32_t) * L->n) == 0;
}

/* Counting sort of the points by cluster; stable, so in point order. */
static void
bucket_points(Lloyd *L)
{
	size_t		i;
	int			c;

	memset(L->offsets, 0, sizeof(int32_t) * ((size_t) L->k + 1));
	for (i = 0; i < L->n; i++)
		L->offsets[L->assign[i] + 1]++;
	for (c = 0; c < L->k; c++)
	{
		L->offsets[c + 1] += L->offsets[c];
		L->counts[c] = L->offsets[c];	/* fill cursor */
	}
	for (i = 0; i < L->n; i++)
		L->order[L->counts[L->assign[i]]++] = (int32_t) i;
	for (c = 0; c < L->k; c++)
		L->counts[c] = L->offsets[c + 1] - L->offsets[c];
}

/*
 * The member of cluster c farthest from its centroid (squared L2, lowest
 * point index on ties) among those still assigned to it; -1 when all sit
 * on the centroid.
 */
static int32_t
farthest_member(const Lloyd *L, int c)
{
	int32_t		best = -1;
	double		best_dist = 0.0;
	int32_t		pos;

	for (pos = L->offsets[c]; pos < L->offsets[c + 1]; pos++)
	{
		int32_t		i = L->order[pos];
		double		v;

		if (L->assign[i] != c)
			continue;			/* already given to an empty cluster */
		v = l2(lpoint(L, i), centroid(L, c), L->d);
		if (v > best_dist)
		{
			best_dist = v;
			best = i;
		}
	}
	return best;
}

/* The largest cluster not yet known to lack a donor (ties: lowest index). */
static int
largest_candidate(const Lloyd *L)
{
	int			best = -1;
	int			c;

	for (c = 0; c < L->k; c++)
		if (L->counts[c] >= 2 && !L->no_donor[c]
			&& (best < 0 || L->counts[c] > L->counts[best]))
			best = c;
	return best;
}

/* The point the refill takes for an empty cluster, or -1 when none can be. */
static int32_t
find_donor_point(Lloyd *L, int *donor)
{
	for (;;)
	{
		int			c = largest_candidate(L);
		int32_t		i;

		if (c < 0)
			return -1;
		i = farthest_member(L, c);
		if (i >= 0)
		{
			*donor = c;
			return i;
		}
		L->no_donor[c] = true;
	}
}

/*
 * Gives each empty cluster the farthest member of the largest cluster that
 * has one away from its centroid (see kmeans.h); returns how many clusters
 * were refilled and re-buckets the points if any.
 */
static int
refill_empty(Lloyd *L)
{
	int			refilled = 0;
	int			j;

	memset(L->no_donor, 0, sizeof(bool) * L->k);
	for (j = 0; j < L->k; j++)
	{
		int			donor;
		int32_t		i;

		if (L->counts[j] > 0)
			continue;
		i = find_donor_point(L, &donor);
		if (i < 0)
			break;
		L->assign[i] = j;
		L->counts[donor]--;
		L->counts[j] = 1;
		refilled++;
	}
	if (refilled > 0)
		bucket_points(L);
	return refilled;
}

/* Sum of the members of cluster c into L->sum, in point order, float64. */
static void
sum_members(Lloyd *L, int c)
{
	int32_t		pos;
	int			j;

	memset(L->sum, 0, sizeof(double) * L->d);
	for (pos = L->offsets[c]; pos < L->offsets[c + 1]; pos++)
	{
		const float *x = lpoint(L, L->order[pos]);

		for (j = 0; j < L->d; j++)
			L->sum[j] += x[j];
	}
}

/*
 * New centroid c: the float64 mean rounded to float4, or for spherical the
 * mean divided by its float64 norm, then rounded; a zero mean (members
 * cancel) keeps the old centroid, as does an empty cluster.
 */
static void
update_centroid(Lloyd *L, int c)
{
	double		count = L->offsets[c + 1] - L->offsets[c];
	double		scale = 1.0;
	float	   *out = centroid(L, c);
	int			j;

	if (count == 0)
		return;
	sum_members(L, c);
	for (j = 0; j < L->d; j++)
		L->sum[j] /= count;
	if (L->metric == CV_KMEANS_SPHERICAL)
	{
		double		norm_sq = 0.0;

		for (j = 0; j < L->d; j++)
			norm_sq += L->sum[j] * L->sum[j];
		if (!(norm_sq > 0.0))
			return;
		scale = sqrt(norm_sq);
	}
	for (j = 0; j < L->d; j++)
		out[j] = (float) (L->sum[j] / scale);
}

/* Recomputes every centroid from the buckets. */
static void
update_centroids(Lloyd *L)
{
	int			c;

	for (c = 0; c < L->k; c++)
		update_centroid(L, c);
}

/* Makes this iteration's assignment the one the centroids average. */
static void
swap_assignments(Lloyd *L)
{
	int32_t    *t = L->assign;

	L->assign = L->previous;
	L->previous = t;
}

/*
 * One iteration after the assignment: refill, update.  Returns false (and
 * does nothing) when no point moved, i.e. Lloyd has converged.
 */
static bool
refine(Lloyd *L, int iteration, CvKmeansResult *result)
{
	if (iteration > 0 && unchanged(L))
		return false;
	bucket_points(L);
	result->refilled += refill_empty(L);
	update_centroids(L);
	swap_assignments(L);
	return true;
}

/* The iterations proper; L is allocated and previous[] is meaningful after the first. */
static CvMathStatus
iterate(Lloyd *L, const CvKmeansParams *params, double *history,
		CvKmeansResult *result)
{
	int			t;

	for (t = 0; t < params->iterations; t++)
	{
		CvMathStatus status;

		L->iteration = t;
		status = assign_points(L);

		if (status != CV_MATH_OK)
			return status;
		result->inertia = objective(L);
		if (history != NULL)
			history[t] = result->inertia;
		result->iterations_run = t + 1;
		if (!refine(L, t, result))
		{
			report(params, params->iterations);
			break;
		}
		report(params, t + 1);
	}
	return CV_MATH_OK;
}

/*
 * The output assignment: the clusters the final centroids average, or with
 * no iteration at all a plain nearest assignment.
 */
static CvMathStatus
output_assignment(Lloyd *L, int iterations_run, int32_t *assignment)
{
	CvMathStatus status;

	if (assignment == NULL)
		return CV_MATH_OK;
	if (iterations_run == 0)
	{
		status = assign_points(L);
		if (status != CV_MATH_OK)
			return status;
		memcpy(assignment, L->assign, sizeof(int32_t) * L->n);
	}
	else
		memcpy(assignment, L->previous, sizeof(int32_t) * L->n);
	return CV_MATH_OK;
}

/* Lloyd on validated arguments, k centroids in place. */
static CvMathStatus
run_lloyd(const float *points, size_t n, int d, const CvKmeansParams *params,
		  int k, float *centroids, int32_t *assignment, double *history,
		  CvKmeansResult *result)
{
	Lloyd		L;
	CvMathStatus status;

	memset(&L, 0, sizeof(L));
	memset(result, 0, sizeof(*result));
	L.points = points;
	L.n = n;
	L.d = d;
	L.k = k;
	L.metric = params->metric;
	L.allocator = params->allocator;
	L.params = params;
	L.centroids = centroids;
	result->n_centroids = k;
	if (!lloyd_alloc(&L))
		status = CV_MATH_OUT_OF_MEMORY;
	else
		status = iterate(&L, params, history, result);
	if (status == CV_MATH_OK)
		status = output_assignment(&L, result->iterations_run, assignment);
	lloyd_free(&L);
	return status;
}

/* Checks the arguments, then runs Lloyd from the caller's centroids. */
CvMathStatus
cv_kmeans_lloyd(const float *points, size_t n, int d,
				const CvKmeansParams *params, float *centroids,
				int32_t *assignment, double *inertia_history,
				CvKmeansResult *result)
{
	if (!shape_ok(points, n, d, params, centroids) || result == NULL
		|| !points_finite(points, n, d)
		|| !points_finite(centroids, (size_t) params->k, d))
		return CV_MATH_BAD_ARGUMENT;
	return run_lloyd(points, n, d, params, params->k, centroids, assignment,
					 inertia_history, result);
}

/* Seeding, then Lloyd on the seeds. */
CvMathStatus
cv_kmeans(const float *points, size_t n, int d, const CvKmeansParams *params,
		  float *centroids, int32_t *assignment, double *inertia_history,
		  CvKmeansResult *result)
{
	CvMathStatus status;
	int			n_seeds;

	if (!shape_ok(points, n, d, params, centroids) || result == NULL
		|| !points_finite(points, n, d))
		return CV_MATH_BAD_ARGUMENT;
	status = seed_points(points, n, d, params, NULL, NULL, centroids, &n_seeds);
	if (status != CV_MATH_OK)
		return status;
	return run_lloyd(points, n, d, params, n_seeds, centroids, assignment,
					 inertia_history, result);
}
