/*
 * pgshim.c: the fake backend of the fuzz harnesses (see pgshim.h).
 *
 * Each function does what the server's does for the values the harnesses
 * pass, checked where the server would check (allocation sizes, message
 * underruns, array sizes), and nothing more; it is our own code, written
 * from the server's documented behaviour.
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "storage/s_lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "type/cvec.h"

#include "pgshim.h"

sigjmp_buf *PG_exception_stack = NULL;
ErrorContextCallback *error_context_stack = NULL;
MemoryContext CurrentMemoryContext = NULL;

/* No interrupt is ever pending, none held off (CHECK_FOR_INTERRUPTS does nothing). */
volatile sig_atomic_t InterruptPending = false;
volatile uint32 InterruptHoldoffCount = 0;
volatile uint32 QueryCancelHoldoffCount = 0;
volatile uint32 CritSectionCount = 0;

int			shim_error_code;
char		shim_error_message[1024];
bool		shim_in_aggregate;
TupleDesc	shim_result_desc;

/* Stops the run with a message: a defect found, or a path the shim lacks. */
static pg_attribute_noreturn() void
shim_abort(const char *what, const char *detail)
{
	fprintf(stderr, "pgshim: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	abort();
}

/* Symbols the fuzzed objects reference on paths no harness takes. */
#define SHIM_UNREACHABLE(name) shim_abort("unexpected call", name)

/* ---------------------------------------------------------------------
 * Memory: one malloc block per palloc, all freed by shim_reset
 * --------------------------------------------------------------------- */

static void **blocks;
static size_t block_count;
static size_t block_capacity;

static void
remember_block(void *block)
{
	if (block_count == block_capacity)
	{
		block_capacity = block_capacity ? 2 * block_capacity : 256;
		blocks = realloc(blocks, block_capacity * sizeof(void *));
		if (blocks == NULL)
			shim_abort("out of memory for the block list", NULL);
	}
	blocks[block_count++] = block;
}

/* The index of a palloc'd block; aborts on a pointer palloc never returned. */
static size_t
find_block(void *block)
{
	for (size_t i = block_count; i > 0; i--)
		if (blocks[i - 1] == block)
			return i - 1;
	shim_abort("pfree or repalloc of a pointer palloc did not return", NULL);
	return 0;
}

void
shim_out_of_memory(size_t size)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("out of memory"),
			 errdetail("Failed on request of size %zu.", size)));
	pg_unreachable();
}

static void
check_alloc_size(Size size)
{
	if (!AllocSizeIsValid(size))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("invalid memory alloc request size %zu", size)));
}

void *
palloc(Size size)
{
	void	   *block;

	check_alloc_size(size);
	block = malloc(size);
	if (block == NULL)
		shim_out_of_memory(size);
	remember_block(block);
	return block;
}

void *
palloc0(Size size)
{
	void	   *block;

	check_alloc_size(size);
	block = calloc(1, size);
	if (block == NULL)
		shim_out_of_memory(size);
	remember_block(block);
	return block;
}

void *
repalloc(void *pointer, Size size)
{
	size_t		index = find_block(pointer);
	void	   *block;

	check_alloc_size(size);
	block = realloc(pointer, size);
	if (block == NULL)
		shim_out_of_memory(size);
	blocks[index] = block;
	return block;
}

void *
palloc_extended(Size size, int flags)
{
	void	   *block;

	if ((flags & MCXT_ALLOC_HUGE) ? !AllocHugeSizeIsValid(size) : !AllocSizeIsValid(size))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("invalid memory alloc request size %zu", size)));
	block = (flags & MCXT_ALLOC_ZERO) ? calloc(1, size) : malloc(size);
	if (block == NULL)
	{
		if (flags & MCXT_ALLOC_NO_OOM)
			return NULL;
		shim_out_of_memory(size);
	}
	remember_block(block);
	return block;
}

void *
repalloc_huge(void *pointer, Size size)
{
	size_t		index = find_block(pointer);
	void	   *block;

	if (!AllocHugeSizeIsValid(size))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("invalid memory alloc request size %zu", size)));
	block = realloc(pointer, size);
	if (block == NULL)
		shim_out_of_memory(size);
	blocks[index] = block;
	return block;
}

