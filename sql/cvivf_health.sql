-- cvivf_health and cvivf_lists' figures since the build.  Every figure is
-- checked against SQL over the table: the operators' distances to the
-- centroids cvivf_lists and cvlattice_lists return, counts of rows, and the
-- index's size after a REINDEX for the dead space a rebuild gives back.

-- 4 groups of 1,000 rows, 16 dimensions, offsets 0, 3, 6, 9
CREATE TABLE drift (id int PRIMARY KEY, v cvec(16));
INSERT INTO drift SELECT i, (SELECT array_agg(((i % 4) * 3 + sin(i * 7 + j * 13))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(1, 4000) i;
CREATE INDEX drift_idx ON drift USING cvivf (v) WITH (lists = 4, seed = 1);

-- the distance of each row to the centroid of the list the index assigns it
CREATE FUNCTION drift_distances(idx regclass)
	RETURNS TABLE(list int, distance float8) LANGUAGE sql AS $$
	SELECT c.list, d.v <-> c.centroid FROM drift d
	JOIN cvivf_lists(idx) c ON c.list = cvivf_list_of(idx, d.v) $$;

-- just built: nothing since the build; the build's mean distance per list is SQL's
SELECT count(*) AS lists,
	bool_and(build_tuples = tuples AND inserted_since_build = 0 AND deleted_since_build = 0) AS unchanged,
	sum(build_tuples) = (SELECT count(*) FROM drift) AS all_rows
FROM cvivf_lists('drift_idx');
SELECT count(*) AS lists,
	bool_and(abs(c.build_mean_distance - r.mean) <= 1e-9 * r.mean) AS build_mean_is_sql
FROM cvivf_lists('drift_idx') c
JOIN (SELECT list, avg(distance) AS mean FROM drift_distances('drift_idx') GROUP BY list) r USING (list);

-- the health row against SQL: counts, spread of list sizes, mean distance
CREATE FUNCTION drift_check(idx regclass, exact boolean DEFAULT false)
	RETURNS TABLE(kind text, rows_ok boolean, build_rows_ok boolean, inserted bigint,
	              deleted bigint, changed_ok boolean, spread_ok boolean,
	              build_distance_ok boolean, now_distance_ok boolean, ratio_ok boolean,
	              blocks_ok boolean, recommendation text, reason text)
	LANGUAGE sql AS $$
	SELECT h.kind, h.rows = (SELECT count(*) FROM drift),
		h.build_rows = (SELECT sum(build_tuples) FROM cvivf_lists(idx)),
		h.inserted_since_build, h.deleted_since_build,
		h.changed_fraction = (h.inserted_since_build + h.deleted_since_build)::float8 / h.build_rows,
		abs(h.list_size_max_mean - l.max_mean) < 1e-12 AND abs(h.list_size_cv - l.cv) < 1e-12
			AND abs(h.build_list_size_max_mean - l.build_max_mean) < 1e-12
			AND abs(h.build_list_size_cv - l.build_cv) < 1e-12,
		abs(h.mean_distance_build - l.build_mean) <= 1e-9 * l.build_mean,
		CASE WHEN exact THEN abs(h.mean_distance_now - n.mean) <= 1e-9 * n.mean
			ELSE h.mean_distance_now IS NULL END,
		CASE WHEN exact THEN abs(h.distance_ratio - h.mean_distance_now / h.mean_distance_build) < 1e-12
			ELSE h.distance_ratio IS NULL END,
		h.index_blocks = pg_relation_size(idx) / current_setting('block_size')::int,
		h.recommendation, h.reason
	FROM cvivf_health(idx, exact) h,
		(SELECT max(tuples) / avg(tuples) AS max_mean, stddev_pop(tuples) / avg(tuples) AS cv,
		        max(build_tuples) / avg(build_tuples) AS build_max_mean,
		        stddev_pop(build_tuples) / avg(build_tuples) AS build_cv,
		        sum(build_mean_distance * build_tuples) / sum(build_tuples) AS build_mean
		 FROM cvivf_lists(idx)) l,
		(SELECT avg(distance) AS mean FROM drift_distances(idx)) n $$;

SELECT * FROM drift_check('drift_idx');
SELECT * FROM drift_check('drift_idx', true);
SELECT build_blocks = index_blocks AS same_size, dead_space_fraction, distance_ratio
FROM cvivf_health('drift_idx', true);

-- 2,000 rows shifted away from every centroid: inserts counted, members farther
INSERT INTO drift SELECT i, (SELECT array_agg((4.5 + (i % 4) * 3 + sin(i * 7 + j * 13))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(4001, 6000) i;
SELECT * FROM drift_check('drift_idx');
SELECT * FROM drift_check('drift_idx', true);
SELECT distance_ratio > 1.2 AS farther FROM cvivf_health('drift_idx', true);
SELECT sum(inserted_since_build) = 2000 AS counted,
	bool_and(inserted_since_build = tuples - build_tuples) AS per_list
FROM cvivf_lists('drift_idx');

-- three rows in four deleted and vacuumed: deletes counted, inserts kept
DELETE FROM drift WHERE id % 4 <> 0;
VACUUM drift;
SELECT sum(deleted_since_build) = 4500 AS deletes_counted, sum(inserted_since_build) AS inserted,
	bool_and(tuples = build_tuples + inserted_since_build - deleted_since_build) AS balance
FROM cvivf_lists('drift_idx');
SELECT kind, rows_ok, inserted, deleted, changed_ok, spread_ok, build_distance_ok,
	now_distance_ok, blocks_ok, recommendation FROM drift_check('drift_idx', true);

-- dead space: the share of the index's pages a rebuild gives back, within a
-- page per list (a new build may split the rows otherwise) and the reuse page
CREATE TABLE drift_before AS
	SELECT index_blocks, dead_space_fraction FROM cvivf_health('drift_idx');
SELECT dead_space_fraction >= 0.3 AS rebuild_due FROM drift_before;
REINDEX INDEX drift_idx;
SELECT abs(b.dead_space_fraction - (1 - h.index_blocks::float8 / b.index_blocks))
	<= (h.lists + 1)::float8 / b.index_blocks AS rebuild_gave_back_that
FROM drift_before b, cvivf_health('drift_idx') h;
-- a rebuild starts a new baseline
SELECT * FROM drift_check('drift_idx', true);

-- cosine and inner product: the index's own distance; inner product's is signed: no ratio
CREATE INDEX drift_cos ON drift USING cvivf (v cvec_cosine_ops) WITH (lists = 3);
CREATE INDEX drift_ip ON drift USING cvivf (v cvec_ip_ops) WITH (lists = 3);
SELECT bool_and(abs(c.build_mean_distance - r.mean) <= 1e-9 * abs(r.mean)) AS cosine_is_sql
FROM cvivf_lists('drift_cos') c
JOIN (SELECT c.list, avg(d.v <=> c.centroid) AS mean FROM drift d
      JOIN cvivf_lists('drift_cos') c ON c.list = cvivf_list_of('drift_cos', d.v)
      GROUP BY c.list) r USING (list);
SELECT bool_and(abs(c.build_mean_distance - r.mean) <= 1e-9 * abs(r.mean)) AS ip_is_sql
FROM cvivf_lists('drift_ip') c
JOIN (SELECT c.list, avg(d.v <#> c.centroid) AS mean FROM drift d
      JOIN cvivf_lists('drift_ip') c ON c.list = cvivf_list_of('drift_ip', d.v)
      GROUP BY c.list) r USING (list);
SELECT distance_ratio AS cosine_ratio FROM cvivf_health('drift_cos', true);
SELECT mean_distance_now < 0 AS signed, distance_ratio IS NULL AS no_ratio
FROM cvivf_health('drift_ip', true);
DROP INDEX drift_cos, drift_ip;

-- built on an empty table: one list without centroid, rows inserted since: rebuild
CREATE TABLE drift_empty (v cvec(2));
CREATE INDEX drift_empty_idx ON drift_empty USING cvivf (v);
INSERT INTO drift_empty SELECT ARRAY[i, 1] FROM generate_series(1, 30) i;
SELECT lists, rows, build_rows, inserted_since_build, mean_distance_build, recommendation, reason
FROM cvivf_health('drift_empty_idx');
SELECT list, tuples, build_tuples, inserted_since_build, build_mean_distance, centroid
FROM cvivf_lists('drift_empty_idx');

-- cvlattice: lists are labels, centroids their means; only the rebuild rules apply
CREATE TABLE drift_lat (id int, c int, v cvec(16));
INSERT INTO drift_lat SELECT i, i % 4, (SELECT array_agg(((i % 4) * 3 + sin(i * 7 + j * 13))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(1, 2000) i;
CREATE INDEX drift_lat_idx ON drift_lat USING cvlattice (v, c);
CREATE FUNCTION drift_lat_mean() RETURNS float8 LANGUAGE sql AS $$
	SELECT avg(d.v <-> l.centroid) FROM drift_lat d
	JOIN cvlattice_lists('drift_lat_idx') l ON l.label = d.c::text $$;
SELECT kind, lists, rows = (SELECT count(*) FROM drift_lat) AS rows_ok,
	build_rows = rows AS build_rows_ok, inserted_since_build, deleted_since_build,
	abs(mean_distance_build - drift_lat_mean()) <= 1e-9 * drift_lat_mean() AS build_distance_ok,
	abs(mean_distance_now - drift_lat_mean()) <= 1e-9 * drift_lat_mean() AS now_distance_ok,
	recommendation, reason
FROM cvivf_health('drift_lat_idx', true);
-- 400 more rows, one new label: its list has no baseline
INSERT INTO drift_lat SELECT i, i % 5, (SELECT array_agg((2 + sin(i * 3 + j))::real)
	FROM generate_series(1, 16) j)::cvec FROM generate_series(10001, 10400) i;
-- deletes from an old list (counted by VACUUM) and from the new one (derived)
CREATE TABLE drift_lat_gone AS SELECT count(*) AS n FROM drift_lat WHERE id % 10 IN (1, 4);
DELETE FROM drift_lat WHERE id % 10 IN (1, 4);
VACUUM drift_lat;
SELECT lists, rows = (SELECT count(*) FROM drift_lat) AS rows_ok, inserted_since_build,
	deleted_since_build = (SELECT n FROM drift_lat_gone) AS deletes_ok,
	abs(mean_distance_now - drift_lat_mean()) <= 1e-9 * drift_lat_mean() AS now_distance_ok,
	list_size_cv > build_list_size_cv AS spread_grew, recommendation
FROM cvivf_health('drift_lat_idx', true);
SELECT cvlattice_verify('drift_lat_idx');

-- errors and NULL
SELECT * FROM cvivf_health('drift_pkey');
SELECT rows IS NULL AS null_index FROM cvivf_health(NULL);
SELECT cvivf_verify('drift_idx');
DROP TABLE drift, drift_before, drift_empty, drift_lat, drift_lat_gone;
DROP FUNCTION drift_distances, drift_check, drift_lat_mean;
