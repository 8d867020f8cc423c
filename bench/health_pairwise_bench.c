/*
 * health_pairwise_bench.c: speed of the tiled pairwise class
 * (cv_health_pairwise, STATISTICS.md section 3) on one core.
 *
 * One cluster of n members at d = 1024 (a random offset plus Gaussian
 * sub-blobs, so distances, cosines and sides look like real data), both
 * passes over its n (n - 1) / 2 pairs.  For each run the table gives the
 * seconds of each pass, pairs per second per pass, and GFLOP/s counted as
 * 3 flops per dimension per pair (the difference formulation: subtract,
 * multiply, add), beside the kernel's own rate (one fused multiply-add,
 * 2 flops, per dimension per pair, plus one pair in 1/n of the diagonal
 * tiles) as a share of this core's float64 FMA peak, measured here with an
 * FMA loop at the kernel's vector width.
 *
 * Usage: health_pairwise_bench [n ...]   (default 1000 10000 20000, then
 * 100 clusters of 100 members);
 * CV_BENCH_VARIANTS=all also runs the slower variants (scalar only at
 * n <= 1000, where it finishes in seconds).  Seconds are this thread's CPU
 * time (the build machine is shared; on an idle core wall time is the
 * same, and the wall column shows both).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "health.h"
#include "health_pairwise_variants.h"

#define DIM 1024
#define BLOBS 4
#define SEED 20240611ULL
#define PEAK_ITERS 100000000L
#define SCALAR_MAX_N 1000

static const int64_t default_sizes[] = {1000, 10000, 20000};

static uint64_t rng_state;

/* splitmix64. */
static uint64_t
rng_next(void)
{
	uint64_t	z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double
rng_uniform(void)
{
	return ((double) (rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

/* Standard normal (Box-Muller). */
static double
rng_normal(void)
{
	return sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform());
}

/*
 * This thread's CPU time in seconds: the machine may be shared, and CPU
 * time does not count the slices another process took.
 */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------
 * FMA peak of this core
 * --------------------------------------------------------------------- */

/* Twelve independent FMA chains: enough to cover two ports x 4 cycles. */
#define EACH12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#ifdef CV_HAVE_X86_SIMD
#include <immintrin.h>

/* AVX-512 float64 FMA rate, GFLOP/s (2 flops per lane). */
static __attribute__((target("avx512f"))) double
peak_avx512(void)
{
	__m512d		m = _mm512_set1_pd(0.999999);
	__m512d		b = _mm512_set1_pd(1e-9);
	__m512d		s = _mm512_setzero_pd();
	double		lanes[8];
	double		t;
	long		k;

#define DECL(i) __m512d a##i = _mm512_set1_pd(i);
	EACH12(DECL)
#undef DECL
	t = now();
	for (k = 0; k < PEAK_ITERS; k++)
	{
#define STEP(i) a##i = _mm512_fmadd_pd(a##i, m, b);
		EACH12(STEP)
#undef STEP
	}
	t = now() - t;
#define SUM(i) s = _mm512_add_pd(s, a##i);
	EACH12(SUM)
#undef SUM
	_mm512_storeu_pd(lanes, s);
	if (lanes[0] == 12345.0)
		printf(" ");
	return (double) PEAK_ITERS * 12 * 8 * 2 / t / 1e9;
}

/* AVX2 float64 FMA rate, GFLOP/s. */
static __attribute__((target("avx2,fma"))) double
peak_avx2(void)
{
	__m256d		m = _mm256_set1_pd(0.999999);
	__m256d		b = _mm256_set1_pd(1e-9);
	__m256d		s = _mm256_setzero_pd();
	double		lanes[4];
	double		t;
	long		k;

#define DECL(i) __m256d a##i = _mm256_set1_pd(i);
	EACH12(DECL)
#undef DECL
	t = now();
	for (k = 0; k < PEAK_ITERS; k++)
	{
#define STEP(i) a##i = _mm256_fmadd_pd(a##i, m, b);
		EACH12(STEP)
#undef STEP
	}
	t = now() - t;
#define SUM(i) s = _mm256_add_pd(s, a##i);
	EACH12(SUM)
#undef SUM
	_mm256_storeu_pd(lanes, s);
	if (lanes[0] == 12345.0)
		printf(" ");
	return (double) PEAK_ITERS * 12 * 4 * 2 / t / 1e9;
}
#endif

/* Scalar fma() rate (the scalar kernel's building block), GFLOP/s. */
static double
peak_scalar(void)
{
	volatile double seed = 0.999999;
	double		m = seed;
	double		a0 = 0, a1 = 1, a2 = 2, a3 = 3;
	long		iters = PEAK_ITERS / 4;
	double		t = now();
	long		k;

	for (k = 0; k < iters; k++)
	{
		a0 = fma(a0, m, 1e-9);
		a1 = fma(a1, m, 1e-9);
		a2 = fma(a2, m, 1e-9);
		a3 = fma(a3, m, 1e-9);
	}
	t = now() - t;
	seed = a0 + a1 + a2 + a3;
	return (double) iters * 4 * 2 / t / 1e9;
}

/* The FMA peak at the vector width of a variant. */
static double
peak_for(const CvPairwiseKernels *kern)
{
#ifdef CV_HAVE_X86_SIMD
	if (strcmp(kern->name, "avx512") == 0)
		return peak_avx512();
	if (strcmp(kern->name, "avx2") == 0)
		return peak_avx2();
#endif
	return peak_scalar();
}

/* ---------------------------------------------------------------------
 * Data
 * --------------------------------------------------------------------- */

/*
 * n members: a shared offset of norm about 1, a blob centre about 0.6 from
 * it, and noise of norm about 0.5: cosines spread around 0.7 to 0.95.
 */
static float *
make_cluster(int64_t n, int d)
{
	float	   *x = malloc(sizeof(float) * (size_t) n * d);
	double	   *centre = malloc(sizeof(double) * (size_t) BLOBS * d);
	int64_t		i;
	int			k;

	if (x == NULL || centre == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	for (k = 0; k < d; k++)
		centre[k] = rng_normal() / sqrt((double) d);
	for (k = d; k < BLOBS * d; k++)
		centre[k] = centre[k % d] + 0.6 * rng_normal() / sqrt((double) d);
	for (i = 0; i < n; i++)
	{
		const double *c = centre + (size_t) (rng_next() % BLOBS) * d;

		for (k = 0; k < d; k++)
			x[(size_t) i * d + k] = (float) (c[k] + 0.5 * rng_normal() / sqrt((double) d));
	}
	free(centre);
	return x;
}

/*
 * What the centroid family and two-means would have filled: radius,
 * mean_norm, collapsed, and a side per member (nearer of the first and the
 * last member, the two-means seeds).
 */
static void
prepare_stats(const float *x, int64_t n, int d, uint8_t *side,
			  CvClusterStats *out)
{
	double	   *c = calloc((size_t) d, sizeof(double));
	double		radius = 0.0;
	double		norm_sum = 0.0;
	int64_t		i;
	int			k;

	for (i = 0; i < n; i++)
		for (k = 0; k < d; k++)
			c[k] += x[(size_t) i * d + k];
	for (k = 0; k < d; k++)
		c[k] /= (double) n;
	for (i = 0; i < n; i++)
	{
		const float *row = x + (size_t) i * d;
		const float *last = x + (size_t) (n - 1) * d;
		double		r = 0.0;
		double		nn = 0.0;
		double		da = 0.0;
		double		db = 0.0;

		for (k = 0; k < d; k++)
		{
			r += (row[k] - c[k]) * (row[k] - c[k]);
			nn += (double) row[k] * row[k];
			da += ((double) row[k] - x[k]) * ((double) row[k] - x[k]);
			db += ((double) row[k] - last[k]) * ((double) row[k] - last[k]);
		}
		if (sqrt(r) > radius)
			radius = sqrt(r);
		norm_sum += sqrt(nn);
		side[i] = db < da;
	}
	free(c);
	memset(out, 0, sizeof(*out));
	cv_stat_set(out, CV_STAT_RADIUS, radius);
	cv_stat_set(out, CV_STAT_MEAN_NORM, norm_sum / (double) n);
	out->collapsed = radius <= CV_HEALTH_EPS * norm_sum / (double) n;
}

/* ---------------------------------------------------------------------
 * Runs
 * --------------------------------------------------------------------- */

/* Prints one table row from a pass's pair count and seconds. */
static void
print_row(const char *n_label, const char *kernels, int d, int pass,
		  double wall, double cpu, double pairs, double peak)
{
	printf("| %s | %d | %s | %d | %.2f | %.2f | %.3g | %.1f | %.1f | %.0f%% |\n",
		   n_label, d, kernels, pass, wall, cpu, pairs / cpu,
		   pairs * d * 3.0 / cpu / 1e9, pairs * d * 2.0 / cpu / 1e9,
		   100.0 * pairs * d * 2.0 / cpu / 1e9 / peak);
}

/*
 * Many small clusters (count clusters of n members): the per-call work
 * (centring, norms, allocation) is no longer negligible next to the pairs;
 * the note after the rows gives whole calls' CPU time.
 */
static void
run_many(const CvPairwiseKernels *kern, int count, int64_t n, int d, double peak)
{
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, 2000};
	double		wall[2] = {0, 0};
	double		cpu[2] = {0, 0};
	double		total = 0.0;
	double		pairs = (double) count * (double) n * (double) (n - 1) / 2.0;
	char		label[32];
	int			c;
	int			pass;

	for (c = 0; c < count; c++)
	{
		CvPairwiseProfile prof;
		CvClusterStats out;
		uint8_t    *side = malloc((size_t) n);
		float	   *x = make_cluster(n, d);
		double		t;

		prepare_stats(x, n, d, side, &out);
		t = now();
		if (!cv_health_pairwise_with(kern, x, n, d, side, &params, NAN, &out, &prof))
		{
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
		total += now() - t;
		for (pass = 0; pass < 2; pass++)
		{
			wall[pass] += prof.pass_seconds[pass];
			cpu[pass] += prof.pass_cpu_seconds[pass];
		}
		free(x);
		free(side);
	}
	snprintf(label, sizeof(label), "%d x %lld", count, (long long) n);
	for (pass = 0; pass < 2; pass++)
		print_row(label, kern->name, d, pass + 1, wall[pass], cpu[pass], pairs, peak);
	printf("\n(%s, %s: whole calls including centring and norms took %.3f CPU s)\n\n",
		   label, kern->name, total);
	fflush(stdout);
}

/* One timed call; prints its table row. */
static void
run_one(const CvPairwiseKernels *kern, int64_t n, int d, double peak)
{
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, 2000};
	CvPairwiseProfile prof;
	CvClusterStats out;
	uint8_t    *side = malloc((size_t) n);
	float	   *x = make_cluster(n, d);
	double		pairs = (double) n * (double) (n - 1) / 2.0;
	char		label[32];
	int			pass;

	prepare_stats(x, n, d, side, &out);
	if (!cv_health_pairwise_with(kern, x, n, d, side, &params, NAN, &out, &prof))
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	snprintf(label, sizeof(label), "%lld", (long long) n);
	for (pass = 0; pass < 2; pass++)
		print_row(label, kern->name, d, pass + 1, prof.pass_seconds[pass],
				  prof.pass_cpu_seconds[pass], pairs, peak);
	fflush(stdout);
	fprintf(stderr, "  n=%lld %s: sigma %.6g mean_dist %.6g breadth %.6g "
			"redundancy %.4g local_density %.4g entropy %.4g entanglement %.4g "
			"silhouette %.4g, %lld distances recomputed\n",
			(long long) n, kern->name, out.value[CV_STAT_SIGMA],
			out.value[CV_STAT_MEAN_PAIRWISE_DIST], out.value[CV_STAT_BREADTH],
			out.value[CV_STAT_REDUNDANCY], out.value[CV_STAT_LOCAL_DENSITY],
			out.value[CV_STAT_DIST_ENTROPY], out.value[CV_STAT_ENTANGLEMENT],
			out.value[CV_STAT_SPLIT_SILHOUETTE], (long long) prof.recomputed);
	free(x);
	free(side);
}

/* The variants to run: the best one, or all when CV_BENCH_VARIANTS=all. */
static int
variants(const CvPairwiseKernels **list)
{
	const char *env = getenv("CV_BENCH_VARIANTS");
	int			count = 0;
	int			level;

	if (env == NULL || strcmp(env, "all") != 0)
	{
		list[count] = cv_pairwise_kernels_for(cv_simd_best());
		if (list[count] == NULL)
			list[count] = &cv_pairwise_kernels_scalar;
		return 1;
	}
	for (level = CV_SIMD_AVX512; level >= CV_SIMD_SCALAR; level--)
	{
		const CvPairwiseKernels *k = cv_pairwise_kernels_for((CvSimdLevel) level);

		if (k != NULL)
			list[count++] = k;
	}
	return count;
}

/* Prints the table for the sizes given on the command line (or the defaults). */
int
main(int argc, char **argv)
{
	const CvPairwiseKernels *list[3];
	int64_t		sizes[16];
	int			n_sizes = 0;
	int			n_variants = variants(list);
	bool		explicit_sizes = argc > 1;
	int			v;
	int			s;

	for (s = 1; s < argc && n_sizes < 16; s++)
		sizes[n_sizes++] = atoll(argv[s]);
	if (n_sizes == 0)
		for (s = 0; s < 3; s++)
			sizes[n_sizes++] = default_sizes[s];
	rng_state = SEED;
	cv_simd_use(cv_simd_best());
	printf("cv_health_pairwise, one core, d = %d, both passes (n (n-1)/2 pairs each)\n\n", DIM);
	for (v = 0; v < n_variants; v++)
		printf("- %s: float64 FMA peak of this core %.1f GFLOP/s\n", list[v]->name,
			   peak_for(list[v]));
	printf("\nRates are per CPU second of the pass (equal to wall time on an idle core).\n");
	printf("\n| n | d | kernels | pass | wall s | CPU s | pairs/s | GFLOP/s (3 flops/dim/pair) "
		   "| kernel GFLOP/s (FMA, 2 flops/dim/pair) | of FMA peak |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	for (v = 0; v < n_variants; v++)
	{
		double		peak = peak_for(list[v]);

		for (s = 0; s < n_sizes; s++)
		{
			if (strcmp(list[v]->name, "scalar") == 0 && sizes[s] > SCALAR_MAX_N)
				continue;
			if (sizes[s] >= 2)
				run_one(list[v], sizes[s], DIM, peak);
		}
		if (!explicit_sizes)
			run_many(list[v], 100, 100, DIM, peak);
	}
	return 0;
}
