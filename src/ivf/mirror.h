/*
 * mirror.h: a cvivf index's mirror in the GPU worker, from the access
 * method's side: the key of its current generation, uploading it
 * (mirror_upload.c), and merging a search's answer with the rows inserted
 * since (mirror_merge.c).  The requests themselves are src/gpu's.
 */
#ifndef CV_IVF_MIRROR_H
#define CV_IVF_MIRROR_H

#include "postgres.h"

#include "gpu/gpu.h"
#include "ivf/ivf.h"
#include "utils/rel.h"

/* The key an index's mirror has now: database, relfilenode, generation, shape. */
extern void cvivf_mirror_key(Relation index, const CvIvfMetaPageData *meta,
							 CvGpuMirrorKey *key);

/*
 * Uploads the index's mirror unless one with its key exists or is being
 * made (then returns true at once); refresh: also when the ready one holds
 * another number of rows than the index now (rows inserted since, into
 * freed slots too), which it replaces once made.  False with *error when the worker
 * failed.  An index that VACUUM keeps changing during the upload is left
 * unmirrored (true, no mirror); a directory that disagrees with its lists
 * in a still index is an ERROR (corruption).
 */
extern bool cvivf_mirror_upload(Relation index, bool refresh, CvGpuError *error);

/* Asks a background worker to upload the index's mirror (at most once per generation). */
extern void cvivf_mirror_request(Relation index, const CvGpuMirrorKey *key);

/* A candidate row of one query: a hit, or a row inserted after the mirror. */
typedef struct CvIvfMirrorCandidate
{
	ItemPointerData tid;
	double		distance;
	int64		order;			/* ties: the hits' order, then page order */
} CvIvfMirrorCandidate;

/*
 * Query `in_batch` of an answer, merged with the rows inserted after the
 * mirror into the lists the worker probed for it (read from the pages
 * when the directory says a list grew), sorted by distance.  The first
 * *trusted are certainly in order; past them mirrored rows beyond the hits
 * could come first, unless *exhausted (the probed lists held fewer rows
 * than the answer's width), when every candidate is trusted.  *stale: an
 * insert filled a freed slot inside a probed list, which the mirror does
 * not hold: the candidates may miss rows, and the caller reads on the CPU.
 */
extern void cvivf_mirror_merge(Relation index, const CvIvfMetaPageData *meta,
							   const CvIvfListEntry *directory, const float *query,
							   const CvGpuSearchAnswer *answer, int in_batch,
							   CvIvfMirrorCandidate **candidates, int *trusted,
							   bool *exhausted, bool *stale);

#endif
