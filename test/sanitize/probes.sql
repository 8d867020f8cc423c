-- probes.sql: hostile arguments for every SQL entry point that takes values
-- straight from a user.  scripts/sanitize.sh runs it (psql without
-- ON_ERROR_STOP) against the sanitized server: most statements raise an
-- error, which is fine; the answers are not compared.  What fails the run is
-- a sanitizer report or a backend that dies.  Keep each probe cheap.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS clustervec;

-- text input
SELECT ''::cvec;
SELECT '['::cvec;
SELECT '[]'::cvec;
SELECT '[1'::cvec;
SELECT '[1,]'::cvec;
SELECT '[,1]'::cvec;
SELECT '[1]]'::cvec;
SELECT '[1e39]'::cvec;
SELECT '[-1e39]'::cvec;
SELECT '[1e-50]'::cvec;
SELECT '[nan]'::cvec;
SELECT '[-inf]'::cvec;
SELECT '[0x1p3]'::cvec;
SELECT '[1 2]'::cvec;
SELECT ('[' || repeat('1,', 16000) || '1]')::cvec;
SELECT vector_dims(('[' || repeat('1,', 15999) || '1]')::cvec);
SELECT ('[' || repeat(' ', 100000) || '1]')::cvec;
SELECT ('[' || repeat('9', 100000) || ']')::cvec;
SELECT '[1,2,3]'::cvec(2);
SELECT '[1]'::cvec(0);
SELECT '[1]'::cvec(16001);
SELECT '[1]'::cvec(-2147483648);
SELECT '[1]'::cvec(1, 2);
CREATE TABLE probe_typmod (v cvec(2147483647));

-- binary round trip through the send and receive functions
SELECT cvec_send('[1,-0,3.5e38]');
CREATE TABLE probe_bin (v cvec);
INSERT INTO probe_bin VALUES ('[1,2,3]'), ('[-0]');
COPY probe_bin TO '/dev/null' WITH (FORMAT binary);

-- casts
SELECT ARRAY['NaN']::float8[]::cvec;
SELECT ARRAY[1e40]::float8[]::cvec;
SELECT ARRAY[1e40]::numeric[]::cvec;
SELECT ARRAY[]::int[]::cvec;
SELECT '{{1,2},{3,4}}'::int[]::cvec;
SELECT ARRAY[1, NULL]::real[]::cvec;
SELECT '[2:3]={1,2}'::real[]::cvec;
SELECT array_fill(1::real, ARRAY[16001])::cvec;
SELECT '[1,2]'::cvec::real[]::cvec(3);

-- arithmetic, distances, functions
SELECT '[3e38]'::cvec + '[3e38]';
SELECT '[3e38]'::cvec * '[10]';
SELECT '[-3e38]'::cvec - '[3e38]';
SELECT '[1,2]'::cvec <-> '[1,2,3]';
SELECT '[3e38,3e38]'::cvec <-> '[-3e38,-3e38]';
SELECT '[0,0]'::cvec <=> '[0,0]';
SELECT l2_normalize('[1e-45]');
SELECT l2_normalize('[3e38,3e38]');
SELECT vector_norm('[3e38,3e38,3e38]');
SELECT subvector('[1,2,3]', 2147483647, 2147483647);
SELECT subvector('[1,2,3]', -2147483648, 2147483647);
SELECT subvector('[1,2,3]', -2147483647, 2147483647);
SELECT subvector('[1,2,3]', 2, -2147483648);
SELECT subvector('[1,2,3]', 0, 0);
SELECT cvec_cmp('[1,2]', '[1,2,3]');

-- avg / sum states: {n, s_1, ..., s_d}
SELECT cvec_avg('{NaN}');
SELECT cvec_avg('{NaN,1}');
SELECT cvec_avg('{}');
SELECT cvec_avg('{{1,2}}');
SELECT cvec_avg('{1,NULL}');
SELECT cvec_avg('{1e-320,1e308}');
SELECT cvec_sum('{1,1e308}');
SELECT cvec_sum('{-1,1}');
SELECT cvec_sum(array_fill(1::float8, ARRAY[16002]));
SELECT cvec_accum('{0}', '[1,2]');
SELECT cvec_accum('{NaN}', '[1,2]');
SELECT cvec_accum('{5,1}', '[1,2]');
SELECT cvec_accum('{5,1,2}', '[1,2]');
SELECT cvec_accum('{}', '[1]');
SELECT cvec_combine('{1,2}', '{1,2,3}');
SELECT cvec_combine('{0}', '{1,2,3}');
SELECT cvec_combine('{1,2,3}', '{0}');
SELECT cvec_combine('{NaN,1}', '{NaN,2}');
SELECT cvec_combine('{1}', '{}');

