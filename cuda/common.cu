// common.cu: CUDA errors as statuses, the checked launch and its debug
// switch, and the per-process state (stream, echo buffer) of the library.
#include <cstdlib>
#include <cstring>

#include "common.cuh"

// What the library keeps on the current device; one thread uses it.
struct DeviceState
{
	cudaStream_t stream = nullptr;
	void	   *echo = nullptr;
	size_t		echo_bytes = 0;
};

static DeviceState state;

CvCudaStopCheck cvcuda_stop_check = nullptr;
void	   *cvcuda_stop_arg = nullptr;

extern "C" void
cvcuda_set_stop_check(CvCudaStopCheck check, void *arg)
{
	cvcuda_stop_check = check;
	cvcuda_stop_arg = arg;
}

// The status a CUDA error means to the worker.
static CvCudaStatus
status_of(cudaError_t code)
{
	switch (code)
	{
		case cudaErrorNoDevice:
		case cudaErrorInsufficientDriver:
		case cudaErrorInvalidDevice:
		case cudaErrorInitializationError:
		case cudaErrorStubLibrary:
		case cudaErrorDevicesUnavailable:
		case cudaErrorNoKernelImageForDevice:
		case cudaErrorUnsupportedPtxVersion:
		case cudaErrorSystemNotReady:
		case cudaErrorSystemDriverMismatch:
		case cudaErrorCompatNotSupportedOnDevice:
			return CVCUDA_NO_DEVICE;
		case cudaErrorMemoryAllocation:
			return CVCUDA_OUT_OF_MEMORY;
		case cudaErrorInvalidValue:
		case cudaErrorHostMemoryAlreadyRegistered:
		case cudaErrorHostMemoryNotRegistered:
			return CVCUDA_INVALID_ARGUMENT;
		case cudaErrorIllegalAddress:
		case cudaErrorLaunchFailure:
		case cudaErrorLaunchTimeout:
		case cudaErrorAssert:
		case cudaErrorHardwareStackError:
		case cudaErrorIllegalInstruction:
		case cudaErrorMisalignedAddress:
		case cudaErrorInvalidAddressSpace:
		case cudaErrorInvalidPc:
		case cudaErrorECCUncorrectable:
		case cudaErrorContained:
		case cudaErrorTensorMemoryLeak:
			return CVCUDA_STICKY_ERROR;
		default:
			return CVCUDA_INTERNAL;
	}
}

CvCudaStatus
cvcuda_record_cuda_error(cudaError_t code, const char *what, CvCudaError *err)
{
	return cvcuda_set_error(err, status_of(code), (int) code, "%s: %s", what,
							cudaGetErrorString(code));
}

// CLUSTERVEC_CUDA_SYNC=1: synchronise after every launch (debugging), read once.
static bool
sync_after_launch(void)
{
	static int	enabled = -1;

	if (enabled < 0)
	{
		const char *value = getenv("CLUSTERVEC_CUDA_SYNC");

		enabled = value != nullptr && strcmp(value, "1") == 0;
	}
	return enabled == 1;
}

cudaError_t
cvcuda_check_launch(cudaStream_t stream)
{
	cudaError_t code = cudaGetLastError();

	if (code == cudaSuccess && sync_after_launch())
		code = cudaStreamSynchronize(stream);
	return code;
}

cudaError_t
cvcuda_stream(cudaStream_t *stream)
{
	cudaError_t code = cudaSuccess;

	if (state.stream == nullptr)
		code = cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking);
	if (code != cudaSuccess)
		state.stream = nullptr;
	*stream = state.stream;
	return code;
}

void
cvcuda_release_device_state(void)
{
	if (state.echo)
		(void) cudaFree(state.echo);
	if (state.stream)
		(void) cudaStreamDestroy(state.stream);
	state = DeviceState();
}

cudaError_t
cvcuda_echo_buffer(size_t bytes, void **buffer)
{
	if (bytes > state.echo_bytes)
	{
		if (state.echo)
			(void) cudaFree(state.echo);
		state.echo = nullptr;
		state.echo_bytes = 0;
		cudaError_t code = cudaMalloc(&state.echo, bytes);

		if (code != cudaSuccess)
		{
			state.echo = nullptr;
			return code;
		}
		state.echo_bytes = bytes;
	}
	*buffer = state.echo;
	return cudaSuccess;
}
