
# Parallel cvivf builds (src/ivf/build_parallel.c): with
# max_parallel_maintenance_workers = 2 (and parallel_workers on the table so
# the planner asks for them) the workers really run (the DEBUG1 lines of the
# leader and of each participant, their rows adding up to the indexed rows)
# and the index equals the serial build's for the same seed, under L2, inner
# product and cosine, and built CONCURRENTLY: the same lists and
# cvivf_lists rows, the same pages byte for byte after the page header's
# LSN and checksum (pageinspect, where it is installed), and the same
# ordered answers with distances when every list is probed.  The table has
# NULL vectors, zero vectors (not indexed under cosine) and HOT chains.
# A table too small for workers builds serially; an empty table and one of
# NULL vectors get the empty index; progress counts the rows every
# participant assigned; a build cancelled while the workers assign (and one
# stopped by statement_timeout) leaves no worker, catalog row, relation file
# or temporary file behind, and the table builds afterwards.  A build whose
# assignment runs on the GPU worker launches no parallel worker.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $dims = 24;
my $rows = 30000;

my $node = cv_new_node('parallel_build');
$node->append_conf('postgresql.conf', qq(
autovacuum = off
max_worker_processes = 8
max_parallel_workers = 8
));
$node->restart;

sub sql { return cv_sql($node, $_[0], $_[1]); }

my $have_pageinspect =
  sql("SELECT count(*) FROM pg_available_extensions WHERE name = 'pageinspect'") eq '1';
sql('CREATE EXTENSION pageinspect') if $have_pageinspect;
note $have_pageinspect ? 'pageinspect: pages compared byte for byte'
  : 'pageinspect is not installed: pages not compared';

# clustered rows, every 97th vector NULL and every 89th zero; HOT updates
cv_load_clustered($node, 't', rows => $rows, dims => $dims, centres => 40, seed => 0.3);
sql(qq{
ALTER TABLE t ADD COLUMN note text;
ALTER TABLE t SET (parallel_workers = 2, fillfactor = 70);
UPDATE t SET v = NULL WHERE id % 97 = 0;
UPDATE t SET v = array_fill(0::real, ARRAY[$dims])::cvec WHERE id % 89 = 0;
VACUUM t;
UPDATE t SET note = 'hot' WHERE id % 13 = 0;
});

# Builds $index with $workers maintenance workers; returns the DEBUG1 text.
sub build
{
	my ($index, $workers, $ddl) = @_;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET max_parallel_maintenance_workers = $workers; SET client_min_messages = debug1; $ddl",
		timeout => 300);
	is($rc, 0, "$index: built") or diag $err;
	return $err;
}

