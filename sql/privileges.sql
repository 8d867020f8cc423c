-- Privileges.  Every SQL function of clustervec is classified here, from the
-- catalog: "pure" (works on its arguments only), "server" (reports or pings
-- the server, no relation), "reads" (reads a table or an index named by an
-- argument), "query" (runs the caller's query with the caller's rights) or
-- "lists" (lists objects, only those the caller may read).  A function added
-- to the extension without a class here shows up below and fails the test.
-- Each "reads" function, run by a role without SELECT on the table, fails
-- with permission denied, and fails so without waiting for a lock: another
-- session holds ACCESS EXCLUSIVE locks on the table and the index meanwhile.

CREATE TABLE priv_secret (id int, c int, v cvec(3));
INSERT INTO priv_secret SELECT i, i % 3, ARRAY[i % 3, i % 5, i % 7] FROM generate_series(1, 60) i;
CREATE INDEX priv_secret_idx ON priv_secret USING cvivf (v) WITH (lists = 3);
CREATE INDEX priv_secret_lattice ON priv_secret USING cvlattice (v, c);
CREATE ROLE regress_cv_nobody;

CREATE TABLE priv_functions (signature text PRIMARY KEY, kind text NOT NULL, call text);
-- calls: %1$s is the table, %2$s its cvivf index
INSERT INTO priv_functions VALUES
	('cvec_in(cstring,oid,integer)', 'pure', NULL),
	('cvec_out(cvec)', 'pure', NULL),
	('cvec_typmod_in(cstring[])', 'pure', NULL),
	('cvec_recv(internal,oid,integer)', 'pure', NULL),
	('cvec_send(cvec)', 'pure', NULL),
	('l2_distance(cvec,cvec)', 'pure', NULL),
	('l2_squared_distance(cvec,cvec)', 'pure', NULL),
	('inner_product(cvec,cvec)', 'pure', NULL),
	('negative_inner_product(cvec,cvec)', 'pure', NULL),
	('cosine_distance(cvec,cvec)', 'pure', NULL),
	('l1_distance(cvec,cvec)', 'pure', NULL),
	('vector_dims(cvec)', 'pure', NULL),
	('vector_norm(cvec)', 'pure', NULL),
	('l2_normalize(cvec)', 'pure', NULL),
	('subvector(cvec,integer,integer)', 'pure', NULL),
	('cvec_add(cvec,cvec)', 'pure', NULL),
	('cvec_sub(cvec,cvec)', 'pure', NULL),
	('cvec_mul(cvec,cvec)', 'pure', NULL),
	('cvec_concat(cvec,cvec)', 'pure', NULL),
	('cvec_lt(cvec,cvec)', 'pure', NULL),
	('cvec_le(cvec,cvec)', 'pure', NULL),
	('cvec_eq(cvec,cvec)', 'pure', NULL),
	('cvec_ne(cvec,cvec)', 'pure', NULL),
	('cvec_ge(cvec,cvec)', 'pure', NULL),
	('cvec_gt(cvec,cvec)', 'pure', NULL),
	('cvec_cmp(cvec,cvec)', 'pure', NULL),
	('cvec(cvec,integer,boolean)', 'pure', NULL),
	('array_to_cvec(integer[],integer,boolean)', 'pure', NULL),
	('array_to_cvec(real[],integer,boolean)', 'pure', NULL),
	('array_to_cvec(double precision[],integer,boolean)', 'pure', NULL),
	('array_to_cvec(numeric[],integer,boolean)', 'pure', NULL),
	('cvec_to_float4(cvec,integer,boolean)', 'pure', NULL),
	('cvec_accum(double precision[],cvec)', 'pure', NULL),
	('cvec_combine(double precision[],double precision[])', 'pure', NULL),
	('cvec_avg(double precision[])', 'pure', NULL),
	('cvec_sum(double precision[])', 'pure', NULL),
	('avg(cvec)', 'pure', NULL),
	('sum(cvec)', 'pure', NULL),
	('cluster_stats_accum(double precision[],cvec)', 'pure', NULL),
	('cluster_stats_combine(double precision[],double precision[])', 'pure', NULL),
	('cluster_stats_final(double precision[])', 'pure', NULL),
	('cluster_stats(cvec)', 'pure', NULL),
	('cvivfhandler(internal)', 'pure', NULL),
	('cvlatticehandler(internal)', 'pure', NULL),
	('cvlattice_label_cmp(anyelement,anyelement)', 'pure', NULL),
	('clustervec_simd()', 'server', NULL),
	('clustervec_gpu_info()', 'server', NULL),
	('clustervec_gpu_ping(integer)', 'server', NULL),
	('cvivf_lists(regclass)', 'reads',
	 $$SELECT count(*) FROM cvivf_lists(%2$L)$$),
	('cvivf_list_of(regclass,cvec)', 'reads',
	 $$SELECT cvivf_list_of(%2$L, '[1,2,3]')$$),
	('cvivf_verify(regclass)', 'reads',
	 $$SELECT cvivf_verify(%2$L)$$),
	('cvivf_recall(regclass,integer,integer,integer,integer)', 'reads',
	 $$SELECT queries FROM cvivf_recall(%2$L, 5, 3)$$),
	('cvivf_health(regclass,boolean)', 'reads',
	 $$SELECT rows FROM cvivf_health(%2$L, true)$$),
	('cvivf_calibrate(regclass,integer)', 'reads',
	 $$SELECT count(*) FROM cvivf_calibrate(%2$L, 5)$$),
	('cvivf_retrain(regclass)', 'reads',
	 $$SELECT rows FROM cvivf_retrain(%2$L)$$),
	('cvivf_calibration(regclass)', 'reads',
	 $$SELECT count(*) FROM cvivf_calibration(%2$L)$$),
	('cvlattice_lists(regclass)', 'reads',
	 $$SELECT count(*) FROM cvlattice_lists((%1$L || '_lattice')::regclass)$$),
	('cvlattice_verify(regclass)', 'reads',
	 $$SELECT cvlattice_verify((%1$L || '_lattice')::regclass)$$),
	('cluster_health_observed(regclass)', 'reads',
	 $$SELECT count(*) FROM cluster_health_observed((%1$L || '_lattice')::regclass)$$),
	('cluster_health_observed_reset(regclass)', 'reads',
	 $$SELECT cluster_health_observed_reset((%1$L || '_lattice')::regclass)$$),
	('cluster_health(regclass,name,name,name,double precision,double precision,integer,integer,integer,integer,boolean)', 'reads',
	 $$SELECT count(*) FROM cluster_health(%1$L, 'c', 'v')$$),
	('cluster_health_summary(regclass,name,name,name,double precision,double precision,integer,integer,integer,integer,boolean)', 'reads',
	 $$SELECT k FROM cluster_health_summary(%1$L, 'c', 'v')$$),
	('cluster_health_shard_centroids(regclass,name,name,name)', 'reads',
	 $$SELECT length(cluster_health_shard_centroids(%1$L, 'c', 'v', NULL)) > 0$$),
	('cluster_health_shard(regclass,name,name,name,text[],bigint[],double precision[],double precision[],double precision[],double precision,double precision,integer,integer,integer,integer,boolean,boolean)', 'reads',
	 $$SELECT length(cluster_health_shard(%1$L, 'c', 'v', NULL, '{}', '{}', '{}', '{}', '{}', 2, 0.95, 5, 256, 20, 2000, false, false))$$),
	('kmeans(regclass,name,integer,integer,bigint,text)', 'reads',
	 $$SELECT count(*) FROM kmeans(%1$L, 'v', 2)$$),
	('kmeans_centroids(regclass,name,integer,integer,bigint,text)', 'reads',
	 $$SELECT sum(members) FROM kmeans_centroids(%1$L, 'v', 2)$$),
	('cvsearch_exact(regclass,name,cvec[],integer)', 'reads',
	 $$SELECT count(*) FROM cvsearch_exact(%1$L, 'v', ARRAY['[1,2,3]'::cvec], 3)$$),
	('cvsearch(regclass,cvec[],integer,integer)', 'reads',
	 $$SELECT count(*) FROM cvsearch(%2$L, ARRAY['[1,2,3]'::cvec], 3)$$),
	('clustervec_gpu_warm(regclass)', 'reads',
	 $$SELECT clustervec_gpu_warm(%2$L)$$),
	('cluster_health_query(text,double precision,double precision,integer,integer,integer,integer,boolean)', 'query',
	 $$SELECT count(*) FROM cluster_health_query('SELECT c, v FROM %1$I')$$),
	('clustervec_gpu_mirrors()', 'lists',
	 $$SELECT count(*) FROM clustervec_gpu_mirrors() WHERE index = %2$L::regclass$$);

