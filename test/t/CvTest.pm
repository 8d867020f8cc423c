
# CvTest: helpers shared by clustervec's TAP tests (test/t/*.pl).
#
# Every test makes a fresh PostgreSQL::Test::Cluster node, loads clustered
# vectors generated in SQL (setseed, so the same data every run), and checks
# the cvivf index against exact brute-force answers and its own invariants.

package CvTest;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

our @EXPORT = qw(
  cv_new_node
  cv_install_helpers
  cv_load_clustered
  cv_vector_sql
  cv_lists_count
  cv_lists_sum
  cv_verify_ok
  cv_reachable_ok
  cv_start_psql
  cv_start_pgbench
  cv_running
  cv_finish_psql
  cv_gpu_library
  cv_gpu_node
  cv_sql
  cv_try_sql
  cv_wait_for
  cv_gdb_can_attach
  cv_crash_at_record
);

# A started node with clustervec and the data-generating SQL functions in
# database postgres.  %params go to init() (allows_streaming => 1, ...).
sub cv_new_node
{
	my ($name, %params) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%params);
	# one process per query: setseed() then random() gives the same rows
	$node->append_conf('postgresql.conf', qq(
max_parallel_workers_per_gather = 0
maintenance_work_mem = 64MB
));
	$node->start;
	cv_install_helpers($node);
	return $node;
}

# CREATE EXTENSION and the SQL helpers the tests generate data with.
sub cv_install_helpers
{
	my ($node, $dbname) = @_;
	$dbname //= 'postgres';
	$node->safe_psql(
		$dbname, q{
CREATE EXTENSION clustervec;

-- Uniform draw in [0, 1) from a key, without setseed: the same key gives the
-- same number in any session (pgbench scripts use it).
CREATE FUNCTION cv_u(k bigint) RETURNS float8
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	AS $$ SELECT (hashint8(k)::float8 + 2147483648.0) / 4294967296.0 $$;

-- Centre c (0-based) of the clustered data set: uniform in [-10, 10]^d.
CREATE FUNCTION cv_centre(c int, d int) RETURNS real[]
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	AS $$ SELECT array_agg((cv_u(c::bigint * 100003 + j) * 20 - 10)::real ORDER BY j)
	      FROM generate_series(1, d) j $$;

-- A point of centre c with gaussian noise of deviation sigma (random():
-- call setseed() first for repeatable data).
CREATE FUNCTION cv_point(c int, d int, sigma float8) RETURNS cvec
	LANGUAGE sql VOLATILE STRICT
	AS $$ SELECT array_agg((x[j] + sigma * sqrt(-2 * ln(1 - random()))
	                               * cos(2 * pi() * random()))::real ORDER BY j)::cvec
	      FROM cv_centre(c, d) x, generate_series(1, d) j $$;

-- The same from a key: no random(), so usable in ORDER BY of an index scan.
CREATE FUNCTION cv_keyed_point(c int, d int, sigma float8, k bigint) RETURNS cvec
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	AS $$ SELECT array_agg((x[j] + sigma * sqrt(-2 * ln(1 - cv_u(k * 65536 + 2 * j)))
	                               * cos(2 * pi() * cv_u(k * 65536 + 2 * j + 1)))::real
	                       ORDER BY j)::cvec
	      FROM cv_centre(c, d) x, generate_series(1, d) j $$;
});
	return;
}

# Creates $table (id bigint primary key, c int, v cvec($d)) with $rows
# clustered rows: row i belongs to centre i % $centres.
sub cv_load_clustered
{
	my ($node, $table, %o) = @_;
	my $rows = $o{rows} // 10000;
	my $d = $o{dims} // 32;
	my $centres = $o{centres} // 50;
	my $sigma = $o{sigma} // 2.0;
	my $seed = $o{seed} // 0.25;
	my $first = $o{first_id} // 1;
	my $last = $first + $rows - 1;
	my $create =
	  $o{no_create}
	  ? ''
	  : "CREATE TABLE $table (id bigint PRIMARY KEY, c int, v cvec($d));";

	$node->safe_psql(
		'postgres', qq{
$create
SELECT setseed($seed);
INSERT INTO $table (id, c, v)
	SELECT i, i % $centres, cv_point((i % $centres)::int, $d, $sigma)
	FROM generate_series($first, $last) i;
ANALYZE $table;
});
	return;
}

# SQL text of a literal vector: [x, x, ..., x].
sub cv_vector_sql
{
	my ($d, $x) = @_;
	return "'[" . join(',', ($x) x $d) . "]'::cvec";
}

sub cv_lists_count
{
	my ($node, $index, $dbname) = @_;
	return $node->safe_psql($dbname // 'postgres',
		"SELECT count(*) FROM cvivf_lists('$index')");
}

