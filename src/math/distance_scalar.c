/*
 * distance_scalar.c: the portable reference variant.
 *
 * It walks the vectors one 16-element block at a time through the shared
 * lane helpers, which is the definition the SIMD variants must reproduce
 * bit for bit.
 */
#include "distance_lanes.h"
#include "distance_variants.h"

/* Number of leading elements that fill whole 16-element blocks. */
static int
full_blocks_end(int n)
{
	return n - n % CV_DISTANCE_LANES;
}

/* Squared Euclidean distance. */
static double
l2_squared_scalar(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			end = full_blocks_end(n);
	int			j;

	cv_lanes_clear(lanes);
	for (j = 0; j < end; j += CV_DISTANCE_LANES)
		cv_lanes_add_l2(lanes, a + j, b + j, CV_DISTANCE_LANES);
	return cv_finish_l2(lanes, a, b, end, n);
}

/* Inner product. */
static double
inner_product_scalar(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			end = full_blocks_end(n);
	int			j;

	cv_lanes_clear(lanes);
	for (j = 0; j < end; j += CV_DISTANCE_LANES)
		cv_lanes_add_ip(lanes, a + j, b + j, CV_DISTANCE_LANES);
	return cv_finish_ip(lanes, a, b, end, n);
}

/* Manhattan distance. */
static double
l1_scalar(const float *a, const float *b, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			end = full_blocks_end(n);
	int			j;

	cv_lanes_clear(lanes);
	for (j = 0; j < end; j += CV_DISTANCE_LANES)
		cv_lanes_add_l1(lanes, a + j, b + j, CV_DISTANCE_LANES);
	return cv_finish_l1(lanes, a, b, end, n);
}

/* Dot product and both squared norms in one pass. */
static CvCosineParts
cosine_parts_scalar(const float *a, const float *b, int n)
{
	double		dot[CV_DISTANCE_LANES];
	double		aa[CV_DISTANCE_LANES];
	double		bb[CV_DISTANCE_LANES];
	int			end = full_blocks_end(n);
	int			j;

	cv_lanes_clear(dot);
	cv_lanes_clear(aa);
	cv_lanes_clear(bb);
	for (j = 0; j < end; j += CV_DISTANCE_LANES)
		cv_lanes_add_cosine(dot, aa, bb, a + j, b + j, CV_DISTANCE_LANES);
	return cv_finish_cosine(dot, aa, bb, a, b, end, n);
}

/* Squared Euclidean norm. */
static double
norm_squared_scalar(const float *a, int n)
{
	double		lanes[CV_DISTANCE_LANES];
	int			end = full_blocks_end(n);
	int			j;

	cv_lanes_clear(lanes);
	for (j = 0; j < end; j += CV_DISTANCE_LANES)
		cv_lanes_add_sq(lanes, a + j, CV_DISTANCE_LANES);
	return cv_finish_sq(lanes, a, end, n);
}

const CvDistanceKernels cv_distance_kernels_scalar = {
	.name = "scalar",
	.l2_squared = l2_squared_scalar,
	.inner_product = inner_product_scalar,
	.l1 = l1_scalar,
	.cosine_parts = cosine_parts_scalar,
	.norm_squared = norm_squared_scalar,
};
