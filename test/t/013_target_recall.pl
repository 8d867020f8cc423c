
# clustervec.target_recall: on two clustered data sets the scan reads the
# smallest probes whose calibrated recall@10 reaches the target, and on
# held-out queries (points not in the table) achieves at least the target
# minus 0.02; clustervec.max_probes caps it; cvivf_calibrate measures again
# after the data moved; a cvlattice index (its lists the rows' overlapping
# cluster labels) calibrated by cvivf_calibrate does the same for its
# unfiltered scans; the setting's range and the function's errors.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use CvTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $queries = 200;
my $node = cv_new_node('target_recall');

my %sets = (
	a => { rows => 8000, dims => 16, centres => 40, sigma => 6.0, seed => 0.125 },
	b => { rows => 8000, dims => 32, centres => 80, sigma => 9.0, seed => 0.375 },);

# The achieved recall@10 of the index on the held-out queries q_$set.
sub achieved_recall
{
	my ($set) = @_;
	my $exact = $node->safe_psql(
		'postgres', qq{
SET enable_indexscan = off; SET enable_bitmapscan = off;
DROP TABLE IF EXISTS exact_$set;
CREATE TABLE exact_$set AS SELECT q.qid,
	(SELECT max(d) FROM (SELECT t.v <-> q.v AS d FROM t_$set t ORDER BY 1 LIMIT 10) x) AS kth
	FROM q_$set q;
});
	my $hits = $node->safe_psql(
		'postgres', qq{
SET enable_seqscan = off;
SET clustervec.iterative_scan = off;
SELECT sum(h) FROM q_$set q JOIN exact_$set e USING (qid) CROSS JOIN LATERAL (
	SELECT count(*) FILTER (WHERE d <= e.kth + 1e-9) AS h
	FROM (SELECT t.v <-> q.v AS d FROM t_$set t ORDER BY t.v <-> q.v LIMIT 10) x) r;
});
	return $hits / (10 * $queries);
}

for my $set (sort keys %sets)
{
	my %o = %{ $sets{$set} };
	cv_load_clustered($node, "t_$set", %o);
	$node->safe_psql(
		'postgres', qq{
CREATE TABLE q_$set (qid int PRIMARY KEY, v cvec($o{dims}));
SELECT setseed(0.9);
INSERT INTO q_$set SELECT i, cv_point((i * 7 % $o{centres})::int, $o{dims}, $o{sigma})
	FROM generate_series(1, $queries) i;
CREATE INDEX t_${set}_idx ON t_$set USING cvivf (v) WITH (lists = 80, seed = 3);
});
	is($node->safe_psql('postgres',
		"SELECT DISTINCT source FROM cvivf_calibration('t_${set}_idx')"),
		'build', "$set: the build stored a calibration");

	for my $target (0.9, 0.95)
	{
		my ($probes, $below) = split /\|/, $node->safe_psql(
			'postgres', qq{
SELECT min(probes) FILTER (WHERE recall >= ${target}::float4),
       coalesce(max(recall) FILTER (WHERE recall < ${target}::float4), 0)
FROM cvivf_calibration('t_${set}_idx')});
		cmp_ok($below, '<', $target,
			"$set $target: fewer probes than $probes are below the target on the calibration");
		is($node->safe_psql('postgres',
			"SET clustervec.target_recall = $target; SELECT probes FROM cvivf_recall('t_${set}_idx', 5)"),
			$probes, "$set $target: the scan reads the calibrated $probes probes");
		my $recall = achieved_recall($set);
		$node->safe_psql('postgres', "ALTER DATABASE postgres SET clustervec.target_recall = $target");
		my $with_target = achieved_recall($set);
		$node->safe_psql('postgres', "ALTER DATABASE postgres RESET clustervec.target_recall");
		note sprintf("%s target %.2f: probes %d, held-out recall\@10 %.4f (clustervec.probes = 10: %.4f)",
			$set, $target, $probes, $with_target, $recall);
		cmp_ok($with_target, '>=', $target - 0.02,
			"$set $target: held-out recall within 0.02 of the target or above it");
	}
	is($node->safe_psql('postgres',
		"SET clustervec.target_recall = 0.95; SET clustervec.max_probes = 2; SELECT probes FROM cvivf_recall('t_${set}_idx', 5)"),
		'2', "$set: clustervec.max_probes caps the calibrated probes");
}

