/*
 * mean.h: the centroid of a cvlattice list (pure C, no postgres.h): the
 * float64 mean of its members, or of their directions under cosine, and the
 * incremental move an insert makes to it.
 */
#ifndef CV_MATH_MEAN_H
#define CV_MATH_MEAN_H

#include <stdbool.h>
#include <stdint.h>

/* Adds x (scaled to unit length when directions) to the float64 sum; false for a zero direction. */
extern bool cv_mean_add(double *sum, const float *x, int dim, bool directions);

/* sum / n as float4 into out (zeros when n is 0); returns out's float64 norm. */
extern double cv_mean_finish(const double *sum, uint64_t n, int dim, float *out);

/*
 * Moves the mean of n - 1 members to the mean of n after x joined:
 * c + (x - c) / n in float64, rounded to float4; returns the new norm.
 */
extern double cv_mean_move(float *centroid, const float *x, int dim, uint64_t n,
						   bool directions);

#endif
