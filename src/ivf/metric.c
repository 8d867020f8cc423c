/*
 * metric.c: which distance an index orders by, and that distance computed
 * exactly as its SQL operator computes it (the scan sets
 * xs_recheckorderby = false, so the two must agree bit for bit).
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "utils/rel.h"

#include "ivf/ivf.h"
#include "math/distance.h"
#include "type/cvec.h"

/* Support function 1 of every cvivf opclass is its operator's C function. */
CvMetric
cvivf_metric_of_index(Relation index)
{
	FmgrInfo   *support = index_getprocinfo(index, 1, 1);

	if (support->fn_addr == cvec_l2_distance)
		return CV_METRIC_L2;
	if (support->fn_addr == cvec_negative_inner_product)
		return CV_METRIC_INNER_PRODUCT;
	if (support->fn_addr == cvec_cosine_distance)
		return CV_METRIC_COSINE;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("operator class of index \"%s\" is not supported by cvivf",
					RelationGetRelationName(index)),
			 errhint("Use cvec_l2_ops, cvec_ip_ops or cvec_cosine_ops (on pgvector's vector, vector_l2_ops, vector_ip_ops or vector_cosine_ops of clustervec_pgvector).")));
	return CV_METRIC_L2;		/* keep the compiler quiet */
}

/* The order-by value, identical to l2_distance, negative_inner_product or cosine_distance. */
double
cvivf_distance(CvMetric metric, const float *a, const float *b, int dim)
{
	switch (metric)
	{
		case CV_METRIC_L2:
			return sqrt(cv_distance->l2_squared(a, b, dim));
		case CV_METRIC_INNER_PRODUCT:
			return -cv_distance->inner_product(a, b, dim);
		case CV_METRIC_COSINE:
			return cv_cosine_distance_from_parts(cv_distance->cosine_parts(a, b, dim));
	}
	elog(ERROR, "unknown cvivf metric %d", (int) metric);
	return 0;
}

/*
 * Ranks centroids for a vector: squared L2 for L2; for inner product and
 * cosine (whose centroids are unit length) the negative dot product.
 */
double
cvivf_centroid_distance(CvMetric metric, const float *query, const float *centroid, int dim)
{
	if (metric == CV_METRIC_L2)
		return cv_distance->l2_squared(query, centroid, dim);
	return -cv_distance->inner_product(query, centroid, dim);
}

/* Each row scaled to unit length (in float64, rounded once); a zero row stays zero. */
void
cvivf_normalise_rows(float *rows, int count, int dim)
{
	for (int i = 0; i < count; i++)
	{
		float	   *row = rows + (Size) i * dim;
		double		norm = sqrt(cv_distance->norm_squared(row, dim));

		if (norm > 0)
			for (int j = 0; j < dim; j++)
				row[j] = (float) (row[j] / norm);
	}
}

/*
 * The centroids lists are ranked by (cvivf_centroid_distance), NULL when
 * the index has none.  cvlattice's cosine centroids are means of
 * directions, not unit length: normalised, their negated inner product
 * with the query ranks them by cosine distance (the query's norm is common
 * to all).  The CPU scans and the GPU mirror rank these same float4 values,
 * so both probe the same lists.
 */
float *
cvivf_read_ranking_centroids(Relation index, const CvIvfMetaPageData *meta)
{
	float	   *centroids = cvivf_read_centroids(index, meta);

	if (centroids != NULL && meta->kind == CV_INDEX_KIND_LATTICE &&
		meta->metric == CV_METRIC_COSINE)
		cvivf_normalise_rows(centroids, meta->lists, meta->dimensions);
	return centroids;
}

/*
 * A zero vector has no direction, so the cosine opclass leaves it out.  A
 * NaN or infinite element is an error: cvec never holds one, but a pgvector
 * column (clustervec_pgvector's operator classes) written before pgvector
 * 0.4.4 may.
 */
bool
cvivf_vector_is_indexable(CvMetric metric, const float *x, int dim)
{
	cvec_check_finite(x, dim);
	if (metric != CV_METRIC_COSINE)
		return true;
	return cv_distance->norm_squared(x, dim) > 0;
}
