
# Concurrency: pgbench clients insert random clustered vectors, search
# with ORDER BY v <-> q LIMIT 10, delete rows and VACUUM, all at once; no
# client may fail, and afterwards the index must pass cvivf_verify and hold
# every row exactly once.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $dims = 32;
my $node = cv_new_node('pgbench');
$node->append_conf('postgresql.conf', "log_statement = ddl\n");
$node->restart;

cv_load_clustered($node, 't', rows => 10000, dims => $dims, sigma => 4.0,
	seed => 0.7);
$node->safe_psql(
	'postgres', q{
CREATE SEQUENCE t_id_seq START 1000000;
ALTER TABLE t ALTER id SET DEFAULT nextval('t_id_seq');
CREATE INDEX t_v_idx ON t USING cvivf (v) WITH (lists = 50);
});

# the search script's query is an index scan
like(
	$node->safe_psql(
		'postgres',
		"EXPLAIN (COSTS OFF) SELECT id FROM t ORDER BY v <-> cv_keyed_point(3, $dims, 4.0, 17) LIMIT 10"
	),
	qr/Index Scan using t_v_idx on t/,
	'the search script scans the index');

my %scripts = (
	'insert@6' => qq{\\set c random(0, 49)
\\set k random(1, 1000000000)
INSERT INTO t (c, v) VALUES (:c, cv_keyed_point(:c, $dims, 4.0, :k));
},
	'search@6' => qq{\\set c random(0, 49)
\\set k random(1, 1000000000)
\\set probes random(1, 12)
SET clustervec.probes = :probes;
SELECT id FROM t ORDER BY v <-> cv_keyed_point(:c, $dims, 4.0, :k) LIMIT 10;
},
	'filtered@2' => qq{\\set c random(0, 49)
\\set k random(1, 1000000000)
SET clustervec.probes = 1;
SELECT id FROM t WHERE c = :c ORDER BY v <-> cv_keyed_point((:c + 1) % 50, $dims, 4.0, :k) LIMIT 10;
},
	'delete@1' => q{\set id random(1, 10000)
DELETE FROM t WHERE id = :id;
},
	'vacuum@1' => q{VACUUM t;
},);

$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --time=15',
	0,
	[
		qr{processed: [1-9]\d*},
		qr{number of failed transactions: 0 \(0\.000%\)},
	],
	[qr{^$}],
	'pgbench: inserts, searches, filtered searches, deletes and VACUUM',
	\%scripts);

# a clean VACUUM, then the structure and the contents
$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) t');
cv_verify_ok($node, 't_v_idx', 'cvivf_verify after pgbench');
my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
cmp_ok($rows, '>', 10000, "rows were inserted ($rows)");
is(cv_lists_sum($node, 't_v_idx'), $rows,
	'after VACUUM, cvivf_lists tuples sum to count(*)');
cv_reachable_ok($node, 't', 't_v_idx', name => 'after pgbench');

# delete a third of the rows, VACUUM, check again
$node->safe_psql('postgres', 'DELETE FROM t WHERE id % 3 = 0; VACUUM (INDEX_CLEANUP ON) t;');
cv_verify_ok($node, 't_v_idx', 'cvivf_verify after deleting a third and VACUUM');
$rows = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
is(cv_lists_sum($node, 't_v_idx'), $rows,
	'after deleting a third and VACUUM, cvivf_lists tuples sum to count(*)');
cv_reachable_ok($node, 't', 't_v_idx', name => 'after deleting a third');

# The index answers as exact search at full probes, after all that.
my $lists = cv_lists_count($node, 't_v_idx');
my $exact_sql = join '',
  map { "SELECT string_agg(id::text, ',') FROM (SELECT id FROM t ORDER BY v <-> cv_keyed_point($_, $dims, 4.0, $_ + 500), id LIMIT 10) s;\n" }
  0 .. 9;
is(
	$node->safe_psql('postgres',
		"SET enable_seqscan = off; SET clustervec.probes = $lists;\n$exact_sql"),
	$node->safe_psql('postgres',
		"SET enable_indexscan = off; SET enable_bitmapscan = off;\n$exact_sql"),
	'index at full probes returns the exact nearest rows');

# cvivf_verify while rows are being inserted: the index is sound, so it
# must not report corruption (it reads each list's directory entry once
# and then walks the list while appends continue).
$node->pgbench(
	'--no-vacuum --client=3 --jobs=2 --time=5',
	0,
	[ qr{number of failed transactions: 0 \(0\.000%\)} ],
	[qr{^$}],
	'pgbench: cvivf_verify concurrent with inserts reports no corruption',
	{
		'insert2@3' => $scripts{'insert@6'},
		'verify@1' => q{SELECT cvivf_verify('t_v_idx');
},
	});

$node->stop;
done_testing();
