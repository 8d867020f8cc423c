// health_twomeans.cu: section 2 of STATISTICS.md on the device, every
// cluster of a chunk in one launch per kernel (health_linear.cuh's tiles).
//
// Seeds a = x_1, b = x_n; exactly three Lloyd iterations, each one launch of
// assign_sums (per tile, 8 rows at a time: a warp per member compares the
// float64 squared distances to a and b, from differences, tie to a, and
// writes the member's side byte; then a dimension-owning sweep of the same
// rows sums x - x_1 per side) and, for clusters of several tiles, one of
// move_centres (the partials in a fixed order).  A side left empty keeps its
// centre.  Then inertia2 with the final centres, and split_finish writes
// the three columns with the reference's NULL rules.  The side array of
// the third assignment is what the pairwise family reads.  No atomics.
#include <cmath>

#include "health_linear.cuh"

#define SUB_ROWS 8
#define TWO_MEANS_ITERATIONS 3

// a = x_1 and b = x_n of every cluster (centres: nclusters x 2 x d).
static __global__ void
seed_centres(const float *__restrict__ x, const long long *__restrict__ offsets, int d,
			 double *__restrict__ centres)
{
	long long	c = blockIdx.x;
	long long	c0 = offsets[c],
				c1 = offsets[c + 1];

	if (c1 == c0)
		return;
	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		centres[c * 2 * d + j] = (double) x[c0 * d + j];
		centres[c * 2 * d + d + j] = (double) x[(c1 - 1) * d + j];
	}
}

// Moves a centre to x_1 + sum / count; an empty side keeps it.
static __device__ __forceinline__ void
move(double *centre, double x1, double sum, double count)
{
	if (count > 0)
		*centre = x1 + sum / count;
}

// One iteration per tile: sides of its members, and the per-side sums of x - x_1.
template <int Q>
static __global__ void
assign_sums(const float *__restrict__ x, const long long *__restrict__ offsets, int d,
			int tile_rows, const long long *__restrict__ tile_cluster,
			const long long *__restrict__ tile_first, const long long *__restrict__ tile_slot,
			double *__restrict__ centres, double *__restrict__ counts,
			uint8_t *__restrict__ side, double *__restrict__ part,
			double *__restrict__ part_count)
{
	__shared__ uint8_t sside[SUB_ROWS];
	__shared__ double scratch[32];
	long long	t = blockIdx.x;
	long long	c = tile_cluster[t];
	long long	c0 = offsets[c],
				n = offsets[c + 1] - c0;
	long long	first = tile_first[t];
	long long	end = min(first + (long long) tile_rows, c0 + n);
	const float *x1 = x + c0 * d;
	double	   *ca = centres + c * 2 * d,
			   *cb = ca + d;
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	double		sa[Q],
				sb[Q],
				x1v[Q];
	double		nb = 0;

#pragma unroll
	for (int q = 0; q < Q; q++)
	{
		int			j = threadIdx.x + q * blockDim.x;

		sa[q] = sb[q] = 0;
		x1v[q] = j < d ? (double) x1[j] : 0.0;
	}
	for (long long r0 = first; r0 < end; r0 += SUB_ROWS)
	{
		int			rows = (int) min((long long) SUB_ROWS, end - r0);

		for (int i = warp; i < rows; i += warps)
		{
			double		da = 0,
						db = 0;

			visit_row(x + (r0 + i) * d, d, lane, [&](int j, float f) {
				double		v = (double) f,
							ea = v - ca[j],
							eb = v - cb[j];

				da += ea * ea;
				db += eb * eb;
			});
			da = warp_sum(da);
			db = warp_sum(db);
			if (lane == 0)
			{
				uint8_t		s = db < da;	/* tie: a */

				sside[i] = s;
				side[r0 + i] = s;
				nb += s;
			}
		}
		__syncthreads();
#pragma unroll 4
		for (int i = 0; i < rows; i++)
		{
			const float *row = x + (r0 + i) * d;
			bool		to_b = sside[i] != 0;

#pragma unroll
			for (int q = 0; q < Q; q++)
			{
				int			j = threadIdx.x + q * blockDim.x;

				if (j < d)
				{
					double		e = (double) __ldg(row + j) - x1v[q];

					if (to_b)
						sb[q] += e;
					else
						sa[q] += e;
				}
			}
		}
		__syncthreads();
	}
	nb = block_sum(nb, scratch);
	{
		long long	slot = tile_slot[t];
		double		na = (double) (end - first) - nb;

#pragma unroll
		for (int q = 0; q < Q; q++)
		{
			int			j = threadIdx.x + q * blockDim.x;

			if (j >= d)
				continue;
			if (slot < 0)
			{
				move(&ca[j], x1v[q], sa[q], na);
				move(&cb[j], x1v[q], sb[q], nb);
			}
			else
			{
				part[slot * 2 * d + j] = sa[q];
				part[slot * 2 * d + d + j] = sb[q];
			}
		}
		if (threadIdx.x == 0)
		{
			if (slot < 0)
			{
				counts[2 * c] = na;
				counts[2 * c + 1] = nb;
			}
			else
			{
				part_count[2 * slot] = na;
				part_count[2 * slot + 1] = nb;
			}
		}
	}
}

