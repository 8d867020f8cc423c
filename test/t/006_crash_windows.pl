
# Crashes at chosen points between the WAL records of one cvivf operation,
# placed with gdb (skipped where gdb is missing or cannot attach):
#
#  1. VACUUM: after some data pages have their tuples flagged dead, before
#     the operation ends.  The flags already written are durable (another
#     session's commit flushes the WAL), then the backend is killed.
#  2. INSERT of a 12,000-dimension vector (a tuple over six pages):
#     after the record that writes its continuation pages, before the
#     record that links them.  VACUUM then reclaims the pages left on no
#     chain, and the next wide insert takes them instead of new pages.
#  3. INSERT of such a vector into a dead slot VACUUM freed: after the
#     record that writes the slot's continuation pages, before the one
#     that writes its header and makes it live.
#
# After crash recovery the index must pass cvivf_verify, hold every row
# exactly once, and (after a full VACUUM) count exactly the table's rows.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

if (system('gdb --version >/dev/null 2>&1') != 0)
{
	plan skip_all => 'gdb is not installed';
}

my $node = cv_new_node('windows');
$node->append_conf('postgresql.conf',
	"restart_after_crash = on\nautovacuum = off\n");
$node->restart;
$node->safe_psql('postgres', 'CREATE TABLE cv_marker (x int)');

# gdb must be able to attach to a backend (ptrace may be forbidden)
if (!cv_gdb_can_attach($node))
{
	$node->stop;
	plan skip_all => 'gdb cannot attach to a backend here';
}

# 1. a crash in the middle of VACUUM's pass over the index
cv_load_clustered($node, 'vt', rows => 30000, dims => 16, seed => 0.1);
$node->safe_psql(
	'postgres', q{
CREATE INDEX vt_v_idx ON vt USING cvivf (v) WITH (lists = 50);
DELETE FROM vt WHERE id % 2 = 0;
CHECKPOINT;
});
# PARALLEL 0: the index pass runs in this backend, not in a worker
my $gdb = cv_crash_at_record($node, 21, 'VACUUM (INDEX_CLEANUP ON, PARALLEL 0) vt');
like($gdb, qr/Breakpoint 1, [^\n]*GenericXLogFinish/,
	'VACUUM: stopped at its 21st GenericXLog record');
like($gdb, qr/cvivf|bulkdelete|mark_dead/i, 'VACUUM: the record was cvivf\'s');
like(slurp_file($node->logfile), qr/terminated by signal 9/,
	'VACUUM: the backend was killed');
