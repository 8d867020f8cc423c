/*
 * fuzz_common.h: reading a fuzz input as a stream of choices, and building
 * from it the values SQL can hand an fmgr function (cvecs, float8[] states
 * in every shape an array can take, short-header copies of both).
 */
#ifndef CV_FUZZ_COMMON_H
#define CV_FUZZ_COMMON_H

#include "postgres.h"

#include <stddef.h>
#include <stdint.h>

#include "fmgr.h"

/* The input, consumed from the front; reads past the end give zeros. */
typedef struct FuzzReader
{
	const uint8_t *data;
	size_t		size;
	size_t		pos;
} FuzzReader;

extern bool fz_more(const FuzzReader *r);
extern uint8_t fz_u8(FuzzReader *r);
extern uint32_t fz_u32(FuzzReader *r);
extern double fz_f8(FuzzReader *r);		/* any bits: NaN, infinities, denormals */
extern float fz_finite_f4(FuzzReader *r);	/* any finite float4 */

/* A valid cvec of dim finite elements (4-byte header, palloc'd). */
extern Datum fz_cvec(FuzzReader *r, int dim);

/*
 * A float8[] of count values from the input; shape picks what SQL can
 * also produce: bit 0 NULL in the middle, bit 1 two dimensions, bit 2 a
 * lower bound other than 1, bit 3 no dimensions at all.
 */
extern Datum fz_float8_array(FuzzReader *r, int count, uint8_t shape);

/* A copy with a 1-byte header, as a value read from a table may be (when it fits). */
extern Datum fz_short_copy(Datum varlena);

/* A palloc'd copy of a varlena, header as it is. */
extern Datum fz_copy(Datum varlena);

/* A palloc'd copy with a 4-byte header, as detoasting makes. */
extern Datum fz_plain_copy(Datum varlena);

/* Aborts when the bytes at before differ from after (an argument was written). */
extern void fz_check_unchanged(Datum before_copy, Datum after, const char *what);

/* fmgr call helpers: fills fcinfo and calls through shim_call. */
extern bool fz_call(PGFunction fn, int nargs, const Datum *args, const bool *nulls,
					Datum *result, bool *result_null);

#endif
