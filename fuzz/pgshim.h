/*
 * pgshim.h: a fake backend, just large enough to run clustervec's fmgr
 * functions inside a libFuzzer harness without a server.
 *
 * pgshim.c provides the PostgreSQL symbols the fuzzed objects use (nm -u):
 * palloc and pfree on malloc, one block per allocation so AddressSanitizer
 * sees every overrun, all of them freed by shim_reset() after each input;
 * ereport's errstart/errmsg/errfinish, where an ERROR longjmps back to
 * shim_call(); arrays, StringInfo, the pq_ binary helpers, detoasting of
 * plain and short varlenas, tuples checked attribute by attribute.  What a
 * fuzzed object references but the targets never reach aborts, naming
 * itself.
 */
#ifndef CV_FUZZ_PGSHIM_H
#define CV_FUZZ_PGSHIM_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "fmgr.h"

/* What the last ERROR said (valid after shim_call returned false). */
extern int	shim_error_code;
extern char shim_error_message[1024];

/* What AggCheckCallContext answers: true, the call is inside an aggregate. */
extern bool shim_in_aggregate;

/*
 * The row type get_call_result_type and InitMaterializedSRF report; a
 * function returning rows or a composite needs one set before the call.
 */
extern TupleDesc shim_result_desc;

/*
 * Calls fn; true with *result set when it returned, false when it raised
 * an ERROR.  An ERROR with ERRCODE_INTERNAL_ERROR (elog, "can't happen")
 * aborts: a user-supplied value must never reach one.
 */
extern bool shim_call(PGFunction fn, FunctionCallInfo fcinfo, Datum *result);

/* Frees every block palloc handed out since the last reset. */
extern void shim_reset(void);

/* A row type of natts columns: INT8OID, FLOAT8OID, TEXTOID; any other type is a cvec. */
extern TupleDesc shim_tupledesc(int natts, const Oid *types);

/*
 * Aborts unless the datum is a valid cvec: a 4-byte header whose length
 * matches 1..16000 dimensions, unused = 0, every element finite.
 */
extern void shim_check_cvec(Datum value, const char *what);

/* Raises an ERROR the way the server would for an allocation it refuses. */
extern void shim_out_of_memory(size_t size) pg_attribute_noreturn();

#endif
