// health.cu: the cluster statistics entry points of clustervec_cuda.so
// (cvcuda_health_*): argument checks (shared with the CPU shim), the chunk
// and its tile plan, the families in health.h's order (two-means, pairwise,
// neighbour, potential, rank), and their device timings.
#include <algorithm>
#include <vector>

#include "health_linear.cuh"

// Milliseconds of each family in the last calls (cvcuda_health_timings).
static double family_ms[CVCUDA_HEALTH_FAMILIES];

// The table's share of family 3, kept apart so members can add its own.
static double table_ms;

// Two events and their elapsed time, destroyed on every return path.
class EventPair
{
public:
	EventPair(const EventPair &) = delete;
	EventPair &operator=(const EventPair &) = delete;
	EventPair() = default;
	~EventPair()
	{
		if (timer.start)
			(void) cudaEventDestroy(timer.start);
		if (timer.stop)
			(void) cudaEventDestroy(timer.stop);
	}

	cudaError_t create()
	{
		cudaError_t code = cudaEventCreate(&timer.start);

		if (code == cudaSuccess)
			code = cudaEventCreate(&timer.stop);
		return code;
	}

	// Elapsed milliseconds between the recorded events (0 when unreadable).
	double ms() const
	{
		float		elapsed = 0;

		if (cudaEventElapsedTime(&elapsed, timer.start, timer.stop) != cudaSuccess)
		{
			(void) cudaGetLastError();
			return 0;
		}
		return elapsed;
	}

	HealthTimer timer = {nullptr, nullptr};
};

// The tile plan's device arrays (one allocation) and its description.
struct PlanStorage
{
	DeviceArray<long long> arrays;
	HealthPlan	plan;
};

// Cuts every cluster into tiles of tile_rows members and uploads the plan.
static CvCudaStatus
build_plan(const long long *off, long long k, cudaStream_t stream, PlanStorage *ps,
		   const char *what, CvCudaError *err)
{
	int			device = 0,
				sms = 132;
	long long	total = off[k];
	long long	rows;
	std::vector<long long> tile_cluster,
				tile_first,
				tile_slot,
				cluster_tiles(k + 1),
				multi,
				all;
	long long	nslots = 0;

	if (cudaGetDevice(&device) != cudaSuccess ||
		cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
	{
		(void) cudaGetLastError();
		sms = 132;
	}
	// about four tiles per multiprocessor over the chunk, 32 to 4096 rows each
	rows = (total + 4LL * sms - 1) / (4LL * sms);
	rows = std::min(4096LL, std::max(32LL, (rows + 31) / 32 * 32));
	for (long long c = 0; c < k; c++)
	{
		long long	n = off[c + 1] - off[c];
		long long	tiles = (n + rows - 1) / rows;

		cluster_tiles[c] = (long long) tile_cluster.size();
		if (tiles > 1)
			multi.push_back(c);
		for (long long q = 0; q < tiles; q++)
		{
			tile_cluster.push_back(c);
			tile_first.push_back(off[c] + q * rows);
			tile_slot.push_back(tiles > 1 ? nslots++ : -1);
		}
	}
	cluster_tiles[k] = (long long) tile_cluster.size();
	ps->plan.tile_rows = (int) rows;
	ps->plan.ntiles = (long long) tile_cluster.size();
	ps->plan.nslots = nslots;
	ps->plan.nmulti = (long long) multi.size();
	all.insert(all.end(), tile_cluster.begin(), tile_cluster.end());
	all.insert(all.end(), tile_first.begin(), tile_first.end());
	all.insert(all.end(), tile_slot.begin(), tile_slot.end());
	all.insert(all.end(), cluster_tiles.begin(), cluster_tiles.end());
	all.insert(all.end(), multi.begin(), multi.end());
	CVCUDA_TRY(ps->arrays.allocate(all.size()), what, err);
	CVCUDA_TRY(cudaMemcpyAsync(ps->arrays.get(), all.data(), all.size() * sizeof(long long),
							   cudaMemcpyHostToDevice, stream), what, err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), what, err);
	{
		const long long *base = ps->arrays.get();
		long long	nt = ps->plan.ntiles;

		ps->plan.tile_cluster = base;
		ps->plan.tile_first = base + nt;
		ps->plan.tile_slot = base + 2 * nt;
		ps->plan.cluster_tiles = base + 3 * nt;
		ps->plan.multi = base + 3 * nt + k + 1;
	}
	return CVCUDA_OK;
}

