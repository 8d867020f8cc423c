// health_potential.cu: section 4 of STATISTICS.md on the device: per tile,
// r_i^2 = ||x_i - c||^2 from float64 differences (a warp per member) summed
// into exp(-r^2 / 2 sigma^2) and its curvature term at the sigma the
// pairwise family wrote; potential_finish merges the tiles in a fixed order
// and writes the three columns with cv_health_potential's NULL rules.
#include <cmath>

#include "health_linear.cuh"

// True when the cluster's potential is defined (sigma written, > 0, not collapsed).
static __device__ __forceinline__ bool
has_potential(const CvClusterStats *s, long long n)
{
	return !s->is_null[CV_STAT_SIGMA] && s->value[CV_STAT_SIGMA] > 0 && !s->collapsed && n >= 1;
}

// Per tile: the sums of e_i and e_i (r_i^2 / (d sigma^2) - 1).
static __global__ void
potential_members(const float *__restrict__ x, int d, int tile_rows,
				  const long long *__restrict__ offsets,
				  const long long *__restrict__ tile_cluster,
				  const long long *__restrict__ tile_first, const double *__restrict__ centroids,
				  const CvClusterStats *__restrict__ stats, double *__restrict__ part)
{
	__shared__ double scratch[32];
	long long	t = blockIdx.x;
	long long	c = tile_cluster[t];
	long long	first = tile_first[t];
	long long	end = min(first + (long long) tile_rows, offsets[c + 1]);
	const double *cen = centroids + c * d;
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	double		depth = 0,
				curvature = 0;

	if (has_potential(&stats[c], offsets[c + 1] - offsets[c]))
	{
		double		sigma = stats[c].value[CV_STAT_SIGMA];
		double		two_sigma_sq = 2.0 * sigma * sigma;
		double		d_sigma_sq = (double) d * sigma * sigma;

		for (long long i = first + warp; i < end; i += warps)
		{
			double		dd = 0;

			visit_row(x + i * d, d, lane, [&](int j, float f) {
				double		e = (double) f - __ldg(cen + j);

				dd += e * e;
			});
			dd = warp_sum(dd);
			if (lane == 0)
			{
				double		e = exp(-dd / two_sigma_sq);

				depth += e;
				curvature += e * (dd / d_sigma_sq - 1.0);
			}
		}
	}
	depth = block_sum(depth, scratch);
	curvature = block_sum(curvature, scratch);
	if (threadIdx.x == 0)
	{
		part[2 * t] = depth;
		part[2 * t + 1] = curvature;
	}
}

// Per cluster: potential_depth, curvature and escape_probability.
static __global__ void
potential_finish(const long long *__restrict__ offsets,
				 const long long *__restrict__ cluster_tiles, const double *__restrict__ part,
				 long long k, CvClusterStats *__restrict__ stats)
{
	__shared__ double scratch[32];
	long long	c = blockIdx.x;
	long long	n = offsets[c + 1] - offsets[c];
	CvClusterStats *out = stats + c;
	double		depth = block_sum_tiles(part, cluster_tiles[c], cluster_tiles[c + 1], 2, 0, scratch);
	double		curvature = block_sum_tiles(part, cluster_tiles[c], cluster_tiles[c + 1], 2, 1,
											scratch);

	if (threadIdx.x != 0)
		return;
	if (!has_potential(out, n))
	{
		stat_null(out, CV_STAT_POTENTIAL_DEPTH);
		stat_null(out, CV_STAT_CURVATURE);
		stat_null(out, CV_STAT_ESCAPE_PROBABILITY);
		return;
	}
	{
		double		sigma = out->value[CV_STAT_SIGMA];
		double		dist = out->value[CV_STAT_NEAREST_DIST];

		stat_set(out, CV_STAT_POTENTIAL_DEPTH, depth / (double) n);
		stat_set(out, CV_STAT_CURVATURE, curvature / (double) n);
		if (k <= 1 || out->is_null[CV_STAT_NEAREST_DIST])
			stat_null(out, CV_STAT_ESCAPE_PROBABILITY);
		else
			stat_set(out, CV_STAT_ESCAPE_PROBABILITY, exp(-(dist * dist) / (8.0 * sigma * sigma)));
	}
}

CvCudaStatus
health_potential_launch(const HealthChunk *chunk, const HealthPlan *plan, long long k,
						const HealthTimer *timer, CvCudaError *err)
{
	cudaStream_t stream = chunk->stream;
	DeviceArray<double> part;

	CVCUDA_TRY(part.allocate((size_t) (plan->ntiles > 0 ? plan->ntiles : 1) * 2),
			   "health_members: scratch", err);
	CVCUDA_TRY(cudaEventRecord(timer->start, stream), "health_members: event", err);
	if (plan->ntiles > 0)
	{
		potential_members<<<(unsigned) plan->ntiles, 256, 0, stream>>>(
			chunk->members, chunk->d, plan->tile_rows, chunk->offsets, plan->tile_cluster,
			plan->tile_first, chunk->centroids, chunk->stats, part.get());
		CVCUDA_TRY(cvcuda_check_launch(stream), "health_members: potential", err);
	}
	potential_finish<<<(unsigned) chunk->nclusters, 256, 0, stream>>>(
		chunk->offsets, plan->cluster_tiles, part.get(), k, chunk->stats);
	CVCUDA_TRY(cvcuda_check_launch(stream), "health_members: potential finish", err);
	CVCUDA_TRY(cudaEventRecord(timer->stop, stream), "health_members: event", err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), "health_members: synchronize", err);
	return CVCUDA_OK;
}
