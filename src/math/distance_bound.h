/*
 * distance_bound.h: a fast float32 squared L2 distance with a proven lower
 * bound on the exact (float64) one, for ranking many candidates before
 * computing the exact value of the few that are returned.
 */
#ifndef CV_MATH_DISTANCE_BOUND_H
#define CV_MATH_DISTANCE_BOUND_H

/*
 * A value never above the exact squared L2 distance of a and b (the
 * float64 value of cv_distance->l2_squared), close to it; a negative value
 * means no bound could be had (overflow) and the caller must compute the
 * exact distance.
 */
extern double cv_l2_squared_lower_bound(const float *a, const float *b, int n);

#endif
