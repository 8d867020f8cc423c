CREATE TABLE agg (g int, v cvec(3));
INSERT INTO agg VALUES (1, '[1,2,3]'), (1, '[3,2,1]'), (2, '[0.5,0.5,0.5]'),
	(2, '[1.5,-0.5,2.5]'), (2, '[1,0,0]'), (3, '[3e38,1,1]'), (3, '[3e38,1,1]');
SELECT avg(v), sum(v) FROM agg WHERE g < 3;
SELECT g, avg(v), sum(v) FROM agg WHERE g < 3 GROUP BY g ORDER BY g;
SELECT g, avg(v) FROM agg WHERE g = 3 GROUP BY g;
-- the float8 state survives values whose float4 sum overflows, but sum() does not
SELECT g, sum(v) FROM agg WHERE g = 3 GROUP BY g;
-- no rows: NULL, as avg(float8)
SELECT avg(v) IS NULL AS avg_null, sum(v) IS NULL AS sum_null FROM agg WHERE false;
-- NULL vectors are skipped
INSERT INTO agg VALUES (1, NULL);
SELECT avg(v), count(*) FROM agg WHERE g = 1;
-- mixed dimensions
SELECT avg(v) FROM (VALUES ('[1,2]'::cvec), ('[1,2,3]')) t(v);
SELECT sum(v) FROM (VALUES ('[1,2]'::cvec), ('[1]')) t(v);
-- float8 accumulation: 10,000 x 0.1 averages to 0.1 exactly in float4
SELECT avg(v), sum(v) FROM (SELECT '[0.1,1]'::cvec AS v FROM generate_series(1, 10000)) t;
-- the state type and helpers are plain SQL
SELECT cvec_combine(cvec_accum('{0}', '[1,2]'), cvec_accum('{0}', '[3,4]'));
SELECT cvec_avg(cvec_combine(cvec_accum('{0}', '[1,2]'), cvec_accum(cvec_accum('{0}', '[3,4]'), '[5,6]')));
SELECT cvec_combine('{0}', cvec_accum('{0}', '[1,2]')), cvec_combine(cvec_accum('{0}', '[1,2]'), '{0}');
SELECT cvec_combine(cvec_accum('{0}', '[1,2]'), cvec_accum('{0}', '[1,2,3]'));
SELECT cvec_avg('{1,2}'::float8[]), cvec_avg('{0}');
SELECT cvec_avg('{{1,2}}'::float8[]);
SELECT cvec_avg('{1,NULL}'::float8[]);
-- a state of no rows, called directly: NULL, as the aggregates over no rows
-- (they call the same final functions on INITCOND '{0}'), never a vector of
-- 0 dimensions, which no dump could restore; a state without its count, or a
-- count of rows without sums or of no rows with sums, is an error
SELECT cvec_avg('{0}') IS NULL AS avg_null, cvec_sum('{0}') IS NULL AS sum_null,
	cvec_sum(cvec_combine('{0}', '{0}')) IS NULL AS combined_null;
SELECT cvec_sum('{}'::float8[]);
SELECT cvec_avg('{}'::float8[]);
SELECT cvec_sum('{1}');
SELECT cvec_avg('{2}');
SELECT cvec_sum('{0,5}');
SELECT aggcombinefn, aggserialfn, aggdeserialfn, aggtranstype::regtype
FROM pg_aggregate WHERE aggfnoid IN ('avg(cvec)'::regprocedure, 'sum(cvec)'::regprocedure);
-- parallel aggregation: partial states combined from the workers
CREATE TABLE agg_big (g int, v cvec(4));
INSERT INTO agg_big SELECT i % 3, ARRAY[i, -i, i % 7, 1]::cvec FROM generate_series(1, 30000) i;
ANALYZE agg_big;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT avg(v), sum(v) FROM agg_big;
SELECT avg(v), sum(v) FROM agg_big;
SELECT g, avg(v) FROM agg_big GROUP BY g ORDER BY g;
RESET max_parallel_workers_per_gather;
SELECT avg(v), sum(v) FROM agg_big;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE agg, agg_big;
