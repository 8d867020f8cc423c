# Builds clustervec_cuda.so, the library only the GPU worker dlopens.
# sm_90a for wgmma/TMA kernels, sm_90, and compute_80 PTX for other GPUs.
# cudart is linked statically, so the library needs only the driver
# (libcuda.so.1), which it opens at run time: without one, every entry point
# answers CVCUDA_NO_DEVICE.

CUDA_GENCODE = -gencode arch=compute_90a,code=sm_90a \
	-gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_80,code=compute_80
NVCCFLAGS = -O3 -std=c++17 $(CUDA_GENCODE) -Xcompiler -fPIC,-Wall,-Wextra \
	-I$(srcdir)/cuda/include -I$(srcdir)/cuda -I$(srcdir)/src
CUDA_SRCS ?= $(wildcard $(srcdir)/cuda/*.cu)
CUDA_OBJS = $(patsubst $(srcdir)/%.cu,%.cuda.o,$(CUDA_SRCS))
CUDA_HDRS = $(wildcard $(srcdir)/cuda/*.cuh $(srcdir)/cuda/*.h) \
	$(srcdir)/cuda/include/clustervec_cuda.h
CUDA_LIB = cuda/clustervec_cuda$(DLSUFFIX)

all: $(CUDA_LIB)

# The distance kernels must round every product and sum separately, as the
# CPU path does (bitwise-equal distances): no contracted multiply-adds.
cuda/knn_distance.cuda.o cuda/kmeans_refresh.cuda.o cuda/ivf_search.cuda.o: NVCCFLAGS += -fmad=false

%.cuda.o: %.cu $(CUDA_HDRS)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(CUDA_LIB): $(CUDA_OBJS)
	$(NVCC) -shared -cudart static $(CUDA_GENCODE) $^ -o $@

install: install-cuda
.PHONY: install-cuda
install-cuda: $(CUDA_LIB)
	$(INSTALL_SHLIB) $(CUDA_LIB) '$(DESTDIR)$(pkglibdir)/'

uninstall: uninstall-cuda
.PHONY: uninstall-cuda
uninstall-cuda:
	rm -f '$(DESTDIR)$(pkglibdir)/clustervec_cuda$(DLSUFFIX)'

clean: clean-cuda
.PHONY: clean-cuda
clean-cuda:
	rm -f $(CUDA_OBJS) $(CUDA_LIB)

# Every test (built by cpu.mk) against the CUDA library on a machine with
# a GPU; --require-device turns "no device" into a failure instead of a skip.
.PHONY: cudatest
cudatest: $(CUDA_LIB) cputest-programs
	@st=0; for t in $(CVCUDA_TESTS); do \
		$$t ./$(CUDA_LIB) --require-device || st=1; \
	done; exit $$st