-- cluster_stats states: {d, n, M2, m, norm_mean, norm_M2, mean_1..d, unit_1..d}
SELECT cluster_stats_final('{NaN}'::float8[]);
SELECT cluster_stats_final('{Infinity}'::float8[]);
SELECT cluster_stats_final('{-Infinity}'::float8[]);
SELECT cluster_stats_final('{1e300}'::float8[]);
SELECT cluster_stats_final('{-1}'::float8[]);
SELECT cluster_stats_final('{16001}'::float8[]);
SELECT cluster_stats_final('{0.5}'::float8[]);
SELECT cluster_stats_final('{1.5,1,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,NaN,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,0,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,1,0,0,0,0,1e300,1}'::float8[]);
SELECT cluster_stats_final('{2,1,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{1,1e19,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_final('{}'::float8[]);
SELECT cluster_stats_final('{{1}}'::float8[]);
SELECT cluster_stats_final('{1,NULL,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_accum('{NaN}'::float8[], '[1]');
SELECT cluster_stats_accum('{2}'::float8[], '[1]');
SELECT cluster_stats_accum('{1,1,0,0,0,0,1,1}'::float8[], '[1,2]');
SELECT cluster_stats_accum(NULL, '[1,2]');
SELECT cluster_stats_accum('{0}'::float8[], NULL);
SELECT cluster_stats_combine('{NaN}'::float8[], '{NaN}'::float8[]);
SELECT cluster_stats_combine('{1,1,0,0,0,0,1,1}'::float8[], '{2,1,0,0,0,0,1,1,1,1}'::float8[]);
SELECT cluster_stats_combine('{1,0,0,0,0,0,1,1}'::float8[], '{1,0,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_combine('{0}'::float8[], '{1,1,0,0,0,0,1,1}'::float8[]);
SELECT cluster_stats_combine(NULL, '{NaN}'::float8[]);

-- cluster_health: parameters at and past their limits, on a tiny table
CREATE TABLE probe_pts (id int, label int, v cvec(2));
INSERT INTO probe_pts VALUES (1, 1, '[0,0]'), (2, 1, '[1,0]'), (3, 1, '[0,1]'),
	(4, 2, '[5,5]'), (5, 2, '[6,5]'), (6, 3, '[3e38,-3e38]'), (7, 3, '[-3e38,3e38]');
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', sigma_bins => 715827883);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', sigma_bins => 2147483647);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', entropy_bins => 715827883);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', entropy_bins => 2147483647);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', neighbours => 2147483647);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', rank_max_members => 2147483647);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', outlier_z => 'Infinity');
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', outlier_z => 'NaN');
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', outlier_z => 1e308);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', dup_cos => 'NaN');
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', dup_cos => 1e-320);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', outlier_z => NULL);
SELECT count(*) FROM cluster_health('probe_pts', 'label', 'v', progress => NULL);
SELECT count(*) FROM cluster_health_summary('probe_pts', 'label', 'v', sigma_bins => 2147483647);
SELECT count(*) FROM cluster_health_query('SELECT label, v FROM probe_pts', sigma_bins => 715827883);
SELECT count(*) FROM cluster_health_query('SELECT v, label FROM probe_pts');
SELECT count(*) FROM cluster_health_query('SELECT label, v, v FROM probe_pts');
SELECT count(*) FROM cluster_health_query('SELECT label::text, v, id FROM probe_pts');
SELECT count(*) FROM cluster_health_query('');
SELECT count(*) FROM cluster_health_query('SELECT 1; SELECT 2');
SELECT count(*) FROM cluster_health_query(NULL);

-- the index, exact search, the GPU entry points without a worker
CREATE INDEX probe_idx ON probe_pts USING cvivf (v) WITH (lists = 32768);
CREATE INDEX probe_idx2 ON probe_pts USING cvivf (v) WITH (lists = 3, iterations = 2147483647, sample_rows = 2147483647);
SELECT cvivf_list_of('probe_idx2', '[1,2,3]');
SELECT cvivf_list_of('probe_idx2', '[1,1]');
SELECT count(*) FROM cvivf_lists('probe_idx2');
SELECT cvivf_verify('probe_idx2');
SET clustervec.probes = 32768;
SELECT id FROM probe_pts ORDER BY v <-> '[3e38,3e38]' LIMIT 3;
RESET clustervec.probes;
SELECT count(*) FROM cvsearch('probe_idx2', ARRAY['[1,1]'::cvec], 1024, 2147483647);
SELECT count(*) FROM cvsearch('probe_idx2', ARRAY['[1,1]'::cvec], 2147483647);
SELECT count(*) FROM cvsearch('probe_idx2', ARRAY['[1,1,1]'::cvec], 1);
SELECT count(*) FROM cvsearch_exact('probe_pts', 'v', ARRAY['[1,1]'::cvec], 2147483647);
SELECT count(*) FROM cvsearch_exact('probe_pts', 'v', ARRAY['[3e38,3e38]'::cvec], 3);
SELECT clustervec_gpu_ping(-1);
SELECT clustervec_gpu_ping(2147483647);
