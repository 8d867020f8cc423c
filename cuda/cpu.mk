# Builds clustervec_cuda_cpu.so, the CPU implementation of the GPU library's
# API (cuda/include/clustervec_cuda.h), everywhere, nvcc or not; and the
# standalone tests that dlopen either library as the worker does.
# Included unconditionally by the top-level Makefile (after PGXS).
#
#   make cputest     both tests against clustervec_cuda_cpu.so
#   make cudatest    both tests against clustervec_cuda.so (cuda.mk; GPU machine)

CVCUDA_CPU_LIB = cuda/clustervec_cuda_cpu$(DLSUFFIX)
# The shim is cpu_shim*.c, one file per family of the API, over all of
# src/math (the reference the CUDA library is tested against).
CVCUDA_SHIM_SRCS ?= $(sort $(wildcard $(srcdir)/cuda/cpu_shim*.c))
CVCUDA_MATH_SRCS = $(sort $(wildcard $(srcdir)/src/math/*.c))
CVCUDA_MATH_HDRS = $(wildcard $(srcdir)/src/math/*.h)
CVCUDA_API_HDRS = $(srcdir)/cuda/include/clustervec_cuda.h $(srcdir)/cuda/cvcuda_internal.h \
	$(srcdir)/cuda/cpu_shim.h
# -ffp-contract=off is part of src/math's bitwise contract (no fused multiply-add).
CVCUDA_CPU_CFLAGS = -O2 -Wall -Wextra -ffp-contract=off \
	-I$(srcdir)/cuda/include -I$(srcdir)/cuda -I$(srcdir)/src -I$(srcdir)/src/math
CVCUDA_TESTS = $(patsubst $(srcdir)/%.c,%,$(sort $(wildcard $(srcdir)/cuda/tests/*_test.c)))

all: $(CVCUDA_CPU_LIB)

# Hidden visibility: only the API (marked in cpu_shim.c) is exported.
$(CVCUDA_CPU_LIB): $(CVCUDA_SHIM_SRCS) $(CVCUDA_MATH_SRCS) $(CVCUDA_MATH_HDRS) $(CVCUDA_API_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CVCUDA_CPU_CFLAGS) -fPIC -fvisibility=hidden -shared -o $@ \
		$(CVCUDA_SHIM_SRCS) $(CVCUDA_MATH_SRCS) -lm

install: install-cuda-cpu
.PHONY: install-cuda-cpu
install-cuda-cpu: $(CVCUDA_CPU_LIB)
	$(INSTALL_SHLIB) $(CVCUDA_CPU_LIB) '$(DESTDIR)$(pkglibdir)/'

uninstall: uninstall-cuda-cpu
.PHONY: uninstall-cuda-cpu
uninstall-cuda-cpu:
	rm -f '$(DESTDIR)$(pkglibdir)/clustervec_cuda_cpu$(DLSUFFIX)'

clean: clean-cuda-cpu
.PHONY: clean-cuda-cpu
clean-cuda-cpu:
	rm -f $(CVCUDA_CPU_LIB) $(CVCUDA_TESTS)

# The tests dlopen the library named on their command line, like the
# worker; their references are src/math, linked in.
cuda/tests/%_test: $(srcdir)/cuda/tests/%_test.c $(wildcard $(srcdir)/cuda/tests/*.h) $(CVCUDA_MATH_SRCS) $(CVCUDA_MATH_HDRS) $(CVCUDA_API_HDRS)
	@mkdir -p $(@D)
	$(CC) $(CVCUDA_CPU_CFLAGS) $< $(CVCUDA_MATH_SRCS) -o $@ -ldl -lm

# Runs every test even when one fails; each ends "N passed, N failed".
.PHONY: cputest cputest-programs
cputest-programs: $(CVCUDA_TESTS)
cputest: $(CVCUDA_CPU_LIB) cputest-programs
	@st=0; for t in $(CVCUDA_TESTS); do \
		$$t ./$(CVCUDA_CPU_LIB) --require-device || st=1; \
	done; exit $$st
