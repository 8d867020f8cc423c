-- kmeans() and kmeans_centroids(): k-means over every row of a table's
-- vector column, on the CPU here (no preloaded worker).
CREATE TABLE km (id int, v cvec(2));
-- three groups of 20 rows around (0,0), (10,0) and (0,10), deterministic jitter
INSERT INTO km SELECT i, ARRAY[(i % 3 = 1)::int * 10 + (i % 7) * 0.1 - 0.3,
                              (i % 3 = 2)::int * 10 + (i % 5) * 0.1 - 0.2]
	FROM generate_series(0, 59) i;
INSERT INTO km VALUES (60, NULL), (61, NULL);

-- progress: a NOTICE per iteration, the NULL rows counted
SELECT count(*) FROM kmeans('km', 'v', 3, iterations => 5, seed => 7);

SET client_min_messages = warning;
CREATE TEMP TABLE a AS SELECT * FROM kmeans('km', 'v', 3, seed => 7);
CREATE TEMP TABLE c AS SELECT * FROM kmeans_centroids('km', 'v', 3, seed => 7);

-- every non-NULL row once, NULL rows skipped
SELECT count(*), count(DISTINCT tid) FROM a;
-- the three groups are found: each cluster holds one group
SELECT count(DISTINCT a.cluster) AS clusters,
	   count(DISTINCT (a.cluster, km.id % 3)) AS cluster_group_pairs
	FROM a JOIN km ON km.ctid = a.tid;
SELECT cluster, members FROM c ORDER BY cluster;

-- every row is assigned to its nearest centroid, at the distance reported
SELECT count(*) AS wrong_cluster FROM a JOIN km ON km.ctid = a.tid
	WHERE (SELECT c.cluster FROM c ORDER BY km.v <-> c.centroid, c.cluster LIMIT 1) <> a.cluster;
SELECT count(*) AS wrong_distance FROM a JOIN km ON km.ctid = a.tid JOIN c USING (cluster)
	WHERE abs(a.distance - (km.v <-> c.centroid)) > 1e-12;

-- members and inertia are the sums over the assignment
SELECT count(*) AS wrong_sums FROM c
	LEFT JOIN (SELECT cluster, count(*) AS n, sum(distance ^ 2) AS s FROM a GROUP BY cluster) g
	USING (cluster)
	WHERE g.n IS DISTINCT FROM c.members OR abs(g.s - c.inertia) > 1e-9 * greatest(1, c.inertia);
SELECT abs((SELECT sum(inertia) FROM c) - (SELECT sum(distance ^ 2) FROM a)) < 1e-9 AS total_inertia_matches;

-- the centroids are the means of their clusters (converged on separated groups)
SELECT count(*) AS not_means FROM c JOIN (
	SELECT a.cluster, avg(km.v) AS mean FROM a JOIN km ON km.ctid = a.tid GROUP BY a.cluster) m
	USING (cluster) WHERE (c.centroid <-> m.mean) > 1e-5;

-- the same seed gives the same result; cluster_health runs on the labels
SELECT count(*) AS differ FROM a FULL JOIN kmeans('km', 'v', 3, seed => 7) b USING (tid)
	WHERE a.cluster IS DISTINCT FROM b.cluster OR a.distance IS DISTINCT FROM b.distance;
SELECT count(*) AS differ FROM c FULL JOIN kmeans_centroids('km', 'v', 3, seed => 7) d USING (cluster)
	WHERE c.centroid IS DISTINCT FROM d.centroid OR c.inertia IS DISTINCT FROM d.inertia;
CREATE TEMP TABLE labels AS SELECT tid, cluster FROM kmeans('km', 'v', 3);
SELECT sum(n) AS rows_in_health FROM cluster_health_query(
	'SELECT l.cluster, km.v FROM km JOIN labels l ON km.ctid = l.tid', progress => false);

