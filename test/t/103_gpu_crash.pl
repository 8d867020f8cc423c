
# The GPU worker killed with SIGKILL (the worker opens clustervec_cuda_cpu,
# the CPU implementation of the library API, so no GPU is needed).  A
# worker killed by a signal is a crash to PostgreSQL: the postmaster resets
# every session and reinitialises shared memory.  Then:
#
# - no client hangs: every session, mid-request or not, ends within 60 s;
# - the server accepts connections again;
# - no committed row is lost (rows committed before the kill, and every
#   batch an inserter saw committed while the kill happened);
# - the worker comes back ready, a new process, and serves requests that
#   answer as the CPU path does.
# Twice: once under load, once idle.

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
my $nq = 200;

my $node = cv_gpu_node('gpu_crash', qq{
restart_after_crash = on
log_statement = none
});

sub sql { return cv_sql($node, @_); }
sub wait_for { return cv_wait_for($node, @_); }

sub worker_pid
{
	return sql(
		q{SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE backend_type = 'clustervec gpu worker'});
}

ok(defined wait_for("SELECT worker_state || ' ' || backend FROM clustervec_gpu_info()",
		"ready $gpu_backend", 30),
	"the worker is ready ($gpu_backend)");

sql(
	qq{
SELECT setseed(0.31);
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
CREATE TABLE committed (id int PRIMARY KEY, v cvec($dims));
VACUUM ANALYZE;
});

# the search every session repeats: 0 when it equals the CPU path's answer
my $check = qq{SELECT count(*) FROM (
	SELECT query_no AS qid, rank, tid, distance FROM cvsearch_exact('t', 'v', (SELECT array_agg(v ORDER BY qid) FROM q), 10)
	EXCEPT ALL SELECT * FROM expected) d};

# Rows committed before the crash, in 20 transactions.
sub commit_rows
{
	my ($first, $count) = @_;
	sql(
		join '',
		map {
			my $from = $first + $_ * $count / 20;
			my $to = $first + ($_ + 1) * $count / 20 - 1;
			"INSERT INTO committed SELECT i, cv_keyed_point(i % 50, $dims, 1.0, i) FROM generate_series($from, $to) i;\n"
		} 0 .. 19);
	return;
}

my $known = 0;    # ids 1 .. $known are committed

# Sessions that search (require and auto) in a loop, and one that inserts
# and commits batches of known ids, announcing each commit.
sub start_load
{
	my ($first_id) = @_;
	my @h;
	for my $mode ('require', 'require', 'auto', 'auto')
	{
		push @h,
		  cv_start_psql(
			$node,
			[
				"SET clustervec.gpu = $mode",
				qq{DO \$\$
DECLARE
	bad bigint;
	deadline timestamptz := clock_timestamp() + interval '60 s';
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		$check INTO bad;
		IF bad <> 0 THEN
			RAISE EXCEPTION 'a search differs from the CPU path in % rows', bad;
		END IF;
	END LOOP;
END \$\$}
			]);
	}
	push @h,
	  cv_start_psql(
		$node,
		[
			"SET client_min_messages = notice",
			qq{DO \$\$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 s';
	b int := 0;
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		INSERT INTO committed SELECT i, cv_keyed_point(i % 50, $dims, 1.0, i)
			FROM generate_series($first_id + b * 10, $first_id + b * 10 + 9) i;
		COMMIT;
		RAISE NOTICE 'committed batch %', b;
		b := b + 1;
	END LOOP;
END \$\$}
		]);
	return @h;
}

# Whether a background client still runs (reading what it wrote so far).
sub running
{
	my ($h) = @_;
	eval { $h->{run}->pump_nb; 1 };
	return $h->{run}->pumpable;
}

# Waits for every background client to end (60 s at most from the kill);
# returns the handles' (rc, stdout, stderr) and whether any hung.
sub wait_clients
{
	my ($killed_at, @h) = @_;
	my @results;
	my $hung = 0;
	for my $h (@h)
	{
		usleep(50_000) while running($h) && time - $killed_at < 60;
		if (running($h))
		{
			$hung++;
			$h->{run}->kill_kill;
		}
		push @results, [ cv_finish_psql($h) ];
	}
	return ($hung, @results);
}

