
# The worker as a serving engine (issue 19): concurrent sessions batched
# into one launch, abandoned requests stopped in the worker, searches that
# would wait too long sent to the CPU, a failed batched launch failing only
# its own requests.  In CI the worker opens clustervec_cuda_cpu;
# CV_GPU_LIBRARY=clustervec_cuda runs the same file on the H200.
#
# - 16 sessions searching two indexes (L2 and cosine) at once, while another
#   session runs cluster_health and a third builds an index: every answer
#   equals the CPU path's (clustervec.gpu = off), and the worker answered
#   more search requests than it made launches;
# - a cluster_health cut by statement_timeout while the worker runs it: the
#   worker stops it (clustervec_gpu_info's stopped_requests), and the next
#   request is served at once;
# - while another session's cluster_health holds the worker, a search under
#   clustervec.gpu_max_wait runs on the CPU (busy_fallbacks) with the same
#   answer;
# - with the library failing every launch of more than one query, batched
#   searches fall back to the CPU under auto (answers unchanged) and raise
#   under require, while single-query searches are served.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# The stop and wait tests hold the worker with a cluster_health that takes
# seconds on the CPU library; the H200 finishes it in milliseconds.
my $real_gpu = cv_gpu_library() eq 'clustervec_cuda';

my $node = cv_gpu_node('gpu_serving', qq{
max_worker_processes = 24
max_connections = 40
});

