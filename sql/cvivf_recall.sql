-- cvivf_recall: recall@k against exact search on sampled rows.  Every value
-- asserted is computed here independently in SQL: the same sampled rows
-- (the lowest hashint8extended(block * 65536 + offset, seed) of their
-- ctid), exact answers with index scans off, the index's answers with
-- clustervec.probes set and sequential scans off.

SELECT setseed(0.25);
CREATE TABLE rc (id int, c int, v cvec(8));
INSERT INTO rc SELECT i, i % 8,
	(SELECT array_agg((i % 8) * 0.7 + random() * 2 - 1 + 0.01 + 0 * j) FROM generate_series(1, 8) j)::real[]::cvec
FROM generate_series(1, 400) i;
CREATE INDEX rc_l2 ON rc USING cvivf (v cvec_l2_ops) WITH (lists = 8);

-- The reference: mean over the sampled rows of (index rows at most the
-- k-th exact distance) / min(k, rows).
CREATE FUNCTION recall_reference(tab text, op text, n int, k int, probes int, seed int)
RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	result float8;
BEGIN
	EXECUTE format($q$CREATE TEMP TABLE ref_sample AS
		SELECT row_number() OVER () AS q, v FROM (SELECT v FROM %I WHERE v IS NOT NULL
		ORDER BY hashint8extended((ctid::text::point)[0]::bigint * 65536
		                          + (ctid::text::point)[1]::bigint, %s), ctid LIMIT %s) s$q$,
		tab, seed, n);
	PERFORM set_config('enable_indexscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	EXECUTE format($q$CREATE TEMP TABLE ref_exact AS
		SELECT s.q, (SELECT max(d) FROM (SELECT t.v %1$s s.v AS d FROM %2$I t
		             WHERE t.v IS NOT NULL ORDER BY t.v %1$s s.v LIMIT %3$s) x) AS bound,
		       (SELECT count(*) FROM (SELECT FROM %2$I t WHERE t.v IS NOT NULL LIMIT %3$s) y) AS wanted
		FROM ref_sample s$q$, op, tab, k);
	PERFORM set_config('enable_indexscan', 'on', true);
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('clustervec.probes', probes::text, true);
	EXECUTE format($q$SELECT avg(i.hits::float8 / e.wanted) FROM ref_sample s JOIN ref_exact e USING (q)
		CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE d <= e.bound) AS hits
		                    FROM (SELECT t.v %1$s s.v AS d FROM %2$I t ORDER BY t.v %1$s s.v LIMIT %3$s) a) i$q$,
		op, tab, k) INTO result;
	DROP TABLE ref_sample, ref_exact;
	RETURN result;
END
$$;

-- the reference's index answers come from an index scan (one index on rc at a time)
SET enable_seqscan = off;
SET clustervec.probes = 1;
EXPLAIN (COSTS OFF) SELECT id FROM rc ORDER BY v <-> '[0,0,0,0,0,0,0,0]' LIMIT 10;
RESET enable_seqscan;
RESET clustervec.probes;

-- all lists probed: exactly 1
SELECT queries, k, probes, recall, std_error, recall_low, recall_high, min_recall, mean_returned, rows
FROM cvivf_recall('rc_l2', 40, 10, 8);

-- one list: the reference's figure, for each metric and for cvlattice
SELECT r.queries, r.probes, abs(r.recall - recall_reference('rc', '<->', 40, 10, 1, 7)) < 1e-12 AS same,
       r.recall < 1 AS lossy, r.recall_low <= r.recall AND r.recall <= r.recall_high AS inside
FROM cvivf_recall('rc_l2', 40, 10, 1, 7) r;
-- another seed, k and probes
SELECT abs(recall - recall_reference('rc', '<->', 25, 5, 2, 3)) < 1e-12 AS same
FROM cvivf_recall('rc_l2', 25, 5, 2, 3);

-- probes NULL: clustervec.probes
SET clustervec.probes = 2;
SELECT probes, abs(recall - recall_reference('rc', '<->', 30, 10, 2, 0)) < 1e-12 AS same
FROM cvivf_recall('rc_l2', 30, 10);
RESET clustervec.probes;

-- more queries than rows: every row once, so the estimate is exact
SELECT queries, rows, std_error, abs(recall - recall_reference('rc', '<->', 400, 10, 1, 0)) < 1e-12 AS same
FROM cvivf_recall('rc_l2', 1000, 10, 1);

-- inner product, cosine, cvlattice (unfiltered)
DROP INDEX rc_l2;
CREATE INDEX rc_ip ON rc USING cvivf (v cvec_ip_ops) WITH (lists = 8);
SELECT abs(recall - recall_reference('rc', '<#>', 40, 10, 1, 7)) < 1e-12 AS same, recall < 1 AS lossy
FROM cvivf_recall('rc_ip', 40, 10, 1, 7);
SELECT recall FROM cvivf_recall('rc_ip', 40, 10, 8, 7);
DROP INDEX rc_ip;
CREATE INDEX rc_cos ON rc USING cvivf (v cvec_cosine_ops) WITH (lists = 8);
SELECT abs(recall - recall_reference('rc', '<=>', 40, 10, 1, 7)) < 1e-12 AS same, recall < 1 AS lossy
FROM cvivf_recall('rc_cos', 40, 10, 1, 7);
SELECT recall FROM cvivf_recall('rc_cos', 40, 10, 8, 7);
DROP INDEX rc_cos;
CREATE INDEX rc_lattice ON rc USING cvlattice (v cvec_l2_ops, c);
SELECT abs(recall - recall_reference('rc', '<->', 40, 10, 1, 7)) < 1e-12 AS same, recall < 1 AS lossy
FROM cvivf_recall('rc_lattice', 40, 10, 1, 7);
SELECT probes, recall FROM cvivf_recall('rc_lattice', 40, 10, 8, 7);
DROP INDEX rc_lattice;
CREATE INDEX rc_l2 ON rc USING cvivf (v cvec_l2_ops) WITH (lists = 8);

-- an empty table: a NOTICE, recall NULL
CREATE TABLE rc_empty (v cvec(8));
CREATE INDEX rc_empty_idx ON rc_empty USING cvivf (v) WITH (lists = 2);
SELECT queries, k, probes, recall, std_error, rows FROM cvivf_recall('rc_empty_idx');
SELECT recall IS NULL AS null_index FROM cvivf_recall(NULL);

-- bad arguments
SELECT * FROM cvivf_recall('rc_l2', 0);
SELECT * FROM cvivf_recall('rc_l2', 100001);
SELECT * FROM cvivf_recall('rc_l2', 10, 0);
SELECT * FROM cvivf_recall('rc_l2', 10, 1001);
SELECT * FROM cvivf_recall('rc_l2', 10, 10, 0);
CREATE INDEX rc_btree ON rc (id);
SELECT * FROM cvivf_recall('rc_btree');
CREATE INDEX rc_partial ON rc USING cvivf (v) WITH (lists = 2) WHERE id > 10;
SELECT * FROM cvivf_recall('rc_partial');

-- a role without SELECT on the table is refused
CREATE ROLE regress_cv_recall;
SET ROLE regress_cv_recall;
SELECT * FROM cvivf_recall('rc_l2');
RESET ROLE;
DROP ROLE regress_cv_recall;

DROP TABLE rc, rc_empty;
DROP FUNCTION recall_reference;
