/*
 * clustervec_metric.h: the one name for a distance, shared by the access
 * methods (stored in every index's metapage, so the values never change),
 * the worker's protocol and the GPU library's search.  Plain C, no
 * PostgreSQL, so the CUDA and CPU libraries include it as they are.
 */
#ifndef CLUSTERVEC_METRIC_H
#define CLUSTERVEC_METRIC_H

typedef enum CvMetric
{
	CV_METRIC_L2 = 1,			/* Euclidean distance */
	CV_METRIC_INNER_PRODUCT = 2,	/* negative inner product */
	CV_METRIC_COSINE = 3		/* 1 - cosine similarity */
} CvMetric;

#endif
