-- cvlattice: every refusal is a clear error.
CREATE TABLE lerr (id int, c int, j json, p point, v cvec(3), w cvec);
INSERT INTO lerr VALUES (1, 1, '{}', '(1,1)', '[1,2,3]', '[1,2,3]');
-- two key columns, one of them a vector
CREATE INDEX ON lerr USING cvlattice (v);
CREATE INDEX ON lerr USING cvlattice (v, c, id);
CREATE INDEX ON lerr USING cvlattice (c, id);
-- a label type with no btree operator class
CREATE INDEX ON lerr USING cvlattice (v, j);
CREATE INDEX ON lerr USING cvlattice (v, p);
-- no parameters, no uniqueness, no INCLUDE
CREATE INDEX ON lerr USING cvlattice (v, c) WITH (lists = 10);
CREATE UNIQUE INDEX ON lerr USING cvlattice (v, c);
CREATE INDEX ON lerr USING cvlattice (v, c) INCLUDE (id);
-- dimensions: mixed at build, a different one at insert and in a query
INSERT INTO lerr VALUES (2, 1, '{}', '(1,1)', '[1,2,3]', '[1,2]');
CREATE INDEX ON lerr USING cvlattice (w, c);
DELETE FROM lerr WHERE id = 2;
CREATE INDEX lerr_w ON lerr USING cvlattice (w, c);
INSERT INTO lerr VALUES (3, 1, '{}', '(1,1)', '[1,2,3]', '[1,2,3,4]');
SET enable_seqscan = off;
SELECT id FROM lerr ORDER BY w <-> '[1,2]' LIMIT 1;
RESET enable_seqscan;
-- vectors wider than a centroid page
CREATE TABLE wide (c int, v cvec(3000));
CREATE INDEX ON wide USING cvlattice (v, c);
-- labels longer than a label page takes
CREATE TABLE longlabel (c text, v cvec(2));
INSERT INTO longlabel VALUES (repeat('x', 3000), '[1,2]');
CREATE INDEX ON longlabel USING cvlattice (v, c);
-- more distinct labels than an index has lists
CREATE TABLE many (c int, v cvec(1));
INSERT INTO many SELECT i, '[1]' FROM generate_series(1, 32769) i;
CREATE INDEX ON many USING cvlattice (v, c);
DELETE FROM many WHERE c = 1;
CREATE INDEX many_lat ON many USING cvlattice (v, c);
SELECT count(*), sum(members) FROM cvlattice_lists('many_lat');
-- introspection of something that is not a cvlattice index
CREATE INDEX lerr_ivf ON lerr USING cvivf (v);
SELECT * FROM cvlattice_lists('lerr_ivf');
SELECT cvlattice_verify('lerr');
SELECT * FROM cvivf_lists('lerr_w');
SELECT cvlattice_verify(0);
-- observed health needs the GPU worker (not preloaded here), and a cvlattice index
SELECT * FROM cluster_health_observed('lerr_w');
SELECT cluster_health_observed_reset('lerr_w');
SELECT * FROM cluster_health_observed('lerr_ivf');
DROP TABLE lerr, wide, longlabel, many;
