-- Space reuse: after DELETE and VACUUM, inserts fill the slots VACUUM freed
-- in their lists, cvivf and cvlattice alike.  Answers after reuse are
-- checked against exact search (index scans off).
SET max_parallel_workers_per_gather = 0;
SELECT setseed(0.25);
CREATE TABLE reuse_src AS
SELECT i AS id, i % 7 AS label,
	array_agg(((i % 50) + random())::real ORDER BY j)::cvec(8) AS v
FROM generate_series(1, 100000) i, generate_series(1, 8) j GROUP BY i;
CREATE TABLE reuse (id int, label int, v cvec(8));
INSERT INTO reuse SELECT * FROM reuse_src;
CREATE INDEX reuse_ivf ON reuse USING cvivf (v) WITH (lists = 100);
-- cvlattice on a table of its own (the planner would take cvivf for plain
-- ORDER BY queries): the first 20,000 rows, 7 labels
CREATE TABLE lreuse (id int, label int, v cvec(8));
INSERT INTO lreuse SELECT * FROM reuse_src WHERE id <= 20000;
CREATE INDEX lreuse_lat ON lreuse USING cvlattice (v, label);
CREATE TABLE reuse_sizes AS
SELECT 'first build' AS stage, pg_relation_size('reuse_ivf') AS ivf,
	pg_relation_size('lreuse_lat') AS lat;

-- A table's answers at full probes against exact search: the top 10 of
-- each query by distance (ties accepted), and every row found once.
CREATE FUNCTION reuse_answers(tab text, q cvec, use_index bool) RETURNS float8[]
LANGUAGE plpgsql AS $$
DECLARE
	result float8[];
