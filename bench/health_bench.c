/*
 * health_bench.c: CPU time of each family of the 38 cluster statistics
 * (src/math/health.h, STATISTICS.md) on one core, in the order
 * cluster_health calls them (src/health/engine.c):
 *
 *   centroid     cv_health_centroid per cluster (pass 1), then
 *                cv_health_global_centroid / _global_mean_norm once and
 *                cv_health_finish_centroid per cluster
 *   neighbour    cv_health_neighbour_prepare once (every centroid pair)
 *                plus cv_health_neighbour per cluster
 *   two_means    cv_health_two_means
 *   pairwise     cv_health_pairwise, both passes over n (n - 1) / 2 pairs
 *   potential    cv_health_potential
 *   effective_rank  cv_health_effective_rank
 *
 * Data: K clusters of n members at d = 1024 (float4), seeded: a shared
 * offset of norm about 1, a centre per cluster about 0.8 from it, three
 * sub-blobs per cluster about 0.35 from their centre and noise of norm
 * about 0.5, so centroid distances, two-means splits and cosines look like
 * real embeddings.  Members are stored cluster after cluster (the engine's
 * chunk layout).
 *
 * Seconds are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID): the machine
 * may be shared, and CPU time does not count the slices other processes
 * take; wall time is printed beside it.  members/s = K n / CPU seconds.
 * The pairwise class also gets GFLOP/s counted as 3 flops per dimension per
 * pair (subtract, multiply, add: the difference formulation) over both
 * passes, against this core's float64 and float32 FMA peak, measured here
 * with an unrolled FMA loop at the widest vector width the CPU supports.
 *
 * A superlinear family (pairwise, effective_rank) whose projected time
 * exceeds CV_BENCH_LIMIT_S (default 180 s) is not run: the projection times
 * the first cluster (pairwise: a prefix of at most 2000 of its members,
 * scaled by the pair count) and multiplies by K.  effective_rank of a
 * cluster above rank_max_members (2000) is refused by the module itself.
 *
 * Usage: health_bench [KxN ...]   (default 1000x100 100x1000 1x20000)
 * Environment: CV_BENCH_DIM (1024), CV_BENCH_LIMIT_S (180), CV_BENCH_SEED.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "math/distance.h"
#include "math/health.h"

#define DEFAULT_DIM 1024
#define SUB_BLOBS 3
#define PEAK_ITERS 50000000L
#define CALIBRATE_MAX_N 2000

enum
{
	F_CENTROID,
	F_TWO_MEANS,
	F_PAIRWISE,
	F_NEIGHBOUR,
	F_POTENTIAL,
	F_RANK,
	F_COUNT
};

static const char *const family_names[F_COUNT] = {
	"centroid", "two_means", "pairwise", "neighbour", "potential", "effective_rank"
};

static const char *const default_configs[] = {"1000x100", "100x1000", "1x20000"};

/* ---------------------------------------------------------------------
 * Clocks and random numbers
 * --------------------------------------------------------------------- */

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static double
wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

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

/* Standard normal (Box-Muller, both outputs used). */
static double
rng_normal(void)
{
	static double spare;
	static int	have_spare;
	double		r,
				t;

	if (have_spare)
	{
		have_spare = 0;
		return spare;
	}
	r = sqrt(-2.0 * log(rng_uniform()));
	t = 6.283185307179586 * rng_uniform();
	spare = r * sin(t);
	have_spare = 1;
	return r * cos(t);
}

/* ---------------------------------------------------------------------
 * FMA peak of this core
 * --------------------------------------------------------------------- */

static volatile double peak_sink;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_PEAK 1

/*
 * One FMA-rate function: twelve independent chains (enough to cover two FMA
 * ports x 4 cycles of latency), GFLOP/s counting an FMA lane as 2 flops.
 */
