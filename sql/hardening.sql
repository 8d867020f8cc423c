-- Issue 11: SQL that once crashed the server or stored values no dump
-- restores.  Every statement here must end in a clear error or a right answer.
\set VERBOSITY default

-- cluster_stats states made by hand: the dimension count is checked before
-- anything indexes by it (a {NaN} state wrote past the array).
SELECT cluster_stats_final('{NaN}'::float8[]);
SELECT cluster_stats_final('{Infinity}'::float8[]);
SELECT cluster_stats_final('{-1}'::float8[]);
SELECT cluster_stats_final('{2.5,1,0,0,0,0,1,1,1,1}'::float8[]);
SELECT cluster_stats_final('{16001}'::float8[]);
SELECT cluster_stats_final('{}'::float8[]);
SELECT cluster_stats_final('{{1}}'::float8[]);
SELECT cluster_stats_final('{1,1,0,0,0,0,1,NULL}'::float8[]);
SELECT cluster_stats_final('{3,1,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_combine('{NaN}'::float8[], '{1,1,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_combine('{1,1,0,0,0,0,1,1}'::float8[], '{NaN}'::float8[]);
SELECT cluster_stats_accum('{NaN}'::float8[], '[1]');
-- non-finite or inconsistent moments
SELECT cluster_stats_final('{1,1,0,0,0,0,NaN,1}'::float8[]);
SELECT cluster_stats_final('{1,1,0,0,0,0,1,Infinity}'::float8[]);
SELECT cluster_stats_final('{1,0,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,1.5,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,1,0,2,0,0,1,1}'::float8[]);
SELECT (cluster_stats_final('{1,1e19,0,0,0,0,1,1}'::float8[])).n;
SELECT cvec_avg('{1e19,1}');
SELECT cluster_stats_final('{1,1,0,1,-1,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,1,0,0,0,0,1e300,1}'::float8[]);
SELECT cluster_stats_final('{2,1,0,0,0,0,1e200,1e200,1,1}'::float8[]);
-- a well-formed state still works, and the empty state means no rows
SELECT (cluster_stats_final('{2,2,1,2,5,0,3,4,1.2,1.6}'::float8[])).n;
SELECT cluster_stats_final('{0}'::float8[]) IS NULL AS empty_is_null;

-- the hand-made aggregate of the report, over a {NaN} initial state
CREATE AGGREGATE hostile_stats(cvec) (
	SFUNC = cluster_stats_accum, STYPE = float8[], INITCOND = '{NaN}',
	COMBINEFUNC = cluster_stats_combine, FINALFUNC = cluster_stats_final);
SELECT hostile_stats(v) FROM (VALUES ('[1,2]'::cvec), ('[3,4]')) t(v);
DROP AGGREGATE hostile_stats(cvec);

-- cvec sum/avg states: counts are whole numbers >= 0, sums finite
SELECT cvec_sum('{1,NaN,0}');
SELECT cvec_sum('{1,Infinity,0}');
SELECT cvec_avg('{1e-320,1,1}');
SELECT cvec_avg('{-1,5}');
SELECT cvec_avg('{0.5,5}');
SELECT cvec_avg('{NaN,5}');
SELECT cvec_avg('{0,5}');
SELECT cvec_avg('{}'::float8[]);
SELECT cvec_avg('{1,1e300}');
SELECT cvec_combine('{0}', '{NaN,1}');
SELECT cvec_combine('{1,1}', '{1,1,2}');
SELECT cvec_accum('{Infinity,1}', '[1]');
-- well-formed states still work
SELECT cvec_avg('{2,4,6}'), cvec_sum('{2,4,6}'), cvec_avg('{0}') IS NULL AS empty_is_null;
SELECT cvec_avg(cvec_combine('{1,2,2}', '{3,6,6}'));

-- histogram sizes are bounded (a bin index once overflowed int32)
CREATE TABLE hardening_points (label int, v cvec);
INSERT INTO hardening_points
	SELECT i % 3, ('[' || i || ',' || (i * i) % 7 || ']')::cvec FROM generate_series(1, 30) i;
SELECT count(*) FROM cluster_health('hardening_points', 'label', 'v', sigma_bins => 715827883);
SELECT count(*) FROM cluster_health('hardening_points', 'label', 'v', sigma_bins => 65537);
SELECT count(*) FROM cluster_health('hardening_points', 'label', 'v', entropy_bins => 2147483647);
SELECT count(*) FROM cluster_health('hardening_points', 'label', 'v', sigma_bins => 1);
-- the largest bins still give the same answer shape
SELECT count(*), count(sigma), count(dist_entropy)
	FROM cluster_health('hardening_points', 'label', 'v', sigma_bins => 65536, entropy_bins => 65536);

-- subvector's bounds in 64 bits
SELECT subvector('[1,2,3]', -2147483648, 0);
SELECT subvector('[1,2,3]', -2147483648, 2147483647);
SELECT subvector('[1,2,3]', 2147483647, 2147483647);
SELECT subvector('[1,2,3]', 2, 2147483647);
SELECT subvector('[1,2,3]', -2147483647, 2147483647);

-- a relation that does not exist, and input queries that are not reads
SELECT * FROM cluster_health(0, 'label', 'v');
SELECT count(*) FROM cluster_health_query('DELETE FROM hardening_points RETURNING label, v');
SELECT count(*) FROM cluster_health_query(
	'WITH gone AS (DELETE FROM hardening_points RETURNING *) SELECT label, v FROM gone');
SELECT count(*) FROM cluster_health_query('SELECT label, v FROM hardening_points FOR UPDATE');
SELECT count(*) FROM cluster_health_query('SELECT 1, ''[1]''::cvec; SELECT 2, ''[2]''::cvec');
SELECT count(*) FROM cluster_health_query('VALUES (1, ''[1,2]''::cvec), (1, ''[2,3]'')');
SELECT count(*) FROM hardening_points;

-- an index on an untyped column names itself when a row does not fit
CREATE TABLE hardening_untyped (v cvec);
CREATE INDEX hardening_untyped_idx ON hardening_untyped USING cvivf (v cvec_l2_ops) WITH (lists = 1);
INSERT INTO hardening_untyped VALUES ('[1,2]');
INSERT INTO hardening_untyped VALUES ('[1,2,3]');
SET enable_seqscan = off;
SELECT v FROM hardening_untyped ORDER BY v <-> '[1,2,3]' LIMIT 1;
RESET enable_seqscan;

-- cancel: the centroid-neighbour table over 100,000 one-row clusters stops
-- for statement_timeout (it once ran 130 s before a cancel was honoured)
CREATE TABLE hardening_many (label int, v cvec);
INSERT INTO hardening_many
	SELECT i, ('[' || (i % 1000) || ',' || (i / 1000) || ',' || (i % 7) || ',' || (i % 13)
		|| ',' || (i % 17) || ',' || (i % 19) || ',' || (i % 23) || ',' || (i % 29) || ']')::cvec
	FROM generate_series(1, 100000) i;
SET clustervec.gpu = off;
SET statement_timeout = '1s';
DO $$
DECLARE
	started timestamptz := clock_timestamp();
BEGIN
	PERFORM * FROM cluster_health_summary('hardening_many', 'label', 'v');
	RAISE NOTICE 'finished without being cancelled';
EXCEPTION WHEN query_canceled THEN
	RAISE NOTICE 'cancelled within 30 s: %', clock_timestamp() - started < interval '30 s';
END
$$;
RESET statement_timeout;
RESET clustervec.gpu;

DROP TABLE hardening_points, hardening_untyped, hardening_many;
