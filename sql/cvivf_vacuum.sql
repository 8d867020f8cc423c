-- Inserts after the build, deletes and VACUUM on the items table.
SET max_parallel_workers_per_gather = 0;
INSERT INTO items SELECT i, (SELECT v FROM items WHERE id = i - 2000) + ('[0.001,0,0,0,0,0,0,0]'::cvec)
FROM generate_series(2002, 2500) i;
SELECT sum(tuples) FROM cvivf_lists('items_l2');
SELECT cvivf_verify('items_l2');
-- a row inserted after the build is found by the index
SET enable_seqscan = off;
SELECT id FROM items ORDER BY v <-> (SELECT v FROM items WHERE id = 2100) LIMIT 2;
RESET enable_seqscan;
DELETE FROM items WHERE id % 3 = 0;
VACUUM items;
SELECT sum(tuples) = (SELECT count(*) FROM items WHERE v IS NOT NULL) AS counts_match FROM cvivf_lists('items_l2');
SELECT cvivf_verify('items_l2'), cvivf_verify('items_ip'), cvivf_verify('items_cos');
SET enable_seqscan = off;
SET clustervec.probes = 40;
SELECT count(*) FROM (SELECT id FROM items ORDER BY v <-> '[0,0,0,0,0,0,0,0]') s;
SELECT count(*) FILTER (WHERE id % 3 = 0) AS deleted_seen FROM (SELECT id FROM items ORDER BY v <-> '[0,0,0,0,0,0,0,0]') s;
RESET ALL;
-- CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY rely on bulk delete seeing every tuple
CREATE INDEX CONCURRENTLY items_conc ON items USING cvivf (v) WITH (lists = 20);
SELECT sum(tuples) = (SELECT count(*) FROM items WHERE v IS NOT NULL) FROM cvivf_lists('items_conc');
REINDEX INDEX CONCURRENTLY items_conc;
SELECT sum(tuples) = (SELECT count(*) FROM items WHERE v IS NOT NULL) FROM cvivf_lists('items_conc');
SELECT cvivf_verify('items_conc');
-- VACUUM FULL and TRUNCATE rebuild
VACUUM FULL items;
SELECT cvivf_verify('items_l2'), cvivf_verify('items_conc');
TRUNCATE items;
SELECT count(*), sum(tuples) FROM cvivf_lists('items_l2');
INSERT INTO items VALUES (1, '[1,1,1,1,1,1,1,1]');
SELECT cvivf_verify('items_l2');
DROP TABLE items, centres;
