-- cvlattice: the SQL surface.  Answers are checked against independent
-- references computed here without the index: avg() per label for the
-- centroids, and exact searches with index scans off.
SET max_parallel_workers_per_gather = 0;
CREATE TABLE lat (id int PRIMARY KEY, c int, v cvec(4));
SELECT setseed(0.5);
INSERT INTO lat SELECT i, i % 7,
	ARRAY[i % 7 + random(), (i % 7) * 2 - random(), random(), 1]::real[]::cvec
	FROM generate_series(1, 2100) i;
INSERT INTO lat VALUES (3001, NULL, '[9,9,9,9]'), (3002, NULL, '[8,8,8,8]'),
	(3003, 5, NULL), (3004, NULL, NULL);
CREATE INDEX lat_idx ON lat USING cvlattice (v, c);
ANALYZE lat;

-- Each label is a list whose centroid is its members' mean (avg() agrees
-- within float4 rounding); the NULL label is one list; NULL vectors are
-- not indexed.
CREATE FUNCTION lists_match_avg(idx regclass) RETURNS TABLE(lists bigint, members numeric,
	worst float8, inserted numeric) LANGUAGE sql AS $$
	SELECT count(*), sum(l.members), max(l.centroid <-> a.mean), sum(l.inserted_since_build)
	FROM cvlattice_lists(idx) l
	FULL JOIN (SELECT c::text AS label, count(*) AS n, avg(v) AS mean
	           FROM lat WHERE v IS NOT NULL GROUP BY c) a
	     ON l.label IS NOT DISTINCT FROM a.label AND l.members = a.n
$$;
SELECT lists, members, worst < 1e-5 AS means_agree, inserted FROM lists_match_avg('lat_idx');
SELECT list, label, members FROM cvlattice_lists('lat_idx') ORDER BY list;
SELECT cvlattice_verify('lat_idx');

-- A label condition is an index condition, chosen by the planner.
EXPLAIN (COSTS OFF) SELECT id FROM lat WHERE c = 3 ORDER BY v <-> '[3,6,0,1]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM lat WHERE c IS NULL ORDER BY v <-> '[3,6,0,1]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM lat WHERE c IS NOT NULL AND v IS NOT NULL
	ORDER BY v <-> '[3,6,0,1]' LIMIT 10;
-- PostgreSQL 15 takes "= ANY" as an index condition of an ordered scan on
-- the first column only: an index (label, vector) gets it.
CREATE INDEX lat_cv_idx ON lat USING cvlattice (c, v cvec_l2_ops);
EXPLAIN (COSTS OFF) SELECT id FROM lat WHERE c = ANY('{1,4}') ORDER BY v <-> '[3,6,0,1]' LIMIT 10;

-- Label-filtered answers equal exact search within the labels, at probes = 1.
CREATE FUNCTION answers(filter text, q cvec, use_index bool) RETURNS int[]
LANGUAGE plpgsql AS $$
DECLARE
	result int[];
BEGIN
	PERFORM set_config('clustervec.probes', '1', true);
	PERFORM set_config('clustervec.iterative_scan', 'off', true);
	PERFORM set_config('enable_seqscan', (NOT use_index)::text, true);
	PERFORM set_config('enable_indexscan', use_index::text, true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	-- the index holds no NULL vector, so the reference leaves them out; it
	-- breaks ties by id, which the index scan cannot (no ties in this data)
	EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM lat WHERE v IS NOT NULL AND (%s)
	                ORDER BY v <-> %L %s LIMIT 10) s', filter, q,
	               CASE WHEN use_index THEN '' ELSE ', id' END) INTO result;
	RETURN result;
END $$;
SELECT f, answers(f, '[3,6,0,1]', true) = answers(f, '[3,6,0,1]', false) AS exact,
       array_length(answers(f, '[3,6,0,1]', true), 1) AS n
