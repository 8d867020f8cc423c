/*
 * build.h: what the serial build (build.c) shares with the parallel
 * assignment pass (build_parallel.c).
 *
 * A build has three passes (build.c's header says which).  Pass 2, the heap
 * scan that assigns every row to its nearest centroid, is the expensive one
 * and the only one that may run in parallel workers: each participant
 * assigns the rows of the blocks it scanned and feeds its own share of one
 * parallel tuplesort.  The index is the serial build's because
 *  - the centroids are: k-means runs in the leader alone, before the
 *    workers, on the sample pass 1 drew from a scan that always starts at
 *    block 0 (never a synchronized scan);
 *  - each row's list is: src/math's assignment is the exact float64 argmin,
 *    whatever the batch it came in and the SIMD variant;
 *  - the order is: the sort key (list, heap TID) is total, so the merge of
 *    the runs gives each list's rows in the serial sort's order, and pass 3
 *    writes pages and sums the drift baseline from that one sequence.
 */
#ifndef CV_IVF_BUILD_H
#define CV_IVF_BUILD_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "port/atomics.h"
#include "storage/dsm.h"
#include "storage/shm_toc.h"
#include "utils/tuplesort.h"

#include "gpu/gpu.h"
#include "ivf/ivf.h"
#include "math/nearest.h"
#include "math/prng.h"

typedef struct CvIvfParallelBuild CvIvfParallelBuild;

typedef struct CvIvfBuildState
{
	Relation	heap;
	Relation	index;
	CvMetric	metric;
	int			dimensions;		/* 0 until the first vector */
	MemoryContext tuple_context;
	/* pass 1 */
	const CvIvfOptions *options;
	double		estimated_rows;
	int			estimated_lists;
	CvPrng		prng;
	float	   *sample;
	int64		sample_capacity;
	int64		sample_count;
	bool		sample_capped;	/* maintenance_work_mem held the reservoir down */
	int64		rows;			/* rows with an indexable vector */
	double		heap_tuples;	/* live rows the scan read, indexable or not */
	bool		use_gpu;		/* the GPU worker runs k-means and assignment */
	bool		gpu_served;
	/* pass 2 */
	CvGpuAssigner *gpu;			/* NULL: the CPU assigns */
	int			batch_capacity;
	const float *centroids;
	int			lists;
	CvNearest  *nearest;		/* NULL until the CPU assigns */
	float	   *batch;
	ItemPointerData *batch_tids;
	int32	   *batch_lists;
	int			batch_count;
	Tuplesortstate *sort;
	TupleTableSlot *slot;		/* rows going into the sort */
	TupleTableSlot *sorted_slot;	/* rows coming out of it */
	int64		assigned;		/* by this process */
	/* pass 2 in parallel: NULL in a serial build */
	pg_atomic_uint64 *shared_assigned;	/* by every participant */
	bool		report_progress;	/* false in a worker: the leader reports */
	CvIvfParallelBuild *parallel;	/* the leader's, until the lists are written */
	/* pass 3 */
	CvIvfDistanceSums *baseline;
} CvIvfBuildState;

/* build.c: the passes' pieces a retrain shares (src/ivf/retrain.c) */
extern const CvIvfOptions *cvivf_build_options(Relation index);
extern void cvivf_check_quantized_dimensions(Relation index, const CvIvfOptions *options,
											 int dimensions);
extern int	cvivf_build_choose_lists(const CvIvfOptions *options, double rows);
extern void cvivf_build_sample_callback(Relation index, ItemPointer tid, Datum *values,
										bool *isnull, bool alive, void *arg);
extern void cvivf_build_report_capped_sample(const CvIvfBuildState *state);
extern int	cvivf_build_centroids(CvIvfBuildState *state, float **centroids, double **norms);
extern void cvivf_build_assign_begin(CvIvfBuildState *state);
extern void cvivf_build_write_lists(CvIvfBuildState *state, CvIvfBuildWriter *writer);

/* build.c: pass 2's pieces, the same in the serial build and every participant */
extern TupleDesc cvivf_build_sort_desc(Relation index);
extern Tuplesortstate *cvivf_build_sort_begin(TupleDesc desc, int work_mem,
											  SortCoordinate coordinate);
extern void cvivf_build_participant_init(CvIvfBuildState *state, Relation heap,
										 Relation index, CvMetric metric, int dimensions,
										 const float *centroids, int lists);
extern void cvivf_build_assign_callback(Relation index, ItemPointer tid, Datum *values,
										bool *isnull, bool alive, void *arg);
extern void cvivf_build_assign_end(CvIvfBuildState *state);

/* build_parallel.c */
extern bool cvivf_parallel_assign(CvIvfBuildState *state, IndexInfo *info);
extern void cvivf_parallel_end(CvIvfParallelBuild *build);
extern PGDLLEXPORT void cvivf_parallel_build_main(dsm_segment *seg, shm_toc *toc);

#endif
