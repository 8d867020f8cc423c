// kmeans_lloyd.cu: cvcuda_kmeans_lloyd, Lloyd iterations on the device, as
// src/math's cv_kmeans_lloyd: assign (kmeans_assign.cu, the mode asked
// for); stop when no point changed cluster; refill empty clusters by
// src/math's rule; update the centroids to float64 means (spherical:
// divided by their float64 norm), then rounded to float4.
//
// The update sorts the point numbers by cluster (cub::DeviceRadixSort,
// stable, so a cluster's members stay in point order), finds each
// cluster's segment by binary search, and reduces every segment in blocks
// of its own: eight warps take every eighth member, each lane four
// dimensions, float64 partial sums combined in a fixed order.  No atomics,
// and the result does not depend on timing.  It differs from the CPU's
// sequential float64 sum only in the last bits of the double, so the
// float4 means agree up to a rounding of the last float bit.
//
// Per iteration the host reads back one flag, 1024 partial sums of the
// objective (added in order: the inertia is deterministic) and the k + 1
// segment offsets, which show empty clusters.  The refill, rare, runs on
// the host: the FP32 squared distance of every point to its centroid and
// the assignment come back, the rule picks the donors (its distance to
// pick the farthest member is FP32 here, float64 on the CPU: only exact
// near-ties can pick differently), the assignment goes back and is sorted
// again.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cub/device/device_radix_sort.cuh>

#include "kmeans.cuh"
#include "kmeans_args.h"

#define PARTIALS 1024			// blocks of the objective's partial sums
#define SUM_DIMS 128			// dimensions per block of the segment sums
#define SUM_THREADS 256

__global__ static void
iota_kernel(int32_t *v, long long n)
{
	for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < n;
		 i += (long long) gridDim.x * blockDim.x)
		v[i] = (int32_t) i;
}

// Partial sums of the objective (spherical: 1 + score) and the changed flag.
__global__ static void __launch_bounds__(256)
objective_kernel(const float *__restrict__ score, const int32_t *__restrict__ assign,
				 const int32_t *__restrict__ previous, long long n, int spherical,
				 double *__restrict__ partial, int *__restrict__ changed)
{
	__shared__ double s[256];
	double		sum = 0.0;
	int			moved = 0;

	for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < n;
		 i += (long long) gridDim.x * blockDim.x)
	{
		sum += spherical ? 1.0 + (double) score[i] : (double) score[i];
		if (previous && assign[i] != previous[i])
			moved = 1;
	}
	if (moved)
		*changed = 1;			// every writer stores the same value
	s[threadIdx.x] = sum;
	__syncthreads();
	for (int o = 128; o > 0; o /= 2)
	{
		if (threadIdx.x < o)
			s[threadIdx.x] += s[threadIdx.x + o];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s[0];
}

