/*
 * health_sql.h: the SQL side of cluster_health.  source.c reads the input
 * (a table or a query) once, into a sort by (label, order key, tiebreak);
 * engine.c runs the statistics of src/math over chunks of whole clusters
 * read back from that sort; functions.c holds the SQL entry points.
 */
#ifndef CV_HEALTH_SQL_H
#define CV_HEALTH_SQL_H

#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "fmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplesort.h"

#include "math/health.h"

extern int	cv_health_memory_kb;

/* Which families a run computes (the summary needs fewer). */
#define HEALTH_FAMILY_ALL 0
#define HEALTH_FAMILY_SUMMARY 1
#define HEALTH_FAMILY_CENTROIDS 2	/* pass 1 only: a shard's part of the first round */

/* Columns of the sort: label, vector, order key (optional), tiebreak. */
#define HEALTH_COL_LABEL 1
#define HEALTH_COL_VECTOR 2
#define HEALTH_COL_ORDER 3
#define HEALTH_COL_TIEBREAK 4

typedef struct HealthCluster
{
	Datum		label;			/* int8, or text (a copy) */
	int64		n;
	double	   *centroid;		/* d float64 */
	CvClusterStats stats;
} HealthCluster;

/*
 * Every cluster of a distributed table, in label order, as the coordinator
 * sends it to each shard (distributed.c, shard.c): a shard's clusters take
 * their neighbours, g and their numbers from it instead of from its own rows.
 */
typedef struct HealthGlobalSet
{
	int64		k;
	int			d;
	Datum	   *labels;			/* int8, or text */
	int64	   *n;
	double	   *mean_dist;
	double	   *mean_norm;
	double	   *centroids;		/* k x d */
} HealthGlobalSet;

typedef struct HealthInput
{
	Tuplesortstate *sort;		/* sorted rows, random access for two passes */
	TupleTableSlot *slot;
	bool		text_labels;
	int			dimensions;		/* 0 when there are no rows */
	int64		rows;			/* rows kept */
	int64		skipped;		/* rows with a NULL label or vector */
} HealthInput;

typedef struct HealthRun
{
	CvHealthParams params;
	int			families;
	bool		progress;
	HealthInput input;
	HealthCluster *clusters;
	int64		k;
	int64		refused;		/* clusters whose effective_rank was refused */
	void	   *globals;		/* engine.c's centroid set and neighbour table */
	const HealthGlobalSet *external;	/* on a shard: every cluster of the table */
	int64	   *global_index;	/* with external: each cluster's number in it */
	bool		use_gpu;		/* the GPU worker serves the passes (until it fails) */
	bool		gpu_served;		/* it served at least one chunk */
	struct CvGpuHealth *gpu;	/* what the worker holds for this run (gpu_passes.c) */
	int64		gpu_chunk_first;	/* the first cluster of the chunk it keeps */
	TimestampTz started;
	TimestampTz last_report;
} HealthRun;

/* source.c */
extern void health_read_table(HealthInput *input, Oid relid, const char *label_column,
							  const char *vector_column, const char *order_column);
extern void health_read_query(HealthInput *input, const char *query);

extern void health_check_column(Oid relid, const char *column, const char *role);

/* engine.c */
extern void health_run(HealthRun *run);

/* functions.c */
extern void health_read_parameters(FunctionCallInfo fcinfo, int first, HealthRun *run);
extern void health_report_notices(const HealthRun *run);

/* shard.c */
extern void health_append_double(StringInfo out, double x);
extern void health_append_double_list(StringInfo out, const double *x, int64 count,
									  char open, char close);

/* distributed.c */
extern bool health_run_distributed(HealthRun *run, Oid schema, Oid relid,
								   const char *label_column, const char *vector_column,
								   const char *order_column);

/* The label types cluster_health reads as integers, and as text. */
static inline bool
cv_label_is_integer(Oid type)
{
	return type == INT2OID || type == INT4OID || type == INT8OID;
}

static inline bool
cv_label_is_text(Oid type)
{
	return type == TEXTOID || type == VARCHAROID || type == BPCHAROID;
}

#endif
