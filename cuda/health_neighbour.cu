// health_neighbour.cu: section 5 of STATISTICS.md on the device.
//
// neighbour_table   the m nearest other centroids of every centroid and its
//                   db_ratio, as cv_health_neighbour_prepare defines them:
//                   float64 distances from differences, "nearer, then
//                   smaller index", a coinciding pair contributing 0 to
//                   db_ratio.  A block takes four centroids; each warp
//                   streams one other centroid past all four, and one thread
//                   per row keeps its sorted list of m in the table itself.
// neighbour_members per tile: every member against its own centroid and its
//                   cluster's m neighbour centroids (in shared memory where
//                   they fit), counting members at home and summing the
//                   centroid silhouette; neighbour_finish merges the tiles
//                   in a fixed order and writes the five columns.
#include <cmath>

#include "health_linear.cuh"

#define TABLE_ROWS 4
#define TABLE_THREADS 256
#define GROUP 8

// Most shared memory the member pass gives to the neighbour centroids.
#define NEIGHBOUR_CACHE_BYTES (96 * 1024)

// True when (da, ia) comes before (db, ib): nearer, or as near with a smaller index.
static __device__ __forceinline__ bool
precedes(double da, long long ia, double db, long long ib)
{
	return da < db || (da == db && ia < ib);
}

// The table: four rows per block.
static __global__ void
neighbour_table(const double *__restrict__ centroids, const double *__restrict__ mean_dist,
				const double *__restrict__ mean_norm, long long k, int d, int m,
				long long *__restrict__ nearest, double *__restrict__ nearest_dist,
				double *__restrict__ db_ratio)
{
	__shared__ double sd[TABLE_ROWS][TABLE_THREADS / 32];
	long long	i0 = (long long) blockIdx.x * TABLE_ROWS;
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	const double *ci[TABLE_ROWS];
	int			count = 0;
	double		db = 0;

	for (int r = 0; r < TABLE_ROWS; r++)
		ci[r] = centroids + min(i0 + r, k - 1) * d;
	for (long long jb = 0; jb < k; jb += warps)
	{
		long long	j = jb + warp;

		if (j < k)
		{
			const double *cj = centroids + j * d;
			double		acc[TABLE_ROWS] = {0};

			for (int t = lane; t < d; t += 32)
			{
				double		v = __ldg(cj + t);

#pragma unroll
				for (int r = 0; r < TABLE_ROWS; r++)
				{
					double		e = __ldg(ci[r] + t) - v;

					acc[r] += e * e;
				}
			}
#pragma unroll
			for (int r = 0; r < TABLE_ROWS; r++)
			{
				double		s = warp_sum(acc[r]);

				if (lane == 0)
					sd[r][warp] = sqrt(s);
			}
		}
		__syncthreads();
		if (threadIdx.x < TABLE_ROWS && i0 + threadIdx.x < k)
		{
			long long	i = i0 + threadIdx.x;
			long long  *li = nearest + i * m;
			double	   *ld = nearest_dist + i * m;

			for (int w = 0; w < warps && jb + w < k; w++)
			{
				long long	jj = jb + w;
				double		dist = sd[threadIdx.x][w];
				double		scale;
				int			pos;

				if (jj == i)
					continue;
				scale = fmax(mean_norm[i], mean_norm[jj]);
				if (dist > HEALTH_EPS * scale)
					db = fmax(db, (mean_dist[i] + mean_dist[jj]) / dist);
				if (count == m && !precedes(dist, jj, ld[m - 1], li[m - 1]))
					continue;
				pos = count < m ? count++ : m - 1;
				while (pos > 0 && precedes(dist, jj, ld[pos - 1], li[pos - 1]))
				{
					ld[pos] = ld[pos - 1];
					li[pos] = li[pos - 1];
					pos--;
				}
				ld[pos] = dist;
				li[pos] = jj;
			}
		}
		__syncthreads();
	}
	if (threadIdx.x < TABLE_ROWS && i0 + threadIdx.x < k)
		db_ratio[i0 + threadIdx.x] = db;
}

