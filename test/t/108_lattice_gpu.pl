
# cvlattice on the GPU worker and observed health (issue 12, items 4-5).
# In CI the worker opens clustervec_cuda_cpu; CV_GPU_LIBRARY=clustervec_cuda
# runs the same file on the H200.
#
# - cvlattice indexes (L2 and cosine) are mirrored; unfiltered ORDER BY ...
#   LIMIT scans and cvsearch are served by the worker, and their answers
#   equal the CPU path's (clustervec.gpu = off) row for row, distances
#   included, also after rows are inserted past the mirror; EXPLAIN ANALYZE
#   says the GPU served them, and that label-filtered scans run on the CPU;
# - answers are the same with clustervec.observe on and off;
# - observation counts each (query, probed list) once, and with every list
#   probed every member is seen (coverage 1), where inertia, mean_dist and
#   cohesion equal cluster_health's within STATISTICS.md's tolerances, for
#   both metrics (cosine: of the normalised vectors);
# - reset forgets it; a new label makes a new generation (and mirror) that
#   has seen nothing.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = cv_gpu_node('lattice_gpu', "autovacuum = off\n");

sub sql { return cv_sql($node, $_[0], $_[1] // 300); }

ok(defined cv_wait_for($node, "SELECT worker_state FROM clustervec_gpu_info()", 'ready', 60),
	'the worker is ready');

my $d = 24;
my $labels = 30;
cv_load_clustered($node, 't', rows => 9000, dims => $d, centres => $labels, sigma => 4.0,
	seed => 0.4);
sql(qq{
CREATE INDEX t_l2 ON t USING cvlattice (v cvec_l2_ops, c);
CREATE INDEX t_cos ON t USING cvlattice (v cvec_cosine_ops, c);
CREATE TABLE q (qid int PRIMARY KEY, c int, v cvec($d));
SELECT setseed(0.9);
INSERT INTO q SELECT i, i % $labels, cv_point((i % $labels)::int, $d, 4.0)
	FROM generate_series(1, 25) i;
});
is(sql("SELECT clustervec_gpu_warm('t_l2') AND clustervec_gpu_warm('t_cos')"), 't',
	'both cvlattice indexes are mirrored');

# every query's 10 nearest rows, with distances, by an index scan
sub scan_answers
{
	my ($op, $settings) = @_;
	return sql(qq{
SET enable_seqscan = off; SET clustervec.probes = 3; $settings
SELECT string_agg(qid || ':' || ids, ' ' ORDER BY qid) FROM (
	SELECT q.qid, (SELECT string_agg(id || '/' || round(dist::numeric, 10), ',' ORDER BY dist, id)
		FROM (SELECT t.id, t.v $op q.v AS dist FROM t ORDER BY t.v $op q.v LIMIT 10) x) AS ids
	FROM q) y});
}

sub cvsearch_answers
{
	my ($index, $probes, $settings) = @_;
	return sql(qq{$settings
SELECT string_agg(query_no || ':' || rank || ':' || tid || ':' || round(distance::numeric, 10),
	' ' ORDER BY query_no, rank)
FROM cvsearch('$index', ARRAY(SELECT v FROM q ORDER BY qid), 10, $probes)});
}

for my $case (['<->', 't_l2'], ['<=>', 't_cos'])
{
	my ($op, $index) = @$case;
	is(scan_answers($op, ''), scan_answers($op, 'SET clustervec.gpu = off;'),
		"$index: GPU index scans answer as the CPU path");
	is(cvsearch_answers($index, 3, ''), cvsearch_answers($index, 3, 'SET clustervec.gpu = off;'),
		"$index: cvsearch on the GPU answers as the CPU path");
}

my $explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM t %s "
  . "ORDER BY v <-> (SELECT v FROM q WHERE qid = 1) LIMIT 10";
like(sql("SET enable_seqscan = off; " . sprintf($explain, '')),
	qr/clustervec: 1 index scan on the GPU worker/, 'EXPLAIN ANALYZE: the GPU served the scan');
like(sql("SET enable_seqscan = off; " . sprintf($explain, 'WHERE c = 3')),
	qr/clustervec: 1 index scan on the GPU worker/,
	'EXPLAIN ANALYZE: the GPU served a label-filtered scan');

# label conditions: the GPU reads exactly those lists, as the CPU does
sub filtered_answers
{
	my ($op, $where, $settings) = @_;
	return sql(qq{
SET enable_seqscan = off; SET clustervec.probes = 1; $settings
SELECT string_agg(qid || ':' || ids, ' ' ORDER BY qid) FROM (
	SELECT q.qid, (SELECT string_agg(id || '/' || round(dist::numeric, 10), ',' ORDER BY dist, id)
		FROM (SELECT t.id, t.v $op q.v AS dist FROM t WHERE $where
			ORDER BY t.v $op q.v LIMIT 25) x) AS ids
	FROM q) y});
}
for my $case (['<->', 't.c = (q.qid * 7) % 30'], ['<=>', 't.c = (q.qid * 7) % 30'],
	['<->', 't.c = ANY (ARRAY[q.qid % 30, (q.qid + 11) % 30])'], ['<->', 't.c = 999'])
{
	my ($op, $where) = @$case;
	my $gpu = filtered_answers($op, $where, '');
	is($gpu, filtered_answers($op, $where, 'SET clustervec.gpu = off;'),
		"$op WHERE $where: the GPU answers as the CPU path");
}
is(filtered_answers('<->', 't.c = (q.qid * 7) % 30', ''),
	sql(qq{SET enable_indexscan = off; SET enable_bitmapscan = off;
SELECT string_agg(qid || ':' || ids, ' ' ORDER BY qid) FROM (
	SELECT q.qid, (SELECT string_agg(id || '/' || round(dist::numeric, 10), ',' ORDER BY dist, id)
		FROM (SELECT t.id, t.v <-> q.v AS dist FROM t WHERE t.c = (q.qid * 7) % 30
			ORDER BY t.v <-> q.v, t.id LIMIT 25) x) AS ids
	FROM q) y}),
	'label-filtered GPU answers equal exact search within the label');

# ------------------------------------------------------------ observed health
sql("SELECT cluster_health_observed_reset('t_l2')");
is(sql("SELECT sum(n_seen) || ' ' || sum(queries) FROM cluster_health_observed('t_l2')"), '0 0',
	'after a reset nothing is observed');
my $off = cvsearch_answers('t_l2', 3, 'SET clustervec.observe = off;');
is(sql("SELECT sum(queries) FROM cluster_health_observed('t_l2')"), '0',
	'searches with clustervec.observe off observe nothing');
my $on = cvsearch_answers('t_l2', 3, 'SET clustervec.observe = on;');
is($on, $off, 'cvsearch answers are the same with observation on and off');
is(sql("SELECT sum(queries) FROM cluster_health_observed('t_l2')"), 25 * 3,
	'every (query, probed list) pair is counted once');
is(sql(qq{SELECT count(*) FROM cluster_health_observed('t_l2')
	WHERE (queries > 0) <> (n_seen = n AND coverage = 1)}), '0',
	'a probed list has all its members seen; an unprobed one none');
is(scan_answers('<->', 'SET clustervec.observe = on;'), scan_answers('<->', ''),
	'index scans answer the same with observation on');

# coverage 1: every list probed; STATISTICS.md's tolerances against cluster_health
sub compare_with_cluster_health
{
	my ($index, $vectors) = @_;
	sql("SELECT cluster_health_observed_reset('$index')");
	cvsearch_answers($index, $labels, 'SET clustervec.observe = on;');
	return sql(qq{
WITH o AS (SELECT * FROM cluster_health_observed('$index')),
     h AS (SELECT * FROM cluster_health_query('SELECT c, $vectors FROM t', progress => false))
SELECT count(*) FILTER (WHERE o.coverage = 1 AND o.n = h.n
	AND abs(o.inertia_seen - h.inertia) <= 1e-4 * abs(h.inertia) + 1e-3 * h.n * h.mean_norm ^ 2 * 1e-6
	AND abs(o.mean_dist_seen - h.mean_dist) <= 1e-4 * abs(h.mean_dist) + 1e-6 * h.mean_norm
	AND abs(o.cohesion_seen - h.cohesion) <= 1e-4 * abs(h.cohesion) + 1e-6
	AND o.cluster_text = h.cluster_text)
	|| ' of ' || count(*)
FROM o JOIN h USING (cluster)});
}
is(compare_with_cluster_health('t_l2', 'v'), "$labels of $labels",
	'L2, coverage 1: inertia, mean_dist and cohesion equal cluster_health');
is(compare_with_cluster_health('t_cos', 'l2_normalize(v)'), "$labels of $labels",
	'cosine, coverage 1: equal cluster_health of the normalised vectors');

# rows past the mirror: answers still equal the CPU path's; n stays the mirror's
sql(qq{SELECT setseed(0.6);
INSERT INTO t SELECT 100000 + i, i % $labels, cv_point((i % $labels)::int, $d, 4.0)
	FROM generate_series(1, 300) i});
is(scan_answers('<->', ''), scan_answers('<->', 'SET clustervec.gpu = off;'),
	'after inserts past the mirror, GPU scans still answer as the CPU path');
is(sql("SELECT sum(n) FROM cluster_health_observed('t_l2')"), '9000',
	'n counts the members the mirror holds');

# a new label: a new generation, whose mirror has seen nothing yet
sql("INSERT INTO t VALUES (200000, 999, cv_point(3, $d, 4.0))");
my $notice = $node->psql('postgres', "SELECT count(*) FROM cluster_health_observed('t_l2')",
	stderr => \my $stderr);
like($stderr, qr/holds no mirror of index "t_l2", so nothing was observed/,
	'after a new label the old observation is gone, and the NOTICE says why');
is(sql("SELECT clustervec_gpu_warm('t_l2')"), 't', 'the new generation is mirrored');
is(sql("SELECT count(*) || ' ' || sum(n_seen) FROM cluster_health_observed('t_l2')"),
	($labels + 1) . ' 0', 'one row per label, nothing seen yet');

done_testing();
