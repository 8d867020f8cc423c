
# cvivf_retrain in place (src/ivf/retrain.c, ivf.h "Retraining"):
#
#  1. under pgbench clients inserting and searching: no client fails, the
#     retrain copies the rows inserted while it ran, and afterwards every
#     row is in the index once and cvivf_verify passes;
#  2. a standby replays it and answers as the primary does; a standby
#     scan that a replayed retrain overtakes stops with an error, never
#     reads the freed pages;
#  3. a transaction that keeps its snapshot over the switch keeps the old
#     pages from being freed (by the retrain and by VACUUM); once it ends,
#     VACUUM frees them and the next retrain takes them;
#  4. a crash after each of its WAL records leaves the old index or the
#     new one, never a mix (gdb places the crash; skipped without gdb).

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $dims = 16;
my $primary = cv_new_node('retrain_primary', allows_streaming => 1);
$primary->append_conf('postgresql.conf',
	"autovacuum = off\nrestart_after_crash = on\nhot_standby_feedback = off\n");
$primary->restart;
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('retrain_standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"max_standby_streaming_delay = -1\nmax_parallel_workers_per_gather = 0\n");
$standby->start;

sub retrains
{
	my ($node, $index) = @_;
	return $node->safe_psql('postgres',
		"SELECT retrains FROM cvivf_health('$index')");
}

# ---- 1. under load ----
cv_load_clustered($primary, 't', rows => 40000, dims => $dims, centres => 40,
	sigma => 3.0, seed => 0.31);
$primary->safe_psql(
	'postgres', q{
CREATE SEQUENCE t_id_seq START 1000000;
ALTER TABLE t ALTER id SET DEFAULT nextval('t_id_seq');
CREATE INDEX t_v_idx ON t USING cvivf (v) WITH (lists = 40, seed = 5);
});
my %scripts = (
	'insert' => qq{\\set c random(0, 39)
\\set k random(1, 1000000000)
INSERT INTO t (c, v) VALUES (:c, cv_keyed_point(:c, $dims, 3.0, :k) + '[20,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]');
},
	'search' => qq{\\set c random(0, 39)
\\set k random(1, 1000000000)
SELECT id FROM t ORDER BY v <-> cv_keyed_point(:c, $dims, 3.0, :k) LIMIT 10;
},);
my $bench = cv_start_pgbench($primary, '-n -c 4 -j 2 -T 12', \%scripts);
sleep 2;
my $result = cv_sql($primary,
	q{SELECT rows || ' ' || rows_caught_up || ' ' || pages_freed FROM cvivf_retrain('t_v_idx')},
	300);
my $ran_with = cv_running($bench);
my ($rc, $out, $err) = cv_finish_psql($bench);
is($rc, 0, 'pgbench: no client failed during the retrain') or diag $err;
my ($failed) = $out =~ /number of failed transactions: (\d+)/;
is($failed // 0, 0, 'pgbench: no failed transactions');
ok($ran_with, 'the clients were still running when the retrain ended');
my ($rows, $caught_up, $freed) = split / /, $result;
note "retrain under load: $rows rows, $caught_up caught up, $freed pages freed";
ok($caught_up > 0, "the retrain copied rows inserted while it ran ($caught_up)");
is(retrains($primary, 't_v_idx'), 1, 'the index is on its first retrained generation');
cv_verify_ok($primary, 't_v_idx', 'under load: cvivf_verify');
cv_reachable_ok($primary, 't', 't_v_idx', name => 'under load');
is(cv_lists_sum($primary, 't_v_idx'),
	$primary->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'under load: cvivf_lists tuples sum to count(*)');

# ---- 2. the standby ----
$primary->wait_for_catchup($standby, 'replay');
is(retrains($standby, 't_v_idx'), 1, 'standby: replayed the switch');
my $q = "SELECT id FROM t ORDER BY v <-> cv_keyed_point(7, $dims, 3.0, 99) LIMIT 20";
is($standby->safe_psql('postgres', "SET clustervec.probes = 4; $q"),
	$primary->safe_psql('postgres', "SET clustervec.probes = 4; $q"),
	'standby: the same answers as the primary');
cv_reachable_ok($standby, 't', 't_v_idx', name => 'standby');

# a standby cursor that read the old generation, then a retrain replays
my $cursor = $standby->background_psql('postgres', on_error_stop => 0);
$cursor->query_safe(q{SET clustervec.probes = 1});
$cursor->query_safe(q{SET clustervec.iterative_scan = relaxed_order});
$cursor->query_safe(q{BEGIN});
$cursor->query_safe(
	"DECLARE c CURSOR FOR SELECT id FROM t ORDER BY v <-> cv_keyed_point(3, $dims, 3.0, 5)");
$cursor->query_safe(q{FETCH 5 FROM c});
cv_sql($primary, q{SELECT rows FROM cvivf_retrain('t_v_idx')}, 300);
$primary->wait_for_catchup($standby, 'replay');
$cursor->query(q{FETCH ALL FROM c});
like($cursor->{stderr}, qr/conflict with recovery.*retrained on the primary/s,
	'standby: a scan overtaken by a replayed retrain stops with an error');
$cursor->quit;
is($standby->safe_psql('postgres', "SET clustervec.probes = 4; $q"),
	$primary->safe_psql('postgres', "SET clustervec.probes = 4; $q"),
	'standby: the same answers after the second retrain');

# ---- 3. old pages wait for old snapshots ----
# rows deleted first, so that the VACUUMs below run the index's bulk delete
$primary->safe_psql('postgres', 'DELETE FROM t WHERE id % 89 = 0');
my $holder = $primary->background_psql('postgres');
$holder->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ});
$holder->query_safe(
	"SELECT count(*) FROM (SELECT id FROM t ORDER BY v <-> cv_keyed_point(1, $dims, 3.0, 1) LIMIT 3) s");
