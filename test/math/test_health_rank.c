/*
 * test_health_rank.c: standalone test of effective_rank (STATISTICS.md
 * section 6).
 *
 * Known spectra: members built from columns of a Sylvester-Hadamard matrix
 * (orthogonal, zero mean, exactly representable), placed on r coordinate
 * axes with chosen scales, so the singular values are exactly scale * sqrt(n)
 * and exp(H) is known in closed form (r for equal scales); the same
 * rotated into random orthonormal directions and offset, where float
 * rounding perturbs them slightly.  Generic data: an independent long
 * double computation (Gram matrix in long double, eigenvalues by cyclic
 * Jacobi, the same zero rule) on both sides of n = d, on odd sides and on
 * sizes that cross the 256-column chunks.  NULL rules: n < 2, n >
 * rank_max_members (refused), collapsed, identical members.  Outputs are
 * poisoned before every call; only effective_rank and rank_refused may
 * change.  Set CV_TEST_SEED to replay; `--time` times n = 2000, d = 1024.
 *
 * The module is included rather than linked, so that its static SIMD kernel
 * variants (Gram dot products, fused reduction row) can be checked against
 * the portable ones bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "health_rank.c"

#define MAX_REPORTED 5

/* Pass/fail state of one case (one output line). */
typedef struct Case
{
	char		name[160];
	int			checks;
	int			failures;
} Case;

/* One cluster: members (n x d float) and its centroid (float64). */
typedef struct Cluster
{
	int64_t		n;
	int			d;
	float	   *x;
	double	   *c;
} Cluster;

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

