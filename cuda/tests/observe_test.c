/*
 * observe_test.c: cvcuda_list_observe and cvcuda_observed_reduce (observed
 * health of a cvlattice mirror) against a float64 reference written here,
 * on fresh random lists whose seed is printed: every metric, dimensions
 * from 1 to 1,000, empty lists, zero members and a zero centroid.  The
 * side buffer is poisoned before each call, so a row of an observed list
 * left unwritten, or a row of another list written, fails; the reduction
 * is checked against sums taken here over the NaN-prefilled buffer.
 *
 *   cuda/tests/observe_test path/to/library.so [--require-device] [--seed N]
 */
#include "harness.h"

typedef CvCudaStatus (*ObserveFn) (const CvCudaBuffer *, int, int, const CvCudaBuffer *,
								   const CvCudaBuffer *, int, const int *, int, CvCudaBuffer *,
								   CvCudaError *);
typedef CvCudaStatus (*ReduceFn) (const CvCudaBuffer *, const CvCudaBuffer *, int, double *,
								  CvCudaError *);

typedef struct Library
{
	InitFn		init;
	AllocFn		alloc;
	FreeFn		free;
	WriteFn		write;
	ReadFn		read;
	ObserveFn	observe;
	ReduceFn	reduce;
} Library;

#define POISON 12345.0

typedef struct Case
{
	int			lists;
	int			d;
	int			max_rows;
} Case;

static const Case cases[] = {
	{1, 1, 5}, {3, 3, 40}, {7, 33, 300}, {20, 128, 200}, {5, 1000, 70}, {40, 17, 900},
};

/* r and cos of member x against centroid c, as STATISTICS.md defines them. */
static void
reference(const float *x, const float *c, int d, int metric, double *r, double *cosine)
{
	double		nx = 0,
				nc = 0,
				dot = 0,
				sq = 0;

	for (int j = 0; j < d; j++)
	{
		nx += (double) x[j] * x[j];
		nc += (double) c[j] * c[j];
		dot += (double) x[j] * c[j];
	}
	nx = sqrt(nx);
	nc = sqrt(nc);
	for (int j = 0; j < d; j++)
	{
		double		xj = metric == CV_METRIC_COSINE ? (nx > 0 ? x[j] / nx : 0) : x[j];

		sq += (xj - c[j]) * (xj - c[j]);
	}
	*r = sqrt(sq);
	*cosine = nx > 0 && nc > 0 ? dot / (nx * nc) : 0;
}

static int
close_to(double got, double want, double scale)
{
	return fabs(got - want) <= 1e-10 * fabs(want) + 1e-12 * scale;
}

static CvCudaBuffer *
upload(const Library *lib, const void *data, size_t bytes)
{
	CvCudaBuffer *buffer = NULL;
	CvCudaError err;

	if (lib->alloc(bytes, &buffer, &err) != CVCUDA_OK ||
		lib->write(buffer, 0, data, bytes, &err) != CVCUDA_OK)
	{
		check(0, "upload %zu bytes: %s", bytes, err.message);
		exit(harness_finish());
	}
	return buffer;
}

/* Fills a case's data: list sizes (some empty), members (some zero), centroids (one zero). */
static long long
make_case(const Case *c, uint64_t *state, long long *offsets, float **vectors, float *means)
{
	offsets[0] = 0;
	for (int l = 0; l < c->lists; l++)
		offsets[l + 1] = offsets[l] + (next_random(state) % 4 == 0 ? 0 :
									   1 + (long long) (next_random(state) % c->max_rows));
	if (offsets[c->lists] == 0)
		offsets[c->lists] = 1;	/* a buffer holds at least one row */
	*vectors = malloc(sizeof(float) * (size_t) (offsets[c->lists] + 1) * c->d);
	for (long long i = 0; i < offsets[c->lists] * c->d; i++)
		(*vectors)[i] = uniformf(state) * 4 - 2;
	if (offsets[c->lists] > 2)
		memset(*vectors + (size_t) 2 * c->d, 0, sizeof(float) * c->d);	/* a zero member */
	for (int i = 0; i < c->lists * c->d; i++)
		means[i] = uniformf(state) - 0.5f;
	if (c->lists > 2)
		memset(means + c->d, 0, sizeof(float) * c->d);	/* list 1: a zero centroid */
	return offsets[c->lists];
}

