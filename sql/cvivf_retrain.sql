-- cvivf_retrain: new centroids and lists in place.  Checked against SQL
-- over the table: every row in the index once, each list holding exactly
-- the rows whose nearest centroid (SQL's argmin over cvivf_lists) it is,
-- answers equal to exact search when every list is probed, a new drift
-- baseline, and k-means as good as a REINDEX's over the same rows.

-- 4 groups of 1,000 rows in 16 dimensions; after the build, 4,000 more
-- rows 50 away (the data moved)
CREATE TABLE rt (id int PRIMARY KEY, v cvec(16));
INSERT INTO rt SELECT i, (SELECT array_agg(((i % 4) * 3 + sin(i * 7 + j * 13))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(1, 4000) i;
CREATE INDEX rt_idx ON rt USING cvivf (v) WITH (lists = 8, seed = 1);
INSERT INTO rt SELECT i, (SELECT array_agg((50 + (i % 4) * 3 + sin(i * 7 + j * 13))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(4001, 8000) i;

-- each list's rows against the rows whose nearest centroid SQL finds it is
CREATE FUNCTION rt_lists_are_nearest(idx regclass, tab regclass) RETURNS boolean
	LANGUAGE plpgsql AS $$
DECLARE
	ok boolean;
BEGIN
	EXECUTE format($q$
		WITH c AS (SELECT list, centroid FROM cvivf_lists(%1$L)),
		     nearest AS (SELECT (SELECT c.list FROM c ORDER BY t.v <-> c.centroid, c.list LIMIT 1) AS list
		                 FROM %2$s t),
		     counts AS (SELECT list, count(*) AS n FROM nearest GROUP BY list)
		SELECT bool_and(l.tuples = coalesce(n.n, 0))
		FROM cvivf_lists(%1$L) l LEFT JOIN counts n USING (list)$q$, idx, tab) INTO ok;
	RETURN ok;
END $$;

-- the index's answers with every list probed against a sequential scan's
CREATE FUNCTION rt_exact(idx regclass, tab regclass, op text, queries int) RETURNS boolean
	LANGUAGE plpgsql AS $$
DECLARE
	ok boolean := true;
	q cvec;
	a int[];
	b int[];
BEGIN
	PERFORM set_config('clustervec.probes', (SELECT count(*) FROM cvivf_lists(idx))::text, true);
	FOR i IN 1..queries LOOP
		EXECUTE format('SELECT v FROM %s WHERE id = $1', tab) INTO q USING i * 97;
		PERFORM set_config('enable_indexscan', 'on', true);
		PERFORM set_config('enable_seqscan', 'off', true);
		EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM %s ORDER BY v %s $1, id LIMIT 10) s', tab, op)
			INTO a USING q;
		PERFORM set_config('enable_indexscan', 'off', true);
		PERFORM set_config('enable_seqscan', 'on', true);
		EXECUTE format('SELECT array_agg(id) FROM (SELECT id FROM %s ORDER BY v %s $1, id LIMIT 10) s', tab, op)
			INTO b USING q;
		ok := ok AND a IS NOT DISTINCT FROM b;
	END LOOP;
	PERFORM set_config('enable_indexscan', 'on', true);
	PERFORM set_config('enable_seqscan', 'on', true);
	RETURN ok;
END $$;

-- drifted: members far from their centroids, half the rows new
SELECT recommendation, inserted_since_build, distance_ratio > 2 AS far, retrains
FROM cvivf_health('rt_idx', true);

SELECT old_lists, lists, rows, rows_caught_up, new_pages > 0 AS wrote,
	old_pages > 0 AS had_pages, pages_freed = old_pages AS freed_all
FROM cvivf_retrain('rt_idx');

-- a new baseline: nothing since, members as close as when it was made
SELECT recommendation, build_rows, inserted_since_build, deleted_since_build,
	abs(distance_ratio - 1) < 1e-9 AS baseline_now, dead_space_fraction, retrains
FROM cvivf_health('rt_idx', true);
SELECT cvivf_verify('rt_idx');
SELECT sum(tuples) = (SELECT count(*) FROM rt) AS every_row, count(*) AS lists,
	min(tuples) > 0 AS none_empty
FROM cvivf_lists('rt_idx');
SELECT rt_lists_are_nearest('rt_idx', 'rt') AS lists_are_nearest;
SELECT rt_exact('rt_idx', 'rt', '<->', 20) AS exact_at_all_probes;
-- at the default probes, the moved rows are found in their own lists
SELECT count(*) FILTER (WHERE id > 4000) AS moved_found
FROM (SELECT id FROM rt ORDER BY v <-> (SELECT v FROM rt WHERE id = 4001) LIMIT 10) s;

-- k-means over the index's rows is as good as a REINDEX's over the table's
CREATE TABLE rt_copy AS SELECT * FROM rt;
ALTER TABLE rt_copy ADD PRIMARY KEY (id);
CREATE INDEX rt_copy_idx ON rt_copy USING cvivf (v) WITH (lists = 8, seed = 1);
SELECT r.mean_distance_now <= 1.05 * c.mean_distance_now AS as_good_as_reindex
FROM cvivf_health('rt_idx', true) r, cvivf_health('rt_copy_idx', true) c;

-- VACUUM, inserts and a second retrain on the retrained index
DELETE FROM rt WHERE id % 10 = 0;
VACUUM rt;
INSERT INTO rt SELECT i, (SELECT array_agg((25 + (i % 4) * 3 + sin(i * 7 + j * 13))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(8001, 9000) i;
SELECT rows = (SELECT count(*) FROM rt) AS every_row, pages_freed = old_pages AS freed_all
FROM cvivf_retrain('rt_idx');
SELECT cvivf_verify('rt_idx');
SELECT rt_lists_are_nearest('rt_idx', 'rt') AS lists_are_nearest;
SELECT rt_exact('rt_idx', 'rt', '<->', 20) AS exact_at_all_probes;
SELECT retrains, inserted_since_build, deleted_since_build FROM cvivf_health('rt_idx');

-- cosine and inner product, and quantized lists: the same checks
CREATE INDEX rt_cos ON rt USING cvivf (v cvec_cosine_ops) WITH (lists = 6, seed = 2);
CREATE INDEX rt_ip ON rt USING cvivf (v cvec_ip_ops) WITH (lists = 6, seed = 3);
CREATE INDEX rt_sq8 ON rt USING cvivf (v) WITH (lists = 6, seed = 4, quantization = sq8);
INSERT INTO rt SELECT i, (SELECT array_agg((-20 + (i % 5) * 2 + cos(i * 3 + j * 5))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(9001, 10000) i;
SELECT lists, rows = (SELECT count(*) FROM rt) AS every_row FROM cvivf_retrain('rt_cos');
SELECT lists, rows = (SELECT count(*) FROM rt) AS every_row FROM cvivf_retrain('rt_ip');
SELECT lists, rows = (SELECT count(*) FROM rt) AS every_row FROM cvivf_retrain('rt_sq8');
SELECT cvivf_verify('rt_cos'), cvivf_verify('rt_ip'), cvivf_verify('rt_sq8');
DROP INDEX rt_idx;
DROP INDEX rt_ip;
DROP INDEX rt_sq8;
SELECT rt_exact('rt_cos', 'rt', '<=>', 10) AS cosine_exact;
DROP INDEX rt_cos;
CREATE INDEX rt_ip ON rt USING cvivf (v cvec_ip_ops) WITH (lists = 6, seed = 3);
SELECT rows FROM cvivf_retrain('rt_ip');
SELECT rt_exact('rt_ip', 'rt', '<#>', 10) AS inner_product_exact;
DROP INDEX rt_ip;
CREATE INDEX rt_sq8 ON rt USING cvivf (v) WITH (lists = 6, seed = 4, quantization = sq8);
INSERT INTO rt SELECT i, (SELECT array_agg((70 + sin(i + j))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(10001, 10500) i;
SELECT rows FROM cvivf_retrain('rt_sq8');
SELECT cvivf_verify('rt_sq8');
SELECT rt_lists_are_nearest('rt_sq8', 'rt') AS lists_are_nearest;
SELECT rt_exact('rt_sq8', 'rt', '<->', 20) AS sq8_exact;
-- retrains of unchanged data take the pages the one before freed, codes'
-- contiguous runs included: after two, the index stops growing
SELECT pages_freed = old_pages AS freed_all FROM cvivf_retrain('rt_sq8');
SELECT pg_relation_size('rt_sq8') AS size_two \gset
SELECT pages_freed = old_pages AS freed_all FROM cvivf_retrain('rt_sq8');
SELECT pages_freed = old_pages AS freed_all FROM cvivf_retrain('rt_sq8');
SELECT pg_relation_size('rt_sq8') <= 1.02 * :size_two AS stopped_growing;
SELECT cvivf_verify('rt_sq8');

-- an index built on an empty table (one list, no centroid) gets its lists
CREATE TABLE rt_late (id int PRIMARY KEY, v cvec(16));
CREATE INDEX rt_late_idx ON rt_late USING cvivf (v) WITH (lists = 5);
INSERT INTO rt_late SELECT id, v FROM rt WHERE id <= 3000;
SELECT recommendation FROM cvivf_health('rt_late_idx');
SELECT old_lists, lists, rows FROM cvivf_retrain('rt_late_idx');
SELECT recommendation, retrains FROM cvivf_health('rt_late_idx');
SELECT rt_lists_are_nearest('rt_late_idx', 'rt_late') AS lists_are_nearest;
SELECT rt_exact('rt_late_idx', 'rt_late', '<->', 10) AS exact_at_all_probes;

-- the reloptions as they are now: ALTER INDEX ... SET takes effect at the retrain
ALTER INDEX rt_late_idx SET (lists = 3, quantization = sq8);
SELECT old_lists, lists FROM cvivf_retrain('rt_late_idx');
SELECT cvivf_verify('rt_late_idx');
SELECT rt_lists_are_nearest('rt_late_idx', 'rt_late') AS lists_are_nearest;
SELECT rt_exact('rt_late_idx', 'rt_late', '<->', 10) AS exact_at_all_probes;

-- errors
CREATE TABLE rt_part (id int, v cvec(4)) PARTITION BY RANGE (id);
CREATE TABLE rt_part1 PARTITION OF rt_part FOR VALUES FROM (0) TO (100);
CREATE INDEX rt_part_idx ON rt_part USING cvivf (v);
SELECT * FROM cvivf_retrain('rt_part_idx');
CREATE TABLE rt_empty (id int, v cvec(4));
CREATE INDEX rt_empty_idx ON rt_empty USING cvivf (v);
SELECT * FROM cvivf_retrain('rt_empty_idx');
CREATE TABLE rt_lab (id int, c int, v cvec(4));
INSERT INTO rt_lab SELECT i, i % 3, ARRAY[i % 3, i % 5, i % 7, 1] FROM generate_series(1, 60) i;
CREATE INDEX rt_lab_idx ON rt_lab USING cvlattice (v, c);
SELECT * FROM cvivf_retrain('rt_lab_idx');
SELECT * FROM cvivf_retrain('rt_lab');
BEGIN;
DECLARE cur CURSOR FOR SELECT id FROM rt ORDER BY v <-> (SELECT v FROM rt WHERE id = 1) LIMIT 5;
FETCH 1 FROM cur;
SELECT * FROM cvivf_retrain('rt_sq8');
ROLLBACK;
UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'rt_sq8'::regclass;
SELECT * FROM cvivf_retrain('rt_sq8');
UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'rt_sq8'::regclass;
CREATE ROLE regress_cv_retrainer;
GRANT SELECT, INSERT, UPDATE, DELETE ON rt TO regress_cv_retrainer;
SET ROLE regress_cv_retrainer;
SELECT * FROM cvivf_retrain('rt_sq8');
RESET ROLE;
DROP OWNED BY regress_cv_retrainer;
DROP ROLE regress_cv_retrainer;