GRANT SELECT ON priv_functions TO PUBLIC;

CREATE VIEW priv_extension_functions AS
	SELECT p.oid::regprocedure::text AS signature
	FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
	WHERE e.extname = 'clustervec';

-- every function of the extension has a class, and every class a function
SELECT f.signature AS unclassified FROM priv_extension_functions f
	LEFT JOIN priv_functions c USING (signature) WHERE c.signature IS NULL;
SELECT c.signature AS not_in_extension FROM priv_functions c
	LEFT JOIN priv_extension_functions f USING (signature) WHERE f.signature IS NULL;
SELECT kind, count(*) FROM priv_functions GROUP BY kind ORDER BY kind;

-- The SQLSTATE and message of a call's error, or 'ok' and its first value.
CREATE FUNCTION priv_try(call text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	result text;
BEGIN
	EXECUTE call INTO result;
	RETURN 'ok: ' || coalesce(result, 'null');
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
CREATE FUNCTION priv_calls(tab text, idx text)
	RETURNS TABLE (function text, kind text, outcome text) LANGUAGE sql AS $$
	SELECT split_part(signature, '(', 1), kind, priv_try(format(call, tab, idx))
	FROM priv_functions WHERE call IS NOT NULL
$$;

-- the owner: every call works (so the calls below fail for privileges
-- only), but the observed-health functions need the GPU worker, which
-- pg_regress does not preload: they pass the privilege checks first
SET client_min_messages = warning;	-- clustervec_gpu_warm: no GPU worker
SELECT * FROM priv_calls('priv_secret', 'priv_secret_idx') ORDER BY 1;
RESET client_min_messages;

-- Another session holds ACCESS EXCLUSIVE on the table and on the index
-- (REINDEX in an open transaction) while a role without privileges calls
-- each function: an error 42501 at once, never a lock timeout (55P03).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
SELECT dblink_connect('priv_holder',
	format('dbname=%s port=%s host=%s user=%s', current_database(), current_setting('port'),
		   split_part(current_setting('unix_socket_directories'), ',', 1), current_user));
SELECT dblink_exec('priv_holder', 'BEGIN');
SELECT dblink_exec('priv_holder', 'LOCK TABLE priv_secret IN ACCESS EXCLUSIVE MODE');
SELECT dblink_exec('priv_holder', 'REINDEX INDEX priv_secret_idx');
SELECT relation::regclass, mode FROM pg_locks
	WHERE relation IN ('priv_secret'::regclass, 'priv_secret_idx'::regclass) AND granted
	ORDER BY relation::regclass::text, mode;
SET lock_timeout = '200ms';
SET ROLE regress_cv_nobody;
SELECT * FROM priv_calls('priv_secret', 'priv_secret_idx') WHERE kind <> 'query' ORDER BY 1;
RESET ROLE;
RESET lock_timeout;
-- cluster_health_query runs the caller's query as any query runs: the
-- parser takes its lock before the executor checks privileges
SELECT dblink_exec('priv_holder', 'ROLLBACK');
SELECT dblink_disconnect('priv_holder');
SET ROLE regress_cv_nobody;
SELECT * FROM priv_calls('priv_secret', 'priv_secret_idx') WHERE kind = 'query';
RESET ROLE;

-- SELECT suffices to read; cvivf_verify keeps writers out (SHARE), so it
-- needs what LOCK TABLE ... IN SHARE MODE needs: UPDATE, DELETE or TRUNCATE
CREATE ROLE regress_cv_reader;
GRANT SELECT ON priv_secret TO regress_cv_reader;
SET ROLE regress_cv_reader;
SET client_min_messages = warning;
SELECT * FROM priv_calls('priv_secret', 'priv_secret_idx') ORDER BY 1;
RESET client_min_messages;
SELECT cvivf_verify('priv_secret_idx');
RESET ROLE;
GRANT UPDATE ON priv_secret TO regress_cv_reader;
SET ROLE regress_cv_reader;
SELECT cvivf_verify('priv_secret_idx');
RESET ROLE;

-- Row-level security: functions that would count or return rows the
-- policies hide refuse a role the policies apply to; cluster_health reads
-- through a query, so the policies filter its rows
CREATE TABLE priv_rls (id int, c int, v cvec(3));
INSERT INTO priv_rls SELECT i, i % 3, ARRAY[i % 3, i % 5, i % 7] FROM generate_series(1, 60) i;
CREATE INDEX priv_rls_idx ON priv_rls USING cvivf (v) WITH (lists = 3);
CREATE INDEX priv_rls_lattice ON priv_rls USING cvlattice (v, c);
ALTER TABLE priv_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY priv_rls_c0 ON priv_rls FOR SELECT USING (c = 0);
GRANT SELECT, UPDATE ON priv_rls TO regress_cv_reader;
SET ROLE regress_cv_reader;
SET client_min_messages = warning;
SELECT * FROM priv_calls('priv_rls', 'priv_rls_idx') ORDER BY 1;
RESET client_min_messages;
SELECT sum(n) AS rows_seen FROM cluster_health('priv_rls', 'c', 'v');
SELECT * FROM cvivf_lists('priv_rls_idx');
RESET ROLE;
-- the owner is not subject to the policies, unless they are forced
CREATE ROLE regress_cv_owner;
ALTER TABLE priv_rls OWNER TO regress_cv_owner;
SET ROLE regress_cv_owner;
SELECT sum(tuples) FROM cvivf_lists('priv_rls_idx');
ALTER TABLE priv_rls FORCE ROW LEVEL SECURITY;
SELECT sum(tuples) FROM cvivf_lists('priv_rls_idx');
RESET ROLE;

-- not a cvivf index, no such relation
SELECT * FROM cvivf_lists('priv_secret');
SELECT * FROM cvivf_lists(0);

DROP TABLE priv_rls, priv_secret, priv_functions CASCADE;
DROP FUNCTION priv_calls(text, text), priv_try(text);
DROP ROLE regress_cv_nobody, regress_cv_reader, regress_cv_owner;
