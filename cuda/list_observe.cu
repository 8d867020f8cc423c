// list_observe.cu: cvcuda_list_observe and cvcuda_observed_reduce, the
// observed health of a cvlattice mirror (cpu_shim_observe.c is the
// reference).  One warp per member: its lanes stride over the dimensions
// accumulating in float64 what the member's r and cos need, then a
// shuffle reduction; the member is read once (twice under cosine, the
// second time from cache, since the normalisation needs its norm first).
// The reduction is one block per list over its rows' written values.
#include <cmath>
#include <vector>

#include "common.cuh"

#define OBSERVE_THREADS 256
#define OBSERVE_WARPS (OBSERVE_THREADS / 32)
#define OBSERVE_SPLIT 16		// blocks per observed list
#define REDUCE_THREADS 256

__device__ static inline double
warp_sum(double v)
{
	for (int shift = 16; shift > 0; shift >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, shift);
	return v;
}

__global__ static void __launch_bounds__(OBSERVE_THREADS)
observe_kernel(const float *__restrict__ means, int d, const float *__restrict__ vectors,
			   const long long *__restrict__ offsets, const int *__restrict__ observe,
			   bool cosine, double *__restrict__ stats)
{
	const int	list = observe[blockIdx.x];
	const int	lane = threadIdx.x % 32;
	const long long first = offsets[list],
				end = offsets[list + 1];
	const float *c = means + (size_t) list * d;

	for (long long r = first + blockIdx.y * OBSERVE_WARPS + threadIdx.x / 32; r < end;
		 r += (long long) OBSERVE_SPLIT * OBSERVE_WARPS)
	{
		const float *x = vectors + (size_t) r * d;
		double		xx = 0,
					xc = 0,
					cc = 0,
					rr = 0,
					scale = 1;

		for (int j = lane; j < d; j += 32)
		{
			double		xj = x[j],
						cj = c[j];

			xx += xj * xj;
			xc += xj * cj;
			cc += cj * cj;
			if (!cosine)
				rr += (xj - cj) * (xj - cj);
		}
		xx = __shfl_sync(0xffffffffu, warp_sum(xx), 0);
		xc = warp_sum(xc);
		cc = warp_sum(cc);
		if (cosine)
		{
			scale = xx > 0 ? 1 / sqrt(xx) : 0;
			for (int j = lane; j < d; j += 32)
			{
				double		diff = (double) x[j] * scale - c[j];

				rr += diff * diff;
			}
		}
		rr = warp_sum(rr);
		if (lane == 0)
		{
			stats[(size_t) r * CVCUDA_OBSERVE_VALUES] = sqrt(rr);
			stats[(size_t) r * CVCUDA_OBSERVE_VALUES + 1] =
				xx > 0 && cc > 0 ? xc / (sqrt(xx) * sqrt(cc)) : 0;
		}
	}
}

__global__ static void __launch_bounds__(REDUCE_THREADS)
reduce_kernel(const double *__restrict__ stats, const long long *__restrict__ offsets,
			  double *__restrict__ out)
{
	__shared__ double partial[CVCUDA_OBSERVED_FIELDS][REDUCE_THREADS / 32];
	const int	list = blockIdx.x;
	double		sums[CVCUDA_OBSERVED_FIELDS] = {0, 0, 0, 0};

	for (long long r = offsets[list] + threadIdx.x; r < offsets[list + 1]; r += REDUCE_THREADS)
	{
		double		dist = stats[(size_t) r * CVCUDA_OBSERVE_VALUES];

		if (isnan(dist))
			continue;
		sums[CVCUDA_OBSERVED_SEEN] += 1;
		sums[CVCUDA_OBSERVED_SUM_R2] += dist * dist;
		sums[CVCUDA_OBSERVED_SUM_R] += dist;
		sums[CVCUDA_OBSERVED_SUM_COS] += stats[(size_t) r * CVCUDA_OBSERVE_VALUES + 1];
	}
	for (int f = 0; f < CVCUDA_OBSERVED_FIELDS; f++)
	{
		double		v = warp_sum(sums[f]);

		if (threadIdx.x % 32 == 0)
			partial[f][threadIdx.x / 32] = v;
	}
	__syncthreads();
	if (threadIdx.x < CVCUDA_OBSERVED_FIELDS)
	{
		double		v = 0;

		for (int w = 0; w < REDUCE_THREADS / 32; w++)
			v += partial[threadIdx.x][w];
		out[(size_t) list * CVCUDA_OBSERVED_FIELDS + threadIdx.x] = v;
	}
}

