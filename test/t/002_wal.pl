
# WAL replay of cvivf indexes (the pattern of contrib/bloom's t/001_wal.pl):
# a streaming standby must answer index scans exactly as the primary does
# after every kind of change, and its copy must pass cvivf_verify.  A table
# of 6,000 dimensions (a tuple longer than a page) covers multi-page tuples
# and the multi-record append protocol.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $dims = 32;
my $wide = 6000;

my $primary = cv_new_node('primary', allows_streaming => 1);
my $backup_name = 'my_backup';
$primary->backup($backup_name);
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, $backup_name, has_streaming => 1);
$standby->start;

# Query vectors: one near each of 10 centres, and one far from everything.
my @queries =
  map { $primary->safe_psql('postgres', "SELECT cv_keyed_point($_ * 5, $dims, 2.0, $_)") }
  0 .. 9;
push @queries,
  $primary->safe_psql('postgres', 'SELECT ' . cv_vector_sql($dims, 50));
my @wide_queries =
  map { $primary->safe_psql('postgres', "SELECT cv_keyed_point($_, $wide, 2.0, $_)") }
  0 .. 3;

# The answers of index scans, one line per query.
sub index_answers
{
	my ($node, $table, $queries, $probes) = @_;
	my $sql = "SET enable_seqscan = off;\nSET clustervec.probes = $probes;\n";
	for my $q (@$queries)
	{
		$sql .=
		  "SELECT string_agg(id::text, ',') FROM (SELECT id FROM $table ORDER BY v <-> '$q' LIMIT 10) s;\n";
	}
	return $node->safe_psql('postgres', $sql);
}

sub lists_of
{
	my ($node, $index) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(list || ':' || tuples || ':' || coalesce(centroid_norm::text, '-'), ' ' ORDER BY list) FROM cvivf_lists('$index')"
	);
}

sub test_index_replay
{
	my ($test_name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;

	$primary->wait_for_catchup($standby);

	# the primary's scans use the index
	like(
		$primary->safe_psql(
			'postgres',
			"SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT id FROM t ORDER BY v <-> '$queries[0]' LIMIT 10"
		),
		qr/Index Scan using t_v_idx/,
		"$test_name: queries scan the index");
	for my $probes (1, 4)
	{
		my $on_primary = index_answers($primary, 't', \@queries, $probes);
		my $on_standby = index_answers($standby, 't', \@queries, $probes);
		is(scalar(grep { scalar(split /,/) == 10 } split /\n/, $on_primary),
			scalar(@queries),
			"$test_name: every query returns 10 rows, probes = $probes");
		is($on_standby, $on_primary,
			"$test_name: standby answers as the primary, probes = $probes");
	}
	is(
		index_answers($standby, 'w', \@wide_queries, 1),
		index_answers($primary, 'w', \@wide_queries, 1),
		"$test_name: standby answers as the primary, $wide dimensions");
	is(lists_of($standby, 't_v_idx'), lists_of($primary, 't_v_idx'),
		"$test_name: same cvivf_lists on the standby");
	is(lists_of($standby, 'w_v_idx'), lists_of($primary, 'w_v_idx'),
		"$test_name: same cvivf_lists on the standby, $wide dimensions");
	cv_verify_ok($standby, 't_v_idx', "$test_name: cvivf_verify on the standby");
	cv_verify_ok($standby, 'w_v_idx',
		"$test_name: cvivf_verify on the standby, $wide dimensions");
	cv_verify_ok($primary, 't_v_idx', "$test_name: cvivf_verify on the primary");
	is(
		$standby->safe_psql(
			'postgres',
			"SELECT count(*) FROM t"),
		cv_lists_sum($standby, 't_v_idx'),
		"$test_name: the standby's lists count every row");
	return;
}

# the tables and their indexes
cv_load_clustered($primary, 't', rows => 5000, dims => $dims, seed => 0.1);
cv_load_clustered($primary, 'w', rows => 60, dims => $wide, centres => 4,
	seed => 0.2);
$primary->safe_psql(
	'postgres', q{
CREATE INDEX t_v_idx ON t USING cvivf (v) WITH (lists = 40);
CREATE INDEX w_v_idx ON w USING cvivf (v) WITH (lists = 4, sample_rows = 60);
});
test_index_replay('initial');

# inserts: some far from every centre, so one list grows long
$primary->safe_psql(
	'postgres', qq{
SELECT setseed(0.3);
INSERT INTO t SELECT 10000 + i, -1, cv_point(i % 50, $dims, 2.0) FROM generate_series(1, 1500) i;
INSERT INTO t SELECT 20000 + i, -1, (SELECT array_agg((50 + random())::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec
	FROM generate_series(1, 500) i;
INSERT INTO w SELECT 1000 + i, -1, cv_point(i % 4, $wide, 2.0) FROM generate_series(1, 30) i;
});
test_index_replay('inserts');

# deletes and VACUUM
$primary->safe_psql(
	'postgres', q{
DELETE FROM t WHERE id % 4 = 1;
DELETE FROM w WHERE id % 3 = 0;
VACUUM (INDEX_CLEANUP ON) t;
VACUUM (INDEX_CLEANUP ON) w;
});
test_index_replay('delete + vacuum');

# more inserts, into vacuumed heap pages
$primary->safe_psql(
	'postgres', qq{
SELECT setseed(0.4);
INSERT INTO t SELECT 30000 + i, -1, cv_point(i % 50, $dims, 2.0) FROM generate_series(1, 1500) i;
INSERT INTO w SELECT 2000 + i, -1, cv_point(i % 4, $wide, 2.0) FROM generate_series(1, 20) i;
});
test_index_replay('more inserts');

# a rebuild
$primary->safe_psql('postgres', 'REINDEX INDEX t_v_idx; REINDEX INDEX w_v_idx;');
test_index_replay('reindex');

# inserts after the rebuild, in many small transactions
for my $i (1 .. 20)
{
	$primary->safe_psql(
		'postgres', qq{
INSERT INTO t SELECT 40000 + $i * 10 + j, -1, cv_keyed_point(j, $dims, 2.0, $i * 10 + j) FROM generate_series(0, 9) j;
INSERT INTO w SELECT 3000 + $i, -1, cv_keyed_point($i % 4, $wide, 2.0, $i);
});
}
test_index_replay('small transactions after reindex');

$standby->stop;
$primary->stop;
done_testing();
