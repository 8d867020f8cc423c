/*
 * health_library.h: the entry points of the cluster statistics family
 * (cvcuda_health_*), which health_test and health_pairwise_test both call:
 * one table, so that the two tests resolve the same library the same way.
 * Include after harness.h.
 */
#ifndef CVCUDA_TESTS_HEALTH_LIBRARY_H
#define CVCUDA_TESTS_HEALTH_LIBRARY_H

#include "harness.h"

typedef CvCudaStatus (*CentroidFn) (const CvCudaBuffer *, const CvCudaBuffer *, long long, int,
									const CvHealthParams *, CvCudaBuffer *, CvCudaBuffer *,
									CvCudaError *);
typedef CvCudaStatus (*TableFn) (CvCudaCentroidSet *, CvCudaError *);
typedef CvCudaStatus (*MembersFn) (const CvCudaBuffer *, const CvCudaBuffer *, long long,
								   long long, const CvCudaCentroidSet *, const CvHealthParams *,
								   CvCudaBuffer *, CvCudaError *);
typedef void (*TimingsFn) (double *);

typedef struct Library
{
	AbiFn		abi_version;
	NameFn		backend_name;
	InitFn		init;
	AllocFn		alloc;
	FreeFn		free;
	WriteFn		write;
	ReadFn		read;
	CentroidFn	centroid;
	TableFn		table;
	MembersFn	members;
	TimingsFn	timings;
} Library;

/* Opens the library named on the command line and fills lib (harness_open). */
static inline void
health_open(const HarnessArgs *args, Library *lib)
{
	HarnessSymbol symbols[] = {
		{"cvcuda_abi_version", &lib->abi_version},
		{"cvcuda_backend_name", &lib->backend_name},
		{"cvcuda_init", &lib->init},
		{"cvcuda_buffer_alloc", &lib->alloc},
		{"cvcuda_buffer_free", &lib->free},
		{"cvcuda_buffer_write", &lib->write},
		{"cvcuda_buffer_read", &lib->read},
		{"cvcuda_health_centroid", &lib->centroid},
		{"cvcuda_health_neighbour_table", &lib->table},
		{"cvcuda_health_members", &lib->members},
		{"cvcuda_health_timings", &lib->timings},
	};

	harness_open(args, symbols, lengthof(symbols));
}

#endif							/* CVCUDA_TESTS_HEALTH_LIBRARY_H */
