/*
 * test_distance.c: standalone unit test of the CPU distance kernels.
 *
 * Every supported variant is checked against a long double reference on
 * seeded random vectors, and against the scalar variant bit for bit (the
 * fixed-reduction-tree contract of distance.h).  Variants this CPU cannot
 * run are reported as skipped, never as passed.  Set CV_TEST_SEED to replay
 * a run; the seed is printed first.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"

#define REL_TOL 1e-6
#define ABS_TOL 1e-6
#define REPEATS 3
#define MAX_REPORTED 5

static const int lengths[] = {0, 1, 3, 15, 16, 17, 31, 32, 33, 100, 1023, 1024, 16000};

typedef enum CaseKind
{
	KIND_UNIFORM,				/* both U(-1, 1) */
	KIND_MIXED,					/* U(-1, 1) * 10^U(-3, 3) */
	KIND_NEAR_EQUAL,			/* b = a (1 + ~1e-6): L2, L1 and cosine cancel */
	KIND_CANCEL_IP,				/* pairwise a_i b_i terms cancel in the dot */
	KIND_EQUAL,					/* b = a: L2 = L1 = 0, cosine 0 */
	KIND_NEGATED,				/* b = -a: cosine 2 */
	KIND_COUNT
} CaseKind;

static const char *const kind_names[KIND_COUNT] = {
	"uniform", "mixed", "near-equal", "cancel-ip", "equal", "negated"
};

/* One input pair; a and b point into buffers offset to defeat alignment. */
typedef struct TestCase
{
	int			n;
	CaseKind	kind;
	float	   *a;
	float	   *b;
	float	   *a_buf;
	float	   *b_buf;
} TestCase;

/* Exact-enough answers: long double sums of exact float products. */
typedef struct Reference
{
	long double l2;
	long double l1;
	long double ip;
	long double ip_abs;
	long double norm_a_sq;
	long double cosine;
} Reference;

/* Pass/fail state of one check group (one output line). */
typedef struct Group
{
	const char *name;
	const char *variant;
	int			checks;
	int			failures;
} Group;

static uint64_t rng_state;
static int	groups_passed;
static int	groups_failed;
static int	groups_skipped;

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

/* One element of the kind's base distribution. */
static float
random_element(CaseKind kind)
{
	double		x = rng_uniform(-1.0, 1.0);

	if (kind != KIND_UNIFORM)
		x *= pow(10.0, rng_uniform(-3.0, 3.0));
	return (float) x;
}

/* Derives b from a so the kind's cancellation actually happens. */
static void
derive_b(TestCase *tc)
{
	int			i;

	for (i = 0; i < tc->n; i++)
	{
		switch (tc->kind)
		{
			case KIND_NEAR_EQUAL:
				tc->b[i] = (float) (tc->a[i] * (1.0 + rng_uniform(-1e-6, 1e-6)));
				break;
			case KIND_CANCEL_IP:
				/* (a0, a1) . (a1, -a0 (1 + eps)) is nearly zero */
				if (i % 2 == 0)
					tc->b[i] = i + 1 < tc->n ? tc->a[i + 1] : tc->a[i];
				else
					tc->b[i] = (float) (-tc->a[i - 1] * (1.0 + rng_uniform(-1e-6, 1e-6)));
				break;
			case KIND_EQUAL:
				tc->b[i] = tc->a[i];
				break;
			case KIND_NEGATED:
				tc->b[i] = -tc->a[i];
				break;
			default:
				tc->b[i] = random_element(tc->kind);
				break;
		}
	}
}

