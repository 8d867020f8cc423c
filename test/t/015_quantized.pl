
# Quantized cvivf lists (quantization = sq8) under WAL replay and crashes.
# A streaming standby must answer as the primary does after inserts (rows
# with no code), deletes with VACUUM (codes flagged dead) and inserts that
# fill coded slots (codes rewritten in the record that makes the tuple
# live).  Then the primary is stopped in immediate mode while sessions
# insert, delete and vacuum: after recovery every committed row is found
# once through the index (every list probed), the answers equal exact
# search, and cvivf_verify, which checks every code against its vector,
# passes.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $dims = 24;
my $primary = cv_new_node('primary', allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_buffers = 2MB\nautovacuum = off\n");
$primary->restart;
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

cv_load_clustered($primary, 'q', rows => 6000, dims => $dims, seed => 0.3);
$primary->safe_psql('postgres',
	"CREATE INDEX q_v_idx ON q USING cvivf (v) WITH (lists = 30, quantization = sq8)");
my @queries =
  map { $primary->safe_psql('postgres', "SELECT cv_keyed_point($_ * 3, $dims, 2.0, $_ + 77)") }
  0 .. 11;

# Top 10 ids and distances of every query: through the index, or exact.
sub answers
{
	my ($node, $exact) = @_;
	my $sql = "SET clustervec.probes = 30; SET clustervec.iterative_scan = off;\n"
	  . ($exact ? "SET enable_indexscan = off;\n" : "SET enable_seqscan = off;\n");
	$sql .= "SELECT string_agg(id || ':' || d, ',') FROM "
	  . "(SELECT id, v <-> '$_' AS d FROM q ORDER BY v <-> '$_' LIMIT 10) s;\n"
	  for @queries;
	return $node->safe_psql('postgres', $sql);
}

sub check_replay
{
	my ($step) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$primary->wait_for_catchup($standby);
	my $exact = answers($primary, 1);
	is(answers($primary, 0), $exact, "$step: the primary's index answers exactly");
	is(answers($standby, 0), $exact, "$step: the standby's index answers as the primary");
	cv_verify_ok($primary, 'q_v_idx', "$step: cvivf_verify");
}

check_replay('build');
cv_load_clustered($primary, 'q', rows => 500, dims => $dims, seed => 0.4,
	first_id => 100001, no_create => 1);
check_replay('inserts after the build');
$primary->safe_psql('postgres', 'DELETE FROM q WHERE id % 4 = 1; VACUUM q');
check_replay('deletes and VACUUM');
my $size_before = $primary->safe_psql('postgres', "SELECT pg_relation_size('q_v_idx')");
cv_load_clustered($primary, 'q', rows => 1500, dims => $dims, seed => 0.5,
	first_id => 200001, no_create => 1);
check_replay('inserts filling coded slots');
my $growth = $primary->safe_psql('postgres', "SELECT pg_relation_size('q_v_idx')") - $size_before;
# appended, all 1,500 tuples (8-byte header, 4 bytes per element) would take 1,500 * 104 bytes
cmp_ok($growth, '<', 1500 * (8 + 4 * $dims),
	"the refills went partly into freed slots (index grew $growth bytes)");

# Crashes in the middle of inserts, deletes and VACUUM.
for my $round (1 .. 3)
{
	my $base = 1_000_000 * $round;
	my $writer = cv_start_psql($primary, qq{DO \$\$
BEGIN
	FOR i IN 0 .. 999999 LOOP
		INSERT INTO q (id, c, v) SELECT $base + i * 5 + j, 0,
			cv_keyed_point((($base + i * 5 + j) % 50)::int, $dims, 2.0, $base + i * 5 + j)
			FROM generate_series(1, 5) j;
		COMMIT;
	END LOOP;
END \$\$;});
	my $deleter = cv_start_psql($primary, qq{DO \$\$
BEGIN
	FOR i IN 1 .. 100000 LOOP
		DELETE FROM q WHERE id IN (SELECT id FROM q WHERE id % 7 = $round ORDER BY id LIMIT 20);
		COMMIT;
	END LOOP;
END \$\$;});
	$primary->safe_psql('postgres', 'SELECT pg_sleep(0.5); VACUUM q; SELECT pg_sleep(0.3)');
	$primary->stop('immediate');
	cv_finish_psql($writer);
	cv_finish_psql($deleter);
	$primary->start;
	is( $primary->safe_psql('postgres',
			"SET enable_seqscan = off; SET clustervec.probes = 30; SET clustervec.iterative_scan = off;"
			  . " SELECT count(*), count(DISTINCT id) FROM (SELECT id FROM q ORDER BY v <-> '$queries[0]') s"),
		$primary->safe_psql('postgres', 'SELECT count(*), count(*) FROM q'),
		"crash $round: every committed row found once through the index");
	is(answers($primary, 0), answers($primary, 1), "crash $round: answers equal exact search");
	cv_verify_ok($primary, 'q_v_idx', "crash $round: cvivf_verify");
	$primary->safe_psql('postgres', 'VACUUM q');
	cv_verify_ok($primary, 'q_v_idx', "crash $round: cvivf_verify after VACUUM");
}
$primary->wait_for_catchup($standby);
is(answers($standby, 0), answers($primary, 1), 'the standby followed every crash');

done_testing();
