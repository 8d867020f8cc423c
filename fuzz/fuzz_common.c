/*
 * fuzz_common.c: input reading and value building for the harnesses.
 */
#include "postgres.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog/pg_type.h"
#include "utils/array.h"

#include "type/cvec.h"

#include "fuzz_common.h"
#include "pgshim.h"

bool
fz_more(const FuzzReader *r)
{
	return r->pos < r->size;
}

uint8_t
fz_u8(FuzzReader *r)
{
	return r->pos < r->size ? r->data[r->pos++] : 0;
}

uint32_t
fz_u32(FuzzReader *r)
{
	uint32_t	value = 0;

	for (int i = 0; i < 4; i++)
		value = (value << 8) | fz_u8(r);
	return value;
}

double
fz_f8(FuzzReader *r)
{
	uint64_t	bits = ((uint64_t) fz_u32(r) << 32) | fz_u32(r);
	double		value;

	memcpy(&value, &bits, sizeof(value));
	return value;
}

/* Small integers most of the time (sums stay exact), any finite float4 otherwise. */
float
fz_finite_f4(FuzzReader *r)
{
	uint8_t		kind = fz_u8(r);
	uint32_t	bits;
	float		value;

	if (kind < 192)
		return (float) ((int) kind - 96);
	bits = fz_u32(r);
	memcpy(&value, &bits, sizeof(value));
	return isfinite(value) ? value : 0.0f;
}

Datum
fz_cvec(FuzzReader *r, int dim)
{
	CVec	   *v = cvec_alloc(dim);

	for (int i = 0; i < dim; i++)
		v->x[i] = fz_finite_f4(r);
	return PointerGetDatum(v);
}

Datum
fz_float8_array(FuzzReader *r, int count, uint8_t shape)
{
	int			ndim = (shape & 8) || count == 0 ? 0 : (shape & 2) && count % 2 == 0 ? 2 : 1;
	bool		with_null = (shape & 1) && count >= 2 && ndim > 0;
	int			dims[2] = {count, 1};
	int			lbound[2] = {(shape & 4) ? -3 : 1, 1};
	int			stored = with_null ? count - 1 : count;
	Size		overhead = with_null ? ARR_OVERHEAD_WITHNULLS(ndim, count) : ARR_OVERHEAD_NONULLS(ndim);
	Size		bytes = overhead + sizeof(float8) * (ndim == 0 ? 0 : stored);
	ArrayType  *a = palloc0(bytes);

	if (ndim == 2)
	{
		dims[0] = count / 2;
		dims[1] = 2;
	}
	SET_VARSIZE(a, bytes);
	a->ndim = ndim;
	a->dataoffset = with_null && ndim > 0 ? overhead : 0;
	a->elemtype = FLOAT8OID;
	if (ndim == 0)
		return PointerGetDatum(a);
	memcpy(ARR_DIMS(a), dims, sizeof(int) * ndim);
	memcpy(ARR_LBOUND(a), lbound, sizeof(int) * ndim);
	if (with_null)
	{
		bits8	   *bitmap = ARR_NULLBITMAP(a);

		/* element count / 2 is the NULL; the others are present */
		for (int i = 0; i < count; i++)
			if (i != count / 2)
				bitmap[i / 8] |= 1 << (i % 8);
	}
	for (int i = 0; i < stored; i++)
	{
		float8		value = fz_f8(r);

		memcpy(ARR_DATA_PTR(a) + sizeof(float8) * i, &value, sizeof(value));
	}
	return PointerGetDatum(a);
}

Datum
fz_short_copy(Datum varlena)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(varlena);
	Size		data = VARSIZE_ANY_EXHDR(v);
	char	   *copy;

	if (VARATT_IS_SHORT(v) || data + VARHDRSZ_SHORT > VARATT_SHORT_MAX)
		return fz_copy(varlena);
	copy = palloc(data + VARHDRSZ_SHORT);
	SET_VARSIZE_SHORT(copy, data + VARHDRSZ_SHORT);
	memcpy(copy + VARHDRSZ_SHORT, VARDATA(v), data);
	return PointerGetDatum(copy);
}

Datum
fz_plain_copy(Datum varlena)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(varlena);
	Size		data = VARSIZE_ANY_EXHDR(v);
	struct varlena *copy = palloc(data + VARHDRSZ);

	SET_VARSIZE(copy, data + VARHDRSZ);
	memcpy(VARDATA(copy), VARDATA_ANY(v), data);
	return PointerGetDatum(copy);
}

Datum
fz_copy(Datum varlena)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(varlena);
	struct varlena *copy = palloc(VARSIZE_ANY(v));

	memcpy(copy, v, VARSIZE_ANY(v));
	return PointerGetDatum(copy);
}

void
fz_check_unchanged(Datum before_copy, Datum after, const char *what)
{
	struct varlena *a = (struct varlena *) DatumGetPointer(before_copy);
	struct varlena *b = (struct varlena *) DatumGetPointer(after);

	if (VARSIZE_ANY(a) != VARSIZE_ANY(b) || memcmp(a, b, VARSIZE_ANY(a)) != 0)
	{
		fprintf(stderr, "fuzz: %s wrote into its argument outside an aggregate\n", what);
		abort();
	}
}

bool
fz_call(PGFunction fn, int nargs, const Datum *args, const bool *nulls,
		Datum *result, bool *result_null)
{
	LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);
	FmgrInfo	flinfo;
	bool		ok;

	memset(&flinfo, 0, sizeof(flinfo));
	flinfo.fn_addr = fn;
	flinfo.fn_nargs = nargs;
	flinfo.fn_mcxt = NULL;
	InitFunctionCallInfoData(*fcinfo, &flinfo, nargs, InvalidOid, NULL, NULL);
	for (int i = 0; i < nargs; i++)
	{
		fcinfo->args[i].value = args[i];
		fcinfo->args[i].isnull = nulls != NULL && nulls[i];
	}
	ok = shim_call(fn, fcinfo, result);
	*result_null = ok && fcinfo->isnull;
	return ok;
}
