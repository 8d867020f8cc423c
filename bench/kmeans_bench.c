/*
 * kmeans_bench.c: time of an IVF build's k-means and list assignment.
 *
 * For each dataset, as cvivf would build it: k-means++ seeding and Lloyd
 * iterations on a sample (the first rows: the synthetic rows are i.i.d.),
 * then every row assigned to its nearest list.  Each supported SIMD variant
 * runs the same work; their centroids and assignments must be identical,
 * and the program says so.  Times are CPU seconds of this (single) thread,
 * which a busy machine inflates less than wall time; the last column is the
 * wall time of the whole build.
 *
 * Rows are a Gaussian mixture (4 x lists centres in [-1, 1]^d, sigma 0.5:
 * clusters overlap, as real embeddings do, so Lloyd runs all iterations).
 * CV_BENCH_VARIANTS (for example "avx512,scalar") limits the variants;
 * CV_BENCH_ROWS_DIVISOR divides every row and sample count (quick runs).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distance.h"
#include "kmeans.h"
#include "nearest.h"

#define MAX_ITERATIONS 10
#define N_LEVELS 3

typedef struct Dataset
{
	const char *name;
	size_t		rows;
	int			d;
	int			lists;
	size_t		sample;
	int			iterations;
} Dataset;

static const Dataset datasets[] = {
	{"1,000,000 x 128", 1000000, 128, 1000, 50000, MAX_ITERATIONS},
	{"200,000 x 1024", 200000, 1024, 500, 25000, MAX_ITERATIONS},
};

#define N_DATASETS ((int) (sizeof(datasets) / sizeof(datasets[0])))

/*
 * CV_BENCH_DATASET="rows,d,lists,sample,iterations" measures that one
 * shape instead (the CPU side of a GPU comparison: a 100,000-row sample and
 * one iteration at d = 1024, 4,096 lists).
 */
static Dataset custom = {"custom", 0, 0, 0, 0, 0};
static const Dataset *active = datasets;
static int	n_active = N_DATASETS;

static void
choose_datasets(void)
{
	const char *env = getenv("CV_BENCH_DATASET");
	static char name[96];

	if (env == NULL || sscanf(env, "%zu,%d,%d,%zu,%d", &custom.rows, &custom.d, &custom.lists,
							  &custom.sample, &custom.iterations) != 5 ||
		custom.iterations > MAX_ITERATIONS)
		return;
	snprintf(name, sizeof(name), "%zu x %d", custom.rows, custom.d);
	custom.name = name;
	active = &custom;
	n_active = 1;
}

static const char *const level_names[N_LEVELS] = {"scalar", "avx2", "avx512"};

/* Wall and CPU clocks at one moment. */
typedef struct Stamp
{
	double		wall;
	double		cpu;
} Stamp;

/* What one variant's build measured. */
typedef struct Timing
{
	int			ran;
	double		seed_cpu;
	double		iter_cpu[MAX_ITERATIONS];
	int			iterations_run;
	double		assign_cpu;
	double		total_wall;
	size_t		rescans;
	double		inertia;
	uint64_t	centroid_hash;
	uint64_t	assignment_hash;
} Timing;

/* Progress state: the stamp of the previous callback, iterations seen. */
typedef struct Clock
{
	Stamp		last;
	int			iterations;
	Timing	   *timing;
} Clock;

