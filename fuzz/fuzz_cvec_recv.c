/*
 * fuzz_cvec_recv.c: cvec's binary input.  The input is the message
 * (NUL-terminated like the server's buffers); an accepted message must give
 * a valid cvec whose cvec_send is exactly the bytes cvec_recv consumed.
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/stringinfo.h"

#include "type/cvec.h"

#include "fuzz_common.h"
#include "pgshim.h"

extern PGDLLEXPORT Datum cvec_recv(PG_FUNCTION_ARGS);
extern PGDLLEXPORT Datum cvec_send(PG_FUNCTION_ARGS);

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	StringInfoData buf;
	Datum		args[3];
	Datum		v;
	Datum		sent;
	bool		isnull;

	if (size > 1024 * 1024)
		return 0;
	buf.data = malloc(size + 1);
	memcpy(buf.data, data, size);
	buf.data[size] = '\0';
	buf.len = (int) size;
	buf.maxlen = (int) size + 1;
	buf.cursor = 0;
	args[0] = PointerGetDatum(&buf);
	args[1] = ObjectIdGetDatum(InvalidOid);
	args[2] = Int32GetDatum(-1);
	if (fz_call(cvec_recv, 3, args, NULL, &v, &isnull))
	{
		shim_check_cvec(v, "cvec_recv");
		if (!fz_call(cvec_send, 1, &v, NULL, &sent, &isnull))
			abort();
		if (VARSIZE(DatumGetPointer(sent)) - VARHDRSZ != (Size) buf.cursor ||
			memcmp(VARDATA(DatumGetPointer(sent)), data, buf.cursor) != 0)
		{
			fprintf(stderr, "fuzz: cvec_send does not give back the %d bytes cvec_recv read\n",
					buf.cursor);
			abort();
		}
	}
	shim_reset();
	free(buf.data);
	return 0;
}
