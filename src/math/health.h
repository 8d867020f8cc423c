/*
 * health.h: the 38 per-cluster statistics of STATISTICS.md on plain arrays
 * (pure C, no postgres.h): the CPU reference the GPU kernels are tested
 * against.  One module per STATISTICS.md section:
 *
 *   health_centroid.c   1. centroid family (16), one sweep per cluster
 *   health_twomeans.c   2. two-means sub-structure (3)
 *   health_pairwise.c   3. tiled pairwise class (10), two passes over pairs
 *   health_potential.c  4. Gaussian potential (3)
 *   health_neighbour.c  5. neighbour family (5), needs every centroid
 *   health_rank.c       6. Gram-bounded effective_rank (1)
 *
 * A cluster is given as its n members, row-major n x d float4, in member
 * order.  Clusters are numbered 0..K-1 in label order (so "tie: smaller
 * label" is "tie: smaller index").  Everything accumulates in float64.
 *
 * Call order for a set of clusters (the SQL layer does this, chunk by chunk):
 *   for every cluster:  cv_health_centroid            (pass 1: needs nothing)
 *   once:               cv_health_global_centroid, cv_health_neighbour_prepare
 *   for every cluster:  cv_health_finish_centroid     (novelty, between_ss: need g)
 *                       cv_health_two_means           (needs inertia, mean_dist)
 *                       cv_health_pairwise            (needs radius, two-means sides)
 *                       cv_health_neighbour           (needs all centroids)
 *                       cv_health_potential           (needs sigma, nearest_dist)
 *                       cv_health_effective_rank
 * Each function reads the statistics it needs from the CvClusterStats the
 * earlier ones filled, and sets values and NULL flags of its own columns only.
 */
#ifndef CV_MATH_HEALTH_H
#define CV_MATH_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Column numbers, 0-based, in STATISTICS.md order (column # minus 1). */
typedef enum CvStat
{
	CV_STAT_N = 0,
	CV_STAT_CENTROID_NORM,
	CV_STAT_INERTIA,
	CV_STAT_MEAN_DIST,
	CV_STAT_SPREAD,
	CV_STAT_SKEW,
	CV_STAT_KURTOSIS,
	CV_STAT_RADIUS,
	CV_STAT_COHESION,
	CV_STAT_OUTLIER_RATIO,
	CV_STAT_CORE_PERIPHERY_RATIO,
	CV_STAT_MEAN_NORM,
	CV_STAT_NORM_CV,
	CV_STAT_EMBEDDING_QUALITY,
	CV_STAT_NOVELTY,
	CV_STAT_BETWEEN_SS,
	CV_STAT_SPLIT_GAIN,			/* 16 */
	CV_STAT_SPLIT_BALANCE,
	CV_STAT_SPLIT_SEPARATION,
	CV_STAT_MEAN_PAIRWISE_DIST, /* 19 */
	CV_STAT_SIGMA,
	CV_STAT_MEAN_PAIRWISE_COS,
	CV_STAT_REDUNDANCY,
	CV_STAT_REDUNDANT_MEMBERS,
	CV_STAT_BREADTH,
	CV_STAT_LOCAL_DENSITY,
	CV_STAT_DIST_ENTROPY,
	CV_STAT_ENTANGLEMENT,
	CV_STAT_SPLIT_SILHOUETTE,
	CV_STAT_POTENTIAL_DEPTH,	/* 29 */
	CV_STAT_CURVATURE,
	CV_STAT_ESCAPE_PROBABILITY,
	CV_STAT_NEAREST_CLUSTER,	/* 32: value holds the cluster index */
	CV_STAT_NEAREST_DIST,
	CV_STAT_DB_RATIO,
	CV_STAT_NEIGHBOUR_RELEVANCE,
	CV_STAT_CENTROID_SILHOUETTE,
	CV_STAT_EFFECTIVE_RANK,		/* 37 */
	CV_STAT_COUNT
} CvStat;

/*
 * Where the statistics modules get memory: NULL (the default) is malloc and
 * free; the SQL layer points it at its memory contexts.  alloc returns NULL
 * when memory ran out (never raises), so every module's -1 path still runs.
 */
typedef struct CvHealthMemory
{
	void	   *(*alloc) (size_t bytes);
	void		(*release) (void *block);
} CvHealthMemory;

extern const CvHealthMemory *cv_health_memory;

/* count * size zeroed, 64-byte aligned bytes from cv_health_memory; NULL when out of memory. */
extern void *cv_health_alloc(size_t count, size_t size);
extern void cv_health_free(void *block);

/*
 * The largest histograms a caller may ask for (sigma_bins, entropy_bins):
 * far finer than any distance distribution needs, and small enough that the
 * pairwise pass's bin index and its histograms stay bounded.
 */
#define CV_HEALTH_MAX_BINS 65536

/* The degeneracy tolerance of STATISTICS.md ("counts as 0"). */
#define CV_HEALTH_EPS 1e-6

typedef struct CvHealthParams
{
	double		outlier_z;		/* >= 0 */
	double		dup_cos;		/* (0, 1] */
	int			neighbours;		/* >= 1 */
	int			sigma_bins;		/* 2 .. CV_HEALTH_MAX_BINS */
	int			entropy_bins;	/* 2 .. CV_HEALTH_MAX_BINS */
	int			rank_max_members;	/* >= 2 */
} CvHealthParams;