sub cv_lists_sum
{
	my ($node, $index, $dbname) = @_;
	return $node->safe_psql($dbname // 'postgres',
		"SELECT coalesce(sum(tuples), 0) FROM cvivf_lists('$index')");
}

sub cv_verify_ok
{
	my ($node, $index, $name, $dbname) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($rc, $out, $err) = $node->psql($dbname // 'postgres',
		"SELECT cvivf_verify('$index')");
	is($rc . ($err eq '' ? '' : ": $err"), '0', $name // "cvivf_verify($index)");
	return;
}

# Every visible row of $table is returned, once, by a scan of $index that
# probes every list: the index count equals count(*).  $op is the index's
# operator (<->, <#>, <=>); the plan is checked to be a scan of $index.
sub cv_reachable_ok
{
	my ($node, $table, $index, %o) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $op = $o{op} // '<->';
	my $column = $o{column} // 'v';
	my $dbname = $o{dbname} // 'postgres';
	my $name = $o{name} // "all rows of $table reachable through $index";
	my $lists = cv_lists_count($node, $index, $dbname);
	my $q = $node->safe_psql($dbname,
		"SELECT $column FROM $table WHERE $column IS NOT NULL ORDER BY id LIMIT 1");
	my $settings = qq{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_sort = off;
SET clustervec.probes = $lists;
SET clustervec.iterative_scan = relaxed_order;
SET clustervec.max_probes = -1;
};
	my $scan = "SELECT id FROM $table ORDER BY $column $op '$q' LIMIT 1000000000";
	my $plan = $node->safe_psql($dbname,
		"$settings EXPLAIN (COSTS OFF) $scan");
	like($plan, qr/Index Scan using $index on $table/,
		"$name: the plan scans $index");
	# one snapshot for both counts (rows may be arriving concurrently)
	my $counts = $node->safe_psql(
		$dbname, qq{$settings
SELECT (SELECT count(*) FROM ($scan) s) || ' ' ||
       (SELECT count(DISTINCT id) FROM ($scan) s) || ' ' ||
       (SELECT count(*) FROM $table WHERE $column IS NOT NULL);
});
	my ($index_rows, $distinct, $heap_rows) = split / /, $counts;
	is("$index_rows $distinct", "$heap_rows $heap_rows",
		"$name (index rows, distinct ids = count(*) = $heap_rows)");
	return $heap_rows;
}

# psql running $sql in the background (for long statements whose session
# may be cut by a crash).  $sql is one command string, or a reference to a
# list of them (each its own -c, so each its own transaction).  Returns a
# handle for cv_finish_psql.
sub cv_start_psql
{
	my ($node, $sql, $dbname) = @_;
	my @commands = map { ('-c', $_) } (ref $sql ? @$sql : ($sql));
	return _cv_start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr($dbname // 'postgres'), @commands
		]);
}

# pgbench in the background on database postgres, with script files
# (name => text) written to the node's directory.  Returns a handle for
# cv_finish_psql.
sub cv_start_pgbench
{
	my ($node, $opts, $files) = @_;
	my @file_opts;
	for my $name (sort keys %$files)
	{
		my $path = $node->basedir . "/$name";
		PostgreSQL::Test::Utils::append_to_file($path, $files->{$name});
		push @file_opts, '-f', $path;
	}
	return _cv_start(
		[
			'pgbench', '-h', $node->host, '-p', $node->port,
			split(/\s+/, $opts), @file_opts, 'postgres'
		]);
}

sub _cv_start
{
	my ($command) = @_;
	my %h = (stdout => '', stderr => '', command => join(' ', @$command));
	$h{run} = IPC::Run::start($command, '<', \undef, '>', \$h{stdout}, '2>',
		\$h{stderr});
	return \%h;
}

# Whether a background command is still running.
sub cv_running
{
	my ($h) = @_;
	my $run = $h->{run};
	# pumping (without waiting) notices a command that has exited
	eval { $run->pump_nb if $run->pumpable; };
	return $run->pumpable;
}

# Waits for a background psql or pgbench; returns (exit code, stdout, stderr).
sub cv_finish_psql
{
	my ($h) = @_;
	$h->{run}->finish;
	return ($h->{run}->result(0), $h->{stdout}, $h->{stderr});
}

# The GPU library the worker opens: CV_GPU_LIBRARY=clustervec_cuda runs the
# GPU tests on a real GPU (test/gpu on the H200); the default is the CPU
# implementation of the same API.
sub cv_gpu_library
{
	return $ENV{CV_GPU_LIBRARY} // 'clustervec_cuda_cpu';
}

# A started node with clustervec preloaded (so the GPU worker runs) opening
# cv_gpu_library(), and the helpers installed; $conf: more postgresql.conf.
sub cv_gpu_node
{
	my ($name, $conf) = @_;
	my $library = cv_gpu_library();
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init;
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'clustervec'
clustervec.gpu_library = '\$libdir/$library'
max_parallel_workers_per_gather = 0
} . ($conf // ''));
	$node->start;
	cv_install_helpers($node);
	return $node;
}

