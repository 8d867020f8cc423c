SELECT '[1,2,3]'::cvec + '[4,5,6]', '[1,2,3]'::cvec - '[4,5,6]', '[1,2,3]'::cvec * '[4,5,6]';
SELECT '[0.1]'::cvec + '[0.2]';
SELECT '[1.5,-2]'::cvec * '[-2,0]';
-- overflow to infinity is an error, never a stored infinity
SELECT '[3e38]'::cvec + '[3e38]';
SELECT '[-3e38]'::cvec - '[3e38]';
SELECT '[1,1e20]'::cvec * '[1,1e20]';
SELECT '[3e38]'::cvec + '[-3e38]';
-- dimension mismatch
SELECT '[1,2]'::cvec + '[1]';
SELECT '[1,2]'::cvec - '[1]';
SELECT '[1,2]'::cvec * '[1]';