// The partials of multi-tile clusters: 32 dims x 8 slices of tiles per block.
static __global__ void
move_centres(const float *__restrict__ x, const long long *__restrict__ offsets, int d,
			 const long long *__restrict__ multi, const long long *__restrict__ cluster_tiles,
			 const long long *__restrict__ tile_slot, const double *__restrict__ part,
			 const double *__restrict__ part_count, double *__restrict__ centres,
			 double *__restrict__ counts)
{
	__shared__ double s[4][8][32];
	long long	c = multi[blockIdx.x];
	int			jl = threadIdx.x & 31,
				slice = threadIdx.x >> 5;
	int			j = blockIdx.y * 32 + jl;
	long long	slot0 = tile_slot[cluster_tiles[c]];
	long long	count = cluster_tiles[c + 1] - cluster_tiles[c];
	double		a = 0,
				b = 0,
				na = 0,
				nb = 0;

	for (long long q = slice; q < count; q += 8)
	{
		if (j < d)
		{
			a += part[(slot0 + q) * 2 * d + j];
			b += part[(slot0 + q) * 2 * d + d + j];
		}
		na += part_count[2 * (slot0 + q)];
		nb += part_count[2 * (slot0 + q) + 1];
	}
	s[0][slice][jl] = a;
	s[1][slice][jl] = b;
	s[2][slice][jl] = na;
	s[3][slice][jl] = nb;
	__syncthreads();
	if (slice == 0)
	{
		double		v[4];

		for (int w = 0; w < 4; w++)
			v[w] = ((s[w][0][jl] + s[w][1][jl]) + (s[w][2][jl] + s[w][3][jl])) +
				((s[w][4][jl] + s[w][5][jl]) + (s[w][6][jl] + s[w][7][jl]));
		if (j < d)
		{
			double		x1 = (double) x[offsets[c] * d + j];

			move(&centres[c * 2 * d + j], x1, v[0], v[2]);
			move(&centres[c * 2 * d + d + j], x1, v[1], v[3]);
		}
		if (blockIdx.y == 0 && jl == 0)
		{
			counts[2 * c] = v[2];
			counts[2 * c + 1] = v[3];
		}
	}
}

// Per tile: the sum of every member's squared distance to the centre of its side.
static __global__ void
inertia2(const float *__restrict__ x, const long long *__restrict__ offsets, int d,
		 int tile_rows, const long long *__restrict__ tile_cluster,
		 const long long *__restrict__ tile_first, const double *__restrict__ centres,
		 const uint8_t *__restrict__ side, double *__restrict__ part)
{
	__shared__ double scratch[32];
	long long	t = blockIdx.x;
	long long	c = tile_cluster[t];
	long long	first = tile_first[t];
	long long	end = min(first + (long long) tile_rows, offsets[c + 1]);
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	double		total = 0;

	for (long long i = first + warp; i < end; i += warps)
	{
		const double *cen = centres + c * 2 * d + (side[i] ? d : 0);
		double		dd = 0;

		visit_row(x + i * d, d, lane, [&](int j, float f) {
			double		e = (double) f - cen[j];

			dd += e * e;
		});
		total += warp_sum(dd);
	}
	total = block_sum(lane == 0 ? total : 0.0, scratch);
	if (threadIdx.x == 0)
		part[t] = total;
}

// Per cluster: split_gain, split_balance and split_separation.
static __global__ void
split_finish(const long long *__restrict__ offsets, int d,
			 const long long *__restrict__ cluster_tiles, const double *__restrict__ part,
			 const double *__restrict__ centres, const double *__restrict__ counts,
			 CvClusterStats *__restrict__ stats)
{
	__shared__ double scratch[32];
	long long	c = blockIdx.x;
	long long	n = offsets[c + 1] - offsets[c];
	CvClusterStats *out = stats + c;
	double		i2 = block_sum_tiles(part, cluster_tiles[c], cluster_tiles[c + 1], 1, 0, scratch);
	double		sep = 0;

	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		double		e = centres[c * 2 * d + j] - centres[c * 2 * d + d + j];

		sep += e * e;
	}
	sep = block_sum(sep, scratch);
	if (threadIdx.x != 0)
		return;
	stat_null(out, CV_STAT_SPLIT_GAIN);
	stat_null(out, CV_STAT_SPLIT_BALANCE);
	stat_null(out, CV_STAT_SPLIT_SEPARATION);
	if (n < 2 || out->collapsed)
		return;
	{
		double		inertia = out->value[CV_STAT_INERTIA];
		double		mu = out->value[CV_STAT_MEAN_DIST];
		double		na = counts[2 * c],
					nb = counts[2 * c + 1];

		if (!out->is_null[CV_STAT_INERTIA] && inertia != 0)
			stat_set(out, CV_STAT_SPLIT_GAIN, 1.0 - i2 / inertia);
		stat_set(out, CV_STAT_SPLIT_BALANCE, fmin(na, nb) / (double) n);
		if (!out->is_null[CV_STAT_MEAN_DIST] && mu != 0)
			stat_set(out, CV_STAT_SPLIT_SEPARATION, sqrt(sep) / mu);
	}
}

