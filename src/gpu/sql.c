/*
 * sql.c: the GPU worker's settings and SQL functions: clustervec_gpu_info()
 * and clustervec_gpu_ping(payload_bytes).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "gpu/request.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(clustervec_gpu_info);
PG_FUNCTION_INFO_V1(clustervec_gpu_ping);

int			cv_gpu_mode = CV_GPU_AUTO;
int			cv_gpu_max_wait_ms = 5;
int			cv_gpu_device = 0;
int			cv_gpu_memory_limit_mb = 0;
char	   *cv_gpu_library = NULL;

static const struct config_enum_entry gpu_options[] = {
	{"off", CV_GPU_OFF, false},
	{"auto", CV_GPU_AUTO, false},
	{"require", CV_GPU_REQUIRE, false},
	{NULL, 0, false}
};

void
cv_gpu_define_settings(void)
{
	DefineCustomEnumVariable("clustervec.gpu",
							 "Whether work goes to the GPU worker: off, auto (when it is ready), require.",
							 NULL, &cv_gpu_mode, CV_GPU_AUTO, gpu_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("clustervec.gpu_max_wait",
							"Longest a search waits for the GPU worker before it runs on the CPU (auto only).",
							"0 waits as long as it takes.",
							&cv_gpu_max_wait_ms, 5, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("clustervec.gpu_memory_limit",
							"Device memory the GPU worker may use (0: 90% of the device).",
							NULL, &cv_gpu_memory_limit_mb, 0, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MB, NULL, NULL, NULL);
	/* PostgreSQL accepts postmaster-level settings only while preloading */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("clustervec.gpu_device",
							"CUDA device the GPU worker uses.",
							NULL, &cv_gpu_device, 0, 0, 1024,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("clustervec.gpu_library",
							   "Shared library the GPU worker opens.",
							   "$libdir/clustervec_cuda_cpu runs the same protocol on the CPU.",
							   &cv_gpu_library, "$libdir/clustervec_cuda",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
}

static const char *
state_name(CvGpuWorkerState state)
{
	switch (state)
	{
		case CV_WORKER_NONE:
			return "not started";
		case CV_WORKER_STARTING:
			return "starting";
		case CV_WORKER_READY:
			return "ready";
		case CV_WORKER_UNAVAILABLE:
			return "unavailable";
		case CV_WORKER_EXITED:
			return "exited";
	}
	return "unknown";
}

/* The ready mirrors of a copy of the shared state: how many, and their device bytes. */
static void
count_mirrors(const CvGpuShared *copy, int32 *count, int64 *bytes)
{
	*count = 0;
	*bytes = 0;
	for (int m = 0; m < CV_GPU_MAX_MIRRORS; m++)
		if (copy->mirrors[m].state == CV_MIRROR_READY)
		{
			(*count)++;
			*bytes += (int64) copy->mirrors[m].bytes;
		}
}

/* Launches, the requests they answered, queue time, busy fallbacks, stopped requests. */
static void
put_batching_counters(Datum *values, bool *nulls)
{
	uint64		launches = pg_atomic_read_u64(&cv_gpu_shared->search_launches);
	uint64		requests = pg_atomic_read_u64(&cv_gpu_shared->search_requests);
	uint64		waited_us = pg_atomic_read_u64(&cv_gpu_shared->queue_wait_us);
	uint64		stopped = pg_atomic_read_u64(&cv_gpu_shared->stopped_requests);

	values[0] = Int64GetDatum((int64) launches);
	values[1] = Int64GetDatum((int64) requests);
	values[2] = Float8GetDatum(requests > 0 ? (double) waited_us / requests / 1000.0 : 0.0);
	nulls[2] = requests == 0;
	values[3] = Int64GetDatum((int64) pg_atomic_read_u64(&cv_gpu_shared->busy_fallbacks));
	values[4] = Int64GetDatum((int64) stopped);
	values[5] = Float8GetDatum(pg_atomic_read_u64(&cv_gpu_shared->last_stop_us) / 1000.0);
	nulls[5] = stopped == 0;
}

/* One row: worker state, device, memory, buffers and what the GPU served. */
Datum
clustervec_gpu_info(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[22];
	bool		nulls[22] = {0};
	CvGpuShared copy;
	int32		mirrors;
	int64		mirror_bytes;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "clustervec_gpu_info must return a composite type");
	if (cv_gpu_shared == NULL)
	{
		values[0] = CStringGetTextDatum("none");
		values[1] = CStringGetTextDatum("none");
		values[2] = CStringGetTextDatum("clustervec is not in shared_preload_libraries, so there is no GPU worker; everything runs on the CPU");
		for (int i = 3; i < 22; i++)
			nulls[i] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
	}
	SpinLockAcquire(&cv_gpu_shared->mutex);
	memcpy(&copy, cv_gpu_shared, offsetof(CvGpuShared, slots));
	SpinLockRelease(&cv_gpu_shared->mutex);
	values[0] = CStringGetTextDatum(state_name(copy.worker_state));
	values[1] = CStringGetTextDatum(copy.backend[0] ? copy.backend : "unavailable");
	values[2] = CStringGetTextDatum(copy.reason);
	nulls[2] = copy.reason[0] == '\0';
	values[3] = CStringGetTextDatum(copy.device_name);
	nulls[3] = copy.device_name[0] == '\0';
	values[4] = CStringGetTextDatum(copy.compute_capability);
	nulls[4] = copy.compute_capability[0] == '\0';
	values[5] = Int64GetDatum((int64) copy.memory_total);
	nulls[5] = copy.memory_total == 0;
	values[6] = Int64GetDatum((int64) copy.memory_free);
	nulls[6] = copy.memory_total == 0;
	count_mirrors(&copy, &mirrors, &mirror_bytes);
	values[7] = Int32GetDatum(mirrors);
	values[8] = Int64GetDatum(mirror_bytes);
	values[9] = Int64GetDatum((int64) pg_atomic_read_u64(&cv_gpu_shared->gpu_requests));
	values[10] = Int64GetDatum((int64) pg_atomic_read_u64(&cv_gpu_shared->cpu_fallbacks));
	values[11] = Int32GetDatum(copy.buffers_count);
	values[12] = Int64GetDatum((int64) copy.buffers_bytes);
	values[13] = Int64GetDatum((int64) pg_atomic_read_u64(&cv_gpu_shared->health_gpu_calls));
	values[14] = Int64GetDatum((int64) pg_atomic_read_u64(&cv_gpu_shared->build_gpu_calls));
	values[15] = Int64GetDatum((int64) pg_atomic_read_u64(&cv_gpu_shared->search_gpu_calls));
	put_batching_counters(values + 16, nulls + 16);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* One round trip through the worker, in microseconds, with payload bytes to the device and back. */
Datum
clustervec_gpu_ping(PG_FUNCTION_ARGS)
{
	int32		bytes = PG_GETARG_INT32(0);
	CvGpuRequest request = {0};
	CvGpuError	error;
	instr_time	start,
				duration;
	int64		args[1] = {bytes};

	if (bytes < 0 || (Size) bytes > CV_GPU_PING_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload_bytes must be between 0 and %zu", CV_GPU_PING_MAX_BYTES)));
	if (!cv_gpu_worker_ready())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the clustervec GPU worker is not ready"),
				 errdetail("%s", cv_gpu_shared == NULL ?
						   "clustervec is not in shared_preload_libraries." : cv_gpu_shared->reason)));
	INSTR_TIME_SET_CURRENT(start);
	/* a payload larger than a staging buffer streams through it in chunks */
	for (Size sent = 0; sent < (Size) bytes || (bytes == 0 && sent == 0); sent += CV_GPU_STAGING_BYTES)
	{
		Size		chunk = Min((Size) bytes - sent, CV_GPU_STAGING_BYTES);

		args[0] = chunk;
		if (!cv_gpu_begin(&request, CV_OP_PING, chunk > 0, &error))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the clustervec GPU worker exited before the ping")));
		if (chunk > 0)
			memset(request.payload, 0x5a, chunk);
		if (!cv_gpu_run(&request, args, 1, chunk, &error, NULL))
		{
			cv_gpu_end(&request);
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("GPU ping failed: %s", error.message)));
		}
		cv_gpu_end(&request);
		if (bytes == 0)
			break;
	}
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	PG_RETURN_FLOAT8(INSTR_TIME_GET_MICROSEC(duration));
}
