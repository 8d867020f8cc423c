
# The GPU paths of cluster_health, CREATE INDEX and cvsearch through the
# worker.  In CI the worker opens clustervec_cuda_cpu (the CPU implementation
# of the library API); CV_GPU_LIBRARY=clustervec_cuda runs the same file on
# the H200, where the tolerances of STATISTICS.md apply.
#
# - cluster_health (every form) under clustervec.gpu = require equals the
#   CPU path (off) column by column, in one chunk and in many (a small
#   clustervec.health_memory); the worker's health counter grows; device
#   buffers are all freed afterwards, also after a cancelled run;
# - CREATE INDEX under require: the build counter grows, cvivf_verify
#   passes, final recall@10 within 0.01 of the CPU-built index;
# - cvsearch equals the index scan run one query at a time (CPU, and GPU over
#   a mirror); clustervec_gpu_warm and clustervec_gpu_mirrors; rows inserted
#   after mirroring are found; deleted rows are replaced; VACUUM makes the
#   mirror stale (a new generation); a miss mirrors the index in the background.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $gpu_library = cv_gpu_library();
my $real_gpu = $gpu_library eq 'clustervec_cuda';

my $node = cv_gpu_node('gpu_paths', qq{
maintenance_work_mem = 128MB
max_worker_processes = 16
});

