// health_centroid.cu: section 1 of STATISTICS.md on the device (all of it
// but novelty and between_ss), every cluster of a chunk in one launch per
// kernel, a cluster of any size spread over many blocks (health_linear.cuh's
// tile plan).
//
//   centroid_sums     per tile, 8 rows at a time: the member norms (a warp
//                     per member), then a dimension-owning sweep of the same
//                     rows (still in L1/L2) adding x - x_1 and x / ||x|| in
//                     float64; a one-tile cluster finishes its centroid
//                     c = x_1 + mean(x - x_1) (identical members give c = x_1
//                     bit for bit), other tiles write partials
//   centroid_merge    the partials of multi-tile clusters, in a fixed order
//   vector_norms      ||c|| and ||sum of unit vectors|| per cluster
//   distance_moments  per tile: r_i = ||x_i - c|| from float64 differences
//                     (stored), Terriberry moments of r_i per warp merged by
//                     Chan's formulas, inertia, radius, cohesion, norm moments
//   centroid_finish   per cluster: the tiles' moments merged in a fixed tree,
//                     then the threshold counts over the stored r_i, and the
//                     record written with the reference's NULL rules
// No atomics: every sum has one order, so results repeat bit for bit.
#include <cmath>

#include "health_linear.cuh"

// Rows per sub-tile: norms first, then the column sweep over the same rows.
#define SUB_ROWS 8

// Running moments of a set of members: r_i up to the fourth central moment,
// the sums the columns need, and the norm moments.
struct Moments
{
	double		n;
	double		mean;
	double		m2;
	double		m3;
	double		m4;
	double		sum_sq;
	double		max;
	double		cos_sum;
	double		nn;
	double		nmean;
	double		nm2;
	double		nonzero;
};

static __device__ __forceinline__ Moments
moments_zero()
{
	Moments		m;

	m.n = m.mean = m.m2 = m.m3 = m.m4 = 0;
	m.sum_sq = m.max = m.cos_sum = 0;
	m.nn = m.nmean = m.nm2 = m.nonzero = 0;
	return m;
}

// Terriberry's one-pass update with r, and Welford's with the norm.
static __device__ __forceinline__ void
moments_add(Moments *m, double r, double dist_sq, double cosine, double norm)
{
	double		n1 = m->n;
	double		n = n1 + 1;
	double		delta = r - m->mean;
	double		delta_n = delta / n;
	double		delta_n2 = delta_n * delta_n;
	double		term1 = delta * delta_n * n1;

	m->n = n;
	m->mean += delta_n;
	m->m4 += term1 * delta_n2 * (n * n - 3 * n + 3) + 6 * delta_n2 * m->m2 - 4 * delta_n * m->m3;
	m->m3 += term1 * delta_n * (n - 2) - 3 * delta_n * m->m2;
	m->m2 += term1;
	m->sum_sq += dist_sq;
	m->max = fmax(m->max, r);
	m->cos_sum += cosine;
	m->nn += 1;
	delta = norm - m->nmean;
	m->nmean += delta / m->nn;
	m->nm2 += delta * (norm - m->nmean);
	m->nonzero += norm > 0;
}

// Chan's parallel merge of b into a (central moments up to the fourth).
static __device__ __forceinline__ void
moments_merge(Moments *a, const Moments *b)
{
	if (b->n == 0)
		return;
	if (a->n == 0)
	{
		*a = *b;
		return;
	}
	{
		double		na = a->n,
					nb = b->n,
					n = na + nb;
		double		delta = b->mean - a->mean;
		double		d2 = delta * delta;
		double		m2 = a->m2 + b->m2 + d2 * na * nb / n;
		double		m3 = a->m3 + b->m3 + d2 * delta * na * nb * (na - nb) / (n * n)
			+ 3 * delta * (na * b->m2 - nb * a->m2) / n;
		double		m4 = a->m4 + b->m4
			+ d2 * d2 * na * nb * (na * na - na * nb + nb * nb) / (n * n * n)
			+ 6 * d2 * (na * na * b->m2 + nb * nb * a->m2) / (n * n)
			+ 4 * delta * (na * b->m3 - nb * a->m3) / n;

		a->mean += delta * nb / n;
		a->m2 = m2;
		a->m3 = m3;
		a->m4 = m4;
		a->n = n;
	}
	a->sum_sq += b->sum_sq;
	a->max = fmax(a->max, b->max);
	a->cos_sum += b->cos_sum;
	{
		double		na = a->nn,
					nb = b->nn,
					n = na + nb;
		double		delta = b->nmean - a->nmean;

		a->nm2 = a->nm2 + b->nm2 + delta * delta * na * nb / n;
		a->nmean += delta * nb / n;
		a->nn = n;
	}
	a->nonzero += b->nonzero;
}