/* calloc that exits on failure (test data only). */
static void *
xcalloc(size_t count, size_t size)
{
	void	   *p = calloc(count > 0 ? count : 1, size);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* Starts a case. */
static Case
new_case(const char *what, int64_t n, int d)
{
	Case		c;

	snprintf(c.name, sizeof(c.name), "%s n=%lld d=%d", what, (long long) n, d);
	c.checks = 0;
	c.failures = 0;
	return c;
}

/* Records one check, printing the first few failures. */
static void
check(Case *c, int ok, const char *what, double got, long double want)
{
	c->checks++;
	if (ok)
		return;
	if (c->failures++ < MAX_REPORTED)
		printf("  FAIL %s: %s got=%.17g want=%.17Lg\n", c->name, what, got, want);
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

/* An empty cluster of n members in d dimensions. */
static Cluster
new_cluster(int64_t n, int d)
{
	Cluster		cl;

	cl.n = n;
	cl.d = d;
	cl.x = xcalloc((size_t) (n * d), sizeof(float));
	cl.c = xcalloc((size_t) d, sizeof(double));
	return cl;
}

/* Releases a cluster. */
static void
free_cluster(Cluster *cl)
{
	free(cl->x);
	free(cl->c);
}

/* The centroid as the long double mean of the members, rounded once. */
static void
set_centroid(Cluster *cl)
{
	int			t;
	int64_t		i;

	for (t = 0; t < cl->d; t++)
	{
		long double s = 0;

		for (i = 0; i < cl->n; i++)
			s += cl->x[i * cl->d + t];
		cl->c[t] = (double) (s / cl->n);
	}
}

/* Entry (i, j) of the Sylvester-Hadamard matrix: (-1)^popcount(i & j). */
static int
hadamard(int64_t i, int64_t j)
{
	return (__builtin_popcountll((unsigned long long) (i & j)) & 1) ? -1 : 1;
}

/* Fills every column with NaN and alternating NULL flags. */
static void
poison(CvClusterStats *out, bool collapsed)
{
	int			col;

	for (col = 0; col < CV_STAT_COUNT; col++)
	{
		out->value[col] = NAN;
		out->is_null[col] = (col % 2) == 0;
	}
	out->collapsed = collapsed;
	out->rank_refused = !collapsed;
}

/* Runs the function on poisoned output; checks the other columns stayed poisoned. */
static CvClusterStats
run_rank(Case *c, const Cluster *cl, int rank_max, bool collapsed)
{
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, rank_max};
	CvClusterStats out;
	int			col;
	int			rc;

	poison(&out, collapsed);
	rc = cv_health_effective_rank(cl->x, cl->n, cl->d, cl->c, &params, &out);
	check(c, rc == 0, "return code", rc, 0);
	for (col = 0; col < CV_STAT_COUNT; col++)
		if (col != CV_STAT_EFFECTIVE_RANK)
			check(c, isnan(out.value[col]) && out.is_null[col] == ((col % 2) == 0),
				  "other column untouched", col, NAN);
	check(c, out.collapsed == collapsed, "collapsed untouched", out.collapsed, collapsed);
	check(c, out.is_null[CV_STAT_EFFECTIVE_RANK] || isfinite(out.value[CV_STAT_EFFECTIVE_RANK]),
		  "finite", out.value[CV_STAT_EFFECTIVE_RANK], 0);
	return out;
}

/* Checks a non-NULL result within rel of want. */
static void
check_value(Case *c, const CvClusterStats *out, long double want, double rel)
{
	double		got = out->value[CV_STAT_EFFECTIVE_RANK];

	check(c, !out->is_null[CV_STAT_EFFECTIVE_RANK], "not NULL", got, want);
	check(c, !out->rank_refused, "not refused", out->rank_refused, 0);
	check(c, fabsl((long double) got - want) <= rel * fabsl(want), "effective_rank", got, want);
}

/* Checks a NULL result and the refusal flag. */
static void
check_null(Case *c, const CvClusterStats *out, bool refused)
{
	check(c, out->is_null[CV_STAT_EFFECTIVE_RANK] && out->value[CV_STAT_EFFECTIVE_RANK] == 0,
		  "NULL", out->value[CV_STAT_EFFECTIVE_RANK], 0);
	check(c, out->rank_refused == refused, "rank_refused", out->rank_refused, refused);
}

/* exp(H) of p_k = sv_k / sum sv in long double, sv at most 1e-6 * max dropped. */
static long double
ref_rank_from_sv(long double *sv, int s)
{
	long double top = 0;
	long double sum = 0;
	long double h = 0;
	int			i;

	for (i = 0; i < s; i++)
		top = fmaxl(top, sv[i]);
	if (top <= 0)
		return -1;
	for (i = 0; i < s; i++)
		if (sv[i] > CV_HEALTH_EPS * top)
			sum += sv[i];
	for (i = 0; i < s; i++)
		if (sv[i] > CV_HEALTH_EPS * top)
			h -= sv[i] / sum * logl(sv[i] / sum);
	return expl(h);
}

/*
 * Known spectrum on coordinate axes: n = 2^p members, member i has
 * scale[q] * H(i, q + 1) on axis axes[q]; everything else 0.  The centred
 * matrix is exact, its singular values scale[q] * sqrt(n).
 */
static void
test_axes(int64_t n, int d, const double *scale, int r, const char *what)
{
	Cluster		cl = new_cluster(n, d);
	long double sv[64];
	Case		c = new_case(what, n, d);
	CvClusterStats out;
	int64_t		i;
	int			q;

	for (q = 0; q < r; q++)
	{
		int			axis = (int) ((q * 7 + 3) % d);

		for (i = 0; i < n; i++)
			cl.x[i * d + axis] = (float) (scale[q] * hadamard(i, q + 1));
		sv[q] = scale[q] * sqrtl((long double) n);
	}
	set_centroid(&cl);
	out = run_rank(&c, &cl, 100000, false);
	/* a small eigenvalue has an absolute error near 1e-16 * the largest */
	check_value(&c, &out, ref_rank_from_sv(sv, r), 1e-10);
	free_cluster(&cl);
	finish_case(&c);
}

/* A random orthonormal set of r vectors in R^d (modified Gram-Schmidt, long double). */
static long double *
random_orthonormal(int r, int d)
{
	long double *u = xcalloc((size_t) r * d, sizeof(long double));
	int			q;
	int			p;
	int			t;

	for (q = 0; q < r; q++)
	{
		long double norm = 0;

		for (t = 0; t < d; t++)
			u[q * d + t] = rng_uniform(-1, 1);
		for (p = 0; p < q; p++)
		{
			long double dot = 0;

			for (t = 0; t < d; t++)
				dot += u[q * d + t] * u[p * d + t];
			for (t = 0; t < d; t++)
				u[q * d + t] -= dot * u[p * d + t];
		}
		for (t = 0; t < d; t++)
			norm += u[q * d + t] * u[q * d + t];
		for (t = 0; t < d; t++)
			u[q * d + t] /= sqrtl(norm);
	}
	return u;
}

/*
 * Equal variance on r random orthonormal directions, plus an offset shared
 * by all members: effective rank r up to float rounding of the members.
 */
static void
test_rotated(int64_t n, int d, int r, double offset)
{
	Cluster		cl = new_cluster(n, d);
	long double *u = random_orthonormal(r, d);
	char		what[96];
	Case		c;
	CvClusterStats out;
	int64_t		i;
	int			q;
	int			t;

	snprintf(what, sizeof(what), "rank %d, rotated, offset %g", r, offset);
	c = new_case(what, n, d);
	for (i = 0; i < n; i++)
		for (t = 0; t < d; t++)
		{
			long double v = offset;

			for (q = 0; q < r; q++)
				v += hadamard(i, q + 1) * u[q * d + t];
			cl.x[i * d + t] = (float) v;
		}
	set_centroid(&cl);
	out = run_rank(&c, &cl, 100000, false);
	check_value(&c, &out, r, 1e-6);
	free(u);
	free_cluster(&cl);
	finish_case(&c);
}

/* Eigenvalues of the symmetric s x s matrix a (destroyed) by cyclic Jacobi. */
static void
jacobi_eigenvalues(long double *a, int s, long double *lambda)
{
	int			sweep;
	int			p;
	int			q;
	int			k;

	for (sweep = 0; sweep < 100; sweep++)
	{
		long double off = 0;
		long double total = 0;

		for (p = 0; p < s; p++)
			for (q = 0; q < s; q++)
			{
				total += a[p * s + q] * a[p * s + q];
				if (p != q)
					off += a[p * s + q] * a[p * s + q];
			}
		if (off <= 1e-40L * total)
			break;
		for (p = 0; p < s; p++)
			for (q = p + 1; q < s; q++)
			{
				long double apq = a[p * s + q];
				long double theta,
							t,
							cs,
							sn;

				if (apq == 0)
					continue;
				theta = (a[q * s + q] - a[p * s + p]) / (2 * apq);
				t = (theta >= 0 ? 1 : -1) / (fabsl(theta) + sqrtl(theta * theta + 1));
				cs = 1 / sqrtl(t * t + 1);
				sn = t * cs;
				for (k = 0; k < s; k++)
				{
					long double akp = a[k * s + p];
					long double akq = a[k * s + q];

					a[k * s + p] = cs * akp - sn * akq;
					a[k * s + q] = sn * akp + cs * akq;
				}
				for (k = 0; k < s; k++)
				{
					long double apk = a[p * s + k];
					long double aqk = a[q * s + k];

					a[p * s + k] = cs * apk - sn * aqk;
					a[q * s + k] = sn * apk + cs * aqk;
				}
			}
	}
	for (p = 0; p < s; p++)
		lambda[p] = a[p * s + p];
}

/* The independent reference: long double Gram of side min(n, d), Jacobi, same zero rule. */
static long double
ref_effective_rank(const Cluster *cl)
{
	int			s = (int) (cl->n <= cl->d ? cl->n : cl->d);
	long double *g = xcalloc((size_t) s * s, sizeof(long double));
	long double *lambda = xcalloc((size_t) s, sizeof(long double));
	long double result;
	int64_t		i;
	int64_t		j;
	int64_t		t;

	for (i = 0; i < s; i++)
		for (j = i; j < s; j++)
		{
			long double sum = 0;

			if (cl->n <= cl->d)
				for (t = 0; t < cl->d; t++)
					sum += ((long double) cl->x[i * cl->d + t] - cl->c[t]) *
						((long double) cl->x[j * cl->d + t] - cl->c[t]);
			else
				for (t = 0; t < cl->n; t++)
					sum += ((long double) cl->x[t * cl->d + i] - cl->c[i]) *
						((long double) cl->x[t * cl->d + j] - cl->c[j]);
			g[i * s + j] = sum;
			g[j * s + i] = sum;
		}
	jacobi_eigenvalues(g, s, lambda);
	for (i = 0; i < s; i++)
		lambda[i] = sqrtl(fmaxl(lambda[i], 0));
	result = ref_rank_from_sv(lambda, s);
	free(g);
	free(lambda);
	return result;
}

/*
 * Generic random members: per-dimension scales spread over `decades`
 * decades (a wide spectrum), an optional shared offset.
 */
static void
test_generic(int64_t n, int d, double decades, double offset)
{
	Cluster		cl = new_cluster(n, d);
	double	   *scale = xcalloc((size_t) d, sizeof(double));
	char		what[96];
	Case		c;
	CvClusterStats out;
	int64_t		i;
	int			t;

	snprintf(what, sizeof(what), "generic vs long double Jacobi, %g decades, offset %g",
			 decades, offset);
	c = new_case(what, n, d);
	for (t = 0; t < d; t++)
		scale[t] = pow(10.0, -decades * rng_uniform(0, 1));
	for (i = 0; i < n; i++)
		for (t = 0; t < d; t++)
			cl.x[i * d + t] = (float) (offset + scale[t] * rng_uniform(-1, 1));
	set_centroid(&cl);
	out = run_rank(&c, &cl, 100000, false);
	check_value(&c, &out, ref_effective_rank(&cl), 1e-9);
	free(scale);
	free_cluster(&cl);
	finish_case(&c);
}

/* The NULL rules and the refusal. */
static void
test_nulls(void)
{
	Cluster		cl = new_cluster(10, 6);
	Case		c = new_case("NULL rules", 10, 6);
	CvClusterStats out;
	int64_t		i;
	int			t;

	for (i = 0; i < 10 * 6; i++)
		cl.x[i] = (float) rng_uniform(-1, 1);
	set_centroid(&cl);
	out = run_rank(&c, &cl, 9, false);
	check_null(&c, &out, true);	/* n > rank_max_members */
	out = run_rank(&c, &cl, 10, false);
	check(&c, !out.is_null[CV_STAT_EFFECTIVE_RANK] && !out.rank_refused,
		  "n = rank_max_members computes", out.value[CV_STAT_EFFECTIVE_RANK], 0);
	out = run_rank(&c, &cl, 10, true);
	check_null(&c, &out, false);	/* collapsed */
	cl.n = 1;
	out = run_rank(&c, &cl, 10, false);
	check_null(&c, &out, false);	/* n < 2 */
	cl.n = 10;
	for (i = 0; i < 10; i++)
		for (t = 0; t < 6; t++)
			cl.x[i * 6 + t] = (float) (t + 0.1);
	set_centroid(&cl);
	out = run_rank(&c, &cl, 10, false);
	check_null(&c, &out, false);	/* identical members: every sv is 0 */
	free_cluster(&cl);
	finish_case(&c);
}

/* Two members: one nonzero singular value, effective rank 1. */
static void
test_two_members(int d)
{
	Cluster		cl = new_cluster(2, d);
	Case		c = new_case("two members", 2, d);
	CvClusterStats out;
	int			t;

	for (t = 0; t < 2 * d; t++)
		cl.x[t] = (float) rng_uniform(-1, 1);
	set_centroid(&cl);
	out = run_rank(&c, &cl, 2, false);
	check_value(&c, &out, 1.0L, 1e-12);
	free_cluster(&cl);
	finish_case(&c);
}

/* Known spectra on coordinate axes, both sides of n = d. */
static void
test_known_spectra(void)
{
	static const double ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
	static const double three_one[2] = {3, 1};
	static const double spread[5] = {1000, 10, 1, 0.1, 0.01};

	test_axes(16, 64, ones, 1, "rank 1 on axes");
	test_axes(16, 64, ones, 3, "rank 3 on axes");
	test_axes(16, 64, ones, 15, "rank 15 on axes (= n - 1)");
	test_axes(64, 8, ones, 5, "rank 5 on axes, n > d");
	test_axes(64, 8, ones, 8, "rank 8 on axes, n > d (full)");
	test_axes(32, 300, ones, 7, "rank 7 on axes, d crosses a chunk");
	test_axes(512, 9, ones, 9, "rank 9 on axes, n crosses chunks");
	test_axes(32, 17, three_one, 2, "sv 3:1 on axes");
	test_axes(64, 33, spread, 5, "sv 1000:10:1:0.1:0.01 on axes");
}

/* Random float64 vector: U(-1, 1) * scale. */
static void
fill_random(double *v, int len, double scale)
{
	int			t;

	for (t = 0; t < len; t++)
		v[t] = scale * rng_uniform(-1, 1);
}

/* The dot kernel of a variant against the portable one, bit for bit. */
static void
check_dot_variant(Case *c, DotKernel kernel)
{
	static const int lens[] = {8, 16, 64, 256, 1024};
	size_t		a;

	for (a = 0; a < sizeof(lens) / sizeof(lens[0]); a++)
	{
		int			len = lens[a];
		double	   *rows = xcalloc((size_t) 4 * len, sizeof(double));
		double		want[4];
		double		got[4];

		fill_random(rows, 4 * len, pow(10.0, rng_uniform(-3, 3)));
		dot_2x2_portable(rows, rows + len, rows + 2 * len, rows + 3 * len, len, want);
		kernel(rows, rows + len, rows + 2 * len, rows + 3 * len, len, got);
		check(c, memcmp(want, got, sizeof(want)) == 0, "dot kernel", got[0], want[0]);
		free(rows);
	}
}

/* The fused row kernel of a variant against the portable one, bit for bit. */
static void
check_row_variant(Case *c, RowKernel kernel)
{
	static const int counts[] = {1, 2, 8, 9, 16, 17, 100, 1000};
	size_t		a;

	for (a = 0; a < sizeof(counts) / sizeof(counts[0]); a++)
	{
		int			i = 1 + (int) (a % 3);
		int			len = i + counts[a];
		double	   *buf = xcalloc((size_t) 8 * len, sizeof(double));
		PassVectors pv;

		fill_random(buf, 8 * len, pow(10.0, rng_uniform(-3, 3)));
		/* r and p twice: the portable copy at buf, the variant's at buf + 4 len */
		memcpy(buf + 4 * len, buf, sizeof(double) * 2 * len);
		pv.v = buf + 2 * len;
		pv.w = buf + 3 * len;
		pv.u = buf + 6 * len;
		pv.p = buf + len;
		fused_row_portable(buf + i, i, counts[a], &pv);
		pv.p = buf + 5 * len;
		kernel(buf + 4 * len + i, i, counts[a], &pv);
		check(c, memcmp(buf, buf + 4 * len, sizeof(double) * 2 * len) == 0, "fused row kernel",
			  buf[4 * len + i], buf[i]);
		free(buf);
	}
}

/* Every SIMD variant this CPU runs against the portable kernels. */
static void
test_variants(void)
{
#ifdef HAVE_X86_VARIANTS
	static const char *const names[2] = {"avx2", "avx512f"};
	const DotKernel dots[2] = {dot_2x2_avx2, dot_2x2_avx512};
	const RowKernel rows[2] = {fused_row_avx2, fused_row_avx512};
	int			v;

	__builtin_cpu_init();
	for (v = 0; v < 2; v++)
	{
		Case		c;

		if (!(v == 0 ? __builtin_cpu_supports("avx2") : __builtin_cpu_supports("avx512f")))
		{
			cases_skipped++;
			printf("skip %s kernels: not supported by this CPU\n", names[v]);
			continue;
		}
		snprintf(c.name, sizeof(c.name), "%s kernels = portable, bit for bit", names[v]);
		c.checks = 0;
		c.failures = 0;
		check_dot_variant(&c, dots[v]);
		check_row_variant(&c, rows[v]);
		finish_case(&c);
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

/* Times one call on random members. */
static void
time_rank(int64_t n, int d)
{
	Cluster		cl = new_cluster(n, d);
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, (int) n};
	CvClusterStats out;
	double		wall;
	double		cpu;
	int64_t		i;

	for (i = 0; i < n * d; i++)
		cl.x[i] = (float) rng_uniform(-1, 1);
	set_centroid(&cl);
	poison(&out, false);
	wall = seconds(CLOCK_MONOTONIC);
	cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
	cv_health_effective_rank(cl.x, n, d, cl.c, &params, &out);
	cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
	wall = seconds(CLOCK_MONOTONIC) - wall;
	printf("cv_health_effective_rank n=%lld d=%d (side %lld): %.3f s CPU, %.3f s wall (effective_rank %.3f)\n",
		   (long long) n, d, (long long) (n < d ? n : d), cpu, wall,
		   out.value[CV_STAT_EFFECTIVE_RANK]);
	free_cluster(&cl);
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
		time_rank(2000, 1024);
		time_rank(1024, 2000);
		time_rank(5000, 1024);
		time_rank(2000, 4096);
		return 0;
	}
	test_variants();
	test_nulls();
	test_two_members(1);
	test_two_members(40);
	test_known_spectra();
	test_rotated(32, 50, 4, 1.0);
	test_rotated(64, 20, 6, 0.0);
	test_rotated(128, 40, 40, 0.0);
	test_generic(30, 12, 0, 0);
	test_generic(12, 30, 0, 0);
	test_generic(25, 25, 3, 0);
	test_generic(41, 601, 1, 5);
	test_generic(601, 41, 1, 5);
	test_generic(3, 1, 0, 0);
	test_generic(80, 80, 5, 0);
	test_generic(150, 97, 2, 0);
	if (cases_skipped > 0)
		printf("%d skipped\n", cases_skipped);
	printf("%d passed, %d failed\n", cases_passed, cases_failed);
	return cases_failed == 0 ? 0 : 1;
}
