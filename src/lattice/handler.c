/*
 * handler.c: the cvlattice access method handler.  It only wires callbacks:
 * scans, cost and vacuum cleanup are cvivf's (src/ivf), build, insert and
 * bulk delete are cvlattice's own (src/lattice).
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/reloptions.h"
#include "commands/vacuum.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"

#include "lattice/lattice.h"

PG_FUNCTION_INFO_V1(cvlatticehandler);

/* cvlattice takes no parameters: its lists are the labels. */
static bytea *
cvlatticeoptions(Datum reloptions, bool validate)
{
	List	   *options;

	if (!validate || DatumGetPointer(reloptions) == NULL)
		return NULL;
	options = untransformRelOptions(reloptions);
	if (options != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unrecognized parameter \"%s\"", ((DefElem *) linitial(options))->defname),
				 errhint("cvlattice indexes take no parameters: each label is one list.")));
	return NULL;
}

Datum
cvlatticehandler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *am = makeNode(IndexAmRoutine);

	am->amstrategies = 0;
	am->amsupport = 1;
	am->amoptsprocnum = 0;
	am->amcanorder = false;
	am->amcanorderbyop = true;
	am->amcanbackward = false;
	am->amcanunique = false;
	am->amcanmulticol = true;	/* (vector, label) */
	am->amoptionalkey = true;
	am->amsearcharray = true;	/* label = ANY(array) */
	am->amsearchnulls = true;	/* label IS NULL: the NULL label's list */
	am->amstorage = false;
	am->amclusterable = false;
	am->ampredlocks = false;
	am->amcanparallel = false;
	am->amcaninclude = false;
	am->amusemaintenanceworkmem = false;
	am->amparallelvacuumoptions = VACUUM_OPTION_PARALLEL_BULKDEL;
	am->amkeytype = InvalidOid;

	am->ambuild = cvlatticebuild_baseline;
	am->ambuildempty = cvlatticebuildempty;
	am->aminsert = cvlatticeinsert;
	am->ambulkdelete = cvlatticebulkdelete;
	am->amvacuumcleanup = cvivfvacuumcleanup;
	am->amcanreturn = NULL;
	am->amcostestimate = cvivfcostestimate;
	am->amoptions = cvlatticeoptions;
	am->amproperty = NULL;
	am->ambuildphasename = NULL;
	am->amvalidate = cvlatticevalidate;
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
