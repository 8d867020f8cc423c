/*
 * fuzz_cvec_aggregate.c: avg(cvec) and sum(cvec) over float8[] states
 * {n, s_1, ..., s_d}, driven by the register machine of fuzz_states.h:
 * cvec_accum, cvec_combine, cvec_avg and cvec_sum (all STRICT) on any
 * states, inside and outside an aggregate.  Every cvec returned must be
 * valid (finite elements, the right size); no argument the function does
 * not own may change.
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "type/cvec.h"

#include "fuzz_states.h"
#include "pgshim.h"

extern PGDLLEXPORT Datum cvec_accum(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_combine(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_avg(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_sum(PG_FUNCTION_ARGS);

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
step(FzMachine *m)
{
	uint8_t		op = fz_u8(&m->in);
	int			a = (op >> 3) % FZ_REGISTERS;
	int			b = (op >> 5) % FZ_REGISTERS;
	bool		in_aggregate = (op >> 7) & 1;
	FzCall		accum = {cvec_accum, "cvec_accum", 2, {FZ_ARG_REGISTER, FZ_ARG_CVEC}, {a, 0}, true, in_aggregate};
	FzCall		combine = {cvec_combine, "cvec_combine", 2, {FZ_ARG_REGISTER, FZ_ARG_REGISTER}, {a, b}, true, in_aggregate};
	FzCall		avg = {cvec_avg, "cvec_avg", 1, {FZ_ARG_REGISTER}, {a}, false, in_aggregate};
	FzCall		sum = {cvec_sum, "cvec_sum", 1, {FZ_ARG_REGISTER}, {a}, false, in_aggregate};
	Datum		result;
	bool		isnull;

	switch (op % 5)
	{
		case 0:
			m->state[a] = fz_make_state(m);
			break;
		case 1:
		case 2:
			if (fz_machine_call(m, op % 5 == 1 ? &accum : &combine, &result, &isnull))
			{
				if (isnull)
				{
					fprintf(stderr, "fuzz: a STRICT transition function returned NULL\n");
					abort();
				}
				fz_keep_state(m, a, result, isnull);
			}
			break;
		default:
			if (fz_machine_call(m, op % 5 == 3 ? &avg : &sum, &result, &isnull) && !isnull)
				shim_check_cvec(result, op % 5 == 3 ? "cvec_avg" : "cvec_sum");
			break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzMachine	m;

	fz_machine_init(&m, data, size);
	for (int i = 0; i < FZ_MAX_STEPS && fz_more(&m.in); i++)
		step(&m);
	shim_reset();
	return 0;
}
