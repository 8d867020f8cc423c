/*
 * health_neighbour.c: section 5 of STATISTICS.md, the neighbour family
 * (nearest_cluster, nearest_dist, db_ratio, neighbour_relevance and
 * centroid_silhouette).
 *
 * cv_health_neighbour_prepare visits every unordered pair of centroids once:
 * k^2 / 2 float64 distances computed from differences (the contract forbids
 * the norm expansion here), so each pair's distance is the same number for
 * both of its centroids.  Per centroid it keeps its m nearest others in a
 * bounded max-heap that lives in the table's own arrays, and its db_ratio
 * as a running maximum, so memory stays O(k m + k) beyond the centroids and
 * no k x k matrix is ever formed.  The order "nearer, then smaller index" is
 * total, so the kept set does not depend on the order pairs are visited in.
 *
 * The pairs are tiled: a tile of centroids (about 1 MiB) stays in L2 while
 * every later centroid streams past it two at a time, and a 2 x 2 kernel
 * computes four distances per pass over d with eight float64 lanes each.
 * The lanes make the rounding order explicit, so a build that vectorises
 * the loop (or a target variant) gives the same bits as one that does not.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"
#include "health_lanes.h"

/* Bytes of centroids kept resident as one tile of the pair sweep. */
#define TILE_BYTES (1024 * 1024)

/* The kernel computing four squared distances: rows a0, a1 against b0, b1. */
typedef void (*PairKernel) (const double *a0, const double *a1,
							const double *b0, const double *b1,
							int d, double *out);

/* The kernel computing a member's squared distance to one centroid. */
typedef double (*MemberKernel) (const float *x, const double *c, int d);


/* Four squared distances at once; the body every variant compiles. */
static inline __attribute__((always_inline)) void
pair_sq_body(const double *a0, const double *a1, const double *b0,
			 const double *b1, int d, double *out)
{
	Half		s00l = {0},
				s00h = {0},
				s01l = {0},
				s01h = {0},
				s10l = {0},
				s10h = {0},
				s11l = {0},
				s11h = {0};
	double		tail[4][LANES];
	int			end = d - d % LANES;
	int			t;

	for (t = 0; t < end; t += LANES)
	{
		Half		x0l,
					x0h,
					x1l,
					x1h,
					y0l,
					y0h,
					y1l,
					y1h,
					el,
					eh;

		LOAD_HALF(x0l, a0 + t);
		LOAD_HALF(x0h, a0 + t + 4);
		LOAD_HALF(x1l, a1 + t);
		LOAD_HALF(x1h, a1 + t + 4);
		LOAD_HALF(y0l, b0 + t);
		LOAD_HALF(y0h, b0 + t + 4);
		LOAD_HALF(y1l, b1 + t);
		LOAD_HALF(y1h, b1 + t + 4);
		el = x0l - y0l;
		eh = x0h - y0h;
		s00l += el * el;
		s00h += eh * eh;
		el = x0l - y1l;
		eh = x0h - y1h;
		s01l += el * el;
		s01h += eh * eh;
		el = x1l - y0l;
		eh = x1h - y0h;
		s10l += el * el;
		s10h += eh * eh;
		el = x1l - y1l;
		eh = x1h - y1h;
		s11l += el * el;
		s11h += eh * eh;
	}
	for (t = end; t < d; t++)
	{
		tail[0][t - end] = (a0[t] - b0[t]) * (a0[t] - b0[t]);
		tail[1][t - end] = (a0[t] - b1[t]) * (a0[t] - b1[t]);
		tail[2][t - end] = (a1[t] - b0[t]) * (a1[t] - b0[t]);
		tail[3][t - end] = (a1[t] - b1[t]) * (a1[t] - b1[t]);
	}
	out[0] = finish_lanes(&s00l, &s00h, tail[0], d - end);
	out[1] = finish_lanes(&s01l, &s01h, tail[1], d - end);
	out[2] = finish_lanes(&s10l, &s10h, tail[2], d - end);
	out[3] = finish_lanes(&s11l, &s11h, tail[3], d - end);
}

