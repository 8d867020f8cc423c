SELECT ARRAY[1,2,3]::cvec, ARRAY[1.5,-2.25]::real[]::cvec, ARRAY[0.1,0.2]::float8[]::cvec;
SELECT ARRAY[1.5,2]::numeric[]::cvec, '{7,8}'::int[]::cvec;
SELECT '[1,2.5,-3]'::cvec::real[];
SELECT ('[0.1,1e-20]'::cvec::real[])::cvec;
-- assignment casts into a cvec column
CREATE TABLE cast_target (v cvec);
INSERT INTO cast_target VALUES (ARRAY[1,2]), (ARRAY[0.5]::float8[]), (ARRAY[2.5]::numeric[]);
SELECT v FROM cast_target ORDER BY v;
DROP TABLE cast_target;
-- a float8 is rounded to the nearest float4
SELECT ARRAY[0.1::float8]::cvec::real[] = ARRAY[0.1::real];
-- errors: NULL elements, more than one dimension, empty, non-finite, overflow
SELECT ARRAY[1,NULL,3]::cvec;
SELECT ARRAY[NULL]::real[]::cvec;
SELECT ARRAY[[1,2],[3,4]]::cvec;
SELECT '{}'::real[]::cvec;
SELECT ARRAY['NaN']::real[]::cvec;
SELECT ARRAY['Infinity']::float8[]::cvec;
SELECT ARRAY['-Infinity']::real[]::cvec;
SELECT ARRAY['NaN']::numeric[]::cvec;
SELECT ARRAY[1e39]::float8[]::cvec;
SELECT ARRAY[-1e39]::numeric[]::cvec;
SELECT ARRAY[1e400]::numeric[]::cvec;
SELECT array_fill(1, ARRAY[16001])::cvec;
SELECT array_fill(1, ARRAY[16000])::cvec = array_fill(1.0::real, ARRAY[16000])::cvec;
