-- text input and output
SELECT '[1,2,3]'::cvec;
SELECT ' [ 1 , -2.5 ,3e2 ] '::cvec;
SELECT '[1e-3,1.5E+2,-0]'::cvec;
SELECT '[0.1]'::cvec, '[0.3]'::cvec, '[1.0000001]'::cvec;
SELECT '[3.4028235e38,-3.4028235e38,1.4e-45]'::cvec;
-- shortest round trip: text -> cvec -> text -> cvec is the identity
SELECT v::text::cvec = v AS round_trip
FROM (SELECT array_agg((random() * 1e6 - 5e5)::real / 7)::cvec AS v
      FROM generate_series(1, 500)) s;

-- malformed text
SELECT '[1,,2]'::cvec;
SELECT '[1,2'::cvec;
SELECT '1,2]'::cvec;
SELECT '[1,2]x'::cvec;
SELECT '[1 2]'::cvec;
SELECT '[1,2,]'::cvec;
SELECT '[abc]'::cvec;
SELECT ''::cvec;
SELECT '[]'::cvec;
SELECT '[ ]'::cvec;
-- non-finite and out of range
SELECT '[NaN]'::cvec;
SELECT '[1,nan]'::cvec;
SELECT '[Infinity]'::cvec;
SELECT '[-inf,1]'::cvec;
SELECT '[1e39]'::cvec;
SELECT '[-4e38]'::cvec;
-- dimension limit
SELECT vector_dims(('[' || array_to_string(array_fill(1, ARRAY[16000]), ',') || ']')::cvec);
SELECT ('[' || array_to_string(array_fill(1, ARRAY[16001]), ',') || ']')::cvec;

-- binary form, pgvector's: int16 dims, int16 unused, big-endian float4
SELECT cvec_send('[1,2,-0.5]');
CREATE TABLE io_binary (v cvec);
INSERT INTO io_binary VALUES ('[1,2,3]'), ('[0.1,-1e-30,3.4028235e38]'), ('[5]');
\copy io_binary TO 'results/cvec_io.bin' WITH (FORMAT binary)
CREATE TABLE io_binary_back (v cvec);
\copy io_binary_back FROM 'results/cvec_io.bin' WITH (FORMAT binary)
SELECT a.v, a.v = b.v AS same FROM io_binary a JOIN io_binary_back b ON a.v = b.v ORDER BY a.v;
SELECT count(*) FROM io_binary_back;
-- binary input honours the column's typmod
CREATE TABLE io_binary_typed (v cvec(3));
\copy io_binary_typed FROM 'results/cvec_io.bin' WITH (FORMAT binary)
DROP TABLE io_binary, io_binary_back, io_binary_typed;