// The device offsets' host copy, checked (vectors NULL: not against them).
static CvCudaStatus
read_offsets(const char *what, const CvCudaBuffer *list_offsets, int lists, int d,
			 const CvCudaBuffer *vectors, cudaStream_t stream, std::vector<long long> &offsets,
			 CvCudaError *err)
{
	offsets.resize((size_t) lists + 1);
	CVCUDA_TRY(cudaMemcpyAsync(offsets.data(), list_offsets->data,
							   sizeof(long long) * ((size_t) lists + 1), cudaMemcpyDeviceToHost,
							   stream), what, err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), what, err);
	return cvcuda_check_ivf_offsets(offsets.data(), lists, d, vectors, err);
}

extern "C" CvCudaStatus
cvcuda_list_observe(const CvCudaBuffer *means, int lists, int d, const CvCudaBuffer *vectors,
					const CvCudaBuffer *list_offsets, int metric, const int *observe, int count,
					CvCudaBuffer *member_stats, CvCudaError *err)
{
	return cvcuda_guard("list_observe", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_observe_args("list_observe", means, lists, d,
														list_offsets, metric, member_stats, err);
		std::vector<long long> offsets;
		DeviceArray<int> d_observe;
		cudaStream_t stream;

		if (status != CVCUDA_OK)
			return status;
		if (vectors == NULL)
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"list_observe: vectors must not be NULL");
		CVCUDA_TRY(cvcuda_stream(&stream), "list_observe: stream", err);
		if ((status = read_offsets("list_observe: read offsets", list_offsets, lists, d, vectors,
								   stream, offsets, err)) != CVCUDA_OK ||
			(status = cvcuda_check_observe_rows("list_observe", offsets.data(), lists, observe,
												count, member_stats, err)) != CVCUDA_OK)
			return status;
		if (count == 0)
			return cvcuda_set_ok(err);
		CVCUDA_TRY(d_observe.allocate((size_t) count), "list_observe: cudaMalloc", err);
		CVCUDA_TRY(cudaMemcpyAsync(d_observe.get(), observe, sizeof(int) * (size_t) count,
								   cudaMemcpyHostToDevice, stream), "list_observe: copy lists", err);
		observe_kernel<<<dim3((unsigned) count, OBSERVE_SPLIT), OBSERVE_THREADS, 0, stream>>>(
			static_cast<const float *>(means->data), d, static_cast<const float *>(vectors->data),
			static_cast<const long long *>(list_offsets->data), d_observe.get(),
			metric == CV_METRIC_COSINE, static_cast<double *>(member_stats->data));
		CVCUDA_TRY(cvcuda_check_launch(stream), "list_observe: launch", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "list_observe", err);
		return cvcuda_set_ok(err);
	});
}

extern "C" CvCudaStatus
cvcuda_observed_reduce(const CvCudaBuffer *member_stats, const CvCudaBuffer *list_offsets,
					   int lists, double *out, CvCudaError *err)
{
	return cvcuda_guard("observed_reduce", err, [&]() -> CvCudaStatus {
		CvCudaStatus status = cvcuda_check_observe_args("observed_reduce", NULL, lists, 0,
														list_offsets, 0, member_stats, err);
		std::vector<long long> offsets;
		DeviceArray<double> d_out;
		cudaStream_t stream;
		size_t		out_bytes = sizeof(double) * (size_t) lists * CVCUDA_OBSERVED_FIELDS;

		if (status != CVCUDA_OK)
			return status;
		if (out == NULL)
			return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0,
									"observed_reduce: out must not be NULL");
		CVCUDA_TRY(cvcuda_stream(&stream), "observed_reduce: stream", err);
		if ((status = read_offsets("observed_reduce: read offsets", list_offsets, lists, 1, NULL,
								   stream, offsets, err)) != CVCUDA_OK ||
			(status = cvcuda_check_observe_rows("observed_reduce", offsets.data(), lists, NULL, 0,
												member_stats, err)) != CVCUDA_OK)
			return status;
		CVCUDA_TRY(d_out.allocate((size_t) lists * CVCUDA_OBSERVED_FIELDS),
				   "observed_reduce: cudaMalloc", err);
		reduce_kernel<<<(unsigned) lists, REDUCE_THREADS, 0, stream>>>(
			static_cast<const double *>(member_stats->data),
			static_cast<const long long *>(list_offsets->data), d_out.get());
		CVCUDA_TRY(cvcuda_check_launch(stream), "observed_reduce: launch", err);
		CVCUDA_TRY(cudaMemcpyAsync(out, d_out.get(), out_bytes, cudaMemcpyDeviceToHost, stream),
				   "observed_reduce: copy out", err);
		CVCUDA_TRY(cudaStreamSynchronize(stream), "observed_reduce", err);
		return cvcuda_set_ok(err);
	});
}
