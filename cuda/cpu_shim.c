/*
 * cpu_shim.c: clustervec_cuda_cpu.so, the API of clustervec_cuda.h computed
 * on the CPU with src/math.
 *
 * It reports backend "cpu-shim" and one fake device ("CPU shim", compute
 * capability 0.0, the machine's memory), so the worker, its protocol and the
 * tests run unchanged on machines without a GPU, and its answers are the
 * reference the CUDA library's must equal bit for bit.  Built everywhere
 * (cuda/cpu.mk), with -fvisibility=hidden: only the API is exported, so the
 * copy of src/math inside never binds to, or is bound by, the one in
 * clustervec.so that the worker's process has loaded too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_shim.h"
#include "distance.h"

/* A candidate neighbour: its distance's sort key and its row. */
typedef struct Candidate
{
	uint64_t	key;
	long long	row;
} Candidate;

/* True when a comes after b in the result order (key, then row). */
static int
comes_after(const Candidate *a, const Candidate *b)
{
	if (a->key != b->key)
		return a->key > b->key;
	return a->row > b->row;
}

static void
swap_candidates(Candidate *a, Candidate *b)
{
	Candidate	t = *a;

	*a = *b;
	*b = t;
}

/* Restores the max-heap below position i of a heap of size entries. */
static void
sift_down(Candidate *heap, int size, int i)
{
	for (;;)
	{
		int			largest = i;
		int			left = 2 * i + 1;
		int			right = left + 1;

		if (left < size && comes_after(&heap[left], &heap[largest]))
			largest = left;
		if (right < size && comes_after(&heap[right], &heap[largest]))
			largest = right;
		if (largest == i)
			return;
		swap_candidates(&heap[i], &heap[largest]);
		i = largest;
	}
}

/*
 * Offers a candidate to a max-heap bounded at k entries: the k best so far,
 * the worst on top.  Rows arrive in ascending order, so a candidate tied
 * with the top comes after it and is rejected, as the tie rule wants.
 */
