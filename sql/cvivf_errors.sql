CREATE TABLE errs (id int, v cvec(3), w cvec(3), r real[]);
INSERT INTO errs VALUES (1, '[1,2,3]', '[1,2,3]', '{1,2,3}');
-- unsupported type, operator class, multiple columns, options
CREATE INDEX ON errs USING cvivf (r);
CREATE INDEX ON errs USING cvivf (v cvec_ops);
CREATE INDEX ON errs USING cvivf (v, w);
CREATE INDEX ON errs USING cvivf (v) WITH (lists = 0);
CREATE INDEX ON errs USING cvivf (v) WITH (lists = 32769);
CREATE INDEX ON errs USING cvivf (v) WITH (iterations = 0);
CREATE INDEX ON errs USING cvivf (v) WITH (seed = -1);
CREATE INDEX ON errs USING cvivf (v) WITH (colour = 1);
CREATE UNIQUE INDEX ON errs USING cvivf (v);
-- dimensions that do not match the index
CREATE TABLE mixed (v cvec);
INSERT INTO mixed VALUES ('[1,2,3]'), ('[1,2]');
CREATE INDEX ON mixed USING cvivf (v);
DELETE FROM mixed WHERE vector_dims(v) = 2;
CREATE INDEX mixed_idx ON mixed USING cvivf (v);
INSERT INTO mixed VALUES ('[1,2,3,4]');
-- NULL vectors are not indexed and are no error
INSERT INTO mixed VALUES (NULL);
SELECT sum(tuples) FROM cvivf_lists('mixed_idx');
-- zero vectors are not indexed under cosine
CREATE TABLE zeros (v cvec(2));
INSERT INTO zeros VALUES ('[0,0]'), ('[1,0]'), ('[0,1]');
CREATE INDEX zeros_idx ON zeros USING cvivf (v cvec_cosine_ops) WITH (lists = 2);
INSERT INTO zeros VALUES ('[0,0]');
SELECT sum(tuples) FROM cvivf_lists('zeros_idx');
-- maintenance_work_mem too small
CREATE TABLE wide_rows (v cvec(4000));
INSERT INTO wide_rows SELECT array_fill(i::real, ARRAY[4000]) FROM generate_series(1, 200) i;
SET maintenance_work_mem = '1MB';
CREATE INDEX ON wide_rows USING cvivf (v) WITH (lists = 100);
CREATE INDEX ON wide_rows USING cvivf (v) WITH (lists = 10, sample_rows = 200);
RESET maintenance_work_mem;
-- introspection on something that is not a cvivf index
SELECT * FROM cvivf_lists('errs');
CREATE INDEX errs_btree ON errs (id);
SELECT cvivf_verify('errs_btree');
SELECT cvivf_list_of('mixed_idx', '[1,2]');
DROP TABLE errs, mixed, zeros, wide_rows;