// Per tile: sum(x - x_1) and sum(x / ||x||) over its members, Q dims per thread.
template <int Q>
static __global__ void
centroid_sums(const float *__restrict__ x, const long long *__restrict__ offsets, int d,
			  int tile_rows, const long long *__restrict__ tile_cluster,
			  const long long *__restrict__ tile_first, const long long *__restrict__ tile_slot,
			  double *__restrict__ centroids, double *__restrict__ usum,
			  double *__restrict__ part_c, double *__restrict__ part_u)
{
	__shared__ double inv[SUB_ROWS];
	long long	t = blockIdx.x;
	long long	c = tile_cluster[t];
	long long	c0 = offsets[c],
				n = offsets[c + 1] - c0;
	long long	first = tile_first[t];
	long long	end = min(first + (long long) tile_rows, c0 + n);
	const float *x1 = x + c0 * d;
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	double		cs[Q],
				us[Q],
				x1v[Q];

#pragma unroll
	for (int q = 0; q < Q; q++)
	{
		int			j = threadIdx.x + q * blockDim.x;

		cs[q] = us[q] = 0;
		x1v[q] = j < d ? (double) x1[j] : 0.0;
	}
	for (long long r0 = first; r0 < end; r0 += SUB_ROWS)
	{
		int			rows = (int) min((long long) SUB_ROWS, end - r0);

		for (int i = warp; i < rows; i += warps)
		{
			double		s = 0;

			visit_row(x + (r0 + i) * d, d, lane, [&](int, float v) {
				s += (double) v * (double) v;
			});
			s = warp_sum(s);
			if (lane == 0)
				inv[i] = s > 0 ? 1.0 / sqrt(s) : 0.0;
		}
		__syncthreads();
#pragma unroll 4
		for (int i = 0; i < rows; i++)
		{
			const float *row = x + (r0 + i) * d;
			double		w = inv[i];

#pragma unroll
			for (int q = 0; q < Q; q++)
			{
				int			j = threadIdx.x + q * blockDim.x;

				if (j < d)
				{
					double		v = (double) __ldg(row + j);

					cs[q] += v - x1v[q];
					us[q] += v * w;
				}
			}
		}
		__syncthreads();
	}
	{
		long long	slot = tile_slot[t];

#pragma unroll
		for (int q = 0; q < Q; q++)
		{
			int			j = threadIdx.x + q * blockDim.x;

			if (j >= d)
				continue;
			if (slot < 0)
			{
				centroids[c * d + j] = x1v[q] + cs[q] / (double) n;
				usum[c * d + j] = us[q];
			}
			else
			{
				part_c[slot * d + j] = cs[q];
				part_u[slot * d + j] = us[q];
			}
		}
	}
}

// The partials of multi-tile clusters: 32 dims x 8 slices of tiles per block.
static __global__ void
centroid_merge(const float *__restrict__ x, const long long *__restrict__ offsets, int d,
			   const long long *__restrict__ multi, const long long *__restrict__ cluster_tiles,
			   const long long *__restrict__ tile_slot, const double *__restrict__ part_c,
			   const double *__restrict__ part_u, double *__restrict__ centroids,
			   double *__restrict__ usum)
{
	__shared__ double sc[8][32];
	__shared__ double su[8][32];
	long long	c = multi[blockIdx.x];
	int			jl = threadIdx.x & 31,
				slice = threadIdx.x >> 5;
	int			j = blockIdx.y * 32 + jl;
	long long	slot0 = tile_slot[cluster_tiles[c]];
	long long	count = cluster_tiles[c + 1] - cluster_tiles[c];
	double		a = 0,
				b = 0;

	if (j < d)
		for (long long s = slice; s < count; s += 8)
		{
			a += part_c[(slot0 + s) * d + j];
			b += part_u[(slot0 + s) * d + j];
		}
	sc[slice][jl] = a;
	su[slice][jl] = b;
	__syncthreads();
	if (slice == 0 && j < d)
	{
		long long	c0 = offsets[c],
					n = offsets[c + 1] - c0;

		a = ((sc[0][jl] + sc[1][jl]) + (sc[2][jl] + sc[3][jl])) +
			((sc[4][jl] + sc[5][jl]) + (sc[6][jl] + sc[7][jl]));
		b = ((su[0][jl] + su[1][jl]) + (su[2][jl] + su[3][jl])) +
			((su[4][jl] + su[5][jl]) + (su[6][jl] + su[7][jl]));
		centroids[c * d + j] = (double) x[c0 * d + j] + a / (double) n;
		usum[c * d + j] = b;
	}
}