# Checks the DEBUG1 lines of a parallel build: $want workers launched, and
# the rows of the leader and each worker add up to $indexed.
sub workers_ran
{
	my ($index, $err, $want, $indexed) = @_;
	like($err, qr/cvivf build of "$index": $want parallel workers launched of $want planned/,
		"$index: $want parallel workers launched");
	my @workers = $err =~ /cvivf build of "$index": a parallel worker assigned (\d+) rows/g;
	my ($leader) = $err =~ /cvivf build of "$index": the leader assigned (\d+) rows/;
	is(scalar(@workers), $want, "$index: each worker reported its rows");
	my $sum = ($leader // 0);
	$sum += $_ for @workers;
	is($sum, $indexed, "$index: the participants' rows add up to the indexed rows");
	note "$index: leader " . ($leader // 'none') . ', workers ' . join(', ', @workers);
	return @workers;
}

# What must be equal between two builds: cvivf_lists, the pages (without
# pd_lsn and pd_checksum) and ordered answers over every list.
sub fingerprint
{
	my ($index, $table, $op) = @_;
	my %f;
	$f{lists} = sql("SELECT string_agg(l::text, E'\\n' ORDER BY list) FROM cvivf_lists('$index') l");
	$f{blocks} = sql("SELECT pg_relation_size('$index') / 8192");
	$f{pages} = sql(qq{SELECT md5(string_agg(substr(get_raw_page('$index', b::int), 11), ''::bytea ORDER BY b))
		FROM generate_series(0, pg_relation_size('$index') / 8192 - 1) b})
	  if $have_pageinspect;
	my $lists = sql("SELECT count(*) FROM cvivf_lists('$index')");
	my $settings = "SET enable_seqscan = off; SET enable_bitmapscan = off; SET clustervec.probes = $lists;";
	like(sql("$settings EXPLAIN (COSTS OFF) SELECT id FROM $table ORDER BY v $op (SELECT v FROM $table WHERE id = 2) LIMIT 5"),
		qr/Index Scan using $index/, "$index: the answers come from a scan of $index");
	$f{answers} = sql(qq{$settings
		SELECT string_agg(a, E'\\n' ORDER BY q) FROM (
			SELECT q.id AS q, (SELECT string_agg(s.id || ':' || s.d, ',') FROM (
				SELECT t.id, t.v $op q.v AS d FROM $table t ORDER BY t.v $op q.v LIMIT 300) s) AS a
			FROM $table q WHERE q.id IN (2, 3, 5, 1000, 20001)) x});
	return \%f;
}

sub same_index
{
	my ($what, $serial, $parallel) = @_;
	for my $k (sort keys %$serial)
	{
		is($parallel->{$k}, $serial->{$k}, "$what: the parallel build's $k equal the serial build's");
	}
	return;
}

my %ops = (l2 => ['cvec_l2_ops', '<->'], ip => ['cvec_ip_ops', '<#>'], cosine => ['cvec_cosine_ops', '<=>']);
for my $metric (sort keys %ops)
{
	my ($class, $op) = @{ $ops{$metric} };
	my $indexed = sql('SELECT count(*) FROM t WHERE v IS NOT NULL'
		  . ($metric eq 'cosine' ? " AND v <> array_fill(0::real, ARRAY[$dims])::cvec" : ''));
	my $ddl = "CREATE INDEX t_$metric ON t USING cvivf (v $class) WITH (lists = 60, seed = 11)";

	my $err = build("t_$metric", 0, $ddl);
	unlike($err, qr/parallel workers launched/, "$metric: max_parallel_maintenance_workers = 0 builds serially");
	my $serial = fingerprint("t_$metric", 't', $op);
	sql("DROP INDEX t_$metric");

	$err = build("t_$metric", 2, $ddl);
	workers_ran("t_$metric", $err, 2, $indexed);
	same_index($metric, $serial, fingerprint("t_$metric", 't', $op));
	cv_verify_ok($node, "t_$metric");
	is(sql("SELECT coalesce(sum(tuples), 0) FROM cvivf_lists('t_$metric')"), $indexed,
		"$metric: the index holds every indexable row");
	sql("DROP INDEX t_$metric");
}

# CREATE INDEX CONCURRENTLY (an MVCC snapshot for the parallel scan)
my $cic = 'CREATE INDEX CONCURRENTLY t_cic ON t USING cvivf (v) WITH (lists = 50, seed = 5)';
build('t_cic', 0, $cic);
my $serial_cic = fingerprint('t_cic', 't', '<->');
sql('DROP INDEX t_cic');
workers_ran('t_cic', build('t_cic', 2, $cic), 2, sql('SELECT count(*) FROM t WHERE v IS NOT NULL'));
same_index('concurrently', $serial_cic, fingerprint('t_cic', 't', '<->'));
sql('DROP INDEX t_cic');

# a table too small to warrant workers (no parallel_workers set): serial
sql(qq{CREATE TABLE small AS SELECT id, v FROM t WHERE id <= 2000;});
my $err = build('small_idx', 2, 'CREATE INDEX small_idx ON small USING cvivf (v) WITH (lists = 10)');
unlike($err, qr/parallel workers launched/, 'a small table builds without workers');
is(sql("SELECT coalesce(sum(tuples), 0) FROM cvivf_lists('small_idx')"),
	sql('SELECT count(*) FROM small WHERE v IS NOT NULL'), 'the small table is indexed');

# a tiny table with parallel_workers set: workers start, and may find no block left
sql(qq{CREATE TABLE tiny (id int, v cvec($dims)) WITH (parallel_workers = 2);
INSERT INTO tiny SELECT id, v FROM t WHERE id <= 40;});
build('tiny_s', 0, 'CREATE INDEX tiny_s ON tiny USING cvivf (v) WITH (lists = 4, seed = 2)');
my $tiny_serial = fingerprint('tiny_s', 'tiny', '<->');
sql('DROP INDEX tiny_s');
$err = build('tiny_s', 2, 'CREATE INDEX tiny_s ON tiny USING cvivf (v) WITH (lists = 4, seed = 2)');
workers_ran('tiny_s', $err, 2, sql('SELECT count(*) FROM tiny WHERE v IS NOT NULL'));
same_index('tiny table', $tiny_serial, fingerprint('tiny_s', 'tiny', '<->'));

# an empty table and a table of NULL vectors: the empty index, no workers
for my $case (['empty', ''], ['nulls', "INSERT INTO nulls SELECT i, NULL FROM generate_series(1, 5000) i;"])
{
	my ($table, $fill) = @$case;
	sql("CREATE TABLE $table (id int, v cvec($dims)) WITH (parallel_workers = 2); $fill");
	$err = build("${table}_idx", 2, "CREATE INDEX ${table}_idx ON $table USING cvivf (v)");
	like($err, qr/was built on a table without vectors/, "$table: the empty index (NOTICE)");
	unlike($err, qr/parallel workers launched/, "$table: no workers for a table without vectors");
	is(sql("SELECT count(*) || ' ' || coalesce(sum(tuples), 0) FROM cvivf_lists('${table}_idx')"),
		'1 0', "$table: one empty list");
	sql("INSERT INTO $table VALUES (0, (SELECT v FROM t WHERE id = 2))");
	is(sql("SELECT count(*) FROM cvivf_lists('${table}_idx') WHERE tuples = 1"), '1',
		"$table: the index takes inserts");
}

# ---------------------------------------------------------------------
# Progress and cancel, on a table whose assignment takes a while: 2,000
# lists of 256 dimensions, k-means kept short (one iteration over 4,000
# sampled rows) so that most of the build is the parallel pass.
my $big_rows = 60000;
sql(qq{
CREATE TABLE c (id int, v cvec(256)) WITH (parallel_workers = 2);
SELECT setseed(0.25);
INSERT INTO c SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, 256) WHERE i > 0)::cvec
	FROM generate_series(1, $big_rows) i;
}, 300);
my $c_ddl = 'CREATE INDEX c_idx ON c USING cvivf (v) WITH (lists = 2000, sample_rows = 4000, iterations = 1)';