static void
run_case(const Library *lib, const Case *c, int metric, uint64_t seed)
{
	uint64_t	state = seed;
	long long  *offsets = malloc(sizeof(long long) * (c->lists + 1));
	float	   *means = malloc(sizeof(float) * c->lists * c->d);
	float	   *vectors;
	long long	rows = make_case(c, &state, offsets, &vectors, means);
	size_t		stats_bytes = sizeof(double) * CVCUDA_OBSERVE_VALUES * rows;
	double	   *stats = malloc(stats_bytes + sizeof(double));
	double	   *sums = malloc(sizeof(double) * CVCUDA_OBSERVED_FIELDS * c->lists);
	int		   *observe = malloc(sizeof(int) * c->lists);
	char	   *chosen = calloc(c->lists, 1);
	int			count = 0;
	CvCudaBuffer *b_means = upload(lib, means, sizeof(float) * c->lists * c->d);
	CvCudaBuffer *b_vectors = upload(lib, vectors, sizeof(float) * (rows + 1) * c->d);
	CvCudaBuffer *b_offsets = upload(lib, offsets, sizeof(long long) * (c->lists + 1));
	CvCudaBuffer *b_stats;
	CvCudaError err;
	int			bad = 0;

	for (int l = 0; l < c->lists; l++)
		if (next_random(&state) % 3 != 0)
		{
			observe[count++] = l;
			chosen[l] = 1;
		}
	for (long long i = 0; i < rows * CVCUDA_OBSERVE_VALUES; i++)
		stats[i] = POISON;
	b_stats = upload(lib, stats, stats_bytes + sizeof(double));
	check(lib->observe(b_means, c->lists, c->d, b_vectors, b_offsets, metric, observe, count,
					   b_stats, &err) == CVCUDA_INVALID_ARGUMENT,
		  "seed %llu: a side buffer one float8 too long is refused", (unsigned long long) seed);
	lib->free(b_stats);
	b_stats = upload(lib, stats, stats_bytes);
	if (!check(lib->observe(b_means, c->lists, c->d, b_vectors, b_offsets, metric, observe,
							count, b_stats, &err) == CVCUDA_OK,
			   "seed %llu lists %d d %d metric %d: observe: %s", (unsigned long long) seed,
			   c->lists, c->d, metric, err.message))
		goto done;
	lib->read(b_stats, 0, stats, stats_bytes, &err);
	for (int l = 0; l < c->lists; l++)
		for (long long r = offsets[l]; r < offsets[l + 1]; r++)
		{
			double		want_r,
						want_cos,
						*got = stats + r * CVCUDA_OBSERVE_VALUES;

			if (!chosen[l])
			{
				bad += got[0] != POISON || got[1] != POISON;
				continue;
			}
			reference(vectors + (size_t) r * c->d, means + (size_t) l * c->d, c->d, metric,
					  &want_r, &want_cos);
			bad += !close_to(got[0], want_r, 1) || !close_to(got[1], want_cos, 1);
		}
	check(bad == 0, "seed %llu lists %d d %d metric %d: %d rows wrong or written outside the lists",
		  (unsigned long long) seed, c->lists, c->d, metric, bad);

	/* the reduction: NaN everywhere, then the observed lists written */
	for (long long i = 0; i < rows * CVCUDA_OBSERVE_VALUES; i++)
		stats[i] = NAN;
	lib->write(b_stats, 0, stats, stats_bytes, &err);
	lib->observe(b_means, c->lists, c->d, b_vectors, b_offsets, metric, observe, count, b_stats,
				 &err);
	lib->read(b_stats, 0, stats, stats_bytes, &err);
	for (int i = 0; i < CVCUDA_OBSERVED_FIELDS * c->lists; i++)
		sums[i] = -POISON;
	if (!check(lib->reduce(b_stats, b_offsets, c->lists, sums, &err) == CVCUDA_OK,
			   "seed %llu: reduce: %s", (unsigned long long) seed, err.message))
		goto done;
	bad = 0;
	for (int l = 0; l < c->lists; l++)
	{
		double		want[CVCUDA_OBSERVED_FIELDS] = {0, 0, 0, 0};
		const double *got = sums + (size_t) l * CVCUDA_OBSERVED_FIELDS;

		for (long long r = offsets[l]; r < offsets[l + 1]; r++)
		{
			const double *v = stats + r * CVCUDA_OBSERVE_VALUES;

			if (isnan(v[0]))
				continue;
			want[CVCUDA_OBSERVED_SEEN] += 1;
			want[CVCUDA_OBSERVED_SUM_R2] += v[0] * v[0];
			want[CVCUDA_OBSERVED_SUM_R] += v[0];
			want[CVCUDA_OBSERVED_SUM_COS] += v[1];
		}
		bad += want[CVCUDA_OBSERVED_SEEN] != (chosen[l] ? offsets[l + 1] - offsets[l] : 0);
		bad += got[CVCUDA_OBSERVED_SEEN] != want[CVCUDA_OBSERVED_SEEN];
		for (int f = 1; f < CVCUDA_OBSERVED_FIELDS; f++)
			bad += !close_to(got[f], want[f], 1 + want[CVCUDA_OBSERVED_SEEN]);
	}
	check(bad == 0, "seed %llu lists %d d %d metric %d: %d reduced values wrong",
		  (unsigned long long) seed, c->lists, c->d, metric, bad);
done:
	lib->free(b_means);
	lib->free(b_vectors);
	lib->free(b_offsets);
	lib->free(b_stats);
	free(offsets);
	free(means);
	free(vectors);
	free(stats);
	free(sums);
	free(observe);
	free(chosen);
}

