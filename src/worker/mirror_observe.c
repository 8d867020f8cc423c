/*
 * mirror_observe.c: observed health of the cvlattice mirrors the worker
 * holds (STATISTICS.md, "Observed health").
 *
 * A search scores every member of every list it probes.  A member's
 * distance to its own centroid (and their cosine) does not depend on the
 * query, so it is computed once per mirror, the first time a search
 * probes its list, and written into the mirror's side buffer, NaN until
 * then; later searches of that list only count it.  Search answers are
 * computed before and apart from this, so they are the same with
 * observation on or off.  The buffer lives and dies with the mirror, so a
 * new generation (VACUUM, REINDEX) starts with nothing observed.
 */
#include "postgres.h"

#include <math.h>

#include "utils/memutils.h"

#include "worker/library.h"
#include "worker/protocol.h"
#include "worker/worker.h"

typedef struct Observation
{
	CvCudaBuffer *means;		/* lists x d float4, the published centroids */
	CvCudaBuffer *stats;		/* rows x CVCUDA_OBSERVE_VALUES float8, NaN: not seen */
	bool	   *observed;		/* lists: its members are written */
	uint64	   *queries;		/* lists: searches that probed it */
} Observation;

static Observation observations[CV_GPU_MAX_MIRRORS];

Size
cv_worker_observation_bytes(const CvGpuMirrorKey *key)
{
	if (!key->lattice)
		return 0;
	return sizeof(float) * (Size) key->lists * key->dimensions +
		sizeof(double) * CVCUDA_OBSERVE_VALUES * (Size) Max(key->rows, 1);
}

void
cv_worker_observation_free(int m)
{
	Observation *o = &observations[m];

	cv_cuda.buffer_free(o->means);
	cv_cuda.buffer_free(o->stats);
	if (o->observed)
		pfree(o->observed);
	if (o->queries)
		pfree(o->queries);
	memset(o, 0, sizeof(*o));
}

CvCudaBuffer *
cv_worker_observation_means(int m)
{
	return observations[m].means;
}

/* Fills the side buffer with NaN and forgets every count. */
static CvCudaStatus
clear(Observation *o, const CvGpuMirrorKey *key, CvCudaError *err)
{
	Size		total = sizeof(double) * CVCUDA_OBSERVE_VALUES * (Size) Max(key->rows, 1);
	Size		chunk = Min(total, (Size) 1 << 20);
	double	   *nan_block = palloc(chunk);
	CvCudaStatus status = CVCUDA_OK;

	for (Size i = 0; i < chunk / sizeof(double); i++)
		nan_block[i] = NAN;
	for (Size done = 0; done < total && status == CVCUDA_OK; done += chunk)
		status = cv_cuda.buffer_write(o->stats, done, nan_block, Min(chunk, total - done), err);
	pfree(nan_block);
	memset(o->observed, 0, sizeof(bool) * key->lists);
	memset(o->queries, 0, sizeof(uint64) * key->lists);
	return status;
}

CvCudaStatus
cv_worker_observation_begin(int m, const CvGpuMirrorKey *key, CvCudaError *err)
{
	Observation *o = &observations[m];
	CvCudaStatus status;

	if (!key->lattice)
		return CVCUDA_OK;
	status = cv_cuda.buffer_alloc(sizeof(float) * (Size) key->lists * key->dimensions,
								  &o->means, err);
	if (status == CVCUDA_OK)
		status = cv_cuda.buffer_alloc(sizeof(double) * CVCUDA_OBSERVE_VALUES *
									  (Size) Max(key->rows, 1), &o->stats, err);
	if (status != CVCUDA_OK)
		return status;
	o->observed = MemoryContextAllocZero(TopMemoryContext, sizeof(bool) * key->lists);
	o->queries = MemoryContextAllocZero(TopMemoryContext, sizeof(uint64) * key->lists);
	return clear(o, key, err);
}

void
cv_worker_observe_search(int m, const CvGpuMirrorKey *key, const CvCudaBuffer *vectors,
						 const CvCudaBuffer *offsets, const int32 *probed, int64 nq, int probes)
{
	Observation *o = &observations[m];
	int		   *fresh;
	int			count = 0;
	CvCudaError err = {0};

	/* an empty mirror's side buffer stands for no row: nothing to observe */
	if (o->stats == NULL || key->rows == 0)
		return;
	fresh = palloc(sizeof(int) * key->lists);
	for (int64 i = 0; i < nq * probes; i++)
	{
		int			list = probed[i];

		if (list < 0 || list >= key->lists)
			continue;
		o->queries[list]++;
		if (!o->observed[list])
		{
			o->observed[list] = true;
			fresh[count++] = list;
		}
	}
	/* a failure leaves those members unseen (NaN), which the counts then show */
	if (count > 0 &&
		cv_cuda.list_observe(o->means, key->lists, key->dimensions, vectors, offsets,
							 key->metric, fresh, count, o->stats, &err) != CVCUDA_OK)
	{
		ereport(LOG,
				(errmsg("clustervec GPU worker could not observe %d lists of index %u: %s",
						count, key->index, err.message)));
		for (int i = 0; i < count; i++)
			o->observed[fresh[i]] = false;
	}
	pfree(fresh);
}

CvCudaStatus
cv_worker_observed(int m, const CvGpuMirrorKey *key, const CvCudaBuffer *offsets,
				   const int64 *host_offsets, char *payload, Size capacity, CvCudaError *err,
				   const char **bad)
{
	Observation *o = &observations[m];
	CvGpuObservedList *out = (CvGpuObservedList *) payload;
	double	   *sums;
	CvCudaStatus status;

	if (o->stats == NULL)
	{
		*bad = "the mirror is not of a cvlattice index";
		return CVCUDA_INVALID_ARGUMENT;
	}
	if (sizeof(CvGpuObservedList) * (Size) key->lists > capacity)
	{
		*bad = "observed health larger than a staging buffer";
		return CVCUDA_INVALID_ARGUMENT;
	}
	sums = palloc(sizeof(double) * CVCUDA_OBSERVED_FIELDS * key->lists);
	status = key->rows == 0 ? CVCUDA_OK :
		cv_cuda.observed_reduce(o->stats, offsets, key->lists, sums, err);
	for (int l = 0; l < key->lists && status == CVCUDA_OK; l++)
	{
		const double *s = sums + (Size) l * CVCUDA_OBSERVED_FIELDS;
		bool		none = key->rows == 0;

		out[l].rows = host_offsets[l + 1] - host_offsets[l];
		out[l].seen = none ? 0 : (int64) s[CVCUDA_OBSERVED_SEEN];
		out[l].sum_r2 = none ? 0 : s[CVCUDA_OBSERVED_SUM_R2];
		out[l].sum_r = none ? 0 : s[CVCUDA_OBSERVED_SUM_R];
		out[l].sum_cos = none ? 0 : s[CVCUDA_OBSERVED_SUM_COS];
		out[l].queries = o->queries[l];
	}
	pfree(sums);
	return status;
}

CvCudaStatus
cv_worker_observed_reset(int m, const CvGpuMirrorKey *key, CvCudaError *err)
{
	Observation *o = &observations[m];

	if (o->stats == NULL)
		return CVCUDA_OK;
	return clear(o, key, err);
}
