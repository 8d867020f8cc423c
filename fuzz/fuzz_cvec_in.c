/*
 * fuzz_cvec_in.c: cvec's text input.  The input is the text (up to its
 * first NUL, as a cstring is).  An accepted text must give a valid cvec,
 * and cvec_out of it must read back to the same bits.
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "type/cvec.h"

#include "fuzz_common.h"
#include "pgshim.h"

extern PGDLLEXPORT Datum cvec_out(PG_FUNCTION_ARGS);

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* cvec_in(text, 0, typmod); true when it accepted the text. */
static bool
parse(const char *text, int32 typmod, Datum *result)
{
	Datum		args[3] = {CStringGetDatum(text), ObjectIdGetDatum(InvalidOid), Int32GetDatum(typmod)};
	bool		isnull;

	return fz_call(cvec_in, 3, args, NULL, result, &isnull);
}

static void
check_round_trip(Datum v)
{
	Datum		text;
	Datum		again;
	bool		isnull;

	if (!fz_call(cvec_out, 1, &v, NULL, &text, &isnull))
	{
		fprintf(stderr, "fuzz: cvec_out refused a cvec cvec_in made: %s\n", shim_error_message);
		abort();
	}
	if (!parse(DatumGetCString(text), -1, &again))
	{
		fprintf(stderr, "fuzz: cvec_in refused cvec_out's \"%s\": %s\n",
				DatumGetCString(text), shim_error_message);
		abort();
	}
	if (VARSIZE(DatumGetPointer(v)) != VARSIZE(DatumGetPointer(again)) ||
		memcmp(DatumGetPointer(v), DatumGetPointer(again), VARSIZE(DatumGetPointer(v))) != 0)
	{
		fprintf(stderr, "fuzz: \"%s\" reads back to different bits\n", DatumGetCString(text));
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *text = malloc(size + 1);
	Datum		v;

	memcpy(text, data, size);
	text[size] = '\0';
	if (parse(text, -1, &v))
	{
		const CVec *cv = (const CVec *) DatumGetPointer(v);
		Datum		typed;

		shim_check_cvec(v, "cvec_in");
		check_round_trip(v);
		/* the same text into cvec(dim) and cvec(dim + 1) */
		if (!parse(text, cv->dim, &typed))
			abort();
		if (parse(text, cv->dim + 1, &typed))
			abort();
	}
	shim_reset();
	free(text);
	return 0;
}