# psql with a bound on its run time: a hang fails the test, never blocks it.
sub cv_sql
{
	my ($node, $sql, $timeout) = @_;
	return $node->safe_psql('postgres', $sql, timeout => $timeout // 120);
}

# (rc, stdout, stderr) of $sql, with a bound on its run time.
sub cv_try_sql
{
	my ($node, $sql, $timeout) = @_;
	my ($out, $err);
	my $timed_out = 0;
	my $rc = $node->psql(
		'postgres', $sql,
		stdout => \$out,
		stderr => \$err,
		timeout => $timeout // 120,
		timed_out => \$timed_out);
	return ($timed_out ? 'timed out' : $rc, $out, $err);
}

# Polls $sql until it returns $want, at most $seconds (errors and timeouts
# count as not yet); returns the seconds it took, or undef.
sub cv_wait_for
{
	my ($node, $sql, $want, $seconds) = @_;
	my $start = Time::HiRes::time();
	while (Time::HiRes::time() - $start < $seconds)
	{
		my ($rc, $out) = cv_try_sql($node, $sql, 30);
		return Time::HiRes::time() - $start if $rc eq '0' && defined $out && $out eq $want;
		Time::HiRes::usleep(20_000);
	}
	return undef;
}

# A psql in the background under application_name $app.
sub _cv_session
{
	my ($node, $app, @commands) = @_;
	my ($out, $err) = ('', '');
	return IPC::Run::start(
		[
			'psql', '-XAtq', '-d',
			$node->connstr('postgres') . " application_name=$app",
			map { ('-c', $_) } @commands
		],
		'<', \undef, '>', \$out, '2>', \$err);
}

# Runs @commands in a session whose backend gdb stops at its $hits-th call
# of GenericXLogFinish (the $hits-1 records before it are written); then a
# commit from another session flushes the WAL, and the stopped backend is
# killed.  The session first waits for an advisory lock held until gdb is
# in place.  Returns gdb's output (without "Breakpoint 1," when the
# commands wrote fewer records and ended).  The node needs
# restart_after_crash = on (the default).
sub cv_crash_at_record
{
	my ($node, $hits, @commands) = @_;
	$node->safe_psql('postgres', 'CREATE TABLE IF NOT EXISTS cv_marker (x int)');
	my $holder = _cv_session($node, 'cv_holder', 'SELECT pg_advisory_lock(4242)',
		'SELECT pg_sleep(3600)');
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted"
	) or die 'the lock holder did not start';
	my $victim =
	  _cv_session($node, 'cv_victim', 'SELECT pg_advisory_lock(4242)', @commands);
	$node->poll_query_until('postgres',
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'cv_victim' AND wait_event_type = 'Lock'"
	) or die 'the victim session did not start';
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'cv_victim'");

	my $flush = sprintf(
		q{shell psql -XAtq -h '%s' -p %d -d postgres -c 'INSERT INTO cv_marker VALUES (1)'},
		$node->host, $node->port);
	my $gdb_out = '';
	my $timer = IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default);
	my $gdb = IPC::Run::start(
		[
			'gdb', '-nx', '-batch', '-p', $pid,
			'-ex', 'set pagination off',
			# the backend's own signals (latches, timeouts) pass through
			'-ex', 'handle all nostop noprint pass',
			'-ex', 'break GenericXLogFinish',
			'-ex', 'ignore 1 ' . ($hits - 1),
			'-ex', 'continue',
			'-ex', 'bt 3',
			'-ex', $flush,
			'-ex', 'signal SIGKILL'
		],
		'<', \undef, '>&', \$gdb_out, $timer);
	pump_until($gdb, $timer, \$gdb_out, qr/Breakpoint 1 at/)
	  or die "gdb did not set its breakpoint: $gdb_out";
	# let the victim go: it runs into the breakpoint
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cv_holder'"
	);
	$gdb->finish;
	$holder->finish;
	$victim->finish;
	# the postmaster reinitialises after the crash; wait for recovery
	$node->poll_query_until('postgres', 'SELECT count(*) > 0 FROM cv_marker')
	  or die 'the server did not come back after the crash';
	$node->safe_psql('postgres', 'TRUNCATE cv_marker');
	note join "\n", grep { /^#\d/ } split /\n/, $gdb_out;
	return $gdb_out;
}

# Whether gdb can attach to a backend of $node (ptrace may be forbidden, or
# gdb missing).
sub cv_gdb_can_attach
{
	my ($node) = @_;
	return 0 if system('gdb --version >/dev/null 2>&1') != 0;
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'");
	my $probe = `gdb -nx -batch -p $pid -ex 'info sharedlibrary' 2>&1`;
	return $probe !~ /ptrace|Operation not permitted|Could not attach/i;
}

1;