// Checks a chunk, reads its offsets to the host and checks them; fills chunk.
static CvCudaStatus
prepare_chunk(const CvCudaBuffer *members, const CvCudaBuffer *offsets, long long nclusters,
			  int d, const CvHealthParams *params, CvCudaBuffer *stats,
			  std::vector<long long> *host_offsets, HealthChunk *chunk, const char *what,
			  CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_health_params(params, what, err);
	cudaStream_t stream;

	if (status == CVCUDA_OK)
		status = cvcuda_check_health_chunk(members, offsets, nclusters, d, stats, what, err);
	if (status != CVCUDA_OK)
		return status;
	CVCUDA_TRY(cvcuda_stream(&stream), what, err);
	host_offsets->resize((size_t) nclusters + 1);
	CVCUDA_TRY(cudaMemcpyAsync(host_offsets->data(), offsets->data,
							   sizeof(long long) * (nclusters + 1), cudaMemcpyDeviceToHost,
							   stream), what, err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), what, err);
	status = cvcuda_check_health_offsets(host_offsets->data(), nclusters, d, members, what, err);
	if (status != CVCUDA_OK)
		return status;
	chunk->members = static_cast<const float *>(members->data);
	chunk->offsets = static_cast<const long long *>(offsets->data);
	chunk->host_offsets = host_offsets->data();
	chunk->nclusters = nclusters;
	chunk->total = (*host_offsets)[nclusters];
	chunk->max_members = 0;
	for (long long c = 0; c < nclusters; c++)
		chunk->max_members = std::max(chunk->max_members,
									  (*host_offsets)[c + 1] - (*host_offsets)[c]);
	chunk->d = d;
	chunk->first_cluster = 0;
	chunk->centroids = nullptr;
	chunk->stats = static_cast<CvClusterStats *>(stats->data);
	chunk->params = *params;
	chunk->stream = stream;
	return CVCUDA_OK;
}

extern "C" CvCudaStatus
cvcuda_health_centroid(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
					   long long nclusters, int d, const CvHealthParams *params,
					   CvCudaBuffer *centroids, CvCudaBuffer *stats, CvCudaError *err)
{
	return cvcuda_guard("health_centroid", err, [&]() -> CvCudaStatus {
		const char *what = "health_centroid";
		std::vector<long long> host_offsets;
		HealthChunk chunk;
		PlanStorage ps;
		EventPair	ev;
		CvCudaStatus status = prepare_chunk(members, offsets, nclusters, d, params, stats,
											&host_offsets, &chunk, what, err);

		if (status == CVCUDA_OK)
			status = cvcuda_check_health_buffer(centroids, nclusters * d, sizeof(double), what,
												"centroids", err);
		if (status != CVCUDA_OK)
			return status;
		std::fill(family_ms, family_ms + CVCUDA_HEALTH_FAMILIES, 0.0);
		if (nclusters == 0)
			return cvcuda_set_ok(err);
		chunk.centroids = static_cast<const double *>(centroids->data);
		status = build_plan(host_offsets.data(), nclusters, chunk.stream, &ps, what, err);
		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(ev.create(), what, err);
		status = health_centroid_launch(&chunk, &ps.plan, static_cast<double *>(centroids->data),
										&ev.timer, err);
		if (status != CVCUDA_OK)
			return status;
		family_ms[0] = ev.ms();
		return cvcuda_set_ok(err);
	});
}

// The device view of a centroid set.
static HealthSet
set_of(const CvCudaCentroidSet *set)
{
	HealthSet	s;

	s.k = set->k;
	s.d = set->d;
	s.m = set->m;
	s.centroids = static_cast<const double *>(set->centroids->data);
	s.mean_dist = static_cast<const double *>(set->mean_dist->data);
	s.mean_norm = static_cast<const double *>(set->mean_norm->data);
	s.nearest = set->m > 0 ? static_cast<long long *>(set->nearest->data) : nullptr;
	s.nearest_dist = set->m > 0 ? static_cast<double *>(set->nearest_dist->data) : nullptr;
	s.db_ratio = set->m > 0 ? static_cast<double *>(set->db_ratio->data) : nullptr;
	return s;
}

extern "C" CvCudaStatus
cvcuda_health_neighbour_table(CvCudaCentroidSet *set, CvCudaError *err)
{
	return cvcuda_guard("health_neighbour_table", err, [&]() -> CvCudaStatus {
		const char *what = "health_neighbour_table";
		CvCudaStatus status = cvcuda_check_health_set(set, 0, what, err);
		HealthSet	s;
		EventPair	ev;
		cudaStream_t stream;

		if (status != CVCUDA_OK)
			return status;
		s = set_of(set);
		CVCUDA_TRY(cvcuda_stream(&stream), what, err);
		CVCUDA_TRY(ev.create(), what, err);
		status = health_table_launch(&s, stream, &ev.timer, err);
		if (status != CVCUDA_OK)
			return status;
		table_ms = ev.ms();
		family_ms[3] = table_ms;
		return cvcuda_set_ok(err);
	});
}

