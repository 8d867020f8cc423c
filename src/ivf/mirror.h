/*
 * mirror.h: a cvivf index's mirror in the GPU worker, from the backend's
 * side (mirror.c): finding the ready mirror of an index's current
 * generation, uploading one, and searching it.
 */
#ifndef CV_IVF_MIRROR_H
#define CV_IVF_MIRROR_H

#include "postgres.h"

#include "ivf/ivf.h"
#include "utils/rel.h"
#include "worker/protocol.h"

/* The key an index's mirror has now: database, relfilenode, generation, shape. */
extern void cvivf_mirror_key(Relation index, const CvIvfMetaPageData *meta,
							 CvGpuMirrorKey *key);

/* The ready mirror with this key, or -1. */
extern int	cvivf_mirror_find(const CvGpuMirrorKey *key);

/*
 * Uploads the index's mirror unless one with its key exists or is being
 * made (then returns true at once).  False with *error when the worker
 * failed.  An index that VACUUM keeps changing during the upload is left
 * unmirrored (true, no mirror); a directory that disagrees with its lists
 * in a still index is an ERROR (corruption).
 */
extern bool cvivf_mirror_upload(Relation index, CvGpuError *error);

/* Installs the hook that drops an index's mirrors with the index (from _PG_init). */
extern void cvivf_mirror_install_hooks(void);

/* Asks a background worker to upload the index's mirror (at most once per generation). */
extern void cvivf_mirror_request(Relation index, const CvGpuMirrorKey *key);

/* The answer of one batch search: per list, the mirror's end and row counts, then the hits. */
typedef struct CvIvfMirrorAnswer
{
	char	   *block;			/* the arrays below point into it */
	int64	   *ends;			/* lists: the last mirrored tuple's (block << 32 | offset), -1 */
	int64	   *offsets;		/* lists + 1 */
	CvGpuSearchHit *hits;		/* nq x k */
} CvIvfMirrorAnswer;

/* Most queries of dimension d with k hits one request carries (0: not even one). */
extern int	cvivf_mirror_batch_queries(int lists, int d, int k);

/*
 * One batch search; fills answer with arrays of its own (free them with
 * cvivf_mirror_answer_free).  False with *error when the worker failed or
 * the mirror went away.
 */
extern bool cvivf_mirror_search(int mirror, const CvGpuMirrorKey *key, const float *queries,
								int nq, int k, int probes, CvIvfMirrorAnswer *answer,
								CvGpuError *error);
extern void cvivf_mirror_answer_free(CvIvfMirrorAnswer *answer);

/* A candidate row of one query: a hit, or a row inserted after the mirror. */
typedef struct CvIvfMirrorCandidate
{
	ItemPointerData tid;
	double		distance;
	int64		order;			/* ties: the hits' order, then page order */
} CvIvfMirrorCandidate;

/*
 * Query `in_batch` of an answer with width hits per query, merged with the
 * rows inserted after the mirror into its probed lists (read from the pages
 * when the directory says a list grew), sorted by distance.  The first
 * *trusted are certainly in order; past them mirrored rows beyond the hits
 * could come first, unless *exhausted (the probed lists held fewer rows
 * than width), when every candidate is trusted.
 */
extern void cvivf_mirror_merge(Relation index, const CvIvfMetaPageData *meta,
							   const CvIvfListEntry *directory, const float *centroids,
							   const float *query, int probes,
							   const CvIvfMirrorAnswer *answer, int in_batch, int width,
							   CvIvfMirrorCandidate **candidates, int *trusted,
							   bool *exhausted);

#endif