my $size_before = $primary->safe_psql('postgres', q{SELECT pg_relation_size('t_v_idx')});
($rc, $out, $err) = $primary->psql('postgres',
	q{SELECT old_pages || ' ' || pages_freed FROM cvivf_retrain('t_v_idx')});
my ($old_pages, $none_freed) = split / /, $out;
is($none_freed, 0, 'an open transaction that read the index: the retrain frees nothing');
like($err, qr/left for VACUUM/, 'the retrain says the old pages are left for VACUUM');
($rc, $out, $err) = $primary->psql('postgres', 'VACUUM (VERBOSE, INDEX_CLEANUP ON) t');
like($err, qr/index scan needed/, 'VACUUM ran the bulk delete');
my ($newly) = $err =~ /index "t_v_idx": pages: \d+ in total, (\d+) newly deleted/;
is($newly // 'none', 0, 'VACUUM frees nothing while that snapshot lives');
$holder->query_safe(q{COMMIT});
$holder->quit;
$primary->safe_psql('postgres', 'DELETE FROM t WHERE id % 97 = 0');
($rc, $out, $err) = $primary->psql('postgres', 'VACUUM (VERBOSE, INDEX_CLEANUP ON) t');
($newly) = $err =~ /index "t_v_idx": pages: \d+ in total, (\d+) newly deleted/;
ok(defined $newly && $newly >= $old_pages,
	"after it ended, VACUUM frees the old generation ($old_pages pages; "
	  . ($newly // 'none') . ' freed)');
cv_verify_ok($primary, 't_v_idx', 'after VACUUM freed the old generation: cvivf_verify');
cv_reachable_ok($primary, 't', 't_v_idx', name => 'after VACUUM freed the old generation');
my $size_vacuumed = $primary->safe_psql('postgres', q{SELECT pg_relation_size('t_v_idx')});
cv_sql($primary, q{SELECT rows FROM cvivf_retrain('t_v_idx')}, 300);
my $size_after = $primary->safe_psql('postgres', q{SELECT pg_relation_size('t_v_idx')});
ok($size_after - $size_vacuumed < 0.2 * $size_vacuumed,
	"the next retrain takes the freed pages ($size_vacuumed -> $size_after bytes)");
$primary->wait_for_catchup($standby, 'replay');
cv_reachable_ok($standby, 't', 't_v_idx', name => 'standby after VACUUM and a retrain');

# ---- 4. a crash after each record ----
SKIP:
{
	skip 'gdb cannot attach to a backend here', 1 unless cv_gdb_can_attach($primary);
	cv_load_clustered($primary, 'small', rows => 600, dims => 4, centres => 6,
		seed => 0.41);
	$primary->safe_psql('postgres',
		'CREATE INDEX small_idx ON small USING cvivf (v) WITH (lists = 3, seed = 1)');
	$primary->safe_psql('postgres',
		'INSERT INTO small (id, c, v) SELECT 1000 + i, i % 6, cv_keyed_point(i % 6, 4, 1.0, i) + \'[30,30,30,30]\' FROM generate_series(1, 300) i');
	my $count = $primary->safe_psql('postgres', 'SELECT count(*) FROM small');
	my $generation = retrains($primary, 'small_idx');
	my $hits = 0;
	my %seen;
	for my $record (1 .. 80)
	{
		my $gdb = cv_crash_at_record($primary, $record,
			q{SELECT * FROM cvivf_retrain('small_idx')});
		last if $gdb !~ /Breakpoint 1, /;
		$hits++;
		my $now = retrains($primary, 'small_idx');
		$seen{$now}++;
		my $ok = ($now == $generation || $now == $generation + 1);
		my ($vrc, $vout, $verr) = $primary->psql('postgres', q{SELECT cvivf_verify('small_idx')});
		my $reach = $primary->safe_psql(
			'postgres', qq{
SET enable_seqscan = off; SET clustervec.probes = 100; SET clustervec.max_probes = -1;
SELECT count(*) || ' ' || count(DISTINCT id) FROM (SELECT id FROM small ORDER BY v <-> '[0,0,0,0]' LIMIT 100000) s});
		$ok &&= $vrc == 0 && $reach eq "$count $count";
		ok($ok, "crash after record $record: generation $now, verify $vrc, rows $reach")
		  or diag $verr;
		# back to the old generation for the next window
		if ($now != $generation)
		{
			$primary->safe_psql('postgres', 'REINDEX INDEX small_idx');
			$generation = retrains($primary, 'small_idx');
		}
	}
	ok($hits >= 6, "crashes placed after each of the retrain's $hits records");
	ok($seen{$generation} && scalar(keys %seen) == 2,
		'crashes left the old generation and the new one: ' . join(', ', map { "$_ x$seen{$_}" } sort keys %seen));
	# what a crashed retrain wrote is reclaimed, and a retrain then works
	$primary->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) small');
	cv_verify_ok($primary, 'small_idx', 'after the crashes and VACUUM: cvivf_verify');
	is($primary->safe_psql('postgres', q{SELECT rows FROM cvivf_retrain('small_idx')}),
		$count, 'after the crashes: a retrain copies every row');
}

$standby->stop;
$primary->stop;
done_testing();