/* ||x - c||^2 of a float member and a float64 centroid; every variant's body. */
static inline __attribute__((always_inline)) double
member_sq_body(const float *x, const double *c, int d)
{
	Half		sl = {0},
				sh = {0};
	double		tail[LANES];
	int			end = d - d % LANES;
	int			t;

	for (t = 0; t < end; t += LANES)
	{
		Half		cl,
					ch,
					el = {x[t], x[t + 1], x[t + 2], x[t + 3]},
					eh = {x[t + 4], x[t + 5], x[t + 6], x[t + 7]};

		LOAD_HALF(cl, c + t);
		LOAD_HALF(ch, c + t + 4);
		el -= cl;
		eh -= ch;
		sl += el * el;
		sh += eh * eh;
	}
	for (t = end; t < d; t++)
		tail[t - end] = ((double) x[t] - c[t]) * ((double) x[t] - c[t]);
	return finish_lanes(&sl, &sh, tail, d - end);
}

/* Portable variant of the pair kernel. */
static void
pair_sq_portable(const double *a0, const double *a1, const double *b0,
				 const double *b1, int d, double *out)
{
	pair_sq_body(a0, a1, b0, b1, d, out);
}

/* Portable variant of the member kernel. */
static double
member_sq_portable(const float *x, const double *c, int d)
{
	return member_sq_body(x, c, d);
}

#if defined(__GNUC__) && defined(__x86_64__)
#define HAVE_X86_VARIANTS 1

/*
 * The eight lanes as one vector, for the AVX-512 variant only (one zmm;
 * other targets lower it through the stack).  Same lanes, same bits.
 */
typedef double Wide __attribute__((vector_size(LANES * sizeof(double))));

/* Stores the lanes, adds the tail (term t into lane t) and folds. */
static inline __attribute__((always_inline)) double
finish_wide(const Wide *acc, const double *tail, int count)
{
	double		l[LANES];
	int			t;

	memcpy(l, acc, sizeof(l));
	for (t = 0; t < count; t++)
		l[t] += tail[t];
	return fold_lanes(l);
}

/* pair_sq_body with one Wide per lane set (the AVX-512 variant's body). */
static inline __attribute__((always_inline)) void
pair_sq_wide_body(const double *a0, const double *a1, const double *b0,
				  const double *b1, int d, double *out)
{
	Wide		s00 = {0},
				s01 = {0},
				s10 = {0},
				s11 = {0};
	double		tail[4][LANES];
	int			end = d - d % LANES;
	int			t;

	for (t = 0; t < end; t += LANES)
	{
		Wide		x0,
					x1,
					y0,
					y1,
					e;

		memcpy(&x0, a0 + t, sizeof(Wide));
		memcpy(&x1, a1 + t, sizeof(Wide));
		memcpy(&y0, b0 + t, sizeof(Wide));
		memcpy(&y1, b1 + t, sizeof(Wide));
		e = x0 - y0;
		s00 += e * e;
		e = x0 - y1;
		s01 += e * e;
		e = x1 - y0;
		s10 += e * e;
		e = x1 - y1;
		s11 += e * e;
	}
	for (t = end; t < d; t++)
	{
		tail[0][t - end] = (a0[t] - b0[t]) * (a0[t] - b0[t]);
		tail[1][t - end] = (a0[t] - b1[t]) * (a0[t] - b1[t]);
		tail[2][t - end] = (a1[t] - b0[t]) * (a1[t] - b0[t]);
		tail[3][t - end] = (a1[t] - b1[t]) * (a1[t] - b1[t]);
	}
	out[0] = finish_wide(&s00, tail[0], d - end);
	out[1] = finish_wide(&s01, tail[1], d - end);
	out[2] = finish_wide(&s10, tail[2], d - end);
	out[3] = finish_wide(&s11, tail[3], d - end);
}

/* AVX2 variant of the pair kernel (same lanes, so the same bits). */
static __attribute__((target("avx2"))) void
pair_sq_avx2(const double *a0, const double *a1, const double *b0,
			 const double *b1, int d, double *out)
{
	pair_sq_body(a0, a1, b0, b1, d, out);
}

