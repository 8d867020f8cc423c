-- exact small cases: 3-4-5 triangles and hand-computed values
SELECT '[0,0]'::cvec <-> '[3,4]', l2_distance('[1,1,1]', '[1,1,1]');
SELECT l2_squared_distance('[0,0]', '[3,4]');
SELECT '[1,2,3]'::cvec <#> '[4,-5,6]', inner_product('[1,2,3]', '[4,-5,6]');
SELECT negative_inner_product('[1,2,3]', '[4,-5,6]');
SELECT '[1,0]'::cvec <=> '[0,1]', '[1,1]'::cvec <=> '[2,2]', '[1,0]'::cvec <=> '[-1,0]';
SELECT cosine_distance('[3,4]', '[4,3]');
SELECT '[1,-2,3]'::cvec <+> '[-1,2,-3]', l1_distance('[0.5,0.25]', '[0,0]');
-- a zero vector has no direction: NaN, as pgvector
SELECT '[0,0]'::cvec <=> '[1,1]', cosine_distance('[1,1]', '[0,0]');
-- cosine stays inside [0, 2] despite rounding
SELECT '[1e-30,1e-30]'::cvec <=> '[1e-30,1e-30]' BETWEEN 0 AND 2;
-- every element counts, across the 16-lane blocks and the tail
SELECT '[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]'::cvec <-> '[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]' AS sqrt19,
       sqrt(19::float8) AS expected;
SELECT l1_distance(array_fill(1, ARRAY[1023])::cvec, array_fill(-1, ARRAY[1023])::cvec);
SELECT inner_product(array_fill(2, ARRAY[16000])::cvec, array_fill(0.5, ARRAY[16000])::cvec);
-- float8 results of float4 inputs: no float4 rounding of the sum
SELECT '[0.1]'::cvec <#> '[10]';
-- large elements do not overflow: squares are summed in float8
SELECT '[3e38,-3e38]'::cvec <-> '[-3e38,3e38]';
SELECT inner_product('[3e38,3e38]', '[3e38,3e38]');

-- dimension mismatch
SELECT '[1,2]'::cvec <-> '[1,2,3]';
SELECT '[1,2]'::cvec <#> '[1,2,3]';
SELECT '[1,2]'::cvec <=> '[1,2,3]';
SELECT '[1,2]'::cvec <+> '[1,2,3]';
SELECT inner_product('[1]', '[1,2]');
SELECT l2_squared_distance('[1]', '[1,2]');
-- NULL in, NULL out
SELECT '[1,2]'::cvec <-> NULL IS NULL AS strict;

-- nearest neighbours by sequential scan, each metric
CREATE TABLE points (id int, v cvec(2));
INSERT INTO points VALUES (1, '[0,0]'), (2, '[1,0]'), (3, '[0,2]'), (4, '[-3,-3]'), (5, '[5,5]');
SELECT id FROM points ORDER BY v <-> '[0.9,0.1]' LIMIT 3;
SELECT id FROM points ORDER BY v <#> '[1,1]' LIMIT 3;
SELECT id FROM points WHERE id <> 1 ORDER BY v <=> '[1,2]' LIMIT 3;
SELECT id FROM points ORDER BY v <+> '[0,1.5]' LIMIT 3;
DROP TABLE points;
