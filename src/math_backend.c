/*
 * math_backend.c: src/math's allocator and statuses in a backend
 * (math_backend.h).
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "math_backend.h"

static void *
math_alloc(size_t size, void *arg pg_attribute_unused())
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

static void
math_free(void *ptr, void *arg pg_attribute_unused())
{
	pfree(ptr);
}

const CvAllocator cv_palloc_allocator = {math_alloc, math_free, NULL};

void
cv_check_math(CvMathStatus status, const char *what)
{
	if (status == CV_MATH_OUT_OF_MEMORY)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory during %s", what)));
	if (status != CV_MATH_OK)
		elog(ERROR, "%s failed: %s", what, cv_math_status_string(status));
}