sub sql
{
	my ($sql, $timeout) = @_;
	return cv_sql($node, $sql, $timeout // 300);
}

sub wait_for { return cv_wait_for($node, @_); }

sub info
{
	my ($column) = @_;
	return sql("SELECT $column FROM clustervec_gpu_info()");
}

ok(defined wait_for("SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

# ---------------------------------------------------------------- health
# clusters of 1, 2, 17 members and larger ones, shared offsets, duplicates
sql(q{
SELECT setseed(0.31);
CREATE TABLE h (id bigint PRIMARY KEY, c int, v cvec(48));
INSERT INTO h SELECT i, i % 40, cv_point(i % 40, 48, 1.5 + (i % 40) / 10.0)
	FROM generate_series(1, 6000) i;
INSERT INTO h SELECT 100000 + i, 1000, cv_point(7, 48, 1.0) FROM generate_series(1, 17) i;
INSERT INTO h SELECT 200000, 1001, cv_point(3, 48, 1.0);
INSERT INTO h SELECT 300000 + i, 1002, v FROM h CROSS JOIN generate_series(1, 2) i WHERE h.id = 5;
INSERT INTO h SELECT 400000 + i, 1003, cv_point(9, 48, 0.5) FROM generate_series(1, 2) i;
INSERT INTO h SELECT 500000 + id, 1004, v FROM h WHERE c = 11 AND id < 3000;
ANALYZE h;
});

my @names = split /\|/, sql(
	q{SELECT string_agg(attname, '|' ORDER BY attnum) FROM pg_attribute
	  WHERE attrelid = (SELECT typrelid FROM pg_type WHERE typname = 'cluster_health_row')
	    AND attnum > 0 AND NOT attisdropped});

# Column classes for the tolerance (STATISTICS.md on a GPU; near-exact on the shim)
my %length = map { $_ => 1 } qw(centroid_norm mean_dist spread radius mean_norm
  mean_pairwise_dist breadth nearest_dist);
my %energy = map { $_ => 1 } qw(inertia between_ss);
my %count_ratio = map { $_ => 1 } qw(outlier_ratio core_periphery_ratio redundancy
  redundant_members local_density neighbour_relevance);
my %moment = map { $_ => 1 } qw(skew kurtosis);
my %loose = map { $_ => 1 } qw(sigma dist_entropy entanglement potential_depth curvature
  escape_probability split_gain split_balance split_separation split_silhouette);

sub close_enough
{
	my ($name, $got, $want, $row) = @_;
	return 1 if $got eq $want;
	return 0 if $got eq '' || $want eq '';
	return 0 if $name eq 'cluster' || $name eq 'n' || $name eq 'nearest_cluster';
	my $diff = abs($got - $want);
	unless ($real_gpu)
	{
		return $diff <= 1e-9 * abs($want) + 1e-12;
	}
	my $mean_norm = $row->{mean_norm} || 1;
	my $n = $row->{n} || 1;
	return $diff <= 1e-4 * abs($want) + 1e-6 * $mean_norm if $length{$name};
	return $diff <= 1e-4 * abs($want) + 1e-3 * $n * $mean_norm**2 if $energy{$name};
	return $diff <= 1e-4 * abs($want) + 1e-5 * 10 if $moment{$name};
	# threshold counts may move by the items inside their band: a few per cluster
	return $diff <= 3.0 / $n + 1e-6 if $count_ratio{$name};
	return $diff <= 0.02 * abs($want) + 0.02 if $loose{$name};
	return $diff <= 1e-4 * abs($want) + 1e-6;
}

# Compares two result sets of cluster_health rows, by label.
sub compare_health
{
	my ($label, $cpu, $gpu) = @_;
	my @cpu_rows = split /\n/, $cpu;
	my @gpu_rows = split /\n/, $gpu;
	is(scalar @gpu_rows, scalar @cpu_rows, "$label: as many rows as the CPU path");
	my @bad;
	for my $r (0 .. $#cpu_rows)
	{
		my @want = split /\|/, $cpu_rows[$r], -1;
		my @got = split /\|/, ($gpu_rows[$r] // ''), -1;
		my %row = map { $names[$_] => $want[$_] } 0 .. $#names;
		for my $c (0 .. $#names)
		{
			push @bad, "$want[0].$names[$c]: gpu '" . ($got[$c] // 'missing') . "' cpu '$want[$c]'"
			  unless close_enough($names[$c], $got[$c] // '', $want[$c], \%row);
		}
	}
	ok(!@bad, "$label: every column within tolerance")
	  or diag(join("\n", @bad[0 .. ($#bad < 20 ? $#bad : 19)]));
	return;
}

my $health = q{SELECT * FROM cluster_health('h', 'c', 'v', 'id', progress => false) ORDER BY cluster};
my $cpu_health = sql("SET clustervec.gpu = off; $health");
my $runs0 = info('health_runs');
my $gpu_health = sql("SET clustervec.gpu = require; $health");
compare_health('cluster_health, one chunk', $cpu_health, $gpu_health);
cmp_ok(info('health_runs'), '>', $runs0, 'the GPU served cluster_health');
compare_health('cluster_health, chunks of about 1 MB',
	$cpu_health, sql("SET clustervec.gpu = require; SET clustervec.health_memory = '1MB'; $health"));

my $query = q{SELECT * FROM cluster_health_query('SELECT c, v, id FROM h WHERE c < 30', progress => false) ORDER BY cluster};
compare_health('cluster_health_query',
	sql("SET clustervec.gpu = off; $query"), sql("SET clustervec.gpu = require; $query"));

my $summary = q{SELECT round(davies_bouldin::numeric, 4), round(calinski_harabasz::numeric, 2),
	round(cohesion::numeric, 5), round(centroid_silhouette::numeric, 4), k, n
	FROM cluster_health_summary('h', 'c', 'v', progress => false)};
is(sql("SET clustervec.gpu = require; $summary"), sql("SET clustervec.gpu = off; $summary"),
	'cluster_health_summary equals the CPU path');
ok(defined wait_for('SELECT buffers FROM clustervec_gpu_info()', '0', 10),
	'no device buffer is left after the runs');

# a cancelled run frees its buffers when its transaction ends
my ($rc, $out, $err);
$rc = $node->psql('postgres',
	"SET clustervec.gpu = require; SET statement_timeout = '30ms'; SET clustervec.health_memory = '1MB'; $health",
	stdout => \$out, stderr => \$err);
ok(defined wait_for('SELECT buffers FROM clustervec_gpu_info()', '0', 10),
	'no device buffer is left after a cancelled run');
is(sql('SELECT worker_state FROM clustervec_gpu_info()'), 'ready', 'the worker still serves');

# the CPU path stops inside one large cluster's pairwise pass for a cancel:
# uninterrupted this cluster takes about 25 s here
sql(q{CREATE TABLE one_big AS SELECT i AS id, 1 AS c,
	(SELECT array_agg(random()::real) FROM generate_series(1, 32) WHERE i > 0)::cvec AS v
	FROM generate_series(1, 60000) i});
my $t0 = time;
$rc = $node->psql('postgres',
	q{SET clustervec.gpu = off; SET statement_timeout = '1s';
	  SELECT count(*) FROM cluster_health('one_big', 'c', 'v', progress => false)},
	stdout => \$out, stderr => \$err);
my $took = time - $t0;
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout ends a large cluster');
cmp_ok($took, '<', 10, sprintf('within the pairwise pass (%.1f s)', $took));
sql('DROP TABLE one_big');

# ---------------------------------------------------------------- builds
cv_load_clustered($node, 'items', rows => 20000, dims => 32, centres => 64, sigma => 1.5);
sql(q{
SELECT setseed(0.77);
CREATE TABLE queries AS SELECT i AS qid, cv_point((i * 7) % 64, 32, 1.5) AS v
	FROM generate_series(1, 100) i;
CREATE TABLE truth AS SELECT q.qid, t.id FROM queries q,
	LATERAL (SELECT id FROM items ORDER BY v <-> q.v LIMIT 10) t;
});

sub recall
{
	my ($index_hint) = @_;
	return sql(qq{SET clustervec.gpu = off; SET enable_seqscan = off; SET clustervec.probes = 4;
SELECT round(avg(hit)::numeric, 3) FROM (
	SELECT (SELECT count(*) FROM truth t WHERE t.qid = q.qid AND t.id IN
	           (SELECT id FROM items ORDER BY v <-> q.v LIMIT 10)) / 10.0 AS hit
	FROM queries q) r});
}

sql(q{SET clustervec.gpu = off; CREATE INDEX items_cpu ON items USING cvivf (v cvec_l2_ops) WITH (lists = 64, seed = 5)});
my $recall_cpu = recall();
sql('DROP INDEX items_cpu');
my $builds0 = info('index_builds');
sql(q{SET clustervec.gpu = require; CREATE INDEX items_gpu ON items USING cvivf (v cvec_l2_ops) WITH (lists = 64, seed = 5)});
cmp_ok(info('index_builds'), '>', $builds0, 'the GPU served CREATE INDEX');
cv_verify_ok($node, 'items_gpu', 'the GPU-built index verifies');
is(sql(q{SELECT sum(tuples) FROM cvivf_lists('items_gpu')}), '20000', 'every row is indexed');
my $recall_gpu = recall();
cmp_ok(abs($recall_gpu - $recall_cpu), '<=', 0.01,
	"recall@10 at 4 probes: GPU build $recall_gpu, CPU build $recall_cpu");
sql(q{SET clustervec.gpu = require; SET clustervec.gpu_assign = bf16;
CREATE INDEX items_bf16 ON items USING cvivf (v cvec_l2_ops) WITH (lists = 64, seed = 5)});
is(sql(q{SELECT sum(tuples) FROM cvivf_lists('items_bf16')}), '20000',
	'a build with bf16 assignment indexes every row');
sql('DROP INDEX items_bf16');

# ---------------------------------------------------------------- search
# one-at-a-time index scans: the reference cvsearch must equal
sub one_at_a_time
{
	my ($k, $probes, $where, $mode, $filter) = @_;
	$where //= 'qid <= 40';
	$mode //= 'off';
	$filter = $filter ? "WHERE $filter" : '';
	return sql(qq{SET clustervec.gpu = $mode; SET enable_seqscan = off; SET clustervec.probes = $probes;
SELECT string_agg(concat_ws(' ', qid, r, id, round(d::numeric, 9)), ',' ORDER BY qid, r) FROM (
	SELECT q.qid, row_number() OVER (PARTITION BY q.qid ORDER BY x.d, x.id) AS r, x.id, x.d
	FROM queries q, LATERAL (SELECT id, v <-> q.v AS d FROM items $filter ORDER BY v <-> q.v LIMIT $k) x
	WHERE $where) s});
}

sub batch
{
	my ($mode, $k, $probes, $where) = @_;
	$where //= 'qid <= 40';
	return sql(qq{SET clustervec.gpu = $mode;
WITH qs AS (SELECT array_agg(v ORDER BY qid) AS a, array_agg(qid ORDER BY qid) AS ids FROM queries WHERE $where),
     r AS (SELECT s.* FROM qs, cvsearch('items_gpu', qs.a, $k, $probes) s)
SELECT string_agg(concat_ws(' ', qid, rr, id, round(d::numeric, 9)), ',' ORDER BY qid, rr) FROM (
	SELECT (SELECT ids[r.query_no] FROM qs) AS qid,
	       row_number() OVER (PARTITION BY r.query_no ORDER BY r.distance, i.id) AS rr, i.id, r.distance AS d
	FROM r JOIN items i ON i.ctid = r.tid) s});
}

my $want = one_at_a_time(10, 4);
is(batch('off', 10, 4), $want, 'cvsearch on the CPU equals one-at-a-time index scans');
is(sql(q{SELECT count(*) FROM clustervec_gpu_mirrors()}), '0', 'no mirror yet');
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_gpu')}), 't',
	'clustervec_gpu_warm makes a mirror');
is(sql(q{SELECT index::text, generation > 0, bytes >= 20000 * 32 * 4 FROM clustervec_gpu_mirrors()}),
	'items_gpu|t|t', 'clustervec_gpu_mirrors lists it');
my $searches0 = info('searches');
is(batch('require', 10, 4), $want, 'cvsearch over the mirror equals one-at-a-time index scans');
cmp_ok(info('searches'), '>', $searches0, 'the GPU served cvsearch');
is(batch('require', 50, 8), one_at_a_time(50, 8), 'k = 50, 8 probes: equal too');
is(batch('require', 600, 1, 'qid <= 5'), one_at_a_time(600, 1, 'qid <= 5'),
	'k beyond the rows of the probed list: the next lists, as the iterative index scan');

# rows inserted after the mirror, some right at the queries
sql(q{INSERT INTO items SELECT 1000000 + qid, -1, v FROM queries WHERE qid % 3 = 0;
	  INSERT INTO items SELECT 2000000 + i, -1, cv_point(i % 64, 32, 1.5) FROM generate_series(1, 500) i});
is(batch('require', 10, 4), one_at_a_time(10, 4),
	'rows inserted after the mirror are found and merged');
# deleted rows are invisible: cvsearch replaces them
sql(q{DELETE FROM items WHERE id IN (SELECT 1000000 + qid FROM queries WHERE qid % 2 = 0)
	  OR id % 5 = 0});
is(batch('require', 10, 4), one_at_a_time(10, 4), 'deleted rows are replaced by the next ones');
my $generation = sql(q{SELECT generation FROM clustervec_gpu_mirrors()});
sql('VACUUM items');
is(batch('auto', 10, 4), one_at_a_time(10, 4), 'after VACUUM the answers are still right');
ok(defined wait_for(
		qq{SELECT count(*) FROM clustervec_gpu_mirrors() WHERE index = 'items_gpu'::regclass AND generation > $generation},
		'1', 60),
	'a miss after VACUUM mirrors the new generation in the background');
is(sql(q{SELECT count(*) FROM clustervec_gpu_mirrors()}), '1', 'the stale mirror is gone');
is(batch('require', 10, 4), one_at_a_time(10, 4), 'and the new mirror answers as the scans do');

# index scans (ORDER BY ... LIMIT) over the mirror: the same rows as the CPU scan
$searches0 = info('searches');
is(one_at_a_time(10, 4, undef, 'require'), one_at_a_time(10, 4), 'index scans over the mirror: LIMIT 10');
cmp_ok(info('searches'), '>', $searches0, 'the GPU served the index scans');
is(one_at_a_time(300, 8, 'qid <= 5', 'require'), one_at_a_time(300, 8, 'qid <= 5'),
	'LIMIT 300: the scan asks the worker again for more rows');
is(one_at_a_time(1500, 32, 'qid <= 3', 'require'), one_at_a_time(1500, 32, 'qid <= 3'),
	'LIMIT 1500: past what the worker serves the CPU continues without repeating a row');
is(one_at_a_time(10, 1, 'qid <= 10', 'require', 'c = 17'), one_at_a_time(10, 1, 'qid <= 10', 'off', 'c = 17'),
	'a filtered scan goes on with the next lists after the probed ones');
sql(q{INSERT INTO items SELECT 3000000 + qid, -2, v FROM queries WHERE qid <= 40});
is(one_at_a_time(10, 4, undef, 'require'), one_at_a_time(10, 4),
	'index scans find rows inserted after the mirror');

# clustervec.gpu_memory_limit: the least recently used mirror makes room
sql(q{SET clustervec.gpu = off; CREATE INDEX items_second ON items USING cvivf (v cvec_l2_ops) WITH (lists = 16)});
sql(q{ALTER SYSTEM SET clustervec.gpu_memory_limit = 4; SELECT pg_reload_conf()});
sleep(2);
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_gpu'), clustervec_gpu_warm('items_second')}),
	't|t', 'both indexes mirrored in turn under a 4 MB limit');
is(sql(q{SELECT string_agg(index::text, ',') FROM clustervec_gpu_mirrors()}), 'items_second',
	'the least recently used mirror was evicted for the new one');
is(one_at_a_time(10, 4, undef, 'auto'), one_at_a_time(10, 4), 'scans of the evicted index still answer (CPU)');
sql(q{ALTER SYSTEM RESET clustervec.gpu_memory_limit; SELECT pg_reload_conf()});
sleep(2);
is(sql(q{SET clustervec.gpu = require; SELECT clustervec_gpu_warm('items_gpu')}), 't', 'warm again');
sql('DROP INDEX items_second');
is(sql(q{SELECT string_agg(index::text, ',') FROM clustervec_gpu_mirrors()}), 'items_gpu',
	'DROP INDEX drops its mirror');

# errors
($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM cvsearch('items_pkey', ARRAY['[1,2]'::cvec], 5)},
	stdout => \$out, stderr => \$err);
like($err, qr/is not a cvivf index/, 'cvsearch refuses another kind of index');
($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM cvsearch('items_gpu', ARRAY['[1,2]'::cvec], 5)},
	stdout => \$out, stderr => \$err);
like($err, qr/has 2 dimensions, index "items_gpu" has 32/, 'cvsearch refuses a query of other dimensions');
($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM cvsearch('items_gpu', ARRAY[NULL::cvec], 5)},
	stdout => \$out, stderr => \$err);
like($err, qr/query 1 is NULL/, 'cvsearch refuses a NULL query');
($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM cvsearch('items_gpu', (SELECT array_agg(v) FROM queries), 5000)},
	stdout => \$out, stderr => \$err);
like($err, qr/k must be between 1 and 1024/, 'cvsearch refuses k beyond 1024');
is(sql(q{SELECT count(*) FROM cvsearch('items_gpu', ARRAY[]::cvec[], 5)}), '0',
	'cvsearch of no queries returns no rows');
is(sql(q{SELECT count(*) FROM cvsearch('items_gpu', ARRAY['[1,2]'::cvec], NULL)}), '0',
	'cvsearch with a NULL k returns no rows');
sql(q{CREATE TABLE empty_items (v cvec(32));
	  SET client_min_messages = warning;
	  CREATE INDEX empty_ivf ON empty_items USING cvivf (v cvec_l2_ops)});
is(sql(q{SET clustervec.gpu = require; SELECT count(*) FROM cvsearch('empty_ivf', (SELECT array_agg(v) FROM queries WHERE qid <= 3), 5)}),
	'0', 'cvsearch over an index of an empty table returns no rows');
($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM cvsearch('items_gpu', ARRAY['[1,2]'::cvec], 5, 0)},
	stdout => \$out, stderr => \$err);
like($err, qr/probes must be at least 1/, 'cvsearch refuses probes below 1');

$node->stop;
done_testing();