/* AVX-512 variant of the pair kernel (same lanes, so the same bits). */
static __attribute__((target("avx512f"))) void
pair_sq_avx512(const double *a0, const double *a1, const double *b0,
			   const double *b1, int d, double *out)
{
	pair_sq_wide_body(a0, a1, b0, b1, d, out);
}

/* AVX2 variant of the member kernel. */
static __attribute__((target("avx2"))) double
member_sq_avx2(const float *x, const double *c, int d)
{
	return member_sq_body(x, c, d);
}

/* AVX-512 variant of the member kernel. */
static __attribute__((target("avx512f"))) double
member_sq_avx512(const float *x, const double *c, int d)
{
	return member_sq_body(x, c, d);
}
#endif

/*
 * The widest pair kernel this CPU runs.  __builtin_cpu_supports also checks
 * that the OS saves the wide registers, so a reported level is safe to run.
 */
static PairKernel
choose_pair_kernel(void)
{
#ifdef HAVE_X86_VARIANTS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return pair_sq_avx512;
	if (__builtin_cpu_supports("avx2"))
		return pair_sq_avx2;
#endif
	return pair_sq_portable;
}

/* The widest member kernel this CPU runs. */
static MemberKernel
choose_member_kernel(void)
{
#ifdef HAVE_X86_VARIANTS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return member_sq_avx512;
	if (__builtin_cpu_supports("avx2"))
		return member_sq_avx2;
#endif
	return member_sq_portable;
}

/* True when (da, ia) comes before (db, ib): nearer, or as near with a smaller index. */
static inline bool
precedes(double da, int64_t ia, double db, int64_t ib)
{
	return da < db || (da == db && ia < ib);
}

/* Swaps heap entries a and b. */
static inline void
swap_entries(int64_t *idx, double *dist, int a, int b)
{
	int64_t		ti = idx[a];
	double		td = dist[a];

	idx[a] = idx[b];
	dist[a] = dist[b];
	idx[b] = ti;
	dist[b] = td;
}

/* Moves entry pos down until the max-heap (root = last in order) holds. */
static void
sift_down(int64_t *idx, double *dist, int size, int pos)
{
	for (;;)
	{
		int			child = 2 * pos + 1;
		int			last = pos;

		if (child < size && precedes(dist[last], idx[last], dist[child], idx[child]))
			last = child;
		if (child + 1 < size &&
			precedes(dist[last], idx[last], dist[child + 1], idx[child + 1]))
			last = child + 1;
		if (last == pos)
			return;
		swap_entries(idx, dist, pos, last);
		pos = last;
	}
}

/* Moves entry pos up until the max-heap holds. */
static void
sift_up(int64_t *idx, double *dist, int pos)
{
	while (pos > 0)
	{
		int			parent = (pos - 1) / 2;

		if (!precedes(dist[parent], idx[parent], dist[pos], idx[pos]))
			return;
		swap_entries(idx, dist, pos, parent);
		pos = parent;
	}
}

/* Offers centroid j at distance dist to centroid i's heap of its m nearest. */
static void
offer(CvNeighbourTable *table, int *count, int64_t i, int64_t j, double dist)
{
	int64_t    *idx = table->nearest + i * table->m;
	double	   *dst = table->nearest_dist + i * table->m;

	if (count[i] < table->m)
	{
		idx[count[i]] = j;
		dst[count[i]] = dist;
		sift_up(idx, dst, count[i]);
		count[i]++;
	}
	else if (precedes(dist, j, dst[0], idx[0]))
	{
		idx[0] = j;
		dst[0] = dist;
		sift_down(idx, dst, table->m, 0);
	}
}

/* Turns a full max-heap into a list sorted nearest first (heapsort). */
static void
sort_heap(int64_t *idx, double *dist, int size)
{
	int			last;

	for (last = size - 1; last > 0; last--)
	{
		swap_entries(idx, dist, 0, last);
		sift_down(idx, dist, last, 0);
	}
}

