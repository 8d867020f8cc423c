/*
 * fuzz_cvec_typmod_in.c: cvec(n)'s modifier input.  The first byte picks
 * the array's shape (bit 0: a NULL element, bit 1: two dimensions, bit 2:
 * another element type); the rest, split at NUL bytes, are the cstring
 * elements.  An accepted modifier must be 1..16000.
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "type/cvec.h"

#include "fuzz_common.h"
#include "pgshim.h"

extern PGDLLEXPORT Datum cvec_typmod_in(PG_FUNCTION_ARGS);

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ELEMENTS 8

/* A cstring[] of the NUL-separated strings of text (as array_in builds it). */
static ArrayType *
cstring_array(const char *text, size_t size, uint8_t shape)
{
	const char *element[MAX_ELEMENTS];
	int			count = 0;
	Size		data_bytes = 0;
	bool		with_null;
	int			ndim;
	Size		overhead;
	ArrayType  *a;
	char	   *p;

	for (size_t at = 0; at <= size && count < MAX_ELEMENTS; at += strlen(text + at) + 1)
	{
		element[count++] = text + at;
		data_bytes += strlen(text + at) + 1;
	}
	with_null = (shape & 1) && count >= 2;
	ndim = (shape & 2) && count % 2 == 0 ? 2 : 1;
	overhead = with_null ? ARR_OVERHEAD_WITHNULLS(ndim, count) : ARR_OVERHEAD_NONULLS(ndim);
	a = palloc0(overhead + data_bytes);
	SET_VARSIZE(a, overhead + data_bytes);
	a->ndim = ndim;
	a->dataoffset = with_null ? overhead : 0;
	a->elemtype = (shape & 4) ? TEXTOID : CSTRINGOID;
	ARR_DIMS(a)[0] = ndim == 2 ? count / 2 : count;
	ARR_LBOUND(a)[0] = 1;
	if (ndim == 2)
	{
		ARR_DIMS(a)[1] = 2;
		ARR_LBOUND(a)[1] = 1;
	}
	if (with_null)
		for (int i = 0; i < count; i++)
			if (i != 1)
				ARR_NULLBITMAP(a)[i / 8] |= 1 << (i % 8);
	p = ARR_DATA_PTR(a);
	for (int i = 0; i < count; i++)
	{
		if (with_null && i == 1)
			continue;
		memcpy(p, element[i], strlen(element[i]) + 1);
		p += strlen(element[i]) + 1;
	}
	return a;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *text;
	Datum		array;
	Datum		typmod;
	bool		isnull;

	if (size == 0)
		return 0;
	text = malloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	array = PointerGetDatum(cstring_array(text, size - 1, data[0]));
	if (fz_call(cvec_typmod_in, 1, &array, NULL, &typmod, &isnull) &&
		(DatumGetInt32(typmod) < 1 || DatumGetInt32(typmod) > CVEC_MAX_DIM))
	{
		fprintf(stderr, "fuzz: cvec_typmod_in accepted %d\n", DatumGetInt32(typmod));
		abort();
	}
	shim_reset();
	free(text);
	return 0;
}
