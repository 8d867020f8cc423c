SELECT '[1,2,3]'::cvec + '[4,5,6]', '[1,2,3]'::cvec - '[4,5,6]', '[1,2,3]'::cvec * '[4,5,6]';
SELECT '[0.1]'::cvec + '[0.2]';
SELECT '[1.5,-2]'::cvec * '[-2,0]';
-- overflow to infinity is an error, never a stored infinity
SELECT '[3e38]'::cvec + '[3e38]';
SELECT '[-3e38]'::cvec - '[3e38]';
SELECT '[1,1e20]'::cvec * '[1,1e20]';
SELECT '[3e38]'::cvec + '[-3e38]';
-- underflow to 0 is an error too, as float4 * (22003); a 0 operand is not
SELECT '[1e-37]'::cvec * '[1e-37]';
SELECT '1e-37'::float4 * '1e-37'::float4;
\set VERBOSITY sqlstate
SELECT '[1e-37]'::cvec * '[1e-37]';
\set VERBOSITY default
SELECT '[1,-1e-30]'::cvec * '[2,1e-30]';
SELECT '[0,1e-37,-0]'::cvec * '[1e-37,0,5]';
-- a subnormal product is not 0: kept, as float4 * keeps it
SELECT '[1e-20]'::cvec * '[1e-20]', '1e-20'::float4 * '1e-20'::float4;
-- + and -: overflow on either sign; exact cancellation to 0 is no underflow
SELECT '[-3e38]'::cvec + '[-3e38]';
SELECT '[3e38]'::cvec - '[-3e38]';
SELECT '[1e-37]'::cvec - '[1e-37]', '[1e-45]'::cvec + '[-1e-45]';
-- dimension mismatch
SELECT '[1,2]'::cvec + '[1]';
SELECT '[1,2]'::cvec - '[1]';
SELECT '[1,2]'::cvec * '[1]';
-- concatenation, as pgvector's ||: the elements of both, in order
SELECT '[1,2,3]'::cvec || '[4,5]'::cvec;
-- an unknown literal on either side is a cvec, not text
SELECT '[1,2]'::cvec || '[3]', '[1]' || '[2,3]'::cvec;
SELECT pg_typeof('[1,2]'::cvec || '[3]');
SELECT vector_dims('[1,2]'::cvec || '[3]');
-- the result carries no typmod: cvec(2) || cvec(1) is no cvec(2)
CREATE TABLE concat_t (a cvec(2), b cvec(1));
INSERT INTO concat_t VALUES ('[1.5,-2]', '[3e38]');
SELECT a || b, vector_dims(a || b) FROM concat_t;
SELECT (a || b)::cvec(3) FROM concat_t;
SELECT (a || b)::cvec(2) FROM concat_t;
DROP TABLE concat_t;
-- the dimension limit: 16,000 elements fit, 16,001 do not
SELECT vector_dims(array_fill(1, ARRAY[15999])::cvec || '[2]');
SELECT array_fill(1, ARRAY[16000])::cvec || '[2]';
SELECT '[1]'::cvec || NULL::cvec IS NULL AS null_concat;
