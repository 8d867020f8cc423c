/*
 * fuzz_cluster_health.c: cluster_health's and cluster_health_summary's
 * parameter checks (read_parameters in src/health/functions.c), and what
 * the statistics do with every parameter set the checks accept.
 *
 * The input gives the eleven arguments (any may be NULL; the numbers are
 * either near the valid ranges or raw bits) and a small source: up to 4
 * clusters of up to 6 members of up to 4 dimensions, integer or text
 * labels.  The real functions.c and engine.c run; the source is read
 * through a fake sort (health_read_table below stands for source.c), and
 * the GPU is never used.  Every row returned is read column by column
 * (functions.c itself refuses a non-NULL NaN with an elog, which aborts).
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "gpu/gpu.h"
#include "health/gpu_passes.h"
#include "health/health_sql.h"
#include "type/cvec.h"

#include "fuzz_common.h"
#include "pgshim.h"

extern PGDLLEXPORT Datum cluster_health(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cluster_health_summary(PG_FUNCTION_ARGS);

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CLUSTERS 4
#define MAX_MEMBERS 6
#define MAX_DIMS 4
#define HEALTH_ARGS 11

/* The source the fake sort returns, in sort order (label, member order). */
typedef struct FakeSource
{
	bool		text_labels;
	int			d;
	int64		rows;
	int64		next;
	Datum		label[MAX_CLUSTERS * MAX_MEMBERS];
	Datum		vector[MAX_CLUSTERS * MAX_MEMBERS];
} FakeSource;

static FakeSource source;
static bool source_read;

/* ---------------------------------------------------------------------
 * What engine.c and functions.c need besides the backend
 * --------------------------------------------------------------------- */

bool
cv_gpu_should_use(void)
{
	return false;
}

uint64
cv_gpu_device_free_bytes(void)
{
	abort();
}

void
cv_gpu_count_served(CvGpuServed what)
{
	(void) what;
	abort();
}

bool
health_gpu_centroid_pass(HealthRun *run, const HealthChunkView *chunk)
{
	(void) run;
	(void) chunk;
	abort();
}

bool
health_gpu_prepare(HealthRun *run, const CvCentroidSet *set)
{
	(void) run;
	(void) set;
	abort();
}

bool
health_gpu_members_pass(HealthRun *run, const HealthChunkView *chunk)
{
	(void) run;
	(void) chunk;
	abort();
}

bool
health_gpu_members_pass_kept(HealthRun *run)
{
	(void) run;
	abort();
}

void
health_gpu_release(HealthRun *run)
{
	(void) run;
}

/* distributed.c: the fake source is a plain table, never a Citus one. */
bool
health_run_distributed(HealthRun *run, Oid schema, Oid relid, const char *label_column,
					   const char *vector_column, const char *order_column)
{
	(void) run;
	(void) schema;
	(void) relid;
	(void) label_column;
	(void) vector_column;
	(void) order_column;
	return false;
}

/* lsyscache's: the schema distributed.c would look the shard functions up in. */
Oid
get_func_namespace(Oid funcid)
{
	(void) funcid;
	return InvalidOid;
}

/* source.c's table reader: hands the fake source to the engine through its sort. */
void
health_read_table(HealthInput *input, Oid relid, const char *label_column,
				  const char *vector_column, const char *order_column)
{
	TupleTableSlot *slot = palloc0(sizeof(TupleTableSlot));

	(void) relid;
	if (strlen(label_column) == 0 || strlen(vector_column) == 0 ||
		(order_column != NULL && strlen(order_column) == 0))
		abort();
	slot->tts_values = palloc0(sizeof(Datum) * HEALTH_COL_TIEBREAK);
	slot->tts_isnull = palloc0(sizeof(bool) * HEALTH_COL_TIEBREAK);
	input->sort = (Tuplesortstate *) &source;
	input->slot = slot;
	input->text_labels = source.text_labels;
	input->dimensions = source.rows > 0 ? source.d : 0;
	input->rows = source.rows;
	input->skipped = 0;
	source_read = true;
}

void
health_read_query(HealthInput *input, const char *query)
{
	(void) input;
	(void) query;
	abort();
}

void
tuplesort_rescan(Tuplesortstate *state)
{
	if (state != (Tuplesortstate *) &source)
		abort();
	source.next = 0;
}

bool
tuplesort_gettupleslot(Tuplesortstate *state, bool forward, bool copy, TupleTableSlot *slot,
					   Datum *abbrev)
{
	(void) copy;
	(void) abbrev;
	if (state != (Tuplesortstate *) &source || !forward)
		abort();
	if (source.next >= source.rows)
		return false;
	slot->tts_values[HEALTH_COL_LABEL - 1] = source.label[source.next];
	slot->tts_values[HEALTH_COL_VECTOR - 1] = source.vector[source.next];
	slot->tts_values[HEALTH_COL_ORDER - 1] = Int64GetDatum(source.next);
	slot->tts_values[HEALTH_COL_TIEBREAK - 1] = Int64GetDatum(source.next);
	slot->tts_nvalid = HEALTH_COL_TIEBREAK;
	source.next++;
	return true;
}

