// health_kernels.cuh: the internal interface between the statistics entry
// points (health.cu, which orders the families) and the family modules
// (health_centroid.cu, health_twomeans.cu, health_pairwise.cu,
// health_neighbour.cu, health_potential.cu, health_rank.cu).  Device
// pointers throughout; every launcher enqueues on chunk->stream and
// returns a status (launch errors recorded in err), never synchronising
// unless it must read a result on the host.
#ifndef CVCUDA_HEALTH_KERNELS_CUH
#define CVCUDA_HEALTH_KERNELS_CUH

#include <cstdint>

#include "common.cuh"

// One chunk of clusters in CSR form, as cvcuda_health_members sees it.
struct HealthChunk
{
	const float *members;		// device, total x d
	const long long *offsets;	// device, nclusters + 1
	const long long *host_offsets;	// host copy of offsets
	long long	nclusters;
	long long	total;			// offsets[nclusters]
	long long	max_members;	// largest cluster of the chunk
	int			d;
	long long	first_cluster;	// index of cluster 0 in the centroid set
	const double *centroids;	// device, nclusters x d: this chunk's centroids
	CvClusterStats *stats;		// device, nclusters records
	CvHealthParams params;
	cudaStream_t stream;
};

// Section 3, both passes: columns 20-29.  side: device, total bytes, the
// two-means assignment (0 = a, 1 = b) of every member; clusters with n < 2
// ignore it.  Reads radius (and collapsed) from stats.
CvCudaStatus health_pairwise_launch(const HealthChunk *chunk, const uint8_t *side,
									CvCudaError *err);

// Section 6: column 38 and rank_refused.
CvCudaStatus health_rank_launch(const HealthChunk *chunk, CvCudaError *err);

#endif
