
# The GPU worker and its protocol, run without a GPU: the worker opens
# clustervec_cuda_cpu (the CPU implementation of the library API), so every
# request travels the whole path (ring slot, staging buffer, worker, answer).
#
# - the worker is in pg_stat_activity (no database) and reports itself ready;
# - clustervec_gpu_ping answers and the request counter grows;
# - cvsearch_exact answers exactly as the CPU path does under clustervec.gpu
#   auto and require (k within and beyond what the worker serves, several
#   query groups, a table larger than one staging buffer);
# - 20 concurrent pgbench clients: every request answered, none failed,
#   every answer equal to the CPU path's;
# - statement_timeout and pg_cancel_backend during a request: a clean ERROR,
#   and the session and the worker go on working;
# - a library path that does not exist: worker unavailable (the reason names
#   the path), the CPU path answers, require errors;
# - no shared_preload_libraries: backend 'none' with a reason, the CPU path
#   answers, require errors.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# CV_GPU_LIBRARY=clustervec_cuda runs the same scenarios on a real GPU
# (test/gpu on the H200); the default is the CPU implementation.
my $gpu_library = cv_gpu_library();
my $gpu_backend = $gpu_library eq 'clustervec_cuda' ? 'cuda' : 'cpu-shim';
use Time::HiRes qw(time usleep);

my $dims = 32;
my $wide_dims = 1536;

my $node = cv_gpu_node('gpu_worker', qq{
max_connections = 60
log_statement = none
});

sub sql { return cv_sql($node, @_); }
sub try_sql { return cv_try_sql($node, @_); }
sub wait_for { return cv_wait_for($node, @_); }

sub counters
{
	return split /\|/,
	  sql('SELECT gpu_requests, cpu_fallbacks FROM clustervec_gpu_info()');
}

# "rows md5" of an exact search of $table for the first $nq queries of
# $qtable, under clustervec.gpu = $mode
sub digest
{
	my ($mode, $table, $qtable, $nq, $k) = @_;
	return sql(
		qq{SET clustervec.gpu = $mode;
SELECT count(*) || ' ' || md5(string_agg(concat_ws(' ', query_no, rank, tid, distance), ','
                                           ORDER BY query_no, rank))
FROM cvsearch_exact('$table', 'v', (SELECT array_agg(v ORDER BY qid) FROM $qtable WHERE qid <= $nq), $k)});
}

ok(defined wait_for("SELECT worker_state FROM clustervec_gpu_info()", 'ready', 30),
	'the worker reports ready');

