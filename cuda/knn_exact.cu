// knn_exact.cu: cvcuda_knn_exact, exact k nearest neighbours by brute force.
//
// The host streams the base through the device in chunks of rows, and the
// queries in batches, so device memory stays within a budget whatever the
// input: for each batch of queries, each chunk of rows gets its distances
// (knn_distance.cu, bit for bit the CPU's), appended after the k best so far
// of each query, and the per-query top-k of that is selected on the device
// (topk_select.cu).  Only the nq x k results come back to the host.
//
// Memory is allocated per call and freed before returning (the worker's
// mirrors will keep data resident later).  The budget is the smaller of
// 1 GiB and half the free device memory; CLUSTERVEC_CUDA_KNN_BUDGET (bytes)
// overrides it, which the tests use to force many chunks and batches.
// Copies and kernels run on one stream, one after the other: copy/compute
// overlap is left for the mirrors, which remove most copies anyway.
#include <climits>
#include <cstdlib>

#include "common.cuh"
#include "knn_distance.cuh"
#include "topk_select.cuh"

// Bytes of device memory per (key, row) item: both ping-pong buffers, plus
// the segment offsets of its share of a group.
#define ITEM_BYTES (2.0 * (sizeof(uint64_t) + sizeof(long long)) + \
					2.0 * sizeof(long long) / CVCUDA_TOPK_GROUP)

// Largest query batch: the distance kernel's grid has 65535 tiles of 16 in y.
#define MAX_QUERY_BATCH (65535 * 16)

// Largest row chunk (the distance kernel counts rows in int).
#define MAX_ROW_CHUNK (1LL << 30)

// How many queries and rows one step handles.
struct KnnPlan
{
	int			query_batch;
	long long	row_chunk;
};

// The device memory one call may use.
static double
work_budget(size_t free_bytes)
{
	const char *setting = getenv("CLUSTERVEC_CUDA_KNN_BUDGET");
	double		budget = (double) free_bytes / 2;

	if (setting != nullptr && strtod(setting, nullptr) > 0)
		return strtod(setting, nullptr);
	return budget < 1073741824.0 ? budget : 1073741824.0;
}

// Splits the work so that a batch of queries with a chunk of rows fits the
// budget: as many queries as fit with a chunk of one sort group (or all the
// rows, if fewer; or fewer rows, if wider than half the budget), then the
// largest chunk of rows that still fits.
static KnnPlan
plan_knn(long long rows, int dims, int nq, int k, double budget)
{
	KnnPlan		plan;
	long long	min_chunk = rows < CVCUDA_TOPK_GROUP ? rows : CVCUDA_TOPK_GROUP;
	double		wide = budget / 2 / (dims * 4.0);	// rows in half the budget
	double		per_query = dims * 4.0 + k * 16.0 + k * ITEM_BYTES;
	double		queries,
				chunk;

	if (min_chunk > wide)
		min_chunk = wide < 1 ? 1 : (long long) wide;
	queries = budget / (per_query + min_chunk * ITEM_BYTES);
	if (queries > nq)
		queries = nq;
	if (queries > MAX_QUERY_BATCH)
		queries = MAX_QUERY_BATCH;
	plan.query_batch = queries < 1 ? 1 : (int) queries;
	chunk = (budget - plan.query_batch * per_query) /
		(plan.query_batch * ITEM_BYTES + dims * 4.0);
	if (chunk > (double) rows)
		chunk = (double) rows;
	if (chunk > (double) MAX_ROW_CHUNK)
		chunk = (double) MAX_ROW_CHUNK;
	plan.row_chunk = chunk < (double) min_chunk ? min_chunk : (long long) chunk;
	return plan;
}

// The device buffers of one call; freed on every return path.
struct KnnBuffers
{
	DeviceArray<float> queries;
	DeviceArray<float> rows;
	DeviceArray<uint64_t> keys[2];
	DeviceArray<long long> items[2];
	DeviceArray<long long> begin;
	DeviceArray<long long> end;
	DeviceArray<long long> out_index;
	DeviceArray<double> out_distance;
	TopkWork	work = {};

	~KnnBuffers()
	{
		if (work.scratch)
			(void) cudaFree(work.scratch);
	}
};

// Allocates the buffers the plan needs.
static cudaError_t
allocate_buffers(KnnBuffers *b, const KnnPlan &plan, int dims, int k)
{
	size_t		capacity = (size_t) plan.query_batch * (size_t) (k + plan.row_chunk);
	long long	segments = cvcuda_topk_segments(plan.query_batch, k + plan.row_chunk);
	size_t		results = (size_t) plan.query_batch * k;
	cudaError_t code;

	if ((code = b->queries.allocate((size_t) plan.query_batch * dims)) != cudaSuccess ||
		(code = b->rows.allocate((size_t) plan.row_chunk * dims)) != cudaSuccess ||
		(code = b->begin.allocate((size_t) segments)) != cudaSuccess ||
		(code = b->end.allocate((size_t) segments)) != cudaSuccess ||
		(code = b->out_index.allocate(results)) != cudaSuccess ||
		(code = b->out_distance.allocate(results)) != cudaSuccess)
		return code;
	for (int i = 0; i < 2; i++)
		if ((code = b->keys[i].allocate(capacity)) != cudaSuccess ||
			(code = b->items[i].allocate(capacity)) != cudaSuccess)
			return code;
	for (int i = 0; i < 2; i++)
	{
		b->work.keys[i] = b->keys[i].get();
		b->work.rows[i] = b->items[i].get();
	}
	b->work.capacity = capacity;
	b->work.begin = b->begin.get();
	b->work.end = b->end.get();
	b->work.max_segments = segments;
	return cudaSuccess;
}