void
tuplesort_end(Tuplesortstate *state)
{
	if (state != (Tuplesortstate *) &source)
		abort();
}

void
ExecDropSingleTupleTableSlot(TupleTableSlot *slot)
{
	(void) slot;
}

/* ---------------------------------------------------------------------
 * The harness
 * --------------------------------------------------------------------- */

/* Near the valid ranges (small numbers) half of the time, any bits otherwise. */
static int32
int_argument(FuzzReader *r)
{
	uint8_t		mode = fz_u8(r);

	return mode < 128 ? (int32) (mode % 16) - 2 : (int32) fz_u32(r);
}

static double
float_argument(FuzzReader *r)
{
	uint8_t		mode = fz_u8(r);

	return mode < 128 ? (double) mode / 32.0 - 0.5 : fz_f8(r);
}

/* Up to MAX_CLUSTERS clusters of up to MAX_MEMBERS members, labels ascending. */
static void
make_source(FuzzReader *r)
{
	int			k = fz_u8(r) % (MAX_CLUSTERS + 1);

	source.text_labels = fz_u8(r) & 1;
	source.d = 1 + fz_u8(r) % MAX_DIMS;
	source.rows = 0;
	source.next = 0;
	for (int c = 0; c < k; c++)
	{
		int			n = 1 + fz_u8(r) % MAX_MEMBERS;
		Datum		label = source.text_labels
			? PointerGetDatum(cstring_to_text(psprintf("cluster %d", c)))
			: Int64GetDatum((int64) c * 7 - 10);

		for (int i = 0; i < n; i++)
		{
			Datum		v = fz_cvec(r, source.d);

			source.label[source.rows] = label;
			source.vector[source.rows++] = (fz_u8(r) & 1) ? fz_short_copy(v) : v;
		}
	}
}

static TupleDesc
health_row_desc(void)
{
	Oid			types[1 + CV_STAT_COUNT + 2];

	types[0] = INT8OID;
	for (int c = 0; c < CV_STAT_COUNT; c++)
		types[1 + c] = c == CV_STAT_N || c == CV_STAT_NEAREST_CLUSTER ? INT8OID : FLOAT8OID;
	types[1 + CV_STAT_COUNT] = TEXTOID;
	types[2 + CV_STAT_COUNT] = TEXTOID;
	return shim_tupledesc(1 + CV_STAT_COUNT + 2, types);
}

static TupleDesc
summary_desc(void)
{
	static const Oid types[6] = {INT8OID, INT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID};

	return shim_tupledesc(6, types);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static TupleDesc rows_desc;
	static TupleDesc one_row_desc;
	FuzzReader	r = {data, size, 0};
	uint8_t		form = fz_u8(&r);
	uint8_t		null_bits = fz_u8(&r) & fz_u8(&r) & fz_u8(&r);	/* each about 1 in 8 */
	NameData	names[3];
	LOCAL_FCINFO(fcinfo, HEALTH_ARGS);
	FmgrInfo	flinfo;
	ReturnSetInfo rsinfo;
	bool		summary = form & 1;
	Datum		result;

	if (rows_desc == NULL)
	{
		rows_desc = health_row_desc();
		one_row_desc = summary_desc();
	}
	memset(names, 0, sizeof(names));
	strcpy(NameStr(names[0]), "label");
	strcpy(NameStr(names[1]), "v");
	strcpy(NameStr(names[2]), "id");
	memset(&flinfo, 0, sizeof(flinfo));
	memset(&rsinfo, 0, sizeof(rsinfo));
	rsinfo.type = T_ReturnSetInfo;
	rsinfo.allowedModes = SFRM_Materialize;
	InitFunctionCallInfoData(*fcinfo, &flinfo, HEALTH_ARGS, InvalidOid, NULL,
							 summary ? NULL : (Node *) &rsinfo);
	fcinfo->args[0].value = ObjectIdGetDatum(16384);
	fcinfo->args[1].value = NameGetDatum(&names[0]);
	fcinfo->args[2].value = NameGetDatum(&names[1]);
	fcinfo->args[3].value = NameGetDatum(&names[2]);
	fcinfo->args[4].value = Float8GetDatum(float_argument(&r));
	fcinfo->args[5].value = Float8GetDatum(float_argument(&r));
	for (int i = 6; i < 10; i++)
		fcinfo->args[i].value = Int32GetDatum(int_argument(&r));
	fcinfo->args[10].value = BoolGetDatum(fz_u8(&r) & 1);
	for (int i = 0; i < HEALTH_ARGS; i++)
		fcinfo->args[i].isnull = i < 3 ? (form >> 1) % 8 == i + 1 : (null_bits >> (i - 3)) & 1;
	make_source(&r);
	source_read = false;
	shim_result_desc = summary ? one_row_desc : rows_desc;
	shim_in_aggregate = false;
	if (shim_call(summary ? cluster_health_summary : cluster_health, fcinfo, &result) &&
		!source_read)
	{
		fprintf(stderr, "fuzz: cluster_health returned without reading its source\n");
		abort();
	}
	shim_result_desc = NULL;
	shim_reset();
	return 0;
}