FROM unnest(ARRAY['c = 3', 'c = 0', 'c = ANY(''{1,4}'')', 'c IS NULL', 'c = 99',
                  'c = 3 AND c = ANY(''{3,4}'')', 'c = 3 AND c = 4']) f;
-- the same plans as the answers above used
SET clustervec.probes = 1;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM lat WHERE v IS NOT NULL AND (c IS NULL)
	ORDER BY v <-> '[3,6,0,1]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM lat WHERE v IS NOT NULL AND (c = 3 AND c = 4)
	ORDER BY v <-> '[3,6,0,1]' LIMIT 10;
RESET enable_seqscan;
RESET clustervec.probes;
-- cvsearch through a cvlattice index answers as its unfiltered index scan
-- does, whichever key column holds the vector (on the CPU: not mirrored yet)
SET clustervec.probes = 2;
SET enable_seqscan = off;
SELECT i AS index, q, (SELECT array_agg(tid ORDER BY rank)
                FROM cvsearch(i, ARRAY[q], 5, 2)) =
       (SELECT array_agg(ctid) FROM (SELECT ctid FROM lat ORDER BY v <-> q LIMIT 5) s)
       AS same_as_the_scan
FROM unnest(ARRAY['lat_idx', 'lat_cv_idx']::regclass[]) i,
     unnest(ARRAY['[3,6,0,1]', '[0,0,0,0]', '[9,1,4,4]']::cvec[]) q
ORDER BY 1, 2;
RESET enable_seqscan;
RESET clustervec.probes;
DROP INDEX lat_cv_idx;

-- CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY build the same lists.
CREATE INDEX CONCURRENTLY lat_cc ON lat USING cvlattice (v, c);
REINDEX INDEX CONCURRENTLY lat_cc;
SELECT (SELECT string_agg(label || ':' || members || ':' || centroid::text, ' ' ORDER BY list)
        FROM cvlattice_lists('lat_cc')) =
       (SELECT string_agg(label || ':' || members || ':' || centroid::text, ' ' ORDER BY list)
        FROM cvlattice_lists('lat_idx')) AS same_lists;
SELECT cvlattice_verify('lat_cc');
DROP INDEX lat_cc;

-- Unfiltered: probes nearest centroids; with every list probed, exact.
SET clustervec.probes = 8;
SET enable_seqscan = off;
SELECT array_agg(id) = (SELECT answers('c IS NOT NULL OR c IS NULL', '[4,8,0,1]', false))
	AS exact_at_all_lists
FROM (SELECT id FROM lat ORDER BY v <-> '[4,8,0,1]' LIMIT 10) s;
-- probes = 1 reads the nearest label only; the iterative scan goes on
SET clustervec.probes = 1;
SET clustervec.iterative_scan = off;
SELECT count(DISTINCT c) FROM (SELECT c FROM lat ORDER BY v <-> '[4,8,0,1]' LIMIT 500) s;
SET clustervec.iterative_scan = relaxed_order;
SELECT count(*) FROM (SELECT c FROM lat ORDER BY v <-> '[4,8,0,1]' LIMIT 500) s;
RESET clustervec.probes;
RESET clustervec.iterative_scan;
RESET enable_seqscan;

-- Inserts go to their label's list and move its centroid; a new label is a
-- new list; VACUUM recomputes the means of the lists it changed.
INSERT INTO lat VALUES (4001, 3, '[30,30,30,30]'), (4002, 42, '[1,2,3,4]'),
	(4003, 42, '[3,2,1,0]'), (4004, NULL, '[7,7,7,7]'), (4005, 43, NULL);
SELECT lists, members, worst < 1e-5 AS means_agree, inserted FROM lists_match_avg('lat_idx');
SELECT label, members, centroid, inserted_since_build FROM cvlattice_lists('lat_idx')
	WHERE label IN ('42', '3') OR label IS NULL ORDER BY list;