static void
heap_offer(Candidate *heap, int *size, int k, Candidate c)
{
	int			i;

	if (*size == k)
	{
		if (comes_after(&heap[0], &c))
		{
			heap[0] = c;
			sift_down(heap, k, 0);
		}
		return;
	}
	i = (*size)++;
	heap[i] = c;
	while (i > 0 && comes_after(&heap[i], &heap[(i - 1) / 2]))
	{
		swap_candidates(&heap[i], &heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

/* Sorts a max-heap into ascending order, in place. */
static void
heap_sort(Candidate *heap, int size)
{
	for (int end = size - 1; end > 0; end--)
	{
		swap_candidates(&heap[0], &heap[end]);
		sift_down(heap, end, 0);
	}
}

/* The k nearest rows of one query, written as results. */
static void
knn_one_query(const CvDistanceKernels *kernels, const float *base, long long rows, int dims,
			  const float *query, int k, Candidate *heap, long long *out_index,
			  double *out_distance)
{
	int			size = 0;

	for (long long r = 0; r < rows; r++)
	{
		double		distance = sqrt(kernels->l2_squared(query, base + r * dims, dims));
		Candidate	c = {cvcuda_distance_key(distance), r};

		heap_offer(heap, &size, k, c);
	}
	heap_sort(heap, size);
	for (int i = 0; i < k; i++)
	{
		out_index[i] = i < size ? heap[i].row : -1;
		out_distance[i] = cvcuda_key_distance(i < size ? heap[i].key : CVCUDA_KEY_NONE);
	}
}

/* The machine's memory: physical pages (total) or available pages (free). */
static unsigned long long
memory_bytes(int name)
{
	long		pages = sysconf(name);
	long		page_size = sysconf(_SC_PAGESIZE);

	if (pages < 0 || page_size < 0)
		return 0;
	return (unsigned long long) pages * (unsigned long long) page_size;
}

/* The fake device's description. */
static void
describe_shim(CvCudaDeviceInfo *info)
{
	long		cpus = sysconf(_SC_NPROCESSORS_ONLN);

	memset(info, 0, sizeof(*info));
	info->device_count = 1;
	info->compute_major = 0;
	info->compute_minor = 0;
	info->multiprocessors = cpus > 0 ? (int) cpus : 1;
	info->total_memory = memory_bytes(_SC_PHYS_PAGES);
	strcpy(info->name, "CPU shim");
}

/* The shim has one device, 0. */
static CvCudaStatus
check_device(int device, CvCudaError *err)
{
	if (device != 0)
		return cvcuda_set_error(err, CVCUDA_NO_DEVICE, 0,
								"device %d requested, 1 present (the CPU shim)", device);
	return CVCUDA_OK;
}

CvCudaStopCheck cvcuda_stop_check = NULL;
void	   *cvcuda_stop_arg = NULL;

/* src/math's statistics poll this between their long loops. */
static bool
math_stop_requested(void)
{
	return cvcuda_stopping() != 0;
}

CVCUDA_API void
cvcuda_set_stop_check(CvCudaStopCheck check, void *arg)
{
	cvcuda_stop_check = check;
	cvcuda_stop_arg = arg;
	cv_health_stop_requested = check != NULL ? math_stop_requested : NULL;
}

CVCUDA_API int
cvcuda_abi_version(void)
{
	return CVCUDA_ABI_VERSION;
}

CVCUDA_API const char *
cvcuda_backend_name(void)
{
	return "cpu-shim";
}

CVCUDA_API CvCudaStatus
cvcuda_device_info(int device, CvCudaDeviceInfo *info, CvCudaError *err)
{
	if (info == NULL)
		return cvcuda_set_error(err, CVCUDA_INVALID_ARGUMENT, 0, "info must not be NULL");
	describe_shim(info);
	if (check_device(device, err) != CVCUDA_OK)
		return CVCUDA_NO_DEVICE;
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_init(int device, CvCudaDeviceInfo *info, CvCudaError *err)
{
	if (check_device(device, err) != CVCUDA_OK)
		return CVCUDA_NO_DEVICE;
	if (info)
		describe_shim(info);
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_memory_info(unsigned long long *free_bytes, unsigned long long *total_bytes,
				   CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_memory_args(free_bytes, total_bytes, err);

	if (status != CVCUDA_OK)
		return status;
	*free_bytes = memory_bytes(_SC_AVPHYS_PAGES);
	*total_bytes = memory_bytes(_SC_PHYS_PAGES);
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_host_register(void *ptr, size_t bytes, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_host_args(ptr, bytes, 1, err);

	if (status != CVCUDA_OK)
		return status;
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_host_unregister(void *ptr, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_host_args(ptr, 0, 0, err);

	if (status != CVCUDA_OK)
		return status;
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_echo(void *buffer, size_t bytes, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_echo_args(buffer, bytes, err);

	if (status != CVCUDA_OK)
		return status;
	if (bytes > 0)
		memmove(buffer, buffer, bytes);
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_knn_exact(const float *base, long long rows, int dims, const float *queries, int nq,
				 int k, long long *out_index, double *out_distance, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_knn_args(base, rows, dims, queries, nq, k,
												out_index, out_distance, err);
	const CvDistanceKernels *kernels = cv_distance_kernels_for(cv_simd_best());
	Candidate  *heap;

	if (status != CVCUDA_OK)
		return status;
	if (nq == 0)
		return cvcuda_set_ok(err);
	heap = malloc(sizeof(Candidate) * (size_t) k);
	if (heap == NULL)
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0,
								"knn_exact: out of memory for %d candidates", k);
	for (int q = 0; q < nq; q++)
	{
		if (cvcuda_stopping())
		{
			free(heap);
			return cvcuda_stopped(err, "knn_exact");
		}
		knn_one_query(kernels, base, rows, dims, queries + (size_t) q * dims, k, heap,
					  out_index + (size_t) q * k, out_distance + (size_t) q * k);
	}
	free(heap);
	return cvcuda_set_ok(err);
}

CVCUDA_API CvCudaStatus
cvcuda_ping(int device, int n, float scale, float *out, CvCudaError *err)
{
	CvCudaStatus status = cvcuda_check_ping_args(n, out, err);

	if (status != CVCUDA_OK)
		return status;
	if (check_device(device, err) != CVCUDA_OK)
		return CVCUDA_NO_DEVICE;
	for (int i = 0; i < n; i++)
		out[i] = (float) i * scale;
	return cvcuda_set_ok(err);
}