BEGIN
	PERFORM set_config('clustervec.probes', '200', true);
	PERFORM set_config('enable_seqscan', (NOT use_index)::text, true);
	PERFORM set_config('enable_indexscan', use_index::text, true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	EXECUTE format('SELECT array_agg(d) FROM (SELECT v <-> %L AS d FROM %I ORDER BY v <-> %L LIMIT 10) s',
	               q, tab, q) INTO result;
	RETURN result;
END $$;
CREATE FUNCTION reuse_all_found(tab text, use_index bool) RETURNS TABLE(n bigint, ids bigint, sum_ids bigint)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('clustervec.probes', '200', true);
	PERFORM set_config('enable_seqscan', (NOT use_index)::text, true);
	PERFORM set_config('enable_indexscan', use_index::text, true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	RETURN QUERY EXECUTE format('SELECT count(*), count(DISTINCT s.id), sum(s.id)
		FROM (SELECT id FROM %I ORDER BY v <-> %L LIMIT 1000000) s', tab, '[25,25,25,25,25,25,25,25]');
END $$;
CREATE FUNCTION reuse_exact(tab text) RETURNS TABLE(queries bigint, exact bigint, all_found bool)
LANGUAGE sql AS $$
	SELECT count(*), count(*) FILTER (WHERE reuse_answers(tab, q.v, true) =
	                                         reuse_answers(tab, q.v, false)),
	       (SELECT row(a.*) = row(b.*) FROM reuse_all_found(tab, true) a, reuse_all_found(tab, false) b)
	FROM reuse_src q WHERE q.id % 9973 = 1
$$;
-- The lattice lists' centroids are their live members' means: exact after
-- VACUUM, moved by each insert (float4 steps: 100k inserts into an empty
-- index drift by about 1.3e-4 here, with or without reuse).
CREATE FUNCTION reuse_means() RETURNS TABLE(lists bigint, members numeric, means_agree bool)
LANGUAGE sql AS $$
	SELECT count(*), sum(l.members), max(l.centroid <-> a.mean) < 1e-3
	FROM cvlattice_lists('lreuse_lat') l
	FULL JOIN (SELECT label::text, count(*) AS n, avg(v) AS mean FROM lreuse GROUP BY label) a
	     ON l.label = a.label AND l.members = a.n
$$;
EXPLAIN (COSTS OFF) SELECT id FROM reuse ORDER BY v <-> '[1,1,1,1,1,1,1,1]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM lreuse ORDER BY v <-> '[1,1,1,1,1,1,1,1]' LIMIT 10;
SELECT * FROM reuse_exact('reuse');
SELECT * FROM reuse_exact('lreuse');

-- Delete every row, VACUUM, insert the same rows again: both indexes stay
-- within 10% of their size after the build.
DELETE FROM reuse;
DELETE FROM lreuse;
VACUUM reuse, lreuse;
SELECT sum(tuples) FROM cvivf_lists('reuse_ivf');
INSERT INTO reuse SELECT * FROM reuse_src;
INSERT INTO lreuse SELECT * FROM reuse_src WHERE id <= 20000;
INSERT INTO reuse_sizes
SELECT 'delete all, reinsert', pg_relation_size('reuse_ivf'), pg_relation_size('lreuse_lat');
SELECT s.stage, s.ivf <= 1.1 * f.ivf AS ivf_within_10pct, s.lat <= 1.1 * f.lat AS lat_within_10pct
FROM reuse_sizes s, reuse_sizes f WHERE f.stage = 'first build'
ORDER BY s.stage;
SELECT cvivf_verify('reuse_ivf'), cvlattice_verify('lreuse_lat');
SELECT sum(tuples) FROM cvivf_lists('reuse_ivf');
SELECT * FROM reuse_means();
SELECT * FROM reuse_exact('reuse');
SELECT * FROM reuse_exact('lreuse');

-- Delete 30% spread over every list, VACUUM, reinsert: the rows go back
-- into the slots of their lists, and neither index grows.
DELETE FROM reuse WHERE id % 10 < 3;
DELETE FROM lreuse WHERE id % 10 < 3;
VACUUM reuse, lreuse;
DELETE FROM reuse_sizes;
INSERT INTO reuse_sizes
SELECT 'after vacuum', pg_relation_size('reuse_ivf'), pg_relation_size('lreuse_lat');
INSERT INTO reuse SELECT * FROM reuse_src WHERE id % 10 < 3;
INSERT INTO lreuse SELECT * FROM reuse_src WHERE id % 10 < 3 AND id <= 20000;
SELECT pg_relation_size('reuse_ivf') = ivf AS ivf_same_size,
	pg_relation_size('lreuse_lat') = lat AS lat_same_size
FROM reuse_sizes;
SELECT cvivf_verify('reuse_ivf'), cvlattice_verify('lreuse_lat');
SELECT sum(tuples) FROM cvivf_lists('reuse_ivf');
SELECT * FROM reuse_means();
SELECT * FROM reuse_exact('reuse');
SELECT * FROM reuse_exact('lreuse');

-- More rows than were freed: the slots fill, then the lists grow at the end.
DELETE FROM reuse WHERE id % 10 = 5;
DELETE FROM lreuse WHERE id % 10 = 5;
VACUUM reuse, lreuse;
INSERT INTO reuse SELECT id + 100000, label, v FROM reuse_src WHERE id % 5 = 0;
INSERT INTO lreuse SELECT id + 100000, label, v FROM reuse_src WHERE id % 5 = 0 AND id <= 20000;
SELECT cvivf_verify('reuse_ivf'), cvlattice_verify('lreuse_lat');
SELECT sum(tuples) = (SELECT count(*) FROM reuse) AS counts_match FROM cvivf_lists('reuse_ivf');
SELECT * FROM reuse_means();
SELECT * FROM reuse_exact('reuse');
SELECT * FROM reuse_exact('lreuse');
DROP TABLE reuse, lreuse, reuse_src, reuse_sizes;

-- Wide vectors: a tuple lies on two or three pages, and a fill writes its
-- continuation pages before the record that makes it live.
CREATE TABLE wide (id int, label int, v cvec);
INSERT INTO wide SELECT i, i % 2, array_fill((i % 2 + i / 1000.0)::real, ARRAY[d])::cvec
FROM generate_series(1, 24) i, (VALUES (2000), (4000)) w(d)
WHERE d = 4000 OR i <= 12;
CREATE INDEX wide_ivf ON wide USING cvivf (v) WITH (lists = 2) WHERE vector_dims(v) = 4000;
CREATE INDEX wide_lat ON wide USING cvlattice (v, label) WHERE vector_dims(v) = 2000;
SELECT pg_relation_size('wide_ivf') AS ivf, pg_relation_size('wide_lat') AS lat \gset
DELETE FROM wide WHERE id % 3 = 0;
VACUUM wide;
INSERT INTO wide SELECT i, i % 2, array_fill((i % 2 + i / 1000.0)::real, ARRAY[d])::cvec
FROM generate_series(1, 24) i, (VALUES (2000), (4000)) w(d)
WHERE (d = 4000 OR i <= 12) AND i % 3 = 0;
-- each index grew by the one reuse page VACUUM made, no data page
SELECT pg_relation_size('wide_ivf') - :ivf AS ivf_growth,
	pg_relation_size('wide_lat') - :lat AS lat_growth;
SELECT cvivf_verify('wide_ivf'), cvlattice_verify('wide_lat');
SET enable_seqscan = off;
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM wide WHERE vector_dims(v) = 4000
	ORDER BY v <-> array_fill(0.0::real, ARRAY[4000])::cvec LIMIT 12) s;
SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM wide WHERE vector_dims(v) = 2000
	AND label = 1 ORDER BY v <-> array_fill(1.0::real, ARRAY[2000])::cvec LIMIT 6) s;
RESET enable_seqscan;
DROP TABLE wide;