/* Allocates and fills one case; 'offset' floats shift both vectors. */
static TestCase
make_case(int n, CaseKind kind, int offset)
{
	TestCase	tc;
	int			i;

	tc.n = n;
	tc.kind = kind;
	tc.a_buf = calloc((size_t) n + 4, sizeof(float));
	tc.b_buf = calloc((size_t) n + 4, sizeof(float));
	if (tc.a_buf == NULL || tc.b_buf == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	tc.a = tc.a_buf + offset;
	tc.b = tc.b_buf + offset;
	for (i = 0; i < n; i++)
		tc.a[i] = random_element(kind == KIND_UNIFORM ? KIND_UNIFORM : KIND_MIXED);
	derive_b(&tc);
	return tc;
}

/* Releases one case. */
static void
free_case(TestCase *tc)
{
	free(tc->a_buf);
	free(tc->b_buf);
}

/* Computes the long double reference answers of one case. */
static Reference
reference_of(const TestCase *tc)
{
	Reference	r;
	long double nb = 0.0L;
	long double sim;
	int			i;

	memset(&r, 0, sizeof(r));
	for (i = 0; i < tc->n; i++)
	{
		long double x = tc->a[i];
		long double y = tc->b[i];

		r.l2 += (x - y) * (x - y);
		r.l1 += fabsl(x - y);
		r.ip += x * y;
		r.ip_abs += fabsl(x * y);
		r.norm_a_sq += x * x;
		nb += y * y;
	}
	r.l2 = sqrtl(r.l2);
	sim = r.ip / sqrtl(r.norm_a_sq * nb);
	r.cosine = (r.norm_a_sq == 0.0L || nb == 0.0L) ? (long double) NAN :
		1.0L - fminl(1.0L, fmaxl(-1.0L, sim));
	return r;
}

/* Records one check in a group, printing the first few failures. */
static void
check(Group *g, int ok, const TestCase *tc, double got, long double want)
{
	g->checks++;
	if (ok)
		return;
	if (g->failures++ < MAX_REPORTED)
		printf("  FAIL %s %s: n=%d kind=%s got=%.17g want=%.17Lg\n",
			   g->variant, g->name, tc ? tc->n : 0,
			   tc ? kind_names[tc->kind] : "-", got, want);
}

/* True when got is within tol of want relative to scale (NaN only matches NaN). */
static int
close_to(double got, long double want, long double scale, double tol)
{
	if (isnan(want))
		return isnan(got);
	return fabsl((long double) got - want) <= tol * scale;
}

/* Prints a group's line and counts it. */
static void
finish_group(const Group *g)
{
	if (g->failures == 0)
		groups_passed++;
	else
		groups_failed++;
	printf("%-4s %-7s %-48s %d checks, %d failed\n",
		   g->failures == 0 ? "ok" : "FAIL", g->variant, g->name,
		   g->checks, g->failures);
}

/* Reports a group that could not run on this CPU. */
static void
skip_group(const char *variant, const char *name)
{
	groups_skipped++;
	printf("skip %-7s %-48s not supported by this CPU\n", variant, name);
}

/* Runs fn over every (length, kind, repeat) case. */
static void
for_each_case(void (*fn) (const TestCase *, void *), void *arg)
{
	size_t		li;
	int			kind;
	int			rep;

	for (li = 0; li < sizeof(lengths) / sizeof(lengths[0]); li++)
		for (kind = 0; kind < KIND_COUNT; kind++)
			for (rep = 0; rep < REPEATS; rep++)
			{
				TestCase	tc = make_case(lengths[li], (CaseKind) kind, (rep + kind) % 4);

				fn(&tc, arg);
				free_case(&tc);
			}
}

/* Group set of one variant's accuracy checks. */
typedef struct AccuracyGroups
{
	const CvDistanceKernels *k;
	Group		l2;
	Group		l1;
	Group		ip;
	Group		cosine;
	Group		norm;
} AccuracyGroups;

/* Checks one case's five results against the reference. */
static void
accuracy_case(const TestCase *tc, void *arg)
{
	AccuracyGroups *ag = arg;
	Reference	r = reference_of(tc);
	double		l2 = sqrt(ag->k->l2_squared(tc->a, tc->b, tc->n));
	double		l1 = ag->k->l1(tc->a, tc->b, tc->n);
	double		ip = ag->k->inner_product(tc->a, tc->b, tc->n);
	double		cos = cv_cosine_distance_from_parts(ag->k->cosine_parts(tc->a, tc->b, tc->n));
	double		norm = ag->k->norm_squared(tc->a, tc->n);

	check(&ag->l2, close_to(l2, r.l2, r.l2, REL_TOL), tc, l2, r.l2);
	check(&ag->l1, close_to(l1, r.l1, r.l1, REL_TOL), tc, l1, r.l1);
	check(&ag->ip, close_to(ip, r.ip, r.ip_abs, REL_TOL), tc, ip, r.ip);
	check(&ag->cosine, close_to(cos, r.cosine, 1.0L, ABS_TOL), tc, cos, r.cosine);
	check(&ag->norm, close_to(norm, r.norm_a_sq, r.norm_a_sq, REL_TOL), tc, norm, r.norm_a_sq);
}

/* Makes an empty group. */
static Group
new_group(const char *variant, const char *name)
{
	Group		g = {name, variant, 0, 0};

	return g;
}

/* One variant against the long double reference. */
static void
test_accuracy(const CvDistanceKernels *k)
{
	AccuracyGroups ag;

	ag.k = k;
	ag.l2 = new_group(k->name, "L2 (sqrt l2_squared) vs ref, 1e-6 rel");
	ag.l1 = new_group(k->name, "L1 vs ref, 1e-6 rel");
	ag.ip = new_group(k->name, "inner product vs ref, 1e-6 x sum|ab|");
	ag.cosine = new_group(k->name, "cosine distance vs ref, 1e-6 abs");
	ag.norm = new_group(k->name, "norm_squared vs ref, 1e-6 rel");
	for_each_case(accuracy_case, &ag);
	finish_group(&ag.l2);
	finish_group(&ag.l1);
	finish_group(&ag.ip);
	finish_group(&ag.cosine);
	finish_group(&ag.norm);
}

/* Group plus the variant compared against scalar. */
typedef struct BitwiseGroup
{
	const CvDistanceKernels *k;
	const CvDistanceKernels *scalar;
	Group		g;
} BitwiseGroup;

/* Compares two doubles by their bytes, so -0.0 / NaN payloads count too. */
static int
same_bits(double x, double y)
{
	return memcmp(&x, &y, sizeof(double)) == 0;
}

/* Records whether a variant's result has exactly the scalar result's bits. */
static void
check_bits(Group *g, const TestCase *tc, double got, double scalar)
{
	check(g, same_bits(got, scalar), tc, got, scalar);
}

/* Checks one case's results are bitwise those of scalar. */
static void
bitwise_case(const TestCase *tc, void *arg)
{
	BitwiseGroup *bg = arg;
	const CvDistanceKernels *k = bg->k;
	const CvDistanceKernels *s = bg->scalar;
	const float *a = tc->a;
	const float *b = tc->b;
	int			n = tc->n;
	CvCosineParts pk = k->cosine_parts(a, b, n);
	CvCosineParts ps = s->cosine_parts(a, b, n);

	check_bits(&bg->g, tc, k->l2_squared(a, b, n), s->l2_squared(a, b, n));
	check_bits(&bg->g, tc, k->l1(a, b, n), s->l1(a, b, n));
	check_bits(&bg->g, tc, k->inner_product(a, b, n), s->inner_product(a, b, n));
	check_bits(&bg->g, tc, k->norm_squared(a, n), s->norm_squared(a, n));
	check_bits(&bg->g, tc, pk.dot, ps.dot);
	check_bits(&bg->g, tc, pk.norm_a_sq, ps.norm_a_sq);
	check_bits(&bg->g, tc, pk.norm_b_sq, ps.norm_b_sq);
}

/* One SIMD variant against scalar, all five kernels, every case. */
static void
test_bitwise(const CvDistanceKernels *k)
{
	BitwiseGroup bg;

	bg.k = k;
	bg.scalar = cv_distance_kernels_for(CV_SIMD_SCALAR);
	bg.g = new_group(k->name, "bitwise identical to scalar (all kernels)");
	for_each_case(bitwise_case, &bg);
	finish_group(&bg.g);
}

/* Cosine with a zero vector (either side, both, any length) is NaN. */
static void
test_cosine_zero(const CvDistanceKernels *k)
{
	Group		g = new_group(k->name, "cosine with a zero vector is NaN");
	static const int zero_lengths[] = {1, 3, 16, 17, 1024, 16000};
	size_t		i;

	for (i = 0; i < sizeof(zero_lengths) / sizeof(zero_lengths[0]); i++)
	{
		TestCase	tc = make_case(zero_lengths[i], KIND_MIXED, 1);
		float	   *zero = calloc((size_t) tc.n, sizeof(float));
		double		d1 = cv_cosine_distance_from_parts(k->cosine_parts(zero, tc.b, tc.n));
		double		d2 = cv_cosine_distance_from_parts(k->cosine_parts(tc.a, zero, tc.n));
		double		d3 = cv_cosine_distance_from_parts(k->cosine_parts(zero, zero, tc.n));

		check(&g, isnan(d1), &tc, d1, NAN);
		check(&g, isnan(d2), &tc, d2, NAN);
		check(&g, isnan(d3), &tc, d3, NAN);
		free(zero);
		free_case(&tc);
	}
	finish_group(&g);
}

/* cv_cosine_distance_from_parts clamps to [0, 2] and keeps NaN. */
static void
test_cosine_from_parts(void)
{
	Group		g = new_group("-", "cosine_distance_from_parts clamp and NaN");
	CvCosineParts same = {4.0, 4.0, 4.0};
	CvCosineParts opposite = {-4.0, 4.0, 4.0};
	CvCosineParts over = {4.0000001, 4.0, 4.0};
	CvCosineParts under = {-4.0000001, 4.0, 4.0};
	CvCosineParts zero = {0.0, 0.0, 3.0};
	CvCosineParts orthogonal = {0.0, 2.0, 3.0};

	check(&g, cv_cosine_distance_from_parts(same) == 0.0, NULL, 0, 0);
	check(&g, cv_cosine_distance_from_parts(opposite) == 2.0, NULL, 0, 2);
	check(&g, cv_cosine_distance_from_parts(over) == 0.0, NULL, 0, 0);
	check(&g, cv_cosine_distance_from_parts(under) == 2.0, NULL, 0, 2);
	check(&g, isnan(cv_cosine_distance_from_parts(zero)), NULL, 0, NAN);
	check(&g, cv_cosine_distance_from_parts(orthogonal) == 1.0, NULL, 0, 1);
	finish_group(&g);
}

/* cv_simd_use refuses what cv_simd_supported refuses, changing nothing. */
static void
test_use_unsupported(void)
{
	Group		g = new_group("-", "cv_simd_use false for unsupported levels");
	const CvDistanceKernels *before = cv_distance;
	int			level;

	for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512 + 1; level++)
	{
		if (cv_simd_supported((CvSimdLevel) level))
			continue;
		check(&g, !cv_simd_use((CvSimdLevel) level), NULL, level, 0);
		check(&g, cv_distance == before, NULL, level, 0);
		check(&g, cv_distance_kernels_for((CvSimdLevel) level) == NULL, NULL, level, 0);
	}
	check(&g, !cv_simd_use((CvSimdLevel) -1), NULL, -1, 0);
	check(&g, cv_distance == before, NULL, -1, 0);
	finish_group(&g);
}

