
# The cvlattice build (src/lattice/build.c): rows grouped by label while the
# heap is scanned and kept in memory, or, when they do not fit
# maintenance_work_mem, sorted by label then TID.  Both ways make the same
# index: the same lists (label order, the NULL label last), members and
# centroids (exactly), cvlattice_verify passes, label-filtered answers equal
# exact search, rows in heap order within each list (read from the pages
# with pageinspect, where it is installed), also where HOT chains make the
# scan report a root TID after later ones; labels equal by the type's
# comparison but with other bytes (numeric 3 and 3.00) share one list; rows
# with a NULL vector are skipped and a NULL label is a list; vectors stored
# out of line (read from their TOAST chunks into memory) and in line.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# 100 dimensions: a list tuple is 408 bytes, 20 to a data page, none split
my $dims = 100;
my $tuple = 8 + 4 * $dims;
my $rows = 5000;

my $node = cv_new_node('lattice_build');
$node->append_conf('postgresql.conf', "autovacuum = off\n");
$node->restart;

# labels in runs of 40 rows (one run fills a few heap pages), a NULL label
# and a NULL vector now and then; n is c as numeric, half of it with scale 2
$node->safe_psql(
	'postgres', qq{
CREATE TABLE b (id int, c int, n numeric, note text, v cvec($dims)) WITH (fillfactor = 50);
SELECT setseed(0.4);
INSERT INTO b SELECT i, CASE WHEN i % 97 = 0 THEN NULL ELSE (i / 40) % 37 END, NULL, '',
	CASE WHEN i % 101 = 0 THEN NULL
	ELSE (SELECT array_agg(((i / 40) % 37) + random()::real + 0 * j) FROM generate_series(1, $dims) j)::cvec END
	FROM generate_series(1, $rows) i;
UPDATE b SET n = CASE WHEN id % 2 = 0 THEN c::numeric ELSE c::numeric(10, 2) END;
VACUUM b;
-- HOT updates: the new versions go after the rows that follow on the page
UPDATE b SET note = 'hot' WHERE id % 7 = 0;
CREATE TABLE q AS SELECT l, (SELECT array_agg(l + random()::real + 0 * j) FROM generate_series(1, $dims) j)::cvec AS v
	FROM generate_series(0, 36) l;
});
cmp_ok($node->safe_psql('postgres',
		"SELECT pg_stat_force_next_flush(); SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'b'"),
	'>', 0, 'the updates were HOT');

# builds index $name on ($column) with maintenance_work_mem $mwm; returns the DEBUG1 lines
sub build
{
	my ($name, $column, $mwm) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET maintenance_work_mem = '$mwm'; SET client_min_messages = debug1;
		 CREATE INDEX $name ON b USING cvlattice (v, $column)");
	is($rc, 0, "$name builds");
	return $err;
}

unlike(build('b_spool', 'c', '64MB'), qr/sorting instead/, 'at 64MB the rows stay in memory');
like(build('b_sort', 'c', '1MB'), qr/sorting instead/, 'at 1MB the rows go to the sort');
build('n_spool', 'n', '64MB');
build('n_sort', 'n', '1MB');

my $indexed = $node->safe_psql('postgres', 'SELECT count(*) FROM b WHERE v IS NOT NULL');
for my $index (qw(b_spool b_sort n_spool n_sort))
{
	is($node->safe_psql('postgres', "SELECT count(*), sum(members) FROM cvlattice_lists('$index')"),
		"38|$indexed", "$index: 37 labels and the NULL label, every row with a vector");
	is($node->psql('postgres', "SELECT cvlattice_verify('$index')"), 0, "$index: cvlattice_verify");
}

sub same_lists
{
	my ($a, $b) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM (
	(SELECT list, label, members, centroid FROM cvlattice_lists('$a')
	 EXCEPT SELECT list, label, members, centroid FROM cvlattice_lists('$b'))
	UNION ALL
	(SELECT list, label, members, centroid FROM cvlattice_lists('$b')
	 EXCEPT SELECT list, label, members, centroid FROM cvlattice_lists('$a'))) x});
}
is(same_lists('b_spool', 'b_sort'), 0, 'in memory and sorted: the same lists, labels, members, centroids');
is(same_lists('n_spool', 'n_sort'), 0, 'numeric labels: the same both ways');
is($node->safe_psql('postgres', q{
SELECT string_agg(coalesce(label, 'NULL'), ',' ORDER BY list) FROM cvlattice_lists('b_spool')}),
	join(',', 0 .. 36, 'NULL'), 'lists in label order, the NULL label last');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM cvlattice_lists('n_spool') a JOIN cvlattice_lists('b_spool') b USING (list)
WHERE a.label::numeric = b.label::numeric AND a.members = b.members}),
	37, 'numeric 3 and 3.00 are one label, as int 3 is');