CvCudaStatus
health_table_launch(const HealthSet *set, cudaStream_t stream, const HealthTimer *timer,
					CvCudaError *err)
{
	CVCUDA_TRY(cudaEventRecord(timer->start, stream), "health_neighbour_table: event", err);
	if (set->m > 0)
	{
		unsigned	blocks = (unsigned) ((set->k + TABLE_ROWS - 1) / TABLE_ROWS);

		neighbour_table<<<blocks, TABLE_THREADS, 0, stream>>>(set->centroids, set->mean_dist,
															  set->mean_norm, set->k, set->d,
															  set->m, set->nearest,
															  set->nearest_dist, set->db_ratio);
		CVCUDA_TRY(cvcuda_check_launch(stream), "health_neighbour_table: launch", err);
	}
	CVCUDA_TRY(cudaEventRecord(timer->stop, stream), "health_neighbour_table: event", err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), "health_neighbour_table: synchronize", err);
	return CVCUDA_OK;
}

// Per tile: members at home (r <= b) and the sum of (b - r) / max(b, r).
static __global__ void
neighbour_members(const float *__restrict__ x, int d, int tile_rows,
				  const long long *__restrict__ offsets,
				  const long long *__restrict__ tile_cluster,
				  const long long *__restrict__ tile_first, long long first_cluster,
				  const double *__restrict__ all_centroids, const long long *__restrict__ nearest,
				  int m, bool use_shared, double *__restrict__ part)
{
	extern __shared__ double cache[];
	__shared__ double scratch[32];
	long long	t = blockIdx.x;
	long long	c = tile_cluster[t];
	long long	g = first_cluster + c;
	long long	first = tile_first[t];
	long long	end = min(first + (long long) tile_rows, offsets[c + 1]);
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	int			count = m + 1;	/* own centroid first, then the neighbours */
	double		home = 0,
				sil = 0;

	if (use_shared)
	{
		for (int q = 0; q < count; q++)
		{
			const double *src = all_centroids + (q == 0 ? g : nearest[g * m + q - 1]) * d;

			for (int j = threadIdx.x; j < d; j += blockDim.x)
				cache[(size_t) q * d + j] = src[j];
		}
		__syncthreads();
	}
	for (long long i = first + warp; i < end; i += warps)
	{
		const float *row = x + i * d;
		double		r = 0,
					b = INFINITY;

		for (int q0 = 0; q0 < count; q0 += GROUP)
		{
			const double *cp[GROUP];
			double		acc[GROUP];
			int			gc = min(GROUP, count - q0);

#pragma unroll
			for (int q = 0; q < GROUP; q++)
			{
				int			qq = min(q0 + q, count - 1);

				acc[q] = 0;
				cp[q] = use_shared ? cache + (size_t) qq * d :
					all_centroids + (qq == 0 ? g : nearest[g * m + qq - 1]) * d;
			}
			visit_row(row, d, lane, [&](int j, float f) {
				double		v = (double) f;

#pragma unroll
				for (int q = 0; q < GROUP; q++)
					if (q < gc)
					{
						double		e = v - cp[q][j];

						acc[q] += e * e;
					}
			});
#pragma unroll
			for (int q = 0; q < GROUP; q++)
				if (q < gc)
				{
					double		dist = sqrt(warp_sum(acc[q]));

					if (q0 + q == 0)
						r = dist;
					else
						b = fmin(b, dist);
				}
		}
		if (lane == 0)
		{
			double		larger = fmax(b, r);

			home += r <= b;
			if (larger > 0)
				sil += (b - r) / larger;
		}
	}
	home = block_sum(home, scratch);
	sil = block_sum(sil, scratch);
	if (threadIdx.x == 0)
	{
		part[2 * t] = home;
		part[2 * t + 1] = sil;
	}
}

