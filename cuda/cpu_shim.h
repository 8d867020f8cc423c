/*
 * cpu_shim.h: what the files of clustervec_cuda_cpu.so share: the API
 * (clustervec_cuda.h), the helpers both libraries share, and the mark that
 * exports an entry point from a library built with hidden visibility.
 */
#ifndef CVCUDA_CPU_SHIM_H
#define CVCUDA_CPU_SHIM_H

#include "clustervec_cuda.h"
#include "cvcuda_internal.h"

#define CVCUDA_API __attribute__((visibility("default")))

#endif
