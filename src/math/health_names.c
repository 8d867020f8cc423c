/*
 * health_names.c: the column names of the 38 statistics, spelled exactly as
 * STATISTICS.md spells them, in its order (the CvStat numbering).
 */
#include "health.h"

const char *const cv_stat_names[CV_STAT_COUNT] = {
	/* 1. centroid family */
	"n",
	"centroid_norm",
	"inertia",
	"mean_dist",
	"spread",
	"skew",
	"kurtosis",
	"radius",
	"cohesion",
	"outlier_ratio",
	"core_periphery_ratio",
	"mean_norm",
	"norm_cv",
	"embedding_quality",
	"novelty",
	"between_ss",
	/* 2. two-means sub-structure */
	"split_gain",
	"split_balance",
	"split_separation",
	/* 3. tiled pairwise class */
	"mean_pairwise_dist",
	"sigma",
	"mean_pairwise_cos",
	"redundancy",
	"redundant_members",
	"breadth",
	"local_density",
	"dist_entropy",
	"entanglement",
	"split_silhouette",
	/* 4. Gaussian potential */
	"potential_depth",
	"curvature",
	"escape_probability",
	/* 5. neighbour family */
	"nearest_cluster",
	"nearest_dist",
	"db_ratio",
	"neighbour_relevance",
	"centroid_silhouette",
	/* 6. Gram-bounded class */
	"effective_rank"
};