template <int Q>
static void
launch_assign(const HealthChunk *chunk, const HealthPlan *plan, int threads, double *centres,
			  double *counts, uint8_t *side, double *part, double *part_count)
{
	assign_sums<Q><<<(unsigned) plan->ntiles, threads, 0, chunk->stream>>>(
		chunk->members, chunk->offsets, chunk->d, plan->tile_rows, plan->tile_cluster,
		plan->tile_first, plan->tile_slot, centres, counts, side, part, part_count);
}

CvCudaStatus
health_twomeans_launch(const HealthChunk *chunk, const HealthPlan *plan, uint8_t *side,
					   const HealthTimer *timer, CvCudaError *err)
{
	int			d = chunk->d;
	long long	k = chunk->nclusters;
	DeviceArray<double> centres,
				counts,
				part,
				part_count,
				part_i2;
	int			threads = d <= 2048 ? 256 : 1024;
	int			q = (d + threads - 1) / threads;
	cudaStream_t stream = chunk->stream;

	CVCUDA_TRY(centres.allocate((size_t) k * 2 * d), "health_twomeans: scratch", err);
	CVCUDA_TRY(counts.allocate((size_t) k * 2), "health_twomeans: scratch", err);
	CVCUDA_TRY(part.allocate((size_t) plan->nslots * 2 * d), "health_twomeans: scratch", err);
	CVCUDA_TRY(part_count.allocate((size_t) plan->nslots * 2), "health_twomeans: scratch", err);
	CVCUDA_TRY(part_i2.allocate((size_t) (plan->ntiles > 0 ? plan->ntiles : 1)),
			   "health_twomeans: scratch", err);
	CVCUDA_TRY(cudaEventRecord(timer->start, stream), "health_twomeans: event", err);
	CVCUDA_TRY(cudaMemsetAsync(counts.get(), 0, sizeof(double) * k * 2, stream),
			   "health_twomeans: memset", err);
	seed_centres<<<(unsigned) k, 256, 0, stream>>>(chunk->members, chunk->offsets, d,
												   centres.get());
	CVCUDA_TRY(cvcuda_check_launch(stream), "health_twomeans: seeds", err);
	for (int it = 0; it < TWO_MEANS_ITERATIONS && plan->ntiles > 0; it++)
	{
		if (q <= 1)
			launch_assign<1>(chunk, plan, threads, centres.get(), counts.get(), side, part.get(), part_count.get());
		else if (q <= 2)
			launch_assign<2>(chunk, plan, threads, centres.get(), counts.get(), side, part.get(), part_count.get());
		else if (q <= 4)
			launch_assign<4>(chunk, plan, threads, centres.get(), counts.get(), side, part.get(), part_count.get());
		else if (q <= 8)
			launch_assign<8>(chunk, plan, threads, centres.get(), counts.get(), side, part.get(), part_count.get());
		else
			launch_assign<16>(chunk, plan, threads, centres.get(), counts.get(), side, part.get(), part_count.get());
		CVCUDA_TRY(cvcuda_check_launch(stream), "health_twomeans: assign", err);
		if (plan->nmulti > 0)
		{
			dim3		grid((unsigned) plan->nmulti, (unsigned) ((d + 31) / 32));

			move_centres<<<grid, 256, 0, stream>>>(chunk->members, chunk->offsets, d, plan->multi,
												   plan->cluster_tiles, plan->tile_slot,
												   part.get(), part_count.get(), centres.get(),
												   counts.get());
			CVCUDA_TRY(cvcuda_check_launch(stream), "health_twomeans: move", err);
		}
	}
	if (plan->ntiles > 0)
	{
		inertia2<<<(unsigned) plan->ntiles, 256, 0, stream>>>(chunk->members, chunk->offsets, d,
															  plan->tile_rows, plan->tile_cluster,
															  plan->tile_first, centres.get(),
															  side, part_i2.get());
		CVCUDA_TRY(cvcuda_check_launch(stream), "health_twomeans: inertia2", err);
	}
	split_finish<<<(unsigned) k, 256, 0, stream>>>(chunk->offsets, d, plan->cluster_tiles,
												   part_i2.get(), centres.get(), counts.get(),
												   chunk->stats);
	CVCUDA_TRY(cvcuda_check_launch(stream), "health_twomeans: finish", err);
	CVCUDA_TRY(cudaEventRecord(timer->stop, stream), "health_twomeans: event", err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), "health_twomeans: synchronize", err);
	return CVCUDA_OK;
}
