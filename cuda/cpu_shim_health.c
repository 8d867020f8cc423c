/*
 * cpu_shim_health.c: the CPU shim's cluster statistics (cvcuda_health_*),
 * which loop over the clusters of a chunk and call src/math in the order
 * health.h documents.  Buffers are host memory here, so the "device"
 * arrays are used in place.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_shim.h"

/* Milliseconds of each family in the last calls (cvcuda_health_timings). */
static double family_ms[CVCUDA_HEALTH_FAMILIES];

/* The table's share of family 3, kept apart so members can add its own. */
static double table_ms;

/* Monotonic milliseconds. */
static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
}

/* Checks a chunk's arguments: shape, then the offsets' values. */
static CvCudaStatus
check_chunk(const CvCudaBuffer *members, const CvCudaBuffer *offsets, long long nclusters,
			int d, const CvHealthParams *params, const CvCudaBuffer *stats, const char *what,
			CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_health_params(params, what, err);

	if (status == CVCUDA_OK)
		status = cvcuda_check_health_chunk(members, offsets, nclusters, d, stats, what, err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_offsets((const long long *) offsets->data, nclusters, d,
											 members, what, err);
	return status;
}

CVCUDA_API CvCudaStatus
cvcuda_health_centroid(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
					   long long nclusters, int d, const CvHealthParams *params,
					   CvCudaBuffer *centroids, CvCudaBuffer *stats, CvCudaError *err)
{
	const char *what = "health_centroid";
	CvCudaStatus status = check_chunk(members, offsets, nclusters, d, params, stats, what, err);
	const long long *off;
	const float *x;
	CvClusterStats *out;
	double		start;

	if (status == CVCUDA_OK)
		status = cvcuda_check_health_buffer(centroids, nclusters * d, sizeof(double), what,
											"centroids", err);
	if (status != CVCUDA_OK)
		return status;
	off = (const long long *) offsets->data;
	x = (const float *) members->data;
	out = (CvClusterStats *) stats->data;
	start = now_ms();
	for (long long c = 0; c < nclusters; c++)
	{
		if (cvcuda_stopping())
			return cvcuda_stopped(err, what);
		cvcuda_health_clear_record(&out[c]);
		cv_health_centroid(x + off[c] * (int64_t) d, off[c + 1] - off[c], d, params,
						   (double *) centroids->data + c * (int64_t) d, &out[c]);
	}
	memset(family_ms, 0, sizeof(family_ms));
	family_ms[0] = now_ms() - start;
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_health_neighbour_table(CvCudaCentroidSet *set, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_health_set(set, 0, "health_neighbour_table", err);
	CvCentroidSet cs;
	CvNeighbourTable table;
	double		start;

	if (status != CVCUDA_OK)
		return status;
	start = now_ms();
	cs.k = set->k;
	cs.d = set->d;
	cs.centroids = (const double *) set->centroids->data;
	cs.n = NULL;				/* the table needs no counts */
	cs.mean_dist = (const double *) set->mean_dist->data;
	cs.mean_norm = (const double *) set->mean_norm->data;
	if (cv_health_neighbour_prepare(&cs, set->m > 0 ? set->m : 1, &table) != 0)
		return cvcuda_stopping() ? cvcuda_stopped(err, "health_neighbour_table") :
			cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0,
								"health_neighbour_table: out of host memory");
	if (set->m > 0)
	{
		memcpy(set->nearest->data, table.nearest, sizeof(int64_t) * set->k * set->m);
		memcpy(set->nearest_dist->data, table.nearest_dist, sizeof(double) * set->k * set->m);
		memcpy(set->db_ratio->data, table.db_ratio, sizeof(double) * set->k);
	}
	cv_health_neighbour_free(&table);
	table_ms = now_ms() - start;
	family_ms[3] = table_ms;
	return cvcuda_set_ok(err);
}

/* The neighbour table of set as src/math's struct, over the buffers. */
static void
table_of(const CvCudaCentroidSet *set, CvCentroidSet *cs, CvNeighbourTable *table)
{
	cs->k = set->k;
	cs->d = set->d;
	cs->centroids = (const double *) set->centroids->data;
	cs->n = NULL;
	cs->mean_dist = (const double *) set->mean_dist->data;
	cs->mean_norm = (const double *) set->mean_norm->data;
	table->k = set->k;
	table->m = set->m;
	table->nearest = set->m > 0 ? (int64_t *) set->nearest->data : NULL;
	table->nearest_dist = set->m > 0 ? (double *) set->nearest_dist->data : NULL;
	table->db_ratio = set->m > 0 ? (double *) set->db_ratio->data : NULL;
}

/* Sections 2-6 of one cluster, in health.h's order, timing each family; -1: out of memory. */
static int
members_of_cluster(const float *x, int64_t n, int d, int64_t index, const CvCentroidSet *cs,
				   const CvNeighbourTable *table, const CvHealthParams *params,
				   double *ms, CvClusterStats *out)
{
	const double *centroid = cs->centroids + index * (int64_t) d;
	uint8_t    *side = malloc(n > 0 ? (size_t) n : 1);
	double		t0 = now_ms(),
				t1,
				t2,
				t3,
				t4;
	int			rc = 0;

	if (side == NULL)
		return -1;
	rc |= cv_health_two_means(x, n, d, side, out);
	t1 = now_ms();
	rc |= cv_health_pairwise(x, n, d, n >= 2 ? side : NULL, params, NAN, out);
	t2 = now_ms();
	cv_health_neighbour(x, n, d, index, cs, table, out);
	t3 = now_ms();
	cv_health_potential(x, n, d, centroid, cs->k, out);
	t4 = now_ms();
	rc |= cv_health_effective_rank(x, n, d, centroid, params, out);
	ms[1] += t1 - t0;
	ms[2] += t2 - t1;
	ms[3] += t3 - t2;
	ms[4] += t4 - t3;
	ms[5] += now_ms() - t4;
	free(side);
	return rc;
}

CVCUDA_API CvCudaStatus
cvcuda_health_members(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
					  long long nclusters, long long first_cluster,
					  const CvCudaCentroidSet *set, const CvHealthParams *params,
					  CvCudaBuffer *stats, CvCudaError *err)
{
	const char *what = "health_members";
	CvCudaStatus status;
	int			d;
	const long long *off;
	const float *x;
	CvClusterStats *out;
	CvCentroidSet cs;
	CvNeighbourTable table;
	double		ms[CVCUDA_HEALTH_FAMILIES] = {0};

	if (set == NULL || params == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
								"%s: set and params must not be NULL", what);
	d = set->d;
	status = check_chunk(members, offsets, nclusters, d, params, stats, what, err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_set(set, params->neighbours, what, err);
	if (status == CVCUDA_OK)
		status = cvcuda_check_health_range(set, nclusters, first_cluster, d, what, err);
	if (status != CVCUDA_OK)
		return status;
	off = (const long long *) offsets->data;
	x = (const float *) members->data;
	out = (CvClusterStats *) stats->data;
	table_of(set, &cs, &table);
	for (long long c = 0; c < nclusters; c++)
	{
		int			rc = members_of_cluster(x + off[c] * (int64_t) d, off[c + 1] - off[c], d,
											first_cluster + c, &cs, &table, params, ms,
											&out[c]);

		/* a stopped pass returns CV_HEALTH_STOPPED, which is nonzero too */
		if (cvcuda_stopping())
			return cvcuda_stopped(err, what);
		if (rc != 0)
			return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "%s: out of host memory",
									what);
	}
	for (int f = 1; f < CVCUDA_HEALTH_FAMILIES; f++)
		family_ms[f] = ms[f];
	family_ms[3] += table_ms;
	return cvcuda_set_ok(err);
}

CVCUDA_API void
cvcuda_health_timings(double ms[CVCUDA_HEALTH_FAMILIES])
{
	if (ms != NULL)
		memcpy(ms, family_ms, sizeof(family_ms));
}