# the crash, under load then idle
for my $round (1, 2)
{
	my $loaded = $round == 1;
	my $label = $loaded ? 'under load' : 'idle';
	commit_rows($known + 1, 2000);
	$known += 2000;
	my $first_id = 1_000_000 * $round;
	my @h = $loaded ? start_load($first_id) : ();

	if ($loaded)
	{
		# the load is running: searches through the worker and commits
		my $r0 = sql('SELECT gpu_requests FROM clustervec_gpu_info()');
		ok( defined wait_for(
				"SELECT (SELECT gpu_requests FROM clustervec_gpu_info()) > $r0 + 20
				    AND (SELECT count(*) FROM committed WHERE id >= $first_id) >= 50",
				't', 30),
			"$label: the worker serves searches and the inserter commits");
		ok( defined wait_for(
				q{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Extension'},
				't', 10),
			"$label: sessions wait for the worker's answers");
	}

	my $old_pid = worker_pid();
	cmp_ok($old_pid, '>', 0, "$label: the worker runs ($old_pid)");
	my $log_offset = -s $node->logfile;
	my $killed_at = time;
	ok($old_pid > 0 && kill('KILL', $old_pid), "$label: SIGKILL to the worker");

	my ($hung, @results) = wait_clients($killed_at, @h);
	is($hung, 0, "$label: no client hangs (all ended within 60 s of the kill)");
	note sprintf('%s: clients ended %.2f s after the kill', $label, time - $killed_at);
	for my $i (0 .. $#results)
	{
		my ($rc, $out, $err) = @{ $results[$i] };
		unlike($err, qr/differs from the CPU path/,
			"$label: client " . ($i + 1) . ' saw only right answers');
		like(
			$err,
			qr/terminating connection because of crash of another server process|server closed the connection unexpectedly|connection to server was lost/,
			"$label: client " . ($i + 1) . ' was reset by the crash');
	}

	# The kill is asynchronous: until the postmaster has reaped the worker
	# (a process holding a CUDA context takes a while to die), the old
	# server still accepts connections.  So wait for the reset itself
	# first; only a connection accepted after it shows the server back.
	ok( $node->wait_for_log(
			qr/background worker "clustervec gpu worker" \(PID $old_pid\) was terminated by signal 9/,
			$log_offset),
		"$label: the postmaster saw the worker killed");
	ok($node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset),
		"$label: the postmaster reset every session");
	my $back = wait_for('SELECT 1', '1', 60);
	ok(defined $back, "$label: the server accepts connections again");
	note sprintf('%s: connections accepted %.2f s after the kill', $label, time - $killed_at);

	# every committed row is there
	is(sql("SELECT count(*) FROM committed WHERE id <= $known"),
		$known, "$label: the $known rows committed before the kill are all there");
	if ($loaded)
	{
		my ($rc, $out, $err) = @{ $results[-1] };
		my @batches = $err =~ /committed batch (\d+)/g;
		cmp_ok(scalar @batches, '>', 0, "$label: the inserter committed batches");
		my $last = @batches ? $batches[-1] : -1;
		my $want = ($last + 1) * 10;
		my $have = sql(
			"SELECT count(*) FROM committed WHERE id BETWEEN $first_id AND $first_id + $want - 1");
		is($have, $want,
			"$label: every batch the inserter saw committed is there ($want rows)");
	}
	is(sql("SELECT count(*) FROM committed WHERE id <= $known AND v IS NOT NULL"),
		$known, "$label: the committed rows are intact");

	# the worker is back and serves
	my $ready = wait_for(
		qq{SELECT (SELECT worker_state FROM clustervec_gpu_info()) || ' ' ||
		          (SELECT count(*) FROM pg_stat_activity
		           WHERE backend_type = 'clustervec gpu worker' AND pid <> $old_pid)},
		'ready 1', 30);
	ok(defined $ready, "$label: a new worker is ready");
	note sprintf('%s: worker ready %.2f s after the kill', $label, time - $killed_at);
	is(sql("SET clustervec.gpu = require; $check"),
		'0', "$label: the new worker answers as the CPU path does");
	cmp_ok(sql('SELECT gpu_requests FROM clustervec_gpu_info()'),
		'>', 0, "$label: the new worker counts its requests");
	is(sql('SELECT clustervec_gpu_ping(65536) > 0'), 't', "$label: the new worker answers pings");
}

$node->stop;
done_testing();
