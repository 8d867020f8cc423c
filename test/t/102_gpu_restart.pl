
# The GPU worker exits cleanly (pg_terminate_backend, then kill -TERM) while
# sessions keep sending it requests (the worker opens clustervec_cuda_cpu,
# the CPU implementation of the library API, so no GPU is needed):
#
# - no request waits more than a few seconds;
# - under clustervec.gpu = auto every answer still comes and equals the CPU
#   path's (requests in flight fall back to the CPU, and so do requests made
#   while the worker is gone);
# - under require a request that the worker cannot serve ends with an ERROR
#   that names the worker's exit, and the others answer correctly;
# - the postmaster restarts the worker: ready again, a new process, within
#   bgw_restart_time (2 s) + 2 s.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# CV_GPU_LIBRARY=clustervec_cuda runs the same scenarios on a real GPU
# (test/gpu on the H200); the default is the CPU implementation.
my $gpu_library = cv_gpu_library();
my $gpu_backend = $gpu_library eq 'clustervec_cuda' ? 'cuda' : 'cpu-shim';
use Time::HiRes qw(time usleep);

my $dims = 32;
my $nq = 600;
my $sessions = 4;
my $restart_bound = 2 + 2;    # bgw_restart_time + 2 s

my $node = cv_gpu_node('gpu_restart', qq{
log_statement = none
});

sub sql { return cv_sql($node, @_); }
sub wait_for { return cv_wait_for($node, @_); }

# Whether a background client still runs (reading what it wrote so far).
sub running
{
	my ($h) = @_;
	eval { $h->{run}->pump_nb; 1 };
	return $h->{run}->pumpable;
}

