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
