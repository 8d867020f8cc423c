/*
 * cpu_shim_observe.c: observed health on the CPU, the reference of
 * cuda/list_observe.cu: each member's distance to its own list's centroid
 * and their cosine, written into the side buffer of a cvlattice mirror,
 * and the per-list sums of what was written.  Plain float64 loops: the
 * CUDA library's warp sums differ from these only by rounding.
 */
#include <math.h>

#include "cpu_shim.h"

/* r and cos of one member against its centroid c (metric: cvlattice's). */
static void
observe_member(const float *x, const float *c, int d, int metric, double *out)
{
	double		xx = 0,
				xc = 0,
				cc = 0,
				rr = 0,
				scale = 1;

	for (int j = 0; j < d; j++)
	{
		xx += (double) x[j] * x[j];
		xc += (double) x[j] * c[j];
		cc += (double) c[j] * c[j];
	}
	if (metric == CV_METRIC_COSINE)
		scale = xx > 0 ? 1 / sqrt(xx) : 0;
	for (int j = 0; j < d; j++)
	{
		double		diff = (double) x[j] * scale - c[j];

		rr += diff * diff;
	}
	out[0] = sqrt(rr);
	out[1] = xx > 0 && cc > 0 ? xc / (sqrt(xx) * sqrt(cc)) : 0;
}

CVCUDA_API CvCudaStatus
cvcuda_list_observe(const CvCudaBuffer *means, int lists, int d, const CvCudaBuffer *vectors,
					const CvCudaBuffer *list_offsets, int metric, const int *observe, int count,
					CvCudaBuffer *member_stats, CvCudaError *err)
{
	const long long *offsets;
	CvCudaStatus status;

	status = cvcuda_check_observe_args("list_observe", means, lists, d, list_offsets, metric,
									   member_stats, err);
	if (status != CVCUDA_OK)
		return status;
	if (vectors == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"list_observe: vectors must not be NULL");
	offsets = (const long long *) list_offsets->data;
	if ((status = cvcuda_check_ivf_offsets(offsets, lists, d, vectors, err)) != CVCUDA_OK ||
		(status = cvcuda_check_observe_rows("list_observe", offsets, lists, observe, count,
											member_stats, err)) != CVCUDA_OK)
		return status;
	for (int i = 0; i < count && !cvcuda_stopping(); i++)
	{
		int			l = observe[i];
		const float *c = (const float *) means->data + (size_t) l * d;

		for (long long r = offsets[l]; r < offsets[l + 1]; r++)
			observe_member((const float *) vectors->data + (size_t) r * d, c, d, metric,
						   (double *) member_stats->data + (size_t) r * CVCUDA_OBSERVE_VALUES);
	}
	return cvcuda_stopping() ? cvcuda_stopped(err, "list_observe") : cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_observed_reduce(const CvCudaBuffer *member_stats, const CvCudaBuffer *list_offsets,
					   int lists, double *out, CvCudaError *err)
{
	const long long *offsets;
	const double *stats;
	CvCudaStatus status;

	status = cvcuda_check_observe_args("observed_reduce", NULL, lists, 0, list_offsets, 0,
									   member_stats, err);
	if (status != CVCUDA_OK)
		return status;
	if (out == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"observed_reduce: out must not be NULL");
	offsets = (const long long *) list_offsets->data;
	if ((status = cvcuda_check_ivf_offsets(offsets, lists, 1, NULL, err)) != CVCUDA_OK ||
		(status = cvcuda_check_observe_rows("observed_reduce", offsets, lists, NULL, 0,
											member_stats, err)) != CVCUDA_OK)
		return status;
	stats = (const double *) member_stats->data;
	for (int l = 0; l < lists; l++)
	{
		double	   *sums = out + (size_t) l * CVCUDA_OBSERVED_FIELDS;

		for (int f = 0; f < CVCUDA_OBSERVED_FIELDS; f++)
			sums[f] = 0;
		for (long long r = offsets[l]; r < offsets[l + 1]; r++)
		{
			double		dist = stats[(size_t) r * CVCUDA_OBSERVE_VALUES];

			if (isnan(dist))
				continue;
			sums[CVCUDA_OBSERVED_SEEN] += 1;
			sums[CVCUDA_OBSERVED_SUM_R2] += dist * dist;
			sums[CVCUDA_OBSERVED_SUM_R] += dist;
			sums[CVCUDA_OBSERVED_SUM_COS] += stats[(size_t) r * CVCUDA_OBSERVE_VALUES + 1];
		}
	}
	return cvcuda_set_ok(err);
}
