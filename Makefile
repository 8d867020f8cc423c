# clustervec: PGXS build.  `make`, `make install`, `make installcheck`.
# The CUDA library is built with CUDA=1, or where nvcc and a GPU are both
# present (see below); the main module never links CUDA.

# clustervec_pgvector: the companion for pgvector's vector columns (SQL
# only, over clustervec's library); CREATE EXTENSION it where vector exists.
EXTENSION = clustervec clustervec_pgvector
MODULE_big = clustervec
DATA = clustervec--0.1.0.sql clustervec_pgvector--0.1.0.sql
PGFILEDESC = "clustervec - vectors, IVF index and cluster statistics"

# src/math is pure C with one module per job; every file in it is linked.
MATH_OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/math/*.c)))
TYPE_OBJS = src/type/cvec_io.o src/type/cvec_distance.o \
	src/type/cvec_arith.o src/type/cvec_compare.o src/type/cvec_cast.o \
	src/type/cvec_aggregate.o src/type/cvec_util.o src/type/cvec_layout.o
IVF_OBJS = src/ivf/handler.o src/ivf/settings.o src/ivf/metric.o \
	src/ivf/reader.o src/ivf/page.o src/ivf/centroids.o src/ivf/build.o src/ivf/build_parallel.o \
	src/ivf/insert.o src/ivf/scan.o src/ivf/vacuum.o src/ivf/cost.o \
	src/ivf/validate.o src/ivf/introspect.o src/ivf/mirror_upload.o \
	src/ivf/mirror_merge.o src/ivf/scan_gpu.o src/ivf/scan_report.o src/ivf/layout.o \
	src/ivf/recall.o src/ivf/drift.o src/ivf/health.o \
	src/ivf/calibrate.o src/ivf/codes.o src/ivf/candidates.o src/ivf/retrain.o src/ivf/free_runs.o
LATTICE_OBJS = src/lattice/handler.o src/lattice/labels.o src/lattice/page.o src/lattice/groups.o \
	src/lattice/build.o src/lattice/insert.o src/lattice/vacuum.o src/lattice/scan.o \
	src/lattice/validate.o src/lattice/introspect.o src/lattice/observed.o
HEALTH_OBJS = src/health/source.o src/health/engine.o src/health/functions.o \
	src/health/aggregate.o src/health/gpu_passes.o src/health/shard.o src/health/distributed.o
SEARCH_OBJS = src/search/topk.o src/search/exact.o src/search/cvsearch.o
KMEANS_OBJS = src/kmeans/input.o src/kmeans/run.o src/kmeans/sql.o
# the backend's side of the GPU seam (gpu.h), and the worker process
GPU_OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/gpu/*.c)))
WORKER_OBJS = src/worker/shmem.o src/worker/worker.o src/worker/buffers.o \
	src/worker/mirror_store.o src/worker/mirror_observe.o
OBJS = src/clustervec.o src/access.o src/citus.o src/math_backend.o $(TYPE_OBJS) $(IVF_OBJS) $(LATTICE_OBJS) $(HEALTH_OBJS) \
	$(SEARCH_OBJS) $(KMEANS_OBJS) \
	$(GPU_OBJS) $(WORKER_OBJS) $(MATH_OBJS)

REGRESS = cvec_io cvec_typmod cvec_distance cvec_functions cvec_arith \
	cvec_compare cvec_cast cvec_aggregate cvec_simd \
	cvivf_build cvivf_scan cvivf_vacuum cvivf_errors cvivf_recall cvivf_reuse cvivf_sq8 cvivf_health cvivf_retrain cvlattice cvlattice_errors \
	cluster_health kmeans gpu_cpu_path \
	privileges hardening
REGRESS_OPTS = --inputdir=. --load-extension=clustervec
# TAP tests (PostgreSQL::Test::Cluster): recall, WAL replay on a standby,
# crashes, concurrent rebuilds and load; they run initdb, so never as root.
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl
PROVE_FLAGS = -I $(srcdir)/test/t

# One reduction order for every SIMD variant: no contracted multiply-adds
# (in CPPFLAGS so the LLVM bitcode gets it too).
# PostgreSQL's headers are not -Wextra clean: read them as system headers.
PG_CPPFLAGS = -I$(srcdir)/src -I$(srcdir)/cuda/include -isystem $(includedir_server) \
	-ffp-contract=off
PG_CFLAGS = -Wall -Wextra

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)


# PGXS tracks no header dependencies: every object depends on every header.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h $(srcdir)/cuda/include/*.h)

# The CUDA library (cuda/cuda.mk) is built when asked, CUDA=1, or when the
# machine can use it: nvcc found AND a GPU present (`nvidia-smi -L` succeeds
# or /dev/nvidia0 exists).  CUDA=0 never builds it.  Without a GPU its nvcc
# build takes minutes for a library nothing here could load.
ifeq ($(origin NVCC),undefined)
NVCC := $(shell command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
endif
ifeq ($(CUDA),)
ifneq ($(NVCC),)
CV_HAVE_GPU := $(shell { nvidia-smi -L >/dev/null 2>&1 || [ -e /dev/nvidia0 ]; } && echo yes)
ifeq ($(CV_HAVE_GPU),yes)
CV_BUILD_CUDA = 1
endif
endif
else ifneq ($(CUDA),0)
CV_BUILD_CUDA = 1
ifeq ($(NVCC),)
NVCC = nvcc
endif
endif

ifeq ($(CV_BUILD_CUDA),1)
include cuda/cuda.mk
endif

# The CPU implementation of the same library, built everywhere, so CI runs
# the whole worker and protocol path without a GPU.
ifneq ($(wildcard $(srcdir)/cuda/cpu.mk),)
include cuda/cpu.mk
endif

.PHONY: unittest bench
unittest:
	$(MAKE) -C test/math run

bench:
	$(MAKE) -C bench run
