-- Scans on the items table of cvivf_build.
SET max_parallel_workers_per_gather = 0;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <-> '[1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <#> '[1,2,3,4,5,6,7,8]' LIMIT 10;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <=> '[1,2,3,4,5,6,7,8]' LIMIT 10;
-- an operator the index was not built for, or no ORDER BY: not the index
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <+> '[1,2,3,4,5,6,7,8]' LIMIT 10;
RESET enable_seqscan;
-- a tiny table is cheaper to scan
CREATE TABLE tiny (v cvec(2));
INSERT INTO tiny VALUES ('[1,1]'), ('[2,2]'), ('[3,3]');
CREATE INDEX tiny_idx ON tiny USING cvivf (v);
ANALYZE tiny;
EXPLAIN (COSTS OFF) SELECT * FROM tiny ORDER BY v <-> '[1,1]' LIMIT 1;
DROP TABLE tiny;
ANALYZE items;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY v <-> '[1,2,3,4,5,6,7,8]' LIMIT 10;

-- Distances come back non-decreasing, equal to the operator's, and the
-- nearest rows equal an exact search (probes cover the query's cluster).
CREATE TEMP TABLE q AS SELECT v AS q FROM items WHERE id IN (17, 401, 1234);
CREATE FUNCTION index_answers(op text, probes int) RETURNS TABLE(qid int, rank bigint, id int, d float8)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('clustervec.probes', probes::text, true);
	PERFORM set_config('enable_seqscan', 'off', true);
	RETURN QUERY EXECUTE format(
		'SELECT x.qid, row_number() OVER (PARTITION BY x.qid ORDER BY x.d, x.id), x.id, x.d
		 FROM (SELECT row_number() OVER ()::int AS qid, q FROM q) qq,
		 LATERAL (SELECT qq.qid, i.id, i.v %1$s qq.q AS d FROM items i ORDER BY i.v %1$s qq.q LIMIT 10) x', op);
END $$;
CREATE FUNCTION exact_answers(op text) RETURNS TABLE(qid int, rank bigint, id int, d float8)
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('enable_indexscan', 'off', true);
	RETURN QUERY EXECUTE format(
		'SELECT x.qid, row_number() OVER (PARTITION BY x.qid ORDER BY x.d, x.id), x.id, x.d
		 FROM (SELECT row_number() OVER ()::int AS qid, q FROM q) qq,
		 LATERAL (SELECT qq.qid, i.id, i.v %1$s qq.q AS d FROM items i WHERE i.v IS NOT NULL ORDER BY i.v %1$s qq.q, i.id LIMIT 10) x', op);
END $$;
-- recall@10 against the exact search, all metrics, with probes = 3 and all lists
SELECT op, probes, count(*) FILTER (WHERE e.d >= i.d - 1e-12) AS within_exact_10th,
       count(*) AS returned
FROM unnest(ARRAY['<->', '<#>', '<=>']) op, unnest(ARRAY[3, 40]) probes,
     LATERAL index_answers(op, probes) i
     JOIN LATERAL exact_answers(op) e ON e.qid = i.qid AND e.rank = 10
GROUP BY op, probes ORDER BY op, probes;
-- the distances the index reports are the operator's, and ascend
SELECT bool_and(ok) FROM (
  SELECT (d = (SELECT v <-> (SELECT q FROM (SELECT row_number() OVER ()::int AS n, q FROM q) z WHERE n = qid)
               FROM items WHERE items.id = a.id))
         AND d >= coalesce(lag(d) OVER (PARTITION BY qid ORDER BY rank), d) AS ok
  FROM index_answers('<->', 2) a) s;

-- iterative scans: a filter that removes most rows still gets its k rows
SET clustervec.probes = 1;
SET enable_seqscan = off;
SET clustervec.iterative_scan = off;
SELECT count(*) < 10 AS fewer_than_10 FROM (SELECT id FROM items WHERE id % 97 = 0 ORDER BY v <-> (SELECT q FROM q LIMIT 1) LIMIT 10) s;
SET clustervec.iterative_scan = relaxed_order;
SELECT count(*) FROM (SELECT id FROM items WHERE id % 97 = 0 ORDER BY v <-> (SELECT q FROM q LIMIT 1) LIMIT 10) s;
SET clustervec.iterative_scan = on;
SHOW clustervec.iterative_scan;
SET clustervec.max_probes = 2;
SELECT count(*) < 10 AS fewer_than_10 FROM (SELECT id FROM items WHERE id % 97 = 0 ORDER BY v <-> (SELECT q FROM q LIMIT 1) LIMIT 10) s;
-- every row is reachable through the index when every list is probed
SET clustervec.max_probes = -1;
SELECT count(*) FROM (SELECT id FROM items ORDER BY v <-> (SELECT q FROM q LIMIT 1)) s;
SELECT count(*) FROM items WHERE v IS NOT NULL;
-- NULL query: rows come back, in no particular order
SELECT count(*) FROM (SELECT id FROM items ORDER BY v <-> NULL LIMIT 5) s;
-- wrong dimensions in the query
SELECT id FROM items ORDER BY v <-> '[1,2,3]' LIMIT 1;
RESET ALL;
-- settings and their limits
SET clustervec.probes = 0;
SET clustervec.probes = 32769;
SET clustervec.max_probes = -2;
SET clustervec.iterative_scan = 'strict_order';
SHOW clustervec.probes;
SHOW clustervec.max_probes;
DROP FUNCTION index_answers(text, int), exact_answers(text);