/* Enters the pair (i, j) at distance dist into both centroids' entries. */
static void
record_pair(const CvCentroidSet *set, CvNeighbourTable *table, int *count,
			int64_t i, int64_t j, double dist)
{
	double		scale = fmax(set->mean_norm[i], set->mean_norm[j]);

	/* a coinciding pair contributes 0 to db_ratio, as scikit-learn does */
	if (dist > CV_HEALTH_EPS * scale)
	{
		double		ratio = (set->mean_dist[i] + set->mean_dist[j]) / dist;

		if (ratio > table->db_ratio[i])
			table->db_ratio[i] = ratio;
		if (ratio > table->db_ratio[j])
			table->db_ratio[j] = ratio;
	}
	offer(table, count, i, j, dist);
	offer(table, count, j, i, dist);
}

/* Computes and records the pairs (i, j), i < j, of a 2 x 2 block (i + 1 or j + 1 may be past k). */
static void
visit_block(const CvCentroidSet *set, CvNeighbourTable *table, int *count,
			PairKernel kernel, int64_t i, int64_t j)
{
	const double *a0 = set->centroids + i * set->d;
	const double *a1 = i + 1 < set->k ? a0 + set->d : a0;
	const double *b0 = set->centroids + j * set->d;
	const double *b1 = j + 1 < set->k ? b0 + set->d : b0;
	double		sq[4];
	int			q;

	kernel(a0, a1, b0, b1, set->d, sq);
	for (q = 0; q < 4; q++)
	{
		int64_t		ii = i + q / 2;
		int64_t		jj = j + q % 2;

		if (ii < jj && jj < set->k)
			record_pair(set, table, count, ii, jj, sqrt(sq[q]));
	}
}

/*
 * Visits every pair (i, j), i < j, with i in the tile [i0, i1); false when
 * the host asked to stop (polled every few columns: a tile over 100,000
 * centroids is seconds of work).
 */
static bool
visit_tile(const CvCentroidSet *set, CvNeighbourTable *table, int *count,
		   PairKernel kernel, int64_t i0, int64_t i1)
{
	int64_t		i;
	int64_t		j;

	for (j = i0; j < set->k; j += 2)
	{
		if ((j - i0) % 64 == 0 && cv_health_should_stop())
			return false;
		for (i = i0; i < i1 && i <= j; i += 2)
			visit_block(set, table, count, kernel, i, j);
	}
	return true;
}

/* Centroids per tile: even, at least 2, about TILE_BYTES of them. */
static int64_t
tile_rows(int d)
{
	int64_t		rows = TILE_BYTES / ((int64_t) (d > 0 ? d : 1) * (int64_t) sizeof(double));

	rows -= rows % 2;
	return rows < 2 ? 2 : rows;
}

/* Allocates the table's arrays; false when out of memory (then all NULL). */
static bool
allocate_table(CvNeighbourTable *table)
{
	size_t		entries = (size_t) table->k * (size_t) table->m;

	if (table->m > 0 && entries / (size_t) table->m != (size_t) table->k)
		return false;
	table->db_ratio = cv_health_alloc((size_t) table->k, sizeof(double));
	if (table->m > 0)
	{
		table->nearest = cv_health_alloc(entries, sizeof(int64_t));
		table->nearest_dist = cv_health_alloc(entries, sizeof(double));
	}
	if (table->db_ratio == NULL ||
		(table->m > 0 && (table->nearest == NULL || table->nearest_dist == NULL)))
	{
		cv_health_neighbour_free(table);
		return false;
	}
	return true;
}

/*
 * The m = min(neighbours, k - 1) nearest other centroids of every centroid,
 * nearest first, and db_ratio.  neighbours below 1 counts as 1 (the SQL
 * layer rejects it first).  Returns 0, -1 when out of memory, or
 * CV_HEALTH_STOPPED.
 */