# the worker: in pg_stat_activity, attached to no database
is( sql(
		q{SELECT count(*), bool_and(datname IS NULL), bool_and(datid IS NULL)
		  FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'}),
	'1|t|t',
	'one clustervec gpu worker in pg_stat_activity, with no database');
my $worker_pid = sql(
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'});

is(sql(q{SELECT worker_state, backend FROM clustervec_gpu_info()}),
	"ready|$gpu_backend", "clustervec_gpu_info: ready, backend $gpu_backend");

# ping: a positive round trip, with and without payload, counted
my ($requests0) = counters();
is(sql('SELECT clustervec_gpu_ping(0) > 0, clustervec_gpu_ping(1048576) > 0'),
	't|t', 'clustervec_gpu_ping(0) and (1048576) return positive times');
my ($requests1) = counters();
cmp_ok($requests1, '>=', $requests0 + 2,
	"gpu_requests grows with pings ($requests0 -> $requests1)");
my ($rc, $out, $err) = try_sql('SELECT clustervec_gpu_ping(1073741825)');
like($err, qr/payload_bytes must be between 0 and/,
	'a ping larger than 1 GiB is refused');
is(sql('SELECT clustervec_gpu_ping(16777216) > 0'),
	't', 'a ping of a whole staging buffer answers');
($requests0) = counters();
is(sql('SELECT clustervec_gpu_ping(3 * 16777216 + 1) > 0'),
	't', 'a ping larger than a staging buffer streams through it');
($requests1) = counters();
cmp_ok($requests1, '>=', $requests0 + 4, 'in four chunks');
is(sql('SELECT memory_free > 0 AND memory_free <= memory_total FROM clustervec_gpu_info()'),
	't', 'clustervec_gpu_info reports free device memory');

# the data: random vectors, some NULL, some deleted; random queries
sql(
	qq{
SELECT setseed(0.42);
CREATE TABLE t (id int PRIMARY KEY, v cvec($dims));
INSERT INTO t SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec
	FROM generate_series(1, 4000) i;
UPDATE t SET v = NULL WHERE id % 97 = 0;
DELETE FROM t WHERE id % 89 = 0;
CREATE TABLE q AS SELECT i AS qid,
	(SELECT array_agg((random() * 1.2 - 0.1)::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec AS v
	FROM generate_series(1, 600) i;
-- wider than one staging buffer holds: several chunks per search
CREATE TABLE wide (id int PRIMARY KEY, v cvec($wide_dims));
INSERT INTO wide SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, $wide_dims) WHERE i > 0)::cvec
	FROM generate_series(1, 3000) i;
CREATE VIEW wq AS SELECT id AS qid, v FROM wide;
-- the CPU path's answers, for the concurrent clients
SET clustervec.gpu = off;
CREATE TABLE expected AS
	SELECT q.qid, e.rank, e.tid, e.distance
	FROM q, LATERAL cvsearch_exact('t', 'v', ARRAY[q.v], 10) e;
CREATE TABLE answers (client int, qid int, returned bigint, mismatches bigint);
VACUUM ANALYZE;
});

# exact search: auto and require answer as the CPU path does, bit for bit
for my $case (
	[ 't', 'q', 8, 10, 1 ],
	[ 't', 'q', 8, 1024, 1 ],
	[ 't', 'q', 600, 1000, 1 ],    # two query groups per request
	[ 't', 'q', 8, 2000, 0 ],      # k > 1024: the CPU path serves it
	[ 'wide', 'wq', 4, 10, 1 ],    # several chunks
	[ 'wide', 'wq', 3, 100, 1 ],)
{
	my ($table, $qtable, $nq, $k, $gpu) = @$case;
	my $cpu = digest('off', $table, $qtable, $nq, $k);
	my ($want_rows) = split / /, $cpu;
	cmp_ok($want_rows, '>', 0, "$table, $nq queries, k = $k: the CPU path answers");
	for my $mode ('auto', 'require')
	{
		my ($r0, $f0) = counters();
		is(digest($mode, $table, $qtable, $nq, $k),
			$cpu, "$table, $nq queries, k = $k: $mode equals the CPU path");
		my ($r1, $f1) = counters();
		if ($gpu)
		{
			cmp_ok($r1, '>', $r0, "$table, $nq queries, k = $k, $mode: served by the worker");
		}
		else
		{
			is($r1, $r0, "$table, $nq queries, k = $k, $mode: not sent to the worker");
		}
		is($f1, $f0, "$table, $nq queries, k = $k, $mode: no CPU fallback");
	}
}

# 20 concurrent clients: every search answered by the worker and equal to
# the CPU path's answer, pings in between, no error
sub run_bounded
{
	my ($cmd, $seconds) = @_;
	my ($stdout, $stderr) = ('', '');
	my $h = IPC::Run::start($cmd, '<', \undef, '>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($seconds));
	my $timed_out = 0;
	eval { $h->finish; 1 } or do { $timed_out = 1; $h->kill_kill; };
	return ($timed_out ? 'timed out' : $h->result(0), $stdout, $stderr);
}

my $script = $node->basedir . '/gpu_clients.sql';
PostgreSQL::Test::Utils::append_to_file(
	$script, q{\set q random(1, 16)
\set bytes random(0, 262144)
SET clustervec.gpu = require;
WITH g AS MATERIALIZED (
	SELECT rank, tid, distance FROM cvsearch_exact('t', 'v', ARRAY[(SELECT v FROM q WHERE qid = :q)], 10)),
e AS (SELECT rank, tid, distance FROM expected WHERE qid = :q)
INSERT INTO answers SELECT :client_id, :q, (SELECT count(*) FROM g),
	(SELECT count(*) FROM (SELECT * FROM g EXCEPT ALL SELECT * FROM e) x) +
	(SELECT count(*) FROM (SELECT * FROM e EXCEPT ALL SELECT * FROM g) y);
SELECT clustervec_gpu_ping(:bytes);
});
my ($r0, $f0) = counters();
my $t0 = time;
my ($bench_rc, $bench_out, $bench_err) = run_bounded(
	[
		'pgbench', '-n', '-c', '20', '-j', '2', '-t', '25', '-f', $script,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	150);
note sprintf('pgbench: %.1f s', time - $t0);
is($bench_rc, '0', '20 concurrent clients: pgbench succeeds')
  or diag("stdout:\n$bench_out\nstderr:\n$bench_err");
like($bench_out, qr{number of transactions actually processed: 500/500},
	'20 concurrent clients: all 500 transactions processed');
unlike($bench_err, qr/ERROR|FATAL/, '20 concurrent clients: no error');
is( sql(
		q{SELECT count(*), count(DISTINCT client), sum(returned), sum(mismatches) FROM answers}),
	'500|20|5000|0',
	'20 concurrent clients: 500 searches of 10 rows, all equal to the CPU path');
my ($r1, $f1) = counters();
cmp_ok($r1 - $r0, '>=', 1000,
	'20 concurrent clients: every search and ping served by the worker');
is($f1, $f0, '20 concurrent clients: no CPU fallback');

# A search that keeps the worker busy for a second or more: 1000 queries
# over wide, repeated $rep times (more where the machine is fast).
my ($rep, $big_search, $big_seconds) = (1);
for my $try (1 .. 3)
{
	$big_search =
	  "SELECT count(*) FROM cvsearch_exact('wide', 'v', (SELECT array_agg(v) FROM wide, generate_series(1, $rep) r WHERE id <= 1000), 10)";
	$t0 = time;
	is(sql("SET clustervec.gpu = require; $big_search"),
		1000 * $rep * 10, "the long search ($rep x 1000 queries) answers");
	$big_seconds = time - $t0;
	note sprintf('the long search, %d x 1000 queries: %.2f s', $rep, $big_seconds);
	last if $big_seconds >= 1 || $rep >= 16;
	$rep = int($rep * 1.5 / ($big_seconds > 0.1 ? $big_seconds : 0.1)) + 1;
	$rep = 16 if $rep > 16;
}

# statement_timeout during a request: the ERROR of a timeout, promptly
($rc, $out, $err) = try_sql(
	"SET clustervec.gpu = require; SET statement_timeout = 1; SELECT clustervec_gpu_ping(16777216)");
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout = 1 ms on a 16 MB ping: the timeout ERROR');
$t0 = time;
my $timeout_ms = $big_seconds >= 1.2 ? 300 : int($big_seconds * 250) + 1;
($rc, $out, $err) = try_sql(
	"SET clustervec.gpu = require; SET statement_timeout = $timeout_ms; $big_search");
my $timeout_seconds = time - $t0;
like($err, qr/canceling statement due to statement timeout/,
	"statement_timeout = $timeout_ms ms on the long search: the timeout ERROR");
cmp_ok($timeout_seconds, '<', $timeout_ms / 1000 + 1.5,
	sprintf('the timeout ends the wait promptly (%.2f s; the search takes %.2f s)',
		$timeout_seconds, $big_seconds));

# pg_cancel_backend while the session waits for the worker; then the same
# session goes on
my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$bg->set_query_timer_restart;
my $bg_pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('SET clustervec.gpu = require');
$bg->query_until(qr/started/, "\\echo started\n$big_search;\n");
my $waited = wait_for(
	qq{SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = $bg_pid},
	'Extension/Extension', 30);
ok(defined $waited, 'the session waits for the worker (wait event Extension)');
is(sql("SELECT pg_cancel_backend($bg_pid)"), 't', 'pg_cancel_backend');
$t0 = time;
$bg->{stderr} = '';
my $after = $bg->query('SELECT 1');
like($bg->{stderr}, qr/canceling statement due to user request/,
	'the cancelled request ends with the ERROR of a cancel');
note sprintf('cancel answered in %.2f s', time - $t0);
is($after, '1', 'the session works after the cancel');
$bg->{stderr} = '';
is( $bg->query(
		q{SELECT count(*) FROM (
		    SELECT rank, tid, distance FROM cvsearch_exact('t', 'v', ARRAY[(SELECT v FROM q WHERE qid = 3)], 10)
		    EXCEPT ALL SELECT rank, tid, distance FROM expected WHERE qid = 3) d}),
	'0',
	'after the cancel the same session searches through the worker, right answers');
is($bg->{stderr}, '', 'no error in the session after the cancel');
$bg->{stderr} = '';
is($bg->query('SELECT clustervec_gpu_ping(4096) > 0'),
	't', 'after the cancel the same session pings the worker');
$bg->quit;

# a session terminated while it waits for the worker: it goes, the worker stays
$bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 120);
$bg_pid = $bg->query_safe('SELECT pg_backend_pid()');
$bg->query_safe('SET clustervec.gpu = require');
$bg->query_until(qr/started/, "\\echo started\n$big_search;\n");
# on a real GPU the search may end before the wait can be seen
ok( defined wait_for(
		qq{SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE pid = $bg_pid},
		'Extension/Extension', 30) || $gpu_backend eq 'cuda',
	'a second session waits for the worker');
is(sql("SELECT pg_terminate_backend($bg_pid)"), 't', 'pg_terminate_backend of that session');
ok(defined wait_for("SELECT count(*) FROM pg_stat_activity WHERE pid = $bg_pid", '0', 30),
	'the terminated session is gone');
eval { $bg->quit; 1 };

# the worker survived both: same process, ready, and every staging buffer
# came back (more concurrent payload requests than buffers all complete)
is(sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'}),
	$worker_pid, 'the worker is the same process after the timeout, the cancel and the terminate');
is(sql(q{SELECT worker_state FROM clustervec_gpu_info()}), 'ready',
	'the worker is ready after the timeout, the cancel and the terminate');
my $ping_script = $node->basedir . '/gpu_pings.sql';
PostgreSQL::Test::Utils::append_to_file($ping_script,
	"SELECT clustervec_gpu_ping(1048576);\n");
($bench_rc, $bench_out, $bench_err) = run_bounded(
	[
		'pgbench', '-n', '-c', '12', '-j', '2', '-t', '20', '-f', $ping_script,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	60);
is($bench_rc, '0', 'after the cancels, 12 clients ping through 8 staging buffers')
  or diag("stdout:\n$bench_out\nstderr:\n$bench_err");

# a library that does not exist: the worker is up but unavailable
my $cpu10 = digest('off', 't', 'q', 8, 10);
$node->append_conf('postgresql.conf',
	"clustervec.gpu_library = '\$libdir/clustervec_no_such_library'\n");
$node->restart;
ok( defined wait_for(
		"SELECT worker_state FROM clustervec_gpu_info()", 'unavailable', 30),
	'missing library: the worker reports unavailable');
like(sql(q{SELECT reason FROM clustervec_gpu_info()}),
	qr/clustervec_no_such_library/, 'missing library: the reason names the path');
is(sql(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'}),
	'1', 'missing library: the worker stays up');
is(digest('auto', 't', 'q', 8, 10), $cpu10, 'missing library: auto answers on the CPU');
($rc, $out, $err) = try_sql(
	"SET clustervec.gpu = require; SELECT count(*) FROM cvsearch_exact('t', 'v', ARRAY[(SELECT v FROM q WHERE qid = 1)], 10)");
like($err, qr/clustervec.gpu is "require" but the GPU worker is not ready/,
	'missing library: require raises an ERROR');
like($err, qr/clustervec_no_such_library/, 'missing library: the ERROR names the path');
($rc, $out, $err) = try_sql('SELECT clustervec_gpu_ping(0)');
like($err, qr/the clustervec GPU worker is not ready/,
	'missing library: ping raises an ERROR');

# no shared_preload_libraries: no worker at all
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->adjust_conf('postgresql.conf', 'clustervec.gpu_library', undef);
$node->restart;
is(sql(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'}),
	'0', 'no preload: no worker');
is(sql(q{SELECT backend, reason IS NOT NULL AND reason <> '' FROM clustervec_gpu_info()}),
	'none|t', 'no preload: backend none, with a reason');
like(sql(q{SELECT reason FROM clustervec_gpu_info()}),
	qr/shared_preload_libraries/, 'no preload: the reason says why');
is(digest('auto', 't', 'q', 8, 10), $cpu10, 'no preload: auto answers on the CPU');
is(digest('off', 't', 'q', 8, 10), $cpu10, 'no preload: off answers on the CPU');
($rc, $out, $err) = try_sql(
	"SET clustervec.gpu = require; SELECT count(*) FROM cvsearch_exact('t', 'v', ARRAY[(SELECT v FROM q WHERE qid = 1)], 10)");
like($err, qr/ERROR: .*clustervec.gpu is "require"/, 'no preload: require raises an ERROR');
($rc, $out, $err) = try_sql('SELECT clustervec_gpu_ping(0)');
like($err, qr/ERROR/, 'no preload: ping raises an ERROR');

$node->stop;
done_testing();