/* One cluster's row: a value and a NULL flag per column. */
typedef struct CvClusterStats
{
	double		value[CV_STAT_COUNT];
	bool		is_null[CV_STAT_COUNT];
	bool		collapsed;		/* radius <= eps * mean_norm (set by the centroid family) */
	bool		rank_refused;	/* n > rank_max_members */
} CvClusterStats;

/* Sets a column's value (not NULL). */
static inline void
cv_stat_set(CvClusterStats *stats, CvStat column, double value)
{
	stats->value[column] = value;
	stats->is_null[column] = false;
}

/* Marks a column NULL. */
static inline void
cv_stat_null(CvClusterStats *stats, CvStat column)
{
	stats->value[column] = 0;
	stats->is_null[column] = true;
}

/* The column names of STATISTICS.md, in order. */
extern const char *const cv_stat_names[CV_STAT_COUNT];

/*
 * Every centroid, for the neighbour family and the global centroid:
 * k centroids of d float64 (row-major), with each cluster's n, mean_dist
 * and mean_norm.
 */
typedef struct CvCentroidSet
{
	int64_t		k;
	int			d;
	const double *centroids;
	const int64_t *n;
	const double *mean_dist;
	const double *mean_norm;
} CvCentroidSet;

/* Precomputed per centroid: its `neighbours` nearest other centroids. */
typedef struct CvNeighbourTable
{
	int64_t		k;
	int			m;				/* min(neighbours, k - 1) */
	int64_t    *nearest;		/* k x m cluster indexes, nearest first */
	double	   *nearest_dist;	/* k x m float64 distances */
	double	   *db_ratio;		/* k: max over all other clusters (coinciding: 0) */
} CvNeighbourTable;

/* 1. Centroid family except novelty and between_ss; writes the centroid (d float64). */
extern void cv_health_centroid(const float *x, int64_t n, int d, const CvHealthParams *params,
							   double *centroid, CvClusterStats *out);

/* g: the mean of all rows = the n-weighted mean of the centroids (float64, d). */
extern void cv_health_global_centroid(const CvCentroidSet *set, double *global);

/* mean ||x|| over all rows: the scale for "g counts as 0". */
extern double cv_health_global_mean_norm(const CvCentroidSet *set);

/* 1. novelty and between_ss, which need g. */
extern void cv_health_finish_centroid(const double *centroid, const double *global,
									  double global_mean_norm, int d, CvClusterStats *out);

/* 2. Two-means; side[i] = 0 (a) or 1 (b) after the third iteration (n bytes); -1: out of memory. */
extern int	cv_health_two_means(const float *x, int64_t n, int d, uint8_t *side,
								CvClusterStats *out);

/*
 * Polled between blocks of the pairwise pass and of the neighbour table
 * (well under a second apart at d = 1024); when it returns true the work
 * stops and its function returns CV_HEALTH_STOPPED (the pairwise columns
 * NULL, the table empty).  NULL (the default): never stop.  The SQL layer
 * points it at "an interrupt is pending", so a cancel or statement_timeout
 * ends a large cluster's pass or a table over many clusters without
 * waiting for it.
 */
extern bool (*cv_health_stop_requested) (void);
extern bool cv_health_should_stop(void);

#define CV_HEALTH_STOPPED (-2)

/*
 * 3. Pairwise class, both passes.  side: the two-means assignment (NULL when
 * n < 2).  sigma_override: NaN to compute sigma from the histogram, or a
 * value to evaluate the pass-2 statistics at (the GPU tests' per-cluster sigma).
 * Returns 0, -1 when memory ran out, or CV_HEALTH_STOPPED (the columns are
 * then NULL).
 */
extern int	cv_health_pairwise(const float *x, int64_t n, int d, const uint8_t *side,
							   const CvHealthParams *params, double sigma_override,
							   CvClusterStats *out);

/*
 * 5. The nearest other centroids of every centroid; free with
 * cv_health_neighbour_free.  Returns 0, -1 when memory ran out, or
 * CV_HEALTH_STOPPED (the table then holds nothing).
 */
extern int	cv_health_neighbour_prepare(const CvCentroidSet *set, int neighbours,
										CvNeighbourTable *table);
extern void cv_health_neighbour_free(CvNeighbourTable *table);

/* 5. Neighbour family for cluster `index` of the set. */
extern void cv_health_neighbour(const float *x, int64_t n, int d, int64_t index,
								const CvCentroidSet *set, const CvNeighbourTable *table,
								CvClusterStats *out);

/* 4. Gaussian potential at the centroid (needs sigma and nearest_dist). */
extern void cv_health_potential(const float *x, int64_t n, int d, const double *centroid,
								int64_t k, CvClusterStats *out);

/*
 * 6. effective_rank, or NULL with rank_refused set when n > rank_max_members.
 * Returns 0, -1 when out of memory, or CV_HEALTH_STOPPED.
 */
extern int	cv_health_effective_rank(const float *x, int64_t n, int d, const double *centroid,
									 const CvHealthParams *params, CvClusterStats *out);

#endif
