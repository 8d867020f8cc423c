-- Deterministic clustered data: 40 centres in 8 dimensions, 2,000 rows.
SET max_parallel_workers_per_gather = 0;
SELECT setseed(0.25);
CREATE TABLE centres AS
SELECT c, array_agg((random() * 20 - 10)::real ORDER BY j) AS x
FROM generate_series(0, 39) c, generate_series(1, 8) j GROUP BY c;
CREATE TABLE items (id int PRIMARY KEY, v cvec(8));
INSERT INTO items
SELECT i, (SELECT array_agg(x[j] + (random() - 0.5)::real ORDER BY j) FROM generate_series(1, 8) j)::cvec
FROM generate_series(1, 2000) i JOIN centres ON c = i % 40;
INSERT INTO items VALUES (2001, NULL);

CREATE INDEX items_l2 ON items USING cvivf (v) WITH (lists = 40, seed = 7);
SELECT count(*) AS lists, sum(tuples) AS tuples, min(tuples) > 0 AS none_empty
FROM cvivf_lists('items_l2');
SELECT cvivf_verify('items_l2');
-- the same data and seed give the same centroids, bit for bit
CREATE INDEX items_l2_again ON items USING cvivf (v) WITH (lists = 40, seed = 7);
SELECT count(*) AS same_lists FROM cvivf_lists('items_l2') a
JOIN cvivf_lists('items_l2_again') b USING (list)
WHERE a.tuples = b.tuples AND a.centroid_norm = b.centroid_norm;
-- every row is in the list of its nearest centroid
SELECT count(*) FILTER (WHERE cvivf_list_of('items_l2', v) IS NULL) AS unassigned,
       count(DISTINCT cvivf_list_of('items_l2', v)) AS lists_used
FROM items WHERE v IS NOT NULL;
DROP INDEX items_l2_again;

-- the other opclasses
CREATE INDEX items_ip ON items USING cvivf (v cvec_ip_ops) WITH (lists = 10);
CREATE INDEX items_cos ON items USING cvivf (v cvec_cosine_ops) WITH (lists = 10);
SELECT sum(tuples) FROM cvivf_lists('items_ip');
-- cosine centroids are unit vectors
SELECT sum(tuples), bool_and(abs(centroid_norm - 1) < 1e-6) AS unit FROM cvivf_lists('items_cos');
SELECT cvivf_verify('items_ip'), cvivf_verify('items_cos');

-- lists by default: about rows / 1000
CREATE INDEX items_auto ON items USING cvivf (v);
SELECT count(*) FROM cvivf_lists('items_auto');
DROP INDEX items_auto;

-- fewer distinct rows than lists: as many lists as distinct rows
CREATE TABLE few (v cvec(2));
INSERT INTO few SELECT ('[' || i % 3 || ',1]')::cvec FROM generate_series(1, 100) i;
CREATE INDEX few_idx ON few USING cvivf (v) WITH (lists = 10);
SELECT * FROM cvivf_lists('few_idx') ORDER BY list;
SELECT cvivf_verify('few_idx');

-- an empty table: one list without centroid, exact scans, inserts go there
CREATE TABLE empty (id int, v cvec(4));
CREATE INDEX empty_idx ON empty USING cvivf (v) WITH (lists = 5);
SELECT * FROM cvivf_lists('empty_idx');
INSERT INTO empty SELECT i, ARRAY[i, 0, 0, 0] FROM generate_series(1, 50) i;
SELECT * FROM cvivf_lists('empty_idx');
SET enable_seqscan = off;
SELECT id FROM empty ORDER BY v <-> '[10.2,0,0,0]' LIMIT 3;
RESET enable_seqscan;
REINDEX INDEX empty_idx;
SELECT count(*), sum(tuples) FROM cvivf_lists('empty_idx');
SELECT cvivf_verify('empty_idx');

-- an untyped column learns its dimensions from the data
CREATE TABLE untyped (v cvec);
CREATE INDEX untyped_idx ON untyped USING cvivf (v);
INSERT INTO untyped VALUES ('[1,2,3]');
INSERT INTO untyped VALUES ('[1,2]');
INSERT INTO untyped VALUES ('[4,5,6]');
SELECT * FROM cvivf_lists('untyped_idx');

-- wide vectors: a tuple continues on the next pages of its list
CREATE TABLE wide (id int, v cvec(5000));
INSERT INTO wide SELECT i, array_fill((i % 4)::real + i / 1000.0, ARRAY[5000]) FROM generate_series(1, 12) i;
CREATE INDEX wide_idx ON wide USING cvivf (v) WITH (lists = 4);
INSERT INTO wide SELECT i, array_fill((i % 4)::real + i / 1000.0, ARRAY[5000]) FROM generate_series(13, 20) i;
SELECT count(*), sum(tuples) FROM cvivf_lists('wide_idx');
SELECT cvivf_verify('wide_idx');
-- dense storage: within 1.2x of the raw float bytes (plus metapage, centroids,
-- directory and drift page)
SELECT pg_relation_size('wide_idx') <= 1.2 * 20 * 5000 * 4 + 9 * 8192 AS dense;
SET enable_seqscan = off;
SELECT id FROM wide ORDER BY v <-> array_fill(2.014::real, ARRAY[5000])::cvec LIMIT 3;
RESET enable_seqscan;

-- a build reports every row of the table to PostgreSQL, which stores it as
-- the table's reltuples: not only the rows a partial index, NULLs or zero
-- vectors (cosine) leave in the index
CREATE TABLE counted (id int, v cvec(2));
INSERT INTO counted SELECT i, CASE WHEN i % 10 = 0 THEN NULL WHEN i % 10 = 1 THEN '[0,0]'::cvec ELSE ARRAY[i, 1]::cvec END
	FROM generate_series(1, 500) i;
CREATE INDEX counted_part ON counted USING cvivf (v) WITH (lists = 2) WHERE id < 100;
SELECT reltuples FROM pg_class WHERE relname = 'counted';
CREATE INDEX counted_cos ON counted USING cvivf (v cvec_cosine_ops) WITH (lists = 2);
SELECT reltuples FROM pg_class WHERE relname = 'counted';
UPDATE counted SET v = NULL;
REINDEX INDEX counted_cos;
SELECT reltuples FROM pg_class WHERE relname = 'counted';

-- the sample notice counts the rows the scan read, not the planner's
-- estimate: 20,000 rows, of which only the rows with a vector are sampled
CREATE TABLE sampled (id int, v cvec(64)) WITH (autovacuum_enabled = false);
INSERT INTO sampled SELECT i, CASE WHEN i % 10 < 3 THEN array_fill((i % 97)::real, ARRAY[64])::cvec END
	FROM generate_series(1, 20000) i;
ANALYZE sampled;
SET maintenance_work_mem = '1MB';
-- 6,000 vectors, more than the 1 MB reservoir holds: the notice says 6,000
CREATE INDEX sampled_idx ON sampled USING cvivf (v);
-- 2,000 vectors in a partial index: all of them fit, so no notice
CREATE INDEX sampled_part ON sampled USING cvivf (v) WHERE id % 10 = 0;
SELECT sum(tuples) FROM cvivf_lists('sampled_part');
RESET maintenance_work_mem;
DROP TABLE sampled;
DROP TABLE few, empty, untyped, wide, counted;