#define PEAK_FN(NAME, TARGET, VEC, SET1, FMA, ADD, STORE, LANE_T, LANES) \
static __attribute__((target(TARGET))) double \
NAME(void) \
{ \
	VEC			m = SET1((LANE_T) 0.999999), b = SET1((LANE_T) 1e-9); \
	VEC			a0 = SET1(1), a1 = SET1(2), a2 = SET1(3), a3 = SET1(4), \
				a4 = SET1(5), a5 = SET1(6), a6 = SET1(7), a7 = SET1(8), \
				a8 = SET1(9), a9 = SET1(10), a10 = SET1(11), a11 = SET1(12); \
	LANE_T		lanes[LANES]; \
	double		t = cpu_now(); \
	long		k; \
\
	for (k = 0; k < PEAK_ITERS; k++) \
	{ \
		a0 = FMA(a0, m, b); a1 = FMA(a1, m, b); a2 = FMA(a2, m, b); \
		a3 = FMA(a3, m, b); a4 = FMA(a4, m, b); a5 = FMA(a5, m, b); \
		a6 = FMA(a6, m, b); a7 = FMA(a7, m, b); a8 = FMA(a8, m, b); \
		a9 = FMA(a9, m, b); a10 = FMA(a10, m, b); a11 = FMA(a11, m, b); \
	} \
	t = cpu_now() - t; \
	a0 = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))); \
	a0 = ADD(a0, ADD(ADD(a8, a9), ADD(a10, a11))); \
	STORE(lanes, a0); \
	peak_sink = lanes[0]; \
	return (double) PEAK_ITERS * 12 * (LANES) * 2 / t / 1e9; \
}

PEAK_FN(peak_avx512_f64, "avx512f", __m512d, _mm512_set1_pd, _mm512_fmadd_pd,
		_mm512_add_pd, _mm512_storeu_pd, double, 8)
PEAK_FN(peak_avx512_f32, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps,
		_mm512_add_ps, _mm512_storeu_ps, float, 16)
PEAK_FN(peak_avx2_f64, "avx2,fma", __m256d, _mm256_set1_pd, _mm256_fmadd_pd,
		_mm256_add_pd, _mm256_storeu_pd, double, 4)
PEAK_FN(peak_avx2_f32, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps,
		_mm256_add_ps, _mm256_storeu_ps, float, 8)
#endif

/* Scalar fma() rate, GFLOP/s (for a CPU without AVX2). */
static double
peak_scalar(void)
{
	volatile double seed = 0.999999;
	double		m = seed;
	double		a0 = 0,
				a1 = 1,
				a2 = 2,
				a3 = 3;
	long		iters = PEAK_ITERS / 4;
	double		t = cpu_now();
	long		k;

	for (k = 0; k < iters; k++)
	{
		a0 = fma(a0, m, 1e-9);
		a1 = fma(a1, m, 1e-9);
		a2 = fma(a2, m, 1e-9);
		a3 = fma(a3, m, 1e-9);
	}
	t = cpu_now() - t;
	peak_sink = a0 + a1 + a2 + a3;
	return (double) iters * 4 * 2 / t / 1e9;
}

/* Best of three runs of the FMA loop at the widest width; sets *width. */
static void
measure_peak(double *f64, double *f32, const char **width)
{
	int			r;

	*f64 = *f32 = 0;
	*width = "scalar fma()";
	for (r = 0; r < 3; r++)
	{
		double		a,
					b;

#ifdef HAVE_X86_PEAK
		if (cv_simd_supported(CV_SIMD_AVX512))
		{
			*width = "AVX-512 (zmm)";
			a = peak_avx512_f64();
			b = peak_avx512_f32();
		}
		else if (cv_simd_supported(CV_SIMD_AVX2))
		{
			*width = "AVX2 (ymm)";
			a = peak_avx2_f64();
			b = peak_avx2_f32();
		}
		else
#endif
		{
			a = peak_scalar();
			b = a;
		}
		if (a > *f64)
			*f64 = a;
		if (b > *f32)
			*f32 = b;
	}
}

/* ---------------------------------------------------------------------
 * Data
 * --------------------------------------------------------------------- */

