/*
 * math_backend.h: src/math called from a backend: its memory from the
 * current memory context (so an ERROR cannot leak it) and its statuses as
 * ERRORs.  The k-means of index builds and of kmeans() share these.
 */
#ifndef CV_MATH_BACKEND_H
#define CV_MATH_BACKEND_H

#include "postgres.h"

#include "math/nearest.h"

extern const CvAllocator cv_palloc_allocator;

/* A status other than OK as an ERROR naming what failed. */
extern void cv_check_math(CvMathStatus status, const char *what);

#endif