/* Seconds on one clock. */
static double
seconds(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Both clocks now. */
static Stamp
stamp(void)
{
	Stamp		s = {seconds(CLOCK_MONOTONIC), seconds(CLOCK_THREAD_CPUTIME_ID)};

	return s;
}

/* xorshift64*: fast fill data; the values only need to look like embeddings. */
static double
next_uniform(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return (double) ((*state * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* Roughly normal (sum of four uniforms, rescaled to unit variance). */
static double
next_normal(uint64_t *state)
{
	double		s = next_uniform(state) + next_uniform(state)
		+ next_uniform(state) + next_uniform(state);

	return (s - 2.0) * 1.7320508075688772;
}

/* malloc or exit. */
static void *
xmalloc(size_t bytes)
{
	void	   *p = malloc(bytes);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
		exit(2);
	}
	return p;
}

/* The rows of a dataset: a Gaussian mixture. */
static float *
make_rows(const Dataset *ds, size_t rows)
{
	int			centres = 4 * ds->lists;
	float	   *c = xmalloc(sizeof(float) * (size_t) centres * ds->d);
	float	   *x = xmalloc(sizeof(float) * rows * ds->d);
	uint64_t	state = 0x9E3779B97F4A7C15ULL;
	size_t		i;
	int			j;

	for (i = 0; i < (size_t) centres * ds->d; i++)
		c[i] = (float) (2.0 * next_uniform(&state) - 1.0);
	for (i = 0; i < rows; i++)
	{
		const float *ci = c + (size_t) (next_uniform(&state) * centres) * ds->d;

		for (j = 0; j < ds->d; j++)
			x[i * ds->d + j] = (float) (ci[j] + 0.5 * next_normal(&state));
	}
	free(c);
	return x;
}

/* FNV-1a over bytes: shows whether variants produced the same bits. */
static uint64_t
hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t	h = 0xcbf29ce484222325ULL;
	size_t		i;

	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * Progress callback: CPU time of each Lloyd iteration.  Calls are counted
 * rather than trusting the iteration argument, which jumps to the total
 * when Lloyd converges early; iteration 0 is a seeding call.
 */
static void
on_progress(void *arg, int iteration, int total)
{
	Clock	   *clock = arg;
	Stamp		now = stamp();

	(void) total;
	if (iteration == 0)
		return;
	if (clock->iterations < MAX_ITERATIONS)
		clock->timing->iter_cpu[clock->iterations] = now.cpu - clock->last.cpu;
	clock->iterations++;
	clock->last = now;
}

/* Exits on a failed call: a benchmark of a failing build is meaningless. */
static void
must(CvMathStatus status, const char *what)
{
	if (status == CV_MATH_OK)
		return;
	fprintf(stderr, "%s failed: %s\n", what, cv_math_status_string(status));
	exit(1);
}

/* k-means on the sample: seeding, then Lloyd with per-iteration times. */
static float *
train(const Dataset *ds, const float *x, size_t sample, Timing *t)
{
	float	   *centroids = xmalloc(sizeof(float) * (size_t) ds->lists * ds->d);
	CvKmeansParams p;
	CvKmeansResult result;
	Clock		clock;
	Stamp		start;
	int			n_seeds;

	memset(&p, 0, sizeof(p));
	p.k = ds->lists;
	p.iterations = ds->iterations;
	p.seed = 42;
	p.metric = CV_KMEANS_L2;
	p.progress = on_progress;
	p.progress_arg = &clock;
	clock.timing = t;
	clock.iterations = 0;
	start = stamp();
	must(cv_kmeans_seed(x, sample, ds->d, &p, centroids, &n_seeds), "seeding");
	clock.last = stamp();
	t->seed_cpu = clock.last.cpu - start.cpu;
	p.k = n_seeds;
	must(cv_kmeans_lloyd(x, sample, ds->d, &p, centroids, NULL, NULL, &result), "Lloyd");
	t->iterations_run = result.iterations_run;
	t->inertia = result.inertia;
	t->centroid_hash = hash_bytes(centroids, sizeof(float) * (size_t) n_seeds * ds->d);
	return centroids;
}

/* Every row to its nearest list. */
static void
assign_all(const Dataset *ds, const float *x, size_t rows,
		   const float *centroids, Timing *t)
{
	int32_t    *index = xmalloc(sizeof(int32_t) * rows);
	CvNearest  *nn;
	Stamp		start = stamp();

	must(cv_nearest_create(centroids, ds->lists, ds->d, CV_NEAREST_L2, NULL, &nn), "create");
	must(cv_nearest_assign(nn, x, rows, index, NULL), "assign");
	t->assign_cpu = stamp().cpu - start.cpu;
	t->rescans = cv_nearest_rescans(nn);
	t->assignment_hash = hash_bytes(index, sizeof(int32_t) * rows);
	cv_nearest_free(nn);
	free(index);
}

/* One variant's whole build of one dataset. */
static void
run_build(const Dataset *ds, const float *x, size_t rows, size_t sample,
		  Timing *t)
{
	Stamp		start = stamp();
	float	   *centroids;

	memset(t, 0, sizeof(*t));
	centroids = train(ds, x, sample, t);
	assign_all(ds, x, rows, centroids, t);
	t->total_wall = stamp().wall - start.wall;
	t->ran = 1;
	free(centroids);
}

/* True when CV_BENCH_VARIANTS is unset or names the level. */
static int
level_wanted(int level)
{
	const char *env = getenv("CV_BENCH_VARIANTS");

	return env == NULL || *env == '\0' || strstr(env, level_names[level]) != NULL;
}

/* Sum of the iteration times. */
static double
lloyd_cpu(const Timing *t)
{
	double		s = 0.0;
	int			i;

	for (i = 0; i < t->iterations_run && i < MAX_ITERATIONS; i++)
		s += t->iter_cpu[i];
	return s;
}

/* One row of the summary table. */
static void
print_summary_row(const Dataset *ds, int level, const Timing *t)
{
	double		lloyd = lloyd_cpu(t);

	printf("| %s, %d lists, sample %zu | %s | %.2f | %.2f (%d) | %.3f | %.2f | %.2f | %.2f | %zu |\n",
		   ds->name, ds->lists, ds->sample, level_names[level], t->seed_cpu,
		   lloyd, t->iterations_run, t->iterations_run ? lloyd / t->iterations_run : 0.0,
		   t->assign_cpu, t->seed_cpu + lloyd + t->assign_cpu, t->total_wall,
		   t->rescans);
}

/* The per-iteration table row. */
static void
print_iteration_row(const Dataset *ds, int level, const Timing *t)
{
	int			i;

	printf("| %s | %s |", ds->name, level_names[level]);
	for (i = 0; i < MAX_ITERATIONS; i++)
		if (i < t->iterations_run)
			printf(" %.3f |", t->iter_cpu[i]);
		else
			printf(" - |");
	printf("\n");
}

/* Whether every variant that ran produced the first one's bits. */
static int
variants_agree(const Timing *t)
{
	int			first = -1;
	int			level;

	for (level = 0; level < N_LEVELS; level++)
	{
		if (!t[level].ran)
			continue;
		if (first < 0)
			first = level;
		else if (t[level].centroid_hash != t[first].centroid_hash
				 || t[level].assignment_hash != t[first].assignment_hash)
			return 0;
	}
	return 1;
}

/* Runs every wanted variant on one dataset. */
static void
bench_dataset(const Dataset *ds, size_t divisor, Timing *t)
{
	size_t		rows = ds->rows / divisor;
	size_t		sample = ds->sample / divisor;
	float	   *x;
	int			level;

	fprintf(stderr, "generating %s ...\n", ds->name);
	x = make_rows(ds, rows);
	for (level = N_LEVELS - 1; level >= 0; level--)
	{
		if (!level_wanted(level) || !cv_simd_use((CvSimdLevel) level))
			continue;
		fprintf(stderr, "  %s ...\n", level_names[level]);
		run_build(ds, x, rows, sample, &t[level]);
	}
	free(x);
}

/* Prints both tables and the agreement line. */
static void
print_tables(Timing results[][N_LEVELS])
{
	int			i;
	int			level;

	printf("| dataset | variant | seeding (s) | Lloyd (s, iterations) | per iteration (s) "
		   "| assign all rows (s) | total CPU (s) | total wall (s) | float64 rescans |\n");
	printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (i = 0; i < n_active; i++)
		for (level = N_LEVELS - 1; level >= 0; level--)
			if (results[i][level].ran)
				print_summary_row(&active[i], level, &results[i][level]);
	printf("\nLloyd iterations, CPU seconds each:\n\n| dataset | variant |");
	for (i = 0; i < MAX_ITERATIONS; i++)
		printf(" %d |", i + 1);
	printf("\n|---|---|");
	for (i = 0; i < MAX_ITERATIONS; i++)
		printf("---:|");
	printf("\n");
	for (i = 0; i < n_active; i++)
		for (level = N_LEVELS - 1; level >= 0; level--)
			if (results[i][level].ran)
				print_iteration_row(&active[i], level, &results[i][level]);
	printf("\n");
	for (i = 0; i < n_active; i++)
		printf("%s: centroids and assignments identical across variants: %s\n",
			   active[i].name, variants_agree(results[i]) ? "yes" : "NO");
}

int
main(void)
{
	static Timing results[N_DATASETS][N_LEVELS];
	const char *env = getenv("CV_BENCH_ROWS_DIVISOR");
	size_t		divisor = env != NULL && atol(env) > 0 ? (size_t) atol(env) : 1;
	int			i;

	choose_datasets();
	printf("k-means build benchmark, one thread; best SIMD level here: %s; rows divided by %zu\n\n",
		   level_names[cv_simd_best()], divisor);
	for (i = 0; i < n_active; i++)
		bench_dataset(&active[i], divisor, results[i]);
	print_tables(results);
	for (i = 0; i < n_active; i++)
		if (!variants_agree(results[i]))
			return 1;
	return 0;
}
