/*
 * handler.c: the cvivf access method handler.  It only wires callbacks; each
 * family lives in its own file.
 */
#include "postgres.h"

#include "access/amapi.h"
#include "commands/progress.h"
#include "commands/vacuum.h"
#include "fmgr.h"

#include "compat.h"
#include "ivf/ivf.h"

PG_FUNCTION_INFO_V1(cvivfhandler);

/* Names of the build's sub-phases for pg_stat_progress_create_index. */
char *
cvivfbuildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case CVIVF_PHASE_SAMPLING:
			return "sampling";
		case CVIVF_PHASE_KMEANS:
			return "performing k-means";
		case CVIVF_PHASE_ASSIGNING:
			return "assigning tuples";
		case CVIVF_PHASE_WRITING:
			return "writing lists";
	}
	return NULL;
}

Datum
cvivfhandler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *am = makeNode(IndexAmRoutine);

	am->amstrategies = 0;
	am->amsupport = 1;
	am->amoptsprocnum = 0;
	am->amcanorder = false;
	am->amcanorderbyop = true;
	am->amcanbackward = false;
	am->amcanunique = false;
	am->amcanmulticol = false;
	am->amoptionalkey = true;
	am->amsearcharray = false;
	am->amsearchnulls = false;
	am->amstorage = false;
	am->amclusterable = false;
	am->ampredlocks = false;
	am->amcanparallel = false;
	/* pass 2 of a build runs in parallel workers (build_parallel.c) */
	CV_SET_CAN_BUILD_PARALLEL(am);
	am->amcaninclude = false;
	am->amusemaintenanceworkmem = false;
	am->amparallelvacuumoptions = VACUUM_OPTION_PARALLEL_BULKDEL;
	am->amkeytype = InvalidOid;

	am->ambuild = cvivfbuild;
	am->ambuildempty = cvivfbuildempty;
	am->aminsert = cvivfinsert;
	am->ambulkdelete = cvivfbulkdelete;
	am->amvacuumcleanup = cvivfvacuumcleanup;
	am->amcanreturn = NULL;
	am->amcostestimate = cvivfcostestimate;
	am->amoptions = cvivfoptions;
	am->amproperty = NULL;
	am->ambuildphasename = cvivfbuildphasename;
	am->amvalidate = cvivfvalidate;
	am->amadjustmembers = NULL;
	am->ambeginscan = cvivfbeginscan;
	am->amrescan = cvivfrescan;
	am->amgettuple = cvivfgettuple;
	am->amgetbitmap = NULL;
	am->amendscan = cvivfendscan;
	am->ammarkpos = NULL;
	am->amrestrpos = NULL;
	am->amestimateparallelscan = NULL;
	am->aminitparallelscan = NULL;
	am->amparallelrescan = NULL;

	PG_RETURN_POINTER(am);
}