-- k = n: every row its own cluster, inertia 0
SELECT count(*), sum(members), max(inertia) FROM kmeans_centroids('km', 'v', 60);
-- iterations 0: the k-means++ seeds, each row at its nearest
SELECT count(*) AS wrong_cluster FROM kmeans('km', 'v', 4, iterations => 0) a0
	JOIN km ON km.ctid = a0.tid
	WHERE (SELECT c0.cluster FROM kmeans_centroids('km', 'v', 4, iterations => 0) c0
		   ORDER BY km.v <-> c0.centroid, c0.cluster LIMIT 1) <> a0.cluster;

-- cosine and inner product: spherical k-means, unit centroids, nearest by the metric
CREATE TEMP TABLE ac AS SELECT * FROM kmeans('km', 'v', 2, metric => 'cosine');
CREATE TEMP TABLE cc AS SELECT * FROM kmeans_centroids('km', 'v', 2, metric => 'cosine');
SELECT count(*) AS rows, count(*) FILTER (WHERE abs(vector_norm(cc.centroid) - 1) > 1e-6) AS not_unit
	FROM ac JOIN cc USING (cluster);
SELECT count(*) AS not_nearest FROM ac JOIN km ON km.ctid = ac.tid
	WHERE ac.distance > (SELECT min(km.v <=> cc.centroid) FROM cc) + 1e-6
	   OR abs(ac.distance - (SELECT km.v <=> cc.centroid FROM cc WHERE cc.cluster = ac.cluster)) > 1e-6;
SELECT abs((SELECT sum(inertia) FROM cc) - (SELECT sum(distance) FROM ac)) < 1e-9 AS cosine_inertia_matches;
CREATE TEMP TABLE ai AS SELECT * FROM kmeans('km', 'v', 2, metric => 'ip');
CREATE TEMP TABLE ci AS SELECT * FROM kmeans_centroids('km', 'v', 2, metric => 'ip');
SELECT count(*) AS not_nearest FROM ai JOIN km ON km.ctid = ai.tid
	WHERE ai.distance > (SELECT min(km.v <#> ci.centroid) FROM ci) + 1e-6
	   OR abs(ai.distance - (SELECT km.v <#> ci.centroid FROM ci WHERE ci.cluster = ai.cluster)) > 1e-6;
RESET client_min_messages;

-- fewer distinct vectors than k: fewer clusters, with a NOTICE
CREATE TABLE km_dup (v cvec);
INSERT INTO km_dup SELECT ARRAY[i % 2, 0] FROM generate_series(1, 10) i;
SELECT cluster, members, inertia FROM kmeans_centroids('km_dup', 'v', 3, iterations => 2) ORDER BY cluster;

-- errors
\set VERBOSITY default
SELECT * FROM kmeans('km', 'v', 0);
SELECT * FROM kmeans('km', 'v', 61);
SELECT * FROM kmeans('km', 'v', 2, iterations => -1);
SELECT * FROM kmeans('km', 'v', 2, metric => 'l1');
SELECT * FROM kmeans('km', 'v', 2, metric => NULL);
SELECT * FROM kmeans('km', 'nope', 2);
SELECT * FROM kmeans('km', 'id', 2);
CREATE TABLE km_empty (v cvec);
SELECT * FROM kmeans_centroids('km_empty', 'v', 1);
INSERT INTO km_empty VALUES (NULL);
SELECT * FROM kmeans_centroids('km_empty', 'v', 1);
INSERT INTO km_empty VALUES ('[1,2]'), ('[1,2,3]');
SELECT * FROM kmeans('km_empty', 'v', 1);
CREATE TABLE km_zero (v cvec);
INSERT INTO km_zero VALUES ('[0,0]'), ('[1,0]'), ('[0,1]');
SELECT cluster, members FROM kmeans_centroids('km_zero', 'v', 2, metric => 'cosine') ORDER BY cluster;
CREATE VIEW km_view AS SELECT * FROM km;
SELECT * FROM kmeans('km_view', 'v', 2);
\set VERBOSITY terse

DROP VIEW km_view;
DROP TABLE km, km_dup, km_empty, km_zero;
