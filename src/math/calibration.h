/*
 * calibration.h: recall@k of an IVF index as a function of probes, from
 * sampled queries and their exact neighbours' lists (pure C, no postgres.h).
 *
 * A query's neighbour is found at probes p when its list is among the p
 * lists whose centroids rank nearest the query.  Counting, per rank, the
 * neighbours whose list has that rank gives the whole recall curve at once;
 * the curve is kept as the points where it rises, so the smallest probes
 * reaching a recall can be read off it.
 */
#ifndef CV_MATH_CALIBRATION_H
#define CV_MATH_CALIBRATION_H

#include <stdint.h>

/* A query's k nearest rows seen so far, nearest first: their distances and lists. */
typedef struct CvNeighbours
{
	int			k;
	int			count;
	double	   *distance;		/* k, allocated by the caller */
	int		   *list;			/* k, allocated by the caller */
} CvNeighbours;

/* Offers a row; kept when among the k nearest so far (ties: the earlier row). */
extern void cv_neighbours_offer(CvNeighbours *n, double distance, int list);

/*
 * Adds one query to found_at (lists counters): found_at[r] counts the
 * neighbours whose list ranks r (from 0) by centroid_distance, ties by list
 * number, NaN last, as the scans rank them.
 */
extern void cv_calibration_add_query(const double *centroid_distance, int lists,
									 const CvNeighbours *neighbours, uint64_t *found_at);

/*
 * The curve's points from found_at over total neighbours: probes ascending
 * and the recall at them, only where the recall rises.  With more rises
 * than max_points, the smallest probes reaching each of max_points evenly
 * spaced recall levels.  Returns the number of points.
 */
extern int	cv_calibration_curve(const uint64_t *found_at, int lists, uint64_t total,
								 int max_points, uint32_t *probes, float *recall);

/* The smallest probes whose recall is at least target; 0 when no point reaches it. */
extern uint32_t cv_calibration_probes(const uint32_t *probes, const float *recall, int points,
									  double target);

#endif