void
pfree(void *pointer)
{
	size_t		index = find_block(pointer);

	free(pointer);
	blocks[index] = blocks[--block_count];
}

/* Callbacks run by the next reset, newest first, as a memory context runs them. */
/* Every context is the one palloc serves. */
void *
MemoryContextAlloc(MemoryContext context, Size size)
{
	(void) context;
	return palloc(size);
}

static MemoryContextCallback *reset_callbacks;

void
MemoryContextRegisterResetCallback(MemoryContext context, MemoryContextCallback *cb)
{
	(void) context;
	cb->next = reset_callbacks;
	reset_callbacks = cb;
}

void
shim_reset(void)
{
	while (reset_callbacks != NULL)
	{
		MemoryContextCallback *cb = reset_callbacks;

		reset_callbacks = cb->next;
		cb->func(cb->arg);
	}
	for (size_t i = 0; i < block_count; i++)
		free(blocks[i]);
	block_count = 0;
}

/* ---------------------------------------------------------------------
 * printf: port.h maps the family to PostgreSQL's own implementation; here
 * it is glibc's, whose ASan interceptors check the arguments (a %s that
 * reads past its string is reported)
 * --------------------------------------------------------------------- */

#undef vsnprintf
#undef vfprintf

int
pg_vsnprintf(char *str, size_t count, const char *fmt, va_list args)
{
	return vsnprintf(str, count, fmt, args);
}

int
pg_snprintf(char *str, size_t count, const char *fmt,...)
{
	va_list		args;
	int			length;

	va_start(args, fmt);
	length = vsnprintf(str, count, fmt, args);
	va_end(args);
	return length;
}

int
pg_fprintf(FILE *stream, const char *fmt,...)
{
	va_list		args;
	int			length;

	va_start(args, fmt);
	length = vfprintf(stream, fmt, args);
	va_end(args);
	return length;
}

/* ---------------------------------------------------------------------
 * ereport: the message is formatted (so its arguments are read), an ERROR
 * longjmps to the innermost shim_call
 * --------------------------------------------------------------------- */

typedef struct ShimReport
{
	bool		active;
	int			elevel;
	int			code;
	char		message[1024];
	char		detail[1024];
	char		hint[1024];
} ShimReport;

static ShimReport report;