// Per cluster: the five columns.
static __global__ void
neighbour_finish(const long long *__restrict__ offsets,
				 const long long *__restrict__ cluster_tiles, const double *__restrict__ part,
				 long long first_cluster, long long k, int m,
				 const long long *__restrict__ nearest, const double *__restrict__ nearest_dist,
				 const double *__restrict__ db_ratio, CvClusterStats *__restrict__ stats)
{
	__shared__ double scratch[32];
	long long	c = blockIdx.x;
	long long	g = first_cluster + c;
	long long	n = offsets[c + 1] - offsets[c];
	CvClusterStats *out = stats + c;
	double		home = 0,
				sil = 0;

	if (k >= 2 && m >= 1)
	{
		home = block_sum_tiles(part, cluster_tiles[c], cluster_tiles[c + 1], 2, 0, scratch);
		sil = block_sum_tiles(part, cluster_tiles[c], cluster_tiles[c + 1], 2, 1, scratch);
	}
	if (threadIdx.x != 0)
		return;
	stat_null(out, CV_STAT_NEAREST_CLUSTER);
	stat_null(out, CV_STAT_NEAREST_DIST);
	stat_null(out, CV_STAT_DB_RATIO);
	stat_null(out, CV_STAT_NEIGHBOUR_RELEVANCE);
	stat_null(out, CV_STAT_CENTROID_SILHOUETTE);
	if (k < 2 || m < 1)
		return;
	stat_set(out, CV_STAT_NEAREST_CLUSTER, (double) nearest[g * m]);
	stat_set(out, CV_STAT_NEAREST_DIST, nearest_dist[g * m]);
	stat_set(out, CV_STAT_DB_RATIO, db_ratio[g]);
	if (n < 1)
		return;
	stat_set(out, CV_STAT_NEIGHBOUR_RELEVANCE, home / (double) n);
	stat_set(out, CV_STAT_CENTROID_SILHOUETTE, sil / (double) n);
}

CvCudaStatus
health_neighbour_launch(const HealthChunk *chunk, const HealthPlan *plan, const HealthSet *set,
						const HealthTimer *timer, CvCudaError *err)
{
	cudaStream_t stream = chunk->stream;
	DeviceArray<double> part;
	size_t		cache_bytes = sizeof(double) * (size_t) (set->m + 1) * (size_t) set->d;
	bool		use_shared = cache_bytes <= NEIGHBOUR_CACHE_BYTES;
	bool		run = set->k >= 2 && set->m >= 1 && plan->ntiles > 0;
	static bool cache_allowed = false;

	// the neighbour centroids may take more than the default 48 KiB of shared memory
	if (!cache_allowed)
	{
		CVCUDA_TRY(cudaFuncSetAttribute(neighbour_members,
										cudaFuncAttributeMaxDynamicSharedMemorySize,
										NEIGHBOUR_CACHE_BYTES), "health_members: attribute", err);
		cache_allowed = true;
	}

	CVCUDA_TRY(part.allocate((size_t) (plan->ntiles > 0 ? plan->ntiles : 1) * 2),
			   "health_members: scratch", err);
	CVCUDA_TRY(cudaEventRecord(timer->start, stream), "health_members: event", err);
	if (run)
	{
		neighbour_members<<<(unsigned) plan->ntiles, 256, use_shared ? cache_bytes : 0, stream>>>(
			chunk->members, chunk->d, plan->tile_rows, chunk->offsets, plan->tile_cluster,
			plan->tile_first, chunk->first_cluster, set->centroids, set->nearest, set->m,
			use_shared, part.get());
		CVCUDA_TRY(cvcuda_check_launch(stream), "health_members: neighbour", err);
	}
	neighbour_finish<<<(unsigned) chunk->nclusters, 256, 0, stream>>>(
		chunk->offsets, plan->cluster_tiles, part.get(), chunk->first_cluster, set->k,
		set->m, set->nearest, set->nearest_dist, set->db_ratio, chunk->stats);
	CVCUDA_TRY(cvcuda_check_launch(stream), "health_members: neighbour finish", err);
	CVCUDA_TRY(cudaEventRecord(timer->stop, stream), "health_members: event", err);
	CVCUDA_TRY(cudaStreamSynchronize(stream), "health_members: synchronize", err);
	return CVCUDA_OK;
}