// Runs one of the pairwise team's launchers between two events.
template <typename Launch>
static CvCudaStatus
timed(const HealthChunk *chunk, double *ms, const char *what, CvCudaError *err, Launch launch)
{
	EventPair	ev;
	CvCudaStatus status;

	CVCUDA_TRY(ev.create(), what, err);
	CVCUDA_TRY(cudaEventRecord(ev.timer.start, chunk->stream), what, err);
	status = launch();
	if (status != CVCUDA_OK)
		return status;
	CVCUDA_TRY(cudaEventRecord(ev.timer.stop, chunk->stream), what, err);
	CVCUDA_TRY(cudaStreamSynchronize(chunk->stream), what, err);
	*ms = ev.ms();
	return CVCUDA_OK;
}

extern "C" CvCudaStatus
cvcuda_health_members(const CvCudaBuffer *members, const CvCudaBuffer *offsets,
					  long long nclusters, long long first_cluster,
					  const CvCudaCentroidSet *set, const CvHealthParams *params,
					  CvCudaBuffer *stats, CvCudaError *err)
{
	return cvcuda_guard("health_members", err, [&]() -> CvCudaStatus {
		const char *what = "health_members";
		std::vector<long long> host_offsets;
		HealthChunk chunk;
		PlanStorage ps;
		HealthSet	s;
		DeviceArray<uint8_t> side;
		EventPair	ev[3];
		double		ms[CVCUDA_HEALTH_FAMILIES] = {0};
		CvCudaStatus status;

		if (set == nullptr || params == nullptr)
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"%s: set and params must not be NULL", what);
		status = prepare_chunk(members, offsets, nclusters, set->d, params, stats,
							   &host_offsets, &chunk, what, err);
		if (status == CVCUDA_OK)
			status = cvcuda_check_health_set(set, params->neighbours, what, err);
		if (status == CVCUDA_OK)
			status = cvcuda_check_health_range(set, nclusters, first_cluster, set->d, what, err);
		if (status != CVCUDA_OK)
			return status;
		if (nclusters == 0)
			return cvcuda_set_ok(err);
		s = set_of(set);
		chunk.first_cluster = first_cluster;
		chunk.centroids = s.centroids + first_cluster * set->d;
		status = build_plan(host_offsets.data(), nclusters, chunk.stream, &ps, what, err);
		if (status != CVCUDA_OK)
			return status;
		CVCUDA_TRY(side.allocate((size_t) (chunk.total > 0 ? chunk.total : 1)), what, err);
		for (int e = 0; e < 3; e++)
			CVCUDA_TRY(ev[e].create(), what, err);
		status = health_twomeans_launch(&chunk, &ps.plan, side.get(), &ev[0].timer, err);
		if (status == CVCUDA_OK && cvcuda_stopping())
			status = cvcuda_stopped(err, what);
		if (status != CVCUDA_OK)
			return status;
		ms[1] = ev[0].ms();
		status = timed(&chunk, &ms[2], what, err, [&]() {
			return health_pairwise_launch(&chunk, side.get(), err);
		});
		if (status == CVCUDA_OK && cvcuda_stopping())
			status = cvcuda_stopped(err, what);
		if (status != CVCUDA_OK)
			return status;
		status = health_neighbour_launch(&chunk, &ps.plan, &s, &ev[1].timer, err);
		if (status == CVCUDA_OK && cvcuda_stopping())
			status = cvcuda_stopped(err, what);
		if (status != CVCUDA_OK)
			return status;
		ms[3] = ev[1].ms();
		status = health_potential_launch(&chunk, &ps.plan, set->k, &ev[2].timer, err);
		if (status == CVCUDA_OK && cvcuda_stopping())
			status = cvcuda_stopped(err, what);
		if (status != CVCUDA_OK)
			return status;
		ms[4] = ev[2].ms();
		status = timed(&chunk, &ms[5], what, err, [&]() {
			return health_rank_launch(&chunk, err);
		});
		if (status == CVCUDA_OK && cvcuda_stopping())
			status = cvcuda_stopped(err, what);
		if (status != CVCUDA_OK)
			return status;
		for (int f = 1; f < CVCUDA_HEALTH_FAMILIES; f++)
			family_ms[f] = ms[f];
		family_ms[3] += table_ms;
		return cvcuda_set_ok(err);
	});
}

extern "C" void
cvcuda_health_timings(double ms[CVCUDA_HEALTH_FAMILIES])
{
	if (ms != nullptr)
		std::copy(family_ms, family_ms + CVCUDA_HEALTH_FAMILIES, ms);
}
