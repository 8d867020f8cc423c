# Builds the two GPU libraries and their tests without PostgreSQL (the GPU
# machine has none unless the bundle is installed):
#
#   make -f cuda/standalone.mk -j16 cudatest
#   make -f cuda/standalone.mk cputest
#
# While one family is being written, build a library of some sources only:
#   make -f cuda/standalone.mk CUDA_SRCS="cuda/common.cu cuda/buffer.cu ..." \
#        CUDA_GENCODE="-gencode arch=compute_90,code=sm_90" cuda/clustervec_cuda.so
srcdir = .
NVCC ?= nvcc
CC = gcc
DLSUFFIX = .so
INSTALL_SHLIB = install -m 755
pkglibdir = /tmp/clustervec-standalone

all:
include cuda/cuda.mk
include cuda/cpu.mk