/* cv_distance starts scalar and follows every successful cv_simd_use. */
static void
test_use_switches(void)
{
	Group		g = new_group("-", "cv_distance starts scalar, follows cv_simd_use");
	const CvDistanceKernels *scalar = cv_distance_kernels_for(CV_SIMD_SCALAR);
	int			level;

	check(&g, cv_distance == scalar && strcmp(cv_distance->name, "scalar") == 0,
		  NULL, 0, 0);
	check(&g, cv_simd_supported(cv_simd_best()), NULL, cv_simd_best(), 0);
	for (level = CV_SIMD_AVX512; level >= CV_SIMD_SCALAR; level--)
	{
		const CvDistanceKernels *k = cv_distance_kernels_for((CvSimdLevel) level);

		if (k == NULL)
			continue;
		check(&g, cv_simd_use((CvSimdLevel) level), NULL, level, 0);
		check(&g, cv_distance == k, NULL, level, 0);
		if (level != CV_SIMD_SCALAR)
			check(&g, cv_distance != scalar, NULL, level, 0);
	}
	check(&g, cv_distance == scalar, NULL, 0, 0);
	finish_group(&g);
}

/* Every level: accuracy, bitwise, zero-vector checks, or skips. */
static void
test_variants(void)
{
	static const char *const names[] = {"scalar", "avx2", "avx512"};
	int			level;

	for (level = CV_SIMD_SCALAR; level <= CV_SIMD_AVX512; level++)
	{
		const CvDistanceKernels *k = cv_distance_kernels_for((CvSimdLevel) level);

		if (k == NULL)
		{
			skip_group(names[level], "accuracy, bitwise and zero-vector groups");
			continue;
		}
		test_accuracy(k);
		if (level != CV_SIMD_SCALAR)
			test_bitwise(k);
		test_cosine_zero(k);
	}
}

int
main(void)
{
	uint64_t	seed = choose_seed();

	rng_state = seed;
	printf("seed %llu (set CV_TEST_SEED=%llu to replay)\n",
		   (unsigned long long) seed, (unsigned long long) seed);
	printf("best SIMD level: %d\n", (int) cv_simd_best());
	test_use_switches();
	test_use_unsupported();
	test_cosine_from_parts();
	test_variants();
	if (groups_skipped > 0)
		printf("%d skipped\n", groups_skipped);
	printf("%d passed, %d failed\n", groups_passed, groups_failed);
	return groups_failed == 0 ? 0 : 1;
}