static void
run_argument_checks(const Library *lib)
{
	float		means[4] = {1, 2, 3, 4};
	float		vectors[6] = {1, 1, 2, 2, 3, 3};
	long long	offsets[3] = {0, 2, 3};
	double		stats[6];
	int			bad_list[1] = {2};
	double		out[8];
	CvCudaBuffer *b_means = upload(lib, means, sizeof(means));
	CvCudaBuffer *b_vectors = upload(lib, vectors, sizeof(vectors));
	CvCudaBuffer *b_offsets = upload(lib, offsets, sizeof(offsets));
	CvCudaBuffer *b_stats = upload(lib, stats, sizeof(stats));
	CvCudaError err;

	check(lib->observe(b_means, 2, 2, b_vectors, b_offsets, CV_METRIC_L2, bad_list, 1, b_stats,
					   &err) == CVCUDA_INVALID_ARGUMENT, "a list number past the lists is refused");
	check(lib->observe(b_means, 2, 3, b_vectors, b_offsets, CV_METRIC_L2, NULL, 0, b_stats,
					   &err) == CVCUDA_INVALID_ARGUMENT, "means of the wrong size are refused");
	check(lib->observe(b_means, 2, 2, b_vectors, b_offsets, 99, NULL, 0, b_stats,
					   &err) == CVCUDA_INVALID_ARGUMENT, "an unknown metric is refused");
	check(lib->observe(b_means, 2, 2, b_vectors, b_offsets, CV_METRIC_L2, NULL, 0, b_stats,
					   &err) == CVCUDA_OK, "no lists to observe: nothing done");
	check(lib->reduce(b_stats, b_offsets, 3, out, &err) == CVCUDA_INVALID_ARGUMENT,
		  "offsets of the wrong size are refused");
	check(lib->reduce(b_stats, b_offsets, 2, NULL, &err) == CVCUDA_INVALID_ARGUMENT,
		  "a NULL out is refused");
	lib->free(b_means);
	lib->free(b_vectors);
	lib->free(b_offsets);
	lib->free(b_stats);
}

int
main(int argc, char **argv)
{
	HarnessArgs args = harness_args(argc, argv);
	Library		lib;
	CvCudaDeviceInfo info;
	HarnessSymbol symbols[] = {
		{"cvcuda_init", &lib.init},
		{"cvcuda_buffer_alloc", &lib.alloc},
		{"cvcuda_buffer_free", &lib.free},
		{"cvcuda_buffer_write", &lib.write},
		{"cvcuda_buffer_read", &lib.read},
		{"cvcuda_list_observe", &lib.observe},
		{"cvcuda_observed_reduce", &lib.reduce},
	};

	printf("observe_test seed %llu\n", (unsigned long long) args.seed);
	harness_open(&args, symbols, lengthof(symbols));
	harness_init_device(&args, lib.init, &info, "tests");
	printf("device: %s\n", info.name);
	run_argument_checks(&lib);
	for (size_t i = 0; i < lengthof(cases); i++)
		for (int metric = CV_METRIC_L2; metric <= CV_METRIC_COSINE; metric++)
			run_case(&lib, &cases[i], metric, args.seed + i * 3 + metric);
	return harness_finish();
}
