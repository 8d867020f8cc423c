-- Quantized lists (quantization = sq8): a scan ranks candidates by their
-- codes' lower bounds and computes exact distances only where needed, so
-- its answers are exactly the full-precision index's over the same lists
-- (same rows, same order, same distances).  Two tables with the same rows
-- in the same order get the same centroids and lists from the same seed:
-- one index with codes, one without, compared query by query, after
-- inserts (rows with no code), deletes, VACUUM and inserts that fill the
-- coded slots VACUUM freed; and at every list probed, against exact search.
SET max_parallel_workers_per_gather = 0;
SET clustervec.iterative_scan = off;
SELECT setseed(0.5);
CREATE TABLE sq8_src AS
SELECT i AS id, array_agg(((i % 37) * 0.25 + random() * 2 - 1)::real ORDER BY j) AS x
FROM generate_series(1, 6000) i, generate_series(1, 33) j GROUP BY i;

-- answers as one array of (id, distance) pairs; use_index false: exact search
CREATE FUNCTION sq8_answers(tab text, op text, q cvec, k int, probes int, use_index bool)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	result text;
BEGIN
	PERFORM set_config('clustervec.probes', probes::text, true);
	PERFORM set_config('enable_seqscan', (NOT use_index)::text, true);
	PERFORM set_config('enable_indexscan', use_index::text, true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	EXECUTE format('SELECT string_agg(id || '':'' || d, '','') FROM '
				   '(SELECT id, v %s %L AS d FROM %I ORDER BY v %s %L LIMIT %s) s',
				   op, q, tab, op, q, k) INTO result;
	RETURN result;
END $$;

-- For each metric: the plain and the quantized table, built alike.
CREATE FUNCTION sq8_setup(metric text, dims int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'DROP TABLE IF EXISTS sq8_plain, sq8_coded';
	EXECUTE format('CREATE TABLE sq8_plain (id int, v cvec(%s))', dims);
	EXECUTE format('CREATE TABLE sq8_coded (id int, v cvec(%s))', dims);
	EXECUTE format('INSERT INTO sq8_plain SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id <= 5000 ORDER BY id', dims);
	EXECUTE format('INSERT INTO sq8_coded SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id <= 5000 ORDER BY id', dims);
	EXECUTE format('CREATE INDEX ON sq8_plain USING cvivf (v %s) WITH (lists = 20, seed = 7)', metric);
	EXECUTE format('CREATE INDEX ON sq8_coded USING cvivf (v %s) WITH (lists = 20, seed = 7, quantization = sq8)', metric);
END $$;

-- Queries from the source rows (some are in the tables, most are not):
-- how many of them the two indexes answer differently, and how many
-- full-probe answers differ from exact search.
CREATE FUNCTION sq8_compare(op text, dims int, every int DEFAULT 97) RETURNS TABLE(queries bigint, differ bigint, inexact bigint)
LANGUAGE sql AS $$
	SELECT count(*),
		count(*) FILTER (WHERE sq8_answers('sq8_plain', op, q, 10, p, true) IS DISTINCT FROM
								sq8_answers('sq8_coded', op, q, 10, p, true)),
		count(*) FILTER (WHERE p = 20 AND sq8_answers('sq8_coded', op, q, 10, p, true) IS DISTINCT FROM
								sq8_answers('sq8_coded', op, q, 10, p, false))
	FROM (SELECT x[1:dims]::cvec AS q, 1 + (id % 3) * 4 + (id % 5 / 4) * 15 AS p
		  FROM sq8_src WHERE id % every = 0) s
$$;

-- Churn: rows after the build (no code), deletes, VACUUM, refills.
CREATE FUNCTION sq8_churn(dims int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('INSERT INTO sq8_plain SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id BETWEEN 5001 AND 5500 ORDER BY id', dims);
	EXECUTE format('INSERT INTO sq8_coded SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id BETWEEN 5001 AND 5500 ORDER BY id', dims);
	DELETE FROM sq8_plain WHERE id % 3 = 0;
	DELETE FROM sq8_coded WHERE id % 3 = 0;
END $$;
CREATE FUNCTION sq8_refill(dims int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('INSERT INTO sq8_plain SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id > 5500 ORDER BY id', dims);
	EXECUTE format('INSERT INTO sq8_coded SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id > 5500 ORDER BY id', dims);
END $$;

SELECT sq8_setup('cvec_l2_ops', 33);
SELECT pg_relation_size('sq8_coded_v_idx') > pg_relation_size('sq8_plain_v_idx') AS codes_take_room;
SELECT cvivf_verify('sq8_coded_v_idx');
SELECT * FROM sq8_compare('<->', 33);
SELECT sq8_churn(33);
VACUUM sq8_plain;
VACUUM sq8_coded;
SELECT sq8_refill(33);
SELECT * FROM sq8_compare('<->', 33);
SELECT cvivf_verify('sq8_coded_v_idx');

SELECT sq8_setup('cvec_ip_ops', 33);
SELECT * FROM sq8_compare('<#>', 33);
SELECT sq8_churn(33);
VACUUM sq8_plain;
VACUUM sq8_coded;
SELECT sq8_refill(33);
SELECT * FROM sq8_compare('<#>', 33);

SELECT sq8_setup('cvec_cosine_ops', 33);
SELECT * FROM sq8_compare('<=>', 33);
SELECT sq8_churn(33);
VACUUM sq8_plain;
VACUUM sq8_coded;
SELECT sq8_refill(33);
SELECT * FROM sq8_compare('<=>', 33);

-- odd and tiny dimensions
SELECT sq8_setup('cvec_l2_ops', 1);
SELECT * FROM sq8_compare('<->', 1);
SELECT sq8_setup('cvec_l2_ops', 3);
SELECT * FROM sq8_compare('<->', 3);

-- wide vectors: 1,024 dimensions, and 8,128, whose code entry fills a page
DROP TABLE sq8_src;
CREATE TABLE sq8_src AS
SELECT i AS id, array_agg(((i % 37) * 0.25 + random() * 2 - 1)::real ORDER BY j) AS x
FROM generate_series(1, 400) i, generate_series(1, 8128) j GROUP BY i;
CREATE OR REPLACE FUNCTION sq8_setup(metric text, dims int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'DROP TABLE IF EXISTS sq8_plain, sq8_coded';
	EXECUTE format('CREATE TABLE sq8_plain (id int, v cvec(%s))', dims);
	EXECUTE format('CREATE TABLE sq8_coded (id int, v cvec(%s))', dims);
	EXECUTE format('INSERT INTO sq8_plain SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id <= 300 ORDER BY id', dims);
	EXECUTE format('INSERT INTO sq8_coded SELECT id, x[1:%s]::cvec FROM sq8_src WHERE id <= 300 ORDER BY id', dims);
	EXECUTE format('CREATE INDEX ON sq8_plain USING cvivf (v %s) WITH (lists = 20, seed = 7)', metric);
	EXECUTE format('CREATE INDEX ON sq8_coded USING cvivf (v %s) WITH (lists = 20, seed = 7, quantization = sq8)', metric);
END $$;
SELECT sq8_setup('cvec_l2_ops', 1024);
SELECT * FROM sq8_compare('<->', 1024, 13);
SELECT sq8_setup('cvec_cosine_ops', 1024);
SELECT * FROM sq8_compare('<=>', 1024, 13);
SELECT sq8_setup('cvec_ip_ops', 8128);
SELECT * FROM sq8_compare('<#>', 8128, 13);
INSERT INTO sq8_plain SELECT id, x::cvec FROM sq8_src WHERE id > 300 ORDER BY id;
INSERT INTO sq8_coded SELECT id, x::cvec FROM sq8_src WHERE id > 300 ORDER BY id;
DELETE FROM sq8_plain WHERE id % 3 = 0;
DELETE FROM sq8_coded WHERE id % 3 = 0;
VACUUM sq8_plain;
VACUUM sq8_coded;
INSERT INTO sq8_plain SELECT id + 2000, x::cvec FROM sq8_src WHERE id % 3 = 0 ORDER BY id;
INSERT INTO sq8_coded SELECT id + 2000, x::cvec FROM sq8_src WHERE id % 3 = 0 ORDER BY id;
SELECT * FROM sq8_compare('<#>', 8128, 13);
SELECT cvivf_verify('sq8_coded_v_idx');

-- bad requests
CREATE TABLE sq8_wide (v cvec(9000));
CREATE INDEX ON sq8_wide USING cvivf (v) WITH (quantization = sq8);
CREATE INDEX ON sq8_plain USING cvivf (v) WITH (quantization = sq4);
CREATE INDEX ON sq8_plain USING cvlattice (v, id) WITH (quantization = sq8);
DROP TABLE sq8_wide, sq8_plain, sq8_coded, sq8_src;