sub worker_pid
{
	return sql(
		q{SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'});
}

sub counters
{
	return split /\|/,
	  sql('SELECT gpu_requests, cpu_fallbacks FROM clustervec_gpu_info()');
}

ok(defined wait_for("SELECT worker_state || ' ' || backend FROM clustervec_gpu_info()",
		"ready $gpu_backend", 30),
	"the worker is ready ($gpu_backend)");

# random vectors and queries, and the CPU path's answers
sql(
	qq{
SELECT setseed(0.17);
CREATE TABLE t (id int PRIMARY KEY, v cvec($dims));
INSERT INTO t SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec
	FROM generate_series(1, 4000) i;
CREATE TABLE q AS SELECT i AS qid,
	(SELECT array_agg(random()::real) FROM generate_series(1, $dims) WHERE i > 0)::cvec AS v
	FROM generate_series(1, $nq) i;
SET clustervec.gpu = off;
CREATE TABLE expected AS
	SELECT query_no AS qid, rank, tid, distance
	FROM cvsearch_exact('t', 'v', (SELECT array_agg(v ORDER BY qid) FROM q), 10);
CREATE TABLE outcomes (phase text, session int, i int, started float8, finished float8,
	returned bigint, mismatches bigint, message text, detail text);
CREATE TABLE stop (phase text);
VACUUM ANALYZE;
});
is(sql('SELECT count(*) FROM expected'), $nq * 10, 'the CPU path answers');

# A session: searches until told to stop (or 45 s), each search compared
# with the CPU path's answer and recorded with its times and any ERROR.
sub start_session
{
	my ($phase, $mode, $session) = @_;
	return cv_start_psql(
		$node,
		[
			"SET clustervec.gpu = $mode",
			qq{DO \$\$
DECLARE
	t0 float8;
	n_returned bigint;
	n_bad bigint;
	msg text;
	det text;
	i int := 0;
	deadline timestamptz := clock_timestamp() + interval '45 s';
BEGIN
	LOOP
		i := i + 1;
		t0 := extract(epoch FROM clock_timestamp());
		n_returned := NULL; n_bad := NULL; msg := NULL; det := NULL;
		BEGIN
			WITH g AS MATERIALIZED (
				SELECT query_no AS qid, rank, tid, distance
				FROM cvsearch_exact('t', 'v', (SELECT array_agg(v ORDER BY qid) FROM q), 10))
			SELECT (SELECT count(*) FROM g),
			       (SELECT count(*) FROM (SELECT * FROM g EXCEPT ALL SELECT * FROM expected) x) +
			       (SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM g) y)
			INTO n_returned, n_bad;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		END;
		INSERT INTO outcomes VALUES ('$phase', $session, i, t0, extract(epoch FROM clock_timestamp()),
			n_returned, n_bad, msg, det);
		COMMIT;
		EXIT WHEN EXISTS (SELECT 1 FROM stop WHERE phase = '$phase') OR clock_timestamp() > deadline;
	END LOOP;
END \$\$}
		]);
}

# One phase: sessions under $mode, the worker stopped by $how mid-load.
sub phase
{
	my ($phase, $mode, $how) = @_;
	ok( defined wait_for(
			q{SELECT worker_state || ' ' || (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker')
			  FROM clustervec_gpu_info()},
			'ready 1', 15),
		"$phase: the worker is ready");
	my @h = map { start_session($phase, $mode, $_) } 1 .. $sessions;

	ok( defined wait_for(
			"SELECT count(DISTINCT session) FROM outcomes WHERE phase = '$phase' AND i >= 3",
			$sessions, 15),
		"$phase: $sessions sessions are searching (each has answers)");
	my $old_pid = worker_pid();
	cmp_ok($old_pid, '>', 0, "$phase: the worker runs ($old_pid)");
	my ($r0, $f0) = counters();
	my $stopped_at;
	if ($how eq 'terminate')
	{
		$stopped_at = sql(
			"SELECT extract(epoch FROM clock_timestamp()) FROM pg_terminate_backend($old_pid) s WHERE s");
	}
	else
	{
		$stopped_at = sql('SELECT extract(epoch FROM clock_timestamp())');
		kill 'TERM', $old_pid if $old_pid > 0;
	}
	ok($stopped_at, "$phase: the worker ($old_pid) is told to exit ($how)");

	# the old process leaves, a new one is ready
	my ($gone_at, $ready_at);
	my $start = time;
	while (time - $start < 15 && !defined $ready_at)
	{
		my ($out, $err);
		$node->psql(
			'postgres', qq{SELECT extract(epoch FROM clock_timestamp()),
				(SELECT count(*) FROM pg_stat_activity WHERE pid = $old_pid),
				(SELECT count(*) FROM pg_stat_activity
				 WHERE backend_type = 'clustervec gpu worker' AND pid <> $old_pid),
				(SELECT worker_state FROM clustervec_gpu_info())},
			stdout => \$out,
			stderr => \$err,
			timeout => 30);
		my ($now, $old, $new, $state) = split /\|/, $out // '';
		if (defined $state)
		{
			$gone_at //= $now if $old == 0;
			$ready_at = $now if $old == 0 && $new == 1 && $state eq 'ready';
		}
		usleep(20_000);
	}
	ok(defined $gone_at, "$phase: the worker exited");
	ok(defined $ready_at, "$phase: a new worker is ready");
	$gone_at //= $stopped_at + 1000;
	$ready_at //= $stopped_at + 1000;
	note sprintf('%s: the worker exited %.2f s after the signal, ready again %.2f s after it',
		$phase, $gone_at - $stopped_at, $ready_at - $stopped_at);
	cmp_ok($ready_at - $stopped_at, '<=', $restart_bound,
		sprintf('%s: the worker is back within bgw_restart_time + 2 s (%.2f s)',
			$phase, $ready_at - $stopped_at));
	my $new_pid = worker_pid();
	isnt($new_pid, $old_pid, "$phase: the new worker is a new process ($new_pid)");

	# a second of requests served by the new worker, then stop
	ok( defined wait_for(
			"SELECT count(DISTINCT session) FROM outcomes WHERE phase = '$phase' AND started > $ready_at + 0.5",
			$sessions, 15),
		"$phase: every session goes on after the restart");
	sql("INSERT INTO stop VALUES ('$phase')");
	my $all_ended = 1;
	for my $i (0 .. $#h)
	{
		my $deadline = time + 30;
		usleep(50_000) while running($h[$i]) && time < $deadline;
		if (running($h[$i]))
		{
			$all_ended = 0;
			$h[$i]{run}->kill_kill;
			diag("$phase: session " . ($i + 1) . ' still running 30 s after the stop');
		}
		my ($rc, $out, $err) = cv_finish_psql($h[$i]);
		is($rc, 0, "$phase: session " . ($i + 1) . ' ends without error')
		  or diag($err);
	}
	ok($all_ended, "$phase: no session hangs");
	my ($r1, $f1) = counters();
	note "$phase: gpu_requests $r0 -> $r1, cpu_fallbacks $f0 -> $f1";
	cmp_ok($r1, '>', $r0, "$phase: the worker served requests around the restart");

	my $slowest = sql(
		"SELECT round(max(finished - started)::numeric, 2) FROM outcomes WHERE phase = '$phase'");
	cmp_ok($slowest, '<', 5, "$phase: no request took 5 s or more (slowest $slowest s)");
	is( sql(
			qq{SELECT count(*) FROM outcomes
			   WHERE phase = '$phase' AND message IS NULL AND (returned <> $nq * 10 OR mismatches <> 0)}),
		'0',
		"$phase: every answer equals the CPU path's");
	return ($gone_at, $ready_at, $f1 - $f0);
}

# auto: the answers keep coming
my ($gone_at, $ready_at, $fallbacks) = phase('auto', 'auto', 'terminate');
is(sql(q{SELECT count(*) FROM outcomes WHERE phase = 'auto' AND message IS NOT NULL}),
	'0', 'auto: no request failed');
my $during = sql(
	qq{SELECT count(*) FROM outcomes
	   WHERE phase = 'auto' AND message IS NULL AND started >= $gone_at AND finished <= $ready_at});
cmp_ok($during, '>', 0,
	"auto: requests were answered (on the CPU) while the worker was gone ($during; fallbacks $fallbacks)");

# require: the ERRORs name the worker's exit
($gone_at, $ready_at, $fallbacks) = phase('require', 'require', 'sigterm');
my $errors = sql(q{SELECT count(*) FROM outcomes WHERE phase = 'require' AND message IS NOT NULL});
cmp_ok($errors, '>', 0, "require: requests failed while the worker was gone ($errors)");
is( sql(
		q{SELECT count(*) FROM outcomes
		  WHERE phase = 'require' AND message IS NOT NULL
		    AND concat_ws(' ', message, detail) !~ 'GPU worker (exited|is gone)'}),
	'0',
	'require: every ERROR names the worker\'s exit');
note 'require: the ERRORs: '
  . sql(
	q{SELECT string_agg(DISTINCT concat_ws(' / ', message, detail), E'\n') FROM outcomes
	  WHERE phase = 'require' AND message IS NOT NULL});
is($fallbacks, 0, 'require: no CPU fallback');
is( sql(
		qq{SELECT count(*) FROM outcomes
		   WHERE phase = 'require' AND message IS NOT NULL AND started > $ready_at + 0.2}),
	'0',
	'require: no ERROR once the new worker is ready');

# the new worker serves
ok( defined wait_for("SELECT worker_state FROM clustervec_gpu_info()", 'ready', 15),
	'the worker is ready at the end');
is( sql(
		q{SET clustervec.gpu = require;
		  SELECT count(*) FROM (
		    SELECT query_no AS qid, rank, tid, distance FROM cvsearch_exact('t', 'v', (SELECT array_agg(v ORDER BY qid) FROM q), 10)
		    EXCEPT ALL SELECT * FROM expected) d}),
	'0',
	'the restarted worker answers as the CPU path does');
ok($node->log_contains("clustervec GPU worker ready: $gpu_backend"),
	'the server log shows the worker ready');

$node->stop;
done_testing();
