
# Space reuse under concurrency (issue 14, item 1): pgbench clients insert
# rows (into slots VACUUM freed, or at the ends of the lists), delete
# batches of rows, search, and run VACUUM with index cleanup, all at once,
# on a table with a cvivf and a cvlattice index.  No client may fail; then
# both indexes must pass their verify functions (which check the reuse
# entries too), hold every row exactly once, and stay near the size the
# table's rows need: the freed slots were used.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $dims = 16;
my $node = cv_new_node('reuse_concurrency');
$node->append_conf('postgresql.conf', "autovacuum = off\n");
$node->restart;

cv_load_clustered($node, 't', rows => 20000, dims => $dims, centres => 20, seed => 0.4);
$node->safe_psql(
	'postgres', q{
CREATE SEQUENCE t_id_seq START 1000000;
ALTER TABLE t ALTER id SET DEFAULT nextval('t_id_seq');
CREATE INDEX t_ivf ON t USING cvivf (v) WITH (lists = 20);
CREATE INDEX t_lat ON t USING cvlattice (v, c);
});
my $size_sql = q{SELECT pg_relation_size('t_ivf') || ' ' || pg_relation_size('t_lat')};
my ($ivf0, $lat0) = split / /, $node->safe_psql('postgres', $size_sql);

# deletes remove about as many rows as inserts add
my %scripts = (
	'insert@8' => qq{\\set c random(0, 19)
\\set k random(1, 1000000000)
INSERT INTO t (c, v) VALUES (:c, cv_keyed_point(:c, $dims, 2.0, :k));
},
	'delete@1' => q{\set c random(0, 19)
DELETE FROM t WHERE id IN (SELECT id FROM t WHERE c = :c LIMIT 8);
},
	'search@4' => qq{\\set c random(0, 19)
\\set k random(1, 1000000000)
SET clustervec.probes = 20;
SELECT id FROM t ORDER BY v <-> cv_keyed_point(:c, $dims, 2.0, :k) LIMIT 10;
SELECT id FROM t WHERE c = :c ORDER BY v <-> cv_keyed_point(:c, $dims, 2.0, :k) LIMIT 10;
},
	'vacuum@1' => q{VACUUM (INDEX_CLEANUP ON) t;
},);

$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --time=15',
	0,
	[
		qr{processed: [1-9]\d*},
		qr{number of failed transactions: 0 \(0\.000%\)},
	],
	[qr{^$}],
	'pgbench: inserts, deletes, searches and VACUUM at once',
	\%scripts);

$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) t');
cv_verify_ok($node, 't_ivf', 'cvivf_verify after the load');
is($node->safe_psql('postgres', q{SELECT cvlattice_verify('t_lat')}), '',
	'cvlattice_verify after the load');
my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
is(cv_lists_sum($node, 't_ivf'), $rows, "cvivf lists count the table's $rows rows");
is($node->safe_psql('postgres', q{SELECT sum(members) FROM cvlattice_lists('t_lat')}),
	$rows, 'cvlattice lists count them too');

my $inserted = $node->safe_psql('postgres', q{SELECT last_value - 999999 FROM t_id_seq});
my ($ivf1, $lat1) = split / /, $node->safe_psql('postgres', $size_sql);
note("$inserted rows inserted, $rows rows now; cvivf $ivf0 -> $ivf1 bytes, cvlattice $lat0 -> $lat1 bytes");
cmp_ok($inserted, '>', 2000, 'the load inserted rows');
# Without reuse each index would grow by the inserted tuples' bytes (8 + 4
# per dimension each).  Rows deleted but not yet vacuumed when a row comes
# still hold their slots, so some rows are appended, and an append may
# start a page in any of the 20 lists: the growth stays under a quarter of
# those bytes plus a page per list.
my $bound = $inserted * (8 + 4 * $dims) / 4 + 20 * 8192;
cmp_ok($ivf1 - $ivf0, '<', $bound, 'the cvivf index reused the freed slots');
cmp_ok($lat1 - $lat0, '<', $bound, 'the cvlattice index too');

# (without the cvlattice index, which the planner may prefer for the scan)
$node->safe_psql('postgres', 'DROP INDEX t_lat');
cv_reachable_ok($node, 't', 't_ivf', name => 'every row reachable through cvivf once');

$node->stop;
done_testing();
