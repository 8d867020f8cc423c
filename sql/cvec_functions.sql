SELECT vector_dims('[1,2,3]'), vector_dims('[0]');
SELECT vector_norm('[3,4]'), vector_norm('[0,0,0]'), vector_norm('[-1,-1,-1,-1]');
SELECT vector_norm('[3e38,3e38]') > 4e38 AS no_overflow;
SELECT l2_normalize('[3,4]'), l2_normalize('[0,0]'), l2_normalize('[-2]');
SELECT round(vector_norm(l2_normalize('[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]'))::numeric, 6);
SELECT l2_normalize('[1e-40,0]');
-- subvector is 1-based and clips like substring()
SELECT subvector('[1,2,3,4,5]', 2, 3);
SELECT subvector('[1,2,3,4,5]', 1, 5);
SELECT subvector('[1,2,3,4,5]', 4, 10);
SELECT subvector('[1,2,3,4,5]', 0, 2);
SELECT subvector('[1,2,3,4,5]', -1, 3);
SELECT subvector('[1,2,3,4,5]', 5, 1);
SELECT subvector('[1,2,3,4,5]', 2147483647, 2147483647);
SELECT subvector('[1,2,3,4,5]', 6, 1);
SELECT subvector('[1,2,3,4,5]', 2, 0);
SELECT subvector('[1,2,3,4,5]', 0, 1);
SELECT subvector('[1,2,3,4,5]', 2, -1);
-- properties of the functions
SELECT proname, provolatile, proisstrict, proparallel
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'clustervec'
WHERE provolatile <> 'i' OR NOT proisstrict OR proparallel <> 's'
ORDER BY proname;
