// ping.cuh: the launcher of the ping kernel (out[i] = i * scale, i < n).
#ifndef CVCUDA_PING_CUH
#define CVCUDA_PING_CUH

#include <cuda_runtime.h>

// Enqueues the ping kernel on stream; returns the checked launch's error.
cudaError_t cvcuda_launch_ping(float *d_out, int n, float scale, cudaStream_t stream);

#endif
