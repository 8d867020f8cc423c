// topk_engine.cuh: a block-wide top-k of (key, position) pairs held in
// shared memory, for selections where each query (or segment) is owned by
// one thread block and its candidates are produced on the fly: nothing of
// the candidate stream is ever written to global memory.
//
// The block keeps a buffer of cap entries (cap a power of two, at least
// 2 * kk + the most entries one round may append).  Candidates strictly
// before the current threshold (the kk-th best so far, or everything while
// fewer than kk are held) are appended with a shared atomic; when a round
// could overflow the buffer, the block sorts it (bitonic, in shared memory)
// and keeps the first kk, which sets a tighter threshold.  Order: key, then
// position, both ascending (ties by ascending position, as every result of
// the library).  Keys are cvcuda_order_key / cvcuda_distance_key values;
// CVCUDA_KEY_NONE with position LLONG_MAX marks an empty slot.
//
// Usage (every thread of the block calls every member except push):
//   engine.init(kk);
//   for each round: engine.make_room(per_round); candidates:
//                   if (engine.accepts(key, pos)) engine.push(key, pos);
//   engine.finish();          // sorted, count() = min(kk, offered)
//
// Also here: block_exclusive_count, the prefix count of a per-thread flag
// across the block, and cvcuda_block_select_threshold, a radix selection
// of the n-th smallest key of an array (the probe lists' selection).
#ifndef CVCUDA_TOPK_ENGINE_CUH
#define CVCUDA_TOPK_ENGINE_CUH

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "cvcuda_internal.h"

// (ka, pa) strictly before (kb, pb).
__device__ __forceinline__ bool
cvcuda_topk_before(uint64_t ka, long long pa, uint64_t kb, long long pb)
{
	return ka < kb || (ka == kb && pa < pb);
}

// The shared state of one engine; keys and positions live in dynamic
// shared memory given by the caller.
struct TopkShared
{
	int			count;			// entries in the buffer
	int			kk;				// how many to keep
	uint64_t	thr_key;		// the kk-th best so far (or none)
	long long	thr_pos;
};

template <int THREADS>
struct BlockTopk
{
	uint64_t   *keys;
	long long  *pos;
	int			cap;
	TopkShared *st;

	__device__ void init(int kk)
	{
		__syncthreads();
		if (threadIdx.x == 0)
		{
			st->count = 0;
			st->kk = kk;
			st->thr_key = CVCUDA_KEY_NONE;
			st->thr_pos = LLONG_MAX;
		}
		__syncthreads();
	}

	__device__ __forceinline__ bool accepts(uint64_t key, long long p) const
	{
		return cvcuda_topk_before(key, p, st->thr_key, st->thr_pos);
	}

	// Appends an accepted candidate; make_room guaranteed the space.
	__device__ __forceinline__ void push(uint64_t key, long long p)
	{
		int			at = atomicAdd(&st->count, 1);

		keys[at] = key;
		pos[at] = p;
	}

	// Sorts the buffer: entries past count become empty slots.
	__device__ void sort()
	{
		__syncthreads();
		const int	n = st->count;

		for (int i = n + threadIdx.x; i < cap; i += THREADS)
		{
			keys[i] = CVCUDA_KEY_NONE;
			pos[i] = LLONG_MAX;
		}
		__syncthreads();
		for (int size = 2; size <= cap; size <<= 1)
			for (int stride = size >> 1; stride > 0; stride >>= 1)
			{
				for (int i = threadIdx.x; i < cap / 2; i += THREADS)
				{
					int			lo = 2 * i - (i & (stride - 1));
					int			hi = lo + stride;
					bool		ascending = (lo & size) == 0;
					uint64_t	klo = keys[lo],
								khi = keys[hi];
					long long	plo = pos[lo],
								phi = pos[hi];

					if (cvcuda_topk_before(khi, phi, klo, plo) == ascending)
					{
						keys[lo] = khi;
						keys[hi] = klo;
						pos[lo] = phi;
						pos[hi] = plo;
					}
				}
				__syncthreads();
			}
	}

	// Sorts and keeps the kk best; sets the threshold once kk are held.
	__device__ void flush()
	{
		sort();
		if (threadIdx.x == 0)
		{
			if (st->count >= st->kk)
			{
				st->count = st->kk;
				st->thr_key = keys[st->kk - 1];
				st->thr_pos = pos[st->kk - 1];
			}
		}
		__syncthreads();
	}

	// Before a round that may append up to per_round entries.
	__device__ void make_room(int per_round)
	{
		__syncthreads();
		bool		full = st->count > cap - per_round;

		if (__syncthreads_or(full))
			flush();
	}

	// The final selection: sorted, at most kk entries.
	__device__ void finish()
	{
		flush();
	}

	__device__ int count() const
	{
		return st->count;
	}
};

// The number of threads before this one (in thread order) whose flag is
// set, and in *total (every thread) how many are set; scratch holds
// THREADS / 32 + 1 ints of shared memory.  Every thread must call it.
template <int THREADS>
__device__ int
block_exclusive_count(bool flag, int *scratch, int *total)
{
	const int	lane = threadIdx.x & 31;
	const int	warp = threadIdx.x >> 5;
	unsigned	ballot = __ballot_sync(0xffffffffu, flag);
	int			before = __popc(ballot & ((1u << lane) - 1));

	if (lane == 0)
		scratch[warp] = __popc(ballot);
	__syncthreads();
	if (threadIdx.x == 0)
	{
		int			sum = 0;

		for (int w = 0; w < THREADS / 32; w++)
		{
			int			c = scratch[w];

			scratch[w] = sum;
			sum += c;
		}
		scratch[THREADS / 32] = sum;
	}
	__syncthreads();
	before += scratch[warp];
	*total = scratch[THREADS / 32];
	__syncthreads();
	return before;
}

// Shared state of cvcuda_block_select_threshold.
struct SelectShared
{
	unsigned	hist[256];
	uint64_t	prefix;
	int			remaining;
};

// The n-th smallest (1 <= n <= count) of count keys (global memory), by an
// 8-bit radix selection: on return (every thread) *threshold is its value
// and *equal_taken how many of the keys equal to it are among the n
// smallest.  Every thread must call it.
template <int THREADS>
__device__ void
cvcuda_block_select_threshold(const uint64_t *keys, int count, int n, SelectShared *sh,
							  uint64_t *threshold, int *equal_taken)
{
	if (threadIdx.x == 0)
	{
		sh->prefix = 0;
		sh->remaining = n;
	}
	for (int shift = 56; shift >= 0; shift -= 8)
	{
		for (int b = threadIdx.x; b < 256; b += THREADS)
			sh->hist[b] = 0;
		__syncthreads();
		const uint64_t high = shift == 56 ? 0 : ~UINT64_C(0) << (shift + 8);
		const uint64_t prefix = sh->prefix;

		for (int i = threadIdx.x; i < count; i += THREADS)
		{
			uint64_t	key = keys[i];

			if ((key & high) == prefix)
				atomicAdd(&sh->hist[(key >> shift) & 255], 1u);
		}
		__syncthreads();
		if (threadIdx.x == 0)
		{
			int			cum = 0;

			for (int b = 0; b < 256; b++)
			{
				if (cum + (int) sh->hist[b] >= sh->remaining)
				{
					sh->prefix |= (uint64_t) b << shift;
					sh->remaining -= cum;
					break;
				}
				cum += sh->hist[b];
			}
		}
		__syncthreads();
	}
	*threshold = sh->prefix;
	*equal_taken = sh->remaining;
	__syncthreads();
}

#endif
