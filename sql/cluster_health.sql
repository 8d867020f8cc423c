-- Small exact cases; test/numeric compares every statistic with numpy.
CREATE TABLE pts (id int, label int, v cvec(2), t text, ord int);
INSERT INTO pts VALUES
	(1, 10, '[0,0]', 'b', 3), (2, 10, '[2,0]', 'b', 2), (3, 10, '[0,2]', 'b', 1),
	(4, 20, '[10,10]', 'a', 1), (5, 20, '[12,10]', 'a', 2),
	(6, 30, '[-5,5]', 'c', 1),
	(7, NULL, '[1,1]', NULL, 1), (8, 40, NULL, 'd', 1);
SELECT cluster, n, round(centroid_norm::numeric, 9) AS centroid_norm,
       round(inertia::numeric, 9) AS inertia, round(mean_dist::numeric, 9) AS mean_dist,
       round(radius::numeric, 9) AS radius, nearest_cluster,
       round(nearest_dist::numeric, 9) AS nearest_dist, cluster_text, nearest_cluster_text
FROM cluster_health('pts', 'label', 'v') ORDER BY cluster;
-- a one-member cluster: pair statistics are NULL, the rest defined
SELECT n, spread, skew IS NULL AS skew_null, split_gain IS NULL AS split_null,
       mean_pairwise_dist IS NULL AS pairs_null, effective_rank IS NULL AS rank_null
FROM cluster_health('pts', 'label', 'v') WHERE cluster = 30;
-- a two-member cluster: one pair
SELECT n, mean_pairwise_dist, breadth, sigma IS NOT NULL AS sigma_set, split_balance
FROM cluster_health('pts', 'label', 'v') WHERE cluster = 20;
-- text labels: ranks in byte order, the text in cluster_text
SELECT cluster, n, cluster_text, nearest_cluster, nearest_cluster_text
FROM cluster_health('pts', 't', 'v') ORDER BY cluster;
-- the query form equals the table form
SELECT count(*) FROM cluster_health('pts', 'label', 'v', 'id') a
JOIN cluster_health_query('SELECT label, v, id FROM pts') b USING (cluster)
WHERE (a.*)::text = (b.*)::text;
-- summary
SELECT k, n, round(davies_bouldin::numeric, 9) AS davies_bouldin,
       round(calinski_harabasz::numeric, 6) AS calinski_harabasz,
       round(cohesion::numeric, 9) AS cohesion
FROM cluster_health_summary('pts', 'label', 'v');
-- one cluster: no neighbours
SELECT cluster, nearest_cluster, nearest_dist, db_ratio, escape_probability
FROM cluster_health_query('SELECT 1, v FROM pts WHERE v IS NOT NULL');
SELECT * FROM cluster_health_summary('pts', 'id', 'v') WHERE false;
-- an empty source gives no rows
CREATE TABLE nothing (label int, v cvec);
SELECT count(*) FROM cluster_health('nothing', 'label', 'v');
SELECT k, n, davies_bouldin FROM cluster_health_summary('nothing', 'label', 'v');

-- errors
SELECT * FROM cluster_health('pts', 'nope', 'v');
SELECT * FROM cluster_health('pts', 'label', 'nope');
SELECT * FROM cluster_health('pts', 'label', 'v', 'nope');
SELECT * FROM cluster_health('pts', 'v', 'v');
SELECT * FROM cluster_health('pts', 'label', 'id');
SELECT * FROM cluster_health('pts', 'label', 'v', outlier_z => -1);
SELECT * FROM cluster_health('pts', 'label', 'v', dup_cos => 0);
SELECT * FROM cluster_health('pts', 'label', 'v', dup_cos => 1.5);
SELECT * FROM cluster_health('pts', 'label', 'v', neighbours => 0);
SELECT * FROM cluster_health('pts', 'label', 'v', sigma_bins => 1);
SELECT * FROM cluster_health('pts', 'label', 'v', entropy_bins => 1);
SELECT * FROM cluster_health('pts', 'label', 'v', rank_max_members => 1);
SELECT * FROM cluster_health(NULL, 'label', 'v');
SELECT * FROM cluster_health_query('SELECT 1');
SELECT * FROM cluster_health_query('SELECT 1, ''[1]''::cvec, 2, 3');
CREATE TABLE mixed_dims (label int, v cvec);
INSERT INTO mixed_dims VALUES (1, '[1,2]'), (1, '[1,2,3]');
SELECT * FROM cluster_health('mixed_dims', 'label', 'v');
-- rank_max_members refuses large clusters with one NOTICE
SELECT cluster, effective_rank IS NULL AS refused
FROM cluster_health('pts', 'label', 'v', rank_max_members => 2) ORDER BY cluster;

-- inputs beyond clustervec.health_memory: the sort spills and clusters come
-- in several chunks, with the same results
CREATE TABLE chunky AS
SELECT i, i % 20 AS label,
       (SELECT array_agg(sin(i * 0.37 + j * 1.3 + (i % 20) * 2.0)::real ORDER BY j)
        FROM generate_series(1, 128) j)::cvec AS v
FROM generate_series(1, 4000) i;
CREATE TEMP TABLE roomy AS SELECT * FROM cluster_health('chunky', 'label', 'v', 'i');
SET clustervec.health_memory = '1MB';
SELECT count(*) AS clusters, count(*) FILTER (WHERE (c.*)::text = (r.*)::text) AS identical
FROM cluster_health('chunky', 'label', 'v', 'i') c JOIN roomy r USING (cluster);
RESET clustervec.health_memory;
DROP TABLE chunky;

-- cluster_stats: the one-pass part of the centroid family, as an aggregate
SELECT label, (s).n, (s).centroid, round((s).inertia::numeric, 9) AS inertia,
       round((s).mean_norm::numeric, 9) AS mean_norm
FROM (SELECT label, cluster_stats(v) AS s FROM pts GROUP BY label) g ORDER BY label;
SELECT a.n = (b.s).n AND abs(a.inertia - (b.s).inertia) < 1e-9
       AND abs(a.cohesion - (b.s).cohesion) < 1e-12
       AND abs(a.embedding_quality - (b.s).embedding_quality) < 1e-12
       AND abs(a.norm_cv - (b.s).norm_cv) < 1e-12 AS agrees
FROM cluster_health('pts', 'label', 'v') a
JOIN (SELECT label, cluster_stats(v) AS s FROM pts GROUP BY label) b ON b.label = a.cluster
WHERE a.cluster = 10;
SELECT cluster_stats(v) IS NULL AS no_rows FROM pts WHERE false;
CREATE TABLE stats_big AS SELECT i % 7 AS g, ARRAY[i % 13, i % 5, 1]::cvec AS v
FROM generate_series(1, 30000) i;
ANALYZE stats_big;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT g, cluster_stats(v) FROM stats_big GROUP BY g;
CREATE TEMP TABLE parallel_result AS SELECT g, cluster_stats(v) AS s FROM stats_big GROUP BY g;
RESET max_parallel_workers_per_gather;
SET max_parallel_workers_per_gather = 0;
SELECT bool_and((p.s).n = (q.s).n AND (p.s).centroid = (q.s).centroid
                AND abs((p.s).inertia - (q.s).inertia) <= 1e-9 * (q.s).inertia) AS parallel_equals_serial
FROM parallel_result p JOIN (SELECT g, cluster_stats(v) AS s FROM stats_big GROUP BY g) q USING (g);
RESET ALL;
DROP TABLE pts, nothing, mixed_dims, stats_big;
