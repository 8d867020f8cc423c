/*
 * kmeans.h: kmeans() and kmeans_centroids(), k-means over every row of a
 * table's vector column, as SQL functions.
 *
 *   input.c  reads the column (a heap scan in TID order, the caller's
 *            snapshot and rights) into one array
 *   run.c    trains as an index build does (k-means++ from the seeded
 *            PRNG, then Lloyd; on the GPU worker when it serves), then
 *            assigns every row to its nearest final centroid
 *   sql.c    the arguments, the two functions' rows
 */
#ifndef CV_KMEANS_KMEANS_H
#define CV_KMEANS_KMEANS_H

#include "postgres.h"

#include "storage/itemptr.h"

#include "clustervec_metric.h"

/* What the caller asked for. */
typedef struct KmeansRequest
{
	Oid			relid;
	const char *column;
	int			k;
	int			iterations;
	uint64		seed;
	CvMetric	metric;
	const char *function;		/* "kmeans" or "kmeans_centroids", for messages */
} KmeansRequest;

/*
 * The rows clustered.  For 'ip' and 'cosine' the points are scaled to unit
 * length (training works on directions, as index builds do) and norms
 * keeps each row's length for its inner-product distance.
 */
typedef struct KmeansRows
{
	float	   *points;			/* n x d */
	double	   *norms;			/* n, 'ip' only; NULL otherwise */
	ItemPointerData *tids;		/* n, ascending */
	int64		n;
	int			d;
	int64		nulls;			/* rows skipped: NULL vector */
	int64		zeros;			/* rows skipped: zero vector under 'cosine' */
} KmeansRows;

/* The clustering: every row's cluster and distance, every cluster's figures. */
typedef struct KmeansResult
{
	int			k;				/* clusters: fewer than asked when fewer distinct rows */
	float	   *centroids;		/* k x d */
	int32	   *cluster;		/* n */
	double	   *distance;		/* n: the metric's SQL distance to its centroid */
	int64	   *members;		/* k */
	double	   *inertia;		/* k: sum of squared L2 distances; 'ip', 'cosine': of distances */
	double		total;			/* sum of inertia */
	bool		gpu;			/* trained and assigned by the GPU worker */
} KmeansResult;

/* input.c */
extern void kmeans_read_rows(const KmeansRequest *request, KmeansRows *rows);

/* run.c */
extern void kmeans_run(const KmeansRequest *request, const KmeansRows *rows,
					   KmeansResult *result);

#endif							/* CV_KMEANS_KMEANS_H */