// Streams every chunk of rows past one batch of queries (already on the
// device); on return buffer *which holds each query's k best, stride apart.
static CvCudaStatus
scan_rows(KnnBuffers *b, const KnnPlan &plan, const float *base, long long rows, int dims,
		  int nqb, int k, int *which, long long *stride, cudaStream_t stream, CvCudaError *err)
{
	*which = -1;
	for (long long r0 = 0; r0 < rows; r0 += plan.row_chunk)
	{
		long long	nrc = rows - r0 < plan.row_chunk ? rows - r0 : plan.row_chunk;
		long long	n = k + nrc;
		int			target = *which == 0 ? 1 : 0;
		uint64_t   *keys = b->work.keys[target];
		long long  *items = b->work.rows[target];

		CVCUDA_TRY(cudaMemcpyAsync(b->rows.get(), base + r0 * dims,
								   (size_t) nrc * dims * sizeof(float),
								   cudaMemcpyHostToDevice, stream), "copy rows to device", err);
		// The k best so far go first: they come from earlier (smaller) rows.
		if (*which < 0)
			CVCUDA_TRY(cvcuda_launch_topk_fill_empty(keys, items, nqb, k, n, stream),
					   "knn empty results", err);
		else
			CVCUDA_TRY(cvcuda_launch_topk_copy_prefix(b->work.keys[*which], b->work.rows[*which],
													  *stride, keys, items, n, nqb, k, stream),
					   "knn carry results", err);
		CVCUDA_TRY(cvcuda_launch_knn_distance(b->queries.get(), nqb, b->rows.get(), (int) nrc,
											  dims, keys, items, n, k, r0, stream),
				   "knn distance kernel", err);
		*which = target;
		CVCUDA_TRY(cvcuda_topk_reduce(&b->work, which, nqb, n, k, stride, stream),
				   "knn top-k selection", err);
	}
	return CVCUDA_OK;
}

// The whole search on the device, for rows > 0 and nq > 0.
static CvCudaStatus
knn_on_device(const float *base, long long rows, int dims, const float *queries, int nq,
			  int k, long long *out_index, double *out_distance, CvCudaError *err)
{
	KnnBuffers	b;
	KnnPlan		plan;
	cudaStream_t stream;
	size_t		free_bytes = 0,
				total_bytes = 0;

	CVCUDA_TRY(cvcuda_stream(&stream), "cudaStreamCreate", err);
	CVCUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", err);
	plan = plan_knn(rows, dims, nq, k, work_budget(free_bytes));
	CVCUDA_TRY(allocate_buffers(&b, plan, dims, k), "knn buffers", err);
	for (int q0 = 0; q0 < nq; q0 += plan.query_batch)
	{
		int			nqb = nq - q0 < plan.query_batch ? nq - q0 : plan.query_batch;
		int			which;
		long long	stride;
		CvCudaStatus status;

		CVCUDA_TRY(cudaMemcpyAsync(b.queries.get(), queries + (size_t) q0 * dims,
								   (size_t) nqb * dims * sizeof(float),
								   cudaMemcpyHostToDevice, stream), "copy queries to device", err);
		status = scan_rows(&b, plan, base, rows, dims, nqb, k, &which, &stride, stream, err);
		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(cvcuda_launch_topk_emit(b.work.keys[which], b.work.rows[which], stride, nqb, k,
										   b.out_index.get(), b.out_distance.get(), stream),
				   "knn results", err);
		CVCUDA_TRY(cudaMemcpyAsync(out_index + (size_t) q0 * k, b.out_index.get(),
								   (size_t) nqb * k * sizeof(long long),
								   cudaMemcpyDeviceToHost, stream), "copy indexes to host", err);
		CVCUDA_TRY(cudaMemcpyAsync(out_distance + (size_t) q0 * k, b.out_distance.get(),
								   (size_t) nqb * k * sizeof(double),
								   cudaMemcpyDeviceToHost, stream), "copy distances to host", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "knn_exact", err);
	}
	return cvcuda_set_ok(err);
}

extern "C" CvCudaStatus
cvcuda_knn_exact(const float *base, long long rows, int dims, const float *queries, int nq,
				 int k, long long *out_index, double *out_distance, CvCudaError *err)
{
	return cvcuda_guard("knn_exact", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_knn_args(base, rows, dims, queries, nq, k,
													out_index, out_distance, err);

		if (status != CVCUDA_OK)
			return status;
		if (nq == 0)
			return cvcuda_set_ok(err);
		if (rows == 0)
		{
			cvcuda_fill_empty(nq, k, out_index, out_distance);
			return cvcuda_set_ok(err);
		}
		return knn_on_device(base, rows, dims, queries, nq, k, out_index, out_distance, err);
	});
}