// ||c|| and ||usum|| of every cluster (zero for an empty one, whose centroid is zeroed).
static __global__ void
vector_norms(const long long *__restrict__ offsets, int d, double *__restrict__ centroids,
			 const double *__restrict__ usum, double *__restrict__ cnorm,
			 double *__restrict__ unorm)
{
	__shared__ double scratch[32];
	long long	c = blockIdx.x;
	bool		empty = offsets[c + 1] == offsets[c];
	double		a = 0,
				b = 0;

	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		if (empty)
		{
			centroids[c * d + j] = 0;
			continue;
		}
		double		v = centroids[c * d + j],
					u = usum[c * d + j];

		a += v * v;
		b += u * u;
	}
	a = block_sum(a, scratch);
	b = block_sum(b, scratch);
	if (threadIdx.x == 0)
	{
		cnorm[c] = sqrt(a);
		unorm[c] = sqrt(b);
	}
}

// Per tile: r_i (stored), and the tile's moments (warps merged in order).
static __global__ void
distance_moments(const float *__restrict__ x, int d, int tile_rows,
				 const long long *__restrict__ offsets,
				 const long long *__restrict__ tile_cluster,
				 const long long *__restrict__ tile_first,
				 const double *__restrict__ centroids, const double *__restrict__ cnorm,
				 double *__restrict__ r_out, Moments *__restrict__ part)
{
	__shared__ Moments wm[32];
	long long	t = blockIdx.x;
	long long	c = tile_cluster[t];
	long long	first = tile_first[t];
	long long	end = min(first + (long long) tile_rows, offsets[c + 1]);
	const double *cen = centroids + c * d;
	double		c_norm = cnorm[c];
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				warps = blockDim.x >> 5;
	Moments		m = moments_zero();

	for (long long i = first + warp; i < end; i += warps)
	{
		double		dd = 0,
					dt = 0,
					nn = 0;

		visit_row(x + i * d, d, lane, [&](int j, float f) {
			double		v = (double) f,
						cj = __ldg(cen + j),
						e = v - cj;

			dd += e * e;
			dt += v * cj;
			nn += v * v;
		});
		dd = warp_sum(dd);
		dt = warp_sum(dt);
		nn = warp_sum(nn);
		if (lane == 0)
		{
			double		r = sqrt(dd);
			double		cosine = 0;

			if (nn > 0 && c_norm > 0)
				cosine = fmax(-1.0, fmin(1.0, dt / (sqrt(nn) * c_norm)));
			r_out[i] = r;
			moments_add(&m, r, dd, cosine, sqrt(nn));
		}
	}
	if (lane == 0)
		wm[warp] = m;
	__syncthreads();
	if (threadIdx.x == 0)
	{
		for (int w = 1; w < warps; w++)
			moments_merge(&wm[0], &wm[w]);
		part[t] = wm[0];
	}
}

#define FINISH_THREADS 256