# Starts the build of c_idx in a background session after $settings;
# returns (session, pid).
sub start_build
{
	my ($settings) = @_;
	my $bg = $node->background_psql('postgres', on_error_stop => 0, timeout => 300);
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_safe("SET max_parallel_maintenance_workers = 2; $settings");
	$bg->query_until(qr/started/,
		"\\echo started\nSET client_min_messages = debug1;\n$c_ddl;\n");
	return ($bg, $pid);
}

# Polls $pid's progress row until the phase $until, or until the build
# ended; returns the samples [seconds since $t0, phase, tuples done, total].
sub watch_progress
{
	my ($pid, $t0, $until) = @_;
	my @seen;
	while (time - $t0 < 240)
	{
		my ($phase, $done, $total, $state, $query) = split /\|/, sql(qq{
SELECT coalesce(p.phase, '') || '|' || coalesce(p.tuples_done, 0) || '|' || coalesce(p.tuples_total, 0)
	|| '|' || coalesce(a.state, '') || '|' || left(a.query, 12)
FROM pg_stat_activity a LEFT JOIN pg_stat_progress_create_index p USING (pid) WHERE a.pid = $pid}), -1;
		last if ($state // '') ne 'active' && ($query // '') eq 'CREATE INDEX';
		if (($phase // '') ne '')
		{
			push @seen, [ time - $t0, $phase, $done, $total ];
			last if defined $until && $phase eq "building index: $until";
		}
		usleep(10_000);
	}
	return @seen;
}

# one whole parallel build, watched: progress counts every participant's rows
my $t0 = time;
my ($bg, $pid) = start_build('');
my @seen = watch_progress($pid, $t0);
my $log = $bg->query('SELECT 1');
my $took = time - $t0;
my @assigning = grep { $_->[1] eq 'building index: assigning tuples' } @seen;
ok(@assigning > 0, 'progress showed the phase "assigning tuples"');
cmp_ok((sort { $b <=> $a } 0, map { $_->[2] } @assigning)[0], '>', 0,
	'progress counted assigned rows during the parallel pass');
is(@assigning ? $assigning[0][3] : -1, $big_rows, 'tuples_total is the rows to assign');
my @workers = workers_ran('c_idx', $bg->{stderr}, 2, $big_rows);
ok((grep { $_ > 0 } @workers) > 0, 'a worker assigned rows of the big table');
$bg->quit;
my ($a_start, $a_end) = @assigning ? ($assigning[0][0], $assigning[-1][0]) : (0, $took);
note sprintf('parallel build of c: %.2f s, assigning from %.2f s to %.2f s', $took, $a_start, $a_end);
my $c_lists = sql("SELECT md5(string_agg(l::text, E'\\n' ORDER BY list)) FROM cvivf_lists('c_idx') l");
sql('DROP INDEX c_idx');

# The files of relations in the database (main forks) and temporary files.
sub relation_files
{
	return sql(qq{CHECKPOINT; SELECT string_agg(f, ' ' ORDER BY f) FROM pg_ls_dir('base/' ||
		(SELECT oid FROM pg_database WHERE datname = current_database())) f WHERE f ~ '^[0-9]+\$'});
}
my $files_before = relation_files();

sub no_leftovers
{
	my ($what) = @_;
	ok(defined cv_wait_for($node,
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'", '0', 60),
		"$what: no parallel worker left");
	is(sql("SELECT count(*) FROM pg_class WHERE relname = 'c_idx'"), '0', "$what: no index in the catalog");
	is(relation_files(), $files_before, "$what: no relation file left");
	is(sql("SELECT count(*) FROM pg_ls_dir('base/pgsql_tmp', true, false)"), '0',
		"$what: no temporary file left");
	return;
}

# pg_cancel_backend while the workers assign
($bg, $pid) = start_build('');
@seen = watch_progress($pid, time, 'assigning tuples');
ok((grep { $_->[1] eq 'building index: assigning tuples' } @seen) > 0,
	'the build reached the parallel pass');
ok(defined cv_wait_for($node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND leader_pid = $pid",
		'2', 30),
	'two parallel workers run for it');
is(sql("SELECT pg_cancel_backend($pid)"), 't', 'pg_cancel_backend');
$bg->{stderr} = '';
is($bg->query('SELECT 1'), '1', 'the session goes on after the cancel');
like($bg->{stderr}, qr/canceling statement due to user request/, 'the build ends with the ERROR of a cancel');
$bg->quit;
no_leftovers('cancelled build');

# statement_timeout in the middle of the assignment measured above (the
# phase it lands in depends on the load; the leftovers must be none anyway)
my $timeout_ms = int(1000 * ($a_start + $a_end) / 2);
($bg, $pid) = start_build("SET statement_timeout = $timeout_ms;");
@seen = watch_progress($pid, time);
$bg->{stderr} = '';
$bg->query('SELECT 1');
like($bg->{stderr}, qr/canceling statement due to statement timeout/,
	"statement_timeout = $timeout_ms ms stops the build");
note 'statement_timeout landed after the phase: ' . (@seen ? $seen[-1][1] : 'none seen');
$bg->quit;
no_leftovers('build stopped by statement_timeout');

# the table builds after both, the same index as before
build('c_idx', 2, $c_ddl);
# (the sample is drawn by a scan from the first block, not where a
# cancelled scan of this large table left the synchronized scan position)
is(sql("SELECT md5(string_agg(l::text, E'\\n' ORDER BY list)) FROM cvivf_lists('c_idx') l"), $c_lists,
	'the build after the cancels makes the same lists');
cv_verify_ok($node, 'c_idx');

$node->stop;

# A build whose assignment runs on the GPU worker stays serial.  In CI the
# worker opens the CPU implementation of the GPU library, whose answers are
# src/math's: the same index as the CPU build's, which runs in parallel.
my $gpu = cv_gpu_node('parallel_build_gpu');
ok(defined cv_wait_for($gpu, 'SELECT worker_state FROM clustervec_gpu_info()', 'ready', 60),
	'the GPU worker is ready');
cv_load_clustered($gpu, 'g', rows => 20000, dims => 32, centres => 40);
cv_sql($gpu, 'ALTER TABLE g SET (parallel_workers = 2)');
my $g_ddl = 'CREATE INDEX g_idx ON g USING cvivf (v) WITH (lists = 40, seed = 3)';
my $g_lists = "SELECT md5(string_agg(l::text, E'\\n' ORDER BY list)) FROM cvivf_lists('g_idx') l";
my ($rc, $out, $g_err) = $gpu->psql('postgres',
	"SET clustervec.gpu = require; SET max_parallel_maintenance_workers = 2; SET client_min_messages = debug1; $g_ddl",
	timeout => 300);
is($rc, 0, 'the build under clustervec.gpu = require ran') or diag $g_err;
unlike($g_err, qr/parallel workers launched/, 'a build on the GPU launches no parallel worker');
is(cv_sql($gpu, 'SELECT index_builds FROM clustervec_gpu_info()'), '1', 'the GPU worker served the build');
my $gpu_lists = cv_sql($gpu, $g_lists);
cv_sql($gpu, 'DROP INDEX g_idx');
($rc, $out, $g_err) = $gpu->psql('postgres',
	"SET clustervec.gpu = off; SET max_parallel_maintenance_workers = 2; SET client_min_messages = debug1; $g_ddl",
	timeout => 300);
like($g_err, qr/2 parallel workers launched of 2 planned/,
	'with clustervec.gpu = off the same build runs in parallel workers');
is(cv_sql($gpu, $g_lists), $gpu_lists, 'and makes the lists of the GPU library on the CPU')
  if cv_gpu_library() ne 'clustervec_cuda';
$gpu->stop;

done_testing();