cv_verify_ok($node, 'vt_v_idx', 'VACUUM, crash: cvivf_verify after recovery');
cv_reachable_ok($node, 'vt', 'vt_v_idx', name => 'VACUUM, crash');
$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) vt');
cv_verify_ok($node, 'vt_v_idx', 'VACUUM, crash, VACUUM: cvivf_verify');
is(cv_lists_sum($node, 'vt_v_idx'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM vt'),
	'VACUUM, crash, VACUUM: cvivf_lists tuples sum to count(*)');

# 2. a crash between the records of one wide insert
my $wide = 12000;    # 48 kB: always continuation pages in a record of their own
cv_load_clustered($node, 'w', rows => 12, dims => $wide, centres => 2,
	seed => 0.2);
$node->safe_psql('postgres',
	'CREATE INDEX w_v_idx ON w USING cvivf (v) WITH (lists = 2, sample_rows = 12)');
my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM w');
$gdb = cv_crash_at_record($node, 2,
	"INSERT INTO w (id, v) VALUES (100, cv_keyed_point(1, $wide, 2.0, 100))");
like($gdb, qr/Breakpoint 1, [^\n]*GenericXLogFinish/,
	'wide INSERT: stopped at its second GenericXLog record');
like($gdb, qr/cvivf_append_tuple|write_linking_record|write_unlinked_pages/,
	'wide INSERT: the record was the append\'s');
is($node->safe_psql('postgres', 'SELECT count(*) FROM w'),
	$before, 'wide INSERT, crash: the row is not there');
cv_verify_ok($node, 'w_v_idx', 'wide INSERT, crash: cvivf_verify');
cv_reachable_ok($node, 'w', 'w_v_idx', name => 'wide INSERT, crash');

# the unlinked pages (written, or extended and never written) are reclaimed
# (the aborted row's heap tuple is dead, so VACUUM runs the bulk delete)
my $size_sql = q{SELECT pg_relation_size('w_v_idx')};
my ($rc, $out, $err) =
  $node->psql('postgres', 'VACUUM (VERBOSE, INDEX_CLEANUP ON) w');
my ($newly) = $err =~ /index "w_v_idx": pages: \d+ in total, (\d+) newly deleted/;
ok(defined $newly && $newly >= 4,
	'wide INSERT, crash, VACUUM: the unlinked pages are reclaimed ('
	  . ($newly // 'none') . ')');
like($err, qr/index "w_v_idx": pages: \d+ in total, \d+ newly deleted, (\d+) currently deleted, \1 reusable/,
	'wide INSERT, crash, VACUUM: the reclaimed pages are reusable');
cv_verify_ok($node, 'w_v_idx', 'wide INSERT, crash, VACUUM: cvivf_verify');
my $vacuumed_size = $node->safe_psql('postgres', $size_sql);
$node->safe_psql('postgres',
	"INSERT INTO w (id, v) VALUES (101, cv_keyed_point(1, $wide, 2.0, 101))");
is($node->safe_psql('postgres', $size_sql),
	$vacuumed_size, 'wide INSERT, crash, VACUUM, INSERT: the insert took reclaimed pages');
cv_verify_ok($node, 'w_v_idx', 'wide INSERT, crash, VACUUM, INSERT: cvivf_verify');
cv_reachable_ok($node, 'w', 'w_v_idx', name => 'wide INSERT, crash, VACUUM, INSERT');
$node->safe_psql(
	'postgres', qq{
INSERT INTO w (id, v) SELECT 200 + j, cv_keyed_point(j % 2, $wide, 2.0, 200 + j) FROM generate_series(1, 6) j;
});
cv_verify_ok($node, 'w_v_idx', 'wide INSERT, crash, inserts: cvivf_verify');
cv_reachable_ok($node, 'w', 'w_v_idx', name => 'wide INSERT, crash, inserts');
$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) w');
is(cv_lists_sum($node, 'w_v_idx'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM w'),
	'wide INSERT, crash, VACUUM: cvivf_lists tuples sum to count(*)');

# 3. a crash between the records of one wide insert into a dead slot
$node->safe_psql('postgres',
	'DELETE FROM w WHERE id > 200; VACUUM (INDEX_CLEANUP ON) w; CHECKPOINT');
$before = $node->safe_psql('postgres', 'SELECT count(*) FROM w');
my $filled_size = $node->safe_psql('postgres', $size_sql);
$gdb = cv_crash_at_record($node, 2,
	"INSERT INTO w (id, v) VALUES (300, cv_keyed_point(0, $wide, 2.0, 300))");
like($gdb, qr/write_fill|fill_dead_slot/,
	'wide INSERT into a dead slot: stopped in the fill\'s second record');
is($node->safe_psql('postgres', 'SELECT count(*) FROM w'),
	$before, 'wide INSERT into a dead slot, crash: the row is not there');
cv_verify_ok($node, 'w_v_idx', 'wide INSERT into a dead slot, crash: cvivf_verify');
cv_reachable_ok($node, 'w', 'w_v_idx', name => 'wide INSERT into a dead slot, crash');
$node->safe_psql(
	'postgres', qq{
INSERT INTO w (id, v) SELECT 300 + j, cv_keyed_point(j % 2, $wide, 2.0, 300 + j) FROM generate_series(1, 6) j;
});
is($node->safe_psql('postgres', $size_sql),
	$filled_size, 'wide INSERT into a dead slot, crash, inserts: they filled the dead slots');
cv_verify_ok($node, 'w_v_idx', 'wide INSERT into a dead slot, crash, inserts: cvivf_verify');
cv_reachable_ok($node, 'w', 'w_v_idx',
	name => 'wide INSERT into a dead slot, crash, inserts');
$node->safe_psql('postgres', 'VACUUM (INDEX_CLEANUP ON) w');
is(cv_lists_sum($node, 'w_v_idx'),
	$node->safe_psql('postgres', 'SELECT count(*) FROM w'),
	'wide INSERT into a dead slot, crash, VACUUM: cvivf_lists tuples sum to count(*)');

$node->stop;
done_testing();
