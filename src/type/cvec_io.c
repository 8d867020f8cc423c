/*
 * cvec_io.c: text and binary forms of cvec and its typmod.
 *
 * Text is '[1,2,3]' with optional whitespace; output prints each element in
 * the shortest form that reads back to the same float4.  Binary matches
 * pgvector: int16 dimensions, int16 unused, big-endian float4 elements.
 */
#include "postgres.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "type/cvec.h"

PG_FUNCTION_INFO_V1(cvec_in);
PG_FUNCTION_INFO_V1(cvec_out);
PG_FUNCTION_INFO_V1(cvec_recv);
PG_FUNCTION_INFO_V1(cvec_send);
PG_FUNCTION_INFO_V1(cvec_typmod_in);
PG_FUNCTION_INFO_V1(cvec_typmod);

static const char *
skip_space(const char *p)
{
	while (isspace((unsigned char) *p))
		p++;
	return p;
}

static void
report_bad_syntax(const char *input, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type cvec: \"%s\"", input),
			 errdetail("%s", detail),
			 errhint("A cvec is written as a bracketed, comma-separated list of numbers, like '[1,2.5,-3e-2]'.")));
}

/* Parses one element at *p; advances *p past it. */
static float
parse_element(const char *input, const char **p)
{
	char	   *end;
	float		value;

	errno = 0;
	value = strtof(*p, &end);
	if (end == *p)
		report_bad_syntax(input, "Expected a number.");
	if (errno == ERANGE && isinf(value))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("\"%.*s\" is out of range for type cvec",
						(int) (end - *p), *p),
				 errdetail("Elements are float4: at most about 3.4e38 in magnitude.")));
	cvec_check_finite_element(value);
	*p = end;
	return value;
}

/* Reads '[e1, e2, ...]' into elements; returns the count (1..CVEC_MAX_DIM). */
static int
parse_cvec_text(const char *input, float *elements)
{
	const char *p = skip_space(input);
	int			dim = 0;

	if (*p != '[')
		report_bad_syntax(input, "A cvec must start with \"[\".");
	p = skip_space(p + 1);
	if (*p == ']')
		cvec_check_dim_count(0);
	for (;;)
	{
		if (dim == CVEC_MAX_DIM)
			cvec_check_dim_count(dim + 1);
		p = skip_space(p);
		elements[dim++] = parse_element(input, &p);
		p = skip_space(p);
		if (*p == ',')
			p++;
		else if (*p == ']')
			break;
		else if (*p == '\0')
			report_bad_syntax(input, "A cvec must end with \"]\".");
		else
			report_bad_syntax(input, "Expected \",\" or \"]\" after an element.");
	}
	if (*skip_space(p + 1) != '\0')
		report_bad_syntax(input, "Junk after closing bracket.");
	return dim;
}

Datum
cvec_in(PG_FUNCTION_ARGS)
{
	char	   *input = PG_GETARG_CSTRING(0);
	int32		typmod = PG_GETARG_INT32(2);
	/* each element takes a character and a separator, so this bounds the count */
	size_t		capacity = Min(strlen(input) / 2 + 1, CVEC_MAX_DIM);
	float	   *elements = palloc(sizeof(float) * capacity);
	int			dim = parse_cvec_text(input, elements);
	CVec	   *result;

	cvec_check_typmod(dim, typmod);
	result = cvec_alloc(dim);
	memcpy(result->x, elements, sizeof(float) * dim);
	pfree(elements);
	PG_RETURN_CVEC_P(result);
}

Datum
cvec_out(PG_FUNCTION_ARGS)
{
	CVec	   *v = PG_GETARG_CVEC_P(0);
	char	   *buf = palloc((size_t) v->dim * (FLOAT_SHORTEST_DECIMAL_LEN + 1) + 2);
	char	   *p = buf;

	*p++ = '[';
	for (int i = 0; i < v->dim; i++)
	{
		if (i > 0)
			*p++ = ',';
		p += float_to_shortest_decimal_bufn(v->x[i], p);
	}
	*p++ = ']';
	*p = '\0';
	PG_FREE_IF_COPY(v, 0);
	PG_RETURN_CSTRING(buf);
}

Datum
cvec_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int32		typmod = PG_GETARG_INT32(2);
	int			dim = (int16) pq_getmsgint(buf, sizeof(int16));
	int			unused = (int16) pq_getmsgint(buf, sizeof(int16));
	CVec	   *result;

	cvec_check_dim_count(dim);
	cvec_check_typmod(dim, typmod);
	if (unused != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid binary cvec: unused field is %d, expected 0", unused)));
	result = cvec_alloc(dim);
	for (int i = 0; i < dim; i++)
	{
		result->x[i] = pq_getmsgfloat4(buf);
		cvec_check_finite_element(result->x[i]);
	}
	PG_RETURN_CVEC_P(result);
}

Datum
cvec_send(PG_FUNCTION_ARGS)
{
	CVec	   *v = PG_GETARG_CVEC_P(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint16(&buf, v->dim);
	pq_sendint16(&buf, v->unused);
	for (int i = 0; i < v->dim; i++)
		pq_sendfloat4(&buf, v->x[i]);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/* cvec(n): exactly one modifier, 1 <= n <= CVEC_MAX_DIM. */
Datum
cvec_typmod_in(PG_FUNCTION_ARGS)
{
	ArrayType  *mods = PG_GETARG_ARRAYTYPE_P(0);
	int			count;
	int32	   *values = ArrayGetIntegerTypmods(mods, &count);

	if (count != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid type modifier"),
				 errhint("Declare a cvec column as cvec(dimensions), for example cvec(1024).")));
	if (values[0] < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimensions for type cvec must be at least 1")));
	if (values[0] > CVEC_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimensions for type cvec cannot exceed %d", CVEC_MAX_DIM)));
	PG_RETURN_INT32(values[0]);
}

/* The length-coercion cast: a value stored into cvec(n) must have n elements. */
Datum
cvec_typmod(PG_FUNCTION_ARGS)
{
	CVec	   *v = PG_GETARG_CVEC_P(0);
	int32		typmod = PG_GETARG_INT32(1);

	cvec_check_typmod(v->dim, typmod);
	PG_RETURN_CVEC_P(v);
}