// Per cluster: merged moments, threshold counts, and the record.
static __global__ void
centroid_finish(const long long *__restrict__ offsets, const long long *__restrict__ cluster_tiles,
				const Moments *__restrict__ part, const double *__restrict__ r,
				const double *__restrict__ cnorm, const double *__restrict__ unorm,
				double outlier_z, CvClusterStats *__restrict__ stats)
{
	__shared__ Moments tm[FINISH_THREADS];
	__shared__ double scratch[32];
	__shared__ double shared_mu,
				shared_s;
	__shared__ bool shared_flat;
	long long	c = blockIdx.x;
	long long	c0 = offsets[c],
				n = offsets[c + 1] - c0;
	long long	t0 = cluster_tiles[c],
				t1 = cluster_tiles[c + 1];
	CvClusterStats *out = stats + c;
	Moments		m = moments_zero();
	double		outliers,
				core,
				periphery;

	for (long long t = t0 + threadIdx.x; t < t1; t += blockDim.x)
		moments_merge(&m, &part[t]);
	tm[threadIdx.x] = m;
	__syncthreads();
	for (int half = FINISH_THREADS / 2; half > 0; half >>= 1)
	{
		if (threadIdx.x < half)
			moments_merge(&tm[threadIdx.x], &tm[threadIdx.x + half]);
		__syncthreads();
	}
	m = tm[0];
	if (threadIdx.x == 0)
	{
		double		s = n > 0 ? sqrt(m.m2 / (double) n) : 0;

		shared_mu = m.mean;
		shared_s = s;
		shared_flat = !(s > HEALTH_EPS * m.mean);
	}
	__syncthreads();
	{
		double		mu = shared_mu,
					s = shared_s,
					thr = mu + outlier_z * s;
		double		o = 0,
					co = 0,
					pe = 0;

		if (!shared_flat)
			for (long long i = c0 + threadIdx.x; i < c0 + n; i += blockDim.x)
			{
				double		ri = r[i];

				o += ri > thr;
				co += ri <= mu - s;
				pe += ri >= mu + s;
			}
		outliers = block_sum(o, scratch);
		core = block_sum(co, scratch);
		periphery = block_sum(pe, scratch);
	}
	if (threadIdx.x != 0)
		return;
	for (int col = 0; col < CV_STAT_COUNT; col++)
		stat_null(out, col);
	out->rank_refused = false;
	stat_set(out, CV_STAT_N, (double) (n > 0 ? n : 0));
	if (n < 1)
	{
		out->collapsed = true;
		return;
	}
	{
		double		dn = (double) n;
		double		s = shared_s;
		double		m2 = m.m2 / dn;
		bool		flat = shared_flat;
		double		c_norm = cnorm[c];

		out->collapsed = m.max <= HEALTH_EPS * m.nmean;
		stat_set(out, CV_STAT_CENTROID_NORM, c_norm);
		stat_set(out, CV_STAT_INERTIA, m.sum_sq);
		stat_set(out, CV_STAT_MEAN_DIST, m.mean);
		stat_set(out, CV_STAT_SPREAD, s);
		stat_set(out, CV_STAT_RADIUS, m.max);
		if (!(m2 <= 0 || s <= HEALTH_EPS * m.mean || out->collapsed))
		{
			stat_set(out, CV_STAT_SKEW, (m.m3 / dn) / pow(m2, 1.5));
			stat_set(out, CV_STAT_KURTOSIS, (m.m4 / dn) / (m2 * m2) - 3.0);
		}
		if (c_norm > HEALTH_EPS * m.nmean)
			stat_set(out, CV_STAT_COHESION, m.cos_sum / dn);
		stat_set(out, CV_STAT_OUTLIER_RATIO, flat ? 0.0 : outliers / dn);
		if (flat || out->collapsed)
			stat_set(out, CV_STAT_CORE_PERIPHERY_RATIO, 1.0);
		else if (periphery > 0)
			stat_set(out, CV_STAT_CORE_PERIPHERY_RATIO, core / periphery);
		stat_set(out, CV_STAT_MEAN_NORM, m.nmean);
		if (m.nmean > 0)
			stat_set(out, CV_STAT_NORM_CV, sqrt(m.nm2 / dn) / m.nmean);
		if (m.nonzero > 0)
			stat_set(out, CV_STAT_EMBEDDING_QUALITY, fmin(unorm[c] / m.nonzero, 1.0));
	}
}

// The column sweep's dims per thread and block size for d.
template <int Q>
static void
launch_sums(const HealthChunk *chunk, const HealthPlan *plan, int threads, double *centroids,
			double *usum, double *part_c, double *part_u)
{
	centroid_sums<Q><<<(unsigned) plan->ntiles, threads, 0, chunk->stream>>>(
		chunk->members, chunk->offsets, chunk->d, plan->tile_rows, plan->tile_cluster,
		plan->tile_first, plan->tile_slot, centroids, usum, part_c, part_u);
}

