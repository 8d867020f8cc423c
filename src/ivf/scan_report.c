/*
 * scan_report.c: EXPLAIN ANALYZE tells whether the GPU served the index
 * scans of cvivf and cvlattice, or why not.
 *
 * PostgreSQL 15 gives an index access method no say in a plan node's
 * EXPLAIN output, so the scans count their outcomes in this backend and an
 * ExplainOneQuery hook prints one line after the plan, in text format:
 *
 *   clustervec: 1 index scan on the GPU worker (2 answers, 320 candidates)
 *   clustervec: 1 index scan on the CPU: no mirror of the index yet
 *
 * Other formats are left as they are (a property after the plan's group
 * would make invalid JSON or XML).
 */
#include "postgres.h"

#include "commands/explain.h"
#include "executor/instrument.h"
#include "lib/stringinfo.h"
#include "portability/instr_time.h"
#include "tcop/tcopprot.h"

#include "ivf/scan_report.h"

typedef struct ScanReport
{
	int64		outcomes[CV_SCAN_OUTCOMES];
	int64		answers;
	int64		candidates;
	int64		takeovers;
} ScanReport;

static ScanReport report;
static ExplainOneQuery_hook_type previous_explain = NULL;

static const char *const why[CV_SCAN_OUTCOMES] = {
	[CV_SCAN_GPU] = "",
	[CV_SCAN_CPU_OFF] = "clustervec.gpu is off",
	[CV_SCAN_CPU_NO_WORKER] = "no GPU worker is ready",
	[CV_SCAN_CPU_NO_MIRROR] = "no mirror of the index yet (one is being made)",
	[CV_SCAN_CPU_EMPTY] = "the index was built on an empty table",
	[CV_SCAN_CPU_LATTICE] = "its cvlattice scan keys are not label conditions the GPU takes",
	[CV_SCAN_CPU_FILLED] = "rows were inserted into freed slots of its lists since the mirror was made",
	[CV_SCAN_CPU_FAILED] = "the GPU worker failed the request",
	[CV_SCAN_CPU_BUSY] = "the GPU worker was busy past clustervec.gpu_max_wait",
};

void
cv_scan_report(CvScanOutcome outcome)
{
	report.outcomes[outcome]++;
}

void
cv_scan_report_answer(int candidates)
{
	report.answers++;
	report.candidates += candidates;
}

void
cv_scan_report_takeover(void)
{
	report.takeovers++;
}

/* "N index scan(s)" */
static void
append_scans(StringInfo line, int64 count)
{
	appendStringInfo(line, INT64_FORMAT " index scan%s", count, count == 1 ? "" : "s");
}

static void
print_report(ExplainState *es)
{
	StringInfoData line;
	int64		cpu = 0;

	for (int o = CV_SCAN_CPU_OFF; o < CV_SCAN_OUTCOMES; o++)
		cpu += report.outcomes[o];
	if (report.outcomes[CV_SCAN_GPU] == 0 && cpu == 0)
		return;
	initStringInfo(&line);
	if (report.outcomes[CV_SCAN_GPU] > 0)
	{
		append_scans(&line, report.outcomes[CV_SCAN_GPU]);
		appendStringInfo(&line, " on the GPU worker (" INT64_FORMAT " answer%s, " INT64_FORMAT
						 " candidates%s)", report.answers, report.answers == 1 ? "" : "s",
						 report.candidates,
						 report.takeovers > 0 ? ", then the CPU continued" : "");
	}
	for (int o = CV_SCAN_CPU_OFF; o < CV_SCAN_OUTCOMES; o++)
	{
		if (report.outcomes[o] == 0)
			continue;
		if (line.len > 0)
			appendStringInfoString(&line, "; ");
		append_scans(&line, report.outcomes[o]);
		appendStringInfo(&line, " on the CPU: %s", why[o]);
	}
	ExplainPropertyText("clustervec", line.data, es);
	pfree(line.data);
}

/* What PostgreSQL's ExplainOneQuery does for a planned query, as of 15. */
static void
plan_and_explain(Query *query, int cursor_options, IntoClause *into, ExplainState *es,
				 const char *query_string, ParamListInfo params, QueryEnvironment *query_env)
{
	PlannedStmt *plan;
	instr_time	start,
				duration;
	BufferUsage before = pgBufferUsage,
				usage;

	INSTR_TIME_SET_CURRENT(start);
	plan = pg_plan_query(query, query_string, cursor_options, params);
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	memset(&usage, 0, sizeof(usage));
	BufferUsageAccumDiff(&usage, &pgBufferUsage, &before);
	ExplainOnePlan(plan, into, es, query_string, params, query_env, &duration,
				   es->buffers ? &usage : NULL);
}

static void
explain_one_query(Query *query, int cursor_options, IntoClause *into, ExplainState *es,
				  const char *query_string, ParamListInfo params, QueryEnvironment *query_env)
{
	memset(&report, 0, sizeof(report));
	if (previous_explain)
		previous_explain(query, cursor_options, into, es, query_string, params, query_env);
	else
		plan_and_explain(query, cursor_options, into, es, query_string, params, query_env);
	if (es->analyze && es->format == EXPLAIN_FORMAT_TEXT)
		print_report(es);
}

void
cv_scan_report_install_hook(void)
{
	previous_explain = ExplainOneQuery_hook;
	ExplainOneQuery_hook = explain_one_query;
}
