# Builds clustervec_cuda.so, the library only the GPU worker dlopens.
# sm_90a for wgmma/TMA kernels, sm_90, and compute_80 PTX for other GPUs.

CUDA_GENCODE = -gencode arch=compute_90a,code=sm_90a \
	-gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_80,code=compute_80
NVCCFLAGS = -O3 -std=c++17 $(CUDA_GENCODE) -Xcompiler -fPIC,-Wall,-Wextra \
	-I$(srcdir)/cuda/include -I$(srcdir)/src
CUDA_SRCS = $(wildcard $(srcdir)/cuda/*.cu)
CUDA_OBJS = $(patsubst $(srcdir)/%.cu,%.cuda.o,$(CUDA_SRCS))
CUDA_LIB = cuda/clustervec_cuda$(DLSUFFIX)

all: $(CUDA_LIB)

%.cuda.o: %.cu $(wildcard $(srcdir)/cuda/*.cuh) $(srcdir)/cuda/include/clustervec_cuda.h
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
	rm -f $(CUDA_OBJS) $(CUDA_LIB) cuda/tests/ping_test

# Standalone harness: cuda/tests/ping_test dlopens the library like the worker.
cuda/tests/ping_test: $(srcdir)/cuda/tests/ping_test.c $(srcdir)/cuda/include/clustervec_cuda.h
	$(CC) -O2 -Wall -Wextra -I$(srcdir)/cuda/include $< -o $@ -ldl

.PHONY: cudatest
cudatest: $(CUDA_LIB) cuda/tests/ping_test
	cuda/tests/ping_test ./$(CUDA_LIB)
