/*
 * health_sql.h: the SQL side of cluster_health.  source.c reads the input
 * (a table or a query) once, into a sort by (label, order key, tiebreak);
 * engine.c runs the statistics of src/math over chunks of whole clusters
 * read back from that sort; functions.c holds the SQL entry points.
 */
#ifndef CV_HEALTH_SQL_H
#define CV_HEALTH_SQL_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "fmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplesort.h"

#include "math/health.h"

extern int	cv_health_memory_kb;

/* Which families a run computes (the summary needs fewer). */
#define HEALTH_FAMILY_ALL 0
#define HEALTH_FAMILY_SUMMARY 1

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

/* engine.c */
extern void health_run(HealthRun *run);

#endif