sub sql { return cv_sql($node, $_[0], $_[1] // 300); }

sub info { return sql("SELECT $_[0] FROM clustervec_gpu_info()"); }

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

# ------------------------------------------------------------ the data
my $d = 48;
cv_load_clustered($node, 's', rows => 60000, dims => $d, centres => 40, sigma => 3.0);
sql(q{
CREATE INDEX s_l2 ON s USING cvivf (v cvec_l2_ops) WITH (lists = 20);
CREATE INDEX s_cos ON s USING cvivf (v cvec_cosine_ops) WITH (lists = 20);
SELECT clustervec_gpu_warm('s_l2'), clustervec_gpu_warm('s_cos');
});
is(sql("SELECT count(*) FROM clustervec_gpu_mirrors()"), '2', 'both indexes are mirrored');

# EXPLAIN ANALYZE says the GPU served the scan (and when not, why)
my $explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
  . "SELECT id FROM s ORDER BY v <-> (SELECT v FROM s WHERE id = 7) LIMIT 10";
like(sql("SET enable_seqscan = off; $explain"),
	qr/clustervec: 1 index scan on the GPU worker \(1 answer, 16 candidates\)/,
	'EXPLAIN ANALYZE: the GPU worker served the index scan');
like(sql("SET enable_seqscan = off; SET clustervec.gpu = off; $explain"),
	qr/clustervec: 1 index scan on the CPU: clustervec.gpu is off/,
	'EXPLAIN ANALYZE: the CPU ran it under clustervec.gpu = off');

# 40 queries per call, keyed so every session can build them
my $queries = "ARRAY(SELECT cv_keyed_point((q % 40)::int, $d, 3.0, 900000 + q) "
  . "FROM generate_series(\$1, \$1 + 39) q)";
sub search_sql
{
	my ($index, $first) = @_;
	my $q = $queries =~ s/\$1/$first/gr;
	return "SELECT string_agg(query_no || ':' || rank || ':' || tid || ':' || "
	  . "round(distance::numeric, 12), ' ' ORDER BY query_no, rank) "
	  . "FROM cvsearch('$index', $q, 10, 4)";
}

my %expected;
for my $session (0 .. 15)
{
	my $index = $session % 2 ? 's_cos' : 's_l2';
	$expected{$session} =
	  sql("SET clustervec.gpu = off; " . search_sql($index, $session * 40));
}

# ------------------------------------- 16 sessions, one health run, one build
cv_load_clustered($node, 'h', rows => 20000, dims => 32, centres => 8, sigma => 2.0);
my $launches_before = info('search_launches');
my $requests_before = info('search_requests');
my @sessions;
for my $session (0 .. 15)
{
	my $index = $session % 2 ? 's_cos' : 's_l2';
	push @sessions,
	  cv_start_psql($node,
		['SET clustervec.gpu_max_wait = 0',
		 map { search_sql($index, $session * 40) } 1 .. 6]);
}
my $health = cv_start_psql($node,
	"SELECT count(*) FROM cluster_health('h', 'c', 'v')");
my $build = cv_start_psql($node,
	"CREATE INDEX h_l2 ON h USING cvivf (v cvec_l2_ops) WITH (lists = 16)");
my $all_equal = 1;
for my $session (0 .. 15)
{
	my ($rc, $out, $err) = cv_finish_psql($sessions[$session]);
	my @answers = split /\n/, $out;
	my $bad = grep { $_ ne $expected{$session} } @answers;
	if ($rc != 0 || @answers != 6 || $bad)
	{
		$all_equal = 0;
		diag("session $session: exit $rc, " . scalar(@answers) . " answers, $bad differ: $err");
	}
}
ok($all_equal, '16 concurrent sessions: every cvsearch answer equals the CPU path');
my ($health_rc, $health_out, $health_err) = cv_finish_psql($health);
chomp $health_out;
is("$health_rc $health_out", '0 8', 'cluster_health beside them answered') or diag($health_err);
my ($build_rc, undef, $build_err) = cv_finish_psql($build);
is($build_rc, 0, 'the index build beside them finished') or diag($build_err);
cv_verify_ok($node, 'h_l2');
my $launches = info('search_launches') - $launches_before;
my $requests = info('search_requests') - $requests_before;
cmp_ok($requests, '>', $launches,
	"batched: $requests search requests in $launches launches");
diag(sprintf('requests per launch %.2f, mean queue wait %s ms',
		$requests / ($launches || 1), info('round(mean_queue_wait_ms::numeric, 3)')));

my $holder_sql = "SELECT pid FROM pg_stat_activity WHERE query LIKE '%cluster_health(''big''%' "
  . "AND state = 'active' AND pid <> pg_backend_pid()";

# A session whose cluster_health holds the worker: its backend waits on the
# worker (wait event Extension) twice, 300 ms apart, so the members pass runs.
sub start_holder
{
	my $h = cv_start_psql($node,
		["SET clustervec.gpu = require", "SELECT count(*) FROM cluster_health('big', 'c', 'v')"]);
	my $start = time();
	while (time() - $start < 60)
	{
		my $waiting = "SELECT count(*) FROM pg_stat_activity WHERE pid = ($holder_sql) "
		  . "AND wait_event = 'Extension'";
		if (sql($waiting) eq '1')
		{
			usleep(300_000);
			return $h if sql($waiting) eq '1';
		}
		usleep(20_000);
	}
	return $h;
}

# ------------------------------------ a cancelled cluster_health stops in the worker
SKIP:
{
skip 'cluster_health takes milliseconds on a real GPU: nothing to cut', 7 if $real_gpu;
# one cluster of 24,000 members: the pairwise pass alone takes seconds
sql(qq{
CREATE TABLE big (id bigint, c int, v cvec(64));
SELECT setseed(0.5);
INSERT INTO big SELECT i, 1, cv_point(1, 64, 2.0) FROM generate_series(1, 24000) i;
});
my $stopped_before = info('stopped_requests');
my $holder = start_holder();
is(sql("SELECT pg_cancel_backend(($holder_sql))"), 't', 'cancelled a cluster_health the worker was running');
my ($rc, undef, $err) = cv_finish_psql($holder);
like($err, qr/canceling statement due to user request/, 'its statement was cancelled');
my $t0 = time();
sql('SELECT clustervec_gpu_ping(0)');
my $next = time() - $t0;
ok(defined cv_wait_for($node,
		"SELECT stopped_requests > $stopped_before FROM clustervec_gpu_info()", 't', 30),
	'the worker stopped the abandoned request');
my $stop_ms = info('round(last_stop_ms::numeric, 1)');
cmp_ok($stop_ms, '<', 2000, "it stopped $stop_ms ms after the backend gave up");
diag(sprintf('the next request was answered %.0f ms after the cancel', $next * 1000));

# ------------------------------------ gpu_max_wait: a held worker sends searches to the CPU
my $probe = search_sql('s_l2', 0);
my $busy_before = info('busy_fallbacks');
$holder = start_holder();
my $waited_start = time();
my $busy_answer = sql("SET clustervec.gpu_max_wait = '5ms'; $probe");
my $busy_time = time() - $waited_start;
is($busy_answer, $expected{0}, 'a search while the worker is held answers like the CPU path');
cmp_ok(info('busy_fallbacks'), '>', $busy_before,
	'it ran on the CPU: the worker was busy past clustervec.gpu_max_wait');
diag(sprintf('that search took %.0f ms', $busy_time * 1000));
ok(sql("SELECT pg_cancel_backend(($holder_sql))") eq 't', 'the holder is cancelled');
cv_finish_psql($holder);
}

# ------------------------------------------- a failed batched launch
$node->stop;
$ENV{CLUSTERVEC_CPU_FAIL_SEARCH_ABOVE} = '40';
$node->start;
ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready again');
SKIP:
{
	skip 'the fault is injected into the CPU library only', 4
	  if cv_gpu_library() ne 'clustervec_cuda_cpu';
	sql("SELECT clustervec_gpu_warm('s_l2'), clustervec_gpu_warm('s_cos')");
	is(sql(search_sql('s_l2', 0)), $expected{0},
		'a search of 40 queries alone is served');
	my $fallbacks_before = info('cpu_fallbacks');
	my @auto = map {
		cv_start_psql($node,
			['SET clustervec.gpu_max_wait = 0', map { search_sql('s_l2', 0) } 1 .. 8])
	} 1 .. 8;
	my $auto_ok = 1;
	for my $h (@auto)
	{
		my ($rc, $out, $err) = cv_finish_psql($h);
		$auto_ok = 0 if $rc != 0 || grep { $_ ne $expected{0} } split /\n/, $out;
		diag("auto session: exit $rc: $err") if $rc != 0;
	}
	ok($auto_ok, 'under auto, searches whose batched launch failed answer like the CPU path');
	cmp_ok(info('cpu_fallbacks'), '>', $fallbacks_before, 'they fell back to the CPU');
	my @require = map {
		cv_start_psql($node,
			['SET clustervec.gpu = require', 'SET clustervec.gpu_max_wait = 0',
			 map { search_sql('s_l2', 0) } 1 .. 8])
	} 1 .. 8;
	my $errors = 0;
	for my $h (@require)
	{
		my ($rc, $out, $err) = cv_finish_psql($h);
		$errors++ if $err =~ /injected fault/;
	}
	cmp_ok($errors, '>', 0, 'under require, a failed batched launch raises in its sessions');
}
delete $ENV{CLUSTERVEC_CPU_FAIL_SEARCH_ABOVE};

# ------------------------------- a fast shutdown while the worker is busy
SKIP:
{
	skip 'cluster_health takes milliseconds on a real GPU', 1 if $real_gpu;
	my $busy = start_holder();
	my $stop_start = time();
	$node->stop('fast');
	my $stop_time = time() - $stop_start;
	cv_finish_psql($busy);
	cmp_ok($stop_time, '<', 5, sprintf('pg_ctl stop -m fast took %.2f s with the worker busy', $stop_time));
}
done_testing();