bool
errstart(int elevel, const char *domain)
{
	(void) domain;
	if (report.active)
		shim_abort("ereport while another ereport is being built", report.message);
	memset(&report, 0, sizeof(report));
	report.active = true;
	report.elevel = elevel;
	if (elevel >= ERROR)
		report.code = ERRCODE_INTERNAL_ERROR;
	else if (elevel == WARNING)
		report.code = ERRCODE_WARNING;
	else
		report.code = ERRCODE_SUCCESSFUL_COMPLETION;
	return true;
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

int
errcode(int sqlerrcode)
{
	report.code = sqlerrcode;
	return 0;
}

#define FORMAT_INTO(buffer, fmt) \
	do { \
		va_list		args; \
		va_start(args, fmt); \
		vsnprintf(buffer, sizeof(buffer), fmt, args); \
		va_end(args); \
	} while (0)

int
errmsg(const char *fmt,...)
{
	FORMAT_INTO(report.message, fmt);
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	FORMAT_INTO(report.message, fmt);
	return 0;
}

int
errdetail(const char *fmt,...)
{
	FORMAT_INTO(report.detail, fmt);
	return 0;
}

int
errhint(const char *fmt,...)
{
	FORMAT_INTO(report.hint, fmt);
	return 0;
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	char		where[1200];

	report.active = false;
	if (report.elevel < ERROR)
		return;
	snprintf(where, sizeof(where), "%s:%d (%s): %s", filename, lineno, funcname, report.message);
	if (report.elevel > ERROR)
		shim_abort("FATAL or PANIC raised", where);
	if (report.code == ERRCODE_INTERNAL_ERROR)
		shim_abort("elog(ERROR), a \"can't happen\" error, reached from user input", where);
	if (PG_exception_stack == NULL)
		shim_abort("ERROR outside shim_call", where);
	shim_error_code = report.code;
	snprintf(shim_error_message, sizeof(shim_error_message), "%s", report.message);
	siglongjmp(*PG_exception_stack, 1);
}

void
pg_re_throw(void)
{
	if (PG_exception_stack == NULL)
		shim_abort("PG_RE_THROW outside shim_call", NULL);
	siglongjmp(*PG_exception_stack, 1);
}

bool
shim_call(PGFunction fn, FunctionCallInfo fcinfo, Datum *result)
{
	volatile bool ok = true;

	PG_TRY();
	{
		*result = fn(fcinfo);
	}
	PG_CATCH();
	{
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/* ---------------------------------------------------------------------
 * varlena, text, arrays
 * --------------------------------------------------------------------- */

static void
check_plain_or_short(const struct varlena *datum)
{
	if (VARATT_IS_EXTERNAL(datum) || VARATT_IS_COMPRESSED(datum))
		SHIM_UNREACHABLE("detoasting an external or compressed value");
}

struct varlena *
pg_detoast_datum(struct varlena *datum)
{
	struct varlena *result;
	Size		length;

	check_plain_or_short(datum);
	if (!VARATT_IS_SHORT(datum))
		return datum;
	length = VARSIZE_SHORT(datum) - VARHDRSZ_SHORT;
	result = palloc(length + VARHDRSZ);
	SET_VARSIZE(result, length + VARHDRSZ);
	memcpy(VARDATA(result), VARDATA_SHORT(datum), length);
	return result;
}

struct varlena *
pg_detoast_datum_copy(struct varlena *datum)
{
	struct varlena *result;

	check_plain_or_short(datum);
	if (VARATT_IS_SHORT(datum))
		return pg_detoast_datum(datum);
	result = palloc(VARSIZE(datum));
	memcpy(result, datum, VARSIZE(datum));
	return result;
}

struct varlena *
pg_detoast_datum_packed(struct varlena *datum)
{
	check_plain_or_short(datum);
	return datum;
}

text *
cstring_to_text(const char *s)
{
	size_t		length = strlen(s);
	text	   *result = palloc(length + VARHDRSZ);

	SET_VARSIZE(result, length + VARHDRSZ);
	memcpy(VARDATA(result), s, length);
	return result;
}

char *
text_to_cstring(const text *t)
{
	text	   *plain = pg_detoast_datum_packed(unconstify(text *, t));
	size_t		length = VARSIZE_ANY_EXHDR(plain);
	char	   *result = palloc(length + 1);

	memcpy(result, VARDATA_ANY(plain), length);
	result[length] = '\0';
	return result;
}

char *
psprintf(const char *fmt,...)
{
	va_list		args;
	int			length;
	char	   *result;

	va_start(args, fmt);
	length = vsnprintf(NULL, 0, fmt, args);
	va_end(args);
	if (length < 0)
		shim_abort("psprintf: bad format", fmt);
	result = palloc(length + 1);
	va_start(args, fmt);
	vsnprintf(result, length + 1, fmt, args);
	va_end(args);
	return result;
}

/* The element count of an array's dimensions, refused past MaxArraySize. */
int
ArrayGetNItems(int ndim, const int *dims)
{
	int64		count = 1;

	if (ndim <= 0)
		return 0;
	for (int i = 0; i < ndim; i++)
	{
		if (dims[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxArraySize)));
		count *= dims[i];
		if (count > (int64) MaxArraySize)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxArraySize)));
	}
	return (int) count;
}

/* One-dimensional array of fixed-width pass-by-value elements (all the targets build). */
ArrayType *
construct_array(Datum *elems, int nelems, Oid elmtype, int elmlen, bool elmbyval, char elmalign)
{
	ArrayType  *result;
	Size		bytes;

	if (!elmbyval || (elmlen != 4 && elmlen != 8) || elmalign != (elmlen == 8 ? TYPALIGN_DOUBLE : TYPALIGN_INT))
		SHIM_UNREACHABLE("construct_array of a by-reference or unaligned element type");
	if (nelems <= 0)
	{
		result = palloc0(sizeof(ArrayType));
		SET_VARSIZE(result, sizeof(ArrayType));
		result->elemtype = elmtype;
		return result;
	}
	bytes = ARR_OVERHEAD_NONULLS(1) + (Size) nelems * elmlen;
	check_alloc_size(bytes);
	result = palloc0(bytes);
	SET_VARSIZE(result, bytes);
	result->ndim = 1;
	result->dataoffset = 0;
	result->elemtype = elmtype;
	ARR_DIMS(result)[0] = nelems;
	ARR_LBOUND(result)[0] = 1;
	for (int i = 0; i < nelems; i++)
	{
		char	   *slot = ARR_DATA_PTR(result) + (Size) i * elmlen;

		if (elmlen == 8)
		{
			int64		value = DatumGetInt64(elems[i]);

			memcpy(slot, &value, 8);
		}
		else
		{
			int32		value = DatumGetInt32(elems[i]);

			memcpy(slot, &value, 4);
		}
	}
	return result;
}

