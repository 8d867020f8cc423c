/*
 * test_health_neighbour.c: standalone test of the neighbour family
 * (STATISTICS.md section 5) against a naive long double implementation.
 *
 * Cases: random clusters of many shapes (k = 2 .. 300, d = 1 .. 130,
 * neighbours below, at and above k - 1), k = 1 (all five NULL), k = 2,
 * centroids on an integer grid (exact distance ties, which must go to the
 * smaller index, and exact r_i = b_i ties, which count as home), coinciding
 * and nearly coinciding centroids (db_ratio contribution 0 inside the eps
 * band, not outside it).  Outputs are poisoned before every call and the
 * columns of other families must stay poisoned.  Set CV_TEST_SEED to replay
 * a run; the seed is printed first.  `--time` times the preparation instead.
 *
 * The module is included rather than linked, so that its static SIMD kernel
 * variants can be checked against the portable one bit for bit (variants
 * this CPU cannot run are reported as skipped).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "health_neighbour.c"

/* Float64 against long double: the sums are of at most a few hundred terms. */
#define REL_TOL 1e-12
#define MAX_REPORTED 5

/* One test problem: k clusters with their members and the centroid set. */
typedef struct Problem
{
	int64_t		k;
	int			d;
	int64_t    *n;
	float	  **x;
	double	   *centroids;
	double	   *mean_dist;
	double	   *mean_norm;
	CvCentroidSet set;
} Problem;

/* A candidate neighbour of the reference: exact-enough distance and index. */
typedef struct RefEntry
{
	long double dist;
	int64_t		idx;
} RefEntry;

/* Pass/fail state of one case (one output line). */
typedef struct Case
{
	char		name[160];
	int			checks;
	int			failures;
} Case;

static uint64_t rng_state;
static int	cases_passed;
static int	cases_failed;
static int	cases_skipped;

/* splitmix64: tiny, seedable, good enough for test data. */
static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform double in [lo, hi). */
static double
rng_uniform(double lo, double hi)
{
	return lo + (hi - lo) * ((double) (rng_next() >> 11) / 9007199254740992.0);
}

/* Uniform integer in [lo, hi]. */
static int
rng_int(int lo, int hi)
{
	return lo + (int) (rng_next() % (uint64_t) (hi - lo + 1));
}