// offsets[c] = first position of cluster c in the sorted ids, c = 0..k.
__global__ static void
offsets_kernel(const int32_t *__restrict__ sorted, long long n, int k,
			   long long *__restrict__ offsets)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;
	long long	lo = 0,
				hi = n;

	if (c > k)
		return;
	while (lo < hi)
	{
		long long	mid = (lo + hi) / 2;

		if (sorted[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	offsets[c] = lo;
}

// Float64 means of the segments: block (c, dimension chunk).
__global__ static void __launch_bounds__(SUM_THREADS)
segment_mean_kernel(const float *__restrict__ x, int d, const int32_t *__restrict__ order,
					const long long *__restrict__ offsets, double *__restrict__ mean)
{
	__shared__ double part[SUM_THREADS / 32][SUM_DIMS];
	const int	c = blockIdx.x;
	const int	j0 = blockIdx.y * SUM_DIMS;
	const int	warp = threadIdx.x / 32;
	const int	lane = threadIdx.x % 32;
	const long long begin = offsets[c];
	const long long end = offsets[c + 1];
	double		acc[SUM_DIMS / 32];

	if (begin == end)
		return;
#pragma unroll
	for (int q = 0; q < SUM_DIMS / 32; q++)
		acc[q] = 0.0;
	for (long long p = begin + warp; p < end; p += SUM_THREADS / 32)
	{
		const float *row = x + (size_t) order[p] * d;

#pragma unroll
		for (int q = 0; q < SUM_DIMS / 32; q++)
		{
			int			j = j0 + lane + 32 * q;

			if (j < d)
				acc[q] += (double) row[j];
		}
	}
#pragma unroll
	for (int q = 0; q < SUM_DIMS / 32; q++)
		part[warp][lane + 32 * q] = acc[q];
	__syncthreads();
	if (threadIdx.x < SUM_DIMS && j0 + (int) threadIdx.x < d)
	{
		double		total = 0.0;

		for (int w = 0; w < SUM_THREADS / 32; w++)
			total += part[w][threadIdx.x];
		mean[(size_t) c * d + j0 + threadIdx.x] = total / (double) (end - begin);
	}
}

// New centroid c from its mean: spherical divides by the float64 norm; an
// empty cluster or a zero mean keeps the old centroid.
__global__ static void __launch_bounds__(256)
finish_centroid_kernel(const double *__restrict__ mean, int d, int spherical,
					   const long long *__restrict__ offsets, float *__restrict__ centroids)
{
	__shared__ double s[256];
	const int	c = blockIdx.x;
	const double *m = mean + (size_t) c * d;
	double		scale = 1.0;

	if (offsets[c] == offsets[c + 1])
		return;
	if (spherical)
	{
		double		sum = 0.0;

		for (int j = threadIdx.x; j < d; j += blockDim.x)
			sum += m[j] * m[j];
		s[threadIdx.x] = sum;
		__syncthreads();
		for (int o = 128; o > 0; o /= 2)
		{
			if (threadIdx.x < o)
				s[threadIdx.x] += s[threadIdx.x + o];
			__syncthreads();
		}
		if (!(s[0] > 0.0))
			return;
		scale = sqrt(s[0]);
	}
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		centroids[(size_t) c * d + j] = (float) (m[j] / scale);
}

// FP32 squared L2 of every point to its assigned centroid (for the refill).
__global__ static void
l2_to_assigned_kernel(const float *__restrict__ x, long long n, int d,
					  const float *__restrict__ c, const int32_t *__restrict__ assign,
					  float *__restrict__ out)
{
	long long	i = blockIdx.x * (long long) (blockDim.x / 32) + threadIdx.x / 32;
	int			lane = threadIdx.x % 32;
	float		s = 0.0f;

	if (i >= n)
		return;
	for (int j = lane; j < d; j += 32)
	{
		float		v = x[(size_t) i * d + j] - c[(size_t) assign[i] * d + j];

		s = fmaf(v, v, s);
	}
	for (int o = 16; o > 0; o /= 2)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0)
		out[i] = s;
}

// Everything one Lloyd run holds on the device.
struct Lloyd
{
	const float *x;
	long long	n;
	int			d;
	float	   *c;
	int			k;
	bool		stopped = false;	// the stop check ended the iterations
	int			metric;
	int			mode;
	cudaStream_t stream;
	KmeansAssignScratch scratch;
	DeviceArray<int32_t> other;		// the second assignment array
	DeviceArray<float> score;
	DeviceArray<int32_t> iota;
	DeviceArray<int32_t> sorted;	// cluster ids, sorted
	DeviceArray<int32_t> order;		// point numbers by cluster
	DeviceArray<long long> offsets;	// k + 1
	DeviceArray<double> mean;		// k x d
	DeviceArray<double> partial;	// PARTIALS
	DeviceArray<int> changed;
	DeviceArray<unsigned char> sort_temp;
	size_t		sort_temp_bytes = 0;
	int			bits;
	std::vector<long long> h_offsets;
};

#define LLOYD_TRY(call) \
	do { \
		cudaError_t lloyd_code_ = (call); \
		if (lloyd_code_ != cudaSuccess) \
			return lloyd_code_; \
	} while (0)

static cudaError_t
lloyd_allocate(Lloyd &L)
{
	L.bits = 1;
	while (L.bits < 31 && (1LL << L.bits) < L.k)
		L.bits++;
	LLOYD_TRY(L.other.allocate((size_t) L.n));
	LLOYD_TRY(L.score.allocate((size_t) L.n));
	LLOYD_TRY(L.iota.allocate((size_t) L.n));
	LLOYD_TRY(L.sorted.allocate((size_t) L.n));
	LLOYD_TRY(L.order.allocate((size_t) L.n));
	LLOYD_TRY(L.offsets.allocate((size_t) L.k + 1));
	LLOYD_TRY(L.mean.allocate((size_t) L.k * L.d));
	LLOYD_TRY(L.partial.allocate(PARTIALS));
	LLOYD_TRY(L.changed.allocate(1));
	LLOYD_TRY(cub::DeviceRadixSort::SortPairs(nullptr, L.sort_temp_bytes, (const int32_t *) nullptr,
											  (int32_t *) nullptr, (const int32_t *) nullptr,
											  (int32_t *) nullptr, (int64_t) L.n, 0, L.bits,
											  L.stream));
	LLOYD_TRY(L.sort_temp.allocate(L.sort_temp_bytes));
	iota_kernel<<<1024, 256, 0, L.stream>>>(L.iota.get(), L.n);
	L.h_offsets.resize((size_t) L.k + 1);
	return cvcuda_check_launch(L.stream);
}

// Sorts the points by their cluster in assign and reads the offsets back.
static cudaError_t
bucket(Lloyd &L, const int32_t *assign)
{
	size_t		bytes = L.sort_temp_bytes;

	LLOYD_TRY(cub::DeviceRadixSort::SortPairs(L.sort_temp.get(), bytes, assign, L.sorted.get(),
											  L.iota.get(), L.order.get(), (int64_t) L.n, 0,
											  L.bits, L.stream));
	offsets_kernel<<<(L.k + 1 + 255) / 256, 256, 0, L.stream>>>(L.sorted.get(), L.n, L.k,
																 L.offsets.get());
	LLOYD_TRY(cvcuda_check_launch(L.stream));
	LLOYD_TRY(cudaMemcpyAsync(L.h_offsets.data(), L.offsets.get(),
							  sizeof(long long) * ((size_t) L.k + 1), cudaMemcpyDeviceToHost,
							  L.stream));
	return cudaStreamSynchronize(L.stream);
}

/*
 * src/math's refill rule (kmeans.c refill_empty) on the host: for each empty
 * cluster in index order, the largest cluster (ties: lowest index) with at
 * least two members and one away from its centroid gives up its member
 * farthest from its centroid (ties: lowest point index).  *refilled counts
 * the clusters refilled; assign on the device is updated when any was.
 */
static cudaError_t
refill(Lloyd &L, int32_t *assign, int *refilled)
{
	long long	n = L.n;
	int			k = L.k;
	std::vector<int32_t> h_assign((size_t) n);
	std::vector<float> h_dist((size_t) n);
	std::vector<long long> counts((size_t) k);
	std::vector<long long> start((size_t) k + 1, 0);
	std::vector<int32_t> members((size_t) n);
	std::vector<char> no_donor((size_t) k, 0);
	DeviceArray<float> dist;

	*refilled = 0;
	LLOYD_TRY(dist.allocate((size_t) n));
	l2_to_assigned_kernel<<<(unsigned) ((n + 7) / 8), 256, 0, L.stream>>>(L.x, n, L.d, L.c,
																		 assign, dist.get());
	LLOYD_TRY(cvcuda_check_launch(L.stream));
	LLOYD_TRY(cudaMemcpyAsync(h_assign.data(), assign, sizeof(int32_t) * n,
							  cudaMemcpyDeviceToHost, L.stream));
	LLOYD_TRY(cudaMemcpyAsync(h_dist.data(), dist.get(), sizeof(float) * n,
							  cudaMemcpyDeviceToHost, L.stream));
	LLOYD_TRY(cudaStreamSynchronize(L.stream));
	for (int c = 0; c < k; c++)
		counts[c] = L.h_offsets[c + 1] - L.h_offsets[c];
	for (long long i = 0; i < n; i++)
		start[h_assign[i] + 1]++;
	for (int c = 0; c < k; c++)
		start[c + 1] += start[c];
	{
		std::vector<long long> fill(start.begin(), start.end() - 1);

		for (long long i = 0; i < n; i++)
			members[fill[h_assign[i]]++] = (int32_t) i;
	}
	for (int j = 0; j < k; j++)
	{
		int32_t		take = -1;
		int			donor = -1;

		if (counts[j] > 0)
			continue;
		for (;;)
		{
			int			best = -1;

			for (int c = 0; c < k; c++)
				if (counts[c] >= 2 && !no_donor[c] && (best < 0 || counts[c] > counts[best]))
					best = c;
			if (best < 0)
				break;
			float		far = 0.0f;

			for (long long p = start[best]; p < start[best + 1]; p++)
			{
				int32_t		i = members[p];

				if (h_assign[i] == best && h_dist[i] > far)
				{
					far = h_dist[i];
					take = i;
				}
			}
			if (take >= 0)
			{
				donor = best;
				break;
			}
			no_donor[best] = 1;
		}
		if (take < 0)
			break;
		h_assign[take] = j;
		counts[donor]--;
		counts[j] = 1;
		(*refilled)++;
	}
	if (*refilled == 0)
		return cudaSuccess;
	LLOYD_TRY(cudaMemcpyAsync(assign, h_assign.data(), sizeof(int32_t) * n,
							  cudaMemcpyHostToDevice, L.stream));
	return bucket(L, assign);
}

// The centroids from the buckets.
static cudaError_t
update(Lloyd &L)
{
	dim3		grid((unsigned) L.k, (unsigned) ((L.d + SUM_DIMS - 1) / SUM_DIMS));

	segment_mean_kernel<<<grid, SUM_THREADS, 0, L.stream>>>(L.x, L.d, L.order.get(),
															L.offsets.get(), L.mean.get());
	LLOYD_TRY(cvcuda_check_launch(L.stream));
	finish_centroid_kernel<<<(unsigned) L.k, 256, 0, L.stream>>>(
		L.mean.get(), L.d, L.metric == CVCUDA_KMEANS_SPHERICAL, L.offsets.get(), L.c);
	return cvcuda_check_launch(L.stream);
}

// Assigns into cur and returns the objective and whether anything moved from prev.
static cudaError_t
assign_step(Lloyd &L, int32_t *cur, const int32_t *prev, double *objective, bool *moved)
{
	std::vector<double> partial(PARTIALS);
	int			changed = 0;

	LLOYD_TRY(cvcuda_kmeans_assign_device(L.x, L.n, L.d, L.c, L.k, L.metric, L.mode, &L.scratch,
										  cur, L.score.get(), L.stream));
	LLOYD_TRY(cudaMemsetAsync(L.changed.get(), 0, sizeof(int), L.stream));
	objective_kernel<<<PARTIALS, 256, 0, L.stream>>>(L.score.get(), cur, prev, L.n,
													 L.metric == CVCUDA_KMEANS_SPHERICAL,
													 L.partial.get(), L.changed.get());
	LLOYD_TRY(cvcuda_check_launch(L.stream));
	LLOYD_TRY(cudaMemcpyAsync(partial.data(), L.partial.get(), sizeof(double) * PARTIALS,
							  cudaMemcpyDeviceToHost, L.stream));
	LLOYD_TRY(cudaMemcpyAsync(&changed, L.changed.get(), sizeof(int), cudaMemcpyDeviceToHost,
							  L.stream));
	LLOYD_TRY(cudaStreamSynchronize(L.stream));
	*objective = 0.0;
	for (int b = 0; b < PARTIALS; b++)
		*objective += partial[b];
	*moved = changed != 0;
	return cudaSuccess;
}

// The iterations; the final assignment ends in out.
static cudaError_t
iterate(Lloyd &L, int iterations, int32_t *out, double *history, int *iterations_run,
		double *inertia)
{
	int32_t    *cur = L.other.get();	// this iteration's assignment
	int32_t    *prev = out;				// the one the centroids average
	int			run = 0;

	*inertia = 0.0;
	for (int t = 0; t < iterations; t++)
	{
		double		objective;
		bool		moved;
		int			refilled;

		if (cvcuda_stopping())
		{
			L.stopped = true;
			break;
		}

		LLOYD_TRY(assign_step(L, cur, t > 0 ? prev : nullptr, &objective, &moved));
		*inertia = objective;
		if (history)
			history[t] = objective;
		run = t + 1;
		if (t > 0 && !moved)
			break;
		LLOYD_TRY(bucket(L, cur));
		for (int c = 0; c < L.k; c++)
			if (L.h_offsets[c] == L.h_offsets[c + 1])
			{
				LLOYD_TRY(refill(L, cur, &refilled));
				break;
			}
		LLOYD_TRY(update(L));
		int32_t    *swap = cur;

		cur = prev;
		prev = swap;
	}
	*iterations_run = run;
	if (run == 0)
	{
		LLOYD_TRY(cvcuda_kmeans_assign_device(L.x, L.n, L.d, L.c, L.k, L.metric, L.mode,
											  &L.scratch, out, nullptr, L.stream));
		return cudaStreamSynchronize(L.stream);
	}
	if (prev != out)
		LLOYD_TRY(cudaMemcpyAsync(out, prev, sizeof(int32_t) * L.n, cudaMemcpyDeviceToDevice,
								  L.stream));
	return cudaStreamSynchronize(L.stream);
}

extern "C" CvCudaStatus
cvcuda_kmeans_lloyd(const CvCudaBuffer *points, long long n, int d, CvCudaBuffer *centroids,
					int k, int iterations, int metric, int mode, CvCudaBuffer *assign,
					double *inertia_history, int *iterations_run, double *inertia,
					CvCudaError *err)
{
	return cvcuda_guard("kmeans_lloyd", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_kmeans_check_lloyd(points, n, d, centroids, k, iterations,
														metric, mode, assign, iterations_run,
														inertia, err);
		Lloyd		L;

		if (status != CVCUDA_OK)
			return status;
		L.x = static_cast<const float *>(points->data);
		L.n = n;
		L.d = d;
		L.c = static_cast<float *>(centroids->data);
		L.k = k;
		L.metric = metric;
		L.mode = mode;
		CVCUDA_TRY(cvcuda_stream(&L.stream), "kmeans_lloyd: stream", err);
		CVCUDA_TRY(lloyd_allocate(L), "kmeans_lloyd: allocate", err);
		CVCUDA_TRY(iterate(L, iterations, static_cast<int32_t *>(assign->data), inertia_history,
						   iterations_run, inertia),
				   "kmeans_lloyd", err);
		return L.stopped ? cvcuda_stopped(err, "kmeans_lloyd") : cvcuda_set_ok(err);
	});
}