/* k clusters of n members, d dimensions, cluster after cluster. */
static float *
make_data(int64_t k, int64_t n, int d)
{
	float	   *x = malloc(sizeof(float) * (size_t) (k * n) * d);
	double	   *offset = malloc(sizeof(double) * d);
	double	   *blob = malloc(sizeof(double) * (size_t) SUB_BLOBS * d);
	double		scale = 1.0 / sqrt((double) d);
	int64_t		c,
				i;
	int			j,
				b;

	if (x == NULL || offset == NULL || blob == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	for (j = 0; j < d; j++)
		offset[j] = rng_normal() * scale;
	for (c = 0; c < k; c++)
	{
		float	   *cx = x + (size_t) (c * n) * d;

		for (j = 0; j < d; j++)
		{
			double		centre = offset[j] + 0.8 * rng_normal() * scale;

			for (b = 0; b < SUB_BLOBS; b++)
				blob[b * d + j] = centre + 0.35 * rng_normal() * scale;
		}
		for (i = 0; i < n; i++)
		{
			const double *centre = blob + (size_t) (rng_next() % SUB_BLOBS) * d;

			for (j = 0; j < d; j++)
				cx[(size_t) i * d + j] = (float) (centre[j] + 0.5 * rng_normal() * scale);
		}
	}
	free(offset);
	free(blob);
	return x;
}

/* ---------------------------------------------------------------------
 * One configuration
 * --------------------------------------------------------------------- */

typedef struct Timing
{
	double		cpu;
	double		wall;
} Timing;

typedef struct Clock
{
	double		cpu;
	double		wall;
} Clock;

static Clock
clock_start(void)
{
	Clock		c = {cpu_now(), wall_now()};

	return c;
}

static void
clock_add(Timing *t, Clock start)
{
	t->cpu += cpu_now() - start.cpu;
	t->wall += wall_now() - start.wall;
}

typedef struct Config
{
	int64_t		k;
	int64_t		n;
	int			d;
} Config;

typedef struct Result
{
	Timing		family[F_COUNT];
	Timing		neighbour_prepare;
	bool		skipped[F_COUNT];
	double		projected[F_COUNT];	/* projected CPU seconds of a skipped family */
	bool		rank_refused;
	bool		sigma_stand_in;	/* potential ran with a stand-in sigma */
} Result;

/*
 * What a superlinear family would cost: pairwise timed on a prefix of the
 * first cluster (scaled by pairs), effective_rank on the first cluster;
 * both times K.  The first cluster's earlier families fill what they need.
 */
static void
plan(const Config *cfg, const float *x, const CvHealthParams *params, Result *res,
	 double limit)
{
	int64_t		m = cfg->n < CALIBRATE_MAX_N ? cfg->n : CALIBRATE_MAX_N;
	int			d = cfg->d;
	double	   *centroid = malloc(sizeof(double) * d);
	uint8_t    *side = malloc((size_t) (m > 0 ? m : 1));
	CvClusterStats stats;
	double		t;

	memset(&stats, 0, sizeof(stats));
	if (m >= 2)
	{
		cv_health_centroid(x, m, d, params, centroid, &stats);
		cv_health_two_means(x, m, d, side, &stats);
		t = cpu_now();
		cv_health_pairwise(x, m, d, side, params, NAN, &stats);
		t = cpu_now() - t;
		res->projected[F_PAIRWISE] = t * ((double) cfg->n * (cfg->n - 1)) /
			((double) m * (m - 1)) * (double) cfg->k;
		res->skipped[F_PAIRWISE] = res->projected[F_PAIRWISE] > limit;
	}
	if (cfg->n > params->rank_max_members)
		res->rank_refused = true;
	else if (cfg->n >= 2)
	{
		if (m != cfg->n)
			cv_health_centroid(x, cfg->n, d, params, centroid, &stats);
		t = cpu_now();
		cv_health_effective_rank(x, cfg->n, d, centroid, params, &stats);
		t = cpu_now() - t;
		res->projected[F_RANK] = t * (double) cfg->k;
		res->skipped[F_RANK] = res->projected[F_RANK] > limit;
	}
	free(centroid);
	free(side);
}

/* Runs every family over the configuration, in cluster_health's order. */
static void
run_config(const Config *cfg, const float *x, const CvHealthParams *params, Result *res,
		   CvClusterStats *stats)
{
	int			d = cfg->d;
	size_t		stride = (size_t) cfg->n * d;
	double	   *centroids = malloc(sizeof(double) * (size_t) cfg->k * d);
	int64_t    *counts = malloc(sizeof(int64_t) * cfg->k);
	double	   *mean_dist = malloc(sizeof(double) * cfg->k);
	double	   *mean_norm = malloc(sizeof(double) * cfg->k);
	double	   *global = malloc(sizeof(double) * d);
	uint8_t    *side = malloc((size_t) cfg->n);
	double		global_mean_norm;
	CvCentroidSet set;
	CvNeighbourTable table;
	Clock		c;
	int64_t		i;

	if (centroids == NULL || counts == NULL || mean_dist == NULL || mean_norm == NULL ||
		global == NULL || side == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}

	/* pass 1: the centroid family */
	for (i = 0; i < cfg->k; i++)
	{
		memset(&stats[i], 0, sizeof(CvClusterStats));
		c = clock_start();
		cv_health_centroid(x + i * stride, cfg->n, d, params, centroids + i * d, &stats[i]);
		clock_add(&res->family[F_CENTROID], c);
		counts[i] = cfg->n;
		mean_dist[i] = stats[i].value[CV_STAT_MEAN_DIST];
		mean_norm[i] = stats[i].value[CV_STAT_MEAN_NORM];
	}

	/* once: g and the neighbour table */
	set.k = cfg->k;
	set.d = d;
	set.centroids = centroids;
	set.n = counts;
	set.mean_dist = mean_dist;
	set.mean_norm = mean_norm;
	c = clock_start();
	cv_health_global_centroid(&set, global);
	global_mean_norm = cv_health_global_mean_norm(&set);
	clock_add(&res->family[F_CENTROID], c);
	c = clock_start();
	if (cv_health_neighbour_prepare(&set, params->neighbours, &table) != 0)
	{
		fprintf(stderr, "out of memory in cv_health_neighbour_prepare\n");
		exit(2);
	}
	clock_add(&res->neighbour_prepare, c);
	res->family[F_NEIGHBOUR] = res->neighbour_prepare;

	/* pass 2: the other families, cluster by cluster */
	for (i = 0; i < cfg->k; i++)
	{
		const float *cx = x + i * stride;
		CvClusterStats *s = &stats[i];

		c = clock_start();
		cv_health_finish_centroid(centroids + i * d, global, global_mean_norm, d, s);
		clock_add(&res->family[F_CENTROID], c);

		c = clock_start();
		cv_health_neighbour(cx, cfg->n, d, i, &set, &table, s);
		clock_add(&res->family[F_NEIGHBOUR], c);

		c = clock_start();
		cv_health_two_means(cx, cfg->n, d, side, s);
		clock_add(&res->family[F_TWO_MEANS], c);

		if (!res->skipped[F_PAIRWISE])
		{
			c = clock_start();
			cv_health_pairwise(cx, cfg->n, d, cfg->n >= 2 ? side : NULL, params, NAN, s);
			clock_add(&res->family[F_PAIRWISE], c);
		}
		else
		{
			/*
			 * Potential needs sigma: stand in the median pairwise distance
			 * of a high-dimensional blob, sqrt(2) mean_dist (its cost does
			 * not depend on the value).
			 */
			cv_stat_set(s, CV_STAT_SIGMA, sqrt(2.0) * s->value[CV_STAT_MEAN_DIST]);
			res->sigma_stand_in = true;
		}

		c = clock_start();
		cv_health_potential(cx, cfg->n, d, centroids + i * d, cfg->k, s);
		clock_add(&res->family[F_POTENTIAL], c);

		if (!res->skipped[F_RANK])
		{
			c = clock_start();
			if (cv_health_effective_rank(cx, cfg->n, d, centroids + i * d, params, s) != 0)
			{
				fprintf(stderr, "out of memory in cv_health_effective_rank\n");
				exit(2);
			}
			clock_add(&res->family[F_RANK], c);
		}
	}
	cv_health_neighbour_free(&table);
	free(centroids);
	free(counts);
	free(mean_dist);
	free(mean_norm);
	free(global);
	free(side);
}

/* A few statistics of the first cluster, so a broken run shows. */
static void
print_sanity(const Config *cfg, const CvClusterStats *s)
{
	fprintf(stderr, "  %lldx%lld cluster 0: inertia %.5g mean_dist %.5g cohesion %.4f "
			"split_gain %.4f sigma %.5g mean_pairwise_dist %.5g redundancy %.4g "
			"nearest_dist %.5g neighbour_relevance %.4f potential_depth %.4g "
			"effective_rank %s%.5g\n",
			(long long) cfg->k, (long long) cfg->n,
			s->value[CV_STAT_INERTIA], s->value[CV_STAT_MEAN_DIST],
			s->value[CV_STAT_COHESION], s->value[CV_STAT_SPLIT_GAIN],
			s->value[CV_STAT_SIGMA], s->value[CV_STAT_MEAN_PAIRWISE_DIST],
			s->value[CV_STAT_REDUNDANCY], s->value[CV_STAT_NEAREST_DIST],
			s->value[CV_STAT_NEIGHBOUR_RELEVANCE], s->value[CV_STAT_POTENTIAL_DEPTH],
			s->is_null[CV_STAT_EFFECTIVE_RANK] ? "NULL " : "",
			s->value[CV_STAT_EFFECTIVE_RANK]);
}

static void
print_rows(const Config *cfg, const Result *res, const CvHealthParams *params,
		   double peak64, double peak32, Timing *grand)
{
	double		members = (double) cfg->k * (double) cfg->n;
	double		pairs = (double) cfg->k * (double) cfg->n * (double) (cfg->n - 1) / 2.0;
	Timing		total = {0, 0};
	char		name[64];
	int			f;

	snprintf(name, sizeof(name), "%lld x %lld x %d", (long long) cfg->k, (long long) cfg->n,
			 cfg->d);
	for (f = 0; f < F_COUNT; f++)
	{
		const Timing *t = &res->family[f];

		if (f == F_RANK && res->rank_refused)
		{
			printf("| %s | %s | refused (n > rank_max_members = %d) | | | | |\n",
				   name, family_names[f], params->rank_max_members);
			continue;
		}
		if (res->skipped[f])
		{
			printf("| %s | %s | not run: projected %.0f s > limit | | | | |\n",
				   name, family_names[f], res->projected[f]);
			continue;
		}
		total.cpu += t->cpu;
		total.wall += t->wall;
		if (f == F_PAIRWISE)
		{
			double		gflops = pairs * cfg->d * 3.0 * 2.0 / t->cpu / 1e9;

			printf("| %s | %s | %.3f | %.3f | %.3g | %.1f | %.0f%% / %.0f%% |\n",
				   name, family_names[f], t->cpu, t->wall, members / t->cpu,
				   gflops, 100.0 * gflops / peak64, 100.0 * gflops / peak32);
		}
		else if (f == F_NEIGHBOUR && cfg->k == 1)
			printf("| %s | %s (K = 1: all NULL) | %.3f | %.3f | | | |\n",
				   name, family_names[f], t->cpu, t->wall);
		else if (f == F_NEIGHBOUR)
			printf("| %s | %s (prepare %.3f s) | %.3f | %.3f | %.3g | | |\n",
				   name, family_names[f], res->neighbour_prepare.cpu, t->cpu, t->wall,
				   members / t->cpu);
		else
			printf("| %s | %s%s | %.3f | %.3f | %.3g | | |\n",
				   name, family_names[f],
				   f == F_POTENTIAL && res->sigma_stand_in ? " (stand-in sigma)" : "",
				   t->cpu, t->wall, members / t->cpu);
	}
	printf("| %s | **total** | **%.3f** | %.3f | %.3g | | |\n",
		   name, total.cpu, total.wall, members / total.cpu);
	fflush(stdout);
	grand->cpu += total.cpu;
	grand->wall += total.wall;
}

static bool
parse_config(const char *arg, int d, Config *cfg)
{
	long long	k,
				n;
	char		extra;

	if (sscanf(arg, "%lldx%lld%c", &k, &n, &extra) != 2 || k < 1 || n < 1)
		return false;
	cfg->k = k;
	cfg->n = n;
	cfg->d = d;
	return true;
}

int
main(int argc, char **argv)
{
	CvHealthParams params = {2.0, 0.95, 5, 256, 20, 2000};
	const char *dim_env = getenv("CV_BENCH_DIM");
	const char *limit_env = getenv("CV_BENCH_LIMIT_S");
	const char *seed_env = getenv("CV_BENCH_SEED");
	int			d = dim_env ? atoi(dim_env) : DEFAULT_DIM;
	double		limit = limit_env ? atof(limit_env) : 180.0;
	uint64_t	seed = seed_env ? strtoull(seed_env, NULL, 10) : 20261201ULL;
	int			n_configs = argc > 1 ? argc - 1 : 3;
	double		peak64,
				peak32;
	const char *width;
	Timing		grand = {0, 0};
	int			a;

	if (d < 1)
	{
		fprintf(stderr, "CV_BENCH_DIM must be >= 1\n");
		return 2;
	}
	cv_simd_use(cv_simd_best());
	measure_peak(&peak64, &peak32, &width);
	printf("CPU reference of the cluster statistics (src/math/health*.c), one core, "
		   "kernels: %s, seed %llu\n\n", cv_distance->name, (unsigned long long) seed);
	printf("- single-core FMA peak, %s, best of 3: float64 %.1f GFLOP/s, "
		   "float32 %.1f GFLOP/s\n", width, peak64, peak32);
	printf("- parameters: outlier_z %.1f, dup_cos %.2f, neighbours %d, sigma_bins %d, "
		   "entropy_bins %d, rank_max_members %d; families not run when projected "
		   "above %.0f s\n", params.outlier_z, params.dup_cos, params.neighbours,
		   params.sigma_bins, params.entropy_bins, params.rank_max_members, limit);
	printf("- CPU s: this thread's CPU time; wall s beside it (the machine may be shared); "
		   "members/s = K n / CPU s\n");
	printf("- pairwise GFLOP/s: 3 flops per dimension per pair, two passes, per CPU second; "
		   "share of the float64 / float32 peak (the kernels run float64 FMA, so the "
		   "float64 share is the one that matters)\n\n");
	printf("| config (K x n x d) | family | CPU s | wall s | members/s | pairwise GFLOP/s "
		   "| of FP64 / FP32 peak |\n");
	printf("|---|---|---:|---:|---:|---:|---:|\n");
	fflush(stdout);

	for (a = 0; a < n_configs; a++)
	{
		const char *arg = argc > 1 ? argv[a + 1] : default_configs[a];
		Config		cfg;
		Result		res;
		CvClusterStats *stats;
		float	   *x;
		double		t;

		if (!parse_config(arg, d, &cfg))
		{
			fprintf(stderr, "bad config \"%s\" (want KxN, e.g. 1000x100)\n", arg);
			return 2;
		}
		rng_state = seed + (uint64_t) a;
		t = wall_now();
		x = make_data(cfg.k, cfg.n, d);
		stats = malloc(sizeof(CvClusterStats) * cfg.k);
		if (stats == NULL)
		{
			fprintf(stderr, "out of memory\n");
			return 2;
		}
		fprintf(stderr, "%s x %d: data in %.1f s\n", arg, d, wall_now() - t);
		memset(&res, 0, sizeof(res));
		plan(&cfg, x, &params, &res, limit);
		run_config(&cfg, x, &params, &res, stats);
		print_sanity(&cfg, &stats[0]);
		print_rows(&cfg, &res, &params, peak64, peak32, &grand);
		free(stats);
		free(x);
	}
	printf("| all | **total** | **%.3f** | %.3f | | | |\n", grand.cpu, grand.wall);
	return 0;
}