SELECT cvlattice_verify('lat_idx');
DELETE FROM lat WHERE id % 3 = 0 OR id = 4002;
VACUUM lat;
SELECT lists, members, worst < 1e-5 AS means_agree, inserted FROM lists_match_avg('lat_idx');
SELECT cvlattice_verify('lat_idx');
-- a list whose members are all deleted has no centroid and no rows
DELETE FROM lat WHERE c = 42;
VACUUM lat;
SELECT label, members, centroid FROM cvlattice_lists('lat_idx') WHERE label = '42';
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM lat WHERE c = 42 ORDER BY v <-> '[1,2,3,4]' LIMIT 5) s;
RESET enable_seqscan;

-- Cosine centroids are means of directions; inner product of the vectors.
CREATE TABLE dirs (id int, c text, v cvec(2));
INSERT INTO dirs VALUES (1, 'a', '[2,0]'), (2, 'a', '[0,5]'), (3, 'b', '[-1,0]'), (4, 'b', '[0,0]');
CREATE INDEX dirs_cos ON dirs USING cvlattice (v cvec_cosine_ops, c);
CREATE INDEX dirs_ip ON dirs USING cvlattice (v cvec_ip_ops, c);
SELECT label, members, centroid FROM cvlattice_lists('dirs_cos') ORDER BY list;
SELECT label, members, centroid FROM cvlattice_lists('dirs_ip') ORDER BY list;
INSERT INTO dirs VALUES (5, 'b', '[0,-3]'), (6, 'c', '[0,0]');
SELECT label, members, centroid FROM cvlattice_lists('dirs_cos') ORDER BY list;
SELECT cvlattice_verify('dirs_cos'), cvlattice_verify('dirs_ip');

-- Label types: anything with a default btree operator class.
CREATE TABLE typed (id int, t text, u uuid, n numeric, d date, v cvec(2));
INSERT INTO typed SELECT i, 'label ' || (i % 3), md5((i % 3)::text)::uuid, (i % 3) / 2.0,
	date '2024-01-01' + i % 3, ARRAY[i, i % 3]::real[]::cvec FROM generate_series(1, 30) i;
CREATE INDEX typed_t ON typed USING cvlattice (v, t);
CREATE INDEX typed_u ON typed USING cvlattice (v, u);
CREATE INDEX typed_n ON typed USING cvlattice (v, n);
CREATE INDEX typed_d ON typed USING cvlattice (v, d);
CREATE INDEX typed_a ON typed USING cvlattice (v, (ARRAY[id % 2]));
SELECT 'typed_t' AS idx, count(*), sum(members) FROM cvlattice_lists('typed_t')
UNION ALL SELECT 'typed_u', count(*), sum(members) FROM cvlattice_lists('typed_u')
UNION ALL SELECT 'typed_n', count(*), sum(members) FROM cvlattice_lists('typed_n')
UNION ALL SELECT 'typed_d', count(*), sum(members) FROM cvlattice_lists('typed_d')
UNION ALL SELECT 'typed_a', count(*), sum(members) FROM cvlattice_lists('typed_a');
SELECT label, members FROM cvlattice_lists('typed_t') ORDER BY list;
SELECT label FROM cvlattice_lists('typed_a') ORDER BY list;
INSERT INTO typed VALUES (31, 'label 1', md5('1')::uuid, 0.5, date '2024-01-02', '[31,1]'),
	(32, 'new label', md5('x')::uuid, 7, date '2030-01-01', '[32,2]');
SELECT count(*), sum(members) FROM cvlattice_lists('typed_t');
SELECT cvlattice_verify('typed_t'), cvlattice_verify('typed_u'), cvlattice_verify('typed_n'),
	cvlattice_verify('typed_d');
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM typed WHERE t = 'label 1' ORDER BY v <-> '[1,1]' LIMIT 3;
SELECT id FROM typed WHERE t = 'label 1' ORDER BY v <-> '[1,1]' LIMIT 3;
SELECT id FROM typed WHERE u = md5('x')::uuid ORDER BY v <-> '[1,1]' LIMIT 3;
RESET enable_seqscan;