/* int4 input: optional spaces, sign, digits, optional spaces; range checked. */
static int32
parse_int4(const char *s)
{
	const char *p = s;
	int64		value = 0;
	bool		negative = false;
	bool		digits = false;

	while (isspace((unsigned char) *p))
		p++;
	if (*p == '-' || *p == '+')
		negative = *p++ == '-';
	while (isdigit((unsigned char) *p))
	{
		value = value * 10 + (*p++ - '0');
		digits = true;
		if (value > (int64) PG_INT32_MAX + 1)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("value \"%s\" is out of range for type %s", s, "integer")));
	}
	while (isspace((unsigned char) *p))
		p++;
	if (!digits || *p != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s: \"%s\"", "integer", s)));
	if (negative)
		value = -value;
	if (value > PG_INT32_MAX || value < PG_INT32_MIN)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value \"%s\" is out of range for type %s", s, "integer")));
	return (int32) value;
}

/* The typmod array: one-dimensional cstring[] without NULLs, each an int4. */
int32 *
ArrayGetIntegerTypmods(ArrayType *arr, int *n)
{
	int32	   *result;
	const char *p;

	if (ARR_ELEMTYPE(arr) != CSTRINGOID)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_ELEMENT_ERROR),
				 errmsg("typmod array must be type cstring[]")));
	if (ARR_NDIM(arr) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("typmod array must be one-dimensional")));
	if (ARR_HASNULL(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("typmod array must not contain nulls")));
	*n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	result = palloc(sizeof(int32) * Max(*n, 1));
	p = ARR_DATA_PTR(arr);
	for (int i = 0; i < *n; i++)
	{
		result[i] = parse_int4(p);
		p += strlen(p) + 1;
	}
	return result;
}

/* ---------------------------------------------------------------------
 * Binary messages (StringInfo)
 * --------------------------------------------------------------------- */

void
enlargeStringInfo(StringInfo str, int needed)
{
	Size		wanted;
	Size		size;

	if (needed < 0 || (Size) needed >= MaxAllocSize - (Size) str->len)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("out of memory"),
				 errdetail("Cannot enlarge string buffer containing %d bytes by %d more bytes.",
						   str->len, needed)));
	wanted = (Size) needed + str->len + 1;
	if (wanted <= (Size) str->maxlen)
		return;
	size = 2 * (Size) str->maxlen;
	while (size < wanted)
		size *= 2;
	size = Min(size, MaxAllocSize);
	str->data = repalloc(str->data, size);
	str->maxlen = size;
}

void
pq_begintypsend(StringInfo buf)
{
	buf->data = palloc(1024);
	buf->maxlen = 1024;
	buf->len = VARHDRSZ;		/* room for the varlena header pq_endtypsend sets */
	buf->cursor = 0;
	memset(buf->data, 0, VARHDRSZ + 1);
}

bytea *
pq_endtypsend(StringInfo buf)
{
	bytea	   *result = (bytea *) buf->data;

	SET_VARSIZE(result, buf->len);
	return result;
}

void
pq_sendfloat4(StringInfo buf, float4 f)
{
	uint32		bits;

	memcpy(&bits, &f, sizeof(bits));
	pq_sendint32(buf, bits);
}

void
pq_copymsgbytes(StringInfo msg, char *buf, int datalen)
{
	if (datalen < 0 || datalen > (msg->len - msg->cursor))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("insufficient data left in message")));
	memcpy(buf, &msg->data[msg->cursor], datalen);
	msg->cursor += datalen;
}