/* The seed from CV_TEST_SEED, else from the clock. */
static uint64_t
choose_seed(void)
{
	const char *env = getenv("CV_TEST_SEED");
	struct timespec ts;

	if (env != NULL && *env != '\0')
		return strtoull(env, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000007ULL ^ (uint64_t) ts.tv_nsec;
}

/* malloc that exits on failure (test data only). */
static void *
xmalloc(size_t size)
{
	void	   *p = malloc(size > 0 ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* Starts a case. */
static Case
new_case(const char *what, const Problem *pb, int neighbours)
{
	Case		c;

	snprintf(c.name, sizeof(c.name), "%s k=%lld d=%d neighbours=%d", what,
			 (long long) pb->k, pb->d, neighbours);
	c.checks = 0;
	c.failures = 0;
	return c;
}

/* Records one check, printing the first few failures. */
static void
check(Case *c, int ok, const char *what, long long where, double got,
	  long double want)
{
	c->checks++;
	if (ok)
		return;
	if (c->failures++ < MAX_REPORTED)
		printf("  FAIL %s: %s [%lld] got=%.17g want=%.17Lg\n", c->name, what,
			   where, got, want);
}

/* Prints a case's line and counts it. */
static void
finish_case(const Case *c)
{
	if (c->failures == 0)
		cases_passed++;
	else
		cases_failed++;
	printf("%-4s %-64s %d checks, %d failed\n", c->failures == 0 ? "ok" : "FAIL",
		   c->name, c->checks, c->failures);
}

/* True when got is within REL_TOL of want relative to scale. */
static int
close_to(double got, long double want, long double scale)
{
	return fabsl((long double) got - want) <= REL_TOL * scale + 1e-300L;
}

/* ||a - b|| of two float64 vectors in long double. */
static long double
ref_dist(const double *a, const double *b, int d)
{
	long double s = 0;
	int			t;

	for (t = 0; t < d; t++)
	{
		long double e = (long double) a[t] - (long double) b[t];

		s += e * e;
	}
	return sqrtl(s);
}

/* ||x - c|| of a float member and a float64 centroid in long double. */
static long double
ref_member_dist(const float *x, const double *c, int d)
{
	long double s = 0;
	int			t;

	for (t = 0; t < d; t++)
	{
		long double e = (long double) x[t] - (long double) c[t];

		s += e * e;
	}
	return sqrtl(s);
}

/* Fills centroid, mean_dist and mean_norm of cluster i from its members. */
static void
summarise_cluster(Problem *pb, int64_t i, int exact_centroid_given)
{
	double	   *c = pb->centroids + i * pb->d;
	long double dist_sum = 0;
	long double norm_sum = 0;
	int64_t		a;
	int			t;

	if (!exact_centroid_given)
		for (t = 0; t < pb->d; t++)
		{
			long double s = 0;

			for (a = 0; a < pb->n[i]; a++)
				s += pb->x[i][a * pb->d + t];
			c[t] = (double) (s / pb->n[i]);
		}
	for (a = 0; a < pb->n[i]; a++)
	{
		long double s = 0;

		for (t = 0; t < pb->d; t++)
			s += (long double) pb->x[i][a * pb->d + t] * pb->x[i][a * pb->d + t];
		norm_sum += sqrtl(s);
		dist_sum += ref_member_dist(pb->x[i] + a * pb->d, c, pb->d);
	}
	pb->mean_dist[i] = (double) (dist_sum / pb->n[i]);
	pb->mean_norm[i] = (double) (norm_sum / pb->n[i]);
}

/* Allocates a problem of k clusters in d dimensions (members not yet made). */
static Problem
alloc_problem(int64_t k, int d)
{
	Problem		pb;

	pb.k = k;
	pb.d = d;
	pb.n = xmalloc(sizeof(int64_t) * k);
	pb.x = xmalloc(sizeof(float *) * k);
	pb.centroids = xmalloc(sizeof(double) * k * d);
	pb.mean_dist = xmalloc(sizeof(double) * k);
	pb.mean_norm = xmalloc(sizeof(double) * k);
	pb.set.k = k;
	pb.set.d = d;
	pb.set.centroids = pb.centroids;
	pb.set.n = pb.n;
	pb.set.mean_dist = pb.mean_dist;
	pb.set.mean_norm = pb.mean_norm;
	return pb;
}

/* Releases a problem. */
static void
free_problem(Problem *pb)
{
	int64_t		i;

	for (i = 0; i < pb->k; i++)
		free(pb->x[i]);
	free(pb->x);
	free(pb->n);
	free(pb->centroids);
	free(pb->mean_dist);
	free(pb->mean_norm);
}

/*
 * Random clusters: centres U(-1, 1) plus an offset shared by all, members
 * the centre plus U(-spread, spread) noise.
 */
static Problem
random_problem(int64_t k, int d, int min_members, int max_members, double spread,
			   double offset)
{
	Problem		pb = alloc_problem(k, d);
	double	   *centre = xmalloc(sizeof(double) * d);
	int64_t		i;
	int64_t		a;
	int			t;

	for (i = 0; i < k; i++)
	{
		for (t = 0; t < d; t++)
			centre[t] = offset + rng_uniform(-1.0, 1.0);
		pb.n[i] = rng_int(min_members, max_members);
		pb.x[i] = xmalloc(sizeof(float) * pb.n[i] * d);
		for (a = 0; a < pb.n[i]; a++)
			for (t = 0; t < d; t++)
				pb.x[i][a * d + t] = (float) (centre[t] + rng_uniform(-spread, spread));
		summarise_cluster(&pb, i, 0);
	}
	free(centre);
	return pb;
}

/*
 * Integer grid: centres in [-range, range]^d (so duplicates and distance
 * ties are frequent), members c + u and c - u for small integer u, so the
 * centroid is exactly c and every distance is the root of an integer.
 */
static Problem
grid_problem(int64_t k, int d, int range)
{
	Problem		pb = alloc_problem(k, d);
	int64_t		i;
	int64_t		a;
	int			t;

	for (i = 0; i < k; i++)
	{
		double	   *c = pb.centroids + i * d;

		for (t = 0; t < d; t++)
			c[t] = rng_int(-range, range);
		pb.n[i] = 2 * rng_int(1, 4);
		pb.x[i] = xmalloc(sizeof(float) * pb.n[i] * d);
		for (a = 0; a < pb.n[i]; a += 2)
			for (t = 0; t < d; t++)
			{
				int			u = rng_int(-2, 2);

				pb.x[i][a * d + t] = (float) (c[t] + u);
				pb.x[i][(a + 1) * d + t] = (float) (c[t] - u);
			}
		summarise_cluster(&pb, i, 1);
	}
	return pb;
}

/* Orders reference entries: nearer first, then smaller index. */
static int
compare_entries(const void *pa, const void *pb)
{
	const RefEntry *a = pa;
	const RefEntry *b = pb;

	if (a->dist != b->dist)
		return a->dist < b->dist ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Every other centroid of i sorted by (distance, index); returns k - 1 entries. */
static RefEntry *
ref_sorted_others(const Problem *pb, int64_t i)
{
	RefEntry   *e = xmalloc(sizeof(RefEntry) * (pb->k > 1 ? pb->k - 1 : 1));
	int64_t		j;
	int64_t		q = 0;

	for (j = 0; j < pb->k; j++)
		if (j != i)
		{
			e[q].dist = ref_dist(pb->centroids + i * pb->d, pb->centroids + j * pb->d, pb->d);
			e[q].idx = j;
			q++;
		}
	qsort(e, (size_t) q, sizeof(RefEntry), compare_entries);
	return e;
}

/* The reference db_ratio of cluster i. */
static long double
ref_db_ratio(const Problem *pb, int64_t i)
{
	long double best = 0;
	int64_t		j;

	for (j = 0; j < pb->k; j++)
	{
		long double dist;
		long double scale;

		if (j == i)
			continue;
		dist = ref_dist(pb->centroids + i * pb->d, pb->centroids + j * pb->d, pb->d);
		scale = fmaxl(pb->mean_norm[i], pb->mean_norm[j]);
		if (dist > CV_HEALTH_EPS * scale)
			best = fmaxl(best, ((long double) pb->mean_dist[i] + pb->mean_dist[j]) / dist);
	}
	return best;
}

/* Checks centroid i's neighbour list against the reference. */
static void
check_list(Case *c, const Problem *pb, const CvNeighbourTable *tb, int64_t i,
		   const RefEntry *ref)
{
	int			q;

	for (q = 0; q < tb->m; q++)
	{
		int64_t		got = tb->nearest[i * tb->m + q];
		double		got_dist = tb->nearest_dist[i * tb->m + q];
		long double got_true;

		/* a different index is right only at the same distance (a near-tie) */
		if (got != ref[q].idx && got >= 0 && got < pb->k && got != i)
		{
			got_true = ref_dist(pb->centroids + i * pb->d, pb->centroids + got * pb->d, pb->d);
			check(c, close_to((double) got_true, ref[q].dist, ref[q].dist), "nearest index",
				  (long long) (i * 1000 + q), (double) got, (long double) ref[q].idx);
		}
		else
			check(c, got == ref[q].idx, "nearest index", (long long) (i * 1000 + q),
				  (double) got, (long double) ref[q].idx);
		check(c, close_to(got_dist, ref[q].dist, ref[q].dist), "nearest dist",
			  (long long) (i * 1000 + q), got_dist, ref[q].dist);
	}
}

/* Reference neighbour_relevance and centroid_silhouette of cluster i. */
static void
ref_member_columns(const Problem *pb, int64_t i, const RefEntry *ref, int m,
				   long double *relevance, long double *silhouette)
{
	long double sil = 0;
	int64_t		home = 0;
	int64_t		a;
	int			q;

	for (a = 0; a < pb->n[i]; a++)
	{
		const float *x = pb->x[i] + a * pb->d;
		long double r = ref_member_dist(x, pb->centroids + i * pb->d, pb->d);
		long double b = INFINITY;

		for (q = 0; q < m; q++)
			b = fminl(b, ref_member_dist(x, pb->centroids + ref[q].idx * pb->d, pb->d));
		if (r <= b)
			home++;
		if (fmaxl(r, b) > 0)
			sil += (b - r) / fmaxl(r, b);
	}
	*relevance = (long double) home / pb->n[i];
	*silhouette = sil / pb->n[i];
}

/* Fills every column with NaN and alternating NULL flags. */
static void
poison(CvClusterStats *out)
{
	int			col;

	for (col = 0; col < CV_STAT_COUNT; col++)
	{
		out->value[col] = NAN;
		out->is_null[col] = (col % 2) == 0;
	}
	out->collapsed = false;
	out->rank_refused = false;
}

/* True for the five neighbour columns. */
static int
is_neighbour_column(int col)
{
	return col >= CV_STAT_NEAREST_CLUSTER && col <= CV_STAT_CENTROID_SILHOUETTE;
}

/* Checks that only the neighbour columns changed, and that none holds NaN. */
static void
check_poison(Case *c, const CvClusterStats *out, int64_t i)
{
	int			col;

	for (col = 0; col < CV_STAT_COUNT; col++)
	{
		if (is_neighbour_column(col))
			check(c, out->is_null[col] || !isnan(out->value[col]), "column set",
				  (long long) (i * 100 + col), out->value[col], 0);
		else
			check(c, isnan(out->value[col]) && out->is_null[col] == ((col % 2) == 0),
				  "other column untouched", (long long) (i * 100 + col), out->value[col], NAN);
	}
}

/* True when two fractions of n members count the same members. */
static int
same_count(double got, long double want, int64_t n)
{
	return fabsl((long double) got - want) <= 0.5L / n;
}

/* Checks one cluster's five columns against the reference. */
static void
check_cluster(Case *c, const Problem *pb, const CvNeighbourTable *tb, int64_t i)
{
	CvClusterStats out;
	RefEntry   *ref = ref_sorted_others(pb, i);
	long double relevance;
	long double silhouette;

	poison(&out);
	cv_health_neighbour(pb->x[i], pb->n[i], pb->d, i, &pb->set, tb, &out);
	check_poison(c, &out, i);
	check_list(c, pb, tb, i, ref);
	check(c, !out.is_null[CV_STAT_NEAREST_CLUSTER] &&
		  out.value[CV_STAT_NEAREST_CLUSTER] == (double) tb->nearest[i * tb->m],
		  "nearest_cluster", (long long) i, out.value[CV_STAT_NEAREST_CLUSTER], ref[0].idx);
	check(c, !out.is_null[CV_STAT_NEAREST_DIST] &&
		  close_to(out.value[CV_STAT_NEAREST_DIST], ref[0].dist, ref[0].dist),
		  "nearest_dist", (long long) i, out.value[CV_STAT_NEAREST_DIST], ref[0].dist);
	{
		long double db = ref_db_ratio(pb, i);

		check(c, !out.is_null[CV_STAT_DB_RATIO] && close_to(out.value[CV_STAT_DB_RATIO], db, db),
			  "db_ratio", (long long) i, out.value[CV_STAT_DB_RATIO], db);
	}
	ref_member_columns(pb, i, ref, tb->m, &relevance, &silhouette);
	check(c, !out.is_null[CV_STAT_NEIGHBOUR_RELEVANCE] &&
		  same_count(out.value[CV_STAT_NEIGHBOUR_RELEVANCE], relevance, pb->n[i]),
		  "neighbour_relevance", (long long) i, out.value[CV_STAT_NEIGHBOUR_RELEVANCE], relevance);
	check(c, !out.is_null[CV_STAT_CENTROID_SILHOUETTE] &&
		  close_to(out.value[CV_STAT_CENTROID_SILHOUETTE], silhouette, 1.0L),
		  "centroid_silhouette", (long long) i, out.value[CV_STAT_CENTROID_SILHOUETTE], silhouette);
	free(ref);
}

/* Runs prepare and every cluster of a problem against the reference. */
static void
run_problem(const char *what, Problem *pb, int neighbours)
{
	Case		c = new_case(what, pb, neighbours);
	CvNeighbourTable tb;
	int64_t		expect_m = neighbours < pb->k - 1 ? neighbours : pb->k - 1;
	int64_t		i;

	memset(&tb, 0x5a, sizeof(tb));
	check(&c, cv_health_neighbour_prepare(&pb->set, neighbours, &tb) == 0, "prepare", 0, 0, 0);
	check(&c, tb.k == pb->k && tb.m == expect_m, "table m", 0, tb.m, expect_m);
	if (c.failures == 0)
		for (i = 0; i < pb->k; i++)
			check_cluster(&c, pb, &tb, i);
	cv_health_neighbour_free(&tb);
	finish_case(&c);
}

/* k = 1: prepare succeeds with m = 0 and all five columns are NULL. */
static void
test_single_cluster(int d)
{
	Problem		pb = random_problem(1, d, 1, 5, 0.3, 0);
	Case		c = new_case("single cluster", &pb, 5);
	CvNeighbourTable tb;
	CvClusterStats out;
	int			col;

	check(&c, cv_health_neighbour_prepare(&pb.set, 5, &tb) == 0, "prepare", 0, 0, 0);
	check(&c, tb.m == 0, "table m", 0, tb.m, 0);
	poison(&out);
	cv_health_neighbour(pb.x[0], pb.n[0], d, 0, &pb.set, &tb, &out);
	for (col = CV_STAT_NEAREST_CLUSTER; col <= CV_STAT_CENTROID_SILHOUETTE; col++)
		check(&c, out.is_null[col] && out.value[col] == 0, "NULL column", col, out.value[col], 0);
	check_poison(&c, &out, 0);
	cv_health_neighbour_free(&tb);
	cv_health_neighbour_free(&tb);
	free_problem(&pb);
	finish_case(&c);
}

/*
 * Exact ties by construction: centroid 0 at the origin and the others at
 * +-e_1, +-e_2 (all at distance 1), listed in an order where the smaller
 * index is not the first one found.
 */
static void
test_exact_ties(void)
{
	static const double where[5][2] = {{0, 0}, {0, -1}, {1, 0}, {-1, 0}, {0, 1}};
	Problem		pb = alloc_problem(5, 2);
	Case		c;
	CvNeighbourTable tb;
	int64_t		i;
	int			t;

	for (i = 0; i < 5; i++)
	{
		pb.n[i] = 2;
		pb.x[i] = xmalloc(sizeof(float) * 4);
		for (t = 0; t < 2; t++)
		{
			pb.centroids[i * 2 + t] = where[i][t];
			pb.x[i][t] = (float) (where[i][t] + 0.25);
			pb.x[i][2 + t] = (float) (where[i][t] - 0.25);
		}
		summarise_cluster(&pb, i, 1);
	}
	c = new_case("exact ties", &pb, 3);
	check(&c, cv_health_neighbour_prepare(&pb.set, 3, &tb) == 0, "prepare", 0, 0, 0);
	for (t = 0; t < 3; t++)
		check(&c, tb.nearest[t] == t + 1, "tie to smaller index", t, tb.nearest[t], t + 1);
	check(&c, tb.nearest[1 * 3] == 0, "nearest of 1", 1, tb.nearest[3], 0);
	cv_health_neighbour_free(&tb);
	free_problem(&pb);
	finish_case(&c);
	pb = alloc_problem(5, 2);
	for (i = 0; i < 5; i++)
	{
		pb.n[i] = 2;
		pb.x[i] = xmalloc(sizeof(float) * 4);
		for (t = 0; t < 2; t++)
		{
			pb.centroids[i * 2 + t] = where[i][t];
			pb.x[i][t] = (float) (where[i][t] + 0.5);
			pb.x[i][2 + t] = (float) (where[i][t] - 0.5);
		}
		summarise_cluster(&pb, i, 1);
	}
	run_problem("exact ties, members on the bisectors", &pb, 4);
	free_problem(&pb);
}

/*
 * Coinciding centroids: pairs of clusters whose centroids differ by
 * gap * mean_norm; inside the eps band the pair contributes 0 to db_ratio.
 */
static void
test_coinciding(double gap, int expect_zero)
{
	Problem		pb = random_problem(6, 8, 2, 6, 0.2, 3.0);
	Case		c;
	CvNeighbourTable tb;
	char		what[64];
	int			t;

	/* cluster 3 copies cluster 1's members, shifted by gap * mean_norm on axis 0 */
	free(pb.x[3]);
	pb.n[3] = pb.n[1];
	pb.x[3] = xmalloc(sizeof(float) * pb.n[1] * 8);
	memcpy(pb.x[3], pb.x[1], sizeof(float) * pb.n[1] * 8);
	summarise_cluster(&pb, 3, 0);
	for (t = 0; t < 8; t++)
		pb.centroids[3 * 8 + t] = pb.centroids[1 * 8 + t];
	pb.centroids[3 * 8] += gap * pb.mean_norm[1];
	snprintf(what, sizeof(what), "coinciding pair, gap %.0e x mean_norm", gap);
	run_problem(what, &pb, 2);
	snprintf(what, sizeof(what), "coinciding pair, gap %.0e, db_ratio %s", gap,
			 expect_zero ? "without it" : "from it");
	c = new_case(what, &pb, 2);
	check(&c, cv_health_neighbour_prepare(&pb.set, 2, &tb) == 0, "prepare", 0, 0, 0);
	check(&c, tb.nearest[1 * 2] == 3 && tb.nearest[3 * 2] == 1, "pair are nearest", 1,
		  tb.nearest[2], 3);
	if (expect_zero)
		check(&c, tb.db_ratio[1] < 1e3 && tb.db_ratio[3] < 1e3, "pair contributes 0", 1,
			  tb.db_ratio[1], 0);
	else
		check(&c, tb.db_ratio[1] > 10 && tb.db_ratio[3] > 10, "pair contributes", 1,
			  tb.db_ratio[1], INFINITY);
	cv_health_neighbour_free(&tb);
	free_problem(&pb);
	finish_case(&c);
}

/* Random problems of many shapes. */
static void
test_random(void)
{
	static const int64_t ks[] = {2, 3, 7, 50, 129, 300};
	static const int ds[] = {1, 3, 8, 17, 64, 130};
	static const int nbs[] = {1, 2, 5, 1000};
	size_t		a;

	for (a = 0; a < sizeof(ks) / sizeof(ks[0]); a++)
	{
		int			d = ds[rng_int(0, (int) (sizeof(ds) / sizeof(ds[0])) - 1)];
		int			nb = nbs[rng_int(0, 3)];
		double		spread = rng_uniform(0.05, 1.5);
		double		offset = rng_int(0, 1) ? 0.0 : 100.0;
		Problem		pb = random_problem(ks[a], d, 1, 30, spread, offset);

		run_problem("random", &pb, nb);
		run_problem("random, neighbours = k - 1", &pb, (int) ks[a] - 1);
		free_problem(&pb);
	}
}

/* Wide centroids, so the pair sweep runs over several tiles (64 rows at d = 2000). */
static void
test_tiles(void)
{
	Problem		pb = random_problem(151, 2000, 1, 3, 0.5, 0);

	run_problem("random, several tiles", &pb, 7);
	free_problem(&pb);
}

/* Integer-grid problems: exact distance ties and exact r = b ties. */
static void
test_grid(void)
{
	int			rep;

	for (rep = 0; rep < 6; rep++)
	{
		int64_t		k = rng_int(2, 80);
		int			d = rng_int(1, 4);
		Problem		pb = grid_problem(k, d, rng_int(1, 3));

		run_problem("integer grid", &pb, rng_int(1, 6));
		free_problem(&pb);
	}
}

/* Random float64 vector: U(-1, 1) * scale + offset. */
static void
fill_random(double *v, int d, double scale, double offset)
{
	int			t;

	for (t = 0; t < d; t++)
		v[t] = offset + scale * rng_uniform(-1, 1);
}

/* One kernel variant against the portable kernels, bit for bit. */
static void
check_variant(const char *name, PairKernel pair, MemberKernel member)
{
	static const int ds[] = {1, 7, 8, 9, 15, 16, 17, 100, 1023, 1024, 1031};
	Case		c;
	size_t		a;
	int			rep;

	snprintf(c.name, sizeof(c.name), "%s kernels = portable, bit for bit", name);
	c.checks = 0;
	c.failures = 0;
	for (a = 0; a < sizeof(ds) / sizeof(ds[0]); a++)
		for (rep = 0; rep < 4; rep++)
		{
			int			d = ds[a];
			double	   *rows = xmalloc(sizeof(double) * 5 * d);
			float	   *x = xmalloc(sizeof(float) * d);
			double		want[4];
			double		got[4];
			double		mw;
			double		mg;
			int			t;

			fill_random(rows, 5 * d, pow(10.0, rng_uniform(-3, 3)), rep * 100.0);
			for (t = 0; t < d; t++)
				x[t] = (float) rows[4 * d + t];
			fill_random(rows + 4 * d, d, 1.0, rep * 100.0);
			pair_sq_portable(rows, rows + d, rows + 2 * d, rows + 3 * d, d, want);
			pair(rows, rows + d, rows + 2 * d, rows + 3 * d, d, got);
			check(&c, memcmp(want, got, sizeof(want)) == 0, "pair kernel", d, got[0], want[0]);
			mw = member_sq_portable(x, rows + 4 * d, d);
			mg = member(x, rows + 4 * d, d);
			check(&c, memcmp(&mw, &mg, sizeof(mw)) == 0, "member kernel", d, mg, mw);
			free(rows);
			free(x);
		}
	finish_case(&c);
}

/* Every SIMD variant this CPU runs against the portable kernels. */
static void
test_variants(void)
{
#ifdef HAVE_X86_VARIANTS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		check_variant("avx2", pair_sq_avx2, member_sq_avx2);
	else
	{
		cases_skipped++;
		printf("skip avx2 kernels: not supported by this CPU\n");
	}
	if (__builtin_cpu_supports("avx512f"))
		check_variant("avx512", pair_sq_avx512, member_sq_avx512);
	else
	{
		cases_skipped++;
		printf("skip avx512 kernels: not supported by this CPU\n");
	}
#else
	cases_skipped++;
	printf("skip SIMD kernels: not built on this platform\n");
#endif
}

/* Seconds of a clock since some fixed point. */
static double
seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Times cv_health_neighbour_prepare on k random centroids of dimension d. */
static void
time_prepare(int64_t k, int d, int neighbours)
{
	Problem		pb = alloc_problem(k, d);
	CvNeighbourTable tb;
	double		wall;
	double		cpu;
	int64_t		i;

	for (i = 0; i < k * d; i++)
		pb.centroids[i] = rng_uniform(-1, 1);
	for (i = 0; i < k; i++)
	{
		pb.n[i] = 1;
		pb.x[i] = NULL;
		pb.mean_dist[i] = 0.5;
		pb.mean_norm[i] = 1.0;
	}
	wall = seconds(CLOCK_MONOTONIC);
	cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
	if (cv_health_neighbour_prepare(&pb.set, neighbours, &tb) != 0)
		printf("prepare failed\n");
	cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
	wall = seconds(CLOCK_MONOTONIC) - wall;
	printf("cv_health_neighbour_prepare k=%lld d=%d neighbours=%d: %.3f s CPU, %.3f s wall\n",
		   (long long) k, d, neighbours, cpu, wall);
	cv_health_neighbour_free(&tb);
	free_problem(&pb);
}

int
main(int argc, char **argv)
{
	uint64_t	seed = choose_seed();

	rng_state = seed;
	printf("seed %llu (set CV_TEST_SEED=%llu to replay)\n",
		   (unsigned long long) seed, (unsigned long long) seed);
	if (argc > 1 && strcmp(argv[1], "--time") == 0)
	{
		time_prepare(1000, 1024, 5);
		time_prepare(10000, 1024, 5);
		return 0;
	}
	test_variants();
	test_single_cluster(4);
	test_exact_ties();
	test_coinciding(1e-9, 1);
	test_coinciding(1e-3, 0);
	test_random();
	test_tiles();
	test_grid();
	if (cases_skipped > 0)
		printf("%d skipped\n", cases_skipped);
	printf("%d passed, %d failed\n", cases_passed, cases_failed);
	return cases_failed == 0 ? 0 : 1;
}