# the data moves: new clusters far from the old ones, then a new calibration
my $before = $node->safe_psql('postgres',
	"SELECT string_agg(probes || ':' || recall, ',' ORDER BY probes) FROM cvivf_calibration('t_a_idx')");
$node->safe_psql(
	'postgres', qq{
SELECT setseed(0.5);
INSERT INTO t_a (id, c, v) SELECT 100000 + i, 1000 + i % 20, cv_point(1000 + i % 20, 16, 6.0)
	FROM generate_series(1, 8000) i;
});
my $after = $node->safe_psql('postgres',
	"SELECT string_agg(probes || ':' || recall, ',' ORDER BY probes) FROM cvivf_calibrate('t_a_idx')");
isnt($after, $before, 'cvivf_calibrate changes the calibration after the data moved');
is($node->safe_psql('postgres', "SELECT DISTINCT source FROM cvivf_calibration('t_a_idx')"),
	'rows', 'the stored calibration is the new one');
note "calibration before: $before";
note "calibration after:  $after";

# cvlattice over set b's cluster labels (80 overlapping clusters): no
# calibration until cvivf_calibrate, then the same guarantee
$node->safe_psql('postgres',
	'CREATE INDEX t_b_lattice ON t_b USING cvlattice (v, c); DROP INDEX t_b_idx');
is($node->safe_psql('postgres', "SELECT count(*) FROM cvivf_calibration('t_b_lattice')"),
	'0', 'cvlattice: the build stores no calibration');
my ($rc, $out, $err) = $node->psql('postgres',
	"SET clustervec.target_recall = 0.9; SELECT probes FROM cvivf_recall('t_b_lattice', 5)");
like($err, qr/has no recall calibration/, 'cvlattice: an uncalibrated index says so');
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM cvivf_calibrate('t_b_lattice')"),
	'>', 1, 'cvlattice: cvivf_calibrate measures it');
for my $target (0.9, 0.95)
{
	my $probes = $node->safe_psql('postgres', qq{
SELECT min(probes) FILTER (WHERE recall >= ${target}::float4) FROM cvivf_calibration('t_b_lattice')});
	is($node->safe_psql('postgres',
		"SET clustervec.target_recall = $target; SELECT probes FROM cvivf_recall('t_b_lattice', 5)"),
		$probes, "cvlattice $target: the scan reads the calibrated $probes probes");
	my $plain = achieved_recall('b');
	$node->safe_psql('postgres', "ALTER DATABASE postgres SET clustervec.target_recall = $target");
	my $with_target = achieved_recall('b');
	$node->safe_psql('postgres', "ALTER DATABASE postgres RESET clustervec.target_recall");
	note sprintf("cvlattice target %.2f: probes %d, held-out recall\@10 %.4f (clustervec.probes = 10: %.4f)",
		$target, $probes, $with_target, $plain);
	cmp_ok($with_target, '>=', $target - 0.02,
		"cvlattice $target: held-out recall within 0.02 of the target or above it");
}

# errors
($rc, $out, $err) = $node->psql('postgres', "LOAD 'clustervec'; SET clustervec.target_recall = 1");
like($err, qr/invalid value for parameter "clustervec.target_recall"/, 'target_recall 1 is refused');
($rc, $out, $err) = $node->psql('postgres', "LOAD 'clustervec'; SET clustervec.target_recall = -0.1");
like($err, qr/clustervec.target_recall/, 'a negative target_recall is refused');
($rc, $out, $err) = $node->psql('postgres', "SELECT * FROM cvivf_calibrate('t_a_pkey')");
like($err, qr/not a cvivf index|cvivf/, 'cvivf_calibrate refuses a btree index');
note $err;

done_testing();