CvCudaStatus
health_centroid_launch(const HealthChunk *chunk, const HealthPlan *plan, double *centroids,
					   const HealthTimer *timer, CvCudaError *err)
{
	int			d = chunk->d;
	long long	k = chunk->nclusters;
	DeviceArray<double> usum,
				part_c,
				part_u,
				norms,
				r;
	DeviceArray<Moments> part_m;
	int			threads = d <= 2048 ? 256 : 1024;
	int			q = (d + threads - 1) / threads;

	CVCUDA_TRY(usum.allocate((size_t) k * d), "health_centroid: scratch", err);
	CVCUDA_TRY(part_c.allocate((size_t) plan->nslots * d), "health_centroid: scratch", err);
	CVCUDA_TRY(part_u.allocate((size_t) plan->nslots * d), "health_centroid: scratch", err);
	CVCUDA_TRY(norms.allocate((size_t) k * 2), "health_centroid: scratch", err);
	CVCUDA_TRY(r.allocate((size_t) (chunk->total > 0 ? chunk->total : 1)), "health_centroid: scratch", err);
	CVCUDA_TRY(part_m.allocate((size_t) (plan->ntiles > 0 ? plan->ntiles : 1)), "health_centroid: scratch", err);
	CVCUDA_TRY(cudaEventRecord(timer->start, chunk->stream), "health_centroid: event", err);
	if (plan->ntiles > 0)
	{
		if (q <= 1)
			launch_sums<1>(chunk, plan, threads, centroids, usum.get(), part_c.get(), part_u.get());
		else if (q <= 2)
			launch_sums<2>(chunk, plan, threads, centroids, usum.get(), part_c.get(), part_u.get());
		else if (q <= 4)
			launch_sums<4>(chunk, plan, threads, centroids, usum.get(), part_c.get(), part_u.get());
		else if (q <= 8)
			launch_sums<8>(chunk, plan, threads, centroids, usum.get(), part_c.get(), part_u.get());
		else
			launch_sums<16>(chunk, plan, threads, centroids, usum.get(), part_c.get(), part_u.get());
		CVCUDA_TRY(cvcuda_check_launch(chunk->stream), "health_centroid: sums", err);
	}
	if (plan->nmulti > 0)
	{
		dim3		grid((unsigned) plan->nmulti, (unsigned) ((d + 31) / 32));

		centroid_merge<<<grid, 256, 0, chunk->stream>>>(chunk->members, chunk->offsets, d,
														 plan->multi, plan->cluster_tiles,
														 plan->tile_slot, part_c.get(),
														 part_u.get(), centroids, usum.get());
		CVCUDA_TRY(cvcuda_check_launch(chunk->stream), "health_centroid: merge", err);
	}
	vector_norms<<<(unsigned) k, 256, 0, chunk->stream>>>(chunk->offsets, d, centroids,
														   usum.get(), norms.get(),
														   norms.get() + k);
	CVCUDA_TRY(cvcuda_check_launch(chunk->stream), "health_centroid: norms", err);
	if (plan->ntiles > 0)
	{
		distance_moments<<<(unsigned) plan->ntiles, 256, 0, chunk->stream>>>(
			chunk->members, d, plan->tile_rows, chunk->offsets, plan->tile_cluster,
			plan->tile_first, centroids, norms.get(), r.get(), part_m.get());
		CVCUDA_TRY(cvcuda_check_launch(chunk->stream), "health_centroid: distances", err);
	}
	centroid_finish<<<(unsigned) k, FINISH_THREADS, 0, chunk->stream>>>(
		chunk->offsets, plan->cluster_tiles, part_m.get(), r.get(), norms.get(),
		norms.get() + k, chunk->params.outlier_z, chunk->stats);
	CVCUDA_TRY(cvcuda_check_launch(chunk->stream), "health_centroid: finish", err);
	CVCUDA_TRY(cudaEventRecord(timer->stop, chunk->stream), "health_centroid: event", err);
	// the scratch is freed on return: wait for the kernels that read it
	CVCUDA_TRY(cudaStreamSynchronize(chunk->stream), "health_centroid: synchronize", err);
	return CVCUDA_OK;
}
