/*
 * calibration.c: recall@k against probes from sampled queries (see
 * calibration.h).  Pure C: the index code gathers the neighbours.
 */
#include "math/calibration.h"

#include <math.h>
#include <stddef.h>

void
cv_neighbours_offer(CvNeighbours *n, double distance, int list)
{
	int			i;

	if (n->count == n->k && !(distance < n->distance[n->k - 1]))
		return;
	i = n->count < n->k ? n->count++ : n->k - 1;
	/* insertion: k is small */
	while (i > 0 && distance < n->distance[i - 1])
	{
		n->distance[i] = n->distance[i - 1];
		n->list[i] = n->list[i - 1];
		i--;
	}
	n->distance[i] = distance;
	n->list[i] = list;
}

/* NaN ranks after everything, as the scans make it infinite. */
static double
ranking_distance(double d)
{
	return isnan(d) ? INFINITY : d;
}

/* The rank of list among all lists by centroid distance, ties by list number. */
static int
list_rank(const double *centroid_distance, int lists, int list)
{
	double		mine = ranking_distance(centroid_distance[list]);
	int			rank = 0;

	for (int j = 0; j < lists; j++)
	{
		double		other = ranking_distance(centroid_distance[j]);

		if (other < mine || (other == mine && j < list))
			rank++;
	}
	return rank;
}

void
cv_calibration_add_query(const double *centroid_distance, int lists,
						 const CvNeighbours *neighbours, uint64_t *found_at)
{
	for (int i = 0; i < neighbours->count; i++)
		found_at[list_rank(centroid_distance, lists, neighbours->list[i])]++;
}

/* The number of rises of the cumulative count: the curve's exact points. */
static int
count_rises(const uint64_t *found_at, int lists)
{
	int			rises = 0;

	for (int r = 0; r < lists; r++)
		rises += found_at[r] > 0;
	return rises;
}

int
cv_calibration_curve(const uint64_t *found_at, int lists, uint64_t total,
					 int max_points, uint32_t *probes, float *recall)
{
	int			rises = count_rises(found_at, lists);
	int			points = 0;
	uint64_t	found = 0;
	int			level = 1;

	if (total == 0 || max_points <= 0)
		return 0;
	for (int r = 0; r < lists; r++)
	{
		if (found_at[r] == 0)
			continue;
		found += found_at[r];
		/* thinned: keep the first probes that reaches each next level */
		if (rises > max_points &&
			(double) found / total < (double) level / max_points && found < total)
			continue;
		while (level <= max_points && (double) found / total >= (double) level / max_points)
			level++;
		probes[points] = (uint32_t) r + 1;
		recall[points] = (float) ((double) found / total);
		if (++points == max_points)
			break;
	}
	return points;
}

uint32_t
cv_calibration_probes(const uint32_t *probes, const float *recall, int points, double target)
{
	for (int i = 0; i < points; i++)
		if (recall[i] >= (float) target)
			return probes[i];
	return 0;
}