unsigned int
pq_getmsgint(StringInfo msg, int b)
{
	uint8		n8;
	uint16		n16;
	uint32		n32;

	switch (b)
	{
		case 1:
			pq_copymsgbytes(msg, (char *) &n8, 1);
			return n8;
		case 2:
			pq_copymsgbytes(msg, (char *) &n16, 2);
			return pg_ntoh16(n16);
		case 4:
			pq_copymsgbytes(msg, (char *) &n32, 4);
			return pg_ntoh32(n32);
		default:
			elog(ERROR, "unsupported integer size %d", b);
			return 0;
	}
}

float4
pq_getmsgfloat4(StringInfo msg)
{
	uint32		bits = pq_getmsgint(msg, 4);
	float4		f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* ---------------------------------------------------------------------
 * Functions returning rows: every attribute is read in full
 * --------------------------------------------------------------------- */

TupleDesc
shim_tupledesc(int natts, const Oid *types)
{
	TupleDesc	desc = calloc(1, offsetof(struct TupleDescData, attrs) +
							  natts * sizeof(FormData_pg_attribute));

	if (desc == NULL)
		shim_abort("out of memory for a tuple descriptor", NULL);
	desc->natts = natts;
	desc->tdtypeid = RECORDOID;
	desc->tdtypmod = -1;
	for (int i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		att->attnum = i + 1;
		att->atttypid = types[i];
		att->attbyval = types[i] == INT8OID || types[i] == FLOAT8OID;
		att->attlen = att->attbyval ? 8 : -1;
		att->attalign = att->attbyval ? TYPALIGN_DOUBLE : TYPALIGN_INT;
	}
	return desc;
}

void
shim_check_cvec(Datum value, const char *what)
{
	const CVec *v = (const CVec *) DatumGetPointer(value);
	char		detail[160];

	if (!VARATT_IS_4B_U(v))
		shim_abort("a returned cvec has no plain 4-byte header", what);
	if (v->dim < 1 || v->dim > CVEC_MAX_DIM || VARSIZE(v) != CVEC_SIZE(v->dim) || v->unused != 0)
	{
		snprintf(detail, sizeof(detail), "%s: size %u, dim %d, unused %d",
				 what, (unsigned) VARSIZE(v), v->dim, v->unused);
		shim_abort("a returned cvec is malformed", detail);
	}
	for (int i = 0; i < v->dim; i++)
		if (!isfinite(v->x[i]))
		{
			snprintf(detail, sizeof(detail), "%s: element %d of %d is %g",
					 what, i + 1, v->dim, (double) v->x[i]);
			shim_abort("a returned cvec holds a non-finite element", detail);
		}
}

/* Reads every attribute of a row as the server would when storing it. */
static void
check_row(TupleDesc desc, const Datum *values, const bool *isnull)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const struct varlena *datum;
		volatile char sink = 0;

		if (isnull[i] || att->attbyval)
			continue;
		datum = (const struct varlena *) DatumGetPointer(values[i]);
		if (att->atttypid == TEXTOID)
		{
			check_plain_or_short(datum);
			for (Size b = 0; b < VARSIZE_ANY(datum); b++)
				sink ^= ((const char *) datum)[b];
		}
		else
			shim_check_cvec(values[i], "a column of a returned row");
		(void) sink;
	}
}

TypeFuncClass
get_call_result_type(FunctionCallInfo fcinfo, Oid *resultTypeId, TupleDesc *resultTupleDesc)
{
	(void) fcinfo;
	if (resultTypeId)
		*resultTypeId = RECORDOID;
	if (resultTupleDesc)
		*resultTupleDesc = shim_result_desc;
	return shim_result_desc != NULL ? TYPEFUNC_COMPOSITE : TYPEFUNC_SCALAR;
}

TupleDesc
BlessTupleDesc(TupleDesc tupdesc)
{
	return tupdesc;
}

HeapTuple
heap_form_tuple(TupleDesc tupleDescriptor, Datum *values, bool *isnull)
{
	HeapTuple	tuple = palloc0(sizeof(HeapTupleData) + sizeof(HeapTupleHeaderData));

	check_row(tupleDescriptor, values, isnull);
	tuple->t_data = (HeapTupleHeader) ((char *) tuple + sizeof(HeapTupleData));
	return tuple;
}

Datum
HeapTupleHeaderGetDatum(HeapTupleHeader tuple)
{
	return PointerGetDatum(tuple);
}

