CREATE TABLE typed (v cvec(3));
INSERT INTO typed VALUES ('[1,2,3]');
INSERT INTO typed VALUES ('[1,2]');
INSERT INTO typed VALUES ('[1,2,3,4]');
INSERT INTO typed VALUES (ARRAY[4,5,6]);
INSERT INTO typed VALUES (ARRAY[4,5]::real[]);
UPDATE typed SET v = '[1]';
SELECT * FROM typed ORDER BY v;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'typed'::regclass AND attname = 'v';
DROP TABLE typed;

SELECT '[1,2,3]'::cvec(3);
SELECT '[1,2,3]'::cvec(2);
SELECT ARRAY[1,2,3]::cvec(3);
SELECT ARRAY[1,2,3]::cvec(4);
SELECT '[1,2]'::cvec::cvec(2);
SELECT '[1,2]'::cvec::cvec(3);

-- the modifier itself
CREATE TABLE bad_typmod (v cvec(0));
CREATE TABLE bad_typmod (v cvec(-1));
CREATE TABLE bad_typmod (v cvec(16001));
CREATE TABLE bad_typmod (v cvec(3, 4));
CREATE TABLE max_typmod (v cvec(16000));
DROP TABLE max_typmod;