# label-filtered answers: the index (either build) against exact search
for my $index (qw(b_spool b_sort))
{
	my $other = $index eq 'b_spool' ? 'b_sort' : 'b_spool';
	my $mismatches = $node->safe_psql(
		'postgres', qq{
BEGIN;
DROP INDEX $other, n_spool, n_sort;
SET enable_seqscan = off; SET enable_bitmapscan = off;
CREATE TEMP TABLE got AS SELECT q.l, ARRAY(SELECT id FROM b WHERE b.c = q.l ORDER BY b.v <-> q.v LIMIT 10) AS ids FROM q
	UNION ALL SELECT -1, ARRAY(SELECT id FROM b WHERE b.c IS NULL ORDER BY b.v <-> (SELECT v FROM q LIMIT 1) LIMIT 10);
SET enable_indexscan = off; SET enable_seqscan = on;
SELECT count(*) FROM got WHERE ids IS DISTINCT FROM (CASE WHEN l >= 0
	THEN ARRAY(SELECT id FROM b WHERE b.c = got.l ORDER BY b.v <-> (SELECT v FROM q WHERE q.l = got.l) LIMIT 10)
	ELSE ARRAY(SELECT id FROM b WHERE b.c IS NULL ORDER BY b.v <-> (SELECT v FROM q LIMIT 1) LIMIT 10) END);
ROLLBACK;});
	is($mismatches, 0, "$index: label-filtered answers equal exact search");
}

# vectors read from TOAST chunks straight into memory (out of line) and
# detoasted (in line), in memory and through the sort
$node->safe_psql(
	'postgres', q{
CREATE TABLE w (id int, c int, v cvec(600));
ALTER TABLE w ALTER v SET STORAGE EXTERNAL;
INSERT INTO w SELECT i, i % 5, (SELECT array_agg(i % 5 + random()::real + 0 * j) FROM generate_series(1, 600) j)
	FROM generate_series(1, 300) i;
ALTER TABLE w ALTER v SET STORAGE MAIN;
INSERT INTO w SELECT i, i % 5, (SELECT array_agg(i % 5 + random()::real + 0 * j) FROM generate_series(1, 600) j)
	FROM generate_series(301, 600) i;
});
is($node->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE pg_column_size(v) < 600 * 4) FROM w}),
	0, 'the wide vectors are not compressed');
cmp_ok($node->safe_psql('postgres', q{
SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'w'}), '>', 0,
	'some wide vectors are out of line');
for my $mwm (qw(64MB 1MB))
{
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET maintenance_work_mem = '$mwm'; SET client_min_messages = debug1;
		 CREATE INDEX w_lat ON w USING cvlattice (v, c)");
	is($rc, 0, "wide vectors at $mwm: built");
	is($err =~ /sorting instead/ ? 1 : 0, $mwm eq '1MB' ? 1 : 0, "wide vectors at $mwm: sorted only at 1MB");
	is($node->psql('postgres', "SELECT cvlattice_verify('w_lat')"), 0, "wide vectors at $mwm: cvlattice_verify");
	is( $node->safe_psql(
			'postgres', q{
SET enable_seqscan = off; SET enable_bitmapscan = off;
CREATE TEMP TABLE got AS SELECT l, ARRAY(SELECT id FROM w WHERE c = l
	ORDER BY v <-> (SELECT v FROM w WHERE id = 7 * l + 1) LIMIT 10) AS ids FROM generate_series(0, 4) l;
SET enable_indexscan = off; SET enable_seqscan = on;
SELECT count(*) FROM got WHERE ids IS DISTINCT FROM ARRAY(SELECT id FROM w WHERE c = l
	ORDER BY v <-> (SELECT v FROM w WHERE id = 7 * l + 1) LIMIT 10);}),
		0, "wide vectors at $mwm: label-filtered answers equal exact search");
	$node->safe_psql('postgres', 'DROP INDEX w_lat');
}

# heap order within each list, read from the data pages
SKIP:
{
	skip 'pageinspect is not installed', 4
	  unless $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'pageinspect'") == 1;
	$node->safe_psql(
		'postgres', qq{
CREATE EXTENSION pageinspect;
-- each data page's tuples: their place, the page's next page and the heap TID
CREATE FUNCTION list_tids(idx text) RETURNS TABLE (blk int, nxt bigint, pos int, last int, tid tid)
LANGUAGE sql AS \$\$
SELECT blk, nxt, pos, last, format('(%s,%s)',
	(get_byte(p, o) + 256 * get_byte(p, o + 1)) * 65536 + get_byte(p, o + 2) + 256 * get_byte(p, o + 3),
	get_byte(p, o + 4) + 256 * get_byte(p, o + 5))::tid
FROM generate_series(0, pg_relation_size(idx::regclass) / 8192 - 1) blk,
	LATERAL (SELECT get_raw_page(idx, blk) AS p) r,
	LATERAL (SELECT get_byte(p, 8188) + 256 * get_byte(p, 8189) AS kind,
	                get_byte(p, 8184) + 256 * get_byte(p, 8185) + 65536 * get_byte(p, 8186)
	                + 16777216::bigint * get_byte(p, 8187) AS nxt,
	                (get_byte(p, 12) + 256 * get_byte(p, 13) - 24) / $tuple - 1 AS last) h,
	LATERAL generate_series(0, last) pos,
	LATERAL (SELECT 24 + pos * $tuple AS o) t
WHERE kind = 4
\$\$;
});
	for my $index (qw(b_spool b_sort))
	{
		is($node->safe_psql('postgres', "SELECT count(*) FROM list_tids('$index')"),
			$indexed, "$index: the pages hold every row");
		is( $node->safe_psql(
				'postgres', qq{
SELECT count(*) FROM list_tids('$index') a JOIN list_tids('$index') b
	ON (b.blk = a.blk AND b.pos = a.pos + 1) OR (b.blk = a.nxt AND b.pos = 0 AND a.pos = a.last)
WHERE b.tid <= a.tid}),
			0, "$index: heap order within each list");
	}
}

done_testing();
