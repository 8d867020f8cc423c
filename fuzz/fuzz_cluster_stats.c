/*
 * fuzz_cluster_stats.c: the cluster_stats(cvec) aggregate over its float8[]
 * states {d, n, M2, m, norm_mean, norm_M2, mean_1..d, unit_1..d}, driven by
 * the register machine of fuzz_states.h: cluster_stats_accum,
 * cluster_stats_combine and cluster_stats_final (not STRICT: NULL
 * arguments too) on any states, inside and outside an aggregate.  The row
 * cluster_stats_final returns is read column by column; its centroid must
 * be a valid cvec; no argument the function does not own may change.
 */
#include "postgres.h"

#include "catalog/pg_type.h"

#include "fuzz_states.h"
#include "pgshim.h"

extern PGDLLEXPORT Datum cluster_stats_accum(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cluster_stats_combine(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cluster_stats_final(PG_FUNCTION_ARGS);

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* cluster_stats_result: n, centroid, centroid_norm, inertia, cohesion, mean_norm, norm_cv, embedding_quality */
static TupleDesc result_desc;

static FzArg
arg_kind(uint8_t bits, FzArg otherwise)
{
	return (bits & 7) == 0 ? FZ_ARG_NULL : otherwise;
}

static void
step(FzMachine *m)
{
	uint8_t		op = fz_u8(&m->in);
	uint8_t		nulls = fz_u8(&m->in);
	int			a = (op >> 3) % FZ_REGISTERS;
	int			b = (op >> 5) % FZ_REGISTERS;
	bool		in_aggregate = (op >> 7) & 1;
	FzCall		accum = {cluster_stats_accum, "cluster_stats_accum", 2,
	{arg_kind(nulls, FZ_ARG_REGISTER), arg_kind(nulls >> 3, FZ_ARG_CVEC)}, {a, 0}, true, in_aggregate};
	FzCall		combine = {cluster_stats_combine, "cluster_stats_combine", 2,
	{arg_kind(nulls, FZ_ARG_REGISTER), arg_kind(nulls >> 3, FZ_ARG_REGISTER)}, {a, b}, true, in_aggregate};
	FzCall		final = {cluster_stats_final, "cluster_stats_final", 1,
	{arg_kind(nulls, FZ_ARG_REGISTER)}, {a}, false, in_aggregate};
	Datum		result;
	bool		isnull;

	switch (op % 4)
	{
		case 0:
			m->state[a] = fz_make_state(m);
			break;
		case 1:
		case 2:
			if (fz_machine_call(m, op % 4 == 1 ? &accum : &combine, &result, &isnull))
				fz_keep_state(m, a, result, isnull);
			break;
		case 3:
			shim_result_desc = result_desc;
			(void) fz_machine_call(m, &final, &result, &isnull);
			shim_result_desc = NULL;
			break;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const Oid types[8] = {INT8OID, InvalidOid, FLOAT8OID, FLOAT8OID, FLOAT8OID,
	FLOAT8OID, FLOAT8OID, FLOAT8OID};
	FzMachine	m;

	if (result_desc == NULL)
		result_desc = shim_tupledesc(8, types);
	fz_machine_init(&m, data, size);
	for (int i = 0; i < FZ_MAX_STEPS && fz_more(&m.in); i++)
		step(&m);
	shim_reset();
	return 0;
}
