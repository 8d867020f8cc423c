// common.cuh: what every operation of clustervec_cuda.so uses: CUDA errors
// turned into the error record, the checked launch with its debug switch,
// the library's one stream, and the exception guard of the C boundary.
#ifndef CVCUDA_COMMON_CUH
#define CVCUDA_COMMON_CUH

#include <new>

#include <cuda_runtime.h>

#include "cvcuda_internal.h"

// Fills the error record from a CUDA error; sticky errors poison the context.
CvCudaStatus cvcuda_record_cuda_error(cudaError_t code, const char *what, CvCudaError *err);

// After a launch: its launch error, and with CLUSTERVEC_CUDA_SYNC=1 in the
// environment (read once) also its execution error, by synchronising the stream.
cudaError_t cvcuda_check_launch(cudaStream_t stream);

// The library's stream on the current device, created on first use.
cudaError_t cvcuda_stream(cudaStream_t *stream);

// Frees what the library keeps on the current device (stream, echo buffer),
// before cvcuda_init switches to another one.
void cvcuda_release_device_state(void);

// A device buffer kept between calls (echo's), grown to at least bytes.
cudaError_t cvcuda_echo_buffer(size_t bytes, void **buffer);

// Returns from the calling entry point with the recorded status when a CUDA
// call fails; "what" names the call in the message.
#define CVCUDA_TRY(call, what, err) \
	do { \
		cudaError_t cvcuda_try_code_ = (call); \
		if (cvcuda_try_code_ != cudaSuccess) \
			return cvcuda_record_cuda_error(cvcuda_try_code_, (what), (err)); \
	} while (0)

// Runs an entry point's body, turning any C++ exception (from the runtime or
// CUB, or bad_alloc) into a status: nothing may unwind through extern "C".
template <typename Body>
static inline CvCudaStatus
cvcuda_guard(const char *entry, CvCudaError *err, Body body) noexcept
{
	try
	{
		return body();
	}
	catch (const std::bad_alloc &)
	{
		return cvcuda_set_error(err, CVCUDA_OUT_OF_MEMORY, 0, "%s: out of host memory", entry);
	}
	catch (...)
	{
		return cvcuda_set_error(err, CVCUDA_INTERNAL, 0, "%s: unexpected C++ exception", entry);
	}
}

// Owns one cudaMalloc'd array and frees it on every return path.
template <typename T>
class DeviceArray
{
public:
	DeviceArray() = default;
	DeviceArray(const DeviceArray &) = delete;
	DeviceArray &operator=(const DeviceArray &) = delete;
	~DeviceArray() { reset(); }

	// Allocates count elements (dropping what it held); 0 allocates nothing.
	cudaError_t allocate(size_t count)
	{
		reset();
		if (count == 0)
			return cudaSuccess;
		return cudaMalloc(reinterpret_cast<void **>(&ptr_), count * sizeof(T));
	}

	void reset()
	{
		if (ptr_)
			(void) cudaFree(ptr_);
		ptr_ = nullptr;
	}

	T *get() const { return ptr_; }

private:
	T		   *ptr_ = nullptr;
};

// A DeviceArray kept between calls: reallocated only when a call needs
// more, so a stream of small searches makes no cudaMalloc or cudaFree
// (cudaFree waits for the whole device).
template <typename T>
class GrowingArray
{
public:
	cudaError_t reserve(size_t count)
	{
		if (count <= capacity_)
			return cudaSuccess;
		capacity_ = 0;
		cudaError_t code = array_.allocate(count);

		if (code == cudaSuccess)
			capacity_ = count;
		return code;
	}

	void release()
	{
		array_.reset();
		capacity_ = 0;
	}

	size_t bytes() const { return capacity_ * sizeof(T); }
	T *get() const { return array_.get(); }

private:
	DeviceArray<T> array_;
	size_t		capacity_ = 0;
};

#endif
