/*
 * fuzz_states.h: the register machine the aggregate harnesses share.  Its
 * registers hold float8[] states; a step makes a state from raw float8s
 * (NaN, infinities and every array shape included: a user can pass any
 * float8[] by hand, or name any INITCOND in CREATE AGGREGATE) or calls a
 * transition, combine or final function on them, inside an aggregate or
 * outside one.
 */
#ifndef CV_FUZZ_STATES_H
#define CV_FUZZ_STATES_H

#include "postgres.h"

#include "fmgr.h"

#include "fuzz_common.h"

#define FZ_REGISTERS 4
#define FZ_MAX_STEPS 48

typedef struct FzMachine
{
	FuzzReader	in;
	Datum		state[FZ_REGISTERS];
} FzMachine;

/* What a call passes: two registers, a register and a cvec, or NULLs. */
typedef enum FzArg
{
	FZ_ARG_REGISTER,
	FZ_ARG_CVEC,
	FZ_ARG_NULL
} FzArg;

typedef struct FzCall
{
	PGFunction	fn;
	const char *name;
	int			nargs;
	FzArg		kind[2];
	int			reg[2];
	bool		transition;		/* owns its first argument inside an aggregate */
	bool		in_aggregate;
} FzCall;

/* Fills the registers with fresh states from the input. */
extern void fz_machine_init(FzMachine *m, const uint8_t *data, size_t size);

/* A state of 0..17 raw values in any shape, or the initial state '{0}'. */
extern Datum fz_make_state(FzMachine *m);

/*
 * Makes the call.  Only a transition function inside an aggregate owns its
 * first argument (the executor's state, never a short header); every other
 * argument may arrive with a short header, as read from a table, and must
 * come back unchanged.
 */
extern bool fz_machine_call(FzMachine *m, const FzCall *call, Datum *result, bool *isnull);

/*
 * A transition result becomes register a's state: the executor copies a new
 * object into its own memory, here always with a 4-byte header, as a state
 * the executor holds has (INITCOND and the functions' results).
 */
extern void fz_keep_state(FzMachine *m, int a, Datum result, bool isnull);

#endif