int
cv_health_neighbour_prepare(const CvCentroidSet *set, int neighbours,
							CvNeighbourTable *table)
{
	PairKernel	kernel = choose_pair_kernel();
	int64_t		step = tile_rows(set->d);
	int		   *count;
	int64_t		i0;
	int64_t		i;

	memset(table, 0, sizeof(*table));
	table->k = set->k > 0 ? set->k : 0;
	table->m = neighbours < 1 ? 1 : neighbours;
	if (table->k - 1 < (int64_t) table->m)
		table->m = (int) (table->k > 0 ? table->k - 1 : 0);
	if (table->k == 0)
		return 0;
	if (!allocate_table(table))
		return -1;
	if (table->m == 0)
		return 0;
	count = cv_health_alloc((size_t) table->k, sizeof(int));
	if (count == NULL)
	{
		cv_health_neighbour_free(table);
		return -1;
	}
	for (i0 = 0; i0 < table->k; i0 += step)
		if (!visit_tile(set, table, count, kernel, i0,
						i0 + step < table->k ? i0 + step : table->k))
		{
			cv_health_free(count);
			cv_health_neighbour_free(table);
			return CV_HEALTH_STOPPED;
		}
	for (i = 0; i < table->k; i++)
		sort_heap(table->nearest + i * table->m,
				  table->nearest_dist + i * table->m, table->m);
	cv_health_free(count);
	return 0;
}

/* Releases what cv_health_neighbour_prepare allocated (safe to call twice). */
void
cv_health_neighbour_free(CvNeighbourTable *table)
{
	cv_health_free(table->nearest);
	cv_health_free(table->nearest_dist);
	cv_health_free(table->db_ratio);
	table->nearest = NULL;
	table->nearest_dist = NULL;
	table->db_ratio = NULL;
}

/* Marks the five neighbour columns NULL. */
static void
null_neighbour_columns(CvClusterStats *out)
{
	cv_stat_null(out, CV_STAT_NEAREST_CLUSTER);
	cv_stat_null(out, CV_STAT_NEAREST_DIST);
	cv_stat_null(out, CV_STAT_DB_RATIO);
	cv_stat_null(out, CV_STAT_NEIGHBOUR_RELEVANCE);
	cv_stat_null(out, CV_STAT_CENTROID_SILHOUETTE);
}

/*
 * neighbour_relevance and centroid_silhouette: one pass over the members,
 * each against its own centroid and the m neighbour centroids.
 */
static void
member_columns(const float *x, int64_t n, int d, int64_t index,
			   const CvCentroidSet *set, const CvNeighbourTable *table,
			   CvClusterStats *out)
{
	MemberKernel kernel = choose_member_kernel();
	const double *own = set->centroids + index * d;
	const int64_t *nb = table->nearest + index * table->m;
	int64_t		home = 0;
	double		silhouette = 0;
	int64_t		i;
	int			q;

	for (i = 0; i < n; i++)
	{
		const float *xi = x + i * d;
		double		r = sqrt(kernel(xi, own, d));
		double		b = INFINITY;
		double		larger;

		for (q = 0; q < table->m; q++)
			b = fmin(b, sqrt(kernel(xi, set->centroids + nb[q] * d, d)));
		if (r <= b)
			home++;
		larger = fmax(b, r);
		if (larger > 0)
			silhouette += (b - r) / larger;
	}
	cv_stat_set(out, CV_STAT_NEIGHBOUR_RELEVANCE, (double) home / (double) n);
	cv_stat_set(out, CV_STAT_CENTROID_SILHOUETTE, silhouette / (double) n);
}

/* Neighbour family of cluster `index` (its members x, n x d); NULL when k = 1. */
void
cv_health_neighbour(const float *x, int64_t n, int d, int64_t index,
					const CvCentroidSet *set, const CvNeighbourTable *table,
					CvClusterStats *out)
{
	if (set->k < 2 || table->m < 1 || table->nearest == NULL)
	{
		null_neighbour_columns(out);
		return;
	}
	cv_stat_set(out, CV_STAT_NEAREST_CLUSTER, (double) table->nearest[index * table->m]);
	cv_stat_set(out, CV_STAT_NEAREST_DIST, table->nearest_dist[index * table->m]);
	cv_stat_set(out, CV_STAT_DB_RATIO, table->db_ratio[index]);
	if (n < 1)
	{
		cv_stat_null(out, CV_STAT_NEIGHBOUR_RELEVANCE);
		cv_stat_null(out, CV_STAT_CENTROID_SILHOUETTE);
		return;
	}
	member_columns(x, n, d, index, set, table, out);
}