static int	shim_tuplestore;	/* its address stands for the one result store */

void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	(void) flags;
	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) || shim_result_desc == NULL)
		SHIM_UNREACHABLE("InitMaterializedSRF without a ReturnSetInfo and a row type");
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = (Tuplestorestate *) &shim_tuplestore;
	rsinfo->setDesc = shim_result_desc;
}

void
tuplestore_putvalues(Tuplestorestate *state, TupleDesc tdesc, Datum *values, bool *isnull)
{
	if (state != (Tuplestorestate *) &shim_tuplestore)
		SHIM_UNREACHABLE("tuplestore_putvalues on a store InitMaterializedSRF did not make");
	check_row(tdesc, values, isnull);
}

/* ---------------------------------------------------------------------
 * Aggregates
 * --------------------------------------------------------------------- */

int
AggCheckCallContext(FunctionCallInfo fcinfo, MemoryContext *aggcontext)
{
	(void) fcinfo;
	if (aggcontext != NULL)
		SHIM_UNREACHABLE("AggCheckCallContext asked for the aggregate's context");
	return shim_in_aggregate ? AGG_CONTEXT_AGGREGATE : 0;
}

/* ---------------------------------------------------------------------
 * Time: a clock that moves 3 s per reading, so progress reports happen
 * --------------------------------------------------------------------- */

TimestampTz
GetCurrentTimestamp(void)
{
	static TimestampTz now;

	now += 3 * USECS_PER_SEC;
	return now;
}

bool
TimestampDifferenceExceeds(TimestampTz start_time, TimestampTz stop_time, int msec)
{
	return stop_time - start_time >= (TimestampTz) msec * 1000;
}

/* ---------------------------------------------------------------------
 * Referenced by the fuzzed objects, reached by no harness
 * --------------------------------------------------------------------- */

void
fmgr_info(Oid functionId, FmgrInfo *finfo)
{
	(void) functionId;
	(void) finfo;
	SHIM_UNREACHABLE("fmgr_info");
}

void
get_type_io_data(Oid typid, IOFuncSelector which_func, int16 *typlen, bool *typbyval,
				 char *typalign, char *typdelim, Oid *typioparam, Oid *func)
{
	(void) typid;
	(void) which_func;
	(void) typlen;
	(void) typbyval;
	(void) typalign;
	(void) typdelim;
	(void) typioparam;
	(void) func;
	SHIM_UNREACHABLE("get_type_io_data");
}

void
DefineCustomIntVariable(const char *name, const char *short_desc, const char *long_desc,
						int *valueAddr, int bootValue, int minValue, int maxValue,
						GucContext context, int flags, GucIntCheckHook check_hook,
						GucIntAssignHook assign_hook, GucShowHook show_hook)
{
	(void) name;
	(void) short_desc;
	(void) long_desc;
	(void) valueAddr;
	(void) bootValue;
	(void) minValue;
	(void) maxValue;
	(void) context;
	(void) flags;
	(void) check_hook;
	(void) assign_hook;
	(void) show_hook;
	SHIM_UNREACHABLE("DefineCustomIntVariable");
}

void
ProcessInterrupts(void)
{
	SHIM_UNREACHABLE("ProcessInterrupts");
}

int
s_lock(volatile slock_t *lock, const char *file, int line, const char *func)
{
	(void) lock;
	(void) file;
	(void) line;
	(void) func;
	SHIM_UNREACHABLE("s_lock");
	return 0;
}

void
slot_getsomeattrs_int(TupleTableSlot *slot, int attnum)
{
	(void) slot;
	(void) attnum;
	SHIM_UNREACHABLE("slot_getsomeattrs_int");
}

/* ---------------------------------------------------------------------
 * Types: no expression trees and no catalogs here
 * --------------------------------------------------------------------- */

/* A direct call: argument types are unknown, so cvec's values are checked one by one. */
Oid
get_fn_expr_argtype(FmgrInfo *flinfo, int argnum)
{
	(void) flinfo;
	(void) argnum;
	return InvalidOid;
}

/* Never reached with the types above; every value is then checked. */
CVecLayout
cvec_layout_of_type(Oid type)
{
	(void) type;
	return CVEC_LAYOUT_CHECKED;
}