-- Integer labels of any width take integer keys of any width.
CREATE TABLE widths (id int, s int2, b int8, v cvec(2));
INSERT INTO widths SELECT i, i % 4, i % 4 + 5000000000, ARRAY[i, 0]::real[]::cvec
	FROM generate_series(1, 40) i;
CREATE INDEX widths_s ON widths USING cvlattice (s, v);
CREATE INDEX widths_b ON widths USING cvlattice (b, v);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM widths WHERE s = 3 ORDER BY v <-> '[0,0]' LIMIT 3;
SELECT id FROM widths WHERE s = 3 ORDER BY v <-> '[0,0]' LIMIT 3;
SELECT id FROM widths WHERE s = 3::int8 ORDER BY v <-> '[0,0]' LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM widths WHERE s = 65539 ORDER BY v <-> '[0,0]' LIMIT 3;
SELECT id FROM widths WHERE s = 65539 ORDER BY v <-> '[0,0]' LIMIT 3;
SELECT id FROM widths WHERE s = ANY('{1,65537}'::int4[]) ORDER BY v <-> '[0,0]' LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM widths WHERE b = 5000000002 ORDER BY v <-> '[0,0]' LIMIT 3;
SELECT id FROM widths WHERE b = 5000000002 ORDER BY v <-> '[0,0]' LIMIT 3;
SELECT id FROM widths WHERE b = 2 ORDER BY v <-> '[0,0]' LIMIT 3;
RESET enable_seqscan;
DROP TABLE widths;

-- Graceful: an empty table, one member per label, a label whose vectors
-- are all NULL (no list), an untyped column learning its dimensions.
CREATE TABLE empty (c int, v cvec);
CREATE INDEX empty_idx ON empty USING cvlattice (v, c);
SELECT count(*) FROM cvlattice_lists('empty_idx');
SELECT cvlattice_verify('empty_idx');
SET enable_seqscan = off;
SELECT * FROM empty ORDER BY v <-> '[1,2]' LIMIT 1;
INSERT INTO empty VALUES (1, '[1,2]'), (1, '[3,4]'), (2, '[5,6]'), (3, NULL);
SELECT list, label, members, centroid FROM cvlattice_lists('empty_idx') ORDER BY list;
SELECT c FROM empty WHERE c = 1 ORDER BY v <-> '[3,4]' LIMIT 1;
SELECT cvlattice_verify('empty_idx');
RESET enable_seqscan;
CREATE TABLE singles (c int, v cvec(2));
INSERT INTO singles SELECT i, ARRAY[i, -i]::real[]::cvec FROM generate_series(1, 50) i;
INSERT INTO singles VALUES (99, NULL), (99, NULL);
CREATE INDEX singles_idx ON singles USING cvlattice (v, c);
SELECT count(*), min(members), max(members), bool_and(label <> '99') AS no_null_vector_list,
	bool_and(centroid = ARRAY[label::int, -label::int]::real[]::cvec) AS centroid_is_member
FROM cvlattice_lists('singles_idx');
SELECT cvlattice_verify('singles_idx');

-- An unlogged index starts from its logged init fork.
CREATE UNLOGGED TABLE ul (c int, v cvec(2));
CREATE INDEX ul_idx ON ul USING cvlattice (v, c);
INSERT INTO ul VALUES (1, '[1,1]');
SELECT count(*) FROM cvlattice_lists('ul_idx');

-- Every operator class of cvlattice passes its access method's validation.
SELECT opcname FROM pg_opclass c JOIN pg_am a ON a.oid = c.opcmethod
	WHERE a.amname = 'cvlattice' AND NOT amvalidate(c.oid);
SELECT count(*) AS label_operators FROM pg_amop o JOIN pg_opfamily f ON f.oid = o.amopfamily
	WHERE f.opfname = 'cvlattice_label_ops';

DROP TABLE lat, dirs, typed, empty, singles, ul;
DROP FUNCTION lists_match_avg(regclass), answers(text, cvec, bool);
