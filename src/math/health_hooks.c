/*
 * health_hooks.c: what the statistics modules ask of their host: memory,
 * and whether to stop.
 *
 * Standalone (tests, benchmarks, the CPU shim) it is malloc and free.  The
 * SQL layer points cv_health_memory at its memory contexts, so buffers whose
 * size a caller chooses (histogram bins, the neighbour table) are accounted
 * and bounded like any other query memory and go with the query even after
 * an ERROR.  Every block is 64-byte aligned: the pairwise kernels' panel
 * loads then never straddle two cache lines.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"

#define BLOCK_ALIGN 64

const CvHealthMemory *cv_health_memory = NULL;

bool		(*cv_health_stop_requested) (void) = NULL;

/* Whether the host asked the current pass to stop. */
bool
cv_health_should_stop(void)
{
	return cv_health_stop_requested != NULL && cv_health_stop_requested();
}

/* count * size zeroed bytes, 64-byte aligned; NULL on overflow or when memory ran out. */
void *
cv_health_alloc(size_t count, size_t size)
{
	size_t		slack = BLOCK_ALIGN + sizeof(void *);
	size_t		bytes;
	char	   *raw;
	char	   *block;

	if (size != 0 && count > (SIZE_MAX - slack) / size)
		return NULL;
	bytes = count * size;
	raw = cv_health_memory != NULL ? cv_health_memory->alloc(bytes + slack)
		: malloc(bytes + slack);
	if (raw == NULL)
		return NULL;
	block = (char *) (((uintptr_t) raw + slack) & ~(uintptr_t) (BLOCK_ALIGN - 1));
	((void **) block)[-1] = raw;
	memset(block, 0, bytes);
	return block;
}

/* Releases a block of cv_health_alloc (NULL is fine). */
void
cv_health_free(void *block)
{
	void	   *raw;

	if (block == NULL)
		return;
	raw = ((void **) block)[-1];
	if (cv_health_memory != NULL)
		cv_health_memory->release(raw);
	else
		free(raw);
}
