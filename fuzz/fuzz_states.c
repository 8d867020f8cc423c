/*
 * fuzz_states.c: the register machine of the aggregate harnesses.
 */
#include "postgres.h"

#include "pgshim.h"
#include "fuzz_states.h"

void
fz_machine_init(FzMachine *m, const uint8_t *data, size_t size)
{
	m->in.data = data;
	m->in.size = size;
	m->in.pos = 0;
	for (int i = 0; i < FZ_REGISTERS; i++)
		m->state[i] = fz_make_state(m);
}

Datum
fz_make_state(FzMachine *m)
{
	uint8_t		how = fz_u8(&m->in);

	if (how < 32)
	{
		FuzzReader	zero = {(const uint8_t *) "\0\0\0\0\0\0\0\0", 8, 0};

		return fz_float8_array(&zero, 1, 0);
	}
	return fz_float8_array(&m->in, how % 18, fz_u8(&m->in));
}

bool
fz_machine_call(FzMachine *m, const FzCall *call, Datum *result, bool *isnull)
{
	Datum		args[2] = {0, 0};
	bool		nulls[2] = {false, false};
	Datum		before[2] = {0, 0};
	bool		owned[2] = {call->transition && call->in_aggregate, false};
	bool		ok;

	for (int i = 0; i < call->nargs; i++)
	{
		if (call->kind[i] == FZ_ARG_NULL)
			nulls[i] = true;
		else if (call->kind[i] == FZ_ARG_CVEC)
			args[i] = fz_cvec(&m->in, 1 + fz_u8(&m->in) % 6);
		else
			args[i] = m->state[call->reg[i]];
	}
	if (owned[0] && !nulls[0] && call->nargs == 2 &&
		DatumGetPointer(args[1]) == DatumGetPointer(args[0]))
		args[1] = fz_copy(args[1]);	/* the state is never also the other argument */
	for (int i = 0; i < call->nargs; i++)
	{
		if (owned[i] || nulls[i])
			continue;
		if (fz_u8(&m->in) & 1)
			args[i] = fz_short_copy(args[i]);
		before[i] = fz_copy(args[i]);
	}
	shim_in_aggregate = call->in_aggregate;
	ok = fz_call(call->fn, call->nargs, args, nulls, result, isnull);
	for (int i = 0; i < call->nargs; i++)
		if (!owned[i] && !nulls[i])
			fz_check_unchanged(before[i], args[i], call->name);
	return ok;
}

void
fz_keep_state(FzMachine *m, int a, Datum result, bool isnull)
{
	if (isnull)
		m->state[a] = fz_make_state(m);
	else if (DatumGetPointer(result) != DatumGetPointer(m->state[a]))
		m->state[a] = fz_plain_copy(result);
	else
		m->state[a] = result;
}
