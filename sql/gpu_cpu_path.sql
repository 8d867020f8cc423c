-- Without shared_preload_libraries there is no GPU worker: everything runs
-- on the CPU and clustervec_gpu_info says why.
SELECT worker_state, backend, reason FROM clustervec_gpu_info();
SELECT clustervec_gpu_ping(0);

-- cvsearch_exact equals an exact ORDER BY, ties by TID, visible rows only
CREATE TABLE knn (id int, v cvec(3));
INSERT INTO knn SELECT i, ARRAY[i % 10, i % 7, i % 3] FROM generate_series(1, 2000) i;
INSERT INTO knn VALUES (0, NULL);
DELETE FROM knn WHERE id % 100 = 1;
CREATE TEMP TABLE q AS SELECT ARRAY['[1,1,1]'::cvec, '[4.5,2,0.5]', '[100,0,0]'] AS queries;
-- require: an error naming why there is no worker, never a silent CPU answer
SET clustervec.gpu = require;
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY['[1,1,1]'::cvec], 1);
RESET clustervec.gpu;
SELECT count(*) AS agreeing_rows FROM cvsearch_exact('knn', 'v', (SELECT queries FROM q), 25) e
JOIN LATERAL (
	SELECT row_number() OVER (ORDER BY k.v <-> (SELECT queries[e.query_no] FROM q), k.ctid) AS rank,
	       k.ctid, k.v <-> (SELECT queries[e.query_no] FROM q) AS distance
	FROM knn k WHERE k.v IS NOT NULL
	ORDER BY k.v <-> (SELECT queries[e.query_no] FROM q), k.ctid LIMIT 25
) x ON x.rank = e.rank
WHERE x.ctid = e.tid AND x.distance = e.distance;
SELECT query_no, count(*) FROM cvsearch_exact('knn', 'v', (SELECT queries FROM q), 25) GROUP BY 1 ORDER BY 1;
-- fewer rows than k: all of them
SELECT count(*) FROM cvsearch_exact('knn', 'v', ARRAY['[0,0,0]'::cvec], 10000);
BEGIN;
DELETE FROM knn WHERE id > 10;
SELECT count(*) FROM cvsearch_exact('knn', 'v', ARRAY['[0,0,0]'::cvec], 100);
ROLLBACK;
-- errors
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY['[1,1]'::cvec], 3);
SELECT * FROM cvsearch_exact('knn', 'id', ARRAY['[1,1,1]'::cvec], 3);
SELECT * FROM cvsearch_exact('knn', 'nope', ARRAY['[1,1,1]'::cvec], 3);
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY['[1,1,1]'::cvec], 0);
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY['[1,1,1]'::cvec], 10001);
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY['[1,1,1]'::cvec, NULL], 3);
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY[]::cvec[], 3);
CREATE VIEW knn_view AS SELECT * FROM knn;
SELECT * FROM cvsearch_exact('knn_view', 'v', ARRAY['[1,1,1]'::cvec], 3);
CREATE ROLE knn_reader;
SET ROLE knn_reader;
SELECT * FROM cvsearch_exact('knn', 'v', ARRAY['[1,1,1]'::cvec], 3);
RESET ROLE;
DROP ROLE knn_reader;
DROP VIEW knn_view;
DROP TABLE knn;
-- EXPLAIN ANALYZE says which index scans the GPU served, or why not
CREATE TABLE ex (id int, c int, v cvec(3));
INSERT INTO ex SELECT i, i % 4, ARRAY[i % 4, i % 7, i % 11]::cvec FROM generate_series(1, 200) i;
CREATE INDEX ex_ivf ON ex USING cvivf (v) WITH (lists = 4);
CREATE INDEX ex_lat ON ex USING cvlattice (v, c);
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM ex ORDER BY v <-> '[1,1,1]' LIMIT 3) s;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
	SELECT id FROM ex ORDER BY v <-> '[1,1,1]' LIMIT 3;
SET clustervec.gpu = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
	SELECT id FROM ex ORDER BY v <-> '[1,1,1]' LIMIT 3;
RESET clustervec.gpu;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
	SELECT id FROM ex WHERE c = 2 ORDER BY v <-> '[1,1,1]' LIMIT 3;
-- no line without ANALYZE, nor in other formats
EXPLAIN (COSTS OFF) SELECT id FROM ex ORDER BY v <-> '[1,1,1]' LIMIT 3;
DO $$
DECLARE
	line text;
	found bool := false;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM ex ORDER BY v <-> ''[1,1,1]'' LIMIT 3' LOOP
		found := found OR line LIKE '%clustervec%';
	END LOOP;
	RAISE NOTICE 'the JSON plan mentions clustervec: %', found;
END $$;
RESET enable_seqscan;
DROP TABLE ex;
