
# REINDEX INDEX CONCURRENTLY and CREATE INDEX CONCURRENTLY of cvivf indexes
# while pgbench inserts rows: both depend on ambulkdelete handing every
# index tuple to its callback (validate_index), so the new index must hold
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
my $node = cv_new_node('reindex');
$node->append_conf('postgresql.conf', "autovacuum = off\nlog_statement = ddl\n");
$node->restart;

cv_load_clustered($node, 't', rows => 10000, dims => $dims, sigma => 4.0,
	seed => 0.6);
$node->safe_psql(
	'postgres', q{
CREATE SEQUENCE t_id_seq START 1000000;
ALTER TABLE t ALTER id SET DEFAULT nextval('t_id_seq');
CREATE INDEX t_v_idx ON t USING cvivf (v) WITH (lists = 40);
});

my $insert_script = qq{\\set c random(0, 49)
\\set k random(1, 1000000000)
INSERT INTO t (c, v) VALUES (:c, cv_keyed_point(:c, $dims, 4.0, :k));
INSERT INTO t (c, v) VALUES (:c, cv_keyed_point(:c, $dims, 4.0, :k + 1));
};

# Inserts from two clients for the whole test.
my $pgbench = cv_start_pgbench($node, '-n -c 2 -j 2 -T 10',
	{ 'insert.sql' => $insert_script });
my $count = sub { $node->safe_psql('postgres', 'SELECT count(*) FROM t') };
$node->poll_query_until('postgres', 'SELECT count(*) > 10200 FROM t')
  or die 'pgbench inserts nothing';

# REINDEX CONCURRENTLY, twice, each while rows arrive
for my $i (1, 2)
{
	my $before = $count->();
	my $relfilenode = $node->safe_psql('postgres',
		"SELECT relfilenode FROM pg_class WHERE relname = 't_v_idx'");
	$node->safe_psql('postgres', 'REINDEX INDEX CONCURRENTLY t_v_idx');
	my $after = $count->();
	cmp_ok($after, '>', $before,
		"REINDEX CONCURRENTLY $i ran while rows were inserted ($before -> $after)");
	isnt(
		$node->safe_psql('postgres',
			"SELECT relfilenode FROM pg_class WHERE relname = 't_v_idx'"),
		$relfilenode,
		"REINDEX CONCURRENTLY $i made a new index");
}

# CREATE INDEX CONCURRENTLY of a second index (inner product, so queries
# ordered by <#> use it and queries ordered by <-> the first)
{
	my $before = $count->();
	$node->safe_psql('postgres',
		'CREATE INDEX CONCURRENTLY t_v_ip ON t USING cvivf (v cvec_ip_ops) WITH (lists = 40)'
	);
	my $after = $count->();
	cmp_ok($after, '>', $before,
		"CREATE INDEX CONCURRENTLY ran while rows were inserted ($before -> $after)");
}

# REINDEX TABLE CONCURRENTLY (both cvivf indexes and the primary key)
{
	my $before = $count->();
	$node->safe_psql('postgres', 'REINDEX TABLE CONCURRENTLY t');
	my $after = $count->();
	cmp_ok($after, '>', $before,
		"REINDEX TABLE CONCURRENTLY ran while rows were inserted ($before -> $after)");
}

# and more REINDEX CONCURRENTLY for as long as the inserts go on
my $rebuilds = 0;
while (cv_running($pgbench) && $rebuilds < 100)
{
	$node->safe_psql('postgres', 'REINDEX INDEX CONCURRENTLY t_v_idx');
	$rebuilds++;
}
note "$rebuilds more REINDEX INDEX CONCURRENTLY while pgbench ran";

my ($rc, $out, $err) = cv_finish_psql($pgbench);
is($rc, 0, 'pgbench exit status 0');
like($out, qr/number of failed transactions: 0 /,
	'pgbench: no failed transactions');
unlike($err, qr/error|abort/i, 'pgbench: no errors');
note "pgbench: " . join(' ', grep { /transactions actually processed|tps/ } split /\n/, $out);

is(
	$node->safe_psql('postgres',
		"SELECT count(*) FROM pg_index WHERE NOT indisvalid OR NOT indisready"),
	0,
	'no invalid index left behind');
for my $index (qw(t_v_idx t_v_ip))
{
	cv_verify_ok($node, $index, "cvivf_verify($index)");
	is(cv_lists_sum($node, $index), $count->(),
		"$index lists count every row once");
}
cv_reachable_ok($node, 't', 't_v_idx', op => '<->',
	name => 'after concurrent rebuilds');
cv_reachable_ok($node, 't', 't_v_ip', op => '<#>',
	name => 'after CREATE INDEX CONCURRENTLY');

# the rebuilt indexes answer like the exact scan at full probes
my $q = $node->safe_psql('postgres', "SELECT cv_keyed_point(7, $dims, 4.0, 99)");
for my $case (['t_v_idx', '<->'], ['t_v_ip', '<#>'])
{
	my ($index, $op) = @$case;
	my $lists = cv_lists_count($node, $index);
	is(
		$node->safe_psql(
			'postgres', qq{
SET enable_seqscan = off;
SET clustervec.probes = $lists;
SELECT string_agg(id::text, ',') FROM (SELECT id FROM t ORDER BY v $op '$q', id LIMIT 10) s;
}),
		$node->safe_psql(
			'postgres', qq{
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SELECT string_agg(id::text, ',') FROM (SELECT id FROM t ORDER BY v $op '$q', id LIMIT 10) s;
}),
		"$index at full probes returns the exact nearest rows");
}

$node->stop;
done_testing();
